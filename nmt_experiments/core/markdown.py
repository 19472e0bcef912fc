"""Markdown for the book's pages and the results' ``.md`` files: a table that fits the book's
column (:func:`markdown_table`), text whose ``<unk>`` reaches the page (:func:`md_text`), a claims
table as the book shows it (:func:`claims_markdown`), and a table written as ``.csv`` and ``.md``
(:func:`write_table`, :func:`show_table`)."""

from __future__ import annotations

import csv
import html
import io
from pathlib import Path

from nmt_lib.io import atomic_write

#: The width of the book's text column at a 1280 px window, in CSS pixels, less a margin: a table
#: estimated wider is shown as several (:func:`markdown_table`; ``tests/test_book.py`` measures).
BOOK_COLUMN_PX = 650


def md_text(text: str) -> str:
    """``text`` as Markdown that will reach HTML: ``<`` and ``>`` outside backtick code spans
    written as entities, so that a word such as ``<unk>`` or ``</s>`` shows instead of being read
    as a tag (which the browser drops). Code spans are left as they are: Markdown escapes them."""
    parts = str(text).split("`")
    return "`".join(
        p if k % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for k, p in enumerate(parts)
    )


def _cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    return f"{v:,}" if isinstance(v, int) else md_text(v)


def _min_px(col: str, rows: list[dict]) -> float:
    """The narrowest a column can be shown: its longest word (a browser wraps cells at spaces),
    at about 8.6 px a character, plus the cell's padding (fitted to the book's measured tables)."""
    shown = [col] + [html.unescape(_cell(r.get(col))) for r in rows]
    words = [w for s in shown for w in s.split()]
    return 8.6 * max((len(w) for w in words), default=1) + 24


def markdown_table(rows: list[dict], fit: float | None = BOOK_COLUMN_PX) -> str:
    """A Markdown pipe table of ``rows`` (missing values blank). A table that the book's column
    (``fit`` pixels) cannot show without a scroll bar becomes several, one under the other, each
    with the first column and as many of the next ones as fit; ``fit=None``: always one table
    (the results' ``.md`` files)."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    groups = [cols[1:]]
    if fit and cols and sum(_min_px(c, rows) for c in cols) > fit:
        groups, room = [[]], fit - _min_px(cols[0], rows)
        for c in cols[1:]:
            if groups[-1] and sum(_min_px(g, rows) for g in groups[-1] + [c]) > room:
                groups.append([])
            groups[-1].append(c)
    parts = []
    for group in groups:
        part = cols[:1] + group
        lines = ["| " + " | ".join(map(md_text, part)) + " |", "|" + "---|" * len(part)]
        lines += ["| " + " | ".join(_cell(r.get(c)) for c in part) + " |" for r in rows]
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def claims_markdown(rows: list[dict]) -> str:
    """A claims table as the book shows it: each claim first in one plain sentence (the claim, its
    verdict and why, and what the numbers show outside the verdict), then the table of the paper's
    numbers and ours."""
    lines = [
        f"- **{r['claim']}**: *{r['verdict']}*; {r['reason']}."
        + (f" {r['observation']}" if r.get("observation") else "")
        for r in rows
    ]
    table = [{k: r[k] for k in ("claim", "paper", "ours", "verdict")} for r in rows]
    return "\n".join(lines) + "\n\n" + markdown_table(table)


def write_table(out: Path, name: str, rows: list[dict], note: str) -> None:
    """``<name>.csv`` and ``<name>.md`` (with ``note``, e.g. the profile and the BLEU signature)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
    w.writeheader()
    w.writerows(rows)
    with atomic_write(out / f"{name}.csv") as f:
        f.write(buf.getvalue())
    with atomic_write(out / f"{name}.md") as f:
        f.write(markdown_table(rows, fit=None) + "\n" + md_text(note.strip()) + "\n")


def show_table(out: Path, name: str, rows: list[dict], note: str, write: bool) -> str:
    """``rows`` as Markdown with ``note`` under it, for a notebook to display; with ``write``
    (replicate mode) also saved as ``<name>.csv`` and ``<name>.md`` in ``out`` (:func:`write_table`)."""
    if write:
        write_table(out, name, rows, note)
    return markdown_table(rows) + "\n" + md_text(note)


#: Table 1's pairs of columns that a reader compares across a row: (heading, ours, the paper's).
TABLE1_PAIRS = (("All", "All", "paper All"), ("No UNK", "No UNK", "paper No UNK"))


def table1_views(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """Table 1 (:func:`nmt_experiments.core.tables.table1`) as two tables that each read across a row:
    the first, ``model | ours | the paper`` for All and for No UNK (a model with several seeds:
    the mean ± their standard deviation), the second the model again with the rest of its columns
    (the seeds, sacreBLEU, the No-UNK subset's size, the columns beyond the paper)."""
    paired = {c for _, ours, paper in TABLE1_PAIRS for c in (ours, paper)} | {"All sd"}
    main, rest = [], []
    for r in rows:
        row = {"model": r["model"]}
        for head, ours, paper in TABLE1_PAIRS:
            v, sd = r.get(ours), r.get("All sd") if ours == "All" else None
            row[f"{head}: ours"] = (
                None if v is None else f"{v:.2f}" + (f" ± {sd:.2f}" if sd else "")
            )
            row[f"{head}: the paper"] = None if r.get(paper) is None else f"{r[paper]:.2f}"
        main.append(row)
        more = {k: v for k, v in r.items() if k not in paired and k != "model"}
        if any(v is not None for v in more.values()):  # Moses: the paper's numbers only
            rest.append({"model": r["model"], **more})
    return main, rest
