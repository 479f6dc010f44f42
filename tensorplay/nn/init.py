"""``tensorplay.nn.init``: in-place initialisers with PyTorch's formulas.

Random initialisers draw from the global generator (``tp.manual_seed``) through the
counter-based random primitives, so a seeded model is reproducible. Each writes
into the tensor's payload in place (no gradient is recorded) and returns it.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import numpy as np

from tensorplay.interpreters.eager.interpreter import eager as _eager
from tensorplay import random_state, recording
from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.tensor import Tensor

eager: Any = _eager
T = TypeVar("T", bound=Tensor[*tuple[Any, ...]])

_LINEAR_LIKE = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "sigmoid")


def _write(tensor: T, values: np.ndarray[Any, Any]) -> T:
    if not isinstance(tensor, Tensor) or not isinstance(tensor._ops, type(eager)):
        raise DTypeError(f"init: expected an eager tensor (e.g. a Parameter) to fill in place, got "
                         f"{type(tensor).__name__}")
    recording.refuse_outside_write(tensor, "an nn.init function")
    tensor._data[...] = values
    box = tensor._version
    if box is None:
        tensor._version = [1]
    else:
        box[0] += 1
    return tensor


def _uniform01(shape: tuple[int, ...], dtype: str) -> np.ndarray[Any, Any]:
    key = eager.wrap(random_state.next_key())
    return eager.random_uniform(key, shape=shape, dtype=dtype)._data  # type: ignore[no-any-return]


def _normal01(shape: tuple[int, ...], dtype: str) -> np.ndarray[Any, Any]:
    key = eager.wrap(random_state.next_key())
    return eager.random_normal(key, shape=shape, dtype=dtype)._data  # type: ignore[no-any-return]


def _float_dtype(tensor: Tensor[*tuple[Any, ...]], where: str) -> str:
    name = str(tensor._data.dtype)
    if name not in ("float32", "float64"):
        raise DTypeError(f"{where}: expected a float tensor (float32 or float64), got {name}")
    return name


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    if nonlinearity in _LINEAR_LIKE:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ArgumentError(f"calculate_gain('leaky_relu', param): negative_slope {slope!r} is not a valid number "
                                f"(expected an int or float, got {type(slope).__name__})")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    known = ", ".join(_LINEAR_LIKE + ("tanh", "relu", "leaky_relu", "selu"))
    raise ArgumentError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r} (expected one of {known})")


def _calculate_fan_in_and_fan_out(tensor: Tensor[*tuple[Any, ...]]) -> tuple[int, int]:
    """``(fan_in, fan_out)``: ``size(1) * receptive field`` and ``size(0) * receptive field``."""
    if tensor.ndim < 2:
        raise ShapeError(f"init: fan in and fan out can not be computed for a tensor with fewer than 2 dimensions "
                         f"(shape {list(tensor.shape)})")
    receptive = 1
    for d in tuple(tensor.shape)[2:]:
        receptive *= int(d)
    return int(tensor.shape[1]) * receptive, int(tensor.shape[0]) * receptive


calculate_fan_in_and_fan_out = _calculate_fan_in_and_fan_out


def _fan(tensor: Tensor[*tuple[Any, ...]], mode: str, where: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ArgumentError(f"{where}: mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: T, a: float = 0.0, b: float = 1.0) -> T:
    """Fill with samples from ``U(a, b)``."""
    dtype = _float_dtype(tensor, "uniform_")
    u = _uniform01(tuple(tensor.shape), dtype)
    return _write(tensor, u * (b - a) + a)


def normal_(tensor: T, mean: float = 0.0, std: float = 1.0) -> T:
    """Fill with samples from ``N(mean, std^2)``."""
    dtype = _float_dtype(tensor, "normal_")
    return _write(tensor, _normal01(tuple(tensor.shape), dtype) * std + mean)


# Inverse of the standard normal CDF: P. J. Acklam's rational approximation (relative error below
# 1.2e-9), a central rational in p - 1/2 and tail rationals in q = sqrt(-2 log p), here evaluated from
# log p so that tails far below the smallest double are reached. Where x < -10, three Newton steps on
# log Phi(x) = log(p) (the asymptotic series below, exact to rounding there) make it exact.
_ICDF_A = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
           -3.066479806614716e+01, 2.506628277459239e+00)
_ICDF_B = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
           -1.328068155288572e+01, 1.0)
_ICDF_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
           4.374664141464968e+00, 2.938163982698783e+00)
_ICDF_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00, 1.0)
_ICDF_LOW = 0.02425
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _poly(coefficients: tuple[float, ...], x: Any) -> Any:
    out = coefficients[0] * x + coefficients[1]
    for c in coefficients[2:]:
        out = out * x + c
    return out


def _mills_series(t: Any) -> Any:
    """``sum_k (-1)^k (2k-1)!! / t^2k`` (k < 20): ``Phi(-t) = phi(t) / t`` times it, to a relative error
    below 1e-16 for ``t >= 10`` (the asymptotic series of the normal tail)."""
    inv = 1.0 / (t * t)
    term = np.ones_like(t)
    total = np.ones_like(t)
    for k in range(1, 20):
        term = term * (-(2 * k - 1) * inv)
        total = total + term
    return total


def _log_ndtr_far(x: Any) -> Any:
    """``log Phi(x)`` for ``x <= -10`` (scalar or array), from the tail series."""
    t = -np.asarray(x, dtype=np.float64)
    return -0.5 * t * t - _LOG_SQRT_2PI - np.log(t) + np.log(_mills_series(t))


def _log_ndtr(x: float) -> float:
    """``log Phi(x)`` of one float, accurate in both tails (``-inf`` at ``-inf``)."""
    if x == -math.inf:
        return -math.inf
    if x <= -10.0:
        return float(_log_ndtr_far(x))
    if x < 0.0:
        return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))
    return math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))


def _normal_icdf_log(log_p: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The standard normal quantile of ``exp(log_p)`` (float64 array; ``log_p <= 0``)."""
    log_p = np.asarray(log_p, dtype=np.float64)
    x = np.empty_like(log_p)
    low = log_p < math.log(_ICDF_LOW)
    p = np.exp(log_p)
    high = ~low & (p > 1.0 - _ICDF_LOW)
    mid = ~low & ~high
    if low.any():
        q = np.sqrt(-2.0 * log_p[low])
        x[low] = _poly(_ICDF_C, q) / _poly(_ICDF_D, q)
    if mid.any():
        q = p[mid] - 0.5
        r = q * q
        x[mid] = _poly(_ICDF_A, r) * q / _poly(_ICDF_B, r)
    if high.any():
        q = np.sqrt(-2.0 * np.log1p(-p[high]))
        x[high] = -_poly(_ICDF_C, q) / _poly(_ICDF_D, q)
    far = x < -10.0
    if far.any():
        xf, target = x[far], log_p[far]
        for _ in range(3):  # Newton on log Phi(x) - log_p, whose slope phi/Phi is t / series(t) here
            t = -xf
            xf = np.minimum(xf - (_log_ndtr_far(xf) - target) * _mills_series(t) / t, -10.0)
        x[far] = xf
    return x


def trunc_normal_(tensor: T, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> T:
    """Fill with samples of ``N(mean, std^2)`` truncated to ``[a, b]``, by the inverse CDF as PyTorch does:
    ``Phi^-1`` of a uniform draw between ``Phi(alpha)`` and ``Phi(beta)`` (``alpha = (a - mean) / std``,
    ``beta`` likewise). The CDFs are taken in log space on the side of the mean nearer the interval, so an
    interval far in a tail (``a`` 40 std above the mean) is sampled with its true distribution; infinite
    bounds are allowed. ``a > b`` or ``std == 0`` is a ValueError."""
    dtype = _float_dtype(tensor, "trunc_normal_")
    mean, std, a, b = float(mean), float(std), float(a), float(b)
    if not a <= b:
        raise ArgumentError(f"trunc_normal_: expected a <= b, got a={a}, b={b}")
    if std == 0.0 or not math.isfinite(std) or not math.isfinite(mean):
        raise ArgumentError(f"trunc_normal_: std must be finite and nonzero, and mean finite; got mean={mean}, "
                         f"std={std}")
    std = abs(std)  # N(mean, std^2) is the same for -std
    alpha, beta = (a - mean) / std, (b - mean) / std
    flip = alpha + beta > 0  # sample the mirror image, so that the interval lies mostly below the mean
    lo, hi = (-beta, -alpha) if flip else (alpha, beta)
    log_lo, log_hi = _log_ndtr(lo), _log_ndtr(hi)
    ratio = math.exp(log_lo - log_hi)  # Phi(lo) / Phi(hi), in [0, 1]
    u = 1.0 - _uniform01(tuple(tensor.shape), "float64")  # in (0, 1]
    z = _normal_icdf_log(log_hi + np.log(ratio + u * (1.0 - ratio)))
    z = np.clip(z, lo, hi)
    if flip:
        z = -z
    out = (mean + std * z).astype(dtype)
    return _write(tensor, np.clip(out, np.asarray(a, dtype), np.asarray(b, dtype)))


def constant_(tensor: T, val: float) -> T:
    """Fill with ``val``."""
    return _write(tensor, np.asarray(val))


def zeros_(tensor: T) -> T:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def ones_(tensor: T) -> T:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def eye_(tensor: T) -> T:
    """The identity matrix (2-d tensors only)."""
    if tensor.ndim != 2:
        raise ShapeError(f"eye_: only 2-d tensors are supported, got shape {list(tensor.shape)}")
    return _write(tensor, np.eye(*tuple(tensor.shape)))


def xavier_uniform_(tensor: T, gain: float = 1.0) -> T:
    """Glorot uniform: ``U(-a, a)`` with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor: T, gain: float = 1.0) -> T:
    """Glorot normal: ``N(0, std^2)`` with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)))


def kaiming_uniform_(tensor: T, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> T:
    """He uniform: ``U(-b, b)`` with ``b = gain * sqrt(3 / fan)``. ``a=sqrt(5)`` with the default
    nonlinearity is PyTorch's default for ``Linear`` and conv weights."""
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode, "kaiming_uniform_"))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: T, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> T:
    """He normal: ``N(0, std^2)`` with ``std = gain / sqrt(fan)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode, "kaiming_normal_"))
    return normal_(tensor, 0.0, std)


def fan_in_uniform_(tensor: T, weight: Tensor[*tuple[Any, ...]]) -> T:
    """PyTorch's default bias initialisation: ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` of ``weight``."""
    fan_in, _ = _calculate_fan_in_and_fan_out(weight)
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return uniform_(tensor, -bound, bound)


__all__ = [
    "calculate_gain", "calculate_fan_in_and_fan_out", "uniform_", "normal_", "trunc_normal_", "constant_",
    "zeros_", "ones_", "eye_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
    "fan_in_uniform_",
]
