"""Runtime shape checking of annotated functions: ``@tp.shapecheck``.

mypy checks what it can see statically (``Tensor[Batch, Feat]`` against
``Tensor[Batch, Hidden]``); this decorator checks the same annotations, and
what mypy cannot decide, on every call::

    @tp.shapecheck
    def mlp(w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]: ...

* a ``Literal[3]`` size must match exactly;
* a named dim (a ``NewType`` such as ``Batch``, a ``TypeVar`` such as ``In``, or a
  class) binds to its size on first use and must agree afterwards, across all
  arguments, the attributes of ``self`` annotated on its class (``weight:
  Tensor[Out, In]``, or an int ``in_features: In``) and the return value; an ``int``
  argument annotated with a NewType dim (``n: Hidden``) binds that dim too;
* a variadic ``*Lead`` binds a whole run of axes; ``*tuple[Any, ...]``, ``int``
  and ``Any`` match anything; ``Tensor[()]`` is a 0-d tensor;
* :class:`~tensorplay.index.Index` arguments bind their bound dim
  (``Index[Vocab, *S]`` binds ``Vocab`` to ``ids.bound``);
* ``X | None``, ``tuple[...]`` and ``list[...]`` annotations are checked element by element.

A mismatch raises :class:`~tensorplay.errors.ShapeError` naming the function,
the argument, the axis, the dim, the expected and the actual size, and where
the expected size was bound. Under the graph recorder the check runs while the
function is traced (so a compiled or exported graph pays nothing); symbolic
sizes are compared only when both sides are concrete ints.

Switch it off with ``TP_SHAPECHECK=0`` in the environment, with
``tp.shapecheck.set_enabled(False)`` (the whole process), or for a block with
``with tp.shapecheck.disabled(): ...`` (only the thread that runs the block:
other threads keep the process-wide setting).
"""

from __future__ import annotations

import functools
import inspect
import os
import sys
import threading
import types
import typing
from collections import abc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tensorplay import dimexpr as _dimexpr
from tensorplay.errors import ShapeError
from tensorplay.tensor import Tensor

F = TypeVar("F", bound=Callable[..., Any])

_FALSE = ("0", "false", "off", "no")

_state = {"enabled": os.environ.get("TP_SHAPECHECK", "1").strip().lower() not in _FALSE}  # the process default


class _BlockSetting(threading.local):
    """What ``disabled()``/``enabled()`` blocks set in this thread (``None`` outside any block)."""

    def __init__(self) -> None:
        self.override: bool | None = None


_block = _BlockSetting()


def _is_enabled() -> bool:
    override = _block.override
    return _state["enabled"] if override is None else override


@contextmanager
def _overridden(flag: bool) -> Iterator[None]:
    previous = _block.override
    _block.override = flag
    try:
        yield
    finally:
        _block.override = previous


# ---- dims -----------------------------------------------------------------------------------------

class _Dim:
    """One axis of an annotation: ``kind`` is "any", "lit" (``sizes``) or "name" (``key``)."""

    __slots__ = ("kind", "key", "sizes", "label")

    def __init__(self, kind: str, key: Any = None, sizes: tuple[int, ...] = (), label: str = "") -> None:
        self.kind = kind
        self.key = key
        self.sizes = sizes
        self.label = label


class _Variadic:
    """A run of axes: ``key`` is the TypeVarTuple (``None`` for ``*tuple[Any, ...]``)."""

    __slots__ = ("key", "label")

    def __init__(self, key: Any, label: str) -> None:
        self.key = key
        self.label = label


def _dim_label(arg: Any) -> str:
    if typing.get_origin(arg) is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in typing.get_args(arg)) + "]"
    if arg is Any:
        return "Any"
    return str(getattr(arg, "__name__", None) or repr(arg))


def _is_newtype(arg: Any) -> bool:
    return isinstance(arg, typing.NewType)


def _dim(arg: Any) -> _Dim:
    label = _dim_label(arg)
    if arg is Any or arg is int or arg is object:
        return _Dim("any", label=label)
    if typing.get_origin(arg) is typing.Literal:
        sizes = tuple(a for a in typing.get_args(arg) if isinstance(a, int) and not isinstance(a, bool))
        return _Dim("lit", sizes=sizes, label=label) if sizes else _Dim("any", label=label)
    if isinstance(arg, TypeVar) or _is_newtype(arg) or isinstance(arg, type):
        return _Dim("name", key=arg, label=label)
    return _Dim("any", label=label)


def _unpacked(arg: Any) -> Any:
    """The inside of ``*X`` / ``Unpack[X]``, or ``None`` when ``arg`` is not unpacked."""
    if typing.get_origin(arg) is typing.Unpack:
        return typing.get_args(arg)[0]
    if getattr(arg, "__unpacked__", False):
        return arg
    return None


def _tensor_class(ann: Any) -> type | None:
    origin = typing.get_origin(ann)
    if isinstance(origin, type) and issubclass(origin, Tensor):
        return origin
    return None


# ---- checkers --------------------------------------------------------------------------------------

Env = dict[Any, tuple[Any, str, Any]]
"""Sizes bound during one call: ``key -> (size, where, axis)`` (``axis`` an int, -1 for an
Index bound, or a text for a run of axes); messages are formatted only on a mismatch."""

_ANY, _LIT, _NAME = 0, 1, 2
_KINDS = {"any": _ANY, "lit": _LIT, "name": _NAME}


def _same(a: Any, b: Any) -> bool:
    """Sizes agree, or cannot be told apart (a symbolic size against anything but an equal one)."""
    if a is b or a == b:
        return True
    return not (isinstance(a, int) and isinstance(b, int))


def _shape_text(shape: Any) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _axes_text(start: int, stop: int) -> str:
    return f"axis {start}" if stop - start == 1 else (f"axes {start}..{stop - 1}" if stop > start else
                                                         f"no axes (at {start})")


def _source(where: str, axis: Any) -> str:
    if isinstance(axis, str):
        return f"{where} {axis}" if axis else where
    return f"{where} axis {axis}" if axis >= 0 else f"{where} bound"


class _TensorCheck:
    """Checks one ``Tensor[...]`` annotation (also ``Index[Bound, ...]`` and Tensor subclasses)."""

    def __init__(self, ann: Any, cls: type) -> None:
        from tensorplay.index import Index

        args = list(typing.get_args(ann))
        self.cls = cls
        self.bound: _Dim | None = None
        if issubclass(cls, Index) and args:
            self.bound = _dim(args.pop(0))
        prefix: list[_Dim] = []
        suffix: list[_Dim] = []
        self.variadic: _Variadic | None = None
        labels: list[str] = []
        for arg in args:
            inner = _unpacked(arg)
            if inner is None:
                dim = _dim(arg)
                (suffix if self.variadic is not None else prefix).append(dim)
                labels.append(dim.label)
                continue
            if isinstance(inner, typing.TypeVarTuple):
                self.variadic = _Variadic(inner, "*" + inner.__name__)
                labels.append(self.variadic.label)
                continue
            targs = typing.get_args(inner)
            if len(targs) == 2 and targs[1] is Ellipsis:
                self.variadic = _Variadic(None, "*tuple[Any, ...]")
                labels.append(self.variadic.label)
                continue
            for t in targs:  # *tuple[A, B]: fixed axes written inline
                dim = _dim(t)
                (suffix if self.variadic is not None else prefix).append(dim)
                labels.append(dim.label)
        head = [self.bound.label] if self.bound is not None else []
        self.text = f"{cls.__name__}[{', '.join(head + labels) if head or labels else '()'}]"
        self.n_prefix = len(prefix)
        self.n_suffix = len(suffix)
        self.fixed = len(prefix) + len(suffix)
        # (offset, kind, key or sizes, dim): prefix offsets count from 0, suffix offsets from the end
        self.items = [(i, _KINDS[d.kind], d.key if d.kind == "name" else d.sizes, d)
                      for i, d in enumerate(prefix) if d.kind != "any"]
        self.items += [(i - len(suffix), _KINDS[d.kind], d.key if d.kind == "name" else d.sizes, d)
                       for i, d in enumerate(suffix) if d.kind != "any"]
        self.run_key = self.variadic.key if self.variadic is not None else None

    def check(self, value: Any, env: Env, where: str, fn: str) -> None:
        if not isinstance(value, Tensor):
            return
        try:
            shape = value._data.shape
        except AttributeError:
            shape = tuple(value.shape)
        rank = len(shape)
        if rank != self.fixed and (self.variadic is None or rank < self.fixed):
            at_least = ">= " if self.variadic is not None else ""
            raise ShapeError(f"{fn}: {where}: expected rank {at_least}{self.fixed}, got rank {rank}; shape "
                             f"{_shape_text(shape)}, annotation {self.text}")
        for offset, kind, key, dim in self.items:
            size = shape[offset]
            if kind == _NAME:
                bound = env.get(key)
                if bound is None:
                    env[key] = (size, where, offset % rank)
                elif bound[0] is not size and bound[0] != size and not _same(bound[0], size):
                    self._mismatch(dim, size, offset % rank, shape, bound, where, fn)
            elif size not in key and isinstance(size, int):
                expected = key[0] if len(key) == 1 else f"one of {list(key)}"
                raise ShapeError(f"{fn}: {where} axis {offset % rank} ({dim.label}): expected size {expected}, "
                                 f"got {size}; shape {_shape_text(shape)}, annotation {self.text}")
        if self.run_key is not None:
            stop = rank - self.n_suffix
            run = tuple(shape[self.n_prefix:stop])
            bound = env.get(self.run_key)
            if bound is None:
                env[self.run_key] = (run, where, _axes_text(self.n_prefix, stop))
            elif bound[0] != run and (len(bound[0]) != len(run)
                                      or not all(_same(a, b) for a, b in zip(bound[0], run))):
                label = self.variadic.label if self.variadic is not None else ""
                raise ShapeError(f"{fn}: {where} {_axes_text(self.n_prefix, stop)} (dims '{label}'): expected "
                                 f"{_shape_text(bound[0])} (bound by {_source(bound[1], bound[2])}), got "
                                 f"{_shape_text(run)}; shape {_shape_text(shape)}, annotation {self.text}")
        if self.bound is not None and self.bound.kind != "any":
            size = getattr(value, "bound", None)
            if size is None:
                return
            dim = self.bound
            if dim.kind == "lit":
                if isinstance(size, int) and size not in dim.sizes:
                    raise ShapeError(f"{fn}: {where} bound ({dim.label}): expected {dim.sizes[0]}, got {size}; "
                                     f"annotation {self.text}")
                return
            bound = env.get(dim.key)
            if bound is None:
                env[dim.key] = (size, where, -1)
            elif not _same(bound[0], size):
                self._mismatch(dim, size, -1, shape, bound, where, fn)

    def _mismatch(self, dim: _Dim, size: Any, axis: int, shape: Any, bound: tuple[Any, str, Any], where: str,
                  fn: str) -> None:
        raise ShapeError(f"{fn}: {_source(where, axis)} (dim '{dim.label}'): expected size {bound[0]} "
                         f"(bound by {_source(bound[1], bound[2])}), got {size}; shape {_shape_text(shape)}, "
                         f"annotation {self.text}")


class _SizeCheck:
    """An ``int`` argument annotated with a named dim (``n: Hidden``) binds that dim."""

    def __init__(self, ann: Any) -> None:
        self.dim = _dim(ann)

    def check(self, value: Any, env: Env, where: str, fn: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            return
        bound = env.get(self.dim.key)
        if bound is None:
            env[self.dim.key] = (value, where, "")
        elif not _same(bound[0], value):
            raise ShapeError(f"{fn}: {where} (dim '{self.dim.label}'): expected {bound[0]} "
                             f"(bound by {_source(bound[1], bound[2])}), got {value}")


class _UnionCheck:
    def __init__(self, members: list[Any]) -> None:
        self.members = members

    def check(self, value: Any, env: Env, where: str, fn: str) -> None:
        if value is None:
            return
        first: ShapeError | None = None
        for member in self.members:
            trial = dict(env)
            try:
                member.check(value, trial, where, fn)
            except ShapeError as err:
                first = first or err
                continue
            env.update(trial)
            return
        if first is not None:
            raise first


class _TupleCheck:
    def __init__(self, items: list[Any] | None, each: Any = None) -> None:
        self.items = items
        self.each = each

    def check(self, value: Any, env: Env, where: str, fn: str) -> None:
        if not isinstance(value, (tuple, list)):
            return
        if self.items is not None:
            if len(value) != len(self.items):
                return
            for i, (item, checker) in enumerate(zip(value, self.items)):
                if checker is not None:
                    checker.check(item, env, f"{where}[{i}]", fn)
        else:
            for i, item in enumerate(value):
                self.each.check(item, env, f"{where}[{i}]", fn)


def _checker(ann: Any) -> Any:
    """A checker for annotation ``ann``, or ``None`` when it says nothing about shapes."""
    cls = _tensor_class(ann)
    if cls is not None:
        return _TensorCheck(ann, cls)
    origin = typing.get_origin(ann)
    if origin is typing.Union or origin is types.UnionType:
        members = [c for c in (_checker(a) for a in typing.get_args(ann)) if c is not None]
        return _UnionCheck(members) if members else None
    if origin is tuple:
        args = typing.get_args(ann)
        if len(args) == 2 and args[1] is Ellipsis:
            each = _checker(args[0])
            return _TupleCheck(None, each) if each is not None else None
        items = [_checker(a) for a in args]
        return _TupleCheck(items) if any(c is not None for c in items) else None
    if origin in (list, abc.Sequence):
        args = typing.get_args(ann)
        each = _checker(args[0]) if args else None
        return _TupleCheck(None, each) if each is not None else None
    if _is_newtype(ann):
        return _SizeCheck(ann)
    return None


# ---- declared relations (tp.relate) ----------------------------------------------------------------

def _check_relations(env: Env, fn: str) -> None:
    """Every relation ``subject == expr`` whose dims this call bound must hold with the bound sizes."""
    relations = _dimexpr._RELATIONS
    if not relations:
        return
    dims = _dimexpr._DIMS
    sizes: dict[str, int] | None = None
    for subject, poly in relations.items():
        obj = dims.get(subject)
        bound = env.get(obj) if obj is not None else None
        if bound is None or not isinstance(bound[0], int):
            continue
        if sizes is None:
            sizes = {}
            for key, (size, _, _) in env.items():
                if isinstance(size, int) and (_is_newtype(key) or isinstance(key, type)):
                    sizes[_dimexpr.dim_name(key)] = size
        value = poly.evaluate(sizes)
        if value is None or value == bound[0]:
            continue
        parts = ", ".join(f"{a.rsplit('.', 1)[-1]}={sizes[a]}" for a in sorted(poly.atoms()) if a in sizes)
        name = subject.rsplit(".", 1)[-1]
        raise ShapeError(f"{fn}: dim '{name}' has size {bound[0]} (bound by {_source(bound[1], bound[2])}), but the "
                         f"declared relation {_dimexpr.relation_text(subject)} gives {value} ({parts})")


# ---- the decorator -----------------------------------------------------------------------------------

def _resolve(fn: Callable[..., Any], localns: dict[str, Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, localns=localns)
    except Exception as err:  # a name the annotations use is not visible from the function
        name = getattr(fn, "__qualname__", repr(fn))
        raise TypeError(f"shapecheck: cannot resolve the annotations of {name}(): {err}. Define the dims "
                        "it uses (NewType, TypeVar) at module level, or before the decorated function") from err


class _Plan:
    """What to check on each call of one function (built on its first call)."""

    def __init__(self, fn: Callable[..., Any], localns: dict[str, Any]) -> None:
        hints = _resolve(fn, localns)
        sig = inspect.signature(fn)
        self.name = f"{getattr(fn, '__qualname__', getattr(fn, '__name__', 'function'))}()"
        self.positional: list[tuple[str, Any]] = []  # (where text, checker)
        self.keyword: dict[str, Any] = {}
        self.var_positional: Any = None
        self.var_keyword: Any = None
        self.method = False
        params = list(sig.parameters.values())
        if params and params[0].name == "self" and params[0].name not in hints:
            self.method = True
        for param in params:
            checker = _checker(hints[param.name]) if param.name in hints else None
            if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
                self.positional.append((f"argument '{param.name}'", checker))
                if param.kind is param.POSITIONAL_OR_KEYWORD and checker is not None:
                    self.keyword[param.name] = checker
            elif param.kind is param.KEYWORD_ONLY:
                if checker is not None:
                    self.keyword[param.name] = checker
            elif param.kind is param.VAR_POSITIONAL:
                self.var_positional = checker
            elif param.kind is param.VAR_KEYWORD:
                self.var_keyword = checker
        self.result = _checker(hints["return"]) if "return" in hints else None
        self.active = (any(c is not None for _, c in self.positional) or bool(self.keyword)
                       or self.var_positional is not None or self.var_keyword is not None
                       or self.result is not None)

    def check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Env:
        env: Env = {}
        name = self.name
        if self.method and args:
            _bind_self(args[0], env, name)
        positional = self.positional
        n = len(positional)
        for i, value in enumerate(args):
            if i < n:
                where, checker = positional[i]
                if checker is not None:
                    checker.check(value, env, where, name)
            elif self.var_positional is not None:
                self.var_positional.check(value, env, f"argument *args[{i - n}]", name)
        if kwargs:
            for key, value in kwargs.items():
                checker = self.keyword.get(key, self.var_keyword)
                if checker is not None:
                    checker.check(value, env, f"argument '{key}'", name)
        return env


_SELF_PLANS: dict[type, list[tuple[str, Any]]] = {}


def _self_plan(cls: type) -> list[tuple[str, Any]]:
    plan = _SELF_PLANS.get(cls)
    if plan is None:
        plan = []
        for klass in reversed(cls.__mro__):
            raw = klass.__dict__.get("__annotations__", {})
            if not raw:
                continue
            module = sys.modules.get(klass.__module__)
            globalns = dict(vars(module)) if module is not None else {}
            for attr, ann in raw.items():
                if isinstance(ann, str):
                    try:
                        ann = eval(ann, globalns, dict(vars(klass)))  # noqa: S307 - annotations of the class
                    except Exception:
                        continue
                checker = _checker(ann)
                if checker is None and isinstance(ann, TypeVar):
                    checker = _SizeCheck(ann)       # ``in_features: In`` binds ``In`` to its value
                if isinstance(checker, (_TensorCheck, _SizeCheck)):
                    plan = [(a, c) for a, c in plan if a != attr] + [(attr, checker)]
        _SELF_PLANS[cls] = plan
    return plan


def _bind_self(obj: Any, env: Env, name: str) -> None:
    for attr, checker in _self_plan(type(obj)):
        value = obj.__dict__.get(attr) if hasattr(obj, "__dict__") else None
        if value is None:
            value = getattr(obj, attr, None)
        if value is not None:
            checker.check(value, env, f"attribute 'self.{attr}'", name)


class ShapeCheck:
    """The ``tp.shapecheck`` decorator (an instance of this class); see the module docstring."""

    def __call__(self, fn: F) -> F:
        """Check the shapes annotated on ``fn`` on every call (also usable on ``forward``)."""
        frame = sys._getframe(1)
        localns = dict(frame.f_locals) if frame.f_code.co_name != "<module>" else {}
        del frame
        plan: list[_Plan] = []

        @functools.wraps(fn)
        def checked(*args: Any, **kwargs: Any) -> Any:
            if not _is_enabled():
                return fn(*args, **kwargs)
            if not plan:
                plan.append(_Plan(fn, localns))
            p = plan[0]
            if not p.active:
                return fn(*args, **kwargs)
            env = p.check_args(args, kwargs)
            _check_relations(env, p.name)
            result = fn(*args, **kwargs)
            if p.result is not None:
                p.result.check(result, env, "return value", p.name)
                _check_relations(env, p.name)
            return result

        checked.__shapecheck__ = True  # type: ignore[attr-defined]
        return checked  # type: ignore[return-value]

    @staticmethod
    def is_enabled() -> bool:
        """Whether decorated functions check their shapes now (in this thread)."""
        return _is_enabled()

    @staticmethod
    def set_enabled(flag: bool) -> None:
        """Turn checking on or off for the whole process (``TP_SHAPECHECK=0`` sets the default off);
        ``disabled()``/``enabled()`` blocks running in a thread still decide for that thread."""
        _state["enabled"] = bool(flag)

    @staticmethod
    @contextmanager
    def disabled() -> Iterator[None]:
        """``with tp.shapecheck.disabled(): ...`` runs the block without shape checks (this thread only)."""
        with _overridden(False):
            yield

    @staticmethod
    @contextmanager
    def enabled() -> Iterator[None]:
        """``with tp.shapecheck.enabled(): ...`` runs the block with shape checks (even under TP_SHAPECHECK=0;
        this thread only)."""
        with _overridden(True):
            yield

    def __repr__(self) -> str:
        return f"<tp.shapecheck ({'enabled' if _is_enabled() else 'disabled'})>"


shapecheck = ShapeCheck()
"""Decorator: validate the annotated shapes of a function at call time (see the module docstring)."""

__all__ = ["ShapeCheck", "shapecheck"]
