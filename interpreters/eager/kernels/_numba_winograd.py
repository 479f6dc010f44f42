"""The jitted transforms of the Winograd F(2x2, 3x3) convolution (:mod:`.winograd` is the wrapper).

Importing this module imports numba; :mod:`.winograd` imports it on first use. Kept apart from
``_numba_kernels``: it depends on nothing there.

Notation (Lavin and Gray's F(2x2, 3x3)): an output tile ``Y[2, 2]`` is ``A^T [(G g G^T) * (B^T d B)] A``
for the 4x4 input patch ``d`` it reads and the 3x3 filter ``g``, with

    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

so both transforms here are additions and subtractions only. Tile ``(ty, tx)`` of sample ``n`` is
number ``t = (n * th + ty) * tw + tx`` of a block; its patch starts at input row ``2 ty - ph`` and
column ``2 tx - pw`` (zero outside the input).
"""

from __future__ import annotations

from typing import Any

from . import _numba_start  # noqa: F401  (numba's CPU target started without scipy.linalg)
import numba
import numpy as np

_FLAGS = {"nsz", "arcp", "contract", "afn", "reassoc"}


@numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy", inline="always")
def _add(p: Any, i: Any, q: Any, j: Any, out: Any, count: Any) -> None:  # pragma: no cover
    """``out[k] = p[i + k] + q[j + k]`` for ``k < count`` (one output stream: the loop vectorises)."""
    a = p[i:i + count]  # views indexed by a plain range variable: no negative-index check, so it vectorises
    b = q[j:j + count]
    for k in range(count):
        out[k] = a[k] + b[k]


@numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy", inline="always")
def _sub(p: Any, i: Any, q: Any, j: Any, out: Any, count: Any) -> None:  # pragma: no cover
    """``out[k] = p[i + k] - q[j + k]`` for ``k < count``."""
    a = p[i:i + count]
    b = q[j:j + count]
    for k in range(count):
        out[k] = a[k] - b[k]


@numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy")
def filter_tiles(w9: Any, u: Any) -> None:  # pragma: no cover
    """``u[4 a + b, f] = (G g G^T)[a, b]`` for each 3x3 filter ``g[i, j] = w9[f, 3 i + j]``, with
    ``G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]``: rows ``g0``, ``(g0 + g1 + g2) / 2``,
    ``(g0 - g1 + g2) / 2``, ``g2``, then the same on the columns."""
    half = w9.dtype.type(0.5)
    t = np.empty((4, 3), w9.dtype)
    for f in range(w9.shape[0]):
        g = w9[f]
        for j in range(3):
            g0, g1, g2 = g[j], g[3 + j], g[6 + j]
            t[0, j] = g0
            t[1, j] = (g0 + g1 + g2) * half
            t[2, j] = (g0 - g1 + g2) * half
            t[3, j] = g2
        for a in range(4):
            t0, t1, t2 = t[a, 0], t[a, 1], t[a, 2]
            u[4 * a, f] = t0
            u[4 * a + 1, f] = (t0 + t1 + t2) * half
            u[4 * a + 2, f] = (t0 - t1 + t2) * half
            u[4 * a + 3, f] = t2


@numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy")
def input_tiles(x: Any, v: Any, ph: Any, pw: Any, th: Any, tw: Any, n0: Any, n1: Any) -> None:  # pragma: no cover
    """``v[16, C, T] = B^T d B`` for every 4x4 patch ``d`` of ``x[N, C, H, W]`` in samples ``[n0, n1)``
    (component ``4 r + s`` of the transformed patch), tiles numbered *wide*: ``t = ((n - n0) th + ty)
    (tw + 1) + tx``, where the tiles ``tx = tw`` are gaps (computed from zeros and neighbours, and
    dropped by :func:`output_tiles`).

    Each zero-padded input plane is first split by row and column parity into four planes
    ``sub[2 a + b][Y, X] = padded[2 Y + a, 2 X + b]`` of ``(th + 1) x (tw + 1)``, flattened: patch
    entry ``(i, j)`` of every tile is then one of them shifted by ``i // 2`` rows and ``j // 2``
    columns, so all sixteen components are one contiguous, vectorised pass over the tiles."""
    c_in, h, w = x.shape[1], x.shape[2], x.shape[3]
    w1 = tw + 1
    per_sample = th * w1
    sub = np.zeros((4, (th + 1) * w1 + 1), x.dtype)  # the last entry is only read by a gap tile
    x0 = np.empty(2, np.int64)
    x1 = np.empty(2, np.int64)
    for b in range(2):  # the columns X of parity b that fall inside the input: 0 <= 2X + b - pw < w
        x0[b] = min(w1, max(0, (pw - b + 1) // 2))
        x1[b] = max(x0[b], min(w1, (w - 1 + pw - b) // 2 + 1))
    span = per_sample + 1  # the row combinations, one tile further for the column shift
    t = np.empty((8, span + 1), x.dtype)
    vf = v.reshape(16, -1)
    plane_tiles = v.shape[2]
    for n in range(n0, n1):
        for c in range(c_in):
            plane = x[n, c]
            for a in range(2):  # entries outside the input stay 0 from the start (same for every plane)
                for yy in range(th + 1):
                    y = 2 * yy + a - ph
                    if y < 0 or y >= h:
                        continue
                    src = plane[y]
                    for b in range(2):
                        lo = x0[b]
                        dst = sub[2 * a + b, yy * w1 + lo:(yy + 1) * w1]
                        row = src[2 * lo + b - pw:]
                        for xx in range(x1[b] - lo):
                            dst[xx] = row[2 * xx]
            # B^T d: combinations of the patch rows, t[2 r + b] for column parity b (rows 0..3 of a
            # patch are parity 0 and 1 of plane row Y, then of plane row Y + 1)
            for b in range(2):
                top0, top1 = sub[b], sub[2 + b]
                _sub(top0, 0, top0, w1, t[b], span)
                _add(top1, 0, top0, w1, t[2 + b], span)
                _sub(top0, w1, top1, 0, t[4 + b], span)
                _sub(top1, 0, top1, w1, t[6 + b], span)
            base = c * plane_tiles + (n - n0) * per_sample
            for r in range(4):  # (B^T d) B: the same combinations of the columns
                te, to = t[2 * r], t[2 * r + 1]
                _sub(te, 0, te, 1, vf[4 * r, base:base + per_sample], per_sample)
                _add(to, 0, te, 1, vf[4 * r + 1, base:base + per_sample], per_sample)
                _sub(te, 1, to, 0, vf[4 * r + 2, base:base + per_sample], per_sample)
                _sub(to, 0, to, 1, vf[4 * r + 3, base:base + per_sample], per_sample)


@numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy", inline="always")
def _sum3(p: Any, q: Any, r: Any, sq: Any, sr: Any, bias: Any, out: Any) -> None:  # pragma: no cover
    """``out[k] = p[k] + sq * q[k] + sr * r[k] + bias`` (``sq``, ``sr`` are +-1 of the arrays' dtype)."""
    for k in range(out.shape[0]):
        out[k] = p[k] + sq * q[k] + sr * r[k] + bias


@numba.njit(cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy")
def output_tiles(m: Any, bias: Any, y: Any, th: Any, tw: Any, n0: Any, n1: Any) -> Any:  # pragma: no cover
    """``y[n, o, 2 ty + i, 2 tx + j] = (A^T m A)[i, j] + bias[o]`` for samples ``[n0, n1)`` of
    ``y[N, O, OH, OW]`` from ``m[16, O, T]`` (the wide tiles of :func:`input_tiles`; the gap tiles
    are dropped, the last row and column of tiles cut at ``OH``, ``OW``). For each output channel:
    vectorised passes over all the block's tiles into four parity planes ``(i, j)``, then an
    interleaving copy into ``y``.

    Returns whether every value computed (gap tiles included) is finite: a non-finite input or filter
    value reaches at least one of them (each input value enters some transformed patch, each patch
    component some product, each product some output; ``inf * 0`` is NaN), so ``True`` means ``x`` and
    ``w`` were finite and nothing overflowed, and the caller can skip checking them beforehand."""
    o_ch, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    w1 = tw + 1
    per_sample = th * w1
    tiles = m.shape[2]
    one = y.dtype.type(1)
    zero = y.dtype.type(0)
    s = np.empty((8, tiles), y.dtype)
    par = np.empty((4, tiles), y.dtype)
    half = ow // 2
    big = np.finfo(y.dtype).max
    finite = 0  # how many values are finite (a comparison: fast-math may rewrite arithmetic tests)
    for o in range(o_ch):
        mo = m[:, o]
        for j in range(4):  # A^T m: s[j] = m0j + m1j + m2j, s[4 + j] = m1j - m2j - m3j
            _sum3(mo[j], mo[4 + j], mo[8 + j], one, one, zero, s[j])
            _sum3(mo[4 + j], mo[8 + j], mo[12 + j], -one, -one, zero, s[4 + j])
        b = bias[o]
        for i in range(2):  # (A^T m) A plus the bias: parity planes (i, 0) and (i, 1)
            _sum3(s[4 * i], s[4 * i + 1], s[4 * i + 2], one, one, b, par[2 * i])
            _sum3(s[4 * i + 1], s[4 * i + 2], s[4 * i + 3], -one, -one, b, par[2 * i + 1])
        for q in range(4):
            pq = par[q]
            for k in range(tiles):
                finite += 1 if abs(pq[k]) <= big else 0
        for n in range(n0, n1):
            plane = y[n, o]
            first = (n - n0) * per_sample
            for yy in range(oh):
                start = first + (yy // 2) * w1
                ev = par[2 * (yy % 2), start:start + w1]
                od = par[2 * (yy % 2) + 1, start:start + w1]
                dst = plane[yy]
                for tx in range(half):
                    dst[2 * tx] = ev[tx]
                    dst[2 * tx + 1] = od[tx]
                if ow % 2:
                    dst[ow - 1] = ev[half]
    return finite == 4 * o_ch * tiles
