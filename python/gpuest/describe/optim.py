"""The memory effect of one optimizer step, done with plain tensor ops.

torch.optim's step cannot run under FakeTensorMode on torch 1.13 (its profiler
wrapper rejects fake arguments), and what the trace needs is only what the step
allocates: the state it creates on the first step and the temporaries it holds.
By default this mirrors torch 2.x's default on CUDA, the multi-tensor ("foreach")
path, which keeps one temporary per parameter alive at once (Adam's sqrt(v), for
example); Adam's step counters live on the host there and are left out. The other two
implementations a job can ask for: ``fused`` (``fused=True``: one kernel per group that
updates in registers, no temporaries) and ``single_tensor`` (``foreach=False``: a loop
over the parameters, one temporary alive at a time).
"""
from __future__ import annotations

from typing import List

import torch

OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad")
IMPLEMENTATIONS = ("foreach", "fused", "single_tensor")
ENUM_NAMES = {
    "sgd": "OPTIMIZER_SGD",
    "sgd_momentum": "OPTIMIZER_SGD_MOMENTUM",
    "adam": "OPTIMIZER_ADAM",
    "adamw": "OPTIMIZER_ADAMW",
    "rmsprop": "OPTIMIZER_RMSPROP",
    "adagrad": "OPTIMIZER_ADAGRAD",
}


@torch.no_grad()
def optimizer_step(name: str, params: List[torch.Tensor], lr: float = 1e-3,
                   impl: str = "foreach") -> list:
    """Apply one first step of optimizer ``name`` as implementation ``impl`` does;
    returns the state it created (the caller keeps it alive to the end of the step, as
    an optimizer would)."""
    if impl not in IMPLEMENTATIONS:
        raise ValueError(f"unknown optimizer implementation {impl!r}; one of "
                         f"{', '.join(IMPLEMENTATIONS)}")
    params = [p for p in params if p.grad is not None]
    grads = [p.grad for p in params]
    state: list = []
    if name == "sgd":
        for p, g in zip(params, grads):
            p.add_(g, alpha=-lr)
    elif name == "sgd_momentum":
        bufs = [torch.clone(g).detach() for g in grads]  # first step: buf = grad
        state += bufs
        for p, b in zip(params, bufs):
            p.add_(b, alpha=-lr)
    elif name in ("adam", "adamw"):
        beta1, beta2, eps, wd = 0.9, 0.999, 1e-8, 1e-2
        # Lazy state initialization, parameter by parameter (torch.optim.Adam's
        # _init_group): each parameter's exp_avg, then its exp_avg_sq.
        exp_avg, exp_avg_sq = [], []
        for p in params:
            exp_avg.append(torch.zeros_like(p, memory_format=torch.preserve_format))
            exp_avg_sq.append(torch.zeros_like(p, memory_format=torch.preserve_format))
        state += exp_avg + exp_avg_sq
        if name == "adamw":
            for p in params:
                p.mul_(1 - lr * wd)
        for m, v, g in zip(exp_avg, exp_avg_sq, grads):
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        _update(params, exp_avg, exp_avg_sq, impl,
                lambda d: d.div_(1 - beta2).add_(eps), -lr / (1 - beta1))
    elif name == "rmsprop":
        state += _squared_gradient_step(params, grads, keep=0.99, add=0.01, eps=1e-8, lr=lr,
                                        impl=impl)
    elif name == "adagrad":
        state += _squared_gradient_step(params, grads, keep=1.0, add=1.0, eps=1e-10, lr=lr,
                                        impl=impl)
    else:
        raise ValueError(f"unknown optimizer {name!r}; one of {', '.join(OPTIMIZERS)}")
    return state


def _squared_gradient_step(params, grads, keep, add, eps, lr, impl):
    """RMSprop (keep=alpha, add=1-alpha) and Adagrad (keep=add=1): one buffer of squared
    gradients per parameter, and a temporary sqrt per parameter during the update."""
    buffers = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
    for s, g in zip(buffers, grads):
        s.mul_(keep).addcmul_(g, g, value=add)
    _update(params, grads, buffers, impl, lambda d: d.add_(eps), -lr)
    return buffers


def _update(params, numerators, squares, impl, finish_denominator, step):
    """p += step * numerator / finish(sqrt(square)). The denominators are temporaries:
    all at once (foreach), one at a time (single_tensor), or none (fused: computed in
    registers, and so left out here)."""
    if impl == "fused":
        return
    if impl == "single_tensor":
        for p, n, sq in zip(params, numerators, squares):
            d = finish_denominator(sq.sqrt())
            p.addcdiv_(n, d, value=step)
            del d
        return
    denom = [finish_denominator(sq.sqrt()) for sq in squares]  # all alive at once
    for p, n, d in zip(params, numerators, denom):
        p.addcdiv_(n, d, value=step)
    del denom
