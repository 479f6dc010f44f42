"""Convolution through numba im2col/col2im and one batched BLAS GEMM.

All spatial ranks share the 3-d kernels: ``x[N, C, *spatial]`` is viewed as
``[N, C, D, H, W]`` with size-1 leading dims (kernel 1, stride 1, padding 0,
dilation 1 there). The column matrix is ``cols[N, C*K, L]`` (``K`` kernel taps,
``L`` output positions), channel-major so a group's rows are one block, and the
GEMM ``w[g, O/g, C/g*K] @ cols[N, g, C/g*K, L]`` writes ``[N, O, L]`` in place:
no transpose of the result. A batch runs with OpenBLAS held to one thread, on the calling
thread (see :func:`_by_samples`). 1x1 convolutions with stride 1 and no padding skip
im2col entirely. Columns live in a reused per-thread scratch buffer and are built
for a block of samples at a time, so memory stays bounded for large batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ._blas import single_threaded_blas
from ._support import Array, as_float, float_dtype, nb, scratch

COLS_BLOCK_BYTES = 4 << 20
"""Upper bound on the column buffer; larger batches are processed in blocks of samples (a
block that stays in cache between im2col and the GEMM measured ~7-10% faster than 64 MB)."""

Triple = tuple[int, int, int]


def _triples(name: str, nsp: int, **params: tuple[int, ...]) -> dict[str, Triple]:
    out: dict[str, Triple] = {}
    for key, val in params.items():
        v = tuple(int(e) for e in val)
        if len(v) != nsp:
            raise ValueError(f"{name}: {key} {v} must have {nsp} entries (one per spatial dim)")
        fill = 0 if key in ("padding", "output_padding") else 1
        t = (fill,) * (3 - nsp) + v
        out[key] = (t[0], t[1], t[2])
    return out


def _check_common(name: str, x: Array, w: Array, groups: int) -> int:
    nsp = x.ndim - 2
    if nsp not in (1, 2, 3):
        raise ValueError(f"{name}: x must be [N, C, *spatial] with 1 to 3 spatial dims, got shape {x.shape}")
    if w.ndim != x.ndim:
        raise ValueError(f"{name}: w must have rank {x.ndim} for x of shape {x.shape}, got shape {w.shape}")
    if groups < 1:
        raise ValueError(f"{name}: groups must be >= 1, got {groups}")
    return nsp


def _shape5(a_shape: tuple[int, ...], nsp: int) -> tuple[int, int, int, int, int]:
    s = tuple(a_shape[:2]) + (1,) * (3 - nsp) + tuple(a_shape[2:])
    return (s[0], s[1], s[2], s[3], s[4])


def _conv_spatial(x5s: tuple[int, ...], k: Triple, s: Triple, p: Triple, d: Triple) -> tuple[int, int, int]:
    """The conv output sizes ``(in + 2p - d(k-1) - 1)//s + 1`` (at least 0) of the spatial dims of ``x5s``."""
    o = tuple(max(0, (x5s[2 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1) for i in range(3))
    return (o[0], o[1], o[2])


def _trivial(x: Array, w: Array, out_shape: tuple[int, ...], dt: np.dtype[Any]) -> Array | None:
    """The result when there is nothing to multiply: empty for an empty output, zeros when ``x`` or
    ``w`` is empty; ``None`` otherwise."""
    if math.prod(out_shape) == 0:
        return np.empty(out_shape, dt)
    if x.size == 0 or w.size == 0:
        return np.zeros(out_shape, dt)
    return None


# im2col/col2im run on the calling thread: they alternate with GEMMs, and a second thread
# pool fighting OpenBLAS's spinning workers made them slower, not faster (measured).


def _im2col(x5: Array, cols: Array, k: Triple, s: Triple, p: Triple, d: Triple, o: Triple) -> None:
    nb().im2col(x5, cols, *k, *s, *p, *d, *o, 0, x5.shape[0])


def _col2im(cols: Array, out5: Array, k: Triple, s: Triple, p: Triple, d: Triple, o: Triple) -> None:
    nb().col2im(cols, out5, *k, *s, *p, *d, *o, 0, out5.shape[0])


def _block(n: int, per_sample_bytes: int) -> int:
    return max(1, min(n, COLS_BLOCK_BYTES // max(1, per_sample_bytes)))


def _by_samples(n: int, macs: int, body: Callable[[int, int], None]) -> None:
    """Run ``body(start, stop)`` over the samples, on the calling thread.

    With several samples, OpenBLAS is held to one thread: numpy runs one GEMM per sample,
    and a multi-threaded OpenBLAS synchronises its workers once per GEMM. Splitting the
    samples over kernel threads instead was tried and rejected: OpenBLAS called from two
    threads at once (even at one thread each) stalled for 100-480 ms per call whenever the
    cores were busy with other processes (64->64 channel conv: ~800 ms instead of ~11 ms),
    and so did 32 multi-threaded per-sample GEMMs. A single sample keeps OpenBLAS's threads.
    ``macs`` (the work) is kept for a future split that is safe.
    """
    with single_threaded_blas(n > 1):
        body(0, n)


def _is_pointwise(k: Triple, s: Triple, p: Triple) -> bool:
    return k == (1, 1, 1) and s == (1, 1, 1) and p == (0, 0, 0)


def conv(x: Array, w: Array, *, stride: tuple[int, ...], padding: tuple[int, ...],
         dilation: tuple[int, ...], groups: int) -> Array:
    """Cross-correlation ``x[N, C, *in] * w[O, C/groups, *k] -> [N, O, *out]`` with
    ``out = (in + 2p - d(k-1) - 1)//s + 1`` (zero padding). No bias."""
    nsp = _check_common("conv", x, w, groups)
    n, c = x.shape[0], x.shape[1]
    o_ch = w.shape[0]
    if c % groups or o_ch % groups or w.shape[1] * groups != c:
        raise ValueError(f"conv: x{list(x.shape)} and w{list(w.shape)} do not fit groups={groups} "
                         f"(need C % groups == 0, O % groups == 0 and w.shape[1] == C/groups)")
    t = _triples("conv", nsp, stride=stride, padding=padding, dilation=dilation,
                 kernel_size=tuple(w.shape[2:]))
    k, s, p, d = t["kernel_size"], t["stride"], t["padding"], t["dilation"]
    x5s = _shape5(x.shape, nsp)
    osp = _conv_spatial(x5s, k, s, p, d)
    if min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"conv: need stride >= 1, dilation >= 1, padding >= 0; got {stride}, {dilation}, {padding}")
    dt = float_dtype(x, w)
    out_shape = (n, o_ch) + osp[3 - nsp:]
    trivial = _trivial(x, w, out_shape, dt)
    if trivial is not None:
        return trivial
    out = np.empty(out_shape, dt)
    g, cg, og = groups, c // groups, o_ch // groups
    kk = k[0] * k[1] * k[2]
    ll = osp[0] * osp[1] * osp[2]
    x5 = as_float(x, dt).reshape(x5s)
    wg = as_float(w, dt).reshape(g, og, cg * kk)
    out4 = out.reshape(n, g, og, ll)
    macs = n * og * g * cg * kk * ll
    if _is_pointwise(k, s, p):
        xg = x5.reshape(n, g, cg, ll)

        def pointwise(start: int, stop: int) -> None:
            np.matmul(wg, xg[start:stop], out=out4[start:stop])

        _by_samples(n, macs, pointwise)
        return out
    blk = _block(n, c * kk * ll * dt.itemsize)

    def samples(start: int, stop: int) -> None:
        for n0 in range(start, stop, blk):
            n1 = min(stop, n0 + blk)
            cols = scratch((n1 - n0, c * kk, ll), dt)  # per thread
            _im2col(x5[n0:n1], cols, k, s, p, d, osp)
            np.matmul(wg, cols.reshape(n1 - n0, g, cg * kk, ll), out=out4[n0:n1])

    _by_samples(n, macs, samples)
    return out


def conv_transpose(x: Array, w: Array, *, stride: tuple[int, ...], padding: tuple[int, ...],
                   output_padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Array:
    """Transposed convolution ``x[N, C, *in], w[C, O/groups, *k] -> [N, O, *out]`` with
    ``out = (in-1)s - 2p + d(k-1) + output_padding + 1``: the adjoint (w.r.t. its input) of
    ``conv`` with the same weight. GEMM ``w^T @ x`` into columns, then col2im."""
    nsp = _check_common("conv_transpose", x, w, groups)
    n, c = x.shape[0], x.shape[1]
    if c % groups or w.shape[0] != c:
        raise ValueError(f"conv_transpose: x{list(x.shape)} and w{list(w.shape)} do not fit groups={groups} "
                         f"(need C % groups == 0 and w.shape[0] == C)")
    g, cg, og = groups, c // groups, w.shape[1]
    o_ch = og * g
    t = _triples("conv_transpose", nsp, stride=stride, padding=padding, output_padding=output_padding,
                 dilation=dilation, kernel_size=tuple(w.shape[2:]))
    k, s, p, op, d = t["kernel_size"], t["stride"], t["padding"], t["output_padding"], t["dilation"]
    if min(s) < 1 or min(d) < 1 or min(p) < 0 or min(op) < 0:
        raise ValueError(f"conv_transpose: need stride >= 1, dilation >= 1, padding >= 0, output_padding >= 0; "
                         f"got {stride}, {dilation}, {padding}, {output_padding}")
    x5s = _shape5(x.shape, nsp)
    isp = (x5s[2], x5s[3], x5s[4])
    osp = tuple(max(0, (isp[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1) for i in range(3))
    dt = float_dtype(x, w)
    out_shape = (n, o_ch) + osp[3 - nsp:]
    trivial = _trivial(x, w, out_shape, dt)
    if trivial is not None:
        return trivial
    kk = k[0] * k[1] * k[2]
    lin = isp[0] * isp[1] * isp[2]
    x5 = as_float(x, dt).reshape(x5s)
    wt = as_float(w, dt).reshape(g, cg, og * kk).transpose(0, 2, 1)  # [g, O/g*K, C/g]
    xg = x5.reshape(n, g, cg, lin)
    macs = n * g * og * kk * cg * lin
    if _is_pointwise(k, s, p) and osp == isp:
        out = np.empty(out_shape, dt)
        out4 = out.reshape(n, g, og, lin)

        def pointwise(start: int, stop: int) -> None:
            np.matmul(wt, xg[start:stop], out=out4[start:stop])

        _by_samples(n, macs, pointwise)
        return out
    out = np.zeros(out_shape, dt)
    out5 = out.reshape((n, o_ch) + osp)
    blk = _block(n, o_ch * kk * lin * dt.itemsize)

    def samples(start: int, stop: int) -> None:
        for n0 in range(start, stop, blk):
            n1 = min(stop, n0 + blk)
            cols = scratch((n1 - n0, o_ch * kk, lin), dt)
            np.matmul(wt, xg[n0:n1], out=cols.reshape(n1 - n0, g, og * kk, lin))
            _col2im(cols, out5[n0:n1], k, s, p, d, isp)

    _by_samples(n, macs, samples)
    return out


def conv_weight_grad(x: Array, g: Array, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                     padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Array:
    """The adjoint of ``conv`` w.r.t. its weight: ``x[N, C, *in], g[N, O, *out] -> [O, C/groups, *k]``."""
    nsp = _check_common("conv_weight_grad", x, g, groups)
    n, c = x.shape[0], x.shape[1]
    o_ch = g.shape[1]
    if c % groups or o_ch % groups:
        raise ValueError(f"conv_weight_grad: channels of x{list(x.shape)} and g{list(g.shape)} "
                         f"must be divisible by groups={groups}")
    t = _triples("conv_weight_grad", nsp, stride=stride, padding=padding, dilation=dilation,
                 kernel_size=kernel_size)
    k, s, p, d = t["kernel_size"], t["stride"], t["padding"], t["dilation"]
    x5s = _shape5(x.shape, nsp)
    osp = _conv_spatial(x5s, k, s, p, d)
    want = (n, o_ch) + osp[3 - nsp:]
    if tuple(g.shape) != want:
        raise ValueError(f"conv_weight_grad: g must have shape {want} for x{list(x.shape)} and these "
                         f"parameters, got {tuple(g.shape)}")
    gr, cg, og = groups, c // groups, o_ch // groups
    dt = float_dtype(x, g)
    res_shape = (o_ch, cg) + tuple(kernel_size)
    if x.size == 0 or g.size == 0 or math.prod(res_shape) == 0:
        return np.zeros(res_shape, dt)
    kk = k[0] * k[1] * k[2]
    ll = osp[0] * osp[1] * osp[2]
    x5 = as_float(x, dt).reshape(x5s)
    g4 = as_float(g, dt).reshape(n, gr, og, ll)
    macs = n * gr * og * cg * kk * ll
    pointwise = _is_pointwise(k, s, p)
    blk = _block(n, c * kk * ll * dt.itemsize)
    partials: list[Array] = []  # one per thread; list.append is atomic

    def samples(start: int, stop: int) -> None:
        acc = np.zeros((gr, og, cg * kk), dt)
        for n0 in range(start, stop, blk):
            n1 = min(stop, n0 + blk)
            if pointwise:
                colsg = x5[n0:n1].reshape(n1 - n0, gr, cg, ll)
            else:
                cols = scratch((n1 - n0, c * kk, ll), dt)
                _im2col(x5[n0:n1], cols, k, s, p, d, osp)
                colsg = cols.reshape(n1 - n0, gr, cg * kk, ll)
            acc += np.matmul(g4[n0:n1], colsg.transpose(0, 1, 3, 2)).sum(axis=0)
        partials.append(acc)

    _by_samples(n, macs, samples)
    total = partials[0]
    for extra in partials[1:]:
        total += extra
    return total.reshape(res_shape)
