"""``tp.logsumexp`` / ``Tensor.logsumexp`` against ``torch.logsumexp``: values and gradients in float32 and
float64 over one dim, negative dims, tuples of dims and every dim, ``keepdim``, transposed views, values
near 1e4 (where ``log(sum(exp(x)))`` overflows), groups of ``-inf``, ``+inf`` and NaN (values and which
gradients are NaN), zero-size reduced axes (``-inf``), 0-d tensors, int and bool inputs (float32) and bad
dims; then ``tensorplay.func.grad``, grad of grad, ``jvp`` and ``vmap`` against ``torch.func``, ``tp.compile``
against eager and an ONNX export run in ONNX Runtime."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as TF
from tensorplay.errors import AxisError

Fn = Callable[[Any], Any]
TOL = {"float32": {"rtol": 2e-6, "atol": 2e-6}, "float64": {"rtol": 1e-12, "atol": 1e-13}}
INF, NAN = np.inf, np.nan

SPECIAL_ROWS = [[-INF, -INF, -INF, -INF], [1.0, INF, 2.0, -INF], [1e4, INF, -3.0, 0.5], [-INF, INF, -INF, -INF],
                [INF, INF, 1.0, 0.0], [1.0, NAN, 2.0, 3.0], [NAN, INF, -INF, 1.0], [-INF, 2.0, -INF, 1.0],
                [1e4, 1e4 - 1.0, 0.0, -INF], [0.5, -1.5, 2.0, 1.0]]
"""Rows with non-finite entries (and two finite ones), each row one reduced group."""


def _random(shape: tuple[int, ...], dtype: str, seed: int = 0, scale: float = 3.0) -> np.ndarray[Any, Any]:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def _run(a: np.ndarray[Any, Any], fn: Fn, seed: int = 1) -> tuple[np.ndarray[Any, Any], ...]:
    """``fn`` of tensorplay's and PyTorch's tensors of ``a`` and, when ``a`` is float, the gradients of
    ``sum(w * fn(x))`` for random weights ``w``: ``(ours, theirs, our grad, their grad)``."""
    x, tx = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    with np.errstate(all="ignore"):
        y, ty = fn(x), fn(tx)
        w = np.random.default_rng(seed).uniform(0.5, 1.5, tuple(ty.shape)).astype(a.dtype)
        (y * tp.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    assert x.grad is not None and tx.grad is not None
    return y.detach().numpy(), ty.detach().numpy(), x.grad.numpy(), tx.grad.numpy()


def _assert_same(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], dtype: str) -> None:
    """Same shape and dtype, NaN and infinities at the same places, finite values within ``TOL``."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got) * np.sign(got), np.isinf(want) * np.sign(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"])


def _assert_grad_like_torch64(a: np.ndarray[Any, Any], fn: Fn, g: np.ndarray[Any, Any]) -> None:
    """Our gradient ``g`` at ``a`` against PyTorch's at ``a`` cast to float64, to ``a``'s precision. In float32
    PyTorch's own gradient, ``exp(x - result)``, loses the low digits of ``x - result`` near 1e4 (off by
    ~5e-5 there); ``exp(x - max) / sum`` keeps them."""
    _, _, _, want = _run(a.astype(np.float64), fn)
    _assert_same(g.astype(np.float64), want, a.dtype.name)


DIMS: list[Any] = [0, 1, 2, -1, -2, (0, 2), (-1, 0), (2, 1, 0), [1, 2]]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("dim", DIMS, ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_values_and_gradients_match_torch(dtype: str, dim: Any, keepdim: bool) -> None:
    a = _random((3, 4, 5), dtype)
    torch_dim = tuple(dim) if isinstance(dim, list) else dim
    y, ty, g, tg = _run(a, lambda t: t.logsumexp(dim if isinstance(t, tp.Tensor) else torch_dim, keepdim))
    _assert_same(y, ty, dtype)
    _assert_same(g, tg, dtype)
    np.testing.assert_allclose(tp.logsumexp(tp.tensor(a), dim, keepdim).numpy(), y)  # the top-level form
    np.testing.assert_allclose(tp.logsumexp(tp.tensor(a), dim=dim, keepdim=keepdim).numpy(), y)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_large_values_do_not_overflow(dtype: str) -> None:
    a = _random((4, 6), dtype, 2, 1.0) + np.array([[1e4], [-1e4], [88.0], [700.0]], dtype)
    with np.errstate(over="ignore", divide="ignore"):
        naive = np.log(np.exp(a).sum(1))
    assert not np.isfinite(naive).all()  # the formula without the shift overflows (or underflows) here
    for dim in (1, -1, (0, 1)):
        y, ty, g, tg = _run(a, lambda t: t.logsumexp(dim))
        assert np.isfinite(y).all()
        _assert_same(y, ty, dtype)
        _assert_grad_like_torch64(a, lambda t: t.logsumexp(dim), g)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_infinities_and_nan_match_torch(dtype: str) -> None:
    """A group of ``-inf`` gives ``-inf``, a ``+inf`` gives ``+inf``, NaN propagates; the gradients, NaN
    included (``exp(x - result)``: ``-inf - -inf`` and ``inf - inf``), are PyTorch's."""
    a = np.array(SPECIAL_ROWS, dtype)
    for fn in (lambda t: t.logsumexp(1), lambda t: t.logsumexp(-1, keepdim=True),
               lambda t: t.transpose(0, 1).logsumexp(0)):
        y, ty, g, tg = _run(a, fn)
        _assert_same(y, ty, dtype)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(tg))
        _assert_grad_like_torch64(a, fn, g)
    some = np.array(SPECIAL_ROWS[7:], dtype)  # no NaN, some -inf: finite gradients
    y, ty, g, tg = _run(some, lambda t: t.logsumexp((0, 1)))
    _assert_same(y, ty, dtype)
    _assert_grad_like_torch64(some, lambda t: t.logsumexp((0, 1)), g)
    assert np.isfinite(g).all()


@pytest.mark.parametrize("shape,dim", [((2, 0), 1), ((2, 0), -1), ((0, 3), 1), ((0, 3), 0), ((3, 0, 2), (0, 1)),
                                       ((0,), 0), ((3, 0, 2), 2), ((2, 0), ())])
@pytest.mark.parametrize("keepdim", [False, True])
def test_zero_size_axes(shape: tuple[int, ...], dim: Any, keepdim: bool) -> None:
    """Over no elements the result is ``-inf`` (the log of an empty sum); the gradient is empty."""
    a = np.zeros(shape, np.float32)
    torch_dim = tuple(range(len(shape))) if dim == () else dim  # see test_an_empty_dim_reduces_every_axis
    y, ty, g, tg = _run(a, lambda t: t.logsumexp(dim if isinstance(t, tp.Tensor) else torch_dim, keepdim))
    _assert_same(y, ty, "float32")
    assert g.shape == tg.shape == shape


@pytest.mark.parametrize("value", [3.0, -2.5, INF, -INF, NAN])
@pytest.mark.parametrize("dim", [0, -1, (0,), (-1,), ()], ids=str)
@pytest.mark.parametrize("keepdim", [False, True])
def test_zero_dim_tensors(value: float, dim: Any, keepdim: bool) -> None:
    """A 0-d tensor is its own (0-d) result for the dim ``0`` or ``-1``; its gradient is 1, or NaN at an
    infinity (``exp(inf - inf)``), as PyTorch."""
    y, ty, g, tg = _run(np.array(value), lambda t: t.logsumexp(dim, keepdim=keepdim))
    assert y.shape == ty.shape == ()
    _assert_same(y, ty, "float64")
    _assert_same(g, tg, "float64")


@pytest.mark.parametrize("empty", [(), []], ids=["tuple", "list"])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 4)], ids=str)
def test_an_empty_dim_reduces_every_axis(empty: Any, shape: tuple[int, ...]) -> None:
    """``dim=()`` reduces every axis: PyTorch's result with ``keepdim=True`` (without it PyTorch 2.x raises
    "output with shape [] doesn't match the broadcast shape"; tensorplay gives that value 0-d)."""
    a = _random(shape, "float64", 3)
    y, ty, g, tg = _run(a, lambda t: t.logsumexp(empty if isinstance(t, tp.Tensor) else (), keepdim=True))
    assert y.shape == (1,) * len(shape)
    _assert_same(y, ty, "float64")
    _assert_same(g, tg, "float64")
    everything = tuple(range(len(shape)))
    y, ty, g, tg = _run(a, lambda t: t.logsumexp(empty if isinstance(t, tp.Tensor) else everything))
    assert y.shape == ()
    _assert_same(y, ty, "float64")
    _assert_same(g, tg, "float64")


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_int_and_bool_inputs_give_float32(dtype: str) -> None:
    a = np.array([[1, 2, 3], [-4, 0, 6]]).astype(dtype) if dtype != "bool" else np.array([[True, True], [True, False]])
    for dim in (0, 1, -1, (0, 1)):
        got, want = tp.tensor(a).logsumexp(dim), torch.logsumexp(torch.tensor(a), dim)
        assert got.dtype.name == "float32" and want.dtype == torch.float32
        _assert_same(got.numpy(), want.numpy(), "float32")
    assert tp.tensor(np.array(7, dtype)).logsumexp(0).dtype.name == "float32"


def test_non_contiguous_inputs() -> None:
    base = _random((5, 4), "float64", 4)
    a = base.T
    assert not a.flags.c_contiguous
    for dim in (0, 1, (0, 1)):
        _assert_same(tp.tensor(a).logsumexp(dim).numpy(), torch.tensor(a).logsumexp(dim).numpy(), "float64")
    y, ty, g, tg = _run(base, lambda t: t.transpose(0, 1)[:, ::2].logsumexp(1))
    _assert_same(y, ty, "float64")
    _assert_same(g, tg, "float64")


def test_bad_dims_are_axis_errors_naming_logsumexp() -> None:
    x = tp.ones(2, 3)
    with pytest.raises(AxisError, match=r"logsumexp: axis 2 is out of range for a tensor of rank 2 "
                                        r"\(expected -2 <= axis < 2\)"):
        x.logsumexp(2)
    with pytest.raises(AxisError, match="logsumexp: axis -3 is out of range"):
        tp.logsumexp(x, (0, -3))
    with pytest.raises(AxisError, match=r"logsumexp: duplicate axes \[0, -2\]"):
        x.logsumexp((0, -2))
    with pytest.raises(AxisError, match="logsumexp: axis must be an int, got float 1.0"):
        x.logsumexp(1.0)  # type: ignore[call-overload]
    with pytest.raises(AxisError, match="logsumexp: dim is required .* got None"):
        x.logsumexp(None)  # type: ignore[call-overload]
    with pytest.raises(AxisError, match="logsumexp: axis 1 is out of range for a 0-d tensor"):
        tp.tensor(2.0).logsumexp(1)


def test_func_grad_and_grad_of_grad_match_torch_func() -> None:
    a = _random((3, 4), "float64", 5)
    a[1, 2] = -INF  # a masked entry: its gradient is 0, its second derivatives too

    def f(x: Any) -> Any:
        return (x.logsumexp(1) * 1.5).sum() + x.logsumexp((0, 1))

    got = TF.grad(f)(tp.tensor(a)).numpy()
    want = torch.func.grad(f)(torch.tensor(a)).numpy()
    _assert_same(got, want, "float64")
    row = a[0]
    h = TF.hessian(lambda x: x.logsumexp(0))(tp.tensor(row)).numpy()
    th = torch.func.hessian(lambda x: x.logsumexp(0))(torch.tensor(row)).numpy()
    np.testing.assert_allclose(h, th, rtol=1e-12, atol=1e-14)
    v = _random((3, 4), "float64", 6)
    hv = TF.grad(lambda x: (TF.grad(f)(x) * tp.tensor(v)).sum())(tp.tensor(a)).numpy()
    thv = torch.func.grad(lambda x: (torch.func.grad(f)(x) * torch.tensor(v)).sum())(torch.tensor(a)).numpy()
    np.testing.assert_allclose(hv, thv, rtol=1e-12, atol=1e-14)
    x = tp.tensor(a, requires_grad=True)  # the eager tape, create_graph=True
    (g,) = tp.autograd.grad(f(x), x, create_graph=True)
    (g * tp.tensor(v)).sum().backward()
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), thv, rtol=1e-12, atol=1e-14)


def test_jvp_matches_torch_func() -> None:
    a = np.array(SPECIAL_ROWS, np.float64)
    t = _random(a.shape, "float64", 7)
    for fn in (lambda x: x.logsumexp(1), lambda x: x.logsumexp(-1, keepdim=True),
               lambda x: x[7:].logsumexp((0, 1)), lambda x: x[7:].logsumexp(0)):
        with np.errstate(all="ignore"):
            out, tangent = TF.jvp(fn, (tp.tensor(a),), (tp.tensor(t),))
        tout, ttangent = torch.func.jvp(fn, (torch.tensor(a),), (torch.tensor(t),))[:2]
        _assert_same(out.numpy(), tout.numpy(), "float64")
        _assert_same(tangent.numpy(), ttangent.numpy(), "float64")


def test_vmap_matches_a_loop_and_torch_func() -> None:
    a = _random((3, 4, 5), "float64", 8)
    got = TF.vmap(lambda r: r.logsumexp(0))(tp.tensor(a)).numpy()
    loop = np.stack([tp.tensor(a[i]).logsumexp(0).numpy() for i in range(3)])
    np.testing.assert_allclose(got, loop, rtol=1e-12)
    got = TF.vmap(lambda r: r.logsumexp((0, -1), keepdim=True), in_dims=1)(tp.tensor(a)).numpy()
    loop = np.stack([tp.tensor(a[:, j]).logsumexp((0, -1), keepdim=True).numpy() for j in range(4)])
    np.testing.assert_allclose(got, loop, rtol=1e-12)
    grads = TF.vmap(TF.grad(lambda r: r.logsumexp(1).sum()))(tp.tensor(a)).numpy()
    want = torch.func.vmap(torch.func.grad(lambda r: r.logsumexp(1).sum()))(torch.tensor(a)).numpy()
    np.testing.assert_allclose(grads, want, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compile_matches_eager(dtype: str) -> None:
    a = tp.tensor(np.concatenate([_random((3, 4), dtype, 9), np.array(SPECIAL_ROWS[:5], dtype)]))

    def f(x: Any) -> Any:
        return x.logsumexp(1) + tp.logsumexp(x * 2.0, (0, 1)) + x.logsumexp(-1, keepdim=True).logsumexp(0)

    with np.errstate(all="ignore"):
        _assert_same(tp.compile(f)(a).numpy(), f(a).numpy(), dtype)
        finite = a[:3]
        grad_f = TF.grad(lambda x: f(x).sum())
        _assert_same(tp.compile(grad_f)(finite).numpy(), grad_f(finite).numpy(), dtype)
        _assert_same(tp.compile(grad_f)(a).numpy(), grad_f(a).numpy(), dtype)
    ints = tp.tensor(np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    _assert_same(tp.compile(lambda x: x.logsumexp(1))(ints).numpy(), ints.logsumexp(1).numpy(), "float32")
    empty = tp.compile(lambda x: x.logsumexp(0))(tp.zeros(0, 3))
    np.testing.assert_array_equal(empty.numpy(), [-INF] * 3)


def test_compile_dynamic_with_an_empty_reduced_axis() -> None:
    """With a dynamic size on the reduced axis the program also runs at size 0 (the max is then taken over
    one ``-inf``): ``-inf``, as PyTorch."""
    compiled: Any = tp.compile(lambda x: x.logsumexp(0), dynamic=True)
    for rows in (3, 0, 1):
        a = _random((rows, 4), "float32", 10)
        _assert_same(compiled(tp.tensor(a)).numpy(), torch.tensor(a).logsumexp(0).numpy(), "float32")


@pytest.mark.parametrize("opset", [17, 18])
def test_onnx_round_trip(opset: int) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from tensorplay.export import Dim, export
    from tensorplay.export.onnx import from_onnx, to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_ort

    def f(x: Any, n: Any) -> tuple[Any, Any, Any, Any]:
        return x.logsumexp(1), x.logsumexp((0, 1), keepdim=True), tp.logsumexp(x, -2), n.logsumexp(-1)

    a = np.array(SPECIAL_ROWS[:5] + SPECIAL_ROWS[7:], np.float32)
    ints = np.array([[1, 2, 3], [4, -5, 6]], np.int64)
    ep = export(f, (tp.tensor(a), tp.tensor(ints)), dynamic_shapes=[{0: Dim("rows")}, None])
    model = to_onnx(ep, opset=opset)
    check_written(model)
    assert {"ReduceMax", "ReduceSum", "Exp", "Log"} <= {node.op_type for node in model.graph.node}
    runs: list[list[np.ndarray[Any, Any]]] = [[a, ints], [a[5:], ints], [a[:0], ints],
                                              [np.concatenate([a, a * 0.5]), ints]]
    for feeds in runs:
        want = [t.numpy() for t in f(tp.tensor(feeds[0]), tp.tensor(feeds[1]))]
        theirs = [torch.logsumexp(torch.tensor(feeds[0]), 1), torch.logsumexp(torch.tensor(feeds[0]), (0, 1), True),
                  torch.logsumexp(torch.tensor(feeds[0]), -2), torch.logsumexp(torch.tensor(feeds[1]), -1)]
        for w, t in zip(want, theirs):
            _assert_same(w, t.numpy(), "float32")
        got = run_ort(model, {i.name: v for i, v in zip(model.graph.input, feeds)})
        for g, w in zip(got, want):
            assert_matches(g, w, "ONNX Runtime")
        back = from_onnx(model).module()(*(tp.tensor(v) for v in feeds))
        for g, w in zip(back, want):
            assert_matches(g.numpy(), w, "imported")
