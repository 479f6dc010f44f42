"""The eager interpreter's shortcuts for the Tensor methods that run most often on small tensors.

A :class:`~tensorplay.tensor.Tensor` method calls its interpreter's entry point (``ops.tensor_getitem``,
``ops.tensor_reshape``, ...; see :class:`tensorplay.interpreter.BaseInterpreter`). The generic entry
points compose primitives through :mod:`tensorplay.derived`; here the eager interpreter handles the
common argument forms directly on the numpy payload:

- views (``x[1:3]``, ``x[:, None]``, ``x.T``, ``reshape``, ``unsqueeze``) are numpy views of the payload:
  numpy's own indexing checks the index, no shape rule runs and nothing is copied (``reshape`` of a
  non-contiguous payload copies, as numpy and PyTorch do);
- reductions, ``argmax`` and ``max(dim)`` take a validated axis straight to the ufunc;
- an integer tensor index is one ``numpy.take``.

The result, its dtype and its gradient are the ones the generic path makes, with fewer tape nodes:
``max(dim)`` records one node instead of the gather chain, and basic indexing one ``basic_index`` node
that keeps the key (the generic path records ``slice`` and ``reshape``; the slice's parameters are worked
out only when backward reaches the node). Anything unusual (a payload that is not a
numpy array, an argument of an unexpected type, an index numpy refuses) goes to the generic path, which
runs the full checks and raises their errors.
"""

from __future__ import annotations

import math
from types import EllipsisType, NoneType
from typing import Any

import numpy as np

from tensorplay import derived as _p
from tensorplay import recording
from tensorplay.recording import note_derived as _note_derived
from tensorplay import sorting as _sorting
from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.kernels._support import CONCATENATE, FLOATS as _FLOATS, nb
from tensorplay.interpreters.eager.kernels.threads import OPENBLAS_SERIAL_MAX_MACS, THREADED_MIN_WORK, threads_for
from tensorplay.interpreters.eager.results import result, view
from tensorplay.tensor import Tensor

_RECORDING_ACTIVE = recording.active

Array = np.ndarray[Any, Any]
AnyTensor = Any

_BASIC_ITEMS = frozenset({int, slice, NoneType, EllipsisType})
_INDEX_DTYPES = frozenset({np.dtype(np.int64), np.dtype(np.int32)})
_UFUNCS: dict[str, Any] = {"reduce_sum": np.add, "reduce_max": np.maximum, "reduce_min": np.minimum}
_ARG = {"argmax": np.ndarray.argmax, "argmin": np.ndarray.argmin}
_ALL_AXES: dict[int, tuple[int, ...]] = {}
_REVERSED_AXES: dict[int, tuple[int, ...]] = {}


def _all_axes(ndim: int) -> tuple[int, ...]:
    found = _ALL_AXES.get(ndim)
    if found is None:
        found = _ALL_AXES[ndim] = tuple(range(ndim))
    return found


def _one_axis(dim: Any, ndim: int) -> int:
    """``dim`` made non-negative when it is a plain int in ``[-ndim, ndim)``; -1 otherwise."""
    if type(dim) is int and -ndim <= dim < ndim:
        return dim % ndim
    return -1


def _axes(dim: Any, ndim: int) -> tuple[int, ...] | None:
    """The sorted axes a reduction over ``dim`` (``None``: all, or one int) covers; None when unusual."""
    if dim is None:
        return _all_axes(ndim)
    axis = _one_axis(dim, ndim)
    return None if axis < 0 else (axis,)


# ---- views ------------------------------------------------------------------------------------------

def getitem(ops: Any, x: AnyTensor, key: Any) -> AnyTensor:
    """``x[key]``: basic indexing (ints, slices, ``None``, ``...``) as a numpy view; one integer tensor
    as ``numpy.take`` along axis 0 (a ``gather``). While ``tp.graph.trace`` records a function and ``x`` is
    state from outside it, basic indexing (a view) is the recording's
    (:func:`tensorplay.interpreters.eager.results.view`)."""
    data = x._data
    if type(data) is np.ndarray:
        kind = type(key)
        if kind is tuple:
            basic = True
            for item in key:
                if type(item) not in _BASIC_ITEMS:
                    basic = False
                    break
        else:
            basic = kind in _BASIC_ITEMS
        if basic:
            if _RECORDING_ACTIVE[0]:
                frame = recording.outside_state(x)
                if frame is not None:
                    return _p.getitem(frame.recorder, x, key)
            made = _basic_index(ops, x, data, key)
            if made is not None:
                return made
        elif kind is Tensor and data.ndim:
            index = key._data
            if type(index) is np.ndarray and index.dtype in _INDEX_DTYPES:
                try:  # negative indices count from the end; out of range: the generic path's error
                    out = np.take(data, index, axis=0)
                except (IndexError, ValueError, TypeError):
                    pass
                else:
                    return result(ops, "gather", (x, key), {"axis": 0}, out)
    return _p.getitem(ops, x, key)


def _basic_index(ops: Any, x: AnyTensor, data: Array, key: Any) -> AnyTensor | None:
    try:
        out = data[key]
        if type(out) is not np.ndarray:  # every axis taken by an int: numpy gives a scalar, we a 0-d view
            out = data[(key if type(key) is tuple else (key,)) + (Ellipsis,)]
    except (IndexError, TypeError, ValueError):
        return None  # the generic path raises its own error
    if not (x._requires_grad and tape.grad_enabled()):
        return view(ops, "slice", x, {}, out)  # not recorded: the params are not needed
    # one node that keeps the key: the slice plan is worked out only if backward reaches it
    return view(ops, BASIC_INDEX_NODE, x, {"shape": data.shape, "key": key}, out)


BASIC_INDEX_NODE = "basic_index"
"""The tape node of ``x[key]`` for a basic ``key`` (ints, slices, ``None``, ``...``) on an eager tensor,
with params ``shape`` (``x``'s) and ``key``: what the generic path records as ``slice`` and ``reshape``
nodes, with their gradient (:func:`basic_index_plan`, :func:`basic_index_vjp`)."""


def basic_index_plan(shape: tuple[int, ...], key: Any) -> tuple[dict[str, Any], tuple[int, ...], bool]:
    """``(slice params, sliced shape, full)`` of a basic ``key`` numpy accepted for ``shape``: the ``slice``
    primitive's ``starts``/``stops``/``steps``, the shape the slice has before ints drop axes and ``None``
    adds them, and whether the slice takes every element in order."""
    starts, stops, steps, _, full = _slice_plan(shape, key if type(key) is tuple else (key,))
    sliced = tuple(len(range(a, b, c)) for a, b, c in zip(starts, stops, steps))
    return {"starts": starts, "stops": stops, "steps": steps}, sliced, full


def basic_index_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, shape: tuple[int, ...],
                    key: Any) -> tuple[Any, ...]:
    """The backward rule of :data:`BASIC_INDEX_NODE`, written with primitives: the cotangent reshaped to
    the slice's shape, then the ``slice`` rule (zeros around it), as the generic path's nodes give."""
    from tensorplay.rules.vjp import VJP_RULES

    params, sliced, full = basic_index_plan(shape, key)
    if tuple(g.shape) != sliced:
        g = ops.reshape(g, shape=sliced)
    if full:
        return (g,)
    return VJP_RULES["slice"](ops, g, inputs, None, **params)


tape.EXTRA_VJP[BASIC_INDEX_NODE] = basic_index_vjp
tape.EXTRA_VALUE_FREE.add(BASIC_INDEX_NODE)


def _slice_plan(shape: tuple[int, ...], items: tuple[Any, ...]) -> tuple[Any, Any, Any, bool, bool]:
    """``(starts, stops, steps, reshaped, full)`` of basic ``items`` that numpy accepted for ``shape``: the
    ``slice`` primitive's params, whether ints or ``None`` then change the shape, and whether the slice
    takes every element in order (as :func:`tensorplay.derived.getitem` computes them)."""
    fill = 0
    if Ellipsis in items:
        fill = len(shape) - sum(1 for it in items if it is not None and it is not Ellipsis)
    starts: list[int] = []
    stops: list[int] = []
    steps: list[int] = []
    reshaped = False
    full = True
    axis = 0
    for it in items:
        if it is None:
            reshaped = True
            continue
        if it is Ellipsis:
            for _ in range(fill):
                starts.append(0)
                stops.append(shape[axis])
                steps.append(1)
                axis += 1
            continue
        size = shape[axis]
        if type(it) is slice:
            start, stop, step = it.indices(size)
        else:
            start = it % size
            stop, step = start + 1, 1
            reshaped = True
        if full and (start or stop != size or step != 1):
            full = False
        starts.append(start)
        stops.append(stop)
        steps.append(step)
        axis += 1
    for rest in shape[axis:]:
        starts.append(0)
        stops.append(rest)
        steps.append(1)
    return tuple(starts), tuple(stops), tuple(steps), reshaped, full


def reshape(ops: Any, x: AnyTensor, args: tuple[Any, ...]) -> AnyTensor:
    """``x.reshape(*args)`` (``args``: the sizes, or one tuple of them; one may be -1)."""
    data = x._data
    shape = args[0] if len(args) == 1 and type(args[0]) in (tuple, list) else args
    if type(data) is np.ndarray:
        for d in shape:
            if type(d) is not int or d < -1:  # numpy reads any negative size as -1; the generic path refuses
                break
        else:
            try:
                out = data.reshape(shape)
            except (ValueError, TypeError):
                pass  # the generic path's error
            else:
                if out.shape == data.shape:
                    return x
                return view(ops, "reshape", x, {"shape": out.shape}, out)
    return _p.reshape(ops, x, _p.shape_args(args))


def permute(ops: Any, x: AnyTensor, dims: tuple[Any, ...] | None) -> AnyTensor:
    """``x.permute(*dims)``; ``dims=None``: every axis reversed (``x.T``)."""
    data = x._data
    if type(data) is np.ndarray:
        ndim = data.ndim
        perm: tuple[int, ...] | None
        if dims is None:
            if ndim < 2:
                return x  # reversing one axis (or none) changes nothing
            perm = _REVERSED_AXES.get(ndim)
            if perm is None:
                perm = _REVERSED_AXES[ndim] = tuple(range(ndim - 1, -1, -1))
            return view(ops, "permute", x, {"perm": perm}, data.transpose(perm))
        perm = _permutation(dims[0] if len(dims) == 1 and type(dims[0]) in (tuple, list) else dims, ndim)
        if perm is not None:
            if perm == _all_axes(ndim):
                return x
            return view(ops, "permute", x, {"perm": perm}, data.transpose(perm))
    return _p.permute(ops, x, tuple(range(x.ndim - 1, -1, -1)) if dims is None else _p.shape_args(dims))


def _permutation(dims: Any, ndim: int) -> tuple[int, ...] | None:
    if len(dims) != ndim:
        return None
    perm = []
    for d in dims:
        axis = _one_axis(d, ndim)
        if axis < 0:
            return None
        perm.append(axis)
    out = tuple(perm)
    return out if len(set(out)) == ndim else None


def unsqueeze(ops: Any, x: AnyTensor, dim: Any) -> AnyTensor:
    """``x.unsqueeze(dim)``: a size-1 axis inserted at ``dim``."""
    data = x._data
    if type(data) is np.ndarray:
        axis = _one_axis(dim, data.ndim + 1)
        if axis >= 0:
            shape = data.shape
            new = shape[:axis] + (1,) + shape[axis:]
            return view(ops, "reshape", x, {"shape": new}, data.reshape(new))
    return _p.unsqueeze(ops, x, dim)


# ---- reductions ---------------------------------------------------------------------------------------

def reduce(ops: Any, prim: str, x: AnyTensor, dim: Any, keepdim: bool) -> AnyTensor:
    """``x.sum``/``amax``/``amin`` over ``dim`` (``None``: all axes, or one int)."""
    data = x._data
    if type(data) is np.ndarray:
        axes = _axes(dim, data.ndim)
        if axes is not None:
            if prim == "reduce_sum" and (keepdim is True or keepdim is False):
                out = small_sum(data, axes, keepdim)
                if out is not None:
                    made: AnyTensor = Tensor(ops, out)
                    if _RECORDING_ACTIVE[0]:
                        _note_derived(made, (x,))
                    if x._requires_grad and tape.grad_enabled():  # ``result``, its params made only here
                        tape.attach(made, prim, (x,), {"axes": axes, "keepdims": keepdim})
                    return made
            return ops._reduce(prim, _UFUNCS[prim], x, axes, keepdim, True)
    return _p.reduce(ops, prim, x, dim, keepdim)


SMALL_SUM_MAX = 1 << 16
"""The most elements :func:`small_sum` sums itself (beyond that numpy's own loop, on whatever threads)."""


def small_sum(data: Array, axes: tuple[int, ...], keepdim: bool) -> Array | None:
    """``numpy.add.reduce(data, axis=axes, keepdims=keepdim)`` bit for bit, of a non-empty row-major
    float ``data`` of at most :data:`SMALL_SUM_MAX` elements over every axis or the last one, by the
    jitted kernels that add in numpy's pairwise order: one call without the ufunc machinery, which costs
    several times the additions at these sizes. ``None`` for any other input, and when a sum is not
    finite (numpy then warns of the overflow or the invalid operation: the caller's numpy call does)."""
    n = data.size
    ndim = data.ndim
    if not 0 < n <= SMALL_SUM_MAX or not ndim or data.dtype not in _FLOATS or not data.flags.c_contiguous:
        return None
    if len(axes) == ndim:
        total = nb().pairwise_sum(data.ravel())
        if not math.isfinite(total):
            return None
        out = np.array(total, data.dtype)
        return out.reshape((1,) * ndim) if keepdim else out
    if axes[0] != ndim - 1:
        return None
    shape = data.shape
    width = shape[-1]
    sums = np.empty(shape[:-1] + (1,) if keepdim else shape[:-1], data.dtype)
    if not nb().pairwise_sum_rows(data.ravel(), width, sums.ravel()):
        return None
    return sums


def mean(ops: Any, x: AnyTensor, dim: Any, keepdim: bool) -> AnyTensor:
    """``x.mean(dim)``: a recorded sum divided by the count (as the generic path)."""
    data = x._data
    if type(data) is np.ndarray and data.dtype.kind == "f":
        axes = _axes(dim, data.ndim)
        if axes is not None:
            shape = data.shape
            count = 1
            for a in axes:
                count *= shape[a]
            if count and (keepdim is True or keepdim is False):
                out = _UFUNCS["reduce_sum"].reduce(data, axis=axes, keepdims=keepdim) / count  # the sum, then div
                if type(out) is not np.ndarray:
                    out = np.asarray(out)
                made: AnyTensor = Tensor(ops, out)
                if _RECORDING_ACTIVE[0]:
                    _note_derived(made, (x,))
                if x._requires_grad and tape.grad_enabled():
                    tape.record(MEAN_NODE, (x,), {"axes": axes, "keepdims": keepdim, "count": count}, made)
                return made
    return _p.mean(ops, x, dim, keepdim)


MEAN_NODE = "mean"
"""The tape node of ``x.mean(dim)`` (the generic path records ``reduce_sum`` then ``div``)."""


def _mean_vjp(ops: Any, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, axes: tuple[int, ...],
              keepdims: bool, count: int) -> tuple[Any, ...]:
    """``g / count`` broadcast back over the reduced axes (the ``div`` then ``reduce_sum`` rules)."""
    shape = tuple(inputs[0]._data.shape)
    if not keepdims:
        g = ops.reshape(g, shape=tuple(1 if i in axes else d for i, d in enumerate(shape)))
    return (ops.broadcast_to(ops.div(g, count), shape=shape),)


tape.EXTRA_VJP[MEAN_NODE] = _mean_vjp
tape.EXTRA_VALUE_FREE.add(MEAN_NODE)


def arg_reduce(ops: Any, prim: str, x: AnyTensor, dim: Any, keepdim: bool) -> AnyTensor:
    """``x.argmax(dim)``/``argmin`` along one int axis."""
    data = x._data
    if type(data) is np.ndarray and dim is not None:
        axis = _one_axis(dim, data.ndim)
        if axis >= 0:
            return ops._arg(prim, _ARG[prim], x, axis, keepdim)
    return _p.arg_reduce(ops, prim, x, dim, keepdim)


def extremum(ops: Any, x: AnyTensor, dim: Any, keepdim: bool, largest: bool) -> tuple[AnyTensor, AnyTensor]:
    """``(values, indices)`` of ``x.max(dim)`` (``largest``) or ``x.min(dim)``: the first extremum along
    ``dim`` (NaN counts as one); the gradient goes to that position alone."""
    data = x._data
    if type(data) is np.ndarray and data.size and (keepdim is True or keepdim is False):
        axis = _one_axis(dim, data.ndim)
        if axis >= 0:
            picked = data.argmax(axis=axis, keepdims=True) if largest else data.argmin(axis=axis, keepdims=True)
            values = _take_along(data, picked, axis)
            indices = picked
            if not keepdim:
                shape = data.shape[:axis] + data.shape[axis + 1:]
                values, indices = values.reshape(shape), picked.reshape(shape)
            out: AnyTensor = Tensor(ops, values)
            if x._requires_grad and tape.grad_enabled():
                tape.record(SELECT_NODE, (x,), {"axis": axis, "picked": picked}, out)
            index: AnyTensor = Tensor(ops, indices)
            if _RECORDING_ACTIVE[0]:
                _note_derived(out, (x,))
                _note_derived(index, (x,))
            return out, index
    return _sorting.extremum(ops, x, dim, keepdim, largest)


def _take_along(data: Array, picked: Array, axis: int) -> Array:
    """``numpy.take_along_axis(data, picked, axis)`` for one index per row (``picked`` has size 1 along
    ``axis``); of a 1-d array, or along the last axis of a row-major one, one ``take`` (at ``row * n + picked``)."""
    if data.ndim == 1:
        return data.take(picked)
    n = data.shape[axis]
    if axis != data.ndim - 1 or not data.flags.c_contiguous:
        return np.take_along_axis(data, picked, axis=axis)
    rows = data.size // n
    offsets = _ROW_STARTS.get((rows, n))
    if offsets is None:
        if len(_ROW_STARTS) > 256:
            _ROW_STARTS.clear()
        offsets = _ROW_STARTS[(rows, n)] = np.arange(0, rows * n, n, dtype=np.int64)
    return data.reshape(-1).take(offsets + picked.reshape(-1)).reshape(picked.shape)


_ROW_STARTS: dict[tuple[int, int], Array] = {}


SELECT_NODE = "select_along_axis"
"""The tape node of ``max(dim)``/``min(dim)``: ``values = take_along_axis(x, picked, axis)`` (reshaped)."""


def _select_vjp(ops: Any, g: AnyTensor, inputs: tuple[Any, ...], output: AnyTensor, *, axis: int,
                picked: Array) -> tuple[Any, ...]:
    """The cotangent of :data:`SELECT_NODE`: ``g`` scattered to the selected positions of a zero ``x``,
    written with primitives (so ``create_graph=True`` differentiates it again)."""
    x = inputs[0]
    shape = tuple(x._data.shape)
    size = int(x._data.size)
    positions = np.take_along_axis(np.arange(size, dtype=np.int64).reshape(shape), picked, axis=axis).reshape(-1)
    flat_g = ops.reshape(g, shape=(positions.size,))
    zeros = ops.full(shape=(size,), value=0.0, dtype=x._data.dtype.name)
    scattered = ops.scatter_add(zeros, ops.constant(positions), flat_g, axis=0)
    return (ops.reshape(scattered, shape=shape),)


tape.EXTRA_VJP[SELECT_NODE] = _select_vjp
tape.EXTRA_VALUE_FREE.add(SELECT_NODE)  # the rule reads the input's shape and dtype, never its values


# ---- row kernels on small inputs -----------------------------------------------------------------------

ROW_KERNELS = {"softmax": "softmax_rows", "log_softmax": "log_softmax_rows"}
"""The row kernel of each normalisation along the last axis (for :func:`small_rows`)."""


def small_rows(kernel: str, data: Array, *args: Any) -> Array | None:
    """``kernel`` (``softmax_rows``, ``log_softmax_rows`` or ``layer_norm_rows`` of the jitted kernels: one
    row at a time along the last axis) on a non-empty row-major float ``data``, called on this thread
    when the kernels' own entry point would not split it across threads either (``threads_for`` says 1):
    the same kernel call without the entry point's conversions, which cost several times the work at
    these sizes. ``args`` go between the input and the output (``gamma, beta, eps``). ``None`` otherwise."""
    size = data.size
    if not size or data.dtype not in _FLOATS or not data.flags.c_contiguous:
        return None
    n = data.shape[-1]
    rows = size // n
    if size >= THREADED_MIN_WORK and threads_for(rows, size) != 1:
        return None
    run = _JITTED_BY_NAME.get(kernel)
    if run is None:
        run = _JITTED_BY_NAME[kernel] = getattr(nb(), kernel)
    ndim = data.ndim
    if ndim == 2:
        out = np.empty_like(data)  # row-major, as ``data`` is
        run(data, *args, out, 0, rows)
        return out
    if ndim == 1:  # one row: indexing makes the 2-d views at half a reshape's cost
        row = np.empty((1, n), data.dtype)
        run(data[None], *args, row, 0, 1)
        single: Array = row[0]
        return single
    out = np.empty_like(data)
    run(data.reshape(rows, n), *args, out.reshape(rows, n), 0, rows)
    return out


_JITTED_BY_NAME: dict[str, Any] = {}


def small_flat(data: Array, kernel: str) -> Array | None:
    """The jitted elementwise ``kernel(x, out, start, stop)`` (e.g. ``sigmoid_flat``, ``relu_flat``) of a
    non-empty float ``data`` called directly when the kernels' entry point would not split it across
    threads either: the same kernel and results, without the entry point's conversions. A layout other
    than row-major is read through ``ravel``'s row-major copy (an elementwise kernel does not care which
    order it visits). ``None`` otherwise."""
    n = data.size
    if not n or data.dtype not in _FLOATS or (n >= THREADED_MIN_WORK and threads_for(n, n) != 1):
        return None
    out = np.empty(data.shape, data.dtype)
    getattr(nb(), kernel)(data.ravel(), out.ravel(), 0, n)  # ``out`` is row-major: its ``ravel`` is a view
    return out


# ---- joins --------------------------------------------------------------------------------------------

def cat(ops: Any, items: list[Any] | tuple[Any, ...], dim: Any) -> AnyTensor | None:
    """``tp.cat(items, dim)`` of eager tensors (the caller checked that each item is a tensor of this
    interpreter) of one float dtype along a valid int ``dim``: one ``numpy.concatenate`` (which checks the
    ranks and the other sizes), recorded as the ``concat`` primitive. ``None`` otherwise, or when numpy
    refuses: the caller runs the primitive, whose rule raises the clear error."""
    first = items[0]._data
    if type(first) is not np.ndarray or type(dim) is not int:
        return None
    dtype = first.dtype
    ndim = first.ndim
    if dtype not in _FLOATS or not -ndim <= dim < ndim:
        return None
    arrays = []
    recording = False
    for x in items:
        data = x._data
        if type(data) is not np.ndarray or data.dtype is not dtype:
            return None
        arrays.append(data)
        recording = recording or x._requires_grad
    try:
        out = CONCATENATE(arrays, axis=dim)
    except (ValueError, TypeError):
        return None
    made: AnyTensor = Tensor(ops, out)
    if _RECORDING_ACTIVE[0]:
        _note_derived(made, tuple(items))
    if recording and tape.grad_enabled():  # ``result``, with the node's inputs and params made only here
        tape.attach(made, "concat", tuple(items), {"axis": dim % ndim})
    return made


# ---- products -----------------------------------------------------------------------------------------

def matmul(ops: Any, a: Any, b: Any) -> AnyTensor:
    """``a @ b`` of two eager tensors of rank 2 or more (one BLAS call); vectors and other operands take
    the generic path."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        ad, bd = a._data, b._data
        if type(ad) is np.ndarray and type(bd) is np.ndarray and ad.ndim >= 2 and bd.ndim >= 2:
            if ad.ndim == 2 and bd.ndim == 2 and ad.dtype is bd.dtype and ad.dtype in _FLOATS \
                    and ad.size * bd.shape[1] <= OPENBLAS_SERIAL_MAX_MACS:  # m*k*n
                try:  # a small GEMM, which OpenBLAS runs on this thread anyway (what the method does)
                    out = np.matmul(ad, bd)
                except ValueError:
                    pass  # the method raises the rule's error
                else:
                    made: AnyTensor = Tensor(ops, out)
                    if _RECORDING_ACTIVE[0]:
                        _note_derived(made, (a, b))
                    if (a._requires_grad or b._requires_grad) and tape.grad_enabled():  # ``result`` for two tensors
                        tape.attach(made, "matmul", (a, b), {})
                    return made
            return ops._matmul_arrays(a, b)
    return _p.matmul(ops, a, b)


__all__ = ["MEAN_NODE", "SELECT_NODE", "arg_reduce", "cat", "small_flat", "small_rows", "small_sum", "extremum", "getitem", "matmul", "mean", "permute", "reduce", "reshape",
           "unsqueeze"]
