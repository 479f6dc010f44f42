"""Every numba-jitted kernel of the eager interpreter, in one module.

Importing this module imports numba; the wrappers in this package only import it
(through :func:`._support.nb`) when a kernel first runs, and numba compiles each
kernel on its first call (or loads it from its on-disk cache).

Why one module: numba's cache is invalidated by the timestamp of the file that
defines a kernel, not by the files it calls into. Keeping the shared helpers
(``vexp``, the LLVM intrinsics, the fast-math flags) in the same file as the
kernels that inline them means an edit to a helper can never leave a stale
compiled kernel behind. The one import is :func:`._numba_conv._gemm`, the call of CBLAS's
``gemm`` (its arguments are CBLAS's; an edit to it needs numba's cache cleared). The float32
erf-form GELU is defined, with its own helpers, in :mod:`._numba_gelu` (re-exported here).

Conventions: kernels take C-contiguous float32 or float64 arrays (the wrappers
make sure), write into a preallocated ``out`` and return nothing; those that can be
split across threads take a ``start, stop`` range of their outermost loop as the
last two arguments. All are ``nogil``.

* ``FAST`` is numba's fast-math *without* ``nnan``/``ninf``: reassociation and
  contraction let reductions vectorise, while NaN and infinity keep their meaning
  (a row of ``-inf``, a NaN in a max-pool window).
* ``fmaximum`` is LLVM's ``llvm.maximum``: a NaN-propagating max that the loop
  vectoriser turns into vector max reductions (Python's ``max`` or an ``if`` does
  not vectorise here).
* ``vexp`` is a polynomial ``exp`` that vectorises; numba's ``math.exp`` is a
  scalar libm call on this build (no SVML).
* ``sigmoid_ufunc_f32``, ``relu_ufunc_f64``, ... are numpy ufuncs compiled from the scalar bodies of
  ``sigmoid_flat`` and ``relu_flat`` (the same values), one per dtype: the cheapest call on small arrays.
* Kernels that walk the same loops in opposite directions (``im2col``/``col2im``,
  ``max_pool_bwd``/``max_pool_select``) share one body whose direction flag is a
  compile-time constant (``numba.literally``): the branch is pruned, so each kernel
  compiles to its own loops. (A jitted function passed as an argument would not be
  cached, and a helper called per window is not always inlined: measured slower.)
"""

from __future__ import annotations

import math
from typing import Any, Callable, TypeVar, cast

import llvmlite.ir as ir  # type: ignore[import-untyped]
from . import _numba_start  # noqa: F401  (numba's CPU target started without scipy.linalg)
import numba
import numpy as np
from numba.core import types
from numba.extending import intrinsic, overload
from numba.np import numpy_support
from numba.misc.special import literally

from ._numba_conv import NO_TRANS, TRANS, _gemm

F = TypeVar("F", bound=Callable[..., Any])

FAST = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})
"""Fast-math flags that keep NaN/inf semantics."""

EXACT_FLAGS = frozenset({"nsz", "arcp", "contract", "afn"})
"""Fast-math without ``reassoc``, for helpers whose rounding order matters: the exp range
reduction, and differences such as ``(x - m) - log(s)`` that ``reassoc`` would rewrite into
``x - (m + log(s))`` (catastrophic when ``m`` is large). LLVM inlines these helpers into the
calling loops but keeps each instruction's own flags."""


def jit(f: F) -> F:
    """``njit(cache=True, nogil=True, error_model="numpy")`` with the NaN-safe fast-math flags
    (numpy error model: ``x / 0`` is inf or NaN, no exception check to block vectorisation)."""
    return cast(F, numba.njit(cache=True, nogil=True, fastmath=set(FAST), error_model="numpy")(f))


def _jit_inline(f: F) -> F:
    """:func:`jit`, inlined into its callers by numba itself (so constant arguments become constants
    in the caller's loops, which then unroll and vectorise; LLVM alone does not always inline)."""
    return cast(F, numba.njit(cache=True, nogil=True, fastmath=set(FAST), error_model="numpy",
                              inline="always")(f))


def _jit_exact(f: F) -> F:
    return cast(F, numba.njit(cache=True, nogil=True, fastmath=set(EXACT_FLAGS), error_model="numpy")(f))


# ---- LLVM intrinsics ----------------------------------------------------------------------


def _llvm_float_intrinsic(name: str, nargs: int) -> Callable[..., Any]:
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        lty = args[0].type
        fn = builder.module.declare_intrinsic(name, [lty], ir.FunctionType(lty, [lty] * nargs))
        return builder.call(fn, args)

    if nargs == 1:
        def unary(typingctx: Any, a: Any) -> Any:
            if not isinstance(a, types.Float):
                return None
            return a(a), codegen

        return cast(Callable[..., Any], intrinsic(unary))

    if nargs == 2:
        def binary(typingctx: Any, a: Any, b: Any) -> Any:
            if not isinstance(a, types.Float) or a != b:
                return None
            return a(a, b), codegen

        return cast(Callable[..., Any], intrinsic(binary))

    def ternary(typingctx: Any, a: Any, b: Any, c: Any) -> Any:
        if not isinstance(a, types.Float) or a != b or a != c:
            return None
        return a(a, b, c), codegen

    return cast(Callable[..., Any], intrinsic(ternary))


fmaximum = _llvm_float_intrinsic("llvm.maximum", 2)
"""NaN-propagating max of two floats of the same type (vectorises in reductions)."""

rint = _llvm_float_intrinsic("llvm.rint", 1)
"""Round to nearest even (one instruction; vectorises)."""

fma = _llvm_float_intrinsic("llvm.fma", 3)
"""``a * b + c`` rounded once (one instruction where the CPU has FMA; vectorises), whatever the
fast-math flags: what PyTorch's CPU kernels compute for ``add(x, alpha=a)``, ``lerp`` and ``addcmul``."""


# ---- vectorisable exp -----------------------------------------------------------------------
# exp(x) = 2**n * exp(r), n = rint(x / ln2), r = x - n*ln2 with ln2 split Cody-Waite style
# (a high part with trailing zero bits, so n*LN2_HI is exact, and a low part), |r| <= ln2/2.
# float32: degree-6 minimax polynomial for exp(r) (1.9e-9 relative before rounding; < 1 ulp
# measured). float64: degree-13 Taylor polynomial (truncation < 1e-17; < 1 ulp measured).
# vexp scales by 2**n as two normal factors, so results below the smallest normal come out as
# subnormals (one rounding), as numpy's and PyTorch's exp give them, down to 0 below
# ln(2**-150); above the largest finite they give inf, NaN gives NaN. vexp_nonpos (softmax)
# scales by one factor and flushes results below the smallest normal to 0.

_LN2 = 0.6931471805599453
_C32 = (1.0000000005541718, 0.6931472057372499, 0.24022646890595173, 0.05550328776993289,
        0.00961848896132335, 0.0013399931210122755, 0.00015345810869699716)
_A0, _A1, _A2, _A3, _A4, _A5, _A6 = (np.float32(c / _LN2 ** k) for k, c in enumerate(_C32))
_LOG2E32 = np.float32(1.4426950408889634)
_LN2_HI32 = np.float32(0.693145751953125)
_LN2_LO32 = np.float32(1.428606765330187e-06)
_LO32 = np.float32(-87.33654)  # exp below this is under the smallest normal float32
_ZERO_BELOW32 = np.float32(-104.0)  # exp below this rounds to 0 (ln(2**-150) = -103.97)
_HI32 = np.float32(88.72283)
_ZERO32 = np.float32(0.0)
_INF32 = np.float32(np.inf)

_B0, _B1, _B2, _B3, _B4, _B5, _B6, _B7, _B8, _B9, _B10, _B11, _B12, _B13 = (
    1.0 / math.factorial(k) for k in range(14))
_LOG2E64 = 1.4426950408889634
_LN2_HI64 = 6.93147180369123816490e-01
_LN2_LO64 = 1.90821492927058770002e-10
_LO64 = -708.3964185322641
_ZERO_BELOW64 = -746.0  # ln(2**-1075) = -745.13
_HI64 = 709.782712893384


@_jit_inline
def _reduce32(x: Any) -> Any:
    """``(n, r)`` with ``exp(x) = 2**n * exp(r)`` (inlined into exact callers only)."""
    n = rint(x * _LOG2E32)
    r = x - n * _LN2_HI32
    return n, r - n * _LN2_LO32


@_jit_exact
def _poly32(x: Any) -> Any:
    n, r = _reduce32(x)
    p = (((((_A6 * r + _A5) * r + _A4) * r + _A3) * r + _A2) * r + _A1) * r + _A0
    return n, p


@_jit_exact
def _poly64(x: Any) -> Any:
    n = rint(x * _LOG2E64)
    r = x - n * _LN2_HI64
    r = r - n * _LN2_LO64
    p = _B13
    p = p * r + _B12
    p = p * r + _B11
    p = p * r + _B10
    p = p * r + _B9
    p = p * r + _B8
    p = p * r + _B7
    p = p * r + _B6
    p = p * r + _B5
    p = p * r + _B4
    p = p * r + _B3
    p = p * r + _B2
    p = p * r + _B1
    p = p * r + _B0
    return n, p


def _exp32(x: Any) -> Any:
    n, p = _poly32(x)
    # 2**n as two normal factors: n reaches 128 just below the overflow threshold
    ni = np.int32(n)
    n1 = ni >> np.int32(1)
    s1 = np.int32((n1 + np.int32(127)) << np.int32(23)).view(np.float32)
    s2 = np.int32((ni - n1 + np.int32(127)) << np.int32(23)).view(np.float32)
    e = p * s1 * s2
    e = _ZERO32 if x < _ZERO_BELOW32 else e
    return _INF32 if x >= _HI32 else e


@_jit_inline
def _scale32_nonpos(x: Any, n: Any, p: Any) -> Any:
    """``p * 2**n``, flushed to 0 where ``exp(x)`` is below the smallest normal."""
    s = np.int32((np.int32(n) + np.int32(127)) << np.int32(23)).view(np.float32)
    e = p * s
    return _ZERO32 if x < _LO32 else e


def _exp32_nonpos(x: Any) -> Any:
    n, p = _poly32(x)
    return _scale32_nonpos(x, n, p)


def _exp64(x: Any) -> Any:
    n, p = _poly64(x)
    ni = np.int64(n)
    n1 = ni >> np.int64(1)
    s1 = np.int64((n1 + np.int64(1023)) << np.int64(52)).view(np.float64)
    s2 = np.int64((ni - n1 + np.int64(1023)) << np.int64(52)).view(np.float64)
    e = p * s1 * s2
    e = 0.0 if x < _ZERO_BELOW64 else e
    return np.inf if x >= _HI64 else e


def _exp64_nonpos(x: Any) -> Any:
    n, p = _poly64(x)
    s = np.int64((np.int64(n) + np.int64(1023)) << np.int64(52)).view(np.float64)
    e = p * s
    return 0.0 if x < _LO64 else e


def vexp(x: Any) -> Any:
    """Vectorisable ``exp`` of a float32 or float64 scalar (jitted code only)."""
    raise NotImplementedError("vexp is only callable from jitted code")


def vexp_nonpos(x: Any) -> Any:
    """:func:`vexp` for ``x <= 0`` or NaN (softmax after subtracting the max): one scale factor."""
    raise NotImplementedError("vexp_nonpos is only callable from jitted code")


def _overload_vexp(x: Any) -> Any:
    if x == types.float32:
        return _exp32
    if x == types.float64:
        return _exp64
    return None


def _overload_vexp_nonpos(x: Any) -> Any:
    if x == types.float32:
        return _exp32_nonpos
    if x == types.float64:
        return _exp64_nonpos
    return None


def like(v: Any, c: float) -> Any:
    """``c`` as a scalar of the float type of ``v`` (jitted code only: a scalar has no ``dtype`` there, and
    a bare literal would promote float32 arithmetic to float64)."""
    raise NotImplementedError("like is only callable from jitted code")


def _overload_like(v: Any, c: Any) -> Any:
    if not isinstance(v, types.Float):
        return None
    make = numpy_support.as_dtype(v).type

    def impl(v: Any, c: Any) -> Any:  # _overload_like's signature, annotations included (numba compares them)
        return make(c)
    return impl


overload(like)(_overload_like)
overload(vexp, jit_options={"fastmath": set(EXACT_FLAGS), "error_model": "numpy"})(_overload_vexp)
overload(vexp_nonpos, jit_options={"fastmath": set(EXACT_FLAGS), "error_model": "numpy"})(_overload_vexp_nonpos)


@_jit_exact
def sub_exact(a: Any, b: Any) -> Any:
    """``a - b`` that the caller's ``reassoc`` cannot merge with neighbouring additions."""
    return a - b


@_jit_exact
def center_scale(x: Any, mean: Any, rstd: Any) -> Any:
    """``(x - mean) * rstd`` in this rounding order (not ``x*rstd - mean*rstd``)."""
    return (x - mean) * rstd


@jit
def exp_into(x: Any, out: Any, start: Any, stop: Any) -> None:
    """``out[i] = vexp(x[i])`` on flat arrays: the eager ``exp`` of large float arrays (see
    ``interpreter._exp``), within 1 ulp of the exact result."""
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        os_[i] = vexp(xs[i])


# ---- sums in numpy's order --------------------------------------------------------------------


def _jit_strict(f: F) -> F:
    """``njit`` without any fast-math flag: every addition rounds as written, signed zeros included."""
    return cast(F, numba.njit(cache=True, nogil=True, error_model="numpy")(f))


@_jit_strict
def _pairwise_block(x: Any, lo: Any, n: Any) -> Any:
    """The sum of ``x[lo:lo + n]`` (1-d, ``1 <= n <= 128``) in numpy's order: under 8 items one after
    another from 0; otherwise 8 interleaved partial sums combined as ``((r0 + r1) + (r2 + r3)) +
    ((r4 + r5) + (r6 + r7))``, then the items past the last multiple of 8 one after another. Indices are
    unsigned, so no load pays for the negative-index fix-up."""
    at = np.uint64(lo)
    if n < 8:
        res = x.dtype.type(0.0)
        for i in range(n):
            res += x[at + np.uint64(i)]
        return res
    r0, r1, r2, r3 = x[at], x[at + np.uint64(1)], x[at + np.uint64(2)], x[at + np.uint64(3)]
    r4, r5, r6, r7 = x[at + np.uint64(4)], x[at + np.uint64(5)], x[at + np.uint64(6)], x[at + np.uint64(7)]
    whole = n - n % 8
    for i in range(8, whole, 8):
        g = at + np.uint64(i)
        r0 += x[g]
        r1 += x[g + np.uint64(1)]
        r2 += x[g + np.uint64(2)]
        r3 += x[g + np.uint64(3)]
        r4 += x[g + np.uint64(4)]
        r5 += x[g + np.uint64(5)]
        r6 += x[g + np.uint64(6)]
        r7 += x[g + np.uint64(7)]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(whole, n):
        res += x[at + np.uint64(i)]
    return res


@_jit_strict
def _pairwise(x: Any, lo: Any, n: Any) -> Any:
    """The sum of ``x[lo:lo + n]`` (1-d, ``n >= 1``) in numpy's pairwise order: a block of at most 128
    items as :func:`_pairwise_block`; a longer run as the sum of its two halves (the first a multiple
    of 8 long), each summed the same way. The recursion runs on an explicit stack (numba's cache
    cannot hold a recursive function); frame ``f`` is the run ``[starts[f], starts[f] + sizes[f])``
    whose left half ``splits[f]`` long is summed into ``lefts[f]`` before its right half starts."""
    if n <= 128:
        return _pairwise_block(x, lo, n)
    starts = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    splits = np.empty(64, np.int64)
    lefts = np.empty(64, x.dtype)
    starts[0] = lo
    sizes[0] = n
    top = 0
    while True:
        size = sizes[top]
        if size > 128:  # descend into the left half
            half = size // 2
            half -= half % 8
            splits[top] = half
            starts[top + 1] = starts[top]
            sizes[top + 1] = half
            top += 1
            continue
        value = _pairwise_block(x, starts[top], size)
        while True:  # hand the value up until a frame still needs its right half
            if top == 0:
                return value
            parent = top - 1
            if starts[top] == starts[parent]:  # the left half: keep it, then sum the right half
                lefts[parent] = value
                starts[top] = starts[parent] + splits[parent]
                sizes[top] = sizes[parent] - splits[parent]
                break
            value = lefts[parent] + value  # the right half: the parent's sum is complete
            top = parent


@_jit_strict
def pairwise_sum(x: Any) -> Any:
    """``numpy.add.reduce(x)`` of a non-empty 1-d float array, bit for bit (numpy adds the pairwise sum
    to the identity 0, so ``-0`` sums to ``+0``)."""
    return x.dtype.type(0.0) + _pairwise(x, 0, x.shape[0])


@_jit_strict
def pairwise_sum_rows(x: Any, width: Any, out: Any) -> Any:
    """``out[r] = numpy.add.reduce(x[r * width:(r + 1) * width])`` for each row of the row-major rows
    of a flat float array (``width >= 1``), bit for bit; returns whether every sum is finite (a caller
    that must reproduce numpy's overflow warnings redoes the others with numpy)."""
    zero = x.dtype.type(0.0)
    finite = True
    for r in range(out.shape[0]):
        v = zero + (_pairwise_block(x, r * width, width) if width <= 128 else _pairwise(x, r * width, width))
        out[r] = v
        if not math.isfinite(v):
            finite = False
    return finite


# ---- row kernels: layer_norm, softmax, log_softmax ------------------------------------------


PIPELINED_ROW_BYTES = 1024
"""Rows of at least this many bytes take the pipelined form of the row kernels whose next-row reduction is
a sum (``layer_norm_rows`` here; ``softmax_bwd_rows``, ``log_softmax_bwd_rows`` in the backward module):
row ``i + 1`` is added up inside row ``i``'s output loop. In a loop that also stores, LLVM guards the vector
code with a run-time check on the distance between the stored and the loaded rows, and falls back to the
scalar loop, which adds up in another order, when they lie close (measured: the last row of ``x`` followed
in memory by a freshly allocated row, float32 rows of 10 and 13). A row this long cannot lie that close to
a row of another array, so its bits never depend on addresses; shorter rows are summed in a loop of their
own, which stores nothing."""


@_jit_inline
def _row_rstd(xr: Any, mean: Any, inv_d: Any, eps: Any) -> Any:
    """``1 / sqrt(var + eps)`` of the row ``xr`` with mean ``mean`` (biased variance, ``inv_d = 1 / D``)."""
    v = xr.dtype.type(0)
    for j in range(xr.shape[0]):
        t = xr[j] - mean
        v += t * t
    var = v * inv_d
    return xr.dtype.type(1.0 / math.sqrt(var + eps))


@_jit_inline
def _layer_norm_short_rows(x: Any, gamma: Any, beta: Any, eps: Any, stats: Any, out: Any, start: Any,
                           stop: Any) -> None:
    """:func:`layer_norm_rows` for rows shorter than :data:`PIPELINED_ROW_BYTES`: each row's sum, its
    variance and its output in loops of their own (the arithmetic of the pipelined form, in the same order;
    kept apart from it, the loops vectorise: 512 float32 rows of 64 took 10.5 us here, 20.8 in the pipelined
    loop's branches)."""
    save = stats.shape[0] != 0
    write = out.shape[0] != 0
    d = x.shape[1]
    inv_d = x.dtype.type(1.0 / d)
    zero = x.dtype.type(0)
    # without an output, rows are written to a discarded row all the same: one loop structure either way, so
    # the statistics have the same bits whether or not the output is asked for (LLVM would otherwise compile
    # the two cases apart, and vectorise their sums differently)
    discard = np.empty(0 if write else d, x.dtype)
    for i in range(start, stop):
        xr = x[i]
        s = zero
        for j in range(d):
            s += xr[j]
        mean = s * inv_d
        rstd = _row_rstd(xr, mean, inv_d, eps)
        if save:
            stats[i, 0] = mean
            stats[i, 1] = rstd
        orow = out[i] if write else discard
        for j in range(d):
            orow[j] = center_scale(xr[j], mean, rstd) * gamma[j] + beta[j]


@jit
def layer_norm_rows(x: Any, gamma: Any, beta: Any, eps: Any, stats: Any, out: Any, start: Any, stop: Any) -> None:
    """``out[i] = (x[i] - mean) / sqrt(var + eps) * gamma + beta`` per row of ``x[R, D]`` (two-pass mean
    and biased variance); if ``stats`` (float64) has ``R`` rows, ``stats[i] = (mean, rstd)``, the values
    row ``i`` was normalised with (``x``'s dtype, widened exactly), for the backward; otherwise it has none.
    An ``out`` without rows asks for the statistics only."""
    save = stats.shape[0] != 0
    write = out.shape[0] != 0
    d = x.shape[1]
    inv_d = x.dtype.type(1.0 / d)
    zero = x.dtype.type(0)
    # rows of PIPELINED_ROW_BYTES or more: the sum of row i + 1 is taken in row i's output loop, so that its
    # read from memory overlaps row i's arithmetic (one thread, 4096 x 1024 float32: 2.54 -> 1.95 ms; two:
    # 1.59 -> 1.37). The first row's sum comes from a pass of that same loop (its output thrown away), so
    # that every row's sum is added up alike, wherever a thread's rows begin. Shorter rows take
    # :func:`_layer_norm_short_rows` (each row's sum in a loop of its own, before its output loop).
    if start >= stop:
        return
    if d * x.itemsize < PIPELINED_ROW_BYTES:
        _layer_norm_short_rows(x, gamma, beta, eps, stats, out, start, stop)
        return
    discard = np.empty(d, x.dtype)  # the pipeline's first pass, or no output
    s = zero
    for i in range(start - 1, stop):
        if i < start:
            xr = x[start]
            orow = discard
            mean = zero
            rstd = x.dtype.type(1)
        else:
            xr = x[i]
            orow = out[i] if write else discard
            mean = s * inv_d
            rstd = _row_rstd(xr, mean, inv_d, eps)
            if save:
                stats[i, 0] = mean
                stats[i, 1] = rstd
        following = x[i + 1] if i + 1 < stop else xr  # (the last row's sum of itself goes unused)
        s = zero
        for j in range(d):
            orow[j] = center_scale(xr[j], mean, rstd) * gamma[j] + beta[j]
            s += following[j]


@jit
def _row_max(x: Any, i: Any) -> Any:
    """NaN-propagating max of row ``i`` of ``x[R, D]``."""
    m = x[i, 0]
    for j in range(x.shape[1]):
        m = fmaximum(m, x[i, j])
    return m


@jit
def softmax_rows(x: Any, out: Any, start: Any, stop: Any) -> None:
    """Softmax of each row of ``x[R, D]`` (``out`` may be ``x``, but then LLVM's runtime alias
    check picks the scalar loop: 6x slower)."""
    d = x.shape[1]
    zero = x.dtype.type(0)
    if start >= stop:
        return
    m = _row_max(x, start)
    for i in range(start, stop):
        xr = x[i]
        orow = out[i]
        s = zero
        for j in range(d):
            e = vexp_nonpos(xr[j] - m)
            orow[j] = e
            s += e
        inv = x.dtype.type(1) / s
        # row i + 1's max is taken in row i's last loop (see layer_norm_rows; 4096 x 1024 float32, one
        # thread: 3.76 -> 3.36 ms)
        following = x[i + 1] if i + 1 < stop else xr
        m = following[0]
        for j in range(d):
            orow[j] *= inv
            m = fmaximum(m, following[j])


@jit
def log_softmax_rows(x: Any, out: Any, start: Any, stop: Any) -> None:
    """``x - logsumexp(x)`` for each row of ``x[R, D]``."""
    d = x.shape[1]
    zero = x.dtype.type(0)
    if start >= stop:
        return
    m = _row_max(x, start)
    for i in range(start, stop):
        xr = x[i]
        s = zero
        for j in range(d):
            s += vexp_nonpos(xr[j] - m)
        ls = x.dtype.type(math.log(s))
        following = x[i + 1] if i + 1 < stop else xr  # its max, as in softmax_rows (3.96 -> 3.43 ms)
        next_max = following[0]
        orow = out[i]
        for j in range(d):
            orow[j] = sub_exact(xr[j] - m, ls)
            next_max = fmaximum(next_max, following[j])
        m = next_max


@jit
def _col_max(x: Any, a: Any, b0: Any, b1: Any, m: Any, s: Any) -> None:
    """``m[k]`` = NaN-propagating max of ``x[a, :, b0 + k]`` over axis 1, and ``s[k] = 0``, for the
    columns ``[b0, b1)`` (row views indexed by ``range`` variables, so loops vectorise)."""
    n = x.shape[1]
    b = b1 - b0
    xr = x[a, 0, b0:b1]
    for k in range(b):
        m[k] = xr[k]
        s[k] = 0.0
    for i in range(1, n):
        xr = x[a, i, b0:b1]
        for k in range(b):
            m[k] = fmaximum(m[k], xr[k])


@jit
def softmax_cols(x: Any, out: Any, start: Any, stop: Any, b0: Any, b1: Any) -> None:
    """Softmax of ``x[A, N, B]`` along axis 1, for ``a`` in ``[start, stop)`` and the
    columns ``[b0, b1)`` (row views indexed by ``range`` variables, so loops vectorise)."""
    n = x.shape[1]
    b = b1 - b0
    m = np.empty(b, x.dtype)
    s = np.empty(b, x.dtype)
    for a in range(start, stop):
        _col_max(x, a, b0, b1, m, s)
        for i in range(n):
            xr = x[a, i, b0:b1]
            orow = out[a, i, b0:b1]
            for k in range(b):
                e = vexp_nonpos(xr[k] - m[k])
                orow[k] = e
                s[k] += e
        for k in range(b):
            s[k] = 1 / s[k]
        for i in range(n):
            orow = out[a, i, b0:b1]
            for k in range(b):
                orow[k] *= s[k]


@jit
def log_softmax_cols(x: Any, out: Any, start: Any, stop: Any, b0: Any, b1: Any) -> None:
    """Log-softmax of ``x[A, N, B]`` along axis 1, for ``a`` in ``[start, stop)`` and the
    columns ``[b0, b1)``."""
    n = x.shape[1]
    b = b1 - b0
    m = np.empty(b, x.dtype)
    s = np.empty(b, x.dtype)
    for a in range(start, stop):
        _col_max(x, a, b0, b1, m, s)
        for i in range(n):
            xr = x[a, i, b0:b1]
            for k in range(b):
                s[k] += vexp_nonpos(xr[k] - m[k])
        for k in range(b):
            s[k] = math.log(s[k])
        for i in range(n):
            xr = x[a, i, b0:b1]
            orow = out[a, i, b0:b1]
            for k in range(b):
                orow[k] = sub_exact(xr[k] - m[k], s[k])


@jit
def scaled_softmax_rows(x: Any, scale: Any, out: Any, start: Any, stop: Any) -> None:
    """Softmax of ``scale * x`` per row of ``x[R, D]`` (attention scores; pass a separate ``out``:
    in place runs the scalar loop)."""
    d = x.shape[1]
    zero = x.dtype.type(0)
    c = x.dtype.type(scale)
    for i in range(start, stop):
        m = x[i, 0] * c
        for j in range(d):
            m = fmaximum(m, x[i, j] * c)
        s = zero
        for j in range(d):
            e = vexp_nonpos(x[i, j] * c - m)
            out[i, j] = e
            s += e
        inv = x.dtype.type(1) / s
        for j in range(d):
            out[i, j] *= inv


@jit
def masked_softmax_rows(x: Any, mask: Any, scale: Any, out: Any, start: Any, stop: Any) -> None:
    """Softmax of ``scale * x`` over the entries of each row where ``mask`` (bool ``[R, D]``) is
    true; masked entries get 0, and a row with no true entry is all 0 (separate ``out``)."""
    d = x.shape[1]
    zero = x.dtype.type(0)
    c = x.dtype.type(scale)
    ninf = x.dtype.type(-np.inf)
    for i in range(start, stop):
        count = 0
        for j in range(d):
            count += mask[i, j]
        if count == 0:
            for j in range(d):
                out[i, j] = 0
            continue
        m = ninf
        for j in range(d):
            m = fmaximum(m, x[i, j] * c if mask[i, j] else ninf)
        s = zero
        for j in range(d):
            e = vexp_nonpos(x[i, j] * c - m)
            e = e if mask[i, j] else zero
            out[i, j] = e
            s += e
        inv = x.dtype.type(1) / s
        for j in range(d):
            out[i, j] *= inv



@_jit_inline
def _prefix_softmax_row(xr: Any, n: Any, width: Any, c: Any, orow: Any) -> None:
    """``orow[:n]`` = softmax of ``c * xr[:n]``, ``orow[n:width]`` = 0 (nothing written when ``width`` is 0)."""
    zero = xr.dtype.type(0)
    for j in range(n, width):
        orow[j] = zero
    if n == 0:
        return
    m = xr[0] * c
    for j in range(n):
        m = fmaximum(m, xr[j] * c)
    s = zero
    for j in range(n):
        e = vexp_nonpos(xr[j] * c - m)
        orow[j] = e
        s += e
    inv = xr.dtype.type(1) / s
    for j in range(n):
        orow[j] *= inv


@jit
def prefix_softmax_rows(x: Any, lengths: Any, widths: Any, scale: Any, out: Any, start: Any, stop: Any) -> None:
    """Softmax of ``scale * x[b, i, :lengths[i]]`` into ``out[b, i, :lengths[i]]`` and zeros in
    ``out[b, i, lengths[i]:widths[i]]`` for ``x, out[B, N, M]`` (separate, C-contiguous) and
    ``lengths <= widths <= M`` (int64 ``[N]``), for the rows ``i`` in ``[start, stop)``: attention
    under a mask that lets row ``i`` see the keys ``[0, lengths[i])`` (causal), only the computed
    part of each row touched."""
    c = x.dtype.type(scale)
    for b in range(x.shape[0]):
        for i in range(start, stop):
            _prefix_softmax_row(x[b, i], lengths[i], widths[i], c, out[b, i])


@jit
def prefix_attention(gemm: Any, q: Any, k: Any, v: Any, blocks: Any, lengths: Any, scale: Any, out: Any,
                     scores: Any, probs: Any) -> None:
    """``out[B, n, dv] = softmax(scale q k^T, row i sees keys [0, lengths[i])) v`` for ``q[B, n, d]``,
    ``k[B, m, d]``, ``v[B, m, dv]`` (C-contiguous), head by head and block by block of query rows:
    ``blocks[j] = (r0, r1, keys)`` (int64 ``[J, 3]``; rows ``[r0, r1)`` see keys below ``keys``, which is at
    least each of their lengths). Per block, the CBLAS ``gemm`` at address ``gemm`` (of the arrays' dtype;
    :func:`._numba_conv._gemm`) writes ``scores = q[r0:r1] k[:keys]^T``, :func:`_prefix_softmax_row` makes
    each row's probabilities (zeros past its length), and ``gemm`` writes ``out[r0:r1] = probs v[:keys]``;
    rows with no key get 0. ``scores`` and ``probs`` are flat scratch of at least ``(r1 - r0) keys``
    elements. The numpy path of :mod:`.attention_blocks` makes the same GEMM calls (block by block over
    all heads instead of head by head: the same results), with the GIL taken between them."""
    d, dv = q.shape[2], v.shape[2]
    c = q.dtype.type(scale)
    zero = q.dtype.type(0)
    for b in range(q.shape[0]):
        for j in range(blocks.shape[0]):
            r0, r1, keys = blocks[j, 0], blocks[j, 1], blocks[j, 2]
            if keys == 0:
                for i in range(r0, r1):
                    for t in range(dv):
                        out[b, i, t] = zero
                continue
            _gemm(gemm, NO_TRANS, TRANS, r1 - r0, keys, d, q[b, r0:r1], d, k[b], d, scores, keys, False)
            for i in range(r1 - r0):
                _prefix_softmax_row(scores[i * keys:(i + 1) * keys], lengths[r0 + i], keys, c,
                                    probs[i * keys:(i + 1) * keys])
            _gemm(gemm, NO_TRANS, NO_TRANS, r1 - r0, dv, keys, probs, keys, v[b], dv, out[b, r0:r1], dv, False)

@_jit_inline
def _prefix_ds_row(pr: Any, dr: Any, n: Any, width: Any, c: Any, orow: Any) -> None:
    """``orow[:n] = c * pr * (dr - <dr, pr>)`` over the first ``n`` entries (the scores' cotangent of a
    softmax row ``pr`` whose output's cotangent is ``dr``), ``orow[n:width]`` = 0."""
    zero = pr.dtype.type(0.0)
    dot = zero
    for j in range(n):
        dot += dr[j] * pr[j]
    for j in range(n):
        orow[j] = pr[j] * (dr[j] - dot) * c
    for j in range(n, width):
        orow[j] = zero


@jit
def prefix_ds_rows(p: Any, dp: Any, lengths: Any, widths: Any, scale: Any, out: Any, start: Any,
                   stop: Any) -> None:
    """The scores' cotangent ``out[b, i, :lengths[i]]`` of ``p, dp, out[B, N, M]`` (separate,
    C-contiguous; ``dp`` the probabilities' cotangent), zeros in ``out[b, i, lengths[i]:widths[i]]``:
    attention under a mask that lets row ``i`` see the keys ``[0, lengths[i])``, only the computed part
    touched; rows ``i`` in ``[start, stop)``."""
    c = p.dtype.type(scale)
    for b in range(p.shape[0]):
        for i in range(start, stop):
            _prefix_ds_row(p[b, i], dp[b, i], lengths[i], widths[i], c, out[b, i])


@jit
def prefix_attention_backward(gemm: Any, q: Any, k: Any, v: Any, g: Any, blocks: Any, key_blocks: Any,
                              lengths: Any, widths: Any, scale: Any, dq: Any, dk: Any, dv: Any,
                              probs: Any, dp: Any, ds: Any) -> None:
    """The cotangents of :func:`prefix_attention` for ``g[B, n, dv]``, head by head, each GEMM by the
    CBLAS ``gemm`` at address ``gemm``: ``dq[B, n, d]`` (overwritten), ``dk[B, m, d]`` and ``dv[B, m, dv]``
    (zeroed by the caller: key rows no query sees stay 0); an empty (size-0) one is not computed.
    ``blocks[j] = (r0, r1, keys)`` are the query blocks, ``key_blocks[j] = (c0, c1, first)`` the key
    blocks (rows from ``first`` on hold their probabilities), ``widths[i]`` each row's written width
    (non-decreasing), ``probs``, ``dp``, ``ds`` scratch of at least ``n m`` elements each (one head's
    scores). Per head, as :func:`.attention_blocks.backward` does through numpy: the probabilities block
    by block, ``dv[c0:c1] = p[first:, c0:c1]^T g[first:]``, ``dp = g v^T`` and the scores' cotangent
    ``ds`` block by block, ``dq[r0:r1] = ds[r0:r1, :keys] k[:keys]``, ``dk[c0:c1] = ds[first:, c0:c1]^T q[first:]``."""
    n, d, m, dvd = q.shape[1], q.shape[2], k.shape[1], v.shape[2]
    need_q, need_k, need_v = dq.size > 0, dk.size > 0, dv.size > 0
    c = q.dtype.type(scale)
    zero = q.dtype.type(0)
    p2 = probs[:n * m].reshape(n, m)
    dp2 = dp[:n * m].reshape(n, m)
    ds2 = ds[:n * m].reshape(n, m)
    for b in range(q.shape[0]):
        for j in range(blocks.shape[0]):
            r0, r1, keys = blocks[j, 0], blocks[j, 1], blocks[j, 2]
            if keys:
                _gemm(gemm, NO_TRANS, TRANS, r1 - r0, keys, d, q[b, r0:r1], d, k[b], d, ds2[r0:r1], m, False)
            for i in range(r0, r1):
                _prefix_softmax_row(ds2[i], lengths[i], widths[i], c, p2[i])
        if need_v:
            for j in range(key_blocks.shape[0]):
                c0, c1, first = key_blocks[j, 0], key_blocks[j, 1], key_blocks[j, 2]
                _gemm(gemm, TRANS, NO_TRANS, c1 - c0, dvd, n - first, p2[first:, c0:], m, g[b, first:], dvd,
                      dv[b, c0:c1], dvd, False)
        if not (need_q or need_k):
            continue
        for j in range(blocks.shape[0]):
            r0, r1, keys = blocks[j, 0], blocks[j, 1], blocks[j, 2]
            if keys:
                _gemm(gemm, NO_TRANS, TRANS, r1 - r0, keys, dvd, g[b, r0:r1], dvd, v[b], dvd, dp2[r0:r1], m, False)
        for i in range(n):
            _prefix_ds_row(p2[i], dp2[i], lengths[i], widths[i], c, ds2[i])
        if need_q:
            for j in range(blocks.shape[0]):
                r0, r1, keys = blocks[j, 0], blocks[j, 1], blocks[j, 2]
                if keys:
                    _gemm(gemm, NO_TRANS, NO_TRANS, r1 - r0, d, keys, ds2[r0:r1], m, k[b], d, dq[b, r0:r1], d, False)
                else:
                    for i in range(r0, r1):
                        for t in range(d):
                            dq[b, i, t] = zero
        if need_k:
            for j in range(key_blocks.shape[0]):
                c0, c1, first = key_blocks[j, 0], key_blocks[j, 1], key_blocks[j, 2]
                _gemm(gemm, TRANS, NO_TRANS, c1 - c0, d, n - first, ds2[first:, c0:], m, q[b, first:], d,
                      dk[b, c0:c1], d, False)

# Flat kernels index views ``x[start:stop]`` with ``range(stop - start)``: with
# ``range(start, stop)`` numba cannot prove the index non-negative, keeps the wraparound
# fix-up, and the loop runs 6x slower (measured on vexp).

# ---- gelu -------------------------------------------------------------------------------------

# The float32 erf form (forward and backward) lives in its own self-contained module.
from ._numba_gelu import gelu_erf32  # noqa: E402


@jit
def gelu_erf64(x: Any, out: Any, start: Any, stop: Any) -> None:
    """float64 ``x/2 * erfc(-x/sqrt(2))`` on flat arrays (libm erfc: exact, scalar); ``gelu(-inf)`` is
    its limit ``-0`` (not ``-inf * 0``), as in float32."""
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        os_[i] = v * 0.5 * math.erfc(v * -0.7071067811865476) if v != -math.inf else -0.0


@_jit_inline
def _sigmoid_of(v: Any) -> Any:
    """``1 / (1 + exp(-v))`` as ``e / (1 + e)`` with ``e = exp(-|v|)`` for negative ``v`` (no overflow
    anywhere; NaN stays NaN): the body of :func:`sigmoid_flat` and of :data:`sigmoid_ufunc`."""
    one = like(v, 1.0)
    e = vexp_nonpos(-abs(v))
    return one / (one + e) if v >= like(v, 0.0) else e / (one + e)


@_jit_inline
def _relu_of(v: Any) -> Any:
    """``max(v, 0)`` as numpy's ``maximum(v, 0)``: NaN stays NaN, ``-0`` gives ``+0`` (a select the
    compiler vectorises): the body of :func:`relu_flat` and of the relu ufuncs."""
    zero = like(v, 0.0)
    return v if (v > zero) | (v != v) else zero


@jit
def sigmoid_flat(x: Any, out: Any, start: Any, stop: Any) -> None:
    """:func:`_sigmoid_of` on flat arrays (vectorised)."""
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        os_[i] = _sigmoid_of(xs[i])


@jit
def relu_flat(x: Any, out: Any, start: Any, stop: Any) -> None:
    """:func:`_relu_of` on flat float arrays (vectorised)."""
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        os_[i] = _relu_of(xs[i])


def _scalar_ufunc(f: Callable[[Any], Any], dtype: Any) -> Any:
    """numba's compiled ``f`` as a numpy ufunc of ``dtype -> dtype`` (``numba.float32`` or ``numba.float64``;
    numba's ``DUFunc``; its ``.ufunc`` is the plain numpy ufunc). On small arrays it is the cheapest call there
    is: numpy's ufunc machinery takes any layout and allocates the result (~0.5 us on 8 elements, against
    ~1.9 us for a jitted kernel called with two flat arrays and its ``start, stop``). Its loop is numba's,
    which need not vectorise (sigmoid's does not: 5.1 ms on 4M float32, the flat kernel 2.8 ms),
    so large arrays take the flat kernels. Special inputs (NaN, infinities, huge values) raise
    floating-point flags inside the loop (a comparison with NaN, the exp's conversion to an integer),
    which numpy reports as warnings: callers silence them."""
    return numba.vectorize([dtype(dtype)], nopython=True, cache=True, fastmath=set(FAST))(f)  # type: ignore[no-untyped-call]


def _sigmoid_scalar(v: Any) -> Any:
    """:func:`_sigmoid_of`, the body of the sigmoid ufuncs."""
    return _sigmoid_of(v)


def _relu_scalar(v: Any) -> Any:
    """:func:`_relu_of`, the body of the relu ufuncs."""
    return _relu_of(v)


_UFUNC_BODIES = {"sigmoid": _sigmoid_scalar, "relu": _relu_scalar}
_UFUNC_DTYPES = {"f32": numba.float32, "f64": numba.float64}
UFUNC_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
"""The numpy ufuncs of :func:`_scalar_ufunc`: ``relu_ufunc_f32`` is relu's float32 ufunc, ``sigmoid_ufunc_f64``
sigmoid's float64 one (the suffix of a numpy dtype is ``UFUNC_SUFFIX[dtype]``). Each is built on its first use,
one function and one dtype at a time: building one compiles its loop's wrapper, about 0.05 s a ufunc and
dtype in a fresh process even from numba's cache, so a program that never takes a sigmoid, or runs in float32
only, does not pay for the others."""


def __getattr__(name: str) -> Any:
    function, _, suffix = name.partition("_ufunc_")
    body, dtype = _UFUNC_BODIES.get(function), _UFUNC_DTYPES.get(suffix)
    if body is None or dtype is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    ufunc = globals()[name] = _scalar_ufunc(body, dtype)
    return ufunc


# tanh (float32): ``x + x^3 Q(x^2)`` for ``|x| < 0.75``, ``Q`` of degree 5 fitted here by reweighted least
# squares to tanh's relative error on [0, 0.75] (1.7e-9); beyond, ``sign(x) (1 - 2 / (exp(2|x|) + 1))``
# (no cancellation there: tanh > 0.63). Within 1.5 ulp of the exact value (measured on 400k points).
_H0, _H1, _H2, _H3, _H4, _H5 = (np.float32(c) for c in (
    -0.3333331507254659, 0.13332693092894668, -0.053892658454079506, 0.021451830498707674,
    -0.007656955820899304, 0.0017367670559323698))


@jit
def tanh32_flat(x: Any, out: Any, start: Any, stop: Any) -> None:
    """float32 ``tanh`` on flat arrays (vectorised; see above): NaN stays NaN, ``tanh(+-inf) = +-1``,
    ``tanh(-0) = -0``."""
    one = np.float32(1.0)
    two = np.float32(2.0)
    cut = np.float32(0.75)
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        a = abs(v)
        u = v * v
        near = v * (one + u * (((((_H5 * u + _H4) * u + _H3) * u + _H2) * u + _H1) * u + _H0))  # keeps -0
        far = one - two / (vexp(a + a) + one)
        os_[i] = near if a < cut else (far if v > 0 else -far)


@jit
def gelu_tanh(x: Any, out: Any, start: Any, stop: Any) -> None:
    """``x/2 * (1 + tanh(u))``, ``u = sqrt(2/pi) (x + 0.044715 x^3)``, written as
    ``x / (1 + exp(-2u))`` on flat arrays."""
    c1 = x.dtype.type(-2.0 * 0.7978845608028654)
    c3 = x.dtype.type(-2.0 * 0.7978845608028654 * 0.044715)
    one = x.dtype.type(1.0)
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        os_[i] = v / (one + vexp(v * (c1 + c3 * v * v)))


@jit
def _valid_range(off: Any, stride: Any, n_out: Any, n_in: Any) -> Any:
    """Output positions ``k`` in ``[0, n_out)`` with ``0 <= k*stride + off < n_in``, as ``[k0, k1)``."""
    k0 = 0 if off >= 0 else min(n_out, (-off + stride - 1) // stride)
    if n_in - 1 - off < 0:
        return k0, k0
    return k0, max(k0, min(n_out, (n_in - 1 - off) // stride + 1))


# ---- pooling over x[P, D, H, W] (P = N*C planes; 1d/2d pools use size-1 dims) ------------------


# Max-pool is separable: a window's maximum is the maximum over its rows of each row's maximum over
# the window's columns. Each kernel first reduces every input row (z, y) of a plane over the columns
# of each output position k (``hv[z*H + y, k]``, one pass whose inner loop runs over k), then reduces
# the rows of each output window (vectorised over k, on rows still in cache): 9 taps of a 3x3 window
# cost 3 + 3 loads per output instead of 9, and rows shared by overlapping windows are reduced once.
# The first maximum in row-major order (the first NaN if any) is found the same way: each row keeps
# its first maximal column (``hi``), then the first row whose maximum wins keeps it (a later candidate
# wins only if strictly greater, or NaN against a number). Padding is ``-inf``: it is skipped, never
# read. An empty window (all padding) is ``-inf``, has no argmax (-1): its cotangent is dropped.


@jit
def _window(i: Any, stride: Any, pad: Any, k: Any, n: Any) -> Any:
    """The input positions ``[lo, hi)`` in range of output position ``i``'s window along one axis."""
    first = i * stride - pad
    return max(first, 0), min(first + k, n)


@jit
def _inner_range(n_out: Any, n_in: Any, k: Any, stride: Any, pad: Any) -> Any:
    """Output positions ``[k0, k1)`` whose whole window lies inside ``[0, n_in)``."""
    k0 = min(n_out, (pad + stride - 1) // stride)
    last = n_in - k + pad  # the window of position i is inside iff i * stride <= last
    k1 = min(n_out, last // stride + 1) if last >= 0 else 0
    return k0, max(k0, k1)


@_jit_inline
def _border_windows(xr: Any, hv: Any, hi: Any, kw: Any, sw: Any, pw: Any, k0: Any, k1: Any, track: Any) -> None:
    """The windows of an input row ``xr`` that reach into the padding (outputs ``k < k0`` and ``k >= k1``):
    ``hv[k]`` their NaN-propagating max (``-inf`` if no column is in range) and, if ``track``, ``hi[k]``
    the column of the first maximum (the first NaN if any; -1 if none)."""
    ow = hv.shape[0]
    w_in = xr.shape[0]
    for k in range(ow - (k1 - k0)):
        k = k if k < k0 else k + k1 - k0
        c0, c1 = _window(k, sw, pw, kw, w_in)
        m = hv.dtype.type(-np.inf)
        at = -1
        for c in range(c0, c1):
            v = xr[c]
            if not track:
                m = fmaximum(m, v)
            elif at < 0 or v > m or (v != v and m == m):
                m = v
                at = c
        hv[k] = m
        if track:
            hi[k] = at


@_jit_inline
def _window_row_max(xr: Any, hv: Any, kw: Any, sw: Any, pw: Any) -> None:
    """``hv[k]`` = NaN-propagating max of the input row ``xr`` over the in-range columns of output
    ``k``'s window (``-inf`` if none)."""
    k0, k1 = _inner_range(hv.shape[0], xr.shape[0], kw, sw, pw)
    _border_windows(xr, hv, hv, kw, sw, pw, k0, k1, False)
    src = xr[k0 * sw - pw:]
    dst = hv[k0:k1]
    for k in range(k1 - k0):
        m = src[k * sw]
        for e in range(1, kw):
            m = fmaximum(m, src[k * sw + e])
        dst[k] = m


@_jit_inline
def _window_row_argmax(xr: Any, hv: Any, hi: Any, kw: Any, sw: Any, pw: Any) -> None:
    """:func:`_window_row_max` into ``hv``, and into ``hi[k]`` the column of the row's first maximum in the
    window (the first NaN if any; -1 if no column is in range)."""
    k0, k1 = _inner_range(hv.shape[0], xr.shape[0], kw, sw, pw)
    _border_windows(xr, hv, hi, kw, sw, pw, k0, k1, True)
    c0 = k0 * sw - pw
    src = xr[c0:]
    dst = hv[k0:k1]
    dsti = hi[k0:k1]
    for k in range(k1 - k0):
        m = src[k * sw]
        at = 0
        for e in range(1, kw):
            v = src[k * sw + e]
            wins = (v > m) | ((v != v) & (m == m))
            m = v if wins else m
            at = e if wins else at
        dst[k] = m
        dsti[k] = c0 + k * sw + at


@jit
def _pool_rows(xr: Any, hv: Any, hi: Any, kw: Any, sw: Any, pw: Any, track: Any) -> None:
    """:func:`_window_row_argmax` (``track``) or :func:`_window_row_max` of one input row, with the
    window and stride as constants for the common 3-wide stride-2 and 3-wide stride-1 windows (then the loops over
    the window unroll and vectorise: 2.4x faster measured)."""
    if kw == 3 and sw == 2:
        if track:
            _window_row_argmax(xr, hv, hi, 3, 2, pw)
        else:
            _window_row_max(xr, hv, 3, 2, pw)
    elif kw == 3 and sw == 1:
        if track:
            _window_row_argmax(xr, hv, hi, 3, 1, pw)
        else:
            _window_row_max(xr, hv, 3, 1, pw)
    elif track:
        _window_row_argmax(xr, hv, hi, kw, sw, pw)
    else:
        _window_row_max(xr, hv, kw, sw, pw)


@jit
def max_pool_fwd(x: Any, out: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                 pd: Any, ph: Any, pw: Any, start: Any, stop: Any) -> None:
    """Window max (padding ``-inf``; NaN propagates) for planes ``[start, stop)`` of ``x[P, D, H, W]``."""
    dd, hh, ww = x.shape[1], x.shape[2], x.shape[3]
    od, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    hv = np.empty((dd * hh, ow), x.dtype)
    xf = x.reshape(-1)
    for p in range(start, stop):
        for r in range(dd * hh):
            _pool_rows(xf[(p * dd * hh + r) * ww:(p * dd * hh + r + 1) * ww], hv[r], hv[r], kw, sw, pw, False)
        for i in range(od):
            z0, z1 = _window(i, sd, pd, kd, dd)
            for j in range(oh):
                y0, y1 = _window(j, sh, ph, kh, hh)
                acc = out[p, i, j]
                for k in range(ow):
                    acc[k] = -np.inf
                for z in range(z0, z1):
                    for y in range(y0, y1):
                        row = hv[z * hh + y]
                        for k in range(ow):
                            acc[k] = fmaximum(acc[k], row[k])


@jit
def max_pool2x2_fwd(x: Any, out: Any, start: Any, stop: Any) -> None:
    """2x2 windows, stride 2, no padding, over planes ``[start, stop)`` of ``x[P, H, W]`` into
    ``out[P, H // 2, W // 2]`` (NaN propagates; a last odd row or column belongs to no window).
    The windows are too short and too few per row for SIMD, so each plane is read as flat pairs, in loops
    the vectoriser takes (see :func:`._numba_backward.max_pool2x2_bwd`, which reads them alike): the maxima
    of the pairs ``(x[2q], x[2q + 1])`` of the flat plane, which hold every window's upper row and, for an
    even ``W``, its lower row; for an odd ``W`` those of the pairs ``(x[2q + 1], x[2q + 2])``, which hold the
    lower rows; then of each window's two pairs, ``j W + k`` and ``j W + W // 2 + k`` (measured on one
    thread against a loop over the windows: 64x16 planes of 26x26 0.10-0.12 ms against 0.33 ms, 64x32 of
    11x11 0.08 against 0.11 ms)."""
    hh, ww = x.shape[1], x.shape[2]
    oh, ow = out.shape[1], out.shape[2]
    xf = x.reshape(-1)
    of = out.reshape(-1)
    size = hh * ww
    odd = ww % 2 == 1
    max_e = np.empty(size // 2, x.dtype)
    max_o = np.empty((size - 1) // 2 if odd else 0, x.dtype)
    low_max = max_o if odd else max_e
    for p in range(start, stop):
        xp = xf[p * size:(p + 1) * size]
        for q in range(max_e.shape[0]):
            max_e[q] = fmaximum(xp[2 * q], xp[2 * q + 1])
        for q in range(max_o.shape[0]):
            max_o[q] = fmaximum(xp[2 * q + 1], xp[2 * q + 2])
        op = of[p * oh * ow:(p + 1) * oh * ow]
        for j in range(oh):
            top = max_e[j * ww:j * ww + ow]
            low = low_max[j * ww + ow:j * ww + 2 * ow]
            row = op[j * ow:(j + 1) * ow]
            for k in range(ow):
                row[k] = fmaximum(top[k], low[k])


@jit
def _argmax_route(x: Any, src: Any, dst: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                  pd: Any, ph: Any, pw: Any, start: Any, stop: Any, gather: Any) -> None:
    """Values routed through each window's first argmax in ``x``, for planes ``[start, stop)``:
    ``gather`` false adds ``src`` (pooled) into ``dst`` (like ``x``, zeroed here plane by plane) at the
    argmaxes; true sets ``dst`` (pooled) to ``src`` (like ``x``) read there, 0 for an empty window.
    ``gather`` is a compile-time constant (``literally``): each direction compiles to its own loops."""
    literally(gather)
    pooled = dst if gather else src
    dd, hh, ww = x.shape[1], x.shape[2], x.shape[3]
    od, oh, ow = pooled.shape[1], pooled.shape[2], pooled.shape[3]
    plane = dd * hh * ww
    hv = np.empty((dd * hh, ow), x.dtype)
    hi = np.empty((dd * hh, ow), np.int64)
    best = np.empty(ow, x.dtype)
    row_of = np.empty(ow, np.int64)
    xf = x.reshape(-1)
    for p in range(start, stop):
        full = (src if gather else dst)[p].reshape(-1)
        if not gather:
            for q in range(plane):
                full[q] = 0
        for r in range(dd * hh):
            _pool_rows(xf[p * plane + r * ww:p * plane + (r + 1) * ww], hv[r], hi[r], kw, sw, pw, True)
        for i in range(od):
            z0, z1 = _window(i, sd, pd, kd, dd)
            for j in range(oh):
                y0, y1 = _window(j, sh, ph, kh, hh)
                row = pooled[p, i, j]
                if z0 >= z1 or y0 >= y1:
                    if gather:
                        for k in range(ow):
                            row[k] = 0
                    continue
                r0 = z0 * hh + y0
                first = hv[r0]
                for k in range(ow):
                    best[k] = first[k]
                    row_of[k] = r0
                for z in range(z0, z1):
                    for y in range(y0, y1):
                        r = z * hh + y
                        if r == r0:
                            continue
                        cand = hv[r]
                        for k in range(ow):
                            v = cand[k]
                            m = best[k]
                            wins = (v > m) | ((v != v) & (m == m))
                            best[k] = v if wins else m
                            row_of[k] = r if wins else row_of[k]
                for k in range(ow):
                    r = row_of[k]
                    c = hi[r, k]
                    if gather:
                        row[k] = full[r * ww + c] if c >= 0 else 0
                    elif c >= 0:
                        full[r * ww + c] += row[k]


@jit
def max_pool_bwd(x: Any, g: Any, dx: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                 pd: Any, ph: Any, pw: Any, start: Any, stop: Any) -> None:
    """``dx`` (like ``x``; every plane in ``[start, stop)`` is overwritten) = ``g`` routed to each
    window's first argmax."""
    _argmax_route(x, g, dx, kd, kh, kw, sd, sh, sw, pd, ph, pw, start, stop, False)


@jit
def max_pool_select(x: Any, h: Any, out: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                    pd: Any, ph: Any, pw: Any, start: Any, stop: Any) -> None:
    """``out[window] = h[first argmax of the window in x]`` (0 for an empty window)."""
    _argmax_route(x, h, out, kd, kh, kw, sd, sh, sw, pd, ph, pw, start, stop, True)


@jit
def avg_pool_fwd(x: Any, out: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                 pd: Any, ph: Any, pw: Any, start: Any, stop: Any) -> None:
    """Window sum over the in-range positions divided by ``kd*kh*kw`` (padding counts as 0),
    one output row at a time."""
    dd, hh, ww = x.shape[1], x.shape[2], x.shape[3]
    od, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    inv = x.dtype.type(1.0 / (kd * kh * kw))
    for p in range(start, stop):
        for i in range(od):
            z0, z1 = _window(i, sd, pd, kd, dd)
            for j in range(oh):
                y0, y1 = _window(j, sh, ph, kh, hh)
                acc = out[p, i, j]
                for k in range(ow):
                    acc[k] = 0
                for z in range(z0, z1):
                    for y in range(y0, y1):
                        xrow = x[p, z, y]
                        for e in range(kw):
                            k0, k1 = _valid_range(e - pw, sw, ow, ww)
                            src = xrow[k0 * sw + e - pw:]
                            dst = acc[k0:k1]
                            for k in range(k1 - k0):
                                dst[k] += src[k * sw]
                for k in range(ow):
                    acc[k] *= inv


@jit
def avg_pool_bwd(g: Any, dx: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                 pd: Any, ph: Any, pw: Any, start: Any, stop: Any) -> None:
    """``dx`` (zeroed) += ``g / (kd*kh*kw)`` over the in-range positions of each window."""
    dd, hh, ww = dx.shape[1], dx.shape[2], dx.shape[3]
    od, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    inv = g.dtype.type(1.0 / (kd * kh * kw))
    for p in range(start, stop):
        for i in range(od):
            z0, z1 = _window(i, sd, pd, kd, dd)
            for j in range(oh):
                y0, y1 = _window(j, sh, ph, kh, hh)
                grow = g[p, i, j]
                for z in range(z0, z1):
                    for y in range(y0, y1):
                        drow = dx[p, z, y]
                        for e in range(kw):
                            k0, k1 = _valid_range(e - pw, sw, ow, ww)
                            dst = drow[k0 * sw + e - pw:]
                            src = grow[k0:k1]
                            for k in range(k1 - k0):
                                dst[k * sw] += src[k] * inv


@jit
def _window_lse(x: Any, p: Any, z0: Any, z1: Any, y0: Any, y1: Any, w0: Any, w1: Any, beta: Any) -> Any:
    """The max ``m`` of ``beta x`` over the window ``[z0, z1) x [y0, y1) x [w0, w1)`` of plane ``x[p]``
    and ``s = sum exp(beta x - m)`` there (float64; ``s`` is 0 when ``m`` is infinite)."""
    m = -np.inf
    for z in range(z0, z1):
        for y in range(y0, y1):
            for w in range(w0, w1):
                m = fmaximum(m, beta * np.float64(x[p, z, y, w]))
    s = 0.0
    if math.isinf(m):
        return m, s
    for z in range(z0, z1):
        for y in range(y0, y1):
            for w in range(w0, w1):
                s += math.exp(beta * np.float64(x[p, z, y, w]) - m)
    return m, s


@jit
def smooth_max_pool_fwd(x: Any, out: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                        pd: Any, ph: Any, pw: Any, beta: Any, start: Any, stop: Any) -> None:
    """``(1/beta) log sum exp(beta x)`` over the in-range positions of each window, shifted by the
    window max of ``beta x`` (computed in float64)."""
    dd, hh, ww = x.shape[1], x.shape[2], x.shape[3]
    od, oh, ow = out.shape[1], out.shape[2], out.shape[3]
    for p in range(start, stop):
        for i in range(od):
            z0, z1 = _window(i, sd, pd, kd, dd)
            for j in range(oh):
                y0, y1 = _window(j, sh, ph, kh, hh)
                for k in range(ow):
                    w0, w1 = _window(k, sw, pw, kw, ww)
                    m, s = _window_lse(x, p, z0, z1, y0, y1, w0, w1, beta)
                    if math.isinf(m):
                        out[p, i, j, k] = m / beta
                        continue
                    out[p, i, j, k] = (m + math.log(s)) / beta


@jit
def smooth_max_pool_bwd(x: Any, g: Any, dx: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                        pd: Any, ph: Any, pw: Any, beta: Any, start: Any, stop: Any) -> None:
    """``dx`` (zeroed) += ``g`` times each window's ``softmax(beta x)`` weights (windows whose
    max is infinite get no gradient rather than NaN)."""
    dd, hh, ww = x.shape[1], x.shape[2], x.shape[3]
    od, oh, ow = g.shape[1], g.shape[2], g.shape[3]
    for p in range(start, stop):
        for i in range(od):
            z0, z1 = _window(i, sd, pd, kd, dd)
            for j in range(oh):
                y0, y1 = _window(j, sh, ph, kh, hh)
                for k in range(ow):
                    w0, w1 = _window(k, sw, pw, kw, ww)
                    m, s = _window_lse(x, p, z0, z1, y0, y1, w0, w1, beta)
                    if math.isinf(m):  # all -inf (or a +inf) window: no finite weights
                        continue
                    c = np.float64(g[p, i, j, k]) / s
                    for z in range(z0, z1):
                        for y in range(y0, y1):
                            for w in range(w0, w1):
                                dx[p, z, y, w] += c * math.exp(beta * np.float64(x[p, z, y, w]) - m)


# ---- convolution: im2col / col2im over x[N, C, D, H, W] ----------------------------------------
# cols[n, (c*kd + a)*kh*kw + b*kw + e, (i*OH + j)*OW + k] = x[n, c, i*sd - pd + a*dd,
#                                                           j*sh - ph + b*dh, k*sw - pw + e*dw]
# (0 outside x). Channel-major rows, so for groups the rows of group g are one contiguous block.


# The column loops index 1-d row views with plain ``range`` variables: numba then knows the
# index is non-negative, skips the wraparound fix-up and vectorises the copy (4x faster than
# indexing the 5-d arrays directly).


@jit
def _im2col_walk(img: Any, cols: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
                 pd: Any, ph: Any, pw: Any, dd: Any, dh: Any, dw: Any,
                 od: Any, oh: Any, ow: Any, start: Any, stop: Any, adjoint: Any) -> None:
    """The walk over every (column row, output position) pair of ``img[N, C, D, H, W]``, samples
    ``[start, stop)``, with the wide column layout ``cols[C*K, N, L]`` (row ``c*K + tap``, then
    sample, then output position): ``adjoint`` false fills ``cols`` from ``img`` (zeros outside it);
    true adds the columns into ``img``. ``adjoint`` is a compile-time constant (``literally``): each
    direction compiles to its own loops."""
    literally(adjoint)
    n_all, c_in, d_in, h_in, w_in = img.shape[0], img.shape[1], img.shape[2], img.shape[3], img.shape[4]
    imf = img.reshape(-1)
    cf = cols.reshape(-1)
    ll = od * oh * ow
    plane = d_in * h_in * w_in
    for n in range(start, stop):
        for c in range(c_in):
            ibase = (n * c_in + c) * plane
            for a in range(kd):
                for b in range(kh):
                    yoff = b * dh - ph
                    j0, j1 = _valid_range(yoff, sh, oh, h_in)
                    for e in range(kw):
                        row = ((c * kd + a) * kh + b) * kw + e
                        cbase = (row * n_all + n) * ll
                        xoff = e * dw - pw
                        k0, k1 = _valid_range(xoff, sw, ow, w_in)
                        for i in range(od):
                            z = i * sd - pd + a * dd
                            if adjoint:
                                if z < 0 or z >= d_in:
                                    continue
                                for j in range(j0, j1):
                                    src = cbase + (i * oh + j) * ow + k0
                                    dst = ibase + (z * h_in + j * sh + yoff) * w_in + xoff + k0 * sw
                                    crow = cf[src:src + (k1 - k0)]
                                    if sw == 1:
                                        orow = imf[dst:dst + (k1 - k0)]
                                        for k in range(k1 - k0):
                                            orow[k] += crow[k]
                                    else:
                                        orow = imf[dst:dst + (k1 - k0) * sw]
                                        for k in range(k1 - k0):
                                            orow[k * sw] += crow[k]
                            else:
                                block = cf[cbase + i * oh * ow:cbase + (i + 1) * oh * ow]
                                if z < 0 or z >= d_in:
                                    for q in range(oh * ow):
                                        block[q] = 0
                                    continue
                                for q in range(j0 * ow):
                                    block[q] = 0
                                for q in range(j1 * ow, oh * ow):
                                    block[q] = 0
                                for j in range(j0, j1):
                                    crow = block[j * ow:(j + 1) * ow]
                                    src = ibase + (z * h_in + j * sh + yoff) * w_in + xoff + k0 * sw
                                    for k in range(k0):
                                        crow[k] = 0
                                    cmid = crow[k0:k1]
                                    if sw == 1:
                                        xrow = imf[src:src + (k1 - k0)]
                                        for k in range(k1 - k0):
                                            cmid[k] = xrow[k]
                                    else:
                                        xrow = imf[src:src + (k1 - k0) * sw]
                                        for k in range(k1 - k0):
                                            cmid[k] = xrow[k * sw]
                                    for k in range(k1, ow):
                                        crow[k] = 0


@jit
def im2col(x: Any, cols: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
           pd: Any, ph: Any, pw: Any, dd: Any, dh: Any, dw: Any,
           od: Any, oh: Any, ow: Any, start: Any, stop: Any) -> None:
    """Fill ``cols[C*kd*kh*kw, N, od*oh*ow]`` from ``x[N, C, D, H, W]`` for samples ``[start, stop)``."""
    _im2col_walk(x, cols, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow, start, stop, False)


@jit
def col2im(cols: Any, out: Any, kd: Any, kh: Any, kw: Any, sd: Any, sh: Any, sw: Any,
           pd: Any, ph: Any, pw: Any, dd: Any, dh: Any, dw: Any,
           od: Any, oh: Any, ow: Any, start: Any, stop: Any) -> None:
    """The adjoint of :func:`im2col`: ``out[N, C, D, H, W]`` (zeroed) += the columns
    ``cols[C*K, N, L]``, samples ``[start, stop)``."""
    _im2col_walk(out, cols, kd, kh, kw, sd, sh, sw, pd, ph, pw, dd, dh, dw, od, oh, ow, start, stop, True)


# ---- stride-1 convolution on flattened planes -------------------------------------------------------
# A stride-1 convolution reads, for kernel tap t, the input at a fixed offset off[t] from each output
# position when both are numbered on the (zero-padded) input plane flattened: output (i, j, k) is
# position q = (i*Hp + j)*Wp + k, and tap t reads plane[off[t] + q]. So over q in [0, Lw) (Lw up to
# the last output position) every tap is one contiguous, vectorisable pass. The positions q that
# are not outputs (k >= ow: a row's tail, the rows j >= oh of a 3-d plane) are *gaps*: computed and
# dropped in the forward; set to exactly 0 wherever they would be summed (so no 0 * inf).


@jit
def zero_gaps(buf: Any, od: Any, oh: Any, ow: Any, hp: Any, wp: Any) -> None:
    """Set the gap positions of every row of ``buf[R, Lw]`` (wide output positions) to 0."""
    lw = buf.shape[1]
    for r in range(buf.shape[0]):
        row = buf[r]
        for i in range(od):
            for j in range(hp):
                base = (i * hp + j) * wp
                first = ow if j < oh else 0
                last = min(base + wp, lw)
                for q in range(base + first, last):
                    row[q] = 0


@jit
def taps_to_cols(planes: Any, offs: Any, cols: Any) -> None:
    """``cols[c, t, n, :] = planes[n, c, offs[t]:offs[t] + Lw]`` for ``planes[N, C, P]``,
    ``cols[C, K, N, Lw]`` (the stride-1 im2col; 2x numpy's strided copies, measured)."""
    m, c = planes.shape[0], planes.shape[1]
    kk, lw = cols.shape[1], cols.shape[3]
    for ci in range(c):
        for t in range(kk):
            off = offs[t]
            for n in range(m):
                src = planes[n, ci, off:off + lw]
                dst = cols[ci, t, n]
                for q in range(lw):
                    dst[q] = src[q]


@jit
def cols_to_taps(cols: Any, offs: Any, planes: Any) -> None:
    """The adjoint of :func:`taps_to_cols`: ``planes[n, c, offs[t]:offs[t] + Lw] += cols[c, t, n, :]``
    (one plane at a time, so it stays in cache; 5x numpy's strided adds, measured)."""
    m, c = planes.shape[0], planes.shape[1]
    kk, lw = cols.shape[1], cols.shape[3]
    for n in range(m):
        for ci in range(c):
            plane = planes[n, ci]
            for t in range(kk):
                off = offs[t]
                dst = plane[off:off + lw]
                src = cols[ci, t, n]
                for q in range(lw):
                    dst[q] += src[q]


@jit
def _wide_to_grid(wide: Any, grid: Any, hp: Any, wp: Any) -> None:
    """``grid[i, j, k] = wide[(i*hp + j)*wp + k]`` for a grid ``[od, oh, ow]``."""
    od, oh, ow = grid.shape[0], grid.shape[1], grid.shape[2]
    for i in range(od):
        for j in range(oh):
            src = wide[(i * hp + j) * wp:(i * hp + j) * wp + ow]
            dst = grid[i, j]
            for k in range(ow):
                dst[k] = src[k]


@jit
def _grid_to_wide(grid: Any, wide: Any, hp: Any, wp: Any) -> None:
    """``wide[(i*hp + j)*wp + k] = grid[i, j, k]``, gaps 0."""
    od, oh, ow = grid.shape[0], grid.shape[1], grid.shape[2]
    lw = wide.shape[0]
    for i in range(od):
        for j in range(hp):
            base = (i * hp + j) * wp
            if j < oh:
                dst = wide[base:base + ow]
                src = grid[i, j]
                for k in range(ow):
                    dst[k] = src[k]
                first = base + ow
            else:
                first = base
            for q in range(first, min(base + wp, lw)):
                wide[q] = 0


@jit
def wide_to_grid(wide: Any, grid: Any, hp: Any, wp: Any) -> None:
    """``grid[n, c] = `` the output positions of ``wide[c, n]``: ``wide[C, N, Lw] -> grid[N, C, od, oh, ow]``."""
    for c in range(wide.shape[0]):
        for n in range(wide.shape[1]):
            _wide_to_grid(wide[c, n], grid[n, c], hp, wp)


@jit
def grid_to_wide(grid: Any, wide: Any, hp: Any, wp: Any) -> None:
    """``wide[c, n]`` = ``grid[n, c]`` at the output positions, 0 in the gaps:
    ``grid[N, C, od, oh, ow] -> wide[C, N, Lw]``."""
    for c in range(wide.shape[0]):
        for n in range(wide.shape[1]):
            _grid_to_wide(grid[n, c], wide[c, n], hp, wp)


# ---- scatter_add ------------------------------------------------------------------------------


@jit
def scatter_add_rows(out: Any, idx: Any, upd: Any, start: Any, stop: Any) -> None:
    """``out[a, idx[i], b] += upd[a, i, b]`` over ``out[A, n, B]``, ``upd[A, I, B]``, for the
    columns ``b`` in ``[start, stop)`` (indices already normalised and checked)."""
    aa, ii = upd.shape[0], upd.shape[1]
    for a in range(aa):
        for i in range(ii):
            dst = out[a, idx[i], start:stop]
            src = upd[a, i, start:stop]
            for b in range(stop - start):
                dst[b] += src[b]
