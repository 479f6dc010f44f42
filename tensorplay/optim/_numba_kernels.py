"""Fused optimizer updates (one pass over parameter, gradient and state), compiled by numba.

Importing this module imports numba; :mod:`tensorplay.optim._kernels` imports it on the
first update. Every kernel takes 1-d contiguous views of arrays that share one memory order
(so element ``i`` of each is the same parameter entry). Scalars come in the arrays' dtype, so
float32 parameters are updated in float32 arithmetic, as PyTorch does.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

F = TypeVar("F", bound=Callable[..., Any])


def _jit(f: F) -> F:
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy")(f))


def _inline(f: F) -> F:
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")(f))


@_inline
def _sgd(p: Any, g: Any, b: Any, lr: Any, momentum: Any, keep: Any, weight_decay: Any, nesterov: bool,
         maximize: bool, first: bool, use_momentum: bool) -> tuple[Any, Any]:
    d = -g if maximize else g
    if weight_decay != 0:
        d = d + weight_decay * p
    if use_momentum:
        b = d if first else momentum * b + keep * d
        d = d + momentum * b if nesterov else b
    return p - lr * d, b


@_jit
def sgd_update(p: Any, g: Any, buf: Any, lr: Any, momentum: Any, keep: Any, weight_decay: Any,
               nesterov: bool, maximize: bool, first: bool, use_momentum: bool) -> None:
    """PyTorch's SGD on each element (``first``: the momentum buffer starts as the gradient;
    ``buf`` is only read and written with ``use_momentum``). ``keep = 1 - dampening`` comes in rounded to
    the parameters' dtype from its exact value, as PyTorch passes it."""
    if use_momentum and not first and not nesterov and not maximize and weight_decay == 0:
        for i in range(p.size):  # the common heavy-ball step, branch-free so that it vectorises
            b = momentum * buf[i] + keep * g[i]
            buf[i] = b
            p[i] = p[i] - lr * b
        return
    for i in range(p.size):
        b = buf[i] if use_momentum and not first else p[i]
        new_p, new_b = _sgd(p[i], g[i], b, lr, momentum, keep, weight_decay, nesterov, maximize, first,
                            use_momentum)
        p[i] = new_p
        if use_momentum:
            buf[i] = new_b


@_jit
def adam_update(p: Any, g: Any, m: Any, v: Any, vmax: Any, c1: Any, beta2: Any, c2: Any, eps: Any,
                weight_decay: Any, decay: Any, step_size: Any, bias_correction2_sqrt: Any, decoupled: bool,
                amsgrad: bool) -> None:
    """PyTorch's Adam/AdamW on each element (``vmax`` is only used with ``amsgrad``), in its operations
    and order: ``m += c1 (g - m)``, ``v = beta2 v + c2 g g``, ``p -= (step_size m) / (sqrt(v) / bc2 + eps)``.
    ``c1 = 1 - beta1``, ``c2 = 1 - beta2`` and ``decay = 1 - lr weight_decay`` come in already rounded to
    the parameters' dtype from their exact (float64) values, as PyTorch passes them: ``1 - beta2`` taken
    in float32 loses three digits to cancellation (1.3e-5 relative for 0.999)."""
    for i in range(p.size):
        gi = g[i]
        pi = p[i]
        if weight_decay != 0:
            if decoupled:
                pi = pi * decay
            else:
                gi = gi + weight_decay * pi
        mi = m[i] + (gi - m[i]) * c1
        vi = beta2 * v[i] + c2 * gi * gi
        m[i] = mi
        v[i] = vi
        if amsgrad:
            if vmax[i] > vi:
                vi = vmax[i]
            vmax[i] = vi
        denom = math.sqrt(vi) / bias_correction2_sqrt + eps
        p[i] = pi - step_size * mi / denom  # addcdiv's order: (value * m) / denom
