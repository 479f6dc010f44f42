"""Elementwise functions, logical operators and products of PyTorch's API, written once against
:class:`~tensorplay.ops.Ops` from existing primitives: ``reciprocal``, ``log2``, ``log10``, ``sinh``,
``cosh``, ``logical_xor``, ``trace``, ``dot`` and ``bmm`` (``atan2``, ``logical_and``/``or``/``not``
are primitives). Being compositions, they run under every interpreter and transform, and their
derivatives follow from those of the primitives.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay.errors import DTypeError, ShapeError
from tensorplay.op_args import check_tensor as _check_tensor

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any

_LN2 = math.log(2.0)
_LOG10_E = math.log10(math.e)
"""``log(2)`` and ``log10(e)``, correctly rounded. Of the two float64 spellings, ``log(x) / log(2)`` is exact at
more powers of two (174 of 2**-100 .. 2**99, against 166 for ``log(x) * log2(e)``) and ``log(x) * log10(e)``
at more powers of ten (52 of 1e-30 .. 1e29, against 30 for ``log(x) / log(10)``), and it rounds to
``numpy.log10`` for 75% of values in [1e-3, 1e6] (against 41%); the others are 1 ulp off."""


def reciprocal(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """``1 / x``; integer and bool inputs give float32, as PyTorch."""
    return ops.div(1.0, x)


def log2(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Base-2 logarithm, ``log(x) / log(2)`` (within an ulp or so; integer and bool inputs give float32)."""
    return ops.div(ops.log(x), _LN2)


def log10(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Base-10 logarithm, ``log(x) * log10(e)`` (within an ulp or so; integer and bool inputs give float32)."""
    return ops.mul(ops.log(x), _LOG10_E)


_HALF_E = math.e / 2


def _half_exp(ops: Interpreter, v: AnyTensor) -> AnyTensor:
    """``exp(v) / 2`` as ``exp(v - 1) * (e / 2)``: finite wherever the result is (``exp(v)`` itself overflows
    first: float32 ``exp(89)``, while ``cosh(89)`` is 2.2e38), and so is its derivative, computed through the
    same two factors (``v - 1`` is exact for ``v >= 0.5``)."""
    return ops.mul(ops.exp(ops.sub(v, 1.0)), _HALF_E)


def sinh(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Hyperbolic sine (integer inputs give float32): ``(expm1(x) - expm1(-x)) / 2`` for ``|x| < 1``
    (accurate near 0), else ``exp(x) / 2 - exp(-x) / 2`` by :func:`_half_exp`, so it is finite up to the
    dtype's largest ``sinh`` (float32 ``sinh(89)`` = 2.2e38). The small branch sees 0 where it is not taken,
    so neither branch's derivative is infinite where the other is chosen."""
    small = ops.lt(ops.abs(x), 1.0)
    near = ops.where(small, x, 0.0)
    near_value = ops.mul(ops.sub(ops.expm1(near), ops.expm1(ops.neg(near))), 0.5)
    far_value = ops.sub(_half_exp(ops, x), _half_exp(ops, ops.neg(x)))
    return ops.where(small, near_value, far_value)


def cosh(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """Hyperbolic cosine, ``exp(x) / 2 + exp(-x) / 2`` by :func:`_half_exp` (finite up to the dtype's largest
    ``cosh``: float32 ``cosh(89)`` = 2.2e38, and so are its derivatives; integer inputs give float32)."""
    return ops.add(_half_exp(ops, x), _half_exp(ops, ops.neg(x)))


def logical_xor(ops: Interpreter, x: Any, y: Any) -> AnyTensor:
    """True where exactly one of ``x`` and ``y`` is non-zero (numpy broadcasting); a bool result."""
    return ops.logical_and(ops.logical_or(x, y), ops.logical_not(ops.logical_and(x, y)))


def _same_dtype(a: AnyTensor, b: AnyTensor, where: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(f"{where}: expected both operands to have the same dtype, got {a.dtype}{list(a.shape)} "
                         f"and {b.dtype}{list(b.shape)}")


def trace(ops: Interpreter, x: AnyTensor) -> AnyTensor:
    """The sum of the main diagonal of a matrix ``[m, n]``, a 0-d tensor (integers and bool sum to
    int64, as PyTorch)."""
    from tensorplay import shape_ops
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a 2-d tensor, got shape {list(x.shape)}")
    return shape_ops.diagonal(ops, x, 0, 0, 1).sum()


def dot(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """``a[n] . b[n]``: a 0-d tensor; both 1-d of one length and one dtype, as ``torch.dot``."""
    _check_tensor(b, "dot", "other")
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"dot: expected two 1-d tensors, got shapes {list(a.shape)} and {list(b.shape)}")
    if not _d.same_sizes(a.shape, b.shape) and all(isinstance(n, int) for n in (a.shape[0], b.shape[0])):
        raise ShapeError(f"dot: the vectors must have the same length, got shapes {list(a.shape)} and "
                         f"{list(b.shape)}")
    _same_dtype(a, b, "dot")
    return _d.matmul(ops, a, b)


def bmm(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """``a[B, n, k] @ b[B, k, m] -> [B, n, m]``: batched matrix products, no broadcasting, one dtype, as
    ``torch.bmm``."""
    _check_tensor(b, "bmm", "mat2")
    if a.ndim != 3 or b.ndim != 3:
        raise ShapeError(f"bmm: expected two 3-d tensors, got shapes {list(a.shape)} and {list(b.shape)}")
    for what, m, n in (("batch sizes", a.shape[0], b.shape[0]), ("inner sizes", a.shape[2], b.shape[1])):
        if isinstance(m, int) and isinstance(n, int) and m != n:
            raise ShapeError(f"bmm: the {what} differ ({m} and {n}): shapes {list(a.shape)} and {list(b.shape)}")
    _same_dtype(a, b, "bmm")
    return ops.matmul(a, b)


__all__ = ["bmm", "cosh", "dot", "log10", "log2", "logical_xor", "reciprocal", "sinh", "trace"]
