"""``Parameter``: a leaf tensor a :class:`~tensorplay.nn.Module` owns and optimizers update."""

from __future__ import annotations

from typing import Any, TypeVarTuple

import numpy as np

from tensorplay.interpreters.eager.interpreter import eager as _eager
from tensorplay.dtypes import native_order, plain_array
from tensorplay.errors import DTypeError
from tensorplay.tensor import Tensor

Shape = TypeVarTuple("Shape")
_EAGER: Any = _eager

_SUPPORTED = ("float32", "float64", "int32", "int64", "bool")


def _owned_array(data: Any) -> np.ndarray[Any, Any]:
    """A writeable, C-contiguous numpy array holding ``data`` (shared when it already is one)."""
    if isinstance(data, Tensor):
        data = data._ops.concrete(data)
    array = native_order(plain_array(data, "Parameter"))  # a big-endian array: a native-order copy
    if array.dtype.name not in _SUPPORTED:
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
        elif array.dtype.kind in "iu":
            array = array.astype(np.int64)
        else:
            raise DTypeError(f"Parameter: cannot hold data of numpy dtype {array.dtype}; expected one of "
                             f"{', '.join(_SUPPORTED)}")
    if not ((array.flags.c_contiguous or array.flags.f_contiguous) and array.flags.writeable):
        array = np.array(array, copy=True, order="C")
    return array


class Parameter(Tensor[*Shape]):
    """A tensor that is a module parameter: assigning one to a module attribute registers it.

    ``Parameter(data, requires_grad=True)`` shares memory with ``data`` (a tensor or a numpy
    array) when it is a writeable contiguous array, as PyTorch does. Parameters are eager
    leaves; a graph recorder that meets one lifts it into its graph as an input.
    """

    __slots__ = ()

    def __init__(self, data: Tensor[*Shape] | np.ndarray[Any, Any] | None = None,
                 requires_grad: bool = True) -> None:
        array = np.zeros((0,), dtype=np.float32) if data is None else _owned_array(data)
        super().__init__(_EAGER, array)
        if requires_grad:
            if array.dtype.kind != "f":
                raise DTypeError(f"Parameter: only float tensors can require gradients, got {array.dtype}; "
                                 "pass requires_grad=False")
            self._requires_grad = True

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict[int, Any]) -> Parameter[*Shape]:
        """A parameter with a copy of the value (and of the gradient), on the eager interpreter."""
        found = memo.get(id(self))
        if found is not None:
            return found  # type: ignore[no-any-return]
        new: Parameter[*Shape] = Parameter(np.array(self._data, copy=True, order="K"), self._requires_grad)
        if self._grad is not None:
            new._grad = Tensor(_EAGER, np.array(self._grad._data, copy=True, order="K"))
        memo[id(self)] = new
        return new


def is_parameter(value: object) -> bool:
    """Whether ``value`` is a :class:`Parameter`."""
    return isinstance(value, Parameter)


__all__ = ["Parameter", "is_parameter"]
