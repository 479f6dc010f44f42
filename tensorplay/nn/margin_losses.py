"""Margin and embedding losses of ``tensorplay.nn.functional`` (re-exported there): ``cosine_embedding_loss``,
``hinge_embedding_loss``, ``margin_ranking_loss``, ``soft_margin_loss``, ``multilabel_soft_margin_loss``,
``multi_margin_loss``, ``multilabel_margin_loss``, ``triplet_margin_loss`` and
``triplet_margin_with_distance_loss``.

Each is composed from the primitives, so it runs eagerly, records, compiles, exports and goes through every
transform with no rule of its own. ``reduction`` is ``"mean"`` (over every element of the unreduced loss),
``"sum"`` or ``"none"``; it is keyword-only, as is every argument PyTorch places after its deprecated
``size_average``/``reduce`` (which tensorplay does not take), so a positional PyTorch call cannot mean
something else here. The hinge ``max(0, z)`` of ``clamp_min`` has gradient 1 at ``z == 0`` (PyTorch's
``clamp_min``); the class-wise hinges of ``multi_margin_loss`` and ``multilabel_margin_loss`` have gradient 0
there (PyTorch's kernels test ``z > 0``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay import derived
from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.nn._util import ops_for
from tensorplay.nn.activation_functions import stable_softplus
from tensorplay.nn.functional import _check_reduction, _check_target, _checked_indices, _reduce
from tensorplay.nn.loss_functions import pairwise_distance
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Named = Sequence[tuple[str, AnyTensor]]


# ---- shared checks ---------------------------------------------------------------------------------------

def _tensors(where: str, named: Named) -> Any:
    """The interpreter of the named tensor arguments, each checked to be a tensorplay Tensor."""
    for name, t in named:
        if not isinstance(t, Tensor):
            raise DTypeError(f"{where}: {name} must be a tensorplay Tensor, got {type(t).__name__} "
                             "(convert with tp.tensor(...))")
    return ops_for(where, named[0][1], *(t for _, t in named[1:]))


def _float_input(where: str, name: str, t: AnyTensor) -> None:
    if not t.dtype.is_floating_point:
        raise DTypeError(f"{where}: {name} must be a float tensor, got {t.dtype.name}{list(t.shape)}; "
                         "convert with .float() first")


def _no_bool(where: str, named: Named) -> None:
    for name, t in named:
        if t.dtype.name == "bool":
            raise DTypeError(f"{where}: {name} must be a numeric tensor, got bool{list(t.shape)}")


def floated(ops: Any, t: AnyTensor) -> AnyTensor:
    """``t`` itself if it is a float tensor, else cast to float32. Float operands of two dtypes are left to
    each primitive's promotion, so mixed float32/float64 losses round as PyTorch's do, operation by
    operation."""
    return t if t.dtype.is_floating_point else ops.cast(t, dtype="float32")


def as_dtype(ops: Any, t: AnyTensor, dtype: str) -> AnyTensor:
    """``t`` cast to ``dtype`` (itself when it has it)."""
    return t if t.dtype.name == dtype else ops.cast(t, dtype=dtype)


def broadcastable(where: str, named: Named) -> None:
    """A :class:`ShapeError` naming the arguments unless their (concrete) shapes broadcast together."""
    shapes = [tuple(t.shape) for _, t in named]
    if not all(isinstance(d, int) for s in shapes for d in s):
        return  # symbolic dims: the primitives check them
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        given = ", ".join(f"{name} {list(t.shape)}" for name, t in named)
        raise ShapeError(f"{where}: expected shapes that broadcast together, got {given}") from None


def _same_ndim(where: str, named: Named) -> None:
    if len({t.ndim for _, t in named}) != 1:
        given = ", ".join(f"{name} {t.ndim}-d {list(t.shape)}" for name, t in named)
        raise ShapeError(f"{where}: expected tensors with the same number of dimensions, got {given}")


def _clamp_min0(ops: Any, z: AnyTensor) -> AnyTensor:
    """``max(z, 0)`` with gradient 1 at ``z == 0`` (PyTorch's ``clamp_min``)."""
    return derived.clamp(ops, z, 0.0, None)  # type: ignore[no-any-return]


def _hinge(ops: Any, z: AnyTensor, keep: AnyTensor | None = None) -> AnyTensor:
    """``z`` where ``z > 0`` (and ``keep``), else 0; gradient 0 at ``z == 0``."""
    pos = ops.gt(z, 0.0)
    if keep is not None:
        pos = ops.logical_and(pos, keep)
    return ops.where(pos, z, 0.0)  # type: ignore[no-any-return]


def _margin(where: str, margin: Any, positive: bool = False) -> float:
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)):
        raise ArgumentError(f"{where}: margin must be a number, got {type(margin).__name__} {margin!r}")
    if positive and not margin > 0:
        raise ArgumentError(f"{where}: margin must be greater than 0, got {margin}")
    return float(margin)


# ---- pairwise losses with a {1, -1} target -----------------------------------------------------------------

def cosine_embedding_loss(input1: AnyTensor, input2: AnyTensor, target: AnyTensor, margin: float = 0.0, *,
                          reduction: str = "mean") -> AnyTensor:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where ``target == -1`` and
    0 for any other target, with ``cos = <x1, x2> / sqrt((|x1|^2 + 1e-12) (|x2|^2 + 1e-12))`` (a zero vector
    gives 0), as PyTorch. Inputs ``[N, D]`` with ``target[N]``, or unbatched ``[D]`` with a 0-d target;
    ``input1`` and ``input2`` broadcast. Integer inputs are promoted to float32; the target may have any
    dtype."""
    where = "cosine_embedding_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    named = (("input1", input1), ("input2", input2), ("target", target))
    ops = _tensors(where, named)
    _no_bool(where, named[:2])
    if target.ndim not in (0, 1):
        raise ShapeError(f"{where}: expected a 0-d or 1-d target (multi-target is not supported), got "
                         f"target {list(target.shape)}")
    need = target.ndim + 1
    if input1.ndim != need or input2.ndim != need:
        raise ShapeError(f"{where}: a {target.ndim}-d target expects {need}-d inputs, got input1 "
                         f"{list(input1.shape)} and input2 {list(input2.shape)}")
    broadcastable(where, named[:2])
    a, b = floated(ops, input1), floated(ops, input2)
    axis = (target.ndim,)

    def total(t: AnyTensor) -> AnyTensor:
        return ops.reduce_sum(t, axes=axis, keepdims=False)  # type: ignore[no-any-return]

    mag = ops.mul(ops.add(total(ops.mul(a, a)), 1e-12), ops.add(total(ops.mul(b, b)), 1e-12))
    cos = ops.div(total(ops.mul(a, b)), ops.sqrt(mag))
    broadcastable(where, (("the cosines", cos), ("target", target)))
    pos = ops.where(ops.eq(target, 1), ops.sub(1.0, cos), 0.0)
    neg = ops.where(ops.eq(target, -1), _clamp_min0(ops, ops.sub(cos, _margin(where, margin))), 0.0)
    return _reduce(ops, ops.add(pos, neg), reduction, where)


def hinge_embedding_loss(input: AnyTensor, target: AnyTensor, margin: float = 1.0, *,
                         reduction: str = "mean") -> AnyTensor:
    """``x`` where ``target != -1`` plus ``max(0, margin - x)`` where ``target != 1`` (so ``x`` for 1,
    the hinge for -1 and their sum for any other target), as PyTorch. ``input`` and ``target`` broadcast.
    ``input`` must be a float tensor (the result has its dtype); the target may have any dtype."""
    where = "hinge_embedding_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    named = (("input", input), ("target", target))
    ops = _tensors(where, named)
    _float_input(where, "input", input)
    broadcastable(where, named)
    hinge = _clamp_min0(ops, ops.sub(_margin(where, margin), input))
    loss = ops.add(ops.where(ops.ne(target, 1), hinge, 0.0), ops.where(ops.ne(target, -1), input, 0.0))
    return _reduce(ops, loss, reduction, where)


def margin_ranking_loss(input1: AnyTensor, input2: AnyTensor, target: AnyTensor, margin: float = 0.0, *,
                        reduction: str = "mean") -> AnyTensor:
    """``max(0, -target (x1 - x2) + margin)``: ``target == 1`` asks for ``x1`` to rank above ``x2`` by
    ``margin``, -1 for the reverse. The three tensors have one number of dims and broadcast, as PyTorch
    (0-d is the unbatched form). They are computed in their promoted float dtype (integers give float32)."""
    where = "margin_ranking_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    named = (("input1", input1), ("input2", input2), ("target", target))
    ops = _tensors(where, named)
    _no_bool(where, named)
    _same_ndim(where, named)
    broadcastable(where, named)
    x1, x2, t = (floated(ops, v) for _, v in named)
    z = ops.add(ops.mul(ops.neg(t), ops.sub(x1, x2)), _margin(where, margin))
    return _reduce(ops, _clamp_min0(ops, z), reduction, where)


def soft_margin_loss(input: AnyTensor, target: AnyTensor, *, reduction: str = "mean") -> AnyTensor:
    """The two-class logistic loss ``log(1 + exp(-y x))`` of ``input`` and ``target`` (``y``, usually
    +-1), broadcast together, computed without overflow (PyTorch's ``log1p(exp(.))`` overflows to ``inf``
    past ``-y x ~ 88`` in float32 and ``~ 709`` in float64; this gives ``-y x`` there). ``input`` must be a
    float tensor; the target is cast to its dtype, which the result has."""
    where = "soft_margin_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    named = (("input", input), ("target", target))
    ops = _tensors(where, named)
    _float_input(where, "input", input)
    broadcastable(where, named)
    t = as_dtype(ops, target, input.dtype.name)
    return _reduce(ops, stable_softplus(ops, ops.neg(ops.mul(t, input))), reduction, where)


def multilabel_soft_margin_loss(input: AnyTensor, target: AnyTensor, weight: AnyTensor | None = None, *,
                                reduction: str = "mean") -> AnyTensor:
    """One-versus-all logistic loss of logits ``input[..., C]`` and 0/1 ``target`` (broadcast together):
    ``-(t log sigmoid(x) + (1 - t) log sigmoid(-x))`` times ``weight`` (broadcast), averaged over the last
    (class) dim, so ``"none"`` gives ``[...]`` (0-d for an unbatched ``[C]``). ``input`` must be a float
    tensor; everything is computed in the promoted float dtype, as PyTorch."""
    where = "multilabel_soft_margin_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    named: list[tuple[str, AnyTensor]] = [("input", input), ("target", target)]
    if weight is not None:
        named.append(("weight", weight))
    ops = _tensors(where, named)
    _float_input(where, "input", input)
    if input.ndim == 0:
        raise ShapeError(f"{where}: expected input [..., C] with a class dim, got a 0-d tensor")
    broadcastable(where, named)
    x, t = input, floated(ops, target)
    # -(t log s(x) + (1 - t) log s(-x)) = t softplus(-x) + (1 - t) softplus(x)
    loss = ops.add(ops.mul(t, stable_softplus(ops, ops.neg(x))), ops.mul(ops.sub(1.0, t), stable_softplus(ops, x)))
    if weight is not None:
        loss = ops.mul(loss, floated(ops, weight))
    c = input.shape[-1]
    per = ops.div(ops.reduce_sum(loss, axes=(loss.ndim - 1,), keepdims=False), c)
    return _reduce(ops, per, reduction, where)


# ---- class-wise hinges over [N, C] -------------------------------------------------------------------------

def _frames(where: str, input: AnyTensor) -> tuple[Any, Any]:
    """``(N, C)`` of a class-score input ``[N, C]``, ``[C]`` (``N = 1``) or 0-d (``N = C = 1``)."""
    ndim = input.ndim
    shape = tuple(input.shape)
    empty = isinstance(derived.numel_of(shape), int) and derived.numel_of(shape) == 0
    if ndim > 2 or (empty and not (ndim == 2 and shape[1] != 0)):
        raise ShapeError(f"{where}: expected a non-empty input [C] or [N, C] (N may be 0), got input {list(shape)}")
    return (shape[0] if ndim == 2 else 1), (shape[-1] if ndim >= 1 else 1)


def multi_margin_loss(input: AnyTensor, target: AnyTensor, p: int = 1, margin: float = 1.0,
                      weight: AnyTensor | None = None, *, reduction: str = "mean") -> AnyTensor:
    """Multi-class hinge loss of scores ``input[N, C]`` (or unbatched ``[C]``, or 0-d) at integer class
    ``target[N]`` (``[]`` or ``[1]`` unbatched): per sample ``sum_{i != y} w[y] max(0, margin - x[y] +
    x[i])^p / C``, ``p`` 1 or 2. ``weight[C]`` has the input's dtype. ``"none"`` gives ``[N]`` for a 1-d
    target and 0-d for a 0-d one (which needs ``N == 1``), as PyTorch. A target outside ``[0, C)`` is an
    :class:`IndexRangeError`."""
    where = "multi_margin_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    if p not in (1, 2) or isinstance(p, bool):
        raise ArgumentError(f"{where}: p must be 1 or 2, got {p!r}")
    named: list[tuple[str, AnyTensor]] = [("input", input), ("target", target)]
    if weight is not None:
        named.append(("weight", weight))
    ops = _tensors(where, named)
    _float_input(where, "input", input)
    n, c = _frames(where, input)
    count = derived.numel_of(tuple(target.shape))
    if target.ndim > 1 or (isinstance(count, int) and isinstance(n, int) and count != n):
        raise ShapeError(f"{where}: expected a target of {n} class indices (1-d [{n}]"
                         f"{', or 0-d' if n == 1 else ''}), got target {list(target.shape)} for input "
                         f"{list(input.shape)}")
    if weight is not None:
        if weight.ndim != 1 or tuple(weight.shape) != (c,):
            raise ShapeError(f"{where}: weight must be 1-d with one entry per class [{c}], got weight "
                             f"{list(weight.shape)}")
        if weight.dtype != input.dtype:
            raise DTypeError(f"{where}: weight must have the input's dtype {input.dtype.name}, got "
                             f"{weight.dtype.name}{list(weight.shape)}")
    t, _ = _checked_indices(ops, target, c, where, "target")
    x = derived.reshape(ops, input, (n, c))
    t = derived.reshape(ops, t, (n, 1))
    is_y = ops.eq(t, derived.reshape(ops, ops.iota(length=c, dtype=t.dtype.name), (1, c)))  # [N, C]
    xy = ops.reduce_sum(ops.where(is_y, x, 0.0), axes=(1,), keepdims=True)  # [N, 1]
    h = _hinge(ops, ops.add(ops.sub(x, xy), _margin(where, margin)), ops.logical_not(is_y))
    if p == 2:
        h = ops.mul(h, h)
    if weight is not None:
        h = ops.mul(h, ops.gather(weight, t, axis=0))  # w[y] per row, [N, 1]
    per = ops.div(ops.reduce_sum(h, axes=(1,), keepdims=False), c)
    return _reduce(ops, derived.reshape(ops, per, (n,) if target.ndim > 0 else ()), reduction, where)


def multilabel_margin_loss(input: AnyTensor, target: AnyTensor, *, reduction: str = "mean") -> AnyTensor:
    """Multi-label hinge loss of scores ``input[N, C]`` (or ``[C]``, or 0-d) with integer ``target`` of the
    same shape listing each sample's classes up to its first -1: per sample ``sum_{j in targets} sum_{i not
    in targets} max(0, 1 - (x[j] - x[i])) / C`` (a class listed twice counts twice, as PyTorch). Every target
    entry must lie in ``[-1, C)`` (an :class:`IndexRangeError` otherwise, those after a -1 too). ``"none"``
    gives ``[N]`` (0-d unbatched)."""
    where = "multilabel_margin_loss"
    _check_reduction(reduction, where)
    _check_target(target, where)
    ops = _tensors(where, (("input", input), ("target", target)))
    _float_input(where, "input", input)
    n, c = _frames(where, input)
    if tuple(target.shape) != tuple(input.shape):
        raise ShapeError(f"{where}: target must have the input's shape {list(input.shape)}, got target "
                         f"{list(target.shape)}")
    t, _ = _checked_indices(ops, target, c, where, "target", allowed=-1)
    x = derived.reshape(ops, input, (n, 1, c))
    t = derived.reshape(ops, t, (n, c))
    listed = ops.eq(derived.cumsum(ops, ops.cast(ops.eq(t, -1), dtype="int64"), 1), 0)  # [N, K]: before the first -1
    classes = derived.reshape(ops, ops.iota(length=c, dtype=t.dtype.name), (1, 1, c))
    hit = ops.logical_and(ops.eq(derived.reshape(ops, t, (n, c, 1)), classes),
                          derived.reshape(ops, listed, (n, c, 1)))  # [N, K, C]: entry k names class i
    is_target = derived.any_true(ops, hit, 1, True)  # [N, 1, C]
    xj = ops.reduce_sum(ops.where(hit, x, 0.0), axes=(2,), keepdims=True)  # [N, K, 1]
    keep = ops.logical_and(derived.reshape(ops, listed, (n, c, 1)), ops.logical_not(is_target))
    h = _hinge(ops, ops.add(ops.sub(x, xj), 1.0), keep)  # [N, K, C]
    per = ops.div(ops.reduce_sum(h, axes=(1, 2), keepdims=False), c)
    return _reduce(ops, derived.reshape(ops, per, (n,) if input.ndim == 2 else ()), reduction, where)


# ---- triplet losses ----------------------------------------------------------------------------------------

Distance = Callable[[AnyTensor, AnyTensor], AnyTensor]


def _triplet(where: str, anchor: AnyTensor, positive: AnyTensor, negative: AnyTensor, distance: Distance,
             margin: float, swap: bool, reduction: str) -> AnyTensor:
    """``max(0, margin + d(a, p) - d(a, n))`` with ``d(a, n)`` replaced by ``min(d(a, n), d(p, n))`` under
    ``swap``; the shared body of the two triplet losses."""
    _check_reduction(reduction, where)
    m = _margin(where, margin, positive=True)
    named = (("anchor", anchor), ("positive", positive), ("negative", negative))
    ops = _tensors(where, named)
    _same_ndim(where, named)
    d_pos, d_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        d_neg = ops.minimum(d_neg, distance(positive, negative))
    return _reduce(ops, _clamp_min0(ops, ops.sub(ops.add(d_pos, m), d_neg)), reduction, where)


def triplet_margin_loss(anchor: AnyTensor, positive: AnyTensor, negative: AnyTensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False, *,
                        reduction: str = "mean") -> AnyTensor:
    """Triplet loss ``max(0, margin + d(a, p) - d(a, n))`` with ``d`` the
    :func:`~tensorplay.nn.functional.pairwise_distance` (``p``-norm of ``x1 - x2 + eps`` over the last dim),
    of ``[N, D]`` tensors (or unbatched ``[D]``) of one number of dims; ``swap`` uses ``min(d(a, n), d(p,
    n))``. ``margin > 0``, as PyTorch; ``"none"`` gives ``[N]``."""
    def distance(x1: AnyTensor, x2: AnyTensor) -> AnyTensor:
        return pairwise_distance(x1, x2, p, eps)

    return _triplet("triplet_margin_loss", anchor, positive, negative, distance, margin, swap, reduction)


def triplet_margin_with_distance_loss(anchor: AnyTensor, positive: AnyTensor, negative: AnyTensor, *,
                                      distance_function: Distance | None = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> AnyTensor:
    """:func:`triplet_margin_loss` with any ``distance_function(x1, x2)`` returning one distance per
    sample (default :func:`~tensorplay.nn.functional.pairwise_distance`). ``margin > 0``, as PyTorch."""
    where = "triplet_margin_with_distance_loss"
    if distance_function is not None and not callable(distance_function):
        raise ArgumentError(f"{where}: distance_function must be callable or None, got "
                            f"{type(distance_function).__name__}")
    distance: Distance = distance_function if distance_function is not None else pairwise_distance
    return _triplet(where, anchor, positive, negative, distance, margin, swap, reduction)
