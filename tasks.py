#!/usr/bin/env python3
"""The project's two commands, runnable with nothing but Python 3.11 installed.

    python3 tasks.py main    # the book: `jupyter-book build -W -n --keep-going book`
    python3 tasks.py test    # ruff, then pytest (which also runs the smoke replication and the book)

Both create the virtual environment ``.venv`` on first use and reuse it afterwards: it is reinstalled
only when ``pyproject.toml`` or ``requirements-lock.txt`` change (their hash is kept in a stamp file).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".nmt-installed"
LOCK_INPUTS = ("pyproject.toml", "requirements-lock.txt")
#: The strict build of the book: Jupyter Book executes the chapters (notebooks/, jupytext) on the
#: committed `lite` results, caching each chapter's outputs until its code changes (_config.yml).
BUILD = ("build", "-W", "-n", "--keep-going", "book")
#: What the chapters read besides their own code, which Jupyter Book's cache does not know about.
CHAPTER_INPUTS = ("nmt_lib", "nmt_experiments", "results")
INPUTS_STAMP = ROOT / "book" / "_build" / ".chapter-inputs"


def _say(msg: str) -> None:
    print(f"[tasks] {msg}", flush=True)


def _run(*cmd, **kw) -> None:
    _say(" ".join(str(c) for c in cmd))
    subprocess.run([str(c) for c in cmd], cwd=ROOT, check=True, **kw)


def ensure_venv() -> None:
    """Create ``.venv`` and install the project with its pinned dependencies, once."""
    want = hashlib.sha256(b"".join((ROOT / f).read_bytes() for f in LOCK_INPUTS)).hexdigest()
    if STAMP.exists() and STAMP.read_text().strip() == want and PY.exists():
        _say("reusing .venv (dependencies unchanged)")
        return
    t0 = time.time()
    if sys.version_info[:2] != (3, 11):
        sys.exit(
            f"[tasks] Python 3.11 is required to create .venv, this is {sys.version.split()[0]}"
        )
    if not PY.exists():
        _say("creating .venv")
        venv.EnvBuilder(with_pip=True).create(VENV)
    pip = [PY, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    _run(*pip, "-c", "requirements-lock.txt", "-e", ".[dev]")
    STAMP.write_text(want + "\n")
    _say(f"environment ready in {time.time() - t0:.0f} s")


def _chapter_inputs() -> str:
    """A hash of the library and the results (names, sizes, modification times)."""
    h = hashlib.sha256()
    for top in CHAPTER_INPUTS:
        for p in sorted((ROOT / top).rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                st = p.stat()
                h.update(f"{p.relative_to(ROOT)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def main_job() -> None:
    """Build the book strictly: what ``jupyter-book build book`` does, warnings as errors. Jupyter
    Book re-executes a chapter when its code changes; when the library or the results changed
    since the last build, its cache of executed chapters is cleared first."""
    inputs = _chapter_inputs()
    last = INPUTS_STAMP.read_text().strip() if INPUTS_STAMP.is_file() else None
    if last != inputs and (ROOT / "book" / "_build" / ".jupyter_cache").exists():
        _say(
            "nmt_lib/, nmt_experiments/ or results/ changed since the last build: the chapters run again"
        )
        _run(VENV / "bin" / "jupyter-book", "clean", "--all", "book")
    _run(VENV / "bin" / "jupyter-book", *BUILD)
    INPUTS_STAMP.write_text(inputs + "\n")
    _say(f"book: {ROOT / 'book/_build/html/index.html'}")


def test_job(pytest_args: list[str]) -> int:
    """ruff (lint + format check), then the whole pytest suite; returns pytest's exit code."""
    _run(VENV / "bin" / "ruff", "check", ".")
    _run(VENV / "bin" / "ruff", "format", "--check", ".")
    # pytest runs last and prints nothing after it: its summary line closes the output (CI reads it)
    _say("pytest " + " ".join(pytest_args))
    return subprocess.run([PY, "-m", "pytest", *pytest_args], cwd=ROOT).returncode


def cli() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("main", help="the book, its chapters executed on the committed results")
    t = sub.add_parser("test", help="ruff + pytest (incl. smoke replication and the book build)")
    t.add_argument("pytest_args", nargs="*", help="passed to pytest, e.g. -k gru")
    args = ap.parse_args()
    t0 = time.time()
    os.chdir(ROOT)
    try:
        ensure_venv()
        if args.cmd == "main":
            main_job()
            code = 0
        else:
            code = test_job(args.pytest_args)
    except subprocess.CalledProcessError as e:
        _say(f"failed: {' '.join(map(str, e.cmd))} (exit {e.returncode})")
        code = e.returncode or 1
    if args.cmd == "main" or code != 0:
        _say(f"{args.cmd} finished in {time.time() - t0:.0f} s with exit code {code}")
    return code


if __name__ == "__main__":
    sys.exit(cli())
