"""Training, evaluation and decoding give the same bytes as on the tree before issue 62's refactor
(evaluation in modules of one job, beam search with named state, the translate path's config
objects): the smoke profile's RNNsearch-50 trained for 30 updates on the toy corpus, evaluated
(:func:`nmt_lib.evaluate.evaluate_run`) and translating through the command line, each result's
sha256 against the one recorded on the unchanged tree.

The digests were recorded by running :func:`results` on the tree of commit 264edcc (before the
refactor) with ``OMP_NUM_THREADS=1``, on the machine and PyTorch that :data:`MACHINE` names:
floating-point results depend on the CPU (the fast kernels are compiled with ``-march=native``)
and on PyTorch's kernels, so elsewhere the test skips, saying so. Wall times (``bleu.json``'s
``seconds``, the log's timings) and paths (``checkpoint``) are left out of what is hashed.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nmt_lib.__main__ import main
from nmt_lib.checkpoint import load_checkpoint
from nmt_lib.data import fixtures
from nmt_lib.evaluate import evaluate_run
from nmt_lib.fast.kernels import _cpu_id
from nmt_lib.train import train_run

#: ``{machine: {result: sha256}}``, recorded on the unchanged tree (module docstring).
EXPECTED: dict[str, dict[str, str]] = {
    "3dd8a7e9748a8366": {  # this project's 2-core x86-64 machine, torch 2.13.0+cpu
        "weights": "c319ac91d39b585b6f4dbf142c7acccc8b17feada0946060f755d6315a9408a9",
        "train_log": "6e680d726b48176d1fb3bb904fbe88e54f2eca6974fef40870ecaaa098b950cd",
        "hyp.test.tok.txt": "bfbd3b38e4f67ccd23266229036c0dea47bd2014fbe277761e962cf344fca801",
        "hyp.test.detok.txt": "cb3e04a60756464104d145c088e95cfc79b61eb025c309de4af3682ebca56a10",
        "hyp.test.no_unk.tok.txt": "bfbd3b38e4f67ccd23266229036c0dea47bd2014fbe277761e962cf344fca801",
        "hyp.test.unk_replaced.tok.txt": "bfbd3b38e4f67ccd23266229036c0dea47bd2014fbe277761e962cf344fca801",
        "bleu_by_length.json": "0495e7b237d218f0bad86f847e7624043bf2c67adff85eb945a62a00dc985e2b",
        "nll.json": "a4c0ca12b17722388716bd2fe93a3f99d7b15c12d6cc23f17b7f6dc48b74019f",
        "attention.json": "410fb85d45af9dd8ad26126263909655a8f656a7dca10aab5a75b4dd178173a9",
        "bleu.json": "8fd528ea5f9249e74390c2dd4847c3f2b5bc770533eaef6472890a6ec786ade0",
        "translate0": "9a9de5a5d9fe12b2dfc8a77c36d16e4b06269b8538ca057c48e12314b208763c",
        "translate1": "e557bc2c380b3218f1ff611b4db660880255c0bfcc2495ce5d4cedbb74aa2f39",
        "translate2": "8fa49e62b9d9909acc47c69521aec16e1c3318dd1ae9c6f24a65afb8980b9d9c",
    },
}

FILES = (
    "hyp.test.tok.txt",
    "hyp.test.detok.txt",
    "hyp.test.no_unk.tok.txt",
    "hyp.test.unk_replaced.tok.txt",
    "bleu_by_length.json",
    "nll.json",
    "attention.json",
)
TIMES = ("seconds", "checkpoint")  # wall time and a path: not results


def machine() -> str:
    """The CPU (as ``-march=native`` sees it) and PyTorch's version, hashed."""
    return hashlib.sha256(_cpu_id() + torch.__version__.encode()).hexdigest()[:16]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def results(root: Path, capsys) -> dict[str, str]:
    """Train, evaluate and translate under ``root``; the sha256 of each result."""
    cfg, prep = fixtures.toy_run(root, run="RNNsearch-50", eval_every=3, dev_bleu_sentences=10)
    cfg = replace(cfg, train=replace(cfg.train, max_updates=30))
    out = root / "runs" / "RNNsearch-50"
    ckpt = Path(train_run(cfg, out, prep, progress=False)["checkpoint_dir"])
    got = {}
    weights = load_checkpoint(ckpt / "last.pt")["model"]
    got["weights"] = sha(b"".join(w.contiguous().numpy().tobytes() for w in weights.values()))
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    evals = [(r.get("dev_nll"), r.get("dev_bleu"), r.get("loss")) for r in log]
    got["train_log"] = sha(json.dumps(evals).encode())
    found = " ".join(prep.test.src_tok[0])  # a Figure 3 source found in the test set
    evaluate_run(
        cfg,
        out,
        prep,
        checkpoint=ckpt,
        nll_sentences=20,
        figure_sources=("the cat sleeps .", found),
        progress=False,
    )
    for name in FILES:
        got[name] = sha((out / name).read_bytes())
    bleu = json.loads((out / "bleu.json").read_text())
    got["bleu.json"] = sha(json.dumps({k: v for k, v in bleu.items() if k not in TIMES}).encode())
    src = root / "in.txt"
    src.write_text("\n".join([*prep.test.src_raw[:6], "", "the cat sleeps ."]) + "\n")
    sel = [
        "translate",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50",
        "--checkpoint",
        str(ckpt),
        "--data-dir",
        str(root / "wmt"),
        "-i",
        str(src),
    ]
    capsys.readouterr()
    for k, extra in enumerate(
        ([], ["--alignment", "--replace-unk"], ["--beam", "2", "--normalize", "--ignore-unk"])
    ):
        assert main([*sel, *extra]) == 0
        got[f"translate{k}"] = sha(capsys.readouterr().out.encode())
    return got


def test_training_evaluation_and_decoding_give_the_bytes_of_before(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    want = EXPECTED.get(machine())
    got = results(tmp_path, capsys)
    if want is None:
        pytest.skip(f"no digests recorded for machine {machine()} (module docstring): {got}")
    assert got == want
