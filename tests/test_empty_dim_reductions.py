"""Reductions given an empty ``dim`` (``()`` or ``[]``), against PyTorch 2.x: ``torch.sum(x, ())`` reduces every
axis (as ``dim=None``; ``keepdim`` keeps them as size 1), and so do ``mean``, ``amax``, ``amin``, ``var``, ``std``
and the vector norms; ``torch.any``/``torch.all`` with ``()`` reduce no axis; ``torch.prod``, ``max`` and
``min`` take one int and refuse ``()``. ``logsumexp`` with ``()`` reduces every axis (PyTorch gives that with
``keepdim=True`` and fails without it, so the reference there is every axis named).

Shapes ``[2, 3]``, ``[4]``, ``[]`` and ``[0, 3]``; float, int and bool inputs where PyTorch takes them.
Values eagerly, the same under ``tp.compile`` and ``vmap`` (against a loop), and gradients against
``torch.autograd``; where PyTorch raises, tensorplay raises its own error class."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as TF
from tensorplay.errors import AxisError, DTypeError, ShapeError
from tests.test_zero_dim_reductions import _torch

Fn = Callable[[Any, Any, bool], Any]


class Case(NamedTuple):
    """A reduction in tensorplay (``ours``) and PyTorch (``theirs``), both called as ``f(x, dim, keepdim)``."""

    ours: Fn
    theirs: Fn
    dtypes: tuple[str, ...]  # the input dtypes PyTorch takes
    no_empty: bool = False  # PyTorch refuses an input with no elements (no identity: max, min, inf-norm)


FLOAT = ("float64", "float32")
ANY = ("float64", "float32", "int64", "int32", "bool")


def _both(method: str, **kw: Any) -> Fn:
    """``x.method(dim, keepdim=keepdim, **kw)``, the same call in both libraries."""
    return lambda t, d, k: getattr(t, method)(d, keepdim=k, **kw)


def _tp_norm(p: float | str) -> Fn:
    return lambda t, d, k: t.norm(p, d, keepdim=k)


def _torch_vector_norm(p: float) -> Fn:
    return lambda t, d, k: torch.linalg.vector_norm(t, p, d, keepdim=k)


def _torch_logsumexp(t: Any, d: Any, k: bool) -> Any:
    """PyTorch's logsumexp over every axis, named (its ``()`` fails without ``keepdim``)."""
    return torch.logsumexp(t, tuple(range(t.ndim)) if len(d) == 0 else d, keepdim=k)


CASES: dict[str, Case] = {
    "sum": Case(_both("sum"), _both("sum"), ANY),
    "mean": Case(_both("mean"), _both("mean"), FLOAT),
    "amax": Case(_both("amax"), _both("amax"), ANY, no_empty=True),
    "amin": Case(_both("amin"), _both("amin"), ANY, no_empty=True),
    "var": Case(_both("var"), _both("var"), FLOAT),
    "var-correction0": Case(_both("var", correction=0), _both("var", correction=0), FLOAT),
    "std": Case(_both("std"), _both("std"), FLOAT),
    "std-correction0": Case(_both("std", correction=0), _both("std", correction=0), FLOAT),
    "norm2": Case(_tp_norm(2), _torch_vector_norm(2), FLOAT),
    "norm1": Case(_tp_norm(1), _torch_vector_norm(1), FLOAT),
    "norm3": Case(_tp_norm(3), _torch_vector_norm(3), FLOAT),
    "norm0": Case(_tp_norm(0), _torch_vector_norm(0), FLOAT),
    "norm-inf": Case(_tp_norm(float("inf")), _torch_vector_norm(float("inf")), FLOAT, no_empty=True),
    "norm-neginf": Case(_tp_norm(float("-inf")), _torch_vector_norm(float("-inf")), FLOAT, no_empty=True),
    "norm-fro": Case(_tp_norm("fro"), lambda t, d, k: torch.norm(t, "fro", d, keepdim=k), FLOAT),
    "logsumexp": Case(_both("logsumexp"), _torch_logsumexp, ANY),
    "any": Case(_both("any"), _both("any"), ANY),
    "all": Case(_both("all"), _both("all"), ANY),
}
"""The reductions that take a tuple of dims in PyTorch."""

SMOOTH = sorted(n for n in CASES if n not in ("any", "all", "norm0"))
"""The float reductions with a gradient (norm0 counts non-zeros: its gradient is 0 in tensorplay, none in torch)."""

SHAPES = [(2, 3), (4,), (), (0, 3)]
EMPTY_DIMS: list[Any] = [(), []]
VARIANTS = [(d, k) for d in EMPTY_DIMS for k in (False, True)]


def _sample(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray[Any, Any]:
    """Values with negatives, zeros and distinct magnitudes (no ties of the max) in ``dtype``."""
    n = int(np.prod(shape))
    values = np.random.default_rng(seed).permutation(np.arange(n) - n // 3).reshape(shape) * 0.75
    if dtype == "bool":
        return np.asarray(values > 0)
    return np.asarray(values.astype(dtype) if dtype.startswith("float") else np.rint(values).astype(dtype))


def _assert_same(got: Any, want: Any) -> None:
    assert tuple(got.shape) == tuple(want.shape), (tuple(got.shape), tuple(want.shape))
    g, w = np.asarray(got.detach().numpy()), want.detach().numpy()
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    rtol = 1e-6 if g.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g, w, rtol=rtol, atol=0.0, equal_nan=True)


def _refused(case: Case, shape: tuple[int, ...]) -> bool:
    return case.no_empty and 0 in shape


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_pytorch(name: str, shape: tuple[int, ...]) -> None:
    case = CASES[name]
    for dtype in ANY:
        data = _sample(shape, dtype)
        for dim, keepdim in VARIANTS:
            def theirs(t: Any, d: Any, k: bool = keepdim) -> Any:
                return case.theirs(t, d, k)

            if dtype not in case.dtypes:
                with pytest.raises(RuntimeError):
                    _torch(theirs, data, dim, torch.from_numpy(data).dtype)
                with pytest.raises(DTypeError, match=r"expected a float tensor"):
                    case.ours(tp.tensor(data), dim, keepdim)
            elif _refused(case, shape):
                with pytest.raises(RuntimeError):
                    _torch(theirs, data, dim, torch.from_numpy(data).dtype)
                with pytest.raises(ShapeError, match=r"cannot reduce over axis 0 of size 0"):
                    case.ours(tp.tensor(data), dim, keepdim)
            else:
                with np.errstate(all="ignore"):
                    got = case.ours(tp.tensor(data), dim, keepdim)
                _assert_same(got, _torch(theirs, data, dim, torch.from_numpy(data).dtype))


@pytest.mark.parametrize("shape", [(2, 3), (4,), ()], ids=str)
def test_empty_dim_reduces_every_axis_as_none(shape: tuple[int, ...]) -> None:
    """The torch meaning restated without torch: ``()`` is ``None``, ``[]`` is ``()``; any/all reduce nothing."""
    x = tp.tensor(_sample(shape, "float64"))
    for name in sorted(CASES):
        case = CASES[name]
        for dim, keepdim in VARIANTS:
            got = case.ours(x, dim, keepdim).numpy()
            if name in ("any", "all"):
                want = (x != 0).numpy()
            elif name == "logsumexp":
                want = case.ours(x, tuple(range(x.ndim)) if x.ndim else 0, keepdim).numpy()
            else:
                want = case.ours(x, None, keepdim).numpy()
            assert got.shape == want.shape and got.dtype == want.dtype, (name, dim, keepdim)
            np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_under_compile_as_eager(name: str, shape: tuple[int, ...]) -> None:
    case = CASES[name]
    if _refused(case, shape):
        return
    x = tp.tensor(_sample(shape, "float32"))
    for dim, keepdim in VARIANTS:
        with np.errstate(all="ignore"):
            want = case.ours(x, dim, keepdim)
            got = tp.compile(lambda t, d=dim, k=keepdim: case.ours(t, d, k))(x)
        assert tuple(got.shape) == tuple(want.shape) and got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_under_vmap_as_a_loop_and_as_pytorch(name: str, shape: tuple[int, ...]) -> None:
    """A batch of 3 samples of ``shape``: each sample reduced over its own axes."""
    case = CASES[name]
    if _refused(case, shape):
        return
    batch = np.stack([_sample(shape, "float64", seed) for seed in range(3)])
    for dim, keepdim in VARIANTS:
        with np.errstate(all="ignore"):
            got = TF.vmap(lambda t, d=dim, k=keepdim: case.ours(t, d, k))(tp.tensor(batch))
            loop = np.stack([case.ours(tp.tensor(s), dim, keepdim).numpy() for s in batch])
        def theirs(t: Any, d: Any, k: bool = keepdim) -> Any:
            return case.theirs(t, d, k)

        want = np.stack([_torch(theirs, s, dim).numpy() for s in batch])
        assert tuple(got.shape) == loop.shape == want.shape
        np.testing.assert_allclose(got.numpy(), loop, rtol=1e-12, equal_nan=True)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", SMOOTH)
def test_gradients_match_pytorch(name: str, shape: tuple[int, ...]) -> None:
    """PyTorch's var and std reduce every axis for ``()`` but their backward takes ``()`` as no axis (a
    count of 1: ``2 (x - mean)`` without correction, infinite with it), so their reference is ``dim=None``,
    the gradient of the value both libraries compute."""
    case = CASES[name]
    torch_dim_of = (lambda d: None) if name.startswith(("var", "std")) else (lambda d: d)
    if _refused(case, shape):
        return
    data = _sample(shape, "float64")
    for dim, keepdim in VARIANTS:
        with np.errstate(all="ignore"):
            got = TF.grad(lambda t, d=dim, k=keepdim: case.ours(t, d, k).sum())(tp.tensor(data))
        tx = torch.tensor(data, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # var's "degrees of freedom <= 0"
            case.theirs(tx, torch_dim_of(dim), keepdim).sum().backward()
        assert tx.grad is not None
        assert tuple(got.shape) == shape
        np.testing.assert_allclose(got.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-14, equal_nan=True)


def test_grad_under_vmap() -> None:
    batch = np.stack([_sample((2, 3), "float64", seed) for seed in range(3)])

    def f(t: Any) -> Any:
        return t.sum(()) * t.amax([]) + t.mean((), keepdim=True).sum() * t.std(None) + t.norm(2, ())

    got = TF.vmap(TF.grad(f))(tp.tensor(batch))
    want = torch.func.vmap(torch.func.grad(f))(torch.tensor(batch))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_prod_refuses_an_empty_dim_as_pytorch(shape: tuple[int, ...]) -> None:
    for dtype in ("float64", "int64", "bool"):
        data = _sample(shape, dtype)
        for dim, keepdim in VARIANTS:
            with pytest.raises(TypeError, match="must be int"):
                torch.from_numpy(data).prod(dim, keepdim=keepdim)
            for call in (lambda: tp.tensor(data).prod(dim, keepdim=keepdim),
                         lambda: tp.prod(tp.tensor(data), dim, keepdim),
                         lambda: tp.compile(lambda t: t.prod(dim))(tp.tensor(data))):
                with pytest.raises(AxisError, match="prod: dim must be an int or a non-empty tuple of ints, "
                                                    f"got {re.escape(repr(dim))}"):
                    call()


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_max_and_min_refuse_an_empty_dim_as_pytorch(name: str, shape: tuple[int, ...]) -> None:
    data = _sample(shape, "float64")
    for dim, keepdim in VARIANTS:
        with pytest.raises(TypeError):
            getattr(torch.from_numpy(data), name)(dim, keepdim=keepdim)
        with pytest.raises(AxisError, match=rf"{name}\(\): dim must be one int, got {re.escape(repr(dim))}"):
            getattr(tp.tensor(data), name)(dim, keepdim=keepdim)


def test_squeeze_of_an_empty_dim_still_removes_nothing() -> None:
    """``squeeze(())`` shares the axis normalisation and keeps PyTorch's meaning there: no axis."""
    data = np.zeros((1, 3, 1))
    for dim in EMPTY_DIMS:
        assert tuple(tp.tensor(data).squeeze(dim).shape) == tuple(torch.from_numpy(data).squeeze(dim).shape) \
            == (1, 3, 1)


def test_fro_norm_of_an_empty_dim_takes_every_axis_of_a_3d_tensor() -> None:
    """``'fro'`` takes at most two named dims; ``()`` names none, so it is the norm of every element."""
    data = _sample((2, 3, 4), "float64")
    got = tp.tensor(data).norm("fro", ())
    _assert_same(got, torch.norm(torch.from_numpy(data), "fro", ()))
    with pytest.raises(AxisError, match=r"p='fro' takes at most 2 dims"):
        tp.tensor(data).norm("fro", (0, 1, 2))
