"""Beam search and greedy decoding (nmt_lib.search; GroundHog sample.py, PAPER.md §4).

A tiny stand-in model implements the model interface of CONTRIBUTING.md, so that the search is
tested on its own; the last tests run the real RNNsearch/RNNencdec.
"""

from __future__ import annotations

import math
import threading
import time
from typing import NamedTuple

import pytest
import torch
from torch import Tensor, nn

from nmt_lib.config import SearchConfig
from nmt_lib.data import pad
from nmt_lib.data.vocab import EOS, PAD, UNK
from nmt_lib.decoding import batch_decoder, decode, in_threads
from nmt_lib.paper.steps import Steps
from nmt_lib.search import beam_search, greedy_search


class TinyEncoded(NamedTuple):
    mask: Tensor  # [B, Tx]
    h: Tensor  # [B, Tx, d]

    def select(self, idx: Tensor) -> TinyEncoded:
        return TinyEncoded(*(t.index_select(0, idx) for t in self))


class TinyModel(nn.Module):
    """A random attention model with the interface of nmt_lib.paper.model (K target rows)."""

    def __init__(self, K: int = 5, V: int = 9, d: int = 6, sharp: float = 3.0, seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.X = nn.Parameter(torch.randn(V, d, generator=g))
        self.E = nn.Parameter(torch.randn(K, d, generator=g))
        self.A = nn.Parameter(torch.randn(d, d, generator=g) / d**0.5)
        self.O = nn.Parameter(sharp * torch.randn(K, d, generator=g))
        self.b = nn.Parameter(torch.zeros(K))  # output bias, for tests to tilt the distribution

    def encode(self, x, x_mask):
        return TinyEncoded(x_mask, torch.tanh(self.X[x]))

    def init_state(self, enc):
        m = enc.mask.unsqueeze(-1).float()
        return torch.tanh((enc.h * m).sum(1) / m.sum(1))

    def readout_step(self, enc, s_prev, y_prev):
        G = len(s_prev) // len(enc.h)  # G consecutive states per sentence (a beam)
        h, mask = enc.h.repeat_interleave(G, 0), enc.mask.repeat_interleave(G, 0)
        e = torch.einsum("btd,bd->bt", h, s_prev @ self.A).masked_fill(~mask, -math.inf)
        alpha = e.softmax(-1)  # [B, Tx]
        c = torch.einsum("bt,btd->bd", alpha, h)
        t = s_prev + c + (0 if y_prev is None else self.E[y_prev])
        return (t @ self.O.T + self.b).log_softmax(-1), c, alpha

    def next_state(self, s_prev, y, c):
        return torch.tanh(s_prev @ self.A + self.E[y] - c)

    def steps(self):
        return Steps(self)  # the search's step through init_state, readout_step, next_state


@torch.no_grad()
def exhaustive(model, x, beam_rules, normalize=False):
    """The best (tokens, cost) over every sequence the search may produce (same EOS/len rules)."""
    x, x_mask = pad([x])
    n = int(x_mask.sum())
    min_len, max_len = (
        math.floor(n * beam_rules["min_len_ratio"]),
        math.floor(n * beam_rules["max_len_ratio"]),
    )
    words = [w for w in range(model.E.shape[0]) if w not in (PAD, EOS)]
    if beam_rules.get("ignore_unk"):
        words.remove(UNK)
    enc = model.encode(x, x_mask)
    prefixes, cost = [[]], torch.zeros(1)
    s, y_prev, best = model.init_state(enc), None, (None, math.inf, math.inf)
    for k in range(max_len):
        R = len(prefixes)
        logp, c, _ = model.readout_step(enc.select(torch.zeros(R, dtype=torch.long)), s, y_prev)
        if k >= min_len:  # sequences ending here
            done = cost - logp[:, EOS]
            score = done / (k + 1) if normalize else done
            j = int(score.argmin())
            if float(score[j]) < best[2]:
                best = (prefixes[j] + [EOS], float(done[j]), float(score[j]))
        rows = torch.arange(R).repeat_interleave(len(words))
        ys = torch.tensor(words).repeat(R)
        cost = cost[rows] - logp[rows, ys]
        prefixes = [prefixes[r] + [w] for r in range(R) for w in words]
        s, y_prev = model.next_state(s[rows], ys, c[rows]), ys
    return best


@torch.no_grad()
def reference_beam(model, src, beam, normalize=False, min_len_ratio=0.5, max_len_ratio=3.0):
    """GroundHog's BeamSearch.search for one sentence, written plainly: every (hypothesis, word)
    pair of the live beam is scored, the best beam - finished are kept."""
    x, x_mask = pad([src])
    n = len(src)
    enc = model.encode(x, x_mask)
    live = [([], 0.0)]
    s, finished = model.init_state(enc), []
    for k in range(math.floor(n * max_len_ratio)):
        rows = torch.zeros(len(live), dtype=torch.long)
        y_prev = None if k == 0 else torch.tensor([t[-1] for t, _ in live])
        logp, c, _ = model.readout_step(enc.select(rows), s, y_prev)
        logp[:, PAD] = -math.inf
        if k < math.floor(n * min_len_ratio):
            logp[:, EOS] = -math.inf
        cand = sorted(
            (cost - float(logp[i, w]), i, w)
            for i, (_, cost) in enumerate(live)
            for w in range(logp.shape[1])
        )
        kept = [t for t in cand[: beam - len(finished)] if math.isfinite(t[0])]
        nxt = []
        for cost, i, w in kept:
            (finished if w == EOS else nxt).append((live[i][0] + [w], cost, i))
        if not nxt:
            break
        idx = torch.tensor([i for _, _, i in nxt])
        s = model.next_state(s[idx], torch.tensor([t[-1] for t, _, _ in nxt]), c[idx])
        live = [(t, cost) for t, cost, _ in nxt]
    if not finished:  # our documented fallback: the best live hypothesis
        return (*min(live, key=lambda f: f[1]), False)
    return (*min(finished, key=lambda f: f[1] / len(f[0]) if normalize else f[1])[:2], True)


RULES = dict(min_len_ratio=0.5, max_len_ratio=3.0)


@pytest.mark.parametrize("normalize", [False, True])
def test_beam_equals_plain_groundhog_search(normalize):
    model = TinyModel(K=9, seed=6)
    x, m = pad(SOURCES)
    hyps = beam_search(model, x, m, beam=3, normalize=normalize, **RULES)
    for src, h in zip(SOURCES, hyps, strict=True):
        tokens, cost, fin = reference_beam(model, src, 3, normalize, **RULES)
        assert h.tokens == tokens and h.cost == pytest.approx(cost, abs=1e-4)
        assert h.finished == fin


SOURCES = [[3, 2], [4, 5, 2], [6, 2], [7, 8, 2], [5, 2], [3, 3, 2]]


@pytest.mark.parametrize("normalize", [False, True])
def test_large_beam_finds_the_exhaustive_optimum(normalize):
    model = TinyModel(seed=3)
    beam_differs = 0
    # |x| = 2: at most 6 steps, 3 non-EOS words: 3^5 live prefixes + 121 finished fit a beam of 400
    for src in [[w, EOS] for w in range(3, 9)]:
        best_toks, best_cost, best_score = exhaustive(model, src, RULES, normalize)
        x, m = pad([src])
        (h,) = beam_search(model, x, m, beam=400, normalize=normalize, **RULES)
        assert h.finished and h.tokens == best_toks
        assert h.cost == pytest.approx(best_cost, abs=1e-4)
        assert h.score == pytest.approx(best_score, abs=1e-4)
        beam_differs += greedy_search(model, x, m, **RULES)[0].tokens != best_toks
    assert beam_differs > 0  # the test can tell a beam from greedy on this model


def test_beam_one_equals_greedy():
    model = TinyModel(K=7, seed=1)
    x, m = pad(SOURCES)
    for ignore_unk in (False, True):
        g = greedy_search(model, x, m, ignore_unk=ignore_unk, return_alpha=True, **RULES)
        b = beam_search(model, x, m, beam=1, ignore_unk=ignore_unk, return_alpha=True, **RULES)
        for hg, hb in zip(g, b, strict=True):
            assert hg.tokens == hb.tokens and hg.finished == hb.finished
            assert hg.cost == pytest.approx(hb.cost, abs=1e-5)
            torch.testing.assert_close(hg.alpha, hb.alpha)


def test_batched_equals_one_sentence_at_a_time():
    model = TinyModel(K=9, seed=2)
    x, m = pad(SOURCES)
    for normalize in (False, True):
        batched = beam_search(model, x, m, beam=4, normalize=normalize, return_alpha=True, **RULES)
        for src, hb in zip(SOURCES, batched, strict=True):
            xs, ms = pad([src])
            (h1,) = beam_search(
                model, xs, ms, beam=4, normalize=normalize, return_alpha=True, **RULES
            )
            assert h1.tokens == hb.tokens
            assert h1.cost == pytest.approx(hb.cost, abs=1e-5)
            torch.testing.assert_close(h1.alpha, hb.alpha)
            assert hb.alpha.shape == (len(hb.tokens), len(src))
            torch.testing.assert_close(hb.alpha.sum(1), torch.ones(len(hb.tokens)))


def test_ignore_unk_and_length_rules():
    model = TinyModel(K=6, seed=3)
    with torch.no_grad():
        model.b[UNK] = 6.0  # make <unk> likely
        model.b[EOS] = 2.0  # and EOS tempting early
    srcs = [[3] * n + [2] for n in (1, 2, 3, 5, 7)]
    x, m = pad(srcs)
    plain = beam_search(model, x, m, beam=5, **RULES)
    assert any(UNK in h.tokens for h in plain)  # otherwise the next check proves nothing
    for h in beam_search(model, x, m, beam=5, ignore_unk=True, **RULES) + greedy_search(
        model, x, m, ignore_unk=True, **RULES
    ):
        assert UNK not in h.tokens and PAD not in h.tokens
    for rules in (RULES, dict(min_len_ratio=1.0, max_len_ratio=2.0)):
        for src, hb, hg in zip(
            srcs,
            beam_search(model, x, m, beam=5, **rules),
            greedy_search(model, x, m, **rules),
            strict=True,
        ):
            for h in (hb, hg):
                n_min = math.floor(len(src) * rules["min_len_ratio"])
                n_max = math.floor(len(src) * rules["max_len_ratio"])
                assert EOS not in h.tokens[:-1]  # EOS only at the end
                assert len(h.tokens) <= n_max
                if h.finished:
                    assert h.tokens[-1] == EOS and len(h.tokens) >= n_min + 1


def test_nothing_finished_falls_back_to_best_live():
    model = TinyModel(K=5, seed=4)
    with torch.no_grad():
        model.b[EOS] = -100.0  # EOS never ranks among the best
    x, m = pad([[3, 2]])
    (h,) = beam_search(model, x, m, beam=2, **RULES)
    (g,) = greedy_search(model, x, m, **RULES)
    assert not h.finished and len(h.tokens) == 6 and EOS not in h.tokens
    assert not g.finished and len(g.tokens) == 6
    assert h.cost <= g.cost + 1e-5


def test_decode_keeps_input_order():
    model = TinyModel(K=7, seed=5)
    hyps = decode(model, SOURCES, SearchConfig(beam=3, batch_size=2, **RULES))
    for src, h in zip(SOURCES, hyps, strict=True):
        x, m = pad([src])
        assert beam_search(model, x, m, beam=3, **RULES)[0].tokens == h.tokens
    greedy = decode(model, SOURCES, SearchConfig(batch_size=4, **RULES), greedy=True)
    assert [h.tokens for h in greedy] == [
        h.tokens for h in greedy_search(model, *pad(SOURCES), **RULES)
    ]


def in_new_thread(f):
    out = []
    t = threading.Thread(target=lambda: out.append(f()))
    t.start()
    t.join()
    return out[0]


def test_in_threads_keeps_order_autocast_and_errors():
    threads, caller = torch.get_num_threads(), threading.get_ident()
    later = in_new_thread(torch.get_num_threads)  # what threads started later get
    seen = []

    def f(i):
        seen.append(threading.get_ident())
        if i == 5:
            raise ValueError("item five")
        amp = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
        return i * i, torch.get_num_threads(), *amp

    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert list(in_threads(f, range(4), 2)) == [
            (i * i, 1, True, torch.bfloat16) for i in range(4)
        ]
    assert caller not in seen and torch.get_num_threads() == threads
    assert in_new_thread(torch.get_num_threads) == later
    with pytest.raises(ValueError, match="item five"):
        list(in_threads(f, range(8), 3))
    seen.clear()

    def slow(i):
        seen.append(i)
        if i == 0:
            raise ValueError("item zero")
        time.sleep(0.2)

    with pytest.raises(ValueError, match="item zero"):  # the items not yet started are dropped
        list(in_threads(slow, range(20), 2))
    assert len(seen) < 20
    assert torch.get_num_threads() == threads and in_new_thread(torch.get_num_threads) == later
    seen.clear()  # one worker: in the caller's thread, with its thread count
    assert [r[:2] for r in in_threads(f, range(3), 1)] == [(i * i, threads) for i in range(3)]
    assert set(seen) == {caller}


def test_decode_in_threads_is_the_same(backend):
    """``workers=3``: the same hypotheses as one batch at a time, under the caller's autocast."""
    from nmt_lib.backend import backend as backend_named
    from nmt_lib.config import model_config
    from nmt_lib.models import build_model

    torch.manual_seed(0)
    cfg = model_config(arch="RNNsearch", src_vocab=13, trg_vocab=11, m=8, n=10, n_align=6, l=4)
    model = build_model(cfg, backend_named(backend)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(30 if p.dim() > 1 else 1)
    srcs = [[3 + (5 * i + j) % 10 for j in range(1 + i % 6)] + [EOS] for i in range(11)]

    def run(workers):
        return decode(model, srcs, SearchConfig(beam=3, batch_size=2, **RULES), workers=workers)

    fp32 = run(1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        one, many = run(1), run(3)
    assert [h.tokens for h in many] == [h.tokens for h in one]
    assert [h.cost for h in many] == pytest.approx([h.cost for h in one], abs=1e-6)
    # bf16 changes the costs here, so that a worker without the caller's autocast would be seen
    assert max(abs(a.cost - b.cost) for a, b in zip(fp32, one, strict=True)) > 1e-3


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_real_model(arch, backend):
    from nmt_lib.backend import backend as backend_named
    from nmt_lib.config import ModelConfig
    from nmt_lib.models import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(
        arch=arch, src_vocab=13, trg_vocab=11, m=8, n=10, n_align=6, l=4, output_rank=5
    )
    model = build_model(cfg, backend_named(backend)).eval()
    with torch.no_grad():  # sharper than the initialisation so that decoding is not trivial
        for p in model.parameters():
            p.mul_(30 if p.dim() > 1 else 1)
    srcs = [[5, 6, 7, 2], [8, 2], [9, 10, 11, 12, 3, 2], [4, 4, 2]]
    x, m = pad(srcs)
    b1 = beam_search(model, x, m, beam=1, return_alpha=True, **RULES)
    g = greedy_search(model, x, m, return_alpha=True, **RULES)
    assert [h.tokens for h in b1] == [h.tokens for h in g]
    batched = beam_search(model, x, m, beam=5, return_alpha=True, **RULES)
    for src, hb in zip(srcs, batched, strict=True):
        (h1,) = beam_search(model, *pad([src]), beam=5, return_alpha=True, **RULES)
        assert h1.tokens == hb.tokens and h1.cost == pytest.approx(hb.cost, abs=1e-4)
        # the search's cost is the model's own score of the sequence
        y, ym = pad([hb.tokens])
        with torch.no_grad():
            score = model.score(*pad([src]), y, ym)
        assert -float(score) == pytest.approx(hb.cost, abs=1e-4)
        if arch == "RNNsearch":
            assert hb.alpha.shape == (len(hb.tokens), len(src))
        else:
            assert hb.alpha is None


@pytest.fixture(params=["kernel", "torch ops"])
def fused(request):
    """The fast ``best_words``' ``fused``: the compiled kernels (:mod:`nmt_lib.fast.kernels`), or
    None (PyTorch operations)."""
    from nmt_lib.fast import kernels

    if request.param == "torch ops":
        return None
    if kernels.library() is None:
        pytest.skip("no C compiler with OpenMP: the kernels are not built")
    return kernels


@pytest.mark.parametrize("K", [7, 80, 1000, 10003, 30001])
@pytest.mark.parametrize("k", [1, 10])
def test_topk_rows_equals_torch_topk(K, k):
    """Same values as ``torch.topk`` and indices that hold them, through the recursion, the tail
    columns, masked (-inf) columns and ties."""
    from nmt_lib.fast.steps import topk_rows

    g = torch.Generator().manual_seed(K + k)
    x = torch.randn(37, K, generator=g)
    x[:, :3] = -math.inf
    x[5] = 0.5  # a row of ties
    x[6, -1] = 100.0  # the best in the tail
    ref = x.topk(min(k, K), dim=1)
    val, idx = topk_rows(x, min(k, K))
    assert torch.equal(val, ref.values)
    assert torch.equal(x.gather(1, idx), val)
    assert all(len(set(row)) == len(row) for row in idx.tolist())  # no column twice


def test_beam_with_a_large_vocabulary_equals_plain_topk(fused, monkeypatch):
    """The beam over a 5000-word vocabulary (where topk_rows does its own selection) finds what
    it finds with torch.topk."""
    from nmt_lib.config import ModelConfig
    from nmt_lib.fast import accelerate
    from nmt_lib.fast import steps as fast_steps
    from nmt_lib.paper.model import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab=50, trg_vocab=5000, m=8, n=8, n_align=8, l=4, output_rank=4, init="fanin"
    )
    model = accelerate(build_model(cfg).eval(), compiled=fused is not None)
    x, x_mask = pad([[5, 6, 7, 8, EOS], [9, 10, EOS]])
    fast = beam_search(model, x, x_mask, beam=5)
    monkeypatch.setattr(fast_steps, "topk_rows", lambda t, k: t.topk(k, dim=1))
    plain = beam_search(model, x, x_mask, beam=5)
    assert [(h.tokens, h.cost) for h in fast] == [(h.tokens, h.cost) for h in plain]


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("ignore_unk", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_best_words_equal_masked_log_softmax_topk(k, ignore_unk, dtype, fused):
    """``best_words`` (bias added and log-softmax computed a few rows at a time: 2^17 columns
    give pieces of 4 rows, 4 + 4 + 2) equals the log-softmax over all words, then the masks, then
    ``topk``; and on log-probabilities (``normalized``) only the masks and ``topk``. The
    reference's ``best_words`` on the log-softmax gives the same."""
    from nmt_lib.fast.steps import best_words
    from nmt_lib.paper import steps

    g = torch.Generator().manual_seed(k)
    R, K = 10, 1 << 17
    z, b = (3 * torch.randn(R, K, generator=g)).to(dtype), torch.randn(K, generator=g)
    z[:, EOS] = 30  # EOS the best word where allowed
    no_eos = torch.arange(R) % 3 == 0
    logp = (z.float() + b).log_softmax(-1)  # over all words, the excluded ones included
    masked = logp.clone()
    masked[:, PAD] = -math.inf
    if ignore_unk:
        masked[:, UNK] = -math.inf
    masked[no_eos, EOS] = -math.inf
    ref = masked.topk(k, dim=1)
    lp, w = best_words(z.clone(), k, no_eos, ignore_unk, b, fused=fused)
    assert torch.equal(w, ref.indices)
    torch.testing.assert_close(lp, ref.values, rtol=0, atol=1e-5)
    assert (w[~no_eos, 0] == EOS).all() and (w[no_eos] != EOS).all()
    lp, w = best_words(logp.clone(), k, no_eos, ignore_unk, normalized=True, fused=fused)
    assert torch.equal(w, ref.indices) and torch.equal(lp, ref.values)
    lp, w = steps.best_words(logp, k, no_eos, ignore_unk)
    assert torch.equal(w, ref.indices) and torch.equal(lp, ref.values)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_best_words_log_prob_of_a_near_certain_word_is_accurate(dtype, fused):
    """``log p`` of a word with p ≈ 1 is a tiny negative number: computed as ``(x - max) - log Σ
    exp(x - max)``, not as the difference of two large ones (``x - logsumexp``)."""
    from nmt_lib.fast.steps import best_words

    z = torch.full((1, 10), 30.0, dtype=dtype)
    z[0, 7] = 45.0
    expected = -math.log1p(9 * math.exp(-15.0))  # -2.75e-6: p_7 ≈ 1
    lp, w = best_words(z.clone(), 1, torch.zeros(1, dtype=torch.bool), False, fused=fused)
    assert w.item() == 7
    # float32: log Σ exp rounds 1 + 2.75e-6 to float32 (≤ 2 %); x - logsumexp: ulp(45), 38 %
    assert lp.item() == pytest.approx(expected, rel=1e-9 if dtype == torch.float64 else 0.05)


def test_finished_hypotheses_are_not_carried():
    """After hypotheses end, the next steps compute only the live ones (GroundHog's beam -
    finished; in a batch, as many per sentence as the sentence with the most); the result is the
    plain search's."""
    model = TinyModel(K=9, seed=6)
    with torch.no_grad():
        model.b[EOS] = 2.0  # hypotheses end early
    step = model.readout_step
    narrowed = False
    for src in SOURCES:
        per_sentence = []  # hypotheses per sentence at each step
        model.readout_step = lambda e, s, y, p=per_sentence: (
            p.append(len(s) / len(e.h)) or step(e, s, y)
        )
        (h,) = beam_search(model, *pad([src]), beam=4, **RULES)
        assert per_sentence[0] == 1 and max(per_sentence) == 4
        narrowed |= min(per_sentence[1:]) < 4
        tokens, cost, finished = reference_beam(model, src, 4)
        assert (h.tokens, h.finished) == (tokens, finished) and h.cost == pytest.approx(
            cost, abs=1e-5
        )
    assert narrowed


def test_length_batches_put_similar_lengths_together_longest_first():
    from nmt_lib.decoding import length_batches

    xs = [[1] * n for n in (3, 7, 1, 5, 7, 2)]
    batches = length_batches(xs, 4)
    assert batches == [[1, 4, 3, 0], [5, 2]]
    assert sorted(i for b in batches for i in b) == list(range(len(xs)))
    assert length_batches([], 4) == []


def test_journal_reads_back_complete_batches_and_drops_a_torn_line(tmp_path):
    """What a batch's record keeps comes back as it was; a torn last line (an interruption while
    it was written) and a record of another batching are not read, and the file is cut there."""
    from nmt_lib.decoding import Journal
    from nmt_lib.search import Hypothesis

    path, batches = tmp_path / "j.jsonl", [[0, 1], [2]]
    book = Journal(path, batches)
    assert book.done() == {}
    hyps = [Hypothesis([4, 2], 1.5, 0.75, True), Hypothesis([5], 2.0, 2.0, False)]
    book.write(0, hyps)
    book.close()
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"batch": 1, "size": 1, "hy')  # torn
    again = Journal(path, batches)
    assert again.done() == {0: hyps} and path.read_bytes() == whole
    again.close()
    other = Journal(path, [[0], [1, 2]])
    assert other.done() == {}  # other batches: nothing is trusted
    other.close()


def test_batch_decoder_makes_the_steps_once_per_thread_and_decodes_the_batch():
    model = TinyModel(seed=1)
    made = []

    def make_steps():
        made.append(1)
        return model.steps()

    srcs = [[5, 6, 7, 2], [8, 2], [3, 4, 2]]
    decode = batch_decoder(model, srcs, SearchConfig(beam=3, **RULES), False, None, make_steps)
    a, b = decode([0, 2]), decode([1])
    assert made == [1] and len(a) == 2 and len(b) == 1
    x, m = pad([srcs[0], srcs[2]])
    direct = beam_search(model, x, m, beam=3, **RULES)
    assert [h.tokens for h in a] == [h.tokens for h in direct]


def test_the_beam_and_the_finished_hypotheses_keep_their_rows_together():
    """``Beam.grow`` extends each kept pair's parent, ``select`` keeps sentences and columns with
    everything of theirs, ``Finished.record`` stores a hypothesis under its sentence's index."""
    from nmt_lib.search import Beam, Finished

    beam = Beam.start(3, 4, return_alpha=True, device="cpu")
    parent = torch.zeros(3, 2, dtype=torch.long)
    word = torch.tensor([[5, 6], [7, EOS], [8, 9]])
    alpha = torch.arange(12.0).view(3, 4)
    cost = torch.tensor([[1.0, 2.0], [3.0, math.inf], [5.0, 6.0]])
    grown = beam.grow(parent, word, alpha, cost, word == EOS)
    assert grown.words.squeeze(-1).tolist() == word.tolist() and grown.n_fin.tolist() == [0, 1, 0]
    assert torch.equal(grown.alpha[:, 1, 0], alpha)  # each hypothesis, its parent's attention
    kept = grown.select(torch.tensor([0, 2]), torch.tensor([[1, 0], [0, 1]]))
    assert kept.ids.tolist() == [0, 2] and kept.words.squeeze(-1).tolist() == [[6, 5], [8, 9]]
    assert kept.cost.tolist() == [[2.0, 1.0], [5.0, 6.0]] and torch.equal(
        kept.alpha[1, 0, 0], alpha[2]
    )
    best = Finished.empty(3, 5, 4, return_alpha=True, device="cpu")
    best.record(
        kept,
        torch.tensor([False, True]),
        torch.tensor([1]),
        torch.tensor([0.5]),
        torch.tensor([6.0]),
        True,
    )
    (h0, _, h2) = best.hypotheses(torch.ones(3, 4, dtype=torch.bool), attention=True)
    assert h2.tokens == [9] and h2.cost == 6.0 and h2.score == 0.5 and h2.finished
    assert h0.tokens == [] and h0.score == math.inf and torch.equal(h2.alpha[0], alpha[2])
