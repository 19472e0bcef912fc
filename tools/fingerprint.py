#!/usr/bin/env python3
"""The sha256 of what training, evaluation and translation compute, to compare a refactor's tree with
the one before it on the same machine: ``python tools/fingerprint.py [--out digests.json]``.

A change meant to keep every result the same is checked by running this script on the tree before it
and on the tree after it, on the same machine and PyTorch, and comparing the two outputs (``diff``):
floating-point results depend on the CPU (the fast kernels are compiled with ``-march=native``) and
on PyTorch's kernels, so no digest is stored. With ``OMP_NUM_THREADS=1``, a few minutes on one core.

On the toy corpus (:func:`nmt_lib.data.fixtures.toy_run`), under a temporary directory:

* ``smoke``: the smoke profile's RNNsearch-50 trained to its end (1,000 updates, fast backend),
  evaluated (:func:`nmt_lib.evaluate.evaluate_run`: the hypothesis files, NLL, attention, BLEU) and
  translating through the command line (beam, alignments with ``<unk>`` replaced, a normalized
  beam of 2 without ``<unk>``);
* ``early``: RNNsearch-50* with early stopping and the plateau decay (evaluations every 50
  updates), trained in two sessions (resumed from its checkpoint), published
  (:func:`nmt_lib.publish.export`) and translating with the published weights;
* ``reference``: RNNencdec-30 on the reference backend with Adam and the loss per token, and its
  translations.

What is hashed: each run's parameters (the checkpoint's state dict, its tensors' bytes in key
order), its training log's records without wall times (``elapsed``, ``tokens_per_s``, ``eval_seconds``), the
results files (``bleu.json`` without ``seconds`` and ``checkpoint``) and the translations.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from contextlib import redirect_stdout
from dataclasses import replace
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's nmt_lib, also when another one is installed

from nmt_lib.__main__ import main as cli  # noqa: E402
from nmt_lib.checkpoint import load_checkpoint  # noqa: E402
from nmt_lib.config import run_dir_name  # noqa: E402
from nmt_lib.data import fixtures  # noqa: E402
from nmt_lib.evaluate import evaluate_run  # noqa: E402
from nmt_lib.publish import export  # noqa: E402
from nmt_lib.train import train_run  # noqa: E402

FILES = (
    "hyp.test.tok.txt",
    "hyp.test.detok.txt",
    "hyp.test.no_unk.tok.txt",
    "hyp.test.unk_replaced.tok.txt",
    "bleu_by_length.json",
    "nll.json",
    "attention.json",
)
WALL = (
    "elapsed",
    "tokens_per_s",
    "eval_seconds",
    "seconds",
    "checkpoint",
)  # wall times and paths: not results
OPTIONS = ([], ["--alignment", "--replace-unk"], ["--beam", "2", "--normalize", "--ignore-unk"])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def weights(ckpt: Path) -> str:
    state = load_checkpoint(ckpt)["model"]
    return sha(b"".join(state[k].contiguous().numpy().tobytes() for k in state))


def log(out: Path) -> str:
    recs = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    return sha(json.dumps([{k: v for k, v in r.items() if k not in WALL} for r in recs]).encode())


def translate(src: Path, run: str, *where: str) -> dict[str, str]:
    """The translations of ``src`` by ``run`` (``where``: ``--checkpoint``, ``--out``, ...)."""
    got = {}
    for k, extra in enumerate(OPTIONS):
        buf = StringIO()
        with redirect_stdout(buf):
            rc = cli(
                ["translate", "--profile", "smoke", "--run", run, *where, "-i", str(src), *extra]
            )
        got[f"translate{k}"] = sha(f"{rc}\n{buf.getvalue()}".encode())
    return got


def train(root: Path, run: str, sessions: tuple[int, ...], **settings) -> tuple:
    """``run`` trained under ``root`` in sessions ending at the updates ``sessions``."""
    cfg, prep = fixtures.toy_run(root, run=run, **settings)
    out = root / "runs" / run
    for end in sessions:
        cfg = replace(cfg, train=replace(cfg.train, max_updates=end))
        ckpt = Path(train_run(cfg, out, prep, progress=False)["checkpoint_dir"])
    return cfg, prep, out, ckpt


def fingerprint(root: Path) -> dict[str, dict[str, str]]:
    src = root / "in.txt"
    got: dict[str, dict[str, str]] = {}

    cfg, prep, out, ckpt = train(root / "smoke", "RNNsearch-50", (1000,))
    src.write_text("\n".join([*prep.test.src_raw[:8], "", "the cat sleeps ."]) + "\n")
    found = " ".join(prep.test.src_tok[0])  # a Figure 3 source found in the test set
    evaluate_run(cfg, out, prep, checkpoint=ckpt, nll_sentences=20,
                 figure_sources=("the cat sleeps .", found), progress=False)  # fmt: skip
    bleu = json.loads((out / "bleu.json").read_text())
    got["smoke"] = {
        "weights": weights(ckpt / "last.pt"),
        "train_log": log(out),
        **{name: sha((out / name).read_bytes()) for name in FILES},
        "bleu.json": sha(json.dumps({k: v for k, v in bleu.items() if k not in WALL}).encode()),
        **translate(
            src,
            "RNNsearch-50",
            "--checkpoint",
            str(ckpt),
            "--data-dir",
            str(root / "smoke" / "wmt"),
        ),
    }

    early = dict(eval_every=50, patience=2, lr_schedule="plateau", lr_decay=0.5)
    cfg, prep, out, ckpt = train(root / "early", "RNNsearch-50*", (300, 1500), **early)
    summary = json.loads((out / "train_summary.json").read_text())
    evaluate_run(cfg, out, prep, checkpoint=ckpt, nll_sentences=20, progress=False)
    pub = root / "early" / "published"
    export(ckpt, pub / run_dir_name(cfg.name), cfg, out, prep.test)
    got["early"] = {
        "weights": weights(ckpt / "last.pt"),
        "best": weights(ckpt / "best.pt"),
        "train_log": log(out),
        "stopped": f"{summary['stopped_by']} {summary['updates']} {summary['best_update']}",
        "model.safetensors": sha((pub / run_dir_name(cfg.name) / "model.safetensors").read_bytes()),
        "agreement.json": sha((pub / run_dir_name(cfg.name) / "agreement.json").read_bytes()),
        **translate(
            src, cfg.name, "--out", str(root / "early"), "--data-dir", str(root / "early" / "wmt")
        ),
    }

    ref = dict(eval_every=20, backend="reference", optimizer="adam", lr=0.01, loss="token")
    cfg, prep, out, ckpt = train(root / "reference", "RNNencdec-30", (60,), **ref)
    got["reference"] = {
        "weights": weights(ckpt / "last.pt"),
        "train_log": log(out),
        **translate(
            src, cfg.name, "--checkpoint", str(ckpt), "--data-dir", str(root / "reference" / "wmt")
        ),
    }
    return got


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/fingerprint.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--out", help="write the digests here (JSON) as well as to standard output")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fingerprint.") as tmp:
        os.environ["NMT_CACHE"] = str(Path(tmp) / "cache")  # checkpoints and caches in it
        got = fingerprint(Path(tmp))
    text = json.dumps(got, indent=1, sort_keys=True) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
