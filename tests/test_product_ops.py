"""Matrix and vector products of :mod:`tensorplay.product_ops` (``mm``, ``mv``, ``addmm``, ``addmv``, ``addr``,
``baddbmm``, ``addbmm``, ``inner``, ``vdot``, ``ger``, ``chain_matmul``, ``matrix_power``) against PyTorch:
values and gradients in float32/float64 and int64, broadcast and strided inputs, zero-size dims, NaN with
``beta=0``, argument errors, and under ``tp.compile``, ``tp.func.grad`` and ``tp.func.vmap``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tests.torch_cases import as_numpy as _np, assert_close
from tensorplay.errors import ArgumentError, DTypeError, ShapeError, TensorplayError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore:torch.chain_matmul is deprecated")

DTYPES = ["float32", "float64"]
TOL: dict[str, dict[str, float]] = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-12, atol=1e-12)}
RNG = np.random.default_rng(11)


def _close(got: Any, want: Any, dtype: str, what: str) -> None:
    assert_close(got, want, TOL.get(dtype, {"rtol": 0.0, "atol": 0.0}), what)


def _check(ours: Callable[..., Any], theirs: Callable[..., Any], arrays: list[Any], dtype: str, what: str) -> None:
    """Values and the gradients of ``(out * weights).sum()`` with respect to every input, against torch."""
    ts = [tp.tensor(a, dtype=a.dtype.name, requires_grad=True) for a in arrays]
    rs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, want = ours(*ts), theirs(*rs)
    _close(out, want, dtype, f"{what} values")
    weights = RNG.standard_normal(tuple(want.shape)).astype(dtype)
    (out * tp.tensor(weights)).sum().backward()
    (want * torch.tensor(weights)).sum().backward()
    for i, (t, r) in enumerate(zip(ts, rs)):
        _close(t.grad, r.grad, dtype, f"{what} d/dinput{i}")


def _r(*shape: int, dtype: str = "float64") -> Any:
    return np.asarray(RNG.standard_normal(shape), dtype=dtype)


CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], list[tuple[int, ...]]]] = {
    "mm": (tp.mm, torch.mm, [(3, 4), (4, 5)]),
    "mm method": (lambda a, b: a.mm(b), lambda a, b: a.mm(b), [(2, 3), (3, 1)]),
    "mv": (tp.mv, torch.mv, [(3, 4), (4,)]),
    "addmm": (lambda x, a, b: tp.addmm(x, a, b, beta=0.5, alpha=-2.0),
              lambda x, a, b: torch.addmm(x, a, b, beta=0.5, alpha=-2.0), [(5,), (3, 4), (4, 5)]),
    "addmm method": (lambda x, a, b: x.addmm(a, b), lambda x, a, b: x.addmm(a, b), [(3, 1), (3, 4), (4, 5)]),
    "addmv": (lambda x, a, v: tp.addmv(x, a, v, alpha=3), lambda x, a, v: torch.addmv(x, a, v, alpha=3),
              [(1,), (3, 4), (4,)]),
    "addr": (lambda x, a, b: x.addr(a, b, beta=2), lambda x, a, b: x.addr(a, b, beta=2), [(3, 4), (3,), (4,)]),
    "baddbmm": (lambda x, a, b: tp.baddbmm(x, a, b, beta=0.25), lambda x, a, b: torch.baddbmm(x, a, b, beta=0.25),
                [(1, 5), (2, 3, 4), (2, 4, 5)]),
    "addbmm": (lambda x, a, b: x.addbmm(a, b, alpha=0.5), lambda x, a, b: x.addbmm(a, b, alpha=0.5),
               [(3, 5), (4, 3, 2), (4, 2, 5)]),
    "inner": (tp.inner, torch.inner, [(2, 3, 4), (5, 4)]),
    "inner 1-d": (lambda a, b: a.inner(b), lambda a, b: a.inner(b), [(4,), (4,)]),
    "inner 0-d": (tp.inner, torch.inner, [(), (2, 3)]),
    "vdot": (tp.vdot, torch.vdot, [(6,), (6,)]),
    "ger": (tp.ger, torch.ger, [(3,), (4,)]),
    "chain_matmul": (lambda a, b, c, d: tp.chain_matmul(a, b, c, d), torch.chain_matmul,
                     [(2, 7), (7, 3), (3, 6), (6, 1)]),
    "chain_matmul one": (tp.chain_matmul, torch.chain_matmul, [(2, 3)]),
    "matrix_power 0": (lambda a: a.matrix_power(0), lambda a: a.matrix_power(0), [(2, 3, 3)]),
    "matrix_power 1": (lambda a: tp.matrix_power(a, 1), lambda a: torch.matrix_power(a, 1), [(3, 3)]),
    "matrix_power 5": (lambda a: a.matrix_power(5), lambda a: a.matrix_power(5), [(2, 3, 3)]),
    "matrix_power 6": (lambda a: tp.matrix_power(a, 6), lambda a: torch.matrix_power(a, 6), [(4, 4)]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_match_torch(name: str, dtype: str) -> None:
    ours, theirs, shapes = CASES[name]
    arrays = [_r(*s, dtype=dtype) * (0.5 if "power" in name else 1.0) for s in shapes]
    _check(ours, theirs, arrays, dtype, name)


def test_strided_inputs_and_zero_size_dims_match_torch() -> None:
    a = _r(4, 6)
    b = _r(8, 3)
    _check(lambda a, b: tp.mm(a[:, ::2], b[::2].transpose(0, 1)), lambda a, b: torch.mm(a[:, ::2], b[::2].T),
           [a, b], "float64", "strided mm")
    _check(lambda x, a, b: tp.addmm(x, a.transpose(0, 1), b), lambda x, a, b: torch.addmm(x, a.T, b),
           [_r(4, 1), _r(3, 4), _r(3, 2)], "float64", "transposed addmm")
    for ours, theirs, shapes in ((tp.mm, torch.mm, [(3, 0), (0, 2)]), (tp.mm, torch.mm, [(0, 3), (3, 2)]),
                                 (tp.mv, torch.mv, [(0, 3), (3,)]), (tp.inner, torch.inner, [(2, 0), (3, 0)]),
                                 (lambda x, a, b: tp.addbmm(x, a, b), torch.addbmm, [(2, 2), (0, 2, 3), (0, 3, 2)]),
                                 (lambda x, a, b: tp.baddbmm(x, a, b), torch.baddbmm, [(0, 2, 2), (0, 2, 3), (0, 3, 2)])):
        arrays = [_r(*s) for s in shapes]
        _close(ours(*[tp.tensor(a) for a in arrays]), theirs(*[torch.tensor(a) for a in arrays]), "float64",
               f"zero-size {shapes}")


def test_integer_operands_match_torch() -> None:
    a, b = RNG.integers(-5, 5, (3, 4)), RNG.integers(-5, 5, (4, 2))
    x = RNG.integers(-5, 5, (2,))
    assert np.array_equal(tp.mm(tp.tensor(a), tp.tensor(b)).numpy(), torch.mm(torch.tensor(a), torch.tensor(b)).numpy())
    assert np.array_equal(tp.addmm(tp.tensor(x), tp.tensor(a), tp.tensor(b), beta=2, alpha=3).numpy(),
                          torch.addmm(torch.tensor(x), torch.tensor(a), torch.tensor(b), beta=2, alpha=3).numpy())
    m = RNG.integers(-3, 3, (3, 3))
    assert np.array_equal(tp.tensor(m).matrix_power(3).numpy(), torch.tensor(m).matrix_power(3).numpy())
    assert np.array_equal(tp.tensor(m).matrix_power(0).numpy(), torch.tensor(m).matrix_power(0).numpy())
    with pytest.raises(ArgumentError, match="alpha"):
        tp.addmm(tp.tensor(x), tp.tensor(a), tp.tensor(b), alpha=0.5)


def test_beta_zero_ignores_nan_input_and_gives_it_a_zero_gradient() -> None:
    x = np.full((3, 2), np.nan)
    a, b = _r(3, 4), _r(4, 2)
    _check(lambda x, a, b: tp.addmm(x, a, b, beta=0), lambda x, a, b: torch.addmm(x, a, b, beta=0), [x, a, b],
           "float64", "addmm beta=0")
    _check(lambda x, a, b: x.addr(a, b, beta=0, alpha=2), lambda x, a, b: x.addr(a, b, beta=0, alpha=2),
           [np.full((1,), np.nan), _r(3), _r(2)], "float64", "addr beta=0")
    m = _r(3, 3)
    m[0, 0] = np.nan
    _check(lambda m: m.matrix_power(0), lambda m: m.matrix_power(0), [m], "float64", "matrix_power(0) of NaN")


def test_errors_are_tensorplay_errors_naming_the_function() -> None:
    a3, a2, v = tp.tensor(_r(2, 3, 3)), tp.tensor(_r(3, 4)), tp.tensor(_r(4))
    with pytest.raises(ShapeError, match=r"mm: expected input to be 2-d"):
        tp.mm(a3, a2)
    with pytest.raises(ShapeError, match=r"mm: the inner sizes differ \(4 and 3\)"):
        tp.mm(a2, a2)
    with pytest.raises(DTypeError, match="mm: expected mat2 to have the dtype of input"):
        tp.mm(a2, tp.tensor(_r(4, 2, dtype="float32")))
    with pytest.raises(DTypeError, match="bool"):
        tp.mm(tp.tensor(np.ones((2, 2), bool)), tp.tensor(np.ones((2, 2), bool)))
    with pytest.raises(ShapeError, match="mv: expected vec to be 1-d"):
        tp.mv(a2, a2)
    with pytest.raises(ShapeError, match="addmm: input of shape \\[4\\] does not broadcast"):
        tp.addmm(tp.tensor(_r(4)), a2, tp.tensor(_r(4, 2)))
    with pytest.raises(ShapeError, match="baddbmm: the batch sizes differ"):
        tp.baddbmm(tp.tensor(_r(1)), a3, tp.tensor(_r(3, 3, 3)))
    with pytest.raises(ShapeError, match="inner: the last dims differ"):
        tp.inner(a2, tp.tensor(_r(3)))
    with pytest.raises(ShapeError, match="vdot: expected input to be 1-d"):
        tp.vdot(a2, v)
    with pytest.raises(ShapeError, match="chain_matmul: the inner sizes of matrices 0 and 1"):
        tp.chain_matmul(a2, a2)
    with pytest.raises(ArgumentError, match="chain_matmul: expected one or more"):
        tp.chain_matmul()
    with pytest.raises(ShapeError, match="matrix_power: expected a square matrix"):
        a2.matrix_power(2)
    with pytest.raises(ArgumentError, match="inverse"):
        a3.matrix_power(-1)
    with pytest.raises(TensorplayError, match="mm: mat2 must be a tensor"):
        tp.mm(a2, [[1.0]])  # type: ignore[arg-type]


def _model(x: Any, a: Any, v: Any) -> Any:
    m = tp.addmm(x, a, a.transpose(0, 1), beta=0.5) + tp.mm(a, a.transpose(0, 1)).matrix_power(2)
    return m.mv(v[:3]) + tp.inner(a, a).sum(1) + tp.chain_matmul(a, a.transpose(0, 1), a).sum(1) + tp.vdot(v, v)


def _model_torch(x: Any, a: Any, v: Any) -> Any:
    m = torch.addmm(x, a, a.T, beta=0.5) + torch.mm(a, a.T).matrix_power(2)
    return m.mv(v[:3]) + torch.inner(a, a).sum(1) + torch.chain_matmul(a, a.T, a).sum(1) + torch.vdot(v, v)


def test_compile_grad_and_vmap_match_eager_and_torch() -> None:
    x, a, v = _r(3, 3), _r(3, 4), _r(4)
    want = _model_torch(torch.tensor(x), torch.tensor(a), torch.tensor(v))
    compiled = tp.compile(_model)
    for _ in range(2):
        _close(compiled(tp.tensor(x), tp.tensor(a), tp.tensor(v)), want, "float64", "compiled")
    g = tp.func.grad(lambda x, a, v: _model(x, a, v).sum(), argnums=(0, 1, 2))(tp.tensor(x), tp.tensor(a), tp.tensor(v))
    rs = [torch.tensor(t, requires_grad=True) for t in (x, a, v)]
    _model_torch(*rs).sum().backward()
    for got, r in zip(g, rs):
        _close(got, r.grad, "float64", "tp.func.grad")

    def row(m: Any, u: Any) -> Any:
        return m.mv(u) + tp.addmv(u[:3], m, u, beta=2) + tp.inner(m, u) + m.mm(m.transpose(0, 1)).matrix_power(3)[0]

    ms, us = _r(5, 3, 4), _r(5, 4)
    got = tp.func.vmap(row)(tp.tensor(ms), tp.tensor(us))
    loop = np.stack([row(tp.tensor(m), tp.tensor(u)).numpy() for m, u in zip(ms, us)])
    np.testing.assert_allclose(got.numpy(), loop, rtol=1e-12, atol=1e-12)
    theirs = torch.stack([torch.tensor(m).mv(torch.tensor(u)) + torch.addmv(torch.tensor(u[:3]), torch.tensor(m),
                                                                             torch.tensor(u), beta=2)
                          + torch.inner(torch.tensor(m), torch.tensor(u))
                          + torch.tensor(m).mm(torch.tensor(m).T).matrix_power(3)[0] for m, u in zip(ms, us)])
    _close(got, theirs, "float64", "vmap against torch")
