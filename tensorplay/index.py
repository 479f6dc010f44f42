"""Typed data inputs: integer index tensors with a bound (TorchLean's ``Program.Data``).

``Index[Vocab, Batch, Seq]`` is a tensor of shape ``[Batch, Seq]`` whose int64
values all lie in ``[0, bound)``, where ``bound`` is a size of the dim ``Vocab``::

    ids = tp.index(token_array, bound=Vocab(50_000))          # Index[Vocab, *tuple[Any, ...]]
    ids = tp.index(token_array, bound=vocab, shape=(b, s))   # Index[Vocab, Batch, Seq]

The range is checked when the index tensor is made (eager values at once; a value
being recorded by a recorded ``check_index``, which runs whenever the recording
does), so an embedding lookup or a cross-entropy target built from it cannot go
out of range; mypy checks that the bound's dim matches the table it indexes
(``Embedding[Vocab, D]`` takes ``Index[Vocab, *S]``). Writes into an index tensor
(``ids[0] = v``, ``ids.add_(1)``, ...) are checked the same way before they take
effect. Index tensors are data: they never require grad, and the graph recorder
lifts them as (non-differentiable) data inputs (checked against the bound when the
graph runs). The eager payload is a numpy int64 array, as for any int64 tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Generic, Literal, TypeVar, TypeVarTuple, overload

import numpy as np

from tensorplay.dtypes import plain_array
from tensorplay.errors import AutogradError, DTypeError, ShapeError
from tensorplay.spec.structure import index_range_error, out_of_range
from tensorplay.tensor import A0, A1, One, Scalar, Tensor

V = TypeVar("V", covariant=True)
"""The dim type of the bound (``Vocab``, ``Classes``, ...); covariant, so an ``Index[Vocab, ...]``
also indexes an untyped ``Embedding[int, D]``, but never an ``Embedding[Classes, D]``."""
B = TypeVar("B")
"""The bound's dim type in :func:`index` (a function parameter cannot use the covariant ``V``)."""
S = TypeVarTuple("S")
S2 = TypeVarTuple("S2")
Rest = TypeVarTuple("Rest")
AnyShape = tuple[Any, ...]


class Index(Tensor[*S], Generic[V, *S]):
    """An int64 tensor of shape ``*S`` whose values are in ``[0, bound)``; ``bound`` has type ``V``.

    Made by :func:`tensorplay.index`. Arithmetic on it gives plain tensors; indexing
    (``ids[:, :-1]``) and the views and copies that keep its values (``reshape``/``view``, ``flatten``,
    ``unsqueeze``, ``squeeze``, ``permute``, ``transpose``, ``T``/``mT``, ``expand``, ``narrow``,
    ``contiguous``, ``clone``, ``detach``, ``long``) keep the bound, at run time and for mypy:
    ``y.reshape(-1)`` of an ``Index[Vocab, Batch, Seq]`` is an ``Index[Vocab, int]``.
    """

    __slots__ = ("_bound",)

    _bound: Any

    def __init__(self, ops: Any, data: Any, bound: V) -> None:
        super().__init__(ops, data)
        self._bound = bound

    @property
    def bound(self) -> V:
        """Every value is ``< bound`` (and ``>= 0``)."""
        return self._bound  # type: ignore[no-any-return]

    # data inputs are never differentiated
    @property
    def requires_grad(self) -> bool:
        """Always ``False``: index tensors are data inputs."""
        return False

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        if flag:
            raise AutogradError("Index tensors are integer data inputs and are never differentiated; "
                                "requires_grad cannot be set")

    def requires_grad_(self, requires_grad: bool = True) -> Index[V, *S]:
        """Refused for ``True`` (index tensors are never differentiated); ``False`` is a no-op."""
        if requires_grad:
            raise AutogradError("Index tensors are integer data inputs and are never differentiated; "
                                "requires_grad_(True) is refused")
        return self

    @overload
    def __getitem__(self: Index[B, A0, *Rest], key: int) -> Index[B, *Rest]: ...

    @overload
    def __getitem__(self, key: Any) -> Index[V, *tuple[Any, ...]]: ...

    def __getitem__(self, key: Any) -> Any:
        """Indexing keeps the bound: the values selected are a subset of in-range values."""
        out = super().__getitem__(key)
        return _rewrap(out, self._bound)

    # ---- views and copies: the same values, so the same bound ----------------------------------
    @overload
    def reshape(self, a: Literal[-1], /) -> Index[V, int]: ...

    @overload
    def reshape(self, a: A0, b: Literal[-1], /) -> Index[V, A0, int]: ...

    @overload
    def reshape(self, a: A0, b: A1, c: Literal[-1], /) -> Index[V, A0, A1, int]: ...

    @overload
    def reshape(self, shape: tuple[*S2], /) -> Index[V, *S2]: ...

    @overload
    def reshape(self, *shape: *S2) -> Index[V, *S2]: ...

    def reshape(self, *shape: Any) -> Any:  # type: ignore[misc]
        """Same values, new shape (see :meth:`Tensor.reshape`); an ``Index`` with the same bound."""
        return _rewrap(super().reshape(*shape), self._bound)

    view = reshape

    @overload
    def unsqueeze(self, dim: Literal[0]) -> Index[V, One, *S]: ...

    @overload
    def unsqueeze(self, dim: Literal[-1]) -> Index[V, *S, One]: ...

    @overload
    def unsqueeze(self, dim: int) -> Index[V, *AnyShape]: ...

    def unsqueeze(self, dim: int) -> Any:
        """A size-1 axis inserted at ``dim``; an ``Index`` with the same bound."""
        return _rewrap(super().unsqueeze(dim), self._bound)

    def squeeze(self, dim: int | tuple[int, ...] | list[int] | None = None) -> Index[V, *AnyShape]:
        """Size-1 axes removed (see :meth:`Tensor.squeeze`); an ``Index`` with the same bound."""
        return _rewrap(super().squeeze(dim), self._bound)  # type: ignore[no-any-return]

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Index[V, *AnyShape]:
        """Axes ``start_dim..end_dim`` merged; an ``Index`` with the same bound."""
        return _rewrap(super().flatten(start_dim, end_dim), self._bound)  # type: ignore[no-any-return]

    def permute(self, *dims: Any) -> Index[V, *AnyShape]:
        """Axes reordered; an ``Index`` with the same bound."""
        return _rewrap(super().permute(*dims), self._bound)  # type: ignore[no-any-return]

    def transpose(self, dim0: int, dim1: int) -> Index[V, *AnyShape]:
        """Two axes swapped; an ``Index`` with the same bound."""
        return _rewrap(super().transpose(dim0, dim1), self._bound)  # type: ignore[no-any-return]

    @property
    def T(self) -> Index[V, *AnyShape]:
        """The axes reversed (a 2-d transpose); an ``Index`` with the same bound."""
        return _rewrap(Tensor.T.fget(self), self._bound)  # type: ignore[attr-defined,no-any-return]

    @property
    def mT(self) -> Index[V, *AnyShape]:
        """The last two axes swapped; an ``Index`` with the same bound."""
        return _rewrap(Tensor.mT.fget(self), self._bound)  # type: ignore[attr-defined,no-any-return]

    def expand(self, *shape: Any) -> Index[V, *AnyShape]:
        """Broadcast to ``shape``; an ``Index`` with the same bound."""
        return _rewrap(super().expand(*shape), self._bound)  # type: ignore[no-any-return]

    def narrow(self, dim: int, start: Any, length: int) -> Index[V, *AnyShape]:
        """``length`` entries from ``start`` along ``dim``; an ``Index`` with the same bound."""
        return _rewrap(super().narrow(dim, start, length), self._bound)  # type: ignore[no-any-return]

    def contiguous(self) -> Index[V, *S]:
        """The same values in a row-major buffer; an ``Index`` with the same bound."""
        return _rewrap(super().contiguous(), self._bound)  # type: ignore[no-any-return]

    def clone(self) -> Index[V, *S]:
        """A copy; an ``Index`` with the same bound."""
        return _rewrap(super().clone(), self._bound)  # type: ignore[no-any-return]

    def detach(self) -> Index[V, *S]:
        """This index tensor (index tensors are never differentiated)."""
        return _rewrap(super().detach(), self._bound)  # type: ignore[no-any-return]

    def long(self) -> Index[V, *S]:
        """This index tensor (already int64)."""
        return _rewrap(super().long(), self._bound)  # type: ignore[no-any-return]

    # ---- writes: checked against the bound before they take effect ------------------------------
    def _update(self, write: Callable[[Tensor[*tuple[Any, ...]]], object], what: str) -> Index[V, *S]:
        """Apply ``write`` (an in-place update) to a copy, check the copy's values against the bound (a
        recorded check under a recorder), then copy it into ``self``: an out-of-range write raises
        :class:`~tensorplay.errors.IndexRangeError` and leaves ``self`` unchanged."""
        trial = self._ops.clone(Tensor(self._ops, self._data))
        write(trial)
        checked = self._ops.check_index(trial, bound=self._bound, what=f"{what} on an Index tensor: value")
        self._ops.inplace(self, "copy", checked)
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        """``ids[key] = value``, checked: every value must stay in ``[0, bound)``."""
        self._update(lambda t: t.__setitem__(key, value), "ids[key] = value")

    def add_(self, other: Tensor[*S] | Scalar, alpha: Scalar = 1) -> Index[V, *S]:
        """``self += alpha * other`` in place, checked against the bound."""
        return self._update(lambda t: t.add_(other, alpha), "add_")

    def sub_(self, other: Tensor[*S] | Scalar, alpha: Scalar = 1) -> Index[V, *S]:
        """``self -= alpha * other`` in place, checked against the bound."""
        return self._update(lambda t: t.sub_(other, alpha), "sub_")

    def mul_(self, other: Tensor[*S] | Scalar) -> Index[V, *S]:
        """``self *= other`` in place, checked against the bound."""
        return self._update(lambda t: t.mul_(other), "mul_")

    def div_(self, other: Tensor[*S] | Scalar) -> Index[V, *S]:
        """Refused unless the quotient fits the int64 dtype (it does not: true division gives floats)."""
        return self._update(lambda t: t.div_(other), "div_")

    def fill_(self, value: Scalar) -> Index[V, *S]:
        """Fill with ``value`` in place, checked against the bound."""
        return self._update(lambda t: t.fill_(value), "fill_")

    def zero_(self) -> Index[V, *S]:
        """Fill with zeros in place (0 is in range unless the bound is 0)."""
        return self._update(lambda t: t.zero_(), "zero_")

    def copy_(self, src: Tensor[*tuple[Any, ...]]) -> Index[V, *S]:
        """Copy ``src`` in place, checked against the bound."""
        return self._update(lambda t: t.copy_(src), "copy_")

    def clamp_(self, min: Scalar | None = None, max: Scalar | None = None) -> Index[V, *S]:
        """Clamp in place, checked against the bound."""
        return self._update(lambda t: t.clamp_(min, max), "clamp_")

    def _as_data_input(self, placeholder: Tensor[*tuple[Any, ...]]) -> Index[V, *tuple[Any, ...]]:
        """The graph recorder's placeholder for this tensor, as an ``Index`` with the same bound; the bound
        is kept on the placeholder (``meta["index_bound"]``) so the graph checks the range of its inputs."""
        meta = getattr(placeholder._data, "meta", None)
        if isinstance(meta, dict):
            meta["index_bound"] = int(self._bound)
        return Index(placeholder._ops, placeholder._data, self._bound)

    def with_shape(self, *shape: *S2) -> Index[V, *S2]:
        """The same index tensor, typed with the dims ``shape`` (checked against the actual shape)."""
        _check_shape(tuple(self.shape), tuple(shape), "Index.with_shape")
        return self  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"index({super().__repr__()}, bound={self._bound})"


def _rewrap(t: Tensor[*tuple[Any, ...]], bound: Any) -> Any:
    if isinstance(t, Index) or t._data.dtype.kind not in "iu":
        return t
    return Index(t._ops, t._data, bound)


def _check_shape(actual: tuple[Any, ...], expected: tuple[Any, ...], where: str) -> None:
    if len(actual) != len(expected) or any(
            isinstance(a, int) and isinstance(e, int) and a != e for a, e in zip(actual, expected)):
        raise ShapeError(f"{where}: values have shape {list(actual)}, but shape={list(expected)} was given")


def _check_range(array: np.ndarray[Any, Any], bound: int, where: str) -> None:
    found = out_of_range(array, bound)
    if found is not None:
        raise index_range_error(f"{where}: value", *found, bound)


@overload
def index(values: Any, bound: B, *, shape: tuple[*S]) -> Index[B, *S]: ...


@overload
def index(values: Tensor[*S], bound: B) -> Index[B, *S]: ...


@overload
def index(values: Any, bound: B) -> Index[B, *tuple[Any, ...]]: ...


def index(values: Any, bound: Any, *, shape: Sequence[Any] | None = None) -> Any:
    """An :class:`Index` tensor of int64 ``values`` (a tensor, a numpy array or nested lists), each checked
    to be in ``[0, bound)``; ``bound`` is a size, usually typed by a dim (``Vocab(50_000)``). With
    ``shape=(b, s)`` the result is typed ``Index[V, B, S]`` and the values' shape is checked against it.
    An out-of-range value raises :class:`~tensorplay.errors.IndexRangeError` here, when the tensor is made.
    """
    if isinstance(bound, bool) or not isinstance(bound, (int, np.integer)):
        raise DTypeError(f"index: bound must be an int size (e.g. Vocab(1000)), got {type(bound).__name__} "
                         f"{bound!r}")
    if bound < 0:
        raise ShapeError(f"index: bound must be >= 0, got {bound}")
    if isinstance(values, Tensor):
        if values.dtype.name not in ("int64", "int32"):
            raise DTypeError(f"index: values must be integers (int64 or int32), got a {values.dtype} tensor")
        if values._requires_grad:
            raise AutogradError("index: values require grad; index tensors are never differentiated")
        if shape is not None:
            _check_shape(tuple(values.shape), tuple(shape), "index")
        from tensorplay.interpreters.eager.interpreter import eager
        if values._ops is eager:  # a private copy: later writes to ``values`` cannot break the bound
            array = np.asarray(values._data)
            _check_range(array, int(bound), "index")
            return Index(eager, np.array(array, dtype=np.int64, copy=True), bound)
        # a value being recorded (or of a transform): a recorded check, run whenever the recording runs
        t: Any = values if values.dtype.name == "int64" else values._ops.cast(values, dtype="int64")
        checked = values._ops.check_index(t, bound=int(bound), what="index: value")
        return Index(checked._ops, checked._data, bound)
    array = plain_array(values, "index")
    if array.dtype.kind == "b" or (array.dtype.kind not in "iu" and array.size):
        raise DTypeError(f"index: values must be integers, got numpy dtype {array.dtype}")
    if shape is not None:
        _check_shape(tuple(array.shape), tuple(shape), "index")
    _check_range(array, int(bound), "index")
    from tensorplay.interpreters.eager.interpreter import eager
    return Index(eager, np.array(array, dtype=np.int64, copy=True), bound)


__all__ = ["Index", "index"]
