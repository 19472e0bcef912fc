"""Luong et al.'s global attention (``nmt_lib.models.luong``) against its literal equations, one sentence
at a time, in float64, for the three scores, with and without input feeding; invariants of the
alignment; searches through the step protocol."""

import math

import pytest
import torch
from test_seq2seq import (
    X_LENGTHS,
    Y_LENGTHS,
    B,
    Tx,
    Ty,
    check_searches,
    encode_reference,
    gradcheck_model,
    lstm,
    setup,
)

from nmt_lib.paper.steps import teacher_forced


def reference(model, x, y):
    """Per sentence, unpadded: the decoder LSTM reads ``[E y_{t-1}; h̃_{t-1}]``, attends from its
    new top state ``h_t`` over the encoder's top states, ``h̃_t = tanh(W_c [c_t; h_t])``."""
    cfg, P = model.cfg, {k: v.detach() for k, v in model.named_parameters()}
    logp = torch.zeros(B, Ty, dtype=torch.float64)
    align = torch.zeros(B, Ty, Tx, dtype=torch.float64)
    for b in range(B):
        hbar, state = encode_reference(P, cfg, x[b, : X_LENGTHS[b]].tolist())
        h_tilde = torch.zeros(cfg.n, dtype=torch.float64)
        e_prev = torch.zeros(cfg.m, dtype=torch.float64)
        for t in range(Y_LENGTHS[b]):
            inp = torch.cat([e_prev, h_tilde]) if cfg.input_feed else e_prev
            state = lstm(P, "decoder", cfg.layers, inp, state)
            h = state[-1][0]
            if cfg.score == "dot":
                e = [float(h @ hs) for hs in hbar]
            elif cfg.score == "general":
                e = [float(h @ (P["W_a"] @ hs)) for hs in hbar]
            else:
                e = [float(P["v_a"] @ torch.tanh(P["W_a"] @ torch.cat([h, hs]))) for hs in hbar]
            total = sum(math.exp(v) for v in e)
            c = 0
            for s, hs in enumerate(hbar):
                align[b, t, s] = math.exp(e[s]) / total
                c = c + align[b, t, s] * hs
            h_tilde = torch.tanh(P["W_c"] @ torch.cat([c, h]))
            logits = P["W_y"] @ h_tilde + P["b_y"]
            logp[b, t] = logits[y[b, t]] - math.log(sum(math.exp(v) for v in logits.tolist()))
            e_prev = P["E"][y[b, t]]
        if cfg.reverse_source:  # the encoder read x_{T-1} .. x_1, EOS: the words' own order
            L = X_LENGTHS[b]
            align[b, :, : L - 1] = align[b, :, : L - 1].flip(-1).clone()
    return logp, align


CASES = [
    {"score": "dot"},
    {"score": "general"},
    {"score": "concat"},
    {"score": "general", "input_feed": False},
    {"score": "concat", "layers": 2, "reverse_source": True},
    {"score": "dot", "layers": 2, "input_feed": False, "reverse_source": True},
]


@pytest.mark.parametrize("overrides", CASES)
def test_luong_equals_literal_equations(overrides):
    model, x, x_mask, y, y_mask = setup("Luong", **overrides)
    logp, align = model(x, x_mask, y, y_mask)
    logp_ref, align_ref = reference(model, x, y)
    torch.testing.assert_close(logp, logp_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(align, align_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("score", ["dot", "general", "concat"])
def test_without_input_feeding_the_whole_sequence_is_the_steps(score):
    """Without input feeding, teacher forcing runs the decoder LSTM over the whole sequence
    (``torch.nn.LSTM``) and attends from all its states at once: the log-probabilities and
    alignments of the steps, driven one position at a time (float64)."""
    model, x, x_mask, y, y_mask = setup(
        "Luong", score=score, layers=2, input_feed=False, reverse_source=score == "general"
    )
    logp, align = model(x, x_mask, y, y_mask)
    logp_s, align_s = teacher_forced(model, x, x_mask, y, y_mask)
    torch.testing.assert_close(logp, logp_s, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(align, align_s, rtol=1e-12, atol=1e-12)


def test_alignment_sums_to_one_and_ignores_padding():
    model, x, x_mask, y, y_mask = setup("Luong", score="dot")
    _, align = model(x, x_mask, y, y_mask)
    sums = align.sum(-1)
    torch.testing.assert_close(sums[y_mask], torch.ones(int(y_mask.sum()), dtype=torch.float64))
    assert (align.masked_select(~x_mask[:, None, :].expand_as(align)) == 0).all()
    assert (sums[~y_mask] == 0).all()


def test_several_states_per_sentence_equal_repeated_encodings():
    """``G`` consecutive states per encoded sentence (a beam) read the encoding once."""
    model, x, x_mask, y, _ = setup("Luong", score="concat")
    G = 3
    enc = model.encode(x, x_mask)
    rep = enc.select(torch.arange(B).repeat_interleave(G))
    s = type(model.init_state(enc))(
        *(torch.randn(G * B, *t.shape[1:], dtype=torch.float64) for t in model.init_state(enc))
    )
    prev = y[:, 0].repeat_interleave(G)
    (logp_a, s_a, a_a), (logp_b, s_b, a_b) = model.step(enc, s, prev), model.step(rep, s, prev)
    for a, b in ((logp_a, logp_b), (a_a, a_b), *zip(s_a, s_b, strict=True)):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)


def test_gradcheck():
    assert gradcheck_model(*setup("Luong", score="concat"))


def test_searches_through_the_step_protocol():
    """Beam 1 is greedy; a beam's costs are the model's own scores; alignments come back."""
    model, x, x_mask, _, _ = setup("Luong", seed=3, score="general")
    check_searches(model, x, x_mask, X_LENGTHS, alignments=True)
