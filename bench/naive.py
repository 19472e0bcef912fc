"""A straightforward PyTorch RNNsearch / RNNencdec: the in-process reference of the benchmarks.

The same model as ``nmt_lib.paper.model`` (App. A.2 in GroundHog's step order, PAPER.md §2.4) with the
same parameters (a dict ``P`` of ``nmt_lib`` parameter names, e.g. ``dict(model.named_parameters())``
of a copy), written the way a first implementation would be: the paper's equations one time step at
a time, every weight matrix its own ``F.linear``, the deep output, the softmax and the loss inside the
loop, autograd for the backward. Only ``U_a h_j`` is computed once per sentence, as App. A.1.2 says.
It imports nothing from ``nmt_lib``: :func:`check_same_function` compares it with ``nmt_lib``.

    logp = naive_logp(P, cfg, x, x_mask, y, y_mask)           # [B, Ty], 0 at padding
    tokens = naive_decode(P, cfg, x, x_mask, beam, length)     # [B, length], fixed-length outputs
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

EOS = 2  # CONTRIBUTING.md: <pad> = 0, <unk> = 1, </s> = 2


def gru_step(P, p, x, h, c=None):
    """One reset-before GRU step (App. A.1.1, GroundHog biases), the context ``c`` in all gates."""
    ctx = {k: F.linear(c, P["decoder." + k]) if c is not None else 0 for k in ("C", "C_z", "C_r")}
    r = torch.sigmoid(
        F.linear(x, P[p + "W_r"]) + F.linear(h, P[p + "U_r"]) + ctx["C_r"] + P.get(p + "b_r", 0)
    )
    z = torch.sigmoid(
        F.linear(x, P[p + "W_z"]) + F.linear(h, P[p + "U_z"]) + ctx["C_z"] + P.get(p + "b_z", 0)
    )
    h_tilde = torch.tanh(
        F.linear(x, P[p + "W"], P[p + "b"]) + F.linear(r * h, P[p + "U"]) + ctx["C"]
    )
    return (1 - z) * h + z * h_tilde


def embed(P, E, y):
    b = P.get(E.rsplit(".", 1)[0] + ".b_E")
    e = F.embedding(y, P[E])
    return e if b is None else e + b


def encode(P, cfg, x, x_mask):
    """Annotations ``h [B, Tx, 2n]`` (RNNsearch) or ``c = h→_{T_x} [B, n]`` (RNNencdec), and ``s_0``."""
    B, Tx = x.shape
    e = embed(P, "encoder.E_bar", x)
    h = e.new_zeros(B, cfg.n)
    fwd = []
    for j in range(Tx):  # padding: the state is copied
        h = torch.where(x_mask[:, j, None], gru_step(P, "encoder.forward_gru.", e[:, j], h), h)
        fwd.append(h)
    if cfg.arch == "RNNencdec":
        c = fwd[-1]
        return None, c, torch.tanh(F.linear(c, P["decoder.W_s"], P["decoder.b_s"]))
    h, bwd = e.new_zeros(B, cfg.n), []
    for j in reversed(range(Tx)):
        h = torch.where(x_mask[:, j, None], gru_step(P, "encoder.backward_gru.", e[:, j], h), h)
        bwd.insert(0, h)
    H = torch.cat([torch.stack(fwd, 1), torch.stack(bwd, 1)], -1)  # [B, Tx, 2n]
    return H, None, torch.tanh(F.linear(bwd[0], P["decoder.W_s"], P["decoder.b_s"]))


def readout_logp(P, cfg, s, H, Uh, x_mask, c_fixed, e_prev):
    """One step: ``log p(· | s_{i-1}, y_{i-1}, c_i)`` ``[B, K]`` and ``c_i`` (attention from s_{i-1})."""
    if H is not None:
        att = F.linear(
            torch.tanh(F.linear(s, P["decoder.attention.W_a"]).unsqueeze(1) + Uh),
            P["decoder.attention.v_a"][None],
        ).squeeze(-1)
        alpha = torch.softmax(att.masked_fill(~x_mask, float("-inf")), -1)
        c = torch.bmm(alpha.unsqueeze(1), H).squeeze(1)
    else:
        c = c_fixed
    t = F.linear(s, P["decoder.U_o"], P["decoder.b_o"]) + F.linear(c, P["decoder.C_o"])
    if e_prev is not None:
        t = t + F.linear(e_prev, P["decoder.V_o"])
    t = t.view(t.shape[0], -1, 2).max(-1).values  # maxout over adjacent pairs
    if "decoder.W_o" in P:
        logits = F.linear(t, P["decoder.W_o"], P["decoder.b_y"])
    else:
        logits = F.linear(F.linear(t, P["decoder.W1"]), P["decoder.W2"], P["decoder.b_y"])
    wide = torch.promote_types(logits.dtype, torch.float32)  # float32 at least under autocast
    return torch.log_softmax(logits.to(wide), -1), c


def naive_logp(P, cfg, x, x_mask, y, y_mask):
    """Teacher-forced ``log p(y_i | y_<i, x)`` ``[B, Ty]``, 0 at padding."""
    H, c_fixed, s = encode(P, cfg, x, x_mask)
    Uh = F.linear(H, P["decoder.attention.U_a"]) if H is not None else None  # once per sentence
    logp, e_prev = [], None
    for i in range(y.shape[1]):
        lp, c = readout_logp(P, cfg, s, H, Uh, x_mask, c_fixed, e_prev)
        logp.append(lp.gather(-1, y[:, i, None]).squeeze(-1))
        e_y = embed(P, "decoder.E", y[:, i])
        s = torch.where(y_mask[:, i, None], gru_step(P, "decoder.gru.", e_y, s, c), s)
        e_prev = e_y
    return torch.stack(logp, 1).masked_fill(~y_mask, 0.0)


@torch.no_grad()
def naive_decode(P, cfg, x, x_mask, beam: int, length: int):
    """Batched beam search (greedy for ``beam == 1``) producing exactly ``length`` words per sentence
    (EOS never chosen), as the peers' benchmark does: ``[B, length]`` ids of the best hypothesis."""
    B, dev = x.shape[0], x.device
    H, c_fixed, s = encode(P, cfg, x, x_mask)
    rep = torch.arange(B, device=dev).repeat_interleave(beam)
    Uh = F.linear(H, P["decoder.attention.U_a"])[rep] if H is not None else None
    H, x_mask = (H[rep] if H is not None else None), x_mask[rep]
    c_fixed, s = (c_fixed[rep] if c_fixed is not None else None), s[rep]
    cost = torch.full((B, beam), float("inf"), device=dev)
    cost[:, 0] = 0.0
    hist, e_prev = torch.zeros(B, beam, 0, dtype=torch.long, device=dev), None
    for _ in range(length):
        logp, c = readout_logp(P, cfg, s, H, Uh, x_mask, c_fixed, e_prev)
        logp[:, EOS] = float("-inf")
        K = logp.shape[-1]
        cand = (cost.unsqueeze(-1) - logp.view(B, beam, K)).view(B, -1)
        cost, top = cand.topk(beam, dim=1, largest=False)
        parent, word = top // K, top % K
        rows = (torch.arange(B, device=dev)[:, None] * beam + parent).view(-1)
        hist = torch.cat([hist.gather(1, parent[..., None].expand_as(hist)), word[..., None]], 2)
        e_prev = embed(P, "decoder.E", word.view(-1))
        s = gru_step(P, "decoder.gru.", e_prev, s[rows], c[rows])
    return hist[:, 0]


def check_same_function(model, P, cfg, x, x_mask, y, y_mask, atol=1e-4) -> float:
    """Max |logp_nmt_lib - logp_naive| in float32 (no autocast); raises if above ``atol``."""
    with torch.no_grad():
        diff = float(
            (model(x, x_mask, y, y_mask)[0] - naive_logp(P, cfg, x, x_mask, y, y_mask)).abs().max()
        )
    if diff > atol:
        raise AssertionError(f"bench/naive.py and nmt_lib disagree: max |Δ log p| = {diff:.2e}")
    return diff
