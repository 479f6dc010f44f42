"""Typed wrappers over ``optree`` for the testing toolkit (leaf paths for messages, ``None`` as a leaf
where arguments may hold it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import optree


def flatten(tree: Any, *, none_is_leaf: bool = False) -> tuple[list[Any], Any]:
    """``(leaves, spec)``."""
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=none_is_leaf)
    return list(leaves), spec


def flatten_with_paths(tree: Any, *, none_is_leaf: bool = False) -> tuple[list[tuple[Any, ...]], list[Any], Any]:
    """``(paths, leaves, spec)``; a path is the tuple of keys and indices down to the leaf."""
    paths, leaves, spec = optree.tree_flatten_with_path(tree, none_is_leaf=none_is_leaf)
    return [tuple(p) for p in paths], list(leaves), spec


def unflatten(spec: Any, leaves: Sequence[Any]) -> Any:
    """The inverse of :func:`flatten`."""
    return optree.tree_unflatten(spec, list(leaves))


__all__ = ["flatten", "flatten_with_paths", "unflatten"]
