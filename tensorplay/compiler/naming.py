"""The user's vocabulary for a compiled function's inputs: argument names, the paths of tensors
inside container arguments (``batch['image']``, ``xs[1]``) and the names of annotated dims
(``x: Tensor[Batch, Feat]`` names axis 0 ``Batch``), used for symbolic dims, placeholder names and
recompilation reasons."""

from __future__ import annotations

import inspect
import keyword
import re
import typing
from collections.abc import Callable, Sequence
from typing import Any

import optree

from tensorplay.tensor import Tensor


def target_function(fn: Any) -> Callable[..., Any] | None:
    """The Python function whose signature describes a call of ``fn`` (a module's ``forward``)."""
    forward = getattr(fn, "forward", None)
    if callable(forward) and callable(getattr(fn, "named_parameters", None)):
        return forward  # type: ignore[no-any-return]
    return fn if callable(fn) else None


def argument_names(fn: Any, n_args: int, kwargs: Sequence[str]) -> list[str]:
    """Names of ``n_args`` positional arguments (``*args`` entries are ``args[0]``, ...) followed by
    the keyword arguments' names."""
    names: list[str] = []
    target = target_function(fn)
    try:
        params = list(inspect.signature(target).parameters.values()) if target is not None else []
    except (TypeError, ValueError):
        params = []
    for p in params:
        if len(names) >= n_args:
            break
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            names.extend(f"{p.name}[{i}]" for i in range(n_args - len(names)))
    names.extend(f"arg{i}" for i in range(len(names), n_args))
    return names[:n_args] + list(kwargs)


def _path_text(entries: Sequence[Any]) -> str:
    return "".join(f"[{e!r}]" for e in entries)


def leaf_paths(args: tuple[Any, ...], kwargs: dict[str, Any], names: Sequence[str]) -> list[str]:
    """A readable name per leaf of ``(args, kwargs)`` flattened by :func:`flatten_call` (same order)."""
    out: list[str] = []
    values = list(args) + [kwargs[k] for k in sorted(kwargs)]
    arg_names = list(names[:len(args)]) + sorted(kwargs)
    for name, value in zip(arg_names, values):
        paths, _, _ = optree.tree_flatten_with_path(value, none_is_leaf=True)
        out.extend(f"{name}{_path_text(p)}" for p in paths)
    return out


def flatten_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[list[Any], Any]:
    """The leaves of a call's arguments (``None`` is a leaf) and their structure."""
    tree: Any = (args, dict(sorted(kwargs.items())))
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=True)
    return list(leaves), spec


def dim_labels(fn: Any, names: Sequence[str]) -> dict[str, list[str | None]]:
    """For arguments annotated ``Tensor[...]``: argument name -> the dim name of each axis (``None``
    where unnamed). A leading or trailing variadic (``*Lead``) names the axes on its other side only:
    the list then holds the names before it; names after it are keyed by negative axis in
    :func:`dim_name`."""
    target = target_function(fn)
    if target is None:
        return {}
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # unresolvable annotations say nothing we can use
        return {}
    out: dict[str, list[str | None]] = {}
    for name in names:
        ann = hints.get(name)
        origin = typing.get_origin(ann)
        if not (isinstance(origin, type) and issubclass(origin, Tensor)):
            continue
        labels: list[str | None] = []
        for arg in typing.get_args(ann):
            if typing.get_origin(arg) is typing.Unpack or getattr(arg, "__unpacked__", False) or \
                    isinstance(arg, typing.TypeVarTuple):
                labels.append("*")
                continue
            label = getattr(arg, "__name__", None)
            labels.append(label if isinstance(label, str) and label.isidentifier() else None)
        out[name] = labels
    return out


def dim_name(labels: dict[str, list[str | None]], arg: str, axis: int, ndim: int) -> str | None:
    """The annotated name of ``axis`` of argument ``arg`` (rank ``ndim``), or ``None``."""
    found = labels.get(arg)
    if not found:
        return None
    if "*" not in found:
        return found[axis] if len(found) == ndim and axis < ndim else None
    star = found.index("*")
    before, after = found[:star], found[star + 1:]
    if axis < len(before):
        return before[axis]
    from_end = ndim - axis
    if 0 < from_end <= len(after):
        return after[len(after) - from_end]
    return None


def identifier(text: str) -> str:
    """``text`` made a Python identifier (symbol names must be)."""
    name = re.sub(r"\W+", "_", text).strip("_") or "d"
    if name[0].isdigit():
        name = "d_" + name
    if keyword.iskeyword(name):
        name += "_"
    return name


__all__ = ["argument_names", "dim_labels", "dim_name", "flatten_call", "identifier", "leaf_paths",
           "target_function"]
