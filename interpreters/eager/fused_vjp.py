"""Fused backward rules for the eager tape when no graph is being created.

``FUSED_VJP[name]`` has the signature of a vjp rule (:mod:`tensorplay.rules.vjp`):
``rule(ops, g, inputs, output, **params) -> cotangents``. :func:`tensorplay.interpreters.eager.tape.run_backward`
uses it instead of the composite rule only when ``create_graph=False``: the composite rules
(built from ``Ops`` primitives, so differentiable again) stay the reference, and
``create_graph=True`` (second derivatives) always runs them.

A fused rule works on the numpy payloads directly: one kernel pass where the composite
rule runs a dozen eager ops (``gelu``, ``layer_norm``, ``softmax``, ``log_softmax``,
``relu``), or the same numpy calls without the per-op bookkeeping of the eager
interpreter (broadcasting arithmetic, views, reductions, ``matmul``, pooling,
``gather``, ``attention``). It returns eager tensors holding plain arrays (never recorded)
and respects :func:`tensorplay.rules.util.input_needed`: cotangents nobody needs are not
computed. Any case off the fast path (mixed dtypes, integer or bool tensor operands,
other interpreters' payloads) is handed to the composite rule, so a fused rule's results
always equal the composite rule's up to floating-point rounding (tested in
``tests/test_fused_vjp.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.fastpath import BASIC_INDEX_NODE, basic_index_plan, basic_index_vjp
from tensorplay.interpreters.eager.fastpath_conv import CONV_BIAS_NODE, conv_bias_vjp
from tensorplay.interpreters.eager.fastpath_linear import LINEAR_NODE, linear_vjp
from tensorplay.interpreters.eager.losses import LAYER_NORM_NODE
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.eager.kernels import backward as KB
from tensorplay.interpreters.eager.kernels import linear as KL
from tensorplay.interpreters.eager.kernels._support import FLOATS as _FLOATS
from tensorplay.interpreters.eager.padded import padded
from tensorplay.rules.util import input_needed
from tensorplay.rules.vjp import VJP_RULES
from tensorplay.tensor import Tensor

Array = np.ndarray[Any, Any]
Cotangents = tuple[Any, ...]
FusedRule = Callable[..., Cotangents]

FUSED_VJP: dict[str, FusedRule] = {}
"""Primitive name -> fused backward rule (only for ``create_graph=False``)."""



def _register(*names: str) -> Callable[[FusedRule], FusedRule]:
    def deco(fn: FusedRule) -> FusedRule:
        for name in names:
            FUSED_VJP[name] = fn
        return fn
    return deco


def _composite(name: str, g: Any, inputs: tuple[Any, ...], output: Any, params: dict[str, Any]) -> Cotangents:
    return VJP_RULES[name](eager, g, inputs, output, **params)


def _wrap(a: Array) -> Tensor[*tuple[Any, ...]]:
    return Tensor(eager, a)


def _same_float(g: Any, *tensors: Any) -> Array | None:
    """``g``'s payload when it and every tensor among ``tensors`` hold float arrays of one dtype
    (other entries must be ``None`` or Python numbers); ``None`` otherwise (use the composite rule)."""
    gd = getattr(g, "_data", None)
    if type(gd) is not np.ndarray or gd.dtype not in _FLOATS:
        return None
    for t in tensors:
        if isinstance(t, Tensor):
            d = t._data
            if type(d) is not np.ndarray or d.dtype != gd.dtype:
                return None
        elif not (t is None or type(t) is float or type(t) is int):
            return None
    return gd


def _reduce_to(gd: Array, shape: tuple[int, ...]) -> Array:
    """The cotangent of a broadcast result reduced to an operand's ``shape`` (``sum_to``).

    When the kept axes form one block of a C-contiguous ``gd`` (a bias: ``[N, C, H, W] -> [C, 1, 1]``,
    ``[M, F] -> [F]``), the sum is ``einsum('akb->k')`` over ``gd`` viewed as ``[A, K, B]``: 1.2-3x
    faster than ``numpy.sum`` over several axes, and as accurate (measured)."""
    if gd.shape == shape:
        return gd
    lead = gd.ndim - len(shape)
    reduced = [i < lead or (shape[i - lead] == 1 and gd.shape[i] != 1) for i in range(gd.ndim)]
    kept = [i for i, r in enumerate(reduced) if not r]
    if gd.flags.c_contiguous and (not kept or kept[-1] - kept[0] == len(kept) - 1):
        k0, k1 = (kept[0], kept[-1] + 1) if kept else (0, 0)
        a, k, b = (math.prod(gd.shape[:k0]), math.prod(gd.shape[k0:k1]), math.prod(gd.shape[k1:]))
        summed: Array = np.einsum("akb->k", gd.reshape(a, k, b))
        return summed.reshape(shape)
    out = np.sum(gd, axis=tuple(i for i, r in enumerate(reduced) if r))
    if out.shape != shape:
        out = out.reshape(shape)
    return out if type(out) is np.ndarray else np.asarray(out, gd.dtype)


def _ct(gd: Array, x: Any) -> Tensor[*tuple[Any, ...]] | None:
    """The cotangent for operand ``x`` (a tensor of ``gd``'s dtype, or a scalar / ``None``: no cotangent)."""
    if not isinstance(x, Tensor):
        return None
    if type(gd) is not np.ndarray:  # a ufunc on 0-d arrays returns a numpy scalar
        gd = np.asarray(gd)
    return _wrap(_reduce_to(gd, x._data.shape))


# ---- fused kernels ----------------------------------------------------------------------------------

@_register("gelu")
def gelu_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, approximate: str = "none") -> Cotangents:
    """``g * gelu'(x)`` in one pass (erf or tanh form)."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None or not isinstance(x, Tensor):
        return _composite("gelu", g, inputs, output, {"approximate": approximate})
    return (_wrap(KB.gelu_backward(gd, x._data, approximate=approximate)),)


@_register("relu")
def relu_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """``g * sign(relu(x))`` in one pass."""
    (x,) = inputs
    gd = _same_float(g, x, output)
    if gd is None or not isinstance(x, Tensor):
        return _composite("relu", g, inputs, output, {})
    return (_wrap(KB.relu_backward(gd, output._data)),)


@_register("layer_norm_last_axis", LAYER_NORM_NODE)
def layer_norm_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, eps: float,
                   stats: Array | None = None) -> Cotangents:
    """``dx``, ``dgamma``, ``dbeta`` from one kernel (two passes over each row; ``stats``, the forward's
    mean and rstd of each row, saves recomputing them)."""
    x, gamma, beta = inputs
    gd = _same_float(g, x, gamma, beta)
    if gd is None or not (isinstance(x, Tensor) and isinstance(gamma, Tensor) and isinstance(beta, Tensor)):
        return _composite("layer_norm_last_axis", g, inputs, output, {"eps": eps})
    need_x = input_needed(0)
    need_gamma, need_beta = input_needed(1), input_needed(2)
    dx, dgamma, dbeta = KB.layer_norm_backward(x._data, gamma._data, gd, eps=eps, need_x=need_x,
                                               need_params=need_gamma or need_beta, stats=stats)
    return (None if dx is None else _wrap(dx),
            _wrap(dgamma) if need_gamma and dgamma is not None else None,
            _wrap(dbeta) if need_beta and dbeta is not None else None)


def _from_output(name: str, kernel: Callable[..., Array], g: Any, inputs: tuple[Any, ...], output: Any,
                 axis: int) -> Cotangents:
    """The rule of ``name`` (``softmax``, ``log_softmax``): ``kernel(y, g, axis=axis)`` on the output ``y``."""
    (x,) = inputs
    gd = _same_float(g, x, output)
    if gd is None or not isinstance(x, Tensor):
        return _composite(name, g, inputs, output, {"axis": axis})
    return (_wrap(kernel(output._data, gd, axis=axis)),)


@_register("softmax")
def softmax_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, axis: int) -> Cotangents:
    """``y * (g - sum(g * y))`` in one kernel."""
    return _from_output("softmax", KB.softmax_backward, g, inputs, output, axis)


@_register("log_softmax")
def log_softmax_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, axis: int) -> Cotangents:
    """``g - exp(y) * sum(g)`` in one kernel."""
    return _from_output("log_softmax", KB.log_softmax_backward, g, inputs, output, axis)


# ---- elementwise arithmetic: the composite formulas on payloads ------------------------------------

@_register("add")
def add_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """``g`` to both operands, summed over their broadcast axes."""
    x, y = inputs
    gd = _same_float(g, x, y)
    if gd is None:
        return _composite("add", g, inputs, output, {})
    return (_ct(gd, x) if input_needed(0) else None, _ct(gd, y) if input_needed(1) else None)


@_register("sub")
def sub_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """``g`` and ``-g``."""
    x, y = inputs
    gd = _same_float(g, x, y)
    if gd is None:
        return _composite("sub", g, inputs, output, {})
    gy = _ct(np.negative(gd), y) if input_needed(1) and isinstance(y, Tensor) else None
    return (_ct(gd, x) if input_needed(0) else None, gy)


@_register("neg")
def neg_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """``-g``."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None:
        return _composite("neg", g, inputs, output, {})
    return (_ct(np.negative(gd), x),)


@_register("mul")
def mul_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """``g * y`` and ``g * x``."""
    x, y = inputs
    gd = _same_float(g, x, y)
    if gd is None:
        return _composite("mul", g, inputs, output, {})
    xd = x._data if isinstance(x, Tensor) else x
    yd = y._data if isinstance(y, Tensor) else y
    gx = _ct(np.multiply(gd, yd), x) if input_needed(0) and isinstance(x, Tensor) else None
    gy = _ct(np.multiply(gd, xd), y) if input_needed(1) and isinstance(y, Tensor) else None
    return (gx, gy)


@_register("div")
def div_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """``g / y`` and ``-(g * (x / y)) / y``."""
    x, y = inputs
    gd = _same_float(g, x, y)
    if gd is None:
        return _composite("div", g, inputs, output, {})
    xd = x._data if isinstance(x, Tensor) else x
    yd = y._data if isinstance(y, Tensor) else y
    gx = gy = None
    with np.errstate(all="ignore"):
        if input_needed(0) and isinstance(x, Tensor):
            gx = _ct(np.asarray(np.true_divide(gd, yd)), x)
        if input_needed(1) and isinstance(y, Tensor):
            gy = _ct(np.negative(np.true_divide(np.multiply(gd, np.true_divide(xd, yd)), yd)), y)
    return (gx, gy)


# ---- structure ---------------------------------------------------------------------------------------

@_register("reshape")
def reshape_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, shape: tuple[int, ...]) -> Cotangents:
    """``g`` reshaped back."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None:
        return _composite("reshape", g, inputs, output, {"shape": shape})
    return (_wrap(gd.reshape(x._data.shape)),)


@_register("permute")
def permute_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, perm: tuple[int, ...]) -> Cotangents:
    """``g`` permuted back (a view)."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None:
        return _composite("permute", g, inputs, output, {"perm": perm})
    n = len(perm)
    inverse = [0] * n
    for i, p in enumerate(perm):
        inverse[int(p) % n] = i
    return (_wrap(gd.transpose(inverse)),)


@_register("broadcast_to")
def broadcast_to_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *,
                     shape: tuple[int, ...]) -> Cotangents:
    """``g`` summed over the broadcast axes."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None:
        return _composite("broadcast_to", g, inputs, output, {"shape": shape})
    return (_ct(gd, x),)


@_register("reduce_sum")
def reduce_sum_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, axes: tuple[int, ...],
                   keepdims: bool = False) -> Cotangents:
    """``g`` broadcast back over the reduced axes (a read-only broadcast view)."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None:
        return _composite("reduce_sum", g, inputs, output, {"axes": axes, "keepdims": keepdims})
    full = x._data.shape
    reduced = {int(a) % len(full) for a in axes} if full else set()
    kshape = tuple(1 if i in reduced else d for i, d in enumerate(full))
    if gd.shape != kshape:
        gd = gd.reshape(kshape)
    return (_wrap(np.broadcast_to(gd, full) if gd.shape != full else gd),)


@_register("slice")
def slice_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, starts: tuple[int, ...],
              stops: tuple[int, ...], steps: tuple[int, ...]) -> Cotangents:
    """``g`` at the sliced positions of zeros (the forward's own index), as a
    :class:`.padded.PaddedCotangent`: the zeros are made once for all pieces of ``x``."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None:
        return _composite("slice", g, inputs, output, {"starts": starts, "stops": stops, "steps": steps})
    index = tuple(slice(a, None if (b < 0 and c < 0) else b, c) for a, b, c in zip(starts, stops, steps))
    return (padded(x._data.shape, index, gd),)


@_register(BASIC_INDEX_NODE)
def basic_index_fused_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, shape: tuple[int, ...],
                          key: Any) -> Cotangents:
    """``g`` placed into zeros through the forward's own key (a :class:`.padded.PaddedCotangent`; a key
    that takes every element in order: ``g`` reshaped, no copy)."""
    (x,) = inputs
    gd = _same_float(g, x)
    if gd is None:
        return basic_index_vjp(eager, g, inputs, output, shape=shape, key=key)
    if basic_index_plan(shape, key)[2]:
        return (_wrap(gd.reshape(shape)),)
    return (padded(shape, key, gd),)


# ---- linear algebra, pooling, gather, attention ---------------------------------------------------

@_register("matmul")
def matmul_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """``g b^T`` and ``a^T g`` for 2-d operands (batched ones: the composite rule)."""
    a, b = inputs
    gd = _same_float(g, a, b)
    if gd is None or not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a._data.ndim != 2 \
            or b._data.ndim != 2:
        return _composite("matmul", g, inputs, output, {})
    ga = _wrap(K.matmul(gd, b._data.T)) if input_needed(0) else None
    gb = _wrap(K.matmul(a._data.T, gd)) if input_needed(1) else None
    return (ga, gb)


@_register(LINEAR_NODE)
def linear_fused_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any) -> Cotangents:
    """The dense layer's input, weight and bias gradients with three BLAS calls (otherwise the composite rule)."""
    x, w = inputs[0], inputs[1]
    has_bias = len(inputs) == 3
    gd = _same_float(g, *inputs)
    if gd is None:
        return linear_vjp(eager, g, inputs, output)
    grads = KL.linear_backward(x._data, w._data, gd, input_needed(0), input_needed(1),
                               has_bias and input_needed(2))
    return tuple(None if a is None else _wrap(a) for a in grads[:len(inputs)])


def _conv_grads(g: Any, x: Any, w: Any, b: Any, params: dict[str, Any]) -> Cotangents | None:
    """The convolution's gradients ``(dx, dw, db)`` (``db`` None without ``b``) from one read of ``g``
    (:func:`.kernels.convolution.conv_backward`); None when that kernel does not apply."""
    gd = _same_float(g, x, w, b)
    if gd is None or not (isinstance(x, Tensor) and isinstance(w, Tensor)):
        return None
    grads = K.conv_backward_nd(x._data, w._data, gd, input_needed(0), input_needed(1),
                               b is not None and input_needed(2), **params)
    return None if grads is None else tuple(None if a is None else _wrap(a) for a in grads)


@_register("conv_nd")
def conv_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, **params: Any) -> Cotangents:
    """The input and weight gradients from one read of ``g`` (the in-cache path; otherwise the composite rule)."""
    x, w = inputs
    grads = _conv_grads(g, x, w, None, params)
    return _composite("conv_nd", g, inputs, output, params) if grads is None else grads[:2]


@_register(CONV_BIAS_NODE)
def conv_bias_fused_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, **params: Any) -> Cotangents:
    """The input, weight and bias gradients from one read of ``g`` (otherwise the composite rule)."""
    x, w, b = inputs
    grads = _conv_grads(g, x, w, b, params)
    return conv_bias_vjp(eager, g, inputs, output, **params) if grads is None else grads


@_register("max_pool_nd")
def max_pool_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, kernel_size: tuple[int, ...],
                 stride: tuple[int, ...], padding: tuple[int, ...]) -> Cotangents:
    """``g`` routed to each window's first argmax (a branch-free kernel for 2x2 windows of stride 2)."""
    (x,) = inputs
    params = {"kernel_size": kernel_size, "stride": stride, "padding": padding}
    gd = _same_float(g, x)
    if gd is None:
        return _composite("max_pool_nd", g, inputs, output, params)
    return (_wrap(KB.max_pool_backward(x._data, gd, **params)),)


@_register("gather")
def gather_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, axis: int) -> Cotangents:
    """``scatter_add(zeros_like(x), indices, g)`` (the kernel, called directly)."""
    x, indices = inputs
    gd = _same_float(g, x)
    if gd is None or not isinstance(indices, Tensor) or type(indices._data) is not np.ndarray:
        return _composite("gather", g, inputs, output, {"axis": axis})
    return (_wrap(K.scatter_add(np.zeros(x._data.shape, gd.dtype), indices._data, gd, axis=axis)), None)


@_register("dot_product_attention")
def attention_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, scale: float) -> Cotangents:
    """Recomputed probabilities, four batched GEMMs and one kernel for the scores' cotangent."""
    q, k, v, mask = inputs
    gd = _same_float(g, q, k, v)
    if gd is None or not (isinstance(q, Tensor) and isinstance(k, Tensor) and isinstance(v, Tensor)) \
            or not q._data.shape[:-2] == k._data.shape[:-2] == v._data.shape[:-2] \
            or not (mask is None or (isinstance(mask, Tensor) and type(mask._data) is np.ndarray
                                     and mask._data.dtype == np.bool_)):
        return _composite("dot_product_attention", g, inputs, output, {"scale": scale})
    need = (input_needed(0), input_needed(1), input_needed(2))
    dq, dk, dv = KB.attention_backward(q._data, k._data, v._data, None if mask is None else mask._data, gd,
                                       scale=scale, need=need)
    return (None if dq is None else _wrap(dq), None if dk is None else _wrap(dk),
            None if dv is None else _wrap(dv), None)
