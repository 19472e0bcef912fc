"""The alignment model (App. A.1.2, A.2.2) against its literal equations; masking invariants."""

import math

import torch

from nmt_lib.paper.attention import Attention, alignment_scores, masked_softmax

B, Tx, n, n_align = 3, 6, 4, 3
LENGTHS = [6, 4, 1]


def setup(seed=0):
    torch.manual_seed(seed)
    att = Attention(n, 2 * n, n_align).double()
    with torch.no_grad():
        for p in att.parameters():
            p.normal_(0, 0.5)
    s_prev = torch.randn(B, n, dtype=torch.float64)
    h = torch.randn(B, Tx, 2 * n, dtype=torch.float64)
    mask = torch.tensor([[j < L for j in range(Tx)] for L in LENGTHS])
    return att, s_prev, h, mask


def reference(att, s_prev, h, lengths):
    """e_ij = v_aᵀ tanh(W_a s_{i-1} + U_a h_j); α = softmax over real j; c = Σ_j α_ij h_j."""
    W_a, U_a, v_a = att.W_a.detach(), att.U_a.detach(), att.v_a.detach()
    c = torch.zeros(B, 2 * n, dtype=torch.float64)
    alpha = torch.zeros(B, Tx, dtype=torch.float64)
    for b in range(B):
        e = []
        for j in range(lengths[b]):
            hidden = torch.tanh(W_a @ s_prev[b] + U_a @ h[b, j])
            e.append(sum(v_a[k].item() * hidden[k].item() for k in range(n_align)))
        total = sum(math.exp(e_j) for e_j in e)
        for j in range(lengths[b]):
            alpha[b, j] = math.exp(e[j]) / total
            c[b] += alpha[b, j] * h[b, j]
    return c, alpha


def test_attention_equals_literal_equations():
    att, s_prev, h, mask = setup()
    c, alpha = att(s_prev, h, att.precompute(h), mask)
    c_ref, alpha_ref = reference(att, s_prev, h, LENGTHS)
    torch.testing.assert_close(alpha, alpha_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(c, c_ref, rtol=1e-12, atol=1e-12)


def test_precompute_is_U_a_h():
    att, _, h, _ = setup()
    Uh = att.precompute(h)
    for b in range(B):
        for j in range(Tx):
            torch.testing.assert_close(Uh[b, j], att.U_a.detach() @ h[b, j])


def test_weights_sum_to_one_and_are_exactly_zero_on_padding():
    att, s_prev, h, mask = setup()
    _, alpha = att(s_prev, h, att.precompute(h), mask)
    torch.testing.assert_close(alpha.sum(-1), torch.ones(B, dtype=torch.float64))
    assert (alpha[~mask] == 0).all()
    assert (alpha[mask] > 0).all()


def test_padding_annotations_are_ignored():
    att, s_prev, h, mask = setup()
    c, alpha = att(s_prev, h, att.precompute(h), mask)
    h2 = h.masked_fill(~mask[..., None], 1e3)  # garbage where padded
    c2, alpha2 = att(s_prev, h2, att.precompute(h2), mask)
    assert torch.equal(alpha, alpha2)
    torch.testing.assert_close(c, c2, rtol=1e-14, atol=1e-14)


def test_masked_softmax_bf16_is_float32():
    e = torch.randn(B, Tx).bfloat16()
    mask = torch.ones(B, Tx, dtype=torch.bool)
    assert masked_softmax(e, mask).dtype == torch.float32


def test_alignment_scores_shape():
    att, s_prev, h, _ = setup()
    e = alignment_scores(s_prev, att.precompute(h), att.W_a, att.v_a)
    assert e.shape == (B, Tx)


def test_attention_gradcheck():
    att, s_prev, h, mask = setup()

    def g(s_prev, h, W_a, U_a, v_a):  # the module itself, parameters swapped in
        params = {"W_a": W_a, "U_a": U_a, "v_a": v_a}
        return torch.func.functional_call(att, params, (s_prev, h, h @ U_a.t(), mask))

    args = (s_prev, h, att.W_a, att.U_a, att.v_a)
    args = tuple(a.detach().clone().requires_grad_() for a in args)
    assert torch.autograd.gradcheck(g, args)


def test_states_grouped_per_sentence_equal_repeated_annotations():
    """``G`` consecutive states per sentence (a beam) against each sentence's annotations once give
    what repeating the annotations for every state gives, in the module and in the fast
    backend's attention step (in pieces, and the compiled kernel where it applies)."""
    from nmt_lib.fast import kernels
    from nmt_lib.fast.attention import attend, attend_in_pieces

    att, _, h, mask = setup()
    G = 4
    s_prev = torch.randn(G * B, n, dtype=torch.float64)
    rep = lambda t: t.repeat_interleave(G, 0)  # noqa: E731
    Uh = att.precompute(h)
    c_ref, alpha_ref = att(s_prev, rep(h), rep(Uh), rep(mask))
    c, alpha = att(s_prev, h, Uh, mask)
    torch.testing.assert_close(c, c_ref, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(alpha, alpha_ref, rtol=1e-14, atol=1e-14)
    Ws = s_prev @ att.W_a.detach().t()
    for c, alpha in (
        attend_in_pieces(Uh, Ws, att.v_a, h, mask),
        attend(Uh, Ws, att.v_a, h, mask, fused=kernels),
    ):
        torch.testing.assert_close(c, c_ref, rtol=1e-14, atol=1e-14)
        torch.testing.assert_close(alpha, alpha_ref, rtol=1e-14, atol=1e-14)


def test_no_rows():
    """A step where no sentence is still running (the training scans compute 0 rows there)."""
    from nmt_lib.fast.attention import energies_in_pieces
    from nmt_lib.paper.attention import context

    Uh, h = torch.zeros(0, Tx, n_align), torch.zeros(0, Tx, 2 * n)
    assert energies_in_pieces(Uh, torch.zeros(0, n_align), torch.zeros(n_align)).shape == (0, Tx)
    assert masked_softmax(torch.zeros(0, Tx), torch.ones(0, Tx, dtype=torch.bool)).shape == (0, Tx)
    assert context(torch.zeros(0, Tx), h).shape == (0, 2 * n)
    assert alignment_scores(
        torch.zeros(0, n), Uh, torch.zeros(n_align, n), torch.zeros(n_align)
    ).shape == (0, Tx)


def test_the_attention_function_is_chosen_at_construction():
    """The seam: by default the paper's function (a model built before and after gives the same
    outputs), by name, or a callable that the model then calls; an unknown name is refused, and
    the fast backend refuses a function it does not compute."""
    import dataclasses

    import pytest

    from nmt_lib.config import ModelConfig
    from nmt_lib.fast import accelerate
    from nmt_lib.paper import attention as A
    from nmt_lib.paper.model import build_model

    cfg = ModelConfig(src_vocab=9, trg_vocab=9, m=4, n=3, n_align=5, l=2, output_rank=None)
    x = torch.tensor([[4, 5, 6, 2], [7, 2, 0, 0]])
    torch.manual_seed(0)
    paper = build_model(cfg).double()
    assert paper.decoder.attention.function is A.additive
    calls = []

    def mine(s_prev, h, Uh, mask, W_a, v_a):
        calls.append(s_prev.shape)
        return A.additive(s_prev, h, Uh, mask, W_a, v_a)

    for function in ("additive", mine):
        other = build_model(cfg, attention=function).double()
        other.load_state_dict(paper.state_dict())
        for a, b in zip(paper(x, x != 0, x, x != 0), other(x, x != 0, x, x != 0), strict=True):
            assert torch.equal(a, b)
    assert len(calls) == x.shape[1]  # one call per target position
    with pytest.raises(ValueError, match="no attention function 'dot'"):
        build_model(cfg, attention="dot")
    with pytest.raises(ValueError, match="RNNencdec has no attention"):
        build_model(dataclasses.replace(cfg, arch="RNNencdec"), attention=mine)
    with pytest.raises(ValueError, match="the paper's attention only"):
        accelerate(build_model(cfg, attention=mine), compiled=False)
