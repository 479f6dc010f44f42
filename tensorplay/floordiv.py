"""``//`` and ``%`` of tensors: ``tp.floor_divide`` and ``tp.remainder`` with PyTorch's semantics, built from
the primitives (``div``, ``floor``, ``mul``, ``sub``, ``cast``), so they run eagerly, under every recording and
under the transforms.

* ``floor_divide(a, b)`` rounds the quotient down (toward -inf), as Python's ``//`` and ``torch.floor_divide``;
  ``remainder(a, b) = a - b * floor_divide(a, b)`` has the sign of ``b`` (Python's ``%``, ``torch.remainder``).
* dtypes promote as the other binary operators (``int32 // 2`` is int32, ``int64 // 2.5`` float32); bool
  operands are refused.
* Integers are exact. They are divided through float64 (exact for int32), and for int64 the quotient is
  corrected by the exact integer remainder, twice, so every quotient that fits is exact. An integer division
  by zero is a :class:`ZeroDivisionError` (PyTorch raises ``RuntimeError: ZeroDivisionError``); inside a
  recording (``tp.compile``, export) the check is recorded and raises an
  :class:`~tensorplay.errors.IndexRangeError` naming the division when the program runs.
* float32 is computed in float64 and rounded once, which gives ``torch.floor_divide``'s and
  ``torch.remainder``'s results (``1.0 // 0.1 == 9``, the remainder exact while the quotient is below 2**29);
  float64 is ``floor(a / b)`` in float64, which can differ from PyTorch's fmod-based quotient by one when
  ``a / b`` rounds onto an integer. A zero float divisor gives ``a / b`` (inf or nan) for ``//`` and nan for
  ``%``, as PyTorch.
* Gradients: ``//`` has a zero derivative; ``%`` has derivative 1 in ``a`` and ``-floor(a / b)`` in ``b``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay.errors import DTypeError
from tensorplay.spec import dtypes as _sd
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor, highest_interpreter

AnyTensor = Tensor[*tuple[Any, ...]]


def _kind(value: Any, where: str) -> str:
    if isinstance(value, Tensor):
        return value.dtype.name
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, SymDim):  # a symbolic size (x // x.shape[0] under a dynamic dim) is an int
        return "weak_int"
    if isinstance(value, (bool, int, float)):
        return _sd.weak_kind(value)
    raise DTypeError(f"{where}: expected tensors or Python numbers, got {type(value).__name__}")


def _prepare(a: Any, b: Any, where: str) -> tuple[Any, Any, Any, str]:
    """The interpreter, both operands (tensors cast to the result dtype, numbers as Python numbers) and the
    result dtype."""
    dtype = _sd.result_type([_kind(a, where), _kind(b, where)])
    if dtype == "bool":
        raise DTypeError(f"{where}: bool operands are not supported (convert them with .long() first)")
    tensors = [v for v in (a, b) if isinstance(v, Tensor)]
    if not tensors:
        raise DTypeError(f"{where}: expected at least one tensor, got {type(a).__name__} and {type(b).__name__}")
    ops = highest_interpreter(tensors, tensors[0]._ops)

    def cast(v: Any) -> Any:
        if isinstance(v, Tensor):
            return v if v.dtype.name == dtype else ops.cast(v, dtype=dtype)
        if isinstance(v, SymDim):  # kept symbolic: a 0-d tensor of the size
            return ops.add(ops.full(shape=(), value=0, dtype=dtype), v)
        v = v.item() if isinstance(v, np.generic) else v
        # a number takes the result dtype first, as in PyTorch (0.1 against float32 is float32's 0.1)
        return float(np.float32(v)) if dtype == "float32" else float(v) if _sd.is_float(dtype) else int(v)
    return ops, cast(a), cast(b), dtype


def _wide(ops: Any, v: Any) -> Any:
    return ops.cast(v, dtype="float64") if isinstance(v, Tensor) else float(v)


def _floor_quotient(ops: Any, x: Any, y: Any, dtype: str) -> Any:
    return ops.cast(ops.floor(ops.div(_wide(ops, x), _wide(ops, y))), dtype=dtype)


def _check_divisor(ops: Any, y: Any, dtype: str, where: str) -> Any:
    """``y`` after checking that no integer divisor is zero (see the module docstring)."""
    what = f"{where}: integer division by zero"
    if not isinstance(y, Tensor):
        if y == 0:
            raise ZeroDivisionError(what)
        return y
    if isinstance(y._data, np.ndarray):  # a concrete (eager) divisor
        zeros = np.argwhere(np.asarray(y._data) == 0)
        if len(zeros):
            raise ZeroDivisionError(f"{what} (the divisor is 0 at index {tuple(int(i) for i in zeros[0])})")
        return y
    flag = ops.cast(ops.eq(y, 0), dtype=dtype)  # 1 where the divisor is zero: refused when the program runs
    # the message reads "<where>: integer division by zero (divisor == 0), zero flag 1 at position [i] ..."
    checked = ops.check_index(flag, bound=1, what=f"{what} (divisor == 0), zero flag")
    return ops.add(y, checked)


def _int_quotient(ops: Any, x: Any, y: Any, dtype: str) -> Any:
    q = _floor_quotient(ops, x, y, dtype)
    if dtype == "int32":  # float64 holds every int32 quotient exactly
        return q
    # int64: the float64 quotient can be off for large values; correct it with the exact remainder
    q = ops.add(q, _floor_quotient(ops, ops.sub(x, ops.mul(q, y)), y, dtype))
    r = ops.sub(x, ops.mul(q, y))
    y_neg = ops.lt(y, 0) if isinstance(y, Tensor) else y < 0
    r_neg = ops.lt(r, 0)
    # the remainder must be 0 or have the divisor's sign, and be smaller than it
    wrong_sign = ops.logical_and(ops.ne(r, 0), ops.ne(r_neg, y_neg) if isinstance(y_neg, Tensor)
                                 else (r_neg if not y_neg else ops.logical_not(r_neg)))
    too_big = ops.ge(ops.abs(r), ops.abs(y) if isinstance(y, Tensor) else abs(y))
    too_big = ops.logical_and(too_big, ops.logical_not(wrong_sign))
    q = ops.sub(q, ops.cast(wrong_sign, dtype=dtype))
    return ops.add(q, ops.cast(too_big, dtype=dtype))


def _split(ops: Any, v: Any) -> tuple[Any, Any]:
    """Dekker's split of float64 ``v`` into a high and a low half of 26 bits each (``hi + lo == v``)."""
    if not isinstance(v, Tensor):
        c = 134217729.0 * v
        hi = c - (c - v)
        return hi, v - hi
    c = ops.mul(v, 134217729.0)
    hi = ops.sub(c, ops.sub(c, v))
    return hi, ops.sub(v, hi)


def _float64_floor(ops: Any, x: Any, y: Any) -> tuple[Any, Any]:
    """The floor quotient and the remainder of float64 ``x`` and ``y``, exact as PyTorch's fmod-based ones:
    ``floor(x / y)`` can round onto the next integer, so the remainder ``x - q * y`` is computed exactly
    (Dekker's product error) and, where it has the wrong sign, ``q`` is one less and the remainder gains ``y``."""
    q = ops.floor(ops.div(x, y))
    p = ops.mul(q, y)  # (a nan remainder where the division is not ordinary: see _float_special)
    qh, ql = _split(ops, q)
    yh, yl = _split(ops, y)
    # the rounding error of p = q * y (p + e == q * y exactly)
    e = ops.add(ops.add(ops.add(ops.sub(ops.mul(qh, yh), p), ops.mul(qh, yl)), ops.mul(ql, yh)), ops.mul(ql, yl))
    r = ops.sub(ops.sub(x, p), e)
    y_neg = ops.lt(y, 0.0) if isinstance(y, Tensor) else y < 0
    r_neg = ops.lt(r, 0.0)
    sign_differs = ops.ne(r_neg, y_neg) if isinstance(y_neg, Tensor) else (r_neg if not y_neg else ops.logical_not(r_neg))
    finite = ops.eq(ops.sub(r, r), 0.0)  # no correction where inf or nan took part
    wrong = ops.logical_and(ops.logical_and(ops.ne(r, 0.0), sign_differs), finite)
    q = ops.sub(q, ops.cast(wrong, dtype="float64"))
    r = ops.where(wrong, ops.add(r, y), r)
    return q, r


def _float_special(ops: Any, x: Any, y: Any, q: Any, r: Any) -> tuple[Any, Any]:
    """PyTorch's values where the division is not ordinary: a zero divisor gives ``x / y`` (inf or nan) and a
    nan remainder; an infinite or nan dividend gives nan for both; a finite dividend over an infinite divisor
    gives Python's ``//`` and ``%`` (see :func:`_infinite_divisor`)."""
    nan = ops.mul(ops.sub(r, r), 0.0)  # 0 where the remainder is finite, nan elsewhere
    bad = ops.ne(nan, 0.0)
    q, r = ops.where(bad, nan, q), ops.where(bad, nan, r)
    q, r = _infinite_divisor(ops, x, y, q, r)
    if isinstance(y, Tensor):
        zero = ops.eq(y, 0.0)
        return ops.where(zero, ops.div(x, y), q), r
    return (ops.div(x, y), r) if y == 0 else (q, r)


def _infinite_divisor(ops: Any, x: Any, y: Any, q: Any, r: Any) -> tuple[Any, Any]:
    """``q`` and ``r`` with Python's (and PyTorch's) values where ``x`` is finite and ``y`` infinite: ``x // y`` is
    ``-1`` and ``x % y`` is ``y`` when ``x`` is non-zero with the other sign (``-1 // inf == -1``, ``-1 % inf ==
    inf``), else ``x / y`` (a signed zero) and ``x`` (``1 // inf == 0``, ``1 % inf == 1``). Nothing is recorded
    for a finite number ``y``."""
    if not isinstance(y, Tensor) and not np.isinf(y):
        return q, r
    y_infinite = ops.eq(ops.abs(y), np.inf) if isinstance(y, Tensor) else True
    x_finite = ops.eq(ops.sub(x, x), 0.0) if isinstance(x, Tensor) else bool(np.isfinite(x))
    if x_finite is False:
        return q, r
    x_neg = ops.lt(x, 0.0) if isinstance(x, Tensor) else x < 0
    x_nonzero = ops.ne(x, 0.0) if isinstance(x, Tensor) else x != 0
    y_neg = ops.lt(y, 0.0) if isinstance(y, Tensor) else y < 0
    signs_differ = _logical(ops, "ne", x_neg, y_neg)
    opposite = _logical(ops, "logical_and", x_nonzero, signs_differ)
    take = _logical(ops, "logical_and", y_infinite, x_finite)
    if not isinstance(take, Tensor):  # a number dividend and divisor cannot reach here (one is a tensor)
        take = ops.full(shape=(), value=bool(take), dtype="bool")
    if not isinstance(opposite, Tensor):
        opposite = ops.full(shape=(), value=bool(opposite), dtype="bool")
    q_inf = ops.where(opposite, -1.0, ops.div(x, y))
    r_inf = ops.where(opposite, y, x)
    return ops.where(take, q_inf, q), ops.where(take, r_inf, r)


def _logical(ops: Any, name: str, a: Any, b: Any) -> Any:
    """``ops.<name>(a, b)`` of bool tensors or Python bools (``ne`` or ``logical_and``); Python for two bools."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        return (a != b) if name == "ne" else (a and b)
    if not isinstance(a, Tensor):
        a, b = b, a
    if not isinstance(b, Tensor):
        if name == "ne":
            return ops.logical_not(a) if b else a
        return a if b else ops.full(shape=tuple(a.shape), value=False, dtype="bool")
    return getattr(ops, name)(a, b)


def floor_divide(input: Any, other: Any) -> AnyTensor:  # noqa: A002 - PyTorch's name
    """``input // other`` rounded toward -inf, elementwise with broadcasting (see the module docstring for
    dtypes, exactness and division by zero)."""
    ops, x, y, dtype = _prepare(input, other, "floor_divide")
    if _sd.is_int(dtype):
        y = _check_divisor(ops, y, dtype, "floor_divide")
        return _int_quotient(ops, x, y, dtype)  # type: ignore[no-any-return]
    return _float_division(ops, x, y, dtype)[0]  # type: ignore[no-any-return]


def remainder(input: Any, other: Any) -> AnyTensor:  # noqa: A002 - PyTorch's name
    """``input - other * floor_divide(input, other)``: the remainder with the sign of ``other`` (Python's
    ``%``), elementwise with broadcasting (see the module docstring)."""
    ops, x, y, dtype = _prepare(input, other, "remainder")
    if _sd.is_int(dtype):
        y = _check_divisor(ops, y, dtype, "remainder")
        return ops.sub(x, ops.mul(_int_quotient(ops, x, y, dtype), y))  # type: ignore[no-any-return]
    return _float_division(ops, x, y, dtype)[1]  # type: ignore[no-any-return]


def _float_division(ops: Any, x: Any, y: Any, dtype: str) -> tuple[Any, Any]:
    """The floor quotient and remainder of floats (see the module docstring), in ``dtype``."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # inf and nan are results here
        if dtype == "float64":
            return _float_special(ops, x, y, *_float64_floor(ops, x, y))
        wx, wy = _wide(ops, x), _wide(ops, y)
        q = ops.floor(ops.div(wx, wy))
        q, r = _float_special(ops, wx, wy, q, ops.sub(wx, ops.mul(wy, q)))
        return ops.cast(q, dtype=dtype), ops.cast(r, dtype=dtype)


__all__ = ["floor_divide", "remainder"]
