"""Runs of a GPU profile (``gpu``, or ``studies/compare-gpu.toml``) trained from a pack (``python -m
nmt_lib pack``) and evaluated, into a results directory with its manifest: what is committed as
``results/gpu/`` when a GPU machine is lent for a few minutes.

    python -m nmt_lib pack --profile gpu --run RNNsearch-50 pack/        # where the data is
    python bench/gpu_reference.py --pack pack/ --minutes 4 --out results/gpu \\
        --commit "$(git rev-parse HEAD)"                                  # on the GPU machine
    python bench/gpu_reference.py --pack pack/ --out results/gpu/compare \\
        --profile nmt_lib/profiles/studies/compare-gpu.toml --run RNNsearch-50 Transformer-50
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nmt_experiments.replicate import replication as replicate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pack", required=True, help="a directory written by `python -m nmt_lib pack`")
    ap.add_argument(
        "--minutes",
        type=float,
        help="training budget of each run (train.max_hours; default: the profile's)",
    )
    ap.add_argument("--out", required=True, help="results directory to write")
    ap.add_argument(
        "--run",
        nargs="+",
        default=["RNNsearch-50"],
        help="the profile's runs, one after the other (default RNNsearch-50)",
    )
    ap.add_argument("--profile", default="gpu", help="a profile name or TOML path (default gpu)")
    ap.add_argument("--commit", help="the commit of this tree, when it travels without .git")
    a = ap.parse_args(argv)
    train = {"max_hours": a.minutes / 60} if a.minutes else {}
    prof = replicate.load(a.profile, runs=a.run, data={"packed": a.pack}, train=train)
    git = {"commit": a.commit, "dirty": None} if a.commit else None
    walls = replicate.replicate_profile(prof, a.out, jobs=1, git=git)
    for name in a.run:
        print(f"[gpu_reference] {name}: {walls[name]} -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
