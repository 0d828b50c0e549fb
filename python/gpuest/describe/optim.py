"""The memory effect of one optimizer step, done with plain tensor ops.

torch.optim's step cannot run under FakeTensorMode on torch 1.13 (its profiler
wrapper rejects fake arguments), and what the trace needs is only what the step
allocates: the state it creates on the first step and the temporaries it holds.
This mirrors torch 2.x's default on CUDA, the multi-tensor ("foreach") path, which
keeps one temporary per parameter alive at once (Adam's sqrt(v), for example);
Adam's step counters live on the host there and are left out.
"""
from __future__ import annotations

from typing import List

import torch

OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw", "rmsprop", "adagrad")
ENUM_NAMES = {
    "sgd": "OPTIMIZER_SGD",
    "sgd_momentum": "OPTIMIZER_SGD_MOMENTUM",
    "adam": "OPTIMIZER_ADAM",
    "adamw": "OPTIMIZER_ADAMW",
    "rmsprop": "OPTIMIZER_RMSPROP",
    "adagrad": "OPTIMIZER_ADAGRAD",
}


@torch.no_grad()
def optimizer_step(name: str, params: List[torch.Tensor], lr: float = 1e-3) -> list:
    """Apply one first step of optimizer ``name``; returns the state it created (the
    caller keeps it alive to the end of the step, as an optimizer would)."""
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
        exp_avg = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
        exp_avg_sq = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
        state += exp_avg + exp_avg_sq
        if name == "adamw":
            for p in params:
                p.mul_(1 - lr * wd)
        for m, v, g in zip(exp_avg, exp_avg_sq, grads):
            m.mul_(beta1).add_(g, alpha=1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        denom = [v.sqrt() for v in exp_avg_sq]  # all alive at once, as in foreach
        for d in denom:
            d.div_(1 - beta2).add_(eps)
        for p, m, d in zip(params, exp_avg, denom):
            p.addcdiv_(m, d, value=-lr / (1 - beta1))
        del denom
    elif name == "rmsprop":
        state += _squared_gradient_step(params, grads, keep=0.99, add=0.01, eps=1e-8, lr=lr)
    elif name == "adagrad":
        state += _squared_gradient_step(params, grads, keep=1.0, add=1.0, eps=1e-10, lr=lr)
    else:
        raise ValueError(f"unknown optimizer {name!r}; one of {', '.join(OPTIMIZERS)}")
    return state


def _squared_gradient_step(params, grads, keep, add, eps, lr):
    """RMSprop (keep=alpha, add=1-alpha) and Adagrad (keep=add=1): one buffer of squared
    gradients per parameter, and a temporary sqrt per parameter during the update."""
    buffers = [torch.zeros_like(p, memory_format=torch.preserve_format) for p in params]
    for s, g in zip(buffers, grads):
        s.mul_(keep).addcmul_(g, g, value=add)
    denom = [s.sqrt() for s in buffers]
    for d in denom:
        d.add_(eps)
    for p, g, d in zip(params, grads, denom):
        p.addcdiv_(g, d, value=-lr)
    del denom
    return buffers
