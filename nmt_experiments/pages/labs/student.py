"""The labs' two forms from one source: ``notebooks/labN_*.py`` (jupytext percent), the book's
page (executed at the build with the solutions, folded), and the student's notebook (``.ipynb``),
written by :func:`write_all` (``python tools/labs.py``; the book's build writes them into its
``_build/labs/`` for the pages' download links, ``book/_ext/nmt_book.py``).

A source marks its cells with tags: a ``solution`` cell (also ``hide-input``: folded on the page)
holds the answer; the ``skeleton`` cell before it (also ``remove-cell``: not on the page) holds
what the student starts from, a function that raises ``NotImplementedError`` with what to write.
The student's notebook keeps the skeletons, drops the solutions and the book's tags, has no
outputs, and sets the parameter ``book = False`` (its figures shown in the cells, not glued); the
page runs both, the solution last, so it is the solution that the checks see.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import nbformat

from nmt_lib.config import home

#: The tags that mark the two forms' cells, and those that only the book reads.
SOLUTION, SKELETON = "solution", "skeleton"
BOOK_TAGS = {"remove-cell", "hide-input", "hide-output", "remove-input"}
KERNEL = {"name": "python3", "display_name": "Python 3", "language": "python"}


def sources(root: Path | None = None) -> list[Path]:
    """The labs' sources, ``notebooks/lab*_*.py``, in order."""
    return sorted(((root or home()) / "notebooks").glob("lab[0-9]_*.py"))


def student_notebook(src: Path) -> nbformat.NotebookNode:
    """The student's form of the lab ``src``: skeletons kept, solutions dropped, no book tags."""
    nb = jupytext.read(src)
    cells = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if SOLUTION in tags:
            continue
        kept = [t for t in tags if t not in BOOK_TAGS and t != SKELETON]
        if kept:
            cell.metadata["tags"] = kept
        else:
            cell.metadata.pop("tags", None)
        cells.append(cell)
    nb.cells = cells
    for cell in cells:  # the figures in the cells' outputs, not glued for the book
        if "parameters" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace("book = True", "book = False")
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = dict(KERNEL)
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def solution_notebook(src: Path) -> nbformat.NotebookNode:
    """The page's form as a notebook (skeletons, then solutions, every cell): what the tests run."""
    nb = jupytext.read(src)
    nb.metadata.pop("jupytext", None)
    nb.metadata["kernelspec"] = dict(KERNEL)
    return nb


def write_all(out: Path, root: Path | None = None) -> list[Path]:
    """Write every lab's student notebook into ``out`` (created); returns their paths. A file
    that already holds the same notebook is left as it is."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for src in sources(root):
        path = out / f"{src.stem}.ipynb"
        text = nbformat.writes(student_notebook(src))
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover - tools/labs.py is the command
    for p in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "labs")):
        print(p)
