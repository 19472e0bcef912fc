#!/usr/bin/env python3
"""The project's two commands, runnable with nothing but Python 3.11 installed.

    python3 tasks.py main    # every notebook on the committed results (report mode), then the book
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
#: The profile whose results are committed and which the main command reports.
DEFAULT_PROFILE = "lite"


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


def main_job(profile: str) -> None:
    """Run every notebook in report mode on ``results/<profile>/``, then build the book strictly."""
    _run(PY, ROOT / "tools" / "notebooks.py", "--profile", profile)
    _run(VENV / "bin" / "jupyter-book", "build", "-W", "-n", "--keep-going", "book")
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
    m = sub.add_parser("main", help="notebooks on the committed results, then the book")
    m.add_argument("--profile", default=DEFAULT_PROFILE, help=f"default: {DEFAULT_PROFILE}")
    t = sub.add_parser("test", help="ruff + pytest (incl. smoke replication and the book build)")
    t.add_argument("pytest_args", nargs="*", help="passed to pytest, e.g. -k gru")
    args = ap.parse_args()
    t0 = time.time()
    os.chdir(ROOT)
    try:
        ensure_venv()
        if args.cmd == "main":
            main_job(args.profile)
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
