"""A training step's forward and backward as CUDA graphs (``train.cuda_graphs``).

On a GPU a recurrent step is a hundred small kernels, each shorter than the time Python and PyTorch
take to launch it: the GPU waits on the CPU. A CUDA graph records the kernels of a whole forward and
backward once and replays them in one launch. Its shapes are fixed, so a batch is padded to a
multiple of ``multiple`` positions on each side (one graph per padded shape), and the model computes
every row at every step and every target position (:func:`nmt_lib.fast.scan.static_shapes`): the same
function, padding masked out as everywhere (the tests compare it with the eager step). The
embeddings' gradients are then summed by ``index_add_``, with atomics: not bit-reproducible from
run to run, unlike the eager step's.

How much faster than the eager step: bench/README.md, "CUDA graphs and fewer kernels on a GPU".
A new padded shape costs a capture (two eager steps). The graphs share one memory pool, and write
the loss and the gradients into one set of buffers, so that the memory is that of one step
whatever the number of shapes.
"""

from __future__ import annotations

import torch
from torch import Tensor


class GraphedLoss:
    """``(x, x_mask, y, y_mask) -> (loss, grads)``: the summed NLL of a batch and the gradients of
    ``params`` (None for a parameter the loss does not use), by replaying the CUDA graph of the
    batch's padded shape (captured at its first use).

    The same tensors at every call, overwritten by the next one: read them before. No autograd graph
    of the model that ran on another stream may be alive during a capture (it ties the parameters'
    gradient accumulators to that stream)."""

    def __init__(
        self, model, params, precision: str = "fp32", multiple: int = 8, smoothing: float = 0.0
    ):
        self.model, self.params, self.multiple = model, list(params), multiple
        self.smooth = {"smoothing": smoothing} if smoothing else {}  # train.label_smoothing
        self.dtype = torch.bfloat16 if precision == "bf16" else None
        self.graphs: dict[tuple, tuple] = {}
        self.pool = self.out = None

    def loss_and_grads(self, x, x_mask, y, y_mask) -> tuple[Tensor, list[Tensor | None]]:
        with torch.autocast(
            "cuda", self.dtype, enabled=self.dtype is not None, cache_enabled=False
        ):
            logp, _ = self.model(x, x_mask, y, y_mask, **self.smooth)
        loss = -logp.sum()  # logp: float32 or wider
        return loss, list(torch.autograd.grad(loss, self.params, allow_unused=True))

    def __call__(self, x, x_mask, y, y_mask) -> tuple[Tensor, list[Tensor | None]]:
        up = lambda n: -(-n // self.multiple) * self.multiple  # noqa: E731
        key = (x.shape[0], up(x.shape[1]), up(y.shape[1]))
        if key not in self.graphs:
            with torch.cuda.device(x.device):
                self.graphs[key] = self._capture(*key, x.device)
        graph, inputs = self.graphs[key]
        for buf, t in zip(inputs, (x, x_mask, y, y_mask), strict=True):
            buf.zero_()  # padding: id 0, mask False
            buf[:, : t.shape[1]].copy_(t)
        graph.replay()
        return self.out

    def backward(self, x, x_mask, y, y_mask) -> Tensor:
        """The eager step's ``loss.backward()``: the loss, and ``p.grad`` of each parameter set to
        its gradient (the graphs' buffers)."""
        loss, grads = self(x, x_mask, y, y_mask)
        for p, g in zip(self.params, grads, strict=True):
            p.grad = g
        return loss

    def _capture(self, B: int, Tx: int, Ty: int, device) -> tuple:
        """The graph of ``[B, Tx]``, ``[B, Ty]`` batches and its input buffers."""
        inputs = [
            torch.full((B, T), 2, dtype=dt, device=device)  # EOS (id 2) everywhere, all real
            for T in (Tx, Ty)
            for dt in (torch.long, torch.bool)
        ]
        side = torch.cuda.Stream(device)  # a warm-up off the capture (cuBLAS, the autograd engine)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            loss, grads = self.loss_and_grads(*inputs)
        torch.cuda.current_stream(device).wait_stream(side)
        if self.out is None:  # the outputs of every graph, outside their pool
            self.pool = torch.cuda.graph_pool_handle()
            self.out = (
                torch.empty_like(loss),
                [g if g is None else torch.empty_like(g) for g in grads],
            )
        del loss, grads

        def step():
            loss, grads = self.loss_and_grads(*inputs)
            self.out[0].copy_(loss)
            for buf, g in zip(self.out[1], grads, strict=True):
                if buf is not None:
                    buf.copy_(g)

        graph = torch.cuda.CUDAGraph()
        self._record(graph, step)
        return graph, inputs

    def _record(self, graph, step) -> None:
        """Capture ``step``'s kernels into ``graph``."""
        with torch.cuda.graph(graph, pool=self.pool):
            step()


def graphed_backward(model, params, precision: str, smoothing: float = 0.0):
    """The plain backend's ``loss_backward(x, x_mask, y, y_mask, denom) -> loss``
    (:meth:`nmt_lib.recipe.Plain.backward`) as CUDA graphs: the same loss and gradients, replayed
    (:class:`GraphedLoss`, as ``graphs``)."""
    params = list(params)
    graphs = GraphedLoss(model, params, precision, smoothing=smoothing)

    def replayed(x, x_mask, y, y_mask, denom=1):
        loss = graphs.backward(x, x_mask, y, y_mask)
        if denom != 1:
            torch._foreach_div_([p.grad for p in params if p.grad is not None], denom)
        return loss

    replayed.graphs = graphs
    return replayed
