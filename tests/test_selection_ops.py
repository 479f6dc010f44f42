"""Data-dependent selections of :mod:`tensorplay.selection_ops` (``nonzero``, ``argwhere``, ``masked_select``,
``unique``, ``unique_consecutive``) against PyTorch: values, dtypes and shapes for float, int and bool inputs,
NaN, 0-d, empty and strided inputs, ``masked_select``'s gradient with broadcasting, argument errors, execute-mode
recording (``tp.compile``, re-traced when the values change, and ``tp.func.grad``) and the
:class:`GraphCaptureError` of a symbolic recording (``tp.func.vmap``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tests.torch_cases import as_numpy as _np
from tensorplay.errors import AxisError, DTypeError, GraphCaptureError, ShapeError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)
NAN = float("nan")


def _same(got: Any, want: Any, what: str) -> None:
    """Equal outputs (a tensor or a tuple of them): dtype, shape and values (NaN equal to NaN)."""
    gs = list(got) if isinstance(got, tuple) else [got]
    ws = list(want) if isinstance(want, tuple) else [want]
    assert len(gs) == len(ws), (what, len(gs), len(ws))
    for i, (g, w) in enumerate(zip(gs, ws)):
        a, b = _np(g), _np(w)
        assert a.dtype == b.dtype and a.shape == b.shape, (what, i, a.dtype, b.dtype, a.shape, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=f"{what} output {i}")


INPUTS: dict[str, Any] = {
    "float": np.array([[0.0, 1.5, -0.0], [NAN, 0.0, 2.0]]),
    "int": RNG.integers(-2, 3, (3, 4)),
    "bool": RNG.integers(0, 2, (2, 3, 2)).astype(bool),
    "0-d": np.array(3.0),
    "0-d zero": np.array(0),
    "empty": np.zeros((0, 3)),
    "float32": np.array([1.0, 0.0, 3.0, 3.0, 1.0], np.float32),
}

CALLS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "nonzero": (tp.nonzero, torch.nonzero),
    "nonzero as_tuple": (lambda x: x.nonzero(as_tuple=True), lambda x: x.nonzero(as_tuple=True)),
    "argwhere": (lambda x: x.argwhere(), torch.argwhere),
    "unique": (tp.unique, torch.unique),
    "unique all": (lambda x: x.unique(return_inverse=True, return_counts=True),
                   lambda x: x.unique(return_inverse=True, return_counts=True)),
    "unique counts": (lambda x: tp.unique(x, sorted=False, return_counts=True),
                      lambda x: torch.unique(x, sorted=False, return_counts=True)),
    "unique_consecutive": (lambda x: tp.unique_consecutive(x, return_inverse=True, return_counts=True),
                           lambda x: torch.unique_consecutive(x, return_inverse=True, return_counts=True)),
}


@pytest.mark.parametrize("given", list(INPUTS))
@pytest.mark.parametrize("call", list(CALLS))
def test_outputs_match_torch(call: str, given: str) -> None:
    ours, theirs = CALLS[call]
    a = INPUTS[given]
    _same(ours(tp.tensor(a, dtype=a.dtype.name)), theirs(torch.tensor(a)), f"{call} of {given}")


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unique_and_unique_consecutive_along_a_dim_match_torch(dim: int) -> None:
    a = np.array([[1, 2, 1, 1], [3, 0, 3, 3], [1, 2, 1, 1], [3, 0, 3, 3], [0, 0, 0, 0]])
    pairs: list[tuple[Callable[[Any], Any], Callable[[Any], Any]]] = [
        (lambda x: tp.unique(x, return_inverse=True, return_counts=True, dim=dim),
         lambda x: torch.unique(x, return_inverse=True, return_counts=True, dim=dim)),
        (lambda x: x.unique_consecutive(return_inverse=True, return_counts=True, dim=dim),
         lambda x: x.unique_consecutive(return_inverse=True, return_counts=True, dim=dim))]
    for ours, theirs in pairs:
        _same(ours(tp.tensor(a)), theirs(torch.tensor(a)), f"dim {dim}")


def test_strided_inputs_match_torch() -> None:
    a = RNG.integers(0, 3, (6, 8)).astype(np.float64)
    _same(tp.tensor(a)[::2, 1::3].nonzero(), torch.tensor(a)[::2, 1::3].nonzero(), "strided nonzero")
    _same(tp.tensor(a).transpose(0, 1).unique_consecutive(return_counts=True),
          torch.tensor(a).T.unique_consecutive(return_counts=True), "transposed unique_consecutive")
    mask = a > 0.5
    _same(tp.tensor(a).transpose(0, 1).masked_select(tp.tensor(mask).transpose(0, 1)),
          torch.tensor(a).T.masked_select(torch.tensor(mask).T), "transposed masked_select")


@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((1, 4), (3, 1)), ((4,), (2, 3, 4)),
                                    ((0, 4), (4,)), ((), (2, 2))])
def test_masked_select_values_and_gradient_match_torch(shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    xs, ms = shapes
    x = np.asarray(RNG.standard_normal(xs))
    mask = RNG.integers(0, 2, ms).astype(bool)
    t, r = tp.tensor(x, dtype="float64", requires_grad=True), torch.tensor(x, requires_grad=True)
    got, want = tp.masked_select(t, tp.tensor(mask)), torch.masked_select(r, torch.tensor(mask))
    _same(got.detach(), want.detach(), f"masked_select {shapes}")
    weights = RNG.standard_normal(tuple(want.shape))
    (got * tp.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(_np(t.grad), _np(r.grad), rtol=1e-12, atol=1e-12)


def test_errors_are_tensorplay_errors_naming_the_function() -> None:
    x = tp.tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(DTypeError, match="masked_select: mask must be a bool tensor"):
        x.masked_select(tp.tensor(np.ones((2, 3), np.int64)))
    with pytest.raises(ShapeError, match=r"masked_select: the input of shape \[2, 3\] and the mask of shape \[2\]"):
        x.masked_select(tp.tensor(np.ones(2, bool)))
    with pytest.raises(AxisError):
        x.unique(dim=2)
    with pytest.raises(tp.ArgumentTypeError, match="unique: return_counts must be a bool"):
        x.unique(return_counts="yes")  # type: ignore[arg-type]
    with pytest.raises(tp.ArgumentTypeError, match="masked_select: mask must be a tensor"):
        tp.masked_select(x, [True])  # type: ignore[arg-type]


def test_compile_specialises_on_the_values_and_grad_reaches_the_selection() -> None:
    def f(x: Any) -> Any:
        picked = x.masked_select(x > 0)
        return picked.sum() * picked.shape[0] + tp.nonzero(x > 1).sum() + tp.unique(x.round()).sum()

    def f_torch(x: Any) -> Any:
        picked = x.masked_select(x > 0)
        return picked.sum() * picked.shape[0] + torch.nonzero(x > 1).sum() + torch.unique(x.detach().round()).sum()

    compiled = tp.compile(f)
    for _ in range(2):
        for x in (RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))):  # new values: a guard fails, traced again
            got = compiled(tp.tensor(x))
            np.testing.assert_allclose(got.numpy(), f_torch(torch.tensor(x)).numpy(), rtol=1e-12)
    x = RNG.standard_normal((3, 4))
    g = tp.func.grad(f)(tp.tensor(x))
    r = torch.tensor(x, requires_grad=True)
    f_torch(r).backward()
    np.testing.assert_allclose(g.numpy(), r.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["nonzero", "argwhere", "masked_select", "unique", "unique_consecutive"])
def test_symbolic_recording_is_refused_with_a_reason(name: str) -> None:
    calls: dict[str, Callable[[Any], Any]] = {
        "nonzero": lambda r: r.nonzero().sum(), "argwhere": lambda r: r.argwhere().sum(),
        "masked_select": lambda r: r.masked_select(r > 0).sum(), "unique": lambda r: r.unique().sum(),
        "unique_consecutive": lambda r: r.unique_consecutive().sum()}
    with pytest.raises(GraphCaptureError, match=f"{name}: the output's size is .* depends on the input's values"):
        tp.func.vmap(calls[name])(tp.tensor(RNG.standard_normal((2, 3))))
