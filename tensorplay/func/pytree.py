"""Pytrees for the transforms: nests of tuples, lists, dicts (and namedtuples) with tensor leaves.

Backed by ``optree`` (a maintained C++ pytree library). ``None`` is an empty
node (no leaves), as in PyTorch's pytrees; dict leaves are visited in sorted key
order and dicts come back in their original key order.

``in_dims`` / ``out_dims`` of :func:`~tensorplay.func.vmap` are *prefixes* of
the argument tree: an ``int`` or ``None`` applies to every leaf below it.
:func:`broadcast_prefix` expands such a prefix to one entry per leaf.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import optree

from tensorplay.tensor import Tensor

TreeSpec = optree.PyTreeSpec


def tree_flatten(tree: Any) -> tuple[list[Any], TreeSpec]:
    """``(leaves, spec)``; ``None`` has no leaves."""
    leaves, spec = optree.tree_flatten(tree, none_is_leaf=False)
    return list(leaves), spec


def tree_unflatten(spec: TreeSpec, leaves: list[Any]) -> Any:
    """The inverse of :func:`tree_flatten`."""
    return optree.tree_unflatten(spec, leaves)


def tree_map(fn: Any, tree: Any) -> Any:
    """``tree`` with ``fn`` applied to every leaf."""
    return optree.tree_map(fn, tree, none_is_leaf=False)


class _NoneMarker:
    """Stands for ``None`` inside a prefix tree (where ``None`` is a leaf meaning "not mapped")."""

    def __repr__(self) -> str:
        return "None"


_NONE = _NoneMarker()


def _mark_none(prefix: Any) -> Any:
    if prefix is None:
        return _NONE
    if isinstance(prefix, tuple) and hasattr(prefix, "_fields"):  # a namedtuple
        return type(prefix)(*(_mark_none(p) for p in prefix))
    if isinstance(prefix, (tuple, list)):
        return type(prefix)(_mark_none(p) for p in prefix)
    if isinstance(prefix, dict):
        return type(prefix)((k, _mark_none(v)) for k, v in prefix.items())
    return prefix


def broadcast_prefix(prefix: Any, tree: Any, what: str) -> list[Any]:
    """One entry of ``prefix`` per leaf of ``tree`` (``prefix`` is a prefix of ``tree``'s structure whose
    leaves are ``int`` or ``None``). A mismatch raises ``ValueError`` naming ``what``."""
    if prefix is None or isinstance(prefix, int):
        return [prefix] * len(tree_flatten(tree)[0])
    try:
        out = optree.broadcast_prefix(_mark_none(prefix), tree, none_is_leaf=False)
    except ValueError as error:
        raise ValueError(f"{what} {prefix!r} is not a prefix of the structure it applies to "
                         f"({optree.tree_structure(tree, none_is_leaf=False)}): {error}") from None
    return [None if p is _NONE else p for p in out]


def tensor_leaves(tree: Any, what: str) -> tuple[list[Tensor[*tuple[Any, ...]]], TreeSpec]:
    """The leaves of ``tree``, which must all be tensors (``TypeError`` naming ``what`` otherwise)."""
    leaves, spec = tree_flatten(tree)
    for i, leaf in enumerate(leaves):
        if not isinstance(leaf, Tensor):
            raise TypeError(f"{what}: expected tensors (or tuples, lists and dicts of tensors), got a "
                            f"{type(leaf).__name__} at leaf {i} of {spec}")
    return leaves, spec


def check_leaves_like(where: str, leaves: Sequence[Any], refs: Sequence[Any], name: str, ref_name: str) -> None:
    """Each of ``leaves`` is a tensor with the shape and dtype of the reference at its position; the errors
    name leaf ``i`` as ``"{name} {i}"`` and its reference as ``"{ref_name} {i}"``."""
    for i, (t, r) in enumerate(zip(leaves, refs)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{where}: {name} {i} is a {type(t).__name__}, expected a tensor")
        if tuple(t.shape) != tuple(r.shape):
            raise ValueError(f"{where}: {name} {i} has shape {list(t.shape)}, expected {list(r.shape)} (the shape "
                             f"of {ref_name} {i})")
        if t.dtype != r.dtype:
            raise TypeError(f"{where}: {name} {i} has dtype {t.dtype.name}, expected {r.dtype.name} (the dtype of "
                            f"{ref_name} {i})")


__all__ = ["TreeSpec", "broadcast_prefix", "check_leaves_like", "tensor_leaves", "tree_flatten", "tree_map",
           "tree_unflatten"]
