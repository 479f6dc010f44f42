"""``Tensor[*Shape]``: a handle pairing an interpreter with its payload.

A tensor never computes anything itself: every operator and method calls
the interpreter it carries (``tensor._ops``), so the same model code runs
eagerly, under the graph recorder, or inside a transform. When tensors of
several interpreters meet, the one with the highest ``level`` handles the
operation (an outer transform's value seen inside an inner one is lifted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, Literal, NamedTuple, TypeVar, TypeVarTuple, overload

import numpy as np

from tensorplay import devices as _device
from tensorplay import dtypes as _dt
from tensorplay import derived as _p
from tensorplay import sorting as _sorting
from tensorplay import math_ops as _math
from tensorplay import math_more as _more
from tensorplay import elementwise_ops as _ew
from tensorplay import sequence_ops as _seq
from tensorplay import indexing_ops as _idx
from tensorplay import product_ops as _prod
from tensorplay import statistics_ops as _stats
from tensorplay import selection_ops as _select
from tensorplay import structure_ops as _struct
from tensorplay import shape_ops as _shape
from tensorplay import recording as _recording
from tensorplay.errors import AxisError, DTypeError, ShapeError
from tensorplay.pydata import check_scalar_fits

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

SAMPLERS: dict[str, Any] = {}
"""Random draws that tensor methods call but that need the creation layer, which the tensor core does not
import: :mod:`tensorplay.random_draws` registers ``bernoulli`` here when imported (``import tensorplay``
imports it)."""

Shape = TypeVarTuple("Shape")
S2 = TypeVarTuple("S2")
VS = TypeVarTuple("VS")
Scalar = bool | int | float
Flag = bool
"""``bool``, for annotations inside :class:`Tensor` (whose ``bool`` method hides the builtin there)."""

# Typing-only names for the shape-polymorphic signatures below. Methods that constrain
# ``self`` use their own TypeVarTuples (reusing ``Shape`` in a ``self`` annotation
# silently gives a wrong type in mypy). ``Lead`` is a leading shape kept by the method,
# ``Rest`` a trailing one; ``M``, ``K``, ``N`` are matrix dims; ``D`` a feature dim.
Lead = TypeVarTuple("Lead")
Rest = TypeVarTuple("Rest")
A0 = TypeVar("A0")
A1 = TypeVar("A1")
M = TypeVar("M")
K = TypeVar("K")
N = TypeVar("N")
D = TypeVar("D")
One = Literal[1]
AnyShape = tuple[Any, ...]
_RECORDING_ACTIVE = _recording.active


class Size(tuple[int, ...]):
    """The shape of a tensor: a tuple of ints, printed like ``tp.Size([2, 3])``."""

    def __repr__(self) -> str:
        return f"tp.Size({list(self)!r})"

    def numel(self) -> int:
        """The number of elements of a tensor of this shape."""
        n = 1
        for d in self:
            n *= int(d)
        return n


_FACTORY_HOOK: list[Any] = []
"""The factories behind ``Tensor.new_zeros`` and friends: :mod:`tensorplay.creation` registers itself here at
import (the tensor class sits below the factories in the layering)."""


def _factories() -> Any:
    if not _FACTORY_HOOK:  # only while ``tensorplay`` itself is still being imported
        raise RuntimeError("Tensor.new_*: tensorplay.creation is not imported yet")
    return _FACTORY_HOOK[0]


_TENSOR_HOOKS: list[Any] = []
"""The tape's tensor hooks behind ``register_hook``, ``retain_grad`` and friends:
:mod:`tensorplay.interpreters.eager.hooks` registers itself here at import (``import tensorplay`` imports it)."""


def pick_interpreter(a: Interpreter, b: Interpreter) -> Interpreter:
    """Of two interpreters, the one that must handle an operation mixing their tensors: the higher
    ``level`` (the newer recording); ``a`` on a tie. Every choice of interpreter goes through here."""
    return a if a.level >= b.level else b


def highest_interpreter(values: Iterable[Any], default: Any) -> Any:
    """The interpreter that must run an operation on ``values`` (tensors and other objects, flat): the
    highest-level one among the tensors' interpreters and ``default`` (:func:`pick_interpreter`)."""
    ops = default
    for x in values:
        # ``isinstance``: a ``Parameter`` (a subclass) swapped into a recording carries that recorder
        if isinstance(x, Tensor) and x._ops is not ops:
            ops = pick_interpreter(ops, x._ops)
    return ops


class Tensor(Generic[*Shape]):
    """A tensor of shape ``*Shape``.

    Tensors are made by factories (``tp.tensor``, ``tp.zeros``, ...) or by
    interpreters; do not call the constructor directly.
    """

    __slots__ = ("_ops", "_data", "_requires_grad", "_grad", "_node", "_version", "_base", "__weakref__")
    __array_priority__ = 1000  # numpy defers binary operators to us

    _ops: Interpreter
    _data: Any
    _requires_grad: bool
    _grad: Tensor[*tuple[Any, ...]] | None
    _node: Any
    _version: list[int] | None
    _base: Tensor[*tuple[Any, ...]] | None

    def __init__(self, ops: Any, data: Any) -> None:
        self._ops = ops
        self._data = data
        self._requires_grad = False
        self._grad = None
        self._node = None
        self._version = None
        self._base = None
        if _RECORDING_ACTIVE[0]:  # a graph trace runs in some thread: note tensors it creates
            _recording.note_created(self)

    # ---- metadata --------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[*Shape]:
        """The shape, as a :class:`Size` (a tuple of ints; symbolic dims under export tracing)."""
        return Size(self._data.shape)  # type: ignore[return-value]

    @property
    def dtype(self) -> _dt.DType:
        """The element type."""
        return _dt.from_numpy_dtype(self._data.dtype)

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return len(self._data.shape)

    def dim(self) -> int:
        """The number of axes (PyTorch spelling)."""
        return len(self._data.shape)

    def numel(self) -> int:
        """The number of elements."""
        return Size(self._data.shape).numel()

    @overload
    def size(self) -> tuple[*Shape]: ...

    @overload
    def size(self, dim: int) -> int: ...

    def size(self, dim: int | None = None) -> Any:
        """The shape, or the size of axis ``dim`` (negative counts from the end)."""
        if dim is None:
            return self.shape
        return self._data.shape[_p.normalize_axis(dim, self.ndim, "size")]

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return int(self._data.shape[0])

    @property
    def interpreter(self) -> Interpreter:
        """The interpreter this tensor belongs to."""
        return self._ops

    @property
    def is_floating_point(self) -> bool:
        """True for float32 and float64 tensors."""
        return bool(self._data.dtype.kind == "f")

    # ---- values ----------------------------------------------------------------------------
    def numpy(self) -> np.ndarray[Any, Any]:
        """The value as a numpy array (shares memory for eager tensors that need no grad)."""
        if self._requires_grad:
            raise DTypeError("numpy(): the tensor requires grad; call .detach().numpy() instead")
        return self._ops.concrete(self)  # type: ignore[no-any-return]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray[Any, Any]:
        """numpy's conversion protocol (``np.asarray(t)``, ``np.array(t, copy=...)``).

        ``copy=True`` always copies; ``copy=None`` shares memory when it can (as ``numpy()``);
        ``copy=False`` shares or raises. A tensor that requires grad is always copied (writing
        into a shared array would change it behind autograd's back): ``copy=False`` raises."""
        value = np.asarray(self._ops.concrete(self))
        needs_copy = copy is True or self._requires_grad
        if copy is False and (self._requires_grad or (dtype is not None and np.dtype(dtype) != value.dtype)):
            why = "it requires grad" if self._requires_grad else f"its dtype {value.dtype} is not {np.dtype(dtype)}"
            raise ValueError(f"numpy.asarray(tensor, copy=False): cannot share the tensor's memory because {why}; "
                             "pass copy=None or copy=True (or use .detach() to share the memory)")
        if dtype is not None:
            return value.astype(dtype, copy=needs_copy)
        return np.array(value, copy=True) if needs_copy else value

    def item(self) -> Scalar:
        """The single element as a Python scalar."""
        value = np.asarray(self._ops.concrete(self))
        if value.size != 1:
            raise ValueError(f"item(): the tensor has {value.size} elements (shape {list(value.shape)}), expected 1")
        return value.reshape(()).item()  # type: ignore[no-any-return]

    def tolist(self) -> Any:
        """The value as nested Python lists (a scalar for a 0-d tensor)."""
        return np.asarray(self._ops.concrete(self)).tolist()

    def __bool__(self) -> bool:
        if self.ndim and self.numel() != 1:
            raise ValueError(f"bool(): the truth value of a tensor with {self.numel()} elements (shape "
                             f"{list(self._data.shape)}) is ambiguous; use .any() or .all(), or compare a single element")
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self.item())

    def __iter__(self) -> Iterator[Tensor[*tuple[Any, ...]]]:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return self._ops.format(self)

    # ---- autograd (the eager interpreter implements these) -------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether operations on this tensor are recorded for ``backward``."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self._ops.set_requires_grad(self, flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor[*Shape]:
        """Set ``requires_grad`` in place and return ``self``."""
        self._ops.set_requires_grad(self, requires_grad)
        return self

    @property
    def grad(self) -> Tensor[*Shape] | None:
        """The gradient accumulated by ``backward`` (leaf tensors only)."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor[*Shape] | None) -> None:
        """Assign a gradient: ``None``, or a tensor of this tensor's shape and dtype (as PyTorch checks)."""
        if value is not None:
            if not isinstance(value, Tensor):
                raise DTypeError(f"assigning .grad: expected a Tensor or None, got {type(value).__name__}")
            if tuple(value._data.shape) != tuple(self._data.shape):
                raise ShapeError(f"assigning .grad: the gradient has shape {list(value._data.shape)}, expected the "
                                 f"tensor's shape {list(self._data.shape)}")
            if value._data.dtype != self._data.dtype:
                raise DTypeError(f"assigning .grad: the gradient has dtype {value.dtype}, expected the tensor's "
                                 f"dtype {self.dtype}")
        self._grad = value

    @property
    def grad_fn(self) -> Any:
        """The tape node that produced this tensor, or ``None`` for a leaf."""
        return self._node

    @property
    def is_leaf(self) -> bool:
        """True unless the tensor was produced by a recorded operation."""
        return self._node is None

    def backward(self, gradient: Tensor[*Shape] | None = None, retain_graph: bool = False,
                 create_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see ``tp.autograd.backward``)."""
        self._ops.backward(self, gradient, retain_graph, create_graph)

    def detach(self) -> Tensor[*Shape]:
        """The same value, cut from the tape (shares memory)."""
        return self._ops.detach(self)

    def register_hook(self, hook: Callable[[Tensor[*Shape]], Tensor[*Shape] | None]) -> Any:
        """Call ``hook(grad)`` with this tensor's gradient (same shape) in each backward pass; a returned
        tensor replaces the gradient. Returns a handle whose ``remove()`` unregisters it. Eager only
        (see :mod:`tensorplay.interpreters.eager.hooks`)."""
        return _TENSOR_HOOKS[0].register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[[Tensor[*Shape]], None]) -> Any:
        """For a leaf: call ``hook(self)`` in ``backward()`` once ``self.grad`` is accumulated; returns a
        handle with ``remove()``."""
        return _TENSOR_HOOKS[0].register_post_accumulate_grad_hook(self, hook)

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward (a no-op for a leaf)."""
        _TENSOR_HOOKS[0].retain_grad(self)

    @property
    def retains_grad(self) -> bool:
        """Whether ``retain_grad()`` was called on this non-leaf tensor (``False`` for a leaf)."""
        return bool(_TENSOR_HOOKS[0].retains_grad(self))

    # ---- arithmetic --------------------------------------------------------------------------
    def _binary(self, name: str, other: Any, reverse: bool = False) -> Any:
        ops = self._ops
        kind = type(other)
        if kind is Tensor:
            if other._ops is not ops:
                ops = pick_interpreter(ops, other._ops)
        elif kind is not float and kind is not int:
            other = _p.operand(other, ops)
            if isinstance(other, Tensor):
                ops = pick_interpreter(ops, other._ops)
        return ops.run_binary(name, other, self) if reverse else ops.run_binary(name, self, other)

    @overload
    def __add__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __add__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __add__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __add__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    # the same broadcasts with the smaller operand first (``bias + x``, ``x.sum() * x``): both operands are
    # tensors, so Python (and mypy) never tries the right one's reflected method
    @overload
    def __add__(self: Tensor[()], other: Tensor[*Rest]) -> Tensor[*Rest]: ...

    @overload
    def __add__(self: Tensor[D], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __add__(self: Tensor[*Lead, One], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __add__(self: Tensor[One, *Rest], other: Tensor[A0, *Rest]) -> Tensor[A0, *Rest]: ...

    def __add__(self, other: Any) -> Any:
        return self._binary("add", other)

    def __radd__(self, other: Scalar) -> Tensor[*Shape]:
        return self._binary("add", other, True)  # type: ignore[no-any-return]

    @overload
    def __sub__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __sub__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __sub__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __sub__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    # the same broadcasts with the smaller operand first (``bias + x``, ``x.sum() * x``): both operands are
    # tensors, so Python (and mypy) never tries the right one's reflected method
    @overload
    def __sub__(self: Tensor[()], other: Tensor[*Rest]) -> Tensor[*Rest]: ...

    @overload
    def __sub__(self: Tensor[D], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __sub__(self: Tensor[*Lead, One], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __sub__(self: Tensor[One, *Rest], other: Tensor[A0, *Rest]) -> Tensor[A0, *Rest]: ...

    def __sub__(self, other: Any) -> Any:
        return self._binary("sub", other)

    def __rsub__(self, other: Scalar) -> Tensor[*Shape]:
        return self._binary("sub", other, True)  # type: ignore[no-any-return]

    @overload
    def __mul__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __mul__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __mul__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __mul__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    # the same broadcasts with the smaller operand first (``bias + x``, ``x.sum() * x``): both operands are
    # tensors, so Python (and mypy) never tries the right one's reflected method
    @overload
    def __mul__(self: Tensor[()], other: Tensor[*Rest]) -> Tensor[*Rest]: ...

    @overload
    def __mul__(self: Tensor[D], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __mul__(self: Tensor[*Lead, One], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __mul__(self: Tensor[One, *Rest], other: Tensor[A0, *Rest]) -> Tensor[A0, *Rest]: ...

    def __mul__(self, other: Any) -> Any:
        return self._binary("mul", other)

    def __rmul__(self, other: Scalar) -> Tensor[*Shape]:
        return self._binary("mul", other, True)  # type: ignore[no-any-return]

    @overload
    def __truediv__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __truediv__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __truediv__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __truediv__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    # the same broadcasts with the smaller operand first (``bias + x``, ``x.sum() * x``): both operands are
    # tensors, so Python (and mypy) never tries the right one's reflected method
    @overload
    def __truediv__(self: Tensor[()], other: Tensor[*Rest]) -> Tensor[*Rest]: ...

    @overload
    def __truediv__(self: Tensor[D], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __truediv__(self: Tensor[*Lead, One], other: Tensor[*Lead, D]) -> Tensor[*Lead, D]: ...

    @overload
    def __truediv__(self: Tensor[One, *Rest], other: Tensor[A0, *Rest]) -> Tensor[A0, *Rest]: ...

    def __truediv__(self, other: Any) -> Any:
        return self._binary("div", other)

    def __rtruediv__(self, other: Scalar) -> Tensor[*Shape]:
        return self._binary("div", other, True)  # type: ignore[no-any-return]

    def __floordiv__(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*Shape]:
        """``self // other``: see :func:`tensorplay.floordiv.floor_divide`."""
        from tensorplay.floordiv import floor_divide
        return floor_divide(self, other)

    def __rfloordiv__(self, other: Scalar) -> Tensor[*Shape]:
        from tensorplay.floordiv import floor_divide
        return floor_divide(other, self)

    def __mod__(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*Shape]:
        """``self % other`` (the sign of ``other``): see :func:`tensorplay.floordiv.remainder`."""
        from tensorplay.floordiv import remainder
        return remainder(self, other)

    def __rmod__(self, other: Scalar) -> Tensor[*Shape]:
        from tensorplay.floordiv import remainder
        return remainder(other, self)

    def floor_divide(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*Shape]:
        """``self // other``, as ``torch.Tensor.floor_divide``."""
        return self.__floordiv__(other)

    def remainder(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*Shape]:
        """``self % other``, as ``torch.Tensor.remainder``."""
        return self.__mod__(other)

    @overload
    def __pow__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __pow__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __pow__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __pow__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __pow__(self, other: Any) -> Any:
        return self._binary("pow", other)

    def __rpow__(self, other: Scalar) -> Tensor[*Shape]:
        return self._binary("pow", other, True)  # type: ignore[no-any-return]

    @overload
    def __matmul__(self: Tensor[M, K], other: Tensor[K, N]) -> Tensor[M, N]: ...

    @overload
    def __matmul__(self: Tensor[*Lead, M, K], other: Tensor[K, N]) -> Tensor[*Lead, M, N]: ...

    @overload
    def __matmul__(self: Tensor[*Lead, M, K], other: Tensor[*Lead, K, N]) -> Tensor[*Lead, M, N]: ...

    @overload
    def __matmul__(self: Tensor[*Lead, K], other: Tensor[K]) -> Tensor[*Lead]: ...

    @overload
    def __matmul__(self: Tensor[K], other: Tensor[*Lead, K, N]) -> Tensor[*Lead, N]: ...

    def __matmul__(self, other: Any) -> Any:
        """``a[*B, M, K] @ b[*B, K, N] -> [*B, M, N]`` (also ``b[K, N]``, and a vector ``b[K]``; a vector
        ``a[K] @ b[*B, K, N] -> [*B, N]``)."""
        ops = self._ops
        if isinstance(other, Tensor) and other._ops is not ops:  # what ``_pick`` does, without the call
            ops = pick_interpreter(ops, other._ops)
        return ops.tensor_matmul(self, other)

    def __rmatmul__(self, other: np.ndarray[Any, Any]) -> Tensor[*tuple[Any, ...]]:
        # Only a non-tensor left operand gets here (``array @ tensor``). Typed narrowly on purpose:
        # accepting tensors would let mypy fall back to it whenever ``a @ b`` does not type-check.
        return _p.matmul(self._pick(other), other, self)  # type: ignore[no-any-return]

    matmul = __matmul__

    def __neg__(self) -> Tensor[*Shape]:
        return self._ops.neg(self)

    def __pos__(self) -> Tensor[*Shape]:
        if self.dtype.name == "bool":  # as PyTorch: unary + is arithmetic
            raise DTypeError(f"+x (positive): x must be an int or float tensor, got bool (x: bool{[*self.shape]})")
        return self

    def __abs__(self) -> Tensor[*Shape]:
        return self._ops.abs(self)

    def __invert__(self) -> Tensor[*Shape]:
        """``~x``: bitwise not of an integer tensor, logical not of a bool tensor; floats are refused."""
        return self._ops.bitwise_not(self)

    @overload
    def __and__(self, other: Tensor[*Shape] | Tensor[()] | bool | int) -> Tensor[*Shape]: ...

    @overload
    def __and__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __and__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __and__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __and__(self, other: Any) -> Any:
        """``x & y``: bitwise and of integers, logical and of bools; floats are refused."""
        return self._binary("bitwise_and", other)

    def __rand__(self, other: bool | int) -> Tensor[*Shape]:
        return self._binary("bitwise_and", other, reverse=True)  # type: ignore[no-any-return]

    @overload
    def __or__(self, other: Tensor[*Shape] | Tensor[()] | bool | int) -> Tensor[*Shape]: ...

    @overload
    def __or__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __or__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __or__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __or__(self, other: Any) -> Any:
        """``x | y``: bitwise or of integers, logical or of bools; floats are refused."""
        return self._binary("bitwise_or", other)

    def __ror__(self, other: bool | int) -> Tensor[*Shape]:
        return self._binary("bitwise_or", other, reverse=True)  # type: ignore[no-any-return]

    @overload
    def __xor__(self, other: Tensor[*Shape] | Tensor[()] | bool | int) -> Tensor[*Shape]: ...

    @overload
    def __xor__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __xor__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __xor__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __xor__(self, other: Any) -> Any:
        """``x ^ y``: bitwise xor of integers, logical xor of bools; floats are refused."""
        return self._binary("bitwise_xor", other)

    def __rxor__(self, other: bool | int) -> Tensor[*Shape]:
        return self._binary("bitwise_xor", other, reverse=True)  # type: ignore[no-any-return]

    def __eq__(self, other: object) -> Tensor[*Shape]:  # type: ignore[override]
        if other is None:  # ``t == None`` is False, as in PyTorch (not an elementwise comparison)
            return False  # type: ignore[return-value]
        return self._binary("eq", other)  # type: ignore[no-any-return]

    def __ne__(self, other: object) -> Tensor[*Shape]:  # type: ignore[override]
        if other is None:
            return True  # type: ignore[return-value]
        return self._binary("ne", other)  # type: ignore[no-any-return]

    @overload
    def __lt__(self, other: Tensor[*Shape] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __lt__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __lt__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __lt__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __lt__(self, other: Any) -> Any:
        return self._binary("lt", other)

    @overload
    def __le__(self, other: Tensor[*Shape] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __le__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __le__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __le__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __le__(self, other: Any) -> Any:
        return self._binary("le", other)

    @overload
    def __gt__(self, other: Tensor[*Shape] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __gt__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __gt__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __gt__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __gt__(self, other: Any) -> Any:
        return self._binary("gt", other)

    @overload
    def __ge__(self, other: Tensor[*Shape] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __ge__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __ge__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __ge__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __ge__(self, other: Any) -> Any:
        return self._binary("ge", other)

    __hash__ = object.__hash__

    def _pick(self, other: object) -> Interpreter:
        if isinstance(other, Tensor):
            return pick_interpreter(self._ops, other._ops)
        return self._ops

    def _pick_all(self, *others: object) -> Interpreter:
        return highest_interpreter(others, self._ops)  # type: ignore[no-any-return]

    # ---- elementwise methods -------------------------------------------------------------------
    def exp(self) -> Tensor[*Shape]:
        """``e**x``."""
        return self._ops.exp(self)

    def log(self) -> Tensor[*Shape]:
        """Natural logarithm."""
        return self._ops.log(self)

    def log1p(self) -> Tensor[*Shape]:
        """``log(1 + x)``."""
        return self._ops.log1p(self)

    def expm1(self) -> Tensor[*Shape]:
        """``exp(x) - 1``."""
        return self._ops.expm1(self)

    def sqrt(self) -> Tensor[*Shape]:
        """Square root."""
        return self._ops.sqrt(self)

    def rsqrt(self) -> Tensor[*Shape]:
        """``1 / sqrt(x)``."""
        return self._ops.rsqrt(self)

    def sin(self) -> Tensor[*Shape]:
        """Sine."""
        return self._ops.sin(self)

    def cos(self) -> Tensor[*Shape]:
        """Cosine."""
        return self._ops.cos(self)

    def tanh(self) -> Tensor[*Shape]:
        """Hyperbolic tangent."""
        return self._ops.tanh(self)

    def sigmoid(self) -> Tensor[*Shape]:
        """Logistic sigmoid."""
        return self._ops.sigmoid(self)

    def relu(self) -> Tensor[*Shape]:
        """``max(x, 0)``."""
        return self._ops.relu(self)

    def gelu(self, approximate: str = "none") -> Tensor[*Shape]:
        """GELU (erf form, or ``approximate="tanh"``)."""
        return self._ops.gelu(self, approximate=approximate)

    def abs(self) -> Tensor[*Shape]:
        """Absolute value."""
        return self._ops.abs(self)

    def sign(self) -> Tensor[*Shape]:
        """-1, 0 or 1."""
        return self._ops.sign(self)

    def neg(self) -> Tensor[*Shape]:
        """``-x``."""
        return self._ops.neg(self)

    def erf(self) -> Tensor[*Shape]:
        """The error function."""
        return self._ops.erf(self)

    def floor(self) -> Tensor[*Shape]:
        """Round down."""
        return self._ops.floor(self)

    def ceil(self) -> Tensor[*Shape]:
        """Round up."""
        return self._ops.ceil(self)

    def round(self, decimals: int = 0) -> Tensor[*Shape]:
        """Round to ``decimals`` decimal places, halves to even (``round(2.5) == 2``, as PyTorch); gradient 0."""
        return _p.round_half_even(self._ops, self, decimals)  # type: ignore[no-any-return]

    def square(self) -> Tensor[*Shape]:
        """``x * x``; a bool tensor squares to int64, as PyTorch (``pow(x, 2)``)."""
        x = self._ops.cast(self, dtype="int64") if self.dtype.name == "bool" else self
        return self._ops.mul(x, x)

    def pow(self, exponent: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """``x ** exponent``."""
        return self._binary("pow", exponent)  # type: ignore[no-any-return]

    @overload
    def maximum(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def maximum(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def maximum(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def maximum(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def maximum(self, other: Any) -> Any:
        """Elementwise max (numpy broadcasting)."""
        return self._binary("maximum", other)

    @overload
    def minimum(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def minimum(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def minimum(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def minimum(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def minimum(self, other: Any) -> Any:
        """Elementwise min (numpy broadcasting)."""
        return self._binary("minimum", other)

    def clamp(self, min: Tensor[*Shape] | Tensor[()] | Scalar | None = None,
              max: Tensor[*Shape] | Tensor[()] | Scalar | None = None) -> Tensor[*Shape]:
        """Limit to ``[min, max]`` (either may be ``None``, a number or a tensor that broadcasts); the
        gradient is 1 inside the closed interval and goes to a tensor bound where it is exceeded."""
        return _p.clamp(self._pick_all(min, max), self, min, max)  # type: ignore[no-any-return]

    clip = clamp

    def isnan(self) -> Tensor[*Shape]:
        """True where the value is NaN."""
        return self._ops.ne(self, self)

    def isfinite(self) -> Tensor[*Shape]:
        """True where the value is neither infinite nor NaN (always for integers and bools)."""
        return _p.isfinite(self._ops, self)  # type: ignore[no-any-return]

    def isinf(self) -> Tensor[*Shape]:
        """True where the value is ``+inf`` or ``-inf``."""
        return _p.isinf(self._ops, self)  # type: ignore[no-any-return]

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None) -> Tensor[*Shape]:
        """NaN, ``+inf`` and ``-inf`` replaced by ``nan``, ``posinf`` and ``neginf`` (by default the dtype's
        largest and smallest finite values); the gradient reaches the finite entries only."""
        return _p.nan_to_num(self._ops, self, nan, posinf, neginf)  # type: ignore[no-any-return]

    def masked_fill(self, mask: Tensor[*tuple[Any, ...]], value: Tensor[()] | Scalar) -> Tensor[*Shape]:
        """``value`` where the bool ``mask`` (broadcast to this shape) is True; shape and dtype kept."""
        return _p.masked_fill(self._pick_all(mask, value), self, mask, value)  # type: ignore[no-any-return]

    def isclose(self, other: Tensor[*Shape] | Tensor[()] | Scalar, rtol: float = 1e-05, atol: float = 1e-08,
                equal_nan: bool = False) -> Tensor[*Shape]:
        """``|self - other| <= atol + rtol * |other|`` elementwise (``torch.isclose``)."""
        return _p.isclose(self._pick(other), self, other, rtol, atol, equal_nan)  # type: ignore[no-any-return]

    def allclose(self, other: Tensor[*Shape] | Tensor[()] | Scalar, rtol: float = 1e-05, atol: float = 1e-08,
                 equal_nan: bool = False) -> bool:
        """Whether :meth:`isclose` holds everywhere, as a Python bool (reads the value: under a symbolic
        recording this is refused, in execute mode it is recorded as a guard)."""
        return bool(self.isclose(other, rtol, atol, equal_nan).all())

    def tril(self, diagonal: int = 0) -> Tensor[*Shape]:
        """The lower triangle of the last two axes (entries with ``col - row <= diagonal``), zeros above."""
        return _p.triangle(self._ops, self, diagonal, True)  # type: ignore[no-any-return]

    def triu(self, diagonal: int = 0) -> Tensor[*Shape]:
        """The upper triangle of the last two axes (entries with ``col - row >= diagonal``), zeros below."""
        return _p.triangle(self._ops, self, diagonal, False)  # type: ignore[no-any-return]

    def outer(self: Tensor[M], other: Tensor[N]) -> Tensor[M, N]:
        """``out[i, j] = self[i] * other[j]`` for two vectors."""
        return _p.outer(self._pick(other), self, other)  # type: ignore[no-any-return]

    def cumsum(self, dim: int) -> Tensor[*Shape]:
        """Running sums along ``dim`` (bool and integers accumulate in int64)."""
        return _p.cumsum(self._ops, self, dim)  # type: ignore[no-any-return]

    def softmax(self, dim: int) -> Tensor[*Shape]:
        """Softmax along ``dim``: ``x[*S]`` to ``[*S]`` (a 0-d tensor takes ``dim`` 0 or -1, as PyTorch)."""
        if self.ndim:
            return self._ops.softmax(self, axis=dim)
        return _p.softmax(self._ops, "softmax", self, dim)  # type: ignore[no-any-return]

    def log_softmax(self, dim: int) -> Tensor[*Shape]:
        """Log-softmax along ``dim``: ``x[*S]`` to ``[*S]`` (a 0-d tensor takes ``dim`` 0 or -1, as PyTorch)."""
        if self.ndim:
            return self._ops.log_softmax(self, axis=dim)
        return _p.softmax(self._ops, "log_softmax", self, dim)  # type: ignore[no-any-return]

    # ---- reductions ---------------------------------------------------------------------------
    @overload
    def sum(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def sum(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def sum(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def sum(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False) -> Tensor[*Lead, D]: ...

    @overload
    def sum(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True]) -> Tensor[*Lead, One, D]: ...

    @overload
    def sum(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> Tensor[*Rest]: ...

    @overload
    def sum(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True]) -> Tensor[One, *Rest]: ...

    @overload
    def sum(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> Tensor[A0, *Rest]: ...

    @overload
    def sum(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True]) -> Tensor[A0, One, *Rest]: ...

    @overload
    def sum(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def sum(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Any:
        """Sum over ``dim`` (all axes when ``None`` or empty, ``()``/``[]``, as ``torch.sum``)."""
        return self._ops.tensor_reduce("reduce_sum", self, dim, keepdim)

    @overload
    def mean(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def mean(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def mean(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def mean(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False) -> Tensor[*Lead, D]: ...

    @overload
    def mean(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True]) -> Tensor[*Lead, One, D]: ...

    @overload
    def mean(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> Tensor[*Rest]: ...

    @overload
    def mean(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True]) -> Tensor[One, *Rest]: ...

    @overload
    def mean(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> Tensor[A0, *Rest]: ...

    @overload
    def mean(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True]) -> Tensor[A0, One, *Rest]: ...

    @overload
    def mean(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def mean(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Any:
        """Mean over ``dim`` (all axes when ``None`` or empty: ``()``, ``[]``); integer tensors are refused."""
        return self._ops.tensor_mean(self, dim, keepdim)

    @overload
    def var(self, dim: None = None, keepdim: Literal[False] = False, correction: int = 1) -> Tensor[()]: ...

    @overload
    def var(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[*Lead]: ...

    @overload
    def var(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True], correction: int = 1) -> Tensor[*Lead, One]: ...

    @overload
    def var(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[*Lead, D]: ...

    @overload
    def var(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True], correction: int = 1) -> Tensor[*Lead, One, D]: ...

    @overload
    def var(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[*Rest]: ...

    @overload
    def var(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True], correction: int = 1) -> Tensor[One, *Rest]: ...

    @overload
    def var(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[A0, *Rest]: ...

    @overload
    def var(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True], correction: int = 1) -> Tensor[A0, One, *Rest]: ...

    @overload
    def var(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor[*AnyShape]: ...

    def var(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False,
            correction: int = 1) -> Any:
        """Variance over ``dim`` (all axes when ``None`` or empty: ``()``, ``[]``) with Bessel's ``correction``
        (1 by default, as PyTorch)."""
        return _p.var(self._ops, self, dim, keepdim, correction)

    @overload
    def std(self, dim: None = None, keepdim: Literal[False] = False, correction: int = 1) -> Tensor[()]: ...

    @overload
    def std(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[*Lead]: ...

    @overload
    def std(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True], correction: int = 1) -> Tensor[*Lead, One]: ...

    @overload
    def std(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[*Lead, D]: ...

    @overload
    def std(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True], correction: int = 1) -> Tensor[*Lead, One, D]: ...

    @overload
    def std(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[*Rest]: ...

    @overload
    def std(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True], correction: int = 1) -> Tensor[One, *Rest]: ...

    @overload
    def std(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False, correction: int = 1) -> Tensor[A0, *Rest]: ...

    @overload
    def std(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True], correction: int = 1) -> Tensor[A0, One, *Rest]: ...

    @overload
    def std(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False, correction: int = 1) -> Tensor[*AnyShape]: ...

    def std(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False,
            correction: int = 1) -> Any:
        """Standard deviation over ``dim`` (all axes when ``None``, ``()`` or ``[]``) with Bessel's
        ``correction`` (1 by default, as PyTorch); the gradient of a constant sample is 0 (PyTorch's
        convention), not NaN."""
        return _p.std(self._ops, self, dim, keepdim, correction)

    @overload
    def norm(self, p: float | str = "fro", dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def norm(self: Tensor[*Lead, D], p: float | str, dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def norm(self: Tensor[*Lead, D], p: float | str, dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def norm(self, p: float | str = "fro", dim: int | tuple[int, ...] | None = None,
             keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def norm(self, p: float | str = "fro", dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Any:
        """The vector ``p``-norm over ``dim`` (all axes when ``None``, ``()`` or ``[]``), as ``torch.norm``:
        ``"fro"`` and 2 (``sqrt(sum(x^2))``), 1, ``inf``, ``-inf``, 0 (non-zeros) or any other number; the
        gradient at a zero vector is 0, as PyTorch."""
        return _p.norm(self._ops, self, p, dim, keepdim)

    @overload
    def all(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def all(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def all(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def all(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Any:
        """Whether every element over ``dim`` (all axes when ``None``; none when ``()``, as ``torch.all``) is
        non-zero, as a bool tensor."""
        return _p.all_true(self._ops, self, dim, keepdim)

    @overload
    def any(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def any(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def any(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def any(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Any:
        """Whether any element over ``dim`` (all axes when ``None``; none when ``()``, as ``torch.any``) is
        non-zero, as a bool tensor."""
        return _p.any_true(self._ops, self, dim, keepdim)

    def sort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> ValuesIndices[*Shape]:
        """The named tuple ``(values, indices)`` sorted along ``dim``. Always stable (equal values keep their
        order, what PyTorch guarantees with ``stable=True``); NaN sorts as the largest value (last
        ascending, first descending). Gradients reach the values through their indices."""
        return ValuesIndices(*_sorting.sort(self._ops, self, dim, descending))

    def argsort(self, dim: int = -1, descending: bool = False, stable: bool = False) -> Tensor[*Shape]:
        """The int64 positions that sort along ``dim`` (see :meth:`sort`)."""
        return _sorting.argsort(self._ops, self, dim, descending)  # type: ignore[no-any-return]

    @overload
    def topk(self: Tensor[*Lead, D], k: int, dim: Literal[-1] = -1, largest: bool = True,
             sorted: bool = True) -> ValuesIndices[*Lead, int]: ...

    @overload
    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> ValuesIndices[*AnyShape]: ...

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:
        """The named tuple ``(values, indices)`` of the ``k`` largest (``largest=False``: smallest) entries
        along ``dim``, always in sorted order; NaN counts as the largest; of equal values the first
        positions are taken (PyTorch leaves that order unspecified)."""
        return ValuesIndices(*_sorting.topk(self._ops, self, k, dim, largest))

    @overload
    def max(self) -> Tensor[()]: ...

    @overload
    def max(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> ValuesIndices[*Lead]: ...

    @overload
    def max(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> ValuesIndices[*Lead, One]: ...

    @overload
    def max(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False) -> ValuesIndices[*Lead, D]: ...

    @overload
    def max(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True]) -> ValuesIndices[*Lead, One, D]: ...

    @overload
    def max(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> ValuesIndices[*Rest]: ...

    @overload
    def max(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True]) -> ValuesIndices[One, *Rest]: ...

    @overload
    def max(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> ValuesIndices[A0, *Rest]: ...

    @overload
    def max(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True]) -> ValuesIndices[A0, One, *Rest]: ...

    @overload
    def max(self, dim: int, keepdim: bool = False) -> ValuesIndices[*AnyShape]: ...

    @overload
    def max(self, other: Tensor[*Shape] | Tensor[()], /) -> Tensor[*Shape]: ...

    @overload
    def max(self: Tensor[*Lead, D], other: Tensor[D], /) -> Tensor[*Lead, D]: ...

    @overload
    def max(self: Tensor[*Lead, D], other: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...

    @overload
    def max(self: Tensor[A0, *Rest], other: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...

    def max(self, dim: Any = None, keepdim: bool = False) -> Any:
        """PyTorch's three forms: ``x.max()`` is the largest element (0-d; tied elements share the
        gradient); ``x.max(dim, keepdim=False)`` is the named tuple ``(values, indices)`` along ``dim``
        (the first extremum's position, NaN counting as the extremum; the gradient goes to that position);
        ``x.max(other)`` is the elementwise ``maximum``. ``amax`` reduces over several axes."""
        if isinstance(dim, Tensor):
            if keepdim:
                raise AxisError("max(other): the elementwise form takes no keepdim")
            return self._binary("maximum", dim)
        if dim is None:
            if keepdim:
                raise AxisError("max(): keepdim=True needs a dim (or use amax(keepdim=True))")
            return self._ops.tensor_reduce("reduce_max", self, None, False)
        if isinstance(dim, (tuple, list)):
            raise AxisError(f"max(): dim must be one int, got {dim!r}; use amax(dim=...) to reduce over "
                            "several axes")
        return ValuesIndices(*self._ops.tensor_extremum(self, dim, keepdim, True))

    @overload
    def min(self) -> Tensor[()]: ...

    @overload
    def min(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> ValuesIndices[*Lead]: ...

    @overload
    def min(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> ValuesIndices[*Lead, One]: ...

    @overload
    def min(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False) -> ValuesIndices[*Lead, D]: ...

    @overload
    def min(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True]) -> ValuesIndices[*Lead, One, D]: ...

    @overload
    def min(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> ValuesIndices[*Rest]: ...

    @overload
    def min(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True]) -> ValuesIndices[One, *Rest]: ...

    @overload
    def min(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> ValuesIndices[A0, *Rest]: ...

    @overload
    def min(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True]) -> ValuesIndices[A0, One, *Rest]: ...

    @overload
    def min(self, dim: int, keepdim: bool = False) -> ValuesIndices[*AnyShape]: ...

    @overload
    def min(self, other: Tensor[*Shape] | Tensor[()], /) -> Tensor[*Shape]: ...

    @overload
    def min(self: Tensor[*Lead, D], other: Tensor[D], /) -> Tensor[*Lead, D]: ...

    @overload
    def min(self: Tensor[*Lead, D], other: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...

    @overload
    def min(self: Tensor[A0, *Rest], other: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...

    def min(self, dim: Any = None, keepdim: bool = False) -> Any:
        """PyTorch's three forms: ``x.min()`` is the smallest element (0-d; tied elements share the
        gradient); ``x.min(dim, keepdim=False)`` is the named tuple ``(values, indices)`` along ``dim``
        (the first extremum's position, NaN counting as the extremum; the gradient goes to that position);
        ``x.min(other)`` is the elementwise ``minimum``. ``amin`` reduces over several axes."""
        if isinstance(dim, Tensor):
            if keepdim:
                raise AxisError("min(other): the elementwise form takes no keepdim")
            return self._binary("minimum", dim)
        if dim is None:
            if keepdim:
                raise AxisError("min(): keepdim=True needs a dim (or use amin(keepdim=True))")
            return self._ops.tensor_reduce("reduce_min", self, None, False)
        if isinstance(dim, (tuple, list)):
            raise AxisError(f"min(): dim must be one int, got {dim!r}; use amin(dim=...) to reduce over "
                            "several axes")
        return ValuesIndices(*self._ops.tensor_extremum(self, dim, keepdim, False))

    @overload
    def amax(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def amax(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def amax(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def amax(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False) -> Tensor[*Lead, D]: ...

    @overload
    def amax(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True]) -> Tensor[*Lead, One, D]: ...

    @overload
    def amax(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> Tensor[*Rest]: ...

    @overload
    def amax(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True]) -> Tensor[One, *Rest]: ...

    @overload
    def amax(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> Tensor[A0, *Rest]: ...

    @overload
    def amax(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True]) -> Tensor[A0, One, *Rest]: ...

    @overload
    def amax(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def amax(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Any:
        """Max over ``dim`` (one axis, several, or all when ``None`` or empty: ``()``, ``[]``); tied maxima share
        the gradient."""
        return self._ops.tensor_reduce("reduce_max", self, dim, keepdim)

    @overload
    def prod(self, dim: None = None, keepdim: Literal[False] = False, *, dtype: _dt.DType | str | None = None) -> Tensor[()]: ...

    @overload
    def prod(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False,
             *, dtype: _dt.DType | str | None = None) -> Tensor[*Lead]: ...

    @overload
    def prod(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True],
             *, dtype: _dt.DType | str | None = None) -> Tensor[*Lead, One]: ...

    @overload
    def prod(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False,
             *, dtype: _dt.DType | str | None = None) -> Tensor[*Lead, D]: ...

    @overload
    def prod(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True],
             *, dtype: _dt.DType | str | None = None) -> Tensor[*Lead, One, D]: ...

    @overload
    def prod(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False,
             *, dtype: _dt.DType | str | None = None) -> Tensor[*Rest]: ...

    @overload
    def prod(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True],
             *, dtype: _dt.DType | str | None = None) -> Tensor[One, *Rest]: ...

    @overload
    def prod(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False,
             *, dtype: _dt.DType | str | None = None) -> Tensor[A0, *Rest]: ...

    @overload
    def prod(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True],
             *, dtype: _dt.DType | str | None = None) -> Tensor[A0, One, *Rest]: ...

    @overload
    def prod(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False,
             *, dtype: _dt.DType | str | None = None) -> Tensor[*AnyShape]: ...

    def prod(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False,
             *, dtype: _dt.DType | str | None = None) -> Any:
        """Product over ``dim`` (one axis, several, or all when ``None``: a 0-d result), as ``torch.prod``:
        ``x[*S]`` to ``S`` without the reduced axes (size 1 there with ``keepdim``). bool and integer
        inputs give int64, floats keep their dtype; ``dtype`` converts ``x`` first. The product of no
        elements is 1; the gradient is exact at zeros (the product of the other elements). An empty ``dim``
        (``()``, ``[]``) is an AxisError, as PyTorch refuses it."""
        return _p.prod(self._ops, self, dim, keepdim, dtype)

    @overload
    def logsumexp(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def logsumexp(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def logsumexp(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False) -> Tensor[*Lead, D]: ...

    @overload
    def logsumexp(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True]) -> Tensor[*Lead, One, D]: ...

    @overload
    def logsumexp(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> Tensor[*Rest]: ...

    @overload
    def logsumexp(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True]) -> Tensor[One, *Rest]: ...

    @overload
    def logsumexp(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> Tensor[A0, *Rest]: ...

    @overload
    def logsumexp(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True]) -> Tensor[A0, One, *Rest]: ...

    @overload
    def logsumexp(self, dim: int | tuple[int, ...] | list[int], keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def logsumexp(self, dim: int | tuple[int, ...] | list[int], keepdim: bool = False) -> Any:
        """``log(sum(exp(x)))`` over ``dim`` (one axis or a tuple, required; ``()`` reduces every axis), as
        ``torch.logsumexp``: ``x[*S]`` to ``S`` without the reduced axes (size 1 there with ``keepdim``),
        computed with the max-shift, so large values do not overflow. Integer and bool inputs give float32.
        Over no elements ``-inf``; the gradient is the softmax over the reduced axes. See
        :func:`tensorplay.derived.logsumexp` for the non-finite cases."""
        return _p.logsumexp(self._ops, self, dim, keepdim)

    @overload
    def amin(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def amin(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def amin(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def amin(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[False] = False) -> Tensor[*Lead, D]: ...

    @overload
    def amin(self: Tensor[*Lead, A0, D], dim: Literal[-2], keepdim: Literal[True]) -> Tensor[*Lead, One, D]: ...

    @overload
    def amin(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> Tensor[*Rest]: ...

    @overload
    def amin(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[True]) -> Tensor[One, *Rest]: ...

    @overload
    def amin(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> Tensor[A0, *Rest]: ...

    @overload
    def amin(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[True]) -> Tensor[A0, One, *Rest]: ...

    @overload
    def amin(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def amin(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Any:
        """Min over ``dim`` (one axis, several, or all when ``None`` or empty: ``()``, ``[]``); tied minima share
        the gradient."""
        return self._ops.tensor_reduce("reduce_min", self, dim, keepdim)

    @overload
    def argmax(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def argmax(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def argmax(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def argmax(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> Tensor[*Rest]: ...

    @overload
    def argmax(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> Tensor[A0, *Rest]: ...

    @overload
    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def argmax(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """Index of the first maximum along ``dim`` (of the flattened tensor when ``None``); a bool tensor is
        refused (``DTypeError``), as PyTorch."""
        _p.refuse_bool(self, "argmax")
        return self._ops.tensor_arg_reduce("argmax", self, dim, keepdim)

    @overload
    def argmin(self, dim: None = None, keepdim: Literal[False] = False) -> Tensor[()]: ...

    @overload
    def argmin(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[False] = False) -> Tensor[*Lead]: ...

    @overload
    def argmin(self: Tensor[*Lead, D], dim: Literal[-1], keepdim: Literal[True]) -> Tensor[*Lead, One]: ...

    @overload
    def argmin(self: Tensor[A0, *Rest], dim: Literal[0], keepdim: Literal[False] = False) -> Tensor[*Rest]: ...

    @overload
    def argmin(self: Tensor[A0, A1, *Rest], dim: Literal[1], keepdim: Literal[False] = False) -> Tensor[A0, *Rest]: ...

    @overload
    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Tensor[*AnyShape]: ...

    def argmin(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """Index of the first minimum along ``dim`` (of the flattened tensor when ``None``); a bool tensor is
        refused (``DTypeError``), as PyTorch."""
        _p.refuse_bool(self, "argmin")
        return self._ops.tensor_arg_reduce("argmin", self, dim, keepdim)

    # ---- structure ---------------------------------------------------------------------------
    @overload
    def reshape(self, a: Literal[-1], /) -> Tensor[int]: ...

    @overload
    def reshape(self, a: A0, b: Literal[-1], /) -> Tensor[A0, int]: ...

    @overload
    def reshape(self, a: A0, b: A1, c: Literal[-1], /) -> Tensor[A0, A1, int]: ...

    @overload
    def reshape(self, shape: tuple[*S2], /) -> Tensor[*S2]: ...

    @overload
    def reshape(self, *shape: *S2) -> Tensor[*S2]: ...

    def reshape(self, *shape: Any) -> Any:  # type: ignore[misc]  # mypy: "*shape: *S2" vs "*shape: Any"
        """Same elements, new shape; one entry may be ``-1``. Accepts ``reshape(2, 3)`` or ``reshape((2, 3))``.

        Typed: ``x.reshape(b, Flat(c * h * w))`` is a ``Tensor[Batch, Flat]`` (sizes named by
        NewType dims); a ``-1`` entry is typed ``int``."""
        return self._ops.tensor_reshape(self, shape)

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor[*tuple[Any, ...]]:
        """Merge axes ``start_dim..end_dim`` into one."""
        return _p.flatten(self._ops, self, start_dim, end_dim)  # type: ignore[no-any-return]

    def permute(self, *dims: Any) -> Tensor[*tuple[Any, ...]]:
        """Reorder the axes: result axis ``i`` is axis ``dims[i]``."""
        return self._ops.tensor_permute(self, dims)  # type: ignore[no-any-return]

    @overload
    def transpose(self: Tensor[*Lead, M, N], dim0: Literal[-2], dim1: Literal[-1]) -> Tensor[*Lead, N, M]: ...

    @overload
    def transpose(self: Tensor[*Lead, M, N], dim0: Literal[-1], dim1: Literal[-2]) -> Tensor[*Lead, N, M]: ...

    @overload
    def transpose(self: Tensor[M, N, *Rest], dim0: Literal[0], dim1: Literal[1]) -> Tensor[N, M, *Rest]: ...

    @overload
    def transpose(self: Tensor[M, N, *Rest], dim0: Literal[1], dim1: Literal[0]) -> Tensor[N, M, *Rest]: ...

    @overload
    def transpose(self, dim0: int, dim1: int) -> Tensor[*AnyShape]: ...

    def transpose(self, dim0: int, dim1: int) -> Any:
        """Swap two axes (typed for the last two and for the first two)."""
        return _p.transpose(self._ops, self, dim0, dim1)

    @property
    def T(self: Tensor[M, N]) -> Tensor[N, M]:
        """All axes reversed (typed for matrices: on other ranks PyTorch deprecates it; use ``mT`` or ``permute``)."""
        return self._ops.tensor_permute(self, None)  # type: ignore[no-any-return]

    @property
    def mT(self: Tensor[*Lead, M, N]) -> Tensor[*Lead, N, M]:
        """The last two axes swapped."""
        return _p.transpose(self._ops, self, -2, -1)  # type: ignore[no-any-return]

    @overload
    def unsqueeze(self, dim: Literal[0]) -> Tensor[One, *Shape]: ...

    @overload
    def unsqueeze(self, dim: Literal[-1]) -> Tensor[*Shape, One]: ...

    @overload
    def unsqueeze(self: Tensor[A0, *Rest], dim: Literal[1]) -> Tensor[A0, One, *Rest]: ...

    @overload
    def unsqueeze(self: Tensor[*Lead, D], dim: Literal[-2]) -> Tensor[*Lead, One, D]: ...

    @overload
    def unsqueeze(self, dim: int) -> Tensor[*AnyShape]: ...

    def unsqueeze(self, dim: int) -> Any:
        """Insert a size-1 axis at ``dim``."""
        return self._ops.tensor_unsqueeze(self, dim)

    @overload
    def squeeze(self: Tensor[One, *Rest], dim: Literal[0]) -> Tensor[*Rest]: ...

    @overload
    def squeeze(self: Tensor[*Lead, One], dim: Literal[-1]) -> Tensor[*Lead]: ...

    @overload
    def squeeze(self, dim: int | tuple[int, ...] | list[int] | None = None) -> Tensor[*AnyShape]: ...

    def squeeze(self, dim: int | tuple[int, ...] | list[int] | None = None) -> Any:
        """Remove size-1 axes (only those of ``dim`` when given: one axis or a tuple of axes; a named axis
        whose size is not 1 is left as is, as PyTorch)."""
        return _p.squeeze(self._ops, self, dim)

    def expand(self, *shape: Any) -> Tensor[*tuple[Any, ...]]:
        """Broadcast to ``shape`` (``-1`` keeps an axis)."""
        return _p.expand(self._ops, self, _p.shape_args(shape))  # type: ignore[no-any-return]

    def expand_as(self, other: Tensor[*S2]) -> Tensor[*S2]:
        """:meth:`expand` to ``other``'s shape (as ``torch.Tensor.expand_as``): a view, size-1 axes broadcast."""
        if not isinstance(other, Tensor):
            raise DTypeError(f"expand_as: other must be a tensor (its shape is the target), got "
                             f"{type(other).__name__}")
        return self.expand(*other.shape)

    def broadcast_to(self, shape: tuple[*S2]) -> Tensor[*S2]:
        """numpy broadcasting to ``shape``."""
        return self._ops.broadcast_to(self, shape=tuple(shape))  # type: ignore[arg-type]

    def split(self, split_size_or_sections: int | list[int] | tuple[int, ...],
              dim: int = 0) -> tuple[Tensor[*tuple[Any, ...]], ...]:
        """Views of pieces along ``dim``: of ``split_size_or_sections`` elements each (the last may be
        smaller), or of the listed sizes (which must add up to the axis), as ``torch.split``."""
        return _p.split(self._ops, self, split_size_or_sections, dim)

    def chunk(self, chunks: int, dim: int = 0) -> tuple[Tensor[*tuple[Any, ...]], ...]:
        """Views of ``ceil(n / chunks)``-sized pieces along ``dim`` (possibly fewer than ``chunks``)."""
        return _p.chunk(self._ops, self, chunks, dim)

    def narrow(self, dim: int, start: Any, length: int) -> Tensor[*AnyShape]:
        """The view of ``length`` entries from ``start`` along ``dim`` (a negative ``start`` counts from the
        end), as ``torch.Tensor.narrow``. Same rank; axis ``dim`` has size ``length`` (so the result is typed
        loosely, like a slice)."""
        return _p.narrow(self._ops, self, dim, start, length)  # type: ignore[no-any-return]

    # ---- rearrangements, selections and more elementwise functions (tensorplay.shape_ops, math_ops) -----
    def flip(self, *dims: Any) -> Tensor[*Shape]:
        """Reversed along the axes ``dims`` (``x.flip(0, 1)`` or ``x.flip((0, 1))``), as ``torch.flip``."""
        return _shape.flip(self._ops, self, _p.shape_args(dims))  # type: ignore[no-any-return]

    def roll(self, shifts: int | tuple[int, ...], dims: int | tuple[int, ...] | None = None) -> Tensor[*Shape]:
        """Entries moved ``shifts`` places (cyclically) along ``dims``; ``dims=None`` rolls the flattened tensor."""
        return _shape.roll(self._ops, self, shifts, dims)  # type: ignore[no-any-return]

    def tile(self, *dims: Any) -> Tensor[*AnyShape]:
        """``torch.tile``: repeated ``dims[i]`` times along axis ``i`` (``dims`` padded with leading 1s)."""
        return _shape.tile(self._ops, self, dims)  # type: ignore[no-any-return]

    def repeat(self, *sizes: Any) -> Tensor[*AnyShape]:
        """``torch.Tensor.repeat``: tiled ``sizes[i]`` times along axis ``i`` (at least one size per axis)."""
        return _shape.repeat(self._ops, self, sizes)  # type: ignore[no-any-return]

    def repeat_interleave(self, repeats: int, dim: int | None = None) -> Tensor[*AnyShape]:
        """Each entry repeated ``repeats`` times in a row along ``dim`` (the flattened tensor when ``None``)."""
        return _shape.repeat_interleave(self._ops, self, repeats, dim)  # type: ignore[no-any-return]

    def movedim(self, source: int | tuple[int, ...], destination: int | tuple[int, ...]) -> Tensor[*AnyShape]:
        """The axes ``source`` moved to positions ``destination``; the others keep their order."""
        return _shape.movedim(self._ops, self, source, destination)  # type: ignore[no-any-return]

    moveaxis = movedim
    swapaxes = transpose
    swapdims = transpose

    def unflatten(self, dim: int, sizes: tuple[int, ...] | list[int]) -> Tensor[*AnyShape]:
        """Axis ``dim`` split into axes of ``sizes`` (one may be -1)."""
        return _shape.unflatten(self._ops, self, dim, sizes)  # type: ignore[no-any-return]

    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor[*AnyShape]:
        """The diagonal ``offset`` of axes ``dim1``, ``dim2``, as the last axis (``torch.diagonal``)."""
        return _shape.diagonal(self._ops, self, offset, dim1, dim2)  # type: ignore[no-any-return]

    def diag(self, diagonal: int = 0) -> Tensor[*AnyShape]:
        """A vector ``[n]`` placed on diagonal ``diagonal`` of a square matrix; of a matrix, that diagonal."""
        return _shape.diag(self._ops, self, diagonal)  # type: ignore[no-any-return]

    def trace(self: Tensor[M, N]) -> Tensor[()]:
        """The sum of the main diagonal of a matrix (0-d; integers sum to int64)."""
        return _math.trace(self._ops, self)  # type: ignore[no-any-return]

    def index_select(self, dim: int, index: Tensor[*tuple[Any, ...]]) -> Tensor[*AnyShape]:
        """The entries at ``index`` (1-d int, values in ``[0, n)``) along ``dim``."""
        return _shape.index_select(self._pick(index), self, dim, index)  # type: ignore[no-any-return]

    def gather(self, dim: int, index: Tensor[*S2]) -> Tensor[*S2]:
        """``torch.gather``: ``out[i][j] = x[index[i][j]][j]`` for ``dim=0``; ``index`` has this rank."""
        return _shape.gather(self._pick(index), self, dim, index)  # type: ignore[no-any-return]

    def bmm(self: Tensor[A0, M, K], mat2: Tensor[A0, K, N]) -> Tensor[A0, M, N]:
        """Batched matrix products ``[B, M, K] @ [B, K, N]`` (no broadcasting, one dtype)."""
        return _math.bmm(self._pick(mat2), self, mat2)  # type: ignore[no-any-return]

    def dot(self: Tensor[N], other: Tensor[N]) -> Tensor[()]:
        """The inner product of two vectors of one length and dtype (0-d)."""
        return _math.dot(self._pick(other), self, other)  # type: ignore[no-any-return]

    def reciprocal(self) -> Tensor[*Shape]:
        """``1 / x`` (integers give float32)."""
        return _math.reciprocal(self._ops, self)  # type: ignore[no-any-return]

    def log2(self) -> Tensor[*Shape]:
        """Base-2 logarithm."""
        return _math.log2(self._ops, self)  # type: ignore[no-any-return]

    def log10(self) -> Tensor[*Shape]:
        """Base-10 logarithm."""
        return _math.log10(self._ops, self)  # type: ignore[no-any-return]

    def sinh(self) -> Tensor[*Shape]:
        """Hyperbolic sine."""
        return _math.sinh(self._ops, self)  # type: ignore[no-any-return]

    def cosh(self) -> Tensor[*Shape]:
        """Hyperbolic cosine."""
        return _math.cosh(self._ops, self)  # type: ignore[no-any-return]

    def atan2(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """The angle of the point ``(other, self)``: ``atan2(y=self, x=other)`` in ``[-pi, pi]``."""
        return self._pick(other).atan2(self, other)

    arctan2 = atan2

    def logical_not(self) -> Tensor[*Shape]:
        """True where the value is zero (a bool tensor)."""
        return self._ops.logical_not(self)

    def logical_and(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """True where both are non-zero (a bool tensor; numpy broadcasting)."""
        return self._pick(other).logical_and(self, other)

    def logical_or(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """True where either is non-zero (a bool tensor; numpy broadcasting)."""
        return self._pick(other).logical_or(self, other)

    def logical_xor(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """True where exactly one is non-zero (a bool tensor; numpy broadcasting)."""
        return _math.logical_xor(self._pick(other), self, other)  # type: ignore[no-any-return]

    # ---- elementwise aliases and more elementwise math (tensorplay.elementwise_ops) ---------------------
    def add(self, other: Tensor[*tuple[Any, ...]] | Scalar, *, alpha: Scalar = 1) -> Tensor[*AnyShape]:
        """``self + alpha * other`` (broadcasting), as ``torch.add``: see :func:`tensorplay.elementwise_ops.add`."""
        if alpha == 1 and not isinstance(alpha, bool):
            return self._binary("add", other)  # type: ignore[no-any-return]
        return _ew.add(self._pick(other), self, other, alpha)  # type: ignore[no-any-return]

    def sub(self, other: Tensor[*tuple[Any, ...]] | Scalar, *, alpha: Scalar = 1) -> Tensor[*AnyShape]:
        """``self - alpha * other`` (broadcasting; bool refused), as ``torch.sub``."""
        return _ew.sub(self._pick(other), self, other, alpha)  # type: ignore[no-any-return]

    subtract = sub

    def mul(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self * other`` (broadcasting), as ``torch.mul``."""
        return self._binary("mul", other)  # type: ignore[no-any-return]

    multiply = mul

    def div(self, other: Tensor[*tuple[Any, ...]] | Scalar, *, rounding_mode: str | None = None) -> Tensor[*AnyShape]:
        """``self / other``; ``rounding_mode`` ``'trunc'`` or ``'floor'`` rounds the quotient (integers stay
        integer), as ``torch.div``: see :func:`tensorplay.elementwise_ops.div`."""
        return _ew.div(self._pick(other), self, other, rounding_mode)  # type: ignore[no-any-return]

    divide = div

    def true_divide(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self / other`` (integers give float32)."""
        return self._binary("div", other)  # type: ignore[no-any-return]

    negative = neg
    absolute = abs
    sgn = sign

    def positive(self) -> Tensor[*Shape]:
        """``self`` (bool refused, as ``torch.positive``)."""
        return _ew.positive(self._ops, self)  # type: ignore[no-any-return]

    def eq(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self == other`` elementwise (broadcasting, a bool tensor)."""
        return self._binary("eq", other)  # type: ignore[no-any-return]

    def ne(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self != other`` elementwise (broadcasting, a bool tensor)."""
        return self._binary("ne", other)  # type: ignore[no-any-return]

    def lt(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self < other`` elementwise (broadcasting, a bool tensor)."""
        return self._binary("lt", other)  # type: ignore[no-any-return]

    def le(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self <= other`` elementwise (broadcasting, a bool tensor)."""
        return self._binary("le", other)  # type: ignore[no-any-return]

    def gt(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self > other`` elementwise (broadcasting, a bool tensor)."""
        return self._binary("gt", other)  # type: ignore[no-any-return]

    def ge(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self >= other`` elementwise (broadcasting, a bool tensor)."""
        return self._binary("ge", other)  # type: ignore[no-any-return]

    not_equal, less, less_equal, greater, greater_equal = ne, lt, le, gt, ge

    def equal(self, other: Tensor[*tuple[Any, ...]]) -> bool:
        """Whether ``other`` has this shape and these values (a Python bool), as ``torch.equal``."""
        return _ew.equal(self._pick(other), self, other)

    def bitwise_and(self, other: Tensor[*tuple[Any, ...]] | bool | int) -> Tensor[*AnyShape]:
        """``self & other`` (integers and bools)."""
        return self._binary("bitwise_and", other)  # type: ignore[no-any-return]

    def bitwise_or(self, other: Tensor[*tuple[Any, ...]] | bool | int) -> Tensor[*AnyShape]:
        """``self | other`` (integers and bools)."""
        return self._binary("bitwise_or", other)  # type: ignore[no-any-return]

    def bitwise_xor(self, other: Tensor[*tuple[Any, ...]] | bool | int) -> Tensor[*AnyShape]:
        """``self ^ other`` (integers and bools)."""
        return self._binary("bitwise_xor", other)  # type: ignore[no-any-return]

    def bitwise_not(self) -> Tensor[*Shape]:
        """``~self`` (integers and bools)."""
        return self._ops.bitwise_not(self)

    def tan(self) -> Tensor[*Shape]:
        """Tangent (integers give float32)."""
        return self._ops.tan(self._ops.cast(self, dtype="float32") if self.dtype.numpy.kind != "f" else self)

    def asin(self) -> Tensor[*Shape]:
        """Arcsine (NaN outside ``[-1, 1]``)."""
        return _ew.asin(self._ops, self)  # type: ignore[no-any-return]

    def acos(self) -> Tensor[*Shape]:
        """Arccosine (NaN outside ``[-1, 1]``)."""
        return _ew.acos(self._ops, self)  # type: ignore[no-any-return]

    def atan(self) -> Tensor[*Shape]:
        """Arctangent."""
        return _ew.atan(self._ops, self)  # type: ignore[no-any-return]

    def asinh(self) -> Tensor[*Shape]:
        """Inverse hyperbolic sine."""
        return _ew.asinh(self._ops, self)  # type: ignore[no-any-return]

    def acosh(self) -> Tensor[*Shape]:
        """Inverse hyperbolic cosine (NaN below 1)."""
        return _ew.acosh(self._ops, self)  # type: ignore[no-any-return]

    def atanh(self) -> Tensor[*Shape]:
        """Inverse hyperbolic tangent (NaN outside ``[-1, 1]``)."""
        return _ew.atanh(self._ops, self)  # type: ignore[no-any-return]

    arcsin, arccos, arctan, arcsinh, arccosh, arctanh = asin, acos, atan, asinh, acosh, atanh

    def trunc(self) -> Tensor[*Shape]:
        """Rounded toward zero (bool refused)."""
        return _ew.trunc(self._ops, self)  # type: ignore[no-any-return]

    fix = trunc

    def frac(self) -> Tensor[*Shape]:
        """``self - trunc(self)`` (float tensors)."""
        return _ew.frac(self._ops, self)  # type: ignore[no-any-return]

    def signbit(self) -> Tensor[*Shape]:
        """True where the sign bit is set (``-0.0`` included), a bool tensor."""
        return _ew.signbit(self._ops, self)  # type: ignore[no-any-return]

    def exp2(self) -> Tensor[*Shape]:
        """``2**self``."""
        return _ew.exp2(self._ops, self)  # type: ignore[no-any-return]

    def erfc(self) -> Tensor[*Shape]:
        """``1 - erf(self)``, accurate for large values."""
        return _ew.erfc(self._ops, self)  # type: ignore[no-any-return]

    def deg2rad(self) -> Tensor[*Shape]:
        """Degrees to radians."""
        return _ew.deg2rad(self._ops, self)  # type: ignore[no-any-return]

    def rad2deg(self) -> Tensor[*Shape]:
        """Radians to degrees."""
        return _ew.rad2deg(self._ops, self)  # type: ignore[no-any-return]

    def sinc(self) -> Tensor[*Shape]:
        """``sin(pi x) / (pi x)``, 1 at 0."""
        return _ew.sinc(self._ops, self)  # type: ignore[no-any-return]

    def isposinf(self) -> Tensor[*Shape]:
        """True where ``+inf``."""
        return _ew.isposinf(self._ops, self)  # type: ignore[no-any-return]

    def isneginf(self) -> Tensor[*Shape]:
        """True where ``-inf``."""
        return _ew.isneginf(self._ops, self)  # type: ignore[no-any-return]

    def isreal(self) -> Tensor[*Shape]:
        """True everywhere (no complex dtypes)."""
        return _ew.isreal(self._ops, self)  # type: ignore[no-any-return]

    def isin(self, test_elements: Tensor[*tuple[Any, ...]] | Scalar, *, invert: bool = False) -> Tensor[*Shape]:
        """True where the entry equals one of ``test_elements``, as ``torch.isin``."""
        return _ew.isin(self._pick(test_elements), self, test_elements, invert)  # type: ignore[no-any-return]

    def hypot(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``sqrt(self^2 + other^2)`` without overflow (float)."""
        return _ew.hypot(self._pick(other), self, other)  # type: ignore[no-any-return]

    def copysign(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``|self|`` with the sign of ``other`` (float result)."""
        return _ew.copysign(self._pick(other), self, other)  # type: ignore[no-any-return]

    def fmax(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """The elementwise maximum ignoring NaN."""
        return _ew.fmax(self._pick(other), self, other)  # type: ignore[no-any-return]

    def fmin(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """The elementwise minimum ignoring NaN."""
        return _ew.fmin(self._pick(other), self, other)  # type: ignore[no-any-return]

    def fmod(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """C's remainder, the sign of ``self``."""
        return _ew.fmod(self._pick(other), self, other)  # type: ignore[no-any-return]

    def heaviside(self, values: Tensor[*tuple[Any, ...]]) -> Tensor[*AnyShape]:
        """0 below 0, ``values`` at 0, 1 above (``values`` of this dtype)."""
        return _ew.heaviside(self._pick(values), self, values)  # type: ignore[no-any-return]

    def float_power(self, exponent: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self ** exponent`` in float64."""
        return _ew.float_power(self._pick(exponent), self, exponent)  # type: ignore[no-any-return]

    def ldexp(self, other: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self * 2**other`` (float result)."""
        return _ew.ldexp(self._pick(other), self, other)  # type: ignore[no-any-return]

    # ---- more math (tensorplay.math_more) ------------------------------------------------------------
    def lerp(self, end: Tensor[*tuple[Any, ...]], weight: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*AnyShape]:
        """``self + weight * (end - self)`` (broadcasting; float, ``end`` of this dtype), as ``torch.lerp``."""
        return _more.lerp(self._pick_all(end, weight), self, end, weight)  # type: ignore[no-any-return]

    def addcmul(self, tensor1: Tensor[*tuple[Any, ...]], tensor2: Tensor[*tuple[Any, ...]], *,
                value: Scalar = 1) -> Tensor[*AnyShape]:
        """``self + value * tensor1 * tensor2`` (broadcasting), as ``torch.addcmul``."""
        return _more.addcmul(self._pick_all(tensor1, tensor2), self, tensor1, tensor2, value)  # type: ignore[no-any-return]

    def addcdiv(self, tensor1: Tensor[*tuple[Any, ...]], tensor2: Tensor[*tuple[Any, ...]], *,
                value: Scalar = 1) -> Tensor[*AnyShape]:
        """``self + value * tensor1 / tensor2`` (broadcasting), as ``torch.addcdiv``."""
        return _more.addcdiv(self._pick_all(tensor1, tensor2), self, tensor1, tensor2, value)  # type: ignore[no-any-return]

    def logaddexp(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """``log(exp(self) + exp(other))`` without overflow (broadcasting)."""
        return _more.logaddexp(self._pick(other), self, other)  # type: ignore[no-any-return]

    def logaddexp2(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """``log2(2**self + 2**other)`` without overflow (broadcasting)."""
        return _more.logaddexp2(self._pick(other), self, other)  # type: ignore[no-any-return]

    def logit(self, eps: float | None = None) -> Tensor[*Shape]:
        """``log(x / (1 - x))``, ``x`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
        return _more.logit(self._ops, self, eps)  # type: ignore[no-any-return]

    def xlogy(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """``self * log(other)``, 0 where ``self == 0`` unless ``other`` is NaN."""
        return _more.xlogy(self._pick(other), self, other)  # type: ignore[no-any-return]

    def erfinv(self) -> Tensor[*Shape]:
        """The inverse error function on ``[-1, 1]``."""
        return _more.erfinv(self._ops, self)  # type: ignore[no-any-return]

    def clamp_min(self, min: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """``clamp(min=min)``."""
        return _more.clamp_min(self._pick(min), self, min)  # type: ignore[no-any-return]

    def clamp_max(self, max: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]:
        """``clamp(max=max)``."""
        return _more.clamp_max(self._pick(max), self, max)  # type: ignore[no-any-return]

    def cumprod(self, dim: int, *, dtype: _dt.DType | str | None = None) -> Tensor[*Shape]:
        """Running products along ``dim`` (bool and integers accumulate in int64)."""
        return _more.cumprod(self._ops, self, dim, dtype)  # type: ignore[no-any-return]

    def nansum(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]:
        """The sum over ``dim`` with NaN counted as 0."""
        return _more.nansum(self._ops, self, dim, keepdim)  # type: ignore[no-any-return]

    def nanmean(self, dim: int | tuple[int, ...] | None = None, keepdim: bool = False) -> Tensor[*AnyShape]:
        """The mean over ``dim`` of the entries that are not NaN."""
        return _more.nanmean(self._ops, self, dim, keepdim)  # type: ignore[no-any-return]

    def count_nonzero(self, dim: int | tuple[int, ...] | None = None) -> Tensor[*AnyShape]:
        """The number of non-zero entries over ``dim`` (int64)."""
        return _more.count_nonzero(self._ops, self, dim)  # type: ignore[no-any-return]

    # ---- sequences and structure (tensorplay.sequence_ops) ----------------------------------------
    def diff(self, n: int = 1, dim: int = -1, prepend: Tensor[*tuple[Any, ...]] | None = None,
             append: Tensor[*tuple[Any, ...]] | None = None) -> Tensor[*AnyShape]:
        """The ``n``-th forward difference along ``dim`` (after joining ``prepend``/``append``)."""
        return _seq.diff(self._pick_all(prepend, append), self, n, dim, prepend, append)  # type: ignore[no-any-return]

    def cross(self, other: Tensor[*tuple[Any, ...]], dim: int = -1) -> Tensor[*AnyShape]:
        """The cross product of 3-vectors along ``dim`` (broadcasting), as ``torch.linalg.cross``."""
        return _seq.cross(self._pick(other), self, other, dim)  # type: ignore[no-any-return]

    def kron(self, other: Tensor[*tuple[Any, ...]]) -> Tensor[*AnyShape]:
        """The Kronecker product: sizes multiply axis by axis."""
        return _seq.kron(self._pick(other), self, other)  # type: ignore[no-any-return]

    def cummax(self, dim: int) -> ValuesIndices[*Shape]:
        """Running maxima along ``dim`` and their (int64, latest on ties) positions; NaN is the largest."""
        values, indices = _seq.cummax(self._ops, self, dim)
        return ValuesIndices(values, indices)

    def cummin(self, dim: int) -> ValuesIndices[*Shape]:
        """Running minima along ``dim`` and their (int64, latest on ties) positions; NaN is the smallest."""
        values, indices = _seq.cummin(self._ops, self, dim)
        return ValuesIndices(values, indices)

    def histc(self, bins: int = 100, min: float = 0.0, max: float = 0.0) -> Tensor[Any]:  # noqa: A002
        """Counts in ``bins`` equal bins over ``[min, max]`` (the data's range when equal); float input."""
        return _seq.histc(self._ops, self, bins, min, max)  # type: ignore[no-any-return]

    # ---- structure and index-structure functions (tensorplay.structure_ops) ---------------------------
    def select(self, dim: int, index: int) -> Tensor[*AnyShape]:
        """The slice at ``index`` of axis ``dim``, which the result drops, as ``torch.select``."""
        return _struct.select(self._ops, self, dim, index)  # type: ignore[no-any-return]

    def unbind(self, dim: int = 0) -> tuple[Tensor[*AnyShape], ...]:
        """The slices along ``dim`` (each without that axis), as ``torch.unbind``."""
        return _struct.unbind(self._ops, self, dim)

    def t(self) -> Tensor[*AnyShape]:
        """A 2-d tensor transposed (0-d and 1-d unchanged), as ``torch.t``."""
        return _struct.t(self._ops, self)  # type: ignore[no-any-return]

    def ravel(self) -> Tensor[int]:
        """The entries in row-major order, 1-d, as ``torch.ravel``."""
        return _struct.ravel(self._ops, self)  # type: ignore[no-any-return]

    def view_as(self, other: Tensor[*S2]) -> Tensor[*S2]:
        """``self`` reshaped to ``other``'s shape (same element count)."""
        return _struct.reshape_as(self._ops, self, other, "view_as")  # type: ignore[no-any-return]

    def reshape_as(self, other: Tensor[*S2]) -> Tensor[*S2]:
        """``self`` reshaped to ``other``'s shape (same element count)."""
        return _struct.reshape_as(self._ops, self, other)  # type: ignore[no-any-return]

    def type_as(self, other: Tensor[*tuple[Any, ...]]) -> Tensor[*Shape]:
        """``self`` converted to ``other``'s dtype."""
        return _struct.type_as(self._ops, self, other)  # type: ignore[no-any-return]

    def tensor_split(self, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor[*AnyShape], ...]:
        """``n`` near-equal pieces, or the pieces between listed indices, along ``dim`` (``torch.tensor_split``)."""
        return _struct.tensor_split(self._pick(indices_or_sections), self, indices_or_sections, dim)

    def hsplit(self, indices_or_sections: Any) -> tuple[Tensor[*AnyShape], ...]:
        """:meth:`tensor_split` along dim 1 (dim 0 when 1-d); an int must divide the size."""
        return _struct.hsplit(self._ops, self, indices_or_sections)

    def vsplit(self, indices_or_sections: Any) -> tuple[Tensor[*AnyShape], ...]:
        """:meth:`tensor_split` along dim 0 (at least 2-d); an int must divide the size."""
        return _struct.vsplit(self._ops, self, indices_or_sections)

    def dsplit(self, indices_or_sections: Any) -> tuple[Tensor[*AnyShape], ...]:
        """:meth:`tensor_split` along dim 2 (at least 3-d); an int must divide the size."""
        return _struct.dsplit(self._ops, self, indices_or_sections)

    def split_with_sizes(self, split_sizes: list[int] | tuple[int, ...], dim: int = 0) -> tuple[Tensor[*AnyShape], ...]:
        """Pieces of the listed sizes along ``dim`` (they must add up to its size)."""
        return _struct.split_with_sizes(self._ops, self, split_sizes, dim)

    def rot90(self, k: int = 1, dims: tuple[int, int] | list[int] = (0, 1)) -> Tensor[*AnyShape]:
        """Rotated ``k`` quarter turns in the plane ``dims``, as ``torch.rot90``."""
        return _struct.rot90(self._ops, self, k, dims)  # type: ignore[no-any-return]

    def fliplr(self) -> Tensor[*Shape]:
        """Reversed along dim 1 (at least 2-d)."""
        return _struct.fliplr(self._ops, self)  # type: ignore[no-any-return]

    def flipud(self) -> Tensor[*Shape]:
        """Reversed along dim 0 (at least 1-d)."""
        return _struct.flipud(self._ops, self)  # type: ignore[no-any-return]

    def take(self, index: Tensor[*S2]) -> Tensor[*S2]:
        """The flattened entries at ``index`` (int64, negative from the end), of ``index``'s shape."""
        return _struct.take(self._pick(index), self, index)  # type: ignore[no-any-return]

    def index_add(self, dim: int, index: Tensor[*tuple[Any, ...]], source: Tensor[*tuple[Any, ...]], *,
                  alpha: Scalar = 1) -> Tensor[*Shape]:
        """``out[..., index[i], ...] += alpha * source[..., i, ...]`` along ``dim``, out of place."""
        return _struct.index_add(self._pick_all(index, source), self, dim, index, source, alpha)  # type: ignore[no-any-return]

    def index_copy(self, dim: int, index: Tensor[*tuple[Any, ...]], source: Tensor[*tuple[Any, ...]]) -> Tensor[*Shape]:
        """``out[..., index[i], ...] = source[..., i, ...]`` along ``dim``, out of place."""
        return _struct.index_copy(self._pick_all(index, source), self, dim, index, source)  # type: ignore[no-any-return]

    def index_fill(self, dim: int, index: Tensor[*tuple[Any, ...]], value: Tensor[()] | Scalar) -> Tensor[*Shape]:
        """The slices at ``index`` along ``dim`` set to ``value``, out of place."""
        return _struct.index_fill(self._pick_all(index, value), self, dim, index, value)  # type: ignore[no-any-return]

    def scatter_reduce(self, dim: int, index: Tensor[*tuple[Any, ...]], src: Tensor[*tuple[Any, ...]], reduce: str, *,
                       include_self: bool = True) -> Tensor[*Shape]:
        """``src`` combined into its targets by ``reduce`` (sum, prod, mean, amax, amin), out of place."""
        return _struct.scatter_reduce(self._pick_all(index, src), self, dim, index, src, reduce,  # type: ignore[no-any-return]
                                      include_self)

    def select_scatter(self, src: Tensor[*tuple[Any, ...]], dim: int, index: int) -> Tensor[*Shape]:
        """A copy with ``select(dim, index)`` replaced by ``src``."""
        return _struct.select_scatter(self._pick(src), self, src, dim, index)  # type: ignore[no-any-return]

    def slice_scatter(self, src: Tensor[*tuple[Any, ...]], dim: int = 0, start: int | None = None,
                      end: int | None = None, step: int = 1) -> Tensor[*Shape]:
        """A copy with the slice ``start:end:step`` of axis ``dim`` replaced by ``src``."""
        return _struct.slice_scatter(self._pick(src), self, src, dim, start, end, step)  # type: ignore[no-any-return]

    def diagonal_scatter(self, src: Tensor[*tuple[Any, ...]], offset: int = 0, dim1: int = 0,
                         dim2: int = 1) -> Tensor[*Shape]:
        """A copy with ``diagonal(offset, dim1, dim2)`` replaced by ``src``."""
        return _struct.diagonal_scatter(self._pick(src), self, src, offset, dim1, dim2)  # type: ignore[no-any-return]

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor[*AnyShape]:
        """The last axis placed on diagonal ``offset`` of new planes ``(dim1, dim2)``, zeros elsewhere."""
        return _struct.diag_embed(self._ops, self, offset, dim1, dim2)  # type: ignore[no-any-return]

    def diagflat(self, offset: int = 0) -> Tensor[Any, Any]:
        """The flattened tensor on diagonal ``offset`` of a square matrix."""
        return _struct.diagflat(self._ops, self, offset)  # type: ignore[no-any-return]

    def unfold(self, dimension: int, size: int, step: int) -> Tensor[*AnyShape]:
        """Windows of ``size`` entries every ``step`` along ``dimension``, in a new last axis."""
        return _struct.unfold(self._ops, self, dimension, size, step)  # type: ignore[no-any-return]

    def sum_to_size(self, *size: Any) -> Tensor[*AnyShape]:
        """Summed down to ``size``, which must broadcast to this tensor's shape."""
        return _struct.sum_to_size(self._ops, self, *size)  # type: ignore[no-any-return]

    # ---- index-driven operations (tensorplay.indexing_ops) -------------------------------------------
    def scatter(self, dim: int, index: Tensor[*tuple[Any, ...]], src: Tensor[*tuple[Any, ...]] | Scalar) -> Tensor[*Shape]:
        """``torch.scatter`` out of place: ``out[index[i][j]][j] = src[i][j]`` for ``dim=0`` (int64 index)."""
        return _idx.scatter(self._pick_all(index, src), self, dim, index, src)  # type: ignore[no-any-return]

    def scatter_add(self, dim: int, index: Tensor[*tuple[Any, ...]], src: Tensor[*tuple[Any, ...]]) -> Tensor[*Shape]:
        """``torch.scatter_add`` out of place: ``out[index[i][j]][j] += src[i][j]`` for ``dim=0``."""
        return _idx.scatter_add(self._pick_all(index, src), self, dim, index, src)  # type: ignore[no-any-return]

    def take_along_dim(self, indices: Tensor[*tuple[Any, ...]], dim: int | None = None) -> Tensor[*AnyShape]:
        """``torch.take_along_dim``: the entries at ``indices`` (int64) along ``dim`` (``None``: flattened)."""
        return _idx.take_along_dim(self._pick(indices), self, indices, dim)  # type: ignore[no-any-return]

    def bincount(self, weights: Tensor[*tuple[Any, ...]] | None = None, minlength: int = 0) -> Tensor[*AnyShape]:
        """Counts (or summed ``weights``) of each value of a 1-d non-negative int tensor (eager only)."""
        return _idx.bincount(self._pick(weights), self, weights, minlength)  # type: ignore[no-any-return]

    def median(self, dim: int | None = None, keepdim: bool = False) -> Any:
        """The lower median: of all entries (0-d) or ``(values, indices)`` along ``dim``."""
        out = _idx.median(self._ops, self, dim, keepdim)
        return ValuesIndices(*out) if isinstance(out, tuple) else out

    def quantile(self, q: Tensor[*tuple[Any, ...]] | float, dim: int | None = None, keepdim: bool = False, *,
                 interpolation: str = "linear") -> Tensor[*AnyShape]:
        """The ``q``-quantiles along ``dim`` (``None``: all entries), as ``torch.quantile``."""
        return _idx.quantile(self._pick(q), self, q, dim, keepdim, interpolation)  # type: ignore[no-any-return]

    def bernoulli(self, p: float | None = None, *, generator: Any = None) -> Tensor[*Shape]:
        """0/1 draws, 1 with probability ``self`` (or ``p``), as ``torch.bernoulli``."""
        return SAMPLERS["bernoulli"](self, p, generator=generator)  # type: ignore[no-any-return]

    def contiguous(self) -> Tensor[*Shape]:
        """The same values in a row-major buffer (a no-op for values that already are)."""
        return self._ops.contiguous(self)

    def clone(self) -> Tensor[*Shape]:
        """A copy that shares no memory (recorded for autograd)."""
        return self._ops.clone(self)

    def astype(self, dtype: Any) -> Tensor[*Shape]:
        """Convert to ``dtype`` (a no-op when it already has it)."""
        target = _dt.to_dtype(dtype)
        if target.numpy == self._data.dtype:
            return self
        return self._ops.cast(self, dtype=target.name)

    def to(self, *args: Any, **kwargs: Any) -> Tensor[*Shape]:
        """PyTorch's ``to``: ``to(dtype)`` converts (as :meth:`astype`); ``to("cpu")``, ``to(device)``,
        ``to(device, dtype)``, ``to(other)`` (``other``'s dtype) and ``dtype=``/``device=`` keywords are
        accepted. tensorplay runs on the CPU only: the CPU device is a no-op, any other device a
        :class:`~tensorplay.errors.DeviceError`."""
        dtype = _device.to_arguments(args, dict(kwargs), "Tensor.to")
        return self if dtype is None else self.astype(dtype)

    def cpu(self) -> Tensor[*Shape]:
        """This tensor (tensorplay tensors live on the CPU)."""
        return self

    def cuda(self, device: Any = None, non_blocking: bool = False) -> Tensor[*Shape]:
        """Always a :class:`~tensorplay.errors.DeviceError`: tensorplay runs on the CPU only."""
        _device.check_device("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device,
                             "Tensor.cuda")
        return self

    @property
    def device(self) -> _device.device:
        """The CPU device (``tp.device("cpu")``)."""
        return _device.CPU

    @property
    def is_cuda(self) -> bool:
        """False: tensorplay runs on the CPU only."""
        return False

    def float(self) -> Tensor[*Shape]:
        """Convert to float32."""
        return self.astype(_dt.float32)

    def double(self) -> Tensor[*Shape]:
        """Convert to float64."""
        return self.astype(_dt.float64)

    def long(self) -> Tensor[*Shape]:
        """Convert to int64."""
        return self.astype(_dt.int64)

    def bool(self) -> Tensor[*Shape]:
        """Convert to bool."""
        return self.astype(_dt.bool_)

    # ---- products, statistics and data-dependent selections (tensorplay.product_ops, statistics_ops, selection_ops) ---
    def mm(self: Tensor[M, K], mat2: Tensor[K, N]) -> Tensor[M, N]:
        """The matrix product ``[M, K] @ [K, N]`` of two 2-d tensors of one dtype (no broadcasting)."""
        return _prod.mm(self._pick(mat2), self, mat2)  # type: ignore[no-any-return]

    def mv(self: Tensor[M, N], vec: Tensor[N]) -> Tensor[M]:
        """The matrix-vector product ``[M, N] @ [N]``."""
        return _prod.mv(self._pick(vec), self, vec)  # type: ignore[no-any-return]

    def addmm(self, mat1: Tensor[*tuple[Any, ...]], mat2: Tensor[*tuple[Any, ...]], *, beta: Scalar = 1,
              alpha: Scalar = 1) -> Tensor[*AnyShape]:
        """``beta * self + alpha * (mat1 @ mat2)`` (``self`` broadcasts to ``[n, m]``), as ``torch.addmm``."""
        return _prod.addmm(self._pick_all(mat1, mat2), self, mat1, mat2, beta, alpha)  # type: ignore[no-any-return]

    def addmv(self, mat: Tensor[*tuple[Any, ...]], vec: Tensor[*tuple[Any, ...]], *, beta: Scalar = 1,
              alpha: Scalar = 1) -> Tensor[*AnyShape]:
        """``beta * self + alpha * (mat @ vec)`` (``self`` broadcasts to ``[n]``), as ``torch.addmv``."""
        return _prod.addmv(self._pick_all(mat, vec), self, mat, vec, beta, alpha)  # type: ignore[no-any-return]

    def addr(self, vec1: Tensor[*tuple[Any, ...]], vec2: Tensor[*tuple[Any, ...]], *, beta: Scalar = 1,
             alpha: Scalar = 1) -> Tensor[*AnyShape]:
        """``beta * self + alpha * outer(vec1, vec2)``, as ``torch.addr``."""
        return _prod.addr(self._pick_all(vec1, vec2), self, vec1, vec2, beta, alpha)  # type: ignore[no-any-return]

    def baddbmm(self, batch1: Tensor[*tuple[Any, ...]], batch2: Tensor[*tuple[Any, ...]], *, beta: Scalar = 1,
                alpha: Scalar = 1) -> Tensor[*AnyShape]:
        """``beta * self + alpha * bmm(batch1, batch2)`` (``self`` broadcasts to ``[B, n, m]``)."""
        return _prod.baddbmm(self._pick_all(batch1, batch2), self, batch1, batch2, beta, alpha)  # type: ignore[no-any-return]

    def addbmm(self, batch1: Tensor[*tuple[Any, ...]], batch2: Tensor[*tuple[Any, ...]], *, beta: Scalar = 1,
               alpha: Scalar = 1) -> Tensor[*AnyShape]:
        """``beta * self + alpha * bmm(batch1, batch2).sum(0)`` (``self`` broadcasts to ``[n, m]``)."""
        return _prod.addbmm(self._pick_all(batch1, batch2), self, batch1, batch2, beta, alpha)  # type: ignore[no-any-return]

    def inner(self, other: Tensor[*tuple[Any, ...]]) -> Tensor[*AnyShape]:
        """Sums of products over the last dims: ``[*A, k]``, ``[*B, k]`` to ``[*A, *B]``, as ``torch.inner``."""
        return _prod.inner(self._pick(other), self, other)  # type: ignore[no-any-return]

    def vdot(self: Tensor[N], other: Tensor[N]) -> Tensor[()]:
        """The inner product of two vectors (``dot``: tensorplay's dtypes are real)."""
        return _prod.vdot(self._pick(other), self, other)  # type: ignore[no-any-return]

    ger = outer

    def matrix_power(self, n: int) -> Tensor[*Shape]:
        """The square matrix (or batch ``[*B, m, m]``) to the power ``n >= 0`` (0: the identity)."""
        return _prod.matrix_power(self._ops, self, n)  # type: ignore[no-any-return]

    def aminmax(self, *, dim: int | None = None, keepdim: Flag = False) -> _stats.MinMax:
        """The named tuple ``(min, max)`` over ``dim`` (``None``: every entry), as ``torch.aminmax``."""
        return _stats.aminmax(self._ops, self, dim, keepdim)

    def kthvalue(self, k: int, dim: int = -1, keepdim: Flag = False) -> ValuesIndices[*AnyShape]:
        """``(values, indices)`` of the ``k``-th smallest entry along ``dim`` (NaN the largest)."""
        return ValuesIndices(*_stats.kthvalue(self._ops, self, k, dim, keepdim))

    def mode(self, dim: int = -1, keepdim: Flag = False) -> ValuesIndices[*AnyShape]:
        """``(values, indices)`` of the most frequent value along ``dim`` (the smallest of ties; its last index)."""
        return ValuesIndices(*_stats.mode(self._ops, self, dim, keepdim))

    def msort(self) -> Tensor[*Shape]:
        """Sorted ascending along the first dim (NaN last)."""
        return _stats.msort(self._ops, self)  # type: ignore[no-any-return]

    def logcumsumexp(self, dim: int) -> Tensor[*Shape]:
        """``log(cumsum(exp(self)))`` along ``dim``, without overflow (float input)."""
        return _stats.logcumsumexp(self._ops, self, dim)  # type: ignore[no-any-return]

    def cov(self, *, correction: int = 1, fweights: Tensor[*tuple[Any, ...]] | None = None,
            aweights: Tensor[*tuple[Any, ...]] | None = None) -> Tensor[*AnyShape]:
        """The covariance matrix ``[V, V]`` of the rows (variables) of ``[V, N]``, as ``torch.cov``."""
        return _stats.cov(self._pick_all(fweights, aweights), self, correction, fweights, aweights)  # type: ignore[no-any-return]

    def corrcoef(self) -> Tensor[*AnyShape]:
        """Pearson correlation coefficients ``[V, V]`` of the rows of ``[V, N]``, as ``torch.corrcoef``."""
        return _stats.corrcoef(self._ops, self)  # type: ignore[no-any-return]

    def nanmedian(self, dim: int | None = None, keepdim: Flag = False) -> Any:
        """The lower median of the entries that are not NaN: of all (0-d) or ``(values, indices)`` along ``dim``."""
        out = _stats.nanmedian(self._ops, self, dim, keepdim)
        return ValuesIndices(*out) if isinstance(out, tuple) else out

    def nanquantile(self, q: Tensor[*tuple[Any, ...]] | Scalar, dim: int | None = None, keepdim: Flag = False, *,
                    interpolation: str = "linear") -> Tensor[*AnyShape]:
        """The ``q``-quantiles of the entries that are not NaN along ``dim``, as ``torch.nanquantile``."""
        return _stats.nanquantile(self._pick(q), self, q, dim, keepdim, interpolation)  # type: ignore[no-any-return]

    def nonzero(self, *, as_tuple: Flag = False) -> Any:
        """The ``[k, ndim]`` int64 coordinates of the non-zero entries (a tuple of ``[k]`` with ``as_tuple``);
        reads the values (eager and execute-mode recording only)."""
        return _select.nonzero(self._ops, self, as_tuple)

    def argwhere(self) -> Tensor[Any, Any]:
        """``nonzero()``: the ``[k, ndim]`` int64 coordinates of the non-zero entries."""
        return _select.argwhere(self._ops, self)  # type: ignore[no-any-return]

    def masked_select(self, mask: Tensor[*tuple[Any, ...]]) -> Tensor[Any]:
        """The entries where the bool ``mask`` (broadcasting) is True, 1-d; reads the mask."""
        return _select.masked_select(self._pick(mask), self, mask)  # type: ignore[no-any-return]

    def unique(self, sorted: Flag = True, return_inverse: Flag = False, return_counts: Flag = False,
               dim: int | None = None) -> Any:
        """The distinct values (or slices along ``dim``), ascending, with the inverse and counts when asked."""
        return _select.unique(self._ops, self, sorted, return_inverse, return_counts, dim)

    def unique_consecutive(self, return_inverse: Flag = False, return_counts: Flag = False,
                           dim: int | None = None) -> Any:
        """Each run of equal consecutive entries (or slices along ``dim``) kept once."""
        return _select.unique_consecutive(self._ops, self, return_inverse, return_counts, dim)

    # ---- indexing ------------------------------------------------------------------------------
    @overload
    def __getitem__(self: Tensor[A0, *Rest], key: int) -> Tensor[*Rest]: ...

    @overload
    def __getitem__(self, key: Any) -> Tensor[*AnyShape]: ...

    def __getitem__(self, key: Any) -> Any:
        ops = self._ops
        if isinstance(key, tuple):
            for item in key:
                if isinstance(item, Tensor) and item._ops is not ops:
                    ops = pick_interpreter(ops, item._ops)
        elif isinstance(key, Tensor) and key._ops is not ops:
            ops = pick_interpreter(ops, key._ops)
        if _RECORDING_ACTIVE[0] and _p.has_symbolic_item(key):
            # ``weight[:T]`` with a symbolic ``T`` (a dynamic dim): the recording slices, keeping T symbolic
            ops = pick_interpreter(ops, _recording.creating_interpreter(ops))
        return ops.tensor_getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        ops = self._ops
        for item in (key if isinstance(key, tuple) else (key,)) + (value,):
            if isinstance(item, Tensor) and item._ops is not ops:
                ops = pick_interpreter(ops, item._ops)
        ops.setitem(self, key, value)

    # ---- in place (eager only; bump the version counter) -----------------------------------
    def add_(self, other: Tensor[*Shape] | Scalar, alpha: Scalar = 1) -> Tensor[*Shape]:
        """``self += alpha * other`` in place."""
        value = other if alpha == 1 else other * alpha
        return self._ops.inplace(self, "add", value)

    def sub_(self, other: Tensor[*Shape] | Scalar, alpha: Scalar = 1) -> Tensor[*Shape]:
        """``self -= alpha * other`` in place."""
        value = other if alpha == 1 else other * alpha
        return self._ops.inplace(self, "sub", value)

    def mul_(self, other: Tensor[*Shape] | Scalar) -> Tensor[*Shape]:
        """``self *= other`` in place."""
        return self._ops.inplace(self, "mul", other)

    def div_(self, other: Tensor[*Shape] | Scalar) -> Tensor[*Shape]:
        """``self /= other`` in place."""
        return self._ops.inplace(self, "div", other)

    @overload
    def new_zeros(self, size: tuple[*S2], /, *, dtype: Any = None, device: Any = None,
                  requires_grad: Flag = False) -> Tensor[*S2]: ...

    @overload
    def new_zeros(self, *size: *S2, dtype: Any = None, device: Any = None,
                  requires_grad: Flag = False) -> Tensor[*S2]: ...

    def new_zeros(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: Flag = False) -> Any:  # type: ignore[misc]
        """Zeros of ``size`` (ints or one tuple/list) with this tensor's dtype unless ``dtype`` is given,
        made by this tensor's interpreter (as ``torch.Tensor.new_zeros``; a constant under a trace)."""
        return _factories().new_filled(self, "new_zeros", size, 0, dtype, device, requires_grad)

    @overload
    def new_ones(self, size: tuple[*S2], /, *, dtype: Any = None, device: Any = None,
                 requires_grad: Flag = False) -> Tensor[*S2]: ...

    @overload
    def new_ones(self, *size: *S2, dtype: Any = None, device: Any = None,
                 requires_grad: Flag = False) -> Tensor[*S2]: ...

    def new_ones(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: Flag = False) -> Any:  # type: ignore[misc]
        """Ones of ``size``, this tensor's dtype unless ``dtype`` is given (see :meth:`new_zeros`)."""
        return _factories().new_filled(self, "new_ones", size, 1, dtype, device, requires_grad)

    @overload
    def new_empty(self, size: tuple[*S2], /, *, dtype: Any = None, device: Any = None,
                  requires_grad: Flag = False) -> Tensor[*S2]: ...

    @overload
    def new_empty(self, *size: *S2, dtype: Any = None, device: Any = None,
                  requires_grad: Flag = False) -> Tensor[*S2]: ...

    def new_empty(self, *size: Any, dtype: Any = None, device: Any = None, requires_grad: Flag = False) -> Any:  # type: ignore[misc]
        """An uninitialised tensor of ``size`` (here zeros, so nothing uninitialised leaks; see
        :meth:`new_zeros`)."""
        return _factories().new_filled(self, "new_empty", size, 0, dtype, device, requires_grad)

    def new_full(self, size: tuple[*S2], fill_value: Scalar, *, dtype: Any = None, device: Any = None,
                 requires_grad: Flag = False) -> Tensor[*S2]:
        """``fill_value`` everywhere in a tensor of ``size``, with this tensor's dtype unless ``dtype`` is
        given (not the fill value's, as ``torch.Tensor.new_full``); a value the dtype cannot hold raises
        :class:`OverflowError`."""
        return _factories().new_filled(self, "new_full", (size,), fill_value, dtype, device,  # type: ignore[no-any-return]
                                       requires_grad)

    def new_tensor(self, data: Any, *, dtype: Any = None, device: Any = None,
                   requires_grad: Flag = False) -> Tensor[*tuple[Any, ...]]:
        """A new tensor holding a copy of ``data`` (nested lists, numbers, an array or a tensor, detached),
        with this tensor's dtype unless ``dtype`` is given, as ``torch.Tensor.new_tensor``."""
        return _factories().new_tensor(self, data, dtype, device, requires_grad)  # type: ignore[no-any-return]

    def zero_(self) -> Tensor[*Shape]:
        """Fill with zeros in place."""
        return self._ops.inplace(self, "fill", 0)

    def fill_(self, value: Scalar) -> Tensor[*Shape]:
        """Fill with ``value`` in place (a number the dtype cannot hold raises :class:`OverflowError`)."""
        check_scalar_fits(value, self.dtype.numpy, "fill_: value")
        return self._ops.inplace(self, "fill", value)

    def masked_fill_(self, mask: Tensor[*tuple[Any, ...]], value: Tensor[()] | Scalar) -> Tensor[*Shape]:
        """:meth:`masked_fill` in place: ``value`` where the bool ``mask`` (broadcast to this shape) is True;
        returns ``self`` (recorded as a copy of the filled value, with its gradient)."""
        return self.copy_(self.clone().masked_fill(mask, value))

    def copy_(self, src: Tensor[*tuple[Any, ...]]) -> Tensor[*Shape]:
        """Copy ``src`` (broadcast) into ``self`` in place."""
        return self._ops.inplace(self, "copy", src)

    def clamp_(self, min: Scalar | None = None, max: Scalar | None = None) -> Tensor[*Shape]:
        """Clamp in place (recorded on a snapshot of ``self``, with :meth:`clamp`'s gradient)."""
        if min is None and max is None:
            return self
        return self._ops.inplace(self, "clamp", (min, max))

    @overload  # type: ignore[misc]  # mypy compares in-place overloads with __add__ item by item
    def __iadd__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __iadd__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __iadd__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __iadd__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __iadd__(self, other: Any) -> Any:  # type: ignore[misc]  # in place: the result has self's shape
        return self.add_(other)

    @overload  # type: ignore[misc]  # mypy compares in-place overloads with __sub__ item by item
    def __isub__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __isub__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __isub__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __isub__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __isub__(self, other: Any) -> Any:  # type: ignore[misc]  # in place: the result has self's shape
        return self.sub_(other)

    @overload  # type: ignore[misc]  # mypy compares in-place overloads with __mul__ item by item
    def __imul__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __imul__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __imul__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __imul__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __imul__(self, other: Any) -> Any:  # type: ignore[misc]  # in place: the result has self's shape
        return self.mul_(other)

    @overload  # type: ignore[misc]  # mypy compares in-place overloads with __truediv__ item by item
    def __itruediv__(self, other: Tensor[*Shape] | Tensor[()] | Scalar) -> Tensor[*Shape]: ...

    @overload
    def __itruediv__(self: Tensor[*Lead, D], other: Tensor[D]) -> Tensor[*Lead, D]: ...

    @overload
    def __itruediv__(self: Tensor[*Lead, D], other: Tensor[*Lead, One]) -> Tensor[*Lead, D]: ...

    @overload
    def __itruediv__(self: Tensor[A0, *Rest], other: Tensor[One, *Rest]) -> Tensor[A0, *Rest]: ...

    def __itruediv__(self, other: Any) -> Any:  # type: ignore[misc]  # in place: the result has self's shape
        return self.div_(other)

    # last in the class body: once defined, ``int`` in an annotation below would name this method
    def int(self) -> Tensor[*Shape]:
        """Convert to int32 (floats truncate toward zero), as PyTorch's ``.int()``."""
        return self.astype(_dt.int32)


class ValuesIndices(NamedTuple, Generic[*VS]):
    """``(values, indices)`` of ``max(dim)``, ``min(dim)``, ``sort`` and ``topk`` (PyTorch's
    ``torch.return_types``): both of one shape, ``indices`` int64. Unpacks as a pair."""

    values: Tensor[*VS]
    indices: Tensor[*VS]
