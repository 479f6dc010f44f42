"""Elementwise primitives: unary maps, binary arithmetic with numpy broadcasting,
comparisons, logic and ``where``.

Dtypes follow PyTorch:

* ``neg abs relu floor ceil round`` keep the dtype and refuse bool (``round`` is half to even);
  ``sign`` keeps any dtype;
* ``exp log log1p expm1 sqrt rsqrt sin cos tanh sigmoid erf`` give float32 for
  int and bool inputs (floats are kept);
* ``gelu`` accepts floats only; ``logical_not`` gives bool;
* ``bitwise_not`` and the binary ``bitwise_and``/``bitwise_or``/``bitwise_xor`` accept integer and bool
  operands only (logical on bool, two's-complement bitwise on integers) and promote like arithmetic;
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
from .dtypes import DEFAULT_FLOAT, WEAK, is_float, result_type
from .errors import DTypeError
from .shapes import Array, as_array, aval_of, broadcast_shapes, finish, fmt_aval, strong
from .table import PRIMITIVES, Primitive, names

UnaryRule = Callable[[Aval], Aval]
UnaryRef = Callable[[object], Array]
BinaryRule = Callable[[Aval, Aval], Aval]
BinaryRef = Callable[[object, object], Array]

# ---- unary ------------------------------------------------------------------------------------

def unary_dtype(prim: str, x: Aval) -> str:
    """The result dtype of unary ``prim`` on ``x``: the table's dtype rule (:data:`.table.DTYPE_RULES`)."""
    dtype = strong(x.dtype)
    policy = PRIMITIVES[prim].dtypes
    if policy == "to_bool":
        return "bool"
    if policy == "keep_numeric":
        if dtype == "bool":
            raise DTypeError(f"{prim}: x must be an int or float tensor, got bool (x: {fmt_aval(x)})")
        return dtype
    if policy == "to_float":
        return dtype if is_float(dtype) else DEFAULT_FLOAT
    if policy == "float_only":
        if not is_float(dtype):
            raise DTypeError(f"{prim}: x must be a float tensor, got {dtype} (x: {fmt_aval(x)})")
        return dtype
    if policy == "int_or_bool":
        if is_float(dtype):
            raise DTypeError(f"{prim}: x must be an integer or bool tensor, got {dtype} (x: {fmt_aval(x)}); "
                             "it is bitwise on integers and logical on bool, and not defined for floats")
        return dtype
    assert policy == "keep", (prim, policy)
    return dtype


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
    "tan": np.tan,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),  # NaN propagates
    "erf": _erf64,
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.round,  # half to even, as PyTorch
    "logical_not": np.logical_not,
    "bitwise_not": np.invert,
}


_ROUNDING = names("unary", dtypes="keep_numeric", has_derivative=False)
"""``floor``, ``ceil``, ``round``: integer inputs are returned unchanged."""


def _make_unary(prim: str) -> tuple[UnaryRule, UnaryRef]:
    def rule(x: Aval) -> Aval:
        return Aval(tuple(x.shape), unary_dtype(prim, x))

    def reference(x: object) -> Array:
        out = rule(aval_of(prim, "x", x))
        fn = _UNARY_FN[prim]
        if prim == "logical_not":
            arr = np.asarray(x)
        elif prim == "sign" and out.dtype == "bool" or prim in _ROUNDING and not is_float(out.dtype):
            fn = _identity
            arr = as_array(x, out.dtype)
        else:
            arr = as_array(x, out.dtype)
        with np.errstate(all="ignore"):
            return finish(fn(arr), out)

    rule.__name__ = rule.__qualname__ = f"{prim}_rule"
    reference.__name__ = reference.__qualname__ = f"{prim}_ref"
    rule.__doc__ = f"Shape rule of ``{prim}``: ``x[*S] -> [*S]``; the dtype follows the table's dtype rule."
    reference.__doc__ = f"Reference of ``{prim}``: numpy's meaning, computed in the result dtype."
    return rule, reference


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

_FLOAT_NAMES = ("float32", "float64")
_WEAK_NUMBERS = ("weak_int", "weak_float")


def binary_dtype(prim: str, x: Aval, y: Aval) -> str:
    """The result dtype of binary ``prim``: the table's dtype rule (:data:`.table.DTYPE_RULES`)."""
    policy = PRIMITIVES[prim].dtypes
    if policy in ("compare", "logical"):
        return "bool"
    if policy == "bitwise" and (is_float(x.dtype) or is_float(y.dtype)):
        raise DTypeError(f"{prim}: operands must be integer or bool tensors (or Python int or bool scalars), got "
                         f"x: {_operand(x)}, y: {_operand(y)}; it is bitwise on integers and logical on bool, "
                         "and not defined for floats")
    # fast paths: a float tensor with the same float dtype or a numeric Python scalar
    if x.dtype in _FLOAT_NAMES and (y.dtype == x.dtype or y.dtype in _WEAK_NUMBERS):
        return x.dtype
    if y.dtype in _FLOAT_NAMES and x.dtype in _WEAK_NUMBERS:
        return y.dtype
    dtype = result_type([x.dtype, y.dtype])
    if policy == "promote_no_bool" and ("bool" in (strong(x.dtype), strong(y.dtype))):
        raise DTypeError(
            f"{prim}: bool operands are not supported (x: {fmt_aval(x)}, y: {fmt_aval(y)}); "
            "use logical_not or logical ops on masks")
    if policy == "promote_not_bool" and dtype == "bool":
        raise DTypeError(f"{prim}: a bool result is not supported (x: {fmt_aval(x)}, y: {fmt_aval(y)})")
    if policy == "promote_to_float" and not is_float(dtype):
        return DEFAULT_FLOAT
    return dtype


def _operand(a: Aval) -> str:
    """An operand for an error message: ``float32[2, 3]``, or ``a Python float`` for a weak scalar."""
    return f"a Python {a.dtype[5:]}" if a.dtype in WEAK else fmt_aval(a)


def _compute_dtype(prim: str, x: Aval, y: Aval) -> str:
    """The dtype both operands are cast to before the operation."""
    if PRIMITIVES[prim].dtypes == "compare":
        return result_type([x.dtype, y.dtype])
    return binary_dtype(prim, x, y)


_BINARY_FN: dict[str, Callable[[Array | int, Array | int], Array]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "atan2": np.arctan2,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
}


def _int_operand(prim: str, value: object, compute: str) -> Array | int:
    """An operand cast to ``compute``; a Python int with an integer ``compute`` dtype is never wrapped around:
    a comparison takes it exactly (as it is), any other operation refuses one the dtype cannot hold."""
    if type(value) is int and np.dtype(compute).kind in "iu":
        info = np.iinfo(compute)
        if PRIMITIVES[prim].dtypes == "compare":
            return value
        if not info.min <= value <= info.max:
            raise OverflowError(f"{prim}: the int {value} does not fit {compute} "
                                f"(range [{info.min}, {info.max}])")
    return as_array(value, compute)


def _make_binary(prim: str) -> tuple[BinaryRule, BinaryRef]:
    def rule(x: Aval, y: Aval) -> Aval:
        shape = broadcast_shapes(prim, ("x", tuple(x.shape)), ("y", tuple(y.shape)))
        return Aval(shape, binary_dtype(prim, x, y))

    def reference(x: object, y: object) -> Array:
        ax, ay = aval_of(prim, "x", x), aval_of(prim, "y", y)
        out = rule(ax, ay)
        xs: Array | int
        ys: Array | int
        if PRIMITIVES[prim].dtypes == "logical":
            xs, ys = np.asarray(x), np.asarray(y)
        else:
            compute = _compute_dtype(prim, ax, ay)
            xs, ys = _int_operand(prim, x, compute), _int_operand(prim, y, compute)
        with np.errstate(all="ignore"):
            return finish(_BINARY_FN[prim](xs, ys), out)

    rule.__name__ = rule.__qualname__ = f"{prim}_rule"
    reference.__name__ = reference.__qualname__ = f"{prim}_ref"
    rule.__doc__ = (f"Shape rule of ``{prim}``: ``x[*A], y[*B] -> [*broadcast(A, B)]``; the dtype follows the "
                    "table's dtype rule.")
    reference.__doc__ = f"Reference of ``{prim}``: numpy's meaning with numpy broadcasting."
    return rule, reference


def generated(p: Primitive) -> tuple[Callable[..., Aval], Callable[..., Array]] | None:
    """The rule and reference of a unary or binary primitive without a hand-written ``<name>_rule``:
    shapes from the family, the dtype from the table, the value from the reference function table
    (``None`` when that table has no entry for it yet)."""
    table = _UNARY_FN if p.family == "unary" else _BINARY_FN
    if p.name not in table:
        return None
    return _make_unary(p.name) if p.family == "unary" else _make_binary(p.name)



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
