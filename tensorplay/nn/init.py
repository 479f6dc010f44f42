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
from tensorplay.errors import ShapeError
from tensorplay.tensor import Tensor

eager: Any = _eager
T = TypeVar("T", bound=Tensor[*tuple[Any, ...]])

_LINEAR_LIKE = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
                "conv_transpose3d", "sigmoid")


def _write(tensor: T, values: np.ndarray[Any, Any]) -> T:
    if not isinstance(tensor, Tensor) or not isinstance(tensor._ops, type(eager)):
        raise TypeError(f"init: expected an eager tensor (e.g. a Parameter), got {type(tensor).__name__}")
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
        raise TypeError(f"{where}: expected a float tensor, got {name}")
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
            raise ValueError(f"calculate_gain: negative_slope {slope} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


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


def _fan(tensor: Tensor[*tuple[Any, ...]], mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"init: mode must be 'fan_in' or 'fan_out', got {mode!r}")
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


def trunc_normal_(tensor: T, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0) -> T:
    """Fill with ``N(mean, std^2)`` samples redrawn until they lie in ``[a, b]``."""
    dtype = _float_dtype(tensor, "trunc_normal_")
    shape = tuple(tensor.shape)
    out = _normal01(shape, dtype) * std + mean
    bad = (out < a) | (out > b)
    for _ in range(100):
        if not bad.any():
            break
        redraw = _normal01(shape, dtype) * std + mean
        out = np.where(bad, redraw, out)
        bad = (out < a) | (out > b)
    return _write(tensor, np.clip(out, a, b))


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
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound)


def kaiming_normal_(tensor: T, a: float = 0.0, mode: str = "fan_in", nonlinearity: str = "leaky_relu") -> T:
    """He normal: ``N(0, std^2)`` with ``std = gain / sqrt(fan)``."""
    if 0 in tuple(tensor.shape):
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)))


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
