"""The training recipe (nmt_lib.train; §4.2, App. B.2, PAPER.md §3, A6, A14) on the toy corpus."""

from __future__ import annotations

import copy
import json
import math
import platform
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from nmt_lib import data, models, runtime
from nmt_lib.backend import backend
from nmt_lib.checkpoint import default_checkpoint_dir, load_checkpoint
from nmt_lib.config import to_dict
from nmt_lib.data import fixtures
from nmt_lib.fast import kernels
from nmt_lib.gradients import clip_gradients, treat_gradients
from nmt_lib.likelihood import sentence_nll
from nmt_lib.paper.model import build_model
from nmt_lib.runtime import autocast, native_bf16, resolve_device, resolve_precision
from nmt_lib.train import train_run
from nmt_lib.trainer import Trainer
from nmt_lib.validation import dev_metrics, dev_subset


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The smoke profile's RNNsearch-50 on a small toy corpus, fp32, one thread."""
    root = tmp_path_factory.mktemp("toy")
    return (*fixtures.toy_run(root, dev_bleu_sentences=5), root)


def with_train(cfg, **kw):
    return replace(cfg, train=replace(cfg.train, **kw))


def trainer(cfg, prep, seed=None):
    torch.manual_seed(cfg.train.seed if seed is None else seed)
    it = data.TrainIterator.from_config(prep.train, cfg.data)
    return Trainer(cfg, build_model(cfg.model), it)


def adadelta_first_step(theta, g, rho=0.95, eps=1e-6):
    """PAPER.md §3: E[g²] = (1-ρ) g², Δ = -sqrt(0 + ε) / sqrt(E[g²] + ε) g (first update)."""
    return theta - math.sqrt(eps) / torch.sqrt((1 - rho) * g * g + eps) * g


def test_loss_is_the_token_sum_and_adadelta_is_groundhogs(toy):
    cfg, prep, _ = toy
    cfg = with_train(cfg, clip_norm=1e9)  # no clipping: the raw gradient reaches Adadelta
    tr = trainer(cfg, prep)
    batch = next(copy.deepcopy(tr.iterator))
    ref = copy.deepcopy(tr.model)
    loss = -ref.score(batch.x, batch.x_mask, batch.y, batch.y_mask).sum()  # sum over sentences
    loss.backward()
    loss = float(loss.detach())
    before = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    s = tr.step()
    assert s["loss"] == pytest.approx(loss, rel=1e-5)
    assert s["tokens"] == batch.n_trg_tokens and s["sentences"] == batch.x.shape[0]
    assert s["action"] == "none" and s["grad_norm"] > 1  # a sum over tokens has a large norm
    for (name, p), (_, q) in zip(tr.model.named_parameters(), ref.named_parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-6)  # the sum, not the mean
        torch.testing.assert_close(
            p.detach(), adadelta_first_step(before[name], q.grad), rtol=1e-5, atol=1e-7
        )
    group = tr.opt.param_groups[0]
    assert isinstance(tr.opt, torch.optim.Adadelta)
    assert (group["lr"], group["rho"], group["eps"]) == (1.0, 0.95, 1e-6)


def test_clip_gradients_groundhog():
    p = torch.nn.Parameter(torch.tensor([3.0, 4.0]))
    q = torch.nn.Parameter(torch.tensor([0.0]))
    for g, action, after in (
        ([3.0, 4.0], "clip", [0.6, 0.8]),  # norm 5 -> 1
        ([0.6, 0.8], "clip", [0.6, 0.8]),  # norm exactly 1: GroundHog's test is norm >= c
        ([0.3, 0.4], "none", [0.3, 0.4]),
    ):
        p.grad, q.grad = torch.tensor(g), torch.zeros(1)
        norm, act = clip_gradients([p, q], 1.0, "shrink")
        assert act == action and norm == pytest.approx(math.hypot(*g), rel=1e-6)
        torch.testing.assert_close(p.grad, torch.tensor(after))
    p.grad, q.grad = torch.tensor([math.nan, 1.0]), torch.zeros(1)
    assert clip_gradients([p, q], 1.0, "shrink")[1] == "shrink"
    torch.testing.assert_close(p.grad, 0.1 * p.detach())  # g <- 0.1 θ
    p.grad = torch.tensor([math.inf, 1.0])
    assert clip_gradients([p, q], 1.0, "skip")[1] == "skip"
    assert math.isinf(p.grad[0])  # untouched: the caller does not step


def test_clip_gradients_norm_is_accurate():
    """The global norm of 1.9M float32 entries (one matrix column-major, as ``W_o``) is within 5e-6
    of the float64 norm: ``torch.linalg.vector_norm``'s float32 sum was 2.8e-5 off here."""
    g = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.zeros(3000, 620))
    q = torch.nn.Parameter(torch.zeros(620, 30).t())
    p.grad = torch.randn(3000, 620, generator=g)
    q.grad = torch.randn(620, 30, generator=g).t()
    exact = math.sqrt(sum(float(t.grad.double().square().sum()) for t in (p, q)))
    norm, action = clip_gradients([p, q], 1.0, "shrink")
    assert action == "clip" and abs(norm - exact) < 5e-6 * exact


@pytest.mark.parametrize("policy", ["skip", "shrink"])
def test_nonfinite_gradient_is_handled(toy, policy):
    cfg, prep, _ = toy
    tr = trainer(with_train(cfg, nonfinite=policy), prep)
    W_s = tr.model.decoder.W_s
    before = {n: p.detach().clone() for n, p in tr.model.named_parameters()}
    hook = W_s.register_hook(lambda g: g * math.nan)
    s = tr.step()
    hook.remove()
    assert s["action"] == policy and tr.n_nonfinite == 1 and tr.update == 1
    for name, p in tr.model.named_parameters():
        if policy == "skip":
            assert torch.equal(p.detach(), before[name])
        else:  # every gradient replaced by 0.1 θ, then an ordinary Adadelta step
            expect = adadelta_first_step(before[name], 0.1 * before[name])
            torch.testing.assert_close(p.detach(), expect, rtol=1e-5, atol=1e-8)
    assert tr.opt.state == {} if policy == "skip" else len(tr.opt.state) > 0
    assert math.isfinite(tr.step()["loss"])  # training goes on


def test_bf16_autocast_trains_on_cpu(toy):
    cfg, prep, _ = toy
    with warnings.catch_warnings():  # on a CPU without bf16 instructions, see the next test
        warnings.simplefilter("ignore", RuntimeWarning)
        tr = trainer(with_train(cfg, precision="bf16"), prep)
    assert tr.precision == "bf16"
    before = [p.detach().clone() for p in tr.model.parameters()]
    losses = [tr.step()["loss"] for _ in range(2)]
    assert all(math.isfinite(v) and v > 0 for v in losses)
    assert all(p.dtype == torch.float32 for p in tr.model.parameters())  # fp32 master weights
    after = list(tr.model.parameters())
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, after, strict=True))
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.fixture
def cpu(monkeypatch):
    """Pretend to be an x86 CPU with the given /proc/cpuinfo flags."""

    def set_flags(*flags):
        monkeypatch.setattr(runtime, "cpu_flags", lambda: frozenset(flags))
        monkeypatch.setattr(platform, "machine", lambda: "x86_64")
        native_bf16.cache_clear()

    yield set_flags
    native_bf16.cache_clear()


@pytest.mark.parametrize(
    "flags,native",
    [
        (("avx2", "fma"), False),
        (("avx512f", "avx512bw"), False),
        (("avx512f", "avx512_bf16"), True),
        (("avx2", "amx_tile", "amx_bf16"), True),
    ],
)
def test_auto_precision_is_bf16_only_where_the_cpu_multiplies_bf16(cpu, flags, native):
    cpu(*flags)
    assert native_bf16("cpu") is native
    assert resolve_precision("auto", torch.device("cpu")) == ("bf16" if native else "fp32")
    assert resolve_precision("bf16", "cpu") == "bf16" and resolve_precision("fp32", "cpu") == "fp32"
    assert isinstance(autocast("cpu", "auto"), torch.autocast) is native


def test_bf16_without_bf16_instructions_warns_and_auto_trains_in_float32(toy, cpu, tmp_path):
    cfg, prep, _ = toy
    cpu("avx2", "fma")
    with pytest.warns(RuntimeWarning, match="precision = 'auto'"):
        assert trainer(with_train(cfg, precision="bf16"), prep).precision == "bf16"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        s = train_run(
            with_train(cfg, precision="auto", max_updates=1, eval_every=1),
            tmp_path / "run",
            prep,
            progress=False,
        )
    assert s["precision"] == "fp32"
    cpu("avx2", "avx512_bf16")
    tr = trainer(with_train(cfg, precision="auto"), prep)
    assert tr.precision == "bf16" and tr.step()["loss"] > 0


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_train_run_files_log_and_dev_nll(toy, tmp_path):
    cfg, prep, root = toy
    cfg = with_train(cfg, max_updates=4, eval_every=2)
    out = tmp_path / "results" / "runs" / "RNNsearch-50"
    s = train_run(cfg, out, prep, progress=False)
    assert s["stopped_by"] == "max_updates" and s["updates"] == 4
    assert json.loads((out / "config.json").read_text()) == to_dict(cfg)
    log = read_log(out / "train_log.jsonl")
    train = [r for r in log if r["kind"] == "train"]
    evals = [r for r in log if r["kind"] == "eval"]
    assert [r["update"] for r in train] == [1, 2, 3, 4]  # every max(1, eval_every // 10)
    assert [r["update"] for r in evals] == [2, 4]
    for r in train:
        assert {"epoch", "tokens_per_s", "train_nll", "grad_norm", "elapsed"} <= set(r)
        assert r["tokens_per_s"] > 0 and r["train_nll"] > 0
    # checkpoints live outside the results; the results hold only small files
    ckpt = Path(s["checkpoint_dir"])
    assert not ckpt.resolve().is_relative_to(out.resolve().parent.parent)
    assert {"last.pt", "src.vocab.txt", "trg.vocab.txt"} <= {p.name for p in ckpt.iterdir()}
    assert all(p.stat().st_size < 100_000 for p in out.iterdir())
    # dev NLL = per-sentence NLL averaged over the dev set (Table 2), of the final model
    state = load_checkpoint(ckpt / "last.pt")
    assert state["update"] == 4 and state["iterator"]["batch"] == 4
    model = build_model(cfg.model)
    model.load_state_dict(state["model"])
    with torch.no_grad():
        b = next(data.eval_batches(prep.dev.x, prep.dev.y, len(prep.dev)))
        dev_nll = float(-model.score(b.x, b.x_mask, b.y, b.y_mask).mean())
    assert evals[-1]["dev_nll"] == pytest.approx(dev_nll, rel=1e-5)
    assert sum(sentence_nll(model, prep.dev.x, prep.dev.y, 7)) / len(prep.dev) == pytest.approx(
        dev_nll, rel=1e-5
    )
    assert evals[-1]["dev_bleu"] is not None


def test_train_run_resume_equals_uninterrupted(toy, tmp_path):
    cfg, prep, _ = toy
    cfg = with_train(cfg, eval_every=10)
    first = train_run(with_train(cfg, max_updates=3), tmp_path / "a", prep, progress=False)
    second = train_run(with_train(cfg, max_updates=6), tmp_path / "a", prep, progress=False)
    assert first["updates"] == 3 and second["resumed_from_update"] == 3
    assert second["updates"] == 6 and second["updates_this_session"] == 3
    straight = train_run(with_train(cfg, max_updates=6), tmp_path / "b", prep, progress=False)
    a = load_checkpoint(Path(second["checkpoint_dir"]) / "last.pt")
    b = load_checkpoint(Path(straight["checkpoint_dir"]) / "last.pt")
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k

    def nll(run):
        return [
            (r["update"], r["train_nll"])
            for r in read_log(run / "train_log.jsonl")
            if r["kind"] == "train"
        ]

    assert nll(tmp_path / "a") == nll(tmp_path / "b")
    assert [u for u, _ in nll(tmp_path / "a")] == [1, 2, 3, 4, 5, 6]


def test_early_stopping_keeps_the_best(toy, tmp_path):
    cfg, prep, _ = toy
    # lr = 0: the dev NLL never improves after the first evaluation
    cfg = with_train(cfg, lr=0.0, max_updates=50, eval_every=1, patience=2)
    s = train_run(cfg, tmp_path / "r", prep, progress=False)
    assert s["stopped_by"] == "early_stop" and s["updates"] == 3
    assert s["best_update"] == 1 and s["model_checkpoint"].endswith("best.pt")
    assert load_checkpoint(s["model_checkpoint"])["update"] == 1
    again = train_run(cfg, tmp_path / "r", prep, progress=False)  # stays stopped
    assert again["updates_this_session"] == 0 and again["stopped_by"] == "early_stop"
    assert again["last_eval"]["update"] == 3


def test_budgets_in_epochs_and_hours(toy, tmp_path):
    cfg, prep, _ = toy
    upe = data.TrainIterator(prep.train, cfg.data.batch_size, 1, 0).updates_per_epoch
    cfg = with_train(cfg, eval_every=100)
    by_epochs = with_train(cfg, max_updates=None, max_epochs=0.1)
    s = train_run(by_epochs, tmp_path / "e", prep, progress=False)
    assert s["stopped_by"] == "max_epochs" and s["updates"] == math.ceil(0.1 * upe)
    by_hours = with_train(cfg, max_updates=None, max_hours=1e-9)
    s = train_run(by_hours, tmp_path / "h", prep, progress=False)
    assert s["stopped_by"] == "max_hours" and s["updates"] == 1


def test_ranks_start_from_rank_0_weights_broadcast_contiguous(toy, monkeypatch):
    """NCCL broadcasts contiguous tensors only; the fast model stores W_o column-major. Every
    parameter goes through a contiguous buffer and comes back in its own layout."""
    from nmt_lib import trainer as trainer_module

    cfg, prep, _ = toy

    def broadcast(t, src):  # rank 0's weights: here all 7
        assert t.is_contiguous() and src == 0
        t.fill_(7.0)

    monkeypatch.setattr(trainer_module.dist, "broadcast", broadcast)
    it = data.TrainIterator.from_config(prep.train, cfg.data)
    model = models.build_model(cfg.model, backend("fast"))
    layouts = {k: p.stride() for k, p in model.named_parameters()}
    assert any(not p.is_contiguous() for p in model.parameters())  # W_o / W2
    Trainer(cfg, model, it, "cpu", rank=1, world=2)
    for k, p in model.named_parameters():
        assert bool((p == 7.0).all()) and p.stride() == layouts[k], k


@pytest.mark.parametrize("chunk", [7, 1 << 17, "kernel"])
def test_adadelta_is_torch_adadelta(monkeypatch, chunk):
    """The same parameters and state as ``torch.optim.Adadelta`` after several steps: bit for bit
    in PyTorch operations, chunks of 7 elements (ragged ends) and the default; within float32
    rounding with the compiled kernel (torch's vectorized sqrt is not always correctly rounded).
    A contiguous matrix, a column-major one (``W_o``'s layout), a long vector (the vectorized
    loops), a permuted 3-D tensor (no flat view: the whole tensor at once, in PyTorch operations),
    a parameter without a gradient; and either's state loads into the other."""
    from nmt_lib.fast.optim import Adadelta

    if chunk == "kernel" and kernels.library() is None:
        pytest.skip("no compiled kernels here")
    if chunk != "kernel":
        monkeypatch.setattr(kernels, "library", lambda: None)
        monkeypatch.setattr(Adadelta, "CHUNK", chunk)
    g = torch.Generator().manual_seed(0)
    shapes = [
        torch.randn(5, 9, generator=g),
        torch.randn(9, 5, generator=g).t(),
        torch.randn(1011, generator=g),
        torch.randn(3, 4, 5, generator=g).permute(2, 0, 1),
        torch.randn(4, generator=g),
    ]
    ours = [torch.nn.Parameter(t.clone()) for t in shapes]
    ref = [torch.nn.Parameter(t.clone()) for t in shapes]
    opt = Adadelta(ours, lr=1.0, rho=0.95, eps=1e-6)
    opt_ref = torch.optim.Adadelta(ref, lr=1.0, rho=0.95, eps=1e-6)
    for _ in range(4):
        for a, b in zip(ours[:-1], ref[:-1], strict=True):  # the last one: no gradient
            grad = torch.randn(a.shape, generator=g)
            a.grad, b.grad = torch.empty_like(a).copy_(grad), torch.empty_like(b).copy_(grad)
        opt.step()
        opt_ref.step()
    same = torch.equal if chunk != "kernel" else close_in_rounding
    for a, b in zip(ours, ref, strict=True):
        assert same(a, b) and a.stride() == b.stride()
    for a, b in zip(
        opt.state_dict()["state"].values(), opt_ref.state_dict()["state"].values(), strict=True
    ):
        assert a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    opt_ref.load_state_dict(opt.state_dict())
    Adadelta(ours, lr=1.0).load_state_dict(opt_ref.state_dict())


@pytest.mark.parametrize("path", ["chunks", "kernel", "torch"])
def test_deferred_clip_is_the_clip(monkeypatch, path):
    """``treat_gradients`` then ``Adadelta.step(grad_scale=scale)`` (what the Trainer does on the
    fast backend) updates the parameters and the state bit for bit as the clip in place then a plain step,
    and leaves the gradients unscaled: chunked PyTorch operations, the compiled kernel, and torch's
    own step (``foreach``, the GPU's path)."""
    from nmt_lib.fast.optim import Adadelta

    if path == "kernel" and kernels.library() is None:
        pytest.skip("no compiled kernels here")
    if path == "chunks":
        monkeypatch.setattr(kernels, "library", lambda: None)
    g = torch.Generator().manual_seed(3)
    shapes = [
        torch.randn(5, 9, generator=g),
        torch.randn(9, 5, generator=g).t(),
        torch.randn(1011, generator=g),
    ]
    runs = []
    for defer in (False, True):
        params = [torch.nn.Parameter(t.clone()) for t in shapes]
        opt = Adadelta(params, lr=1.0, rho=0.95, eps=1e-6, foreach=path == "torch")
        gg = torch.Generator().manual_seed(4)
        for _ in range(3):
            for p in params:
                p.grad = torch.empty_like(p).copy_(torch.randn(p.shape, generator=gg) * 3)
            raw = [p.grad.clone() for p in params]
            if defer:
                norm, action, scale = treat_gradients(params, 1.0, "shrink")
                assert all(torch.equal(p.grad, r) for p, r in zip(params, raw, strict=True))
                assert action == "clip" and scale == 1.0 / norm
                opt.step(grad_scale=scale)
            else:
                assert clip_gradients(params, 1.0, "shrink")[1] == "clip"
                opt.step()
        runs.append((params, opt))
    (p0, o0), (p1, o1) = runs
    assert all(torch.equal(a, b) for a, b in zip(p0, p1, strict=True))
    for a, b in zip(o0.state.values(), o1.state.values(), strict=True):
        assert torch.equal(a["square_avg"], b["square_avg"])
        assert torch.equal(a["acc_delta"], b["acc_delta"])


def close_in_rounding(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Within float32 rounding (a few ulps after several steps). How many entries are equal
    depends on the CPU: PyTorch's vectorized sqrt is not always correctly rounded (~1 % of the
    entries on an Intel Xeon, 16-20 % on an AMD EPYC, torch 2.13), the kernel's is, which
    ``test_adadelta_kernel_rounds_correctly`` checks."""
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-12)
    return True


def test_adadelta_kernel_rounds_correctly():
    """One step of the compiled Adadelta from a random state is, bit for bit, torch's float32
    operations in torch's order, each correctly rounded (evaluated in float64 and rounded to
    float32 after each; ``addcmul_`` one fused multiply-add), and at least as close to the float64
    evaluation of the whole update as ``torch.optim.Adadelta``'s."""

    if kernels.library() is None:
        pytest.skip("no compiled kernels here")
    g = torch.Generator().manual_seed(1)
    p, grad = torch.randn(4000, generator=g), torch.randn(4000, generator=g) * 0.1
    sq, acc = torch.rand(4000, generator=g) * 1e-2, torch.rand(4000, generator=g) * 1e-3
    f = lambda t: t.double()  # noqa: E731
    r = lambda t: t.float().double()  # noqa: E731  (round to float32)
    rho, one_minus_rho, eps = r(torch.tensor(0.95)), r(torch.tensor(0.05)), r(torch.tensor(1e-6))
    s32 = r(r(one_minus_rho * f(grad)) * f(grad) + r(f(sq) * rho))
    d32 = r(r(r(r(f(acc) + eps).sqrt()) / r(r(s32 + eps).sqrt())) * f(grad))
    rounded = (r(f(p) - d32), s32, r(r(one_minus_rho * d32) * d32 + r(f(acc) * rho)))
    sq64 = f(sq) * 0.95 + 0.05 * f(grad) ** 2
    delta64 = (f(acc) + 1e-6).sqrt() / (sq64 + 1e-6).sqrt() * f(grad)
    want = (f(p) - delta64, sq64, f(acc) * 0.95 + 0.05 * delta64**2)
    ours = [t.clone() for t in (p, grad, sq, acc)]
    assert kernels.adadelta(*ours, 1.0, 0.95, 1e-6)
    ref = torch.nn.Parameter(p.clone())
    ref.grad = grad.clone()
    opt = torch.optim.Adadelta([ref], lr=1.0, rho=0.95, eps=1e-6)
    opt.step()
    opt.state[ref]["square_avg"].copy_(sq)  # again, from the same state as ours
    opt.state[ref]["acc_delta"].copy_(acc)
    ref.data.copy_(p)
    opt.step()
    theirs = (ref.detach(), opt.state[ref]["square_avg"], opt.state[ref]["acc_delta"])
    for w, x, a, b in zip(want, rounded, (ours[0], ours[2], ours[3]), theirs, strict=True):
        assert torch.equal(f(a), x)
        assert (f(a) - w).abs().max() <= (f(b) - w).abs().max()
    assert not kernels.adadelta(*(t[::2] for t in ours), 1.0, 0.95, 1e-6)  # strided: PyTorch's


def test_chunked_adadelta_leaves_complex_parameters_to_torch():
    from nmt_lib.fast.optim import Adadelta

    z = torch.randn(6, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    a, b = torch.nn.Parameter(z.clone()), torch.nn.Parameter(z.clone())
    opt, ref = Adadelta([a], lr=1.0), torch.optim.Adadelta([b], lr=1.0)
    for _ in range(2):
        a.grad, b.grad = z.conj().clone(), z.conj().clone()
        opt.step()
        ref.step()
    assert torch.equal(a, b)


# ------------------------------------------------------------- the named alternatives (TrainConfig)
@pytest.mark.parametrize("loss", ["sentence", "token"])
def test_loss_normalisation_divides_the_sum(toy, loss):
    """train.loss = "sentence" / "token": the gradient is the summed loss's divided by the update's
    sentences / target tokens, and the clip applies to that gradient."""
    cfg, prep, _ = toy
    summed, normed = (trainer(with_train(cfg, clip_norm=1e9, loss=x), prep) for x in ("sum", loss))
    a, b = summed.step(), normed.step()
    denom = a["sentences"] if loss == "sentence" else a["tokens"]
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)  # logged: the summed NLL, as before
    assert b["grad_norm"] == pytest.approx(a["grad_norm"] / denom, rel=1e-4)
    clipped = trainer(with_train(cfg, clip_norm=b["grad_norm"] / 2, loss=loss), prep)
    assert clipped.step()["action"] == "clip"


def test_adam_is_torch_adam_on_the_clipped_gradient(toy):
    cfg, prep, _ = toy
    cfg = with_train(cfg, optimizer="adam", lr=1e-3, loss="sentence", clip_norm=0.5)
    tr = trainer(cfg, prep)
    assert isinstance(tr.opt, torch.optim.Adam) and tr.opt.param_groups[0]["lr"] == 1e-3
    batch = next(copy.deepcopy(tr.iterator))
    ref = copy.deepcopy(tr.model)
    opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
    (-ref.score(batch.x, batch.x_mask, batch.y, batch.y_mask).sum() / batch.x.shape[0]).backward()
    torch.nn.utils.clip_grad_norm_(ref.parameters(), 0.5)
    opt.step()
    assert tr.step()["action"] == "clip"
    for p, q in zip(tr.model.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-7)


def test_warmup_and_plateau_schedule_resume(toy, tmp_path):
    cfg, prep, _ = toy
    cfg = with_train(cfg, optimizer="adam", lr=1e-3, warmup_updates=4)
    tr = trainer(cfg, prep)
    rates = []
    for _ in range(5):
        rates.append(tr.lr())
        tr.step()
        assert tr.opt.param_groups[0]["lr"] == rates[-1]
    assert rates == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3])
    # lr = 0 never improves the dev NLL: every evaluation after the first halves the rate
    flat = with_train(
        cfg,
        lr=0.0,
        warmup_updates=0,
        lr_schedule="plateau",
        lr_decay=0.5,
        max_updates=4,
        eval_every=1,
    )
    train_run(flat, tmp_path / "p", prep, progress=False)
    state = load_checkpoint(Path(trainer_ckpt(tmp_path / "p", flat)) / "last.pt")
    assert state["lr_scale"] == 0.5**3
    again = trainer(flat, prep)
    again.load_state_dict(state)
    assert again.early.lr_scale == 0.5**3


def trainer_ckpt(out, cfg):
    return default_checkpoint_dir(cfg, out)


def test_dev_subset_is_fixed_spread_and_used_in_training(toy, tmp_path):
    assert dev_subset(6003, 0) == list(range(6003)) == dev_subset(6003, 7000)
    idx = dev_subset(6003, 500)
    assert len(set(idx)) == 500 and idx[0] == 0 and idx[-1] > 5900  # both dev years
    assert idx == dev_subset(6003, 500)
    cfg, prep, _ = toy
    cfg = with_train(cfg, dev_nll_sentences=5, max_updates=2, eval_every=2)
    s = train_run(cfg, tmp_path / "s", prep, progress=False)
    assert s["last_eval"]["dev_nll_sentences"] == 5 and s["last_eval"]["eval_seconds"] > 0
    model = build_model(cfg.model)
    model.load_state_dict(load_checkpoint(s["model_checkpoint"])["model"])
    sub = [i for i in dev_subset(len(prep.dev), 5)]
    want = sum(sentence_nll(model, [prep.dev.x[i] for i in sub], [prep.dev.y[i] for i in sub]))
    assert s["last_eval"]["dev_nll"] == pytest.approx(want / 5, rel=1e-5)
    full = dev_metrics(model, prep, cfg, "cpu", full=True)
    assert full["dev_nll_sentences"] == len(prep.dev)


def test_a_checkpoint_of_another_recipe_is_not_resumed(toy, tmp_path):
    from nmt_lib.checkpoint import CheckpointError, fingerprint

    cfg, prep, _ = toy
    cfg = with_train(cfg, max_updates=1, eval_every=10)
    train_run(cfg, tmp_path / "r", prep, progress=False)
    adam = with_train(cfg, optimizer="adam", lr=1e-3, max_updates=2)
    with pytest.raises(CheckpointError, match="train.optimizer: checkpoint 'adadelta'"):
        train_run(adam, tmp_path / "r", prep, progress=False)
    # a config written before the recipe settings existed is the paper's recipe
    old = to_dict(cfg)
    for k in ("optimizer", "loss", "lr_schedule", "lr_decay", "warmup_updates"):
        del old["train"][k]
    assert fingerprint(old) == fingerprint(cfg)


def test_window_averages_the_updates_since_the_last_record():
    from nmt_lib.train_loop import Window

    class Stub:
        update, epoch, elapsed = 7, 0.5, 12.0

        def lr(self):
            return 0.1

    w = Window()
    w.add({"loss": 10.0, "sentences": 4, "tokens": 40, "grad_norm": 2.0, "action": "clip"})
    w.add({"loss": 6.0, "sentences": 4, "tokens": 30, "grad_norm": math.inf, "action": "shrink"})
    rec = w.record(Stub())
    assert rec["train_nll"] == 2.0 and rec["grad_norm"] == 1.0 and rec["clip_rate"] == 0.5
    assert rec["window_updates"] == 2 and rec["update"] == 7 and rec["tokens_per_s"] > 0
    assert (w.n, w.loss, w.sentences) == (0, 0.0, 0)  # the next window starts empty


def test_stop_signals_records_and_restores_the_handlers():
    import signal

    from nmt_lib.train_loop import stop_signals

    before = signal.getsignal(signal.SIGTERM)
    with stop_signals() as received:
        assert signal.getsignal(signal.SIGTERM) is not before
        signal.raise_signal(signal.SIGTERM)
        assert received == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is before


def test_label_smoothing_is_the_closed_form_cross_entropy():
    """``train.label_smoothing`` ε: the loss of a position is ``-Σ_k q_k log p_k`` with ``q`` =
    ``1 - ε`` on the reference word and ``ε / (K - 1)`` on every row but ``<pad>``, written out."""
    from nmt_lib.paper.steps import target_log_prob

    logits = torch.tensor([[0.5, 2.0, -1.0, 0.0], [1.0, 0.0, 3.0, -2.0]], dtype=torch.float64)
    logp, y, eps = logits.log_softmax(-1), torch.tensor([1, 2]), 0.1
    q = torch.tensor([[0, eps / 3, eps / 3, eps / 3]] * 2, dtype=torch.float64)
    q[0, 1] += 1 - eps
    q[1, 2] += 1 - eps
    torch.testing.assert_close(-target_log_prob(logp, y, eps), -(q * logp).sum(-1))
    # the numbers themselves, position 1: -(0.9 log p_1 + 0.1/3 (log p_1 + log p_2 + log p_3))
    p = [math.exp(v) / sum(math.exp(u) for u in (0.5, 2.0, -1.0, 0.0)) for v in (2.0, -1.0, 0.0)]
    expected = -(0.9 * math.log(p[0]) + 0.1 / 3 * sum(map(math.log, p)))
    assert -target_log_prob(logp, y, eps)[0].item() == pytest.approx(expected, rel=1e-12)
    assert torch.equal(target_log_prob(logp, y), logp.gather(1, y[:, None])[:, 0])  # ε = 0


@pytest.mark.parametrize("on", ["fast", "reference"])
def test_a_training_step_minimises_the_smoothed_loss(toy, on):
    cfg, prep, _ = toy
    cfg = with_train(cfg, label_smoothing=0.2, backend=on)
    tr = trainer(cfg, prep)
    batch = next(copy.deepcopy(tr.iterator))
    ref = copy.deepcopy(tr.model)
    logp, _ = ref(batch.x, batch.x_mask, batch.y, batch.y_mask, smoothing=0.2)
    plain = -ref.score(batch.x, batch.x_mask, batch.y, batch.y_mask).sum()
    s = tr.step()
    assert s["loss"] == pytest.approx(-float(logp.detach().sum()), rel=1e-5)
    assert s["loss"] > float(plain.detach()) * 1.01  # not the NLL


def test_multi30k_trains_and_scores_each_flickr_test_set(tmp_path, monkeypatch):
    """The smoke RNNsearch on the toy corpus in Multi30k's layout (plain-text val and both Flickr
    test sets): training reads it through the data directory rules, and ``bleu.json`` has the
    BLEU of each test set beside that of both."""
    from nmt_lib import evaluate
    from nmt_lib.config import load_profile

    root = fixtures.write_toy_multi30k(tmp_path / "m30k")
    monkeypatch.setenv("NMT_DATA", str(root))
    monkeypatch.setenv("NMT_CACHE", str(tmp_path / "cache"))
    multi30k = load_profile("studies/multi30k").runs["RNNsearch-50-s1"].data
    d = {k: getattr(multi30k, k) for k in ("train", "dev", "test")}
    cfg = load_profile(
        "smoke",
        data=d,
        train={"threads": 1, "precision": "fp32", "device": "cpu", "max_updates": 2},
    )
    cfg = cfg.runs["RNNsearch-50"]
    prep = data.prepare(cfg.data, workers=1, progress=False)
    train_run(cfg, tmp_path / "r", prep, progress=False)
    result = evaluate.evaluate_run(cfg, tmp_path / "r", prep, nll_sentences=5)
    assert result["all"]["n"] == 40
    assert {p: s["n"] for p, s in result["parts"].items()} == {
        "multi30k.test_2016_flickr": 20,
        "multi30k.test_2017_flickr": 20,
    }
    assert json.loads((tmp_path / "r" / "bleu.json").read_text())["parts"] == result["parts"]
    by_len = json.loads((tmp_path / "r" / "bleu_by_length.json").read_text())
    assert (
        by_len["parts"] == ["multi30k.test_2016_flickr"] * 20 + ["multi30k.test_2017_flickr"] * 20
    )


def test_the_inverse_sqrt_schedule_is_vaswanis_scaled_to_its_peak():
    """``learning_rate`` with ``inverse_sqrt`` is Vaswani et al.'s ``d^-0.5 min(u^-0.5, u w^-1.5)``
    times the constant that makes its peak, at ``u = w``, ``train.lr``; linear before."""
    from nmt_lib.config import TrainConfig
    from nmt_lib.trainer import learning_rate

    w, lr, d = 40, 3e-3, 128
    t = TrainConfig(max_updates=1, lr=lr, lr_schedule="inverse_sqrt", warmup_updates=w)
    vaswani = [d**-0.5 * min(u**-0.5, u * w**-1.5) for u in range(1, 400)]
    scale = lr / (d**-0.5 * w**-0.5)
    ours = [learning_rate(t, u) for u in range(1, 400)]
    assert ours == pytest.approx([scale * v for v in vaswani], rel=1e-12)
    assert max(ours) == pytest.approx(lr) and ours.index(max(ours)) == w - 1
    assert learning_rate(TrainConfig(max_updates=1, lr=lr, warmup_updates=w), 400) == lr
