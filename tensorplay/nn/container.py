"""Containers: ``Sequential``, ``ModuleList`` and ``ModuleDict``."""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from tensorplay.errors import ArgumentTypeError, IndexRangeError, TensorplayError
from tensorplay.nn.module import Module, _indent


class ContainerTypeError(TensorplayError, TypeError):
    """A container was given something that is not a Module."""


def _check_module(where: str, module: Any) -> Module:
    """``module`` itself, or a :class:`ContainerTypeError` naming ``where`` and the type given."""
    if not isinstance(module, Module):
        raise ContainerTypeError(f"{where}: expected a Module, got {type(module).__name__}")
    return module


def _as_index(where: str, index: Any) -> int:
    """``index`` as an int (anything with ``__index__``, as PyTorch's containers take), or an
    :class:`ArgumentTypeError` naming ``where`` and what was given (a TypeError, as PyTorch's)."""
    try:
        return operator.index(index)
    except TypeError:
        raise ArgumentTypeError(f"{where}: index must be an integer (or a slice), got {type(index).__name__} "
                                f"{index!r}") from None


def _position(where: str, index: int, n: int, end_ok: bool = False) -> int:
    """``index`` into ``n`` children (negative counts from the end) as ``0 .. n - 1`` (``0 .. n`` with
    ``end_ok``, for an insertion), or an :class:`IndexRangeError` naming the index and the length (an
    :class:`ArgumentTypeError` when it is not an integer)."""
    index = _as_index(where, index)
    high = n if end_ok else n - 1
    if not -n <= index <= high:
        raise IndexRangeError(f"{where}: index {index} is out of range for {n} modules")
    return index + n if index < 0 else index


def _renumber(container: Module, modules: Iterable[Module | None]) -> None:
    """Make ``modules`` the container's children, named ``"0"``, ``"1"``, ... in order."""
    items = list(modules)
    container._modules.clear()
    for i, module in enumerate(items):
        container._modules[str(i)] = module


class Sequential(Module):
    """Modules run one after the other: ``Sequential(a, b, c)(x) == c(b(a(x)))``. Children are named
    ``"0"``, ``"1"``, ... (or by the keys of an ``OrderedDict`` argument). Removing or inserting children
    (``del``, :meth:`pop`, :meth:`insert`) renames them all ``"0"`` .. ``"n-1"`` in order, as PyTorch does,
    so state-dict keys follow the new positions."""

    def __init__(self, *args: Module | Mapping[str, Module]) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], Mapping):
            for name, module in args[0].items():
                self.register_module(name, None if module is None else
                                     _check_module(f"Sequential: module {name!r}", module))
        else:
            for i, item in enumerate(args):
                self.register_module(str(i), _check_module(f"Sequential: argument {i}", item))

    def forward(self, x: Any) -> Any:
        """Run every child in order."""
        for module in self._modules.values():
            if module is not None:
                x = module(x)
        return x

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(m for m in self._modules.values() if m is not None)

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> Sequential: ...

    def __getitem__(self, index: int | slice) -> Module | Sequential:
        items = list(self._modules.items())
        if isinstance(index, slice):
            return Sequential(OrderedDict((k, m) for k, m in items[index] if m is not None))
        module = items[_position("Sequential", index, len(items))][1]
        assert module is not None
        return module

    def __setitem__(self, index: int, module: Module) -> None:
        keys = list(self._modules)
        self.register_module(keys[_position("Sequential", index, len(keys))],
                             _check_module(f"Sequential[{index}] = ...", module))

    def __delitem__(self, index: int | slice) -> None:
        """Remove the child(ren) at ``index`` (an int, negative counting from the end, or a slice); the
        children left are renamed ``"0"``, ``"1"``, ... in order, as PyTorch does (named children too)."""
        keys = list(self._modules)
        targets = keys[index] if isinstance(index, slice) else [keys[_position("Sequential", index, len(keys))]]
        for key in targets:
            del self._modules[key]
        _renumber(self, self._modules.values())

    @overload
    def pop(self, index: int) -> Module: ...

    @overload
    def pop(self, index: slice) -> Sequential: ...

    def pop(self, index: int | slice) -> Module | Sequential:
        """Remove and return the child at ``index`` (negative counts from the end; a slice returns a
        ``Sequential`` of those children); the rest are renamed ``"0"`` .. ``"n-2"``."""
        if not isinstance(index, slice):
            _position("Sequential.pop", index, len(self))
        taken = self[index]
        del self[index]
        return taken

    def insert(self, index: int, module: Module) -> Sequential:
        """Insert ``module`` before position ``index`` (``-n <= index <= n``; ``n`` appends, negative counts
        from the end, as ``list.insert`` within range); children are renamed ``"0"`` .. ``"n"``. Returns self."""
        _check_module("Sequential.insert", module)
        items = list(self._modules.values())
        items.insert(_position("Sequential.insert", index, len(items), end_ok=True), module)
        _renumber(self, items)
        return self

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end (named ``str(len(self))``). Returns self."""
        self.register_module(str(len(self)), _check_module("Sequential.append", module))
        return self

    def extend(self, sequential: Iterable[Module]) -> Sequential:
        """Append each module of ``sequential`` (any iterable of modules) in order; nothing is added unless
        all of them are modules. Returns self."""
        modules = list(sequential)
        for i, module in enumerate(modules):
            _check_module(f"Sequential.extend: item {i}", module)
        for module in modules:
            self.append(module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered (children ``"0"``, ``"1"``, ...)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _key(self, index: int) -> str:
        return str(_position("ModuleList", index, len(self._modules)))

    @overload
    def __getitem__(self, index: int) -> Module: ...

    @overload
    def __getitem__(self, index: slice) -> ModuleList: ...

    def __getitem__(self, index: int | slice) -> Module | ModuleList:
        if isinstance(index, slice):
            return ModuleList(list(self)[index])
        module = self._modules[self._key(index)]
        assert module is not None
        return module

    def __setitem__(self, index: int, module: Module) -> None:
        self.register_module(self._key(index), module)

    def __delitem__(self, index: int | slice) -> None:
        """Remove the module(s) at ``index`` (an int, negative counting from the end, or a slice); the rest
        are renamed ``"0"`` .. in order. An int out of range is an :class:`IndexRangeError`."""
        remaining = list(self)
        if isinstance(index, slice):
            del remaining[index]
        else:
            del remaining[_position("ModuleList.__delitem__", index, len(remaining))]
        _renumber(self, remaining)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(m for m in self._modules.values() if m is not None)

    def __iadd__(self, modules: Iterable[Module]) -> ModuleList:
        return self.extend(modules)

    def append(self, module: Module) -> ModuleList:
        """Add ``module`` at the end."""
        self.register_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]) -> ModuleList:
        """Add each of ``modules`` at the end."""
        for module in modules:
            self.append(module)
        return self

    def insert(self, index: int, module: Module) -> None:
        """Insert ``module`` before position ``index``, as ``list.insert``: an index past the end appends (as
        PyTorch's, whose length and iteration order this matches), a negative one counts from the end; the
        modules are renamed ``"0"`` .. ``"n"`` in order."""
        items = list(self)
        items.insert(_as_index("ModuleList.insert", index), _check_module("ModuleList.insert", module))
        _renumber(self, items)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward; iterate over it and call the modules")

    def __repr__(self) -> str:
        """Runs of identical children are shown once, as ``(0-2): 3 x Linear(...)`` (as PyTorch)."""
        texts = [repr(m) for m in self]
        if not texts:
            return "ModuleList()"
        lines: list[str] = []
        start = 0
        for i in range(1, len(texts) + 1):
            if i < len(texts) and texts[i] == texts[start]:
                continue
            body = _indent(texts[start], 2)
            count = i - start
            lines.append(f"({start}): {body}" if count == 1 else f"({start}-{i - 1}): {count} x {body}")
            start = i
        return "ModuleList(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules whose parameters are registered (children named by the keys)."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        module = self._modules[key]
        assert module is not None
        return module

    def __setitem__(self, key: str, module: Module) -> None:
        self.register_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self) -> Iterable[str]:
        """The keys, in insertion order."""
        return self._modules.keys()

    def items(self) -> Iterable[tuple[str, Module]]:
        """``(key, module)`` pairs."""
        return [(k, m) for k, m in self._modules.items() if m is not None]

    def values(self) -> Iterable[Module]:
        """The modules."""
        return [m for m in self._modules.values() if m is not None]

    def pop(self, key: str) -> Module:
        """Remove ``key`` and return its module."""
        module = self[key]
        del self[key]
        return module

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def update(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]]) -> None:
        """Add (or replace) modules from a mapping or ``(key, module)`` pairs."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward; index it and call the modules")
