"""RNNsearch and RNNencdec end to end: literal equations, the step interface, padding invariance,
parameter counts (PAPER.md §2.5) and initialisation (App. B.1)."""

import copy
import dataclasses
import math

import pytest
import torch
from torch.func import functional_call

from nmt_lib import models
from nmt_lib.backend import backend as backend_named
from nmt_lib.config import ModelConfig, model_config
from nmt_lib.fast import accelerate
from nmt_lib.fast.model import FastDecoder, FastModel
from nmt_lib.fast.steps import word_projections
from nmt_lib.paper.decoder import Decoder
from nmt_lib.paper.model import Encoded, build_model, count_parameters, forward_macs

CFG = ModelConfig(src_vocab=13, trg_vocab=11, m=5, n=4, n_align=3, l=3, output_rank=2)
B, Tx, Ty, n, l = 3, 6, 5, 4, 3
X_LENGTHS, Y_LENGTHS = [6, 3, 2], [2, 5, 4]
ARCHS = ["RNNsearch", "RNNencdec"]


def sig(v):
    return 1 / (1 + torch.exp(-v))


def setup(arch, seed=0, backend="reference", **overrides):
    torch.manual_seed(seed)
    model = build_model(dataclasses.replace(CFG, arch=arch, **overrides)).double()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)  # large random weights: App. B.1's tiny ones would hide mistakes
    model = accelerate(model) if backend == "fast" else model
    x_mask = torch.tensor([[j < L for j in range(Tx)] for L in X_LENGTHS])
    y_mask = torch.tensor([[i < L for i in range(Ty)] for L in Y_LENGTHS])
    x = torch.randint(3, CFG.src_vocab, (B, Tx)).masked_fill(~x_mask, 0)
    y = torch.randint(3, CFG.trg_vocab, (B, Ty)).masked_fill(~y_mask, 0)
    return model, x, x_mask, y, y_mask


def gru(P, p, inp, h, c=None):
    """App. A.1.1 / A.2.2, one step; ``c`` enters all three pre-activations through C, C_z, C_r."""
    ctx = {k: (P["decoder." + k] @ c if c is not None else 0) for k in ("C", "C_z", "C_r")}
    r = sig(P[p + "W_r"] @ inp + P[p + "U_r"] @ h + ctx["C_r"])
    z = sig(P[p + "W_z"] @ inp + P[p + "U_z"] @ h + ctx["C_z"])
    h_tilde = torch.tanh(P[p + "W"] @ inp + P[p + "b"] + P[p + "U"] @ (r * h) + ctx["C"])
    return (1 - z) * h + z * h_tilde


def reference(model, x, y, arch):
    """Per sentence, unpadded, column vectors: App. A.2 in GroundHog's order (PAPER.md §2.4)."""
    P = {k: v.detach() for k, v in model.named_parameters()}
    logp = torch.zeros(B, Ty, dtype=torch.float64)
    alpha = torch.zeros(B, Ty, Tx, dtype=torch.float64)
    zero = torch.zeros(n, dtype=torch.float64)
    for b in range(B):
        Lx, Ly = X_LENGTHS[b], Y_LENGTHS[b]
        e = [P["encoder.E_bar"][x[b, j]] + P["encoder.b_E"] for j in range(Lx)]  # ē(x_j)
        h_fwd, h_bwd = [zero], [zero]  # h→_0, h←_{Lx+1}
        for j in range(Lx):
            h_fwd.append(gru(P, "encoder.forward_gru.", e[j], h_fwd[-1]))
        if arch == "RNNencdec":
            c = h_fwd[-1]  # h→_{T_x}: after reading EOS
            s = torch.tanh(P["decoder.W_s"] @ c + P["decoder.b_s"])
        else:
            for j in reversed(range(Lx)):
                h_bwd.insert(0, gru(P, "encoder.backward_gru.", e[j], h_bwd[0]))
            h = [torch.cat([h_fwd[j + 1], h_bwd[j]]) for j in range(Lx)]  # [h→_j; h←_j]
            s = torch.tanh(P["decoder.W_s"] @ h_bwd[0] + P["decoder.b_s"])  # s_0 from h←_1
        for i in range(Ly):
            if arch == "RNNsearch":
                W_a, U_a, v_a = (P["decoder.attention." + k] for k in ("W_a", "U_a", "v_a"))
                energies = [float(v_a @ torch.tanh(W_a @ s + U_a @ h[j])) for j in range(Lx)]
                total = sum(math.exp(v) for v in energies)
                c = 0
                for j in range(Lx):
                    alpha[b, i, j] = math.exp(energies[j]) / total
                    c = c + alpha[b, i, j] * h[j]
            t_tilde = P["decoder.U_o"] @ s + P["decoder.b_o"] + P["decoder.C_o"] @ c
            if i > 0:  # no BOS: the previous-word term is 0 at the first step
                e_prev = P["decoder.E"][y[b, i - 1]] + P["decoder.b_E"]
                t_tilde = t_tilde + P["decoder.V_o"] @ e_prev
            t = torch.stack([max(t_tilde[2 * k], t_tilde[2 * k + 1]) for k in range(l)])
            logits = P["decoder.W2"] @ (P["decoder.W1"] @ t) + P["decoder.b_y"]
            logp[b, i] = logits[y[b, i]] - math.log(sum(math.exp(v) for v in logits.tolist()))
            e_y = P["decoder.E"][y[b, i]] + P["decoder.b_E"]
            s = gru(P, "decoder.gru.", e_y, s, c)  # the word just emitted y_i, the same c_i
    return logp, alpha


@pytest.mark.parametrize("arch", ARCHS)
def test_model_equals_literal_equations(arch, backend):
    model, x, x_mask, y, y_mask = setup(arch, backend=backend)
    logp, alpha = model(x, x_mask, y, y_mask)
    logp_ref, alpha_ref = reference(model, x, y, arch)
    torch.testing.assert_close(logp, logp_ref, rtol=1e-12, atol=1e-12)
    if arch == "RNNsearch":
        torch.testing.assert_close(alpha, alpha_ref, rtol=1e-12, atol=1e-12)
    else:
        assert alpha is None
    torch.testing.assert_close(model.score(x, x_mask, y, y_mask), logp_ref.sum(1))


@pytest.mark.parametrize("arch", ARCHS)
def test_step_interface_reproduces_forward(arch, backend):
    model, x, x_mask, y, y_mask = setup(arch, backend=backend)
    logp, alpha = model(x, x_mask, y, y_mask)
    enc = model.encode(x, x_mask)
    s, y_prev = model.init_state(enc), None
    for i in range(Ty):
        logp_next, c, alpha_i = model.readout_step(enc, s, y_prev)
        assert logp_next.shape == (B, CFG.trg_vocab)
        torch.testing.assert_close(logp_next.exp().sum(-1), torch.ones(B, dtype=torch.float64))
        real = y_mask[:, i]
        torch.testing.assert_close(logp_next[real, y[real, i]], logp[real, i], rtol=0, atol=1e-13)
        if arch == "RNNsearch":
            torch.testing.assert_close(alpha_i[real], alpha[real, i], rtol=0, atol=1e-13)
        else:
            assert alpha_i is None
        s, y_prev = model.next_state(s, y[:, i], c), y[:, i]


@pytest.mark.parametrize("arch", ARCHS)
def test_sentence_alone_equals_inside_padded_batch(arch, backend):
    model, x, x_mask, y, y_mask = setup(arch, backend=backend)
    scores = model.score(x, x_mask, y, y_mask)
    for b in range(B):
        Lx, Ly = X_LENGTHS[b], Y_LENGTHS[b]
        alone = model.score(
            x[b : b + 1, :Lx], x_mask[b : b + 1, :Lx], y[b : b + 1, :Ly], y_mask[b : b + 1, :Ly]
        )
        torch.testing.assert_close(alone[0], scores[b], rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("arch", ARCHS)
def test_encoded_select_reorders_every_field(arch, backend):
    model, x, x_mask, *_ = setup(arch, backend=backend)
    enc = model.encode(x, x_mask)
    idx = torch.tensor([2, 0, 0, 1])  # reorder and repeat, as a beam does
    sel = enc.select(idx)
    assert isinstance(sel, Encoded)
    for a, b in zip(enc, sel, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.equal(a[idx], b)
    s = model.init_state(sel)
    torch.testing.assert_close(s, model.init_state(enc)[idx])
    torch.testing.assert_close(
        model.readout_step(sel, s, None)[0],
        model.readout_step(enc, model.init_state(enc), None)[0][idx],
    )


@pytest.mark.parametrize("arch", ARCHS)
def test_readout_with_several_states_per_sentence(arch):
    """``G`` consecutive states per encoded sentence (a beam that shares the encoding) give what
    the encoding repeated for every state gives."""
    model, x, x_mask, y, *_ = setup(arch)
    G = 3
    enc = model.encode(x, x_mask)
    rep = enc.select(torch.arange(x.shape[0]).repeat_interleave(G))
    s = torch.randn(G * x.shape[0], model.cfg.n_dec or model.cfg.n, dtype=torch.float64)
    y_prev = y[:, 0].repeat_interleave(G)
    for prev in (None, y_prev):
        logp, c, alpha = model.readout_step(enc, s, prev)
        logp_ref, c_ref, alpha_ref = model.readout_step(rep, s, prev)
        torch.testing.assert_close(logp, logp_ref, rtol=1e-13, atol=1e-13)
        torch.testing.assert_close(c, c_ref, rtol=1e-13, atol=1e-13)
        if alpha_ref is not None:
            torch.testing.assert_close(alpha, alpha_ref, rtol=1e-13, atol=1e-13)
        full = model.decoder.logits(s, None if prev is None else model.decoder.embed(prev), c)
        torch.testing.assert_close(full.log_softmax(-1), logp, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("table", [False, True])
def test_fast_steps_equal_the_reference_steps(arch, dtype, table):
    """The fast backend's steps (:class:`nmt_lib.fast.steps.DecodeSteps`) give the
    log-probabilities, weights and states of the reference's (:class:`nmt_lib.paper.steps.Steps`), with
    the beam's reordering of rows between steps: to rounding in float64 and float32 (the compiled
    kernels), to bf16's in autocast (products merged, so rounded in another order); also with the
    word products read from their table (``word_projections``) and a full-rank output layer
    (``table``)."""
    model, x, x_mask, y, _ = setup(arch, output_rank=None if table else CFG.output_rank)
    model = model.to(torch.float32 if dtype == torch.bfloat16 else dtype)
    fast_model = accelerate(copy.deepcopy(model))
    tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 0.1}[dtype]
    G, gen = 2, torch.Generator().manual_seed(1)
    with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=dtype == torch.bfloat16):
        enc = model.encode(x, x_mask)
        words = word_projections(fast_model.steps()) if table else None
        fast, ref = fast_model.steps(words), model.steps()
        states = [fast.start(enc), ref.start(enc)]
        for _ in range(4):
            outs = [steps.readout(enc, st) for steps, st in zip((fast, ref), states, strict=True)]
            ((z, b), alpha, carry), (logp_ref, alpha_ref, carry_ref) = outs
            torch.testing.assert_close(
                (z.double() + b).log_softmax(-1), logp_ref.double(), rtol=tol, atol=tol
            )
            if alpha_ref is None:
                assert alpha is None
            else:
                torch.testing.assert_close(alpha.double(), alpha_ref.double(), rtol=tol, atol=tol)
            # the next rows: G hypotheses per sentence, from random parents of the same sentence
            R = z.shape[0]
            parents = torch.randint(0, R // x.shape[0], (x.shape[0], G), generator=gen)
            rows = (torch.arange(x.shape[0])[:, None] * (R // x.shape[0]) + parents).view(-1)
            words = torch.randint(3, CFG.trg_vocab, (rows.numel(),), generator=gen)
            states = [
                steps.advance(tuple(t[rows] for t in c), words)
                for steps, c in zip((fast, ref), (carry, carry_ref), strict=True)
            ]
            torch.testing.assert_close(states[0][0], states[1][0], rtol=tol, atol=tol)


def test_word_projections_are_the_steps_products_and_decode_uses_them(monkeypatch):
    """``word_projections(steps, rows)``: None below one row per target word; else row ``w`` is
    what the fast steps multiply out for the word ``w`` (bf16 under autocast). ``decode`` with a
    fast model computes it once (``prepared_steps``), where the searches advance enough
    hypotheses, gives it to the steps of every thread, and decodes as without it; the same model
    on the reference backend makes its own steps."""
    from nmt_lib import decoding
    from nmt_lib.config import SearchConfig
    from nmt_lib.fast import model as fast_model

    model = setup("RNNsearch", backend="fast")[0].float()
    K, n, l2 = CFG.trg_vocab, CFG.n, 2 * CFG.l
    steps = model.steps()
    assert word_projections(steps, rows=K - 1) is None
    words = torch.arange(K)
    with torch.no_grad():
        table = word_projections(steps, rows=K)
        assert table.shape == (K, 3 * n + l2)
        torch.testing.assert_close(table, steps.times_Y(model.decoder.embed(words)))
        with torch.autocast("cpu", torch.bfloat16):
            assert word_projections(model.steps()).dtype == torch.bfloat16
    xs = [[3, 4, 5, 2], [6, 7, 2], [8, 2]]  # 9 words, beam 3: 27 rows >= K
    calls, given = [], []
    orig_steps = model.steps
    monkeypatch.setattr(
        fast_model,
        "word_projections",
        lambda s, rows: calls.append(rows) or word_projections(s, rows),
    )
    monkeypatch.setattr(model, "steps", lambda w=None: given.append(w) or orig_steps(w))
    with_table = decoding.decode(model, xs, SearchConfig(beam=3, batch_size=2), workers=2)
    assert calls == [27] and given[0] is None  # the steps that make the table, then each thread's
    assert len(given) >= 2 and all(w is given[1] is not None for w in given[1:])
    reference = models.build_model(model.cfg, backend_named("reference")).float().eval()
    reference.load_state_dict(model.state_dict())
    assert decoding.steps_maker(reference, 27) == reference.steps  # the model's own steps
    plain = decoding.decode(reference, xs, SearchConfig(beam=3, batch_size=2))
    assert [h.tokens for h in with_table] == [h.tokens for h in plain]
    assert [h.cost for h in with_table] == pytest.approx([h.cost for h in plain], rel=1e-5)


def test_model_gradcheck(backend):
    model, x, x_mask, y, y_mask = setup("RNNsearch", backend=backend, gate_bias=True)
    names = [k for k, _ in model.named_parameters()]

    def f(*params):
        return functional_call(model, dict(zip(names, params, strict=True)), (x, x_mask, y, y_mask))

    args = tuple(p.detach().clone().requires_grad_() for p in model.parameters())
    assert torch.autograd.gradcheck(f, args, fast_mode=True)


def test_autocast_bf16_log_softmax_in_float32(backend):
    torch.manual_seed(0)
    model = build_model(dataclasses.replace(CFG, m=16, n=16, n_align=16, l=8, output_rank=8))
    model = accelerate(model) if backend == "fast" else model
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(10)
    _, x, x_mask, y, y_mask = setup("RNNsearch")
    logp32, _ = model(x, x_mask, y, y_mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logp, alpha = model(x, x_mask, y, y_mask)
        enc = model.encode(x, x_mask)
        logp_next, _, _ = model.readout_step(enc, model.init_state(enc), None)
    assert logp.dtype == torch.float32 and logp_next.dtype == torch.float32
    torch.testing.assert_close(logp, logp32, rtol=0, atol=0.05)
    torch.testing.assert_close(logp_next.exp().sum(-1), torch.ones(B), rtol=0, atol=1e-5)
    (-logp.sum()).backward()
    assert all(p.grad is not None and p.grad.isfinite().all() for p in model.parameters())


PAPER_COUNTS = {  # PAPER.md §2.5, GroundHog-exact (ModelConfig defaults)
    "RNNsearch": 84_349_101,
    "RNNencdec": 72_487_101,
}
PAPER_BREAKDOWN = {  # PAPER.md §2.5, RNNsearch, millions to 2 decimals
    "src emb": (["encoder.E_bar", "encoder.b_E"], 18.60),
    "enc GRUs": (["encoder.forward_gru.", "encoder.backward_gru."], 9.72),
    "trg emb": (["decoder.E", "decoder.b_E"], 18.60),
    "dec GRU": (["decoder.gru.", "decoder.C", "decoder.C_z", "decoder.C_r"], 10.86),
    "attention": (["decoder.attention."], 3.00),
    "init": (["decoder.W_s", "decoder.b_s"], 1.00),
    "readout": (["decoder.U_o", "decoder.b_o", "decoder.V_o", "decoder.C_o"], 3.62),
    "output": (["decoder.W1", "decoder.W2", "decoder.b_y"], 18.94),
}


def meta_model(**kw):
    with torch.device("meta"):  # shapes only: no memory, no time
        return build_model(ModelConfig(**kw))


@pytest.mark.parametrize("arch", ARCHS)
def test_parameter_counts_at_paper_sizes(arch):
    assert count_parameters(meta_model(arch=arch)) == PAPER_COUNTS[arch]


def test_parameter_breakdown_at_paper_sizes():
    params = dict(meta_model().named_parameters())
    seen = set()
    for what, (prefixes, millions) in PAPER_BREAKDOWN.items():
        names = {
            k for k in params for p in prefixes if k == p or (p.endswith(".") and k.startswith(p))
        }
        seen |= names
        assert round(sum(params[k].numel() for k in names) / 1e6, 2) == millions, what
    assert seen == set(params)


@pytest.mark.parametrize("arch,millions", [("RNNsearch", 80.4), ("RNNencdec", 68.6)])
def test_parameter_counts_paper_literal(arch, millions):
    """§2.5's paper-literal variants (K=30000, full W_o, all GRU biases), given as ≈."""
    model = meta_model(
        arch=arch, src_vocab=30000, trg_vocab=30000, output_rank=None, gate_bias=True
    )
    assert round(count_parameters(model) / 1e6, 1) == millions


@pytest.mark.parametrize("arch", ARCHS)
def test_initialisation_statistics(arch):
    torch.manual_seed(0)
    cfg = model_config(
        arch=arch, src_vocab=300, trg_vocab=300, m=64, n=128, n_align=96, l=64, output_rank=48
    )
    n_orthogonal = 0
    for name, p in build_model(cfg).named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf in ("U", "U_z", "U_r"):
            torch.testing.assert_close(p.t() @ p, torch.eye(p.shape[0]), rtol=0, atol=1e-5)
            n_orthogonal += 1
        elif leaf == "v_a" or leaf.startswith("b"):
            assert (p == 0).all(), name
        else:
            std = 0.001 if leaf in ("W_a", "U_a") else 0.01
            assert abs(p.std().item() / std - 1) < 0.05, name
            assert abs(p.mean().item()) < 5 * std / math.sqrt(p.numel()), name
    assert n_orthogonal == (9 if arch == "RNNsearch" else 6)


@pytest.mark.parametrize("rank", [None, 6])
def test_fast_model_is_built_as_such_with_the_paper_names_and_values(rank):
    """The fast backend builds a model of the fast classes (no paper module behind it) whose
    parameters have the paper model's names and, from the same seed, its values; its W_o (W2)
    ``[K, l]`` is laid out column-major, the layout its output matmul wants, the paper model's
    row-major. A fast copy (``accelerate``) leaves the paper model's layout and classes as they
    were, and shares none of its parameters."""
    cfg = ModelConfig(src_vocab=30, trg_vocab=25, m=8, n=6, n_align=5, l=4, output_rank=rank)
    name = "W_o" if rank is None else "W2"
    torch.manual_seed(0)
    paper = build_model(cfg)
    torch.manual_seed(0)
    fast = models.build_model(cfg, backend_named("fast"))
    assert isinstance(fast, FastModel) and isinstance(fast.decoder, FastDecoder)
    assert getattr(fast.decoder, name).t().is_contiguous()
    assert getattr(paper.decoder, name).is_contiguous()
    mine = dict(paper.named_parameters())
    assert list(mine) == [k for k, _ in fast.named_parameters()]
    for k, p in fast.named_parameters():
        assert torch.equal(p, mine[k]), k
    copy_ = accelerate(paper)
    assert getattr(paper.decoder, name).is_contiguous() and type(paper.decoder) is Decoder
    assert getattr(copy_.decoder, name).t().is_contiguous()
    for k, p in copy_.named_parameters():
        assert p is not mine[k] and torch.equal(p, mine[k]), k


@pytest.mark.parametrize("arch", ARCHS)
def test_a_hook_on_a_built_model_fires_once_per_forward(arch):
    """A forward hook registered on a model the fast backend built, and on its encoder, fires once
    per forward of that model, and never for another model (a paper model, or the paper model a
    fast copy was made of)."""
    cfg = dataclasses.replace(CFG, arch=arch)
    paper = build_model(cfg)
    for fast in (models.build_model(cfg, backend_named("fast")), accelerate(paper)):
        calls = []
        fast.register_forward_hook(lambda *_, calls=calls: calls.append("model"))
        fast.encoder.register_forward_hook(lambda *_, calls=calls: calls.append("encoder"))
        x_mask = torch.ones(2, 3, dtype=torch.bool)
        x, y = torch.randint(3, 13, (2, 3)), torch.randint(3, 11, (2, 4))
        fast(x, x_mask, y, torch.ones_like(y, dtype=torch.bool))
        assert sorted(calls) == ["encoder", "model"]
        paper(x, x_mask, y, torch.ones_like(y, dtype=torch.bool))
        assert sorted(calls) == ["encoder", "model"]


def test_fanin_init_scales_by_fan_in_and_keeps_recurrent_orthogonal():
    from nmt_lib.config import ModelConfig

    cfg = ModelConfig(src_vocab=400, trg_vocab=400, m=64, n=96, n_align=80, l=48, init="fanin")
    model = build_model(cfg)
    params = dict(model.named_parameters())
    for name, p in params.items():
        leaf = name.rsplit(".", 1)[-1]
        if leaf.startswith("b"):
            assert torch.count_nonzero(p) == 0, name
        elif leaf in ("U", "U_z", "U_r"):
            torch.testing.assert_close(p.T @ p, torch.eye(p.shape[1]), atol=1e-5, rtol=0)
        elif leaf in ("E", "E_bar"):
            assert abs(p.std().item() - 1.0) < 0.05, name
        else:
            want = p.shape[-1] ** -0.5
            assert abs(p.std().item() / want - 1) < 0.15, (name, p.std().item(), want)
    assert torch.count_nonzero(params["decoder.attention.v_a"]) > 0


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("rank", [2, None])
def test_forward_macs_counts_every_matrix_product(arch, rank):
    """``forward_macs`` (the benchmarks' and the book's FLOP count) equals what PyTorch's
    FlopCounterMode counts in the fast backend's forward pass over one unpadded sentence pair
    (without the compiled kernels: their products and oneDNN's are invisible to the counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    cfg = dataclasses.replace(CFG, arch=arch, output_rank=rank)
    model = accelerate(build_model(cfg), compiled=False)
    # 64 target words: the output layer pads its rows to a multiple of 64 (output.padded_rows)
    x, y = torch.randint(3, 13, (1, 7)), torch.randint(3, 11, (1, 64))
    ones = lambda t: torch.ones_like(t, dtype=torch.bool)  # noqa: E731
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x, ones(x), y, ones(y))
    # e_ij = v_a . tanh(...) is a matrix-vector product, which the counter does not count
    v_a = 64 * 7 * cfg.n_align if arch == "RNNsearch" else 0
    assert counter.get_total_flops() + 2 * v_a == 2 * forward_macs(cfg, 7, 64)
