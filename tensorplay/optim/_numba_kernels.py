"""Fused optimizer updates (one pass over parameter, gradient and state), compiled by numba.

Importing this module imports numba; :mod:`tensorplay.optim._kernels` imports it on the
first update. Every kernel takes 1-d contiguous views of arrays that share one memory order
(so element ``i`` of each is the same parameter entry). Scalars come in the arrays' dtype, so
float32 parameters are updated in float32 arithmetic, as PyTorch does.

Each update is PyTorch's (``torch.optim``'s single-tensor CPU path) operation for operation, with the
roundings its CPU kernels make: ``add(x, alpha=a)`` is ``fma(a, x, self)``, ``lerp(end, w)`` is
``fma(w, end - self, self)`` for ``|w| < 0.5`` (else ``fma(w - 1, end - self, end)``), ``addcmul(t, t,
value=c)`` is ``fma(c t, t, self)``, ``addcdiv(t1, t2, value=c)`` is ``self + (c t1) / t2`` (measured on
100,000 float32 values: PyTorch 2.13's results equal these everywhere, and differ from the unfused
``self + a x`` in 4% of them, from ``self + w (end - self)`` in 20%). Where the CPU has FMA (as
PyTorch's AVX2 kernels assume), SGD is then PyTorch's bit for bit, and so are Adam's moments; Adam's
parameters can differ in the last bit through the square root, which is correctly rounded here and
is not in PyTorch's float32 ``sqrt`` (measured: 17% of values 1 ulp apart, its error up to 0.75 ulp).
Without weight decay, RMSprop's square and gradient averages and Adagrad's sums (no square root reaches
them) are PyTorch's bit for bit; the parameters and RMSprop's momentum buffer differ from PyTorch's only
through its square root, which is not correctly rounded in float64 either (1.3% of values 1 ulp apart).
Likewise Adamax's moments (no square root at all), NAdam's and RAdam's moments and Adadelta's square average
are PyTorch's bit for bit without weight decay.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar, cast

from tensorplay.interpreters.eager.kernels import _numba_start  # noqa: F401  (before numba: see that module)
import numba

from tensorplay.interpreters.eager.kernels._numba_kernels import fma, fmaximum

F = TypeVar("F", bound=Callable[..., Any])


def _jit(f: F) -> F:
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy")(f))


def _inline(f: F) -> F:
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy", inline="always")(f))


@_jit
def sgd_update(p: Any, g: Any, buf: Any, lr: Any, momentum: Any, keep: Any, weight_decay: Any,
               nesterov: bool, maximize: bool, first: bool, use_momentum: bool) -> None:
    """PyTorch's SGD on each element: ``d = -g`` with ``maximize``; ``d = d.add(p, alpha=weight_decay)``;
    with momentum ``buf = d`` on the first step, else ``buf = (buf * momentum).add(d, alpha=keep)``, and
    ``d = d.add(buf, alpha=momentum)`` (Nesterov) or ``d = buf``; then ``p = p.add(d, alpha=-lr)``.
    ``keep = 1 - dampening`` comes in rounded to the parameters' dtype from its exact value, as PyTorch
    passes it; ``buf`` is only read and written with ``use_momentum``."""
    step = -lr
    if use_momentum and not first and not nesterov and not maximize and weight_decay == 0:
        for i in range(p.size):  # the common heavy-ball step, branch-free so that it vectorises
            b = fma(keep, g[i], buf[i] * momentum)
            buf[i] = b
            p[i] = fma(step, b, p[i])
        return
    for i in range(p.size):
        pi = p[i]
        d = -g[i] if maximize else g[i]
        if weight_decay != 0:
            d = fma(weight_decay, pi, d)
        if use_momentum:
            b = d if first else fma(keep, d, buf[i] * momentum)
            buf[i] = b
            d = fma(momentum, b, d) if nesterov else b
        p[i] = fma(step, d, pi)


@_inline
def _adam_moments(pi: Any, gi: Any, mi: Any, vi: Any, c1: Any, near: bool, w_far: Any, beta2: Any, c2: Any,
                  weight_decay: Any, decay: Any, decoupled: bool, maximize: bool) -> tuple[Any, Any, Any, Any]:
    """One element's decayed parameter, gradient (negated with ``maximize``, L2-decayed) and new moments
    (:func:`adam_update`; NAdam and RAdam share it)."""
    d = -gi if maximize else gi
    if weight_decay != 0:
        if decoupled:
            pi = pi * decay
        else:
            d = fma(weight_decay, pi, d)
    mi = fma(c1, d - mi, mi) if near else fma(w_far, d - mi, d)
    return pi, d, mi, fma(c2 * d, d, vi * beta2)


@_jit
def adam_update(p: Any, g: Any, m: Any, v: Any, vmax: Any, c1: Any, beta2: Any, c2: Any, eps: Any,
                weight_decay: Any, decay: Any, step_size: Any, bias_correction2_sqrt: Any, decoupled: bool,
                amsgrad: bool, maximize: bool) -> None:
    """PyTorch's Adam/AdamW on each element (``vmax`` is only used with ``amsgrad``): ``d = -g`` with
    ``maximize``; weight decay ``p = p * decay`` (AdamW) or ``d = d.add(p, alpha=weight_decay)``;
    ``m = m.lerp(d, c1)``, ``v = (v * beta2).addcmul(d, d, value=c2)``, ``vmax = maximum(vmax, v)``;
    ``p = p.addcdiv(m, sqrt(v or vmax) / bc2 + eps, value=-step_size)``. ``c1 = 1 - beta1``,
    ``c2 = 1 - beta2`` and ``decay = 1 - lr weight_decay`` come in rounded to the parameters' dtype from
    their exact values, as PyTorch passes them (``1 - beta2`` taken in float32 loses three digits to
    cancellation: 1.3e-5 relative for 0.999). Two loops, so that without ``amsgrad`` nothing reads
    ``vmax`` (the caller passes ``m`` for it, and the vectoriser's overlap check would then pick the
    scalar loop: 5x slower)."""
    near = abs(c1) < 0.5  # lerp's two forms
    w_far = c1 - p.dtype.type(1.0)
    step = -step_size
    if amsgrad:
        for i in range(p.size):
            pi, _, mi, vi = _adam_moments(p[i], g[i], m[i], v[i], c1, near, w_far, beta2, c2, weight_decay, decay,
                                       decoupled, maximize)
            m[i] = mi
            v[i] = vi
            top = fmaximum(vmax[i], vi)
            vmax[i] = top
            p[i] = pi + (step * mi) / (math.sqrt(top) / bias_correction2_sqrt + eps)
        return
    for i in range(p.size):
        pi, _, mi, vi = _adam_moments(p[i], g[i], m[i], v[i], c1, near, w_far, beta2, c2, weight_decay, decay,
                                   decoupled, maximize)
        m[i] = mi
        v[i] = vi
        p[i] = pi + (step * mi) / (math.sqrt(vi) / bias_correction2_sqrt + eps)


@_inline
def _rmsprop_element(pi: Any, gi: Any, si: Any, ai: Any, bi: Any, lr: Any, alpha: Any, c: Any, near: bool,
                     w_far: Any, eps: Any, weight_decay: Any, momentum: Any, centered: bool, use_momentum: bool,
                     maximize: bool) -> tuple[Any, Any, Any, Any]:
    """One element's new parameter, square average, gradient average and momentum buffer
    (:func:`rmsprop_update`; ``ai`` and ``bi`` pass through unused without ``centered`` / ``use_momentum``)."""
    d = -gi if maximize else gi
    if weight_decay != 0:
        d = fma(weight_decay, pi, d)
    si = fma(c * d, d, si * alpha)
    if centered:
        ai = fma(c, d - ai, ai) if near else fma(w_far, d - ai, d)
        avg = math.sqrt(fma(-ai, ai, si)) + eps
    else:
        avg = math.sqrt(si) + eps
    if use_momentum:
        bi = bi * momentum + d / avg
        pi = fma(-lr, bi, pi)
    else:
        pi = pi + (-lr * d) / avg
    return pi, si, ai, bi


@_jit
def rmsprop_update(p: Any, g: Any, square_avg: Any, grad_avg: Any, buf: Any, lr: Any, alpha: Any, c: Any, eps: Any,
                   weight_decay: Any, momentum: Any, centered: bool, use_momentum: bool, maximize: bool) -> None:
    """PyTorch's RMSprop on each element: ``d = -g`` with ``maximize``; ``d = d.add(p, alpha=weight_decay)``;
    ``square_avg = (square_avg * alpha).addcmul(d, d, value=c)``; centered: ``grad_avg = grad_avg.lerp(d, c)``
    and ``avg = sqrt(square_avg.addcmul(grad_avg, grad_avg, value=-1)) + eps``, else ``sqrt(square_avg) + eps``;
    with momentum ``buf = (buf * momentum).addcdiv(d, avg)`` and ``p = p.add(buf, alpha=-lr)``, else
    ``p = p.addcdiv(d, avg, value=-lr)``. ``c = 1 - alpha`` comes in rounded to the parameters' dtype from its
    exact value, as PyTorch passes it. ``grad_avg`` is only read and written with ``centered``, ``buf`` only with
    ``use_momentum`` (the caller passes ``square_avg`` for an unused one): one loop for each of the four
    combinations, so that no loop touches an array it does not use."""
    near = abs(c) < 0.5  # lerp's two forms
    w_far = c - p.dtype.type(1.0)
    zero = p.dtype.type(0.0)
    if centered and use_momentum:
        for i in range(p.size):
            p[i], square_avg[i], grad_avg[i], buf[i] = _rmsprop_element(
                p[i], g[i], square_avg[i], grad_avg[i], buf[i], lr, alpha, c, near, w_far, eps, weight_decay,
                momentum, True, True, maximize)
    elif centered:
        for i in range(p.size):
            p[i], square_avg[i], grad_avg[i], _ = _rmsprop_element(
                p[i], g[i], square_avg[i], grad_avg[i], zero, lr, alpha, c, near, w_far, eps, weight_decay,
                momentum, True, False, maximize)
    elif use_momentum:
        for i in range(p.size):
            p[i], square_avg[i], _, buf[i] = _rmsprop_element(
                p[i], g[i], square_avg[i], zero, buf[i], lr, alpha, c, near, w_far, eps, weight_decay,
                momentum, False, True, maximize)
    else:
        for i in range(p.size):
            p[i], square_avg[i], _, _ = _rmsprop_element(
                p[i], g[i], square_avg[i], zero, zero, lr, alpha, c, near, w_far, eps, weight_decay,
                momentum, False, False, maximize)


@_jit
def adagrad_update(p: Any, g: Any, total: Any, clr: Any, eps: Any, weight_decay: Any, maximize: bool) -> None:
    """PyTorch's Adagrad on each element: ``d = -g`` with ``maximize``; ``d = d.add(p, alpha=weight_decay)``;
    ``sum = sum.addcmul(d, d)``; ``p = p.addcdiv(d, sqrt(sum) + eps, value=-clr)``, where the caller computes
    ``clr = lr / (1 + (step - 1) lr_decay)`` in float64 (as PyTorch does) and passes it rounded to the
    parameters' dtype."""
    step = -clr
    for i in range(p.size):
        pi = p[i]
        d = -g[i] if maximize else g[i]
        if weight_decay != 0:
            d = fma(weight_decay, pi, d)
        s = fma(d, d, total[i])
        total[i] = s
        p[i] = pi + (step * d) / (math.sqrt(s) + eps)


@_jit
def adamax_update(p: Any, g: Any, m: Any, u: Any, c1: Any, beta2: Any, eps: Any, weight_decay: Any, step_size: Any,
                  maximize: bool) -> None:
    """PyTorch's Adamax on each element: ``d = -g`` with ``maximize``; ``d = d.add(p, alpha=weight_decay)``;
    ``m = m.lerp(d, c1)``; ``u = maximum(u * beta2, |d| + eps)`` (NaN-propagating, as ``torch.maximum``);
    ``p = p.addcdiv(m, u, value=-step_size)``. ``c1 = 1 - beta1`` comes in rounded to the parameters' dtype
    from its exact value, ``step_size = lr / (1 - beta1^t)`` computed in float64 by the caller."""
    near = abs(c1) < 0.5  # lerp's two forms
    w_far = c1 - p.dtype.type(1.0)
    step = -step_size
    for i in range(p.size):
        pi = p[i]
        d = -g[i] if maximize else g[i]
        if weight_decay != 0:
            d = fma(weight_decay, pi, d)
        mi = m[i]
        mi = fma(c1, d - mi, mi) if near else fma(w_far, d - mi, d)
        m[i] = mi
        ui = fmaximum(u[i] * beta2, abs(d) + eps)
        u[i] = ui
        p[i] = pi + (step * mi) / ui


@_jit
def nadam_update(p: Any, g: Any, m: Any, v: Any, c1: Any, beta2: Any, c2: Any, eps: Any, weight_decay: Any,
                 decay: Any, bias_correction2: Any, grad_coef: Any, avg_coef: Any, decoupled: bool,
                 maximize: bool) -> None:
    """PyTorch's NAdam on each element: the gradient, weight decay and moments as :func:`adam_update`'s, then
    ``denom = sqrt(v / bias_correction2) + eps``, ``p = p.addcdiv(d, denom, value=grad_coef)`` and
    ``p = p.addcdiv(m, denom, value=avg_coef)``, where the caller computes (in float64, from the momentum
    products) ``grad_coef = -lr (1 - mu_t) / (1 - prod mu_1..t)`` and ``avg_coef = -lr mu_{t+1} / (1 -
    prod mu_1..t+1)``."""
    near = abs(c1) < 0.5
    w_far = c1 - p.dtype.type(1.0)
    for i in range(p.size):
        pi, d, mi, vi = _adam_moments(p[i], g[i], m[i], v[i], c1, near, w_far, beta2, c2, weight_decay, decay,
                                      decoupled, maximize)
        m[i] = mi
        v[i] = vi
        denom = math.sqrt(vi / bias_correction2) + eps
        pi = pi + (grad_coef * d) / denom
        p[i] = pi + (avg_coef * mi) / denom


@_jit
def radam_update(p: Any, g: Any, m: Any, v: Any, c1: Any, beta2: Any, c2: Any, eps: Any, weight_decay: Any,
                 decay: Any, bias_correction1: Any, lr: Any, bias_correction2_sqrt: Any, rect: Any, rectified: bool,
                 decoupled: bool, maximize: bool) -> None:
    """PyTorch's RAdam on each element: the gradient, weight decay and moments as :func:`adam_update`'s, then
    with ``rectified`` (the variance's length ``rho_t > 5``) ``p = p - (m / bias_correction1) * lr *
    (1 / (sqrt(v) + eps) * bias_correction2_sqrt) * rect``, else ``p = p - (m / bias_correction1) * lr``,
    each product rounded in that order, as PyTorch's tensor expressions are."""
    near = abs(c1) < 0.5
    w_far = c1 - p.dtype.type(1.0)
    one = p.dtype.type(1.0)
    for i in range(p.size):
        pi, _, mi, vi = _adam_moments(p[i], g[i], m[i], v[i], c1, near, w_far, beta2, c2, weight_decay, decay,
                                      decoupled, maximize)
        m[i] = mi
        v[i] = vi
        update = (mi / bias_correction1) * lr
        if rectified:
            update = (update * ((one / (math.sqrt(vi) + eps)) * bias_correction2_sqrt)) * rect
        p[i] = pi - update


@_jit
def adadelta_update(p: Any, g: Any, square_avg: Any, acc_delta: Any, lr: Any, rho: Any, c: Any, eps: Any,
                    weight_decay: Any, maximize: bool) -> None:
    """PyTorch's Adadelta on each element: ``d = -g`` with ``maximize``; ``d = d.add(p, alpha=weight_decay)``;
    ``square_avg = (square_avg * rho).addcmul(d, d, value=c)``; ``delta = sqrt(acc_delta + eps) /
    sqrt(square_avg + eps) * d``; ``acc_delta = (acc_delta * rho).addcmul(delta, delta, value=c)``;
    ``p = p.add(delta, alpha=-lr)``. ``c = 1 - rho`` comes in rounded to the parameters' dtype from its
    exact value."""
    step = -lr
    for i in range(p.size):
        pi = p[i]
        d = -g[i] if maximize else g[i]
        if weight_decay != 0:
            d = fma(weight_decay, pi, d)
        si = fma(c * d, d, square_avg[i] * rho)
        square_avg[i] = si
        ai = acc_delta[i]
        delta = (math.sqrt(ai + eps) / math.sqrt(si + eps)) * d
        acc_delta[i] = fma(c * delta, delta, ai * rho)
        p[i] = fma(step, delta, pi)
