"""Batching rules (the rules ``vmap`` interprets a graph with), one per primitive of :class:`~tensorplay.ops.Ops`.

A rule is called as ``BATCH_RULES[name](ops, inputs, dims, **params)``:

* ``inputs`` are the primitive's inputs (tensors, Python scalars, ``None``), each tensor carrying
  one extra axis, the batch axis, at position ``dims[i]`` (negative positions count from the end);
* ``dims[i]`` is ``None`` for an input without a batch axis (also for scalars and ``None`` inputs);
* ``params`` are the primitive's static parameters, as for the unbatched call.

It returns ``(output, out_dim)``: the batched result and the position of its batch axis
(``None`` when the result has none, e.g. when no input is batched). Every rule computes, for each
``b``, ``primitive(*inputs[b])`` where ``inputs[b]`` takes sample ``b`` of the batched inputs and
the unbatched inputs as they are.

Strategy: move batch axes to the front, give unbatched operands a batch axis only where the
primitive needs it (broadcasting handles elementwise operands), shift axis parameters by one,
and fold the batch into ``N`` for convolution and pooling. Rules use only ``ops`` methods and
never read a size with ``int()``, so they run under the graph recorder with symbolic batch sizes.
Two cases need a concrete batch size (and say so when it is symbolic): a convolution whose input
and weight are *both* batched (the batch becomes ``groups``), and random primitives with a batched
key (one draw per key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tensorplay.spec.errors import AxisError, MissingRuleError
from tensorplay.rules.registry import find_rule, registrar, uncovered
from tensorplay.spec.table import names
from tensorplay.rules.util import (
    AnyTensor, channel_column, dtype_name, is_tensor, move_to_front, normalize_axes, shape_of,
)
from tensorplay.tensor import Tensor

if TYPE_CHECKING:
    from tensorplay.ops import Ops

Dims = tuple[int | None, ...]
Batched = tuple[AnyTensor, int | None]
BatchRule = Callable[..., Batched]
"""``rule(ops, inputs, dims, **params) -> (output, out_dim)``."""

BATCH_RULES: dict[str, BatchRule] = {}
"""Primitive name -> batching rule. Complete over :data:`tensorplay.ops.PRIMITIVE_NAMES` (tested)."""


def _with_unbatched_case(name: str, fn: BatchRule) -> BatchRule:
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, **params: Any) -> Batched:
        if len(dims) != len(inputs):
            raise ValueError(f"vmap: '{name}' got {len(dims)} batch dims for {len(inputs)} inputs")
        clean: list[int | None] = []
        batched = False
        for i, x in enumerate(inputs):
            d = dims[i]
            if d is None or not isinstance(x, Tensor):
                clean.append(None)
                continue
            n = len(x._data.shape)
            if not -n <= d < n:
                raise AxisError(f"vmap: batch axis {d} of input {i} of '{name}' is out of range for a tensor "
                                f"of rank {n} (expected {-n} <= axis < {n})")
            clean.append(d if d.__class__ is int and d >= 0 else int(d) % n)
            batched = True
        if not batched:
            return getattr(ops, name)(*inputs, **params), None
        return fn(ops, inputs, tuple(clean), **params)
    rule.__name__ = getattr(fn, "__name__", name)
    rule.__doc__ = fn.__doc__
    rule.__wrapped__ = fn  # type: ignore[attr-defined]
    return rule


_register = registrar(BATCH_RULES, _with_unbatched_case)
"""``@_register(*names)``: every registered rule first handles the case of no batched input (the primitive
itself, result unbatched) and drops batch dims given for non-tensor inputs."""


# ---- helpers ---------------------------------------------------------------------------------------

def batch_size(inputs: Sequence[Any], dims: Sequence[int | None]) -> Any:
    """The batch size (an int or a symbolic size) read from the first batched input."""
    for x, d in zip(inputs, dims):
        if d is not None:
            return shape_of(x)[d]
    raise ValueError("batching: no input is batched")


def _logical_rank(x: Any, dim: int | None) -> int:
    """The rank ``x`` has for the primitive (without its batch axis); 0 for scalars."""
    if not is_tensor(x):
        return 0
    n = len(shape_of(x))
    return n - 1 if dim is not None else n


def _front(ops: Ops, x: AnyTensor, dim: int | None, size: Any) -> AnyTensor:
    """``x`` with its batch axis at 0; an unbatched ``x`` is broadcast to ``[size, *x.shape]``."""
    if dim is None:
        return ops.broadcast_to(x, shape=(size,) + shape_of(x))
    return move_to_front(ops, x, dim)


def _fronts(ops: Ops, inputs: Sequence[AnyTensor], dims: Sequence[int | None]) -> list[AnyTensor]:
    """Every input with a batch axis at 0 (unbatched ones broadcast)."""
    size = batch_size(inputs, dims)
    return [_front(ops, x, d, size) for x, d in zip(inputs, dims)]


def _pad_rank(ops: Ops, x: AnyTensor, rank: int) -> AnyTensor:
    """A front-batched ``x[B, *S]`` reshaped to ``[B, 1, ..., 1, *S]`` with ``rank`` axes after ``B``,
    so numpy broadcasting lines its ``S`` up with unbatched operands of rank up to ``rank``."""
    shape = shape_of(x)
    extra = rank - (len(shape) - 1)
    if extra <= 0:
        return x
    return ops.reshape(x, shape=shape[:1] + (1,) * extra + shape[1:])


def _permute(ops: Ops, x: AnyTensor, perm: tuple[int, ...]) -> AnyTensor:
    """``ops.permute(x, perm=perm)``, or ``x`` itself when ``perm`` keeps every axis in place."""
    if perm == tuple(range(len(perm))):
        return x
    return ops.permute(x, perm=perm)


def _fold(ops: Ops, x: AnyTensor) -> AnyTensor:
    """``x[B, N, *rest] -> [B*N, *rest]``."""
    shape = shape_of(x)
    return ops.reshape(x, shape=(shape[0] * shape[1],) + shape[2:])


def _unfold(ops: Ops, y: AnyTensor, lead: tuple[Any, ...]) -> AnyTensor:
    """``y[B*N, *rest] -> [B, N, *rest]`` with ``lead = (B, N)`` (sizes are never divided: symbolic-safe)."""
    return ops.reshape(y, shape=tuple(lead) + shape_of(y)[1:])


def _concrete_size(size: Any, prim: str, why: str) -> int:
    if not isinstance(size, int):
        raise MissingRuleError(f"vmap: primitive '{prim}' {why} needs a concrete batch size, got the "
                               f"symbolic size {size}")
    return size


# ---- elementwise -------------------------------------------------------------------------------------

def _same_dim(name: str) -> BatchRule:
    """One tensor input, the result shaped like it (elementwise, ``cast``, ``stop_gradient``): the batch
    axis stays where it is."""
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, **params: Any) -> Batched:
        (x,) = inputs
        return getattr(ops, name)(x, **params), dims[0]
    rule.__name__ = f"{name}_batch"
    rule.__doc__ = f"``{name}`` keeps the batch axis where it is."
    return rule


for _name in (*names("unary"), *names("check"), "cast", "stop_gradient"):
    _register(_name)(_same_dim(_name))


def _broadcasting(name: str) -> BatchRule:
    """numpy-broadcasting primitives (binary elementwise, comparisons, ``where``, ``matmul``): batched
    operands move their batch axis to the front and get size-1 axes after it up to the largest rank of
    any operand; unbatched operands broadcast against them as they are."""
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, **params: Any) -> Batched:
        # the logical rank of each operand (without its batch axis; 0 for scalars), and the largest
        ranks = [(len(x._data.shape) - (d is not None)) if isinstance(x, Tensor) else 0 for x, d in zip(inputs, dims)]
        rank = max(ranks)
        args = [x if d is None else
                x if d == 0 and r == rank else _pad_rank(ops, move_to_front(ops, x, d), rank)
                for x, d, r in zip(inputs, dims, ranks)]
        return getattr(ops, name)(*args, **params), 0
    rule.__name__ = f"{name}_batch"
    rule.__doc__ = f"``{name}`` with the batch axis in front of every batched operand (numpy broadcasting)."
    return rule


for _name in (*names("binary"), *names("select"), *names("linalg")):
    _register(_name)(_broadcasting(_name))


# ---- reductions --------------------------------------------------------------------------------------

def _reduction(name: str) -> BatchRule:
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, axes: tuple[int, ...],
             keepdims: bool = False) -> Batched:
        (x,) = inputs
        xf = move_to_front(ops, x, dims[0])
        shifted = tuple(a + 1 for a in normalize_axes(axes, len(shape_of(xf)) - 1))
        return getattr(ops, name)(xf, axes=shifted, keepdims=keepdims), 0
    rule.__name__ = f"{name}_batch"
    rule.__doc__ = f"``{name}`` over the shifted axes of the front-batched input."
    return rule


for _name in names("reduce"):
    _register(_name)(_reduction(_name))


# ---- structure ---------------------------------------------------------------------------------------

@_register("reshape")
def reshape_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, shape: tuple[int, ...]) -> Batched:
    """Front-batched ``x[B, *S]`` reshaped to ``[B, *shape]``."""
    (x,) = inputs
    xf = move_to_front(ops, x, dims[0])
    return ops.reshape(xf, shape=shape_of(xf)[:1] + tuple(shape)), 0


@_register("permute")
def permute_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, perm: tuple[int, ...]) -> Batched:
    """``perm`` shifted by one behind a leading batch axis."""
    (x,) = inputs
    xf = move_to_front(ops, x, dims[0])
    n = len(perm)
    return _permute(ops, xf, (0,) + tuple(int(p) % n + 1 for p in perm)), 0


@_register("broadcast_to")
def broadcast_to_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, shape: tuple[int, ...]) -> Batched:
    """``x[B, *S]`` padded to ``[B, 1.., *S]`` (the rank of ``shape``), then broadcast to ``[B, *shape]``."""
    (x,) = inputs
    xf = _pad_rank(ops, move_to_front(ops, x, dims[0]), len(shape))
    return ops.broadcast_to(xf, shape=shape_of(xf)[:1] + tuple(shape)), 0


@_register("slice")
def slice_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, starts: tuple[int, ...], stops: tuple[int, ...],
                steps: tuple[int, ...]) -> Batched:
    """The whole batch axis, then the given slices."""
    (x,) = inputs
    xf = move_to_front(ops, x, dims[0])
    size = shape_of(xf)[0]
    return ops.slice(xf, starts=(0,) + tuple(starts), stops=(size,) + tuple(stops), steps=(1,) + tuple(steps)), 0


@_register("pad")
def pad_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, pads: tuple[tuple[int, int], ...],
              value: float = 0.0) -> Batched:
    """No padding on the batch axis."""
    (x,) = inputs
    xf = move_to_front(ops, x, dims[0])
    return ops.pad(xf, pads=((0, 0),) + tuple(pads), value=value), 0


@_register("concat")
def concat_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, axis: int) -> Batched:
    """Every piece front-batched (unbatched pieces broadcast), joined along the shifted axis."""
    rank = _logical_rank(inputs[0], dims[0])
    (ax,) = normalize_axes((axis,), rank)
    return ops.concat(*_fronts(ops, inputs, dims), axis=ax + 1), 0


def _flat_indices(ops: Ops, indices: AnyTensor, n: Any, name: str) -> AnyTensor:
    """Front-batched ``indices[B, *I]`` (into an axis of size ``n``) as indices into the ``B*n`` rows of
    that axis flattened with the batch axis: ``b * n + i`` (``i + n`` for a negative ``i``). An index
    outside ``[-n, n)`` raises (``check_index``, naming ``name``) rather than reading another sample's rows."""
    ishape = shape_of(indices)
    size = ishape[0]
    wrapped = ops.where(ops.lt(indices, 0), ops.add(indices, n), indices)
    checked = ops.check_index(wrapped, bound=n, what=f"vmap({name}): index")
    offsets = ops.mul(ops.iota(length=size, dtype=dtype_name(indices)), n)
    if len(ishape) > 1:
        offsets = ops.reshape(offsets, shape=(size,) + (1,) * (len(ishape) - 1))
    return ops.add(checked, offsets)


@_register("gather")
def gather_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, axis: int) -> Batched:
    """Only ``x`` batched: gather along the shifted axis. Only ``indices`` batched: the batched index
    array is gathered as is (the batch axis lands at ``axis``). Both: the gathered axis is flattened
    with the batch axis and each sample's indices offset into its own rows."""
    x, indices = inputs
    dx, di = dims
    rank = _logical_rank(x, dx)
    (ax,) = normalize_axes((axis,), rank)
    if di is None:
        return ops.gather(move_to_front(ops, x, dx), indices, axis=ax + 1), 0
    idx = move_to_front(ops, indices, di)
    if dx is None:
        return ops.gather(x, idx, axis=ax), ax
    # x[B, *A, n, *C] -> [B, n, *A, *C] -> [B*n, *A, *C]; result [B, *I, *A, *C] -> [B, *A, *I, *C]
    xf = _permute(ops, move_to_front(ops, x, dx), (0, ax + 1) + tuple(i for i in range(1, rank + 1) if i != ax + 1))
    n = shape_of(xf)[1]
    out = ops.gather(_fold(ops, xf), _flat_indices(ops, idx, n, "gather"), axis=0)
    n_idx = len(shape_of(idx)) - 1
    lead = tuple(range(1 + n_idx, 1 + n_idx + ax))
    perm = (0,) + lead + tuple(range(1, 1 + n_idx)) + tuple(range(1 + n_idx + ax, len(shape_of(out))))
    return _permute(ops, out, perm), 0


@_register("scatter_add")
def scatter_add_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, axis: int) -> Batched:
    """``base`` and ``updates`` front-batched (broadcast when unbatched). Unbatched indices: scatter along
    the shifted axis. Batched indices: the scattered axis is flattened with the batch axis and each
    sample's indices offset into its own rows."""
    base, indices, updates = inputs
    db, di, du = dims
    rank = _logical_rank(base, db)
    (ax,) = normalize_axes((axis,), rank)
    size = batch_size(inputs, dims)
    bf = _front(ops, base, db, size)
    uf = _front(ops, updates, du, size)
    if di is None:
        return ops.scatter_add(bf, indices, uf, axis=ax + 1), 0
    idx = move_to_front(ops, indices, di)
    n_idx = len(shape_of(idx)) - 1
    # base [B, *A, n, *C] -> [B*n, *A, *C]; updates [B, *A, *I, *C] -> [B, *I, *A, *C]
    to_axis_first = (0, ax + 1) + tuple(i for i in range(1, rank + 1) if i != ax + 1)
    bp = _permute(ops, bf, to_axis_first)
    n = shape_of(bp)[1]
    uperm = (0,) + tuple(range(1 + ax, 1 + ax + n_idx)) + tuple(range(1, 1 + ax)) + tuple(
        range(1 + ax + n_idx, len(shape_of(uf))))
    up = _permute(ops, uf, uperm)
    out = ops.scatter_add(_fold(ops, bp), _flat_indices(ops, idx, n, "scatter_add"), up, axis=0)
    out = ops.reshape(out, shape=shape_of(bp))
    inverse = [0] * len(to_axis_first)
    for i, p in enumerate(to_axis_first):
        inverse[p] = i
    return _permute(ops, out, tuple(inverse)), 0


# full and iota take no tensor input: the registered wrapper calls them unbatched.
@_register("full", "iota")
def creation_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, **params: Any) -> Batched:
    """Never reached with a batched input (creation primitives take none)."""
    raise ValueError("batching: creation primitives take no batched input")


# ---- convolution -------------------------------------------------------------------------------------

def _fold_spatial(name: str) -> BatchRule:
    """Primitives over ``x[N, C, *spatial]`` (and like-shaped companions) that treat samples of ``N``
    independently (pooling and its adjoints): the batch is folded into ``N``."""
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, **params: Any) -> Batched:
        fronts = _fronts(ops, inputs, dims)
        lead = shape_of(fronts[0])[:2]
        return _unfold(ops, getattr(ops, name)(*(_fold(ops, t) for t in fronts), **params), lead), 0
    rule.__name__ = f"{name}_batch"
    rule.__doc__ = f"``{name}`` with the batch folded into ``N``."
    return rule


for _name in names("pool"):
    _register(_name)(_fold_spatial(_name))


def _split_channels(ops: Ops, y: AnyTensor, size: Any, per: Any, groups: int) -> AnyTensor:
    """``y[N, G*B*P, *sp]`` (group outermost, then sample, ``P = O/G`` channels each) as ``[N, B, G*P, *sp]``."""
    shape = shape_of(y)
    n, spatial = shape[0], shape[2:]
    y = ops.reshape(y, shape=(n, groups, size, per) + spatial)
    y = ops.permute(y, perm=(0, 2, 1, 3) + tuple(range(4, 4 + len(spatial))))
    return ops.reshape(y, shape=(n, size, groups * per) + spatial)


def _merge_channels(ops: Ops, x: AnyTensor, groups: int) -> AnyTensor:
    """Front-batched ``x[B, N, C, *sp]`` as ``[N, G*B*C/G, *sp]``: each group's channels of every sample
    next to each other (group outermost), so an unchanged ``groups`` sees all samples per group."""
    shape = shape_of(x)
    size, n, channels, spatial = shape[0], shape[1], shape[2], shape[3:]
    per = channels // groups
    x = ops.reshape(x, shape=(size, n, groups, per) + spatial)
    x = ops.permute(x, perm=(1, 2, 0, 3) + tuple(range(4, 4 + len(spatial))))
    return ops.reshape(x, shape=(n, groups * size * per) + spatial)


def _stack_channels(ops: Ops, x: AnyTensor) -> AnyTensor:
    """Front-batched ``x[B, N, C, *sp]`` as ``[N, B*C, *sp]`` (sample outermost)."""
    shape = shape_of(x)
    x = ops.permute(x, perm=(1, 0) + tuple(range(2, len(shape))))
    return ops.reshape(x, shape=(shape[1], shape[0] * shape[2]) + shape[3:])


@_register("conv_nd")
def conv_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, stride: tuple[int, ...],
               padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Batched:
    """``x`` batched: folded into ``N``. ``w[B, O, C/G, *k]`` batched: the samples' filters side by side
    within each group (``[G*B*O/G, C/G, *k]``). Both: samples become groups (``groups * B``, needs a
    concrete ``B``)."""
    x, w = inputs
    dx, dw = dims
    params: dict[str, Any] = {"stride": stride, "padding": padding, "dilation": dilation}
    if dw is None:
        xf = move_to_front(ops, x, dx)
        return _unfold(ops, ops.conv_nd(_fold(ops, xf), w, groups=groups, **params), shape_of(xf)[:2]), 0
    wf = move_to_front(ops, w, dw)
    wshape = shape_of(wf)
    size, out_ch, k = wshape[0], wshape[1], len(wshape) - 3
    if dx is None:
        per = out_ch // groups
        wm = ops.reshape(wf, shape=(size, groups, per) + wshape[2:])
        wm = ops.permute(wm, perm=(1, 0) + tuple(range(2, 4 + k)))
        wm = ops.reshape(wm, shape=(groups * size * per,) + wshape[2:])
        y = ops.conv_nd(x, wm, groups=groups, **params)
        return _split_channels(ops, y, size, per, groups), 1
    b = _concrete_size(size, "conv_nd", "with both the input and the weight batched")
    xf = move_to_front(ops, x, dx)
    wm = ops.reshape(wf, shape=(b * out_ch,) + wshape[2:])
    y = ops.conv_nd(_stack_channels(ops, xf), wm, groups=groups * b, **params)
    yshape = shape_of(y)
    return ops.reshape(y, shape=(yshape[0], size, out_ch) + yshape[2:]), 1


@_register("conv_transpose_nd")
def conv_transpose_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, stride: tuple[int, ...],
                         padding: tuple[int, ...], output_padding: tuple[int, ...], dilation: tuple[int, ...],
                         groups: int) -> Batched:
    """``x`` batched: folded into ``N``. ``w[B, C, O/G, *k]`` batched: each input channel's filters of all
    samples side by side (``[C, B*O/G, *k]``). Both: samples become groups (needs a concrete ``B``)."""
    x, w = inputs
    dx, dw = dims
    params: dict[str, Any] = {"stride": stride, "padding": padding, "output_padding": output_padding,
                              "dilation": dilation}
    if dw is None:
        xf = move_to_front(ops, x, dx)
        out = ops.conv_transpose_nd(_fold(ops, xf), w, groups=groups, **params)
        return _unfold(ops, out, shape_of(xf)[:2]), 0
    wf = move_to_front(ops, w, dw)
    wshape = shape_of(wf)
    size, in_ch, per, k = wshape[0], wshape[1], wshape[2], len(wshape) - 3
    if dx is None:
        wm = ops.permute(wf, perm=(1, 0, 2) + tuple(range(3, 3 + k)))
        wm = ops.reshape(wm, shape=(in_ch, size * per) + wshape[3:])
        y = ops.conv_transpose_nd(x, wm, groups=groups, **params)
        return _split_channels(ops, y, size, per, groups), 1
    b = _concrete_size(size, "conv_transpose_nd", "with both the input and the weight batched")
    xf = move_to_front(ops, x, dx)
    wm = ops.reshape(wf, shape=(b * in_ch, per) + wshape[3:])
    y = ops.conv_transpose_nd(_stack_channels(ops, xf), wm, groups=groups * b, **params)
    yshape = shape_of(y)
    return ops.reshape(y, shape=(yshape[0], size, groups * per) + yshape[2:]), 1


@_register("conv_weight_grad_nd")
def conv_weight_grad_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, kernel_size: tuple[int, ...],
                           stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...],
                           groups: int) -> Batched:
    """The result ``[O, C/G, *k]`` sums over ``N``, so the batch cannot fold into it: ``x`` batched gives
    ``[O, B*C/G, *k]`` (samples side by side within each group), ``g`` batched gives ``[G*B*O/G, C/G, *k]``,
    both batched make samples groups (needs a concrete ``B``)."""
    x, g = inputs
    dx, dg = dims
    params: dict[str, Any] = {"kernel_size": kernel_size, "stride": stride, "padding": padding,
                              "dilation": dilation}
    if dg is None:
        xf = move_to_front(ops, x, dx)
        xshape = shape_of(xf)
        y = ops.conv_weight_grad_nd(_merge_channels(ops, xf, groups), g, groups=groups, **params)  # [O, B*C/G, *k]
        yshape = shape_of(y)
        return ops.reshape(y, shape=(yshape[0], xshape[0], xshape[2] // groups) + yshape[2:]), 1
    gf = move_to_front(ops, g, dg)
    gshape = shape_of(gf)
    size, out_ch = gshape[0], gshape[2]
    if dx is None:
        y = ops.conv_weight_grad_nd(x, _merge_channels(ops, gf, groups), groups=groups, **params)  # [G*B*O/G, ...]
        yshape = shape_of(y)
        per = out_ch // groups
        y = ops.reshape(y, shape=(groups, size, per) + yshape[1:])
        y = ops.permute(y, perm=(1, 0, 2) + tuple(range(3, 2 + len(yshape))))
        return ops.reshape(y, shape=(size, out_ch) + yshape[1:]), 0
    b = _concrete_size(size, "conv_weight_grad_nd", "with both inputs batched")
    xf = move_to_front(ops, x, dx)
    y = ops.conv_weight_grad_nd(_stack_channels(ops, xf), _stack_channels(ops, gf), groups=groups * b,
                             **params)  # [B*O, C/G, *k]
    return ops.reshape(y, shape=(size, out_ch) + shape_of(y)[1:]), 0


# ---- normalisation and attention ------------------------------------------------------------------

@_register("layer_norm_last_axis")
def layer_norm_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, eps: float) -> Batched:
    """Only ``x`` batched: ``layer_norm`` of the front-batched ``x`` (it keeps any leading axes).
    Batched ``gamma``/``beta``: normalise with ones and zeros, then scale and shift with the batched
    vectors lined up against ``[B, *lead, D]``."""
    x, gamma, beta = inputs
    dx, dgamma, dbeta = dims
    if dgamma is None and dbeta is None:
        return ops.layer_norm_last_axis(move_to_front(ops, x, dx), gamma, beta, eps=eps), 0
    xf = move_to_front(ops, x, dx)
    rank = _logical_rank(x, dx)
    xshape = shape_of(xf)
    dtype = dtype_name(xf)
    d = xshape[-1]
    ones = ops.full(shape=(d,), value=1.0, dtype=dtype)
    zeros = ops.full(shape=(d,), value=0.0, dtype=dtype)
    normed = ops.layer_norm_last_axis(xf, ones, zeros, eps=eps)

    def vec(v: AnyTensor, dv: int | None) -> AnyTensor:
        return v if dv is None else _pad_rank(ops, move_to_front(ops, v, dv), rank)

    out = ops.add(ops.mul(normed, vec(gamma, dgamma)), vec(beta, dbeta))
    return out, 0


@_register("batch_norm")
def batch_norm_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, eps: float) -> Batched:
    """Only ``x`` batched: folded into ``N``. A batched statistic or affine vector ``[B, C]``: the formula
    ``(x - mean) * rsqrt(var + eps) * weight + bias`` with every vector as a column ``[B, 1, C, 1..]``."""
    x, mean, var, weight, bias = inputs
    dx = dims[0]
    size = batch_size(inputs, dims)
    if all(d is None for d in dims[1:]):
        xf = move_to_front(ops, x, dx)
        out = ops.batch_norm(_fold(ops, xf), mean, var, weight, bias, eps=eps)
        return _unfold(ops, out, shape_of(xf)[:2]), 0
    rank = _logical_rank(x, dx)

    def column(v: AnyTensor, dv: int | None) -> AnyTensor:
        if dv is None:
            return channel_column(ops, v, rank)
        vf = move_to_front(ops, v, dv)
        return ops.reshape(vf, shape=(size, 1, shape_of(vf)[1]) + (1,) * (rank - 2))

    xf = x if dx is None else move_to_front(ops, x, dx)
    cols = [column(v, d) for v, d in zip((mean, var, weight, bias), dims[1:])]
    scale = ops.mul(ops.rsqrt(ops.add(cols[1], float(eps))), cols[2])
    return ops.add(ops.mul(ops.sub(xf, cols[0]), scale), cols[3]), 0


def _softmax_like(name: str) -> BatchRule:
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, axis: int) -> Batched:
        (x,) = inputs
        xf = move_to_front(ops, x, dims[0])
        (ax,) = normalize_axes((axis,), len(shape_of(xf)) - 1)
        return getattr(ops, name)(xf, axis=ax + 1), 0
    rule.__name__ = f"{name}_batch"
    rule.__doc__ = f"``{name}`` along the shifted axis of the front-batched input."
    return rule


for _name in names("softmax"):
    _register(_name)(_softmax_like(_name))


def _along_axis(name: str) -> BatchRule:
    """The batching rule of a primitive computed along one ``axis`` of its single input (arg-reductions,
    scans): the batch dim moves to the front and the axis shifts by one; other params pass through."""
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, axis: int, **params: Any) -> Batched:
        (x,) = inputs
        xf = move_to_front(ops, x, dims[0])
        (ax,) = normalize_axes((axis,), len(shape_of(xf)) - 1)
        return getattr(ops, name)(xf, axis=ax + 1, **params), 0
    rule.__name__ = f"{name}_batch"
    rule.__doc__ = f"``{name}`` along the shifted axis of the front-batched input."
    return rule


for _name in names("arg_reduce") + names("scan"):
    _register(_name)(_along_axis(_name))


@_register("dot_product_attention")
def attention_batch(ops: Ops, inputs: tuple[Any, ...], dims: Dims, *, scale: float) -> Batched:
    """``attention`` keeps leading axes, and ``q``, ``k``, ``v`` must share them: all three front-batched
    (unbatched ones broadcast); a batched mask is front-batched and padded to ``[B, 1.., n, m]``."""
    q, k, v, mask = inputs
    dq, dk, dv, dm = dims
    size = batch_size(inputs, dims)
    qf, kf, vf = (_front(ops, t, d, size) for t, d in zip((q, k, v), (dq, dk, dv)))
    m = mask
    if dm is not None:
        m = _pad_rank(ops, move_to_front(ops, mask, dm), len(shape_of(qf)) - 1)
    return ops.dot_product_attention(qf, kf, vf, m, scale=scale), 0


# ---- randomness --------------------------------------------------------------------------------------

def _random(name: str) -> BatchRule:
    def rule(ops: Ops, inputs: tuple[Any, ...], dims: Dims, **params: Any) -> Batched:
        (key,) = inputs
        keys = move_to_front(ops, key, dims[0])  # [B, 2]
        b = _concrete_size(shape_of(keys)[0], name, "with a batched key (one draw per key)")
        shape = tuple(params["shape"])
        if b == 0:
            return ops.full(shape=(0,) + shape, value=0, dtype=params["dtype"]), 0
        draws = []
        for i in range(b):
            one = ops.reshape(ops.slice(keys, starts=(i, 0), stops=(i + 1, 2), steps=(1, 1)), shape=(2,))
            draws.append(ops.reshape(getattr(ops, name)(one, **params), shape=(1,) + shape))
        return (draws[0] if b == 1 else ops.concat(*draws, axis=0)), 0
    rule.__name__ = f"{name}_batch"
    rule.__doc__ = (f"``{name}`` with a batched key ``[B, 2]``: one draw per key, stacked (a loop over a "
                    f"concrete ``B``). An unbatched key gives one unbatched draw (vmap's randomness='same').")
    return rule


for _name in names("random"):
    _register(_name)(_random(_name))


def batch_rule(name: str) -> BatchRule:
    """The batching rule of primitive ``name``; a :class:`MissingRuleError` naming it when there is none."""
    return find_rule(BATCH_RULES, name, "vmap", "batching rule")


def missing_rules() -> list[str]:
    """Primitives of :data:`tensorplay.ops.PRIMITIVE_NAMES` without a batching rule (empty when complete)."""
    return uncovered(BATCH_RULES)
