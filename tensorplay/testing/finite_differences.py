"""Central finite differences in float64: the oracle of :func:`~tensorplay.testing.check_grads`.

``primals`` is a tuple of positional arguments (pytrees allowed). Their float leaves (tensors or
numpy arrays of float32/float64) are the variables: ``f`` receives them as float64 tensors, moved by
``±eps`` along a direction. Other tensor and array leaves reach ``f`` as tensors, unchanged; any
other leaf (numbers, strings) is passed as it is. ``f`` runs in the caller's grad mode (it may use the
tape itself, e.g. to check second derivatives).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay.pytree import tree_flatten, tree_unflatten
from tensorplay.tensor import Tensor
from tensorplay.testing.compare import as_array
from tensorplay.testing.trees import flatten_keeping_none, flatten_with_paths

Array = np.ndarray[Any, Any]

DEFAULT_EPS = 1e-6
"""The default step: central differences of a float64 function are then accurate to about 1e-10
(truncation ``eps**2``, rounding ``1e-16 / eps``)."""


def is_float_leaf(value: Any) -> bool:
    """A float32/float64 tensor or numpy array: a variable of the finite differences."""
    if isinstance(value, Tensor):
        return bool(value.is_floating_point)
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


class Point:
    """``f`` at ``primals``, ready to be evaluated at ``primals + delta``."""

    def __init__(self, f: Callable[..., Any], primals: Sequence[Any], where: str) -> None:
        if not isinstance(primals, (tuple, list)):
            raise TypeError(f"{where}: primals must be a tuple of positional arguments, got "
                            f"{type(primals).__name__}")
        self.f = f
        self.where = where
        paths, self.leaves, self.spec = flatten_with_paths(tuple(primals), none_is_leaf=True)
        self.paths: list[tuple[Any, ...]] = list(paths)
        self.base: dict[int, Array] = {i: np.array(as_array(leaf), dtype=np.float64)
                                       for i, leaf in enumerate(self.leaves) if is_float_leaf(leaf)}

    def evaluate(self, delta: dict[int, Array] | None = None) -> tuple[list[Array | None], Any]:
        """The float output leaves of ``f`` at ``primals + delta`` (float64; ``None`` for other leaves)
        and the output's structure. Every call gets fresh tensors (``f`` may write into its inputs)."""
        delta = delta or {}
        args = [tp.from_numpy(np.asarray(self.base[i] + delta[i]) if i in delta else self.base[i].copy())
                if i in self.base else tp.tensor(leaf) if isinstance(leaf, np.ndarray) else leaf
                for i, leaf in enumerate(self.leaves)]
        out = self.f(*tree_unflatten(self.spec, args))
        leaves, spec = tree_flatten(out)
        return [_float64(leaf) for leaf in leaves], spec

    def tangent_leaves(self, tangents: Sequence[Any], what: str) -> dict[int, Array]:
        """``tangents`` (structured like the primals, ``None`` for fixed leaves) as ``{leaf: float64
        array}``."""
        leaves, spec = flatten_keeping_none(tuple(tangents))
        if spec != self.spec:
            raise ValueError(f"{self.where}: {what} must have the structure of the primals {self.spec}, got {spec}")
        out: dict[int, Array] = {}
        for i, (leaf, t) in enumerate(zip(self.leaves, leaves)):
            if t is None:
                continue
            if i not in self.base:
                raise TypeError(f"{self.where}: {what} leaf {i} is given for a {type(leaf).__name__} primal "
                                f"that is not a float tensor or array (pass None there)")
            array = np.asarray(as_array(t), dtype=np.float64)
            if array.shape != self.base[i].shape:
                raise ValueError(f"{self.where}: {what} leaf {i} has shape {list(array.shape)}, expected "
                                 f"{list(self.base[i].shape)} (the primal's shape)")
            out[i] = array
        return out


def _float64(value: Any) -> Array | None:
    if isinstance(value, Tensor) or isinstance(value, np.ndarray):
        array = as_array(value)
        return np.asarray(array, dtype=np.float64) if array.dtype.kind == "f" else None
    if isinstance(value, (float, np.floating)):
        return np.asarray(value, dtype=np.float64)
    return None


def _difference(plus: list[Array | None], minus: list[Array | None], eps: float) -> list[Array | None]:
    return [None if p is None or m is None else (p - m) / (2.0 * eps) for p, m in zip(plus, minus)]


def numerical_jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], *,
                  eps: float = DEFAULT_EPS) -> Any:
    """The directional derivative of ``f`` at ``primals`` along ``tangents`` by central differences:
    ``(f(primals + eps * tangents) - f(primals - eps * tangents)) / (2 * eps)``, in float64.

    ``tangents`` has the structure of ``primals`` with an array or tensor of the primal's shape at
    each float leaf, or ``None`` to hold that leaf fixed. Returns the structure of ``f``'s output
    with a float64 numpy array per float leaf and ``None`` for other leaves (integers, booleans:
    no derivative). Two evaluations of ``f``.

    >>> import numpy as np
    >>> import tensorplay as tp
    >>> from tensorplay.testing import numerical_jvp
    >>> d = numerical_jvp(lambda x: x ** 2, (tp.tensor([1.0, 3.0]),), (np.array([1.0, 0.0]),))
    >>> np.round(d, 6)
    array([2., 0.])
    """
    point = Point(f, primals, "numerical_jvp")
    direction = point.tangent_leaves(tangents, "tangents")
    plus, spec = point.evaluate({i: eps * t for i, t in direction.items()})
    minus, _ = point.evaluate({i: -eps * t for i, t in direction.items()})
    return tree_unflatten(spec, _difference(plus, minus, eps))


def numerical_vjp(f: Callable[..., Any], primals: Sequence[Any], cotangents: Any, *,
                  eps: float = DEFAULT_EPS, argnums: int | Sequence[int] | None = None) -> tuple[Any, ...]:
    """The gradient of ``<f(primals), cotangents>`` w.r.t. every float leaf of ``primals``, entry by
    entry, by central differences in float64 (``2 * size`` evaluations of ``f`` per leaf: for small
    inputs; :func:`numerical_jvp` along a random direction is the cheap check).

    ``cotangents`` has the structure of ``f``'s output (arrays, tensors or numbers at the float
    leaves; the other leaves are ignored). ``argnums`` restricts the differentiated positional
    arguments (default: all). Returns a tuple structured like ``primals``: a float64 array of the
    leaf's shape at each differentiated float leaf, ``None`` elsewhere.

    >>> import tensorplay as tp
    >>> from tensorplay.testing import numerical_vjp
    >>> (g,) = numerical_vjp(lambda x: (x * x).sum(), (tp.tensor([1.0, -2.0]),), 1.0)
    >>> g.round(6)
    array([ 2., -4.])
    """
    point = Point(f, primals, "numerical_vjp")
    selected = _selected_leaves(point, argnums)
    base_out, out_spec = point.evaluate()
    ct_leaves, ct_spec = tree_flatten(cotangents)
    if ct_spec != out_spec:
        raise ValueError(f"numerical_vjp: cotangents must have the structure of the output {out_spec}, got {ct_spec}")
    weights = [None if out is None else np.asarray(as_array(ct), dtype=np.float64)
               for out, ct in zip(base_out, ct_leaves)]

    def value(delta: dict[int, Array]) -> float:
        outs, _ = point.evaluate(delta)
        return float(sum(np.sum(o * w) for o, w in zip(outs, weights) if o is not None and w is not None))

    grads: list[Any] = [None] * len(point.leaves)
    for i in selected:
        base = point.base[i]
        grad = np.zeros(base.shape)
        for pos in np.ndindex(*base.shape):
            step = np.zeros(base.shape)
            step[pos] = eps
            grad[pos] = (value({i: step}) - value({i: -step})) / (2.0 * eps)
        grads[i] = grad
    result: tuple[Any, ...] = tree_unflatten(point.spec, grads)
    return result


def _selected_leaves(point: Point, argnums: int | Sequence[int] | None) -> list[int]:
    """The float leaves of the positional arguments ``argnums`` (all when ``None``)."""
    n_args = point.spec.num_children
    if argnums is None:
        wanted = set(range(n_args))
    else:
        wanted = {argnums} if isinstance(argnums, int) else set(argnums)
        for a in wanted:
            if not 0 <= a < n_args:
                raise ValueError(f"numerical_vjp: argnums {a} is out of range for {n_args} argument(s)")
    return [i for i, path in enumerate(point.paths) if path[0] in wanted and i in point.base]


__all__ = ["DEFAULT_EPS", "Point", "is_float_leaf", "numerical_jvp", "numerical_vjp"]
