"""What the book's pictures of the models are drawn with: an axes in data units to put boxes and
arrows on (:class:`Canvas`, made by :func:`canvas`), a legend of coloured lines (:func:`legend`),
the text sizes and one colour per kind of computation (:mod:`nmt_experiments.pages.diagrams` draws the
pictures)."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..core.plots import COLUMN_WIDTH

#: Text sizes, in points (the smallest is above ``plots.MIN_FONT_PT``).
LABEL, SMALL = 10.0, 8.5
#: One colour per kind of computation, the same in every picture.
ENC, ATT, OUT, REC = "#1f4e79", "#b8860b", "#8b1a1a", "#2e6b30"


class Canvas:
    """An axes in data units (``w`` by ``h``, aspect 1) to put boxes and arrows on."""

    def __init__(self, ax, w: float, h: float):
        self.ax = ax
        ax.set_xlim(0, w)
        ax.set_ylim(0, h)
        ax.set_aspect("equal")
        ax.axis("off")

    def box(self, x, y, text, w=0.9, h=0.55, color="k", fill="white", size=LABEL, round_=True):
        """A box centred at (x, y); returns its centre and half sizes for :meth:`arrow`."""
        style = "round,pad=0.02,rounding_size=0.12" if round_ else "square,pad=0.02"
        self.ax.add_patch(
            FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle=style, fc=fill, ec=color, lw=1.2)
        )
        self.ax.text(x, y, text, ha="center", va="center", fontsize=size, color="k")
        return (x, y, w / 2, h / 2)

    def frame(self, x, y, w, h, color, fill="none", **kw):
        """A dashed frame from (x, y), ``w`` by ``h``, around boxes that belong together."""
        self.ax.add_patch(
            FancyBboxPatch(
                (x, y), w, h, boxstyle="round,pad=0.02", fc=fill, ec=color, ls="--", **kw
            )
        )

    def text(self, x, y, text, size=SMALL, color="k", **kw):
        self.ax.text(x, y, text, fontsize=size, color=color, **kw)

    def arrow(self, a, b, color="k", lw=1.1, style="-|>", rad=0.0, ls="-", shrink=0.0):
        """An arrow from box (or point) ``a`` to box (or point) ``b``, from edge to edge."""
        (x0, y0), (x1, y1) = edge(a, b), edge(b, a)
        self.ax.add_patch(
            FancyArrowPatch(
                (x0, y0),
                (x1, y1),
                arrowstyle=style,
                mutation_scale=9,
                color=color,
                lw=lw,
                ls=ls,
                shrinkA=shrink,
                shrinkB=shrink,
                connectionstyle=f"arc3,rad={rad}",
            )
        )


def edge(a, b):
    """The point where the segment from the centre of ``a`` towards ``b`` leaves box ``a``."""
    if len(a) == 2:
        return a
    x, y, hw, hh = a
    bx, by = b[0], b[1]
    dx, dy = bx - x, by - y
    if dx == 0 and dy == 0:
        return x, y
    t = min(hw / abs(dx) if dx else float("inf"), hh / abs(dy) if dy else float("inf"))
    return x + dx * t, y + dy * t


def canvas(h: float, w: float = COLUMN_WIDTH, units: tuple[float, float] | None = None):
    """A figure ``w`` by ``h`` inches filled by one :class:`Canvas`, ``units`` wide and high (10
    units across by default, square units)."""
    fig, ax = plt.subplots(figsize=(w, h))
    fig.subplots_adjust(0.01, 0.01, 0.99, 0.99)
    uw, uh = units or (10.0, 10.0 * h / w)
    return fig, Canvas(ax, uw, uh)


def legend(c: Canvas, x, y, items, dy=0.36):
    """A legend of ``items`` (``(colour, label)``) from ``(x, y)`` down, ``dy`` apart."""
    for k, (color, label) in enumerate(items):
        c.ax.plot([x, x + 0.45], [y - k * dy] * 2, color=color, lw=2)
        c.text(x + 0.55, y - k * dy, label, va="center")
