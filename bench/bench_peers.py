"""nmt_lib on the peers' benchmark (``bench/README.md``, "Definitions"), in their naive script's log format, so
that their ``summarize.py`` puts it in the same table as JoeyNMT, OpenNMT-py and the naive script.

    P=$PEERS/peers-work   # $PEERS: the peers' scripts; data/ from gen_corpus.py, runs/
    python bench/bench_peers.py train  --data $P/data --ckpt $P/nmt_lib/model.pt   # 250 updates
    python bench/bench_peers.py decode --data $P/data --ckpt $P/nmt_lib/model.pt --beam 10 --out X.hyp

Run each through the peers' ``run_timed.py`` into ``$P/runs/nmt_lib/{train,greedy,beam10}-N.{log,json}``
(``bench/README.md``, "Side by side with the peers", has the exact commands). The same workload as
the peers: the synthetic corpus, 10,000 words + specials per side, bench-small sizes
(``common.SHAPES["small"]``), random batches of 64 sentences padded to the longest, 250 updates
timed from the update-50 line to the update-250 line; decoding the 500 test sentences in batches of
64 with exactly 30 target words each. What differs is the recipe, ours (the paper's): Adadelta
instead of Adam, the summed loss, EOS but no BOS, and the paper's batches
(``nmt_lib.data.TrainIterator``: 20 batches' worth of pairs at a time sorted by length, App. B.2;
OpenNMT-py sorts too), or ``--batching random`` as the naive script and JoeyNMT batch; bf16 autocast
where the CPU has bf16 instructions, else fp32 (``--precision auto``). Not a test.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch
from common import Trainee, autocast, fixed_length, model_config

from nmt_lib import decoding
from nmt_lib.config import SearchConfig
from nmt_lib.data import TrainIterator, TrainSet, pad
from nmt_lib.data.vocab import Vocab
from nmt_lib.fast import accelerate
from nmt_lib.paper.model import build_model
from nmt_lib.runtime import resolve_precision


def read(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()]


def vocab(sentences: list[list[str]], size: int) -> Vocab:
    return Vocab.build(Counter(w for s in sentences for w in s), size)


def ids(v: Vocab, sentences: list[list[str]]) -> list[list[int]]:
    return [[v.stoi.get(w, 1) for w in s] for s in sentences]


def random_batches(src, trg, size: int):
    """Batches of ``size`` pairs drawn without replacement, a new shuffle when too few are left."""
    order, pos = list(range(len(src))), len(src)
    while True:
        if pos + size > len(order):
            random.shuffle(order)
            pos = 0
        idx, pos = order[pos : pos + size], pos + size
        yield (*pad([src[i] for i in idx], add_eos=True), *pad([trg[i] for i in idx], add_eos=True))


def paper_batches(src, trg, size: int, seed: int, folder: Path):
    """nmt_lib's own batches (``TrainIterator``, 20 batches sorted by length at a time) over the
    pairs, written to ``folder`` as ``nmt_lib.data.prepare`` writes a training set."""
    for name, sents in (("src", src), ("trg", trg)):
        np.save(folder / f"{name}.ids.npy", np.array([w for s in sents for w in s], np.int64))
        np.save(folder / f"{name}.offsets.npy", np.cumsum([0] + [len(s) for s in sents]))
    for b in TrainIterator(TrainSet(folder), size, 20, seed):
        yield b.x, b.x_mask, b.y, b.y_mask


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", choices=["train", "decode"])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--ckpt", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=250)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--beam", type=int, default=10, help="0 = greedy")
    ap.add_argument("--length", type=int, default=30, help="target words per decoded sentence")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--precision",
        default="auto",
        choices=["auto", "bf16", "fp32"],
        help="auto: bf16 where the CPU multiplies bf16 in hardware, else fp32",
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batching", default="paper", choices=["paper", "random"])
    args = ap.parse_args()
    t_start = time.perf_counter()
    torch.set_num_threads(args.threads)
    args.precision = resolve_precision(args.precision, torch.device("cpu"))
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    cfg = model_config("small", "RNNsearch")
    src_train, trg_train = read(args.data / "train.src"), read(args.data / "train.trg")
    sv, tv = vocab(src_train, cfg.src_vocab - 3), vocab(trg_train, cfg.trg_vocab - 3)
    model = accelerate(build_model(cfg))
    result = {
        "tool": "nmt_lib",
        "mode": args.mode,
        "threads": torch.get_num_threads(),
        "precision": args.precision,
        "torch": torch.__version__,
    }
    if args.mode == "train":
        trainee = Trainee("nmt_lib", cfg, model, False, args.precision)
        src, trg = ids(sv, src_train), ids(tv, trg_train)
        if args.batching == "paper":
            tmp = tempfile.TemporaryDirectory()  # removed when the process ends
            batches = paper_batches(src, trg, args.batch, args.seed, Path(tmp.name))
        else:
            batches = random_batches(src, trg, args.batch)
        print(f"setup done {time.perf_counter() - t_start:.3f} s", flush=True)
        t_warm, tokens, sentences = None, 0, 0
        for step, batch in zip(range(1, args.steps + 1), batches, strict=False):
            loss = trainee.step(batch)
            n = int(batch[3].sum())  # target tokens incl. EOS
            if step > args.warmup:
                tokens, sentences = tokens + n, sentences + len(batch[0])
            if step == args.warmup:
                t_warm = time.perf_counter()
            if step % 50 == 0:
                t = time.perf_counter() - t_start  # the peers' format: "step N loss/tok L t=T"
                print(f"step {step} loss/tok {loss / n:.3f} t={t:.3f}", flush=True)
        dt = time.perf_counter() - t_warm
        args.ckpt.parent.mkdir(parents=True, exist_ok=True)
        torch.save(model.state_dict(), args.ckpt)
        result.update(
            batching=args.batching,
            steps_timed=args.steps - args.warmup,
            seconds=dt,
            trg_tokens_incl_eos=tokens,
            sents=sentences,
            tok_per_s_incl_eos=tokens / dt,
            tok_per_s_words=(tokens - sentences) / dt,
        )
    else:
        model.load_state_dict(torch.load(args.ckpt, weights_only=True))
        model.eval()
        xs = [s + [2] for s in ids(sv, read(args.data / "test.src"))]

        print(f"setup done {time.perf_counter() - t_start:.3f} s", flush=True)
        t0 = time.perf_counter()
        with torch.no_grad(), autocast(args.precision), fixed_length(args.length):
            hyps = decoding.decode(
                model,
                xs,
                SearchConfig(beam=max(args.beam, 1), batch_size=args.batch),
                greedy=args.beam == 0,
            )
        dt = time.perf_counter() - t0
        if args.out:
            args.out.write_text(
                "".join(" ".join(tv.itos[w] for w in h.words()) + "\n" for h in hyps)
            )
        result.update(beam=args.beam, sents=len(hyps), seconds=dt, sent_per_s=len(hyps) / dt)
    result["vmhwm_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
