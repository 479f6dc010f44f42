"""Vector-Jacobian product rules, one per primitive of :class:`~tensorplay.ops.Ops`.

A rule is called as ``VJP_RULES[name](ops, g, inputs, output, **params)``:

* ``g`` is the cotangent of the primitive's result (same shape and dtype);
* ``inputs`` are the primitive's inputs as it was called (tensors, Python scalars, ``None``);
* ``output`` is the primal result (rules for ``exp``, ``tanh``, ``softmax``, ... reuse it);
* ``params`` are the primitive's static parameters.

It returns one cotangent per input: a tensor of that input's shape and dtype, or
``None`` for Python scalars, ``None`` inputs, integer/bool tensors and inputs
with no derivative. Rules use only ``ops`` methods and :mod:`tensorplay.rules.util`,
never numpy, so the eager tape, the graph transforms and transforms of
transforms all run the same code, and ``create_graph=True`` gives higher
derivatives. Conventions (ties split, ``relu'(0) = 0``, ``sqrt`` at 0, ...)
are those documented on each primitive in :mod:`tensorplay.ops`.

``USES_OUTPUT`` names the rules that read ``output``: a tape must keep the
result of those primitives (and detect when it is modified in place).
``VALUE_FREE`` names the rules that read only their inputs' shapes and dtypes:
an in-place update of such an input after it was recorded is harmless.
``smooth_max_pool_backward``'s rule is fully compositional (windows as strided
slices), so every primitive has derivatives of every order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tensorplay.spec.table import names
from tensorplay.symbolic import SymDim
from tensorplay.rules.registry import find_rule, registrar, uncovered
from tensorplay.rules.util import (
    AnyTensor, as_float, attention_probs, channel_column, cotangent_for, dtype_name, flip, input_needed, is_float_tensor,
    is_tensor, mean_keep, normalize_axes, prod_others, shape_of, softmax_product, squared_norm, sum_to, swap_last,
    unreduce, wants_cotangent, zeros_like,
)

if TYPE_CHECKING:
    from tensorplay.ops import Ops

Cotangents = tuple[AnyTensor | None, ...]
VjpRule = Callable[..., Cotangents]
"""``rule(ops, g, inputs, output, **params) -> cotangents`` (one per input)."""

VJP_RULES: dict[str, VjpRule] = {}
"""Primitive name -> vjp rule. Complete over :data:`tensorplay.ops.PRIMITIVE_NAMES` (tested)."""


_register = registrar(VJP_RULES)


def _ct(ops: Ops, g: AnyTensor, x: object) -> AnyTensor | None:
    return cotangent_for(ops, g, x)


def _scalar_mask(ops: Ops, cond: AnyTensor, value: AnyTensor) -> AnyTensor:
    """``value`` where ``cond`` is false, 0 where it is true (a ``where`` whose zero side carries no gradient)."""
    return ops.where(cond, 0.0, value)


# ---- elementwise unary ----------------------------------------------------------------------------

@_register("neg")
def neg_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``d(-x) = -g``."""
    (x,) = inputs
    return (_ct(ops, ops.neg(g), x),)


@_register("abs")
def abs_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * sign(x)``: 0 at ``x == 0``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.mul(g, ops.sign(x)), x),)


@_register("sign", "stop_gradient", *names("unary", dtypes="keep_numeric", has_derivative=False))
def zero_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """Piecewise constant (or a gradient barrier): a zero cotangent for a float input."""
    (x,) = inputs
    return (zeros_like(ops, x) if is_float_tensor(x) else None,)


@_register("exp")
def exp_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * exp(x)``, reusing the result."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.mul(g, output), x),)


@_register("log")
def log_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g / x``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.div(g, x), x),)


@_register("log1p")
def log1p_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g / (1 + x)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.div(g, ops.add(x, 1.0)), x),)


@_register("expm1")
def expm1_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * (expm1(x) + 1)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.mul(g, ops.add(output, 1.0)), x),)


@_register("sqrt")
def sqrt_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * 0.5 / sqrt(x)``; 0 wherever ``g == 0`` (no ``0 * inf = nan`` at ``x == 0``)."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    silent = ops.eq(g, 0.0)
    # the denominator is made safe where the result is masked, so no NaN reaches higher derivatives
    raw = ops.div(ops.mul(g, 0.5), ops.where(silent, 1.0, output))
    return (_ct(ops, _scalar_mask(ops, silent, raw), x),)


@_register("rsqrt")
def rsqrt_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``d x^(-1/2) = -0.5 x^(-3/2) = -0.5 * y^3``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    cube = ops.mul(ops.mul(output, output), output)
    return (_ct(ops, ops.mul(g, ops.mul(cube, -0.5)), x),)


@_register("sin")
def sin_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * cos(x)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.mul(g, ops.cos(x)), x),)


@_register("cos")
def cos_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``-g * sin(x)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.neg(ops.mul(g, ops.sin(x))), x),)


@_register("tan")
def tan_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * (1 + y^2)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.add(g, ops.mul(ops.mul(g, output), output)), x),)


@_register("tanh")
def tanh_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * (1 - y^2)``, as ``g - (g y) y`` (tensor-tensor and tensor-scalar ops only: the eager fast path)."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.sub(g, ops.mul(ops.mul(g, output), output)), x),)


@_register("sigmoid")
def sigmoid_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * y * (1 - y)``, as ``g * (y - y y)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.mul(g, ops.sub(output, ops.mul(output, output))), x),)


@_register("relu")
def relu_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g`` where ``x > 0``, else 0 (0 at exactly 0, as PyTorch): ``g * sign(relu(x))``, reusing the result."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.mul(g, ops.sign(output)), x),)


_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


@_register("gelu")
def gelu_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor,
             approximate: str = "none") -> Cotangents:
    """erf form: ``Phi(x) + x phi(x)``; tanh form: ``0.5(1+t) + 0.5 x (1-t^2) sqrt(2/pi)(1 + 3c x^2)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    if approximate == "tanh":
        x2 = ops.mul(x, x)
        inner = ops.mul(ops.add(x, ops.mul(ops.mul(x2, x), _GELU_C)), _SQRT_2_OVER_PI)
        t = ops.tanh(inner)
        dinner = ops.mul(ops.add(ops.mul(x2, 3.0 * _GELU_C), 1.0), _SQRT_2_OVER_PI)
        left = ops.mul(ops.add(t, 1.0), 0.5)
        right = ops.mul(ops.mul(ops.mul(x, 0.5), ops.neg(ops.sub(ops.mul(t, t), 1.0))), dinner)
        d = ops.add(left, right)
    else:
        cdf = ops.mul(ops.add(ops.erf(ops.mul(x, _SQRT_HALF)), 1.0), 0.5)
        pdf = ops.mul(ops.exp(ops.mul(ops.mul(x, x), -0.5)), _INV_SQRT_2PI)
        d = ops.add(cdf, ops.mul(x, pdf))
    return (_ct(ops, ops.mul(g, d), x),)


@_register("erf")
def erf_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * 2/sqrt(pi) * exp(-x^2)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    d = ops.mul(ops.exp(ops.neg(ops.mul(x, x))), 2.0 / math.sqrt(math.pi))
    return (_ct(ops, ops.mul(g, d), x),)


def no_grad_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor,
                      **params: Any) -> Cotangents:
    """A result with no derivative (bool, integer, random): no cotangent for any input."""
    return tuple(None for _ in inputs)


# ---- elementwise binary ----------------------------------------------------------------------------

@_register("add")
def add_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g`` to both sides, reduced to each input's shape."""
    x, y = inputs
    return (_ct(ops, g, x) if input_needed(0) else None, _ct(ops, g, y) if input_needed(1) else None)


@_register("sub")
def sub_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g`` and ``-g``."""
    x, y = inputs
    return (_ct(ops, g, x) if input_needed(0) else None, _ct(ops, ops.neg(g), y) if wants_cotangent(y, 1) else None)


@_register("mul")
def mul_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g * y`` and ``g * x``."""
    x, y = inputs
    gx = _ct(ops, ops.mul(g, y), x) if wants_cotangent(x, 0) else None
    gy = _ct(ops, ops.mul(g, x), y) if wants_cotangent(y, 1) else None
    return (gx, gy)


@_register("div")
def div_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g / y`` and ``-g * x / y^2``."""
    x, y = inputs
    gx = _ct(ops, ops.div(g, y), x) if wants_cotangent(x, 0) else None
    gy = None
    if wants_cotangent(y, 1):
        gy = _ct(ops, ops.neg(ops.div(ops.mul(g, ops.div(x, y)), y)), y)
    return (gx, gy)


@_register("atan2")
def atan2_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """With ``r2 = x^2 + y^2``: ``g * x / r2`` to ``y`` and ``-g * y / r2`` to ``x``."""
    y, x = inputs
    scaled = ops.div(g, squared_norm(ops, x, y))
    gy = _ct(ops, ops.mul(scaled, x), y) if wants_cotangent(y, 0) else None
    gx = _ct(ops, ops.neg(ops.mul(scaled, y)), x) if wants_cotangent(x, 1) else None
    return (gy, gx)


@_register("pow")
def pow_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``d/dx = g y x^(y-1)`` (0 where ``y == 0``); ``d/dy = g x^y log(x)``, 0 where ``x == 0`` and ``y >= 0``."""
    x, y = inputs
    gx = gy = None
    if wants_cotangent(x, 0):
        if is_tensor(y):
            flat = ops.eq(y, 0.0)
            d = ops.mul(y, ops.pow(ops.where(flat, 1.0, x), ops.sub(y, 1.0)))  # no 0 * inf at x == y == 0
            d = _scalar_mask(ops, flat, d)
            gx = _ct(ops, ops.mul(g, d), x)
        elif y == 0:
            gx = zeros_like(ops, x)
        else:
            gx = _ct(ops, ops.mul(g, ops.mul(ops.pow(x, y - 1), y)), x)
    if wants_cotangent(y, 1):
        if is_tensor(x):
            zero_base = ops.logical_and(ops.eq(x, 0.0), ops.ge(y, 0.0))
            # log(1) = 0 where the result is masked anyway: no 0 * -inf = nan, at any derivative order
            raw = ops.mul(ops.mul(g, output), ops.log(ops.where(zero_base, 1.0, x)))
            gy = _ct(ops, _scalar_mask(ops, zero_base, raw), y)
        elif x == 0:
            gy = zeros_like(ops, y)
        else:
            log_x = math.log(x) if x > 0 else math.nan
            gy = _ct(ops, ops.mul(ops.mul(g, output), log_x), y)
    return (gx, gy)


def _minmax_vjp(ops: Ops, g: AnyTensor, x: Any, y: Any, larger: bool) -> Cotangents:
    # the share of x is (1 + sign(x - y)) / 2 for maximum, (1 - sign(x - y)) / 2 for minimum:
    # 1 for the winner, 0 for the loser and 1/2 each on a tie
    # (the eq guard keeps ties between equal infinities at 1/2: sign(inf - inf) is NaN)
    half_sign = ops.mul(ops.where(ops.eq(x, y), 0.0, ops.sign(ops.sub(x, y))), 0.5 if larger else -0.5)
    gx = _ct(ops, ops.mul(g, ops.add(half_sign, 0.5)), x) if wants_cotangent(x, 0) else None
    gy = _ct(ops, ops.mul(g, ops.neg(ops.sub(half_sign, 0.5))), y) if wants_cotangent(y, 1) else None
    return (gx, gy)


@_register("maximum")
def maximum_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g`` to the larger side; ties split the gradient equally."""
    x, y = inputs
    return _minmax_vjp(ops, g, x, y, True)


@_register("minimum")
def minimum_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g`` to the smaller side; ties split the gradient equally."""
    x, y = inputs
    return _minmax_vjp(ops, g, x, y, False)




@_register("where")
def where_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g`` to ``x`` where ``cond``, to ``y`` elsewhere; nothing to ``cond``."""
    cond, x, y = inputs
    gx = _ct(ops, ops.where(cond, g, 0.0), x) if wants_cotangent(x, 1) else None
    gy = _ct(ops, ops.where(cond, 0.0, g), y) if wants_cotangent(y, 2) else None
    return (None, gx, gy)


# ---- reductions ------------------------------------------------------------------------------------

@_register("reduce_sum")
def reduce_sum_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                   axes: tuple[int, ...], keepdims: bool = False) -> Cotangents:
    """``g`` broadcast back over the reduced axes."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, unreduce(ops, g, shape_of(x), axes, keepdims), x),)


@_register("reduce_prod")
def reduce_prod_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                    axes: tuple[int, ...], keepdims: bool = False) -> Cotangents:
    """``g`` broadcast back, times the product of the other elements of each position's group (exact at
    zeros: no division by zero; see :func:`~tensorplay.rules.util.prod_others`)."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    shape = shape_of(x)
    spread = unreduce(ops, g, shape, axes, keepdims)
    if not axes:
        return (_ct(ops, spread, x),)
    return (_ct(ops, ops.mul(spread, prod_others(ops, x, axes)), x),)


def _extremum_vjp(ops: Ops, g: AnyTensor, x: AnyTensor, output: AnyTensor, axes: tuple[int, ...],
                  keepdims: bool) -> Cotangents:
    if not is_float_tensor(x):
        return (None,)
    shape = shape_of(x)
    dtype = dtype_name(x)
    hit = ops.eq(x, unreduce(ops, output, shape, axes, keepdims))
    ax = normalize_axes(axes, len(shape))
    count = ops.reduce_sum(as_float(ops, hit, dtype), axes=ax, keepdims=True) if ax else as_float(ops, hit, dtype)
    share = ops.div(unreduce(ops, g, shape, axes, keepdims), count)
    return (_ct(ops, ops.where(hit, share, 0.0), x),)


@_register("reduce_max")
def reduce_max_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                   axes: tuple[int, ...], keepdims: bool = False) -> Cotangents:
    """``g`` split equally among the positions equal to the maximum."""
    (x,) = inputs
    return _extremum_vjp(ops, g, x, output, axes, keepdims)


@_register("reduce_min")
def reduce_min_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                   axes: tuple[int, ...], keepdims: bool = False) -> Cotangents:
    """``g`` split equally among the positions equal to the minimum."""
    (x,) = inputs
    return _extremum_vjp(ops, g, x, output, axes, keepdims)


# ---- scans -----------------------------------------------------------------------------------------

@_register("cumsum")
def cumsum_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, axis: int) -> Cotangents:
    """The running sums of ``g`` from the other end: ``flip(cumsum(flip(g)))`` along ``axis``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, flip(ops, ops.cumsum(flip(ops, g, axis), axis=axis), axis), x),)


# ---- structure -------------------------------------------------------------------------------------

@_register("reshape")
def reshape_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                shape: tuple[int, ...]) -> Cotangents:
    """``g`` reshaped back."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.reshape(g, shape=shape_of(x)), x),)


@_register("permute")
def permute_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                perm: tuple[int, ...]) -> Cotangents:
    """``g`` permuted by the inverse permutation."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    n = len(perm)
    inverse = [0] * n
    for i, p in enumerate(perm):
        inverse[int(p) % n] = i
    return (_ct(ops, ops.permute(g, perm=tuple(inverse)), x),)


@_register("broadcast_to")
def broadcast_to_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                     shape: tuple[int, ...]) -> Cotangents:
    """``g`` summed over the broadcast axes."""
    (x,) = inputs
    return (_ct(ops, g, x),)


@_register("slice")
def slice_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
              starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]) -> Cotangents:
    """``g`` placed back into zeros: axes with step 1 by ``pad``, other steps by ``scatter_add``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    xshape = shape_of(x)
    out = g
    for axis, (start, step) in enumerate(zip(starts, steps)):
        if step == 1:
            continue
        cur = shape_of(out)
        length = cur[axis]
        index = ops.add(ops.mul(ops.iota(length=length, dtype="int64"), int(step)), _bound(start))
        base = ops.full(shape=cur[:axis] + (xshape[axis],) + cur[axis + 1:], value=0.0, dtype=dtype_name(g))
        out = ops.scatter_add(base, index, out, axis=axis)
    pads = []
    for axis, (start, step) in enumerate(zip(starts, steps)):
        if step == 1:
            length = shape_of(g)[axis]
            pads.append((_bound(start), xshape[axis] - start - length))
        else:
            pads.append((0, 0))
    if all(isinstance(a, int) and isinstance(b, int) for a, b in pads):
        if any(p != (0, 0) for p in pads):
            out = ops.pad(out, pads=tuple(pads), value=0.0)
        return (_ct(ops, out, x),)
    # a symbolic amount (the backward of ``weight[:T]``): zeros joined on, as ``pad`` takes ints only
    for axis, (before, after) in enumerate(pads):
        cur = shape_of(out)
        parts = [ops.full(shape=cur[:axis] + (n,) + cur[axis + 1:], value=0.0, dtype=dtype_name(g))
                 for n in (before,) if not (isinstance(n, int) and n == 0)]
        parts.append(out)
        parts += [ops.full(shape=cur[:axis] + (n,) + cur[axis + 1:], value=0.0, dtype=dtype_name(g))
                  for n in (after,) if not (isinstance(n, int) and n == 0)]
        if len(parts) > 1:
            out = ops.concat(*parts, axis=axis)
    return (_ct(ops, out, x),)


def _bound(value: Any) -> Any:
    """A slice bound as an int, or kept as it is when it is a symbolic size."""
    return value if isinstance(value, SymDim) else int(value)


@_register("pad")
def pad_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
            pads: tuple[tuple[int, int], ...], value: float = 0.0) -> Cotangents:
    """The interior of ``g`` (a slice)."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    xshape = shape_of(x)
    starts = tuple(int(p[0]) for p in pads)
    stops = tuple(int(p[0]) + n for p, n in zip(pads, xshape))  # n may be a symbolic size
    out = ops.slice(g, starts=starts, stops=stops, steps=(1,) * len(xshape))
    return (_ct(ops, out, x),)


@_register("concat")
def concat_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, axis: int) -> Cotangents:
    """One slice of ``g`` per input (cast back to each input's dtype)."""
    gshape = shape_of(g)
    ax = int(axis) % len(gshape)
    cts: list[AnyTensor | None] = []
    offset = 0
    for x in inputs:
        n = shape_of(x)[ax]
        if is_float_tensor(x):
            starts = tuple(offset if i == ax else 0 for i in range(len(gshape)))
            stops = tuple(offset + n if i == ax else d for i, d in enumerate(gshape))
            piece = ops.slice(g, starts=starts, stops=stops, steps=(1,) * len(gshape))
            cts.append(_ct(ops, piece, x))
        else:
            cts.append(None)
        offset += n
    return tuple(cts)


@_register("gather")
def gather_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, axis: int) -> Cotangents:
    """``scatter_add(zeros_like(x), indices, g)``; nothing to the indices."""
    x, indices = inputs
    if not is_float_tensor(x):
        return (None, None)
    return (ops.scatter_add(zeros_like(ops, x), indices, g, axis=axis), None)


@_register("scatter_add")
def scatter_add_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                    axis: int) -> Cotangents:
    """``d base = g``, ``d updates = gather(g, indices)``."""
    base, indices, updates = inputs
    gbase = _ct(ops, g, base)
    gupd = _ct(ops, ops.gather(g, indices, axis=axis), updates) if is_float_tensor(updates) else None
    return (gbase, None, gupd)


@_register("cast")
def cast_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, dtype: str) -> Cotangents:
    """Float to float: ``g`` cast back; otherwise no cotangent."""
    (x,) = inputs
    if not is_float_tensor(x) or dtype_name(g) not in ("float32", "float64"):
        return (None,)
    return (_ct(ops, g, x),)


# ---- linear algebra --------------------------------------------------------------------------------

@_register("matmul")
def matmul_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor) -> Cotangents:
    """``g b^T`` and ``a^T g``, summed over broadcast batch axes."""
    a, b = inputs
    ga = _ct(ops, ops.matmul(g, swap_last(ops, b)), a) if wants_cotangent(a, 0) else None
    gb = _ct(ops, ops.matmul(swap_last(ops, a), g), b) if wants_cotangent(b, 1) else None
    return (ga, gb)


# ---- convolution -----------------------------------------------------------------------------------

def _conv_output_padding(in_sp: Sequence[Any], out_sp: Sequence[Any], kernel: Sequence[Any],
                         stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    """The ``output_padding`` that makes ``conv_transpose`` of an ``out_sp`` input give ``in_sp``."""
    return tuple(int(i - ((o - 1) * s - 2 * p + d * (k - 1) + 1))
                 for i, o, k, s, p, d in zip(in_sp, out_sp, kernel, stride, padding, dilation))


def _crop_spatial(ops: Ops, y: AnyTensor, spatial: Sequence[Any]) -> AnyTensor:
    """``y[:, :, :spatial...]`` when ``y`` is larger."""
    shape = shape_of(y)
    if tuple(shape[2:]) == tuple(spatial):
        return y
    stops = tuple(shape[:2]) + tuple(spatial)
    return ops.slice(y, starts=(0,) * len(shape), stops=stops, steps=(1,) * len(shape))


def _extend_spatial(ops: Ops, y: AnyTensor, spatial: Sequence[Any]) -> AnyTensor:
    """``y`` zero-padded at the end of each spatial axis up to ``spatial``."""
    shape = shape_of(y)
    if tuple(shape[2:]) == tuple(spatial):
        return y
    pads = ((0, 0), (0, 0)) + tuple((0, t - n) for n, t in zip(shape[2:], spatial))
    return ops.pad(y, pads=pads, value=0.0)


def _conv_input_grad(ops: Ops, g: AnyTensor, w: AnyTensor, in_sp: Sequence[Any], stride: tuple[int, ...],
                     padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> AnyTensor:
    """d conv(x, w) / dx applied to ``g``: a transposed convolution sized to recover ``in_sp``."""
    op = _conv_output_padding(in_sp, shape_of(g)[2:], shape_of(w)[2:], stride, padding, dilation)
    return ops.conv_transpose_nd(g, w, stride=stride, padding=padding, output_padding=op, dilation=dilation,
                              groups=groups)


@_register("conv_nd")
def conv_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, stride: tuple[int, ...],
             padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Cotangents:
    """``dx = conv_transpose(g, w)``, ``dw = conv_weight_grad(x, g)``."""
    x, w = inputs
    gx = gw = None
    if wants_cotangent(x, 0):
        gx = _ct(ops, _conv_input_grad(ops, g, w, shape_of(x)[2:], stride, padding, dilation, groups), x)
    if wants_cotangent(w, 1):
        gw = _ct(ops, ops.conv_weight_grad_nd(x, g, kernel_size=tuple(shape_of(w)[2:]), stride=stride,
                                           padding=padding, dilation=dilation, groups=groups), w)
    return (gx, gw)


@_register("conv_transpose_nd")
def conv_transpose_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                       stride: tuple[int, ...], padding: tuple[int, ...], output_padding: tuple[int, ...],
                       dilation: tuple[int, ...], groups: int) -> Cotangents:
    """``conv_transpose(., w)`` is the adjoint of ``conv(., w)`` (the weight ``[C, O/groups, *k]`` is a
    conv weight mapping ``O -> C``): ``dx = conv(g, w)``, ``dw = conv_weight_grad(g, x)``."""
    x, w = inputs
    in_sp = shape_of(x)[2:]
    gx = gw = None
    if is_float_tensor(x):
        y = ops.conv_nd(g, w, stride=stride, padding=padding, dilation=dilation, groups=groups)
        gx = _ct(ops, _crop_spatial(ops, y, in_sp), x)
    if is_float_tensor(w):
        kernel = tuple(shape_of(w)[2:])
        # conv of g gives in + output_padding // stride positions; the extra ones see zeros of x
        full = tuple((o + 2 * p - d * (k - 1) - 1) // s + 1 for o, k, s, p, d in
                     zip(shape_of(g)[2:], kernel, stride, padding, dilation))
        xe = _extend_spatial(ops, x, full)
        gw = _ct(ops, ops.conv_weight_grad_nd(g, xe, kernel_size=kernel, stride=stride, padding=padding,
                                           dilation=dilation, groups=groups), w)
    return (gx, gw)


@_register("conv_weight_grad_nd")
def conv_weight_grad_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                         kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                         dilation: tuple[int, ...], groups: int) -> Cotangents:
    """Bilinear in ``(x, gy)``: ``d gy = conv(x, ct)``, ``d x = conv_transpose(gy, ct)``."""
    x, gy = inputs
    gx = ggy = None
    if is_float_tensor(x):
        gx = _ct(ops, _conv_input_grad(ops, gy, g, shape_of(x)[2:], stride, padding, dilation, groups), x)
    if is_float_tensor(gy):
        ggy = _ct(ops, ops.conv_nd(x, g, stride=stride, padding=padding, dilation=dilation, groups=groups), gy)
    return (gx, ggy)


# ---- pooling ---------------------------------------------------------------------------------------

@_register("max_pool_nd")
def max_pool_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                 kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...]) -> Cotangents:
    """``max_pool_backward(x, g)``: ``g`` routed to each window's first argmax."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, ops.max_pool_backward_nd(x, g, kernel_size=kernel_size, stride=stride, padding=padding), x),)


@_register("max_pool_backward_nd")
def max_pool_backward_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                          kernel_size: tuple[int, ...], stride: tuple[int, ...],
                          padding: tuple[int, ...]) -> Cotangents:
    """Linear in the routed cotangent (``d gy = max_pool_select(x, ct)``); piecewise constant in ``x`` (zero)."""
    x, gy = inputs
    gx = zeros_like(ops, x) if is_float_tensor(x) else None
    ggy = None
    if is_float_tensor(gy):
        ggy = _ct(ops, ops.max_pool_select_nd(x, g, kernel_size=kernel_size, stride=stride, padding=padding), gy)
    return (gx, ggy)


@_register("max_pool_select_nd")
def max_pool_select_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                        kernel_size: tuple[int, ...], stride: tuple[int, ...],
                        padding: tuple[int, ...]) -> Cotangents:
    """Linear in ``h`` (``d h = max_pool_backward(x, ct)``); piecewise constant in ``x`` (zero)."""
    x, h = inputs
    gx = zeros_like(ops, x) if is_float_tensor(x) else None
    gh = None
    if is_float_tensor(h):
        gh = _ct(ops, ops.max_pool_backward_nd(x, g, kernel_size=kernel_size, stride=stride, padding=padding), h)
    return (gx, gh)


@_register("avg_pool_nd")
def avg_pool_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                 kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...]) -> Cotangents:
    """``avg_pool_backward(g)`` (the adjoint)."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    out = ops.avg_pool_backward_nd(g, input_shape=tuple(shape_of(x)[2:]), kernel_size=kernel_size, stride=stride,
                                padding=padding)
    return (_ct(ops, out, x),)


@_register("avg_pool_backward_nd")
def avg_pool_backward_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                          input_shape: tuple[int, ...], kernel_size: tuple[int, ...], stride: tuple[int, ...],
                          padding: tuple[int, ...]) -> Cotangents:
    """``avg_pool(ct)`` (the adjoint of the adjoint)."""
    (gy,) = inputs
    if not is_float_tensor(gy):
        return (None,)
    return (_ct(ops, ops.avg_pool_nd(g, kernel_size=kernel_size, stride=stride, padding=padding), gy),)


@_register("smooth_max_pool_nd")
def smooth_max_pool_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                        kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                        beta: float) -> Cotangents:
    """``smooth_max_pool_backward(x, g)``: ``g`` spread with each window's ``softmax(beta x)``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    out = ops.smooth_max_pool_backward_nd(x, g, kernel_size=kernel_size, stride=stride, padding=padding, beta=beta)
    return (_ct(ops, out, x),)


def _window_weighted_sum(ops: Ops, x: AnyTensor, h: AnyTensor, smax: AnyTensor, kernel_size: tuple[int, ...],
                         stride: tuple[int, ...], padding: tuple[int, ...], beta: float) -> AnyTensor:
    """``sum_{i in window w} softmax_w(beta x)[i] * h[i]`` for every window ``w`` (shaped like ``smax``),
    built from one strided slice per kernel offset (padded cells take part as zeros); ``smax`` is
    ``smooth_max_pool(x)``, so every weight ``exp(beta (x_i - smax_w)) = exp(beta x_i - lse_w)`` is at
    most 1 (no overflow) for either sign of ``beta``."""
    xshape = shape_of(x)
    out_sp = shape_of(smax)[2:]
    pads = ((0, 0), (0, 0)) + tuple((int(p), int(p)) for p in padding)
    xp = ops.pad(x, pads=pads, value=0.0)  # padded cells take part with value 0
    hp = ops.pad(h, pads=pads, value=0.0)
    total: AnyTensor | None = None
    offsets: list[tuple[int, ...]] = [()]
    for k in kernel_size:
        offsets = [o + (j,) for o in offsets for j in range(int(k))]
    for off in offsets:
        starts = (0, 0) + off
        stops = tuple(xshape[:2]) + tuple(j + (o - 1) * s + 1 for j, o, s in zip(off, out_sp, stride))
        steps = (1, 1) + tuple(int(s) for s in stride)
        xw = ops.slice(xp, starts=starts, stops=stops, steps=steps)
        hw = ops.slice(hp, starts=starts, stops=stops, steps=steps)
        weight = ops.exp(ops.mul(ops.sub(xw, smax), float(beta)))
        term = ops.mul(weight, hw)
        total = term if total is None else ops.add(total, term)
    assert total is not None
    return total


@_register("smooth_max_pool_backward_nd")
def smooth_max_pool_backward_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                                 kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                                 beta: float) -> Cotangents:
    """With ``p_w(i) = softmax_w(beta x)[i]`` and ``out_i = sum_w gy_w p_w(i)``:
    ``d gy_w = sum_i p_w(i) ct_i`` and
    ``d x = beta (ct * smooth_max_pool_backward(x, gy) - smooth_max_pool_backward(x, gy * d gy))``."""
    x, gy = inputs
    params: dict[str, Any] = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "beta": beta}
    smax = ops.smooth_max_pool_nd(x, **params)
    dgy = _window_weighted_sum(ops, x, g, smax, kernel_size, stride, padding, beta)
    gx = None
    if is_float_tensor(x):
        spread = ops.smooth_max_pool_backward_nd(x, gy, **params)
        correction = ops.smooth_max_pool_backward_nd(x, ops.mul(gy, dgy), **params)
        gx = _ct(ops, ops.mul(ops.sub(ops.mul(g, spread), correction), float(beta)), x)
    ggy = _ct(ops, dgy, gy) if is_float_tensor(gy) else None
    return (gx, ggy)


# ---- normalisation and attention -------------------------------------------------------------------

@_register("layer_norm_last_axis")
def layer_norm_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                   eps: float) -> Cotangents:
    """With ``xhat = (x - mean) * rstd``: ``dbeta = sum g``, ``dgamma = sum g * xhat`` (over every
    leading axis) and ``dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat))`` with ``gh = g * gamma``."""
    x, gamma, beta = inputs
    rank = len(shape_of(x))
    axis = rank - 1
    centred = ops.sub(x, mean_keep(ops, x, axis))
    var = mean_keep(ops, ops.mul(centred, centred), axis)
    rstd = ops.rsqrt(ops.add(var, float(eps)))
    xhat = ops.mul(centred, rstd)
    lead = tuple(range(rank - 1))
    gx = ggamma = gbeta = None
    if is_float_tensor(x):
        gh = ops.mul(g, gamma)
        inner = ops.sub(ops.sub(gh, mean_keep(ops, gh, axis)),
                        ops.mul(xhat, mean_keep(ops, ops.mul(gh, xhat), axis)))
        gx = _ct(ops, ops.mul(inner, rstd), x)
    if is_float_tensor(gamma):
        ggamma = _ct(ops, ops.reduce_sum(ops.mul(g, xhat), axes=lead, keepdims=False), gamma)
    if is_float_tensor(beta):
        gbeta = _ct(ops, ops.reduce_sum(g, axes=lead, keepdims=False), beta)
    return (gx, ggamma, gbeta)


@_register("batch_norm")
def batch_norm_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                   eps: float) -> Cotangents:
    """``y = (x - mean) * rstd * weight + bias`` with ``rstd = (var + eps)^-1/2``, per channel (axis 1);
    each of the five inputs gets its own cotangent (batch statistics are differentiated through
    the ops that computed them)."""
    x, mean, var, weight, bias = inputs
    rank = len(shape_of(x))
    others = (0,) + tuple(range(2, rank))
    rstd = ops.rsqrt(ops.add(var, float(eps)))
    rstd_c = channel_column(ops, rstd, rank)
    scale_c = ops.mul(channel_column(ops, weight, rank), rstd_c)
    centred = ops.sub(x, channel_column(ops, mean, rank))
    g_scale = ops.mul(g, scale_c)
    gx = _ct(ops, g_scale, x) if is_float_tensor(x) else None
    gmean = None
    if is_float_tensor(mean):
        gmean = _ct(ops, ops.neg(ops.reduce_sum(g_scale, axes=others, keepdims=False)), mean)
    g_centred: AnyTensor = ops.reduce_sum(ops.mul(g, centred), axes=others, keepdims=False) if (
        is_float_tensor(var) or is_float_tensor(weight)) else None
    gvar = gweight = None
    if is_float_tensor(var):
        cube = ops.mul(ops.mul(rstd, rstd), rstd)
        gvar = _ct(ops, ops.mul(ops.mul(g_centred, weight), ops.mul(cube, -0.5)), var)
    if is_float_tensor(weight):
        gweight = _ct(ops, ops.mul(g_centred, rstd), weight)
    gbias = _ct(ops, ops.reduce_sum(g, axes=others, keepdims=False), bias) if is_float_tensor(bias) else None
    return (gx, gmean, gvar, gweight, gbias)


@_register("softmax")
def softmax_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, axis: int) -> Cotangents:
    """``y * (g - sum(g * y))`` along ``axis``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    return (_ct(ops, softmax_product(ops, output, g, int(axis) % len(shape_of(x))), x),)


@_register("log_softmax")
def log_softmax_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                    axis: int) -> Cotangents:
    """``g - exp(y) * sum(g)`` along ``axis``."""
    (x,) = inputs
    if not is_float_tensor(x):
        return (None,)
    ax = int(axis) % len(shape_of(x))
    total = ops.reduce_sum(g, axes=(ax,), keepdims=True)
    return (_ct(ops, ops.sub(g, ops.mul(ops.exp(output), total)), x),)


@_register("dot_product_attention")
def attention_vjp(ops: Ops, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *,
                  scale: float) -> Cotangents:
    """Recompute ``p = softmax(scale q k^T)`` (masked entries filled with the lowest finite value, then
    ``p`` zeroed there, so a fully masked row has ``p = 0`` and no NaN reaches any gradient), then
    ``dv = p^T g``, ``dp = g v^T``, ``ds = p (dp - sum(dp p))``, ``dq = scale ds k``, ``dk = scale ds^T q``."""
    q, k, v, mask = inputs
    p = attention_probs(ops, q, k, mask, scale)
    gv = _ct(ops, ops.matmul(swap_last(ops, p), g), v) if is_float_tensor(v) else None
    gq = gk = None
    if is_float_tensor(q) or is_float_tensor(k):
        ds = ops.mul(softmax_product(ops, p, ops.matmul(g, swap_last(ops, v))), float(scale))
        if is_float_tensor(q):
            gq = _ct(ops, ops.matmul(ds, k), q)
        if is_float_tensor(k):
            gk = _ct(ops, ops.matmul(swap_last(ops, ds), q), k)
    return (gq, gk, gv, None)


VALUE_FREE: frozenset[str] = frozenset({*names(vjp_reads_inputs=False), "clone"})
"""Primitives whose vjp rule reads only the shapes and dtypes of its inputs, never their values (the table's
``vjp_reads_inputs=False``, plus the tape's ``clone``): an in-place update of such an input after it was
recorded cannot change the gradient."""

USES_OUTPUT: frozenset[str] = frozenset(names(uses_output=True))
"""Primitives whose vjp rule reads the primal ``output`` (the table's ``uses_output`` flag)."""


# every other primitive without a derivative (bool, integer or random results, creation): no cotangent
_register(*(name for name in names(has_derivative=False) if name not in VJP_RULES))(no_grad_vjp)


def vjp_rule(name: str) -> VjpRule:
    """The vjp rule of primitive ``name``; a :class:`MissingRuleError` naming it when there is none."""
    return find_rule(VJP_RULES, name, "vjp", "vjp rule")


def missing_rules() -> list[str]:
    """Primitives of :data:`tensorplay.ops.PRIMITIVE_NAMES` without a vjp rule (empty when complete)."""
    return uncovered(VJP_RULES)
