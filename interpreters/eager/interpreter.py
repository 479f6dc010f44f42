"""The eager interpreter: every primitive runs at once on numpy arrays.

Hot path: an elementwise op on same-dtype float tensors goes straight to the
numpy ufunc; shape and dtype rules from :mod:`tensorplay.spec` run only when the fast
path does not apply (mixed dtypes, non-float inputs) or when numpy refuses
the input, so errors are the rules' clear errors while the common case
costs one ufunc call plus a wrapper. Heavy primitives (conv, pooling, norms,
attention) always run their rule first: its cost is negligible next to the
kernel. An op whose inputs require grad appends a node to the tape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.kernels._support import CONCATENATE, F32, FLOATS, WHERE, nb
from tensorplay.interpreters.eager.kernels.head_stacks import right_operand
from tensorplay.interpreters.eager.kernels.rows import GELU_KERNELS
from tensorplay.interpreters.eager.kernels.threads import THREADED_MIN_WORK, threads_for
from tensorplay.interpreters.eager import fastpath, fastpath_conv, fastpath_linear, tape
from tensorplay.interpreters.eager import losses as _eager_losses
from tensorplay.interpreters.eager.results import result as _result
from tensorplay.interpreters.eager.results import share_version as _share_version
from tensorplay.interpreters.eager.results import view as _new_view
from tensorplay.interpreters.eager.special import erf
from tensorplay.spec import SPECS
from tensorplay.spec.table import PRIMITIVES
from tensorplay.spec.aval import Aval
from tensorplay.dtypes import native_order
from tensorplay.spec.dtypes import result_type, weak_kind
from tensorplay.spec.errors import DTypeError, ShapeError
from tensorplay.formatting import format_array
from tensorplay.pydata import check_int_operand
from tensorplay import random_state
from tensorplay.interpreter import BaseInterpreter
from tensorplay import recording
from tensorplay.recording import creating_interpreter

_ACTIVE = recording.active
from tensorplay.tensor import Tensor, highest_interpreter

Array = np.ndarray[Any, Any]
_NUMPY_DTYPES = {name: np.dtype(name) for name in ("float32", "float64", "int32", "int64", "bool")}


_DTYPE_NAMES = {dtype: name for name, dtype in _NUMPY_DTYPES.items()}


def dtype_name(dtype: np.dtype[Any]) -> str:
    """``dtype.name`` (numpy computes it in Python at every read: ~1 us; the library's dtypes are looked up).
    The eager slow paths and compile's guards (every tensor of every call) read names through here."""
    return _DTYPE_NAMES.get(dtype) or dtype.name


_INT64 = _NUMPY_DTYPES["int64"]
_INT_BOUNDS = {np.dtype(t).itemsize: (int(np.iinfo(t).min), int(np.iinfo(t).max))
               for t in (np.int8, np.int16, np.int32, np.int64)}
"""Signed integer dtypes' ``(min, max)`` by item size (where's int-scalar fast path: read once, not per call)."""
_RULE_CACHE: dict[Any, Aval] = {}
_RULE_CACHE_LIMIT = 8192


def aval_of(x: Any) -> Aval:
    """The abstract value of an eager tensor or a Python scalar (weak)."""
    if isinstance(x, Tensor):
        dtype = x._data.dtype
        return Aval(tuple(x._data.shape), _DTYPE_NAMES.get(dtype) or dtype.name)
    return Aval((), weak_kind(x))


def _signature(x: Any) -> Any:
    if isinstance(x, Tensor):
        return (x._data.shape, x._data.dtype)
    return None if x is None else type(x)


def _typed(value: Any) -> Any:
    kind = type(value)
    if kind is tuple or kind is list:
        return kind, tuple(_typed(v) for v in value)
    return kind, value


_SCALARS = (int, float, str, bool, type(None))


def _plain(value: tuple[Any, ...]) -> bool:
    """Whether the tuple ``value`` holds only ints, strs, None and such tuples: values that ``==`` another
    only when of the same types (``1.0``, ``True`` and ``np.int64(1)`` all ``== 1``)."""
    for item in value:
        kind = type(item)
        if kind is not int and kind is not str and item is not None and not (kind is tuple and _plain(item)):
            return False
    return True


def rule_key(params: dict[str, Any]) -> tuple[Any, ...]:
    """``params`` as a rule-cache key that never lets a form the rule refuses find the entry of one it
    accepted: an int, a str, None or a tuple of those as it is (``(name, value)``: the hot path, derived
    code passes ints), any other value with its types (``(name, type, value)``, or ``(name, (type, ...))`` for
    containers, nested). The kinds cannot collide: a plain value holds no type object."""
    key: list[tuple[Any, ...]] = []
    for k, v in params.items():
        kind = type(v)
        if kind is int or kind is str or v is None or (kind is tuple and _plain(v)):
            key.append((k, v))
        elif kind in _SCALARS:
            key.append((k, kind, v))
        else:
            key.append((k, _typed(v)))
    return tuple(key)


def _rule(name: str, inputs: tuple[Any, ...], params: dict[str, Any]) -> Aval:
    """The spec rule's result for these inputs; results are cached by (shapes, dtypes, scalar kinds,
    params), since the rule depends on nothing else. Errors are never cached, and a param that the rule
    refuses never finds the entry of one it accepted (:func:`rule_key`: ``perm=(1.0, 0)`` after
    ``perm=(1, 0)``, ``kernel_size=(2.0, 2.0)`` after ``(2, 2)``), so the error does not depend on what
    ran before."""
    key = (name, tuple([_signature(x) for x in inputs]), rule_key(params))
    try:
        found = _RULE_CACHE.get(key)
    except TypeError:  # an unhashable param: run the rule uncached
        return SPECS[name].rule(*(None if x is None else aval_of(x) for x in inputs), **params)
    if found is None:
        found = SPECS[name].rule(*(None if x is None else aval_of(x) for x in inputs), **params)
        if len(_RULE_CACHE) >= _RULE_CACHE_LIMIT:
            _RULE_CACHE.clear()
        _RULE_CACHE[key] = found
    return found


def _payload(x: Any) -> Any:
    return x._data if isinstance(x, Tensor) else x


def _array(value: Any, dtype: str) -> Array:
    """An ndarray of ``dtype`` (numpy returns scalars for 0-d results; we never do)."""
    if type(value) is not np.ndarray:
        return np.asarray(value, dtype=_NUMPY_DTYPES[dtype])
    if value.dtype is not _NUMPY_DTYPES[dtype]:
        return value.astype(_NUMPY_DTYPES[dtype])
    return value


def _sign(x: Array) -> Array:
    """``sign(x)``: -1, 0 or 1 in ``x``'s dtype (NaN stays NaN); of a bool array ``x`` itself (a copy: ``True``
    is 1 and ``False`` 0), as PyTorch, where numpy's ``sign`` has no bool loop."""
    if x.dtype.kind == "b":
        return x.copy()
    out: Array = np.sign(x)
    return out


def _rsqrt(x: Array) -> Array:
    out = np.sqrt(x, out=np.empty_like(x))
    return np.divide(1, out, out=out)


def _sigmoid(x: Array) -> Array:
    """``1 / (1 + exp(-x))``: float32/float64 arrays by the kernels' one jitted body (the vectorised exp;
    below :data:`_SIGMOID_UFUNC_MAX` elements as its numpy ufunc, else the flat kernel: the same values);
    other dtypes in one numpy buffer, accurate everywhere (``exp(-x)`` overflowing to inf gives the limit
    0, quietly)."""
    if type(x) is np.ndarray and x.dtype in FLOATS:
        if x.size <= _SIGMOID_UFUNC_MAX:
            small: Array = _jit_ufunc("sigmoid", x.dtype)(x)
            return small
        out = fastpath.small_flat(x, "sigmoid_flat")  # the same kernel, without the wrapper's conversions
        return K.sigmoid(x) if out is None else out
    exact: Array = _sigmoid_numpy(x)
    return exact


_SIGMOID_UFUNC_MAX = 1024
"""Up to this many elements a float array's sigmoid is the kernels' numpy ufunc (one element at a time,
~0.5 us on 8 elements), from there the vectorised flat kernel (~1.9 us to call on 8 elements; here
measured equal at 2,048, the ufunc 1.9 against 2.6 us at 1,024)."""


_JIT_UFUNCS: dict[tuple[str, np.dtype[Any]], Callable[[Array], Array]] = {}


def _jit_ufunc(name: str, dtype: np.dtype[Any]) -> Callable[[Array], Array]:
    """The kernels' numpy ufunc ``name`` (``"sigmoid"``, ``"relu"``) for the float dtype ``dtype`` (float32
    or float64), with numpy's floating-point warnings off; looked up once per name and dtype (the first call
    imports numba and builds that one ufunc: a float32 program builds no float64 loop)."""
    found = _JIT_UFUNCS.get((name, dtype))
    if found is None:
        kernels = nb()
        found = _JIT_UFUNCS[name, dtype] = _quiet(getattr(kernels, f"{name}_ufunc_{kernels.UFUNC_SUFFIX[dtype]}").ufunc)
    return found


def _sigmoid_exact(x: Array) -> Array:
    out = np.negative(x)
    if type(out) is not np.ndarray:  # a 0-d input gives a numpy scalar
        out = np.asarray(out)
    np.exp(out, out=out)
    out += 1
    return np.reciprocal(out, out=out)


def _power(x: Any, y: Any) -> Any:
    """``x ** y``; a float array squared is ``np.square`` (the same correctly rounded values, as numpy's own
    ``**`` does, without the general power loop)."""
    if (type(y) is int or type(y) is float) and y == 2 and type(x) is np.ndarray and x.dtype.kind == "f":
        return np.square(x)
    return np.power(x, y)


_ZEROS = {dtype: np.zeros((), dtype) for dtype in _NUMPY_DTYPES.values()}


_RELU_UFUNC_MIN = 512
"""From this many elements a float array's relu is the kernels' numpy ufunc (below, ``numpy.maximum``
with a cached zero is cheaper than silencing numpy's floating-point warnings around the ufunc: 0.76 against
1.12 us on 8 elements; at 1,024 elements 1.70 against 1.33 us, at 4,096 3.97 against 1.66 us)."""


_RELU_UFUNC_AFTER = 8
"""The relu ufunc of a dtype is built (importing numba, ~0.05 s for its loop even from numba's cache) on the
call of relu that would use it after this many such calls; until then those calls take ``numpy.maximum``,
which gives the same values (a few microseconds slower on large arrays): what builds it must pay back, and a
process that takes only a few relus (``tp.compile``'s capture of a step) builds nothing."""

_relu_ufunc_calls = 0


def _relu_ufunc(dtype: np.dtype[Any]) -> Callable[[Array], Array] | None:
    """The relu ufunc of ``dtype`` (:func:`_jit_ufunc`), or None while :data:`_RELU_UFUNC_AFTER` calls have not
    asked for it yet."""
    found = _JIT_UFUNCS.get(("relu", dtype))
    if found is None:
        global _relu_ufunc_calls
        _relu_ufunc_calls += 1
        if _relu_ufunc_calls > _RELU_UFUNC_AFTER:
            found = _jit_ufunc("relu", dtype)
    return found


def _relu(x: Array) -> Array:
    """``max(x, 0)`` (NaN stays NaN, ``-0`` gives ``+0``): a float32/float64 array of at least
    :data:`_RELU_UFUNC_MIN` elements by the kernels' numpy ufunc (any layout; once it is built, see
    :data:`_RELU_UFUNC_AFTER`), or their flat kernel split across the kernel threads when it would be (the same
    values); smaller arrays, other dtypes and the calls before the ufunc is built through ``numpy.maximum``
    with a cached 0-d zero of ``x``'s own dtype, so numpy picks the same loop without making a scalar each
    call."""
    n = x.size
    if n >= _RELU_UFUNC_MIN and type(x) is np.ndarray and x.dtype in FLOATS:
        if n < THREADED_MIN_WORK or threads_for(n, n) == 1:
            ufunc = _relu_ufunc(x.dtype)
            if ufunc is not None:
                small: Array = ufunc(x)
                return small
        else:
            return K.relu(x)
    if x.dtype.kind == "b":
        return x.copy()
    zero = _ZEROS.get(x.dtype)
    out: Array = np.maximum(x, x.dtype.type(0) if zero is None else zero)
    return out


def _gelu(x: Array, *, approximate: str = "none") -> Array:
    """GELU (see :func:`.kernels.gelu`): a float32/float64 array that one thread computes by its jitted kernel
    called directly (:func:`.fastpath.small_flat`: the same kernel and bits without the entry point's
    conversions), anything else through the entry point (threads, the error for a bad ``approximate``)."""
    kernel = GELU_KERNELS.get((approximate, x.dtype))
    out = None if kernel is None else fastpath.small_flat(x, kernel)
    return K.gelu(x, approximate=approximate) if out is None else out


_TANH_JIT_MIN = 512
"""From this many elements a float32 array's ``tanh`` is the kernels' vectorised one (within 1.5 ulp; numpy's
float32 ``tanh`` is a scalar loop here, ~3 ns an element: 12.5 against 6.2 us on 4,096 elements, equal at 512),
below it numpy's."""


def _tanh(x: Array) -> Array:
    """``tanh(x)``: a float32 array of at least :data:`_TANH_JIT_MIN` elements by the kernels' jitted pass
    (:func:`.kernels.tanh`, called directly when one thread computes it), anything else by numpy."""
    if x.size >= _TANH_JIT_MIN and type(x) is np.ndarray and x.dtype is F32:
        direct = fastpath.small_flat(x, "tanh32_flat")
        return K.tanh(x) if direct is None else direct
    out: Array = np.tanh(x)
    return out


_EXP_JIT_MIN = 1024
"""From this many elements a float array's ``exp`` is the kernels' vectorised one (within 1 ulp, like numpy's;
2-3.5x faster than numpy's float32 ``exp`` here from 2,048 elements, slower below 1,024)."""


def _exp(x: Array) -> Array:
    """``exp(x)``: a float32/float64 array of at least :data:`_EXP_JIT_MIN` elements in the kernels' one
    jitted pass, anything else through numpy's ``exp`` with its warnings off (overflow gives inf quietly)."""
    if type(x) is np.ndarray and x.size >= _EXP_JIT_MIN and x.dtype in FLOATS:
        direct = fastpath.small_flat(x, "exp_into")
        return K.exp(x) if direct is None else direct
    out: Array = _quiet_exp(x)
    return out


def _fp_error_state() -> tuple[Any, Any]:
    """numpy's floating-point error state variable and its "ignore everything" value, when this numpy keeps
    them where ``np.errstate`` does (a context variable); ``(None, None)`` otherwise. Setting the variable
    is what ``with np.errstate(all="ignore")`` does, without building the state anew on every call (that
    costs more than a ufunc on a small array)."""
    try:
        from numpy._core._ufunc_config import _extobj_contextvar as state  # type: ignore[attr-defined]
    except ImportError:
        return None, None
    with np.errstate(all="ignore"):
        ignore = state.get()
    return state, ignore


_FP_STATE, _FP_IGNORE = _fp_error_state()


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with numpy's floating-point warnings off: ``log(0)``, ``x / 0`` give inf or NaN silently,
    as the ``Ops`` contract says."""
    state, ignore = _FP_STATE, _FP_IGNORE

    if state is not None:
        def run(*args: Any) -> Any:
            token = state.set(ignore)
            try:
                return fn(*args)
            finally:
                state.reset(token)
    else:  # pragma: no cover - a numpy without the context variable
        def run(*args: Any) -> Any:
            with np.errstate(all="ignore"):
                return fn(*args)
    run.__name__ = getattr(fn, "__name__", "kernel")
    run.__wrapped__ = fn  # type: ignore[attr-defined]  # compiled code calls fn inside its own errstate
    return run


_sigmoid_numpy = _quiet(_sigmoid_exact)
_quiet_exp = _quiet(np.exp)

UNARY_KERNELS: dict[str, Callable[..., Any]] = {
    "neg": np.negative, "abs": np.abs, "sign": _sign, "exp": _exp, "log": _quiet(np.log),
    "log1p": _quiet(np.log1p), "expm1": _quiet(np.expm1), "sqrt": _quiet(np.sqrt), "rsqrt": _quiet(_rsqrt),
    "sin": np.sin, "cos": np.cos, "tan": _quiet(np.tan), "tanh": _tanh, "sigmoid": _sigmoid, "relu": _relu, "floor": np.floor,
    "ceil": np.ceil, "round": np.round, "logical_not": np.logical_not, "erf": erf, "gelu": _gelu, "bitwise_not": np.invert,
}
"""The eager kernel of each primitive of the ``unary`` family: ``kernel(x, **params)`` on the input array
(already converted to the result dtype)."""

BINARY_KERNELS: dict[str, Callable[[Any, Any], Any]] = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _quiet(np.true_divide),
    "pow": _quiet(_power), "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2, "eq": np.equal,
    "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
}
"""The eager kernel of each primitive of the ``binary`` family: a numpy ufunc (or one like it) on the two
operands, already converted to the compute dtype."""

_SAME_INT_KERNELS = frozenset(p.name for p in PRIMITIVES.values() if p.family == "binary"
                               and p.dtypes in ("promote", "promote_no_bool", "compare", "bitwise"))
"""Binary primitives whose numpy ufunc, on two signed-int operands of one dtype (or one and a Python int that
every signed int dtype holds), computes in that dtype and gives the rule's result dtype (that dtype, or bool for
comparisons): the eager fast path runs them without the spec rule (index arithmetic: ``vmap``'s gathers).
Taken from the table by dtype rule (promoting, comparing, bitwise), so not ``div``, ``pow``, ``atan2``."""
_I32_MIN, _I32_MAX = -(2 ** 31), 2 ** 31 - 1
_SAME_BOOL_KERNELS = frozenset(p.name for p in PRIMITIVES.values() if p.family == "binary" and (
    p.dtypes in ("logical", "bitwise") or (p.dtypes == "compare" and p.commutative)))
"""Binary primitives whose numpy ufunc gives bool, the rule's result, on two bool arrays (masks): the logical
and bitwise ones, and equality (the orderings are left to the rule)."""



def _checks_foreign(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a hand-written method that hands another interpreter's inputs over itself (after its fast
    path), so :func:`_install_generated_methods` does not wrap it in :func:`_accepting_foreign`."""
    method.checks_foreign = True  # type: ignore[attr-defined]
    return method


class EagerInterpreter(BaseInterpreter):
    """Runs each primitive immediately; see the module docstring."""

    name = "eager"
    level = 0

    if TYPE_CHECKING:
        # elementwise and kernel primitives are attached below from tables; tell mypy they exist
        def __getattr__(self, name: str) -> Callable[..., Any]: ...

    # ---- wrapping and the tape ----------------------------------------------------------------
    def wrap(self, array: Array) -> Tensor[*tuple[Any, ...]]:
        """A new eager tensor holding ``array`` (not copied)."""
        return Tensor(self, array)

    def _finish(self, name: str, inputs: tuple[Any, ...], params: dict[str, Any], out: Array) -> Any:
        return _result(self, name, inputs, params, out)

    # ---- Interpreter services ------------------------------------------------------------------
    def map(self, lead: int, x: Any, f: Callable[[Any], Any]) -> Any:
        """See :func:`tensorplay.prefix.map`: one batched computation through the batching rules."""
        from tensorplay.interpreters.graph.batched import map_over_lead
        return map_over_lead(self, lead, x, f)

    def random_key(self) -> Tensor[*tuple[Any, ...]]:
        """The global generator's next key (``[2]`` int64; ``tp.manual_seed`` sets it); while a function
        is being recorded (a trace, a transform) the recording's key instead, so a random draw made
        through the eager interpreter there (dropout of a constant) is still redrawn at every run."""
        recording = creating_interpreter(None)
        if recording is not None:
            return recording.random_key()  # type: ignore[no-any-return]
        return Tensor(self, random_state.next_key())

    def concrete(self, x: Tensor[*tuple[Any, ...]]) -> Array:
        """The numpy payload (not copied)."""
        return x._data  # type: ignore[no-any-return]

    def constant(self, value: Any) -> Tensor[*tuple[Any, ...]]:
        """Wrap a numpy array (or a lower-level tensor's value) as an eager tensor."""
        if isinstance(value, Tensor):
            return value
        array = np.asarray(value)
        if array.dtype.name not in _NUMPY_DTYPES:
            raise DTypeError(f"unsupported dtype {array.dtype} for a tensor constant")
        return Tensor(self, native_order(array))  # a big-endian array: a native-order copy

    def format(self, x: Tensor[*tuple[Any, ...]]) -> str:
        """``tensor([...])`` in PyTorch's style."""
        suffixes = []
        if x._node is not None:
            suffixes.append(f"grad_fn=<{x._node.name}>")
        elif x._requires_grad:
            suffixes.append("requires_grad=True")
        return format_array(x._data, suffixes)

    def set_requires_grad(self, x: Tensor[*tuple[Any, ...]], flag: bool) -> None:
        """Mark a leaf as requiring grad (float tensors only)."""
        tape.set_requires_grad(x, flag)

    def detach(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """The same array, without tape history (while ``tp.graph.trace`` records a function and ``x`` is state
        from outside it: the recording's ``detach``, so a write through it reaches ``x``)."""
        if recording.active[0]:
            frame = recording.outside_state(x)
            if frame is not None:
                return frame.recorder.detach(x)  # type: ignore[no-any-return]
        out: Tensor[*tuple[Any, ...]] = Tensor(self, x._data)
        if recording.active[0]:
            recording.note_derived(out, (x,))
        out._version = _share_version(x)
        return out

    def backward(self, x: Tensor[*tuple[Any, ...]], gradient: Any, retain_graph: bool, create_graph: bool) -> None:
        """Run the tape backwards from ``x`` (see :mod:`tensorplay.interpreters.eager.tape`)."""
        tape.backward([x], None if gradient is None else [gradient], retain_graph, create_graph)

    def contiguous(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """``x`` itself when row-major, else a recorded copy."""
        if x._data.flags.c_contiguous:
            return x
        return self.clone(x)

    def clone(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """A recorded copy (the gradient passes straight through)."""
        copied: Tensor[*tuple[Any, ...]] = self._finish("clone", (x,), {}, x._data.copy(order="C"))
        return copied

    def inplace(self, x: Tensor[*tuple[Any, ...]], op: str, other: Any) -> Tensor[*tuple[Any, ...]]:
        """``x op= other`` in place; bumps the version counter (see :mod:`tensorplay.interpreters.eager.tape`)."""
        return tape.inplace(self, x, op, other)

    def setitem(self, x: Tensor[*tuple[Any, ...]], key: Any, value: Any) -> None:
        """``x[key] = value`` in place."""
        tape.setitem(self, x, key, value)

    # ---- generic dispatch ------------------------------------------------------------------------
    def _unary(self, name: str, x: Any, **params: Any) -> Any:
        if not isinstance(x, Tensor):
            raise DTypeError(f"{name}: expected a Tensor for argument x, got {type(x).__name__}")
        data = x._data
        if type(data) is not np.ndarray:
            return self._foreign(name, (x,), params)
        if data.dtype.kind != "f" or params:
            out_dtype = _rule(name, (x,), params).dtype
            if _NUMPY_DTYPES[out_dtype] is not data.dtype and out_dtype != "bool":  # ``dtype.name`` costs ~1 us
                data = data.astype(out_dtype)
        try:
            out = UNARY_KERNELS[name](data, **params) if params else UNARY_KERNELS[name](data)
        except TypeError:  # numpy refuses the dtype (a float skipped the rule above): the rule's clear error
            _rule(name, (x,), params)
            raise
        if type(out) is not np.ndarray:
            out = np.asarray(out)
        return self._finish(name, (x,), params, out)

    def _binary(self, name: str, x: Any, y: Any) -> Any:
        xd = x._data if isinstance(x, Tensor) else x
        yd = y._data if isinstance(y, Tensor) else y
        if type(xd) is np.ndarray:
            kind = xd.dtype.kind
            if kind == "f":
                fast = type(yd) is float or type(yd) is int or type(yd) is np.ndarray and yd.dtype is xd.dtype
            elif kind == "i":
                fast = name in _SAME_INT_KERNELS and (
                    type(yd) is np.ndarray and yd.dtype is xd.dtype or type(yd) is int and _I32_MIN <= yd <= _I32_MAX)
            else:
                fast = kind == "b" and name in _SAME_BOOL_KERNELS and type(yd) is np.ndarray and yd.dtype is xd.dtype
        elif type(yd) is np.ndarray:
            kind = yd.dtype.kind
            fast = (type(xd) is float or type(xd) is int) and kind == "f" or (
                kind == "i" and name in _SAME_INT_KERNELS and type(xd) is int and _I32_MIN <= xd <= _I32_MAX)
        else:
            fast = False
        if fast:
            try:
                out = BINARY_KERNELS[name](xd, yd)
            except (ValueError, TypeError):
                _rule(name, (x, y), {})  # raises the rule's ShapeError or DTypeError
                raise
            except OverflowError:  # an int scalar beyond every float (``x * 10**400``): say which
                for v in (x, y):
                    check_int_operand(v, _NUMPY_DTYPES["float64"], f"{name}: scalar operand")
                raise
            if type(out) is not np.ndarray:
                out = np.asarray(out)
        elif (isinstance(x, Tensor) and type(xd) is not np.ndarray) or (isinstance(y, Tensor) and type(yd) is not np.ndarray):
            return self._foreign(name, (x, y), {})
        else:
            out = self._binary_checked(name, x, y, xd, yd)
        result: Tensor[*tuple[Any, ...]] = Tensor(self, out)
        if _ACTIVE[0]:
            recording.note_derived(result, (x, y))
        if ((isinstance(x, Tensor) and x._requires_grad) or (isinstance(y, Tensor) and y._requires_grad)) \
                and out.dtype.kind == "f" and tape.grad_enabled():  # comparisons (bool) carry no gradient
            tape.attach(result, name, (x, y), {})
        return result

    run_binary = _binary  # every operator's primitive is a generated ``_binary`` method: skip its frame

    def _binary_checked(self, name: str, x: Any, y: Any, xd: Any, yd: Any) -> Array:
        """The slow path: dtype promotion and validation by the spec rule first."""
        if not isinstance(x, Tensor) and not isinstance(y, Tensor):
            raise DTypeError(f"{name}: expected at least one Tensor operand, got "
                             f"{type(x).__name__} and {type(y).__name__}")
        out_aval = _rule(name, (x, y), {})
        compute = _rule_compute_dtype(name, out_aval.dtype, x, y)
        if out_aval.dtype != "bool":  # a comparison with any int is exact in numpy
            for v in (x, y):
                check_int_operand(v, _NUMPY_DTYPES[compute], f"{name}: scalar operand")
        target = _NUMPY_DTYPES[compute]
        xd = xd.astype(compute) if isinstance(xd, np.ndarray) and xd.dtype != target else xd
        yd = yd.astype(compute) if isinstance(yd, np.ndarray) and yd.dtype != target else yd
        with np.errstate(all="ignore"):
            out = BINARY_KERNELS[name](xd, yd)
        return _array(out, out_aval.dtype)

    def _kernel(self, name: str, inputs: tuple[Any, ...], params: dict[str, Any]) -> Any:
        for x in inputs:
            if isinstance(x, Tensor) and type(x._data) is not np.ndarray:
                return self._foreign(name, inputs, params)
        aval = _rule(name, inputs, params)
        out = getattr(K, name)(*[x._data if isinstance(x, Tensor) else x for x in inputs], **params)
        return _result(self, name, inputs, params, _array(out, aval.dtype))

    def _foreign(self, name: str, inputs: tuple[Any, ...], params: dict[str, Any]) -> Any:
        """An input belongs to a newer interpreter (a value being recorded, e.g. the sample a function
        receives inside ``map`` or ``vmap``): the operation is that interpreter's, as if the caller had
        used it. A payload that is not a numpy array of no other interpreter is an error."""
        top = highest_interpreter(inputs, self)
        if top is self:
            bad = next(x for x in inputs if isinstance(x, Tensor) and type(x._data) is not np.ndarray)
            raise DTypeError(f"{name}: the eager interpreter got a tensor whose payload is a "
                             f"{type(bad._data).__name__}, not a numpy array")
        return getattr(top, name)(*inputs, **params)

    # ---- primitives with bespoke eager code -----------------------------------------------------
    def layer_norm_last_axis(self, x: Any, gamma: Any, beta: Any, *, eps: float) -> Any:
        """See :meth:`tensorplay.ops.Ops.layer_norm_last_axis`: in the common case (float ``x``, ``gamma``
        and ``beta`` of one dtype, a float ``eps``) the fused form of ``nn.functional.layer_norm``, whose
        tape node keeps each row's statistics for the backward; otherwise the kernel after the shape rule."""
        if type(x) is Tensor and type(gamma) is Tensor and type(beta) is Tensor and type(x._data) is np.ndarray \
                and x._data.ndim:
            fused = _eager_losses.layer_norm(self, x, x._data.shape[-1], gamma, beta, eps)
            if fused is not None:
                return fused
        return self._kernel("layer_norm_last_axis", (x, gamma, beta), {"eps": eps})

    @_checks_foreign
    def softmax(self, x: Any, *, axis: int) -> Any:
        """See :meth:`tensorplay.ops.Ops.softmax` (kernel in :mod:`tensorplay.interpreters.eager.kernels`)."""
        return self._rows("softmax", x, axis)

    @_checks_foreign
    def log_softmax(self, x: Any, *, axis: int) -> Any:
        """See :meth:`tensorplay.ops.Ops.log_softmax` (kernel in :mod:`tensorplay.interpreters.eager.kernels`)."""
        return self._rows("log_softmax", x, axis)

    def _rows(self, name: str, x: Any, axis: Any) -> Any:
        """A row kernel of a float tensor along a valid int axis: the dtype is kept, so no rule is needed."""
        data = x._data if type(x) is Tensor else None
        if type(data) is np.ndarray and type(axis) is int:
            ndim = data.ndim
            if ndim and (axis == -1 or axis == ndim - 1):  # small_rows takes float dtypes only
                out = fastpath.small_rows(fastpath.ROW_KERNELS[name], data)
                if out is not None:  # a float result: _result inline
                    made: Tensor[*tuple[Any, ...]] = Tensor(self, out)
                    if _ACTIVE[0]:
                        recording.note_derived(made, (x,))
                    if x._requires_grad and tape.grad_enabled():
                        tape.attach(made, name, (x,), {"axis": axis})
                    return made
            if data.dtype.kind == "f" and -ndim <= axis < ndim:
                return _result(self, name, (x,), {"axis": axis}, getattr(K, name)(data, axis=axis))
        return self._kernel(name, (x,), {"axis": axis})

    @_checks_foreign
    def where(self, cond: Any, x: Any, y: Any) -> Any:
        """See :meth:`tensorplay.ops.Ops.where`."""
        if isinstance(cond, Tensor) and isinstance(x, Tensor) and isinstance(y, Tensor):
            cd, xd, yd = cond._data, x._data, y._data
            if type(cd) is np.ndarray and type(xd) is np.ndarray and type(yd) is np.ndarray \
                    and cd.dtype.kind == "b" and xd.dtype is yd.dtype and xd.dtype.kind == "f":
                try:  # a bool condition and one float dtype: numpy's broadcasting is the rule's
                    out = WHERE(cd, xd, yd)
                except ValueError:
                    _rule("where", (cond, x, y), {})
                    raise
                return _result(self, "where", (cond, x, y), {}, out)
        elif isinstance(cond, Tensor) and (type(y) is float and isinstance(x, Tensor)
                                           or type(x) is float and isinstance(y, Tensor)):
            # a float tensor against a Python float (masking with 0.0, -inf, ...): the weak scalar takes the
            # tensor's dtype, as the rule says, and numpy does the same (a branch of its own: folding it into
            # the arrays' branch above cost that branch 0.14 us a call)
            tensor: Any = x if type(y) is float else y
            cd, td = cond._data, tensor._data
            if type(cd) is np.ndarray and type(td) is np.ndarray and cd.dtype.kind == "b" and td.dtype.kind == "f":
                try:
                    out = np.where(cd, td, y) if type(y) is float else np.where(cd, x, td)
                except ValueError:
                    _rule("where", (cond, x, y), {})
                    raise
                if out.dtype is td.dtype:
                    return _result(self, "where", (cond, x, y), {}, out)
        elif isinstance(cond, Tensor) and isinstance(x, Tensor) and type(y) is int:
            # an integer tensor against a Python int in its range (index masking: where(valid, t, 0)): the
            # int takes the tensor's dtype, as the rule says, and numpy (NEP 50) does the same
            cd, xd = cond._data, x._data
            if type(cd) is np.ndarray and type(xd) is np.ndarray and cd.dtype.kind == "b" and xd.dtype.kind == "i":
                low, high = _INT_BOUNDS[xd.dtype.itemsize]
                if low <= y <= high:
                    try:
                        out = np.where(cd, xd, y)
                    except ValueError:
                        _rule("where", (cond, x, y), {})
                        raise
                    if out.dtype is xd.dtype:
                        return _result(self, "where", (cond, x, y), {}, out)
        if _has_foreign((cond, x, y)):
            return self._foreign("where", (cond, x, y), {})
        aval = _rule("where", (cond, x, y), {})
        for v in (x, y):  # numpy would wrap an int beyond the result dtype around
            check_int_operand(v, _NUMPY_DTYPES[aval.dtype], "where: scalar operand")
        out = np.where(_payload(cond), _payload(x), _payload(y))
        return self._finish("where", (cond, x, y), {}, _array(out, aval.dtype))

    def _reduce(self, name: str, ufunc: Any, x: Any, axes: tuple[int, ...], keepdims: bool,
                checked: bool = False) -> Any:
        """``ufunc.reduce`` over ``axes``; ``checked``: the caller made ``axes`` a tuple of distinct
        non-negative in-range ints."""
        params = {"axes": axes, "keepdims": keepdims}
        data = x._data
        if data.dtype.kind == "f" and (data.size or ufunc is np.add or ufunc is np.multiply) and (keepdims is True or keepdims is False) \
                and (checked or _valid_axes(axes, data.ndim)):
            dtype = data.dtype  # a float reduction over valid axes keeps the dtype: the rule would agree
        else:
            dtype = _NUMPY_DTYPES[_rule(name, (x,), params).dtype]
            axes = tuple(axes)
        out = ufunc.reduce(data, axis=axes, keepdims=keepdims) if axes else data.copy()
        if type(out) is not np.ndarray or out.dtype is not dtype:
            out = np.asarray(out, dtype=dtype)
        return _result(self, name, (x,), params, out)

    def reduce_sum(self, x: Any, *, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        """See :meth:`tensorplay.ops.Ops.reduce_sum`."""
        return self._reduce("reduce_sum", np.add, x, axes, keepdims)

    def reduce_prod(self, x: Any, *, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        """See :meth:`tensorplay.ops.Ops.reduce_prod`."""
        return self._reduce("reduce_prod", np.multiply, x, axes, keepdims)

    def reduce_max(self, x: Any, *, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        """See :meth:`tensorplay.ops.Ops.reduce_max`."""
        return self._reduce("reduce_max", np.maximum, x, axes, keepdims)

    def reduce_min(self, x: Any, *, axes: tuple[int, ...], keepdims: bool = False) -> Any:
        """See :meth:`tensorplay.ops.Ops.reduce_min`."""
        return self._reduce("reduce_min", np.minimum, x, axes, keepdims)

    def _arg(self, name: str, fn: Callable[..., Any], x: Any, axis: int, keepdims: bool) -> Any:
        params = {"axis": axis, "keepdims": keepdims}
        data = x._data
        if not (data.size and type(axis) is int and -data.ndim <= axis < data.ndim
                and (keepdims is True or keepdims is False)):
            _rule(name, (x,), params)  # the rule's error for an empty axis, a bad axis or keepdims
        out = fn(data, axis=axis, keepdims=keepdims)
        if type(out) is not np.ndarray or out.dtype is not _INT64:
            out = np.asarray(out, dtype=_INT64)
        made: Tensor[*tuple[Any, ...]] = Tensor(self, out)  # an index carries no gradient: never recorded
        if _ACTIVE[0]:
            recording.note_derived(made, (x,))
        return made

    def argmax(self, x: Any, *, axis: int, keepdims: bool = False) -> Any:
        """See :meth:`tensorplay.ops.Ops.argmax`."""
        return self._arg("argmax", np.argmax, x, axis, keepdims)

    def argmin(self, x: Any, *, axis: int, keepdims: bool = False) -> Any:
        """See :meth:`tensorplay.ops.Ops.argmin`."""
        return self._arg("argmin", np.argmin, x, axis, keepdims)

    def _view(self, name: str, x: Any, params: dict[str, Any], out: Array) -> Any:
        return _new_view(self, name, x, params, out)  # in-place checks look at the viewed tensor

    def reshape(self, x: Any, *, shape: tuple[int, ...]) -> Any:
        """See :meth:`tensorplay.ops.Ops.reshape`."""
        try:
            out = x._data.reshape(shape)
        except (ValueError, TypeError, AttributeError):
            _rule("reshape", (x,), {"shape": shape})
            raise
        return self._view("reshape", x, {"shape": tuple(shape)}, out)

    def permute(self, x: Any, *, perm: tuple[int, ...]) -> Any:
        """See :meth:`tensorplay.ops.Ops.permute`."""
        _rule("permute", (x,), {"perm": perm})
        return self._view("permute", x, {"perm": tuple(perm)}, x._data.transpose(perm))

    def broadcast_to(self, x: Any, *, shape: tuple[int, ...]) -> Any:
        """See :meth:`tensorplay.ops.Ops.broadcast_to`."""
        _rule("broadcast_to", (x,), {"shape": shape})
        return self._view("broadcast_to", x, {"shape": tuple(shape)}, np.broadcast_to(x._data, shape))

    def slice(self, x: Any, *, starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]) -> Any:
        """See :meth:`tensorplay.ops.Ops.slice`."""
        params = {"starts": tuple(starts), "stops": tuple(stops), "steps": tuple(steps)}
        _rule("slice", (x,), params)
        index = tuple([slice(a, None if (b < 0 and c < 0) else b, c) for a, b, c in zip(starts, stops, steps)])
        return _new_view(self, "slice", x, params, x._data[index])

    def pad(self, x: Any, *, pads: tuple[tuple[int, int], ...], value: float = 0.0) -> Any:
        """See :meth:`tensorplay.ops.Ops.pad`."""
        params = {"pads": tuple(tuple(p) for p in pads), "value": value}
        aval = _rule("pad", (x,), params)
        out = np.pad(x._data, tuple(tuple(p) for p in pads), mode="constant", constant_values=value)
        return self._finish("pad", (x,), params, _array(out, aval.dtype))

    @_checks_foreign
    def concat(self, *xs: Any, axis: int) -> Any:
        """See :meth:`tensorplay.ops.Ops.concat`."""
        arrays = _same_float_arrays(xs)
        if arrays is not None and type(axis) is int:
            try:  # one float dtype: numpy checks the shapes and the axis as the rule would
                out = CONCATENATE(arrays, axis=axis)
            except (ValueError, TypeError):
                _rule("concat", xs, {"axis": axis})
                raise
            return _result(self, "concat", xs, {"axis": axis}, out)
        if _has_foreign(xs):
            return self._foreign("concat", xs, {"axis": axis})
        aval = _rule("concat", xs, {"axis": axis})
        out = np.concatenate([x._data.astype(aval.dtype, copy=False) for x in xs], axis=axis)
        return self._finish("concat", xs, {"axis": axis}, _array(out, aval.dtype))

    def cast(self, x: Any, *, dtype: str) -> Any:
        """See :meth:`tensorplay.ops.Ops.cast`."""
        _rule("cast", (x,), {"dtype": dtype})
        with np.errstate(all="ignore"):
            out = x._data.astype(_NUMPY_DTYPES[dtype])
        return self._finish("cast", (x,), {"dtype": dtype}, out)

    def stop_gradient(self, x: Any) -> Any:
        """See :meth:`tensorplay.ops.Ops.stop_gradient`."""
        made: Tensor[*tuple[Any, ...]] = Tensor(self, x._data)
        if _ACTIVE[0]:
            recording.note_derived(made, (x,))
        return made

    def full(self, *, shape: tuple[int, ...], value: float, dtype: str) -> Any:
        """See :meth:`tensorplay.ops.Ops.full`."""
        _rule("full", (), {"shape": shape, "value": value, "dtype": dtype})
        return Tensor(self, np.full(shape, value, dtype=_NUMPY_DTYPES[dtype]))

    def iota(self, *, length: int, dtype: str) -> Any:
        """See :meth:`tensorplay.ops.Ops.iota`."""
        _rule("iota", (), {"length": length, "dtype": dtype})
        return Tensor(self, np.arange(length, dtype=_NUMPY_DTYPES[dtype]))

    def matmul(self, a: Any, b: Any) -> Any:
        """See :meth:`tensorplay.ops.Ops.matmul` (one BLAS call)."""
        ad, bd = a._data, b._data
        if ad.dtype is not bd.dtype or ad.dtype.kind != "f" or ad.ndim < 2 or bd.ndim < 2:
            aval = _rule("matmul", (a, b), {})
            ad, bd = ad.astype(aval.dtype, copy=False), bd.astype(aval.dtype, copy=False)
        try:
            if ad.ndim > 2 and bd.ndim == 2 and ad.flags.c_contiguous and ad.shape[-1] == bd.shape[0] and ad.size:
                # a broadcast 2-d right operand: one GEMM over the folded batch (np.matmul would loop);
                # not when empty (reshape(-1, 0) cannot infer the batch)
                out = K.matmul(ad.reshape(-1, ad.shape[-1]), bd).reshape(ad.shape[:-1] + bd.shape[-1:])
            elif ad.shape[-1] == 1 and bd.shape[-2] == 1 and (ad.ndim > 2 or bd.ndim > 2):
                out = K.outer_matmul(ad, bd)  # K == 1: batched outer products (np.matmul's loop is slow)
            elif ad.ndim == 2 and bd.ndim == 2:
                out = K.matmul(ad, bd)  # OpenBLAS's threads as the thread policy says
            else:  # (a short transposed right operand is copied first, as the compiled steps do)
                out = np.matmul(ad, right_operand(bd))
        except ValueError:
            _rule("matmul", (a, b), {})
            raise
        return self._finish("matmul", (a, b), {}, out)

    _matmul_arrays = matmul  # the method itself, without the check for other interpreters' tensors (fastpath)

    # ---- the Tensor methods' entry points (see :mod:`tensorplay.interpreters.eager.fastpath`) ----------
    tensor_getitem = fastpath.getitem
    tensor_reshape = fastpath.reshape
    tensor_permute = fastpath.permute
    tensor_unsqueeze = fastpath.unsqueeze
    tensor_reduce = fastpath.reduce
    tensor_mean = fastpath.mean
    tensor_arg_reduce = fastpath.arg_reduce
    tensor_extremum = fastpath.extremum
    tensor_matmul = fastpath.matmul

    # ---- layers (see :mod:`.fastpath_conv` and :mod:`.fastpath_linear`) ---------------------------------
    conv = fastpath_conv.conv
    linear = fastpath_linear.linear

    def batch_norm(self, x: Any, mean: Any, var: Any, weight: Any, bias: Any, *, eps: float) -> Any:
        """See :meth:`tensorplay.ops.Ops.batch_norm` (composed numpy: scale and shift per channel)."""
        inputs = (x, mean, var, weight, bias)
        aval = _rule("batch_norm", inputs, {"eps": eps})
        shape = (1, -1) + (1,) * (x.ndim - 2)
        scale = weight._data / np.sqrt(var._data + eps)
        shift = bias._data - mean._data * scale
        out = x._data * scale.reshape(shape) + shift.reshape(shape)
        return self._finish("batch_norm", inputs, {"eps": eps}, _array(out, aval.dtype))


def _rule_compute_dtype(name: str, out_dtype: str, x: Any, y: Any) -> str:
    """The dtype both operands are converted to before a binary ufunc runs."""
    if out_dtype != "bool":
        return out_dtype
    dtypes = [dtype_name(v._data.dtype) for v in (x, y) if isinstance(v, Tensor)]
    return result_type(dtypes + [weak_kind(v) for v in (x, y) if not isinstance(v, Tensor)])


def _has_foreign(inputs: tuple[Any, ...]) -> bool:
    """Whether a tensor among ``inputs`` has a payload that is not a numpy array (another interpreter's)."""
    for x in inputs:
        if isinstance(x, Tensor) and type(x._data) is not np.ndarray:
            return True
    return False


def _same_float_arrays(xs: tuple[Any, ...]) -> list[Array] | None:
    """The payloads of ``xs`` when all are eager float tensors of one dtype and rank at least 1, else None."""
    if not xs or not isinstance(xs[0], Tensor):
        return None
    first = xs[0]._data
    if type(first) is not np.ndarray or first.dtype.kind != "f" or not first.ndim:
        return None
    arrays = []
    for x in xs:
        data = x._data if isinstance(x, Tensor) else None
        if type(data) is not np.ndarray or data.dtype is not first.dtype or data.ndim != first.ndim:
            return None
        arrays.append(data)
    return arrays


def _valid_axes(axes: Any, ndim: int) -> bool:
    """Whether ``axes`` is a tuple of distinct in-range int axes (what the reduction rules accept)."""
    if type(axes) is not tuple:
        return False
    for a in axes:
        if type(a) is not int or not -ndim <= a < ndim:
            return False
    return len(axes) < 2 or len({a % ndim for a in axes}) == len(axes)


def _make_unary(name: str) -> Callable[..., Any]:
    kernel = UNARY_KERNELS.get(name)

    def method(self: EagerInterpreter, x: Any, **params: Any) -> Any:
        # the common case inline (what ``_unary`` and ``_result`` do for a float tensor without params): a
        # float input keeps its dtype, so no rule runs; anything else takes ``_unary``
        if not params and type(x) is Tensor and kernel is not None:
            data = x._data
            if type(data) is np.ndarray and data.dtype.kind == "f":
                try:
                    out = kernel(data)
                except TypeError:  # numpy refuses the dtype: ``_unary`` raises the rule's error
                    return self._unary(name, x)
                if type(out) is not np.ndarray:
                    out = np.asarray(out)
                made: Tensor[*tuple[Any, ...]] = Tensor(self, out)
                if _ACTIVE[0]:
                    recording.note_derived(made, (x,))
                if x._requires_grad and out.dtype.kind == "f" and tape.grad_enabled():  # ``_result`` for one input
                    tape.attach(made, name, (x,), {})
                return made
        return self._unary(name, x, **params)
    method.__name__ = name
    method.__doc__ = f"See :meth:`tensorplay.ops.Ops.{name}`."
    method.generated_for = name  # type: ignore[attr-defined]
    return method


def _make_binary(name: str) -> Callable[..., Any]:
    def method(self: EagerInterpreter, x: Any, y: Any) -> Any:
        return self._binary(name, x, y)
    method.__name__ = name
    method.__doc__ = f"See :meth:`tensorplay.ops.Ops.{name}`."
    method.generated_for = name  # type: ignore[attr-defined]
    return method


def _make_kernel(name: str) -> Callable[..., Any]:
    def method(self: EagerInterpreter, *inputs: Any, **params: Any) -> Any:
        return self._kernel(name, inputs, params)
    method.__name__ = name
    method.__doc__ = f"See :meth:`tensorplay.ops.Ops.{name}` (kernel in :mod:`tensorplay.interpreters.eager.kernels`)."
    method.generated_for = name  # type: ignore[attr-defined]
    return method


def _accepting_foreign(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """A hand-written eager method that hands the operation to a newer interpreter when an input belongs
    to one (see :meth:`EagerInterpreter._foreign`)."""
    def run(self: EagerInterpreter, *inputs: Any, **params: Any) -> Any:
        for x in inputs:
            if isinstance(x, Tensor) and type(x._data) is not np.ndarray:
                return self._foreign(name, inputs, params)
        return method(self, *inputs, **params)
    run.__name__ = name
    run.__doc__ = method.__doc__
    run.__wrapped__ = method  # type: ignore[attr-defined]
    return run


def _install_generated_methods() -> None:
    """Every primitive of the table without a hand-written method gets one from its family: unary and
    binary primitives run their kernel from :data:`UNARY_KERNELS` / :data:`BINARY_KERNELS`; every other
    one runs the kernel of the same name in :mod:`tensorplay.interpreters.eager.kernels` after its
    shape rule."""
    for name, prim in PRIMITIVES.items():
        if name in vars(EagerInterpreter):
            if not getattr(vars(EagerInterpreter)[name], "checks_foreign", False):
                setattr(EagerInterpreter, name, _accepting_foreign(name, vars(EagerInterpreter)[name]))
            continue
        maker = {"unary": _make_unary, "binary": _make_binary}.get(prim.family, _make_kernel)
        setattr(EagerInterpreter, name, maker(name))


_install_generated_methods()


def missing_kernels() -> list[str]:
    """Primitives of the table the eager interpreter cannot run: no hand-written method and no kernel
    (in :data:`UNARY_KERNELS`, :data:`BINARY_KERNELS` or :mod:`tensorplay.interpreters.eager.kernels`)."""
    out = []
    for name, prim in PRIMITIVES.items():
        if getattr(getattr(EagerInterpreter, name, None), "generated_for", None) is None:
            continue  # a hand-written method
        table = {"unary": UNARY_KERNELS, "binary": BINARY_KERNELS}.get(prim.family)
        if (name not in table) if table is not None else not callable(getattr(K, name, None)):
            out.append(name)
    return out

eager = EagerInterpreter()
"""The eager interpreter (``tp.eager``)."""
