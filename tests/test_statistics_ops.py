"""Statistics of :mod:`tensorplay.statistics_ops` (``var_mean``, ``std_mean``, ``aminmax``, ``kthvalue``, ``mode``,
``msort``, ``logcumsumexp``, ``cov``, ``corrcoef``, ``nanmedian``, ``nanquantile``, ``cumulative_trapezoid``) against
PyTorch: values and gradients in float32/float64 (ints where torch takes them), NaN and infinities, strided and
zero-size inputs, argument errors, and under ``tp.compile``, ``tp.func.grad`` and ``tp.func.vmap``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tests.torch_cases import as_numpy as _np, assert_close
from tensorplay.errors import ArgumentError, DTypeError, IndexRangeError, ShapeError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning", "ignore::UserWarning")

DTYPES = ["float32", "float64"]
TOL: dict[str, dict[str, float]] = {"float32": {"rtol": 3e-5, "atol": 3e-5}, "float64": {"rtol": 1e-11, "atol": 1e-11}}
RNG = np.random.default_rng(5)
NAN, INF = float("nan"), float("inf")


def _close(got: Any, want: Any, dtype: str, what: str) -> None:
    assert_close(got, want, TOL.get(dtype, {"rtol": 0.0, "atol": 0.0}), what)


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def _check(ours: Callable[..., Any], theirs: Callable[..., Any], arrays: list[Any], dtype: str, what: str,
           grad: bool = True) -> None:
    """Every output's values, and the gradients of a weighted sum of the float outputs, against torch."""
    ts = [tp.tensor(a, dtype=a.dtype.name, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    rs = [torch.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
    outs, wants = _outputs(ours(*ts)), _outputs(theirs(*rs))
    assert len(outs) == len(wants), what
    loss, want_loss = None, None
    for i, (o, w) in enumerate(zip(outs, wants)):
        _close(o, w, dtype if w.dtype.is_floating_point else "int", f"{what} output {i}")
        if grad and w.dtype.is_floating_point and w.requires_grad:
            weights = RNG.standard_normal(tuple(w.shape)).astype(dtype)
            term, want_term = (o * tp.tensor(weights)).sum(), (w * torch.tensor(weights)).sum()
            loss = term if loss is None else loss + term
            want_loss = want_term if want_loss is None else want_loss + want_term
    if loss is not None and want_loss is not None:
        loss.backward()
        want_loss.backward()
        for i, (t, r) in enumerate(zip(ts, rs)):
            if r.grad is not None:
                _close(t.grad, r.grad, dtype, f"{what} d/dinput{i}")


def _r(*shape: int, dtype: str = "float64") -> Any:
    return np.asarray(RNG.standard_normal(shape), dtype=dtype)


def _distinct(*shape: int, dtype: str = "float64") -> Any:
    """Values without ties (the index of a tied order statistic is unspecified in PyTorch)."""
    return np.asarray(RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.5 - 3, dtype=dtype)


CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[[str], list[Any]]]] = {
    "var_mean": (lambda x: tp.var_mean(x, 1), lambda x: torch.var_mean(x, 1), lambda d: [_r(3, 4, dtype=d)]),
    "var_mean all": (lambda x: tp.var_mean(x, correction=0), lambda x: torch.var_mean(x, correction=0),
                     lambda d: [_r(3, 4, dtype=d)]),
    "var_mean unbiased": (lambda x: tp.var_mean(x, (0, 2), False, True), lambda x: torch.var_mean(x, (0, 2), False, True),
                          lambda d: [_r(2, 3, 4, dtype=d)]),
    "std_mean": (lambda x: tp.std_mean(x, -1, keepdim=True, correction=2),
                 lambda x: torch.std_mean(x, -1, keepdim=True, correction=2), lambda d: [_r(3, 5, dtype=d)]),
    "std_mean bool": (lambda x: tp.std_mean(x, False), lambda x: torch.std_mean(x, False), lambda d: [_r(4, dtype=d)]),
    "aminmax": (lambda x: x.aminmax(dim=1), lambda x: x.aminmax(dim=1), lambda d: [_distinct(3, 4, dtype=d)]),
    "aminmax all keepdim": (lambda x: tp.aminmax(x, keepdim=True), lambda x: torch.aminmax(x, keepdim=True),
                            lambda d: [_distinct(2, 3, dtype=d)]),
    "aminmax ties": (lambda x: tp.aminmax(x, dim=0), lambda x: torch.aminmax(x, dim=0),
                     lambda d: [np.array([[1.0, 2.0], [1.0, 0.5], [3.0, 2.0]], d)]),
    "kthvalue": (lambda x: x.kthvalue(2, 1), lambda x: x.kthvalue(2, 1), lambda d: [_distinct(3, 5, dtype=d)]),
    "kthvalue keepdim": (lambda x: tp.kthvalue(x, 3, 0, True), lambda x: torch.kthvalue(x, 3, 0, True),
                         lambda d: [_distinct(4, 2, dtype=d)]),
    "kthvalue nan": (lambda x: tp.kthvalue(x, 3), lambda x: torch.kthvalue(x, 3),
                     lambda d: [np.array([[NAN, 1.0, 3.0], [2.0, -1.0, 0.0]], d)]),
    "mode": (lambda x: x.mode(1), lambda x: x.mode(1),
             lambda d: [np.array([[3, 1, 3, 1, 2], [4, 4, 0, 0, 0], [5, 6, 7, 8, 9]], d)]),
    "mode keepdim dim0": (lambda x: tp.mode(x, 0, True), lambda x: torch.mode(x, 0, True),
                          lambda d: [np.array([[1, 2], [1, 3], [2, 3], [2, 2]], d)]),
    "msort": (tp.msort, torch.msort, lambda d: [_distinct(4, 3, dtype=d)]),
    "logcumsumexp": (lambda x: x.logcumsumexp(1), lambda x: x.logcumsumexp(1), lambda d: [_r(3, 7, dtype=d) * 30]),
    "logcumsumexp dim0": (lambda x: tp.logcumsumexp(x, 0), lambda x: torch.logcumsumexp(x, 0),
                          lambda d: [np.array([[-1000.0, 0.0], [0.0, 1000.0], [-5.0, -1000.0]], d)]),
    "logcumsumexp -inf": (lambda x: tp.logcumsumexp(x, 0), lambda x: torch.logcumsumexp(x, 0),
                          lambda d: [np.array([1.0, -INF, 2.0, -INF], d)]),
    "cov": (tp.cov, torch.cov, lambda d: [_r(3, 6, dtype=d)]),
    "cov 1-d": (lambda x: x.cov(correction=0), lambda x: x.cov(correction=0), lambda d: [_r(5, dtype=d)]),
    "cov fweights": (lambda x, f: tp.cov(x, fweights=f), lambda x, f: torch.cov(x, fweights=f),
                     lambda d: [_r(2, 4, dtype=d), np.array([1, 3, 0, 2])]),
    "cov aweights": (lambda x, a: tp.cov(x, aweights=a, correction=2), lambda x, a: torch.cov(x, aweights=a, correction=2),
                     lambda d: [_r(2, 5, dtype=d), np.abs(_r(5, dtype=d)) + 0.1]),
    "cov both": (lambda x, f, a: x.cov(fweights=f, aweights=a), lambda x, f, a: x.cov(fweights=f, aweights=a),
                 lambda d: [_r(3, 4, dtype=d), np.array([2, 1, 1, 3]), np.abs(_r(4, dtype=d)) + 0.1]),
    "corrcoef": (tp.corrcoef, torch.corrcoef, lambda d: [_r(3, 6, dtype=d)]),
    "corrcoef 1-d": (lambda x: x.corrcoef(), lambda x: x.corrcoef(), lambda d: [_r(6, dtype=d)]),
    "nanmedian": (tp.nanmedian, torch.nanmedian, lambda d: [np.array([[NAN, 1.0, 3.0], [2.0, NAN, 0.5]], d)]),
    "nanmedian dim": (lambda x: x.nanmedian(1), lambda x: x.nanmedian(1),
                      lambda d: [np.array([[NAN, 1.0, 3.0, -2.0], [2.0, NAN, NAN, NAN], [NAN, 7.0, NAN, -1.0]], d)]),
    "nanmedian keepdim": (lambda x: tp.nanmedian(x, 0, True), lambda x: torch.nanmedian(x, 0, True),
                          lambda d: [_distinct(5, 3, dtype=d)]),
    "nanquantile": (lambda x: x.nanquantile(0.3, 1), lambda x: x.nanquantile(0.3, 1),
                    lambda d: [np.array([[NAN, 1.0, 3.0, -2.0], [2.0, NAN, NAN, 5.0], [NAN] * 4], d)]),
    "nanquantile q tensor": (lambda x, q: tp.nanquantile(x, q, 0, True, interpolation="midpoint"),
                             lambda x, q: torch.nanquantile(x, q, 0, True, interpolation="midpoint"),
                             lambda d: [np.array([[NAN, 1.0], [3.0, -2.0], [2.0, NAN]], d), np.array([0.1, 0.5, 1.0], d)]),
    "cumulative_trapezoid": (tp.cumulative_trapezoid, torch.cumulative_trapezoid, lambda d: [_r(3, 5, dtype=d)]),
    "cumulative_trapezoid dx": (lambda y: tp.cumulative_trapezoid(y, dx=0.5, dim=0),
                                lambda y: torch.cumulative_trapezoid(y, dx=0.5, dim=0), lambda d: [_r(4, 2, dtype=d)]),
    "cumulative_trapezoid x": (lambda y, x: tp.cumulative_trapezoid(y, x), lambda y, x: torch.cumulative_trapezoid(y, x),
                               lambda d: [_r(2, 5, dtype=d), np.cumsum(np.abs(_r(5, dtype=d)))]),
    "cumulative_trapezoid x nd": (lambda y, x: tp.cumulative_trapezoid(y, x, dim=0),
                                  lambda y, x: torch.cumulative_trapezoid(y, x, dim=0),
                                  lambda d: [_r(4, 3, dtype=d), _r(4, 3, dtype=d)]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_match_torch(name: str, dtype: str) -> None:
    ours, theirs, make = CASES[name]
    _check(ours, theirs, make(dtype), dtype, name)


def test_nanmedian_of_an_all_nan_row_is_nan() -> None:
    """torch's index for an all-NaN row is that of some NaN (2 of 4 here, 0 of 2): ours is the first NaN's."""
    values, indices = tp.tensor(np.array([[NAN] * 4, [1.0, NAN, NAN, NAN]])).nanmedian(1)
    assert np.isnan(values.numpy()[0]) and values.numpy()[1] == 1.0 and indices.numpy().tolist() == [0, 0]


def test_logcumsumexp_with_inf_matches_torch_values() -> None:
    x = np.array([0.0, -INF, 1.0, INF, 2.0])
    got = tp.logcumsumexp(tp.tensor(x), 0)
    np.testing.assert_array_equal(got.numpy(), torch.logcumsumexp(torch.tensor(x), 0).numpy())


def test_integer_inputs_and_strided_views_match_torch() -> None:
    ints = RNG.integers(-4, 4, (3, 6))
    for ours, theirs in ((lambda x: x.kthvalue(2, 1)[0], lambda x: x.kthvalue(2, 1)[0]),
                         (lambda x: x.mode(1), lambda x: x.mode(1)), (tp.msort, torch.msort),
                         (tp.cov, torch.cov), (tp.corrcoef, torch.corrcoef), (lambda x: x.nanmedian(), torch.nanmedian),
                         (lambda x: tp.aminmax(x, dim=0), lambda x: torch.aminmax(x, dim=0)),
                         (tp.cumulative_trapezoid, torch.cumulative_trapezoid)):
        for o, w in zip(_outputs(ours(tp.tensor(ints))), _outputs(theirs(torch.tensor(ints)))):
            _close(o, w, "float32", "integer input")
    base = _distinct(6, 8)
    _check(lambda x: x[::2, 1::3].kthvalue(2, 0), lambda x: x[::2, 1::3].kthvalue(2, 0), [base], "float64", "strided")
    _check(lambda x: tp.cov(x.transpose(0, 1)[:, ::2]), lambda x: torch.cov(x.T[:, ::2]), [base], "float64",
           "strided cov")
    _check(lambda x: x.transpose(0, 1).logcumsumexp(0), lambda x: x.T.logcumsumexp(0), [base], "float64",
           "strided logcumsumexp")


def test_zero_size_inputs_match_torch() -> None:
    empty = np.zeros((0, 3))
    for ours, theirs in ((lambda x: x.logcumsumexp(0), lambda x: x.logcumsumexp(0)),
                         (lambda x: x.kthvalue(1, 1), lambda x: x.kthvalue(1, 1)),
                         (lambda x: x.mode(1), lambda x: x.mode(1)), (tp.msort, torch.msort),
                         (lambda x: tp.cumulative_trapezoid(x, dim=1), lambda x: torch.cumulative_trapezoid(x, dim=1)),
                         (lambda x: tp.var_mean(x, 1), lambda x: torch.var_mean(x, 1))):
        for o, w in zip(_outputs(ours(tp.tensor(empty))), _outputs(theirs(torch.tensor(empty)))):
            _close(o, w, "float64", "zero-size")
    _close(tp.cumulative_trapezoid(tp.tensor(np.zeros((2, 0)))), torch.cumulative_trapezoid(torch.zeros(2, 0,
           dtype=torch.float64)), "float64", "empty dim")


def test_errors_are_tensorplay_errors_naming_the_function() -> None:
    x = tp.tensor(_r(3, 4))
    with pytest.raises(IndexRangeError, match=r"kthvalue: k must be in \[1, 4\]"):
        x.kthvalue(5)
    with pytest.raises(ShapeError, match="mode: cannot reduce an empty dim"):
        tp.tensor(np.zeros((2, 0))).mode(1)
    with pytest.raises(ShapeError, match="aminmax: cannot reduce an empty dim"):
        tp.tensor(np.zeros((2, 0))).aminmax()
    with pytest.raises(DTypeError, match="logcumsumexp: expected a float tensor"):
        tp.tensor(np.arange(3)).logcumsumexp(0)
    with pytest.raises(DTypeError, match="var_mean: expected a float tensor"):
        tp.var_mean(tp.tensor(np.arange(3)))
    with pytest.raises(ArgumentError, match="var_mean: give either unbiased or correction"):
        tp.var_mean(x, 1, True, correction=0)
    with pytest.raises(ShapeError, match="cov: expected a tensor of at most 2 dims"):
        tp.cov(tp.tensor(_r(2, 2, 2)))
    with pytest.raises(ArgumentError, match="cov: fweights cannot be negative"):
        tp.cov(x, fweights=tp.tensor(np.array([1, -1, 1, 1])))
    with pytest.raises(DTypeError, match="cov: fweights must be an integer tensor"):
        tp.cov(x, fweights=tp.tensor(_r(4)))
    with pytest.raises(ShapeError, match="cov: aweights must be 0-d or 1-d with one entry per observation"):
        tp.cov(x, aweights=tp.tensor(_r(3)))
    with pytest.raises(ArgumentError, match="nanquantile: q must be in"):
        x.nanquantile(1.5)
    with pytest.raises(ArgumentError, match="cumulative_trapezoid: give either x or dx"):
        tp.cumulative_trapezoid(x, tp.tensor(_r(4)), dx=0.5)
    with pytest.raises(ShapeError, match="cumulative_trapezoid: a 1-d x must have"):
        tp.cumulative_trapezoid(x, tp.tensor(_r(3)))


def _model(x: Any) -> Any:
    v, m = tp.var_mean(x, 1)
    s, _ = tp.std_mean(x, 0)
    lo, hi = x.aminmax(dim=1)
    out = v + m + lo * hi + x.logcumsumexp(1)[:, -1] + x.kthvalue(2, 1)[0] + x.mode(1)[0] + tp.cov(x).sum(1)
    return (out + tp.corrcoef(x).sum(0) + x.nanmedian(1)[0] + x.nanquantile(0.4, 1)
            + tp.cumulative_trapezoid(x, dim=1).sum(1) + tp.msort(x.transpose(0, 1))[0][:3] + s[:3])


def _model_torch(x: Any) -> Any:
    v, m = torch.var_mean(x, 1)
    s, _ = torch.std_mean(x, 0)
    lo, hi = x.aminmax(dim=1)
    out = v + m + lo * hi + x.logcumsumexp(1)[:, -1] + x.kthvalue(2, 1)[0] + x.mode(1)[0] + torch.cov(x).sum(1)
    return (out + torch.corrcoef(x).sum(0) + x.nanmedian(1)[0] + x.nanquantile(0.4, 1)
            + torch.cumulative_trapezoid(x, dim=1).sum(1) + torch.msort(x.T)[0][:3] + s[:3])


def test_compile_grad_and_vmap_match_eager_and_torch() -> None:
    x = _distinct(3, 5)
    want = _model_torch(torch.tensor(x))
    compiled = tp.compile(_model)
    for _ in range(2):
        _close(compiled(tp.tensor(x)), want, "float64", "compiled")
    g = tp.func.grad(lambda x: _model(x).sum())(tp.tensor(x))
    r = torch.tensor(x, requires_grad=True)
    _model_torch(r).sum().backward()
    _close(g, r.grad, "float64", "tp.func.grad")

    def row(u: Any) -> Any:
        v, m = tp.var_mean(u)
        lo, hi = u.aminmax()
        return (v + m + lo + hi + u.logcumsumexp(0) + u.kthvalue(3)[0] + u.mode()[0] + u.nanmedian()
                + u.nanquantile(0.7) + tp.cumulative_trapezoid(u).sum() + tp.cov(u))

    us = _distinct(4, 6)
    got = tp.func.vmap(row)(tp.tensor(us))
    loop = np.stack([row(tp.tensor(u)).numpy() for u in us])
    np.testing.assert_allclose(got.numpy(), loop, rtol=1e-12, atol=1e-12)
