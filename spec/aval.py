"""Abstract values: the (shape, dtype) pair every shape rule consumes and produces."""

from __future__ import annotations

from typing import Any, NamedTuple


class Aval(NamedTuple):
    """Shape and dtype of a value.

    A shape entry is an ``int`` or a symbolic dimension expression (any object
    supporting ``+ - * //`` with ints, such as the graph IR's ``SymDim``).
    ``dtype`` is a dtype name from :mod:`tensorplay.spec.dtypes`, or a weak kind for a
    Python scalar.
    """

    shape: tuple[Any, ...]
    dtype: str

    def __repr__(self) -> str:
        dims = ",".join(str(d) for d in self.shape)
        return f"{self.dtype}[{dims}]"
