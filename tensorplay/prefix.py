"""Prefix-polymorphic layer operations, written once against ``Ops``.

Each takes any leading shape ``*lead`` and keeps it: the leading axes are
flattened into the primitive's batch axis, the primitive runs, and the axes
are restored. A per-sample model is therefore also a batched model. Weight
layouts follow PyTorch (``linear`` weight ``[out, in]``, conv weight
``[outC, inC/groups, *k]``, transposed conv weight ``[inC, outC/groups, *k]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tensorplay.errors import DTypeError, ShapeError
from tensorplay.program import matmul, numel_of, reshape, unsqueeze  # noqa: F401 (reshape re-exported)

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any
IntOrTuple = int | Sequence[int]


def _tuple(value: IntOrTuple, rank: int, name: str, where: str) -> tuple[int, ...]:
    if isinstance(value, int):
        return (value,) * rank
    out = tuple(int(v) for v in value)
    if len(out) != rank:
        raise ShapeError(f"{where}: {name} has {len(out)} entries {list(out)}, expected {rank} "
                         f"(one per spatial dim)")
    return out


def map(ops: Interpreter, lead: int, x: AnyTensor, f: Callable[[AnyTensor], AnyTensor]) -> AnyTensor:
    """Apply ``f`` (which takes ``[N, *sample]``) to ``x[*lead, *sample]`` where ``lead`` is the number
    of leading axes; the result is ``[*lead, *f_sample]``. With ``lead == 0``, ``f`` sees a batch of one."""
    if not 0 <= lead <= x.ndim:
        raise ShapeError(f"map: lead={lead} leading axes requested for a tensor of rank {x.ndim} "
                         f"(shape {list(x.shape)})")
    shape = tuple(x.shape)
    lead_shape, sample = shape[:lead], shape[lead:]
    flat = ops.reshape(x, shape=(numel_of(lead_shape),) + sample) if lead != 1 else x
    out = f(flat)
    out_sample = tuple(out.shape[1:])
    return out if lead == 1 else ops.reshape(out, shape=lead_shape + out_sample)


def _flatten_lead(ops: Interpreter, x: AnyTensor, keep: int, where: str) -> tuple[AnyTensor, tuple[Any, ...]]:
    """``x[*lead, *tail]`` with ``len(tail) == keep`` -> (``x[N, *tail]``, ``lead``)."""
    if x.ndim < keep:
        raise ShapeError(f"{where}: expected an input with at least {keep} axes (channels and spatial dims), "
                         f"got shape {list(x.shape)}")
    shape = tuple(x.shape)
    lead, tail = shape[:x.ndim - keep], shape[x.ndim - keep:]
    if len(lead) == 1:
        return x, lead
    return ops.reshape(x, shape=(numel_of(lead),) + tail), lead


def _restore_lead(ops: Interpreter, y: AnyTensor, lead: tuple[Any, ...]) -> AnyTensor:
    if len(lead) == 1:
        return y
    return ops.reshape(y, shape=lead + tuple(y.shape[1:]))


def linear(ops: Interpreter, w: AnyTensor, b: AnyTensor | None, x: AnyTensor) -> AnyTensor:
    """``x[*lead, in] @ w[out, in]^T + b[out] -> [*lead, out]`` (``b`` may be ``None``)."""
    if w.ndim != 2:
        raise ShapeError(f"linear: weight must be [out, in], got shape {list(w.shape)}")
    if x.ndim == 0 or x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: input feature size {x.shape[-1] if x.ndim else '(0-d input)'} does not match "
                         f"the weight's in-features {w.shape[1]} (x: {list(x.shape)}, w: {list(w.shape)})")
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ShapeError(f"linear: bias must be [{w.shape[0]}], got shape {list(b.shape)}")
    wt = ops.permute(w, perm=(1, 0))
    if x.ndim > 2:
        flat = ops.reshape(x, shape=(numel_of(x.shape[:-1]), x.shape[-1]))
        y = ops.matmul(flat, wt)
        y = ops.reshape(y, shape=tuple(x.shape[:-1]) + (w.shape[0],))
    else:
        y = matmul(ops, x, wt)
    return y if b is None else ops.add(y, b)


def _same_padding(kernel: tuple[int, ...], dilation: tuple[int, ...], stride: tuple[int, ...],
                  where: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...] | None]:
    if any(s != 1 for s in stride):
        raise ShapeError(f"{where}: padding='same' needs stride 1, got stride {list(stride)}")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    if all(t % 2 == 0 for t in totals):
        return tuple(t // 2 for t in totals), None
    return (0,) * len(kernel), tuple((t // 2, t - t // 2) for t in totals)


def conv(ops: Interpreter, w: AnyTensor, b: AnyTensor | None, x: AnyTensor, stride: IntOrTuple = 1,
         padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1) -> AnyTensor:
    """N-d convolution (cross-correlation) of ``x[*lead, inC, *spatial]`` with ``w[outC, inC/groups, *k]``
    plus ``b[outC]``, giving ``[*lead, outC, *out]``; ``out = (in + 2p - d(k-1) - 1)//s + 1``.
    ``padding`` may be ``"same"`` (stride 1; output spatial = input spatial) or ``"valid"`` (0)."""
    rank = w.ndim - 2
    if rank not in (1, 2, 3):
        raise ShapeError(f"conv: weight must be [outC, inC/groups, *kernel] with 1 to 3 spatial dims, "
                         f"got shape {list(w.shape)}")
    kernel = tuple(w.shape[2:])
    s = _tuple(stride, rank, "stride", "conv")
    d = _tuple(dilation, rank, "dilation", "conv")
    flat, lead = _flatten_lead(ops, x, rank + 1, "conv")
    if isinstance(padding, str):
        if padding == "valid":
            p = (0,) * rank
        elif padding == "same":
            p, explicit = _same_padding(kernel, d, s, "conv")
            if explicit is not None:
                flat = ops.pad(flat, pads=((0, 0), (0, 0)) + explicit)
        else:
            raise ShapeError(f"conv: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
    else:
        p = _tuple(padding, rank, "padding", "conv")
    y = ops.conv(flat, w, stride=s, padding=p, dilation=d, groups=groups)
    if b is not None:
        if tuple(b.shape) != (w.shape[0],):
            raise ShapeError(f"conv: bias must be [{w.shape[0]}], got shape {list(b.shape)}")
        y = ops.add(y, ops.reshape(b, shape=(w.shape[0],) + (1,) * rank))
    return _restore_lead(ops, y, lead)


def conv_transpose(ops: Interpreter, w: AnyTensor, b: AnyTensor | None, x: AnyTensor, stride: IntOrTuple = 1,
                   padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                   groups: int = 1) -> AnyTensor:
    """Transposed convolution of ``x[*lead, inC, *spatial]`` with ``w[inC, outC/groups, *k]`` plus
    ``b[outC]``: ``out = (in-1)s - 2p + d(k-1) + output_padding + 1`` per spatial dim."""
    rank = w.ndim - 2
    if rank not in (1, 2, 3):
        raise ShapeError(f"conv_transpose: weight must be [inC, outC/groups, *kernel] with 1 to 3 spatial dims, "
                         f"got shape {list(w.shape)}")
    s = _tuple(stride, rank, "stride", "conv_transpose")
    p = _tuple(padding, rank, "padding", "conv_transpose")
    op = _tuple(output_padding, rank, "output_padding", "conv_transpose")
    d = _tuple(dilation, rank, "dilation", "conv_transpose")
    flat, lead = _flatten_lead(ops, x, rank + 1, "conv_transpose")
    y = ops.conv_transpose(flat, w, stride=s, padding=p, output_padding=op, dilation=d, groups=groups)
    out_channels = w.shape[1] * groups
    if b is not None:
        if tuple(b.shape) != (out_channels,):
            raise ShapeError(f"conv_transpose: bias must be [{out_channels}], got shape {list(b.shape)}")
        y = ops.add(y, ops.reshape(b, shape=(out_channels,) + (1,) * rank))
    return _restore_lead(ops, y, lead)


def _pool(ops: Interpreter, prim: str, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None,
          padding: IntOrTuple, **extra: Any) -> AnyTensor:
    rank = 2 if isinstance(kernel_size, int) else len(tuple(kernel_size))
    k = _tuple(kernel_size, rank, "kernel_size", prim)
    s = k if stride is None else _tuple(stride, rank, "stride", prim)
    p = _tuple(padding, rank, "padding", prim)
    if x.ndim < rank:
        raise ShapeError(f"{prim}: expected an input with at least {rank} spatial axes, got shape {list(x.shape)}")
    shape = tuple(x.shape)
    lead, spatial = shape[:x.ndim - rank], shape[x.ndim - rank:]
    flat = ops.reshape(x, shape=(numel_of(lead), 1) + spatial)
    y = getattr(ops, prim)(flat, kernel_size=k, stride=s, padding=p, **extra)
    return ops.reshape(y, shape=lead + tuple(y.shape[2:]))


def max_pool(ops: Interpreter, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> AnyTensor:
    """Window max over the trailing ``len(kernel_size)`` axes of ``x[*lead, *spatial]`` (an int kernel means
    2-d); ``stride`` defaults to the kernel; padding is ``-inf`` and at most ``k//2``."""
    return _pool(ops, "max_pool", x, kernel_size, stride, padding)


def avg_pool(ops: Interpreter, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> AnyTensor:
    """Window mean over the trailing spatial axes; padded positions count as zeros."""
    return _pool(ops, "avg_pool", x, kernel_size, stride, padding)


def smooth_max_pool(ops: Interpreter, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                    padding: IntOrTuple = 0, beta: float = 10.0) -> AnyTensor:
    """Window ``logsumexp(beta * x) / beta`` over the trailing spatial axes (tends to max as beta grows)."""
    if beta <= 0:
        raise ShapeError(f"smooth_max_pool: beta must be positive, got {beta}")
    return _pool(ops, "smooth_max_pool", x, kernel_size, stride, padding, beta=float(beta))


def layer_norm(ops: Interpreter, x: AnyTensor, gamma: AnyTensor | None, beta: AnyTensor | None,
               eps: float = 1e-5) -> AnyTensor:
    """Normalise the last axis of ``x[*lead, D]`` then scale by ``gamma[D]`` and shift by ``beta[D]``
    (``None`` means 1 and 0)."""
    if x.ndim == 0:
        raise ShapeError("layer_norm: expected an input with a feature axis, got a 0-d tensor")
    dim = x.shape[-1]
    dtype = x.dtype.name
    g = gamma if gamma is not None else ops.full(shape=(dim,), value=1.0, dtype=dtype)
    b = beta if beta is not None else ops.full(shape=(dim,), value=0.0, dtype=dtype)
    return ops.layer_norm(x, g, b, eps=eps)


def _split_heads(ops: Interpreter, t: AnyTensor, heads: int) -> AnyTensor:
    shape = tuple(t.shape)
    lead, n, d = shape[:-2], shape[-2], shape[-1]
    t = ops.reshape(t, shape=lead + (n, heads, d // heads))
    rank = len(lead)
    return ops.permute(t, perm=tuple(range(rank)) + (rank + 1, rank, rank + 2))


def _merge_heads(ops: Interpreter, t: AnyTensor) -> AnyTensor:
    shape = tuple(t.shape)
    lead, h, n, dh = shape[:-3], shape[-3], shape[-2], shape[-1]
    rank = len(lead)
    t = ops.permute(t, perm=tuple(range(rank)) + (rank + 1, rank, rank + 2))
    return ops.reshape(t, shape=lead + (n, h * dh))


def attention(ops: Interpreter, wq: AnyTensor, wk: AnyTensor, wv: AnyTensor, wo: AnyTensor, x: AnyTensor,
              num_heads: int, mask: AnyTensor | None = None, output_bias: AnyTensor | None = None) -> AnyTensor:
    """Multi-head self-attention on ``x[*lead, n, d]``: projections ``w*[d, d]`` (PyTorch ``[out, in]``),
    ``num_heads`` heads of size ``d // num_heads``, scale ``1/sqrt(d_head)``, optional bool ``mask``
    (``[n, n]`` or ``[*lead, n, n]``, True = may attend) and ``output_bias[d]``. Result ``[*lead, n, d]``."""
    if x.ndim < 2:
        raise ShapeError(f"attention: expected x[*lead, n, d], got shape {list(x.shape)}")
    d = x.shape[-1]
    if not isinstance(num_heads, int) or num_heads <= 0 or (isinstance(d, int) and d % num_heads):
        raise ShapeError(f"attention: model dim {d} is not divisible by num_heads={num_heads}")
    for name, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo)):
        if tuple(w.shape) != (d, d):
            raise ShapeError(f"attention: {name} must be [{d}, {d}] for x of shape {list(x.shape)}, "
                             f"got {list(w.shape)}")
    if mask is not None and mask.dtype.name != "bool":
        raise DTypeError(f"attention: mask must be bool (True = may attend), got {mask.dtype}")
    q = _split_heads(ops, linear(ops, wq, None, x), num_heads)
    k = _split_heads(ops, linear(ops, wk, None, x), num_heads)
    v = _split_heads(ops, linear(ops, wv, None, x), num_heads)
    head_mask = mask if mask is None or mask.ndim <= 2 else unsqueeze(ops, mask, -3)
    o = ops.attention(q, k, v, head_mask, scale=1.0 / math.sqrt(d // num_heads))
    return linear(ops, wo, output_bias, _merge_heads(ops, o))


def dropout(ops: Interpreter, x: AnyTensor, p: float, key: AnyTensor, training: bool = True) -> AnyTensor:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``; ``key`` is the random key
    (an input value, so a compiled graph draws a new mask each call). Identity when not training."""
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout: probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return ops.mul(x, 0.0)
    keep = ops.ge(ops.random_uniform(key, shape=tuple(x.shape), dtype=x.dtype.name), p)
    return ops.where(keep, ops.mul(x, 1.0 / (1.0 - p)), 0.0)


class DerivedOps:
    """Mixin giving every interpreter the derived ops whose names are free: ``ops.linear(w, b, x)``
    and ``ops.map(lead, x, f)``. (``conv``, pooling, ``layer_norm`` and ``attention`` are primitive
    names on interpreters; their prefix-polymorphic layer forms are the functions of this module.)"""

    def linear(self, w: AnyTensor, b: AnyTensor | None, x: AnyTensor) -> AnyTensor:
        """See :func:`tensorplay.prefix.linear`."""
        return linear(self, w, b, x)  # type: ignore[arg-type]

    def map(self, lead: int, x: AnyTensor, f: Callable[[AnyTensor], AnyTensor]) -> AnyTensor:
        """See :func:`tensorplay.prefix.map`."""
        return map(self, lead, x, f)  # type: ignore[arg-type]


__all__ = ["map", "linear", "conv", "conv_transpose", "max_pool", "avg_pool", "smooth_max_pool", "layer_norm",
           "attention", "dropout", "reshape"]
