"""``functionalize``: run a function that mutates tensors as a pure function.

The function runs on fresh copies of its tensor arguments (``clone`` in the caller's
interpreter: a memory copy on the eager tape, a new handle under a recording), so
its in-place updates (``add_``, ``x[i] = v``, updates through views) act as they
would eagerly inside the function while the caller's tensors, and views of them,
come back unchanged. Under a graph recording, in-place updates are already recorded
as new values, so a traced ``functionalize(f)`` has no mutations at all.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorplay.errors import ArgumentError
from tensorplay.pytree import tree_flatten, tree_unflatten
from tensorplay.tensor import Tensor

_MODES = ("mutations", "mutations_and_views")


def _copy(x: Any) -> Any:
    if isinstance(x, Tensor):
        ops: Any = x._ops
        return ops.clone(x)
    return x


def functionalize(func: Callable[..., Any], *, remove: str = "mutations") -> Callable[..., Any]:
    """A version of ``func`` that never mutates its arguments.

    ``remove="mutations"`` (default) removes the mutations of the caller's tensors: ``func`` sees
    copies, so its in-place updates (also through views) behave as they do eagerly inside it,
    and the caller's tensors and their views come back unchanged. Unlike ``torch.func``, the
    final values of mutated arguments are not copied back: return them if they are needed.
    ``remove="mutations_and_views"`` also guarantees that no output shares memory with another
    output or with an input (outputs that are views are copied).

    >>> import tensorplay as tp
    >>> from tensorplay.func import functionalize
    >>> def f(x):
    ...     x.add_(1.0)
    ...     return x * 2
    >>> x = tp.tensor([1.0, 2.0])
    >>> functionalize(f)(x), x
    (tensor([4., 6.]), tensor([1., 2.]))
    """
    if remove not in _MODES:
        raise ArgumentError(f"functionalize: remove must be 'mutations' or 'mutations_and_views', got {remove!r}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        leaves, spec = tree_flatten((args, kwargs))
        copied_args, copied_kwargs = tree_unflatten(spec, [_copy(x) for x in leaves])
        result = func(*copied_args, **copied_kwargs)
        if remove == "mutations_and_views":
            out_leaves, out_spec = tree_flatten(result)
            fresh = []
            for i, leaf in enumerate(out_leaves):
                data = getattr(leaf, "_data", None) if isinstance(leaf, Tensor) else None
                if isinstance(data, np.ndarray) and (data.base is not None or any(
                        isinstance(o, Tensor) and o is not leaf and isinstance(o._data, np.ndarray)
                        and np.shares_memory(o._data, data) for o in out_leaves[:i])):
                    leaf = _copy(leaf)
                fresh.append(leaf)
            result = tree_unflatten(out_spec, fresh)
        return result

    return wrapper


__all__ = ["functionalize"]
