"""Minimal pytrees for trace inputs and outputs: tuples, lists and dicts of tensors.

Leaves are tensors (and numpy arrays); every other object is static and kept in
the tree definition (compared with ``==`` when a traced function is called
again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensorplay.tensor import Tensor

TreeDef = tuple[Any, ...]
"""``("leaf",)``, ``("static", value)``, ``("tuple"|"list", children)`` or ``("dict", keys, children)``."""


def is_leaf(x: Any) -> bool:
    """Tensors and numpy arrays are leaves."""
    return isinstance(x, (Tensor, np.ndarray))


def flatten(tree: Any, leaf: Callable[[Any], bool] = is_leaf) -> tuple[list[Any], TreeDef]:
    """``(leaves, treedef)`` of a nest of tuples, lists and dicts."""
    leaves: list[Any] = []
    return leaves, _flatten(tree, leaves, leaf)


def _flatten(tree: Any, leaves: list[Any], leaf: Callable[[Any], bool]) -> TreeDef:
    if leaf(tree):
        leaves.append(tree)
        return ("leaf",)
    if isinstance(tree, (tuple, list)) and type(tree) in (tuple, list):
        return (type(tree).__name__, tuple(_flatten(t, leaves, leaf) for t in tree))
    if isinstance(tree, dict):
        keys = tuple(tree)
        return ("dict", keys, tuple(_flatten(tree[k], leaves, leaf) for k in keys))
    return ("static", tree)


def unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    """The inverse of :func:`flatten`."""
    it = iter(leaves)
    out = _unflatten(treedef, it)
    rest = list(it)
    if rest:
        raise ValueError(f"unflatten: {len(rest)} leaves left over")
    return out


def _unflatten(treedef: TreeDef, it: Any) -> Any:
    kind = treedef[0]
    if kind == "leaf":
        return next(it)
    if kind == "static":
        return treedef[1]
    if kind == "tuple":
        return tuple(_unflatten(t, it) for t in treedef[1])
    if kind == "list":
        return [_unflatten(t, it) for t in treedef[1]]
    if kind == "dict":
        return {k: _unflatten(t, it) for k, t in zip(treedef[1], treedef[2])}
    raise ValueError(f"unknown tree node {kind!r}")


def paths(treedef: TreeDef, prefix: str) -> list[str]:
    """A readable name per leaf: ``x``, ``x_0``, ``x_key``."""
    out: list[str] = []
    _paths(treedef, prefix, out)
    return out


def _paths(treedef: TreeDef, prefix: str, out: list[str]) -> None:
    kind = treedef[0]
    if kind == "leaf":
        out.append(prefix)
    elif kind in ("tuple", "list"):
        for i, t in enumerate(treedef[1]):
            _paths(t, f"{prefix}_{i}", out)
    elif kind == "dict":
        for k, t in zip(treedef[1], treedef[2]):
            _paths(t, f"{prefix}_{k}", out)


def same_structure(a: TreeDef, b: TreeDef) -> str | None:
    """``None`` when ``b`` matches ``a`` (static parts equal), else a description of the first difference."""
    if a[0] != b[0]:
        return f"expected {a[0]}, got {b[0]}"
    if a[0] == "static":
        try:
            equal = bool(a[1] == b[1]) and type(a[1]) is type(b[1])
        except Exception:
            equal = a[1] is b[1]
        return None if equal else f"static argument was {a[1]!r} when traced, now {b[1]!r}"
    if a[0] in ("tuple", "list"):
        if len(a[1]) != len(b[1]):
            return f"expected a {a[0]} of {len(a[1])} items, got {len(b[1])}"
        for x, y in zip(a[1], b[1]):
            diff = same_structure(x, y)
            if diff:
                return diff
    if a[0] == "dict":
        if a[1] != b[1]:
            return f"expected dict keys {list(a[1])}, got {list(b[1])}"
        for x, y in zip(a[2], b[2]):
            diff = same_structure(x, y)
            if diff:
                return diff
    return None
