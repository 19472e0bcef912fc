"""Sutskever et al.'s LSTM encoder–decoder (``nmt_lib.models.seq2seq``) and the peeky one
(``nmt_lib.models.peeky``) against their literal equations, one sentence at a time, in float64; the step
interface against the teacher-forced forward; searches through the step protocol."""

import math

import pytest
import torch
from torch.func import functional_call

from nmt_lib.config import model_config
from nmt_lib.data.vocab import EOS
from nmt_lib.models import build_model
from nmt_lib.models.seq2seq import reverse_words
from nmt_lib.paper.steps import teacher_forced
from nmt_lib.search import beam_search, greedy_search

B, Tx, Ty = 3, 6, 5
X_LENGTHS, Y_LENGTHS = [6, 3, 2], [2, 5, 4]


def sig(v):
    return 1 / (1 + torch.exp(-v))


def setup(arch, seed=0, **overrides):
    torch.manual_seed(seed)
    cfg = model_config(arch=arch, src_vocab=13, trg_vocab=11, m=5, n=4, n_align=3, l=3, **overrides)
    model = build_model(cfg).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)  # large random weights: every term matters
    x_mask = torch.tensor([[j < L for j in range(Tx)] for L in X_LENGTHS])
    y_mask = torch.tensor([[i < L for i in range(Ty)] for L in Y_LENGTHS])
    x = torch.randint(3, cfg.src_vocab, (B, Tx)).masked_fill(~x_mask, 0)
    y = torch.randint(3, cfg.trg_vocab, (B, Ty)).masked_fill(~y_mask, 0)
    return model, x, x_mask, y, y_mask


def lstm(P, prefix, layers, inp, state):
    """One step of a stacked LSTM, literally: ``state`` a list of ``(h, c)`` per layer."""
    new = []
    for k in range(layers):
        W, U = P[f"{prefix}.weight_ih_l{k}"], P[f"{prefix}.weight_hh_l{k}"]
        b = P[f"{prefix}.bias_ih_l{k}"] + P[f"{prefix}.bias_hh_l{k}"]
        h, c = state[k]
        i, f, g, o = (W @ inp + U @ h + b).chunk(4)
        c = sig(f) * c + sig(i) * torch.tanh(g)
        h = sig(o) * torch.tanh(c)
        new.append((h, c))
        inp = h
    return new


def encode_reference(P, cfg, src):
    """The encoder over one sentence's real tokens (the words reversed, EOS last, with
    ``reverse_source``): the top layer's states and the final state of every layer."""
    if cfg.reverse_source:
        src = list(reversed(src[:-1])) + [src[-1]]
    zero = torch.zeros(cfg.n, dtype=torch.float64)
    state, tops = [(zero, zero)] * cfg.layers, []
    for w in src:
        state = lstm(P, "encoder", cfg.layers, P["E_bar"][w], state)
        tops.append(state[-1][0])
    return tops, state


def reference(model, x, y):
    """Per sentence, unpadded: Sutskever et al. (peeky: ``c`` in every decoder input and in the
    output layer), the previous word a zero embedding at the first step."""
    cfg, P = model.cfg, {k: v.detach() for k, v in model.named_parameters()}
    peeky = cfg.arch == "Peeky"
    logp = torch.zeros(B, Ty, dtype=torch.float64)
    for b in range(B):
        _, state = encode_reference(P, cfg, x[b, : X_LENGTHS[b]].tolist())
        c = state[-1][0]  # the summary: the encoder's top h after the last token
        e_prev = torch.zeros(cfg.m, dtype=torch.float64)
        for i in range(Y_LENGTHS[b]):
            inp = torch.cat([e_prev, c]) if peeky else e_prev
            state = lstm(P, "decoder", cfg.layers, inp, state)
            out = torch.cat([state[-1][0], c]) if peeky else state[-1][0]
            logits = P["W_y"] @ out + P["b_y"]
            logp[b, i] = logits[y[b, i]] - math.log(sum(math.exp(v) for v in logits.tolist()))
            e_prev = P["E"][y[b, i]]
    return logp


CASES = [
    ("Seq2seq", {}),
    ("Seq2seq", {"reverse_source": True, "layers": 2}),
    ("Peeky", {}),
    ("Peeky", {"reverse_source": True, "layers": 2}),
]


@pytest.mark.parametrize("arch,overrides", CASES)
def test_model_equals_literal_equations(arch, overrides):
    model, x, x_mask, y, y_mask = setup(arch, **overrides)
    logp, alpha = model(x, x_mask, y, y_mask)
    assert alpha is None
    torch.testing.assert_close(logp, reference(model, x, y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("arch,overrides", CASES)
def test_step_interface_reproduces_forward(arch, overrides):
    """Iterating the model's ``step`` (what a search does) gives the forward's log-probabilities,
    and each step's is a distribution."""
    model, x, x_mask, y, y_mask = setup(arch, **overrides)
    logp, _ = model(x, x_mask, y, y_mask)
    stepwise, _ = teacher_forced(model, x, x_mask, y, y_mask)
    torch.testing.assert_close(stepwise, logp, rtol=1e-12, atol=1e-12)
    enc = model.encode(x, x_mask)
    logp_next, _, _ = model.step(enc, model.init_state(enc), None)
    torch.testing.assert_close(logp_next.exp().sum(-1), torch.ones(B, dtype=torch.float64))


def test_reverse_words_keeps_eos_and_padding():
    x = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0], [2, 0, 0, 0]])
    mask = x != 0
    assert reverse_words(x, mask).tolist() == [[7, 6, 5, 2], [9, 8, 2, 0], [2, 0, 0, 0]]


def test_reversal_changes_the_function():
    """The same weights read the source reversed or not: different log-probabilities (the
    reversal is not a no-op), equal where the source is one word (and EOS)."""
    model, x, x_mask, y, y_mask = setup("Seq2seq")
    rev = setup("Seq2seq", reverse_source=True)[0]
    rev.load_state_dict(model.state_dict())
    a, b = model(x, x_mask, y, y_mask)[0], rev(x, x_mask, y, y_mask)[0]
    assert not torch.allclose(a[0], b[0])  # a 5-word source
    one = x_mask.sum(1) == 2
    torch.testing.assert_close(a[one], b[one])


def gradcheck_model(model, x, x_mask, y, y_mask) -> bool:
    """``gradcheck`` of the teacher-forced log-probabilities in every parameter."""
    names = [k for k, _ in model.named_parameters()]

    def f(*params):
        return functional_call(
            model, dict(zip(names, params, strict=True)), (x, x_mask, y, y_mask)
        )[0]

    args = tuple(p.detach().clone().requires_grad_() for p in model.parameters())
    return torch.autograd.gradcheck(f, args, fast_mode=True)


def check_searches(model, x, x_mask, lengths, alignments: bool = False) -> None:
    """Beam 1 is greedy; every beam hypothesis finishes and its cost is the model's own score of
    it; with ``alignments``, each comes with its weights over the source words."""
    rules = dict(min_len_ratio=0.5, max_len_ratio=2.0)
    with torch.no_grad():
        model.b_y[EOS] += 2.0  # hypotheses end
        g = greedy_search(model, x, x_mask, **rules)
        b1 = beam_search(model, x, x_mask, beam=1, **rules)
        b4 = beam_search(model, x, x_mask, beam=4, return_alpha=alignments, **rules)
        assert [h.tokens for h in g] == [h.tokens for h in b1]
        for i, h in enumerate(b4):
            assert h.finished
            if alignments:
                assert h.alpha.shape == (len(h.tokens), lengths[i])
            yt = torch.tensor([h.tokens])
            ones = torch.ones_like(yt, dtype=torch.bool)
            score = model.score(x[i : i + 1], x_mask[i : i + 1], yt, ones)
            assert -float(score) == pytest.approx(h.cost, abs=1e-6)


@pytest.mark.parametrize("arch", ["Seq2seq", "Peeky"])
def test_gradcheck(arch):
    assert gradcheck_model(*setup(arch, layers=2))


@pytest.mark.parametrize("arch", ["Seq2seq", "Peeky"])
def test_searches_through_the_step_protocol(arch):
    """Beam 1 is greedy; a beam's costs are the model's own scores of its translations."""
    model, x, x_mask, _, _ = setup(arch, seed=3)
    check_searches(model, x, x_mask, X_LENGTHS)
