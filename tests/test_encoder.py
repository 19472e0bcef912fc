"""The bidirectional encoder (App. A.2.1, GroundHog) against its literal equations."""

import pytest
import torch
from torch.func import functional_call

from nmt_lib.backend import backend as backend_named
from nmt_lib.paper.encoder import Encoder

B, Tx, K_x, m, n = 3, 6, 13, 5, 4
LENGTHS = [6, 4, 1]


def sig(v):
    return 1 / (1 + torch.exp(-v))


def setup(bidirectional=True, embedding_bias=True, gate_bias=False, seed=0, backend="reference"):
    torch.manual_seed(seed)
    on = backend_named(backend)
    enc = on.build(Encoder, K_x, m, n, bidirectional, embedding_bias, gate_bias).double()
    with torch.no_grad():
        for p in enc.parameters():
            p.normal_(0, 0.5)
    x = torch.randint(3, K_x, (B, Tx))
    mask = torch.tensor([[j < L for j in range(Tx)] for L in LENGTHS])
    x = x.masked_fill(~mask, 0)  # <pad> = 0
    return enc, x, mask


def gru_ref(P, prefix, inputs):
    """App. A.2.1 for one direction over a list of embedded words; returns the list of states."""
    h, states = torch.zeros(n, dtype=torch.float64), []
    zero = torch.zeros(n, dtype=torch.float64)
    for e in inputs:
        r = sig(P[prefix + "W_r"] @ e + P[prefix + "U_r"] @ h + P.get(prefix + "b_r", zero))
        z = sig(P[prefix + "W_z"] @ e + P[prefix + "U_z"] @ h + P.get(prefix + "b_z", zero))
        h_tilde = torch.tanh(P[prefix + "W"] @ e + P[prefix + "b"] + P[prefix + "U"] @ (r * h))
        h = (1 - z) * h + z * h_tilde
        states.append(h)
    return states


def reference(enc, x, lengths, bidirectional=True):
    P = {k: v.detach() for k, v in enc.named_parameters()}
    b_E = P.get("b_E", torch.zeros(m, dtype=torch.float64))
    out = torch.zeros(B, Tx, 2 * n if bidirectional else n, dtype=torch.float64)
    for b in range(B):
        L = lengths[b]
        e = [P["E_bar"][x[b, j]] + b_E for j in range(L)]  # ē(x_j), shared by both directions
        fwd = gru_ref(P, "forward_gru.", e)  # h→_1 .. h→_L
        for j in range(Tx):
            out[b, j, :n] = fwd[min(j, L - 1)]  # copied over the padding
        if bidirectional:
            bwd = gru_ref(P, "backward_gru.", e[::-1])[::-1]  # h←_1 .. h←_L, starts at x_L
            for j in range(L):
                out[b, j, n:] = bwd[j]  # padding: the backward state is still h←_{L+1} = 0
    return out


@pytest.mark.parametrize(
    "bidirectional,embedding_bias,gate_bias",
    [(True, True, False), (False, True, False), (True, False, True)],
)
def test_encoder_equals_literal_equations(bidirectional, embedding_bias, gate_bias, backend):
    enc, x, mask = setup(bidirectional, embedding_bias, gate_bias, backend=backend)
    expected = reference(enc, x, LENGTHS, bidirectional)
    torch.testing.assert_close(enc(x, mask), expected, rtol=1e-12, atol=1e-12)


def test_last_forward_is_state_after_eos(backend):
    enc, x, mask = setup(bidirectional=False, backend=backend)
    h = enc(x, mask)
    c = Encoder.last_forward(h)
    for b, L in enumerate(LENGTHS):
        assert torch.equal(c[b], h[b, L - 1])


def test_sentence_alone_equals_inside_padded_batch(backend):
    enc, x, mask = setup(backend=backend)
    h = enc(x, mask)
    for b, L in enumerate(LENGTHS):
        alone = enc(x[b : b + 1, :L], mask[b : b + 1, :L])
        torch.testing.assert_close(alone[0], h[b, :L], rtol=1e-13, atol=1e-13)


def test_encoder_gradcheck(backend):
    enc, x, mask = setup(gate_bias=True, backend=backend)
    names = [k for k, _ in enc.named_parameters()]

    def f(*params):
        return functional_call(enc, dict(zip(names, params, strict=True)), (x, mask))

    args = tuple(p.detach().clone().requires_grad_() for p in enc.parameters())
    assert torch.autograd.gradcheck(f, args, fast_mode=True)
