"""The fast backend (:mod:`nmt_lib.fast`) against the paper modules' definitions it stands for.

``fast_gru_scan`` (hand-written backward through time) against ``gru_scan``; ``target_log_prob``
against ``log_softmax`` + ``gather``; ``energies_in_pieces`` against ``alignment_scores``; the
model's forward on both backends against iterating the reference's step interface
(``readout_step`` / ``next_state``); the decoding steps of both backends (``model.steps()``)
against the same. Values and gradients agree to 1e-10 in float64; under bf16 autocast the fast
path stays as close to float32 as the step-by-step autocast path does.
"""

import contextlib
import dataclasses
import os
import subprocess
import sys
from unittest import mock

import pytest
import torch
from torch.overrides import TorchFunctionMode

from nmt_lib.config import ConfigError, ModelConfig
from nmt_lib.fast import accelerate, kernels, scan
from nmt_lib.fast import attention as fast_attention
from nmt_lib.fast import decoder as fast_decoder
from nmt_lib.fast import output as fast_output
from nmt_lib.fast.attention import energies_in_pieces
from nmt_lib.fast.output import target_log_prob
from nmt_lib.fast.scan import ROW_TILE, active_rows, fast_gru_scan
from nmt_lib.paper.attention import alignment_scores
from nmt_lib.paper.decoder import log_softmax
from nmt_lib.paper.gru import gru_scan
from nmt_lib.paper.model import build_model
from nmt_lib.paper.steps import teacher_forced

F64 = dict(rtol=1e-10, atol=1e-10)


def grads(out, inputs, weight):
    return torch.autograd.grad((out * weight).sum(), inputs)


@pytest.mark.parametrize("tile", [1, 16])  # active_rows: 1 = only up to the last row still running
@pytest.mark.parametrize("shared,masked", [(False, True), (True, False), (True, True)])
def test_fast_gru_scan_equals_gru_scan(shared, masked, tile):
    g = torch.Generator().manual_seed(0)
    D, B, T, n = 2, 3, 6, 4

    def rand(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()

    a, h0 = rand(D, B, T, 3 * n), rand(D, B, n)
    U_rz, U = (rand(n, 2 * n), rand(n, n)) if shared else (rand(D, n, 2 * n), rand(D, n, n))
    mask = torch.rand(D, B, T, generator=g) > 0.3 if masked else None
    ref, fast = gru_scan(a, h0, U_rz, U, mask), fast_gru_scan(a, h0, U_rz, U, mask, tile=tile)
    torch.testing.assert_close(fast, ref, **F64)
    w = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    for gf, gr in zip(
        grads(fast, (a, h0, U_rz, U), w), grads(ref, (a, h0, U_rz, U), w), strict=True
    ):
        torch.testing.assert_close(gf, gr, **F64)


def test_active_rows_up_to_the_last_sentence_still_running():
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 0]]).bool()
    time_major = mask[:, :, None]  # [T, B, 1]: sentences of lengths 3, 2, 1, 2, 1
    assert active_rows(time_major, tile=1) == [5, 4, 1, 0]
    assert active_rows(time_major, tile=2) == [5, 4, 2, 0]  # rounded up, at most B
    two = torch.stack([time_major, time_major.flip(0)], 1)  # [T, D, B, 1]: the latest of both
    assert active_rows(two, tile=2) == [5, 4, 4, 5]
    assert active_rows(None) == []


def test_attention_scan_states_past_the_end_keep_their_gradient():
    """S (the states, copied past each sentence's end) is the same function whether a step computes
    every row (tile 16 > B) or only up to the last sentence still running (tile 1): so are the
    gradients of a loss on all of S, padding included."""
    g = torch.Generator().manual_seed(0)
    B, Ty, Tx, n, na, ctx = 3, 4, 5, 4, 3, 6
    shapes = [
        (B, Ty, 3 * n),
        (B, n),
        (B, Tx, ctx),
        (B, Tx, na),
        (n, 2 * n + na),
        (ctx, 3 * n),
        (n, n),
        (na,),
    ]
    args = [torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_() for s in shapes]
    y_mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]]).bool()
    x_mask = torch.ones(B, Tx, dtype=torch.bool)
    w = torch.randn(B, Ty, n, generator=g, dtype=torch.float64)
    out = {}
    for tile in (16, 1):
        S = fast_decoder.attention_decoder_scan(
            *args[:2], y_mask, *args[2:4], x_mask, *args[4:], kernels, tile
        )[0]
        out[tile] = (S, torch.autograd.grad((S * w).sum(), args))
    torch.testing.assert_close(out[1][0], out[16][0], **F64)
    for g1, g16 in zip(out[1][1], out[16][1], strict=True):
        torch.testing.assert_close(g1, g16, **F64)


def test_padded_rows_real_positions_then_copies_of_the_first():
    mask = torch.tensor([[False, True, True], [True, False, False]])
    idx, n = fast_output.padded_rows(mask, multiple=4)
    assert idx.tolist() == [1, 2, 3, 1] and n == 3
    assert fast_output.padded_rows(mask, multiple=1)[0].tolist() == [1, 2, 3]
    assert len(fast_output.padded_rows(torch.ones(8, 16, dtype=torch.bool))[0]) == 128
    assert fast_output.padded_rows(torch.zeros(2, 3, dtype=torch.bool))[0].numel() == 0


def run_python(code: str, env: dict) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_acceleration_raises_onednn_kernel_cache_unless_set():
    """Importing the library (the fast backend too) leaves the process alone; choosing acceleration
    raises oneDNN's kernel cache, unless the user set it."""
    code = (
        "import os, nmt_lib.fast, nmt_lib.train; "
        "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'), end=' '); "
        "nmt_lib.fast.tune_process(); print(os.environ['ONEDNN_PRIMITIVE_CACHE_CAPACITY'])"
    )
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    assert run_python(code, env) == "None 8192"
    assert run_python(code, {**env, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"}) == "64 64"


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's mallopt")
def test_acceleration_keeps_freed_memory_unless_opted_out():
    code = (
        "import nmt_lib.backend as f; assert f.backend('reference').tune_process() == {}; "
        "print(f.backend('fast').tune_process()['malloc'])"
    )
    assert run_python(code, dict(os.environ)) == "True"
    assert run_python(code, {**os.environ, "NMT_LIB_MALLOPT": "0"}) == "False"


def test_accelerate_again_takes_the_new_options():
    """A fast model made fast again is a new one with these options, of the same parameter values
    (copies: the model it was made of keeps its own)."""
    model = build_model(CFG)
    fast = accelerate(model, tile=1)
    plain = accelerate(fast, compiled=False)
    assert plain is not fast and (fast.compiled, fast.tile) == (True, 1)
    assert (plain.compiled, plain.decoder.compiled, plain.tile) == (False, False, ROW_TILE)
    for p, q in zip(plain.parameters(), model.parameters(), strict=True):
        assert p is not q and torch.equal(p, q)


def test_training_and_evaluation_tune_the_process_for_the_fast_backend(tmp_path):
    """Training on the fast backend asks it to tune the process (oneDNN's kernel cache), which
    importing the library and loading a model do not."""
    code = (
        "import os; from nmt_lib.data.fixtures import toy_run; from nmt_lib.train import "
        f"train_run; cfg, prep = toy_run({str(tmp_path)!r}, max_updates=1, eval_every=1); "
        "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'), end=' '); "
        f"train_run(cfg, {str(tmp_path / 'out')!r}, prep, progress=False); "
        "print(os.environ.get('ONEDNN_PRIMITIVE_CACHE_CAPACITY'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "ONEDNN_PRIMITIVE_CACHE_CAPACITY"}
    assert run_python(code, env).split()[-2:] == ["None", "8192"]


def test_fast_gru_scan_gradcheck():
    g = torch.Generator().manual_seed(1)
    args = [
        torch.randn(*s, generator=g, dtype=torch.float64).requires_grad_()
        for s in ((2, 5, 9), (2, 3), (3, 6), (3, 3))
    ]
    mask = torch.tensor([[True] * 5, [True, True, False, False, False]])
    assert torch.autograd.gradcheck(lambda *x: fast_gru_scan(*x, mask), args)


@pytest.mark.parametrize("column_major", [False, True])  # the fast model stores W_o column-major
def test_target_log_prob_equals_log_softmax(column_major):
    g = torch.Generator().manual_seed(2)
    N, r, K = 7, 5, 11
    u, W, b = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((N, r), (K, r), (K,)))
    if column_major:
        W = W.t().contiguous().t()
    u, W, b = (x.requires_grad_() for x in (u, W, b))
    y = torch.randint(0, K, (N,), generator=g)
    ref = log_softmax(torch.nn.functional.linear(u, W, b)).gather(-1, y[:, None])[:, 0]
    fast = target_log_prob(u, W, b, y, kernels)
    torch.testing.assert_close(fast, ref, **F64)
    w = torch.randn(N, generator=g, dtype=torch.float64)
    expected = grads(ref, (u, W, b), w)
    first = torch.autograd.grad((fast * w).sum(), (u, W, b), retain_graph=True)
    second = torch.autograd.grad((fast * w).sum(), (u, W, b))  # the logits were overwritten
    for gf, gs, gr in zip(first, second, expected, strict=True):
        torch.testing.assert_close(gf, gr, **F64)
        torch.testing.assert_close(gs, gr, **F64)
    assert first[1].stride() == W.stride()  # the gradient in the parameter's layout: no copy
    assert torch.autograd.gradcheck(lambda *p: target_log_prob(*p, y, kernels), (u, W, b))


@pytest.mark.parametrize("use_kernels", [True, False])
def test_target_log_prob_in_blocks_of_rows(use_kernels, monkeypatch):
    """Float32 logits on a CPU in blocks of rows (``_logit_pieces``; here 64 + 64 + 64 + 8 rows):
    the log-probabilities and the gradients of ``u``, ``W``, ``b`` (first backward, and a second
    one that recomputes the logits) as float64's within float32 rounding, with the compiled
    kernels and with the PyTorch operations."""
    g = torch.Generator().manual_seed(5)
    N, r, K = 200, 12, 101
    monkeypatch.setattr(fast_output, "LOGIT_BLOCK_BYTES", 64 * 4 * K)
    pieces = fast_output._logit_pieces(N, r, K, torch.float32, torch.device("cpu"))
    assert [len(range(N)[p]) for p in pieces] == [64, 64, 64, 8]
    u, W, b = (torch.randn(*s, generator=g) for s in ((N, r), (r, K), (K,)))
    W = W.t()  # column-major, as the fast model stores W_o
    y, w = torch.randint(0, K, (N,), generator=g), torch.randn(N, generator=g)
    ref_in = [x.double().requires_grad_() for x in (u, W, b)]
    ref = log_softmax(torch.nn.functional.linear(*ref_in)).gather(-1, y[:, None])[:, 0]
    expected = grads(ref, ref_in, w.double())
    u, W, b = (x.requires_grad_() for x in (u, W, b))
    fast = target_log_prob(u, W, b, y, kernels if use_kernels else None)
    torch.testing.assert_close(fast.double(), ref.detach(), rtol=0, atol=2e-5)
    first = torch.autograd.grad((fast * w).sum(), (u, W, b), retain_graph=True)
    second = torch.autograd.grad((fast * w).sum(), (u, W, b))
    for gf, gs, gr in zip(first, second, expected, strict=True):
        torch.testing.assert_close(gf.double(), gr, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(gs, gf, rtol=0, atol=0)


def test_logit_pieces_only_for_float32_on_a_cpu_with_a_small_weight_gradient():
    from nmt_lib.fast.output import LOGIT_BLOCK_BYTES, _logit_pieces

    cpu, N, K = torch.device("cpu"), 1500, 10003  # bench-small: 1500 x 10003 float32 logits
    rows = [len(range(N)[p]) for p in _logit_pieces(N, 256, K, torch.float32, cpu)]
    assert rows[0] % 64 == 0 and rows[0] * K * 4 <= LOGIT_BLOCK_BYTES and len(rows) == 3
    for args in (
        (N, 256, K, torch.bfloat16, cpu),
        (N, 256, K, torch.float32, torch.device("cuda")),
        (2400, 620, 30001, torch.float32, cpu),
    ):  # the paper's W_o: 74 MB
        assert _logit_pieces(*args) == [slice(0, args[0])]
    assert _logit_pieces(0, 256, K, torch.float32, cpu) == [slice(0, 0)]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("G", [1, 3])
def test_energies_in_pieces_equals_alignment_scores(dtype, G):
    g = torch.Generator().manual_seed(3)
    B, Tx, n, n_align = 10, 64, 6, 1024 // G  # pieces of 4 sentences: 4 + 4 + 2
    assert fast_attention.piece_rows(torch.empty(B, Tx, n_align), G) == 4
    s_prev, W_a = torch.randn(G * B, n, generator=g), torch.randn(n_align, n, generator=g)
    Uh, v_a = torch.randn(B, Tx, n_align, generator=g), torch.randn(n_align, generator=g)
    s_prev, W_a, Uh, v_a = (t.to(dtype) for t in (s_prev, W_a, Uh, v_a))
    ref = alignment_scores(s_prev, Uh.repeat_interleave(G, 0), W_a, v_a)  # each state its own row
    tol = F64 if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(energies_in_pieces(Uh, s_prev @ W_a.t(), v_a), ref, **tol)


CFG = ModelConfig(src_vocab=13, trg_vocab=11, m=5, n=4, n_dec=6, n_align=3, l=3, output_rank=2)
B, Tx, Ty = 3, 6, 5
X_LENGTHS, Y_LENGTHS = [6, 3, 2], [2, 5, 4]


def setup(arch, seed=0, dtype=torch.float64, scale=0.5, backend="reference", **overrides):
    """A model on ``backend`` with large random weights (the same for the same ``seed``), and a
    batch. On the fast backend the scans compute only the rows up to the last sentence still
    running (tile 1, not 16)."""
    torch.manual_seed(seed)
    model = build_model(dataclasses.replace(CFG, arch=arch, **overrides)).to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, scale)
    if backend == "fast":
        model = accelerate(model, tile=1)
    x_mask = torch.tensor([[j < L for j in range(Tx)] for L in X_LENGTHS])
    y_mask = torch.tensor([[i < L for i in range(Ty)] for L in Y_LENGTHS])
    x = torch.randint(3, CFG.src_vocab, (B, Tx)).masked_fill(~x_mask, 0)
    y = torch.randint(3, CFG.trg_vocab, (B, Ty)).masked_fill(~y_mask, 0)
    return model, x, x_mask, y, y_mask


@contextlib.contextmanager
def small_pieces(rows=2):
    """The fast attention in pieces of ``rows`` sentences (B = 3: pieces of 2 and 1)."""
    with mock.patch.object(fast_attention, "piece_rows", lambda Uh, G=1: rows):
        yield


def step_reference(model, x, x_mask, y, y_mask):
    """``logp [B, Ty]`` and ``alpha [B, Ty, Tx]`` (or None) from the step interface of the
    reference backend (``model`` must be on it), autograd through the paper's definitions."""
    return teacher_forced(model, x, x_mask, y, y_mask)


def loss_and_grads(model, logp, alpha, seed=5):
    g = torch.Generator().manual_seed(seed)
    loss = (logp * torch.randn(logp.shape, generator=g, dtype=logp.dtype)).sum()
    if alpha is not None:  # the attention weights are an output too
        loss = loss + (alpha * torch.randn(alpha.shape, generator=g, dtype=alpha.dtype)).sum()
    params = [p for _, p in model.named_parameters()]
    return dict(
        zip(
            [k for k, _ in model.named_parameters()], torch.autograd.grad(loss, params), strict=True
        )
    )


@pytest.mark.parametrize(
    "arch,overrides",
    [
        ("RNNsearch", {}),
        ("RNNsearch", {"output_rank": None, "gate_bias": True, "n_dec": None}),
        ("RNNencdec", {}),
        ("RNNencdec", {"output_rank": None, "embedding_bias": False}),
    ],
)
def test_forward_equals_step_interface_values_and_gradients(arch, overrides):
    """The fast backend's forward (its own teacher forcing) against the paper's step loop (on the
    reference backend the forward is that loop)."""
    model, x, x_mask, y, y_mask = setup(arch, backend="fast", **overrides)
    paper = setup(arch, **overrides)[0]  # the same weights, on the reference backend
    with small_pieces():
        logp, alpha = model(x, x_mask, y, y_mask)
    logp_ref, alpha_ref = step_reference(paper, x, x_mask, y, y_mask)
    torch.testing.assert_close(logp, logp_ref, **F64)
    if alpha_ref is not None:
        torch.testing.assert_close(alpha, alpha_ref, **F64)
    with small_pieces():
        fast = loss_and_grads(model, logp, alpha)
    ref = loss_and_grads(paper, logp_ref, alpha_ref)
    for name, g in ref.items():
        torch.testing.assert_close(fast[name], g, **F64, msg=name)


def search_steps(model, x, x_mask, y, y_mask):
    """``logp [B, Ty]`` and ``alpha [B, Ty, Tx]`` (or None) of the reference words through the
    step of a search (``model.steps()``, :mod:`nmt_lib.paper.steps`), without autograd: each word's
    log-probability among the ``K`` best words of its row."""
    K = model.decoder.E.shape[0]
    with torch.no_grad():
        enc, steps = model.encode(x, x_mask), model.steps()
        state, logp, alpha = steps.start(enc), [], []
        for i in range(y.shape[1]):
            scores, alpha_i, carry = steps.readout(enc, state)
            best, words = steps.best_words(scores, K, torch.zeros_like(y_mask[:, i]), False)
            logp.append(
                torch.full((len(y), K), -torch.inf, dtype=best.dtype)
                .scatter(1, words, best)
                .gather(1, y[:, i, None])
                .squeeze(1)
                .to(torch.float64)
            )
            alpha.append(alpha_i)
            state = steps.advance(carry, y[:, i])
    logp = torch.stack(logp, 1).masked_fill(~y_mask, 0.0)
    if alpha[0] is None:
        return logp, None
    return logp, torch.stack(alpha, 1).masked_fill(~y_mask[..., None], 0.0)


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_search_steps_equal_the_steps_with_autograd(arch, backend):
    """What a search reads (the reference's log-softmax, the fast backend's logits normalised in
    ``best_words``) is the step interface's distribution: the attention weights to float64
    rounding, the log-probabilities to float32's (``best_words`` returns them in float32)."""
    model, x, x_mask, y, y_mask = setup(arch, backend=backend)
    with small_pieces():
        logp, alpha = search_steps(model, x, x_mask, y, y_mask)
    logp_ref, alpha_ref = step_reference(setup(arch)[0], x, x_mask, y, y_mask)
    torch.testing.assert_close(logp, logp_ref.detach(), rtol=1e-6, atol=1e-6)
    if alpha_ref is not None:
        torch.testing.assert_close(alpha, alpha_ref.detach(), **F64)


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_float32_with_onednn_products_as_close_to_float64_as_with_matmul(arch, monkeypatch):
    """The float32 training forward and backward with oneDNN's products (``kernels.matmul``,
    ``right_product``: on AMD CPUs; forced on here) are as close to the float64 function as with
    ``torch.matmul``'s: log-probs within 1e-5, each gradient within 1e-4 relative and at most
    four times the ``torch.matmul`` path's error, plus 2e-7 (about a float32 rounding, below which
    the ratio of two errors is noise)."""
    if not kernels._prepacking(torch.float32):
        pytest.skip("this PyTorch has no oneDNN float32 linear")
    model, x, x_mask, y, y_mask = setup(arch, output_rank=None, scale=0.3, backend="fast")
    logp64, alpha64 = model(x, x_mask, y, y_mask)
    exact = loss_and_grads(model, logp64, alpha64)
    model = model.float()
    errors = {}
    for on in (True, False):
        monkeypatch.setattr(kernels, "onednn_float32", lambda on=on: on)
        logp, alpha = model(x, x_mask, y, y_mask)
        torch.testing.assert_close(logp.double(), logp64, rtol=0, atol=1e-5)
        alpha = None if alpha is None else alpha.double()
        errors[on] = relative_errors(loss_and_grads(model, logp.double(), alpha), exact)
    for name, err in errors[True].items():
        assert err < 1e-4 and err <= 4 * errors[False][name] + 2e-7, (
            name,
            err,
            errors[False][name],
        )


def relative_errors(a: dict, b: dict) -> dict:
    return {k: float((a[k] - b[k]).norm() / b[k].norm().clamp_min(1e-30)) for k in b}


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_bf16_autocast_as_close_to_float32_as_the_step_path(arch, backend):
    """bf16 (3 significant digits) changes both paths; the forward must not be worse than the
    step interface's: log-probs within 0.01 nats of float32 (measured: 0.002), every gradient
    within 5 % (relative L2; measured 0.02-1.9 %, the step-by-step autocast path 0.2-1.6 %) or
    twice the error of that path."""
    sizes = dict(dtype=torch.float32, scale=0.3, m=16, n=16, n_dec=24, n_align=12, l=8)
    model, x, x_mask, y, y_mask = setup(arch, backend=backend, **sizes)
    paper = setup(arch, **sizes)[0]
    exact = step_reference(paper, x, x_mask, y, y_mask)
    g_exact = loss_and_grads(paper, *exact)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast = model(x, x_mask, y, y_mask)
        ref = step_reference(paper, x, x_mask, y, y_mask)
    assert fast[0].dtype == torch.float32
    torch.testing.assert_close(fast[0], exact[0], rtol=0, atol=0.01)
    err_fast = relative_errors(loss_and_grads(model, *fast), g_exact)
    err_ref = relative_errors(loss_and_grads(paper, *ref), g_exact)
    for k, e in err_fast.items():
        assert e < max(0.05, 2 * err_ref[k]), (k, e, err_ref[k])


class NoReadBack(TorchFunctionMode):
    """Fails on any torch call that reads a tensor's values into Python or gives a shape that
    depends on them (on a GPU: a wait for it, which a CUDA graph's capture forbids)."""

    READ = {
        "item",
        "tolist",
        "__bool__",
        "__int__",
        "__float__",
        "__index__",
        "nonzero",
        "masked_select",
        "unique",
        "numpy",
        "cpu",
    }

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        assert name not in self.READ, f"reads values back: {name}"
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_static_shapes_compute_the_same_function(arch, monkeypatch):
    """Under ``static_shapes`` (a CUDA graph's capture, ``nmt_lib.fast.graphs``) every row of every
    step and every target position, padding too, are computed: the same log-probabilities,
    attention weights and gradients (here on the CPU, with the check forced on), and no value is
    read back from a tensor, forward or backward (which a capture forbids)."""
    model, x, x_mask, y, y_mask = setup(arch, backend="fast")  # tile 1: not all 3 rows active
    logp, alpha = model(x, x_mask, y, y_mask)
    ref = loss_and_grads(model, logp, alpha)
    assert active_rows(y_mask.t()[..., None], tile=1) != [B] * Ty
    for module in (scan, fast_decoder):
        monkeypatch.setattr(module, "static_shapes", lambda t: True)
    with NoReadBack():
        logp2, alpha2 = model(x, x_mask, y, y_mask)
        grads = loss_and_grads(model, logp2, alpha2)
    assert active_rows(y_mask.t()[..., None], tile=1) == [B] * Ty
    torch.testing.assert_close(logp2, logp, **F64)
    if alpha is not None:
        torch.testing.assert_close(alpha2, alpha, **F64)
    for name, g in grads.items():
        torch.testing.assert_close(g, ref[name], **F64, msg=name)


def test_n_dec_config():
    assert ModelConfig().n_dec is None  # the paper: the decoder has n units too
    with pytest.raises(ConfigError, match="n_dec"):
        ModelConfig(n_dec=0)
    model = build_model(CFG)
    assert model.decoder.gru.U.shape == (6, 6) and model.encoder.forward_gru.U.shape == (4, 4)
    assert model.decoder.W_s.shape == (6, 4)  # s_0 = tanh(W_s h←_1 + b_s), h←_1 of size n


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_a_target_column_of_padding_only(arch, backend):
    """A batch padded one column past its longest target (no sentence running at that step: the
    fast scans compute 0 rows there) gives the same log-probabilities and gradients, 0 in that
    column."""
    model, x, x_mask, y, y_mask = setup(arch, backend=backend)
    logp, _ = model(x, x_mask, y, y_mask)
    y2 = torch.cat([y, torch.zeros_like(y[:, :1])], 1)
    m2 = torch.cat([y_mask, torch.zeros_like(y_mask[:, :1])], 1)
    logp2, _ = model(x, x_mask, y2, m2)
    torch.testing.assert_close(logp2[:, :-1], logp, **F64)
    assert (logp2[:, -1] == 0).all()
    g1 = torch.autograd.grad(logp.sum(), list(model.parameters()))
    g2 = torch.autograd.grad(logp2.sum(), list(model.parameters()))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, **F64)


@pytest.mark.parametrize("rows", [0, 1, 127, 128, 300])
def test_transposed_copy(rows):
    from nmt_lib.fast.scan import transposed

    x = torch.randn(2, rows, 5, generator=torch.Generator().manual_seed(rows))
    for t, dtype in ((x, torch.float64), (x[1], torch.bfloat16)):
        out = transposed(t, dtype)
        assert out.is_contiguous() and torch.equal(out, t.mT.to(dtype))
