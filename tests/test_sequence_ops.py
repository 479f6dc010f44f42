"""The functions of :mod:`tensorplay.sequence_ops` (``diff``, ``cross``, ``kron``, ``cummax``/``cummin``,
``tril_indices``/``triu_indices``, ``block_diag``, ``cartesian_prod``, ``trapezoid``, ``histc``) against
PyTorch: values for float and integer dtypes, negative dims, strided inputs, empty dims, NaN and ties in the
running extremes, gradients, a few under ``tp.compile`` and ``vmap``, and argument errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import TensorplayError

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(11)
NAN = float("nan")


def _np(t: Any) -> Any:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _same(got: Any, want: Any, what: str = "") -> None:
    g, w = _np(got), _np(want)
    assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    tol = 1e-5 if g.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True, err_msg=what)


def _grad_check(ours: Callable[..., Any], theirs: Callable[..., Any], arrays: list[np.ndarray[Any, Any]]) -> None:
    """Gradients of ``sum(f(*xs) * w)`` (a random ``w``) against torch autograd."""
    ts = [tp.tensor(a, requires_grad=True) for a in arrays]
    cs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = ours(*ts), theirs(*cs)
    w = RNG.standard_normal(tuple(want.shape))
    (out * tp.tensor(w)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    _same(out, want, "value")
    for t, c in zip(ts, cs):
        _same(t.grad, c.grad, "gradient")


# ---- diff ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool"])
@pytest.mark.parametrize("n, dim", [(1, -1), (2, 0), (3, 1), (0, -1), (7, -1)])
def test_diff_matches_torch(dtype: str, n: int, dim: int) -> None:
    a = (RNG.standard_normal((4, 5)) * 3).astype(dtype) if dtype != "bool" else RNG.random((4, 5)) > 0.5
    _same(tp.diff(tp.tensor(a), n=n, dim=dim), torch.diff(torch.tensor(a), n=n, dim=dim), f"diff {n} {dim}")


def test_diff_prepend_append_strided_and_empty_match_torch() -> None:
    a = RNG.standard_normal((3, 8))
    pre, post = RNG.standard_normal((3, 2)), RNG.standard_normal((3, 1))
    _same(tp.tensor(a).diff(2, -1, prepend=tp.tensor(pre), append=tp.tensor(post)),
          torch.diff(torch.tensor(a), 2, -1, prepend=torch.tensor(pre), append=torch.tensor(post)))
    _same(tp.diff(tp.tensor(a)[:, ::2].transpose(0, 1), dim=0),
          torch.diff(torch.tensor(a)[:, ::2].transpose(0, 1), dim=0), "strided")
    e = np.zeros((2, 0))
    _same(tp.diff(tp.tensor(e)), torch.diff(torch.tensor(e)), "empty")
    _grad_check(lambda x, p: tp.diff(x, 2, 1, prepend=p), lambda x, p: torch.diff(x, 2, 1, prepend=p), [a, pre])


# ---- cross and kron --------------------------------------------------------------------------------

def test_cross_matches_torch_with_broadcasting_dims_and_gradients() -> None:
    a, b = RNG.standard_normal((4, 3)), RNG.standard_normal((1, 3))
    _same(tp.cross(tp.tensor(a), tp.tensor(b)), torch.linalg.cross(torch.tensor(a), torch.tensor(b)))
    c, d = RNG.standard_normal((3, 5)).astype("float32"), RNG.standard_normal((3, 5)).astype("float32")
    _same(tp.tensor(c).cross(tp.tensor(d), dim=-2), torch.linalg.cross(torch.tensor(c), torch.tensor(d), dim=-2))
    i, j = RNG.integers(-5, 5, (2, 3)), RNG.integers(-5, 5, (2, 3))
    _same(tp.cross(tp.tensor(i), tp.tensor(j)), torch.linalg.cross(torch.tensor(i), torch.tensor(j)), "int")
    s = RNG.standard_normal((3, 6))
    _same(tp.cross(tp.tensor(s)[:, ::2].transpose(0, 1), tp.tensor(s)[:, 1::2].transpose(0, 1)),
          torch.linalg.cross(torch.tensor(s)[:, ::2].T, torch.tensor(s)[:, 1::2].T), "strided")
    _grad_check(lambda x, y: tp.cross(x, y), lambda x, y: torch.linalg.cross(x, y), [a, b])


@pytest.mark.parametrize("sa, sb", [((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 1, 3), (2,)), ((0, 2), (3, 1)), ((), (3,))])
def test_kron_matches_torch(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    _same(tp.kron(tp.tensor(a), tp.tensor(b)), torch.kron(torch.tensor(a), torch.tensor(b)))
    i, j = RNG.integers(-4, 4, sa), RNG.integers(-4, 4, sb)
    _same(tp.tensor(i).kron(tp.tensor(j)), torch.kron(torch.tensor(i), torch.tensor(j)), "int")
    if a.size and b.size:
        _grad_check(tp.kron, torch.kron, [a, b])


# ---- cummax / cummin -------------------------------------------------------------------------------

def _cum_pair(name: str, a: np.ndarray[Any, Any], dim: int) -> None:
    got = getattr(tp, name)(tp.tensor(a), dim)
    want = getattr(torch, name)(torch.tensor(a), dim)
    _same(got.values, want.values, f"{name} values")
    _same(got.indices, want.indices, f"{name} indices")


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "bool"])
def test_cum_extremes_match_torch_with_ties(name: str, dtype: str) -> None:
    a = RNG.integers(0, 3, (4, 9)).astype(dtype)  # few distinct values: many ties
    for dim in (0, 1, -1, -2):
        _cum_pair(name, a, dim)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cum_extremes_nan_strided_empty_and_0d_match_torch(name: str) -> None:
    a = np.array([[1.0, 3.0, 3.0, NAN, 2.0, NAN, 5.0, -1.0], [4.0, 1.0, 1.0, 0.0, 7.0, 7.0, 2.0, NAN]])
    _cum_pair(name, a, 1)
    _cum_pair(name, a.astype("float32"), -1)
    s = RNG.standard_normal((6, 10))
    got = getattr(tp.tensor(s)[::2, 1::3].transpose(0, 1), name)(0)
    want = getattr(torch.tensor(s)[::2, 1::3].T, name)(0)
    _same(got.values, want.values, "strided")
    _same(got.indices, want.indices, "strided")
    _cum_pair(name, np.zeros((3, 0)), 1)
    _cum_pair(name, np.zeros((3, 0)), 0)
    _cum_pair(name, np.array(2.5), 0)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cum_extremes_gradient_reaches_the_chosen_entry_as_torch(name: str) -> None:
    a = RNG.integers(0, 4, (3, 7)).astype("float64")  # ties: the later entry gets the gradient
    _grad_check(lambda x: getattr(tp, name)(x, 1).values, lambda x: getattr(torch, name)(x, 1).values, [a])
    _grad_check(lambda x: getattr(tp, name)(x, -2).values, lambda x: getattr(torch, name)(x, -2).values, [a])


def test_cummax_under_compile_and_vmap_matches_eager() -> None:
    a = RNG.standard_normal((4, 6)).astype("float32")

    def f(x: Any) -> Any:
        v, i = tp.cummax(x, 1)
        return v * 2.0 + i.float()

    _same(tp.compile(f)(tp.tensor(a)), f(tp.tensor(a)), "compile")
    rows = tp.func.vmap(lambda r: tp.cummin(r, 0).values)(tp.tensor(a))
    _same(rows, np.stack([tp.cummin(tp.tensor(r), 0).values.numpy() for r in a]), "vmap")
    g = tp.func.grad(lambda x: tp.cummax(x, 0).values.sum())(tp.tensor(a[0]))
    x = torch.tensor(a[0], requires_grad=True)
    torch.cummax(x, 0).values.sum().backward()
    _same(g, x.grad, "func.grad")


# ---- triangle indices --------------------------------------------------------------------------------

@pytest.mark.parametrize("row, col, offset", [(4, 4, 0), (3, 5, 1), (5, 3, -2), (0, 3, 0), (3, 3, 9), (3, 3, -9)])
def test_tril_triu_indices_match_torch(row: int, col: int, offset: int) -> None:
    _same(tp.tril_indices(row, col, offset), torch.tril_indices(row, col, offset), "tril")
    _same(tp.triu_indices(row, col, offset), torch.triu_indices(row, col, offset), "triu")


# ---- block_diag and cartesian_prod -------------------------------------------------------------------

def test_block_diag_matches_torch() -> None:
    blocks = [RNG.standard_normal((2, 3)), np.array(1.5), RNG.standard_normal(4), RNG.standard_normal((0, 2)),
              RNG.standard_normal((1, 1))]
    _same(tp.block_diag(*[tp.tensor(b) for b in blocks]), torch.block_diag(*[torch.tensor(b) for b in blocks]))
    i = [RNG.integers(0, 5, (2, 2)), RNG.integers(0, 5, 3)]
    _same(tp.block_diag(*[tp.tensor(b) for b in i]), torch.block_diag(*[torch.tensor(b) for b in i]), "int")
    _grad_check(lambda x, y: tp.block_diag(x, y), lambda x, y: torch.block_diag(x, y), [blocks[0], blocks[2]])


def test_cartesian_prod_matches_torch() -> None:
    a, b, c = RNG.standard_normal(2), RNG.standard_normal(3), RNG.standard_normal(4)
    _same(tp.cartesian_prod(tp.tensor(a), tp.tensor(b), tp.tensor(c)),
          torch.cartesian_prod(torch.tensor(a), torch.tensor(b), torch.tensor(c)))
    _same(tp.cartesian_prod(tp.tensor(a)), torch.cartesian_prod(torch.tensor(a)), "one tensor")
    _same(tp.cartesian_prod(tp.tensor([1, 2]), tp.tensor([3, 4, 5])),
          torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5])), "int")
    _grad_check(lambda x, y: tp.cartesian_prod(x, y), lambda x, y: torch.cartesian_prod(x, y), [a, b])


# ---- trapezoid -------------------------------------------------------------------------------------

def test_trapezoid_matches_torch() -> None:
    y = RNG.standard_normal((3, 6))
    x1 = np.sort(RNG.standard_normal(6))
    xf = np.sort(RNG.standard_normal((3, 6)), axis=1)
    _same(tp.trapezoid(tp.tensor(y)), torch.trapezoid(torch.tensor(y)))
    _same(tp.trapezoid(tp.tensor(y), dx=0.5, dim=0), torch.trapezoid(torch.tensor(y), dx=0.5, dim=0), "dx")
    _same(tp.trapezoid(tp.tensor(y), tp.tensor(x1)), torch.trapezoid(torch.tensor(y), torch.tensor(x1)), "x 1-d")
    _same(tp.trapezoid(tp.tensor(y), tp.tensor(xf), dim=-1), torch.trapezoid(torch.tensor(y), torch.tensor(xf)), "x")
    _same(tp.trapezoid(tp.tensor(y.T), tp.tensor(x1), dim=0),
          torch.trapezoid(torch.tensor(y.T), torch.tensor(x1), dim=0), "x 1-d on dim 0")
    _same(tp.trapezoid(tp.tensor([1, 2, 4])), torch.trapezoid(torch.tensor([1, 2, 4])), "int")
    _same(tp.trapezoid(tp.tensor(np.zeros((2, 0)))), torch.trapezoid(torch.tensor(np.zeros((2, 0)))), "empty")
    _same(tp.trapezoid(tp.tensor(np.ones((2, 1)))), torch.trapezoid(torch.tensor(np.ones((2, 1)))), "one")
    _grad_check(lambda a, b: tp.trapezoid(a, b), lambda a, b: torch.trapezoid(a, b), [y, xf])


def test_trapezoid_under_vmap_matches_a_loop() -> None:
    y = RNG.standard_normal((4, 5))
    got = tp.func.vmap(lambda r: tp.trapezoid(r, dx=0.25))(tp.tensor(y))
    _same(got, np.array([tp.trapezoid(tp.tensor(r), dx=0.25).numpy() for r in y]))


# ---- histc -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_histc_matches_torch(dtype: str) -> None:
    a = RNG.standard_normal((10, 20)).astype(dtype)
    for bins, lo, hi in ((100, 0.0, 0.0), (7, 0.0, 0.0), (10, -1.0, 1.0), (3, 0.5, 4.0)):
        _same(tp.histc(tp.tensor(a), bins, lo, hi), torch.histc(torch.tensor(a), bins, lo, hi), f"{bins} {lo} {hi}")
    edges = np.array([0.0, 1.0, 2.0, 3.0, 4.0, -1.0, 5.0], dtype)  # the upper bound counts in the last bin
    _same(tp.tensor(edges).histc(4, 0, 4), torch.tensor(edges).histc(4, 0, 4), "edges")
    same = np.full(5, 2.0, dtype)
    _same(tp.histc(tp.tensor(same), 4), torch.histc(torch.tensor(same), 4), "constant")


def test_histc_under_compile_matches_eager() -> None:
    a = RNG.standard_normal(50).astype("float32")
    _same(tp.compile(lambda x: tp.histc(x, 6))(tp.tensor(a)), torch.histc(torch.tensor(a), 6))


# ---- argument errors -------------------------------------------------------------------------------

@pytest.mark.parametrize("call, words", [
    (lambda: tp.diff(tp.tensor([1.0, 2.0]), n=-1), ["diff", "n"]),
    (lambda: tp.diff(tp.tensor([1.0, 2.0]), dim=1.5), ["diff", "dim"]),  # type: ignore[arg-type]
    (lambda: tp.diff(tp.tensor(1.0)), ["diff", "0-d"]),
    (lambda: tp.diff(tp.ones(2, 3), prepend=tp.ones(3, 3)), ["diff", "prepend"]),
    (lambda: tp.diff(tp.ones(2, 3), append=tp.ones(3)), ["diff", "append"]),
    (lambda: tp.cross(tp.ones(2, 4), tp.ones(2, 4)), ["cross", "size 3"]),
    (lambda: tp.cross(tp.ones(2, 3), tp.ones(3)), ["cross", "dims"]),
    (lambda: tp.cummax(tp.ones(2, 3), 2), ["cummax"]),
    (lambda: tp.cummin(tp.ones(2, 3), "a"), ["cummin", "dim"]),  # type: ignore[arg-type]
    (lambda: tp.tril_indices(-1, 3), ["tril_indices", "row"]),
    (lambda: tp.triu_indices(3, 2.0), ["triu_indices", "col"]),  # type: ignore[arg-type]
    (lambda: tp.block_diag(tp.ones(2, 2, 2)), ["block_diag", "shape"]),
    (lambda: tp.block_diag(), ["block_diag", "at least one"]),
    (lambda: tp.cartesian_prod(tp.ones(2, 2)), ["cartesian_prod", "1-d"]),
    (lambda: tp.trapezoid(tp.ones(3), tp.ones(4)), ["trapezoid", "x"]),
    (lambda: tp.trapezoid(tp.ones(3), dx="a"), ["trapezoid", "dx"]),  # type: ignore[arg-type]
    (lambda: tp.histc(tp.tensor([1, 2]), 3), ["histc", "float"]),
    (lambda: tp.histc(tp.ones(3), 0), ["histc", "bins"]),
    (lambda: tp.histc(tp.ones(3), 3, 2.0, 1.0), ["histc", "max"]),
])
def test_argument_errors_name_the_function_and_argument(call: Callable[[], Any], words: list[str]) -> None:
    with pytest.raises(TensorplayError) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))
