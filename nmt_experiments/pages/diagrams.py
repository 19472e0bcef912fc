"""The book's pictures of the models, drawn by code: RNNsearch as a whole, GroundHog's decoder step
order over two time steps, RNNencdec beside RNNsearch; the models before and after the paper
(Sutskever et al.'s LSTM encoder–decoder, Luong et al.'s global attention, the Transformer) are
:mod:`nmt_experiments.pages.diagrams_others`, and :data:`DIAGRAMS` names them all.

Each function returns a matplotlib ``Figure`` and draws nothing else. Like
:mod:`nmt_experiments.core.plots` they are drawn for the book's text column: at most
:data:`plots.COLUMN_WIDTH` inches wide, with no text smaller than :data:`plots.MIN_FONT_PT` points,
so that they are legible in a 1280 px window (``tests/test_diagrams.py``). The pictures are
schematic: what is computed from what, not sizes. They are drawn on
:mod:`nmt_experiments.pages.canvas` (boxes and arrows, its text sizes and colours).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from ..core.plots import COLUMN_WIDTH
from .canvas import ATT, ENC, LABEL, OUT, REC, SMALL, Canvas, canvas, legend
from .diagrams_others import luong, seq2seq, transformer


def rnnsearch(alpha=(0.06, 0.14, 0.68, 0.12)):
    """RNNsearch as a whole, at one target position ``i``: the source words, the forward and
    backward encoder states whose pairs are the annotations ``h_j``, the alignment weights
    ``alpha_ij`` (line widths), the context ``c_i``, and the decoder step from ``s_{i-1}`` to the
    distribution of ``y_i`` and the next state ``s_i``."""
    fig, c = canvas(4.7)
    xs = [2.0, 3.3, 4.6, 5.9]
    names = ["1", "2", "3", "T_x"]
    tops = _annotations(c, xs, names)
    ctx = c.box(
        8.6, 4.3, r"$c_i = \sum_j \alpha_{ij} h_j$", w=2.2, h=0.6, color=ATT, fill="#fbf3dc"
    )
    for k, a in enumerate(alpha):
        c.arrow(tops[k], ctx, ATT, lw=0.6 + 6 * a, style="-")
        c.text(
            xs[k],
            3.35,
            rf"$\alpha_{{i,{names[k]}}}$ = {a:.2f}",
            color=ATT,
            ha="center",
            va="center",
        )
    _decoder_step(c, ctx)
    legend(
        c, 7.6, 2.4, [(ENC, "encoder"), (ATT, "attention"), (OUT, "readout"), (REC, "state update")]
    )
    return fig


def _annotations(c: Canvas, xs: list[float], names: list[str]) -> list[tuple[float, float]]:
    """RNNsearch's encoder: the source words at ``xs``, the forward and backward states, and the
    annotations ``h_j`` they make; returns the point above each annotation."""
    fwd, bwd, tops = [], [], []
    for x, j in zip(xs, names, strict=True):
        word = c.box(x, 0.4, f"$x_{{{j}}}$", w=0.7, h=0.5, fill="#eeeeee")
        c.frame(x - 0.52, 1.0, 1.04, 1.8, ENC, fill="#e3ecf5", lw=1.0)
        c.arrow(word, (x, 1.0), ENC)
        fwd.append(c.box(x, 1.45, rf"$\overrightarrow{{h}}_{{{j}}}$", w=0.8, h=0.55, color=ENC))
        bwd.append(c.box(x, 2.3, rf"$\overleftarrow{{h}}_{{{j}}}$", w=0.8, h=0.55, color=ENC))
        c.text(x, 2.98, f"$h_{{{j}}}$", color=ENC, size=LABEL, ha="center", va="center")
        tops.append((x, 3.6))
    for k in range(3):
        c.arrow(fwd[k], fwd[k + 1], ENC)
        c.arrow(bwd[k + 1], bwd[k], ENC)
    c.text(0.05, 1.45, "forward GRU", va="center", color=ENC)
    c.text(0.05, 2.3, "backward GRU", va="center", color=ENC)
    c.text(0.05, 3.0, r"annotations $h_j$", va="center", color=ENC)
    return tops


def _decoder_step(c: Canvas, ctx) -> None:
    """RNNsearch's decoder step: the alignment model from ``s_{i-1}``, the readout of ``y_i`` from
    ``s_{i-1}``, ``y_{i-1}`` and the context ``ctx``, and the next state ``s_i``."""
    c.box(
        2.6,
        5.55,
        "alignment model\n"
        r"$e_{ij} = v_a^\top \tanh(W_a s_{i-1} + U_a h_j)$"
        "\n"
        r"$\alpha_{ij} = \mathrm{softmax}_j\, e_{ij}$",
        w=4.6,
        h=1.15,
        color=ATT,
        fill="#fbf3dc",
        size=SMALL + 0.5,
    )
    c.arrow((2.6, 4.97), (2.6, 3.55), ATT, ls="--")
    s_prev = c.box(6.5, 5.55, "$s_{i-1}$", color=REC)
    s_next = c.box(9.3, 5.55, "$s_i$", color=REC)
    y_prev = c.box(6.5, 6.7, "$y_{i-1}$", fill="#eeeeee")
    out = c.box(8.55, 6.7, r"$p(y_i \mid y_{<i}, \mathbf{x})$", w=2.0, color=OUT, fill="#f7e3e3")
    c.arrow(s_prev, (4.9, 5.55), ATT)
    c.arrow(s_prev, out, OUT)
    c.arrow(y_prev, out, OUT)
    c.arrow(ctx, out, OUT)
    c.arrow(s_prev, s_next, REC)
    c.arrow(ctx, s_next, REC)
    c.arrow(out, s_next, REC)
    c.text(9.45, 6.15, "$y_i$", color=REC)
    c.text(0.05, 6.85, "one decoder step, $i$", size=LABEL)


def groundhog_order():
    """The decoder's computations over two time steps, in GroundHog's order: attend from
    ``s_{i-1}`` (1), read out ``p(y_i)`` from ``s_{i-1}``, ``y_{i-1}`` and ``c_i`` (2), emit
    ``y_i`` (3), update the state with ``y_i`` and the same ``c_i`` (4); then step ``i+1``."""
    fig, c = canvas(4.2)
    X = [0.7, 4.7, 8.7]  # the states s_{i-1}, s_i, s_{i+1}
    names = ("i-1", "i", "i+1")
    s = [c.box(x, 1.3, f"$s_{{{n}}}$", color=REC) for x, n in zip(X, names, strict=True)]
    y = [
        c.box(x, 5.85, f"$y_{{{n}}}$", fill="#eeeeee")
        for x, n in zip((0.7, 3.7, 7.7), names, strict=True)
    ]
    for k, i in enumerate(("i", "i+1")):
        x0 = X[k]
        ctx = c.box(x0 + 1.0, 2.9, f"$c_{{{i}}}$", w=0.7, color=ATT, fill="#fbf3dc")
        c.text(x0 + 1.42, 2.9, "from all $h_j$", color=ENC, va="center")
        out = c.box(x0 + 2.2, 4.5, f"$p(y_{{{i}}})$", w=1.0, color=OUT, fill="#f7e3e3")
        c.arrow(s[k], ctx, ATT)
        c.text(x0 + 0.2, 2.1, "1", color=ATT, size=LABEL, weight="bold")
        c.arrow(s[k], out, OUT, rad=0.35)
        c.arrow(y[k], out, OUT)
        c.arrow(ctx, out, OUT)
        c.text(x0 + 1.25, 3.75, "2", color=OUT, size=LABEL, weight="bold")
        c.arrow(out, y[k + 1], OUT, lw=1.8)
        c.text(x0 + 2.45, 5.35, "3", color=OUT, size=LABEL, weight="bold")
        c.arrow(s[k], s[k + 1], REC, lw=1.8)
        c.arrow(ctx, s[k + 1], REC)
        c.arrow(y[k + 1], s[k + 1], REC)
        c.text(x0 + 2.6, 0.95, "4", color=REC, size=LABEL, weight="bold")
    c.text(
        0.05,
        0.45,
        "1 attend from $s_{i-1}$;  2 read out from $s_{i-1}$, $y_{i-1}$ and $c_i$;  "
        "3 emit $y_i$;  4 update with $y_i$ and the same $c_i$",
        va="center",
    )
    c.text(
        0.05,
        0.05,
        r"The paper's Eq. 4 instead: $s_i = f(s_{i-1}, y_{i-1}, c_i)$, then "
        r"$p(y_i) = g(y_{i-1}, s_i, c_i)$",
        va="bottom",
    )
    return fig


def encdec_and_search():
    """RNNencdec beside RNNsearch: one fixed vector ``c``, the forward encoder's last state, in
    every decoder step; against a context ``c_i`` of its own for every step, a weighted mean of
    all the annotations."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(COLUMN_WIDTH, 3.5))
    fig.subplots_adjust(0.01, 0.01, 0.99, 0.92, wspace=0.04)
    for ax, search in ((a1, False), (a2, True)):
        c = Canvas(ax, 5.0, 5.3)
        ax.set_title("RNNsearch" if search else "RNNencdec", fontsize=LABEL)
        xs = [0.6, 1.55, 2.5]
        enc = []
        for k, x in enumerate(xs):
            c.box(x, 0.4, f"$x_{k + 1}$", w=0.6, h=0.45, fill="#eeeeee")
            name = f"$h_{k + 1}$" if search else rf"$\overrightarrow{{h}}_{k + 1}$"
            enc.append(c.box(x, 1.45, name, w=0.7, h=0.5, color=ENC, fill="#e3ecf5"))
            c.arrow((x, 0.63), enc[-1], ENC)
            if k:
                c.arrow(enc[k - 1], enc[k], ENC, style="<|-|>" if search else "-|>")
        dec = [
            c.box(x + 1.5, 4.1, f"$s_{k + 1}$", w=0.6, h=0.5, color=REC) for k, x in enumerate(xs)
        ]
        for k in range(3):
            c.text(xs[k] + 1.35, 4.75, f"$y_{k + 1}$", size=SMALL + 0.5)
            if k:
                c.arrow(dec[k - 1], dec[k], REC)
        if search:
            for k, d in enumerate(dec):
                ctx = c.box(
                    d[0] - 0.05, 2.75, f"$c_{k + 1}$", w=0.55, h=0.45, color=ATT, fill="#fbf3dc"
                )
                for e in enc:
                    c.arrow(e, ctx, ATT, lw=0.6, style="-")
                c.arrow(ctx, d, ATT)
            c.text(0.1, 5.0, "a context per step", color=ATT)
        else:
            ctx = c.box(3.6, 1.45, "$c$", w=0.55, h=0.5, color=ATT, fill="#fbf3dc")
            c.arrow(enc[-1], ctx, ENC)
            for d in dec:
                c.arrow(ctx, d, ATT, lw=0.9)
            c.text(0.1, 5.0, "one vector for the sentence", color=ATT)
    return fig


#: Every picture, by name (what the chapters draw and ``tests/test_diagrams.py`` checks).
DIAGRAMS = {
    "rnnsearch": rnnsearch,
    "groundhog_order": groundhog_order,
    "encdec_and_search": encdec_and_search,
    "seq2seq": seq2seq,
    "luong": luong,
    "transformer": transformer,
}
