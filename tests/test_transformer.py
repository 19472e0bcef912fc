"""The Transformer (``nmt_lib.models.transformer``) against its literal equations, one sentence, one
position and one head at a time, in float64; the cached step against the parallel forward;
searches through the step protocol."""

import math

import pytest
import torch
from test_seq2seq import check_searches, gradcheck_model

from nmt_lib.config import model_config
from nmt_lib.models import build_model
from nmt_lib.models.transformer import positions

B, Tx, Ty = 3, 6, 5
X_LENGTHS, Y_LENGTHS = [6, 3, 2], [2, 5, 4]


def setup(seed=0, **overrides):
    torch.manual_seed(seed)
    kw = dict(src_vocab=13, trg_vocab=11, m=8, heads=2, ff=12, layers=2) | overrides
    model = build_model(model_config(arch="Transformer", **kw)).double()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.5)
            else:  # layer norms: gains near 1, biases near 0, not exactly
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.1)
    x_mask = torch.tensor([[j < L for j in range(Tx)] for L in X_LENGTHS])
    y_mask = torch.tensor([[i < L for i in range(Ty)] for L in Y_LENGTHS])
    x = torch.randint(3, kw["src_vocab"], (B, Tx)).masked_fill(~x_mask, 0)
    y = torch.randint(3, kw["trg_vocab"], (B, Ty)).masked_fill(~y_mask, 0)
    return model, x, x_mask, y, y_mask


def reference(model, x, y):
    """Per sentence, unpadded, each position and head on its own (Vaswani et al. §3)."""
    cfg, P = model.cfg, {k: v.detach() for k, v in model.named_parameters()}
    d, H = cfg.m, cfg.heads
    dk = d // H

    def pe(pos):
        return torch.tensor(
            [
                math.sin(pos / 10000 ** (i / d))
                if i % 2 == 0
                else math.cos(pos / 10000 ** ((i - 1) / d))
                for i in range(d)
            ],
            dtype=torch.float64,
        )

    def norm(v, p):
        mu, var = v.mean(), ((v - v.mean()) ** 2).mean()
        return (v - mu) / math.sqrt(var + 1e-5) * P[p + ".weight"] + P[p + ".bias"]

    def attention(p, X, Y, causal):
        """``MultiHead(X, Y)`` row by row; also the weights averaged over the heads."""
        out, avg = [], []
        for t, xt in enumerate(X):
            heads, a_sum = [], 0
            for j in range(H):
                cols = slice(j * dk, (j + 1) * dk)
                q = xt @ P[p + ".W_Q"][:, cols]
                keys = range(t + 1) if causal else range(len(Y))
                e = [float(q @ (Y[s] @ P[p + ".W_K"][:, cols])) / math.sqrt(dk) for s in keys]
                total = sum(math.exp(v) for v in e)
                a = [math.exp(v) / total for v in e]
                heads.append(sum(a[s] * (Y[s] @ P[p + ".W_V"][:, cols]) for s in keys))
                a_sum = a_sum + torch.tensor(a, dtype=torch.float64)
            out.append(torch.cat(heads) @ P[p + ".W_O"])
            avg.append(a_sum / H)
        return out, avg

    def ffn(v, p):
        return P[p + ".W_2"] @ torch.relu(P[p + ".W_1"] @ v + P[p + ".b_1"]) + P[p + ".b_2"]

    logp = torch.zeros(B, Ty, dtype=torch.float64)
    align = torch.zeros(B, Ty, Tx, dtype=torch.float64)
    for b in range(B):
        Lx, Ly = X_LENGTHS[b], Y_LENGTHS[b]
        h = [math.sqrt(d) * P["E_bar"][x[b, j]] + pe(j) for j in range(Lx)]
        for k in range(cfg.layers):
            p = f"encoder.{k}"
            att, _ = attention(p + ".attention", h, h, False)
            h = [norm(h[j] + att[j], p + ".norm1") for j in range(Lx)]
            h = [norm(h[j] + ffn(h[j], p + ".ffn"), p + ".norm2") for j in range(Lx)]
        prev = [torch.zeros(d, dtype=torch.float64)] + [P["E"][y[b, i]] for i in range(Ly - 1)]
        z = [math.sqrt(d) * prev[i] + pe(i) for i in range(Ly)]
        for k in range(cfg.layers):
            p = f"decoder.{k}"
            att, _ = attention(p + ".self_attention", z, z, True)
            z = [norm(z[i] + att[i], p + ".norm1") for i in range(Ly)]
            att, avg = attention(p + ".cross_attention", z, h, False)
            z = [norm(z[i] + att[i], p + ".norm2") for i in range(Ly)]
            z = [norm(z[i] + ffn(z[i], p + ".ffn"), p + ".norm3") for i in range(Ly)]
        for i in range(Ly):
            logits = P["W_y"] @ z[i] + P["b_y"]
            logp[b, i] = logits[y[b, i]] - math.log(sum(math.exp(v) for v in logits.tolist()))
            align[b, i, :Lx] = avg[i]
    return logp, align


@pytest.mark.parametrize("overrides", [{}, {"heads": 1, "layers": 1}, {"heads": 4}])
def test_transformer_equals_literal_equations(overrides):
    model, x, x_mask, y, y_mask = setup(**overrides)
    logp, align = model(x, x_mask, y, y_mask)
    logp_ref, align_ref = reference(model, x, y)
    torch.testing.assert_close(logp, logp_ref, rtol=1e-11, atol=1e-11)
    torch.testing.assert_close(align, align_ref, rtol=1e-11, atol=1e-11)


def test_positions_are_the_papers_sinusoids():
    pe = positions(7, 6, torch.zeros((), dtype=torch.float64))
    for pos in range(7):
        for i in range(3):
            assert pe[pos, 2 * i] == pytest.approx(math.sin(pos / 10000 ** (2 * i / 6)))
            assert pe[pos, 2 * i + 1] == pytest.approx(math.cos(pos / 10000 ** (2 * i / 6)))


def test_a_position_does_not_see_the_future():
    """Changing target word 3 changes nothing before it (positions 0-2 are scored from the
    words before them), and the positions after it (which read it)."""
    model, x, x_mask, y, y_mask = setup()
    y2 = y.clone()
    y2[:, 3] = 4 + (y[:, 3] - 2) % 7
    a, b = model(x, x_mask, y, y_mask)[0], model(x, x_mask, y2, y_mask)[0]
    torch.testing.assert_close(a[:, :3], b[:, :3], rtol=0, atol=0)
    assert not torch.allclose(a[1, 4:], b[1, 4:])


@pytest.mark.parametrize("G", [1, 2])
def test_cached_steps_reproduce_forward(G):
    """One position at a time from the key/value cache (what a search does) gives the parallel
    forward's log-probabilities and alignments; with ``G`` rows per sentence (a beam's
    hypotheses), each row follows its own words."""
    model, x, x_mask, y, y_mask = setup()
    ys = [y.roll(g, dims=1).masked_fill(~y_mask, 0) for g in range(G)]  # other words per row
    enc = model.encode(x, x_mask)
    rows = torch.stack(ys, 1).view(G * B, Ty)  # G consecutive rows per sentence
    s, y_prev = model.init_state(enc.select(torch.arange(B).repeat_interleave(G))), None
    for i in range(Ty):
        logp_next, s, a = model.step(enc, s, y_prev)
        assert s.kv.shape == (G * B, model.cfg.layers, 2, i + 1, model.cfg.m)
        y_prev = rows[:, i]
        for g in range(G):
            logp, align = model(x, x_mask, ys[g], y_mask)
            real = y_mask[:, i]
            got = logp_next[g::G][real].gather(1, ys[g][real, i, None])[:, 0]
            torch.testing.assert_close(got, logp[real, i], rtol=0, atol=1e-12)
            torch.testing.assert_close(a[g::G][real], align[real, i], rtol=0, atol=1e-12)


def test_gradcheck():
    assert gradcheck_model(*setup(layers=1))


def test_searches_through_the_step_protocol():
    """Beam 1 is greedy; a beam's costs are the model's own scores; alignments come back."""
    model, x, x_mask, _, _ = setup(seed=3)
    check_searches(model, x, x_mask, X_LENGTHS, alignments=True)


def test_positions_from_an_offset_are_those_of_the_whole_range():
    like = torch.zeros((), dtype=torch.float64)
    torch.testing.assert_close(positions(3, 6, like, start=4), positions(7, 6, like)[4:])
