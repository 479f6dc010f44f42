"""What every interpreter shares: the generic :meth:`BaseInterpreter.apply` and the layer operations of
the ``Ops`` surface.

The layer operations (``linear``, ``conv``, ``conv_transpose``, ``max_pool``, ``avg_pool``,
``smooth_max_pool``, ``layer_norm``, ``attention``, ``dropout``) are written once, against ``Ops``, in
:mod:`tensorplay.prefix`; every interpreter offers them as methods (``ops.conv(w, b, x, stride=2)``), so a
model written against ``Ops`` uses the same spelling under the eager interpreter, the graph recorder and
inside every transform. ``map`` needs the batched interpretation of a graph, which lives with the
interpreters: each concrete interpreter implements it with
:func:`tensorplay.interpreters.graph.batched.map_over_lead`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tensorplay import derived, prefix, sorting
from tensorplay.errors import TensorplayError
from tensorplay.spec.table import primitive

_LAYERS: Any = prefix  # the typed overloads are checked through Ops; here every argument is Any
_DERIVED: Any = derived  # likewise (the derived functions take the Interpreter protocol)
_SORTING: Any = sorting


class BaseInterpreter:
    """The base class of the interpreters (see the module docstring). Typed through :class:`tensorplay.Ops`."""

    name: str = "interpreter"
    level: int = 0

    def apply(self, target: str, inputs: Sequence[Any], params: Mapping[str, Any] | None = None) -> Any:
        """Run primitive ``target`` on ``inputs`` (tensors, Python scalars, ``None``) with static ``params``:
        the same as ``getattr(ops, target)(*inputs, **params)``. An unknown name raises ``KeyError`` naming
        close matches."""
        primitive(target)
        return getattr(self, target)(*inputs, **(params or {}))

    def map(self, lead: int, x: Any, f: Callable[[Any], Any]) -> Any:
        """See :func:`tensorplay.prefix.map` (concrete interpreters implement it)."""
        raise TensorplayError(f"{type(self).__name__} does not implement map")

    def linear(self, w: Any, b: Any, x: Any) -> Any:
        """See :func:`tensorplay.prefix.linear`."""
        return _LAYERS.linear(self, w, b, x)

    def conv(self, w: Any, b: Any, x: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
             *, out: Any = None) -> Any:
        """See :func:`tensorplay.prefix.conv`."""
        return _LAYERS.conv(self, w, b, x, stride, padding, dilation, groups, out=out)

    def conv_transpose(self, w: Any, b: Any, x: Any, stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                       dilation: Any = 1, groups: int = 1, *, out: Any = None) -> Any:
        """See :func:`tensorplay.prefix.conv_transpose`."""
        return _LAYERS.conv_transpose(self, w, b, x, stride, padding, output_padding, dilation,
                                     groups, out=out)

    def max_pool(self, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, *, out: Any = None) -> Any:
        """See :func:`tensorplay.prefix.max_pool`."""
        return _LAYERS.max_pool(self, x, kernel_size, stride, padding, out=out)

    def avg_pool(self, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, *, out: Any = None) -> Any:
        """See :func:`tensorplay.prefix.avg_pool`."""
        return _LAYERS.avg_pool(self, x, kernel_size, stride, padding, out=out)

    def smooth_max_pool(self, x: Any, kernel_size: Any, stride: Any, padding: Any, beta: float, *,
                        out: Any = None) -> Any:
        """See :func:`tensorplay.prefix.smooth_max_pool`."""
        return _LAYERS.smooth_max_pool(self, x, kernel_size, stride, padding, beta, out=out)

    def layer_norm(self, x: Any, gamma: Any = None, beta: Any = None, eps: float = 1e-5) -> Any:
        """See :func:`tensorplay.prefix.layer_norm`."""
        return _LAYERS.layer_norm(self, x, gamma, beta, eps)

    def attention(self, wq: Any, wk: Any, wv: Any, wo: Any, x: Any, num_heads: int, mask: Any = None,
                  output_bias: Any = None) -> Any:
        """See :func:`tensorplay.prefix.attention`."""
        return _LAYERS.attention(self, wq, wk, wv, wo, x, num_heads, mask, output_bias)

    def dropout(self, x: Any, p: float = 0.5, training: bool = True, *, key: Any = None) -> Any:
        """See :func:`tensorplay.prefix.dropout`."""
        return _LAYERS.dropout(self, x, p, training, key=key)

    # ---- the Tensor methods' entry points ------------------------------------------------------------
    # A Tensor method calls these on its interpreter; here they compose primitives (tensorplay.derived),
    # and an interpreter may take shortcuts with the same results (the eager one does, on small tensors).

    def tensor_getitem(self, x: Any, key: Any) -> Any:
        """``x[key]`` (see :func:`tensorplay.derived.getitem`)."""
        return _DERIVED.getitem(self, x, key)

    def tensor_reshape(self, x: Any, args: tuple[Any, ...]) -> Any:
        """``x.reshape(*args)``: ``args`` are the sizes or one sequence of them (see :func:`tensorplay.derived.reshape`)."""
        return _DERIVED.reshape(self, x, derived.shape_args(args))

    def tensor_permute(self, x: Any, dims: tuple[Any, ...] | None) -> Any:
        """``x.permute(*dims)``; ``None`` reverses every axis (``x.T``)."""
        return _DERIVED.permute(self, x, tuple(range(x.ndim - 1, -1, -1)) if dims is None else derived.shape_args(dims))

    def tensor_unsqueeze(self, x: Any, dim: Any) -> Any:
        """``x.unsqueeze(dim)``."""
        return _DERIVED.unsqueeze(self, x, dim)

    def tensor_reduce(self, prim: str, x: Any, dim: Any, keepdim: bool) -> Any:
        """``x.sum``/``amax``/``amin`` (``prim``: ``reduce_sum``, ``reduce_max`` or ``reduce_min``) over ``dim``."""
        return _DERIVED.reduce(self, prim, x, dim, keepdim)

    def tensor_mean(self, x: Any, dim: Any, keepdim: bool) -> Any:
        """``x.mean(dim, keepdim)``."""
        return _DERIVED.mean(self, x, dim, keepdim)

    def tensor_arg_reduce(self, prim: str, x: Any, dim: Any, keepdim: bool) -> Any:
        """``x.argmax``/``argmin`` (``prim``) along ``dim`` (``None``: the flattened tensor)."""
        return _DERIVED.arg_reduce(self, prim, x, dim, keepdim)

    def tensor_extremum(self, x: Any, dim: Any, keepdim: bool, largest: bool) -> tuple[Any, Any]:
        """``(values, indices)`` of ``x.max(dim)`` (``largest``) or ``x.min(dim)``."""
        return _SORTING.extremum(self, x, dim, keepdim, largest)  # type: ignore[no-any-return]

    def tensor_matmul(self, a: Any, b: Any) -> Any:
        """``a @ b`` (numpy's rules for 1-d operands, see :func:`tensorplay.derived.matmul`)."""
        return _DERIVED.matmul(self, a, b)

    def run_binary(self, name: str, x: Any, y: Any) -> Any:
        """The binary primitive ``name`` of ``x`` and ``y`` (the Tensor operators call this)."""
        return getattr(self, name)(x, y)


LAYER_OPS: tuple[str, ...] = ("linear", "map", "conv", "conv_transpose", "max_pool", "avg_pool",
                              "smooth_max_pool", "layer_norm", "attention", "dropout")
"""The layer operations every interpreter offers besides the primitives."""

__all__ = ["BaseInterpreter", "LAYER_OPS"]
