"""Elementwise primitives: unary maps, binary arithmetic with numpy broadcasting,
comparisons, logic and ``where``.

Dtypes follow PyTorch:

* ``neg abs relu floor ceil`` keep the dtype and refuse bool; ``sign`` keeps any dtype;
* ``exp log log1p expm1 sqrt rsqrt sin cos tanh sigmoid erf`` give float32 for
  int and bool inputs (floats are kept);
* ``gelu`` accepts floats only; ``logical_not`` gives bool;
* binary arithmetic promotes with :func:`tensorplay.spec.dtypes.result_type` (Python scalars
  are weak); ``sub`` refuses bool operands; ``pow`` refuses a bool result;
  ``div`` of non-floats gives float32; comparisons and logic give bool.

References compute in the result dtype (inputs are cast to it first, as PyTorch
does), except ``sigmoid``, ``erf`` and ``gelu``, which go through float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .aval import Aval
from .dtypes import DEFAULT_FLOAT, is_float, result_type
from .errors import DTypeError
from .shapes import Array, as_array, aval_of, broadcast_shapes, finish, fmt_aval, strong

UnaryRule = Callable[[Aval], Aval]
UnaryRef = Callable[[object], Array]
BinaryRule = Callable[[Aval, Aval], Aval]
BinaryRef = Callable[[object, object], Array]

# ---- unary ------------------------------------------------------------------------------------

_KEEP_NUMERIC = ("neg", "abs", "relu", "floor", "ceil")
_TO_FLOAT = ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "erf")


def unary_dtype(prim: str, x: Aval) -> str:
    """The result dtype of unary ``prim`` on ``x`` (see the module docstring)."""
    dtype = strong(x.dtype)
    if prim == "logical_not":
        return "bool"
    if prim in _KEEP_NUMERIC:
        if dtype == "bool":
            raise DTypeError(f"{prim}: x must be an int or float tensor, got bool (x: {fmt_aval(x)})")
        return dtype
    if prim in _TO_FLOAT:
        return dtype if is_float(dtype) else DEFAULT_FLOAT
    if prim == "gelu":
        if not is_float(dtype):
            raise DTypeError(f"{prim}: x must be a float tensor, got {dtype} (x: {fmt_aval(x)})")
        return dtype
    return dtype  # sign


def _sigmoid(x: Array) -> Array:
    x64 = x.astype(np.float64)
    e = np.exp(-np.abs(x64))  # never overflows
    result: Array = np.where(x64 >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return result


def _erf64(x: Array) -> Array:
    result: Array = np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))
    return result


def _identity(x: Array) -> Array:
    return x


_UNARY_FN: dict[str, Callable[[Array], Array]] = {
    "neg": np.negative,
    "abs": np.abs,
    "sign": np.sign,
    "exp": np.exp,
    "log": np.log,
    "log1p": np.log1p,
    "expm1": np.expm1,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),  # NaN propagates
    "erf": _erf64,
    "floor": np.floor,
    "ceil": np.ceil,
    "logical_not": np.logical_not,
}


def _make_unary(prim: str, doc: str) -> tuple[UnaryRule, UnaryRef]:
    def rule(x: Aval) -> Aval:
        return Aval(tuple(x.shape), unary_dtype(prim, x))

    def reference(x: object) -> Array:
        out = rule(aval_of(prim, "x", x))
        fn = _UNARY_FN[prim]
        if prim == "logical_not":
            arr = np.asarray(x)
        elif prim == "sign" and out.dtype == "bool" or prim in ("floor", "ceil") and not is_float(out.dtype):
            fn = _identity
            arr = as_array(x, out.dtype)
        else:
            arr = as_array(x, out.dtype)
        with np.errstate(all="ignore"):
            return finish(fn(arr), out)

    rule.__name__ = rule.__qualname__ = f"{prim}_rule"
    reference.__name__ = reference.__qualname__ = f"{prim}_ref"
    rule.__doc__ = f"Shape rule of ``{prim}`` ({doc}): ``x[*S] -> [*S]``; dtype per the module docstring."
    reference.__doc__ = f"Reference of ``{prim}``: {doc}."
    return rule, reference


neg_rule, neg_ref = _make_unary("neg", "-x")
abs_rule, abs_ref = _make_unary("abs", "|x|")
sign_rule, sign_ref = _make_unary("sign", "-1, 0 or 1; NaN stays NaN")
exp_rule, exp_ref = _make_unary("exp", "e**x")
log_rule, log_ref = _make_unary("log", "natural log; log(0) = -inf, negative gives NaN")
log1p_rule, log1p_ref = _make_unary("log1p", "log(1 + x)")
expm1_rule, expm1_ref = _make_unary("expm1", "exp(x) - 1")
sqrt_rule, sqrt_ref = _make_unary("sqrt", "square root; negative gives NaN")
rsqrt_rule, rsqrt_ref = _make_unary("rsqrt", "1 / sqrt(x)")
sin_rule, sin_ref = _make_unary("sin", "sine")
cos_rule, cos_ref = _make_unary("cos", "cosine")
tanh_rule, tanh_ref = _make_unary("tanh", "hyperbolic tangent")
sigmoid_rule, sigmoid_ref = _make_unary("sigmoid", "1 / (1 + exp(-x)) without overflow")
relu_rule, relu_ref = _make_unary("relu", "max(x, 0); NaN stays NaN")
erf_rule, erf_ref = _make_unary("erf", "the error function")
floor_rule, floor_ref = _make_unary("floor", "round down; ints unchanged")
ceil_rule, ceil_ref = _make_unary("ceil", "round up; ints unchanged")
logical_not_rule, logical_not_ref = _make_unary("logical_not", "boolean not (non-zero is true)")

_GELU_FORMS = ("none", "tanh")


def gelu_rule(x: Aval, *, approximate: str = "none") -> Aval:
    """Shape rule of ``gelu``: ``x[*S] -> [*S]``, float dtypes only; ``approximate`` is ``"none"`` or ``"tanh"``."""
    if approximate not in _GELU_FORMS:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r} (x: {fmt_aval(x)})")
    return Aval(tuple(x.shape), unary_dtype("gelu", x))


def gelu_ref(x: object, *, approximate: str = "none") -> Array:
    """GELU in float64: ``x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))``, or the tanh form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x**3)))``. Infinities follow the formula:
    ``gelu(inf) = inf`` and ``gelu(-inf) = NaN`` (``-inf * 0``), as PyTorch gives for ``-inf``."""
    out = gelu_rule(aval_of("gelu", "x", x), approximate=approximate)
    x64 = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        if approximate == "none":
            y = 0.5 * x64 * (1.0 + _erf64(x64 / math.sqrt(2.0)))
        else:
            y = 0.5 * x64 * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
    return finish(y, out)


# ---- binary -----------------------------------------------------------------------------------

_ARITH = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
_COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
_LOGIC = ("logical_and", "logical_or")
_FLOAT_NAMES = ("float32", "float64")
_WEAK_NUMBERS = ("weak_int", "weak_float")


def binary_dtype(prim: str, x: Aval, y: Aval) -> str:
    """The result dtype of binary ``prim`` (see the module docstring)."""
    if prim in _COMPARE or prim in _LOGIC:
        return "bool"
    # fast paths: a float tensor with the same float dtype or a numeric Python scalar
    if x.dtype in _FLOAT_NAMES and (y.dtype == x.dtype or y.dtype in _WEAK_NUMBERS):
        return x.dtype
    if y.dtype in _FLOAT_NAMES and x.dtype in _WEAK_NUMBERS:
        return y.dtype
    dtype = result_type([x.dtype, y.dtype])
    if prim == "sub" and ("bool" in (strong(x.dtype), strong(y.dtype))):
        raise DTypeError(
            f"sub: bool operands are not supported (x: {fmt_aval(x)}, y: {fmt_aval(y)}); "
            "use logical_not or logical ops on masks")
    if prim == "pow" and dtype == "bool":
        raise DTypeError(f"pow: bool ** bool is not supported (x: {fmt_aval(x)}, y: {fmt_aval(y)})")
    if prim == "div" and not is_float(dtype):
        return DEFAULT_FLOAT
    return dtype


def _compute_dtype(prim: str, x: Aval, y: Aval) -> str:
    """The dtype both operands are cast to before the operation."""
    if prim in _COMPARE:
        return result_type([x.dtype, y.dtype])
    return binary_dtype(prim, x, y)


_BINARY_FN: dict[str, Callable[[Array, Array], Array]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
}


def _make_binary(prim: str, doc: str) -> tuple[BinaryRule, BinaryRef]:
    def rule(x: Aval, y: Aval) -> Aval:
        shape = broadcast_shapes(prim, ("x", tuple(x.shape)), ("y", tuple(y.shape)))
        return Aval(shape, binary_dtype(prim, x, y))

    def reference(x: object, y: object) -> Array:
        ax, ay = aval_of(prim, "x", x), aval_of(prim, "y", y)
        out = rule(ax, ay)
        if prim in _LOGIC:
            xs, ys = np.asarray(x), np.asarray(y)
        else:
            compute = _compute_dtype(prim, ax, ay)
            xs, ys = as_array(x, compute), as_array(y, compute)
        with np.errstate(all="ignore"):
            return finish(_BINARY_FN[prim](xs, ys), out)

    rule.__name__ = rule.__qualname__ = f"{prim}_rule"
    reference.__name__ = reference.__qualname__ = f"{prim}_ref"
    rule.__doc__ = (f"Shape rule of ``{prim}`` ({doc}): ``x[*A], y[*B] -> [*broadcast(A, B)]``; "
                    "dtype per the module docstring.")
    reference.__doc__ = f"Reference of ``{prim}``: {doc}, numpy broadcasting."
    return rule, reference


add_rule, add_ref = _make_binary("add", "x + y; bool + bool is logical or")
sub_rule, sub_ref = _make_binary("sub", "x - y")
mul_rule, mul_ref = _make_binary("mul", "x * y")
div_rule, div_ref = _make_binary("div", "true division; x / 0 is inf or NaN")
pow_rule, pow_ref = _make_binary("pow", "x ** y")
maximum_rule, maximum_ref = _make_binary("maximum", "elementwise max; NaN propagates")
minimum_rule, minimum_ref = _make_binary("minimum", "elementwise min; NaN propagates")
eq_rule, eq_ref = _make_binary("eq", "x == y")
ne_rule, ne_ref = _make_binary("ne", "x != y")
lt_rule, lt_ref = _make_binary("lt", "x < y")
le_rule, le_ref = _make_binary("le", "x <= y")
gt_rule, gt_ref = _make_binary("gt", "x > y")
ge_rule, ge_ref = _make_binary("ge", "x >= y")
logical_and_rule, logical_and_ref = _make_binary("logical_and", "boolean and (non-zero is true)")
logical_or_rule, logical_or_ref = _make_binary("logical_or", "boolean or (non-zero is true)")


# ---- where ------------------------------------------------------------------------------------

def where_rule(cond: Aval, x: Aval, y: Aval) -> Aval:
    """Shape rule of ``where``: ``cond`` must be bool; the three shapes broadcast;
    the dtype is ``result_type(x, y)``."""
    if strong(cond.dtype) != "bool":
        raise DTypeError(
            f"where: cond must be bool, got {cond.dtype} "
            f"(cond: {fmt_aval(cond)}, x: {fmt_aval(x)}, y: {fmt_aval(y)})")
    shape = broadcast_shapes("where", ("cond", tuple(cond.shape)), ("x", tuple(x.shape)),
                             ("y", tuple(y.shape)))
    return Aval(shape, result_type([x.dtype, y.dtype]))


def where_ref(cond: object, x: object, y: object) -> Array:
    """Reference of ``where``: ``x`` where ``cond`` else ``y``, both cast to the result dtype."""
    out = where_rule(aval_of("where", "cond", cond), aval_of("where", "x", x), aval_of("where", "y", y))
    return finish(np.where(np.asarray(cond), as_array(x, out.dtype), as_array(y, out.dtype)), out)
