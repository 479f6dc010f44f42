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

from tensorplay import prefix
from tensorplay.errors import TensorplayError
from tensorplay.spec.table import primitive

_LAYERS: Any = prefix  # the typed overloads are checked through Ops; here every argument is Any


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


LAYER_OPS: tuple[str, ...] = ("linear", "map", "conv", "conv_transpose", "max_pool", "avg_pool",
                              "smooth_max_pool", "layer_norm", "attention", "dropout")
"""The layer operations every interpreter offers besides the primitives."""

__all__ = ["BaseInterpreter", "LAYER_OPS"]
