"""The paper's figures, drawn from results: Figure 2 (BLEU against sentence length), Figure 3
(alignment matrices) and the length histograms of the data page.

Every function returns a matplotlib ``Figure`` and draws nothing else; :func:`save` writes one
atomically as PNG. The figures are drawn for the book's text column: at most :data:`COLUMN_WIDTH`
inches wide, so that the book (which shows a figure at 100 dpi, the notebook's) shows them at their
own size and not shrunk, with no text smaller than :data:`MIN_FONT_PT` points: 7 pt at 100 dpi is
9.7 px on the page (``tests/test_plots.py`` checks both, ``tests/test_book.py`` the page).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from nmt_lib.io import atomic_write

#: The widest figure, in inches: the book's text column at a 1280 px window holds about 680 px,
#: 6.6 inches at the 100 dpi at which the book's figures are rendered.
COLUMN_WIDTH = 6.6
#: The smallest text in a figure, in points (9.7 px at 100 dpi).
MIN_FONT_PT = 7.0

#: Figure 2's line styles (PAPER.md §5): search solid/dotted, encdec dashed/dash-dot.
FIG2_STYLES = {
    "RNNsearch-50": "-",
    "RNNsearch-30": ":",
    "RNNencdec-50": "--",
    "RNNencdec-30": "-.",
}


def fig2_bleu_by_length(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    xmax: float = 60,
    title: str | None = None,
    paper: Mapping[str, float] | None = None,
    styles: Mapping[str, Mapping] | None = None,
):
    """BLEU against sentence length, one curve per model, in the paper's line styles (Figure 2).

    Args:
        curves: model name -> (lengths, BLEU scores), e.g. bucket centres and per-bucket BLEU.
        xmax: right end of the x axis (the paper: 60).
        title: optional title (e.g. the profile that produced the numbers).
        paper: model name -> the paper's BLEU on all test sentences (Table 1), drawn as thin
            grey lines in the model's style, for reference.
        styles: model name -> matplotlib line settings (e.g. ``{"ls": "--", "color": "C1"}``),
            for more models than the paper's four (default: the paper's styles, in black).

    The y axis is the paper's, 0 to 30 (higher if a score is), except when every score is below
    5 (a briefly trained model) and no paper line is drawn: then it is fitted to the scores, so
    that their shape shows. The legend goes below the axes, where no curve is.
    """
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    best = max((v for _, y in curves.values() for v in y if math.isfinite(v)), default=0.0)
    top = max(30.0, best + 2) if best >= 5 or paper else max(1.0, 1.25 * best)
    for name, value in (paper or {}).items():
        if name in curves:
            ax.axhline(value, ls=FIG2_STYLES.get(name, "-"), color="0.6", lw=0.9)
            ax.annotate(
                f"paper {name}",
                (xmax, value),
                xytext=(-3, 2),
                textcoords="offset points",
                ha="right",
                va="bottom",
                fontsize=8,
                color="0.4",
            )
    for name, (x, y) in curves.items():
        style = (styles or {}).get(name) or {"ls": FIG2_STYLES.get(name, "-"), "color": "k"}
        ax.plot(x, y, lw=1.6, label=name, **style)
    ax.set(xlabel="Sentence length", ylabel="BLEU score", xlim=(0, xmax), ylim=(0, top))
    ax.legend(
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        frameon=False,
        fontsize=9,
        ncol=min(len(curves), 3 if len(curves) > 4 else 4),
    )
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def _alignment_axes(ax, alpha, src: Sequence[str], trg: Sequence[str], title: str | None) -> None:
    ax.imshow(np.asarray(alpha, dtype=float), cmap="gray", vmin=0.0, vmax=1.0, aspect="equal")
    ax.set_xticks(range(len(src)), src, rotation=90, fontsize=8)
    ax.set_yticks(range(len(trg)), trg, fontsize=8)
    ax.xaxis.tick_top()
    if title:
        ax.set_xlabel(title, fontsize=10)


def fig3_alignments(panels: Sequence[Mapping], ncols: int = 2, cell: float = 0.22):
    """Alignment matrices as Figure 3: rows are target words, columns source words, each pixel
    ``alpha_ij`` in grayscale (0 black, 1 white), square pixels of ``cell`` inches.

    Args:
        panels: each a mapping with ``src`` (tokens, x axis), ``trg`` (tokens, y axis), ``alpha``
            (``[len(trg), len(src)]``) and optionally ``title``.
        ncols: panels per row, at most: fewer where the row would be wider than
            :data:`COLUMN_WIDTH`, and smaller pixels where one panel would be.
    """
    wide = max(len(p["src"]) for p in panels)
    tall = max(len(p["trg"]) for p in panels)
    label = 1.4  # inches for the tick labels
    ncols = max(1, min(ncols, len(panels), int(COLUMN_WIDTH // (cell * wide + label))))
    cell = min(cell, (COLUMN_WIDTH - label) / wide)
    nrows = -(-len(panels) // ncols)
    size = (ncols * (cell * wide + label), nrows * (cell * tall + label))
    fig, axes = plt.subplots(nrows, ncols, figsize=size, squeeze=False)
    for ax, p in zip(axes.flat, panels, strict=False):
        _alignment_axes(ax, p["alpha"], p["src"], p["trg"], p.get("title"))
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def length_histogram(lengths: Mapping[str, Sequence[int]], max_len: int | None = None, title=None):
    """Histograms of sentence lengths in words, one outline per series (e.g. source and target),
    each as the share of its own sentences, so that a test set of thousands reads beside a training
    set of hundreds of thousands.

    Args:
        lengths: series name -> lengths. max_len: a dotted line at the length limit, if given.
    """
    fig, ax = plt.subplots(figsize=(6, 3.2))
    hi = max((max(v) for v in lengths.values() if len(v)), default=1)
    bins = np.arange(0, hi + 2) - 0.5
    for (name, v), style in zip(lengths.items(), ["-", "--", ":", "-."], strict=False):
        ax.hist(
            v,
            bins=bins,
            histtype="step",
            ls=style,
            lw=1.5,
            label=f"{name} ({len(v):,})",
            weights=np.full(len(v), 100 / max(len(v), 1)),
        )
    if max_len is not None:
        ax.axvline(max_len + 0.5, color="k", ls=":", lw=1, label=f"limit {max_len}")
    ax.set(xlabel="sentence length (words)", ylabel="% of the series' sentences")
    ax.legend(frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def budget_curves(curves: Mapping[str, Sequence[Mapping]], reference: str | None = None):
    """The budget study: dev NLL (top) and greedy dev BLEU (bottom) against minutes of training,
    one line per arm; ``reference`` (default: the first arm) drawn thick and black."""
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 8.0), sharex=True)
    reference = reference or next(iter(curves), None)
    for name, recs in curves.items():
        x = [r["minutes"] for r in recs]
        style = {"color": "k", "lw": 2.4, "zorder": 3} if name == reference else {"lw": 1.3}
        a1.plot(x, [r["dev_nll"] for r in recs], label=name, **style)
        a2.plot(x, [r["dev_bleu"] or 0.0 for r in recs], label=name, **style)
    a1.set(ylabel="dev NLL per sentence (nats)")
    a2.set(xlabel="minutes of training (one core)", ylabel="dev BLEU (greedy, first dev sentences)")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
    a1.legend(fontsize=9, frameon=False, loc="upper right", ncol=2)
    fig.tight_layout()
    return fig


def nll_by_time_and_updates(
    curves: Mapping[str, Sequence[Mapping]], styles: Mapping[str, Mapping] | None = None
):
    """Dev NLL against minutes of training (top) and against updates (bottom), one line per
    model: the top panel is what a budget of time buys, the bottom what each update learns.

    Args:
        curves: model name -> the log's evaluations, each a mapping with ``minutes``,
            ``update`` and ``dev_nll``.
        styles: model name -> matplotlib line settings (default: matplotlib's cycle).
    """
    fig, axes = plt.subplots(2, 1, figsize=(COLUMN_WIDTH, 7.6), sharey=True)
    for name, recs in curves.items():
        for ax, key in zip(axes, ("minutes", "update"), strict=True):
            ax.plot(
                [r[key] for r in recs],
                [r["dev_nll"] for r in recs],
                lw=1.4,
                label=name,
                **(styles or {}).get(name, {}),
            )
    axes[0].set(xlabel="minutes of training (one core)", ylabel="dev NLL per sentence (nats)")
    axes[1].set(xlabel="updates (minibatches of 80 pairs)", ylabel="dev NLL per sentence (nats)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=9, frameon=False, loc="upper right", ncol=2)
    fig.tight_layout()
    return fig


def save(fig, path: str | os.PathLike, dpi: int = 120) -> None:
    """Write ``fig`` as a PNG, atomically."""
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=dpi)
