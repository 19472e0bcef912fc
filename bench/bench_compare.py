"""Training throughput of every model of a comparison, side by side with RNNsearch's, in one run.

    OMP_NUM_THREADS=1 python bench/bench_compare.py --threads 1       # studies/multi30k.toml
    python bench/bench_compare.py --profile nmt_lib/profiles/studies/compare.toml --lengths 5 50

The models are the seed-1 runs of the profile (``<model>-s1``; default the Multi30k study's), and
Luong's general score without input feeding (``-no-feed``: its decoder LSTM over the whole sequence),
each with its sizes and its recipe (optimizer, dropout, label smoothing) on its backend, in fp32: what
``nmt_lib.train.Trainer.step`` does in training (forward, loss, backward, clip, update), on the same
synthetic batches (:func:`common.synthetic_batches`: ``--batch`` pairs of ``--lengths`` words, the
default Multi30k's range around its mean of 13), the models taking turns batch by batch so that all
see the same load on a shared machine. Throughput = real target tokens (EOS included, padding
excluded) / wall time, summed over the timed passes; the ratio is against RNNsearch's in the same
run. Not a test: nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch
from common import machine_info, setup_threads, synthetic_batches

from nmt_lib.backend import backend
from nmt_lib.config import PROFILE_DIR, load_profile
from nmt_lib.data import Batch
from nmt_lib.models import build_model
from nmt_lib.trainer import Trainer

PROFILE = PROFILE_DIR / "studies" / "multi30k.toml"


class Cycle:
    """The batches over and over, as a training iterator yields them."""

    epoch = 0.0

    def __init__(self, batches):
        self.batches, self.i = batches, 0

    def __next__(self) -> Batch:
        b = self.batches[self.i % len(self.batches)]
        self.i += 1
        return Batch(*b)


def trainers(profile, batches) -> dict[str, Trainer]:
    """``{model: its Trainer}`` for the seed-1 run of every model of ``profile``, in fp32."""
    out = {}
    for name, run in load_profile(profile, train={"precision": "fp32"}).runs.items():
        if not name.endswith("-s1"):
            continue
        on = backend(run.train.backend)
        on.tune_process()
        torch.manual_seed(run.train.seed)
        model = build_model(run.model, on)
        out[name.removesuffix("-s1")] = Trainer(run, model, Cycle(batches), "cpu", on=on)
        if run.model.arch == "Luong" and run.model.input_feed and run.model.score == "general":
            # the same model without input feeding: its decoder over the whole sequence
            plain = dataclasses.replace(run, model=dataclasses.replace(run.model, input_feed=False))
            torch.manual_seed(run.train.seed)
            model = build_model(plain.model, on)
            out[f"{name.removesuffix('-s1')}-no-feed"] = Trainer(
                plain, model, Cycle(batches), "cpu", on=on
            )
    return out


def bench(profile, batch: int, lengths: tuple[int, int], steps: int, reps: int) -> list[dict]:
    """Each model's training tok/s and its ratio to RNNsearch's (module docstring)."""
    some = next(iter(load_profile(profile).runs.values()))
    batches = synthetic_batches(some.model, batch, lengths, steps, seed=1)
    runs = trainers(profile, batches)
    for tr in runs.values():  # warm-up: first-call allocations, every batch shape's kernels
        for _ in batches:
            tr.step()
    names = list(runs)
    wall, tokens = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0)
    for rep in range(reps):
        for k in range(steps):
            order = names if (k + rep) % 2 == 0 else names[::-1]  # cancel drift
            for name in order:
                t0 = time.perf_counter()
                s = runs[name].step()
                wall[name] += time.perf_counter() - t0
                tokens[name] += s["tokens"]
    base = tokens["RNNsearch-50"] / wall["RNNsearch-50"]
    return [
        {
            "model": n,
            "arch": runs[n].cfg.model.arch,
            "tok/s": round(tokens[n] / wall[n]),
            "x RNNsearch": round(tokens[n] / wall[n] / base, 2),
        }
        for n in names
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--profile", type=Path, default=PROFILE)
    ap.add_argument("--batch", type=int, default=80)
    ap.add_argument("--lengths", type=int, nargs=2, default=(8, 18), help="words, min and max")
    ap.add_argument("--steps", type=int, default=4, help="distinct batches")
    ap.add_argument("--reps", type=int, default=2, help="timed passes over the batches")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args(argv)
    setup_threads(a.threads)
    rows = bench(a.profile, a.batch, tuple(a.lengths), a.steps, a.reps)
    print(f"{'model':<22} {'arch':<12} {'tok/s':>7} {'x RNNsearch':>11}")
    for r in rows:
        print(f"{r['model']:<22} {r['arch']:<12} {r['tok/s']:>7} {r['x RNNsearch']:>11.2f}")
    if a.json:
        result = {
            "machine": machine_info(),
            "args": {**vars(a), "profile": str(a.profile)},
            "rows": rows,
        }
        Path(a.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
