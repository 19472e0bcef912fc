"""The compiled kernels (nmt_lib.kernels, kernels.c) against the PyTorch operations they replace, and
the fallback when they cannot be built."""

from __future__ import annotations

import math
import subprocess

import pytest
import torch

from nmt_lib import kernels, search
from nmt_lib.search import EOS, PAD, UNK


@pytest.fixture
def lib():
    lib = kernels.library()
    if lib is None:
        pytest.skip("no C compiler with OpenMP: the kernels are not built (PyTorch ops are used)")
    return lib


def torch_best_words(x, k, no_eos, ignore_unk, bias, normalized, monkeypatch):
    """``search.best_words`` with its PyTorch operations (no kernel)."""
    with monkeypatch.context() as m:
        m.setattr(kernels, "library", lambda: None)
        return search.best_words(x.clone(), k, no_eos, ignore_unk, bias, normalized)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("K", [3, 10, 64, 65, 200, 10003])
@pytest.mark.parametrize("normalized", [False, True])
def test_best_words_kernel_equals_torch_ops(lib, dtype, K, normalized, monkeypatch):
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
                ref = torch_best_words(x, k, no_eos, ignore_unk, bias, normalized, monkeypatch)
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
    v, j = search.best_words(x.clone(), 2, no_eos, False)
    ref = torch.log_softmax(x, 1)[:, 1:].topk(2)  # only <pad> excluded
    assert torch.equal(j, ref.indices + 1) and torch.equal(v, ref.values.float())


def test_beam_search_with_and_without_kernel(lib, monkeypatch):
    """A real bf16 RNNsearch beam search finds the same translations and costs either way."""
    from nmt_lib.config import ModelConfig
    from nmt_lib.model import build_model

    torch.manual_seed(0)
    cfg = ModelConfig(src_vocab=40, trg_vocab=300, m=16, n=16, n_align=16, l=8, output_rank=None,
                      init="fanin")  # fmt: skip
    model = build_model(cfg).eval()
    with torch.no_grad():
        model.decoder.b_y.normal_(0, 3)  # peaked distributions: no near-ties
    xs = [[5, 6, 7, 8, EOS], [9, 10, EOS], [11, 12, 13, EOS]]
    with torch.autocast("cpu", torch.bfloat16):
        fast = search.decode_corpus(model, xs, beam=4)
        monkeypatch.setattr(kernels, "library", lambda: None)
        plain = search.decode_corpus(model, xs, beam=4)
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
        assert kernels.library.__wrapped__() is None
    monkeypatch.setenv("NMT_LIB_KERNELS", "0")
    assert kernels.library.__wrapped__() is None


def test_excluded_words_are_pad_unk_eos():
    """The kernel's fixed columns are the vocabulary's specials (kernels.c hard-codes 0, 1, 2)."""
    assert (PAD, UNK, EOS) == (0, 1, 2)
