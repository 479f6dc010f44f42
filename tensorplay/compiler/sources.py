"""What a compiled function reads from outside its arguments, and how to read it again at every call.

Before capture, :func:`discover` walks what the function can reach: the globals its code (and the
code of functions and lambdas defined in it) names, its closure cells, its default arguments, a
bound method's ``self``, and recursively the helper functions and modules among those. It returns

* **tensor sources**: every tensor reached (a global, a closure cell, a module's parameters,
  buffers and tensor attributes, tensors inside tuples, lists and dicts), each with a reader that
  follows the same path again (``globals()["model"]._modules["fc1"]._parameters["weight"]``), so a
  compiled call sees a tensor that was rebound (``model.fc1.weight = Parameter(...)``) as well as
  one updated in place;
* **value sources**: Python scalars, strings and small tuples of them (a global ``scale = 0.5``,
  a module's ``training`` flag, ``Dropout.p``), compared by value at every call: a compiled
  function never silently keeps a value the Python code would read differently;
* **containers**: every list, tuple, dict and set reached, and the attributes of every instance of
  the user's own classes (:mod:`.containers`): their layout (type, length, keys in order) and the
  Python values among their entries are compared at every call, at the path the function reads
  them through (``closure s[0]``, ``global cfg['k']``, ``closure items[0].scale``), so ``s[0] = 4.0``,
  ``s.append(...)`` or a key added recompiles; their other entries are walked in turn;
* **numpy arrays**: by value (a copy) up to 1 MiB, by identity above (with a warning);
* **objects** the function may drive, such as optimizers, compared by identity (and a container or
  object reached again at a second path: that path must still lead to it);
* **callables**: every function, bound method, module (a submodule at its ``_modules`` path) and other
  callable reached, compared by identity at its path (the compiled code ran its code as captured), the
  methods of the user's classes walked like functions, and each function's ``__defaults__`` and
  ``__kwdefaults__`` read through the function (``f.__defaults__ = (...)`` is seen).

The user's own classes named by the function, and the classes of the user's objects, have their class
attributes guarded the same way (``global Config.lr``, ``type(cfg).scale``). Instances of the user's
own classes are walked like modules (their attributes by name: ``cfg.w``,
``cfg.scale``), so rebinding a tensor attribute of a plain object is read again, not recompiled.
What lies deeper than the walk goes (or in a container of more than 64 entries, whose entries are
guarded by value or identity only) is named in an :class:`UnguardedStateWarning`.

The guards are conservative: a change to any Python value in a container the function names
recompiles, whether or not this call's Python would read that entry.

Names are the user's: ``model.fc1.weight``, ``global w``, ``closure scale``, ``self.fc1.weight``.
"""

from __future__ import annotations

import sys
import types
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorplay.compiler.containers import MISSING, ContainerSource, entry_name, snapshot
from tensorplay.compiler.values import is_static_value
from tensorplay.tensor import Tensor

_MAX_DEPTH = 6
_MAX_CONTAINER = 64
_MAX_ARRAY_BYTES = 1 << 20
"""Numpy arrays up to this size are guarded by value (a copy of their bytes compared at every call: about
35 us at 1 MiB); larger ones by identity, with an :class:`UnguardedStateWarning`."""


def is_module(obj: Any) -> bool:
    """Whether ``obj`` is a :class:`tensorplay.nn.Module`."""
    from tensorplay.nn.module import Module
    return isinstance(obj, Module)


_is_module = is_module


def _is_optimizer(obj: Any) -> bool:
    from tensorplay.optim.optimizer import Optimizer
    return isinstance(obj, Optimizer)


def _transformed_function(obj: Any) -> Any:
    """The function a :mod:`tensorplay.func` transform transforms (``f`` of ``grad(f)``), else ``None``."""
    from tensorplay.func.cache import Transformed
    return obj.__wrapped__ if isinstance(obj, Transformed) else None


def _is_plain_object(value: Any) -> bool:
    """An instance of a class defined outside the library and the standard types (attributes in a
    ``__dict__``): the user's own holder of tensors and settings."""
    if isinstance(value, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                          types.MethodType)) or not hasattr(value, "__dict__"):
        return False
    owner = (getattr(type(value), "__module__", "") or "").split(".")[0]
    return owner not in _FOREIGN_PACKAGES


_FOREIGN_PACKAGES = frozenset({"builtins", "tensorplay", "numpy", "functools", "typing", "abc", "collections",
                               "threading", "logging", "torch", "jax", "optree", "numba", "enum"})
"""Packages whose objects are never walked as a user's holder of state."""

Reader = Callable[[], Any]


def _is_user_module(module: types.ModuleType) -> bool:
    """A Python module of the user's own code (not the standard library, nor an installed package)."""
    top = module.__name__.split(".")[0]
    if top == "__main__":
        return True
    where = getattr(module, "__file__", None) or ""
    return (top not in _FOREIGN_PACKAGES and top not in sys.stdlib_module_names and bool(where)
            and "site-packages" not in where and "dist-packages" not in where)


def _is_user_class(cls: type) -> bool:
    """A class of the user's own code (its class attributes may be read as settings: ``Config.lr``)."""
    module = sys.modules.get(getattr(cls, "__module__", "") or "")
    return module is not None and _is_user_module(module) and not issubclass(cls, BaseException)


@dataclass
class TensorSource:
    """A tensor reached from outside: ``kind`` is ``"parameter"``, ``"buffer"`` or ``"captured"``."""

    name: str
    kind: str
    read: Reader
    tensor: Tensor[*tuple[Any, ...]]


@dataclass
class ValueSource:
    """A Python value reached from outside, compared by value at every call."""

    name: str
    read: Reader
    value: Any


@dataclass
class ObjectSource:
    """An object the function drives (an optimizer), compared by identity at every call."""

    name: str
    read: Reader
    obj: Any


@dataclass
class Sources:
    """Everything :func:`discover` found, in a stable order."""

    tensors: list[TensorSource] = field(default_factory=list)
    values: list[ValueSource] = field(default_factory=list)
    objects: list[ObjectSource] = field(default_factory=list)
    modules: list[Any] = field(default_factory=list)
    containers: list[ContainerSource] = field(default_factory=list)

    def tensor_by_id(self) -> dict[int, TensorSource]:
        """Tensor id -> its source."""
        return {id(s.tensor): s for s in self.tensors}


def _global_reader(namespace: dict[str, Any], key: str) -> Reader:
    return lambda: namespace.get(key, MISSING)


def _cell_reader(cell: Any) -> Reader:
    def read() -> Any:
        try:
            return cell.cell_contents
        except ValueError:  # an empty cell
            return MISSING
    return read


def _const_reader(value: Any) -> Reader:
    return lambda: value


def _class_reader(read: Reader, cls: type) -> Reader:
    """A reader of ``cls`` as the class (or a base class) of what ``read`` reads: the class itself while
    that object is still an instance of it (its identity is guarded on its own), else :data:`MISSING`."""
    return lambda: cls if isinstance(read(), cls) else MISSING


def _length_reader(read: Reader) -> Reader:
    """A reader of ``len(read())`` (:data:`MISSING` when that has no length)."""
    def length() -> Any:
        try:
            return len(read())
        except TypeError:
            return MISSING
    return length


def _attribute_reader(obj: Any, key: str) -> Reader:
    """A reader of ``getattr(obj, key)`` (a function's ``__defaults__``: not in its ``__dict__``)."""
    return lambda: getattr(obj, key, MISSING)


def item_of(container: Any, key: Any) -> Any:
    """``container[key]``, or :data:`MISSING` when it has no such entry."""
    try:
        return container[key]
    except (KeyError, IndexError, TypeError):
        return MISSING


def attr_of(obj: Any, key: str) -> Any:
    """``obj.__dict__[key]``, or :data:`MISSING`."""
    d = getattr(obj, "__dict__", None)
    return MISSING if d is None else d.get(key, MISSING)


def entry_of(obj: Any, table: str, key: Any) -> Any:
    """``obj.__dict__[table][key]`` (a module's ``_parameters``, ``_buffers``, ``_modules``), or :data:`MISSING`."""
    d = getattr(obj, "__dict__", None)
    entries = None if d is None else d.get(table)
    return MISSING if entries is None else entries.get(key, MISSING)


def _step(parent: Reader, table: str | None, key: Any) -> Reader:
    """A reader of ``parent()[key]`` (``table`` None: an item of a container, :func:`item_of`) or of
    ``parent().__dict__[table][key]`` (:func:`entry_of`) or of ``parent().__dict__[key]`` (``table ==
    "__dict__"``, :func:`attr_of`). The reader's ``step`` attribute is ``(parent, table, key)``: readers that
    share a parent are read together, the parent once (:mod:`.state_reader`)."""
    read: Any
    if table is None:
        def read() -> Any:
            return item_of(parent(), key)
    elif table == "__dict__":
        def read() -> Any:
            return attr_of(parent(), key)
    else:
        def read() -> Any:
            return entry_of(parent(), table, key)
    read.step = (parent, table, key)
    return read  # type: ignore[no-any-return]


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


class UnguardedStateWarning(UserWarning):
    """Part of the state a compiled function reads lies too deep (or in too large a container) to be
    guarded entry by entry: a change inside it is not seen by the compiled calls (the message names it)."""


def _warn_unguarded(name: str, why: str) -> None:
    warnings.warn(f"tp.compile: {name} {why}; a change inside it is not seen by the compiled calls (they may "
                  "use stale values). Pass what changes as an argument (a tensor, or a Python value)",
                  UnguardedStateWarning, stacklevel=4)


def _label(name: str) -> str:
    return name.removeprefix("global ").removeprefix("closure ")


class _Walker:
    def __init__(self) -> None:
        self.found = Sources()
        self.seen_tensors: set[int] = set()
        self.seen_objects: set[int] = set()
        self.seen_values: set[str] = set()
        self.seen_containers: set[int] = set()
        self.seen_classes: set[int] = set()
        self.optimized: set[int] = set()
        """Ids of the tensors an optimizer reached updates (each path to one is guarded by identity)."""

    # ---- entries -------------------------------------------------------------------------------
    def value(self, name: str, read: Reader, value: Any, depth: int, kind: str = "captured") -> None:
        """Classify ``value`` reached at ``name`` and walk into it."""
        if depth > _MAX_DEPTH:
            if isinstance(value, (list, tuple, dict, set)) or _is_module(value) or _is_plain_object(value):
                _warn_unguarded(name, f"is reached through more than {_MAX_DEPTH} levels of containers, "
                                      "objects and functions")
            return
        if isinstance(value, Tensor):
            if id(value) not in self.seen_tensors:
                self.seen_tensors.add(id(value))
                self.found.tensors.append(TensorSource(name, kind, read, value))
            if id(value) in self.optimized:  # the step updates it as the optimizer's: this path must keep it
                self.identity(name, read, value)
            return
        if is_static_value(value):
            if name not in self.seen_values:
                self.seen_values.add(name)
                self.found.values.append(ValueSource(name, read, value))
            return
        if _is_module(value):
            self.identity(name, read, value)  # a module swapped for another (``model[1] = nn.ReLU()``)
            self.module(name, read, value, depth)
            return
        if _is_optimizer(value):
            if id(value) not in self.seen_objects:
                self.seen_objects.add(id(value))
                self.found.objects.append(ObjectSource(name, read, value))
                self.optimizer_params(name, read, value)
            return
        inner = _transformed_function(value)
        if inner is not None:  # ``grad(f)``: what ``f`` reads
            self.value(name, _const_reader(inner), inner, depth)
            return
        if isinstance(value, types.MethodType):
            self.identity(name, read, value)
            func: Any = value.__func__
            if isinstance(func, types.FunctionType):
                self.function(func, depth + 1)
            self.value(f"{name}.__self__", _const_reader(value.__self__), value.__self__, depth + 1)
            return
        if isinstance(value, types.FunctionType):
            self.identity(name, read, value)  # a helper rebound (``helper = other``, ``cfg['act'] = f``)
            self.function(value, depth + 1)
            return
        if isinstance(value, (tuple, list, dict, set, frozenset)):
            self.container(name, read, value, depth)
            return
        if isinstance(value, np.ndarray):
            self.array(name, read, value)
            return
        if _is_plain_object(value):
            self.plain_object(name, read, value, depth)
        elif callable(value):  # a builtin or a callable object of a library (``act = np.tanh``)
            self.identity(name, read, value)

    def optimizer_params(self, name: str, read: Reader, optimizer: Any) -> None:
        """The tensors an optimizer updates: each group's ``params`` list guarded by its length and each entry
        by identity (the compiled step updates the tensors it found there: ``opt.param_groups[0]['params'][0] =
        p`` or a parameter replaced on the model but not in the optimizer must recompile); every other path to
        one of them is guarded by identity too."""
        groups = _step(read, "__dict__", "param_groups")
        known = self.found.tensor_by_id()
        for g, group in enumerate(optimizer.param_groups):
            params = _step(_step(groups, None, g), None, "params")
            label = f"{name}.param_groups[{g}]['params']"
            self.found.values.append(ValueSource(f"len({label})", _length_reader(params), len(group["params"])))
            for i, tensor in enumerate(group["params"]):
                self.found.objects.append(ObjectSource(f"{label}[{i}]", _step(params, None, i), tensor))
                self.optimized.add(id(tensor))
                source = known.get(id(tensor))
                if source is not None:  # met before at another path (``model.weight``)
                    self.identity(source.name, source.read, tensor)

    def identity(self, name: str, read: Reader, obj: Any) -> None:
        """Guard that ``name`` still leads to ``obj`` (compared by identity at every call): the compiled code
        ran what ``obj`` does when captured (a function's code, a module's ``forward``)."""
        key = f"identity {name}"
        if key not in self.seen_values:
            self.seen_values.add(key)
            self.found.objects.append(ObjectSource(name, read, obj))

    def _again(self, name: str, read: Reader, obj: Any) -> bool:
        """Whether ``obj`` (a container or an object) was walked already; if so, guard that ``name``
        still leads to it (its entries are guarded at the first path)."""
        if id(obj) not in self.seen_containers:
            self.seen_containers.add(id(obj))
            return False
        self.found.objects.append(ObjectSource(name, read, obj))
        return True

    def container(self, name: str, read: Reader, value: Any, depth: int) -> None:
        """A list, tuple, dict or set: its layout and static entries guarded (:mod:`.containers`), its
        other entries walked at their own paths (``closure s[0]``, ``global cfg['k']``)."""
        if self._again(name, read, value):
            return
        walked = len(value) <= _MAX_CONTAINER
        self.found.containers.append(snapshot(name, read, value, False, is_static_value, walked))
        if isinstance(value, (set, frozenset)):
            return
        items = value.items() if isinstance(value, dict) else enumerate(value)
        if not walked:
            if any(self._walkable(item) for _, item in items):
                _warn_unguarded(name, f"holds {len(value)} entries (more than {_MAX_CONTAINER}): its entries "
                                      "are guarded by value or identity only")
            return
        for key, item in items:
            if not is_static_value(item):
                self.value(entry_name(name, key, False), _step(read, None, key), item, depth + 1)

    def array(self, name: str, read: Reader, array: np.ndarray[Any, Any]) -> None:
        """A numpy array: compiled code may have baked its values in (``tp.tensor(W)`` copies it, numpy
        arithmetic on it runs once), so one of up to :data:`_MAX_ARRAY_BYTES` is guarded by value (a copy
        compared at every call) and a larger one by identity only (rebinding it recompiles; a change in place
        is not seen, and a warning says so)."""
        if name in self.seen_values:
            return
        self.seen_values.add(name)
        if array.nbytes <= _MAX_ARRAY_BYTES:
            self.found.values.append(ValueSource(name, read, array.copy()))
        else:
            _warn_unguarded(name, f"is a numpy array of {array.nbytes} bytes (more than {_MAX_ARRAY_BYTES}): it is "
                                  "guarded by identity only")
            self.found.objects.append(ObjectSource(name, read, array))

    def plain_object(self, name: str, read: Reader, obj: Any, depth: int) -> None:
        """An instance of a user's class: its attributes are guarded like a dict's entries (the names in
        order, the static values by value) and walked like a module's (``obj.w``), so a tensor attribute
        rebound between calls is read again and a scalar attribute is guarded."""
        if self._again(name, read, obj):
            return
        attributes = vars(obj)
        walked = len(attributes) <= _MAX_CONTAINER
        self.found.containers.append(snapshot(name, read, obj, True, is_static_value, walked))
        if not walked:
            if any(self._walkable(item) for item in attributes.values()):
                _warn_unguarded(name, f"has {len(attributes)} attributes (more than {_MAX_CONTAINER}): they are "
                                      "guarded by value or identity only")
            return
        label = _label(name)
        cls = type(obj)
        if _is_user_class(cls):
            self.user_class(f"type({label})", lambda: type(read()), cls, depth + 1)
        for key in sorted(attributes):
            item = attributes[key]
            if key.startswith("__") or is_static_value(item):
                continue
            self.value(f"{label}.{key}", _step(read, "__dict__", key), item, depth + 1)

    def user_class(self, name: str, read: Reader, cls: type, depth: int) -> None:
        """A class of the user's own code: its class attributes (``Config.lr``, or ``cfg.lr`` read through an
        instance) are guarded like an object's, and its containers and objects walked; its methods are guarded
        by identity (swapped on the class) and walked like functions (the globals they read)."""
        if id(cls) in self.seen_classes or depth > _MAX_DEPTH:
            return
        self.seen_classes.add(id(cls))
        attributes = vars(cls)
        self.found.containers.append(snapshot(name, read, cls, True, is_static_value, True))
        label = _label(name)
        for key in sorted(attributes):
            item = attributes[key]
            if isinstance(item, (staticmethod, classmethod)):
                item = item.__func__
            if isinstance(item, types.FunctionType) and not key.startswith("__"):
                # a method: swapped on the class (``K.act = other``) or reading state of its own (a global)
                self.value(f"{label}.{key}", _step(read, "__dict__", key), attributes[key], depth + 1)
                self.function(item, depth + 1)
                continue
            if key.startswith("__") or is_static_value(item) or not self._walkable(item):
                continue
            self.value(f"{label}.{key}", _step(read, "__dict__", key), item, depth + 1)

    @staticmethod
    def _walkable(item: Any) -> bool:
        """Whether ``item`` holds state of its own (a change inside it would not change its identity)."""
        return isinstance(item, (list, tuple, dict, set, np.ndarray)) or _is_module(item) or _is_plain_object(item)

    @staticmethod
    def _interesting(item: Any) -> bool:
        return isinstance(item, (Tensor, tuple, list, dict, set, frozenset, np.ndarray)) or _is_module(item) \
            or _is_optimizer(item) or _is_plain_object(item)

    def module(self, prefix: str, read: Reader, module: Any, depth: int) -> None:
        """A module: its training flag and plain attributes (values, containers, objects), parameters,
        buffers, tensor attributes, submodules, and the globals of its class's ``forward``."""
        if id(module) in self.seen_objects:
            return
        self.seen_objects.add(id(module))
        self.found.modules.append(module)
        dot = f"{prefix}." if prefix else ""
        label = prefix or "self"
        attributes = module.__dict__
        for key in sorted(attributes):
            item = attributes[key]
            if key.startswith("_") or key in ("training",):
                continue
            if is_static_value(item) or isinstance(item, (list, tuple, dict, set, frozenset)) \
                    or _is_plain_object(item):
                self.value(f"{label}.{key}", _step(read, "__dict__", key), item, depth + 1)
            elif isinstance(item, Tensor) or _is_optimizer(item):
                self.value(f"{dot}{key}", _step(read, "__dict__", key), item, depth + 1)
        training_name = f"{label}.training"
        if training_name not in self.seen_values:
            self.seen_values.add(training_name)
            self.found.values.append(ValueSource(training_name, _step(read, "__dict__", "training"),
                                                 module.training))
        for table, kind in (("_parameters", "parameter"), ("_buffers", "buffer")):
            for key, tensor in attributes.get(table, {}).items():
                if tensor is not None:
                    self.value(f"{dot}{key}", _step(read, table, key), tensor, depth + 1, kind)
                else:  # an absent bias or loss weight: guarded, so that setting it later retraces
                    self.value(f"{label}.{key}", _step(read, table, key), None, depth + 1)
        forward = getattr(type(module), "forward", None)
        if isinstance(forward, types.FunctionType):
            self.function(forward, depth + 1)
        for cls in type(module).__mro__:  # the user's module classes: their other methods, class attributes
            if _is_user_class(cls):
                self.user_class(f"type({label}).{cls.__name__}" if cls is not type(module) else f"type({label})",
                                _class_reader(read, cls), cls, depth + 1)
        for key, child in attributes.get("_modules", {}).items():
            if child is not None:
                child_read = _step(read, "_modules", key)
                self.identity(f"{dot}{key}", child_read, child)
                self.module(f"{dot}{key}", child_read, child, depth + 1)
            else:
                self.value(f"{label}.{key}", _step(read, "_modules", key), None, depth + 1)

    def user_module(self, name: str, read: Reader, module: types.ModuleType, fn: types.FunctionType,
                    depth: int) -> None:
        """A module of the user's own code named by ``fn`` (``import config``): the attributes ``fn``'s code
        names (``config.SCALE``) are walked like globals."""
        names = {n for code in _code_objects(fn.__code__) for n in code.co_names}
        namespace = vars(module)
        for key in sorted(names & namespace.keys()):
            item = namespace[key]
            if not isinstance(item, (types.ModuleType, type)):
                self.value(f"{name}.{key}", _step(read, "__dict__", key), item, depth + 1)

    def function(self, fn: types.FunctionType, depth: int) -> None:
        """A function: the globals its code names, its closure cells and its defaults."""
        if id(fn) in self.seen_objects or depth > _MAX_DEPTH:
            return
        self.seen_objects.add(id(fn))
        module_name = getattr(fn, "__module__", "") or ""
        if depth > 0 and (module_name == "tensorplay" or module_name.startswith("tensorplay.")):
            return  # library helpers the function calls read no user state (the function itself is scanned)
        namespace = fn.__globals__
        names: list[str] = []
        for code in _code_objects(fn.__code__):
            names.extend(n for n in code.co_names if n in namespace and n not in names)
        for key in names:
            item = namespace[key]
            if isinstance(item, types.ModuleType) and _is_user_module(item):
                self.user_module(f"global {key}", _global_reader(namespace, key), item, fn, depth)
            if isinstance(item, type) and _is_user_class(item):
                self.user_class(f"global {key}", _global_reader(namespace, key), item, depth)
            if isinstance(item, (types.ModuleType, type)):
                continue
            self.value(f"global {key}" if not (_is_module(item) or isinstance(item, Tensor)) else key,
                       _global_reader(namespace, key), item, depth)
        if fn.__closure__:
            for key, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                try:
                    item = cell.cell_contents
                except ValueError:
                    continue
                if isinstance(item, types.ModuleType) and _is_user_module(item):
                    self.user_module(f"closure {key}", _cell_reader(cell), item, fn, depth)
                if isinstance(item, type) and _is_user_class(item):
                    self.user_class(f"closure {key}", _cell_reader(cell), item, depth)
                if isinstance(item, (types.ModuleType, type)):
                    continue
                self.value(f"closure {key}" if not (_is_module(item) or isinstance(item, Tensor)) else key,
                           _cell_reader(cell), item, depth)
        # read through the function: ``f.__defaults__ = (...)`` rebinds them (a static one is guarded by value)
        label = getattr(fn, "__qualname__", "f")
        if fn.__defaults__ is not None:
            self.value(f"{label}.__defaults__", _attribute_reader(fn, "__defaults__"), fn.__defaults__, depth)
        if fn.__kwdefaults__ is not None:
            self.value(f"{label}.__kwdefaults__", _attribute_reader(fn, "__kwdefaults__"), fn.__kwdefaults__, depth)


def _owner(walker: _Walker, owner: Any) -> None:
    """The object a bound method or a callable object belongs to: walked as ``self``."""
    if _is_plain_object(owner):
        walker.value("self", _const_reader(owner), owner, 0)
        return
    for key, item in sorted(getattr(owner, "__dict__", {}).items()):
        if is_static_value(item) or walker._interesting(item):
            walker.value(f"self.{key}", _step(_const_reader(owner), "__dict__", key), item, 1)


def discover(fn: Any, modules: Sequence[tuple[str, Any]] = ()) -> Sources:
    """What ``fn`` (a function, a bound method or a module) reads from outside its arguments (see the
    module docstring), and the state of the ``(name, module)`` pairs among its arguments: a module passed
    as an argument is walked like one the function names (its parameters and buffers are state the
    capture swaps in, so what is computed from them is recorded, not baked in from their values at
    capture), read through the argument itself (the call's guards hold only for that module object)."""
    walker = _Walker()
    inner = _transformed_function(fn)
    while inner is not None:  # ``vmap(grad(f))`` reads what ``f`` reads
        fn, inner = inner, _transformed_function(inner)
    for name, module in modules:
        walker.module(name, _const_reader(module), module, 0)
    if _is_module(fn):
        walker.module("", _const_reader(fn), fn, 0)
    elif isinstance(fn, types.MethodType):
        owner = fn.__self__
        if _is_module(owner):
            walker.module("", _const_reader(owner), owner, 0)
        else:
            _owner(walker, owner)
        func: Any = fn.__func__
        if isinstance(func, types.FunctionType):
            walker.function(func, 0)
    elif isinstance(fn, types.FunctionType):
        walker.function(fn, 0)
    else:
        call = getattr(type(fn), "__call__", None)
        if isinstance(call, types.FunctionType):
            _owner(walker, fn)
            walker.function(call, 0)
    return walker.found


__all__ = ["MISSING", "ContainerSource", "ObjectSource", "Sources", "TensorSource", "UnguardedStateWarning", "ValueSource",
           "discover", "is_module"]
