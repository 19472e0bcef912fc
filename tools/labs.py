#!/usr/bin/env python3
"""Write the labs' student notebooks: ``python tools/labs.py [--out labs]``.

Each lab (``notebooks/lab*_*.py``, the book's "Labs" part) becomes a notebook in which the
solution cells are replaced by skeletons for the student to fill in
(:mod:`nmt_experiments.pages.labs.student`). The default folder, ``labs/``, is ignored by git. Open the
notebooks in Jupyter with this environment's kernel (README, "Labs").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's nmt_experiments, also when not installed

from nmt_experiments.pages.labs.student import write_all  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/labs.py", description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "labs"), help="folder (default: labs/, ignored)")
    a = ap.parse_args(argv)
    for path in write_all(Path(a.out), ROOT):
        print(f"[labs] {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
