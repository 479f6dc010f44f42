"""``ParameterList`` and ``ParameterDict``: containers whose entries are registered parameters.

As in PyTorch, a ``ParameterList``'s parameters are named ``"0"``, ``"1"``, ... and a ``ParameterDict``'s
by their keys, so they appear in ``parameters()``, ``named_parameters()`` and ``state_dict()`` (with the
container's own prefix) and optimizers see them. A tensor (or numpy array) stored in either becomes a
:class:`Parameter` (sharing its memory where it can, requiring gradients); a parameter is kept as is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

import numpy as np

from tensorplay.errors import IndexRangeError, KeyLookupError
from tensorplay.nn.container import ContainerTypeError
from tensorplay.nn.module import Module
from tensorplay.nn.parameter import Parameter
from tensorplay.tensor import Tensor

AnyParameter = Parameter[*tuple[Any, ...]]


def as_parameter(where: str, value: Any) -> AnyParameter:
    """``value`` as a :class:`Parameter`: itself when it is one, a new one for a tensor or numpy array, else a
    :class:`ContainerTypeError` naming ``where`` and the type given."""
    if isinstance(value, Parameter):
        return value
    if isinstance(value, (Tensor, np.ndarray)):
        return Parameter(value)
    raise ContainerTypeError(f"{where}: expected a tp.nn.Parameter or a tensor, got {type(value).__name__}")


def _describe(p: AnyParameter) -> str:
    return f"Parameter containing: [{p.dtype} of size {'x'.join(str(d) for d in p.shape)}]"


class ParameterList(Module):
    """A list of parameters, registered as ``"0"``, ``"1"``, ...: ``ParameterList([w1, w2])``; supports
    ``append``, ``extend``, ``+=``, indexing (negative too; a slice gives a new ``ParameterList`` of the same
    parameters), item assignment, ``len`` and iteration."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        if values is not None:
            self.extend(values)

    def _key(self, index: Any, where: str) -> str:
        n = len(self._parameters)
        if isinstance(index, bool) or not isinstance(index, (int, np.integer)):
            raise ContainerTypeError(f"{where}: indices must be ints or slices, got {type(index).__name__}")
        if not -n <= index < n:
            raise IndexRangeError(f"{where}: index {index} is out of range for {n} parameters")
        return str(int(index) % n)

    @overload
    def __getitem__(self, index: int) -> AnyParameter: ...

    @overload
    def __getitem__(self, index: slice) -> ParameterList: ...

    def __getitem__(self, index: int | slice) -> AnyParameter | ParameterList:
        if isinstance(index, slice):
            return ParameterList(list(self)[index])
        param = self._parameters[self._key(index, "ParameterList[...]")]
        assert param is not None
        return param

    def __setitem__(self, index: int, value: Any) -> None:
        key = self._key(index, "ParameterList[...] = ...")
        self.register_parameter(key, as_parameter(f"ParameterList[{index}] = ...", value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[AnyParameter]:
        return iter(p for p in self._parameters.values() if p is not None)

    def __iadd__(self, values: Iterable[Any]) -> ParameterList:
        return self.extend(values)

    def append(self, value: Any) -> ParameterList:
        """Add ``value`` (converted to a Parameter) at the end, named ``str(len(self))``. Returns self."""
        self.register_parameter(str(len(self)), as_parameter("ParameterList.append", value))
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        """Append each of ``values`` in order (none unless all convert). Returns self."""
        if isinstance(values, (Tensor, np.ndarray)) or not isinstance(values, Iterable):
            raise ContainerTypeError(f"ParameterList.extend: expected an iterable of parameters, got "
                                     f"{type(values).__name__}")
        params = [as_parameter(f"ParameterList.extend: item {i}", v) for i, v in enumerate(values)]
        for param in params:
            self.append(param)
        return self

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ParameterList has no forward; index it or iterate over it")

    def extra_repr(self) -> str:
        return "\n".join(f"({i}): {_describe(p)}" for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict of parameters, registered under their (string) keys in insertion order:
    ``ParameterDict({"scale": w})``; supports ``[key]``, ``[key] = value``, ``del``, ``in``, ``len``,
    iteration over keys, ``keys``, ``values``, ``items``, ``get``, ``pop``, ``update``, ``clear``."""

    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None) -> None:
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> AnyParameter:
        if key not in self._parameters:
            raise KeyLookupError(f"ParameterDict: no parameter {key!r}; its keys are {list(self._parameters)}")
        param = self._parameters[key]
        assert param is not None
        return param

    def __setitem__(self, key: str, value: Any) -> None:
        self.register_parameter(key, as_parameter(f"ParameterDict[{key!r}] = ...", value))

    def __delitem__(self, key: str) -> None:
        self[key]
        del self._parameters[key]

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self) -> Iterator[str]:
        return iter(self._parameters)

    def __contains__(self, key: object) -> bool:
        return key in self._parameters

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return list(self._parameters)

    def values(self) -> Iterable[AnyParameter]:
        """The parameters, in insertion order."""
        return [self[k] for k in self._parameters]

    def items(self) -> Iterable[tuple[str, AnyParameter]]:
        """``(key, parameter)`` pairs, in insertion order."""
        return [(k, self[k]) for k in self._parameters]

    def get(self, key: str, default: Any = None) -> Any:
        """The parameter under ``key``, or ``default``."""
        return self[key] if key in self._parameters else default

    def pop(self, key: str) -> AnyParameter:
        """Remove ``key`` and return its parameter."""
        param = self[key]
        del self[key]
        return param

    def clear(self) -> None:
        """Remove every parameter."""
        self._parameters.clear()

    def update(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> None:
        """Add (or replace) parameters from a mapping or ``(key, value)`` pairs."""
        if isinstance(parameters, (Tensor, np.ndarray)) or not isinstance(parameters, Iterable):
            raise ContainerTypeError(f"ParameterDict.update: expected a mapping or (key, value) pairs, got "
                                     f"{type(parameters).__name__}")
        pairs = list(parameters.items()) if isinstance(parameters, Mapping) else list(parameters)
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ContainerTypeError(f"ParameterDict.update: item {i} must be a (key, value) pair, got "
                                         f"{type(pair).__name__} {pair!r}"[:200])
        for key, value in pairs:
            self[key] = value

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ParameterDict has no forward; index it by key")

    def extra_repr(self) -> str:
        return "\n".join(f"({k}): {_describe(p)}" for k, p in self.items())
