#!/usr/bin/env python3
"""Run the book's notebooks with other parameters: ``python tools/notebooks.py --profile NAME
[--train]``.

The book executes its chapters itself (``jupyter-book build book``: each ``notebooks/NN_name.py``
with its default parameters, report mode on the committed ``lite`` results). This script is for the
rest: another profile, a replication (``--train``), other directories. Each notebook source
(jupytext percent format, the only committed form) is converted to a notebook and executed by
papermill with the parameters ``profile``, ``train``, ``results_dir`` and ``data_dir``; the executed
notebooks go to ``book/_build/notebooks/<profile>/`` (``--out-dir``), to open in Jupyter; the
book does not read them.

* **report** (default): the derivation notebooks run their numeric checks; the experiment notebooks
  read the committed ``results/<profile>/`` and regenerate tables and figures from it. They stop with a
  clear error if it is missing; they never train because a file is missing.
* **replicate** (``--train``): the experiment notebooks train, decode and evaluate every model of the
  profile (:mod:`nmt_experiments.replicate`) and rewrite ``results/<profile>/`` (or ``--out``,
  e.g. a directory outside the repository, to leave the committed results as they are). The
  ``smoke`` profile's toy corpus is named by its path relative to the repository (the kernels run
  there), so that no results file records where this clone lives.

The kernel is this interpreter (``sys.executable``), registered under the name ``python3`` in a
temporary kernel directory that comes first on ``JUPYTER_PATH``. The notebooks are part of the
repository, not of the installed ``nmt_lib``: run this script from a checkout, with the interpreter
of its environment (``.venv/bin/python tools/notebooks.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import jupytext
import nbformat
import papermill
from papermill.exceptions import PapermillExecutionError

from nmt_experiments.core.options import add_out
from nmt_experiments.core.results import ResultsMissing, check_profile

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
OUT_DIR = ROOT / "book" / "_build" / "notebooks"  # then <profile>/
KERNEL = "python3"


class NotebookError(RuntimeError):
    """A notebook failed; the message names the notebook, the cell and the error."""


def notebooks(only: str | None = None) -> list[Path]:
    """The notebook sources in reading order, optionally those whose name contains ``only``."""
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.py"))
    if only:
        found = [p for p in found if only in p.stem]
        if not found:
            raise NotebookError(f"--only {only!r} matches no notebook in {NOTEBOOKS}")
    return found


def _register_kernel(tmp: Path) -> None:
    """A ``python3`` kernel spec for *this* interpreter, found before any other on JUPYTER_PATH."""
    spec = tmp / "kernels" / KERNEL
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    argv.append("--IPKernelApp.log_level=CRITICAL")  # not the TCP notice at every start
    kernel = {"argv": argv, "display_name": "Python 3 (nmt_lib)", "language": "python"}
    (spec / "kernel.json").write_text(json.dumps(kernel))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(tmp), os.environ.get("JUPYTER_PATH")])
    )


def _to_notebook(src: Path):
    """Read a jupytext percent file as a notebook, with the kernel set to :data:`KERNEL`."""
    nb = jupytext.read(src)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    nb.metadata.pop("jupytext", None)
    n_params = sum("parameters" in c.metadata.get("tags", []) for c in nb.cells)
    if n_params != 1:
        raise NotebookError(
            f"{src.name}: needs exactly one cell tagged 'parameters', has {n_params}"
        )
    return nb


def _toy_data_dir() -> str:
    """The smoke profile's toy corpus (written if missing), relative to the repository where it
    lies under it: the notebook kernels run in the repository (``cwd``), and a relative path keeps
    the clone's location out of the results' configs."""
    from nmt_lib.data.fixtures import toy_data_dir

    toy = toy_data_dir().resolve()
    return str(toy.relative_to(ROOT)) if toy.is_relative_to(ROOT) else str(toy)


def _show_injected(path: Path) -> None:
    """The executed notebook shows the parameters it actually ran with (papermill's injected cell)
    and tags the cell of defaults ``remove-cell``."""
    nb = nbformat.read(path, as_version=4)
    if any("injected-parameters" in c.metadata.get("tags", []) for c in nb.cells):
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if "parameters" in tags and "remove-cell" not in tags:
                cell.metadata["tags"] = [*tags, "remove-cell"]
    nbformat.write(nb, path)


def run_notebook(src: Path, out: Path, parameters: dict) -> None:
    """Execute one notebook source into ``out``; raise :class:`NotebookError` naming the cell."""
    nb = _to_notebook(src)
    try:
        papermill.execute_notebook(
            nb,
            str(out),
            parameters=parameters,
            kernel_name=KERNEL,
            cwd=str(ROOT),
            progress_bar=False,
            request_save_on_cell_execute=False,
        )
    except PapermillExecutionError as e:
        first = next((line for line in e.source.splitlines() if line.strip()), "")
        raise NotebookError(
            f"notebook {src.name} failed in code cell [{e.exec_count}] (starting {first!r}):\n"
            f"  {e.ename}: {e.evalue}\n  the executed notebook with the traceback: {out}"
        ) from None
    _show_injected(out)


def run_all(
    profile: str,
    train: bool = False,
    results_dir: str | None = None,
    data_dir: str | None = None,
    only: str | None = None,
    out_dir: str | os.PathLike | None = None,
) -> dict[str, float]:
    """Execute the notebooks in order into ``out_dir`` (default ``book/_build/notebooks/<profile>``);
    returns the wall time in seconds of each."""
    check_profile(profile, results_dir)
    out_dir = Path(out_dir) if out_dir else OUT_DIR / Path(profile).stem
    out_dir.mkdir(parents=True, exist_ok=True)
    if data_dir is None and profile == "smoke":
        data_dir = _toy_data_dir()
    params = {"profile": profile, "train": train, "results_dir": results_dir, "data_dir": data_dir}
    sources = notebooks(only)
    times = {}
    mode = "replicate (train)" if train else "report"
    print(f"[notebooks] profile {profile}, {mode} mode, {len(sources)} notebooks -> {out_dir}")
    with tempfile.TemporaryDirectory(prefix="nmt-kernel-") as tmp:
        _register_kernel(Path(tmp))
        for k, src in enumerate(sources, 1):
            print(f"[notebooks] {k}/{len(sources)} {src.name} ...", flush=True)
            t0 = time.time()
            run_notebook(src, out_dir / f"{src.stem}.ipynb", params)
            times[src.stem] = time.time() - t0
            print(
                f"[notebooks] {k}/{len(sources)} {src.name} ok in {times[src.stem]:.1f} s",
                flush=True,
            )
    print(f"[notebooks] all {len(sources)} notebooks ok in {sum(times.values()):.0f} s")
    return times


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python tools/notebooks.py", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--profile", default="smoke", help="a profile's name or file (default: smoke)")
    ap.add_argument("--train", action="store_true", help="train, decode, evaluate; rewrite results")
    add_out(ap, help="default: results/<profile>")
    ap.add_argument("--data-dir", help="the WMT'14 layout (smoke: a generated toy corpus)")
    ap.add_argument("--only", help="run only the notebooks whose name contains this")
    ap.add_argument(
        "--out-dir", help="executed notebooks (default: book/_build/notebooks/<profile>)"
    )
    ap.add_argument(
        "--jobs", type=int, help="with --train: models trained at a time (default: NMT_JOBS or 1)"
    )
    a = ap.parse_args(argv)
    if a.jobs:
        os.environ["NMT_JOBS"] = str(a.jobs)  # the notebook kernels inherit it
    try:
        run_all(a.profile, a.train, a.out, a.data_dir, a.only, a.out_dir)
    except (NotebookError, ResultsMissing) as e:
        print(f"[notebooks] FAILED: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
