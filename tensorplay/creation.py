"""Factories that make eager tensors (``tp.tensor``, ``tp.zeros``, ``tp.randn``, ...) and
joins (``tp.cat``, ``tp.stack``, ``tp.where``).

Shapes are typed: ``tp.zeros(Batch(2), Feat(3))`` is a ``Tensor[Batch, Feat]``.
The default dtype is float32; Python ints give int64 and bools give bool,
as in PyTorch. Random factories draw a fresh key from the global generator
(``tp.manual_seed``) and run the counter-based random primitives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal, TypeVarTuple, overload

import numpy as np

from tensorplay.interpreters.eager import fastpath as _eager_fastpath
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay import dtypes as _dt
from tensorplay import derived as _p
from tensorplay import random_state, recording
from tensorplay.pydata import at, check_ints_fit, check_ints_to_float, check_scalar_fits, find_leaf, has_non_int
from tensorplay.symbolic import SymDim
from tensorplay.devices import check_device
from tensorplay.generator import Generator
from tensorplay.errors import DTypeError, ShapeError
from tensorplay import tensor as _tensor_module
from tensorplay.tensor import Tensor, highest_interpreter, pick_interpreter

S = TypeVarTuple("S")
Scalar = bool | int | float


def _dtype_name(dtype: Any, default: str = "float32") -> str:
    return default if dtype is None else _dt.to_dtype(dtype).name


def _check_shape(shape: Sequence[Any], where: str) -> tuple[int, ...]:
    out = []
    for i, d in enumerate(shape):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise ShapeError(f"{where}: size {i} must be an int, got {type(d).__name__} {d!r}")
        if d < 0:
            raise ShapeError(f"{where}: size {i} is negative ({d}) in shape {list(shape)}")
        out.append(int(d))
    return tuple(out)


def _check_number(value: Any, where: str, finite: bool) -> None:
    """A :class:`DTypeError` unless ``value`` is a Python or numpy number; with ``finite``, a
    :class:`ShapeError` for an inf or NaN (a range cannot be counted to it)."""
    if not isinstance(value, (int, float, np.integer, np.floating)):
        raise DTypeError(f"{where} must be a number, got {type(value).__name__} {value!r}")
    if finite and isinstance(value, (float, np.floating)) and not np.isfinite(value):
        raise ShapeError(f"{where} must be finite, got {value!r}")


def _on_cpu(device: Any, where: str) -> None:
    """A factory's ``device=``: ``None``, ``"cpu"`` and ``tp.device("cpu")`` are accepted (tensorplay runs on
    the CPU only); any other device is the :class:`~tensorplay.errors.DeviceError` that ``Tensor.to`` gives."""
    if device is not None:
        check_device(device, where)


def _new(array: np.ndarray[Any, Any], requires_grad: bool) -> Tensor[*tuple[Any, ...]]:
    t = eager.wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _check_numbers(data: Any) -> None:
    """A :class:`DTypeError` unless every leaf of ``data`` (numpy made an object array of it) is a number."""
    if find_leaf(data, lambda v: not isinstance(v, (int, float, np.integer, np.floating))) is not None:
        raise DTypeError(f"tensor: cannot make a tensor from data of numpy dtype object ({type(data).__name__}); "
                         "expected numbers or bools")


def _sizes_as_values(data: Any) -> Any:
    """``data`` (nested lists and tuples) with each symbolic size replaced by its value: ``tp.tensor([T])``
    under a dynamic dim needs the size's value (:meth:`SymDim.value_for`; ``tp.full((), T)`` keeps it
    symbolic)."""
    if isinstance(data, SymDim):
        return data.value_for("tp.tensor of a symbolic size (tp.full((), size) keeps it symbolic)")
    if isinstance(data, (list, tuple)):
        return [_sizes_as_values(v) for v in data]
    return data


def _from_python(data: Any, array: np.ndarray[Any, Any], target: np.dtype[Any] | None) -> np.ndarray[Any, Any]:
    """``array = np.array(data)`` for nested Python lists and numbers ``data``, with numpy's lossy handling
    of ints beyond int64 resolved as PyTorch's: without a ``target`` dtype, ints alone infer int64, so such
    an int raises :class:`OverflowError` (numpy would make uint64, float64 or objects of the data); mixed
    with floats they become floats (an object array, converted here)."""
    kind = array.dtype.kind
    if kind == "O":
        _check_numbers(data)
    if target is None and (kind == "u" or (kind in "fO" and not has_non_int(data))):
        check_ints_fit(data, np.dtype(np.int64), "tensor", inferred=True)
    if kind == "O" and (target is None or target.kind == "f"):
        check_ints_to_float(data, "tensor")
        return array.astype(np.float64)
    return array


def _first(where: np.ndarray[Any, Any]) -> tuple[int, ...]:
    """The index of the first True of the bool array ``where`` (``()`` for a 0-d one)."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(where)), where.shape)) if where.ndim else ()


def fit_dtype(array: np.ndarray[Any, Any], dtype: np.dtype[Any], where: str) -> np.ndarray[Any, Any]:
    """``array`` converted to the tensor dtype ``dtype``; an :class:`OverflowError` when a value does not fit
    an integer dtype (numpy's cast would wrap around) or is not finite, as PyTorch refuses it."""
    if dtype.kind in "iu" and array.dtype.kind in "iufO" and array.size:
        info = np.iinfo(dtype)
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            spot = _first(~np.isfinite(array))
            raise OverflowError(f"{where}: value {array[spot]}{at(spot)} cannot be converted to {dtype.name} "
                                "(not finite)")
        low, high = array.min(), array.max()
        # a float bound compares as float: 2**63 - 1 rounds up to 2**63, which already does not fit
        too_high = high >= float(info.max) + 1.0 if array.dtype.kind == "f" else high > info.max
        if low < info.min or too_high:
            bad = low if low < info.min else high
            raise OverflowError(f"{where}: value {bad}{at(_first(array == bad))} does not fit {dtype.name} "
                                f"(range [{info.min}, {info.max}]); it would wrap around")
    return array if array.dtype == dtype else array.astype(dtype)


def tensor(data: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]:
    """A new tensor holding a copy of ``data`` (nested lists, scalars, numpy arrays or a tensor).

    The dtype is inferred like PyTorch (floats -> float32, ints -> int64, bools -> bool;
    a float64 numpy array stays float64) unless ``dtype`` is given. An integer that does not fit
    the dtype raises :class:`OverflowError` naming it and its index in ``data`` (never wraps around, and
    an int beyond int64 is not silently made a float when the data has no float); a numpy masked array
    is refused.
    """
    _on_cpu(device, "tensor")
    if isinstance(data, Tensor):
        data = np.asarray(data._ops.concrete(data))
    elif isinstance(data, np.ndarray):
        data = _dt.native_order(_dt.plain_array(data, "tensor"))  # big-endian: a native-order copy
    python = not isinstance(data, np.ndarray)
    target = None if dtype is None else _dt.to_dtype(dtype).numpy
    array = np.array(data, copy=True)
    if python:
        if array.dtype.kind == "O" and find_leaf(data, lambda v: isinstance(v, SymDim)) is not None:
            data = _sizes_as_values(data)
            array = np.array(data, copy=True)
        array = _from_python(data, array, target)
    if target is not None:
        try:
            with np.errstate(over="ignore"):  # float64 -> float32 overflows to inf, as PyTorch
                array = fit_dtype(array, target, "tensor")
        except OverflowError:
            if python and target.kind in "iu":
                check_ints_fit(data, target, "tensor", inferred=False)  # names the int and its position
            raise
    elif python:
        if array.dtype.kind == "f":
            with np.errstate(over="ignore"):
                array = array.astype(np.float32)
        elif array.dtype.kind in "iuO":
            array = fit_dtype(array, np.dtype(np.int64), "tensor")
        elif array.dtype.kind != "b":
            raise DTypeError(f"tensor: cannot make a tensor from data of numpy dtype {array.dtype} "
                             f"({type(data).__name__}); expected numbers or bools")
    _dt.from_numpy_dtype(array.dtype)
    return _new(array, requires_grad)


def from_numpy(array: np.ndarray[Any, Any]) -> Tensor[*tuple[Any, ...]]:
    """A tensor sharing memory with ``array`` (writes to either are seen by both), as PyTorch.

    A subclass (``np.matrix``, a memmap, ...) is viewed as a plain ndarray (same memory), so it
    behaves like any tensor (a matrix's rows are not kept 2-d); a masked array is refused, and so is an
    array not in the machine's byte order (big-endian), which no tensor can share: ``tp.tensor(array)``
    makes a native-order copy of it."""
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    array = _dt.plain_array(array, "from_numpy")
    if not array.dtype.isnative:
        raise DTypeError(f"from_numpy: the array's dtype {array.dtype.str} ({array.dtype.name}) is not in the "
                         "machine's byte order, so a tensor cannot share its memory; tp.tensor(array) makes a "
                         "native-order copy (or convert with .astype(array.dtype.newbyteorder('=')))")
    _dt.from_numpy_dtype(array.dtype)
    return eager.wrap(array)


def full(*shape_and_value: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]:
    """``full(shape, value)``: a tensor of ``shape`` filled with ``value`` (dtype from the value: bool,
    int64 for an int, else float32). A value the dtype cannot hold (an int out of its range, an inf for
    an integer dtype, a finite float beyond float32's range) raises :class:`OverflowError`, as PyTorch."""
    _on_cpu(device, "full")
    if len(shape_and_value) != 2:
        raise TypeError("full: expected full(shape, fill_value)")
    shape, value = shape_and_value
    default = "bool" if isinstance(value, bool) else "int64" if isinstance(value, (int, SymDim)) else "float32"
    name = _dtype_name(dtype, default)
    if not isinstance(value, SymDim):
        check_scalar_fits(value, np.dtype(name), "full: fill value")
    return _filled("full", tuple(shape), value, name, requires_grad)  # type: ignore[no-any-return]


@overload
def zeros(shape: tuple[*S], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]: ...


@overload
def zeros(shape: list[int], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]: ...


@overload
def zeros(*shape: *S, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]: ...


def zeros(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Any:  # type: ignore[misc]
    """A tensor of zeros: ``zeros(2, 3)`` or ``zeros((2, 3))`` (sizes may be symbolic, see :func:`_filled`)."""
    _on_cpu(device, "zeros")
    return _filled("zeros", _p.shape_args(shape), 0, _dtype_name(dtype), requires_grad)


@overload
def ones(shape: tuple[*S], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]: ...


@overload
def ones(shape: list[int], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]: ...


@overload
def ones(*shape: *S, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]: ...


def ones(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Any:  # type: ignore[misc]
    """A tensor of ones: ``ones(2, 3)`` or ``ones((2, 3))`` (sizes may be symbolic, see :func:`_filled`)."""
    _on_cpu(device, "ones")
    return _filled("ones", _p.shape_args(shape), 1, _dtype_name(dtype), requires_grad)


@overload
def empty(shape: tuple[*S], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]: ...


@overload
def empty(shape: list[int], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]: ...


@overload
def empty(*shape: *S, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]: ...


def empty(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Any:  # type: ignore[misc]
    """A tensor whose values are unspecified (here: zeros, so nothing uninitialised leaks)."""
    _on_cpu(device, "empty")
    return _filled("empty", _p.shape_args(shape), 0, _dtype_name(dtype), requires_grad)


def _symbolic_ops(sizes: Sequence[Any], where: str) -> Any:
    """The recording a factory runs in when one of ``sizes`` is symbolic (``tp.ones(T, T)`` with
    ``T = x.shape[1]`` under ``tp.export`` or a dynamic ``tp.compile``), else ``None``. A symbolic size with
    no recording in progress (one kept from a finished trace) is a :class:`ShapeError`."""
    if not any(isinstance(d, SymDim) for d in sizes):
        return None
    ops = _creating()
    if ops is eager:
        d = next(d for d in sizes if isinstance(d, SymDim))
        raise ShapeError(f"{where}: size {d} is a symbolic dim, but no graph recording is in progress (a size "
                         "kept from a finished trace?); pass an int")
    return ops


def _filled(where: str, shape: Sequence[Any], value: Scalar, dtype: str, requires_grad: bool) -> Any:
    """``value`` everywhere in a tensor of ``shape``: eagerly a numpy array; when a size is symbolic
    (see :func:`_symbolic_ops`) a recorded ``full`` of that symbolic shape, so the program keeps the size
    dynamic instead of specialising it."""
    ops = None
    for d in shape:  # a plain loop: the all-int check costs less than a generator on this eager path
        if type(d) is not int:
            ops = _symbolic_ops(tuple(shape) + (value,), where)
            break
    if isinstance(value, SymDim):
        ops = _symbolic_ops(tuple(shape) + (value,), where)
    if ops is None:
        dims = _check_shape(shape, where)
        zero = type(value) is int and value == 0  # calloc'd pages: a large zeros costs no writes
        return _new(np.zeros(dims, dtype=dtype) if zero else np.full(dims, value, dtype=dtype), requires_grad)
    dims = _check_dims(shape, where, ops)
    if isinstance(value, SymDim):  # ``tp.full((n,), x.shape[1])``: the size as a value, recorded
        out = ops.add(ops.full(shape=dims, value=0, dtype=dtype), value)
        out = out if out.dtype.name == dtype else ops.cast(out, dtype=dtype)
    else:
        out = ops.full(shape=dims, value=value, dtype=dtype)
    return out.requires_grad_(True) if requires_grad else out


def _filled_like(x: Tensor[*tuple[Any, ...]], value: Scalar, dtype: Any, requires_grad: bool) -> Any:
    """``value`` everywhere with ``x``'s shape, made by ``x``'s interpreter: eagerly an array; under a
    recording a ``full`` node (symbolic sizes kept), so what is built from it stays in the recording."""
    ops = _creating(x)
    name = _dtype_name(dtype, x.dtype.name)
    check_scalar_fits(value, np.dtype(name), "full_like: fill value")
    if ops is eager:
        return _new(np.full(tuple(x.shape), value, dtype=name), requires_grad)
    out = ops.full(shape=tuple(x.shape), value=value, dtype=name)
    return out.requires_grad_(True) if requires_grad else out


class _TensorFactories:
    """What ``Tensor.new_zeros``, ``new_ones``, ``new_empty``, ``new_full`` and ``new_tensor`` call
    (registered in :data:`tensorplay.tensor._FACTORY_HOOK`)."""

    @staticmethod
    def new_filled(x: Tensor[*tuple[Any, ...]], where: str, size: tuple[Any, ...], value: Scalar, dtype: Any,
                   device: Any, requires_grad: bool) -> Any:
        """``value`` everywhere in a tensor of ``size`` (ints, or one tuple/list of them; symbolic sizes
        under a recording), dtype ``dtype`` or ``x``'s, made by ``x``'s interpreter."""
        _on_cpu(device, f"Tensor.{where}")
        name = _dtype_name(dtype, x.dtype.name)
        check_scalar_fits(value, np.dtype(name), f"Tensor.{where}: fill value")
        shape = _p.shape_args(size)
        ops = _creating(x)
        dims = _check_dims(shape, f"Tensor.{where}", ops)
        if ops is eager:
            return _new(np.full(dims, value, dtype=name), requires_grad)
        out = ops.full(shape=dims, value=value, dtype=name)
        return out.requires_grad_(True) if requires_grad else out

    @staticmethod
    def new_tensor(x: Tensor[*tuple[Any, ...]], data: Any, dtype: Any, device: Any, requires_grad: bool) -> Any:
        """A copy of ``data`` as a new leaf tensor, dtype ``dtype`` or ``x``'s."""
        _on_cpu(device, "Tensor.new_tensor")
        target = x.dtype if dtype is None else dtype
        if isinstance(data, Tensor):
            copied = data.detach().clone().astype(target)
            return copied.requires_grad_(True) if requires_grad else copied
        return tensor(data, dtype=target, requires_grad=requires_grad)


_tensor_module._FACTORY_HOOK[:] = [_TensorFactories()]


def zeros_like(x: Tensor[*S], dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]:
    """Zeros with the shape (and dtype, unless given) of ``x``, in ``x``'s interpreter."""
    _on_cpu(device, "zeros_like")
    return _filled_like(x, 0, dtype, requires_grad)  # type: ignore[no-any-return]


def ones_like(x: Tensor[*S], dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]:
    """Ones with the shape (and dtype, unless given) of ``x``, in ``x``'s interpreter."""
    _on_cpu(device, "ones_like")
    return _filled_like(x, 1, dtype, requires_grad)  # type: ignore[no-any-return]


def full_like(x: Tensor[*S], value: Scalar, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]:
    """``value`` everywhere, with the shape (and dtype, unless given) of ``x``, in ``x``'s interpreter."""
    _on_cpu(device, "full_like")
    return _filled_like(x, value, dtype, requires_grad)  # type: ignore[no-any-return]


def empty_like(x: Tensor[*S], dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*S]:
    """Like :func:`zeros_like` (values unspecified)."""
    _on_cpu(device, "empty_like")
    return _filled_like(x, 0, dtype, requires_grad)  # type: ignore[no-any-return]


def arange(start: Scalar, end: Scalar | None = None, step: Scalar = 1, dtype: Any = None,
           requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]:
    """``[start, end)`` in steps of ``step``; int64 when all arguments are ints, else float32. An int
    argument beyond int64 raises :class:`OverflowError`, as PyTorch.

    Under a recording the bounds may be symbolic sizes (``tp.arange(x.shape[1])``): with integral start,
    end and step the result is recorded (``iota``), its length ``ceil((end - start) / step)`` a symbolic
    size; otherwise the length is no integer expression of the size and its value is needed (see
    :meth:`~tensorplay.symbolic.SymDim.value_for`)."""
    _on_cpu(device, "arange")
    if end is None:
        start, end = 0, start
    if isinstance(step, SymDim):
        raise ShapeError(f"arange: step must be a number, not the symbolic size {step}")
    for what, v in (("start", start), ("end", end), ("step", step)):
        if not isinstance(v, SymDim):
            _check_number(v, f"arange: {what}", finite=True)
    if step == 0:
        raise ShapeError("arange: step must be non-zero")
    ints = all(isinstance(v, (int, SymDim)) and not isinstance(v, bool) for v in (start, end, step))
    for what, v in (("start", start), ("end", end), ("step", step)):  # counted in int64 or float64
        if not isinstance(v, SymDim):
            check_scalar_fits(v, np.dtype(np.int64 if ints else np.float64), f"arange: {what}")
    name = _dtype_name(dtype, "int64" if ints else "float32")
    if isinstance(start, SymDim) or isinstance(end, SymDim):
        return _symbolic_arange(_symbolic_ops((start, end), "arange"), start, end, step,
                                name, requires_grad)
    values = np.arange(start, end, step, dtype=np.float64 if not ints else np.int64)
    return _new(fit_dtype(values, np.dtype(name), "arange"), requires_grad)


def _integral(value: Any) -> bool:
    return isinstance(value, SymDim) or (isinstance(value, (int, float, np.integer, np.floating))
                                         and not isinstance(value, bool) and float(value).is_integer())


def _symbolic_arange(ops: Any, start: Any, end: Any, step: Any, dtype: str, requires_grad: bool) -> Any:
    """``arange`` with a symbolic bound, recorded in ``ops``: ``start + step * iota(length)``. With a
    non-integer start, end or step the length is no integer expression of the size: the size's value is
    needed (``tp.compile`` specialises on it; export names the call)."""
    if not all(_integral(v) for v in (start, end, step)):
        what = f"arange({start}, {end}, {step}) with a non-integer start, end or step"
        start, end = (v.value_for(what) if isinstance(v, SymDim) else v for v in (start, end))
        values = np.arange(start, end, step, dtype=np.float64)
        return _new(fit_dtype(values, np.dtype(dtype), "arange"), requires_grad)
    start, end, step = (v if isinstance(v, SymDim) else int(v) for v in (start, end, step))
    span = end - start if step > 0 else start - end
    # an empty range when the bounds are the wrong way round: decided on the sizes (a guard under compile,
    # the declared ranges under export)
    length = (span + abs(step) - 1) // abs(step) if span >= 0 else 0
    out = ops.iota(length=length, dtype="int64")
    if step != 1:
        out = ops.mul(out, step)
    if not (isinstance(start, int) and start == 0):
        out = ops.add(out, start)
    if dtype != "int64":
        out = ops.cast(out, dtype=dtype)
    return out.requires_grad_(True) if requires_grad else out


def linspace(start: float, end: float, steps: int, dtype: Any = None,
             requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (``[start]`` for one step; all NaN
    when a bound is infinite or NaN and ``steps > 1``, as PyTorch)."""
    _on_cpu(device, "linspace")
    if isinstance(steps, SymDim):
        steps = steps.value_for("linspace's number of steps")
    _check_number(start, "linspace: start", finite=False)
    _check_number(end, "linspace: end", finite=False)
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)):
        raise DTypeError(f"linspace: steps must be an int, got {type(steps).__name__} {steps!r}")
    if steps < 0:
        raise ShapeError(f"linspace: number of steps must be non-negative, got {steps}")
    if steps == 1:
        values = np.array([start], dtype=np.float64)  # the start alone, whatever the end (as PyTorch)
    elif steps and not (math.isfinite(start) and math.isfinite(end)):
        values = np.full(steps, np.nan)  # an infinite or NaN bound leaves no finite spacing (as PyTorch)
    else:
        values = np.linspace(start, end, steps)
    with np.errstate(invalid="ignore", over="ignore"):
        return _new(values.astype(_dtype_name(dtype)), requires_grad)


def eye(n: int, m: int | None = None, dtype: Any = None, requires_grad: bool = False, device: Any = None) -> Tensor[*tuple[Any, ...]]:
    """The ``n x m`` identity matrix (``m = n`` by default); under a recording ``n`` and ``m`` may be
    symbolic sizes (recorded as ``iota(n)[:, None] == iota(m)[None, :]``)."""
    _on_cpu(device, "eye")
    sizes = (n, n if m is None else m)
    ops = _symbolic_ops(sizes, "eye") if isinstance(n, SymDim) or isinstance(m, SymDim) else None
    if ops is None:
        dims = _check_shape(sizes, "eye")
        return _new(np.eye(dims[0], dims[1], dtype=_dtype_name(dtype)), requires_grad)
    rows, cols = _check_dims(sizes, "eye", ops)
    hit = ops.eq(ops.reshape(ops.iota(length=rows, dtype="int64"), shape=(rows, 1)),
                 ops.reshape(ops.iota(length=cols, dtype="int64"), shape=(1, cols)))
    out = ops.cast(hit, dtype=_dtype_name(dtype))
    return out.requires_grad_(True) if requires_grad else out


def manual_seed(seed: int) -> None:
    """Seed the global generator used by ``randn``, ``rand``, ``randint`` and dropout."""
    random_state.manual_seed(seed)


def _creating(*tensors: Any) -> Any:
    """The interpreter a factory runs in: the newest among the given tensors' interpreters and the
    recording in progress in this thread (eager when there is none)."""
    return highest_interpreter(tensors, recording.creating_interpreter(eager))


def _check_dims(shape: Sequence[Any], where: str, ops: Any) -> tuple[Any, ...]:
    """A shape for ``ops``: ints, or symbolic sizes when ``ops`` records (``tp.randn(x.shape[0])`` in a
    function traced with a dynamic batch)."""
    if ops is eager or not any(isinstance(d, SymDim) for d in shape):
        return _check_shape(shape, where)
    return tuple(d if isinstance(d, SymDim) else _check_shape((d,), where)[0] for d in shape)


def _random(prim: str, where: str, shape: Sequence[Any], dtype: str, requires_grad: bool, *like: Any,
            generator: Generator | None = None, **params: Any) -> Any:
    """``prim`` drawn with a fresh key of the interpreter the factory runs in (see :func:`_creating`):
    the global generator eagerly; a key input of the recording inside ``tp.graph.trace`` (fresh numbers at
    every call of the graph) and inside transforms (``vmap`` applies its ``randomness`` policy). With a
    ``generator`` (a :class:`~tensorplay.Generator`) the key is its next one instead (refused inside
    ``tp.compile``, see :mod:`tensorplay.generator`), and the global stream is untouched."""
    ops = _creating(*like)
    dims = _check_dims(shape, where, ops)
    key = ops.random_key() if generator is None else eager.wrap(generator.next_key(where))
    out = getattr(ops, prim)(key, shape=dims, dtype=dtype, **params)
    return out.requires_grad_(True) if requires_grad else out


@overload
def randn(shape: tuple[*S], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None, generator: Generator | None = None) -> Tensor[*S]: ...


@overload
def randn(shape: list[int], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None, generator: Generator | None = None) -> Tensor[*tuple[Any, ...]]: ...


@overload
def randn(*shape: *S, dtype: Any = None, requires_grad: bool = False, device: Any = None, generator: Generator | None = None) -> Tensor[*S]: ...


def randn(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,  # type: ignore[misc]
          generator: Generator | None = None) -> Any:
    """Standard normal samples, from a fresh key (see :func:`_random`)."""
    _on_cpu(device, "randn")
    return _random("random_normal", "randn", _p.shape_args(shape), _dtype_name(dtype), requires_grad,
                   generator=generator)


@overload
def rand(shape: tuple[*S], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None, generator: Generator | None = None) -> Tensor[*S]: ...


@overload
def rand(shape: list[int], /, *, dtype: Any = None, requires_grad: bool = False, device: Any = None, generator: Generator | None = None) -> Tensor[*tuple[Any, ...]]: ...


@overload
def rand(*shape: *S, dtype: Any = None, requires_grad: bool = False, device: Any = None, generator: Generator | None = None) -> Tensor[*S]: ...


def rand(*shape: Any, dtype: Any = None, requires_grad: bool = False, device: Any = None,  # type: ignore[misc]
         generator: Generator | None = None) -> Any:
    """Uniform samples in ``[0, 1)``, from a fresh key (see :func:`_random`)."""
    _on_cpu(device, "rand")
    return _random("random_uniform", "rand", _p.shape_args(shape), _dtype_name(dtype), requires_grad,
                   generator=generator)


def randint(low: int, high: int | None = None, size: Sequence[int] = (), dtype: Any = None, *,
            generator: Generator | None = None, device: Any = None) -> Tensor[*tuple[Any, ...]]:
    """Integers uniform in ``[low, high)`` (``randint(high, size=...)`` starts at 0), from a fresh key."""
    _on_cpu(device, "randint")
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ShapeError(f"randint: expected low < high, got low={low}, high={high}")
    return _random("random_randint", "randint", tuple(size), _dtype_name(dtype, "int64"), False,  # type: ignore[no-any-return]
                   generator=generator, low=low, high=high)


def randn_like(x: Tensor[*S], dtype: Any = None, *, device: Any = None) -> Tensor[*S]:
    """Standard normal samples shaped like ``x``, in ``x``'s interpreter (or the recording in progress)."""
    _on_cpu(device, "randn_like")
    return _random("random_normal", "randn_like", tuple(x.shape), _dtype_name(dtype or x.dtype), False,  # type: ignore[no-any-return]
                   x)


def rand_like(x: Tensor[*S], dtype: Any = None, *, device: Any = None) -> Tensor[*S]:
    """Uniform samples shaped like ``x``, in ``x``'s interpreter (or the recording in progress)."""
    _on_cpu(device, "rand_like")
    return _random("random_uniform", "rand_like", tuple(x.shape), _dtype_name(dtype or x.dtype), False,  # type: ignore[no-any-return]
                   x)


def _interpreter_of(tensors: Sequence[Any]) -> Any:
    return highest_interpreter(tensors, eager)


def cat(tensors: Sequence[Tensor[*tuple[Any, ...]]], dim: int = 0) -> Tensor[*tuple[Any, ...]]:
    """Join tensors along an existing axis ``dim``."""
    items = tensors if type(tensors) is list or type(tensors) is tuple else list(tensors)  # never written to
    if not items:
        raise ShapeError("cat: expected a non-empty sequence of tensors")
    ops: Any = eager
    for t in items:
        if not isinstance(t, Tensor):
            i = next(i for i, t in enumerate(items) if not isinstance(t, Tensor))
            raise DTypeError(f"cat: element {i} is a {type(t).__name__}, expected a Tensor")
        if t._ops is not ops:
            ops = pick_interpreter(ops, t._ops)
    if ops is eager:
        made: Tensor[*tuple[Any, ...]] | None = _eager_fastpath.cat(eager, items, dim)  # numpy checks the rest
        if made is not None:
            return made
    ndim = items[0].ndim
    axis = dim % ndim if type(dim) is int and -ndim <= dim < ndim else _p.normalize_axis(dim, ndim, "cat")
    return ops.concat(*items, axis=axis)  # type: ignore[no-any-return]


@overload
def stack(tensors: Sequence[Tensor[*S]], dim: Literal[0] = 0) -> Tensor[int, *S]: ...


@overload
def stack(tensors: Sequence[Tensor[*S]], dim: Literal[-1]) -> Tensor[*S, int]: ...


@overload
def stack(tensors: Sequence[Tensor[*tuple[Any, ...]]], dim: int = 0) -> Tensor[*tuple[Any, ...]]: ...


def stack(tensors: Sequence[Tensor[*tuple[Any, ...]]], dim: int = 0) -> Tensor[*tuple[Any, ...]]:
    """Join tensors of one shape along a new axis ``dim``."""
    items = list(tensors)
    if not items:
        raise ShapeError("stack: expected a non-empty sequence of tensors")
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise DTypeError(f"stack: element {i} is a {type(t).__name__}, expected a Tensor")
        if tuple(t.shape) != tuple(items[0].shape):
            raise ShapeError(f"stack: every tensor must have the same shape; element 0 has {list(items[0].shape)}, "
                             f"element {i} has {list(t.shape)}")
    ops = _interpreter_of(items)
    axis = _p.normalize_axis(dim, items[0].ndim + 1, "stack")
    return ops.concat(*(_p.unsqueeze(ops, t, axis) for t in items), axis=axis)  # type: ignore[no-any-return]


@overload
def where(condition: Tensor[*S], x: Tensor[*S] | Scalar, y: Tensor[*S] | Scalar) -> Tensor[*S]: ...


@overload
def where(condition: Tensor[*tuple[Any, ...]], x: Tensor[*S], y: Tensor[*S] | Scalar) -> Tensor[*S]: ...


@overload
def where(condition: Tensor[*tuple[Any, ...]], x: Scalar, y: Tensor[*S]) -> Tensor[*S]: ...


def where(condition: Tensor[*tuple[Any, ...]], x: Any, y: Any) -> Tensor[*tuple[Any, ...]]:
    """``x`` where ``condition`` else ``y`` (broadcasting; scalars allowed for ``x`` and ``y``)."""
    ops = _interpreter_of((condition, x, y))
    if type(x) is not Tensor:
        x = _p.operand(x, ops)
    if type(y) is not Tensor:
        y = _p.operand(y, ops)
    return ops.where(condition, x, y)  # type: ignore[no-any-return]
