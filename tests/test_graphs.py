"""``nmt_lib.fast.graphs.GraphedLoss`` on the CPU, its CUDA calls replaced by stand-ins: a "graph" that
reruns the captured step at each replay. What is checked is the bookkeeping around the capture
(padding into the input buffers, one graph per padded shape, every graph writing the same output
buffers); the capture itself, and the model's static shapes under it, are tested on a GPU
(``test_cuda.py``) and in ``test_fast_paths.test_static_shapes_compute_the_same_function``."""

from __future__ import annotations

import contextlib
import types

import pytest
import torch
from test_fast_paths import setup
from test_train import toy, trainer, with_train  # noqa: F401 (toy: a fixture)

from nmt_lib.fast import graphs
from nmt_lib.fast.graphs import GraphedLoss


@pytest.fixture
def fake_cuda(monkeypatch):
    class Graph:
        def replay(self):
            self.step()

    def record(self, graph, step):
        graph.step = step
        step()  # the capture runs the step once

    stream = types.SimpleNamespace(wait_stream=lambda s: None)
    for name, fake in {
        "CUDAGraph": Graph,
        "graph_pool_handle": lambda: None,
        "Stream": lambda device=None: stream,
        "current_stream": lambda device=None: stream,
        "stream": lambda s: contextlib.nullcontext(),
        "device": lambda d: contextlib.nullcontext(),
    }.items():
        monkeypatch.setattr(graphs.torch.cuda, name, fake)
    monkeypatch.setattr(GraphedLoss, "_record", record)


def three_batches(x, x_mask, y, y_mask) -> list[tuple]:
    """The batch, a shorter one (another padded shape), and the first shape again (a replay)."""
    short = (x[:, :3], x_mask[:, :3].clone(), y[:, :2], y_mask[:, :2].clone())
    short[1][:, 2], short[3][:, 1] = True, True  # every sentence ends at the cut
    return [(x, x_mask, y, y_mask), short, (x.flip(0), x_mask.flip(0), y, y_mask)]


@pytest.mark.parametrize("arch", ["RNNsearch", "RNNencdec"])
def test_graphs_pad_replay_and_share_their_outputs(arch, fake_cuda):
    model, x, x_mask, y, y_mask = setup(arch, backend="fast")
    params = list(model.parameters())
    graphed = GraphedLoss(model, params, "fp32", multiple=4)
    outs = []
    for batch in three_batches(x, x_mask, y, y_mask):
        loss, grads = graphed(*batch)
        ref = -model(*batch)[0].sum()
        torch.testing.assert_close(loss, ref.detach(), rtol=1e-12, atol=1e-12)
        for g, r in zip(grads, torch.autograd.grad(ref, params), strict=True):
            torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)
        outs.append((loss, grads))
    assert sorted(graphed.graphs) == [(3, 4, 4), (3, 8, 8)]  # the third batch: a replay
    assert all(o[0] is outs[0][0] and o[1] is outs[0][1] for o in outs)  # one set of buffers
    for (B, Tx, Ty), (_, inputs) in graphed.graphs.items():
        assert [t.shape for t in inputs] == [(B, Tx), (B, Tx), (B, Ty), (B, Ty)]
    assert not graphed.graphs[3, 8, 8][1][1][:, 6:].any()  # padded: mask False past the batch
    loss = graphed.backward(x, x_mask, y, y_mask)  # as loss.backward(): into p.grad
    assert loss is outs[0][0] and all(p.grad is g for p, g in zip(params, outs[0][1], strict=True))


def test_cuda_graphs_on_a_cpu_warn_and_train_eagerly(toy):  # noqa: F811
    cfg, prep, _ = toy
    cfg = with_train(cfg, cuda_graphs=True)
    with pytest.warns(UserWarning, match="cuda_graphs applies on a GPU only"):
        tr = trainer(cfg, prep)
    assert not hasattr(tr.backward, "graphs") and tr.step()["loss"] > 0
