"""``F.embedding_bag`` and ``nn.EmbeddingBag``: sums, means or maxima of bags of embedding rows.

Bags are given either as the rows of a 2-d ``input[B, N]`` (``B`` bags of ``N`` indices each, ``offsets``
``None``) or as a 1-d ``input[n]`` cut by ``offsets[B]`` (bag ``b`` is ``input[offsets[b]:offsets[b+1]]``,
the last bag runs to the end; with ``include_last_offset`` the offsets have ``B + 1`` entries and the last
one is where the last bag ends, indices after it being ignored). The result is ``[B, embedding_dim]`` in
the weight's dtype.

Everything is composed from primitives (``gather``, ``scatter_add``, ``cumsum``, ``where``, reductions),
so eager code, graphs, ``tp.compile``, the transforms and export need nothing new. The segment of each
index of a 1-d input is the running count of offsets at or before its position (a ``scatter_add`` of ones
at the offsets followed by a ``cumsum``): the offsets' *values* are data, never read into the graph, so a
symbolic trace (export, ``tp.graph.trace``) records the same computation and works as eagerly. The
offsets are checked where the computation runs: eagerly at the call, under any other interpreter by
recorded ``check_index`` nodes (the offsets are rebuilt from their checked first entry and checked
differences, so the checks cannot be dropped) raising :class:`~tensorplay.errors.IndexRangeError` when the
graph runs. ``mode="max"`` with offsets compares every index with every bag (``[B, n, dim]`` values).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from tensorplay.errors import ArgumentError, DTypeError, IndexRangeError, ShapeError
from tensorplay.nn import init
from tensorplay.nn._util import check_padding_idx, is_eager, layer_size, ops_for, shape_of
from tensorplay.nn.linear import empty_parameter
from tensorplay.nn.module import Module
from tensorplay.nn.parameter import Parameter
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Num = TypeVar("Num", bound=int)
Dim = TypeVar("Dim", bound=int)

_MODES = ("sum", "mean", "max")
_WHERE = "embedding_bag"


def _check_arguments(input: AnyTensor, weight: AnyTensor, offsets: AnyTensor | None, mode: str,
                     per_sample_weights: AnyTensor | None, max_norm: Any, scale_grad_by_freq: bool) -> None:
    if mode not in _MODES:
        raise ArgumentError(f"{_WHERE}: mode must be one of 'sum', 'mean' or 'max', got {mode!r}")
    if max_norm is not None or scale_grad_by_freq:
        raise ArgumentError(f"{_WHERE}: max_norm and scale_grad_by_freq are not supported (as in F.embedding), got "
                            f"max_norm={max_norm!r}, scale_grad_by_freq={scale_grad_by_freq!r}")
    if weight.ndim != 2:
        raise ShapeError(f"{_WHERE}: weight must be [num_embeddings, embedding_dim], got shape {list(weight.shape)}")
    if not weight.dtype.is_floating_point:
        raise DTypeError(f"{_WHERE}: weight must be a float tensor, got {weight.dtype.name}")
    if input.ndim == 2 and offsets is not None:
        raise ArgumentError(f"{_WHERE}: offsets must be None for a 2-d input (each row is one bag), got offsets of "
                            f"shape {list(offsets.shape)} for input of shape {list(input.shape)}")
    if input.ndim == 1 and (offsets is None or offsets.ndim != 1):
        got = "None" if offsets is None else f"shape {list(offsets.shape)}"
        raise ArgumentError(f"{_WHERE}: a 1-d input needs 1-d offsets (where each bag starts), got {got}")
    if input.ndim not in (1, 2):
        raise ShapeError(f"{_WHERE}: input must be 1-d (with offsets) or 2-d [bags, indices], got shape "
                         f"{list(input.shape)}")
    if offsets is not None and offsets.dtype.name not in ("int64", "int32"):
        raise DTypeError(f"{_WHERE}: offsets must be an integer tensor (int64 or int32), got {offsets.dtype.name}")
    if per_sample_weights is None:
        return
    if mode != "sum":
        raise ArgumentError(f"{_WHERE}: per_sample_weights is only supported for mode='sum', got mode={mode!r}")
    if tuple(per_sample_weights.shape) != tuple(input.shape):
        raise ShapeError(f"{_WHERE}: per_sample_weights must have the input's shape {list(input.shape)}, got "
                         f"{list(per_sample_weights.shape)}")
    if per_sample_weights.dtype != weight.dtype:
        raise DTypeError(f"{_WHERE}: per_sample_weights must have the weight's dtype {weight.dtype.name}, got "
                         f"{per_sample_weights.dtype.name}")


def _part(ops: Any, x: AnyTensor, start: int, stop: int) -> AnyTensor:
    """``x[start:stop]`` of a 1-d ``x``."""
    return ops.slice(x, starts=(start,), stops=(stop,), steps=(1,))  # type: ignore[no-any-return]


def _checked_offsets(ops: Any, offsets: AnyTensor, n: Any) -> AnyTensor:
    """``offsets`` checked to start at 0, never decrease and end at most at ``n`` (the input's length)."""
    count = int(offsets.shape[0])
    if count == 0:
        raise ShapeError(f"{_WHERE}: offsets must have at least one entry (where the first bag starts), got shape [0]")
    if is_eager(ops) and is_eager(offsets._ops):
        data = np.asarray(offsets._data)
        if data[0] != 0:
            raise IndexRangeError(f"{_WHERE}: offsets[0] must be 0 (the first bag starts at the input's start), got "
                                  f"{int(data[0])}")
        steps = np.diff(data)
        if steps.size and steps.min() < 0:
            i = int(np.argmax(steps < 0))
            raise IndexRangeError(f"{_WHERE}: offsets must be non-decreasing, got offsets[{i}] = {int(data[i])} > "
                                  f"offsets[{i + 1}] = {int(data[i + 1])}")
        if data[-1] > n:
            raise IndexRangeError(f"{_WHERE}: offsets must be at most the input's length {n}, got offsets[-1] = "
                                  f"{int(data[-1])}")
        return offsets
    first = ops.check_index(_part(ops, offsets, 0, 1), bound=1, what=f"{_WHERE}: offsets[0] (must be 0)")
    if count == 1:
        return first  # type: ignore[no-any-return]
    steps = ops.sub(_part(ops, offsets, 1, count), _part(ops, offsets, 0, count - 1))
    steps = ops.check_index(steps, bound=n + 1, what=f"{_WHERE}: offsets[i + 1] - offsets[i] (offsets must be "
                                                     f"non-decreasing and at most the input's length {n})")
    rebuilt = ops.concat(first, ops.add(first, ops.cumsum(steps, axis=0)), axis=0)
    return ops.check_index(rebuilt, bound=n + 1,  # type: ignore[no-any-return]
                           what=f"{_WHERE}: offsets (must be at most the input's length {n})")


def _segments(ops: Any, offsets: AnyTensor, n: Any) -> AnyTensor:
    """The bag of each of the ``n`` indices: the number of offsets at or before its position, minus one."""
    int_offsets = ops.cast(offsets, dtype="int64")
    marks = ops.scatter_add(ops.full(shape=(n + 1,), value=0, dtype="int64"), int_offsets,
                            ops.full(shape=tuple(offsets.shape), value=1, dtype="int64"), axis=0)
    return ops.sub(ops.cumsum(_part(ops, marks, 0, n), axis=0), 1)  # type: ignore[no-any-return]


def _masked_max(ops: Any, values: AnyTensor, members: AnyTensor, count: AnyTensor, axis: int) -> AnyTensor:
    """The maximum of ``values`` over ``axis`` among the ``members`` (bool, broadcast), 0 where a bag is empty.
    The first maximal member is selected (an ``argmax``), so its gradient goes there alone, as PyTorch's."""
    expanded = ops.reshape(members, shape=shape_of(members) + (1,))
    masked = ops.where(expanded, values, float("-inf"))
    first = ops.argmax(masked, axis=axis, keepdims=True)
    size = shape_of(masked)[axis]
    positions = ops.reshape(ops.iota(length=size, dtype="int64"),
                            shape=tuple(size if i == axis else 1 for i in range(masked.ndim)))
    best = ops.reduce_sum(ops.where(ops.eq(positions, first), masked, 0.0), axes=(axis,))
    present = ops.reshape(ops.gt(count, 0), shape=shape_of(count) + (1,))
    return ops.where(present, best, 0.0)  # type: ignore[no-any-return]


def embedding_bag(input: AnyTensor, weight: AnyTensor, offsets: AnyTensor | None = None,
                  max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False, per_sample_weights: AnyTensor | None = None,
                  include_last_offset: bool = False, padding_idx: int | None = None) -> AnyTensor:
    """Bags of rows of ``weight[num, dim]`` reduced to ``[B, dim]``, as ``torch.nn.functional.embedding_bag``.

    ``input`` is ``[B, N]`` (``offsets`` None) or ``[n]`` with ``offsets[B]`` (``[B + 1]`` with
    ``include_last_offset``): see the module docstring. ``mode`` ``"sum"``, ``"mean"`` (the default) or
    ``"max"`` (per column; the gradient goes to the first maximal entry of the bag). ``per_sample_weights`` (the input's shape, ``mode="sum"`` only) scales each row before the
    sum. Indices equal to ``padding_idx`` are left out of their bag (and of a mean's count); an empty bag
    gives zeros. ``sparse`` is accepted and ignored (gradients are dense); ``max_norm`` and
    ``scale_grad_by_freq`` are not supported (an :class:`ArgumentError`). Bad offsets (not starting at 0,
    decreasing, past the input's end) are an :class:`IndexRangeError`, an index outside ``[0, num)`` too.
    Under a symbolic trace nothing is read from the data: it records the same computation.
    """
    from tensorplay.nn import functional as F  # functional imports this module at its end

    ops = ops_for(_WHERE, input, weight, offsets, per_sample_weights)
    _check_arguments(input, weight, offsets, mode, per_sample_weights, max_norm, scale_grad_by_freq)
    num, dim = shape_of(weight)
    pad = None if padding_idx is None else check_padding_idx(padding_idx, num, _WHERE)
    ids, _ = F._checked_indices(ops, input, num, _WHERE, "index")
    rows = ops.gather(weight, ids, axis=0)
    keep = None if pad is None else ops.ne(ids, pad)
    if per_sample_weights is not None:
        rows = ops.mul(rows, ops.reshape(per_sample_weights, shape=shape_of(per_sample_weights) + (1,)))
    if keep is not None:
        rows = ops.where(ops.reshape(keep, shape=shape_of(keep) + (1,)), rows, 0.0)
    ones = ops.full(shape=shape_of(input), value=1.0, dtype=weight.dtype.name)
    members = ones if keep is None else ops.cast(keep, dtype=weight.dtype.name)
    if input.ndim == 2:
        total = ops.reduce_sum(rows, axes=(1,))
        count = ops.reduce_sum(members, axes=(1,))
        if mode == "max" and input.shape[1] != 0:
            present = ops.full(shape=shape_of(input), value=True, dtype="bool") if keep is None else keep
            return _masked_max(ops, rows, present, count, 1)
    else:
        assert offsets is not None
        n = shape_of(input)[0]
        bags = int(offsets.shape[0])
        segment = _segments(ops, _checked_offsets(ops, offsets, n), n)
        total = ops.scatter_add(ops.full(shape=(bags, dim), value=0.0, dtype=weight.dtype.name), segment, rows,
                                axis=0)
        count = ops.scatter_add(ops.full(shape=(bags,), value=0.0, dtype=weight.dtype.name), segment, members,
                                axis=0)
        if mode == "max" and n != 0:
            hit = ops.eq(ops.reshape(segment, shape=(1, n)),
                         ops.reshape(ops.iota(length=bags, dtype="int64"), shape=(bags, 1)))
            if keep is not None:
                hit = ops.logical_and(hit, ops.reshape(keep, shape=(1, n)))
            total = _masked_max(ops, ops.reshape(rows, shape=(1, n, dim)), hit, count, 1)
        if include_last_offset:
            total, count = ops.slice(total, starts=(0, 0), stops=(bags - 1, dim), steps=(1, 1)), _part(
                ops, count, 0, bags - 1)
        if mode == "max":
            return total  # type: ignore[no-any-return]
    if mode == "mean":
        total = ops.div(total, ops.reshape(ops.maximum(count, 1.0), shape=shape_of(count) + (1,)))
    return total  # type: ignore[no-any-return]


class EmbeddingBag(Module, Generic[Num, Dim]):
    """``weight[Num, Dim]`` rows summed, averaged or maxed per bag, as ``torch.nn.EmbeddingBag``.

    ``forward(input, offsets=None, per_sample_weights=None) -> [B, Dim]`` (see :func:`embedding_bag`).
    Weights start ``N(0, 1)`` (row ``padding_idx`` zero).
    """

    def __init__(self, num_embeddings: Num, embedding_dim: Dim, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: AnyTensor | None = None, include_last_offset: bool = False,
                 padding_idx: int | None = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        where = "EmbeddingBag"
        num = layer_size(num_embeddings, "num_embeddings", where)
        dim = layer_size(embedding_dim, "embedding_dim", where)
        if mode not in _MODES:
            raise ArgumentError(f"{where}: mode must be one of 'sum', 'mean' or 'max', got {mode!r}")
        if max_norm is not None or scale_grad_by_freq:
            raise ArgumentError(f"{where}: max_norm and scale_grad_by_freq are not supported, got max_norm="
                                f"{max_norm!r}, scale_grad_by_freq={scale_grad_by_freq!r}")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = None if padding_idx is None else check_padding_idx(padding_idx, num, where)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset
        if _weight is None:
            self.weight = empty_parameter((num, dim), dtype)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num, dim):
                raise ShapeError(f"{where}: _weight must have shape [{num}, {dim}], got {list(_weight.shape)}")
            self.weight = Parameter(np.array(_weight.numpy()))

    def reset_parameters(self) -> None:
        """``N(0, 1)``; the padding row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    @staticmethod
    def from_pretrained(embeddings: AnyTensor, freeze: bool = True, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag[int, int]:
        """A layer whose weight is a copy of the 2-d ``embeddings`` (not trained when ``freeze``)."""
        if not isinstance(embeddings, Tensor) or embeddings.ndim != 2:
            got = f"shape {list(embeddings.shape)}" if isinstance(embeddings, Tensor) else type(embeddings).__name__
            raise ShapeError(f"EmbeddingBag.from_pretrained: embeddings must be a 2-d tensor, got {got}")
        num, dim = (int(d) for d in embeddings.shape)
        layer: EmbeddingBag[int, int] = EmbeddingBag(num, dim, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                                                     embeddings, include_last_offset, padding_idx)
        layer.weight.requires_grad_(not freeze)
        return layer

    def forward(self, input: AnyTensor, offsets: AnyTensor | None = None,
                per_sample_weights: AnyTensor | None = None) -> Tensor[Any, Dim]:
        """The bags' reductions ``[B, Dim]``."""
        return embedding_bag(input, self.weight, offsets, mode=self.mode, sparse=self.sparse,
                             per_sample_weights=per_sample_weights, include_last_offset=self.include_last_offset,
                             padding_idx=self.padding_idx)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


__all__ = ["EmbeddingBag", "embedding_bag"]
