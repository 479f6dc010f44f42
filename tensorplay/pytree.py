"""Pytrees: nests of tuples, lists, dicts (and namedtuples) with tensor leaves.

Backed by ``optree`` (a maintained C++ pytree library). ``None`` is an empty
node (no leaves), as in PyTorch's pytrees; dict leaves are visited in sorted key
order and dicts come back in their original key order.

Two uses:

* the transforms (``tensorplay.func``) flatten their inputs and outputs with
  :func:`tree_flatten`; ``in_dims`` / ``out_dims`` are *prefixes* of the argument
  tree, expanded by :func:`broadcast_prefix`;
* graph tracing (``tensorplay.graph.trace``) splits arguments into tensor leaves
  (tensors and numpy arrays, which become graph inputs) and *static* leaves (every
  other value, kept in a :class:`Structure` and compared with ``==`` when the traced
  function is called again): :func:`split_static`, :func:`join_static`,
  :func:`leaf_names`, :func:`structure_difference`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
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


# ---- prefixes (vmap's in_dims / out_dims) ------------------------------------------------------------

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
        return [prefix] * len(optree.tree_leaves(tree, none_is_leaf=False))
    if type(prefix) is tuple and type(tree) is tuple and len(prefix) == len(tree) and all(
            p is None or type(p) is int for p in prefix):
        # the common case (one int or None per argument), without building a marked prefix tree
        out: list[Any] = []
        for p, sub in zip(prefix, tree):
            if isinstance(sub, Tensor):  # a leaf
                out.append(p)
            else:
                out.extend([p] * len(optree.tree_leaves(sub, none_is_leaf=False)))
        return out
    try:
        out = optree.broadcast_prefix(_mark_none(prefix), tree, none_is_leaf=False)
    except ValueError as error:
        raise ValueError(f"{what} {prefix!r} is not a prefix of the structure it applies to "
                         f"({optree.tree_structure(tree, none_is_leaf=False)}): {error}") from None
    return [None if p is _NONE else p for p in out]


# ---- checks on tensor leaves -----------------------------------------------------------------------

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


# ---- tensor leaves and static leaves (graph tracing) -------------------------------------------------

def is_array_leaf(x: Any) -> bool:
    """Tensors and numpy arrays: the leaves that become graph inputs."""
    return isinstance(x, (Tensor, np.ndarray))


@dataclass(frozen=True)
class Structure:
    """A tree with its tensor leaves taken out: ``spec`` (every leaf), ``static`` (the value of each
    non-tensor leaf, ``None`` at tensor positions) and ``is_tensor`` (which leaves are tensors)."""

    spec: TreeSpec
    static: tuple[Any, ...]
    is_tensor: tuple[bool, ...]

    @property
    def n_tensors(self) -> int:
        """The number of tensor leaves."""
        return sum(self.is_tensor)


def split_static(tree: Any, is_tensor: Callable[[Any], bool] = is_array_leaf) -> tuple[list[Any], Structure]:
    """The tensor leaves of ``tree`` (in order) and its :class:`Structure` (static leaves kept)."""
    leaves, spec = optree.tree_flatten(tree, is_leaf=is_tensor, none_is_leaf=False)
    flags = tuple(bool(is_tensor(x)) for x in leaves)
    static = tuple(None if f else x for x, f in zip(leaves, flags))
    return [x for x, f in zip(leaves, flags) if f], Structure(spec, static, flags)


def join_static(structure: Structure, tensors: Sequence[Any]) -> Any:
    """The inverse of :func:`split_static`: ``tensors`` put back at the tensor positions."""
    if len(tensors) != structure.n_tensors:
        raise ValueError(f"join_static: expected {structure.n_tensors} tensor leaves, got {len(tensors)}")
    it = iter(tensors)
    leaves = [next(it) if f else s for s, f in zip(structure.static, structure.is_tensor)]
    return optree.tree_unflatten(structure.spec, leaves)


def _key_text(entry: Any) -> str:
    return str(getattr(entry, "key", getattr(entry, "idx", getattr(entry, "name", entry))))


def leaf_names(structure: Structure, prefix: str) -> list[str]:
    """A readable name per tensor leaf: ``x`` for a tensor argument, ``x_0`` for the first item of a
    tuple, ``x_key`` for a dict entry (names are labels, not identifiers: keys may be any text)."""
    paths = optree.treespec_paths(structure.spec)
    return ["_".join([prefix, *(str(p) for p in path)]) for path, f in zip(paths, structure.is_tensor) if f]


def _describe(spec: TreeSpec) -> str:
    kind = spec.type.__name__ if spec.type is not None else "leaf"
    if spec.num_children and spec.type in (tuple, list):
        return f"a {kind} of {spec.num_children} items"
    if spec.type is dict:
        return f"a dict with keys {list(spec.entries())}"
    return kind if spec.type is None else f"a {kind}"


def structure_difference(expected: Structure, given: Structure) -> str | None:
    """``None`` when ``given`` matches ``expected`` (same containers, tensors at the same places and
    static leaves equal), else a description of the first difference."""
    if expected.spec != given.spec:
        return _first_spec_difference(expected.spec, given.spec)
    for i, (a, b, fa, fb) in enumerate(zip(expected.static, given.static, expected.is_tensor, given.is_tensor)):
        if fa != fb:
            return f"leaf {i} was {'a tensor' if fa else repr(a)} when traced, now {'a tensor' if fb else repr(b)}"
        if fa:
            continue
        try:
            equal = type(a) is type(b) and bool(a == b)
        except Exception:  # an object whose == does not give a bool
            equal = a is b
        if not equal:
            return f"static argument was {a!r} when traced, now {b!r}"
    return None


def _first_spec_difference(a: TreeSpec, b: TreeSpec) -> str:
    if a.type is not b.type or a.num_children != b.num_children or a.entries() != b.entries():
        return f"expected {_describe(a)}, got {_describe(b)}"
    for x, y in zip(a.children(), b.children()):
        if x != y:
            return _first_spec_difference(x, y)
    return f"expected {a}, got {b}"


__all__ = ["Structure", "TreeSpec", "broadcast_prefix", "check_leaves_like", "is_array_leaf", "join_static",
           "leaf_names", "split_static", "structure_difference", "tensor_leaves", "tree_flatten", "tree_map",
           "tree_unflatten"]
