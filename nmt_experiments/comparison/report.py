"""``python -m nmt_experiments.comparison`` writes the comparison's tables into its results directory
(``results/compare/``): ``comparison``, ``recipes`` and ``outputs`` (:mod:`.runs`) and ``claims``
(:mod:`.verdicts`), each as ``.csv`` and ``.md``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.markdown import write_table
from ..core.options import add_out
from .runs import OUTPUTS_NOTE, RESULTS, note, outputs, recipes, recipes_note, table
from .verdicts import claims


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m nmt_experiments.comparison", description=__doc__)
    add_out(ap, type=Path, default=RESULTS, help="default: results/compare")
    a = ap.parse_args(argv)
    out = a.out
    write_table(out, "comparison", table(out), note(out))
    write_table(out, "recipes", recipes(out), recipes_note(out))
    write_table(out, "claims", claims(out), note(out))
    write_table(out, "outputs", outputs(out), OUTPUTS_NOTE)
    print(f"[comparison] wrote comparison, recipes, claims and outputs into {out}")
    return 0
