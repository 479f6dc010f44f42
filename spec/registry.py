"""One :class:`PrimSpec` per primitive: its shape/dtype rule and its numpy reference.

``SPECS[name].rule(*avals, **params)`` and ``SPECS[name].reference(*values, **params)``
take the primitive's inputs positionally (``n_inputs`` of them; ``None`` means
variadic) and its static parameters (``params``) as keywords, in the order of
the ``Ops`` protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import numpy.typing as npt

from . import conv, elementwise, linalg, nn, pool, random, reductions, structure
from .aval import Aval


@dataclass(frozen=True)
class PrimSpec:
    """The meaning of one primitive: rule, reference, input arity and parameter names."""

    name: str
    rule: Callable[..., Aval]
    reference: Callable[..., npt.NDArray[np.generic]]
    n_inputs: int | None
    params: tuple[str, ...]


_SPATIAL = ("kernel_size", "stride", "padding")
_UNARY = ("neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tanh",
          "sigmoid", "relu", "erf", "floor", "ceil", "logical_not")
_BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
           "logical_and", "logical_or")

# name -> (module, number of tensor inputs or None, parameter names)
_TABLE: dict[str, tuple[ModuleType, int | None, tuple[str, ...]]] = {
    **{name: (elementwise, 1, ()) for name in _UNARY},
    "gelu": (elementwise, 1, ("approximate",)),
    **{name: (elementwise, 2, ()) for name in _BINARY},
    "where": (elementwise, 3, ()),
    "reduce_sum": (reductions, 1, ("axes", "keepdims")),
    "reduce_max": (reductions, 1, ("axes", "keepdims")),
    "reduce_min": (reductions, 1, ("axes", "keepdims")),
    "argmax": (reductions, 1, ("axis", "keepdims")),
    "argmin": (reductions, 1, ("axis", "keepdims")),
    "reshape": (structure, 1, ("shape",)),
    "permute": (structure, 1, ("perm",)),
    "broadcast_to": (structure, 1, ("shape",)),
    "slice": (structure, 1, ("starts", "stops", "steps")),
    "pad": (structure, 1, ("pads", "value")),
    "concat": (structure, None, ("axis",)),
    "gather": (structure, 2, ("axis",)),
    "scatter_add": (structure, 3, ("axis",)),
    "cast": (structure, 1, ("dtype",)),
    "stop_gradient": (structure, 1, ()),
    "full": (structure, 0, ("shape", "value", "dtype")),
    "iota": (structure, 0, ("length", "dtype")),
    "matmul": (linalg, 2, ()),
    "conv": (conv, 2, ("stride", "padding", "dilation", "groups")),
    "conv_transpose": (conv, 2, ("stride", "padding", "output_padding", "dilation", "groups")),
    "conv_weight_grad": (conv, 2, ("kernel_size", "stride", "padding", "dilation", "groups")),
    "max_pool": (pool, 1, _SPATIAL),
    "max_pool_backward": (pool, 2, _SPATIAL),
    "max_pool_select": (pool, 2, _SPATIAL),
    "avg_pool": (pool, 1, _SPATIAL),
    "avg_pool_backward": (pool, 1, ("input_shape",) + _SPATIAL),
    "smooth_max_pool": (pool, 1, _SPATIAL + ("beta",)),
    "smooth_max_pool_backward": (pool, 2, _SPATIAL + ("beta",)),
    "layer_norm": (nn, 3, ("eps",)),
    "batch_norm": (nn, 5, ("eps",)),
    "softmax": (nn, 1, ("axis",)),
    "log_softmax": (nn, 1, ("axis",)),
    "attention": (nn, 4, ("scale",)),
    "random_uniform": (random, 1, ("shape", "dtype")),
    "random_normal": (random, 1, ("shape", "dtype")),
    "random_randint": (random, 1, ("shape", "low", "high", "dtype")),
}

SPECS: dict[str, PrimSpec] = {
    name: PrimSpec(name=name, rule=getattr(module, f"{name}_rule"), reference=getattr(module, f"{name}_ref"),
                   n_inputs=n_inputs, params=params)
    for name, (module, n_inputs, params) in _TABLE.items()
}
"""Every primitive's :class:`PrimSpec`, keyed by primitive name."""
