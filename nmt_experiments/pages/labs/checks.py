"""The labs' checks: the student's function against the library's verified one, in float64 on
random inputs, with one sentence that names the mistake.

A check returns quietly (after printing what passed) or raises :class:`CheckFailed`, whose
message is that sentence; Jupyter shows it alone, without a traceback (``_render_traceback_``).
Each diagnosis compares the student's answer with what a typical mistake computes (the softmax
over the batch, padding not masked, a result transposed, the sum over the wrong index), so that
the sentence says what to change, never only "assertion failed".
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from nmt_lib.config import ModelConfig, model_config
from nmt_lib.models.luong import Luong
from nmt_lib.paper import attention
from nmt_lib.paper.model import build_model

#: The sizes of the checks' random inputs, all different, so that a transposed result has a shape
#: of its own: ``B`` sentences, ``Tx`` positions (the lengths below), ``n``, ``2n``, ``n'``.
B, TX, N, N_ALIGN = 3, 5, 4, 6
LENGTHS = (5, 3, 2)


class CheckFailed(AssertionError):
    """A check that failed; its message is one sentence that says what to change."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines, not a traceback
        return [f"✗ {self}"]


def _call(fn, *args):
    """``fn(*args)``, its errors turned into one sentence."""
    try:
        return fn(*args)
    except NotImplementedError as e:
        raise CheckFailed(f"not written yet: {e}") from None
    except Exception as e:  # a shape error inside the student's code, mostly
        first = str(e).splitlines()[0] if str(e) else ""
        raise CheckFailed(
            f"your function raised {type(e).__name__} ({first}): check each product's shapes "
            "against the docstring (a weight used transposed, or a missing [:, None])"
        ) from None


def _shape(name: str, got, want: tuple, hints: dict) -> None:
    if not isinstance(got, Tensor):
        raise CheckFailed(f"{name} should be a tensor of shape {list(want)}, not {type(got)}")
    if tuple(got.shape) != want:
        hint = hints.get(tuple(got.shape), "compare each dimension with the docstring")
        raise CheckFailed(f"{name} has shape {list(got.shape)}, should be {list(want)}: {hint}")


def _close(a: Tensor, b: Tensor) -> bool:
    return torch.allclose(a.double(), b.double(), rtol=1e-9, atol=1e-10)


def attention_inputs(seed: int = 0) -> dict[str, Tensor]:
    """Random float64 inputs of the attention: ``s_prev [B, n]``, ``h [B, Tx, 2n]``, ``Uh``,
    ``mask`` (lengths :data:`LENGTHS`), ``W_a``, ``U_a``, ``v_a``."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    h, U_a = r(B, TX, 2 * N), r(N_ALIGN, 2 * N)
    mask = torch.arange(TX) < torch.tensor(LENGTHS)[:, None]
    return dict(
        s_prev=r(B, N), h=h, Uh=h @ U_a.T, mask=mask, W_a=r(N_ALIGN, N), U_a=U_a, v_a=r(N_ALIGN)
    )


def check_attention(fn) -> None:
    """The student's ``fn(s_prev, h, Uh, mask, W_a, v_a) -> (c, alpha)`` against
    :func:`nmt_lib.paper.attention.additive` (Eqs. 5-6, App. A.1.2) on random float64 inputs of a
    padded batch; raises :class:`CheckFailed` naming the mistake."""
    i = attention_inputs()
    args = (i["s_prev"], i["h"], i["Uh"], i["mask"], i["W_a"], i["v_a"])
    out = _call(fn, *args)
    if not (isinstance(out, tuple) and len(out) == 2):
        raise CheckFailed("return the pair (c, alpha): the context vectors and the weights")
    c, alpha = out
    c_ref, a_ref = attention.additive(*args)
    _shape(
        "alpha",
        alpha,
        (B, TX),
        {
            (
                TX,
                B,
            ): "shapes transposed: one row per sentence (s_prev's rows), one column per position j"
        },
    )
    rows = alpha.sum(-1)
    if not _close(rows, torch.ones(B)):
        raise CheckFailed(
            "softmax over the wrong axis: alpha_ij is normalised over the source positions j "
            "(dim=-1), so that each row sums to one"
        )
    if alpha[~i["mask"]].abs().max() > 0:
        raise CheckFailed(
            "padding not masked: set e_ij to -inf where mask is False before the softmax, so "
            "that padded positions get weight exactly 0"
        )
    if not _close(alpha, a_ref):
        raise CheckFailed(
            "the weights differ from the paper's: e_ij = v_a^T tanh(W_a s_{i-1} + U_a h_j), "
            "with W_a s_{i-1} added to every position j's Uh and v_a applied after the tanh"
        )
    _shape(
        "c",
        c,
        (B, 2 * N),
        {
            (TX, 2 * N): "the sum over the wrong index: you summed over the sentences b, "
            "c_i sums over the source positions j",
            (B, TX): "the sum over the wrong index: you summed over the annotation's features, "
            "c_i sums over the source positions j",
        },
    )
    if not _close(c, c_ref):
        raise CheckFailed(
            "the sum over the wrong index: c_i = sum_j alpha_ij h_j, each sentence's annotations "
            "weighted by its own row of alpha"
        )
    print("✓ your attention == nmt_lib.paper.attention.additive (float64, padded batch)")


def toy_config(vocab: int = 13, **sizes) -> ModelConfig:
    """A tiny RNNsearch's config (``vocab`` rows, sizes overridable)."""
    sizes = {"m": 4, "n": N, "n_align": N_ALIGN, "l": 2, "output_rank": None, **sizes}
    return model_config(dict(src_vocab=vocab, trg_vocab=vocab, **sizes))


def check_model(fn) -> None:
    """RNNsearch with the student's function (``attention=fn``) gives the paper's model's
    log-probabilities and weights, float64, on a padded batch."""
    torch.manual_seed(0)
    paper = build_model(toy_config()).double()
    for p in paper.parameters():
        torch.nn.init.normal_(p, std=0.5)
    mine = build_model(toy_config(), attention=fn).double()
    mine.load_state_dict(paper.state_dict())
    x = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])
    ref = paper(x, x != 0, x, x != 0)
    got = _call(mine, x, x != 0, x, x != 0)
    if not all(_close(a, b) for a, b in zip(got, ref, strict=True)):
        raise CheckFailed(
            "RNNsearch with your function differs from the paper's: run check_attention"
        )
    print("✓ RNNsearch(attention=your function) == the paper's RNNsearch (float64)")


def luong_model(score: str) -> Luong:
    """A tiny Luong model with ``score``, float64, large random weights."""
    cfg = model_config(
        dict(arch="Luong", src_vocab=11, trg_vocab=11, m=3, n=N, n_align=N_ALIGN, score=score)
    )
    torch.manual_seed(1)
    model = Luong(cfg).double()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.5)
    return model


def check_score(fn, score: str) -> None:
    """The student's Luong score ``fn(h_t [B, n], h_bar [B, Tx, n]) -> [B, Tx]`` (``dot``) or
    ``fn(h_t, h_bar, W_a) -> [B, Tx]`` (``general``) against ``nmt_lib.models.luong``'s
    ``Luong.scores`` in float64."""
    model = luong_model(score)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(3, 11, (B, TX), generator=g)
    mask = torch.arange(TX) < torch.tensor(LENGTHS)[:, None]
    enc = model.encode(x.masked_fill(~mask, 0), mask)
    h_t = torch.randn(B, N, generator=g, dtype=torch.float64)
    args = (h_t, enc.h_bar) if score == "dot" else (h_t, enc.h_bar, model.W_a)
    with torch.no_grad():
        e = _call(fn, *args)
        ref = model.scores(enc, h_t)
    hints = {(TX, B): "shapes transposed: one row per decoder state h_t, one column per source s"}
    _shape(f"your {score} score", e, (B, TX), hints)
    if _close(e, ref):
        print(f"✓ your {score} score == nmt_lib.models.luong.Luong.scores (float64)")
        return
    if _close(e * math.sqrt(N), ref):
        raise CheckFailed(
            "scaled by 1/sqrt(n): that is the Transformer's scaled dot product; Luong's scores "
            "have no scaling"
        )
    if score == "general":
        wrong_side = torch.einsum("bk,kl,btl->bt", h_t, model.W_a.T, enc.h_bar)
        if _close(e, wrong_side):
            raise CheckFailed(
                "W_a on the wrong side: score = h_t^T (W_a h_bar_s), so W_a multiplies the "
                "source state (h_bar @ W_a.T), not h_t"
            )
    raise CheckFailed(
        f"the {score} score differs from Luong's: score(h_t, h_bar_s) = "
        + ("h_t^T h_bar_s" if score == "dot" else "h_t^T W_a h_bar_s")
        + ", one number per decoder state and source position"
    )


def check_accuracy(fn) -> None:
    """The student's ``fn(hyps, refs) -> float`` against :func:`nmt_experiments.pages.labs.toy.
    word_accuracy` on hand-made cases (reordered, too short, too long)."""
    from .toy import word_accuracy

    refs = [[5, 6, 7, 8, 2], [9, 4, 2]]
    cases = {  # what the hypotheses are, and the hypotheses
        "the right digits in the wrong order": [[6, 5, 7, 8, 2], [4, 9, 2]],  # 3 + 1 of 8
        "a hypothesis shorter than its reference": [[5, 6, 2], [9, 4, 2]],  # 2 + 3 of 8
        "a hypothesis longer than its reference": [[5, 6, 7, 8, 9, 9, 2], [9, 4, 2]],  # 4 + 3 of 8
    }
    for name, hyps in cases.items():
        got = _call(fn, hyps, refs)
        got = got.item() if isinstance(got, Tensor) and got.numel() == 1 else got
        if not isinstance(got, (int, float)) or isinstance(got, bool):
            raise CheckFailed(f"return one number, the share of words right, not {type(got)}")
        want = word_accuracy(hyps, refs)
        if math.isclose(got, want):
            continue
        pairs = list(zip(hyps, refs, strict=True))
        wrong = {
            "you counted whole sentences: count the words in the right place": sum(
                h == r for h, r in pairs
            )
            / len(refs),
            "divide by the reference's words, not the hypothesis's: a translation that stops "
            "early must not score higher": want * sum(map(len, refs)) / sum(map(len, hyps)),
            "a word counts only at its own position i: the right digits in the wrong order are "
            "not a copy": sum(sum(a in r for a in h[: len(r)]) for h, r in pairs)
            / sum(map(len, refs)),
            "count EOS too: ending the sentence in the right place is part of the copy": sum(
                sum(a == b for a, b in zip(h[:-1], r[:-1], strict=False)) for h, r in pairs
            )
            / (sum(map(len, refs)) - len(refs)),
        }
        for sentence, value in wrong.items():
            if math.isclose(got, value):
                raise CheckFailed(sentence)
        raise CheckFailed(
            f"on {name} you give {got:.3f}; the share of the reference words that the "
            f"hypotheses have in the right place is {want:.3f}"
        )
    print("✓ your accuracy == the share of reference words in the right place")


def check_forward_only(cls) -> None:
    """The student's RNNsearch without its backward encoder (``cls(cfg)``, a subclass whose
    ``encode`` keeps only the forward annotations): the backward half of ``h`` is zero, the
    forward half the paper's, ``Uh`` computed from the new ``h``, and the backward GRU's weights
    change nothing."""
    torch.manual_seed(0)
    cfg = toy_config()
    model = _call(cls, cfg).double()
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.5)
    x = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])
    enc = _call(model.encode, x, x != 0)
    full = model.encoder(x, x != 0)
    n = cfg.n
    if enc.h[..., :n].abs().max() == 0 and enc.h[..., n:].abs().max() > 0:
        raise CheckFailed(
            "you removed the forward half: h_j = [h→_j; h←_j], the backward states are the last n "
            "features (h[..., n:])"
        )
    if enc.h[..., n:].abs().max() > 0:
        raise CheckFailed("the backward half of h (h[..., n:]) should be zero: it is still there")
    if not _close(enc.h[..., :n], full[..., :n]):
        raise CheckFailed("the forward half of h should stay the forward GRU's states h→_j")
    if not _close(enc.Uh, model.decoder.attention.precompute(enc.h)):
        raise CheckFailed(
            "Uh still holds U_a h_j of the full annotations: compute it from the new h "
            "(self.decoder.attention.precompute(h))"
        )
    print("✓ your model attends to the forward annotations only")
