"""Helpers the generated functions of the numba backend call (no tensor wrappers: numpy arrays in and
out, the eager interpreter's semantics)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.fastpath import ROW_KERNELS, small_rows
from tensorplay.interpreters.eager.kernels import backward as KB
from tensorplay.interpreters.eager.kernels.head_stacks import right_operand
from tensorplay.interpreters.eager.kernels.rows import NO_STATS
from tensorplay.interpreters.eager.kernels.sdpa import attention_and_probs
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.eager.kernels._blas import call_on_one_thread
from tensorplay.interpreters.eager.kernels.threads import OPENBLAS_SERIAL_MAX_MACS as _SERIAL_MAX_MACS
from tensorplay.spec.structure import index_range_error
from tensorplay.tensor import Tensor

Array = np.ndarray[Any, Any]


def quiet() -> Any:
    """The error state a generated function runs in: inf and NaN arise silently, as eagerly."""
    return np.errstate(all="ignore")


def as_dtype(value: Any, dtype: Any) -> Array:
    """``value`` as an ndarray of ``dtype`` (no copy when it already is one)."""
    if type(value) is np.ndarray and value.dtype == dtype:
        return value
    return np.asarray(value).astype(dtype, copy=False)


def as_array(value: Any, dtype: Any) -> Array:
    """A 0-d (or any) ndarray of ``dtype`` from what numpy returned (a scalar for 0-d results)."""
    array: Array = np.asarray(value, dtype=dtype)
    return array


def contiguous(value: Any) -> Array:
    """``value`` as a C-contiguous ndarray (no copy when it already is one)."""
    if type(value) is np.ndarray and value.flags.c_contiguous:
        return value
    array: Array = np.ascontiguousarray(value)
    return array


def fortran(value: Array) -> bool:
    """Whether ``value`` is laid out column-major only (an elementwise kernel then runs in that order)."""
    flags = value.flags
    return bool(flags.f_contiguous and not flags.c_contiguous)


def flat(value: Array, fortran_order: bool) -> Array:
    """A 1-d contiguous view (or copy) of ``value``'s elements in C order, or in Fortran order: the same
    element positions for every operand of one elementwise kernel."""
    if fortran_order:
        return value.T.reshape(-1)
    if not value.flags.c_contiguous:
        value = np.ascontiguousarray(value)
    return value.reshape(-1)


def empty(shape: tuple[int, ...], dtype: Any, fortran_order: bool) -> Array:
    """An uninitialised array laid out in the kernel's order."""
    return np.empty(shape, dtype=dtype, order="F" if fortran_order else "C")


def into(state: Array, fortran_order: bool) -> Array:
    """``state`` itself when a kernel may write its new value there (writeable, laid out in the kernel's
    order), else a fresh array (the compiler then copies the result into ``state``)."""
    flags = state.flags
    if flags.writeable and (flags.f_contiguous if fortran_order else flags.c_contiguous):
        return state
    return empty(state.shape, state.dtype, fortran_order)


def into_copy(state: Array, fortran_order: bool) -> Array:
    """``state`` itself when a kernel may read and overwrite it (as :func:`into`), else a copy of it laid
    out in the kernel's order (the compiler then copies the result into ``state``)."""
    flags = state.flags
    if flags.writeable and (flags.f_contiguous if fortran_order else flags.c_contiguous):
        return state
    copy: Array = np.array(state, order="F" if fortran_order else "C")
    return copy


def matmul(a: Array, b: Array, dtype: Any, out: Array | None = None) -> Array:
    """The eager interpreter's ``matmul``, under its thread policy: operands in the result dtype, a
    broadcast 2-d right operand folded into one GEMM, batched outer products (``K == 1``) by a dedicated
    kernel, and every 2-d GEMM through :func:`tensorplay.interpreters.eager.kernels.matmul` (OpenBLAS's
    threads only for GEMMs large enough to profit, the kernel threads parked first), as eagerly.

    ``out`` (a C-contiguous array of the result's shape and dtype, sharing no memory with ``a`` or
    ``b``): the GEMM writes there and returns it; the outer-product kernel ignores it and returns a new
    array (callers use the returned array)."""
    if a.dtype != dtype:
        a = a.astype(dtype)
    if b.dtype != dtype:
        b = b.astype(dtype)
    if a.ndim == 2 and b.ndim == 2:
        if a.shape[0] * a.shape[1] * b.shape[1] <= _SERIAL_MAX_MACS:  # OpenBLAS runs it on this thread anyway
            small: Array = np.matmul(a, b, out=out)
            return small
        gemm: Array = K.matmul(a, b, out)
        return gemm
    if a.ndim > 2 and b.ndim == 2 and a.flags.c_contiguous:
        rows = math.prod(a.shape[:-1])  # not -1: that is ambiguous when the inner size is 0
        flat_out = None if out is None else out.reshape(rows, b.shape[-1])
        folded: Array = K.matmul(a.reshape(rows, a.shape[-1]), b, flat_out).reshape(a.shape[:-1] + b.shape[-1:])
        return folded
    if a.shape[-1] == 1 and b.shape[-2] == 1 and (a.ndim > 2 or b.ndim > 2):
        outer: Array = K.outer_matmul(a, b)
        return outer
    result: Array = np.matmul(a, right_operand(b), out=out)
    return result


def attention_probs(q: Array, k: Array, v: Array, scale: float) -> tuple[Array, Array]:
    """``(softmax(scale q k^T) v, softmax(scale q k^T))`` of unmasked heads ``q[*B, n, d]``, ``k[*B, m, d]``,
    ``v[*B, m, dv]`` (one float dtype) by the eager attention kernel, which keeps the probabilities
    (:func:`~tensorplay.interpreters.eager.kernels.sdpa.attention_and_probs`) for the backward to read."""
    return attention_and_probs(q, k, v, scale=scale)


_ONES: dict[tuple[int, str], Array] = {}
"""Read-only vectors of ones by ``(length, dtype)`` for :func:`sum_leading` (at most :data:`_MAX_ONES`)."""

_MAX_ONES = 16
_ONES_MAX_ROWS = 1 << 16
_GEMV_SERIAL_MAX = 9216
"""OpenBLAS threads a GEMV of more elements than this (``2304 * 4``); :func:`sum_leading` holds it to this
thread above it (the kernel threads' pool and OpenBLAS's are never busy at once)."""


def _ones(rows: int, dtype: Any) -> Array:
    key = (rows, np.dtype(dtype).str)
    ones = _ONES.get(key)
    if ones is None:
        ones = np.ones(rows, dtype)
        ones.setflags(write=False)
        if len(_ONES) < _MAX_ONES:
            _ONES[key] = ones
    return ones


def sum_leading(x: Array, k: int) -> Array:
    """``numpy.sum(x, axis=tuple(range(k)))`` of a float ``x`` (``0 < k < x.ndim``; a bias's gradient): for a
    row-major ``x`` one GEMV of a vector of ones with ``x`` as a ``[rows, cols]`` matrix (a third of numpy's
    reduction's time on ``[512, 64]``), else numpy's reduction. NaN and inf propagate as in the sum; the
    order of the additions is BLAS's."""
    rows = math.prod(x.shape[:k])
    cols = math.prod(x.shape[k:])
    if not (x.flags.c_contiguous and 0 < rows <= _ONES_MAX_ROWS and cols) or x.dtype not in (np.float32, np.float64):
        total: Array = np.asarray(np.sum(x, axis=tuple(range(k))), dtype=x.dtype)
        return total
    matrix = x.reshape(rows, cols)
    ones = _ones(rows, x.dtype)
    if rows * cols <= _GEMV_SERIAL_MAX:
        out: Array = np.matmul(ones, matrix)
    else:
        out = call_on_one_thread(np.matmul, ones, matrix)
    return out.reshape(x.shape[k:])


def gelu_backward(g: Array, x: Array) -> Array:
    """``g * gelu'(x)`` of the erf form in one pass, by the eager backward's kernel."""
    out: Array = KB.gelu_backward(g, x, approximate="none")
    return out


def layer_norm_backward(x: Array, gamma: Array | None, g: Array, eps: float, need_x: bool,
                        need_gamma: bool, stats: Array | None = None) -> tuple[Any, Any]:
    """``(dx, dgamma)`` of ``layer_norm_last_axis(x, gamma, beta)`` for the cotangent ``g`` by the eager
    backward's row kernel (the statistics ``stats`` kept by :func:`layer_norm_stats`, else recomputed from
    ``x``: the same values); each is ``None`` unless asked for (``gamma`` is only read for ``dx``)."""
    if gamma is None:
        gamma = np.ones(x.shape[-1], x.dtype)
    dx, dgamma, _ = KB.layer_norm_backward(x, gamma, g, eps=eps, need_x=need_x, need_params=need_gamma,
                                           stats=stats)
    return dx, dgamma


def pad(x: Array, pads: tuple[tuple[int, int], ...], value: float) -> Array:
    """``numpy.pad(x, pads, constant_values=value)`` for non-negative ``pads``: the result filled (zeroed
    by the allocator for ``+0.0``) and ``x`` copied into its window, at a third of ``numpy.pad``'s cost."""
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, pads))
    if value == 0 and math.copysign(1.0, value) > 0:
        out: Array = np.zeros(shape, x.dtype)
    else:
        out = np.full(shape, value, x.dtype)
    out[tuple(slice(lo, lo + d) for d, (lo, _) in zip(x.shape, pads))] = x
    return out


def place(shape: tuple[int, ...], dtype: Any, parts: tuple[tuple[Array, tuple[int, ...], tuple[int, ...]], ...],
          covering: bool, out: Array | None = None) -> Array:
    """The sum of zero pads of pieces into pairwise disjoint windows, built directly: a ``shape`` array of
    ``dtype`` (zeros unless the windows are ``covering``) with each piece copied into its window. ``parts``:
    per piece ``(value, low corner, window shape)``, ``value`` holding the window's elements in C order
    under any shape (it is written through a view of the window in ``value``'s shape where one exists, so a
    transposed piece is copied once, not first made contiguous). ``out`` (a planned C-contiguous array of
    that shape and dtype, sharing no memory with the pieces): the result is written there."""
    if out is None:
        out = np.empty(shape, dtype) if covering else np.zeros(shape, dtype)
    elif not covering:
        out.fill(0)
    for value, low, window_shape in parts:
        window = out[tuple(slice(lo, lo + d) for lo, d in zip(low, window_shape))]
        try:
            target = np.reshape(window, value.shape, copy=False)
        except ValueError:  # no view of the window has the value's shape: reshape the value instead
            window[...] = value.reshape(window_shape)
            continue
        if target.ctypes.data == value.ctypes.data and target.strides == value.strides:
            continue  # written there already (a GEMM given its window, :func:`window`)
        target[...] = value
    return out


def window(out: Array, low: tuple[int, ...], window_shape: tuple[int, ...], value_shape: tuple[int, ...],
           inverse: tuple[int, ...]) -> Array | None:
    """The window of ``out`` at ``low`` (of ``window_shape``) as a view in ``value_shape`` permuted by
    ``inverse``: where a GEMM writes the product whose permutation (the inverse of ``inverse``) is the piece
    :func:`place` puts there, so the piece is placed without a copy. ``None`` when no such view exists (the
    GEMM then writes its own array and the placement copies it)."""
    region = out[tuple(slice(lo, lo + d) for lo, d in zip(low, window_shape))]
    try:
        view = np.reshape(region, value_shape, copy=False)
    except ValueError:
        return None
    permuted: Array = view.transpose(inverse)
    return permuted


def rows(name: str, x: Array, axis: int) -> Array:
    """``softmax`` or ``log_softmax`` (``name``) of a float ``x`` along ``axis``, as the eager interpreter
    computes it: a row-major input normalised along its last axis by the row kernel on this thread when
    it would not be split across threads (:func:`~tensorplay.interpreters.eager.fastpath.small_rows`),
    anything else by the kernels' entry point."""
    if x.ndim and (axis == -1 or axis == x.ndim - 1):
        out = small_rows(ROW_KERNELS[name], x)
        if out is not None:
            return out
    result: Array = getattr(K, name)(x, axis=axis)
    return result


def layer_norm(x: Array, gamma: Array, beta: Array, eps: float) -> Array:
    """``layer_norm_last_axis`` of ``x[..., D]`` with ``gamma[D]``, ``beta[D]`` (one float dtype), as the
    eager interpreter computes it (the row kernel on this thread for small row-major operands)."""
    if gamma.flags.c_contiguous and beta.flags.c_contiguous:
        out = small_rows("layer_norm_rows", x, gamma, beta, eps, NO_STATS)
        if out is not None:
            return out
    result: Array = K.layer_norm_last_axis(x, gamma, beta, eps=eps)
    return result


def layer_norm_stats(x: Array, gamma: Array, beta: Array, eps: float) -> tuple[Array, Array]:
    """:func:`layer_norm` and the float64 ``[rows, 2]`` statistics ``(mean, rstd)`` of each row it normalised
    (the same kernel call), for :func:`layer_norm_backward` to read."""
    stats: Array = np.empty((math.prod(x.shape[:-1]), 2))
    if gamma.flags.c_contiguous and beta.flags.c_contiguous:
        out = small_rows("layer_norm_rows", x, gamma, beta, eps, stats)
        if out is not None:
            return out, stats
    result: Array = K.layer_norm_last_axis(x, gamma, beta, eps=eps, stats=stats)
    return result, stats


_LOSS_KERNELS: Any = None


def _loss_kernels() -> Any:
    global _LOSS_KERNELS
    if _LOSS_KERNELS is None:
        from tensorplay.compiler.numba_backend import _loss_kernels
        _LOSS_KERNELS = _loss_kernels
    return _LOSS_KERNELS


def cross_entropy(x: Array, target: Array, ignore_index: int) -> tuple[Array, tuple[Any, ...]]:
    """The mean over the rows of ``x[N, C]`` whose ``target`` (int64 ``[N]``, already checked: each entry in
    ``[0, C)`` or ``ignore_index``) is not ignored of ``logsumexp(x[i]) - x[i, target[i]]`` (NaN when every
    row is ignored), as a 0-d array of ``x``'s dtype; and the state :func:`cross_entropy_grad` reads."""
    x = contiguous(x)
    target = contiguous(target)
    lse = np.empty(x.shape[0], x.dtype)
    counted = _loss_kernels().masked_cross_entropy_rows(x, target, ignore_index, lse)
    return _mean_loss(x, target, counted, None), (x, target, ignore_index, lse, counted[1])


def _mean_loss(x: Array, target: Array, counted: tuple[float, int, int], check: tuple[Any, ...] | None) -> Array:
    """The loss (a 0-d array of ``x``'s dtype) from the row kernel's ``(total, count, bad)``; a bad row raises
    the error of the target's range check ``check`` (``(bound, what, allowed)``, as ``check_index``)."""
    total, count, bad = counted
    if bad >= 0 and check is not None:
        bound, what, allowed = check
        raise index_range_error(what, [int(bad)], int(target[bad]), bound, tuple(allowed))
    if bad >= 0:  # pragma: no cover - the recorded check_index raised before
        raise IndexError(f"cross_entropy: target {int(target[bad])} at row {bad} is outside [0, {x.shape[1]})")
    dtype = x.dtype.type
    loss: Array = np.asarray(np.divide(dtype(total), dtype(count)), dtype=x.dtype)
    return loss


def cross_entropy_grad(state: tuple[Any, ...], seed: Any) -> Array:
    """``dx`` of :func:`cross_entropy` for the loss's cotangent ``seed``: ``seed / count * (softmax(x[i]) -
    onehot(target[i]))`` on the rows counted, zeros on the others."""
    x, target, ignore_index, lse, count = state
    out: Array = np.empty(x.shape, x.dtype)
    _loss_kernels().masked_cross_entropy_grad_rows(x, target, ignore_index, lse, _step(x, seed, count), out,
                                                   _NO_SUMS[x.dtype.type], False)
    return out


_NO_SUMS: dict[Any, Array] = {np.float32: np.empty(0, np.float32), np.float64: np.empty(0, np.float64)}
"""The (unwritten) row sums of a gradient kernel asked for none."""


def _step(x: Array, seed: Any, count: int) -> Any:
    """``seed / count`` in ``x``'s dtype (each counted row's share of the loss's cotangent)."""
    dtype = x.dtype.type
    return np.divide(dtype(np.asarray(seed)), dtype(count))


def cross_entropy_step(z: Array, bias: Array | None, target: Array, ignore_index: int, seed: Any,
                       check: tuple[Any, ...] | None, sum_rows: bool) -> tuple[Array, Array, Array | None]:
    """:func:`cross_entropy` of the logits ``z[N, C]`` (plus ``bias[C]`` when given) and
    :func:`cross_entropy_grad` of it for the cotangent ``seed``, in one call: ``(loss, dx, dbias)``, where
    ``dbias`` (with ``sum_rows``, else ``None``) is ``dx`` summed over the rows. ``check``
    (``(bound, what, allowed)``): the target is range-checked here, raising what ``check_index`` raises;
    ``None``: it was checked before."""
    z = contiguous(z)
    target = contiguous(target)
    n, c = z.shape
    kernels = _loss_kernels()
    dx: Array = np.empty((n, c), z.dtype)
    lse = np.empty(n, z.dtype)
    if bias is None:
        x = z
        counted = kernels.masked_cross_entropy_rows(z, target, ignore_index, lse)
    else:
        x = dx  # the logits are written there, then overwritten by the gradient row by row
        counted = kernels.biased_cross_entropy_rows(z, contiguous(bias), target, ignore_index, dx, lse)
    loss = _mean_loss(z, target, counted, check)
    sums: Array = np.empty(c, z.dtype) if sum_rows else _NO_SUMS[z.dtype.type]
    kernels.masked_cross_entropy_grad_rows(x, target, ignore_index, lse, _step(z, seed, counted[1]), dx, sums,
                                           sum_rows)
    return loss, dx, (sums if sum_rows else None)


def filled(buffer: Array, value: Any) -> Array:
    """``buffer`` with every element set to ``value`` (a planned accumulator, zeroed in place)."""
    buffer.fill(value)
    return buffer


def conv_backward(x: Array, w: Array, g: Array, *, stride: tuple[int, ...], padding: tuple[int, ...],
                  dilation: tuple[int, ...], groups: int, output_padding: tuple[int, ...]) -> tuple[Array, Array]:
    """``(dx, dw)`` of ``conv(x, w)`` for the cotangent ``g`` (one float dtype): by the eager interpreter's
    backward kernel, one read of ``g`` for both (:func:`tensorplay.interpreters.eager.kernels.conv_backward_nd`),
    else ``conv_transpose`` (with ``output_padding``, giving ``x``'s shape) and ``conv_weight_grad``."""
    got = K.conv_backward_nd(x, w, g, True, True, False, stride=stride, padding=padding, dilation=dilation,
                             groups=groups)
    if got is not None and got[0] is not None and got[1] is not None:
        return got[0], got[1]
    dx: Array = K.conv_transpose_nd(g, w, stride=stride, padding=padding, output_padding=output_padding,
                                    dilation=dilation, groups=groups)
    dw: Array = K.conv_weight_grad_nd(x, g, kernel_size=tuple(w.shape[2:]), stride=stride, padding=padding,
                                      dilation=dilation, groups=groups)
    return dx, dw


def wrap(array: Array) -> Tensor[*tuple[Any, ...]]:
    """An eager tensor on ``array`` (the fallback path only)."""
    return eager.wrap(array)


__all__ = ["as_array", "as_dtype", "attention_probs", "contiguous", "conv_backward", "cross_entropy", "cross_entropy_grad", "empty", "filled", "flat",
           "gelu_backward", "fortran", "sum_leading", "into", "into_copy", "layer_norm", "layer_norm_backward", "layer_norm_stats", "matmul", "pad", "place", "quiet", "rows", "window",
           "wrap"]
