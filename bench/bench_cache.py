"""The Transformer's key/value cache: beam search with the cached step of ``nmt_lib.models.transformer``
against the same search recomputing the decoder over the whole prefix at every step, side by side
in one process, at the compare study's Transformer-50 sizes (random weights).

    python bench/bench_cache.py                     # 64 sentences, beam 10, 10/30/60 target words
    python bench/bench_cache.py --precision bf16

The workload is bench_search.py's: sources of 15-30 words (+ EOS), one batch, and exactly
``--lengths`` target words per sentence (``search.length_limits`` replaced), so that both searches
do the same work whatever the weights; both must return the same translations. Without the cache,
step ``i`` computes ``i`` positions: the work grows with the square of the length. Not a test.
"""

from __future__ import annotations

import argparse
import json
from functools import partial

import torch
from bench_search import sources
from common import autocast, fixed_length, machine_info, median, setup_threads, timed
from torch.nn import functional as F

from nmt_lib.config import model_config
from nmt_lib.data import pad
from nmt_lib.models import build_model
from nmt_lib.paper.steps import Steps
from nmt_lib.search import beam_search

#: nmt_lib/profiles/studies/compare.toml's Transformer-50
SIZES = dict(src_vocab=10000, trg_vocab=10000, m=128, layers=3, heads=4, ff=512)


class PrefixSteps(Steps):
    """The step without a cache: the state is the words so far, and each readout runs
    ``Transformer.decode`` over all of them."""

    def start(self, enc) -> tuple:
        B = enc.mask.shape[0]
        return torch.zeros(B, 0, dtype=torch.long, device=enc.mask.device), None

    def readout(self, enc, state: tuple) -> tuple:
        prefix, y_prev = state
        if y_prev is not None:
            prefix = torch.cat([prefix, y_prev[:, None]], 1)
        R, B = prefix.shape[0], enc.mask.shape[0]
        if R > B:  # G consecutive rows per sentence
            enc = enc.select(torch.arange(B, device=prefix.device).repeat_interleave(R // B))
        logits, a = self.model.decode(enc, prefix)
        return F.log_softmax(logits[:, -1].float(), -1), a[:, -1], (prefix,)

    def advance(self, carry: tuple, y: torch.Tensor) -> tuple:
        return carry[0], y


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--sentences", type=int, default=64)
    ap.add_argument("--beam", type=int, default=10)
    ap.add_argument("--lengths", type=int, nargs="+", default=[10, 30, 60])
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json")
    args = ap.parse_args()
    setup_threads(args.threads)
    info = machine_info()
    print("machine:", json.dumps(info))
    cfg = model_config(arch="Transformer", **SIZES)
    model = build_model(cfg).eval()
    x, x_mask = pad(sources(cfg, args.sentences))
    searches = {"cached": model.steps(), "prefix": PrefixSteps(model)}
    rows = []
    for n in args.lengths:
        times, hyps = {k: [] for k in searches}, {}
        with torch.no_grad(), autocast(args.precision), fixed_length(n):
            for _ in range(args.reps):
                for k, steps in searches.items():
                    run = partial(
                        beam_search, model, x, x_mask, beam=args.beam, normalize=True, steps=steps
                    )
                    hyps[k], t, _ = timed(run)
                    times[k].append(t)
        same = sum(
            a.tokens == b.tokens for a, b in zip(hyps["cached"], hyps["prefix"], strict=True)
        )
        row = {"target words": n} | {f"{k} s": round(median(v), 2) for k, v in times.items()}
        row["speed-up"] = round(row["prefix s"] / row["cached s"], 1)
        row["same translations"] = f"{same}/{args.sentences}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(
        f"\n{args.sentences} sentences, beam {args.beam}, {args.precision}, "
        f"{args.threads} thread(s)\n"
    )
    print("| target words | cached (s) | prefix recomputed (s) | speed-up | same translations |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['target words']} | {r['cached s']} | {r['prefix s']} | {r['speed-up']} | "
            f"{r['same translations']} |"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "settings": vars(args), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
