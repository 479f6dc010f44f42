"""Jitted kernels of the eager tape's fused backward rules (and the vectorised ``erf``).

Importing this module imports numba; :mod:`.backward` imports it on first use. The
wrappers there validate and lay out the arrays; the kernels here assume C-contiguous
float32 or float64 arrays of one dtype, write into a preallocated ``out`` and return
nothing. Flat kernels take a ``start, stop`` range of their loop as the last two
arguments (split over threads by the wrappers). All are ``nogil``.

This module is self-contained on purpose: numba's on-disk cache of a kernel is keyed on
the timestamp of the file that defines it, not of the files whose helpers it inlines, so
the helpers below (``_rint``, the polynomial ``exp``, the ``erfc`` fit) live next to the
kernels that use them.

* ``FAST`` is numba's fast-math without ``nnan``/``ninf`` (NaN and infinity keep their
  meaning; reductions vectorise); helpers whose rounding order matters use ``EXACT``.
* ``exp_le0(x)`` is a vectorisable ``exp`` for ``x <= 88`` (float32) / ``x <= 709``
  (float64): every exponent these kernels take is at most 0 (``-x*x/2``, ``-2|u|``, a
  log-probability). Cody-Waite range reduction ``x = n ln2 + r``, ``|r| <= ln2/2``, then a
  Taylor polynomial of degree 7 (float32: truncation 5e-9 relative) or 13 (float64:
  4e-18); results below the smallest normal number are flushed to 0; NaN stays NaN.
* ``erfc(z)`` for ``z >= 0`` is ``t * P(s) * exp(-z*z)`` with ``t = 1 / (1 + z/k)`` and
  ``P`` a polynomial in ``s``, ``t`` mapped affinely onto ``[-1, 1]``: ``t * P`` is the
  scaled ``exp(z*z) erfc(z)``, smooth in ``t`` away from ``t = 0``. ``P`` was fitted for
  this module by least squares at 80/160 Chebyshev nodes against 50-digit values of
  ``erfc`` (mpmath): float32 ``k = 3``, degree 9 on ``z in [0, 10]`` (relative error of
  the fit 2e-9); float64 ``k = 4``, degree 20 on ``z in [0, 27]`` (8e-16 relative, the
  double rounding floor; beyond 27 ``erfc`` underflows). Computed for a whole array it
  vectorises: no table lookups, no branches.
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

F = TypeVar("F", bound=Callable[..., Any])

FAST = frozenset({"nsz", "arcp", "contract", "afn", "reassoc"})
EXACT = frozenset({"nsz", "arcp", "contract", "afn"})


def jit(f: F) -> F:
    """``njit(cache=True, nogil=True, error_model="numpy")`` with NaN-safe fast math."""
    return cast(F, numba.njit(cache=True, nogil=True, fastmath=set(FAST), error_model="numpy")(f))


def _jit_exact(f: F) -> F:
    return cast(F, numba.njit(cache=True, nogil=True, fastmath=set(EXACT), error_model="numpy")(f))


def _rint_typer(typingctx: Any, a: Any) -> Any:
    if not isinstance(a, types.Float):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        lty = args[0].type
        fn = builder.module.declare_intrinsic("llvm.rint", [lty], ir.FunctionType(lty, [lty]))
        return builder.call(fn, args)

    return a(a), codegen


_rint = cast(Callable[..., Any], intrinsic(_rint_typer))
"""Round to nearest even (LLVM's ``rint``: one instruction, vectorises)."""


# ---- exp for x <= 0 (up to 88 / 709) ---------------------------------------------------------------

_L2E32 = np.float32(1.4426950408889634)
_LN2_HI32 = np.float32(0.693145751953125)  # 8 trailing zero bits: n * _LN2_HI32 is exact
_LN2_LO32 = np.float32(1.4286068203094173e-06)
_LO32 = np.float32(-87.33654)  # exp below this is under the smallest normal float32
_E32 = tuple(np.float32(1.0 / math.factorial(k)) for k in range(8))
_E0, _E1, _E2, _E3, _E4, _E5, _E6, _E7 = _E32

_L2E64 = 1.4426950408889634
_LN2_HI64 = 6.93147180369123816490e-01  # 21 trailing zero bits
_LN2_LO64 = 1.90821492927058770002e-10
_LO64 = -708.3964185322641
(_D0, _D1, _D2, _D3, _D4, _D5, _D6, _D7, _D8, _D9, _D10, _D11, _D12,
 _D13) = (1.0 / math.factorial(k) for k in range(14))


def _exp_le0_32(x: Any) -> Any:
    n = _rint(x * _L2E32)
    r = x - n * _LN2_HI32
    r = r - n * _LN2_LO32
    p = ((((((_E7 * r + _E6) * r + _E5) * r + _E4) * r + _E3) * r + _E2) * r + _E1) * r + _E0
    scale = np.int32((np.int32(n) + np.int32(127)) << np.int32(23)).view(np.float32)
    e = p * scale
    return np.float32(0.0) if x < _LO32 else e


def _exp_le0_64(x: Any) -> Any:
    n = _rint(x * _L2E64)
    r = x - n * _LN2_HI64
    r = r - n * _LN2_LO64
    p = _D13
    p = p * r + _D12
    p = p * r + _D11
    p = p * r + _D10
    p = p * r + _D9
    p = p * r + _D8
    p = p * r + _D7
    p = p * r + _D6
    p = p * r + _D5
    p = p * r + _D4
    p = p * r + _D3
    p = p * r + _D2
    p = p * r + _D1
    p = p * r + _D0
    scale = np.int64((np.int64(n) + np.int64(1023)) << np.int64(52)).view(np.float64)
    e = p * scale
    return 0.0 if x < _LO64 else e


def _float_overload(name: str, doc: str, impl32: Callable[..., Any],
                    impl64: Callable[..., Any]) -> Callable[..., Any]:
    """A function ``name`` of one float scalar, callable from jitted code only, that compiles to
    ``impl32`` for float32 and ``impl64`` for float64 (``EXACT`` fast-math: rounding order matters)."""

    def stub(x: Any) -> Any:
        raise NotImplementedError(f"{name} is only callable from jitted code")

    def select(x: Any) -> Any:
        if x == types.float32:
            return impl32
        if x == types.float64:
            return impl64
        return None

    stub.__name__ = stub.__qualname__ = name
    stub.__doc__ = f"{doc} (jitted code only)."
    overload(stub, jit_options={"fastmath": set(EXACT), "error_model": "numpy"})(select)
    return stub


exp_le0 = _float_overload("exp_le0", "Vectorisable ``exp(x)`` of a float32/float64 scalar ``x <= 88`` / ``709``",
                          _exp_le0_32, _exp_le0_64)


@jit
def exp_into(x: Any, out: Any, start: Any, stop: Any) -> None:
    """``out[i] = exp_le0(x[i])`` on flat arrays (tests of the helper)."""
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        os_[i] = exp_le0(xs[i])


# ---- erfc ---------------------------------------------------------------------------------------

_K32 = np.float32(1.0 / 3.0)
_MID32 = np.float32(0.6153846153846154)
_IHALF32 = np.float32(2.6)
_P32 = tuple(np.float32(c) for c in (
    0.4378237256620545, 0.3106812415380386, 0.16697461725149992, 0.06591913355023499, 0.017287542554974996,
    0.0019285526670748108, -0.00045499236794207875, -0.0001780655497939896, 7.924720093622135e-06,
    1.0320891117477942e-05))
_A0, _A1, _A2, _A3, _A4, _A5, _A6, _A7, _A8, _A9 = _P32

_K64 = 0.25
_MID64 = 0.5645161290322581
_IHALF64 = 2.2962962962962963
(_B0, _B1, _B2, _B3, _B4, _B5, _B6, _B7, _B8, _B9, _B10, _B11, _B12, _B13, _B14, _B15, _B16, _B17, _B18, _B19,
 _B20) = (
    0.3090338928613287, 0.2626408747793592, 0.19338198151112637, 0.12291345905913213, 0.06679465634305745,
    0.030461078347123333, 0.01124827035539968, 0.003109505783625489, 0.0004996255216786787,
    -3.358591336611074e-05, -4.379053742918221e-05, -8.474544229789734e-06, 1.5875844178969498e-06,
    9.91954177040365e-07, 1.6416782451076733e-08, -8.714795071006604e-08, -1.0334673218889964e-08,
    7.1649077378798655e-09, 1.3391262894490648e-09, -4.4565949864300786e-10, -9.79339996723334e-11)


def _erfcx32(x: Any) -> Any:
    """``exp(x*x) erfc(x)`` for float32 ``x >= 0`` (relative error ~1e-7)."""
    t = np.float32(1.0) / (np.float32(1.0) + x * _K32)
    s = (t - _MID32) * _IHALF32
    s2 = s * s
    s4 = s2 * s2  # Estrin's scheme: 4 dependent steps instead of Horner's 9 (gelu backward 8% faster)
    p = (((_A0 + _A1 * s) + s2 * (_A2 + _A3 * s))
         + s4 * (((_A4 + _A5 * s) + s2 * (_A6 + _A7 * s)) + s4 * (_A8 + _A9 * s)))
    return t * p


def _erfcx64(x: Any) -> Any:
    """``exp(x*x) erfc(x)`` for float64 ``x >= 0`` (relative error ~1e-15)."""
    t = 1.0 / (1.0 + x * _K64)
    s = (t - _MID64) * _IHALF64
    p = _B20
    p = p * s + _B19
    p = p * s + _B18
    p = p * s + _B17
    p = p * s + _B16
    p = p * s + _B15
    p = p * s + _B14
    p = p * s + _B13
    p = p * s + _B12
    p = p * s + _B11
    p = p * s + _B10
    p = p * s + _B9
    p = p * s + _B8
    p = p * s + _B7
    p = p * s + _B6
    p = p * s + _B5
    p = p * s + _B4
    p = p * s + _B3
    p = p * s + _B2
    p = p * s + _B1
    p = p * s + _B0
    return t * p


erfcx = _float_overload("erfcx", "``exp(x*x) erfc(x)`` of a float32/float64 scalar ``x >= 0``", _erfcx32, _erfcx64)


# Taylor coefficients of erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)), used for |x| < 1/2
# (where 1 - erfc would lose relative precision): 7 terms reach 5e-10 (float32), 12 terms 1e-17 (float64)
_T = tuple((-1.0) ** n * 2.0 / math.sqrt(math.pi) / (math.factorial(n) * (2 * n + 1)) for n in range(12))
_T32 = tuple(np.float32(c) for c in _T[:7])
_S0, _S1, _S2, _S3, _S4, _S5, _S6 = _T32
_U0, _U1, _U2, _U3, _U4, _U5, _U6, _U7, _U8, _U9, _U10, _U11 = _T


@jit
def erf32(x: Any, out: Any, start: Any, stop: Any) -> None:
    """float32 ``erf`` on flat arrays: a Taylor polynomial below 1/2, ``1 - erfc`` above."""
    half = np.float32(0.5)
    one = np.float32(1.0)
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        a = abs(v)
        w = v * v
        small = ((((((_S6 * w + _S5) * w + _S4) * w + _S3) * w + _S2) * w + _S1) * w + _S0) * v
        big = one - erfcx(a) * exp_le0(-w)
        big = big if v >= 0 else -big
        os_[i] = small if a < half else big


@jit
def erf64(x: Any, out: Any, start: Any, stop: Any) -> None:
    """float64 ``erf`` on flat arrays: a Taylor polynomial below 1/2, ``1 - erfc`` above."""
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        a = abs(v)
        w = v * v
        p = _U11
        p = p * w + _U10
        p = p * w + _U9
        p = p * w + _U8
        p = p * w + _U7
        p = p * w + _U6
        p = p * w + _U5
        p = p * w + _U4
        p = p * w + _U3
        p = p * w + _U2
        p = p * w + _U1
        p = p * w + _U0
        big = 1.0 - erfcx(a) * exp_le0(-w)
        big = big if v >= 0 else -big
        os_[i] = p * v if a < 0.5 else big


# ---- elementwise backward kernels (flat) ----------------------------------------------------------


@jit
def gelu_erf_bwd(g: Any, x: Any, out: Any, start: Any, stop: Any) -> None:
    """``g * (Phi(x) + x phi(x))`` with ``Phi(x) = erfc(-x/sqrt 2)/2`` and ``phi(x) = exp(-x*x/2)/sqrt(2 pi)``
    (the float64 kernel; float32 takes :func:`._numba_gelu.gelu_erf_bwd32`)."""
    dt = x.dtype.type
    half = dt(0.5)
    one = dt(1.0)
    r2 = dt(0.7071067811865476)
    c = dt(0.3989422804014327)
    gs = g[start:stop]
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        e = exp_le0(-(half * v) * v)  # exp(-z*z), z = |x| / sqrt 2
        tail = half * erfcx(abs(v) * r2) * e  # Phi(-|x|)
        cdf = tail if v <= 0 else one - tail
        os_[i] = gs[i] * (cdf + v * e * c)


@jit
def gelu_tanh_bwd(g: Any, x: Any, out: Any, start: Any, stop: Any) -> None:
    """``g * (s + 2 x s(1-s) k'(x))`` for ``gelu = x s``, ``s = sigmoid(2u) = (1 + tanh u)/2``,
    ``u = k(x) = sqrt(2/pi)(x + 0.044715 x^3)``; ``s(1-s)`` from ``exp(-2|u|)`` (never overflows)."""
    dt = x.dtype.type
    one = dt(1.0)
    two = dt(2.0)
    zero = dt(0.0)
    c = dt(0.7978845608028654)
    a = dt(0.044715)
    a3 = dt(3.0 * 0.044715)
    gs = g[start:stop]
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        v2 = v * v
        u = (v + v2 * v * a) * c
        ep = exp_le0(-two * abs(u))
        r = one / (one + ep)
        s = r if u >= zero else ep * r
        sp = ep * r * r
        os_[i] = gs[i] * (s + two * v * sp * (c + c * a3 * v2))


@jit
def mul_sign(g: Any, y: Any, out: Any, start: Any, stop: Any) -> None:
    """``g * sign(y)`` on flat arrays (``relu``'s rule on its result: ``sign`` of NaN is NaN)."""
    dt = y.dtype.type
    one = dt(1.0)
    zero = dt(0.0)
    gs = g[start:stop]
    ys = y[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = ys[i]
        s = one if v > zero else (-one if v < zero else v * zero)
        os_[i] = gs[i] * s


# ---- row kernels ------------------------------------------------------------------------------------


@_jit_exact
def _center_scale(x: Any, mean: Any, rstd: Any) -> Any:
    """``(x - mean) * rstd`` in this rounding order."""
    return (x - mean) * rstd


@jit
def layer_norm_bwd_rows(x: Any, gamma: Any, g: Any, stats: Any, dx: Any, dgamma: Any, dbeta: Any,
                        want_dx: Any, start: Any, stop: Any) -> None:
    """Rows ``[start, stop)`` of ``x[R, D]`` with cotangent ``g[R, D]``: ``mean`` and ``rstd`` from
    ``stats[R, 2]`` (float64, as the forward kernel saved them), then ``xhat``, add ``g * xhat`` and ``g``
    into the float64 accumulators ``dgamma[D]``, ``dbeta[D]`` and, if ``want_dx``, write
    ``dx = rstd * ((gh - mean(gh)) - xhat * mean(gh * xhat))`` with ``gh = g * gamma``."""
    d = x.shape[1]
    dt = x.dtype.type
    inv_d = dt(1.0 / d)
    zero = dt(0.0)
    scratch = np.empty(0 if want_dx else d, x.dtype)
    for i in range(start, stop):
        xr = x[i]
        gr = g[i]
        mean = dt(stats[i, 0])
        rstd = dt(stats[i, 1])
        sg = zero
        sgx = zero
        ghr = dx[i] if want_dx else scratch  # gh, rounded and stored: see below
        for j in range(d):
            xh = _center_scale(xr[j], mean, rstd)
            gj = gr[j]
            gh = gj * gamma[j]
            ghr[j] = gh
            dgamma[j] += gj * xh
            dbeta[j] += gj
            sg += gh
            sgx += gh * xh
        if want_dx:
            mg = sg * inv_d
            mgx = sgx * inv_d
            # gh is read back from memory, not recomputed: an FMA of a fresh g * gamma with -mg would
            # leave the product's rounding error where gh - mean(gh) is exactly 0 (rows of one element)
            for j in range(d):
                xh = _center_scale(xr[j], mean, rstd)
                ghr[j] = ((ghr[j] - mg) - xh * mgx) * rstd


PIPELINED_ROW_BYTES = 1024
"""The row length from which the row kernels below take their pipelined form: the same bound as
:data:`._numba_kernels.PIPELINED_ROW_BYTES` (see there; restated because this module imports nothing of
that one's, and a test checks that the two agree)."""


@numba.njit(cache=True, nogil=True, fastmath=set(FAST), error_model="numpy", inline="always")
def _softmax_like_bwd_rows(y: Any, g: Any, out: Any, log: Any, start: Any, stop: Any) -> None:
    """Rows ``[start, stop)`` of the backward of softmax (``log`` false: ``y * (g - sum(g * y))``) or of
    log_softmax (``log`` true: ``g - exp(y) * sum(g)``) for ``y[R, D]`` (inlined into each kernel, where
    ``log`` is a constant).

    Rows of :data:`PIPELINED_ROW_BYTES` or more: row ``i + 1``'s sum is taken in row ``i``'s output loop, so
    that its read from memory overlaps row ``i``'s arithmetic (4096 x 1024 float32, one thread: softmax
    2.72 -> 2.45 ms, log_softmax 4.31 -> 3.07 ms). The first row's comes from a pass of that same loop
    (output thrown away): every row's sum is added up alike, wherever a thread's rows begin. Shorter rows
    are summed in a loop of their own."""
    d = y.shape[1]
    zero = y.dtype.type(0.0)
    if start >= stop:
        return
    if d * y.itemsize < PIPELINED_ROW_BYTES:
        for i in range(start, stop):
            yr = y[i]
            gr = g[i]
            orow = out[i]
            total = zero
            if log:
                for j in range(d):
                    total += gr[j]
                for j in range(d):
                    orow[j] = gr[j] - exp_le0(yr[j]) * total
            else:
                for j in range(d):
                    total += gr[j] * yr[j]
                for j in range(d):
                    orow[j] = yr[j] * (gr[j] - total)
        return
    discard = np.empty(d, y.dtype)
    total = zero
    for i in range(start - 1, stop):
        first = i < start
        row = start if first else i
        yr = y[row]
        gr = g[row]
        orow = discard if first else out[i]
        c = zero if first else total
        following = i + 1 if i + 1 < stop else i  # (the last row's own, unused)
        yn = y[following]
        gn = g[following]
        total = zero
        if log:
            for j in range(d):
                orow[j] = gr[j] - exp_le0(yr[j]) * c
                total += gn[j]
        else:
            for j in range(d):
                orow[j] = yr[j] * (gr[j] - c)
                total += gn[j] * yn[j]


@jit
def softmax_bwd_rows(y: Any, g: Any, out: Any, start: Any, stop: Any) -> None:
    """``y * (g - sum(g * y))`` per row of ``y[R, D]``."""
    _softmax_like_bwd_rows(y, g, out, False, start, stop)


@jit
def log_softmax_bwd_rows(y: Any, g: Any, out: Any, start: Any, stop: Any) -> None:
    """``g - exp(y) * sum(g)`` per row of ``y[R, D]`` (``y`` log-probabilities, so ``<= 0``)."""
    _softmax_like_bwd_rows(y, g, out, True, start, stop)


@jit
def softmax_bwd_cols(y: Any, g: Any, out: Any, start: Any, stop: Any) -> None:
    """Softmax backward along axis 1 of ``y[A, N, B]``, for ``a`` in ``[start, stop)``."""
    n = y.shape[1]
    b = y.shape[2]
    acc = np.empty(b, y.dtype)
    for a in range(start, stop):
        for k in range(b):
            acc[k] = 0.0
        for i in range(n):
            yr = y[a, i]
            gr = g[a, i]
            for k in range(b):
                acc[k] += gr[k] * yr[k]
        for i in range(n):
            yr = y[a, i]
            gr = g[a, i]
            orow = out[a, i]
            for k in range(b):
                orow[k] = yr[k] * (gr[k] - acc[k])


@jit
def log_softmax_bwd_cols(y: Any, g: Any, out: Any, start: Any, stop: Any) -> None:
    """Log-softmax backward along axis 1 of ``y[A, N, B]``, for ``a`` in ``[start, stop)``."""
    n = y.shape[1]
    b = y.shape[2]
    acc = np.empty(b, y.dtype)
    for a in range(start, stop):
        for k in range(b):
            acc[k] = 0.0
        for i in range(n):
            gr = g[a, i]
            for k in range(b):
                acc[k] += gr[k]
        for i in range(n):
            yr = y[a, i]
            gr = g[a, i]
            orow = out[a, i]
            for k in range(b):
                orow[k] = gr[k] - exp_le0(yr[k]) * acc[k]



@jit
def attention_ds_rows(p: Any, dp: Any, scale: Any, out: Any, start: Any, stop: Any) -> None:
    """``out = p * (dp - sum(dp * p)) * scale`` per row of ``p[R, M]`` (the scores' cotangent)."""
    m = p.shape[1]
    zero = p.dtype.type(0.0)
    c = p.dtype.type(scale)
    for i in range(start, stop):
        pr = p[i]
        dr = dp[i]
        dot = zero
        for j in range(m):
            dot += dr[j] * pr[j]
        orow = out[i]
        for j in range(m):
            orow[j] = pr[j] * (dr[j] - dot) * c



# ---- max-pool backward, 2x2 windows with stride 2 --------------------------------------------------


@numba.njit(cache=True, nogil=True, fastmath=set(FAST), error_model="numpy", inline="always")
def _wins(v: Any, m: Any) -> Any:
    """Whether a later window entry ``v`` replaces the maximum ``m`` so far: strictly greater, or NaN
    against a number (so the first maximum in row-major order wins, the first NaN if any)."""
    return (v > m) | ((v != v) & (m == m))


@jit
def max_pool2x2_bwd(x: Any, gbits: Any, dxbits: Any, hh: Any, ww: Any, start: Any, stop: Any) -> None:
    """``max_pool_backward`` for 2x2 windows, stride 2, no padding, on planes ``[start, stop)`` of
    the flat ``x`` (planes of ``hh * ww``); ``gbits`` and ``dxbits`` are the integer bit views of the
    flat ``g`` (planes of ``(hh // 2) * (ww // 2)``) and ``dx`` (written whole: 0 off the windows' first
    maxima, and in a last odd row or column). Each window's cotangent goes to its first maximum in
    row-major order (the first NaN if any).

    The windows are too short and too few per row for SIMD, so each plane is read as flat pairs instead,
    in loops the vectoriser takes: the pairs ``(x[2q], x[2q + 1])`` of the flat plane hold every window's
    upper row (row ``2j`` starts at an even index); for an even width they hold the lower rows too, for an
    odd one the pairs ``(x[2q + 1], x[2q + 2])`` do (row ``2j + 1`` starts at an odd index), and in both
    cases window ``(j, k)``'s rows are pair ``j ww + k`` of the first set and pair ``j ww + ww // 2 + k`` of
    the set of its lower row. So: each pair's maximum and whether its right element holds the first one
    (flat loops); for each window, whether its lower row wins, its cotangent into that row's pair and 0 into
    the other's (a loop over the row of windows); then each pair's cotangent to its element (flat again; the
    second set's into the first's result with a bitwise or: every element is in one window at most, and a
    pair of no window carries 0). Measured on one thread against a loop over the windows: the benchmark
    CNN's 64x16 planes of 26x26 0.35 ms against 0.96 ms, its 64x32 planes of 11x11 0.19 against 0.34 ms."""
    oh = hh // 2
    ow = ww // 2
    size = hh * ww
    odd = ww % 2 == 1
    even_pairs = size // 2
    odd_pairs = (size - 1) // 2 if odd else 0
    it = gbits.dtype.type
    zero = it(0)
    max_e = np.empty(even_pairs, x.dtype)
    max_o = np.empty(odd_pairs, x.dtype)
    right_e = np.empty(even_pairs, np.bool_)
    right_o = np.empty(odd_pairs, np.bool_)
    to_e = np.zeros(even_pairs, gbits.dtype)  # the pairs of no window keep 0
    to_o = np.zeros(odd_pairs, gbits.dtype)
    low_max, to_low = (max_o, to_o) if odd else (max_e, to_e)
    for p in range(start, stop):
        xp = x[p * size:(p + 1) * size]
        for q in range(even_pairs):
            a = xp[2 * q]
            b = xp[2 * q + 1]
            later = _wins(b, a)
            max_e[q] = b if later else a
            right_e[q] = later
        for q in range(odd_pairs):
            a = xp[2 * q + 1]
            b = xp[2 * q + 2]
            later = _wins(b, a)
            max_o[q] = b if later else a
            right_o[q] = later
        gp = gbits[p * oh * ow:(p + 1) * oh * ow]
        for j in range(oh):
            top = max_e[j * ww:j * ww + ow]
            low = low_max[j * ww + ow:j * ww + 2 * ow]
            into_top = to_e[j * ww:j * ww + ow]
            into_low = to_low[j * ww + ow:j * ww + 2 * ow]
            gr = gp[j * ow:(j + 1) * ow]
            for k in range(ow):
                lower = _wins(low[k], top[k])
                gv = gr[k]
                into_top[k] = zero if lower else gv
                into_low[k] = gv if lower else zero
        dp = dxbits[p * size:(p + 1) * size]
        for q in range(even_pairs):
            gv = to_e[q]
            r = right_e[q]
            dp[2 * q] = zero if r else gv
            dp[2 * q + 1] = gv if r else zero
        if size % 2 == 1:
            dp[size - 1] = zero  # in no pair of the first set; a last column, in no window
        for q in range(odd_pairs):
            gv = to_o[q]
            r = right_o[q]
            dp[2 * q + 1] |= zero if r else gv
            dp[2 * q + 2] |= gv if r else zero

