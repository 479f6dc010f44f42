"""Reductions and other dim-taking operations of a 0-d tensor, against PyTorch: as ``torch.tensor(3.).sum(0)``,
the dim ``0`` or ``-1`` (alone or, where the operation takes several dims, in a tuple) names the tensor
itself and the result is 0-d, with or without ``keepdim``. Values and gradients eagerly, the same values
under ``tp.compile`` and ``vmap`` (a batch of 0-d samples), and any other dim an AxisError naming it."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as TF
import tensorplay.nn.functional as F
from tensorplay.errors import AxisError

Fn = Callable[[Any, Any], Any]


def _first(out: Any) -> Any:
    """The values of a ``(values, indices)`` result, else the result."""
    return out[0] if isinstance(out, tuple) else out


CASES: dict[str, Fn] = {
    "sum": lambda t, d: t.sum(d),
    "sum-keepdim": lambda t, d: t.sum(d, keepdim=True),
    "mean": lambda t, d: t.mean(d),
    "mean-keepdim": lambda t, d: t.mean(d, keepdim=True),
    "amax": lambda t, d: t.amax(d),
    "amin": lambda t, d: t.amin(d, keepdim=True),
    "prod": lambda t, d: t.prod(d) if isinstance(d, int) else t.prod(d[0]),  # torch.prod takes one int
    "logsumexp": lambda t, d: t.logsumexp(d),
    "logsumexp-keepdim": lambda t, d: t.logsumexp(d, keepdim=True),
    "var": lambda t, d: t.var(d),
    "var-correction0": lambda t, d: t.var(d, correction=0),
    "std": lambda t, d: t.std(d),
    "std-correction0": lambda t, d: t.std(d, keepdim=True, correction=0),
    "norm2": lambda t, d: t.norm(2, d),
    "norm1": lambda t, d: t.norm(1, d),
    "norm-fro": lambda t, d: t.norm("fro", d),
    "norm-inf": lambda t, d: t.norm(float("inf"), d),
    "all": lambda t, d: t.all(d),
    "any": lambda t, d: t.any(d, keepdim=True),
}
"""Operations that take one dim or a tuple of dims."""

ONE_DIM: dict[str, Fn] = {
    "softmax": lambda t, d: t.softmax(d),
    "log_softmax": lambda t, d: t.log_softmax(d),
    "F.softmax": lambda t, d: (F if isinstance(t, tp.Tensor) else torch.nn.functional).softmax(t, dim=d),
    "F.log_softmax": lambda t, d: (F if isinstance(t, tp.Tensor) else torch.nn.functional).log_softmax(t, dim=d),
    "argmax": lambda t, d: t.argmax(d),
    "argmax-keepdim": lambda t, d: t.argmax(d, keepdim=True),
    "argmin": lambda t, d: t.argmin(d),
    "max": lambda t, d: _first(t.max(d)),
    "min-keepdim": lambda t, d: _first(t.min(d, keepdim=True)),
    "min-indices": lambda t, d: t.min(d)[1],
    "cumsum": lambda t, d: t.cumsum(d),
    "sort": lambda t, d: _first(t.sort(d)),
    "argsort": lambda t, d: t.argsort(d),
    "topk": lambda t, d: _first(t.topk(1, d)),
}
"""Operations that take one dim."""

SMOOTH = {"sum", "sum-keepdim", "mean", "mean-keepdim", "amax", "amin", "prod", "logsumexp", "logsumexp-keepdim",
          "var-correction0", "norm2", "norm1", "norm-fro", "norm-inf", "softmax", "log_softmax", "F.softmax",
          "F.log_softmax", "max", "min-keepdim", "cumsum", "sort", "topk"}
"""The cases with a gradient at the samples (std's gradient at a single sample is 0 in both)."""

ALL = {**CASES, **ONE_DIM}
DIMS: dict[str, list[Any]] = {name: [0, -1, (0,), (-1,)] if name in CASES else [0, -1] for name in ALL}
VALUES = [3.0, -2.5, 0.0, math.inf, -math.inf, math.nan]


def _torch(fn: Fn, value: Any, dim: Any, dtype: torch.dtype = torch.float64) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # var's "degrees of freedom <= 0"
        return fn(torch.tensor(value, dtype=dtype), dim)


def _assert_same(got: Any, want: Any) -> None:
    assert tuple(got.shape) == tuple(want.shape) == ()
    g, w = np.asarray(got.detach().numpy()), want.detach().numpy()
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=0.0, equal_nan=True)


@pytest.mark.parametrize("name,dim", [(n, d) for n in ALL for d in DIMS[n]])
@pytest.mark.parametrize("value", VALUES)
def test_values_match_pytorch(name: str, dim: Any, value: float) -> None:
    fn = ALL[name]
    with np.errstate(all="ignore"):
        got = fn(tp.tensor(value, dtype=tp.float64), dim)
    _assert_same(got, _torch(fn, value, dim))


@pytest.mark.parametrize("name", ["sum", "prod", "logsumexp", "amax", "all", "any", "argmax", "cumsum", "sort"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_int_and_bool_values_match_pytorch(name: str, dtype: str) -> None:
    if dtype == "bool" and name == "argmax":
        pytest.skip("torch.argmax refuses bool input (of any rank); tensorplay takes it")
    fn = ALL[name]
    value = True if dtype == "bool" else 7
    for dim in (0, -1):
        got = fn(tp.tensor(np.array(value, dtype)), dim)
        want = fn(torch.tensor(np.array(value, dtype)), dim)
        assert tuple(got.shape) == () and got.numpy().dtype == want.numpy().dtype
        assert got.item() == want.item()


@pytest.mark.parametrize("name", sorted(SMOOTH))
@pytest.mark.parametrize("value", [3.0, -2.5])
def test_gradients_match_pytorch(name: str, value: float) -> None:
    fn = ALL[name]
    for dim in DIMS[name]:
        x = tp.tensor(value, dtype=tp.float64, requires_grad=True)
        tx = torch.tensor(value, dtype=torch.float64, requires_grad=True)
        fn(x, dim).sum().backward()
        fn(tx, dim).sum().backward()
        assert x.grad is not None and tx.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", sorted(ALL))
def test_under_compile_as_eager(name: str) -> None:
    fn = ALL[name]
    x = tp.tensor(1.75, dtype=tp.float32)
    for dim in DIMS[name]:
        want = fn(x, dim)
        got = tp.compile(lambda t, d=dim: fn(t, d))(x)
        assert tuple(got.shape) == () and got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(ALL))
def test_under_vmap_as_a_loop_and_as_torch_func(name: str) -> None:
    """A batch of 0-d samples: each sample reduced over its own dim 0 / -1."""
    fn = ALL[name]
    values = np.array([3.0, -2.5, 0.5, 0.0])
    for dim in DIMS[name]:
        got = TF.vmap(lambda t, d=dim: fn(t, d))(tp.tensor(values))
        loop = np.stack([fn(tp.tensor(v), dim).numpy() for v in values])
        assert tuple(got.shape) == (4,)
        np.testing.assert_allclose(got.numpy(), loop, rtol=1e-12)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # var's "degrees of freedom <= 0"
            want = torch.func.vmap(lambda t, d=dim: fn(t, d))(torch.tensor(values))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_grad_under_vmap() -> None:
    values = tp.tensor(np.array([3.0, -2.5, 0.5]))
    got = TF.vmap(TF.grad(lambda t: t.prod(0) * t.sum(-1) + t.softmax(0) * t.norm(2, (0,))))(values)
    want = torch.func.vmap(torch.func.grad(lambda t: t.prod(0) * t.sum(-1) + t.softmax(0) * t.norm(2, (0,))))(
        torch.tensor(values.numpy()))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(ALL))
@pytest.mark.parametrize("dim", [1, -2, 5])
def test_other_dims_are_an_axis_error_naming_the_dim(name: str, dim: int) -> None:
    with pytest.raises(AxisError, match=rf"axis {dim} is out of range for a 0-d tensor \(expected -1 or 0"):
        ALL[name](tp.tensor(2.0), dim)
    if name in CASES and name != "prod":
        with pytest.raises(AxisError, match=rf"axis {dim} is out of range for a 0-d tensor"):
            ALL[name](tp.tensor(2.0), (0, dim) if dim != 0 else (dim,))


@pytest.mark.parametrize("name", sorted(n for n in CASES if n != "prod"))
def test_both_names_of_the_one_axis_are_duplicates(name: str) -> None:
    with pytest.raises(AxisError, match=r"duplicate axes \[0, -1\] for a 0-d tensor"):
        CASES[name](tp.tensor(2.0), (0, -1))
    with pytest.raises(RuntimeError, match="multiple times"):
        _torch(CASES[name], 2.0, (0, -1))


def test_non_integer_dims_are_named() -> None:
    with pytest.raises(AxisError, match="sum: axis must be an int, got float 0.0|reduce_sum: axis must be an int"):
        tp.tensor(2.0).sum(0.0)  # type: ignore[call-overload]
    with pytest.raises(AxisError, match="softmax: axis must be an int, got bool True"):
        tp.tensor(2.0).softmax(True)
