"""The book's pictures of the models before and after the paper, drawn by code as
:mod:`nmt_experiments.pages.diagrams` draws the paper's: Sutskever et al.'s LSTM encoder–decoder
(:func:`seq2seq`), Luong et al.'s global attention (:func:`luong`) and the Transformer
(:func:`transformer`), on :mod:`nmt_experiments.pages.canvas`, to the same sizes."""

from __future__ import annotations

from .canvas import ATT, ENC, LABEL, OUT, REC, SMALL, Canvas, canvas


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
