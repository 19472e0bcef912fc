"""The same functions on a GPU (CUDA) as on the CPU: skipped where there is none (CI, most machines).

On a GPU the compiled CPU kernels and oneDNN's prepacked products step aside and the PyTorch
operations compute everything: the model in float64 gives the CPU's log-probabilities, attention
weights and gradients to 1e-9; under bf16 autocast it stays as close to float32 as on the CPU; beam
search finds the CPU's translations; Adadelta is ``torch.optim.Adadelta``'s; a training run on the
toy corpus trains, checkpoints and resumes on the GPU; the CUDA graphs of ``train.cuda_graphs``
replay the eager step's loss and gradients. The models before and after the paper (LSTM
encoder–decoders, Luong's attention, the Transformer) equal the CPU in float64 and search alike.
"""

from __future__ import annotations

import pytest
import torch
from test_fast_paths import setup
from test_graphs import three_batches
from test_seq2seq import setup as seq2seq_setup
from test_train import toy, with_train  # noqa: F401 (toy: a fixture)
from test_transformer import setup as transformer_setup

from nmt_lib import data
from nmt_lib.checkpoint import load_checkpoint
from nmt_lib.config import SearchConfig
from nmt_lib.decoding import decode
from nmt_lib.fast import kernels
from nmt_lib.fast.graphs import GraphedLoss
from nmt_lib.fast.optim import Adadelta
from nmt_lib.fast.steps import best_words
from nmt_lib.paper.model import build_model
from nmt_lib.train import train_run
from nmt_lib.trainer import Trainer

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
GPU = torch.device("cuda")
ARCHS = ["RNNsearch", "RNNencdec"]


def outputs_and_grads(model, batch, device, autocast=False):
    """``logp``, ``α`` (or None) and every parameter's gradient of a random linear loss of both,
    on ``device``, as CPU tensors; the loss's weights are drawn on the CPU (the same everywhere)."""
    model = model.to(device)
    x, x_mask, y, y_mask = (t.to(device) for t in batch)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
        logp, alpha = model(x, x_mask, y, y_mask)
    g = torch.Generator().manual_seed(5)
    w = torch.randn(logp.shape, generator=g, dtype=torch.float64)
    loss = (logp.double() * w.to(device)).sum()
    if alpha is not None:
        w = torch.randn(alpha.shape, generator=g, dtype=torch.float64)
        loss = loss + (alpha.double() * w.to(device)).sum()
    names, params = zip(*model.named_parameters(), strict=True)
    grads = torch.autograd.grad(loss, params)
    cpu = lambda t: None if t is None else t.detach().cpu()  # noqa: E731
    return cpu(logp), cpu(alpha), {k: cpu(d) for k, d in zip(names, grads, strict=True)}


@pytest.mark.parametrize("arch", ARCHS)
def test_float64_on_cuda_equals_the_cpu(arch):
    model, *batch = setup(arch, backend="fast")
    ref = outputs_and_grads(model, batch, torch.device("cpu"))
    got = outputs_and_grads(model, batch, GPU)
    tol = dict(rtol=1e-9, atol=1e-10)
    torch.testing.assert_close(got[0], ref[0], **tol)
    if arch == "RNNsearch":
        torch.testing.assert_close(got[1], ref[1], **tol)
    for k, g in ref[2].items():
        torch.testing.assert_close(got[2][k], g, **tol, msg=k)


@pytest.mark.parametrize("arch", ARCHS)
def test_bf16_autocast_on_cuda_as_close_to_float32_as_on_the_cpu(arch):
    """Log-probs within 0.01 nats of float32, every gradient within 5 % (relative L2) or twice the
    CPU's bf16 error (as ``test_fast_paths.test_bf16_autocast_as_close_to_float32_as_the_step_path``)."""
    model, *batch = setup(
        arch, backend="fast", dtype=torch.float32, scale=0.3, m=16, n=16, n_dec=24, n_align=12, l=8
    )
    exact = outputs_and_grads(model, batch, torch.device("cpu"))
    cpu_bf16 = outputs_and_grads(model, batch, torch.device("cpu"), autocast=True)
    gpu_bf16 = outputs_and_grads(model, batch, GPU, autocast=True)
    torch.testing.assert_close(gpu_bf16[0], exact[0], rtol=0, atol=0.01)
    for k, g in exact[2].items():
        err = float((gpu_bf16[2][k] - g).norm() / g.norm().clamp_min(1e-30))
        err_cpu = float((cpu_bf16[2][k] - g).norm() / g.norm().clamp_min(1e-30))
        assert err < max(0.05, 2 * err_cpu), (k, err, err_cpu)


@pytest.mark.parametrize("beam", [0, 3])
def test_search_on_cuda_finds_the_cpus_translations(beam):
    model, x, x_mask, _, _ = setup("RNNsearch", backend="fast", scale=1.0)
    xs = [row[m].tolist() for row, m in zip(x, x_mask, strict=True)]
    search = SearchConfig(beam=max(beam, 1), batch_size=2)
    ref = decode(model.eval(), xs, search, greedy=beam == 0, return_alpha=True)
    got = decode(model.to(GPU), xs, search, greedy=beam == 0, return_alpha=True, device=GPU)
    for a, b in zip(got, ref, strict=True):
        assert a.tokens == b.tokens and a.finished == b.finished
        assert a.cost == pytest.approx(b.cost, rel=1e-9)
        torch.testing.assert_close(a.alpha, b.alpha, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("normalized", [False, True])
def test_best_words_on_cuda_equal_the_cpus(dtype, normalized):
    """The GPU's few-operation path against the CPU's (the compiled kernel where it applies)."""
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(7, 300, generator=g) * 3).to(dtype)
    bias = None if normalized else torch.randn(300, generator=g)
    no_eos = torch.rand(7, generator=g) < 0.5
    cuda = lambda t: None if t is None else t.to(GPU)  # noqa: E731
    for ignore_unk in (False, True):
        v, j = best_words(x.clone(), 5, no_eos, ignore_unk, bias, normalized, kernels)
        v_gpu, j_gpu = best_words(
            cuda(x), 5, cuda(no_eos), ignore_unk, cuda(bias), normalized, kernels
        )
        assert v_gpu.dtype == torch.float32 and j_gpu.shape == (7, 5)
        torch.testing.assert_close(v_gpu.cpu(), v, rtol=1e-5, atol=1e-5)
        assert torch.equal(x.gather(1, j_gpu.cpu()), x.gather(1, j))  # the same words, up to ties


def test_adadelta_on_cuda_is_torch_adadelta():
    """torch's own (multi-tensor) step; ``grad_scale`` as scaling the gradients first."""
    g = torch.Generator().manual_seed(0)
    shapes = [
        torch.randn(5, 9, generator=g),
        torch.randn(9, 5, generator=g).t(),
        torch.randn(1011, generator=g),
    ]
    ours = [torch.nn.Parameter(t.to(GPU)) for t in shapes]
    ref = [torch.nn.Parameter(t.to(GPU)) for t in shapes]
    opt = Adadelta(ours, lr=1.0, rho=0.95, eps=1e-6)
    opt_ref = torch.optim.Adadelta(ref, lr=1.0, rho=0.95, eps=1e-6)
    for scale in (1.0, 0.3, 1.0):
        for a, b in zip(ours, ref, strict=True):
            a.grad = torch.randn(a.shape, generator=g).to(GPU)
            b.grad = a.grad * scale
        opt.step(grad_scale=scale)
        opt_ref.step()
    for a, b in zip(ours, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_training_run_on_cuda_in_bf16_trains_and_resumes(toy, tmp_path):  # noqa: F811
    cfg, prep, _ = toy
    cfg = with_train(cfg, device="cuda", precision="bf16", eval_every=3)
    first = train_run(with_train(cfg, max_updates=3), tmp_path / "a", prep, progress=False)
    second = train_run(with_train(cfg, max_updates=6), tmp_path / "a", prep, progress=False)
    assert first["updates"] == 3 and second["resumed_from_update"] == 3 and second["updates"] == 6
    assert second["device"] == torch.cuda.get_device_name(0) and second["precision"] == "bf16"
    state = load_checkpoint(f"{second['checkpoint_dir']}/last.pt")
    assert all(t.device.type == "cpu" and t.isfinite().all() for t in state["model"].values())
    assert second["last_eval"]["dev_nll"] > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_cuda_graphs_replay_the_eager_loss_and_gradients(arch):
    """Two padded shapes (two graphs), the first again (a replay on new inputs), float64. The eager
    step's autograd graph is freed before the next capture, as in training: a live one ties the
    parameters' gradient accumulators to the stream it ran on, which a capture may not wait on."""
    model, x, x_mask, y, y_mask = setup(arch, backend="fast")
    model = model.to(GPU)
    params = list(model.parameters())
    graphs = GraphedLoss(model, params, "fp32", multiple=4)

    def eager(batch):
        loss = -model(*batch)[0].sum()
        return loss.detach(), torch.autograd.grad(loss, params)

    for batch in three_batches(x, x_mask, y, y_mask):
        batch = [t.to(GPU) for t in batch]
        got_loss, got_grads = graphs(*batch)
        loss, grads = eager(batch)
        torch.testing.assert_close(got_loss, loss, rtol=1e-10, atol=1e-10)
        for g, ref in zip(got_grads, grads, strict=True):
            torch.testing.assert_close(g, ref, rtol=1e-10, atol=1e-10)
    assert sorted(graphs.graphs) == [(3, 4, 4), (3, 8, 8)]


RECIPES = {"paper": {}, "adam-sentence": {"optimizer": "adam", "lr": 1e-3, "loss": "sentence"}}


@pytest.mark.parametrize(
    "precision,tol,recipe",
    [("fp32", 1e-5, "paper"), ("bf16", 1e-2, "paper"), ("fp32", 1e-5, "adam-sentence")],
)
def test_training_with_cuda_graphs_equals_eager_training(toy, precision, tol, recipe):  # noqa: F811
    """bf16: the padded shapes' products may round differently. Adam moves a weight whose gradient
    is rounding noise by ~lr whatever its sign: its weights are compared to lr."""
    cfg, prep, _ = toy
    atol = tol / 10 if recipe == "paper" else 3 * RECIPES[recipe]["lr"]

    def three_updates(cuda_graphs: bool):
        c = with_train(
            cfg, device="cuda", precision=precision, cuda_graphs=cuda_graphs, **RECIPES[recipe]
        )
        torch.manual_seed(c.train.seed)
        it = data.TrainIterator.from_config(prep.train, c.data)
        tr = Trainer(c, build_model(c.model).to(GPU), it, GPU)
        losses = [tr.step()["loss"] for _ in range(3)]
        return tr, losses, {k: v.cpu() for k, v in tr.model.state_dict().items()}

    eager, graphed = three_updates(False), three_updates(True)
    assert not hasattr(eager[0].backward, "graphs") and graphed[0].backward.graphs.graphs
    assert graphed[1] == pytest.approx(eager[1], rel=tol)
    for k, v in eager[2].items():
        torch.testing.assert_close(graphed[2][k], v, rtol=10 * tol, atol=atol, msg=k)


OTHER_MODELS = {  # the "before and after the paper" models, as their own tests build them
    "Seq2seq": lambda: seq2seq_setup("Seq2seq", seed=3, layers=2, reverse_source=True),
    "Peeky": lambda: seq2seq_setup("Peeky", seed=3, layers=2),
    "Luong-general": lambda: seq2seq_setup("Luong", seed=3, score="general"),
    "Luong-concat": lambda: seq2seq_setup("Luong", seed=3, score="concat"),
    "Transformer": lambda: transformer_setup(seed=3),
}


@pytest.mark.parametrize("name", OTHER_MODELS)
def test_other_models_on_cuda_equal_the_cpu_and_find_its_translations(name):
    """float64 log-probabilities, alignments and gradients to 1e-9; beam search (the Transformer's
    through its key/value cache) finds the CPU's translations, costs and alignments."""
    model, x, x_mask, y, y_mask = OTHER_MODELS[name]()
    ref = outputs_and_grads(model, (x, x_mask, y, y_mask), torch.device("cpu"))
    got = outputs_and_grads(model, (x, x_mask, y, y_mask), GPU)
    tol = dict(rtol=1e-9, atol=1e-10)
    for a, b in zip(got[:2], ref[:2], strict=True):
        if b is not None:
            torch.testing.assert_close(a, b, **tol)
    for k, g in ref[2].items():
        torch.testing.assert_close(got[2][k], g, **tol, msg=k)
    xs = [row[m].tolist() for row, m in zip(x, x_mask, strict=True)]
    model = model.cpu().eval()
    cpu = decode(model, xs, SearchConfig(beam=3, batch_size=2), return_alpha=True)
    gpu = decode(
        model.to(GPU), xs, SearchConfig(beam=3, batch_size=2), return_alpha=True, device=GPU
    )
    for a, b in zip(gpu, cpu, strict=True):
        assert a.tokens == b.tokens and a.finished == b.finished
        assert a.cost == pytest.approx(b.cost, rel=1e-9)
        if b.alpha is not None:
            torch.testing.assert_close(a.alpha, b.alpha, rtol=1e-9, atol=1e-12)
