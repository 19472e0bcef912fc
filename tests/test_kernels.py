"""The compiled kernels (nmt_lib.fast.kernels, kernels.c) against the PyTorch operations they replace, and
the fallback when they cannot be built."""

from __future__ import annotations

import math
import subprocess

import pytest
import torch

from nmt_lib import decoding
from nmt_lib.config import SearchConfig
from nmt_lib.data.vocab import EOS, PAD, UNK
from nmt_lib.fast import accelerate, kernels
from nmt_lib.fast.steps import best_words


@pytest.fixture
def lib():
    lib = kernels.library()
    if lib is None:
        pytest.skip("no C compiler with OpenMP: the kernels are not built (PyTorch ops are used)")
    return lib


def torch_best_words(x, k, no_eos, ignore_unk, bias, normalized):
    """The fast ``best_words`` with its PyTorch operations (no kernel)."""
    return best_words(x.clone(), k, no_eos, ignore_unk, bias, normalized, fused=None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("K", [3, 10, 64, 65, 200, 10003])
@pytest.mark.parametrize("normalized", [False, True])
def test_best_words_kernel_equals_torch_ops(lib, dtype, K, normalized):
    """Same words and log-probabilities (float32 rounding apart) as the PyTorch operations: rows
    shorter and longer than the kernel's 64-column blocks, k = K, masked words, -inf logits, a row
    of ties (the lower column first), a row stride other than K, with and without a bias; the input
    is left as it was."""
    g = torch.Generator().manual_seed(K)
    R = 13
    big = (4 * torch.randn(R, K + 5, generator=g)).to(dtype)
    x = big[:, 2 : K + 2]  # rows K + 5 apart
    x[3, K // 2 :] = -math.inf
    x[4] = 1.5  # all tied
    no_eos = torch.arange(R) % 2 == 0
    before = x.clone()
    for bias in [None] if normalized else [None, torch.randn(K, generator=g)]:
        for k in sorted({1, min(3, K), min(10, K), K}):
            for ignore_unk in (False, True):
                got = kernels.best_words(x, k, no_eos, ignore_unk, bias, normalized)
                ref = torch_best_words(x, k, no_eos, ignore_unk, bias, normalized)
                assert got is not None
                torch.testing.assert_close(got[0], ref[0], rtol=0, atol=2e-5)
                finite = torch.isfinite(ref[0])  # among -inf (excluded words) any order will do
                xb = x.float() + (0 if bias is None else bias)  # ties (bf16 has many): any
                assert torch.equal(xb.gather(1, got[1])[finite], xb.gather(1, ref[1])[finite])
                assert all(len(set(r)) == len(r) for r in got[1].tolist())  # every column once
                assert got[1].min() >= 0 and got[1].max() < K
                if bias is None:  # row 4, all tied: the allowed columns in order
                    allowed = [
                        c for c in range(K) if c not in (PAD, EOS, UNK if ignore_unk else PAD)
                    ]
                    n = min(k, len(allowed))
                    assert got[1][4, :n].tolist() == allowed[:n]
    assert torch.equal(x, before)


def test_best_words_kernel_normalises_over_every_word(lib):
    """log p over all K words (the excluded ones included), accurate in the far tail of exp."""
    x = torch.tensor([[0.0, 5.0, 3.0, -90.0, 2.0, -1e30, 1.0]])
    ref = torch.log_softmax(x.double(), 1)[0]
    v, j = kernels.best_words(x, 3, torch.tensor([True]), True, None, False)
    assert j.tolist() == [[4, 6, 3]]  # 0 = <pad>, 1 = <unk>, 2 = EOS excluded
    torch.testing.assert_close(v[0].double(), ref[[4, 6, 3]], rtol=1e-6, atol=0)


def test_best_words_without_kernel_when_it_does_not_apply(lib):
    """float64 logits and k > K go to the PyTorch operations (the kernel answers None)."""
    x = torch.randn(2, 8, dtype=torch.float64)
    no_eos = torch.zeros(2, dtype=torch.bool)
    assert kernels.best_words(x, 2, no_eos, False, None, False) is None
    assert kernels.best_words(x.float(), 9, no_eos, False, None, False) is None
    v, j = best_words(x.clone(), 2, no_eos, False, fused=kernels)
    ref = torch.log_softmax(x, 1)[:, 1:].topk(2)  # only <pad> excluded
    assert torch.equal(j, ref.indices + 1) and torch.equal(v, ref.values.float())


def peaked_model():
    """A small RNNsearch whose word distributions are peaked (no near-ties for a beam to break
    differently), and three sources."""
    from nmt_lib.config import ModelConfig
    from nmt_lib.paper.model import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(
        src_vocab=40, trg_vocab=300, m=16, n=16, n_align=16, l=8, output_rank=None, init="fanin"
    )
    model = build_model(cfg).eval()
    with torch.no_grad():
        model.decoder.b_y.normal_(0, 3)
    return model, [[5, 6, 7, 8, EOS], [9, 10, EOS], [11, 12, 13, EOS]]


def test_beam_search_with_and_without_kernel(lib):
    """A real bf16 RNNsearch beam search finds the same translations and costs either way."""
    model, xs = peaked_model()
    with torch.autocast("cpu", torch.bfloat16):
        fast = decoding.decode(accelerate(model), xs, SearchConfig(beam=4))
        plain = decoding.decode(accelerate(model, compiled=False), xs, SearchConfig(beam=4))
    assert [h.tokens for h in fast] == [h.tokens for h in plain]
    assert [h.cost for h in fast] == pytest.approx([h.cost for h in plain], rel=1e-5)


def test_build_is_cached_and_failures_fall_back(lib, tmp_path, monkeypatch):
    """One build per source, compiler and CPU; a missing or failing compiler raises from ``build``
    and makes ``library`` None with a warning; ``NMT_LIB_KERNELS=0`` turns the kernels off."""
    lib = kernels.build("cc", tmp_path)
    mtime = lib.stat().st_mtime_ns
    assert kernels.build("cc", tmp_path) == lib and lib.stat().st_mtime_ns == mtime
    assert [p.name for p in tmp_path.iterdir()] == [lib.name]  # no temporary file left
    with pytest.raises(OSError):
        kernels.build(str(tmp_path / "no-such-compiler"), tmp_path / "a")
    with pytest.raises(subprocess.CalledProcessError):
        kernels.build("false", tmp_path / "b")
    monkeypatch.setenv("NMT_LIB_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("CC", "false")
    with pytest.warns(RuntimeWarning, match="could not build kernels.c"):
        assert kernels.load() is None
    monkeypatch.setenv("NMT_LIB_KERNELS", "0")
    assert kernels.load() is None


def test_excluded_words_are_pad_unk_eos():
    """The kernel's fixed columns are the vocabulary's specials (kernels.c hard-codes 0, 1, 2)."""
    assert (PAD, UNK, EOS) == (0, 1, 2)


def _attention_inputs(seed: int, B: int, Tx: int, N: int, C: int, G: int = 1):
    """``Uh`` (not contiguous; one sentence's tiny, for tanh's polynomial, one saturating), ``W_a s``
    ``[G * B, N]``, ``v_a``, ``h``, a mask with padding of every length."""
    g = torch.Generator().manual_seed(seed)
    Uh = torch.randn(B, N, Tx, generator=g).transpose(1, 2)  # [B, Tx, N], not contiguous
    Uh[0] *= 1e-3
    Uh[1] *= 30
    Ws, v = torch.randn(G * B, N, generator=g), torch.randn(N, generator=g)
    h = torch.randn(B, Tx, C, generator=g)
    mask = torch.arange(Tx) < torch.arange(B).remainder(Tx).add(1)[:, None]  # lengths 1, 2, ...
    return Uh, Ws, v, h, mask


@pytest.mark.parametrize("G", [1, 3])
@pytest.mark.parametrize("h_dtype", [torch.bfloat16, torch.float32])
def test_attend_kernel_equals_torch_ops(lib, G, h_dtype):
    """One attention step (energies, masked softmax, context) as the PyTorch operations compute it
    (float32 rounding apart; the kernel's context from the float32 weights, theirs from weights
    rounded to ``h``'s dtype), for G states per sentence, exactly 0 weight on padding; into given
    buffers; no rows; what it refuses."""
    from nmt_lib.fast.attention import attend, attend_in_pieces

    B, Tx, N, C = 7, 9, 40, 24
    Uh, Ws, v, h, mask = _attention_inputs(G, B, Tx, N, C, G)
    h = h.to(h_dtype)
    c, alpha = kernels.attend(Uh, Ws, v, h, mask)
    assert c.dtype == h_dtype and alpha.dtype == torch.float32
    e = torch.tanh(Uh.double().unsqueeze(1) + Ws.double().view(B, G, 1, N)) @ v.double()
    ref_a = e.masked_fill(~mask[:, None], -math.inf).softmax(-1)  # [B, G, Tx]
    ref_c = (ref_a @ h.double()).view(-1, C)
    torch.testing.assert_close(alpha.double(), ref_a.view(-1, Tx), rtol=0, atol=1e-6)
    assert (alpha.view(B, G, Tx)[~mask[:, None].expand(B, G, Tx)] == 0).all()
    tol = 1e-5 if h_dtype == torch.float32 else 1e-2  # bf16: c rounded to bf16
    torch.testing.assert_close(c.double(), ref_c, rtol=tol, atol=tol)
    c_torch, alpha_torch = attend_in_pieces(Uh, Ws, v, h, mask)
    torch.testing.assert_close(alpha, alpha_torch, rtol=0, atol=1e-6)
    torch.testing.assert_close(c.float(), c_torch.float(), rtol=tol, atol=tol)
    out = (torch.full_like(c, math.nan), torch.full_like(alpha, math.nan))
    got = attend(Uh, Ws.bfloat16(), v, h, mask, out, kernels)  # the decoder's (W_a s in bf16)
    assert got[0] is out[0] and got[1] is out[1]
    assert torch.equal(out[1], kernels.attend(Uh, Ws.bfloat16().float(), v, h, mask)[1])
    got = attend(Uh, Ws, v, h, mask, out, fused=None)
    assert got[0] is out[0] and torch.equal(out[1], alpha_torch)
    assert kernels.attend(Uh[:0], Ws[:0], v, h[:0], mask[:0])[0].shape == (0, C)
    assert kernels.attend(Uh.double(), Ws.double(), v.double(), h.double(), mask) is None
    assert kernels.attend(Uh, Ws, v, h, mask.int()) is None
    assert kernels.attend(Uh, Ws, v, h.transpose(0, 1).contiguous().transpose(0, 1), mask) is None
    assert kernels.attend(Uh, Ws, v, h, mask, (c.t().contiguous().t(), alpha)) is None
    for bad in ((Uh, Ws[:-1], v), (Uh, Ws[:, :-1], v), (Uh, Ws, v[:-1])):  # shapes it cannot read
        assert kernels.attend(*bad, h, mask) is None


def test_tanh_of_the_kernels_is_accurate(lib):
    """The kernels' tanh (here the GRU candidate's, ``n = 1``; with AVX-512 or AVX2 the attention's
    too) within 7 float32 ulps of tanh over the whole range and at ±inf (all floats were checked
    once: 4.9 ulps for the scalar version with FMA; on this sweep the AVX-512 one 2.5, the AVX2 one
    2.5, and 2.8 on a denser one of 72M floats)."""
    x = torch.cat(
        [
            torch.linspace(-12, 12, 20001),
            torch.logspace(-8, 0, 200),
            torch.tensor([math.inf, -math.inf]),
        ]
    ).view(1, -1, 1)
    got, out, z = torch.empty_like(x), torch.empty_like(x), torch.ones_like(x)
    assert kernels.gru_update(x, None, torch.zeros_like(x), z, torch.zeros_like(x), None, got, out)
    ref = torch.tanh(x.double())
    ulp = torch.finfo(torch.float32).eps * ref.abs().clamp(min=torch.finfo(torch.float32).tiny)
    assert ((got.double() - ref).abs() <= 7 * ulp).all()


@pytest.mark.parametrize("h_dtype", [torch.bfloat16, torch.float32])
def test_attend_backward_kernel_equals_torch_ops(lib, h_dtype):
    """``fast.attention.attend_backward`` (∂L/∂(W_a s) written into a strided view in the compute dtype,
    ∂L/∂(U_a h) and each sentence's ∂L/∂v_a accumulated in place) with the kernel as with the
    PyTorch operations, and as float64 autograd through energies, masked softmax and context; with
    and without a gradient for the weights."""
    from nmt_lib.fast.attention import attend_backward

    B, Tx, N, C = 6, 9, 33, 20
    Uh, q, v, h, mask = _attention_inputs(0, B, Tx, N, C)
    g = torch.Generator().manual_seed(1)
    d_c, d_alpha = torch.randn(B, C, generator=g).to(h_dtype), torch.randn(B, Tx, generator=g)
    h = h.to(h_dtype)
    start = torch.randn(B, Tx, N, generator=g)  # what earlier steps accumulated
    dv_start = torch.randn(B, N, generator=g)
    Uh64, q64, v64 = (t.double().requires_grad_() for t in (Uh, q, v))
    e = (torch.tanh(Uh64 + q64[:, None]) @ v64).masked_fill(~mask, -math.inf)
    alpha = e.softmax(-1)

    def run(dA, fused):  # -> d_q (a view of wider rows, h's dtype), dv, d_sum
        wide = torch.full((B, N + 5), 7.0, dtype=h_dtype)
        dv, d_sum = dv_start.clone(), start.clone()
        attend_backward(Uh, q, v, h, d_c, a32, dA, d_sum, wide[:, 2 : N + 2], dv, fused)
        assert (wide[:, :2] == 7).all() and (wide[:, N + 2 :] == 7).all()
        return wide[:, 2 : N + 2].float(), dv, d_sum

    for dA in (d_alpha, None):
        loss = (torch.bmm(alpha[:, None], h.double())[:, 0] * d_c.double()).sum()
        loss = loss + (0 if dA is None else (alpha * dA.double()).sum())
        gU, gq, gv = torch.autograd.grad(loss, (Uh64, q64, v64), retain_graph=True)
        a32 = alpha.detach().float()
        got = run(dA, kernels)
        d_q, dv, d_sum = got
        tol_q = 1e-5 if h_dtype == torch.float32 else 2**-8 * gq.abs().max().item()  # bf16 d_q
        torch.testing.assert_close((d_sum - start) * v, gU.float(), rtol=0, atol=1e-5)
        torch.testing.assert_close(d_q, gq.float(), rtol=0, atol=tol_q)
        torch.testing.assert_close((dv - dv_start).sum(0), gv.float(), rtol=0, atol=1e-5)
        ref = run(dA, None)
        tol = 1e-5 if h_dtype == torch.float32 else 5e-3  # PyTorch's bmm rounds h ∂L/∂c to bf16
        for a, b in zip(got, ref, strict=True):
            torch.testing.assert_close(a, b, rtol=0, atol=tol)
    d_q, dv, d_sum = torch.empty(B, N), torch.zeros(B, N), torch.zeros(B, Tx, N)
    args = dict(
        Uh=Uh, q=q, v_a=v, h=h, d_c=d_c, alpha=a32, d_alpha=None, d_sum=d_sum, d_q=d_q, dv=dv
    )
    assert kernels.attend_backward(**args)
    other = torch.float32 if h_dtype == torch.bfloat16 else torch.bfloat16
    for bad in (
        dict(Uh=Uh.double()),
        dict(d_sum=d_sum.transpose(0, 1)),
        dict(q=q[:, :-1]),
        dict(alpha=a32[:, :-1]),
        dict(d_alpha=d_alpha[:, :1]),
        dict(d_c=d_c.to(other)),
        dict(dv=dv.t().contiguous().t()),
        dict(v_a=v[:-1]),
        dict(d_q=d_q.t()),
        dict(d_q=d_q.double()),
    ):
        assert not kernels.attend_backward(**{**args, **bad})


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_target_log_prob_kernels_equal_torch_ops(lib, dtype):
    """``fast.output.target_log_prob`` (the output layer of training) with the kernels: the same
    log-probabilities and gradients (of u, W, b) as with the PyTorch operations, within float32
    rounding, under autocast or not; a gradient that is a broadcast view; a second backward."""
    from nmt_lib.fast.output import target_log_prob

    g = torch.Generator().manual_seed(1)
    N, K, r = 70, 1001, 12
    u0, b0 = torch.randn(N, r, generator=g), torch.randn(K, generator=g)
    W0 = torch.randn(r, K, generator=g).t()  # column-major, as the fast model stores W_o
    y, w = torch.randint(0, K, (N,), generator=g), torch.rand(N, generator=g)

    def run(fused):
        u, W, b = (t.clone().requires_grad_() for t in (u0, W0, b0))
        with torch.autocast("cpu", torch.bfloat16, enabled=dtype == torch.bfloat16):
            logp = target_log_prob(u, W, b, y, fused)
        (logp * w).sum().backward(retain_graph=True)
        grads = [t.grad.clone() for t in (u, W, b)]
        logp.sum().backward()  # second backward: logits recomputed; ∂/∂logp broadcast
        return [logp.detach(), *grads, *(t.grad for t in (u, W, b))]

    got, ref = run(kernels), run(None)
    tol = 1e-5 if dtype == torch.float32 else 2e-2  # bf16: the gradient is rounded to bf16
    for a, b in zip(got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    torch.testing.assert_close(got[0], ref[0], rtol=0, atol=2e-5)
    exact = torch.log_softmax(u0.double() @ W0.double().t() + b0.double(), 1).gather(1, y[:, None])
    if dtype == torch.float32:
        torch.testing.assert_close(got[0].double(), exact.squeeze(1), rtol=0, atol=2e-5)


def test_target_log_prob_backward_rounds_the_gradient_as_torch(lib):
    """The gradient written over bf16 logits is rounded to nearest (even), as PyTorch's cast: the
    same bf16 numbers but for the rare float32 values next to a rounding boundary."""
    from nmt_lib.fast.output import _grad_in_pieces

    g = torch.Generator().manual_seed(2)
    N, K = 40, 3000
    z, b = (2 * torch.randn(N, K, generator=g)).bfloat16(), torch.randn(K, generator=g)
    y, gr = torch.randint(0, K, (N,), generator=g), torch.rand(N, generator=g) + 0.5
    logp, stats = kernels.target_log_prob(z, b, y)
    d_kernel, d_torch = z.clone(), z.clone()
    db = kernels.target_log_prob_backward(d_kernel, b, y, gr, stats, logp)
    db_ref = _grad_in_pieces(d_torch, b, y, gr, logp)
    assert (d_kernel == d_torch).float().mean() > 0.999
    torch.testing.assert_close(d_kernel.float(), d_torch.float(), rtol=2**-7, atol=0)  # 1 ulp
    torch.testing.assert_close(db, db_ref, rtol=1e-5, atol=1e-6)


def test_kernels_ignore_the_default_dtype_and_refuse_what_they_cannot_read(lib, monkeypatch):
    """Their outputs are float32 CPU buffers whatever the default dtype; int32 targets, targets out
    of range and an ``no_eos`` that is not one flag per row go to the PyTorch operations."""
    x, b = torch.randn(3, 70), torch.randn(70)
    ref = kernels.best_words(x, 2, torch.zeros(3, dtype=torch.bool), False, b, False)
    torch.set_default_dtype(torch.float64)
    try:
        got = kernels.best_words(x, 2, torch.zeros(3, dtype=torch.bool), False, b, False)
        f32 = dict(dtype=torch.float32)
        c, e = kernels.attend(
            torch.randn(2, 3, 4, **f32),
            torch.randn(2, 4, **f32),
            torch.ones(4, **f32),
            torch.randn(2, 3, 5, **f32),
            torch.ones(2, 3, dtype=torch.bool),
        )
    finally:
        torch.set_default_dtype(torch.float32)
    assert got[0].dtype == torch.float32 and torch.equal(got[0], ref[0])
    assert (
        e.dtype == c.dtype == torch.float32 and torch.isfinite(e).all() and torch.isfinite(c).all()
    )
    y = torch.tensor([1, 5, 69])
    assert kernels.target_log_prob(x, b, y) is not None
    assert kernels.target_log_prob(x, b, y.int()) is None
    assert kernels.target_log_prob(x, b, torch.tensor([1, 5, 70])) is None
    assert kernels.best_words(x, 2, torch.tensor(False), False, b, False) is None


def test_library_loads_once_under_threads_and_falls_back_without_a_home(tmp_path, monkeypatch):
    """Threads asking at once share one build; a missing home directory (no ``NMT_LIB_CACHE``)
    warns and falls back instead of failing."""
    import threading

    monkeypatch.setattr(kernels, "_LOADED", [])
    monkeypatch.setenv("NMT_LIB_CACHE", str(tmp_path))
    got = []
    threads = [threading.Thread(target=lambda: got.append(kernels.library())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 4 and len({id(x) for x in got}) == 1
    if got[0] is not None:
        assert len(list(tmp_path.iterdir())) == 1  # one library, no temporary files left
    monkeypatch.delenv("NMT_LIB_CACHE")
    monkeypatch.setattr(
        kernels.Path, "home", lambda: (_ for _ in ()).throw(RuntimeError("no home"))
    )
    with pytest.warns(RuntimeWarning, match="could not build"):
        assert kernels.load() is None


GRU_FNS = ("gru_gates", "gru_update", "gru_backward_update", "gru_backward_reset")


def gru_operands(dtype, n, seed):
    """Random operands of the four GRU kernels, ``[D, k, ·]`` views with row strides other than
    their widths (slices of wider rows, as the scans pass them), the compute-dtype ones in
    ``dtype``; a mask with a row off in each direction."""
    from nmt_lib.fast import scan as gru

    g = torch.Generator().manual_seed(seed)
    D, k = 2, 5

    def rand(cols, dt=torch.float32, lo=None):
        wide = torch.randn(D, k, cols + 3, generator=g).to(dt)
        return wide[..., 1 : cols + 1]

    def unit(cols):  # r, z, ht in (0, 1) or (-1, 1), as the forward leaves them
        return torch.rand(D, k, cols, generator=g) * 0.98 + 0.01

    mask = torch.ones(D, k, 1, dtype=torch.bool)
    mask[0, 3], mask[1, 0] = False, False
    return (
        gru,
        mask,
        dict(
            a=rand(3 * n),
            x=rand(3 * n, dtype),
            g=rand(2 * n, dtype),
            u=rand(n, dtype),
            h=rand(n),
            r=unit(n),
            z=unit(n),
            ht=2 * unit(n) - 1,
            dh=rand(n),
            d_rh=rand(n, dtype),
        ),
    )


def run_gru_fns(impl, gru, mask, t, dtype, n):
    """Each of the four functions of ``impl`` (the kernels or nmt_lib.paper.gru) on copies of ``t``; the
    outputs written."""
    c = {key: v.clone() for key, v in t.items()}
    lead = c["h"].shape[:-1]  # [D, k] or [k]
    new = lambda cols, dt=torch.float32: torch.full((*lead, cols), 7.0, dtype=dt)  # noqa: E731
    r, z, rh = new(n), new(n), new(n, dtype)
    ht, out, out_c = new(n), c["h"].clone(), new(n, dtype)
    dA, dcand_c, drz_c, dA_c = new(3 * n), new(n, dtype), new(2 * n, dtype), new(3 * n, dtype)
    done = [
        impl.gru_gates(c["a"], c["x"], c["g"], c["h"], r, z, rh),
        impl.gru_update(
            c["a"][..., :n], c["x"][..., :n], c["u"], c["z"], out, mask, ht, out, out_c
        ),  # out is h: updated in place
        impl.gru_backward_update(c["dh"], mask, c["z"], c["ht"], c["h"], dA, dcand_c),
        impl.gru_backward_reset(c["d_rh"], c["h"], c["r"], dA, drz_c, c["dh"], dA_c),
    ]
    return done, [r, z, rh, ht, out, out_c, dA, dcand_c, drz_c, dA_c, c["dh"]]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("n", [1, 7, 37])  # shorter and longer than a vector, with a tail
@pytest.mark.parametrize("one_gru", [False, True])
def test_gru_kernels_equal_torch_ops(lib, dtype, n, one_gru):
    """The four GRU kernels write what nmt_lib.paper.gru's PyTorch functions write, within float32
    rounding (outputs in bf16: within one bf16 ulp): strided views, a mask, the new state written
    over the old, bf16 or float32 matmul operands; past the mask only dh passes. ``[D, k, ·]``
    operands, or ``[k, ·]`` ones for one GRU (the decoder's)."""
    gru, mask, t = gru_operands(dtype, n, seed=n)
    if one_gru:  # the second direction's: its row 0 masked out
        mask, t = mask[1], {key: v[1] for key, v in t.items()}
    done, got = run_gru_fns(kernels, gru, mask, t, dtype, n)
    assert all(done)
    _, ref = run_gru_fns(gru, gru, mask, t, dtype, n)
    for a, b in zip(got, ref, strict=True):
        assert a.dtype == b.dtype
        tol = 2**-7 if a.dtype == torch.bfloat16 else 1e-6
        torch.testing.assert_close(a.float(), b.float(), rtol=tol, atol=tol)
    dA = got[6]  # masked-out rows:
    assert (dA[0, : 2 * n] == 0).all() if one_gru else (dA[0, 3, : 2 * n] == 0).all()
    assert one_gru or (dA[1, 0, : 2 * n] == 0).all()


def test_gru_kernels_refuse_what_they_cannot_read(lib):
    """float64 operands, a wrong width, a mask of another shape, operands not ``[D, k, ·]`` (or
    ``[k, ·]`` with D = 1), an output whose rows share memory or more than ``MAX_UNITS`` units:
    False, nothing written (the scans then run nmt_lib.paper.gru's functions)."""
    gru, mask, t = gru_operands(torch.float32, 4, seed=0)
    t64 = {key: v.double() for key, v in t.items()}
    done, out = run_gru_fns(kernels, gru, mask, t64, torch.float64, 4)
    assert not any(done) and all((o == 7).all() for o in out[:4])
    r = torch.empty(2, 5, 4)
    assert not kernels.gru_gates(t["a"][..., :-1], None, t["g"], t["h"], r, r, r)
    assert not kernels.gru_update(t["a"][..., :4], None, t["u"], t["z"], t["h"], mask[:, :3], r, r)
    assert not kernels.gru_gates(t["a"][0], None, t["g"][0], t["h"], r, r, r)  # [k, ·] for D = 2
    assert not kernels.gru_gates(
        t["a"][0, 0], None, t["g"][0, 0], t["h"][0, 0], r[0, 0], r[0, 0], r[0, 0]
    )  # 1-D
    assert not kernels.gru_update(
        t["a"][0, :, :4], None, t["u"][0], t["z"][0], t["h"][0], mask, r[0], r[0]
    )  # mask [D, k, 1] for D = 1
    out = torch.zeros(1, 5, 4).expand(2, 5, 4)  # both directions' rows in the same memory
    assert not kernels.gru_gates(t["a"], None, t["g"], t["h"], out, r, r)
    big = kernels.MAX_UNITS + 1  # more units than the kernels keep on a thread's stack
    h, r = torch.zeros(1, 1, big), torch.full((1, 1, big), 7.0)
    assert not kernels.gru_gates(
        torch.zeros(1, 1, 3 * big), None, torch.zeros(1, 1, 2 * big), h, r, r, r
    )
    assert (r == 7).all()


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_training_with_and_without_gru_kernels(lib, arch):
    """A float32 forward and backward of the whole model (both scans, padding, sentences ending at
    different steps) gives the same loss and gradients with the kernels (and under autocast the
    prepacked products, ``kernels.right_product``) as with the fast backend's PyTorch functions and
    ``torch.matmul``, within float32 rounding; under bf16 autocast within bf16 rounding."""
    from nmt_lib.config import ModelConfig
    from nmt_lib.paper.model import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(
        arch=arch,
        src_vocab=30,
        trg_vocab=40,
        m=8,
        n=12,
        n_align=10,
        l=6,
        output_rank=None,
        init="fanin",
    )
    paper = build_model(cfg)
    x, y = torch.randint(3, 30, (6, 9)), torch.randint(3, 40, (6, 7))
    x_mask = torch.arange(9) < torch.tensor([9, 9, 7, 5, 3, 2])[:, None]
    y_mask = torch.arange(7) < torch.tensor([7, 3, 6, 2, 7, 1])[:, None]

    def loss_and_grads(bf16, compiled):
        model = accelerate(paper, compiled)
        model.zero_grad()
        with torch.autocast("cpu", torch.bfloat16, enabled=bf16):
            loss = -model(x, x_mask, y, y_mask)[0].sum()
        loss.backward()
        return [loss.detach()] + [p.grad.clone() for p in model.parameters()]

    for bf16, tol in ((False, 1e-5), (True, 3e-2)):
        got, ref = loss_and_grads(bf16, True), loss_and_grads(bf16, False)
        for a, b in zip(got, ref, strict=True):
            torch.testing.assert_close(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_transposed_kernel_equals_torch_copy(lib, dtype):
    """``gru.transposed`` with the kernel: the same tensor as PyTorch's transposing copy (casts
    rounded alike, ties to even, inf and NaN kept; 32 x 32 blocks and the partial ones at the
    edges take different code), for matrices, batches of them and rows strided; None for leading
    dims that do not flatten into one, float64, or fewer than two dims."""
    from nmt_lib.fast.scan import transposed

    g = torch.Generator().manual_seed(3)
    wide = torch.randn(3, 70, 45, generator=g)
    halfway = torch.tensor([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8)])  # bf16 ties: to even
    nans = torch.tensor([0x7FFFFFFF, -1], dtype=torch.int32).view(torch.float32)  # rounding: ±0
    wide[:, 5, :9] = torch.cat([halfway, torch.tensor([math.inf, -math.inf, math.nan, 0.0]), nans])
    for x in (
        wide[0],
        wide[:, :, 2:35],
        wide[1, 3:],
        wide.to(dtype),
        wide.transpose(0, 1),
        torch.randn(0, 5),
    ):
        for out in (torch.bfloat16, torch.float32):
            got = kernels.transposed(x, out)
            assert got is not None and got.is_contiguous()
            torch.testing.assert_close(got, transposed(x, out), rtol=0, atol=0, equal_nan=True)
    four = torch.randn(2, 3, 4, 5, generator=g).transpose(0, 1)  # leading [3, 2]: not one dim
    assert kernels.transposed(four, dtype) is None
    assert torch.equal(transposed(four, dtype, kernels), transposed(four, dtype))
    assert kernels.transposed(wide.double(), dtype) is None
    assert kernels.transposed(wide[0, 0], dtype) is None
    same = transposed(wide.double(), dtype, kernels), transposed(wide.double(), dtype)
    torch.testing.assert_close(*same, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("path", ["amx", "onednn"])
def test_right_product_is_the_matmul(monkeypatch, path):
    """``kernels.right_product(W)(x)`` is ``x @ W`` in bf16 (float32 sums rounded once: within a
    bf16 ulp of the float32 product of the same bf16 numbers), for ``W`` contiguous or a transposed
    view, ``[1, n, m]`` with ``x [1, k, n]``, ``x`` a slice of rows or strided columns, no rows;
    None for float32 and ``NMT_LIB_KERNELS=0``. Both ways: AMX tiles, oneDNN's prepacked weight
    (which leaves two weights ``[2, n, m]`` to ``bmm``)."""
    if path == "amx" and not kernels.amx():
        pytest.skip("no AMX on this CPU (or no compiled kernels)")
    if path == "onednn":
        if not kernels._prepacking():
            pytest.skip("this PyTorch has no oneDNN bf16 prepacked linear: matmul is used")
        monkeypatch.setattr(kernels, "amx", lambda: False)
    g = torch.Generator().manual_seed(5)
    W = torch.randn(40, 24, generator=g).bfloat16()
    x = torch.randn(2, 19, 80, generator=g).bfloat16()
    for w in (W, torch.randn(24, 40, generator=g).bfloat16().mT):
        for xs in (x[1, 2:15, :40], x[0, :, 40:], x[0, :0, :40], x[:1, :7, :40]):
            got = kernels.right_product(w[None] if xs.dim() == 3 else w)(xs)
            want = xs.float() @ w.float()
            assert got.dtype == torch.bfloat16 and got.shape == want.shape
            torch.testing.assert_close(got.float(), want, rtol=2**-8, atol=1e-6)
    assert (kernels.right_product(W.float()) is None) == (not kernels.onednn_float32())
    assert (kernels.right_product(torch.stack([W, W])) is None) == (path == "onednn")
    monkeypatch.setenv("NMT_LIB_KERNELS", "0")
    assert kernels.right_product(W) is None


def test_amx_product_is_the_matmul():
    """``kernels.c``'s ``amx_product`` at the shapes its tiles leave over: rows, inner and output
    sizes that are not multiples of 16 / 32 (or below), ``D`` = 2 weights, float32 or bf16 ``x``
    with rows apart and NaN, inf around them (which a read past a row would spread), ``W``
    transposed, with and without a bias. Each entry within half a bf16 ulp of the exact result
    for the bf16 numbers, plus float32 summation error: ``2^-8 |x @ W + b| + K 2^-23 (|x| @ |W|
    + |b|)``."""
    if not kernels.amx():
        pytest.skip("no AMX on this CPU (or no compiled kernels)")
    g = torch.Generator().manual_seed(11)
    for D, M, K, N in [
        (1, 1, 1, 1),
        (1, 15, 31, 17),
        (1, 16, 32, 32),
        (1, 17, 45, 33),
        (2, 33, 64, 48),
        (1, 80, 620, 77),
        (2, 64, 256, 517),
        (1, 3, 0, 5),
    ]:
        for x_dtype, transposed, bias in (
            (torch.bfloat16, False, False),
            (torch.float32, True, True),
        ):
            W = torch.randn(D, N, K, generator=g).bfloat16().mT
            W = W if transposed else W.contiguous()
            big = torch.randn(D, M, K + 3, generator=g).to(x_dtype)
            big[..., :2], big[..., K + 2 :] = float("nan"), float("inf")  # never to be read
            x = big[..., 2 : K + 2]  # rows K + 3 apart
            b = torch.randn(N, generator=g) * 10 if bias else torch.zeros(N)
            product = kernels.amx_product(W if D > 1 else W[0], b if bias else None)
            got = product(x if D > 1 else x[0])
            xb, Wd = x.to(torch.bfloat16).double(), W.double()
            exact = xb @ Wd + b.double()
            bound = 2**-8 * exact.abs() + K * 2**-23 * (xb.abs() @ Wd.abs() + b.double().abs())
            assert got.dtype == torch.bfloat16 and got.shape == exact.reshape(got.shape).shape
            assert ((got.double().reshape(exact.shape) - exact).abs() <= bound).all(), (D, M, K, N)
    with pytest.raises(ValueError, match="right_product"):
        kernels.right_product(torch.ones(2, 4, 5, dtype=torch.bfloat16))(torch.ones(3, 1, 4))
    assert kernels.amx_product(torch.ones(4, 5)) is None  # float32


@pytest.fixture
def onednn_float32(monkeypatch):
    """oneDNN's float32 products switched on (``kernels.onednn_float32``, on AMD CPUs by default)
    where this PyTorch has them."""
    if not kernels._prepacking(torch.float32):
        pytest.skip("this PyTorch has no oneDNN float32 linear")
    monkeypatch.setattr(kernels, "onednn_float32", lambda: True)


def test_float32_products_by_onednn_are_the_matmul(onednn_float32, monkeypatch):
    """``kernels.matmul`` and ``kernels.right_product`` by oneDNN give ``torch.matmul``'s float32
    product (within float32 rounding): 2-D and 3-D, operands contiguous, transposed, or row and
    column slices (oneDNN multiplies those 500x slower: copied first), no rows, an inner size of 0,
    a bias; ``torch.matmul`` itself for float64 or bf16 operands, where autograd needs a graph, and
    with ``NMT_LIB_KERNELS=0``."""
    g = torch.Generator().manual_seed(3)

    def rand(*shape):
        return torch.randn(*shape, generator=g)

    def close(got, a, b):
        want = (a.double() @ b.double()).float()
        assert got.shape == want.shape and got.dtype == torch.float32
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)

    A = [rand(37, 53), rand(53, 37).t(), rand(37, 80)[:, 5:58], rand(80, 53)[::2][:37], rand(0, 53)]
    Bs = [rand(53, 29), rand(29, 53).t(), rand(53, 60)[:, 3:32], rand(53, 0)]
    linear, seen = torch.ops.mkldnn._linear_pointwise, []

    def spy(x, w, *rest):
        seen.append(all(t.is_contiguous() or t.t().is_contiguous() for t in (x, w)))
        return linear(x, w, *rest)

    with monkeypatch.context() as m:
        m.setattr(torch.ops.mkldnn, "_linear_pointwise", spy)
        for a in A:
            for b in Bs:
                close(kernels.matmul(a, b), a, b)
    assert len(seen) == 12 and all(seen)  # the empty products are torch.matmul's
    for W in Bs[:3]:  # x: rows of contiguous columns
        close(kernels.right_product(W)(A[0]), A[0], W)
        bias = rand(29)
        torch.testing.assert_close(kernels.right_product(W, bias)(A[2]), A[2] @ W + bias)
    close(kernels.matmul(rand(4, 0), rand(0, 6)), rand(4, 0), rand(0, 6))
    a3, b3 = rand(2, 7, 9), rand(2, 11, 9).mT
    close(kernels.matmul(a3, b3), a3, b3)
    with pytest.raises(RuntimeError):
        kernels.matmul(rand(3, 4), rand(5, 6))  # torch.matmul's error
    calls = []
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", lambda *a: calls.append(a))
    x, w = rand(3, 4), rand(4, 5)
    for a, b in ((x.double(), w.double()), (x.bfloat16(), w.bfloat16()), (x.requires_grad_(), w)):
        torch.testing.assert_close(kernels.matmul(a, b), torch.matmul(a, b))
    monkeypatch.setenv("NMT_LIB_KERNELS", "0")
    assert kernels.right_product(w) is None
    assert calls == []


@pytest.fixture
def fresh_onednn_float32():
    """``kernels.onednn_float32`` asked anew, and forgotten again afterwards."""
    kernels.onednn_float32.cache_clear()
    yield kernels.onednn_float32
    kernels.onednn_float32.cache_clear()


def test_onednn_float32_on_amd_cpus_only(fresh_onednn_float32, monkeypatch):
    """oneDNN's float32 products where ``/proc/cpuinfo`` names an AMD CPU (and this PyTorch has
    them), not elsewhere, nor with ``NMT_LIB_KERNELS=0``."""
    has = kernels._prepacking(torch.float32)
    for vendor, env, want in (
        ("AuthenticAMD", "1", has),
        ("GenuineIntel", "1", False),
        ("", "1", False),
        ("AuthenticAMD", "0", False),
    ):
        monkeypatch.setattr(kernels, "cpu_info", lambda *keys, v=vendor: v)
        monkeypatch.setenv("NMT_LIB_KERNELS", env)
        fresh_onednn_float32.cache_clear()
        assert fresh_onednn_float32() is want


def test_beam_search_with_and_without_onednn_float32(monkeypatch):
    """A float32 RNNsearch beam search finds the same translations and costs with oneDNN's
    products (forced on) as with ``torch.matmul``'s."""
    if not kernels._prepacking(torch.float32):
        pytest.skip("this PyTorch has no oneDNN float32 linear")
    model, xs = peaked_model()
    hyps = {}
    for on in (True, False):
        monkeypatch.setattr(kernels, "onednn_float32", lambda on=on: on)
        hyps[on] = decoding.decode(model, xs, SearchConfig(beam=4))
    assert [h.tokens for h in hyps[True]] == [h.tokens for h in hyps[False]]
    assert [h.cost for h in hyps[True]] == pytest.approx([h.cost for h in hyps[False]], rel=1e-5)
