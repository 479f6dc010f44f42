"""The eager interpreter's shortcut for the dense layer (``tp.nn.functional.linear``, ``tp.nn.Linear``,
the projections of ``tp.nn.MultiheadAttention``, ``ops.linear``).

The generic layer (:func:`tensorplay.prefix.linear`) records up to five primitives for an input with
leading axes (``permute`` of the weight, ``reshape``, ``matmul``, ``reshape``, ``add`` of the bias),
each one a tensor and a tape node. Here, for eager float tensors of one dtype with an input of at least
two axes (``x[*lead, in]``), a weight ``[out, in]`` and a bias ``[out]`` or none, the layer is one GEMM
with the bias added in place (:func:`.kernels.linear.linear`) and the tape gets one :data:`LINEAR_NODE`
node of ``(x, w)`` or ``(x, w, b)``. Its backward rule (:func:`linear_vjp`) is written with primitives,
so ``create_graph=True`` differentiates it again; without ``create_graph`` the fused rule
(:mod:`.fused_vjp`) computes the gradients from the arrays with three BLAS calls.

Values agree with the generic path bit for bit in the forward (the same GEMM and one addition of the
bias per element). Anything else (another interpreter's tensors, a 1-d input, mixed or integer dtypes,
mismatched shapes) takes the generic path, which raises its own errors. Graph recorders and transforms
never see this code: they implement ``linear`` through :func:`tensorplay.prefix.linear`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorplay.interpreter import BaseInterpreter
from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.kernels import linear as K
from tensorplay.interpreters.eager.kernels._support import FLOATS as _FLOATS
from tensorplay.interpreters.eager.results import result
from tensorplay.rules.util import input_needed
from tensorplay.tensor import Tensor

AnyTensor = Any

LINEAR_NODE = "linear"
"""The tape node of the dense layer (inputs ``(x, w)`` or ``(x, w, b)``)."""


def linear(ops: Any, w: Any, b: Any, x: Any) -> AnyTensor:
    """See :func:`tensorplay.prefix.linear` (and the module docstring for when the shortcut applies)."""
    if isinstance(x, Tensor) and isinstance(w, Tensor):
        xd, wd = x._data, w._data
        if type(xd) is np.ndarray and type(wd) is np.ndarray and xd.dtype in _FLOATS and wd.dtype is xd.dtype \
                and wd.ndim == 2 and xd.ndim >= 2 and xd.shape[-1] == wd.shape[1]:
            if b is None:
                return result(ops, LINEAR_NODE, (x, w), {}, K.linear(xd, wd, None))
            if isinstance(b, Tensor):
                bd = b._data
                if type(bd) is np.ndarray and bd.dtype is xd.dtype and bd.shape == wd.shape[:1]:
                    return result(ops, LINEAR_NODE, (x, w, b), {}, K.linear(xd, wd, bd))
    return BaseInterpreter.linear(ops, w, b, x)


def linear_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> tuple[Any, ...]:
    """The backward rule of :data:`LINEAR_NODE`, written with primitives (what the generic path's
    ``permute``, ``reshape``, ``matmul`` and ``add`` rules give): ``dx = g @ w``, ``dw = g^T @ x`` over
    the folded leading axes, ``db`` the cotangent summed over them."""
    x, w = inputs[0], inputs[1]
    n, k = w.shape
    rows = math.prod(x.shape[:-1])
    g2 = g if g.ndim == 2 else ops.reshape(g, shape=(rows, n))
    grads: list[Any] = [None] * len(inputs)
    if input_needed(0):
        gx = ops.matmul(g2, w)
        grads[0] = gx if x.ndim == 2 else ops.reshape(gx, shape=tuple(x.shape))
    if input_needed(1):
        x2 = x if x.ndim == 2 else ops.reshape(x, shape=(rows, k))
        grads[1] = ops.matmul(ops.permute(g2, perm=(1, 0)), x2)
    if len(inputs) == 3 and input_needed(2):
        grads[2] = ops.reduce_sum(g2, axes=(0,), keepdims=False)
    return tuple(grads)


tape.EXTRA_VJP[LINEAR_NODE] = linear_vjp
