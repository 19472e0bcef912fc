"""Adadelta's update computed faster on a CPU: ``torch.optim.Adadelta``'s numbers, in fewer passes
over memory."""

from __future__ import annotations

import torch

from ..gradients import flat_alike
from . import kernels


class Adadelta(torch.optim.Adadelta):
    """``torch.optim.Adadelta`` (its state, its checkpoints) whose update on a CPU makes one pass
    over memory instead of nine: in the compiled kernel (:func:`nmt_lib.fast.kernels.adadelta`: torch's
    operations in torch's order, correctly rounded, where torch's vectorized sqrt is an ulp off in
    ~1 % (Intel Xeon) to ~20 % (AMD EPYC) of the updates), else on a cache-sized chunk of each
    parameter at a time with torch's own operations (the same numbers bit for bit), where torch's
    version streams the 84M parameters of the paper's model through memory at each of its nine
    passes (the figures: bench/README.md, "Compiled kernels"). Both tested against
    ``torch.optim.Adadelta``. On GPUs, for complex parameters and with options other than ``lr``,
    ``rho``, ``eps``, torch's own step runs.

    ``step(grad_scale=c)`` updates with the gradients times ``c`` (the same numbers as
    ``g.mul_(c)`` before the step; the gradients are left as they are): the gradient clip's
    scaling done in the update's pass instead of one of its own (:func:`nmt_lib.gradients.treat_gradients`
    leaves it to the step)."""

    CHUNK = 1 << 17  # elements: 4 arrays of 512 KiB and 2 temporaries, in cache

    @torch.no_grad()
    def step(self, closure=None, grad_scale: float = 1.0):
        groups = self.param_groups
        real_cpu = all(
            p.device.type == "cpu" and not p.is_complex() for g in groups for p in g["params"]
        )
        options = any(
            g["weight_decay"]
            or g["maximize"]
            or g["foreach"]
            or g["capturable"]
            or g["differentiable"]
            for g in groups
        )
        if closure is not None or not real_cpu or options:  # torch's (GPUs: its multi-tensor one)
            if grad_scale != 1.0:
                grads = [p.grad for g in groups for p in g["params"] if p.grad is not None]
                torch._foreach_mul_(grads, grad_scale)
            return super().step(closure)
        for group in self.param_groups:
            params, grads, square_avgs, acc_deltas, steps = [], [], [], [], []
            self._init_group(group, params, grads, square_avgs, acc_deltas, steps)
            lr, rho, eps = group["lr"], group["rho"], group["eps"]
            for p, g, sq, acc, step in zip(
                params, grads, square_avgs, acc_deltas, steps, strict=True
            ):
                step += 1
                flat = flat_alike(p, g, sq, acc)
                if flat and kernels.adadelta(*flat, lr, rho, eps, grad_scale):  # one compiled pass
                    continue
                views, n = flat or [p, g, sq, acc], p.numel()
                chunk = self.CHUNK if flat else max(n, 1)  # not flat: the whole tensor at once
                for i in range(0, n, chunk):
                    p_r, g_r, sq_r, acc_r = (v[i : i + chunk] for v in views)
                    g_r = g_r if grad_scale == 1.0 else g_r * grad_scale
                    sq_r.mul_(rho).addcmul_(g_r, g_r, value=1 - rho)  # _single_tensor_adadelta
                    std = sq_r.add(eps).sqrt_()
                    delta = acc_r.add(eps).sqrt_().div_(std).mul_(g_r)
                    acc_r.mul_(rho).addcmul_(delta, delta, value=1 - rho)
                    p_r.add_(delta, alpha=-lr)
        return None
