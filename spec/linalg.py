"""Linear algebra: batched ``matmul``."""

from __future__ import annotations

import numpy as np

from .aval import Aval
from .dtypes import is_float, result_type
from .errors import DTypeError, ShapeError
from .shapes import Array, aval_of, broadcast_shapes, finish, fmt_aval, known


def matmul_rule(a: Aval, b: Aval) -> Aval:
    """``a[*B1, M, K] @ b[*B2, K, N] -> [*broadcast(B1, B2), M, N]``; both ranks >= 2;
    dtypes promote; bool is refused."""
    context = f"a: {fmt_aval(a)}, b: {fmt_aval(b)}"
    for name, x in (("a", a), ("b", b)):
        if len(x.shape) < 2:
            raise ShapeError(f"matmul: {name} must have rank >= 2 ([..., rows, cols]), got rank {len(x.shape)} ({context})")
    k1, k2 = a.shape[-1], b.shape[-2]
    if known(k1, k2) and k1 != k2:
        raise ShapeError(
            f"matmul: inner dimensions differ: a has {k1} columns (axis -1), b has {k2} rows (axis -2) ({context})")
    dtype = result_type([a.dtype, b.dtype])
    if dtype == "bool":
        raise DTypeError(f"matmul: bool operands are not supported ({context})")
    batch = broadcast_shapes("matmul", ("a batch", tuple(a.shape[:-2])), ("b batch", tuple(b.shape[:-2])))
    return Aval(batch + (a.shape[-2], b.shape[-1]), dtype)


def matmul_ref(a: object, b: object) -> Array:
    """Batched matrix product; floats accumulate in float64, ints in int64."""
    out = matmul_rule(aval_of("matmul", "a", a), aval_of("matmul", "b", b))
    acc = np.float64 if is_float(out.dtype) else np.int64
    return finish(np.matmul(np.asarray(a).astype(acc), np.asarray(b).astype(acc)), out)
