"""``tensorplay.nn.functional``: stateless layer operations and losses with PyTorch's signatures.

Every function runs under the interpreter of its tensor arguments (eager,
graph recorder, transforms) and is composed from the ``Ops`` primitives and
the prefix-polymorphic derived ops of :mod:`tensorplay.prefix`: layers keep
any leading shape of their input.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, TypeVarTuple, overload

import numpy as np

from tensorplay import prefix as _prefix_module
from tensorplay.interpreters.eager import losses as _eager_losses
from tensorplay.dropout_probability import dropout_probability
from tensorplay.errors import (
    ArgumentError, DTypeError, GraphCaptureError, IndexRangeError, ShapeError,
)
from tensorplay.nn._util import IntOrTuple, check_padding_idx, is_eager, masked_softmax, numel, ops_for, random_key, shape_of
from tensorplay.prefix import attention_scale, int_tuple
from tensorplay.derived import causal_mask, transpose
from tensorplay.spec.structure import index_range_error, out_of_range
from tensorplay.tensor import Size, Tensor

prefix: Any = _prefix_module  # typed loosely: the layers check shapes at run time

if TYPE_CHECKING:
    from tensorplay.index import Index
    from tensorplay.ops import Interpreter

S = TypeVarTuple("S")
Lead = TypeVarTuple("Lead")
In = TypeVar("In")
Out = TypeVar("Out")
D = TypeVar("D")
N = TypeVar("N")
C = TypeVar("C")
AnyTensor = Tensor[*tuple[Any, ...]]

_REDUCTIONS = ("mean", "sum", "none")
_SHAPE_TYPES = (tuple, list, Size)


# ``IndexRangeError`` (an index outside its range) is the public one of ``tensorplay.errors``.


# ---- activations ---------------------------------------------------------------------------------

def relu(input: Tensor[*S], inplace: bool = False) -> Tensor[*S]:
    """``max(x, 0)`` (``inplace`` is accepted for PyTorch compatibility and ignored)."""
    return ops_for("relu", input).relu(input)  # type: ignore[no-any-return]


def gelu(input: Tensor[*S], approximate: str = "none") -> Tensor[*S]:
    """GELU, exact (erf) or ``approximate="tanh"``."""
    if approximate not in ("none", "tanh"):
        raise ArgumentError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return ops_for("gelu", input).gelu(input, approximate=approximate)  # type: ignore[no-any-return]


def tanh(input: Tensor[*S]) -> Tensor[*S]:
    """Hyperbolic tangent."""
    return ops_for("tanh", input).tanh(input)  # type: ignore[no-any-return]


def sigmoid(input: Tensor[*S]) -> Tensor[*S]:
    """Logistic sigmoid."""
    return ops_for("sigmoid", input).sigmoid(input)  # type: ignore[no-any-return]


def _float_input(where: str, input: AnyTensor) -> None:
    """A :class:`DTypeError` unless ``input`` is a float tensor (PyTorch has no integer or bool kernel)."""
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{where}: input must be a float tensor, got {input.dtype.name} "
                         f"(input: {input.dtype.name}{list(input.shape)})")


def silu(input: Tensor[*S]) -> Tensor[*S]:
    """``x * sigmoid(x)``; float tensors only, as PyTorch."""
    ops = ops_for("silu", input)
    _float_input("silu", input)
    return ops.mul(input, ops.sigmoid(input))  # type: ignore[no-any-return]


def leaky_relu(input: Tensor[*S], negative_slope: float = 0.01) -> Tensor[*S]:
    """``x`` where positive, else ``negative_slope * x``; float tensors only, as PyTorch."""
    ops = ops_for("leaky_relu", input)
    _float_input("leaky_relu", input)
    return ops.where(ops.gt(input, 0.0), input, ops.mul(input, float(negative_slope)))  # type: ignore[no-any-return]


def _softmax(prim: str, input: AnyTensor, dim: int | None) -> AnyTensor:
    ops = ops_for(prim, input)
    if dim is None:
        raise ArgumentError(f"{prim}: pass dim= explicitly (the axis to normalise over), got dim=None for an input "
                            f"of shape {list(shape_of(input))}")
    from tensorplay import derived
    axis = dim if input.ndim == 0 else derived.normalize_axis(dim, input.ndim, prim)  # 0-d: dim 0 or -1
    return derived.softmax(ops, prim, input, axis)  # type: ignore[no-any-return]


def softmax(input: Tensor[*S], dim: int | None = None) -> Tensor[*S]:
    """Softmax along ``dim``: ``input[*S]`` to ``[*S]`` (a 0-d tensor takes ``dim`` 0 or -1, as PyTorch)."""
    return _softmax("softmax", input, dim)


def log_softmax(input: Tensor[*S], dim: int | None = None) -> Tensor[*S]:
    """Log-softmax along ``dim``: ``input[*S]`` to ``[*S]`` (a 0-d tensor takes ``dim`` 0 or -1, as PyTorch)."""
    return _softmax("log_softmax", input, dim)


# ---- linear, convolution, pooling ----------------------------------------------------------------

def linear(input: Tensor[*Lead, In], weight: Tensor[Out, In], bias: Tensor[Out] | None = None) -> Tensor[*Lead, Out]:
    """``input[*lead, in] @ weight[out, in]^T + bias[out]``."""
    return ops_for("linear", input, weight, bias).linear(weight, bias, input)  # type: ignore[no-any-return]


def _conv(rank: int, input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None, stride: IntOrTuple,
          padding: IntOrTuple | str, dilation: IntOrTuple, groups: int, where: str) -> AnyTensor:
    if weight.ndim != rank + 2:
        raise ShapeError(f"{where}: weight must have {rank + 2} axes [outC, inC/groups, *kernel], got shape "
                         f"{list(weight.shape)}")
    ops = ops_for(where, input, weight, bias)
    stride, dilation = int_tuple(stride, rank, "stride", where), int_tuple(dilation, rank, "dilation", where)
    if not isinstance(padding, str):
        padding = int_tuple(padding, rank, "padding", where)
    return ops.conv(weight, bias, input, stride, padding, dilation, groups)  # type: ignore[no-any-return]


def conv1d(input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1) -> AnyTensor:
    """1-d convolution of ``input[*lead, C, L]`` (or unbatched ``[C, L]``)."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups, "conv1d")


def conv2d(input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1) -> AnyTensor:
    """2-d convolution of ``input[*lead, C, H, W]`` (or unbatched ``[C, H, W]``)."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups, "conv2d")


def conv3d(input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None = None, stride: IntOrTuple = 1,
           padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1) -> AnyTensor:
    """3-d convolution of ``input[*lead, C, D, H, W]``."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups, "conv3d")


def _conv_transpose(rank: int, input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None, stride: IntOrTuple,
                    padding: IntOrTuple, output_padding: IntOrTuple, groups: int, dilation: IntOrTuple,
                    where: str) -> AnyTensor:
    if weight.ndim != rank + 2:
        raise ShapeError(f"{where}: weight must have {rank + 2} axes [inC, outC/groups, *kernel], got shape "
                         f"{list(weight.shape)}")
    ops = ops_for(where, input, weight, bias)
    stride, padding = int_tuple(stride, rank, "stride", where), int_tuple(padding, rank, "padding", where)
    output_padding = int_tuple(output_padding, rank, "output_padding", where)
    dilation = int_tuple(dilation, rank, "dilation", where)
    return prefix.conv_transpose(ops, weight, bias, input, stride, padding,  # type: ignore[no-any-return]
                                 output_padding, dilation, groups)


def conv_transpose1d(input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None = None, stride: IntOrTuple = 1,
                     padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> AnyTensor:
    """1-d transposed convolution (PyTorch's argument order)."""
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation,
                           "conv_transpose1d")


def conv_transpose2d(input: AnyTensor, weight: AnyTensor, bias: AnyTensor | None = None, stride: IntOrTuple = 1,
                     padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, groups: int = 1,
                     dilation: IntOrTuple = 1) -> AnyTensor:
    """2-d transposed convolution (PyTorch's argument order)."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation,
                           "conv_transpose2d")


def _pool_args(rank: int, kernel_size: IntOrTuple, stride: IntOrTuple | None, padding: IntOrTuple,
               where: str) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    k = int_tuple(kernel_size, rank, "kernel_size", where)
    s = k if stride is None or (not isinstance(stride, int) and len(tuple(stride)) == 0) else \
        int_tuple(stride, rank, "stride", where)
    return k, s, int_tuple(padding, rank, "padding", where)


def _check_pool_options(where: str, dilation: IntOrTuple, ceil_mode: bool) -> None:
    if (dilation if isinstance(dilation, int) else max(dilation)) != 1:
        raise ShapeError(f"{where}: dilation other than 1 is not supported, got {dilation}")
    if ceil_mode:
        raise ShapeError(f"{where}: ceil_mode=True is not supported")


def max_pool1d(input: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False) -> AnyTensor:
    """Max over windows of the last axis of ``input[*lead, L]``."""
    _check_pool_options("max_pool1d", dilation, ceil_mode)
    k, s, p = _pool_args(1, kernel_size, stride, padding, "max_pool1d")
    return prefix.max_pool(ops_for("max_pool1d", input), input, k, s, p)  # type: ignore[no-any-return]


def max_pool2d(input: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, dilation: IntOrTuple = 1, ceil_mode: bool = False) -> AnyTensor:
    """Max over windows of the last two axes of ``input[*lead, H, W]``."""
    _check_pool_options("max_pool2d", dilation, ceil_mode)
    k, s, p = _pool_args(2, kernel_size, stride, padding, "max_pool2d")
    return prefix.max_pool(ops_for("max_pool2d", input), input, k, s, p)  # type: ignore[no-any-return]


def avg_pool1d(input: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> AnyTensor:
    """Mean over windows of the last axis (padding counts as zeros)."""
    _check_avg_options("avg_pool1d", ceil_mode, count_include_pad)
    k, s, p = _pool_args(1, kernel_size, stride, padding, "avg_pool1d")
    return prefix.avg_pool(ops_for("avg_pool1d", input), input, k, s, p)  # type: ignore[no-any-return]


def avg_pool2d(input: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
               padding: IntOrTuple = 0, ceil_mode: bool = False, count_include_pad: bool = True) -> AnyTensor:
    """Mean over windows of the last two axes (padding counts as zeros)."""
    _check_avg_options("avg_pool2d", ceil_mode, count_include_pad)
    k, s, p = _pool_args(2, kernel_size, stride, padding, "avg_pool2d")
    return prefix.avg_pool(ops_for("avg_pool2d", input), input, k, s, p)  # type: ignore[no-any-return]


def _check_avg_options(where: str, ceil_mode: bool, count_include_pad: bool) -> None:
    if ceil_mode:
        raise ShapeError(f"{where}: ceil_mode=True is not supported")
    if not count_include_pad:
        raise ShapeError(f"{where}: count_include_pad=False is not supported (padding counts as zeros)")


# ---- normalisation ------------------------------------------------------------------------------

def layer_norm(input: Tensor[*S], normalized_shape: int | Sequence[int], weight: AnyTensor | None = None,
               bias: AnyTensor | None = None, eps: float = 1e-5) -> Tensor[*S]:
    """Normalise over the trailing ``normalized_shape`` axes, then scale by ``weight`` and shift by ``bias``."""
    if isinstance(normalized_shape, int):
        norm: tuple[int, ...] = (normalized_shape,)
    elif type(normalized_shape) in _SHAPE_TYPES and len(normalized_shape) == 1 and type(normalized_shape[0]) is int:
        norm = (normalized_shape[0],)  # ``x.shape[-1:]``: what the general form below gives, without a generator
    else:
        norm = tuple(int(d) for d in normalized_shape)
    ops = ops_for("layer_norm", input, weight, bias)
    if len(norm) == 1 and is_eager(ops):  # the common case, checked by the fused form itself
        fused = _eager_losses.layer_norm(ops, input, norm[0], weight, bias, eps)
        if fused is not None:
            return fused  # type: ignore[no-any-return]
    k = len(norm)
    shape = shape_of(input)
    if k == 0 or input.ndim < k or shape[input.ndim - k:] != norm:
        raise ShapeError(f"layer_norm: normalized_shape {list(norm)} does not match the trailing axes of the "
                         f"input of shape {list(shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != norm:
            raise ShapeError(f"layer_norm: {name} must have shape {list(norm)}, got {list(t.shape)}")
    if k == 1:
        return prefix.layer_norm(ops, input, weight, bias, eps)  # type: ignore[no-any-return]
    size = numel(norm)
    flat = ops.reshape(input, shape=shape[:input.ndim - k] + (size,))
    w = None if weight is None else ops.reshape(weight, shape=(size,))
    b = None if bias is None else ops.reshape(bias, shape=(size,))
    out = prefix.layer_norm(ops, flat, w, b, eps)
    return ops.reshape(out, shape=shape)  # type: ignore[no-any-return]


def _ones_zeros(ops: Any, c: int, dtype: str) -> tuple[AnyTensor, AnyTensor]:
    return ops.full(shape=(c,), value=1.0, dtype=dtype), ops.full(shape=(c,), value=0.0, dtype=dtype)


def update_running_stat(ops: Any, running: AnyTensor, value: AnyTensor, momentum: float) -> None:
    """``running = (1 - momentum) * running + momentum * value`` in place (no gradient).

    Eagerly the buffer's payload is updated in place. Another interpreter may offer
    ``ops.buffer_update(buffer, new_value)`` (how a captured graph records a buffer mutation);
    without it the update is skipped.
    """
    if is_eager(ops) and is_eager(running._ops):
        data = running._data
        data *= 1.0 - momentum
        data += momentum * np.asarray(value._data, dtype=data.dtype)
        box = running._version
        if box is None:
            running._version = [1]
        else:
            box[0] += 1
        return
    hook = getattr(ops, "buffer_update", None)
    if hook is not None:
        new = ops.add(ops.mul(running, 1.0 - momentum), ops.mul(ops.stop_gradient(value), momentum))
        hook(running, new)


def _unbiased_factor(ops: Any, count: Any, dtype: str) -> Any:
    """``count / (count - 1)`` (Bessel's correction): a Python float for a known count; for a symbolic one (a
    dynamic batch under export) the same float64 division computed in the graph and rounded to ``dtype``, so
    the running variance has the bits eager computes."""
    if isinstance(count, int):
        return count / max(count - 1, 1)
    n = ops.reduce_sum(ops.full(shape=(count,), value=1.0, dtype="float64"), axes=(0,), keepdims=False)
    return ops.cast(ops.div(n, ops.sub(n, 1.0)), dtype=dtype)


def batch_norm(input: Tensor[*S], running_mean: AnyTensor | None, running_var: AnyTensor | None,
               weight: AnyTensor | None = None, bias: AnyTensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5) -> Tensor[*S]:
    """Batch normalisation of ``input[N, C, *rest]`` over every axis but 1.

    Training uses the batch statistics (mean and biased variance computed from derived ops, so the
    gradient flows through them) and, when given, updates the running statistics in place with
    ``momentum`` (the running variance is the unbiased one, as PyTorch). Evaluation uses the running
    statistics.
    """
    ops = ops_for("batch_norm", input, running_mean, running_var, weight, bias)
    if input.ndim < 2:
        raise ShapeError(f"batch_norm: expected an input [N, C, *rest] with at least 2 axes, got shape "
                         f"{list(shape_of(input))}")
    shape = shape_of(input)
    c = shape[1]
    dtype = input.dtype.name
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"batch_norm: {name} must have shape [{c}] for an input of shape "
                             f"{list(shape)}, got {list(t.shape)}")
    if training:
        axes = (0,) + tuple(range(2, input.ndim))
        count = numel([shape[a] for a in axes])
        try:
            too_few = bool(count <= 1)
        except GraphCaptureError:  # a symbolic size no range decides: the kernels see the real one
            too_few = False
        if too_few:
            raise ShapeError(f"batch_norm: expected more than 1 value per channel when training, got input of "
                             f"shape {list(shape)}")
        # Shifted statistics: subtracting a per-channel value near the mean first (the mean of the first
        # sample, a constant to autograd) keeps the sums, and what the kernel scales, at the data's
        # spread rather than its offset. Summing x itself lost ~1e-4 of a mean around 1e3, a hundredth
        # of a std of 1e-2, and x * scale + (bias - mean * scale) cancelled terms near 1e5; now such
        # data normalise to float32 precision. The variance E[d^2] - E[d]^2 of d = x - shift cancels at
        # most a factor 1 + N (the shift is a sample mean), 1 + (shift - mean)^2 / var in practice.
        # Mathematically nothing changes, and the passes over x are as many as before.
        first = ops.slice(input, starts=(0,) * input.ndim, stops=(1,) + tuple(shape[1:]),
                          steps=(1,) * input.ndim)
        shift = ops.stop_gradient(ops.div(ops.reduce_sum(first, axes=axes, keepdims=True),
                                          numel([shape[a] for a in axes[1:]])))
        shifted = ops.sub(input, shift)
        offset = ops.div(ops.reduce_sum(shifted, axes=axes, keepdims=False), count)
        square = ops.div(ops.reduce_sum(ops.mul(shifted, shifted), axes=axes, keepdims=False), count)
        var = ops.maximum(ops.sub(square, ops.mul(offset, offset)), 0.0)
        if running_mean is not None:
            update_running_stat(ops, running_mean, ops.add(ops.reshape(shift, shape=(c,)), offset), momentum)
        if running_var is not None:
            update_running_stat(ops, running_var, ops.mul(var, _unbiased_factor(ops, count, var.dtype.name)), momentum)
        if weight is None or bias is None:
            ones, zeros = _ones_zeros(ops, c, dtype)
            weight = ones if weight is None else weight
            bias = zeros if bias is None else bias
        return ops.batch_norm(shifted, offset, var, weight, bias, eps=eps)  # type: ignore[no-any-return]
    else:
        if running_mean is None or running_var is None:
            raise ShapeError("batch_norm: evaluation mode needs running_mean and running_var "
                             "(or pass training=True to use the batch statistics)")
        mean, var = running_mean, running_var
    if weight is None or bias is None:
        ones, zeros = _ones_zeros(ops, c, dtype)
        weight = ones if weight is None else weight
        bias = zeros if bias is None else bias
    return ops.batch_norm(input, mean, var, weight, bias, eps=eps)  # type: ignore[no-any-return]


# ---- dropout, embedding, attention -------------------------------------------------------------

def dropout(input: Tensor[*S], p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor[*S]:
    """Zero each element with probability ``p`` and scale the others by ``1/(1-p)`` when training.

    The mask comes from a fresh key of the global generator (``tp.manual_seed``), or from the
    interpreter's own key source when it has one (a compiled graph takes its key as an input).
    """
    p = dropout_probability("dropout", p)
    if not training or p == 0.0:
        return input
    ops = ops_for("dropout", input)
    return prefix.dropout(ops, input, p, True, key=random_key(ops))  # type: ignore[no-any-return]


_DROPOUT_RANKS = {"dropout2d": (3, 4), "dropout3d": (4, 5)}


def _feature_dropout(input: Tensor[*S], p: float, training: bool, where: str, kept: int) -> Tensor[*S]:
    """Zero whole slices of ``input``: one draw per entry of its first ``kept`` axes (1 or 2), each kept
    slice scaled by ``1/(1-p)`` (PyTorch's feature dropout; ``kept=1`` is its run on ``input`` with a batch
    axis added). Training needs ``kept`` axes at least."""
    if not training or p == 0.0:
        return input
    if input.ndim < kept:
        raise ShapeError(f"{where}: Feature dropout requires at least 2 dimensions in the input, got shape "
                         f"{list(shape_of(input))}")
    ops = ops_for(where, input)
    shape = shape_of(input)
    ones = ops.full(shape=shape[:kept] + (1,) * (input.ndim - kept), value=1.0, dtype=input.dtype.name)
    mask = prefix.dropout(ops, ones, p, True, key=random_key(ops))
    return ops.mul(input, mask)  # type: ignore[no-any-return]


def _warn_rank(where: str, ndim: int) -> None:
    """PyTorch's deprecation warning for a ``dropout2d``/``dropout3d`` input of another rank (it still runs)."""
    low, high = _DROPOUT_RANKS[where]
    spatial = {"dropout2d": 2, "dropout3d": 3}[where]
    if ndim not in (low, high):
        warnings.warn(f"{where}: Received a {ndim}-D input to {where}, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use "
                      f"dropout instead. Note that {where} exists to provide channel-wise dropout on inputs with "
                      f"{spatial} spatial dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      f"{low}D or {high}D inputs).", UserWarning, stacklevel=3)


def dropout1d(input: Tensor[*S], p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor[*S]:
    """Channel-wise dropout of ``input[N, C, L]`` or ``[C, L]``: each channel's ``L`` row is zeroed with
    probability ``p`` (one draw per ``[N, C]``, or per ``C``), the others scaled by ``1/(1-p)``, when
    training. Any other rank is a :class:`ShapeError`, as PyTorch raises."""
    p = dropout_probability("dropout1d", p)
    if input.ndim not in (2, 3):
        raise ShapeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input (shape "
                         f"{list(shape_of(input))}). Note that dropout1d exists to provide channel-wise dropout on "
                         "inputs with 1 spatial dimension, a channel dimension, and an optional batch dimension "
                         "(i.e. 2D or 3D inputs).")
    return _feature_dropout(input, p, training, "dropout1d", 2 if input.ndim == 3 else 1)


def dropout2d(input: Tensor[*S], p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor[*S]:
    """Channel-wise dropout of ``input[N, C, H, W]``: each channel's whole ``H x W`` map is zeroed with
    probability ``p`` (one draw per ``[N, C]``), the others scaled by ``1/(1-p)``, when training.

    As PyTorch 2.x: every rank draws once per entry of the first two axes. A 3-d input is read as
    ``[N, C, L]`` (with PyTorch's warning that this will change); a 2-d one (element-wise) or 5-d and
    more (``[N, C, D, H, W]``: one draw per ``[N, C]``) warn that the rank is deprecated; fewer than 2
    axes are a :class:`ShapeError` when training."""
    p = dropout_probability("dropout2d", p)
    _warn_rank("dropout2d", input.ndim)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", UserWarning, stacklevel=2)
    return _feature_dropout(input, p, training, "dropout2d", 2)


def dropout3d(input: Tensor[*S], p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor[*S]:
    """Channel-wise dropout of ``input[N, C, D, H, W]`` or ``[C, D, H, W]``: each channel's ``D x H x W``
    volume is zeroed with probability ``p`` (one draw per ``[N, C]``, or per ``C``), the others scaled by
    ``1/(1-p)``, when training.

    As PyTorch 2.x: an input that is not 5-d is read as unbatched, one draw per entry of its first axis;
    ranks other than 4 and 5 warn that they are deprecated; a 0-d input is a :class:`ShapeError` when
    training."""
    p = dropout_probability("dropout3d", p)
    _warn_rank("dropout3d", input.ndim)
    return _feature_dropout(input, p, training, "dropout3d", 2 if input.ndim == 5 else 1)


def _checked_indices(ops: Any, indices: AnyTensor, size: Any, where: str, what: str,
                     allowed: int | None = None) -> tuple[AnyTensor, np.ndarray[Any, Any] | None]:
    """``indices`` checked to lie in ``[0, size)`` (or to equal ``allowed``), and their values when eager.

    Eager values are checked now. Under any other interpreter the check is a recorded ``check_index``
    whose output is returned: the caller must use it (not ``indices``), so the check runs wherever the
    recording runs (a graph module called with new inputs, ``grad``, ``vmap``, ``jacrev``) and is never
    dropped. Out of range is an :class:`IndexRangeError` naming ``where``, ``what``, the position and the
    value."""
    if indices.dtype.name not in ("int64", "int32"):
        raise DTypeError(f"{where}: {what} must be an integer tensor (int64 or int32), got {indices.dtype}")
    extra = () if allowed is None else (int(allowed),)
    if not is_eager(ops) or not is_eager(indices._ops):
        return ops.check_index(indices, bound=size, what=f"{where}: {what}", allowed=extra), None
    data = indices._data
    found = out_of_range(data, size, extra)
    if found is not None:
        raise index_range_error(f"{where}: {what}", *found, size, extra)
    return indices, data


def embedding(input: Tensor[*Lead], weight: Tensor[Any, D], padding_idx: int | None = None) -> Tensor[*Lead, D]:
    """Rows of ``weight[num, dim]`` at the integer ``input[*lead]`` -> ``[*lead, dim]``. An index
    outside ``[0, num)`` is an :class:`IndexRangeError`. The gradient of row ``padding_idx`` is 0."""
    ops = ops_for("embedding", input, weight)
    if weight.ndim != 2:
        raise ShapeError(f"embedding: weight must be [num_embeddings, embedding_dim], got shape "
                         f"{list(weight.shape)}")
    input, _ = _checked_indices(ops, input, weight.shape[0], "embedding", "index")
    out = ops.gather(weight, input, axis=0)
    if padding_idx is not None:
        padding_idx = check_padding_idx(padding_idx, weight.shape[0], "embedding")
        keep = ops.reshape(ops.ne(input, padding_idx), shape=shape_of(input) + (1,))
        out = ops.where(keep, out, ops.stop_gradient(out))
    return out  # type: ignore[no-any-return]


@overload
def one_hot(tensor: Tensor[*Lead], num_classes: C) -> Tensor[*Lead, C]: ...


@overload
def one_hot(tensor: Tensor[*Lead]) -> Tensor[*Lead, int]: ...


def one_hot(tensor: Tensor[*Lead], num_classes: Any = -1) -> Any:
    """``[*lead] -> [*lead, num_classes]`` int64 with a 1 at each index (typed with ``num_classes``'s dim:
    ``one_hot(labels, Classes(10))`` is a ``Tensor[*Lead, Classes]``). An index outside
    ``[0, num_classes)`` is an :class:`IndexRangeError` under every interpreter."""
    ops = ops_for("one_hot", tensor)
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)) or num_classes < -1:
        raise ShapeError(f"one_hot: num_classes must be -1 (one more than the largest index) or a non-negative "
                         f"int, got {num_classes!r}")
    if num_classes < 0:
        if not is_eager(ops):
            raise ShapeError("one_hot: pass num_classes explicitly outside eager mode")
        num_classes = int(tensor._data.max()) + 1 if tensor._data.size else 0
    tensor, _ = _checked_indices(ops, tensor, num_classes, "one_hot", "class index")
    expanded = ops.reshape(tensor, shape=shape_of(tensor) + (1,))
    hit = ops.eq(expanded, ops.iota(length=num_classes, dtype=tensor.dtype.name))
    return ops.cast(hit, dtype="int64")


def scaled_dot_product_attention(query: AnyTensor, key: AnyTensor, value: AnyTensor,
                                 attn_mask: AnyTensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None) -> AnyTensor:
    """``softmax(q k^T * scale + mask) v`` for ``q[*B, L, E], k[*B, S, E], v[*B, S, Ev]`` (PyTorch's
    semantics: a bool ``attn_mask`` is True where attention is allowed; a float mask is added).
    ``dropout_p`` applies dropout to the attention weights (use 0 in evaluation)."""
    ops = ops_for("scaled_dot_product_attention", query, key, value, attn_mask)
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError(f"scaled_dot_product_attention: expected q[*B, L, E], k[*B, S, E], v[*B, S, Ev], got "
                         f"{list(query.shape)}, {list(key.shape)}, {list(value.shape)}")
    n, m = query.shape[-2], key.shape[-2]
    factor = attention_scale(query.shape[-1]) if scale is None else float(scale)
    mask = attn_mask
    if is_causal:
        if attn_mask is not None:
            raise ShapeError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
        mask = causal_mask(ops, n, m)
    if dropout_p == 0.0 and (mask is None or mask.dtype.name == "bool"):
        return ops.dot_product_attention(query, key, value, mask, scale=factor)  # type: ignore[no-any-return]
    scores = ops.mul(ops.matmul(query, transpose(ops, key, -2, -1)), factor)
    if mask is not None:
        if mask.dtype.name == "bool":
            scores = ops.where(mask, scores, float("-inf"))
        else:
            scores = ops.add(scores, mask)
    weights = masked_softmax(ops, scores)
    if dropout_p > 0.0:
        weights = prefix.dropout(ops, weights, dropout_p, True, key=random_key(ops))
    return ops.matmul(weights, value)  # type: ignore[no-any-return]


# ---- losses -----------------------------------------------------------------------------------

def _reduce(ops: Any, loss: AnyTensor, reduction: str, where: str) -> AnyTensor:
    _check_reduction(reduction, where)
    if reduction == "none":
        return loss
    total = ops.reduce_sum(loss, axes=tuple(range(loss.ndim)), keepdims=False)
    if reduction == "sum":
        return total  # type: ignore[no-any-return]
    return ops.div(total, numel(loss.shape))  # type: ignore[no-any-return]


def _check_reduction(reduction: str, where: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ArgumentError(f"{where}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _check_target(target: Any, where: str) -> None:
    """A loss's target must be a tensor (``ops_for`` lets ``None`` through, for optional arguments)."""
    if not isinstance(target, Tensor):
        raise DTypeError(f"{where}: expected a tensorplay Tensor as target, got {type(target).__name__} "
                         "(convert with tp.tensor(...))")


def _float_operand(where: str, input: AnyTensor, target: AnyTensor, why: str) -> None:
    """A :class:`DTypeError` unless ``input`` or ``target`` is a float tensor (so that the promoted dtype the
    loss is computed in is a float), as PyTorch; ``why`` says what has no integer form."""
    if not (input.dtype.is_floating_point or target.dtype.is_floating_point):
        raise DTypeError(f"{where}: input or target must be a float tensor ({why}), got input "
                         f"{input.dtype.name}{list(input.shape)} and target {target.dtype.name}{list(target.shape)}; "
                         "cast one of them first, e.g. input.float()")


def mse_loss(input: AnyTensor, target: AnyTensor, reduction: str = "mean") -> AnyTensor:
    """Mean squared error (``reduction``: ``"mean"``, ``"sum"`` or ``"none"``) of ``input`` and ``target`` of
    the same shape. As PyTorch, one of them must be a float tensor (there is no integer form, whatever the
    ``reduction``)."""
    _check_reduction(reduction, "mse_loss")
    _check_target(target, "mse_loss")
    ops = ops_for("mse_loss", input, target)
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"mse_loss: input shape {list(input.shape)} and target shape {list(target.shape)} differ")
    _float_operand("mse_loss", input, target, "PyTorch has no integer mse_loss")
    diff = ops.sub(input, target)
    return _reduce(ops, ops.mul(diff, diff), reduction, "mse_loss")


def l1_loss(input: AnyTensor, target: AnyTensor, reduction: str = "mean") -> AnyTensor:
    """Mean absolute error of ``input`` and ``target`` of the same shape. Integer tensors are taken with
    ``reduction="sum"`` or ``"none"`` (an integer result, as PyTorch), not with ``"mean"``: as PyTorch, the
    mean needs one of them to be a float tensor."""
    _check_reduction(reduction, "l1_loss")
    _check_target(target, "l1_loss")
    ops = ops_for("l1_loss", input, target)
    if tuple(input.shape) != tuple(target.shape):
        raise ShapeError(f"l1_loss: input shape {list(input.shape)} and target shape {list(target.shape)} differ")
    if reduction == "mean":
        _float_operand("l1_loss", input, target, "reduction='mean' of integers; 'sum' and 'none' take them")
    return _reduce(ops, ops.abs(ops.sub(input, target)), reduction, "l1_loss")


def _classes_last(ops: Any, x: AnyTensor) -> tuple[AnyTensor, tuple[Any, ...]]:
    """``x[N, C, *d] -> (x'[M, C], (N, *d))``."""
    if x.ndim == 2:
        return x, (x.shape[0],)
    perm = (0,) + tuple(range(2, x.ndim)) + (1,)
    lead = (x.shape[0],) + tuple(x.shape[2:])
    moved = ops.permute(x, perm=perm)
    return ops.reshape(moved, shape=(numel(lead), x.shape[1])), lead


def _nll(ops: Any, logp: AnyTensor, target: AnyTensor, weight: AnyTensor | None, ignore_index: int,
         reduction: str, smoothing: float, where: str) -> AnyTensor:
    """The negative log-likelihood of ``logp[N, C, *d]`` at integer ``target[N, *d]``."""
    c = logp.shape[1]
    expected = (logp.shape[0],) + tuple(logp.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(f"{where}: target shape {list(target.shape)} does not match the input shape "
                         f"{list(logp.shape)} (expected target {list(expected)})")
    if weight is not None and tuple(weight.shape) != (c,):
        raise ShapeError(f"{where}: weight must have shape [{c}] (one per class), got {list(weight.shape)}")
    flat_logp, lead = _classes_last(ops, logp)
    m = numel(lead)
    target, concrete = _checked_indices(ops, target, c, where, "target", allowed=ignore_index)
    valid: AnyTensor | None
    safe: Any
    if concrete is not None:  # eager: the indices are computed in numpy, off the tape
        tflat = concrete.reshape(-1)
        ignored = tflat == ignore_index
        any_ignored = bool(ignored.any())
        safe_np = np.where(ignored, 0, tflat) if any_ignored else tflat
        flat_index = ops.wrap(np.arange(m, dtype=np.int64) * c + safe_np)
        safe = ops.wrap(safe_np.astype(np.int64, copy=False)) if weight is not None else None
        valid = ops.wrap(~ignored) if any_ignored else None
    else:
        t = ops.reshape(target, shape=(m,)) if target.ndim != 1 else target
        valid = ops.ne(t, ignore_index)
        safe = ops.where(valid, t, 0)
        flat_index = ops.add(ops.mul(ops.iota(length=m, dtype=safe.dtype.name), c), safe)
    picked = ops.gather(ops.reshape(flat_logp, shape=(m * c,)), flat_index, axis=0)  # [M]
    if weight is None and valid is None and smoothing == 0.0 and reduction != "none":
        # the common case, in two recorded operations: -sum(picked) (/ M)
        total = ops.reduce_sum(picked, axes=(0,), keepdims=False)
        if reduction == "sum":
            return ops.neg(total)  # type: ignore[no-any-return]
        if isinstance(m, int) and m:
            return ops.mul(total, -1.0 / m)  # type: ignore[no-any-return]
        return ops.div(ops.neg(total), m)  # type: ignore[no-any-return]
    denominator: Any
    if weight is not None:
        wt = ops.gather(weight, safe, axis=0)
        if valid is not None:
            wt = ops.where(valid, wt, 0.0)
        loss = ops.mul(picked, ops.neg(wt))
        if valid is not None:  # an ignored row adds nothing, even where its logits are not finite (0 * inf),
            loss = ops.where(valid, loss, 0.0)  # and passes no gradient, even when every row is (inf * 0)
        denominator = ops.reduce_sum(wt, axes=(0,), keepdims=False)
    else:
        loss = ops.neg(picked)
        if valid is not None:
            loss = ops.where(valid, loss, 0.0)
            denominator = ops.reduce_sum(ops.cast(valid, dtype=logp.dtype.name), axes=(0,), keepdims=False)
        else:
            denominator = m
    smooth = None
    if smoothing > 0.0:
        weighted = flat_logp if weight is None else ops.mul(flat_logp, weight)
        smooth = ops.neg(ops.reduce_sum(weighted, axes=(1,), keepdims=False))
        if valid is not None:
            smooth = ops.where(valid, smooth, 0.0)
    if reduction == "none":
        out = loss if smooth is None else ops.add(ops.mul(loss, 1.0 - smoothing), ops.mul(smooth, smoothing / c))
        return ops.reshape(out, shape=lead) if len(lead) != 1 else out  # type: ignore[no-any-return]
    total = ops.reduce_sum(loss, axes=(0,), keepdims=False)
    if smooth is not None:
        total = ops.add(ops.mul(total, 1.0 - smoothing),
                        ops.mul(ops.reduce_sum(smooth, axes=(0,), keepdims=False), smoothing / c))
    if reduction == "sum":
        return total  # type: ignore[no-any-return]
    return ops.div(total, denominator)  # type: ignore[no-any-return]


def _batched(ops: Any, input: AnyTensor, target: AnyTensor, probs: bool,
             where: str) -> tuple[AnyTensor, AnyTensor, bool]:
    if input.ndim == 0:
        raise ShapeError(f"{where}: expected input [N, C, *d] or unbatched [C], got a 0-d tensor")
    if input.ndim == 1:
        if target.ndim != (1 if probs else 0):
            raise ShapeError(f"{where}: an unbatched input [C] needs a {'[C]' if probs else '0-d'} target, got "
                             f"shape {list(target.shape)}")
        return (ops.reshape(input, shape=(1,) + tuple(input.shape)),
                ops.reshape(target, shape=(1,) + tuple(target.shape)), True)
    return input, target, False


def nll_loss(input: AnyTensor, target: AnyTensor, weight: AnyTensor | None = None, ignore_index: int = -100,
             reduction: str = "mean") -> AnyTensor:
    """Negative log-likelihood of log-probabilities ``input[N, C, *d]`` (or ``[C]``) at integer ``target``."""
    _check_reduction(reduction, "nll_loss")
    _check_target(target, "nll_loss")
    ops = ops_for("nll_loss", input, target, weight)
    logp, tgt, unbatched = _batched(ops, input, target, False, "nll_loss")
    out = _nll(ops, logp, tgt, weight, ignore_index, reduction, 0.0, "nll_loss")
    return ops.reshape(out, shape=()) if unbatched and reduction == "none" else out


@overload
def cross_entropy(input: Tensor[N, C, *Lead], target: Index[C, N, *Lead], weight: Tensor[C] | None = None,
                  ignore_index: int = -100, reduction: Literal["mean", "sum"] = "mean",
                  label_smoothing: float = 0.0) -> Tensor[()]: ...


@overload
def cross_entropy(input: Tensor[N, C, *Lead], target: Index[C, N, *Lead], weight: Tensor[C] | None = None,
                  ignore_index: int = -100, *, reduction: Literal["none"],
                  label_smoothing: float = 0.0) -> Tensor[N, *Lead]: ...


@overload
def cross_entropy(input: Tensor[C], target: Index[C], weight: Tensor[C] | None = None, ignore_index: int = -100,
                  reduction: Literal["mean", "sum", "none"] = "mean", label_smoothing: float = 0.0) -> Tensor[()]: ...


@overload
def cross_entropy(input: Tensor[N, C, *Lead], target: Tensor[N, C, *Lead], weight: Tensor[C] | None = None,
                  ignore_index: int = -100, reduction: Literal["mean", "sum"] = "mean",
                  label_smoothing: float = 0.0) -> Tensor[()]: ...


@overload
def cross_entropy(input: Tensor[N, C, *Lead], target: Tensor[N, C, *Lead], weight: Tensor[C] | None = None,
                  ignore_index: int = -100, *, reduction: Literal["none"],
                  label_smoothing: float = 0.0) -> Tensor[N, *Lead]: ...


@overload
def cross_entropy(input: AnyTensor, target: AnyTensor, weight: AnyTensor | None, ignore_index: int,
                  reduction: str, label_smoothing: float = 0.0) -> AnyTensor: ...


def cross_entropy(input: AnyTensor, target: AnyTensor, weight: AnyTensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0) -> AnyTensor:
    """Cross-entropy between logits ``input[N, C, *d]`` (or unbatched ``[C]``) and ``target``: integer
    class indices ``[N, *d]`` (``ignore_index`` entries are skipped) or class probabilities shaped like
    the input. ``weight[C]`` rescales classes; ``label_smoothing`` mixes the target with the uniform
    distribution; ``reduction`` is ``"mean"``, ``"sum"`` or ``"none"`` (PyTorch's semantics).

    Typed: class-index targets are ``Index[C, N, *d]`` (``tp.index(labels, bound=num_classes)``), so
    mypy checks the target's classes against the logits' class axis; plain integer tensors are
    accepted at run time (untyped callers pass every argument, as the loss module does)."""
    _check_reduction(reduction, "cross_entropy")
    _check_target(target, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgumentError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing!r}")
    ops = ops_for("cross_entropy", input, target, weight)
    if input.dtype.name not in ("float32", "float64"):
        raise DTypeError(f"cross_entropy: input must be float logits, got {input.dtype}")
    probs = target.dtype.name in ("float32", "float64")
    if not probs and weight is None and label_smoothing == 0.0 and is_eager(ops):
        fused = _eager_losses.cross_entropy(ops, input, target, ignore_index, reduction)
        if fused is not None:
            return fused  # type: ignore[no-any-return]
    logits, tgt, unbatched = _batched(ops, input, target, probs, "cross_entropy")
    logp = ops.log_softmax(logits, axis=1)
    if not probs:
        out = _nll(ops, logp, tgt, weight, ignore_index, reduction, float(label_smoothing), "cross_entropy")
        return ops.reshape(out, shape=()) if unbatched and reduction == "none" else out
    if tuple(tgt.shape) != tuple(logits.shape):
        raise ShapeError(f"cross_entropy: class-probability target shape {list(target.shape)} must equal the "
                         f"input shape {list(input.shape)}")
    c = logits.shape[1]
    if label_smoothing > 0.0:
        tgt = ops.add(ops.mul(tgt, 1.0 - label_smoothing), label_smoothing / c)
    prod = ops.mul(logp, tgt)
    if weight is not None:
        if tuple(weight.shape) != (c,):
            raise ShapeError(f"cross_entropy: weight must have shape [{c}], got {list(weight.shape)}")
        prod = ops.mul(prod, ops.reshape(weight, shape=(1, c) + (1,) * (logits.ndim - 2)))
    loss = ops.neg(ops.reduce_sum(prod, axes=(1,), keepdims=False))
    if unbatched:
        loss = ops.reshape(loss, shape=())
    return _reduce(ops, loss, reduction, "cross_entropy")


__all__ = [
    "IndexRangeError", "relu", "gelu", "tanh", "sigmoid", "silu", "leaky_relu", "softmax", "log_softmax",
    "linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d",
    "avg_pool1d", "avg_pool2d", "layer_norm", "batch_norm", "update_running_stat", "dropout", "dropout2d", "embedding",
    "one_hot", "scaled_dot_product_attention", "mse_loss", "l1_loss", "nll_loss", "cross_entropy",
    "pad", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "group_norm", "rms_norm",
]

# composed layers with their own modules (imported last: they use the helpers above only through _util)
from tensorplay.nn.padding import pad  # noqa: E402
from tensorplay.nn.adaptive import adaptive_avg_pool1d, adaptive_avg_pool2d  # noqa: E402
from tensorplay.nn.norms import group_norm, rms_norm  # noqa: E402
from tensorplay.nn.activation_functions import (  # noqa: E402
    celu, elu, glu, hardshrink, hardsigmoid, hardswish, hardtanh, logsigmoid, mish, prelu, relu6, selu, softplus,
    softshrink, softsign, tanhshrink, threshold,
)
from tensorplay.nn.loss_functions import (  # noqa: E402
    binary_cross_entropy, binary_cross_entropy_with_logits, cosine_similarity, huber_loss, kl_div, normalize,
    pairwise_distance, smooth_l1_loss,
)

__all__ += [
    "softplus", "elu", "selu", "celu", "relu6", "hardtanh", "hardsigmoid", "hardswish", "mish", "logsigmoid",
    "softsign", "glu", "tanhshrink", "softshrink", "hardshrink", "threshold", "prelu",
    "binary_cross_entropy_with_logits", "binary_cross_entropy", "smooth_l1_loss", "huber_loss", "kl_div",
    "cosine_similarity", "pairwise_distance", "normalize",
]

from tensorplay.nn.instance_norm import instance_norm  # noqa: E402
from tensorplay.nn.reshaping import pixel_shuffle, pixel_unshuffle  # noqa: E402
from tensorplay.nn.upsampling import interpolate  # noqa: E402

__all__ += ["pixel_shuffle", "pixel_unshuffle", "interpolate", "instance_norm"]

from tensorplay.nn.adaptive_max import adaptive_max_pool1d, adaptive_max_pool2d  # noqa: E402
from tensorplay.nn.bilinear import bilinear  # noqa: E402
from tensorplay.nn.unfold import fold, unfold  # noqa: E402

__all__ += ["unfold", "fold", "adaptive_max_pool1d", "adaptive_max_pool2d", "bilinear"]

from tensorplay.nn.layers_3d import (  # noqa: E402
    adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d, conv_transpose3d, max_pool3d,
)
from tensorplay.nn.layers_misc import (  # noqa: E402
    channel_shuffle, local_response_norm, lp_pool1d, lp_pool2d, lp_pool3d, softmin,
)
from tensorplay.nn.random_layers import alpha_dropout, feature_alpha_dropout, rrelu  # noqa: E402

__all__ += [
    "max_pool3d", "avg_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "conv_transpose3d", "softmin",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "local_response_norm", "channel_shuffle", "rrelu", "alpha_dropout",
    "feature_alpha_dropout",
]

from tensorplay.nn.embedding_bag import embedding_bag  # noqa: E402
from tensorplay.nn.grid_sampling import affine_grid, grid_sample  # noqa: E402
from tensorplay.nn.gumbel import gumbel_softmax  # noqa: E402

__all__ += ["embedding_bag", "affine_grid", "grid_sample", "gumbel_softmax"]

from tensorplay.nn.likelihood_losses import gaussian_nll_loss, poisson_nll_loss  # noqa: E402
from tensorplay.nn.margin_losses import (  # noqa: E402
    cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss, multi_margin_loss, multilabel_margin_loss,
    multilabel_soft_margin_loss, soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss,
)

__all__ += [
    "cosine_embedding_loss", "hinge_embedding_loss", "margin_ranking_loss", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "soft_margin_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss", "poisson_nll_loss", "gaussian_nll_loss",
]
