"""The book's pictures of the models, drawn by code: RNNsearch as a whole, GroundHog's decoder step
order over two time steps, RNNencdec beside RNNsearch, and the models before and after the paper
(Sutskever et al.'s LSTM encoder–decoder, Luong et al.'s global attention, the Transformer).

Each function returns a matplotlib ``Figure`` and draws nothing else. Like :mod:`nmt_experiments.plots`
they are drawn for the book's text column: at most :data:`plots.COLUMN_WIDTH` inches wide, with no
text smaller than :data:`plots.MIN_FONT_PT` points, so that they are legible in a 1280 px window
(``tests/test_diagrams.py``). The pictures are schematic: what is computed from what, not sizes.
They are drawn on :mod:`nmt_experiments.canvas` (boxes and arrows, its text sizes and colours).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from .canvas import ATT, ENC, LABEL, OUT, REC, SMALL, Canvas, canvas, legend
from .plots import COLUMN_WIDTH


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


def seq2seq():
    """Sutskever et al.'s LSTM encoder–decoder: stacked LSTMs read the reversed source, end of
    sentence last; their final states start the decoder, which reads the previous word and has no
    attention."""
    fig, c = canvas(3.0)
    src = ["$x_3$", "$x_2$", "$x_1$", "</s>"]
    dec_in = ["</s>", "$y_1$", "$y_2$"]
    lo, hi = [], []
    for k in range(7):
        x = 0.7 + 1.4 * k
        enc = k < 4
        color = ENC if enc else REC
        word = src[k] if enc else dec_in[k - 4]
        c.box(x, 0.4, word, w=0.75, h=0.45, fill="#eeeeee", size=SMALL + 0.5)
        lo.append(c.box(x, 1.4, "LSTM", w=0.95, h=0.5, color=color, size=SMALL + 0.5))
        hi.append(c.box(x, 2.4, "LSTM", w=0.95, h=0.5, color=color, size=SMALL + 0.5))
        c.arrow((x, 0.63), lo[-1], color)
        c.arrow(lo[-1], hi[-1], color)
        if k:
            c.arrow(lo[k - 1], lo[k], ENC if k <= 4 else REC)
            c.arrow(hi[k - 1], hi[k], ENC if k <= 4 else REC)
        if not enc:
            c.box(
                x,
                3.4,
                f"$p(y_{k - 3})$",
                w=0.95,
                h=0.45,
                color=OUT,
                fill="#f7e3e3",
                size=SMALL + 0.5,
            )
            c.arrow(hi[-1], (x, 3.17), OUT)
    c.text(
        0.1, 3.4, "encoder: the source\nreversed, its end of\nsentence last", color=ENC, va="center"
    )
    c.text(
        4.0,
        3.4,
        "stacked LSTMs (the paper: 4 layers\nof 1000 cells); no attention: the\n"
        "decoder starts from the encoder's\nlast states",
        va="center",
        ha="center",
    )
    return fig


def luong():
    """Luong et al.'s global attention at step ``t``: the LSTM state ``h_t`` first, then the
    attention from it over the source states, the attentional state ``h~_t`` from the context and
    ``h_t``, the output from ``h~_t``, and ``h~_t`` fed to the next step's input (input feeding)."""
    fig, c = canvas(3.0)
    src, h_t = _luong_state(c)
    ctx = _luong_attention(c, src, h_t)
    _luong_output(c, ctx, h_t)
    return fig


def _luong_state(c: Canvas):
    """The source states, and the LSTM state ``h_t`` from ``h_{t-1}`` and the step's input;
    returns the source states' boxes and ``h_t``'s."""
    src = [
        c.box(0.7 + 1.1 * k, 0.45, rf"$\bar h_{k + 1}$", w=0.75, h=0.5, color=ENC, fill="#e3ecf5")
        for k in range(3)
    ]
    c.text(0.3, 1.0, "source states (top LSTM layer)", color=ENC)
    h_prev = c.box(4.7, 1.25, "$h_{t-1}$", w=0.8, h=0.5, color=REC)
    h_t = c.box(6.4, 1.25, "$h_t$", w=0.8, h=0.5, color=REC)
    inp = c.box(
        6.4, 0.3, r"$[y_{t-1}; \tilde h_{t-1}]$", w=1.7, h=0.45, fill="#eeeeee", size=SMALL + 0.5
    )
    c.arrow(h_prev, h_t, REC)
    c.arrow(inp, h_t, REC)
    return src, h_t


def _luong_attention(c: Canvas, src, h_t):
    """The alignment ``a_t`` from ``h_t`` over the source states, and the context ``c_t``; returns
    the context's box."""
    a_t = c.box(
        2.9,
        2.35,
        r"$a_t(s) = \mathrm{softmax}_s\,\mathrm{score}(h_t, \bar h_s)$",
        w=4.1,
        h=0.5,
        color=ATT,
        fill="#fbf3dc",
        size=SMALL + 0.5,
    )
    for s in src:
        c.arrow(s, a_t, ATT, lw=0.7)
    c.arrow(h_t, a_t, ATT, rad=0.2)
    ctx = c.box(
        5.6,
        3.45,
        r"$c_t = \sum_s a_t(s)\,\bar h_s$",
        w=2.2,
        h=0.5,
        color=ATT,
        fill="#fbf3dc",
        size=SMALL + 0.5,
    )
    c.arrow(a_t, ctx, ATT)
    return ctx


def _luong_output(c: Canvas, ctx, h_t) -> None:
    """The attentional state ``h~_t`` from ``c_t`` and ``h_t``, the output from it, and ``h~_t`` fed
    to the next step's input."""
    ht = c.box(
        8.55,
        2.35,
        r"$\tilde h_t = \tanh(W_c[c_t; h_t])$",
        w=2.3,
        h=0.5,
        color=OUT,
        fill="#f7e3e3",
        size=SMALL + 0.5,
    )
    c.arrow(ctx, ht, OUT)
    c.arrow(h_t, ht, OUT)
    c.box(
        8.55,
        3.45,
        r"$p(y_t) = \mathrm{softmax}(W_y \tilde h_t + b_y)$",
        w=2.9,
        h=0.45,
        color=OUT,
        fill="#f7e3e3",
        size=SMALL + 0.5,
    )
    c.arrow(ht, (8.55, 3.22), OUT)
    nxt = c.box(8.9, 0.3, r"$[y_t; \tilde h_t]$", w=1.3, h=0.45, fill="#eeeeee", size=SMALL + 0.5)
    c.arrow(ht, nxt, REC, ls="--")
    c.text(7.05, 1.25, "input feeding:\n" r"step $t+1$ reads $\tilde h_t$", color=REC, va="center")


def transformer():
    """The Transformer: an encoder of N blocks (self-attention, feed-forward) over all source
    positions at once, and a decoder of N blocks (masked self-attention over the words so far,
    attention over the encoder's output, feed-forward), each sub-layer with a residual and a
    normalisation."""
    fig, c = canvas(4.0)
    enc = _stack(
        c,
        2.2,
        ["embedding + position", "self-attention", "feed-forward"],
        ENC,
        "encoder: all source words at once",
    )
    dec = _stack(
        c,
        7.3,
        [
            "embedding + position",
            "masked self-attention",
            "attention over source",
            "feed-forward",
            "softmax: $p(y_i)$",
        ],
        REC,
        "decoder: the words so far",
    )
    _repeated(c, 2.2, 1.35, ENC, (0.15, 2.4))
    _repeated(c, 7.3, 2.15, REC, (9.0, 2.8))
    c.arrow(enc[-1], dec[2], ATT, rad=-0.1, lw=1.5)
    c.text(4.1, 3.5, "keys and values:\nthe encoder's output", color=ATT)
    c.text(
        0.15,
        5.3,
        "every sub-layer: $x + \\mathrm{Sublayer}(x)$, then layer normalisation; no recurrence",
        va="top",
    )
    return fig


#: The width of a block of the Transformer's picture.
BLOCK_W = 2.8


def _stack(c: Canvas, x: float, layers: list[str], color: str, title: str) -> list:
    """A column of ``layers`` at ``x``, bottom up, each feeding the next, with its ``title`` under
    it; returns their boxes."""
    c.text(x, 0.05, title, ha="center", color=color, size=LABEL)
    boxes = []
    for k, name in enumerate(layers):
        boxes.append(c.box(x, 1.3 + 0.8 * k, name, w=BLOCK_W, h=0.5, color=color, size=SMALL + 0.5))
        if k:
            c.arrow(boxes[k - 1], boxes[k], color)
    return boxes


def _repeated(c: Canvas, x: float, h: float, color: str, label: tuple[float, float]) -> None:
    """The dashed frame, ``h`` high, around the blocks of the column at ``x`` that repeat N times,
    and its ``×N`` at ``label``."""
    c.frame(x - BLOCK_W / 2 - 0.15, 1.75, BLOCK_W + 0.3, h, color)
    c.text(*label, r"$\times N$", color=color, size=LABEL)


#: Every picture, by name (what the chapters draw and ``tests/test_diagrams.py`` checks).
DIAGRAMS = {
    "rnnsearch": rnnsearch,
    "groundhog_order": groundhog_order,
    "encdec_and_search": encdec_and_search,
    "seq2seq": seq2seq,
    "luong": luong,
    "transformer": transformer,
}
