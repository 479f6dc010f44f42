"""Jitted float32 kernels of the exact (erf-form) GELU: the forward ``x * Phi(x)`` and the backward
``g * (Phi(x) + x phi(x))``, with ``Phi`` the standard normal CDF and ``phi`` its density.

numba's ``math.erf``/``math.erfc``/``math.exp`` are scalar libm calls, so these kernels build ``Phi`` and
``exp`` from polynomials and one division: every element takes the same branch-free operations, which the
loop vectoriser turns into full-width vector code. float64 keeps libm's exact path (the kernels of
:mod:`._numba_kernels` and :mod:`._numba_backward`).

The vectorised loops are bound by their number of vector operations (the multiply-adds above all), so the fits
below use the lowest degrees that reach float32 accuracy (all fitted for this module: Lawson's iteratively reweighted least squares at 6,000 Chebyshev nodes
against float64 reference values, coefficients rounded to float32):

* ``exp(x)`` for ``x <= 0``: ``x = n ln2 + r`` (Cody-Waite, ``|r| <= ln2/2``), ``exp(r) = 1 + r P(r)`` with
  ``P`` of degree 4 (relative error 9.2e-8 before rounding; ``exp(0)`` is exactly 1); ``n`` is rounded by
  adding ``1.5 * 2**23`` (whose low bits then hold ``n + 127``), and ``2**n`` is those bits shifted into
  the exponent. The argument is clamped at -88 (one ``max``), where ``n = -127`` makes those bits and
  so the result 0: below about -87.7 it is 0, above it the value (subnormal below -87.34).
* Forward: ``Phi(-|x|) = erfc(z)/2 = exp(-z*z) t P(t)`` with ``z = |x|/sqrt 2``, ``t = 1/(1 + z/3)`` and
  ``P`` of degree 7 fitted to ``erfcx(z) / (2t)`` on ``z in [0, 9.5]`` (relative error 1.3e-7; ``Phi(0)`` is
  1 ulp from 1/2, so ``gelu(x)`` of a tiny ``x > 0`` is 1 ulp above ``x/2``). The error is
  relative in the left tail too: ``gelu`` keeps its relative accuracy down to where float32 underflows (the
  rounding of ``x*x/2`` aside). The polynomial and the ``exp`` are independent chains, which the core overlaps
  (one ``exp(q(t) - z*z)``, a chain through both, ran 20% slower).
* Backward: ``Phi(-|x|) = e H`` with ``e = exp(-x*x/2)`` (which ``phi`` needs anyway) and
  ``H = erfcx(z)/2 = 1/2 + s Q(s)``, ``s = 1 - 1/(1 + z/2)``, ``Q`` of degree 6 (absolute error of ``H``
  1.1e-7; ``H(0) = 1/2`` exactly, so ``gelu'(0) = 1/2`` exactly). The derivative is then
  ``e (c x + H)`` for ``x <= 0`` and ``1 + e (c x - H)`` above, ``c = 1/sqrt(2 pi)``: two multiply-adds.

Special values: ``gelu(+inf) = inf``, ``gelu(-inf) = -0``; ``gelu'(+-inf)`` is NaN (``0 * inf`` in
``x phi(x)``, as PyTorch's ``gelu`` backward, the composite rule and the float64 kernel give); NaN gives NaN
(keeping the input's payload). Compiled without ``reassoc`` (the rounding order is
the written one), so each element's bits depend on its value only, not on where it falls in the vector loop.

This module is self-contained (it imports only the fast-math flag set): numba's on-disk cache of a kernel is
keyed on the timestamp of the file that defines it, so the helpers a kernel inlines live here.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, cast

import numba
import numpy as np

from ._numba_backward import EXACT

F = TypeVar("F", bound=Callable[..., Any])


def _exact(f: F) -> F:
    """``njit`` (cached, ``nogil``, numpy's error model) with fast-math without ``reassoc``/``nnan``/``ninf``."""
    return cast(F, numba.njit(cache=True, nogil=True, fastmath=set(EXACT), error_model="numpy")(f))


def _inline(f: F) -> F:
    """:func:`_exact`, inlined into its callers by numba."""
    return cast(F, numba.njit(cache=True, nogil=True, fastmath=set(EXACT), error_model="numpy",
                              inline="always")(f))


_F = np.float32
_ZERO = _F(0.0)
_HALF = _F(0.5)
_ONE = _F(1.0)
_TWO = _F(2.0)
_R2 = _F(0.7071067811865476)  # 1/sqrt(2)
_HALF_R2 = _F(0.5 * 0.7071067811865476)
_C = _F(0.3989422804014327)  # 1/sqrt(2 pi)

# ---- exp for x <= 0 -------------------------------------------------------------------------------

_L2E = _F(1.4426950408889634)
_LN2_HI = _F(0.693145751953125)  # 8 trailing zero bits: n * _LN2_HI is exact
_LN2_LO = _F(1.4286068203094173e-06)
_SHIFT = _F(12582912.0 + 127.0)  # 1.5 * 2**23 (+ the exponent bias): adding it rounds to an integer
_FLOOR = _F(-88.0)  # rint(-88 / ln2) = -127: a zero scale
_P1, _P2, _P3, _P4, _P5 = (_F(c) for c in (
    0.999999707183248, 0.49999149524810926, 0.16667636213415762, 0.04189792985977344, 0.008290313551332378))


@_inline
def _exp_nonpos(x: Any) -> Any:
    """``exp(x)`` of a float32 ``x <= 0`` (relative error ~1.5e-7 down to -87.34; 0 below about -87.7 and
    for NaN: the callers restore NaN). A cheaper cousin of :func:`._numba_kernels.vexp_nonpos` (one degree
    less, one max instead of a select, the rounding by an added shift): with that one instead, the [512, 256]
    float32 forward took 72 us against 66 and the backward 70 against 64 (one thread); the callers' error
    budget (3.8e-7 absolute) allows the lower degree."""
    x = x if x > _FLOOR else _FLOOR  # one max: 2**n is then 0 below the normal range (NaN: the callers' own)
    k = x * _L2E + _SHIFT  # n + 127 in the low mantissa bits, n = rint(x / ln2): the addition rounds
    n = k - _SHIFT
    r = x - n * _LN2_HI
    r = r - n * _LN2_LO
    p = (((((_P5 * r + _P4) * r + _P3) * r + _P2) * r + _P1) * r) + _ONE
    scale = np.int32(np.float32(k).view(np.int32) << np.int32(23)).view(np.float32)  # 2**n: n + 127 in the exponent bits
    return p * scale


# ---- forward --------------------------------------------------------------------------------------

_K3 = _F(0.7071067811865476 / 3.0)  # t = 1 / (1 + z/3) = 1 / (1 + |v| * _K3)
_T1, _T2, _T3, _T4, _T5, _T6, _T7, _T8 = (_F(c) for c in (
    0.0940769597938024, 0.09309836610910405, 0.09683572152573175, 0.0406360229851988, 0.16920160234221848,
    -0.1326646409943276, 0.20131440414895216, -0.06249850042796995))


@_inline
def _gelu_of(v: Any) -> Any:
    """``v * Phi(v)`` of a float32 ``v`` (see the module's docstring)."""
    a = abs(v)
    t = _ONE / (a * _K3 + _ONE)
    p = ((((((_T8 * t + _T7) * t + _T6) * t + _T5) * t + _T4) * t + _T3) * t + _T2) * t + _T1
    h = _exp_nonpos((a * -_HALF) * a) * (t * p)  # Phi(-|v|) = exp(-z*z) erfcx(z) / 2
    cdf = h if v <= _ZERO else _ONE - h
    y = v * cdf if cdf != _ZERO else -_ZERO  # v = -inf: 0, not -inf * 0
    return y if v == v else v + v  # NaN: v's own payload and sign


@_exact
def gelu_erf32(x: Any, out: Any, start: Any, stop: Any) -> None:
    """float32 ``gelu(x) = x * Phi(x)`` on flat arrays ``x[start:stop]`` into ``out[start:stop]``
    (relative error ~1e-6; in the far left tail ~1e-5, where ``x*x`` rounds)."""
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        os_[i] = _gelu_of(xs[i])


# ---- backward -------------------------------------------------------------------------------------

_H1, _H2, _H3, _H4, _H5, _H6, _H7 = (_F(c) for c in (
    -1.128390450157116, 0.8719961653311694, -0.1416072013570557, -0.13303932909858165, -0.05963938142691919,
    0.13632591403508348, -0.045639406566075034))


@_inline
def _gelu_grad_of(v: Any) -> Any:
    """``gelu'(v) = Phi(v) + v phi(v)`` of a float32 ``v`` (see the module's docstring)."""
    a = abs(v)
    s = _ONE - _ONE / (a * _HALF_R2 + _ONE)
    big = (((((_H7 * s + _H6) * s + _H5) * s + _H4) * s + _H3) * s + _H2) * s + _H1
    hh = big * s + _HALF  # erfcx(|v|/sqrt 2) / 2
    e = _exp_nonpos((a * -_HALF) * a)
    left = v <= _ZERO
    w = v * _C + (hh if left else -hh)  # +-inf: 0 * inf, NaN (as PyTorch's and the composite rule's)
    return e * w + (_ZERO if left else _ONE)


@_exact
def gelu_erf_bwd32(g: Any, x: Any, out: Any, start: Any, stop: Any) -> None:
    """float32 ``g * gelu'(x)`` of the erf form on flat arrays (absolute error ~2e-7 of ``gelu'``)."""
    gs = g[start:stop]
    xs = x[start:stop]
    os_ = out[start:stop]
    for i in range(stop - start):
        v = xs[i]
        d = gs[i] * _gelu_grad_of(v)
        os_[i] = d if v == v else v + v


__all__ = ["gelu_erf32", "gelu_erf_bwd32"]
