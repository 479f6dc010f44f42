"""``tp.randperm``, ``tp.bernoulli`` and ``tp.normal`` with tensor parameters, as PyTorch's.

Each draws a fresh key from the interpreter it runs in, as ``tp.rand``/``tp.randn`` do: the global
generator eagerly, a key input of the recording under ``tp.compile``/``tp.graph.trace`` (fresh numbers at
every call) and under transforms (``vmap`` applies its ``randomness`` policy), or the next key of a
:class:`tp.Generator`. The draws are compositions of the uniform and normal primitives:

* ``randperm(n)``: the stable argsort of ``n`` uniform float64 numbers (a uniformly random order);
* ``bernoulli(p)``: ``u < p`` with ``u`` uniform float64, in ``p``'s dtype (no derivative);
* ``normal(mean, std)``: ``mean + std * z`` with ``z`` standard normal, so its derivative in ``mean`` is 1
  and in ``std`` is ``z`` (PyTorch's ``(out - mean) / std``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorplay import creation as _creation
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from tensorplay.generator import Generator
from tensorplay.indexing_ops import _broadcast
from tensorplay.tensor import SAMPLERS, Tensor

from tensorplay.interpreters.eager.interpreter import eager

AnyTensor = Tensor[*tuple[Any, ...]]
_FLOATS = ("float32", "float64")


def _key(ops: Any, generator: Generator | None, where: str) -> Any:
    if generator is not None and not isinstance(generator, Generator):
        raise ArgumentTypeError(f"{where}: generator must be a tp.Generator or None, got {type(generator).__name__}")
    return ops.random_key() if generator is None else eager.wrap(generator.next_key(where))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def randperm(n: int, *, dtype: Any = None, generator: Generator | None = None,
             device: Any = None) -> AnyTensor:
    """A random permutation of ``0 .. n - 1`` (``[n]``, int64 unless ``dtype``), every order equally likely."""
    where = "randperm"
    _creation._on_cpu(device, where)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ArgumentError(f"{where}: n must be a non-negative int, got {n!r}")
    ops = _creation._creating()
    u = ops.random_uniform(_key(ops, generator, where), shape=(int(n),), dtype="float64")
    order = ops.argsort(u, axis=0)
    name = _creation._dtype_name(dtype, "int64")
    return order if name == "int64" else ops.cast(order, dtype=name)  # type: ignore[no-any-return]


def _eager_check(t: AnyTensor, ok: Any, message: str) -> None:
    if t._ops is eager and not bool(np.all(ok(np.asarray(t._data)))):
        raise ArgumentError(message)


def bernoulli(input: AnyTensor, p: float | None = None, *,  # noqa: A002 - PyTorch's name
              generator: Generator | None = None) -> AnyTensor:
    """0/1 draws of ``input``'s shape and dtype: 1 with probability ``input`` (a float tensor of values in
    ``[0, 1]``), or with probability ``p`` everywhere when ``p`` is given. No derivative."""
    where = "bernoulli"
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(f"{where}: input must be a tensor, got {type(input).__name__}")
    if input.dtype.name not in _FLOATS:
        raise DTypeError(f"{where}: input must be a float32 or float64 tensor, got {input.dtype.name}")
    ops = _creation._creating(input)
    if p is None:
        _eager_check(input, lambda a: (a >= 0) & (a <= 1), f"{where}: input probabilities must be in [0, 1]")
        prob: Any = ops.cast(ops.stop_gradient(input), dtype="float64")
    else:
        if not _is_number(p) or not 0 <= float(p) <= 1:
            raise ArgumentError(f"{where}: p must be a number in [0, 1], got {p!r}")
        prob = float(p)
    u = ops.random_uniform(_key(ops, generator, where), shape=tuple(input.shape), dtype="float64")
    return ops.cast(ops.lt(u, prob), dtype=input.dtype.name)  # type: ignore[no-any-return]


def normal(mean: AnyTensor | float, std: AnyTensor | float = 1.0, size: Sequence[int] | None = None, *,
           generator: Generator | None = None, dtype: Any = None) -> AnyTensor:
    """Normal draws with the given ``mean`` and ``std`` (``std >= 0``), as ``torch.normal``: tensors broadcast
    (the result has their broadcast shape and float dtype); two numbers need ``size`` (float32 unless
    ``dtype``). Differentiable in tensor ``mean`` and ``std``."""
    where = "normal"
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    for name, value in (("mean", mean), ("std", std)):
        if not isinstance(value, Tensor) and not _is_number(value):
            raise ArgumentTypeError(f"{where}: {name} must be a tensor or a number, got {type(value).__name__}")
        if isinstance(value, Tensor) and value.dtype.name not in _FLOATS:
            raise DTypeError(f"{where}: {name} must be a float32 or float64 tensor, got {value.dtype.name}")
    if isinstance(std, Tensor):
        _eager_check(std, lambda a: a >= 0, f"{where}: std must be >= 0 everywhere")
    elif float(std) < 0:
        raise ArgumentError(f"{where}: std must be >= 0, got {std!r}")
    if tensors:
        if size is not None:
            raise ShapeError(f"{where}: size is only for a number mean and std; got a tensor and size {list(size)}")
        shape: tuple[Any, ...] = tuple(tensors[0].shape)
        if len(tensors) == 2:
            shape = _broadcast(tuple(tensors[0].shape), tuple(tensors[1].shape), where, "mean and std")
        name = "float64" if any(t.dtype.name == "float64" for t in tensors) else "float32"
        ops = _creation._creating(*tensors)
    else:
        if size is None:
            raise ShapeError(f"{where}: with a number mean and std, give size (the output shape)")
        shape = _creation._check_dims(tuple(size), where, _creation._creating())
        name = _creation._dtype_name(dtype)
        ops = _creation._creating()
    z = ops.random_normal(_key(ops, generator, where), shape=shape, dtype=name)
    return ops.add(ops.mul(z, std), mean)  # type: ignore[no-any-return]


__all__ = ["bernoulli", "normal", "randperm"]


SAMPLERS["bernoulli"] = bernoulli  # Tensor.bernoulli
