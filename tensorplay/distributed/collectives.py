"""Collectives on eager tensors and numpy arrays: ``all_reduce``, ``broadcast``, ``all_gather``, ``barrier``.

Every collective first exchanges a small header (13 int64: the collective, its root or reduction, the dtype,
the rank and the first dims of the shape, a checksum of the whole shape) with one ``Allgather``, so every
rank sees what every other rank passed. A mismatch (another collective, dtype, shape, root or reduction
on some rank) raises the same error on every rank, naming each rank's value, before any data moves: never
a hang in a mismatched transfer, never a buffer reduced with one of another size. Data then moves in place
from the arrays' own memory (no copy for a C-contiguous array).
"""

from __future__ import annotations

import zlib
from typing import Any, TypeVar

import numpy as np

from tensorplay.distributed.world import world
from tensorplay.spec.errors import DTypeError, ShapeError
from tensorplay.tensor import Tensor

Array = np.ndarray[Any, Any]
T = TypeVar("T")

_OPS = ("all_reduce", "broadcast", "all_gather", "barrier", "bucket")
_REDUCTIONS = ("sum", "mean", "max", "min")
_DTYPES = tuple(np.dtype(n) for n in ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
                                      "float64", "complex64", "complex128"))
_REDUCIBLE = frozenset(np.dtype(n) for n in ("int8", "uint8", "int16", "int32", "int64", "float32", "float64"))
_SHOWN_DIMS = 8
HEADER = 5 + _SHOWN_DIMS
"""Length of the int64 header each collective exchanges."""


def _dtype_code(dtype: np.dtype[Any], where: str) -> int:
    for i, known in enumerate(_DTYPES):
        if dtype == known:
            return i
    raise DTypeError(f"{where}: dtype {dtype} is not supported; expected one of "
                     f"{', '.join(str(d) for d in _DTYPES)}")


def header(op: str, extra: int, dtype: np.dtype[Any] | None, shape: tuple[int, ...], where: str) -> Array:
    """The header of one collective call (see the module docstring)."""
    h = np.full(HEADER, -1, dtype=np.int64)
    h[0] = _OPS.index(op)
    h[1] = extra
    h[2] = -1 if dtype is None else _dtype_code(dtype, where)
    h[3] = len(shape)
    h[4] = zlib.crc32(np.asarray(shape, dtype=np.int64).tobytes())
    shown = shape[:_SHOWN_DIMS]
    h[5:5 + len(shown)] = shown
    return h


def _shape_text(row: Array) -> str:
    ndim = int(row[3])
    dims = [str(int(d)) for d in row[5:5 + min(ndim, _SHOWN_DIMS)]]
    return "[" + ", ".join(dims) + (", ..." if ndim > _SHOWN_DIMS else "") + "]"


def _by_rank(rows: Array, render: Any) -> str:
    return "; ".join(f"rank {r}: {render(row)}" for r, row in enumerate(rows))


def check_headers(mine: Array, where: str, extra_name: str = "") -> None:
    """Exchange ``mine`` with every rank; raise on every rank if they differ (see the module docstring)."""
    w = world()
    if w.size == 1:
        return
    rows = np.empty((w.size, HEADER), dtype=np.int64)
    w.comm.Allgather(mine, rows)
    if (rows == rows[0]).all():
        return
    if (rows[:, 0] != rows[0, 0]).any():
        raise ShapeError("tensorplay.distributed: the ranks called different collectives at the same point "
                         f"({_by_rank(rows, lambda row: _OPS[int(row[0])])}); every rank must call the same "
                         "collectives in the same order")
    if (rows[:, 1] != rows[0, 1]).any():
        name = extra_name or "argument"
        render = (lambda row: _REDUCTIONS[int(row[1])]) if extra_name == "op" else (lambda row: int(row[1]))
        raise ShapeError(f"{where}: the ranks passed different {name} values ({_by_rank(rows, render)}); "
                         "every rank must pass the same")
    if (rows[:, 2] != rows[0, 2]).any():
        raise DTypeError(f"{where}: the ranks passed different dtypes "
                         f"({_by_rank(rows, lambda row: str(_DTYPES[int(row[2])]))}); every rank must pass "
                         "the same dtype")
    raise ShapeError(f"{where}: the ranks passed different shapes ({_by_rank(rows, _shape_text)}); every rank "
                     "must pass the same shape")


def _array_of(x: Any, where: str, writes: bool) -> Array:
    """The numpy array behind ``x`` (an eager tensor or a numpy array), checked for an in-place collective."""
    if isinstance(x, Tensor):
        data = x._data
        if type(data) is not np.ndarray:
            raise TypeError(f"{where}: expected an eager tensor or a numpy array, got a tensor of "
                            f"{type(x._ops).__name__} (a graph recording, tp.compile's capture or a transform); "
                            "call collectives outside compiled or traced functions")
        if writes:
            from tensorplay.interpreters.eager import tape
            if x._requires_grad and tape.grad_enabled():
                raise TypeError(f"{where}: the tensor requires grad and would be modified in place, which "
                                "autograd cannot follow; pass x.detach() or call it under tp.no_grad()")
        return data
    if isinstance(x, np.ndarray):
        if writes and not x.flags.writeable:
            raise ValueError(f"{where}: the numpy array is read-only and the collective writes into it in "
                             "place; pass a writeable array (e.g. a copy)")
        return x
    raise TypeError(f"{where}: expected an eager tensor (tp.Tensor) or a numpy array, got {type(x).__name__}")


def _written(x: Any) -> None:
    if isinstance(x, Tensor):
        from tensorplay.nn.module import bump_version
        bump_version(x)


def _contiguous_in(data: Array) -> Array:
    return data if data.flags.c_contiguous else np.ascontiguousarray(data)


def _mpi_op(op: str) -> Any:
    from mpi4py import MPI
    return {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]


def all_reduce(x: T, op: str = "sum") -> T:
    """Reduce ``x`` over every rank, in place, and return it: afterwards each rank holds the elementwise
    ``op`` ("sum", "mean", "max" or "min") of every rank's ``x``.

    ``x``: an eager tensor or a numpy array of the same shape and dtype on every rank (else an error on
    every rank); integer and float dtypes (``mean`` only for floats: it divides the sum by
    :func:`~tensorplay.distributed.world_size`). A tensor that requires grad must be detached or the call
    made under ``tp.no_grad()`` (the write is not differentiable). Every rank gets the same bits.
    """
    where = "distributed.all_reduce"
    if op not in _REDUCTIONS:
        raise ValueError(f"{where}: op must be one of {', '.join(map(repr, _REDUCTIONS))}, got {op!r}")
    data = _array_of(x, where, writes=True)
    if data.dtype not in _REDUCIBLE:
        raise DTypeError(f"{where}: cannot reduce dtype {data.dtype}; expected one of "
                         f"{', '.join(sorted(str(d) for d in _REDUCIBLE))}")
    if op == "mean" and data.dtype.kind != "f":
        raise DTypeError(f"{where}: op='mean' needs a float tensor, got {data.dtype} (use op='sum')")
    check_headers(header("all_reduce", _REDUCTIONS.index(op), data.dtype, data.shape, where), where, "op")
    w = world()
    if w.size == 1 or data.size == 0:
        return x
    from mpi4py import MPI
    buf = _contiguous_in(data)
    w.comm.Allreduce(MPI.IN_PLACE, buf, op=_mpi_op(op))
    if op == "mean":
        np.divide(buf, w.size, out=buf)
    if buf is not data:
        data[...] = buf
    _written(x)
    return x


def broadcast(x: T, src: int = 0) -> T:
    """Overwrite ``x`` on every rank with rank ``src``'s ``x``, in place, and return it.

    ``x``: an eager tensor or a numpy array of the same shape and dtype on every rank (any dtype).
    """
    where = "distributed.broadcast"
    w = world()
    if isinstance(src, bool) or not isinstance(src, (int, np.integer)) or not 0 <= int(src) < w.size:
        raise ValueError(f"{where}: src must be a rank in [0, {w.size}), got {src!r}")
    data = _array_of(x, where, writes=True)
    check_headers(header("broadcast", int(src), data.dtype, data.shape, where), where, "src")
    if w.size == 1 or data.size == 0:
        return x
    buf = _contiguous_in(data)
    w.comm.Bcast(_bytes(buf), root=int(src))
    if buf is not data:
        data[...] = buf
    _written(x)
    return x


def all_gather(x: T) -> T:
    """Every rank's ``x`` stacked along a new leading axis: shape ``[world_size, *x.shape]``, same dtype,
    the same kind as ``x`` (a new eager tensor that does not require grad, or a new numpy array).

    ``x`` must have the same shape and dtype on every rank; ``x`` itself is not modified.
    """
    where = "distributed.all_gather"
    data = _array_of(x, where, writes=False)
    check_headers(header("all_gather", 0, data.dtype, data.shape, where), where)
    w = world()
    out = np.empty((w.size, *data.shape), dtype=data.dtype)
    if w.size == 1:
        out[0] = data
    elif data.size:
        w.comm.Allgather(_bytes(_contiguous_in(data)), _bytes(out))
    if isinstance(x, Tensor):
        from tensorplay.interpreters.eager.interpreter import eager
        result: Any = Tensor(eager, out)
        return result  # type: ignore[no-any-return]
    return out  # type: ignore[return-value]


def barrier() -> None:
    """Wait until every rank has reached this call (also checks that every rank called ``barrier`` here)."""
    where = "distributed.barrier"
    check_headers(header("barrier", 0, None, (), where), where)
    w = world()
    if w.size > 1:
        w.comm.Barrier()


def _bytes(buf: Array) -> Any:
    """``buf``'s memory as an MPI byte buffer (moves any dtype, bool and float16 included)."""
    from mpi4py import MPI
    return [buf.reshape(-1).view(np.uint8), MPI.BYTE]


__all__ = ["all_gather", "all_reduce", "barrier", "broadcast", "check_headers", "header"]
