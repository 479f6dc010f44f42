"""Winograd F(2x2, 3x3): a 3x3, stride-1, undilated, ungrouped 2-d convolution with 2.25x fewer
multiplications than im2col.

Each 2x2 output tile is ``A^T [U * V] A`` with ``U = G g G^T`` (the 3x3 filter made 4x4) and
``V = B^T d B`` (the 4x4 input patch); summed over input channels, the sixteen products become
sixteen GEMMs ``M[k] = U[k][O, C] @ V[k][C, tiles]`` (:mod:`._numba_winograd` holds the transforms
and the notation). Per output element that is 16 * C / 4 = 4 C multiply-adds against im2col's 9 C,
and the output transform writes the NCHW result directly, with the bias added in the same pass.

Numerics: the input and output transforms are sums of up to 9 terms with coefficients +-1, the
filter transform has coefficients 1/2 and 1/4, so the rounding error is a small multiple of the
direct sum's (the tests bound it against a float64 reference). Non-finite values are *not*
kept where they belong: a transform subtracts neighbours, so an ``inf`` in a patch turns whole
tiles into NaN. So the output transform also reports whether everything it computed is finite,
which is so exactly when ``x`` and ``w`` are finite and nothing overflowed; otherwise the caller
(:mod:`.convolution`) computes the convolution again by im2col. (Checking ``x`` and ``w`` beforehand
cost a full read of ``x``, 0.5-0.7 ms of a 15-30 ms b8 64->64 56x56 forward, on one thread.)

Work is done in blocks of samples whose transformed inputs fit in
:data:`.convolution.COLS_BLOCK_BYTES`, as many blocks for each CPU (:func:`.threads.cpu_threads`, not the
thread setting, so the blocks are the same at any setting). Several blocks are split over the kernel threads
(:func:`.threads.run_blas_chunks`: each thread runs whole blocks, its GEMMs on one OpenBLAS thread; every
output element is computed alike on any thread, so the result is bitwise the one-thread result); a single
block runs on the calling thread, its GEMMs with OpenBLAS's threads as :mod:`.threads` decides.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._support import Array, jitted, scratch
from .threads import blas_chunks, blas_threads_for, chunk_bounds, cpu_threads, run_blas_chunks

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
"""The filter transform ``G`` (4x3)."""

MIN_CHANNELS = 32
"""Fewer input or output channels than this keep im2col: the GEMMs would be too thin for BLAS to run
near its peak and the transforms would cost more than the multiplications saved (measured: the
benchmark CNN's 16 -> 32 channels on 13x13, batch 64, took 4.0 ms by Winograd against 2.5 ms by
im2col, one thread; 64 -> 64 on 56x56, batch 8: 24.5 against 34-38 ms)."""

MIN_OUTPUT_SIZE = 16
"""Smaller output planes keep im2col: the partial tiles at the edges and the transforms' per-plane
overhead outweigh the saving (measured, one thread, Winograd against im2col: 256 -> 256 channels
on 7x7, batch 8: 19.4 against 8.8 ms; 128 -> 128 on 14x14: 8.4-10.1 against 9.1-9.6 ms; 64 -> 64
on 16x16, batch 16: 6.3-6.8 against 7.2-7.5 ms; 128 -> 128 on 28x28, batch 8: 22.6-22.9 against
29.2-32.5 ms)."""



def _nw() -> Any:
    """The jitted transforms (imports numba on first use)."""
    return jitted("_numba_winograd")


def applies(cx: int, cy: int, k: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...], groups: int,
            depth: int, out_hw: tuple[int, int]) -> bool:
    """Whether a convolution of ``cx`` to ``cy`` channels with these 3-d parameters (``depth``: the
    input's depth, 1 for a 2-d convolution; ``out_hw``: its output height and width) takes the
    Winograd path: a 2-d 3x3 kernel, stride 1, dilation 1, one group, at least
    :data:`MIN_CHANNELS` input and output channels and an output of at least
    :data:`MIN_OUTPUT_SIZE` in both spatial dims."""
    return (k == (1, 3, 3) and s == (1, 1, 1) and d == (1, 1, 1) and groups == 1 and depth == 1
            and min(cx, cy) >= MIN_CHANNELS and min(out_hw) >= MIN_OUTPUT_SIZE)


def filter_transform(w: Array) -> Array:
    """``U[16, O, C]`` from ``w[O, C, 3, 3]``: component ``4 a + b`` is ``(G w G^T)[a, b]``.

    One jitted pass (:func:`._numba_winograd.filter_tiles`), no BLAS call: an ``einsum`` here ran a GEMM
    on OpenBLAS's threads, whose workers then spun (yielding) while the blocks' split ran on the kernel
    threads, and the blocks' GEMMs took twice as long (b8 128 -> 128 channels on 28x28 at two threads,
    one process: 24-25 ms a call against 11 ms with the transform made beforehand). The ``einsum`` took
    0.65 / 1.8 / 11.3 ms for 64 / 128 / 256 channels."""
    o_ch, c = w.shape[0], w.shape[1]
    u = np.empty((16, o_ch, c), w.dtype)
    _nw().filter_tiles(np.ascontiguousarray(w).reshape(o_ch * c, 9), u.reshape(16, o_ch * c))
    return u


def conv3x3(x: Array, w: Array, bias: Array | None, padding: tuple[int, int], y: Array,
            block_bytes: int) -> bool:
    """``y[N, O, OH, OW] = conv(x[N, C, H, W], w[O, C, 3, 3]) (+ bias[O])``, stride 1, zero padding
    ``padding`` (rows, columns); all arrays C-contiguous of one float dtype. Returns whether every value
    it computed is finite (:func:`._numba_winograd.output_tiles`). When not, ``y`` holds no meaningful
    result: ``x`` or ``w`` has a non-finite value (whose effect the transforms spread over whole tiles) or
    an intermediate overflowed, and the caller must compute the convolution another way."""
    n, c = x.shape[0], x.shape[1]
    o_ch, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    th, tw = -(-oh // 2), -(-ow // 2)
    dt = x.dtype
    u = filter_transform(w)
    b = np.zeros(o_ch, dt) if bias is None else bias
    per_sample = 16 * max(c, o_ch) * th * (tw + 1) * dt.itemsize
    count = max(1, min(n, -(-n * per_sample // block_bytes)))
    # as many blocks for each CPU (3 blocks on 2 threads take as long as 4); the CPUs, not the thread
    # setting, so that the blocks, and so the bits, are the same at any setting
    if count > 1:
        cpus = cpu_threads()
        count = min(n, -(-count // cpus) * cpus)
    bounds = chunk_bounds(count, n)
    nw = _nw()
    finite = [True] * count

    def blocks(i0: int, i1: int) -> None:
        for i in range(i0, i1):
            n0, n1 = bounds[i], bounds[i + 1]
            tiles = (n1 - n0) * th * (tw + 1)
            v = scratch((16, c, tiles), dt, slot=0)  # per thread
            nw.input_tiles(x, v, padding[0], padding[1], th, tw, n0, n1)
            m = scratch((16, o_ch, tiles), dt, slot=1)
            with blas_threads_for(o_ch * c * tiles, 16), np.errstate(all="ignore"):
                np.matmul(u, v, out=m)
            finite[i] = nw.output_tiles(m, b, y, th, tw, n0, n1)

    # several blocks: a chunk of them per kernel thread (OpenBLAS held to one thread); one block keeps
    # the GEMM's own thread setting
    split = blas_chunks(count, 16 * o_ch * c * n * th * (tw + 1))
    if len(split) > 2:
        run_blas_chunks(split, blocks)
    else:
        blocks(0, count)
    return all(finite)
