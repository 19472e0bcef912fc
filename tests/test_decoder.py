"""The decoder (App. A.2.2 in GroundHog's step order, PAPER.md §2.4) against its literal equations."""

import math

import pytest
import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from nmt_lib.backend import backend as backend_named
from nmt_lib.fast.decoder import teacher_forced as fast_teacher_forced
from nmt_lib.fast.model import FastDecoder
from nmt_lib.paper.decoder import Decoder
from nmt_lib.paper.model import Encoded, EncoderDecoder
from nmt_lib.paper.steps import teacher_forced

B, Tx, Ty, K_y, m, n, n_align, l = 3, 5, 4, 11, 5, 4, 3, 3
X_LENGTHS, Y_LENGTHS = [5, 3, 1], [4, 2, 3]


def sig(v):
    return 1 / (1 + torch.exp(-v))


class Given(EncoderDecoder):
    """A paper model around the decoder under test whose encoding is given (``s_0``, and ``h``
    or ``c``): its ``readout_step`` and ``next_state`` are the paper model's."""

    def __init__(self, dec: Decoder, s0):
        nn.Module.__init__(self)
        self.decoder, self.s0 = dec, s0

    def encode(self, enc: Encoded, _):
        return enc

    def init_state(self, enc: Encoded):
        return self.s0

    def context(self, enc: Encoded, s_prev):
        if self.decoder.attention is None:
            return enc.c, None
        return self.decoder.attend(s_prev, enc.h, enc.Uh, enc.mask)


class Over(nn.Module):
    """The decoder under test over a reference from a given ``s_0`` and encoding: the paper's loop
    (:func:`nmt_lib.paper.steps.teacher_forced`), or the fast one for a fast decoder."""

    def __init__(self, dec: Decoder):
        super().__init__()
        self.decoder = dec

    def forward(self, s0, y, y_mask, h=None, Uh=None, x_mask=None, c=None):
        dec = self.decoder
        if isinstance(dec, FastDecoder):
            return fast_teacher_forced(dec, s0, y, y_mask, h, Uh, x_mask, c, dec.fused, dec.tile)
        return teacher_forced(Given(dec, s0), Encoded(x_mask, h, Uh, c), None, y, y_mask)


def setup(
    attention=True, output_rank=2, gate_bias=False, embedding_bias=True, seed=0, backend="reference"
):
    torch.manual_seed(seed)
    ctx = 2 * n if attention else n
    n_a = n_align if attention else None
    args = K_y, m, n, ctx, l, n_a, output_rank, n, embedding_bias, gate_bias
    dec = backend_named(backend).build(Decoder, *args).double()
    with torch.no_grad():
        for p in dec.parameters():
            p.normal_(0, 0.5)
    g = torch.Generator().manual_seed(seed + 1)
    s0 = torch.randn(B, n, generator=g, dtype=torch.float64)
    h = torch.randn(B, Tx, ctx, generator=g, dtype=torch.float64)  # annotations, garbage at pads
    c = torch.randn(B, ctx, generator=g, dtype=torch.float64)  # RNNencdec's fixed context
    x_mask = torch.tensor([[j < L for j in range(Tx)] for L in X_LENGTHS])
    y_mask = torch.tensor([[i < L for i in range(Ty)] for L in Y_LENGTHS])
    y = torch.randint(3, K_y, (B, Ty), generator=g).masked_fill(~y_mask, 0)
    return dec, s0, h, c, x_mask, y, y_mask


def reference(dec, s0, h, c_fixed, y, attention):
    """One sentence at a time: for i = 1..Ty, attention and readout from s_{i-1} and y_{i-1}
    (previous-word term 0 at i = 1), then s_i from y_i and the same c_i."""
    P = {k: v.detach() for k, v in dec.named_parameters()}
    zero = torch.zeros(n, dtype=torch.float64)
    b_E = P.get("b_E", torch.zeros(m, dtype=torch.float64))
    logp = torch.zeros(B, Ty, dtype=torch.float64)
    alpha = torch.zeros(B, Ty, Tx, dtype=torch.float64)
    for b in range(B):
        s = s0[b]
        for i in range(Y_LENGTHS[b]):
            if attention:
                e = []
                for j in range(X_LENGTHS[b]):
                    hidden = torch.tanh(P["attention.W_a"] @ s + P["attention.U_a"] @ h[b, j])
                    e.append(float(P["attention.v_a"] @ hidden))
                total = sum(math.exp(e_j) for e_j in e)
                c = torch.zeros(2 * n, dtype=torch.float64)
                for j in range(X_LENGTHS[b]):
                    alpha[b, i, j] = math.exp(e[j]) / total
                    c = c + alpha[b, i, j] * h[b, j]
            else:
                c = c_fixed[b]
            t_tilde = P["U_o"] @ s + P["b_o"] + P["C_o"] @ c
            if i > 0:
                t_tilde = t_tilde + P["V_o"] @ (P["E"][y[b, i - 1]] + b_E)
            t = torch.stack([torch.maximum(t_tilde[2 * k], t_tilde[2 * k + 1]) for k in range(l)])
            W_o = P["W_o"] if "W_o" in P else P["W2"] @ P["W1"]
            logits = W_o @ t + P["b_y"]
            logp[b, i] = logits[y[b, i]] - math.log(sum(math.exp(v) for v in logits.tolist()))
            e_y = P["E"][y[b, i]] + b_E  # the word just emitted, y_i
            r = sig(P["gru.W_r"] @ e_y + P["gru.U_r"] @ s + P["C_r"] @ c + P.get("gru.b_r", zero))
            z = sig(P["gru.W_z"] @ e_y + P["gru.U_z"] @ s + P["C_z"] @ c + P.get("gru.b_z", zero))
            s_tilde = torch.tanh(P["gru.W"] @ e_y + P["gru.b"] + P["gru.U"] @ (r * s) + P["C"] @ c)
            s = (1 - z) * s + z * s_tilde
    return logp, alpha


CASES = [  # attention, output_rank, gate_bias, embedding_bias
    (True, 2, False, True),  # RNNsearch, GroundHog-exact
    (False, 2, False, True),  # RNNencdec
    (True, None, True, False),  # paper's full W_o, all gate biases, no embedding bias
]


@pytest.mark.parametrize("attention,output_rank,gate_bias,embedding_bias", CASES)
def test_decoder_equals_literal_equations(
    attention, output_rank, gate_bias, embedding_bias, backend
):
    dec, s0, h, c, x_mask, y, y_mask = setup(
        attention, output_rank, gate_bias, embedding_bias, backend=backend
    )
    if attention:
        logp, alpha = Over(dec)(s0, y, y_mask, h, dec.attention.precompute(h), x_mask)
    else:
        logp, alpha = Over(dec)(s0, y, y_mask, c=c)
        assert alpha is None
    logp_ref, alpha_ref = reference(dec, s0, h, c, y, attention)
    torch.testing.assert_close(logp, logp_ref, rtol=1e-12, atol=1e-12)
    if attention:
        torch.testing.assert_close(alpha, alpha_ref, rtol=1e-12, atol=1e-12)


def test_init_state():
    dec, s0, *_ = setup()
    for b in range(B):
        expected = torch.tanh(dec.W_s.detach() @ s0[b] + dec.b_s.detach())
        torch.testing.assert_close(dec.init_state(s0)[b], expected)


def test_logp_and_alpha_zero_at_target_padding(backend):
    dec, s0, h, _, x_mask, y, y_mask = setup(backend=backend)
    logp, alpha = Over(dec)(s0, y, y_mask, h, dec.attention.precompute(h), x_mask)
    assert (logp[~y_mask] == 0).all() and (logp[y_mask] < 0).all()
    assert (alpha[~y_mask] == 0).all()


@pytest.mark.parametrize("attention", [True, False])
def test_decoder_gradcheck(attention, backend):
    dec, s0, h, c, x_mask, y, y_mask = setup(attention, gate_bias=True, backend=backend)
    over = Over(dec)
    names = [k for k, _ in over.named_parameters()]

    def f(s0, h, c, *params):
        params = dict(zip(names, params, strict=True))
        if attention:
            Uh = h @ params["decoder.attention.U_a"].t()
            return functional_call(over, params, (s0, y, y_mask, h, Uh, x_mask))[0]
        return functional_call(over, params, (s0, y, y_mask), {"c": c})[0]

    args = (s0, h, c, *(p.detach() for p in dec.parameters()))
    args = tuple(a.clone().requires_grad_() for a in args)
    assert torch.autograd.gradcheck(f, args, fast_mode=True)


def test_decode_makes_the_steps_once_per_thread(backend, monkeypatch):
    """``decode`` asks the model for its steps (``model.steps``) once per thread, for all the
    batches of that thread (what they precompute, e.g. concatenated weights, is reused); the fast
    model once more, for the steps that make its word table (``prepared_steps``)."""
    from nmt_lib import decoding
    from nmt_lib.config import ModelConfig, SearchConfig
    from nmt_lib.models import build_model

    cfg = ModelConfig(src_vocab=9, trg_vocab=9, m=4, n=4, n_align=4, l=2)
    model = build_model(cfg, backend_named(backend)).eval()
    calls, orig = [], model.steps
    monkeypatch.setattr(model, "steps", lambda *a: calls.append(1) or orig(*a))
    decoding.decode(model, [[3, 4, 5, 2], [6, 2]], SearchConfig(beam=3, batch_size=1), workers=1)
    assert calls == [1] * (2 if backend == "fast" else 1)


def test_deep_output_maxout_over_adjacent_pairs_ties_included():
    """``t_i`` is the max over adjacent pairs ``(2j, 2j+1)`` of the pre-activations (GroundHog's
    maxout), values and gradients as ``unflatten(-1, (-1, 2)).amax(-1)``, ties (common in bf16)
    splitting the gradient in half."""
    dec, s0, _, c, _, y, _ = setup(attention=False)
    e = dec.embed(y[:, 0])
    with torch.no_grad():
        dec.U_o[1] = dec.U_o[0]  # pair 0 of t̃ tied
        dec.C_o[1], dec.V_o[1], dec.b_o[1] = dec.C_o[0], dec.V_o[0], dec.b_o[0]
    s = s0.clone().requires_grad_()
    t = dec.deep_output(s, e, c)
    t_tilde = F.linear(s, dec.U_o, dec.b_o) + F.linear(c, dec.C_o) + F.linear(e, dec.V_o)
    ref = t_tilde.unflatten(-1, (-1, 2)).amax(-1)
    assert torch.equal(t, ref) and t.shape == (B, l)
    w = torch.randn(B, l, dtype=torch.float64)
    got, want = (torch.autograd.grad((x * w).sum(), s)[0] for x in (t, ref))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
