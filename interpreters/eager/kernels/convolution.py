"""Convolution, its input gradient (``conv_transpose``) and its weight gradient.

All spatial ranks share the 3-d kernels: ``x[N, C, *spatial]`` is viewed as ``[N, C, D, H, W]``
with size-1 leading dims (kernel 1, stride 1, padding 0, dilation 1 there). Each of the three
operations is one of two directions through the same convolution ``Y = conv(X, W)``: ``X[N, Cx,
*big]``, ``W[Cy, Cx/groups, *k]``, ``Y[N, Cy, *small]``; ``conv`` computes ``Y``,
``conv_transpose`` (given ``Y``) the adjoint into ``X``, ``conv_weight_grad`` the adjoint into ``W``.

Two strategies:

* **Stride 1, wide GEMM** (one sample, or groups). With the (zero-padded) input planes flattened, output
  position ``q`` and kernel tap ``t`` read the input at ``q + offset[t]`` (see
  ``_numba_kernels``: the rows' tails are *gaps*, computed and dropped). So the columns of
  im2col are one contiguous copy per (channel, tap, sample): ``cols[C*K, samples*Lw]`` (``Lw``
  wide positions per sample), built by contiguous copies, and each group is **one** GEMM over a
  whole block of samples: forward ``W[Cy, Cx*K] @ cols``, weight gradient ``Y^T @ cols^T``, input
  gradient ``W^T @ Y`` into columns then added back at the taps' offsets. A wide GEMM keeps BLAS
  near its peak and lets OpenBLAS use its threads (:mod:`.threads`); the price is converting
  between ``[samples, C, grid]`` and ``[C, samples, Lw]`` (one pass each way). Gaps are exactly 0
  wherever they are summed, so non-finite inputs never leak into other entries (they are zeroed
  explicitly only when an operand holds inf or NaN: a finite value times a zero gap is already 0).
* **Strided** (any stride above 1): a numba im2col walk writes the same ``cols[C*K, samples*L]``
  layout (no gaps), then the same wide GEMMs, and col2im for the input gradient.

Columns, padded planes and transposed blocks live in reused per-thread scratch buffers; a block of
samples holds at most :data:`COLS_BLOCK_BYTES` of columns, so memory stays bounded for large
batches. The forward and the input gradient run on the calling thread, with OpenBLAS's threads in the
GEMMs; the weight gradient's blocks (and Winograd's, :mod:`.winograd`) are split over the kernel threads,
each block's GEMM on one OpenBLAS thread.

* **Stride 1, in cache** (the common case: one group, and either GEMMs that would run on one
  OpenBLAS thread anyway or enough samples to split over the kernel threads, :func:`_gemm_for_fused`):
  the same columns and GEMMs, but one jitted call (:mod:`._numba_conv`) per chunk of samples runs the
  convolution in blocks of samples small enough that their columns stay in the L2 cache
  (:data:`FUSED_BLOCK_BYTES`; at least one sample), calling OpenBLAS's ``gemm`` from the
  jitted code; the layout passes read and write cache instead of memory, the bias is added in the
  output write, and the backward computes the input gradient, the weight gradient and the bias
  gradient (a sum in the cotangent's read) from one read of the cotangent. Measured on the benchmark
  CNN's layers (batch 64, one thread): forward with bias 1->16 channels on 28x28 0.45-0.5 ms against
  0.79 ms by the wide GEMM; 16->32 on 13x13 1.26-1.33 ms against 1.65 ms. The forward builds its
  columns at the output positions only (no gaps for the GEMM to compute and the output write to skip),
  each short row moved in whole 64-byte chunks (:func:`._numba_conv.forward_output_blocks`): 16->32 on
  13x13 1.13-1.15 ms against 1.31 ms for the wide columns, 1->16 on 28x28 0.40 against 0.43 ms.

Direct numba kernels for few input channels (one vectorised pass per input plane, output plane and
tap over the wide positions) were tried for the first layer of the benchmark CNN (1 -> 16 channels,
28x28, batch 64) and not kept: with the flat im2col (nine contiguous copies of the input) the wide
GEMM path was as fast or faster (forward 0.9 ms against 0.85-1.05 ms, weight gradient 1.3 against
1.6 ms, one thread; PyTorch: 4.5 and 2.3-2.7 ms).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._support import Array, all_finite, as_float, float_dtype, jitted, nb, scratch
from . import _blas, winograd
from .threads import (BLAS_THREADED_MIN_MACS, active_blas_threads, active_threads, blas_chunks, blas_threads_for,
                      chunk_bounds, cpu_threads, run_blas_chunks)

COLS_BLOCK_BYTES = 8 << 20
"""Upper bound on one block's column buffer; larger batches are processed in blocks of samples."""

FUSED_BLOCK_BYTES = 192 << 10
"""The in-cache path's block of samples holds about this many bytes of columns (at least one sample):
well inside a 512 KiB L2 cache. (Measured on the 16->32 channel layer: blocks of 1-2 samples,
79-158 KiB, 1.26-1.33 ms; 4-8 samples 1.27-1.8 ms; all 64 samples at once, 5 MiB, 1.4-2.1 ms.)"""

Triple = tuple[int, int, int]
Shape5 = tuple[int, int, int, int, int]


@dataclass(frozen=True)
class _Conv:
    """One convolution ``Y[N, Cy, *small] = conv(X[N, Cx, *big], W[Cy, Cx/groups, *k])`` in 3-d form."""

    n: int
    cx: int
    cy: int
    groups: int
    big: Triple
    small: Triple
    k: Triple
    s: Triple
    p: Triple
    d: Triple

    @property
    def taps(self) -> int:
        return self.k[0] * self.k[1] * self.k[2]

    @property
    def cxg(self) -> int:
        return self.cx // self.groups

    @property
    def cyg(self) -> int:
        return self.cy // self.groups

    @property
    def stride1(self) -> bool:
        return self.s == (1, 1, 1)

    @functools.cached_property
    def padded(self) -> Triple:
        b, p = self.big, self.p
        return (b[0] + 2 * p[0], b[1] + 2 * p[1], b[2] + 2 * p[2])

    @functools.cached_property
    def wide(self) -> int:
        """Wide positions per sample (stride 1): up to the last output position of the padded plane."""
        (_, hp, wp), (od, oh, ow) = self.padded, self.small
        return ((od - 1) * hp + oh - 1) * wp + ow

    @property
    def columns(self) -> int:
        """Column positions per sample: wide positions (stride 1) or output positions (strided)."""
        return self.wide if self.stride1 else math.prod(self.small)

    @functools.cached_property
    def tap_offsets(self) -> Array:
        """Each tap's offset in the flattened padded plane (taps in row-major order; read-only)."""
        (_, hp, wp), (kd, kh, kw), (dd, dh, dw) = self.padded, self.k, self.d
        offs = np.array([(a * dd * hp + b * dh) * wp + e * dw
                         for a in range(kd) for b in range(kh) for e in range(kw)], np.int64)
        offs.flags.writeable = False
        return offs

    def blocks(self, itemsize: int) -> list[tuple[int, int]]:
        """Sample ranges of about equal size whose columns fit in :data:`COLS_BLOCK_BYTES` each."""
        per_sample = self.cx * self.taps * self.columns * itemsize
        count = max(1, min(self.n, -(-self.n * per_sample // COLS_BLOCK_BYTES)))
        bounds = chunk_bounds(count, self.n)
        return [(bounds[i], bounds[i + 1]) for i in range(count)]

    def sample_bytes(self, itemsize: int) -> int:
        """The in-cache path's columns (or output rows) of one sample, in bytes."""
        return max(self.cx * self.taps, self.cy) * self.wide * itemsize

    def output_block(self, itemsize: int) -> int:
        """Samples per block of the in-cache forward, whose columns are at the output positions only:
        about :data:`FUSED_BLOCK_BYTES` of them, at least one sample, and at least one block for each CPU
        (:func:`.threads.cpu_threads`, not the thread setting: the blocks, hence the GEMMs and their bits,
        are the same at any setting)."""
        per_sample = self.cx * self.taps * math.prod(self.small) * itemsize
        return max(1, min(-(-self.n // cpu_threads()), FUSED_BLOCK_BYTES // per_sample))

    def fused_block(self, itemsize: int) -> int:
        """Samples per block of the in-cache path (see :data:`FUSED_BLOCK_BYTES`)."""
        return max(1, min(self.n, FUSED_BLOCK_BYTES // self.sample_bytes(itemsize)))

    def gemm_context(self, m: int) -> Any:
        """The BLAS thread setting for this conv's GEMMs over ``m`` samples (one per group)."""
        return blas_threads_for(self.cyg * self.cxg * self.taps * m * self.columns, self.groups)


# ---- argument checking ---------------------------------------------------------------------------

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


@functools.lru_cache(maxsize=512)
def _geometry(name: str, x_shape: tuple[int, ...], c_out: int, kernel_size: tuple[int, ...], groups: int,
              stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...]) -> tuple[_Conv, Shape5]:
    """The convolution of an ``x`` of ``x_shape`` to ``c_out`` channels with these parameters, in 3-d form,
    and ``x``'s 5-d shape; raises ``ValueError`` (naming ``name``) for parameters of the wrong length or
    range. Cached: a layer asks with the same shapes on every call, and working this out cost more than
    a small convolution's arithmetic."""
    nsp = len(x_shape) - 2
    t = _triples(name, nsp, stride=stride, padding=padding, dilation=dilation, kernel_size=kernel_size)
    k, s, p, d = t["kernel_size"], t["stride"], t["padding"], t["dilation"]
    if min(s) < 1 or min(d) < 1 or min(p) < 0:
        raise ValueError(f"{name}: need stride >= 1, dilation >= 1, padding >= 0; got {stride}, {dilation}, {padding}")
    x5s = _shape5(x_shape, nsp)
    osp = _conv_spatial(x5s, k, s, p, d)
    return _Conv(x_shape[0], x_shape[1], c_out, groups, (x5s[2], x5s[3], x5s[4]), osp, k, s, p, d), x5s


# ---- layouts -------------------------------------------------------------------------------------

def _padded_planes(cv: _Conv, x5: Array, slot: int) -> Array:
    """``x5[m, C, D, H, W]`` zero-padded by ``cv.p`` and flattened per plane: ``[m, C, P]`` (a view
    when there is no padding)."""
    m, c = x5.shape[0], x5.shape[1]
    if cv.p == (0, 0, 0):
        return x5.reshape(m, c, -1)
    (dp, hp, wp), (pd, ph, pw), (d, h, w) = cv.padded, cv.p, cv.big
    buf = scratch((m, c, dp, hp, wp), x5.dtype, slot=slot)
    buf.fill(0)
    buf[:, :, pd:pd + d, ph:ph + h, pw:pw + w] = x5
    return buf.reshape(m, c, dp * hp * wp)


def _unpad(cv: _Conv, planes: Array, out5: Array) -> None:
    """``out5[m, C, D, H, W]`` = the interior of the padded flat ``planes[m, C, P]``."""
    (pd, ph, pw), (d, h, w) = cv.p, cv.big
    padded = planes.reshape(planes.shape[:2] + cv.padded)
    np.copyto(out5, padded[:, :, pd:pd + d, ph:ph + h, pw:pw + w])


def _taps_to_cols(cv: _Conv, planes: Array, cols: Array) -> None:
    """``cols[C, K, m, Lw]``: each tap's wide positions of the flat ``planes[m, C, P]``."""
    nb().taps_to_cols(planes, cv.tap_offsets, cols)


def _cols_to_taps(cv: _Conv, cols: Array, planes: Array) -> None:
    """The adjoint of :func:`_taps_to_cols`: ``planes[m, C, P] +=`` each tap's columns at its offset."""
    nb().cols_to_taps(cols, cv.tap_offsets, planes)


def _zero_gaps(cv: _Conv, wide: Array) -> None:
    """Set the gaps of ``wide[..., Lw]`` to 0."""
    (_, hp, wp), (od, oh, ow) = cv.padded, cv.small
    nb().zero_gaps(wide.reshape(-1, wide.shape[-1]), od, oh, ow, hp, wp)


def _small_to_columns(cv: _Conv, y5: Array, slot: int) -> Array:
    """``Y[m, Cy, *small]`` in the columns' layout ``[Cy, m, columns]`` (stride 1: gaps 0)."""
    m = y5.shape[0]
    out = scratch((cv.cy, m, cv.columns), y5.dtype, slot=slot)
    if cv.stride1:
        nb().grid_to_wide(y5, out, cv.padded[1], cv.padded[2])
    else:
        np.copyto(out, y5.reshape(m, cv.cy, -1).transpose(1, 0, 2))
    return out


def _columns_to_small(cv: _Conv, cols: Array, y5: Array) -> None:
    """``Y[m, Cy, *small]`` from ``cols[Cy, m, columns]`` (the inverse of :func:`_small_to_columns`)."""
    if cv.stride1:
        nb().wide_to_grid(cols, y5, cv.padded[1], cv.padded[2])
    else:
        np.copyto(y5.reshape(y5.shape[0], cv.cy, -1), cols.transpose(1, 0, 2))


def _im2col(cv: _Conv, x5: Array, cols: Array, finite: bool) -> None:
    """``cols[Cx*K, m, columns]`` from ``x5[m, Cx, D, H, W]`` (stride 1: the flat taps; their gaps
    hold input values, set to 0 unless ``finite``: a finite value times the other operand's zero
    gap adds exactly 0)."""
    if cv.stride1:
        _taps_to_cols(cv, _padded_planes(cv, x5, slot=2), cols.reshape(cv.cx, cv.taps, x5.shape[0], -1))
        if not finite:
            _zero_gaps(cv, cols)
    else:
        nb().im2col(x5, cols, *cv.k, *cv.s, *cv.p, *cv.d, *cv.small, 0, x5.shape[0])


# ---- stride 1, in cache ----------------------------------------------------------------------------

def _nc() -> Any:
    """The jitted in-cache convolution (imports numba on first use)."""
    return jitted("_numba_conv")


def _macs(cv: _Conv) -> int:
    """The multiply-adds of the in-cache path's GEMMs for one pass over every sample."""
    return cv.cy * cv.cx * cv.taps * cv.n * cv.wide


def _gemm_for_fused(cv: _Conv, dt: np.dtype[Any]) -> int | None:
    """The CBLAS ``gemm`` address the in-cache path calls, when it applies: stride 1, one group, and
    either GEMMs that would run on one OpenBLAS thread anyway (OpenBLAS at one thread, or a convolution
    below :data:`.threads.BLAS_THREADED_MIN_MACS` multiply-adds) or enough samples to give every thread
    its own (:func:`.threads.blas_chunks`) whose columns (or output rows) fit in :data:`COLS_BLOCK_BYTES`
    (each thread holds one sample's). ``None`` otherwise: a single sample, or larger ones, take the wide
    GEMM on OpenBLAS's threads (its blocks of samples share one buffer of that size). Cached per
    convolution, dtype and thread counts.

    Large samples used to take the wide GEMM too (ResNet-sized planes: 54-59 ms against 37-42 ms for a
    b8 64->64 56x56 forward and backward), until the kernel threads claimed their OpenBLAS buffers at
    import (:func:`.threads.claim_blas_buffers`); since then the split is faster at two threads, each way
    in its own process, medians of 10-25: backward (all three gradients) of b8 64->64 56x56 33-34 ms
    against 38-39 ms, of b8 128->128 28x28 48-50 against 50-59 ms, of b8 16->32 56x56 4.4-4.9 against
    12-15 ms; forward of b8 16->32 56x56 2.5 against 4.5-6.3 ms, of 1x1 16->64 on 28x28, batch 32,
    0.91-1.02 against 2.67 ms, of 3->64 on 64x64, batch 16, 3.1-4.0 against 7.8-9.5 ms."""
    if not cv.stride1 or cv.groups != 1:
        return None
    return _fused_gemm(cv, dt, active_blas_threads(), active_threads())


@functools.lru_cache(maxsize=512)
def _fused_gemm(cv: _Conv, dt: np.dtype[Any], blas_threads: int, threads: int) -> int | None:
    """:func:`_gemm_for_fused` for a stride-1 ungrouped ``cv`` at these thread counts (``threads`` is
    what :func:`.threads.blas_chunks` reads)."""
    macs = _macs(cv)
    if macs >= BLAS_THREADED_MIN_MACS and blas_threads > 1 and (
            cv.sample_bytes(dt.itemsize) > COLS_BLOCK_BYTES or len(blas_chunks(cv.n, macs)) <= 2):
        return None
    return _blas.gemm_address(dt.name)


def _pad_buffer(cv: _Conv, m: int, dt: np.dtype[Any]) -> Array:
    """The padded planes of a block (``[m, C, *padded]``; no samples when there is no padding: the
    kernels read only its shape)."""
    return scratch((m if cv.p != (0, 0, 0) else 0, cv.cx) + cv.padded, dt, slot=2)


def _fused_forward(cv: _Conv, gemm: int, x5: Array, w: Array, bias: Array | None, y5: Array) -> None:
    """``y5 = conv(x5, w) (+ bias)`` by :func:`._numba_conv.forward_output_blocks`, whole blocks of samples
    split over the threads (:func:`.threads.run_blas_chunks`): the same blocks, hence the same GEMMs and
    bits, at any thread count."""
    dt = x5.dtype
    m = cv.output_block(dt.itemsize)
    b = np.empty(0, dt) if bias is None else bias
    w2 = w.reshape(cv.cy, cv.cx * cv.taps)
    slack = _nc().MOVE_BYTES // dt.itemsize
    positions = math.prod(cv.small)

    def blocks(b0: int, b1: int) -> None:
        n0, n1 = b0 * m, min(b1 * m, cv.n)
        cols = scratch((cv.cx * cv.taps * m * positions + slack,), dt, slot=0)  # per thread
        out = scratch((cv.cy * m * positions,), dt, slot=1)
        _nc().forward_output_blocks(gemm, x5[n0:n1], w2, b, *cv.k, *cv.d, *cv.p, m, y5[n0:n1],
                                    _pad_buffer(cv, m, dt), cols, out)
    run_blas_chunks(blas_chunks(-(-cv.n // m), _macs(cv)), blocks)


def _fused_backward(cv: _Conv, gemm: int, x5: Array | None, w: Array, g5: Array, dx5: Array | None,
                    dw: Array | None, db: Array | None) -> None:
    """By :func:`._numba_conv.backward`: ``dx5 =`` the input gradient (when given), ``dw`` (zeroed,
    ``[Cy, Cx K]``) and ``db`` (zeroed, ``[Cy]``) ``+=`` the weight and bias gradients (when given);
    ``x5`` is needed only for ``dw``."""
    dt = g5.dtype
    m = cv.fused_block(dt.itemsize)
    empty5 = np.empty((0, cv.cx) + cv.big, dt)
    x_in = x5 if dw is not None and x5 is not None else (dx5 if dx5 is not None else empty5)
    x_finite = dw is None or all_finite(x_in)
    w_finite = dx5 is None or all_finite(w)
    w2, offs = w.reshape(cv.cy, cv.cx * cv.taps), cv.tap_offsets
    dx_all = empty5 if dx5 is None else dx5
    bounds = blas_chunks(cv.n, _macs(cv) * 2)
    # the first chunk adds into dw and db; each other chunk into its own zeroed copy, summed after
    extra = len(bounds) - 2
    no_dw, no_db = np.empty((0, 0), dt), np.empty(0, dt)
    dws = [no_dw if dw is None else dw] + [no_dw if dw is None else np.zeros_like(dw) for _ in range(extra)]
    dbs = [no_db if db is None else db] + [no_db if db is None else np.zeros_like(db) for _ in range(extra)]

    def samples(n0: int, n1: int) -> None:
        t = bounds.index(n0)
        gw = scratch((cv.cy * m * cv.wide,), dt, slot=1)  # per thread
        cols = scratch((cv.cx * cv.taps * m * cv.wide,), dt, slot=0)
        sums = np.empty(dbs[t].shape[0], np.float64)  # the bias gradient's float64 accumulators
        _nc().backward(gemm, x_in[n0:n1], w2, g5[n0:n1], offs, *cv.p, cv.wide, m, x_finite, w_finite,
                       dx_all[n0:n1], dws[t], dbs[t], _pad_buffer(cv, m, dt), gw, cols, sums)
    run_blas_chunks(bounds, samples)
    for part in dws[1:] if dw is not None else ():
        dw += part
    for part in dbs[1:] if db is not None else ():
        db += part


# ---- the three operations ------------------------------------------------------------------------

def _forward(cv: _Conv, x5: Array, w: Array, y5: Array) -> None:
    """``y5 = conv(x5, w)``."""
    wg = w.reshape(cv.groups, cv.cyg, cv.cxg * cv.taps)
    for n0, n1 in cv.blocks(x5.dtype.itemsize):
        m = n1 - n0
        cols = scratch((cv.cx * cv.taps, m, cv.columns), x5.dtype, slot=0)
        _im2col(cv, x5[n0:n1], cols, finite=True)  # the forward drops the gaps: no need to zero them
        y = scratch((cv.groups, cv.cyg, m * cv.columns), x5.dtype, slot=1)
        with cv.gemm_context(m), np.errstate(all="ignore"):
            np.matmul(wg, cols.reshape(cv.groups, cv.cxg * cv.taps, m * cv.columns), out=y)
        _columns_to_small(cv, y.reshape(cv.cy, m, cv.columns), y5[n0:n1])


def _input_grad(cv: _Conv, y5: Array, w: Array, x5: Array) -> None:
    """``x5 (zeroed) +=`` the adjoint of ``conv(., w)`` applied to ``y5``."""
    padded = cv.stride1 and cv.p != (0, 0, 0)
    if padded:  # accumulate into zero-padded planes, then keep their interior
        planes = scratch((cv.n, cv.cx, math.prod(cv.padded)), x5.dtype, slot=3)
        planes.fill(0)
    else:
        planes = x5.reshape(cv.n, cv.cx, -1)
    wt = w.reshape(cv.groups, cv.cyg, cv.cxg * cv.taps).transpose(0, 2, 1)  # [g, Cx/g*K, Cy/g]
    w_finite = cv.stride1 and all_finite(w)
    for n0, n1 in cv.blocks(x5.dtype.itemsize):
        m = n1 - n0
        ycols = _small_to_columns(cv, y5[n0:n1], slot=1)
        cols = scratch((cv.cx * cv.taps, m, cv.columns), x5.dtype, slot=0)
        with cv.gemm_context(m), np.errstate(all="ignore"):
            np.matmul(wt, ycols.reshape(cv.groups, cv.cyg, m * cv.columns),
                      out=cols.reshape(cv.groups, cv.cxg * cv.taps, m * cv.columns))
        if cv.stride1:
            if not w_finite:  # the gaps are W^T @ 0: exactly 0 unless w holds inf or NaN
                _zero_gaps(cv, cols)
            _cols_to_taps(cv, cols.reshape(cv.cx, cv.taps, m, -1), planes[n0:n1])
        else:
            nb().col2im(cols, x5[n0:n1], *cv.k, *cv.s, *cv.p, *cv.d, *cv.small, 0, m)
    if padded:
        _unpad(cv, planes, x5)


def _weight_grad(cv: _Conv, x5: Array, y5: Array) -> Array:
    """The adjoint of ``conv(x5, .)`` applied to ``y5``: ``[Cy, Cx/groups, K]``.

    Each block of samples gives its own product, and the products are summed in block order. Several
    blocks are split over the kernel threads (:func:`.threads.run_blas_chunks`), each block's GEMM on one
    OpenBLAS thread: bitwise the one-thread result (the same GEMMs, summed in the same order)."""
    dt = x5.dtype
    shape = (cv.groups, cv.cyg, cv.cxg * cv.taps)
    x_finite = cv.stride1 and all_finite(x5)
    blocks = cv.blocks(dt.itemsize)

    def product(n0: int, n1: int, out: Array) -> None:
        m = n1 - n0
        cols = scratch((cv.cx * cv.taps, m, cv.columns), dt, slot=0)
        _im2col(cv, x5[n0:n1], cols, x_finite)
        ycols = _small_to_columns(cv, y5[n0:n1], slot=1)
        with cv.gemm_context(m), np.errstate(all="ignore"):
            np.matmul(ycols.reshape(cv.groups, cv.cyg, m * cv.columns),
                      cols.reshape(cv.groups, cv.cxg * cv.taps, m * cv.columns).transpose(0, 2, 1), out=out)

    split = blas_chunks(len(blocks), cv.cyg * cv.cxg * cv.taps * cv.n * cv.columns * cv.groups)
    acc = np.zeros(shape, dt)
    if len(split) > 2:
        parts = np.empty((len(blocks),) + shape, dt)

        def chunk(i0: int, i1: int) -> None:
            for i in range(i0, i1):
                product(blocks[i][0], blocks[i][1], parts[i])
        run_blas_chunks(split, chunk)
        for part in parts:
            acc += part
    else:
        part = np.empty(shape, dt)
        for n0, n1 in blocks:
            product(n0, n1, part)
            acc += part
    return acc.reshape(cv.cy, cv.cxg, cv.taps)


def _winograd(cv: _Conv, x5: Array, w: Array, bias: Array | None, y5: Array) -> bool:
    """``y5 = conv(x5, w) (+ bias)`` by Winograd F(2x2, 3x3) when it applies (see :mod:`.winograd`: a 3x3
    2-d kernel, stride 1, no dilation, one group, enough channels, a large enough output); returns whether
    ``y5`` holds the result: not when the path does not apply, nor when ``x5`` or ``w`` has a non-finite
    value or an intermediate overflowed (Winograd's output is then not the convolution's: the caller
    computes it another way, overwriting ``y5``)."""
    if not winograd.applies(cv.cx, cv.cy, cv.k, cv.s, cv.d, cv.groups, cv.big[0], cv.small[1:]):
        return False
    n, oh, ow = cv.n, cv.small[1], cv.small[2]
    return winograd.conv3x3(x5.reshape(n, cv.cx, cv.big[1], cv.big[2]), w.reshape(cv.cy, cv.cx, 3, 3), bias,
                            (cv.p[1], cv.p[2]), y5.reshape(n, cv.cy, oh, ow), COLS_BLOCK_BYTES)


# ---- public kernels ------------------------------------------------------------------------------

def conv(x: Array, w: Array, *, stride: tuple[int, ...], padding: tuple[int, ...],
         dilation: tuple[int, ...], groups: int) -> Array:
    """Cross-correlation ``x[N, C, *in] * w[O, C/groups, *k] -> [N, O, *out]`` with
    ``out = (in + 2p - d(k-1) - 1)//s + 1`` (zero padding). No bias."""
    return conv_bias(x, w, None, stride=stride, padding=padding, dilation=dilation, groups=groups)


def conv_bias(x: Array, w: Array, b: Array | None, *, stride: tuple[int, ...], padding: tuple[int, ...],
              dilation: tuple[int, ...], groups: int) -> Array:
    """:func:`conv` plus ``b[O]`` on every output channel (``None``: no bias), added as the output is
    written where the path allows (Winograd, in cache)."""
    nsp = _check_common("conv", x, w, groups)
    n, c = x.shape[0], x.shape[1]
    o_ch = w.shape[0]
    if c % groups or o_ch % groups or w.shape[1] * groups != c:
        raise ValueError(f"conv: x{list(x.shape)} and w{list(w.shape)} do not fit groups={groups} "
                         f"(need C % groups == 0, O % groups == 0 and w.shape[1] == C/groups)")
    if b is not None and tuple(b.shape) != (o_ch,):
        raise ValueError(f"conv: bias must have shape ({o_ch},) for w{list(w.shape)}, got {tuple(b.shape)}")
    cv, x5s = _geometry("conv", x.shape, o_ch, tuple(w.shape[2:]), groups, tuple(stride), tuple(padding),
                        tuple(dilation))
    osp = cv.small
    dt = float_dtype(x, w) if b is None else float_dtype(x, w, b)
    out_shape = (n, o_ch) + osp[3 - nsp:]
    bf = None if b is None else as_float(b, dt)
    trivial = _trivial(x, w, out_shape, dt)
    if trivial is not None:
        if bf is not None and trivial.size:
            trivial += bf.reshape((o_ch,) + (1,) * nsp)
        return trivial
    out = np.empty(out_shape, dt)
    x5, wf, y5 = as_float(x, dt).reshape(x5s), as_float(w, dt), out.reshape((n, o_ch) + osp)
    if _winograd(cv, x5, wf, bf, y5):
        return out
    gemm = _gemm_for_fused(cv, dt)
    if gemm is not None:
        _fused_forward(cv, gemm, x5, wf, bf, y5)
        return out
    _forward(cv, x5, wf, y5)
    if bf is not None:
        y5 += bf.reshape(o_ch, 1, 1, 1)
    return out


def conv_transpose(x: Array, w: Array, *, stride: tuple[int, ...], padding: tuple[int, ...],
                   output_padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Array:
    """Transposed convolution ``x[N, C, *in], w[C, O/groups, *k] -> [N, O, *out]`` with
    ``out = (in-1)s - 2p + d(k-1) + output_padding + 1``: the adjoint (w.r.t. its input) of
    ``conv`` with the same weight."""
    nsp = _check_common("conv_transpose", x, w, groups)
    n, c = x.shape[0], x.shape[1]
    if c % groups or w.shape[0] != c:
        raise ValueError(f"conv_transpose: x{list(x.shape)} and w{list(w.shape)} do not fit groups={groups} "
                         f"(need C % groups == 0 and w.shape[0] == C)")
    o_ch = w.shape[1] * groups
    t = _triples("conv_transpose", nsp, stride=stride, padding=padding, output_padding=output_padding,
                 dilation=dilation, kernel_size=tuple(w.shape[2:]))
    k, s, p, op, d = t["kernel_size"], t["stride"], t["padding"], t["output_padding"], t["dilation"]
    if min(s) < 1 or min(d) < 1 or min(p) < 0 or min(op) < 0:
        raise ValueError(f"conv_transpose: need stride >= 1, dilation >= 1, padding >= 0, output_padding >= 0; "
                         f"got {stride}, {dilation}, {padding}, {output_padding}")
    x5s = _shape5(x.shape, nsp)
    isp = (x5s[2], x5s[3], x5s[4])
    o3 = tuple(max(0, (isp[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op[i] + 1) for i in range(3))
    osp = (o3[0], o3[1], o3[2])
    dt = float_dtype(x, w)
    out_shape = (n, o_ch) + osp[3 - nsp:]
    trivial = _trivial(x, w, out_shape, dt)
    if trivial is not None:
        return trivial
    x5, wf = as_float(x, dt).reshape(x5s), as_float(w, dt)
    fp = (k[0] - 1 - p[0], k[1] - 1 - p[1], k[2] - 1 - p[2])
    if op == (0, 0, 0) and min(fp) >= 0 and winograd.applies(c, o_ch, k, s, d, groups, isp[0], osp[1:]):
        # stride 1, one group: the conv of x with the flipped, transposed kernel and padding k - 1 - p
        flipped = np.ascontiguousarray(wf.reshape((c, o_ch) + k)[:, :, ::-1, ::-1, ::-1].transpose(1, 0, 2, 3, 4))
        full = _Conv(n, c, o_ch, groups, isp, osp, k, s, fp, d)
        out = np.empty(out_shape, dt)
        if _winograd(full, x5, flipped, None, out.reshape((n, o_ch) + osp)):
            return out
    # the conv whose input gradient this is maps O channels (size osp) to C channels (size isp)
    cv = _Conv(n, o_ch, c, groups, osp, isp, k, s, p, d)
    gemm = _gemm_for_fused(cv, dt)
    if gemm is not None:
        out = np.empty(out_shape, dt)
        _fused_backward(cv, gemm, None, wf, x5, out.reshape((n, o_ch) + osp), None, None)
        return out
    out = np.zeros(out_shape, dt)
    _input_grad(cv, x5, wf, out.reshape((n, o_ch) + osp))
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
    dt = float_dtype(x, g)
    res_shape = (o_ch, c // groups) + tuple(kernel_size)
    if x.size == 0 or g.size == 0 or math.prod(res_shape) == 0:
        return np.zeros(res_shape, dt)
    cv = _Conv(n, c, o_ch, groups, (x5s[2], x5s[3], x5s[4]), osp, k, s, p, d)
    x5, g5 = as_float(x, dt).reshape(x5s), as_float(g, dt).reshape((n, o_ch) + osp)
    gemm = _gemm_for_fused(cv, dt)
    if gemm is not None:
        dw = np.zeros((o_ch, c * cv.taps), dt)
        _fused_backward(cv, gemm, x5, dw, g5, None, dw, None)  # w is read only for the input gradient
        return dw.reshape(res_shape)
    return _weight_grad(cv, x5, g5).reshape(res_shape)


def conv_backward(x: Array, w: Array, g: Array, need_x: bool, need_w: bool, need_b: bool, *,
                  stride: tuple[int, ...], padding: tuple[int, ...], dilation: tuple[int, ...],
                  groups: int) -> tuple[Array | None, Array | None, Array | None] | None:
    """The gradients of ``conv_bias(x, w, b)`` for the cotangent ``g`` from one read of ``g``: the input
    gradient (``conv_transpose``), the weight gradient (``conv_weight_grad``) and the bias gradient (``g``
    summed over all axes but the channels), each only when needed (``None`` otherwise). ``x``, ``w``, ``g``
    are arrays of one float dtype and the shapes of a valid convolution. Returns ``None`` when the
    in-cache path does not apply (then the caller composes :func:`conv_transpose`,
    :func:`conv_weight_grad` and a sum)."""
    nsp = x.ndim - 2
    n, c, o_ch = x.shape[0], x.shape[1], w.shape[0]
    cv, x5s = _geometry("conv", x.shape, o_ch, tuple(w.shape[2:]), groups, tuple(stride), tuple(padding),
                        tuple(dilation))
    k, s, p, d, osp = cv.k, cv.s, cv.p, cv.d, cv.small
    dt = g.dtype
    gemm = _gemm_for_fused(cv, dt) if x.size and w.size and g.size else None
    if gemm is None:
        return None
    dx = None
    if need_x and min(k[i] - 1 - p[i] for i in range(3)) >= 0 \
            and winograd.applies(o_ch, c, k, s, d, groups, osp[0], cv.big[1:]):
        # many channels: the input gradient by Winograd (conv_transpose takes it when g and w are finite)
        dx = conv_transpose(g, w, stride=stride, padding=padding, output_padding=(0,) * nsp, dilation=dilation,
                            groups=groups)
        need_x = False
        if not (need_w or need_b):
            return dx, None, None
    if need_x:
        dx = np.empty(x.shape, dt)
    dw = np.zeros((o_ch, c * cv.taps), dt) if need_w else None
    db = np.zeros(o_ch, dt) if need_b else None
    _fused_backward(cv, gemm, as_float(x, dt).reshape(x5s), as_float(w, dt), as_float(g, dt).reshape((n, o_ch) + osp),
                    dx.reshape(x5s) if need_x and dx is not None else None, dw, db)
    return dx, None if dw is None else dw.reshape(w.shape), db
