"""Containers: ``Sequential``, ``ModuleList`` and ``ModuleDict``."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from tensorplay.nn.module import Module, _indent


class Sequential(Module):
    """Modules run one after the other: ``Sequential(a, b, c)(x) == c(b(a(x)))``. Children are named
    ``"0"``, ``"1"``, ... (or by the keys of an ``OrderedDict`` argument)."""

    def __init__(self, *args: Module | Mapping[str, Module]) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], Mapping):
            for name, module in args[0].items():
                self.register_module(name, module)
        else:
            for i, item in enumerate(args):
                if not isinstance(item, Module):
                    raise TypeError(f"Sequential: argument {i} is a {type(item).__name__}, expected a Module")
                self.register_module(str(i), item)

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
        n = len(items)
        if not -n <= index < n:
            raise IndexError(f"Sequential: index {index} is out of range for {n} modules")
        module = items[index % n][1]
        assert module is not None
        return module

    def __setitem__(self, index: int, module: Module) -> None:
        keys = list(self._modules)
        n = len(keys)
        if not -n <= index < n:
            raise IndexError(f"Sequential: index {index} is out of range for {n} modules")
        self.register_module(keys[index % n], module)

    def __delitem__(self, index: int | slice) -> None:
        """Remove the child(ren) at ``index`` (an int, negative counting from the end, or a slice); the
        children left are renamed ``"0"``, ``"1"``, ... in order, as PyTorch does (named children too)."""
        keys = list(self._modules)
        if isinstance(index, slice):
            targets = keys[index]
        else:
            n = len(keys)
            if not -n <= index < n:
                raise IndexError(f"Sequential: index {index} is out of range for {n} modules")
            targets = [keys[index % n]]
        for key in targets:
            del self._modules[key]
        remaining = list(self._modules.values())
        self._modules.clear()
        for i, module in enumerate(remaining):
            self._modules[str(i)] = module

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end."""
        self.register_module(str(len(self)), module)
        return self


class ModuleList(Module):
    """A list of modules whose parameters are registered (children ``"0"``, ``"1"``, ...)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _key(self, index: int) -> str:
        n = len(self._modules)
        if not -n <= index < n:
            raise IndexError(f"ModuleList: index {index} is out of range for {n} modules")
        return str(index % n)

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
        remaining = list(self)
        del remaining[index]
        self._modules.clear()
        for i, module in enumerate(remaining):
            self._modules[str(i)] = module

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
        """Insert ``module`` before position ``index``."""
        items = list(self)
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.register_module(str(i), m)

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
