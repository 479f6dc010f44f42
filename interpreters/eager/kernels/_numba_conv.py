"""The jitted stride-1 convolution that keeps each block of samples in cache (:mod:`.convolution`
is the wrapper and explains the flat-plane layout: tap ``t`` of output position ``q`` reads the
flattened, zero-padded input plane at ``q + offs[t]``; positions that are not outputs are *gaps*).

One call runs a whole convolution: for each block of ``m`` samples it builds the block's columns
``cols[C*K, m*Lw]`` (``Lw`` wide positions per sample), multiplies them through OpenBLAS's ``gemm``
(called from the jitted code through its C API, :func:`_gemm`), and writes the result into its final
layout (adding the bias, or summing the bias gradient, in the same pass). A block's columns fit in
the L2 cache, so the copies around the GEMM never go to memory, and no Python runs between blocks.
The forward (:func:`forward_output_blocks`) builds each block's columns at the output positions only
(no gaps), moving each short row in whole 64-byte chunks; the backward keeps the wide positions.

Importing this module imports numba; :mod:`.convolution` imports it on first use. Kept apart from
``_numba_kernels``: it depends on nothing there.

The ``gemm`` argument is the address of a CBLAS ``?gemm`` with 64-bit integers
(:func:`._blas.gemm_address`) of the arrays' dtype; the address is an argument, not a constant, so
the compiled kernels stay in numba's on-disk cache.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir  # type: ignore[import-untyped]
from . import _numba_start  # noqa: F401  (numba's CPU target started without scipy.linalg)
import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic

_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
"""The CBLAS enumerations (``CblasRowMajor``, ``CblasNoTrans``, ``CblasTrans``)."""


def _jit(f: Any) -> Any:
    return numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy")(f)


def _inline(f: Any) -> Any:
    return numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy", inline="always")(f)


def _gemm_typer(typingctx: Any, address: Any, trans_a: Any, trans_b: Any, m: Any, n: Any, k: Any, a: Any, lda: Any,
                b: Any, ldb: Any, c: Any, ldc: Any, accumulate: Any) -> Any:
    """``c = op(a) @ op(b)`` (``c +=`` when ``accumulate``), row-major, by the CBLAS ``gemm`` at
    ``address``: ``op(a)`` is ``m x k``, ``op(b)`` ``k x n``; ``a``, ``b``, ``c`` are C-contiguous arrays of
    one float dtype whose first element is the matrix's first element; ``lda``, ``ldb``, ``ldc`` their
    row strides in elements."""
    if not (isinstance(a, types.Array) and isinstance(a.dtype, types.Float) and b.dtype == a.dtype
            and c.dtype == a.dtype):
        return None
    sig = types.void(address, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, accumulate)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        i32, i64, ptr = ir.IntType(32), ir.IntType(64), ir.IntType(8).as_pointer()
        real = context.get_value_type(a.dtype)
        fnty = ir.FunctionType(ir.VoidType(), [i32, i32, i32, i64, i64, i64, real, ptr, i64, ptr, i64, real,
                                               ptr, i64])
        (addr, ta, tb, mm, nn, kk, aa, la, bb, lb, cc, lc, acc) = args

        def integer(v: Any, width: Any) -> Any:
            if v.type.width == width.width:
                return v
            return builder.trunc(v, width) if v.type.width > width.width else builder.sext(v, width)

        def data(arr: Any, ty: Any) -> Any:
            return builder.bitcast(context.make_array(ty)(context, builder, arr).data, ptr)

        one = ir.Constant(real, 1.0)
        beta = builder.select(builder.icmp_unsigned("!=", acc, ir.Constant(acc.type, 0)), one,
                              ir.Constant(real, 0.0))
        fn = builder.inttoptr(integer(addr, i64), fnty.as_pointer())
        builder.call(fn, [ir.Constant(i32, ROW_MAJOR), integer(ta, i32), integer(tb, i32), integer(mm, i64),
                          integer(nn, i64), integer(kk, i64), one, data(aa, a), integer(la, i64), data(bb, b),
                          integer(lb, i64), beta, data(cc, c), integer(lc, i64)])
        return context.get_dummy_value()

    return sig, codegen


_gemm: Any = intrinsic(_gemm_typer)


MOVE_BYTES = 64
"""What :func:`_move_chunk` copies: one cache line, two AVX vectors."""


def _move_chunk_typer(typingctx: Any, dst: Any, d: Any, src: Any, s: Any) -> Any:
    """``MOVE_BYTES`` bytes from element ``s`` of the C-contiguous ``src`` to element ``d`` of ``dst`` (flat
    indices; the caller makes sure both ranges lie inside the arrays). A ``memmove`` of constant length,
    which LLVM emits as a few vector loads, then stores: no loop, no overlap check, no call."""
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array) and dst.dtype == src.dtype):
        return None
    sig = types.void(dst, d, src, s)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        from numba.core import cgutils

        dd, di, ss, si = args

        def at(arr: Any, ty: Any, i: Any) -> Any:
            return builder.gep(context.make_array(ty)(context, builder, arr).data, [i])

        i64 = ir.IntType(64)
        cgutils.raw_memmove(builder, at(dd, dst, di), at(ss, src, si), ir.Constant(i64, MOVE_BYTES), 1)  # type: ignore[no-untyped-call]
        return context.get_dummy_value()

    return sig, codegen


_move_chunk: Any = intrinsic(_move_chunk_typer)


# ---- layout passes (inlined into the kernels below) ----------------------------------------------------

# Each pass walks flat views of its arrays and copies whole rows through 1-d slices (one slice per row): the
# same loops as multi-dimensional indexing, with a fraction of the code to compile (indexing a 5-d array
# computes and wraps five indices per access; measured 0.6 s against 0.24 s to compile ``_pad``, and as fast).

@_jit
def _pad(x: Any, n0: Any, mb: Any, pd: Any, ph: Any, pw: Any, buf: Any) -> None:  # pragma: no cover
    """``buf[:mb]`` = samples ``[n0, n0 + mb)`` of ``x[N, C, D, H, W]``, zero-padded into ``buf[m, C, Dp, Hp, Wp]``."""
    c, d, h, w = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
    dp, hp, wp = buf.shape[2], buf.shape[3], buf.shape[4]
    flat = buf.reshape(-1)
    xf = x.reshape(-1)
    for q in range(mb * c * dp * hp * wp):
        flat[q] = 0
    for j in range(mb):
        for ci in range(c):
            for z in range(d):
                for r in range(h):
                    s0 = ((((n0 + j) * c + ci) * d + z) * h + r) * w
                    d0 = (((j * c + ci) * dp + z + pd) * hp + r + ph) * wp + pw
                    src = xf[s0:s0 + w]
                    dst = flat[d0:d0 + w]
                    for s in range(w):
                        dst[s] = src[s]


@_jit
def _unpad(buf: Any, mb: Any, pd: Any, ph: Any, pw: Any, x: Any, n0: Any) -> None:  # pragma: no cover
    """Samples ``[n0, n0 + mb)`` of ``x[N, C, D, H, W]`` = the interior of ``buf[:mb]`` (see :func:`_pad`)."""
    c, d, h, w = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
    dp, hp, wp = buf.shape[2], buf.shape[3], buf.shape[4]
    flat = buf.reshape(-1)
    xf = x.reshape(-1)
    for j in range(mb):
        for ci in range(c):
            for z in range(d):
                for r in range(h):
                    d0 = ((((n0 + j) * c + ci) * d + z) * h + r) * w
                    s0 = (((j * c + ci) * dp + z + pd) * hp + r + ph) * wp + pw
                    src = flat[s0:s0 + w]
                    dst = xf[d0:d0 + w]
                    for s in range(w):
                        dst[s] = src[s]


@_jit
def _taps(planes: Any, n0: Any, mb: Any, offs: Any, lw: Any, cols: Any) -> None:  # pragma: no cover
    """``cols[(c K + t) W + j Lw + q] = planes[n0 + j, c, offs[t] + q]`` (``W = mb Lw``): the block's columns."""
    c, kk, size = planes.shape[1], offs.shape[0], planes.shape[2]
    pf = planes.reshape(-1)
    width = mb * lw
    for ci in range(c):
        for t in range(kk):
            off = offs[t]
            for j in range(mb):
                s0 = ((n0 + j) * c + ci) * size + off
                d0 = (ci * kk + t) * width + j * lw
                src = pf[s0:s0 + lw]
                dst = cols[d0:d0 + lw]
                for q in range(lw):
                    dst[q] = src[q]


@_jit
def _untaps(cols: Any, offs: Any, lw: Any, mb: Any, planes: Any, n0: Any) -> None:  # pragma: no cover
    """The adjoint of :func:`_taps`: ``planes[n0 + j, c, offs[t] + q] +=`` the columns (one plane at a time)."""
    c, kk, size = planes.shape[1], offs.shape[0], planes.shape[2]
    pf = planes.reshape(-1)
    width = mb * lw
    for j in range(mb):
        for ci in range(c):
            for t in range(kk):
                d0 = ((n0 + j) * c + ci) * size + offs[t]
                s0 = (ci * kk + t) * width + j * lw
                dst = pf[d0:d0 + lw]
                src = cols[s0:s0 + lw]
                for q in range(lw):
                    dst[q] += src[q]


@_jit
def _zero_gaps(cols: Any, rows: Any, mb: Any, lw: Any, od: Any, oh: Any, ow: Any, hp: Any, wp: Any) -> None:  # pragma: no cover
    """Set the gap positions of each sample's ``Lw`` columns in ``rows`` rows of width ``mb Lw`` to 0."""
    width = mb * lw
    for r in range(rows):
        for j in range(mb):
            row = cols[r * width + j * lw:r * width + (j + 1) * lw]
            for i in range(od):
                for a in range(hp):
                    base = (i * hp + a) * wp
                    first = ow if a < oh else 0
                    for q in range(base + first, min(base + wp, lw)):
                        row[q] = 0


@_jit
def _read_grad(g: Any, n0: Any, mb: Any, lw: Any, hp: Any, wp: Any, gw: Any, sums: Any) -> None:  # pragma: no cover
    """``gw[o W + j Lw + q]`` = ``g[n0 + j, o]`` at the output positions, 0 in the gaps (``W = mb Lw``, the
    wide layout of the backward's GEMMs); ``sums[o] +=`` the sum of those values when ``sums`` is not empty (each plane
    summed in ``g``'s dtype in one vectorised pass, the planes in ``sums``' float64)."""
    o_ch, od, oh, ow = g.shape[1], g.shape[2], g.shape[3], g.shape[4]
    plane_size = od * oh * ow
    gf = g.reshape(-1)
    width = mb * lw
    summing = sums.shape[0] > 0
    for o in range(o_ch):
        total = 0.0
        for j in range(mb):
            row = gw[o * width + j * lw:o * width + (j + 1) * lw]
            plane = gf[((n0 + j) * o_ch + o) * plane_size:((n0 + j) * o_ch + o + 1) * plane_size]
            for i in range(od):
                for a in range(hp):
                    base = (i * hp + a) * wp
                    first = 0
                    if a < oh:
                        src = plane[(i * oh + a) * ow:(i * oh + a + 1) * ow]
                        dst = row[base:base + ow]
                        for s in range(ow):
                            dst[s] = src[s]
                        first = ow
                    for q in range(base + first, min(base + wp, lw)):
                        row[q] = 0
            if summing:
                part = plane[0] * 0
                for q in range(plane_size):
                    part += plane[q]
                total += part
        if summing:
            sums[o] += total


# ---- the kernels -----------------------------------------------------------------------------------------

@_inline
def _block_output_columns(src: Any, j0: Any, mb: Any, kd: Any, kh: Any, kw: Any, dd: Any, dh: Any, dw: Any,
                          od: Any, oh: Any, ow: Any, cols: Any) -> None:  # pragma: no cover
    """``cols[(c K + t) mb L + j L + (i oh + r) ow + s] = src[j0 + j, c, i + a dd, r + b dh, s + e dw]`` for tap
    ``t = (a, b, e)`` (``L = od oh ow``): the columns of samples ``[j0, j0 + mb)`` at their output positions
    only. Each short row is moved in whole chunks of :data:`MOVE_BYTES` (:func:`_move_chunk`), which may run
    past the row: the rows are written in increasing address order, so what a chunk writes past its row is
    overwritten by the rows after it (``cols`` has a chunk of slack at its end). A chunk that would read past
    the end of ``src`` is copied element by element instead."""
    c = src.shape[1]
    flat = src.reshape(-1)
    row_len = src.shape[4]
    depth_len = src.shape[3] * row_len
    plane = src.shape[2] * depth_len
    sample = c * plane
    per_chunk = MOVE_BYTES // src.itemsize
    chunks = (ow + per_chunk - 1) // per_chunk
    safe_end = flat.shape[0] - chunks * per_chunk
    at = 0
    for ci in range(c):
        for a in range(kd):
            for b in range(kh):
                for e in range(kw):
                    for j in range(mb):
                        base = (j0 + j) * sample + ci * plane + a * dd * depth_len + b * dh * row_len + e * dw
                        for i in range(od):
                            for r in range(oh):
                                s0 = base + i * depth_len + r * row_len
                                if s0 <= safe_end:
                                    for k in range(chunks):
                                        _move_chunk(cols, at + k * per_chunk, flat, s0 + k * per_chunk)
                                else:
                                    for q in range(ow):
                                        cols[at + q] = flat[s0 + q]
                                at += ow


@_jit
def forward_output_blocks(gemm: Any, x: Any, w2: Any, bias: Any, kd: Any, kh: Any, kw: Any, dd: Any, dh: Any,
                          dw: Any, pd: Any, ph: Any, pw: Any, m: Any, y: Any, pad_buf: Any, cols: Any,
                          out: Any) -> None:  # pragma: no cover
    """``y[N, O, od, oh, ow] = conv(x[N, C, D, H, W], w2[O, C K]) (+ bias[O])``, stride 1, kernel sizes
    ``kd, kh, kw``, dilation ``dd, dh, dw``, padding ``pd, ph, pw``, in blocks of ``m`` samples: each block's
    columns at its output positions only (:func:`_block_output_columns`, ``L = od oh ow`` per sample), one
    GEMM ``out[O, m L] = w2 @ cols``, then ``y[n, o] = out[o, j L:(j + 1) L] (+ bias[o])``. ``cols`` holds
    ``C K m L`` elements and :data:`MOVE_BYTES` of slack, ``out`` ``O m L``; ``pad_buf[m, C, Dp, Hp, Wp]`` the
    padded samples (none when there is no padding)."""
    n, o_ch, ck = x.shape[0], w2.shape[0], w2.shape[1]
    od, oh, ow = y.shape[2], y.shape[3], y.shape[4]
    big_l = od * oh * ow
    padded = pd > 0 or ph > 0 or pw > 0
    has_bias = bias.shape[0] > 0
    zero = y.dtype.type(0)
    yf = y.reshape(-1)
    for n0 in range(0, n, m):
        mb = min(m, n - n0)
        width = mb * big_l
        if padded:
            _pad(x, n0, mb, pd, ph, pw, pad_buf)
        # one inlined copy of the column builder (a call per branch doubled the kernel's compile time)
        _block_output_columns(pad_buf if padded else x, 0 if padded else n0, mb, kd, kh, kw, dd, dh, dw, od, oh,
                              ow, cols)
        _gemm(gemm, NO_TRANS, NO_TRANS, o_ch, width, ck, w2, ck, cols, width, out, width, False)
        for j in range(mb):
            for o in range(o_ch):
                src = out[o * width + j * big_l:o * width + (j + 1) * big_l]
                dst = yf[((n0 + j) * o_ch + o) * big_l:((n0 + j) * o_ch + o + 1) * big_l]
                bo = bias[o] if has_bias else zero  # one loop either way (adding 0 changes no value)
                for q in range(big_l):
                    dst[q] = src[q] + bo


@_jit
def backward(gemm: Any, x: Any, w2: Any, g: Any, offs: Any, pd: Any, ph: Any, pw: Any, lw: Any, m: Any,
             x_finite: Any, w_finite: Any, dx: Any, dw2: Any, db: Any, pad_buf: Any, gw: Any,
             cols: Any, sums: Any) -> None:  # pragma: no cover
    """The adjoints of :func:`forward` for the cotangent ``g[N, O, od, oh, ow]``, each computed when its
    output is not empty: ``dx[N, C, D, H, W]`` (overwritten), ``dw2[O, C K] +=`` (zero it first) and
    ``db[O] +=`` (likewise). ``x`` is read only for ``dw2`` (pass ``dx`` otherwise); ``x_finite`` and
    ``w_finite`` say whether the gaps need zeroing (a finite value times a zero gap adds exactly 0).
    ``gw`` (``O m Lw``) and ``cols`` (``C K m Lw``) are flat scratch, ``sums`` float64 scratch of ``db``'s length
    (passed in: an array made here compiles numpy's allocation into the kernel, 0.1-0.15 s of its first call)."""
    n, o_ch, od, oh, ow = g.shape[0], g.shape[1], g.shape[2], g.shape[3], g.shape[4]
    ck = w2.shape[1]
    c = ck // offs.shape[0]
    hp, wp = pad_buf.shape[3], pad_buf.shape[4]
    padded = pd > 0 or ph > 0 or pw > 0
    need_x, need_w = dx.size > 0, dw2.size > 0
    x_planes = x.reshape(x.shape[0], c, x.shape[2] * x.shape[3] * x.shape[4])
    dx_planes = dx.reshape(dx.shape[0], c, dx.shape[2] * dx.shape[3] * dx.shape[4])
    dx_flat = dx.reshape(-1)
    per_sample = c * dx.shape[2] * dx.shape[3] * dx.shape[4]
    buf_planes = pad_buf.reshape(pad_buf.shape[0], c, pad_buf.shape[2] * hp * wp)
    for o in range(sums.shape[0]):
        sums[o] = 0.0
    for n0 in range(0, n, m):
        mb = min(m, n - n0)
        width = mb * lw
        _read_grad(g, n0, mb, lw, hp, wp, gw, sums)
        # one call of each layout pass whether padded or not (a call per branch compiled each twice)
        if need_w:
            if padded:
                _pad(x, n0, mb, pd, ph, pw, pad_buf)
            _taps(buf_planes if padded else x_planes, 0 if padded else n0, mb, offs, lw, cols)
            if not x_finite:
                _zero_gaps(cols, ck, mb, lw, od, oh, ow, hp, wp)
            _gemm(gemm, NO_TRANS, TRANS, o_ch, ck, width, gw, width, cols, width, dw2, ck, True)
        if need_x:
            _gemm(gemm, TRANS, NO_TRANS, ck, width, o_ch, w2, ck, gw, width, cols, width, False)
            if not w_finite:
                _zero_gaps(cols, ck, mb, lw, od, oh, ow, hp, wp)
            target, first = (pad_buf.reshape(-1), 0) if padded else (dx_flat, n0 * per_sample)
            for q in range(first, first + mb * (buf_planes.shape[1] * buf_planes.shape[2] if padded else per_sample)):
                target[q] = 0
            _untaps(cols, offs, lw, mb, buf_planes if padded else dx_planes, 0 if padded else n0)
            if padded:
                _unpad(pad_buf, mb, pd, ph, pw, dx, n0)
    for o in range(db.shape[0]):
        db[o] += sums[o]

