"""Memory of ``python -m nmt_lib translate`` against the length of its input: peak resident memory
of the process, when its first translation came out and when it ended, for inputs of ``--lines``
short lines (the toy corpus's English sentences over and over) translated with the committed smoke
model (``results/smoke/published/``). Not a test: it asserts nothing.

    .venv/bin/python bench/bench_translate.py [--lines 5000 50000 200000] [--json FILE]

``translate`` reads, translates and writes ``nmt_lib.__main__.CHUNK_LINES`` lines at a time, so its
peak memory should not grow with the input's length.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nmt_lib.data.fixtures import toy_data_dir


def measure(lines: int, tmp: Path) -> dict:
    """Translate ``lines`` lines in a child process; its peak RSS (MB) and clocks (s)."""
    sentences = (toy_data_dir() / "train" / "toy.en").read_text(encoding="utf-8").splitlines()
    src = tmp / f"in-{lines}.txt"
    with open(src, "w", encoding="utf-8") as f:
        f.writelines(sentences[k % len(sentences)] + "\n" for k in range(lines))
    env = {**os.environ, "NMT_CACHE": str(tmp / "empty-cache"), "OMP_NUM_THREADS": "1"}
    argv = [
        sys.executable,
        "-m",
        "nmt_lib",
        "translate",
        "--profile",
        "smoke",
        "--run",
        "RNNsearch-50*",
        "-i",
        str(src),
    ]
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
    child.stdout.readline()
    first = time.perf_counter() - t0
    n = 1 + sum(1 for _ in child.stdout)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return {
        "lines": lines,
        "output_lines": n,
        "exit": child.returncode,
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "first_output_s": round(first, 2),
        "total_s": round(time.perf_counter() - t0, 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, nargs="+", default=[5000, 50000, 200000])
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args(argv)
    out = []
    with tempfile.TemporaryDirectory(prefix="bench-translate-") as tmp:
        for n in a.lines:
            out.append(measure(n, Path(tmp)))
            print(json.dumps(out[-1]), flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
