"""Decoding throughput: nmt_lib.search (GroundHog beam search, batched) against greedy and against the
straightforward batched beam search of bench/naive.py, in the same process.

    python bench/bench_search.py                       # bench-small RNNsearch, 500 sentences
    python bench/bench_search.py --precision bf16      # under bf16 autocast

The workload is the peers' (``bench/README.md``, "Definitions"): 500 source sentences of 15-30 words (+ EOS),
batches of 64 sentences, beam 10, and exactly 30 target words per sentence (EOS forbidden before
step 30, stop at 30: ``nmt_lib.search.length_limits`` is replaced by (30, 30) here), so that every
implementation does the same work whatever the weights (random here). Sentences/s = 500 / the time
of decoding all batches (the encoder included, model construction excluded), the median of
``--reps`` runs. ``decoding.decode`` decodes ``--workers`` batches at once (default: one per thread),
and is also timed one batch at a time (``workers=1``, all threads on each batch), as the naive
search is. Not a test.
"""

from __future__ import annotations

import argparse
import copy
import json

import torch
from common import (
    autocast,
    default_precisions,
    fixed_length,
    machine_info,
    median,
    model_config,
    setup_threads,
    timed,
)
from naive import naive_decode

from nmt_lib import decoding
from nmt_lib.config import SearchConfig
from nmt_lib.data import pad
from nmt_lib.fast import accelerate
from nmt_lib.paper.model import build_model


def sources(cfg, count: int, lengths=(15, 30), seed=7) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    L = torch.randint(lengths[0], lengths[1] + 1, (count,), generator=g).tolist()
    return [torch.randint(3, cfg.src_vocab, (n,), generator=g).tolist() + [2] for n in L]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--shape", default="small")
    ap.add_argument("--arch", default="RNNsearch")
    ap.add_argument("--precision", nargs="+", help="default: fp32, and bf16 where it is native")
    ap.add_argument("--sentences", type=int, default=500)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--beam", type=int, default=10)
    ap.add_argument("--length", type=int, default=30, help="target words per sentence")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--workers", type=int, help="decoding.decode's (default: --threads)")
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    setup_threads(args.threads)
    args.precision = args.precision or default_precisions(args.device)
    info = machine_info()
    print("machine:", json.dumps(info))
    cfg = model_config(args.shape, args.arch)
    model = accelerate(build_model(cfg)).eval().to(args.device)
    P = dict(copy.deepcopy(model).named_parameters())
    xs = sorted(sources(cfg, args.sentences), key=len, reverse=True)  # as decoding.decode batches
    batches = [
        tuple(t.to(args.device) for t in pad(xs[i : i + args.batch]))
        for i in range(0, len(xs), args.batch)
    ]

    def ours(beam, workers=args.workers):
        with fixed_length(args.length):
            return decoding.decode(
                model,
                xs,
                SearchConfig(beam=max(beam, 1), batch_size=args.batch),
                greedy=beam == 0,
                device=args.device,
                workers=workers,
            )

    def naive(beam):
        return [naive_decode(P, cfg, x, m, max(beam, 1), args.length) for x, m in batches]

    runs = {
        "nmt_lib beam": lambda: ours(args.beam),
        "nmt_lib greedy": lambda: ours(0),
        "nmt_lib beam 1 worker": lambda: ours(args.beam, 1),
    }
    if not args.no_naive:
        runs |= {"naive beam": lambda: naive(args.beam), "naive greedy": lambda: naive(1)}
    rows = []
    for prec in args.precision:
        times = {k: [] for k in runs}
        with torch.no_grad(), autocast(prec, args.device):
            hyps = ours(args.beam)  # warm-up, and check the workload
            assert all(len(h.tokens) == args.length for h in hyps), "not fixed-length outputs"
            for _ in range(args.reps):
                for k, f in runs.items():
                    times[k].append(timed(f)[1])
        row = {"precision": prec} | {
            f"{k} sent/s": args.sentences / median(v) for k, v in times.items()
        }
        row["beam speed-up from workers"] = (
            row["nmt_lib beam sent/s"] / row["nmt_lib beam 1 worker sent/s"]
        )
        if not args.no_naive:
            row["beam speed-up vs naive"] = row["nmt_lib beam sent/s"] / row["naive beam sent/s"]
            row["greedy speed-up vs naive"] = (
                row["nmt_lib greedy sent/s"] / row["naive greedy sent/s"]
            )
        rows.append(row)
        print(json.dumps(row))
    print(
        f"\n{args.sentences} sentences, batches of {args.batch}, {args.length} target words each, "
        f"{args.threads} threads, {args.workers or args.threads} decoding.decode workers"
    )
    print(
        "| precision | nmt_lib beam-10 sent/s | (1 worker) | nmt_lib greedy sent/s | naive beam-10 "
        "sent/s | naive greedy sent/s | beam speed-up | greedy speed-up |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    nan = float("nan")
    for r in rows:
        print(
            f"| {r['precision']} | {r['nmt_lib beam sent/s']:.1f} | "
            f"{r['nmt_lib beam 1 worker sent/s']:.1f} | {r['nmt_lib greedy sent/s']:.1f} | "
            f"{r.get('naive beam sent/s', nan):.1f} | {r.get('naive greedy sent/s', nan):.1f} | "
            f"{r.get('beam speed-up vs naive', nan):.2f} | "
            f"{r.get('greedy speed-up vs naive', nan):.2f} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            settings = {k: v for k, v in vars(args).items() if k != "json"}
            json.dump({"machine": info, "settings": settings, "search": rows}, f, indent=1)


if __name__ == "__main__":
    main()
