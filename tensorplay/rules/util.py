"""Helpers shared by the differentiation rules, built only from :class:`~tensorplay.ops.Ops` primitives.

Nothing here touches numpy or an interpreter: every helper works on whatever
tensors ``ops`` produces (eager arrays, graph values), so rules that use them
compose under every transform.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensorplay.tensor import Tensor

if TYPE_CHECKING:
    from tensorplay.ops import Ops

AnyTensor = Any
"""A :class:`~tensorplay.tensor.Tensor` of any shape (kept loose: rules are shape-generic)."""

FLOAT_DTYPES = ("float32", "float64")
_LOWEST = {"float32": -3.4028234663852886e38, "float64": -1.7976931348623157e308}


_NEEDED = threading.local()


def set_needed_inputs(mask: tuple[bool, ...] | None) -> None:
    """Tell the rules which inputs of the node being differentiated want a cotangent (the eager tape
    sets it around each rule call; ``None``, the default, means every input)."""
    _NEEDED.mask = mask


def input_needed(index: int) -> bool:
    """Whether input ``index`` wants a cotangent: rules may skip computing the others (e.g. ``matmul``
    skips ``g b^T`` for a data input that needs no gradient)."""
    mask = getattr(_NEEDED, "mask", None)
    return True if mask is None else mask[index]


def wants_cotangent(x: object, index: int) -> bool:
    """Whether input ``index`` of the node being differentiated, ``x``, gets a cotangent: a float tensor
    that :func:`input_needed` asks for. Rules test this before building a cotangent, so an input that
    needs no gradient (data, a count, a mask's operand) costs no operations."""
    return is_float_tensor(x) and input_needed(index)


def is_tensor(x: object) -> bool:
    """True for a :class:`Tensor` (not a Python scalar, not ``None``)."""
    return isinstance(x, Tensor)


def is_float_tensor(x: object) -> bool:
    """True for a float32/float64 :class:`Tensor`: the only inputs that receive a cotangent."""
    return isinstance(x, Tensor) and dtype_name(x) in FLOAT_DTYPES


def shape_of(x: AnyTensor) -> tuple[Any, ...]:
    """``x.shape`` as a plain tuple (read from the payload: rules ask for shapes at every step)."""
    shape = x._data.shape if isinstance(x, Tensor) else x.shape
    return shape if type(shape) is tuple else tuple(shape)


_NAMES: dict[Any, str] = {}
"""The payloads' dtypes (numpy dtypes) -> their names: rules ask for dtype names at every step."""


def dtype_name(x: AnyTensor) -> str:
    """The dtype name of a tensor (``"float32"``, ...)."""
    payload = x._data.dtype if isinstance(x, Tensor) else None
    name = _NAMES.get(payload)
    if name is None:
        name = str(x.dtype.name)
        if payload is not None:
            _NAMES[payload] = name
    return name


def lowest(dtype: str) -> float:
    """The most negative finite value of a float dtype (a finite stand-in for ``-inf``)."""
    return _LOWEST[dtype]


def zeros(ops: Ops, shape: Sequence[Any], dtype: str) -> AnyTensor:
    """A tensor of zeros (the ``full`` primitive)."""
    return ops.full(shape=tuple(shape), value=0.0, dtype=dtype)


def zeros_like(ops: Ops, x: AnyTensor) -> AnyTensor:
    """Zeros with the shape and dtype of ``x``."""
    return zeros(ops, shape_of(x), dtype_name(x))


def flip(ops: Ops, x: AnyTensor, axis: int) -> AnyTensor:
    """``x`` reversed along ``axis`` (a slice with step -1; symbolic sizes allowed)."""
    shape = shape_of(x)
    ax = int(axis) % len(shape)
    if isinstance(shape[ax], int) and shape[ax] == 0:
        return x
    starts = tuple(d - 1 if i == ax else 0 for i, d in enumerate(shape))
    stops = tuple(-1 if i == ax else d for i, d in enumerate(shape))
    steps = tuple(-1 if i == ax else 1 for i in range(len(shape)))
    return ops.slice(x, starts=starts, stops=stops, steps=steps)


def normalize_axes(axes: Sequence[int], ndim: int) -> tuple[int, ...]:
    """Axes mapped to ``[0, ndim)`` (the primitives' shape rules already validated them)."""
    return tuple(int(a) % ndim if ndim else 0 for a in axes)


def sum_to(ops: Ops, g: AnyTensor, shape: Sequence[Any]) -> AnyTensor:
    """Reduce a cotangent of a broadcast result back to ``shape``: sum the leading axes
    broadcasting added and the size-1 axes it stretched, then restore ``shape``."""
    target = tuple(shape)
    gshape = shape_of(g)
    if gshape == target:
        return g
    lead = len(gshape) - len(target)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, d in enumerate(target) if d == 1 and gshape[i + lead] != 1)
    out = ops.reduce_sum(g, axes=axes, keepdims=False) if axes else g
    if shape_of(out) != target:
        out = ops.reshape(out, shape=target)
    return out


def cotangent_for(ops: Ops, g: AnyTensor | None, x: object) -> AnyTensor | None:
    """The cotangent of input ``x`` from a cotangent ``g`` of a (broadcast, promoted) result:
    ``None`` unless ``x`` is a float tensor; otherwise reduced to ``x``'s shape and cast to its dtype."""
    if g is None or not is_float_tensor(x):
        return None
    out = sum_to(ops, g, shape_of(x))
    if dtype_name(out) != dtype_name(x):
        out = ops.cast(out, dtype=dtype_name(x))
    return out


def squared_norm(ops: Ops, a: Any, b: Any) -> Any:
    """``a^2 + b^2`` for two operands of a binary primitive (tensors or Python scalars, at least one a tensor)."""
    squares: list[Any] = []
    for v in (a, b):
        squares.append(ops.mul(v, v) if is_tensor(v) else float(v) * float(v))
    return ops.add(squares[0], squares[1])


def as_float(ops: Ops, mask: AnyTensor, dtype: str) -> AnyTensor:
    """A bool mask as 0.0/1.0 of ``dtype``."""
    return ops.cast(mask, dtype=dtype)


def swap_last(ops: Ops, x: AnyTensor) -> AnyTensor:
    """``x`` with its last two axes exchanged."""
    n = len(shape_of(x))
    perm = tuple(range(n - 2)) + (n - 1, n - 2)
    return ops.permute(x, perm=perm)


def keepdims_shape(shape: Sequence[Any], axes: Sequence[int]) -> tuple[Any, ...]:
    """``shape`` with each of ``axes`` (normalised) replaced by 1."""
    reduced = set(axes)
    return tuple(1 if i in reduced else d for i, d in enumerate(shape))


def unreduce(ops: Ops, g: AnyTensor, shape: Sequence[Any], axes: Sequence[int], keepdims: bool) -> AnyTensor:
    """Broadcast the cotangent ``g`` of a reduction over ``axes`` back to the input ``shape``."""
    full = tuple(shape)
    ax = normalize_axes(axes, len(full))
    kshape = keepdims_shape(full, ax)
    if not keepdims and shape_of(g) != kshape:
        g = ops.reshape(g, shape=kshape)
    if shape_of(g) != full:
        g = ops.broadcast_to(g, shape=full)
    return g


def prod_others(ops: Ops, x: AnyTensor, axes: Sequence[int]) -> AnyTensor:
    """For each position ``i`` of a float ``x[*S]``, the product over ``axes`` (non-empty) of the other
    elements of its reduction group (shaped ``S``): ``d prod / d x_i``, without dividing by zero.

    With ``p`` the product of the non-zero elements of a group, ``q_i = p / x_i`` (``p`` at a zero) and
    ``k_i`` the number of zeros among the others, the result is ``q_i`` where ``k_i == 0`` and 0 where
    ``k_i >= 1`` (PyTorch's values: at a non-zero beside the group's one zero it is NaN when another
    element is infinite or NaN, as the product ``0 * inf`` is; where the group has two zeros or more it
    is 0, as PyTorch's full reduction gives). Where ``k_i == 1`` the zero is written as ``q_i * z_i``,
    ``z_i`` the other zero's value (a sum equal to 0 whose derivative reaches that element), so the
    derivative of this result, which grad of grad takes, is exact at any number of zeros."""
    shape = shape_of(x)
    ax = normalize_axes(axes, len(shape))
    dtype = dtype_name(x)
    zero = ops.eq(x, 0.0)
    counted = ops.cast(zero, dtype=dtype)
    safe = ops.where(zero, 1.0, x)
    q = ops.div(ops.reduce_prod(safe, axes=ax, keepdims=True), safe)
    others = ops.sub(ops.reduce_sum(counted, axes=ax, keepdims=True), counted)
    zeros_only = ops.where(zero, x, 0.0)
    other_zero = ops.sub(ops.reduce_sum(zeros_only, axes=ax, keepdims=True), zeros_only)
    bad = ops.ne(ops.sub(x, x), 0.0)  # infinite or NaN
    bad_counted = ops.cast(bad, dtype=dtype)
    other_bad = ops.sub(ops.reduce_sum(bad_counted, axes=ax, keepdims=True), bad_counted)
    finite_q = ops.where(ops.ne(ops.sub(q, q), 0.0), 0.0, q)
    nan_here = ops.logical_and(ops.gt(other_bad, 0.0), ops.logical_not(zero))  # 0 * inf beside the one zero
    one_zero = ops.where(nan_here, float("nan"), ops.mul(finite_q, other_zero))
    return ops.where(ops.eq(others, 0.0), q, ops.where(ops.eq(others, 1.0), one_zero, 0.0))


def channel_column(ops: Ops, v: AnyTensor, ndim: int) -> AnyTensor:
    """A ``[C]`` vector reshaped to ``[1, C, 1, ...]`` so it broadcasts along axis 1 of a rank-``ndim`` tensor."""
    return ops.reshape(v, shape=(1, shape_of(v)[0]) + (1,) * (ndim - 2))


def mean_keep(ops: Ops, x: AnyTensor, axis: int) -> AnyTensor:
    """Mean over one axis, keeping it (size 1)."""
    n = shape_of(x)[axis]  # an int, or a symbolic size under export tracing
    return ops.div(ops.reduce_sum(x, axes=(axis,), keepdims=True), float(n) if isinstance(n, int) else n)


def attention_probs(ops: Ops, q: AnyTensor, k: AnyTensor, mask: AnyTensor | None, scale: float) -> AnyTensor:
    """``p = softmax(scale q k^T)`` over the last axis; with a mask, masked scores are filled with the lowest
    finite value and ``p`` is zeroed there (a fully masked row has ``p = 0``, and no NaN reaches a derivative)."""
    scores = ops.mul(ops.matmul(q, swap_last(ops, k)), float(scale))
    if mask is None:
        return ops.softmax(scores, axis=-1)
    filled = ops.where(mask, scores, lowest(dtype_name(scores)))
    return ops.where(mask, ops.softmax(filled, axis=-1), 0.0)


def softmax_product(ops: Ops, p: AnyTensor, d: AnyTensor, axis: int | None = None) -> AnyTensor:
    """``p (d - sum(d p))`` along ``axis`` (non-negative; default the last): the softmax Jacobian (symmetric)
    at the probabilities ``p`` applied to ``d``."""
    ax = len(shape_of(p)) - 1 if axis is None else axis
    return ops.mul(p, ops.sub(d, ops.reduce_sum(ops.mul(d, p), axes=(ax,), keepdims=True)))


def move_axis(ops: Ops, x: AnyTensor, source: int, destination: int) -> AnyTensor:
    """``x`` with axis ``source`` moved to position ``destination`` (both may be negative); the other
    axes keep their order (``numpy.moveaxis`` as a ``permute``; no op when nothing moves)."""
    n = len(shape_of(x))
    src = int(source) % n
    dst = int(destination) % n
    if src == dst:
        return x
    order = [i for i in range(n) if i != src]
    order.insert(dst, src)
    return ops.permute(x, perm=tuple(order))


def move_to_front(ops: Ops, x: AnyTensor, dim: int | None) -> AnyTensor:
    """``x`` with its batch axis ``dim`` moved to position 0 (``x`` itself when ``dim`` is ``None``)."""
    if dim is None or dim == 0:
        return x
    return move_axis(ops, x, dim, 0)
