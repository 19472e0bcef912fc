"""Benchmark of the data pipeline (not a test): preprocess N generated pairs, report pairs/s and
peak memory.

    python bench/bench_data.py                  # 1,000,000 toy pairs
    python bench/bench_data.py --pairs 200000 --workers 2

Phases: generate the toy corpus (nmt_lib.data.fixtures) in the WMT'14 layout; Moses-tokenize both sides
(nmt_lib.data.text, the cost that dominates on real data); build the train set (dev/test overlap, length
filter, vocabulary, numericalization to memory-mapped arrays); draw minibatches. Peak RSS is reported
for this process and for the tokenizer worker processes (``resource.getrusage``); it should not grow
with ``--pairs`` beyond the vocabulary tables.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from nmt_lib.config import DataConfig
from nmt_lib.data import TrainIterator, prepare, text
from nmt_lib.data.fixtures import write_toy_wmt


def peak_rss_mib() -> tuple[float, float]:
    """Peak resident memory of this process and of its (largest) child, in MiB (Linux: KiB units)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return own, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=1_000_000)
    ap.add_argument(
        "--workers", type=int, default=None, help="tokenizer processes (default: cores)"
    )
    ap.add_argument("--batches", type=int, default=2000)
    ap.add_argument("--dir", help="work directory (default: a temporary one, removed)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.dir or tmp)
        n = args.pairs
        t = time.perf_counter()
        root = write_toy_wmt(work / "wmt14", n_train=n)
        gen = time.perf_counter() - t
        cfg = DataConfig(
            data_dir=str(root),
            cache_dir=str(work / "cache"),
            train=("toy",),
            src_words=60,
            trg_words=60,
            max_len=12,
            batch_size=80,
            sort_k_batches=20,
        )
        t = time.perf_counter()
        for lang in ("en", "fr"):
            for _ in text.tokenized(
                root / f"train/toy.{lang}", lang, work / "cache/tok", args.workers
            ):
                pass
        tok = time.perf_counter() - t
        t = time.perf_counter()
        prep = prepare(cfg, workers=args.workers)
        build = time.perf_counter() - t
        it = TrainIterator.from_config(prep.train, cfg)
        t = time.perf_counter()
        for _ in range(args.batches):
            next(it)
        batches = time.perf_counter() - t
        own, child = peak_rss_mib()
        print(
            f"pairs {n:,}  kept {len(prep.train):,}  workers {args.workers or text.default_workers()}"
        )
        print(f"generate      {gen:8.1f} s  {n / gen:12,.0f} pairs/s")
        print(f"tokenize      {tok:8.1f} s  {n / tok:12,.0f} pairs/s  (both sides)")
        print(f"build         {build:8.1f} s  {n / build:12,.0f} pairs/s  (filter, vocab, ids)")
        print(f"minibatches   {batches:8.1f} s  {args.batches / batches:12,.0f} batches/s")
        print(f"peak RSS      {own:8.0f} MiB (main)  {child:.0f} MiB (largest tokenizer worker)")


if __name__ == "__main__":
    main()
