"""PyTorch's elementwise arithmetic, comparisons and math functions that have no primitive of their own,
written once against :class:`~tensorplay.ops.Ops` from existing primitives: ``add``/``sub`` with ``alpha``,
``div`` with ``rounding_mode``, the inverse trigonometric and hyperbolic functions, ``trunc``, ``frac``,
``signbit``, ``copysign``, ``hypot``, ``fmax``/``fmin``, ``fmod``, ``heaviside``, ``float_power``, ``sinc``,
``ldexp``, ``exp2``, ``erfc``, ``isin`` and friends. Being compositions, they run under every interpreter and
transform (graph recording, ``tp.compile``, export, ``grad``, ``vmap``, ``jvp``), and their derivatives follow
from those of the primitives (at the domain edges as PyTorch's: ``asin'(1) = inf``, ``atanh'(-1) = inf``).

Dtypes promote as PyTorch's: numbers are weak (``int32 tensor + 2`` is int32), the float functions turn
integer and bool results into float32. Every function takes the interpreter first; the tensor methods and the
``tp.<name>`` forms pass it.
"""

from __future__ import annotations

import builtins
import math
from typing import TYPE_CHECKING, Any

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError
from tensorplay.op_args import check_tensor as _check_tensor, is_tensor as _is_tensor
from tensorplay.spec import dtypes as _sd

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any

_LN2 = math.log(2.0)
_INF = float("inf")
_BIG = 1e8  # above it 1 + x*x == x*x in float64: asinh(x) = acosh(x) = log(2x)


# ---- dtypes ------------------------------------------------------------------------------------------

def _check_operand(value: Any, where: str, name: str) -> None:
    if not (_is_tensor(value) or isinstance(value, (bool, int, float))):
        raise ArgumentTypeError(f"{where}: {name} must be a tensor or a number, got {type(value).__name__}")


def _dtype(value: Any) -> str:
    """A tensor's dtype name, or a Python number's weak kind (``weak_int``, ...)."""
    return str(value.dtype.name) if _is_tensor(value) else _sd.weak_kind(value)


def result_dtype(*values: Any) -> str:
    """The dtype PyTorch gives a binary operation of ``values`` (tensors and Python numbers)."""
    return _sd.result_type([_dtype(v) for v in values])


def _float_dtype(*values: Any) -> str:
    dtype = result_dtype(*values)
    return dtype if _sd.is_float(dtype) else _sd.DEFAULT_FLOAT


def _as(ops: Interpreter, value: Any, dtype: str) -> Any:
    """A tensor cast to ``dtype`` (unchanged when it has it); a number unchanged (weak)."""
    if _is_tensor(value) and value.dtype.name != dtype:
        return ops.cast(value, dtype=dtype)
    return value


def _to_float(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Integer and bool tensors as float32 (the unary float functions of PyTorch)."""
    return _as(ops, x, x.dtype.name if x.dtype.numpy.kind == "f" else _sd.DEFAULT_FLOAT)


def _refuse(x: Any, where: str, kinds: str, expected: str) -> None:
    if _is_tensor(x) and x.dtype.numpy.kind in kinds:
        raise DTypeError(f"{where}: expected {expected}, got {x.dtype.name}{list(x.shape)}")


def _isnan(ops: Interpreter, v: Any) -> Any:
    return ops.ne(v, v) if _is_tensor(v) else (isinstance(v, float) and math.isnan(v))


# ---- arithmetic with PyTorch's extra arguments -------------------------------------------------------

def _scaled(ops: Interpreter, x: Any, y: Any, alpha: Any, where: str) -> Any:
    """``alpha * y`` in the dtype of ``x (op) y``, with PyTorch's checks of ``alpha``."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        if not isinstance(alpha, bool):
            raise ArgumentTypeError(f"{where}: alpha must be a number, got {type(alpha).__name__} {alpha!r}")
    dtype = result_dtype(x, y)
    if dtype == "bool":  # as PyTorch: a bool sum is a logical or, scaled by alpha's truth
        if isinstance(alpha, float):
            raise ArgumentError(f"{where}: alpha must be a bool or an int for bool operands, got {alpha!r}")
        alpha = bool(alpha)
    elif isinstance(alpha, bool):
        raise ArgumentError(f"{where}: a bool alpha is only supported for bool operands, got alpha={alpha!r} "
                            f"for a {dtype} result")
    elif isinstance(alpha, float) and not _sd.is_float(dtype):
        raise ArgumentError(f"{where}: alpha must be an int for integer operands (result {dtype}), got "
                            f"alpha={alpha!r}")
    if alpha == 1 and not isinstance(alpha, bool):
        return y
    if not _is_tensor(y):
        return y * alpha
    return ops.mul(_as(ops, y, dtype), alpha)


def add(ops: Interpreter, x: Any, y: Any, alpha: Any = 1) -> AnyTensor:
    """``x + alpha * y`` (numpy broadcasting, dtypes promote), as ``torch.add``: ``alpha`` must be an int
    for integer results and a bool for bool ones."""
    _check_operand(x, "add", "input")
    _check_operand(y, "add", "other")
    scaled = _scaled(ops, x, y, alpha, "add")
    return ops.logical_or(x, scaled) if result_dtype(x, y) == "bool" else ops.add(x, scaled)


def sub(ops: Interpreter, x: Any, y: Any, alpha: Any = 1) -> AnyTensor:
    """``x - alpha * y`` (numpy broadcasting, dtypes promote), as ``torch.sub``; bool operands are refused."""
    _check_operand(x, "sub", "input")
    _check_operand(y, "sub", "other")
    if "bool" in (_dtype(x), _dtype(y)) or isinstance(x, bool) or isinstance(y, bool):
        raise DTypeError(f"sub: subtraction with a bool operand is not supported (got {_dtype(x)} and "
                         f"{_dtype(y)}); use logical_xor (or ^) for bools")
    return ops.sub(x, _scaled(ops, x, y, alpha, "sub"))


def mul(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """``x * y`` (numpy broadcasting, dtypes promote), as ``torch.mul``."""
    _check_operand(x, "mul", "input")
    _check_operand(y, "mul", "other")
    return ops.mul(x, y)


_ROUNDING_MODES = (None, "trunc", "floor")


def div(ops: Interpreter, x: Any, y: Any, rounding_mode: str | None = None) -> AnyTensor:
    """``x / y`` (numpy broadcasting), as ``torch.div``: ``rounding_mode=None`` is true division (integers
    give float32), ``'trunc'`` rounds the quotient toward zero and ``'floor'`` toward -inf (see
    :func:`tensorplay.floor_divide`); with a rounding mode integers stay integer and are exact (a zero
    integer divisor is a :class:`ZeroDivisionError`), and the derivative is zero."""
    _check_operand(x, "div", "input")
    _check_operand(y, "div", "other")
    if rounding_mode not in _ROUNDING_MODES:
        raise ArgumentError(f"div: expected rounding_mode to be one of None, 'trunc' or 'floor', got "
                            f"{rounding_mode!r}")
    if rounding_mode is None:
        return ops.div(x, y)
    from tensorplay.floordiv import floor_divide, remainder  # floordiv imports the tensor module
    dtype = result_dtype(x, y)
    if dtype == "bool":
        raise DTypeError(f"div: rounding_mode={rounding_mode!r} does not support bool operands; convert "
                         "them with .long() first")
    if rounding_mode == "floor":
        return floor_divide(x, y)
    if _sd.is_float(dtype):
        return trunc(ops, ops.div(x, y))  # trunc's derivative is zero
    quotient = floor_divide(x, y)  # exact; rounds down, so one below the truncation when inexact and < 0
    inexact_negative = ops.logical_and(ops.ne(remainder(x, y), 0), ops.lt(quotient, 0))
    return ops.add(quotient, ops.cast(inexact_negative, dtype=dtype))


def positive(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``x`` itself, as ``torch.positive``; a bool tensor is refused (unary ``+`` is arithmetic)."""
    _check_tensor(x, "positive", "input")
    _refuse(x, "positive", "b", "an int or float tensor")
    return x


# ---- comparisons ------------------------------------------------------------------------------------

def compare(ops: Interpreter, prim: str, x: Any, y: Any) -> AnyTensor:
    """The comparison primitive ``prim`` (``eq``, ``ne``, ``lt``, ...) of ``x`` and ``y`` (a tensor or a
    number, numpy broadcasting, compared in the promoted dtype): a bool tensor."""
    _check_operand(x, prim, "input")
    _check_operand(y, prim, "other")
    return ops.run_binary(prim, x, y)


def equal(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> bool:
    """Whether ``a`` and ``b`` have the same shape and equal values (compared in the promoted dtype; NaN is
    unequal), as ``torch.equal``: a Python bool (it reads the values)."""
    _check_tensor(a, "equal", "input")
    _check_tensor(b, "equal", "other")
    if not _d.same_sizes(tuple(a.shape), tuple(b.shape)):
        return False
    if a.ndim == 0:
        return bool(ops.eq(a, b).item())
    return bool(_d.all_true(ops, ops.eq(a, b), None, False).item())


# ---- inverse trigonometric and hyperbolic functions ---------------------------------------------------

def _odd(ops: Interpreter, x: AnyTensor, f: Any) -> AnyTensor:
    """``f(|x|)`` with ``x``'s sign, for an odd ``f`` that is accurate on ``[0, inf)``: ``|x|`` is taken by
    selection so the derivative at 0 is ``f'(0)`` (``abs`` would give 0 there)."""
    negative = ops.lt(x, 0)
    value = f(ops.where(negative, ops.neg(x), x))
    return ops.where(negative, ops.neg(value), value)


def _cos_of_asin(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``sqrt(1 - x^2)`` as ``sqrt(1 - x) sqrt(1 + x)``: no cancellation near ``|x| = 1``, NaN outside, and the
    derivative at ``x = +-1`` is ``-+inf`` (a product inside the root would give ``0 * inf = NaN`` there)."""
    return ops.mul(ops.sqrt(ops.sub(1.0, x)), ops.sqrt(ops.add(1.0, x)))


def asin(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Arcsine in ``[-pi/2, pi/2]``, ``atan2(x, sqrt(1 - x^2))`` (NaN outside ``[-1, 1]``; integers give
    float32). Derivative ``1 / sqrt(1 - x^2)``, ``inf`` at ``x = +-1``."""
    x = _to_float(ops, x)
    return ops.atan2(x, _cos_of_asin(ops, x))


def acos(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Arccosine in ``[0, pi]``, ``atan2(sqrt(1 - x^2), x)`` (NaN outside ``[-1, 1]``; integers give
    float32). Derivative ``-1 / sqrt(1 - x^2)``, ``-inf`` at ``x = +-1``."""
    x = _to_float(ops, x)
    return ops.atan2(_cos_of_asin(ops, x), x)


def atan(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Arctangent in ``[-pi/2, pi/2]``, ``atan2(x, 1)`` (integers give float32); derivative ``1 / (1 + x^2)``."""
    return ops.atan2(_to_float(ops, x), 1.0)


def _asinh_positive(ops: Interpreter, a: AnyTensor) -> AnyTensor:
    # log(a + sqrt(a^2 + 1)) = log1p(a + a^2 / (1 + sqrt(1 + a^2))); log(2a) where a^2 would lose the 1
    big = ops.gt(a, _BIG)
    small = ops.where(big, 0.0, a)
    square = ops.mul(small, small)
    near = ops.log1p(ops.add(small, ops.div(square, ops.add(1.0, ops.sqrt(ops.add(1.0, square))))))
    far = ops.add(ops.log(ops.where(big, a, 1.0)), _LN2)
    return ops.where(big, far, near)


def asinh(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Inverse hyperbolic sine (integers give float32), accurate near 0 and finite up to the dtype's largest
    value; derivative ``1 / sqrt(1 + x^2)``."""
    return _odd(ops, _to_float(ops, x), lambda a: _asinh_positive(ops, a))


def acosh(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Inverse hyperbolic cosine on ``[1, inf)`` (NaN below 1; integers give float32):
    ``log1p(t + sqrt(t) sqrt(t + 2))`` with ``t = x - 1`` (accurate near 1), ``log(2x)`` for large ``x``.
    Derivative ``1 / sqrt(x^2 - 1)``, ``inf`` at ``x = 1``."""
    x = _to_float(ops, x)
    big = ops.gt(x, _BIG)
    t = ops.sub(ops.where(big, 1.0, x), 1.0)
    near = ops.log1p(ops.add(t, ops.mul(ops.sqrt(t), ops.sqrt(ops.add(t, 2.0)))))  # roots apart: acosh'(1) = inf
    far = ops.add(ops.log(ops.where(big, x, 1.0)), _LN2)
    return ops.where(big, far, near)


def atanh(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Inverse hyperbolic tangent on ``[-1, 1]``, ``(log1p(x) - log1p(-x)) / 2`` (``+-inf`` at ``+-1``, NaN
    outside; integers give float32). Derivative ``1 / (1 - x^2)``, ``inf`` at ``x = +-1``."""
    x = _to_float(ops, x)
    return ops.mul(ops.sub(ops.log1p(x), ops.log1p(ops.neg(x))), 0.5)


# ---- rounding and signs -------------------------------------------------------------------------------

def trunc(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Rounded toward zero (``ceil`` below 0, ``floor`` elsewhere; ``-0.5`` gives ``-0.0``), as
    ``torch.trunc``: integers unchanged, bool refused; derivative zero."""
    _check_tensor(x, "trunc", "input")
    _refuse(x, "trunc", "b", "an int or float tensor")
    if x.dtype.numpy.kind != "f":
        return x
    return ops.where(ops.lt(x, 0), ops.ceil(x), ops.floor(x))


def frac(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``x - trunc(x)``, the fractional part with ``x``'s sign (float tensors only, as PyTorch); derivative 1."""
    _check_tensor(x, "frac", "input")
    _refuse(x, "frac", "biu", "a float tensor")
    return ops.sub(x, trunc(ops, x))


def signbit(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """True where the sign bit is set (bool): negative values, ``-0.0`` and ``-inf``; never for bool. A NaN
    counts as positive (its sign bit is not read)."""
    _check_tensor(x, "signbit", "input")
    kind = x.dtype.numpy.kind
    if kind == "b":
        return ops.ne(x, x)
    if kind != "f":
        return ops.lt(x, 0)
    # 1 / -0.0 is -inf; 1 / x is -0.0 for x = -inf, caught by x < 0
    zero = ops.eq(x, 0)
    return ops.logical_or(ops.lt(x, 0), ops.logical_and(zero, ops.lt(ops.div(1.0, ops.where(zero, x, 1.0)), 0)))


def copysign(ops: Interpreter, x: AnyTensor, y: Any) -> AnyTensor:
    """``|x|`` with the sign (bit) of ``y``, as ``torch.copysign`` (broadcasting; the result is a float
    dtype, integers and bools give float32). Derivative ``sign(x) sign(result)`` in ``x`` (0 at 0) and 0 in
    ``y``."""
    _check_tensor(x, "copysign", "input")
    _check_operand(y, "copysign", "other")
    dtype = _float_dtype(x, y)
    magnitude = ops.abs(_as(ops, x, dtype))
    if not _is_tensor(y):
        return ops.neg(magnitude) if math.copysign(1.0, float(y)) < 0 else magnitude
    return ops.where(signbit(ops, y), ops.neg(magnitude), magnitude)


def heaviside(ops: Interpreter, x: AnyTensor, values: Any) -> AnyTensor:
    """The step function: 0 where ``x < 0`` (and NaN), ``values`` where ``x == 0``, 1 where ``x > 0``
    (broadcasting), as ``torch.heaviside``; a tensor ``values`` must have ``x``'s dtype, a number is
    converted to it."""
    _check_tensor(x, "heaviside", "input")
    _check_operand(values, "heaviside", "values")
    if _is_tensor(values) and values.dtype != x.dtype:
        raise DTypeError(f"heaviside: expected values to have the input's dtype {x.dtype.name}, got "
                         f"{values.dtype.name}")
    if not _is_tensor(values):  # a number takes x's dtype
        values = bool(values) if x.dtype.name == "bool" else float(values) if _sd.is_float(x.dtype.name) \
            else int(values)
    step = ops.cast(ops.gt(x, 0), dtype=x.dtype.name)
    return ops.where(ops.eq(x, 0), values, step)


# ---- more binary functions -----------------------------------------------------------------------------

def hypot(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """``sqrt(x^2 + y^2)`` without overflow or underflow, ``m sqrt(1 + (n/m)^2)`` with ``m``, ``n`` the
    larger and smaller magnitude (``inf`` when either is infinite, NaN otherwise propagates), as
    ``torch.hypot``: the result must be a float dtype. Derivatives ``x / result`` and ``y / result`` (0 at
    the origin, where PyTorch gives NaN)."""
    _check_operand(x, "hypot", "input")
    _check_operand(y, "hypot", "other")
    dtype = result_dtype(x, y)
    if not _sd.is_float(dtype):
        raise DTypeError(f"hypot: expected a float operand, got {_dtype(x)} and {_dtype(y)}")
    ax: Any = ops.abs(_as(ops, x, dtype)) if _is_tensor(x) else builtins.abs(float(x))
    ay: Any = ops.abs(_as(ops, y, dtype)) if _is_tensor(y) else builtins.abs(float(y))
    big = ops.maximum(ax, ay)
    small = ops.minimum(ax, ay)
    zero = ops.eq(big, 0)
    safe = ops.where(zero, 1.0, big)
    ratio = ops.div(small, safe)
    value = ops.where(zero, 0.0, ops.mul(safe, ops.sqrt(ops.add(1.0, ops.mul(ratio, ratio)))))
    infinite: Any = None
    for a in (ax, ay):
        if _is_tensor(a):
            flag = ops.eq(a, _INF)
            infinite = flag if infinite is None else ops.logical_or(infinite, flag)
        elif a == _INF:  # an infinite number: infinite everywhere
            return ops.where(isreal(ops, value), _INF, value)
    return ops.where(infinite, _INF, value)


def _nan_ignoring(ops: Interpreter, x: Any, y: Any, where: str, prim: str) -> AnyTensor:
    _check_operand(x, where, "input")
    _check_operand(y, where, "other")
    dtype = result_dtype(x, y)
    x, y = _as(ops, x, dtype), _as(ops, y, dtype)
    keep_x: Any = ops.run_binary(prim, x, y)  # x >= y (fmax) or x <= y (fmin): x wins ties, y gets no gradient
    take_x: Any = ops.logical_or(keep_x, _isnan(ops, y)) if _sd.is_float(dtype) else keep_x
    return ops.where(take_x, x, y)


def fmax(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """The elementwise maximum ignoring NaN (NaN only where both are), as ``torch.fmax`` (broadcasting,
    dtypes promote); at a tie the whole gradient goes to ``x``, as PyTorch."""
    return _nan_ignoring(ops, x, y, "fmax", "ge")


def fmin(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """The elementwise minimum ignoring NaN (NaN only where both are), as ``torch.fmin``."""
    return _nan_ignoring(ops, x, y, "fmin", "le")


def fmod(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """C's remainder ``x - trunc(x / y) * y``, with the sign of ``x`` (``tp.remainder`` has ``y``'s), as
    ``torch.fmod``: broadcasting, integers stay integer (a zero integer divisor is a
    :class:`ZeroDivisionError`), bool refused, ``fmod(x, +-inf) = x`` for finite ``x``. Derivatives 1 in
    ``x`` and ``-trunc(x / y)`` in ``y``."""
    _check_operand(x, "fmod", "input")
    _check_operand(y, "fmod", "other")
    dtype = result_dtype(x, y)
    if dtype == "bool":
        raise DTypeError("fmod: bool operands are not supported (convert them with .long() first)")
    from tensorplay.floordiv import remainder
    x, y = (int(v) if isinstance(v, bool) else _as(ops, v, dtype) for v in (x, y))  # bools count as 0 and 1
    r = remainder(x, y)  # the sign of y: off by y where it is non-zero and x, y differ in sign
    x_negative: Any = ops.lt(x, 0) if _is_tensor(x) else x < 0
    off = ops.logical_and(ops.ne(r, 0), ops.ne(ops.lt(r, 0), x_negative))
    value = ops.where(off, ops.sub(r, y), r)
    if not _sd.is_float(dtype):
        return value
    infinite_y: Any = ops.eq(ops.abs(y), _INF) if _is_tensor(y) else math.isinf(y)
    if infinite_y is False:
        return value
    finite_x: Any = _d.isfinite(ops, x) if _is_tensor(x) else math.isfinite(x)
    keep: Any = ops.logical_and(infinite_y, finite_x) if _is_tensor(infinite_y) else finite_x
    return ops.where(keep, _as(ops, x, dtype), value)


def float_power(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """``x ** y`` computed in float64 (the result is float64), as ``torch.float_power``."""
    _check_operand(x, "float_power", "input")
    _check_operand(y, "float_power", "exponent")
    if not (_is_tensor(x) or _is_tensor(y)):
        raise ArgumentTypeError("float_power: expected a tensor input or exponent, got two numbers")
    base: Any = _as(ops, x, "float64") if _is_tensor(x) else float(x)
    exponent: Any = _as(ops, y, "float64") if _is_tensor(y) else float(y)
    return ops.pow(base, exponent)


def ldexp(ops: Interpreter, x: AnyTensor, y: Any) -> AnyTensor:
    """``x * 2**y`` (broadcasting), as ``torch.ldexp``: the result is a float dtype (integers give float32)."""
    _check_tensor(x, "ldexp", "input")
    _check_operand(y, "ldexp", "other")
    dtype = _float_dtype(x, y)
    power: Any = ops.pow(2.0, _as(ops, y, dtype)) if _is_tensor(y) else 2.0 ** float(y)
    return ops.mul(_as(ops, x, dtype), power)


# ---- more unary functions --------------------------------------------------------------------------------

def exp2(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``2**x`` (integers give float32); derivative ``ln 2 * 2**x``."""
    return ops.pow(2.0, _to_float(ops, x))


_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398, 1.48851587,
         -0.82215223, 0.17087277)  # a Chebyshev fit of log(erfc(z) / t) - z^2 in t = 1 / (1 + z/2), z >= 0
_ERFC_TERMS = 30  # of the continued fraction: relative error below 5e-13 from x = 2.5 on


def _exp_minus_square(ops: Interpreter, z: AnyTensor, extra: Any, scale: float) -> AnyTensor:
    """``exp(extra - z^2)`` for ``0 <= z <= 30`` without the rounding of ``z^2`` (which would cost a relative
    ``eps z^2``): ``z = h + l`` with ``h`` a multiple of ``1/scale`` short enough that ``h^2`` is exact, then
    ``exp(-h^2) exp(extra - (z - h)(z + h))``. ``h`` is piecewise constant, so the derivative is that of the
    formula."""
    h = ops.div(ops.floor(ops.mul(z, scale)), scale)
    return ops.mul(ops.exp(ops.neg(ops.mul(h, h))), ops.exp(ops.sub(extra, ops.mul(ops.sub(z, h), ops.add(z, h)))))


def _erfc_tail32(ops: Interpreter, z: AnyTensor) -> AnyTensor:
    """``erfc(z)`` for ``z >= 0.5``: ``t exp(-z^2 + P(t))``, ``t = 1 / (1 + z/2)`` (relative error < 1.2e-7)."""
    t = ops.div(1.0, ops.add(ops.mul(z, 0.5), 1.0))
    poly = ops.add(ops.mul(t, _ERFC[-1]), _ERFC[-2])
    for c in reversed(_ERFC[:-2]):
        poly = ops.add(ops.mul(poly, t), c)
    return ops.mul(t, _exp_minus_square(ops, z, poly, 256.0))  # z < 10: h has 12 bits, h^2 fits float32


def _erfc_tail64(ops: Interpreter, z: AnyTensor) -> AnyTensor:
    """``erfc(z)`` for ``z >= 2.5``: ``exp(-z^2) / (sqrt(pi) K)`` with Laplace's continued fraction
    ``K = z + (1/2) / (z + (2/2) / (z + (3/2) / ...))`` cut after :data:`_ERFC_TERMS` terms."""
    k = z
    for n in range(_ERFC_TERMS, 0, -1):
        k = ops.add(z, ops.div(n / 2.0, k))
    return ops.div(_exp_minus_square(ops, z, 0.0, 65536.0), ops.mul(k, math.sqrt(math.pi)))


def erfc(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``1 - erf(x)`` (integers give float32) without the cancellation for large ``x``: ``1 - erf(x)`` below a
    threshold, a tail formula above it. float32: above 0.5, ``t exp(-x^2 + P(t))`` with ``P`` a fixed
    polynomial (relative error below 1.2e-7); float64: above 2.5, a continued fraction (relative error below
    5e-13, and ``1 - erf`` loses at most 3e-13 below). Derivative ``-2 exp(-x^2) / sqrt(pi)`` (of the
    approximation, as close)."""
    x = _to_float(ops, x)
    wide = x.dtype.name == "float64"
    start = 2.5 if wide else 0.5
    tail = ops.ge(x, start)
    z = ops.where(tail, ops.minimum(x, 30.0), start)  # erfc(30) is 0 even in float64; keeps inf out of z
    far = _erfc_tail64(ops, z) if wide else _erfc_tail32(ops, z)
    near = ops.sub(1.0, ops.erf(ops.where(tail, 0.0, x)))
    return ops.where(tail, far, near)


def deg2rad(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Degrees to radians, ``x * pi / 180`` (integers give float32)."""
    return ops.mul(_to_float(ops, x), math.pi / 180.0)


def rad2deg(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Radians to degrees, ``x * 180 / pi`` (integers give float32)."""
    return ops.mul(_to_float(ops, x), 180.0 / math.pi)


def sinc(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """The normalised sinc ``sin(pi x) / (pi x)``, 1 at 0 with derivative 0 there (integers give float32)."""
    x = _to_float(ops, x)
    zero = ops.eq(x, 0)
    px = ops.mul(ops.where(zero, 1.0, x), math.pi)
    return ops.where(zero, 1.0, ops.div(ops.sin(px), px))


def isposinf(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """True where ``x`` is ``+inf`` (never for integers and bools)."""
    _check_tensor(x, "isposinf", "input")
    return ops.eq(x, _INF) if x.dtype.numpy.kind == "f" else ops.ne(x, x)


def isneginf(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """True where ``x`` is ``-inf`` (never for integers and bools)."""
    _check_tensor(x, "isneginf", "input")
    return ops.eq(x, -_INF) if x.dtype.numpy.kind == "f" else ops.ne(x, x)


def isreal(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """True everywhere (tensorplay has no complex dtypes), shaped like ``x``, as ``torch.isreal``."""
    _check_tensor(x, "isreal", "input")
    truth = ops.cast(x, dtype="bool")
    return ops.eq(truth, truth)


def isin(ops: Interpreter, elements: Any, test_elements: Any, invert: bool = False) -> AnyTensor:
    """Whether each of ``elements`` equals one of ``test_elements`` (compared in the promoted dtype; NaN
    equals nothing), shaped like ``elements``, as ``torch.isin``; ``invert=True`` negates. Either may be a
    number (a number ``elements`` gives a 0-d result). Compares every pair: ``O(len(elements) *
    len(test_elements))`` work."""
    _check_operand(elements, "isin", "elements")
    _check_operand(test_elements, "isin", "test_elements")
    if not isinstance(invert, bool):
        raise ArgumentTypeError(f"isin: invert must be a bool, got {type(invert).__name__}")
    if not (_is_tensor(elements) or _is_tensor(test_elements)):
        raise ArgumentTypeError("isin: expected elements or test_elements to be a tensor, got two numbers")
    if not _is_tensor(test_elements):
        found = ops.eq(elements, test_elements)
    elif not _is_tensor(elements):
        found = _d.any_true(ops, ops.eq(test_elements, elements), None, False)
    else:
        column = _d.reshape(ops, elements, (*elements.shape, 1))
        found = _d.any_true(ops, ops.eq(column, _d.reshape(ops, test_elements, (-1,))), -1, False)
    return ops.logical_not(found) if invert else found


__all__ = [
    "acos", "acosh", "add", "asin", "asinh", "atan", "atanh", "compare", "copysign", "deg2rad", "div", "equal",
    "erfc", "exp2", "float_power", "fmax", "fmin", "fmod", "frac", "heaviside", "hypot", "isin", "isneginf",
    "isposinf", "isreal", "ldexp", "mul", "positive", "rad2deg", "result_dtype", "signbit", "sinc", "sub",
    "trunc",
]
