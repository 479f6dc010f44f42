"""The eager interpreter's shortcut for the convolution layer (``tp.nn.functional.conv1d/2d/3d``,
``tp.nn.Conv1d/2d/3d``, ``ops.conv``).

The generic layer (:func:`tensorplay.prefix.conv`) runs the ``conv_nd`` primitive and then adds the
bias as its own ``add``, so the kernels never see the bias. Here, for the common case (a batched
input ``x[N, C, *spatial]``, eager float tensors of one dtype, integer stride, padding and dilation,
a bias of shape ``[O]`` or none), the kernel adds the bias as it writes the output
(:func:`.kernels.convolution.conv_bias`), and the tape gets one node:

- without a bias, exactly the ``conv_nd`` node the generic path records;
- with a bias, one :data:`CONV_BIAS_NODE` node of ``(x, w, b)``, whose backward rule is the generic
  path's (the ``conv_nd`` rule for ``x`` and ``w``, a ``reduce_sum`` of the cotangent for ``b``, so
  ``create_graph=True`` differentiates it again); without ``create_graph`` the fused rule
  (:mod:`.fused_vjp`) computes all three gradients from one read of the cotangent.

Values agree with the generic path to float32 rounding (the bias is added to each output once either
way). Anything else (another interpreter's tensors, an unbatched or multi-axis leading shape, mixed
dtypes, ``padding="same"``, ``out=`` names, a shape the ``conv_nd`` rule refuses, a bias of another
shape) takes the generic path, which raises its own errors. Graph recorders and transforms never see
this code: they implement ``conv`` through :func:`tensorplay.prefix.conv`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay.errors import ShapeError
from tensorplay.interpreter import BaseInterpreter
from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.kernels._support import FLOATS as _FLOATS
from tensorplay.interpreters.eager.results import result
from tensorplay.prefix import int_tuple
from tensorplay.rules.util import input_needed
from tensorplay.tensor import Tensor

AnyTensor = Any

CONV_BIAS_NODE = "conv_bias"
"""The tape node of a convolution with a bias (the generic path records ``conv_nd``, ``reshape``, ``add``)."""

def conv(ops: Any, w: Any, b: Any, x: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
         *, out: Any = None) -> AnyTensor:
    """See :func:`tensorplay.prefix.conv` (and the module docstring for when the shortcut applies)."""
    made = _shortcut(ops, w, b, x, stride, padding, dilation, groups) if out is None else None
    if made is None:
        return BaseInterpreter.conv(ops, w, b, x, stride, padding, dilation, groups, out=out)
    return made


def _shortcut(ops: Any, w: Any, b: Any, x: Any, stride: Any, padding: Any, dilation: Any,
              groups: Any) -> AnyTensor | None:
    if not isinstance(x, Tensor) or not isinstance(w, Tensor) or not (b is None or isinstance(b, Tensor)):
        return None
    xd, wd = x._data, w._data
    if type(xd) is not np.ndarray or type(wd) is not np.ndarray or xd.dtype not in _FLOATS \
            or wd.dtype is not xd.dtype or xd.ndim != wd.ndim or not 3 <= wd.ndim <= 5 or type(groups) is not int:
        return None
    bd = None
    if b is not None:
        bd = b._data
        if type(bd) is not np.ndarray or bd.dtype is not xd.dtype or bd.shape != wd.shape[:1]:
            return None
    rank = wd.ndim - 2
    try:  # what the generic layer reads (a string padding is not a tuple: the generic path handles it)
        s, p, d = (int_tuple(v, rank, n, "conv") for v, n in ((stride, "stride"), (padding, "padding"),
                                                               (dilation, "dilation")))
    except ShapeError:
        return None
    params: dict[str, Any] = {"stride": s, "padding": p, "dilation": d, "groups": groups}
    try:
        from tensorplay.interpreters.eager.interpreter import _rule
        _rule("conv_nd", (x, w), params)  # the params are ints already (``int_tuple``): no need to key by type
    except (ValueError, TypeError):  # the generic path raises the rule's error, naming the input as given
        return None
    y = K.conv_bias_nd(xd, wd, bd, **params)
    if bd is None:
        return result(ops, "conv_nd", (x, w), params, y)
    return result(ops, CONV_BIAS_NODE, (x, w, b), params, y)


def conv_bias_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, stride: tuple[int, ...],
                  padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> tuple[Any, ...]:
    """The backward rule of :data:`CONV_BIAS_NODE`, written with primitives: the ``conv_nd`` rule for ``x``
    and ``w``, and for ``b`` the cotangent summed over every axis but the channels (what the generic
    path's ``add`` and ``reshape`` rules give)."""
    from tensorplay.rules.vjp import VJP_RULES

    x, w, b = inputs
    gx, gw = VJP_RULES["conv_nd"](ops, g, (x, w), output, stride=stride, padding=padding, dilation=dilation,
                                  groups=groups)
    gb = None
    if input_needed(2):
        gb = ops.reduce_sum(g, axes=(0,) + tuple(range(2, len(g.shape))), keepdims=False)
    return (gx, gw, gb)


tape.EXTRA_VJP[CONV_BIAS_NODE] = conv_bias_vjp
