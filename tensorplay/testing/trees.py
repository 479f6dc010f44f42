"""Pytree flattening for the testing toolkit beyond :mod:`tensorplay.pytree`: leaf paths (for
messages) and ``None`` kept as a leaf (where arguments and tangents may hold it)."""

from __future__ import annotations

from typing import Any

import optree


def flatten_with_paths(tree: Any, *, none_is_leaf: bool = False) -> tuple[list[tuple[Any, ...]], list[Any], Any]:
    """``(paths, leaves, spec)``; a path is the tuple of keys and indices down to the leaf."""
    paths, leaves, spec = optree.tree_flatten_with_path(tree, none_is_leaf=none_is_leaf)
    return [tuple(p) for p in paths], list(leaves), spec


def flatten_keeping_none(tree: Any) -> tuple[list[Any], Any]:
    """``(leaves, spec)`` with ``None`` as a leaf (so ``(x, None)`` and ``(t, u)`` have one structure)."""
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=True)
    return list(leaves), spec


__all__ = ["flatten_keeping_none", "flatten_with_paths"]
