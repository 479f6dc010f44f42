"""Jacobian-vector product rules (forward mode), one per primitive of :class:`~tensorplay.ops.Ops`.

A rule is called as ``JVP_RULES[name](ops, primals, tangents, output, **params)``:

* ``primals`` are the primitive's inputs as it was called (tensors, Python scalars, ``None``);
* ``tangents[i]`` is the tangent of ``primals[i]`` (a tensor of its shape and dtype) or ``None``
  meaning zero (always ``None`` for scalars, ``None`` inputs and integer/bool tensors);
* ``output`` is the primal result, already computed (rules for ``exp``, ``tanh``, ``softmax``, ...
  reuse it);
* ``params`` are the primitive's static parameters.

It returns the tangent of the result (its shape and dtype), or ``None`` when it is structurally
zero: a non-float result (comparisons, ``argmax``, integer arithmetic, random integers), a
piecewise-constant primitive (``sign``, ``floor``, ``ceil``), ``stop_gradient``, random draws and
creation, or when every input tangent is ``None``. Rules use only ``ops`` methods and
:mod:`tensorplay.rules.util`, so they run eagerly, under the graph recorder (symbolic dims
included) and nested. Conventions agree with the vjp rules (ties split between maximal positions,
``relu'(0) = 0``, ``sqrt`` masked where the tangent is 0, max-pool's first argmax, ...), so every jvp
is the transpose of the corresponding vjp: ``<J v, u> == <v, J^T u>``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tensorplay.spec.table import names
from tensorplay.rules.registry import find_rule, registrar, uncovered
from tensorplay.rules.util import (
    AnyTensor, attention_probs, channel_column, dtype_name, is_float_tensor, is_tensor, mean_keep, normalize_axes,
    prod_others, shape_of, softmax_product, squared_norm, swap_last, unreduce, zeros,
)
from tensorplay.rules.vjp import _window_weighted_sum

if TYPE_CHECKING:
    from tensorplay.ops import Ops

Tangent = Any
"""A tangent: a tensor of the primal's shape and dtype, or ``None`` meaning zero (kept loose like ``AnyTensor``)."""
JvpRule = Callable[..., Tangent]
"""``rule(ops, primals, tangents, output, **params) -> output tangent or None``."""

JVP_RULES: dict[str, JvpRule] = {}
"""Primitive name -> jvp rule. Complete over :data:`tensorplay.ops.PRIMITIVE_NAMES` (tested)."""


_register = registrar(JVP_RULES)


def _live(primal: object, tangent: Tangent) -> Tangent:
    """The tangent when it can be non-zero (a float input with a tangent), else ``None``."""
    return tangent if tangent is not None and is_float_tensor(primal) else None


def _as_out(ops: Ops, t: Tangent, output: AnyTensor) -> Tangent:
    """A tangent term shaped and typed like the result: broadcast to its shape (an input that broadcast
    contributes to every position it reached) and cast to its dtype. ``None`` for non-float results."""
    if t is None or not is_float_tensor(output):
        return None
    if shape_of(t) != shape_of(output):
        t = ops.broadcast_to(t, shape=shape_of(output))
    if dtype_name(t) != dtype_name(output):
        t = ops.cast(t, dtype=dtype_name(output))
    return t


def _sum(ops: Ops, *terms: Tangent) -> Tangent:
    """The sum of the non-``None`` terms (``None`` when there are none)."""
    total: Tangent = None
    for term in terms:
        if term is not None:
            total = term if total is None else ops.add(total, term)
    return total


def _zero_where(ops: Ops, cond: AnyTensor, value: AnyTensor) -> AnyTensor:
    """``value`` where ``cond`` is false, 0 where it is true."""
    return ops.where(cond, 0.0, value)


# ---- elementwise unary ----------------------------------------------------------------------------

def _unary(fn: Callable[[Ops, AnyTensor, AnyTensor, AnyTensor], AnyTensor]) -> JvpRule:
    """A rule for ``y = f(x)`` from ``fn(ops, t, x, y) -> f'(x) t``; ``None`` without a live tangent."""
    def rule(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
             **params: Any) -> Tangent:
        (x,) = primals
        t = _live(x, tangents[0])
        if t is None or not is_float_tensor(output):
            return None
        return _as_out(ops, fn(ops, t, x, output), output)
    rule.__name__ = fn.__name__.replace("_d", "_jvp")
    rule.__doc__ = fn.__doc__
    return rule


def _elementwise(name: str) -> Callable[[Callable[[Ops, AnyTensor, AnyTensor, AnyTensor], AnyTensor]],
                                        Callable[[Ops, AnyTensor, AnyTensor, AnyTensor], AnyTensor]]:
    """``@_elementwise("exp")`` over ``exp_d(ops, t, x, y) -> f'(x) t`` registers the unary jvp rule of ``exp``."""
    def deco(fn: Callable[[Ops, AnyTensor, AnyTensor, AnyTensor], AnyTensor]
             ) -> Callable[[Ops, AnyTensor, AnyTensor, AnyTensor], AnyTensor]:
        _register(name)(_unary(fn))
        return fn
    return deco


@_elementwise("abs")
def abs_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * sign(x)`` (0 at ``x == 0``)."""
    return ops.mul(t, ops.sign(x))


@_elementwise("exp")
def exp_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * exp(x)``, reusing the result."""
    return ops.mul(t, y)


@_elementwise("log")
def log_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t / x``."""
    return ops.div(t, x)


@_elementwise("log1p")
def log1p_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t / (1 + x)``."""
    return ops.div(t, ops.add(x, 1.0))


@_elementwise("expm1")
def expm1_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * (expm1(x) + 1)``."""
    return ops.mul(t, ops.add(y, 1.0))


@_elementwise("sqrt")
def sqrt_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * 0.5 / sqrt(x)``; 0 wherever ``t == 0`` (no ``0 * inf = nan`` at ``x == 0``)."""
    silent = ops.eq(t, 0.0)
    return _zero_where(ops, silent, ops.div(ops.mul(t, 0.5), ops.where(silent, 1.0, y)))


@_elementwise("rsqrt")
def rsqrt_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``-0.5 * y^3 * t``."""
    return ops.mul(t, ops.mul(ops.mul(ops.mul(y, y), y), -0.5))


@_elementwise("sin")
def sin_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * cos(x)``."""
    return ops.mul(t, ops.cos(x))


@_elementwise("cos")
def cos_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``-t * sin(x)``."""
    return ops.neg(ops.mul(t, ops.sin(x)))


@_elementwise("tan")
def tan_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * (1 + y^2)``."""
    return ops.add(t, ops.mul(ops.mul(t, y), y))


@_elementwise("tanh")
def tanh_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * (1 - y^2)`` as ``t - (t y) y``."""
    return ops.sub(t, ops.mul(ops.mul(t, y), y))


@_elementwise("sigmoid")
def sigmoid_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * (y - y^2)``."""
    return ops.mul(t, ops.sub(y, ops.mul(y, y)))


@_elementwise("relu")
def relu_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * sign(relu(x))``: ``t`` where ``x > 0``, 0 elsewhere (also at exactly 0)."""
    return ops.mul(t, ops.sign(y))


@_elementwise("erf")
def erf_d(ops: Ops, t: AnyTensor, x: AnyTensor, y: AnyTensor) -> AnyTensor:
    """``t * 2/sqrt(pi) * exp(-x^2)``."""
    return ops.mul(t, ops.mul(ops.exp(ops.neg(ops.mul(x, x))), 2.0 / math.sqrt(math.pi)))


_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


@_register("gelu")
def gelu_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
             approximate: str = "none") -> Tangent:
    """``t * gelu'(x)``: erf form ``Phi(x) + x phi(x)``; tanh form
    ``0.5(1+u) + 0.5 x (1-u^2) sqrt(2/pi)(1 + 3c x^2)`` with ``u = tanh(sqrt(2/pi)(x + c x^3))``."""
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    if approximate == "tanh":
        x2 = ops.mul(x, x)
        u = ops.tanh(ops.mul(ops.add(x, ops.mul(ops.mul(x2, x), _GELU_C)), _SQRT_2_OVER_PI))
        du = ops.mul(ops.add(ops.mul(x2, 3.0 * _GELU_C), 1.0), _SQRT_2_OVER_PI)
        left = ops.mul(ops.add(u, 1.0), 0.5)
        right = ops.mul(ops.mul(ops.mul(x, 0.5), ops.sub(1.0, ops.mul(u, u))), du)
        d = ops.add(left, right)
    else:
        cdf = ops.mul(ops.add(ops.erf(ops.mul(x, _SQRT_HALF)), 1.0), 0.5)
        pdf = ops.mul(ops.exp(ops.mul(ops.mul(x, x), -0.5)), _INV_SQRT_2PI)
        d = ops.add(cdf, ops.mul(x, pdf))
    return _as_out(ops, ops.mul(t, d), output)


@_register(*names(has_derivative=False))
def zero_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
             **params: Any) -> Tangent:
    """No derivative: piecewise constant, a gradient barrier, a bool/integer result, a random draw or a
    creation primitive. The tangent is structurally zero."""
    return None


# ---- elementwise binary ----------------------------------------------------------------------------

@_register("add")
def add_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """``tx + ty`` (each broadcast to the result)."""
    x, y = primals
    return _as_out(ops, _sum(ops, _live(x, tangents[0]), _live(y, tangents[1])), output)


@_register("sub")
def sub_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """``tx - ty``."""
    x, y = primals
    tx, ty = _live(x, tangents[0]), _live(y, tangents[1])
    if ty is None:
        return _as_out(ops, tx, output)
    return _as_out(ops, ops.neg(ty) if tx is None else ops.sub(tx, ty), output)


@_register("mul")
def mul_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """``tx * y + x * ty``."""
    x, y = primals
    tx, ty = _live(x, tangents[0]), _live(y, tangents[1])
    return _as_out(ops, _sum(ops, None if tx is None else ops.mul(tx, y),
                             None if ty is None else ops.mul(x, ty)), output)


@_register("div")
def div_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """``(tx - ty * out) / y``, i.e. ``tx / y - ty x / y^2``."""
    x, y = primals
    tx, ty = _live(x, tangents[0]), _live(y, tangents[1])
    if tx is None and ty is None:
        return None
    if ty is None:
        return _as_out(ops, ops.div(tx, y), output)
    scaled = ops.mul(ty, output)
    return _as_out(ops, ops.div(ops.neg(scaled) if tx is None else ops.sub(tx, scaled), y), output)


@_register("atan2")
def atan2_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """``(x ty - y tx) / (x^2 + y^2)`` for ``atan2(y, x)``."""
    y, x = primals
    ty, tx = _live(y, tangents[0]), _live(x, tangents[1])
    if ty is None and tx is None:
        return None
    num = _sum(ops, None if ty is None else ops.mul(x, ty), None if tx is None else ops.neg(ops.mul(y, tx)))
    return _as_out(ops, ops.div(num, squared_norm(ops, x, y)), output)


@_register("pow")
def pow_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """``tx * y x^(y-1)`` (0 where ``y == 0``) plus ``ty * x^y log(x)`` (0 where ``x == 0`` and ``y >= 0``),
    with the masked points made safe first, as the vjp rule does."""
    x, y = primals
    tx, ty = _live(x, tangents[0]), _live(y, tangents[1])
    dx = dy = None
    if tx is not None:
        if is_tensor(y):
            flat = ops.eq(y, 0.0)
            d = _zero_where(ops, flat, ops.mul(y, ops.pow(ops.where(flat, 1.0, x), ops.sub(y, 1.0))))
            dx = ops.mul(tx, d)
        elif y != 0:
            dx = ops.mul(tx, ops.mul(ops.pow(x, y - 1), y))
    if ty is not None:
        if is_tensor(x):
            zero_base = ops.logical_and(ops.eq(x, 0.0), ops.ge(y, 0.0))
            raw = ops.mul(ops.mul(ty, output), ops.log(ops.where(zero_base, 1.0, x)))
            dy = _zero_where(ops, zero_base, raw)
        elif x != 0:
            dy = ops.mul(ops.mul(ty, output), math.log(x) if x > 0 else math.nan)
    return _as_out(ops, _sum(ops, dx, dy), output)


def _minmax_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
                larger: bool) -> Tangent:
    # the winner's tangent; on a tie the mean of both (the vjp splits the cotangent equally)
    x, y = primals
    tx, ty = _live(x, tangents[0]), _live(y, tangents[1])
    if tx is None and ty is None:
        return None
    half_sign = ops.mul(ops.where(ops.eq(x, y), 0.0, ops.sign(ops.sub(x, y))), 0.5 if larger else -0.5)
    wx = None if tx is None else ops.mul(tx, ops.add(half_sign, 0.5))
    wy = None if ty is None else ops.mul(ty, ops.sub(0.5, half_sign))
    return _as_out(ops, _sum(ops, wx, wy), output)


@_register("maximum")
def maximum_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """The larger side's tangent; ties average both."""
    return _minmax_jvp(ops, primals, tangents, output, True)


@_register("minimum")
def minimum_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """The smaller side's tangent; ties average both."""
    return _minmax_jvp(ops, primals, tangents, output, False)


@_register("where")
def where_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor) -> Tangent:
    """``where(cond, tx, ty)`` (a missing side contributes 0)."""
    cond, x, y = primals
    tx, ty = _live(x, tangents[1]), _live(y, tangents[2])
    if tx is None and ty is None:
        return None
    return _as_out(ops, ops.where(cond, 0.0 if tx is None else tx, 0.0 if ty is None else ty), output)


# ---- reductions ------------------------------------------------------------------------------------

@_register("reduce_prod")
def reduce_prod_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                    axes: tuple[int, ...], keepdims: bool = False) -> Tangent:
    """``sum(t * prod_others(x))`` over ``axes``: each tangent times the product of the other elements
    of its group (exact at zeros, see :func:`~tensorplay.rules.util.prod_others`)."""
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    ax = normalize_axes(axes, len(shape_of(x)))
    if not ax:
        return _as_out(ops, t, output)
    return _as_out(ops, ops.reduce_sum(ops.mul(t, prod_others(ops, x, ax)), axes=ax, keepdims=keepdims), output)


def _extremum_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
                  axes: tuple[int, ...], keepdims: bool) -> Tangent:
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    shape = shape_of(x)
    ax = normalize_axes(axes, len(shape))
    if not ax:
        return _as_out(ops, t, output)
    hit = ops.eq(x, unreduce(ops, output, shape, axes, keepdims))
    count = ops.reduce_sum(ops.cast(hit, dtype=dtype_name(t)), axes=ax, keepdims=keepdims)
    return _as_out(ops, ops.div(ops.reduce_sum(ops.where(hit, t, 0.0), axes=ax, keepdims=keepdims), count), output)


@_register("reduce_max")
def reduce_max_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                   axes: tuple[int, ...], keepdims: bool = False) -> Tangent:
    """The mean of ``t`` over the positions equal to the maximum (ties split, as in the vjp)."""
    return _extremum_jvp(ops, primals, tangents, output, axes, keepdims)


@_register("reduce_min")
def reduce_min_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                   axes: tuple[int, ...], keepdims: bool = False) -> Tangent:
    """The mean of ``t`` over the positions equal to the minimum (ties split, as in the vjp)."""
    return _extremum_jvp(ops, primals, tangents, output, axes, keepdims)


# ---- structure (linear: the primitive applied to the tangent) --------------------------------------

def _linear(name: str) -> JvpRule:
    """A primitive linear in its one tensor input: the primitive itself applied to the tangent."""
    def rule(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
             **params: Any) -> Tangent:
        (x,) = primals
        t = _live(x, tangents[0])
        if t is None or not is_float_tensor(output):
            return None
        return _as_out(ops, getattr(ops, name)(t, **params), output)
    rule.__name__ = f"{name}_jvp"
    rule.__doc__ = f"Linear: ``{name}`` of the tangent."
    return rule


for _name in names(linearity="linear"):
    _register(_name)(_linear(_name))


@_register("pad")
def pad_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
            pads: tuple[tuple[int, int], ...], value: float = 0.0) -> Tangent:
    """The tangent padded with zeros (the pad value is a constant)."""
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    return _as_out(ops, ops.pad(t, pads=pads, value=0.0), output)


@_register("concat")
def concat_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
               axis: int) -> Tangent:
    """The tangents joined (zeros for inputs without one, everything in the result's dtype)."""
    live = [_live(x, t) for x, t in zip(primals, tangents)]
    if all(t is None for t in live) or not is_float_tensor(output):
        return None
    dtype = dtype_name(output)
    pieces: list[AnyTensor] = []
    for x, t in zip(primals, live):
        piece = zeros(ops, shape_of(x), dtype) if t is None else t
        if dtype_name(piece) != dtype:
            piece = ops.cast(piece, dtype=dtype)
        pieces.append(piece)
    return ops.concat(*pieces, axis=axis)


@_register("gather")
def gather_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
               axis: int) -> Tangent:
    """``gather(t, indices)``."""
    x, indices = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    return _as_out(ops, ops.gather(t, indices, axis=axis), output)


@_register("scatter_add")
def scatter_add_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                    axis: int) -> Tangent:
    """``scatter_add(t_base, indices, t_updates)`` (zeros for a missing base tangent)."""
    base, indices, updates = primals
    tb, tu = _live(base, tangents[0]), _live(updates, tangents[2])
    if tu is None:
        return _as_out(ops, tb, output)
    if tb is None:
        tb = zeros(ops, shape_of(base), dtype_name(output))
    elif dtype_name(tb) != dtype_name(output):
        tb = ops.cast(tb, dtype=dtype_name(output))
    if dtype_name(tu) != dtype_name(tb):
        tu = ops.cast(tu, dtype=dtype_name(tb))
    return _as_out(ops, ops.scatter_add(tb, indices, tu, axis=axis), output)


# ---- linear algebra and convolution (bilinear: one term per input) ---------------------------------

def _bilinear(name: str) -> JvpRule:
    """``f(tx, y) + f(x, ty)`` for a primitive bilinear in its two tensor inputs."""
    def rule(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
             **params: Any) -> Tangent:
        x, y = primals
        tx, ty = _live(x, tangents[0]), _live(y, tangents[1])
        fn = getattr(ops, name)
        return _as_out(ops, _sum(ops, None if tx is None else fn(tx, y, **params),
                                 None if ty is None else fn(x, ty, **params)), output)
    rule.__name__ = f"{name}_jvp"
    rule.__doc__ = f"Bilinear: ``{name}(tx, y) + {name}(x, ty)``."
    return rule


for _name in names(linearity="bilinear"):
    _register(_name)(_bilinear(_name))


# ---- pooling ---------------------------------------------------------------------------------------

@_register("max_pool_nd")
def max_pool_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                 kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...]) -> Tangent:
    """``max_pool_select(x, t)``: the tangent read at each window's first argmax."""
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    return _as_out(ops, ops.max_pool_select_nd(x, t, kernel_size=kernel_size, stride=stride, padding=padding), output)


def _pool_linear_in_second(name: str) -> JvpRule:
    """``max_pool_backward(x, g)`` / ``max_pool_select(x, h)``: piecewise constant in ``x``, linear in the
    second input, so the tangent is the primitive applied to the second input's tangent."""
    def rule(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor,
             **params: Any) -> Tangent:
        x, h = primals
        th = _live(h, tangents[1])
        if th is None:
            return None
        return _as_out(ops, getattr(ops, name)(x, th, **params), output)
    rule.__name__ = f"{name}_jvp"
    rule.__doc__ = f"``{name}(x, t)``: linear in its second input, locally constant in ``x``."
    return rule


for _name in ("max_pool_backward_nd", "max_pool_select_nd"):
    _register(_name)(_pool_linear_in_second(_name))


@_register("smooth_max_pool_nd")
def smooth_max_pool_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                        kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                        beta: float) -> Tangent:
    """The derivative of a window's log-sum-exp is the window's ``softmax(beta x)``: the tangent is
    ``sum_i softmax_w(beta x)[i] * t[i]`` per window (the transpose of ``smooth_max_pool_backward``)."""
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    return _as_out(ops, _window_weighted_sum(ops, x, t, output, kernel_size, stride, padding, beta), output)


@_register("smooth_max_pool_backward_nd")
def smooth_max_pool_backward_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...],
                                 output: AnyTensor, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                                 padding: tuple[int, ...], beta: float) -> Tangent:
    """``out_i = sum_w g_w p_w(i)`` with ``p_w = softmax_w(beta x)``: linear in ``g``
    (``smooth_max_pool_backward(x, tg)``); in ``x``, ``dp_w(i) = beta p_w(i) (tx_i - S_w)`` with
    ``S_w = sum_j p_w(j) tx_j``, so the term is ``beta (tx * smpb(x, g) - smpb(x, g * S))``."""
    x, g = primals
    tx, tg = _live(x, tangents[0]), _live(g, tangents[1])
    params: dict[str, Any] = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "beta": beta}
    dg = None if tg is None else ops.smooth_max_pool_backward_nd(x, tg, **params)
    dx = None
    if tx is not None:
        smax = ops.smooth_max_pool_nd(x, **params)
        window = _window_weighted_sum(ops, x, tx, smax, kernel_size, stride, padding, beta)
        spread = ops.smooth_max_pool_backward_nd(x, g, **params)
        correction = ops.smooth_max_pool_backward_nd(x, ops.mul(g, window), **params)
        dx = ops.mul(ops.sub(ops.mul(tx, spread), correction), float(beta))
    return _as_out(ops, _sum(ops, dg, dx), output)


# ---- normalisation and attention -------------------------------------------------------------------

@_register("layer_norm_last_axis")
def layer_norm_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                   eps: float) -> Tangent:
    """``y = xhat * gamma + beta`` with ``xhat = (x - mean) rstd``:
    ``d xhat = rstd (tx - mean(tx) - xhat mean(tx xhat))``, ``dy = d xhat gamma + xhat t_gamma + t_beta``."""
    x, gamma, beta = primals
    tx, tgamma, tbeta = (_live(p, t) for p, t in zip(primals, tangents))
    if tx is None and tgamma is None and tbeta is None:
        return None
    axis = len(shape_of(x)) - 1
    centred = ops.sub(x, mean_keep(ops, x, axis))
    rstd = ops.rsqrt(ops.add(mean_keep(ops, ops.mul(centred, centred), axis), float(eps)))
    xhat = ops.mul(centred, rstd)
    dx = dgamma = None
    if tx is not None:
        inner = ops.sub(ops.sub(tx, mean_keep(ops, tx, axis)), ops.mul(xhat, mean_keep(ops, ops.mul(tx, xhat), axis)))
        dx = ops.mul(ops.mul(inner, rstd), gamma)
    if tgamma is not None:
        dgamma = ops.mul(xhat, tgamma)
    return _as_out(ops, _sum(ops, dx, dgamma, tbeta), output)


@_register("batch_norm")
def batch_norm_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                   eps: float) -> Tangent:
    """``y = (x - mean) rstd w + b`` with ``rstd = (var + eps)^-1/2`` per channel (axis 1):
    ``dy = (tx - t_mean) rstd w - 0.5 (x - mean) rstd^3 t_var w + (x - mean) rstd t_w + t_b``."""
    x, mean, var, weight, bias = primals
    tx, tmean, tvar, tweight, tbias = (_live(p, t) for p, t in zip(primals, tangents))
    if all(t is None for t in (tx, tmean, tvar, tweight, tbias)):
        return None
    rank = len(shape_of(x))

    def col(v: AnyTensor) -> AnyTensor:
        return channel_column(ops, v, rank)

    rstd = ops.rsqrt(ops.add(var, float(eps)))
    scale = col(ops.mul(rstd, weight))
    terms: list[Tangent] = []
    if tx is not None or tmean is not None:
        if tmean is None:
            shift = tx
        elif tx is None:
            shift = ops.neg(col(tmean))
        else:
            shift = ops.sub(tx, col(tmean))
        terms.append(ops.mul(shift, scale))
    if tvar is not None or tweight is not None:
        centred = ops.sub(x, col(mean))
        dscale = None
        if tvar is not None:
            dscale = ops.mul(ops.mul(ops.mul(ops.mul(rstd, rstd), rstd), -0.5), ops.mul(tvar, weight))
        if tweight is not None:
            term = ops.mul(rstd, tweight)
            dscale = term if dscale is None else ops.add(dscale, term)
        terms.append(ops.mul(centred, col(dscale)))
    if tbias is not None:
        terms.append(col(tbias))
    return _as_out(ops, _sum(ops, *terms), output)


@_register("softmax")
def softmax_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                axis: int) -> Tangent:
    """``y * (t - sum(t * y))`` along ``axis``."""
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    (ax,) = normalize_axes((axis,), len(shape_of(x)))
    return _as_out(ops, softmax_product(ops, output, t, ax), output)


@_register("log_softmax")
def log_softmax_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                    axis: int) -> Tangent:
    """``t - sum(softmax(x) * t)`` along ``axis`` (``softmax = exp(y)``)."""
    (x,) = primals
    t = _live(x, tangents[0])
    if t is None:
        return None
    (ax,) = normalize_axes((axis,), len(shape_of(x)))
    dot = ops.reduce_sum(ops.mul(ops.exp(output), t), axes=(ax,), keepdims=True)
    return _as_out(ops, ops.sub(t, dot), output)


@_register("dot_product_attention")
def attention_jvp(ops: Ops, primals: tuple[Any, ...], tangents: tuple[Tangent, ...], output: AnyTensor, *,
                  scale: float) -> Tangent:
    """With ``p = softmax(scale q k^T)`` (masked entries 0, as in the vjp, so a fully masked row stays 0):
    ``ds = scale (tq k^T + q tk^T)``, ``dp = p (ds - sum(ds p))``, ``d out = dp v + p tv``."""
    q, k, v, mask = primals
    tq, tk, tv = (_live(p, t) for p, t in zip((q, k, v), tangents[:3]))
    if tq is None and tk is None and tv is None:
        return None
    p = attention_probs(ops, q, k, mask, scale)
    terms: list[Tangent] = []
    ds = _sum(ops, None if tq is None else ops.matmul(tq, swap_last(ops, k)),
              None if tk is None else ops.matmul(q, swap_last(ops, tk)))
    if ds is not None:
        ds = ops.mul(ds, float(scale))
        terms.append(ops.matmul(softmax_product(ops, p, ds), v))
    if tv is not None:
        terms.append(ops.matmul(p, tv))
    return _as_out(ops, _sum(ops, *terms), output)


def jvp_rule(name: str) -> JvpRule:
    """The jvp rule of primitive ``name``; a :class:`MissingRuleError` naming it when there is none."""
    return find_rule(JVP_RULES, name, "jvp", "jvp rule")


def missing_rules() -> list[str]:
    """Primitives of :data:`tensorplay.ops.PRIMITIVE_NAMES` without a jvp rule (empty when complete)."""
    return uncovered(JVP_RULES)
