"""The paper's reset-before GRU (App. A.1.1) against its literal equations, and vs torch.nn.GRU (§8)."""

import ast
from pathlib import Path

import pytest
import torch
from torch.func import functional_call

from nmt_lib.paper.gru import GRU, reset_after_gru

B, T, m, n = 3, 5, 5, 4
LENGTHS = [5, 3, 1]


def sig(v):
    return 1 / (1 + torch.exp(-v))


def random_gru(gate_bias=False, seed=0):
    torch.manual_seed(seed)
    gru = GRU(m, n, gate_bias).double()
    with torch.no_grad():
        for p in gru.parameters():
            p.normal_(0, 0.5)
    return gru


def inputs(seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, m, generator=g, dtype=torch.float64)
    h0 = torch.randn(B, n, generator=g, dtype=torch.float64)
    extra = torch.randn(B, 3 * n, generator=g, dtype=torch.float64)
    mask = torch.tensor([[t < L for t in range(T)] for L in LENGTHS])
    return x, h0, extra, mask


def reference(P, x, h0, extra, lengths):
    """One sentence at a time, column vectors, the App. A.1.1 equations as written."""
    out = torch.zeros(B, T, n, dtype=torch.float64)
    for b in range(B):
        h = h0[b]
        x_h, x_z, x_r = extra[b][:n], extra[b][n : 2 * n], extra[b][2 * n :]  # [cand; z; r]
        b_z = P.get("b_z", torch.zeros(n, dtype=torch.float64))
        b_r = P.get("b_r", torch.zeros(n, dtype=torch.float64))
        for t in range(T):
            if t < lengths[b]:
                r = sig(P["W_r"] @ x[b, t] + P["U_r"] @ h + b_r + x_r)
                z = sig(P["W_z"] @ x[b, t] + P["U_z"] @ h + b_z + x_z)
                h_tilde = torch.tanh(P["W"] @ x[b, t] + P["b"] + P["U"] @ (r * h) + x_h)
                h = (1 - z) * h + z * h_tilde
            out[b, t] = h  # past the end: the state is copied
    return out


@pytest.mark.parametrize("gate_bias", [False, True])
def test_gru_equals_literal_equations(gate_bias):
    gru = random_gru(gate_bias)
    x, h0, extra, mask = inputs()
    P = {k: v.detach() for k, v in gru.named_parameters()}
    expected = reference(P, x, h0, extra, LENGTHS)
    torch.testing.assert_close(gru(x, mask, h0, extra), expected, rtol=1e-12, atol=1e-12)


def test_gru_biases_as_groundhog():
    assert sorted(k for k, _ in GRU(m, n).named_parameters()) == sorted(
        ["W", "W_z", "W_r", "U", "U_z", "U_r", "b"]
    )
    assert {"b_z", "b_r"} <= {k for k, _ in GRU(m, n, gate_bias=True).named_parameters()}


def test_gru_gradcheck():
    gru = random_gru(gate_bias=True)
    x, h0, extra, mask = inputs()
    names = [k for k, _ in gru.named_parameters()]

    def f(x, h0, extra, *params):
        return functional_call(gru, dict(zip(names, params, strict=True)), (x, mask, h0, extra))

    args = (x, h0, extra, *(p.detach() for p in gru.parameters()))
    args = tuple(a.clone().requires_grad_() for a in args)
    assert torch.autograd.gradcheck(f, args)


def to_torch_gru(gru, diagonal_U=False):
    """A torch.nn.GRU with the paper GRU's weights: torch's z weights the OLD state, so its z
    pre-activation is minus ours (z_torch = 1 - z_paper); only the candidate has a bias."""
    ref = torch.nn.GRU(m, n, batch_first=True).double()
    U = torch.diag(torch.diag(gru.U)) if diagonal_U else gru.U
    with torch.no_grad():
        ref.weight_ih_l0.copy_(torch.cat([gru.W_r, -gru.W_z, gru.W]))
        ref.weight_hh_l0.copy_(torch.cat([gru.U_r, -gru.U_z, U]))
        ref.bias_ih_l0.copy_(torch.cat([torch.zeros(2 * n), gru.b]))
        ref.bias_hh_l0.zero_()
        if diagonal_U:
            gru.U.copy_(U)
    return ref


def test_paper_gru_is_not_torch_gru():
    """§8: reset-before U(r∘h) vs torch's reset-after r∘(U h): different functions ..."""
    gru = random_gru()
    x, h0, _, _ = inputs()
    ours, theirs = gru(x, None, h0), to_torch_gru(gru)(x, h0[None])[0]
    assert (ours - theirs).abs().max() > 1e-2


def test_paper_gru_equals_torch_gru_when_U_is_diagonal():
    """... that agree exactly when U is diagonal (then U(r∘h) = r∘(U h)): the weight mapping
    above is right, and the reset placement is the only difference."""
    gru = random_gru()
    x, h0, _, _ = inputs()
    theirs = to_torch_gru(gru, diagonal_U=True)(x, h0[None])[0]
    torch.testing.assert_close(gru(x, None, h0), theirs, rtol=1e-12, atol=1e-12)


def test_reset_after_variant_matches_torch_gru():
    torch.manual_seed(2)
    ref = torch.nn.GRU(m, n, batch_first=True).double()
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_(0, 0.5)  # non-zero biases everywhere, b_hn included
    x, h0, _, _ = inputs()
    ours = reset_after_gru(
        x, h0, ref.weight_ih_l0, ref.weight_hh_l0, ref.bias_ih_l0, ref.bias_hh_l0
    )
    torch.testing.assert_close(ours, ref(x, h0[None])[0], rtol=1e-12, atol=1e-12)


PAPER_MODULES = ["gru", "attention", "encoder", "decoder", "model", "steps"]


@pytest.mark.parametrize("module", PAPER_MODULES)
def test_paper_modules_are_plain_pytorch(module):
    """The paper modules import torch and one another (and the settings and symbols), never the
    fast backend, and choose no algorithm by grad mode, CUDA-graph capture or environment."""
    path = Path(__file__).resolve().parent.parent / "nmt_lib" / "paper" / f"{module}.py"
    text = path.read_text()
    tree = ast.parse(text)
    local = {
        "." * node.level + node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level
    }
    assert local <= {*(f".{m}" for m in PAPER_MODULES), "..config", "..data.vocab"}, local
    others = {
        a.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
    }
    others |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0
    }
    assert others <= {"torch", "__future__", "math", "typing"}, others
    for switch in ("is_grad_enabled", "is_current_stream_capturing", "environ", "mallopt"):
        assert switch not in text, switch


@pytest.mark.parametrize("module", ["gru", "attention"])
def test_concept_module_imports_only_torch(module):
    path = Path(__file__).resolve().parent.parent / "nmt_lib" / "paper" / f"{module}.py"
    tree = ast.parse(path.read_text())
    roots = {
        a.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for a in node.names
    }
    roots |= {
        (node.module or ".").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert roots <= {"torch", "__future__"}, roots
