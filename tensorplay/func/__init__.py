"""``tensorplay.func``: composable function transforms with PyTorch's ``torch.func`` API.

Each transform traces the function to a graph (:mod:`tensorplay.func.tracing`) and
interprets it with rules that emit into the caller's interpreter, so transforms nest
freely: ``grad(grad(f))``, ``vmap(grad(f))`` (per-sample gradients), ``jacrev(vmap(f))``,
``hessian(f)``. Functions see ordinary tensors; inputs and outputs are pytrees (tuples,
lists, dicts) of tensors. A primitive without a rule for a transform raises
:class:`~tensorplay.errors.MissingRuleError` naming both.

* reverse mode: :func:`vjp`, :func:`grad`, :func:`grad_and_value`, :func:`jacrev`, :func:`hessian`
* forward mode: :func:`jvp`, :func:`linearize`, :func:`jacfwd`
* batching: :func:`vmap`, :func:`chunk_vmap`
* modules: :func:`functional_call`, :func:`stack_module_state`,
  :func:`replace_all_batch_norm_modules_`, :func:`batch_norm_without_running_stats`
* :func:`functionalize`, :func:`rearrange`, :func:`unwrap`, :func:`debug_unwrap`

A transformed function caches its traced graph (:mod:`tensorplay.func.cache`): from its second call at top
level, a call whose input shapes, dtypes, grad mode and the Python state the function read agree runs the
cached graph; ``recompile_reasons`` says why it traced again. ``vjp`` and ``linearize`` cache their forward
and, separately, the function they return (:mod:`tensorplay.func.staged`).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

if TYPE_CHECKING:
    from tensorplay.func.functionalize import functionalize
    from tensorplay.func.jac import hessian, jacfwd, jacrev
    from tensorplay.func.jvp import jvp, linearize
    from tensorplay.func.module_utils import (
        batch_norm_without_running_stats, functional_call, replace_all_batch_norm_modules_, stack_module_state,
    )
    from tensorplay.func.rearrange import RearrangeError, rearrange
    from tensorplay.func.vjp import grad, grad_and_value, vjp
    from tensorplay.func.vmap import chunk_vmap, vmap

_SUBMODULES = {
    "functionalize": ("functionalize",), "jac": ("hessian", "jacfwd", "jacrev"), "jvp": ("jvp", "linearize"),
    "module_utils": ("batch_norm_without_running_stats", "functional_call", "replace_all_batch_norm_modules_",
                     "stack_module_state"),
    "rearrange": ("RearrangeError", "rearrange"), "vjp": ("grad", "grad_and_value", "vjp"),
    "vmap": ("chunk_vmap", "vmap"),
}
_HOME = {name: module for module, names in _SUBMODULES.items() for name in names}
"""Where each transform is defined: imported on the first read of its name (``tensorplay.func.vmap``, ``from
tensorplay.func import grad``), so that what imports one submodule (``tp.compile``'s capture imports
:mod:`tensorplay.func.tracing` for its backward) does not import every transform."""


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


class _Package(types.ModuleType):
    """This package's module: importing a submodule named as the transform it defines (``tensorplay.func.vmap``)
    binds the transform, not the submodule, as the package's attribute (``tensorplay.func.vmap(f)``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, types.ModuleType) and _HOME.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


T = TypeVar("T")


def unwrap(value: T) -> T:
    """Return ``value`` unchanged (a tensor or any pytree).

    Transforms never hand wrapped tensors to the function: inside ``grad`` or ``vmap`` the function
    sees ordinary :class:`~tensorplay.Tensor` objects (per-sample shapes under ``vmap``), so there is
    nothing to unwrap. This entry point exists for code written against APIs that need one.

    >>> import tensorplay as tp
    >>> from tensorplay.func import unwrap, vmap
    >>> vmap(lambda x: unwrap(x).shape[0] + x)(tp.zeros(2, 3))
    tensor([[3., 3., 3.],
            [3., 3., 3.]])
    """
    return value


def debug_unwrap(value: T, *, recurse: bool = True) -> T:
    """For debugging: ``value`` (a tensor or a pytree of tensors) with every tensor that is being
    recorded by a transform replaced by an eager tensor holding its current value, where it has one.

    Inside a transform that traces with values (``grad`` of concrete inputs records in execute mode) this
    shows the numbers without recording anything (no guard, no node); a value of a symbolic recording
    (inside ``vmap``, which traces one abstract sample) has no numbers and is returned as it is. Eager
    tensors are returned unchanged. ``recurse=False`` only looks at ``value`` itself, not into containers.

    >>> import tensorplay as tp
    >>> from tensorplay.func import debug_unwrap, grad
    >>> seen = []
    >>> g = grad(lambda x: (seen.append(debug_unwrap(x * 2)) or x * x).sum())(tp.tensor([1.0, 2.0]))
    >>> seen[0]
    tensor([2., 4.])
    """
    from tensorplay.func.tracing import concrete_value
    from tensorplay.interpreters.eager.interpreter import eager
    from tensorplay.pytree import tree_map
    from tensorplay.tensor import Tensor

    def one(x: Any) -> Any:
        if not isinstance(x, Tensor) or x._ops is eager:
            return x
        data = concrete_value(x)
        return x if data is None else eager.wrap(np.array(data, copy=True))

    return tree_map(one, value) if recurse else one(value)  # type: ignore[no-any-return]


__all__ = [
    "RearrangeError", "batch_norm_without_running_stats", "chunk_vmap", "functional_call", "functionalize",
    "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "linearize", "rearrange",
    "replace_all_batch_norm_modules_", "stack_module_state", "unwrap", "debug_unwrap", "vjp", "vmap",
]
