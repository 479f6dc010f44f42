"""``tp.prod`` / ``Tensor.prod`` (the ``reduce_prod`` primitive) against PyTorch: values and gradients with
no, one, two and all zeros along an axis and over the whole tensor, float32 and float64, int and bool inputs
(int64 results), ``dtype=``, negative dims, ``keepdim``, empty tensors and zero-size dims (the product of
nothing is 1), NaN and infinities, non-contiguous inputs and a bad dim; then under ``vmap``, ``jvp``, grad
of grad (against ``torch.func``), ``tp.compile`` (against eager) and an ONNX round trip."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as TF
from tensorplay.errors import AxisError

TOL = {"float32": {"rtol": 1e-5, "atol": 1e-6}, "float64": {"rtol": 1e-12, "atol": 1e-13}}


def _values(pattern: str, dtype: str, shape: tuple[int, ...] = (3, 4)) -> np.ndarray[Any, Any]:
    """Values of ``shape`` in ``[0.5, 1.5]`` with random signs; zeros placed by ``pattern``: ``none``,
    ``one`` (one zero in row 0), ``two`` (two in row 1, one in row 0), ``all`` (every element)."""
    rng = np.random.default_rng(len(pattern))
    a = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    if pattern == "one":
        a[0, 1] = 0.0
    elif pattern == "two":
        a[0, 2] = 0.0
        a[1, 0] = a[1, 3] = 0.0
    elif pattern == "all":
        a[...] = 0.0
    return a.astype(dtype)


def _both(a: np.ndarray[Any, Any], fn: Any, weights: np.ndarray[Any, Any] | None = None) -> tuple[Any, ...]:
    """``fn`` of tensorplay's and PyTorch's tensor of ``a``, and both gradients of ``sum(weights * out)``."""
    x, tx = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = fn(x), fn(tx)
    w = np.ones(tuple(ty.shape), a.dtype) if weights is None else weights
    (y * tp.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    assert x.grad is not None and tx.grad is not None
    return y, ty, x.grad, tx.grad


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("pattern", ["none", "one", "two", "all"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, -2])
def test_values_and_gradients_match_pytorch(dtype: str, pattern: str, dim: int | None) -> None:
    a = _values(pattern, dtype)
    fn = (lambda t: t.prod()) if dim is None else (lambda t: t.prod(dim))
    y, ty, g, tg = _both(a, fn)
    assert tuple(y.shape) == tuple(ty.shape) and y.dtype.name == dtype
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), **TOL[dtype])
    np.testing.assert_allclose(g.numpy(), tg.numpy(), **TOL[dtype])
    assert np.isfinite(g.numpy()).all()  # no 0/0 anywhere


@pytest.mark.parametrize("keepdim", [False, True])
def test_keepdim_and_top_level_form(keepdim: bool) -> None:
    a = _values("one", "float64", (2, 3, 4))
    y, ty, g, tg = _both(a, lambda t: t.prod(-2, keepdim=keepdim),
                         np.random.default_rng(1).standard_normal((2, 1, 4) if keepdim else (2, 4)))
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tp.prod(tp.tensor(a), 1, keepdim).numpy(), torch.prod(torch.tensor(a), 1, keepdim))
    assert tp.prod(tp.tensor(a)).shape == ()


@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_int_and_bool_inputs_give_int64(dtype: str) -> None:
    a = np.array([[1, 2, 3], [-4, 0, 6]]).astype(dtype) if dtype != "bool" else np.array([[True, True], [True, False]])
    for args in [(), (0,), (1,), (-1,)]:
        got, want = tp.tensor(a).prod(*args), torch.tensor(a).prod(*args)
        assert got.dtype.name == "int64" and want.dtype == torch.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_dtype_converts_first() -> None:
    a = np.array([[1.5, 2.5], [3.0, -2.0]], np.float32)
    for dtype, tdtype in [("float64", torch.float64), ("int32", torch.int32), ("int64", torch.int64)]:
        got, want = tp.tensor(a).prod(1, dtype=dtype), torch.tensor(a).prod(1, dtype=tdtype)
        assert got.dtype.name == dtype
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    got = tp.prod(tp.tensor(np.array([2, 3], np.int64)), dtype=tp.float32)
    assert got.dtype.name == "float32" and got.item() == 6.0


@pytest.mark.parametrize("shape,dim", [((0,), None), ((0,), 0), ((2, 0), 1), ((2, 0), 0), ((0, 3), -2),
                                       ((3, 0, 2), None)])
def test_empty_products_are_one(shape: tuple[int, ...], dim: int | None) -> None:
    a = np.zeros(shape, np.float32)
    fn = (lambda t: t.prod()) if dim is None else (lambda t: t.prod(dim))
    y, ty, g, tg = _both(a, fn)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    assert tuple(g.shape) == shape and tuple(tg.shape) == shape
    assert tp.tensor(np.zeros(shape, np.int32)).prod().item() == 1


@pytest.mark.parametrize("special", [[np.nan, 2.0, 3.0, 1.0], [np.inf, 2.0, 3.0, 1.0], [-np.inf, 0.5, 2.0, 1.0],
                                     [np.inf, 0.0, 2.0, 1.0], [np.nan, 0.0, 1.0, 1.0], [0.0, np.inf, 1.0, 1.0],
                                     [np.inf, -np.inf, 0.0, 2.0]])
@pytest.mark.parametrize("dim", [1, None])
def test_nan_and_infinities_match_pytorch(special: list[float], dim: int | None) -> None:
    """Values, and which gradients are NaN (``0 * inf``), as PyTorch: with no zero the gradient is
    ``prod / x``; with one zero each other position's gradient is the product of the others."""
    a = np.array([special, [1.0, 2.0, 3.0, 4.0]], np.float64)
    y, ty, g, tg = _both(a, (lambda t: t.prod()) if dim is None else (lambda t: t.prod(dim)))
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    np.testing.assert_array_equal(np.isnan(g.numpy()), np.isnan(tg.numpy()))
    finite = ~np.isnan(tg.numpy())
    np.testing.assert_array_equal(g.numpy()[finite], tg.numpy()[finite])


def test_two_zeros_and_an_infinity_give_zero_gradients() -> None:
    """With two zeros or more in a group every gradient is 0 (PyTorch's value for a full reduction; along
    a dim PyTorch multiplies the other elements, giving NaN beside an infinity)."""
    a = np.array([[np.inf, 0.0, 0.0, 2.0]])
    x, tx = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    x.prod().backward()
    tx.prod().backward()
    assert x.grad is not None and tx.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    x.grad = None
    x.prod(1).sum().backward()
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 4)))


def test_non_contiguous_inputs() -> None:
    base = _values("one", "float64", (4, 3))
    a = base.T  # a transposed view: (3, 4), not C-contiguous
    assert not a.flags.c_contiguous
    for dim in (0, 1):
        np.testing.assert_allclose(tp.tensor(a).prod(dim).numpy(), torch.tensor(a).prod(dim).numpy(), rtol=1e-12)
    x = tp.tensor(base, requires_grad=True)
    tx = torch.tensor(base, requires_grad=True)
    x.transpose(0, 1).prod(1).sum().backward()
    tx.transpose(0, 1).prod(1).sum().backward()
    assert x.grad is not None and tx.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_a_bad_dim_names_the_axis_and_the_rank() -> None:
    with pytest.raises(AxisError, match=r"prod: axis 2 is out of range for a tensor of rank 2 \(expected -2 <= axis < 2\)"):
        tp.ones(2, 3).prod(2)
    with pytest.raises(AxisError, match="prod: axis -3 is out of range"):
        tp.ones(2, 3).prod(-3)
    with pytest.raises(AxisError, match="prod: duplicate axes"):
        tp.ones(2, 3).prod((0, -2))
    with pytest.raises(AxisError, match="prod: axis must be an int, got float 1.0"):
        tp.ones(2, 3).prod(1.0)  # type: ignore[call-overload]


def test_under_vmap_against_a_loop() -> None:
    a = tp.tensor(_values("two", "float64", (3, 4)))
    got = TF.vmap(lambda r: r.prod())(a)
    np.testing.assert_allclose(got.numpy(), [a[i].prod().item() for i in range(3)], rtol=1e-12)
    got = TF.vmap(lambda c: c.prod(-1, keepdim=True), in_dims=1)(a)
    np.testing.assert_allclose(got.numpy(), a.numpy().T.prod(1, keepdims=True), rtol=1e-12)
    grads = TF.vmap(TF.grad(lambda r: r.prod()))(a)
    want = torch.func.vmap(torch.func.grad(lambda r: r.prod()))(torch.tensor(a.numpy()))
    np.testing.assert_allclose(grads.numpy(), want.numpy(), rtol=1e-12)


@pytest.mark.parametrize("pattern", ["none", "one", "two", "all"])
def test_jvp_matches_torch_func(pattern: str) -> None:
    a = _values(pattern, "float64")
    t = np.random.default_rng(3).standard_normal(a.shape)
    for fn in (lambda x: x.prod(1), lambda x: x.prod(), lambda x: x.prod(0, keepdim=True)):
        out, tangent = TF.jvp(fn, (tp.tensor(a),), (tp.tensor(t),))
        tout, ttangent = torch.func.jvp(fn, (torch.tensor(a),), (torch.tensor(t),))
        np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-12)
        np.testing.assert_allclose(tangent.numpy(), ttangent.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("pattern", ["none", "one", "two", "all"])
def test_grad_of_grad_matches_torch_func_hessian(pattern: str) -> None:
    """The second derivative is exact at zeros too: at two zeros ``d2 prod / dx_i dx_k`` is the product of
    the rest, which a rule that only zeroes the first derivative would lose."""
    a = _values(pattern, "float64", (2, 4))[1] if pattern != "one" else _values(pattern, "float64", (2, 4))[0]
    h = TF.hessian(lambda x: x.prod())(tp.tensor(a))
    th = torch.func.hessian(lambda x: x.prod())(torch.tensor(a))
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-12, atol=1e-14)
    v = np.random.default_rng(4).standard_normal(a.shape)
    hv = TF.grad(lambda x: (TF.grad(lambda y: y.prod())(x) * tp.tensor(v)).sum())(tp.tensor(a))
    np.testing.assert_allclose(hv.numpy(), th.numpy() @ v, rtol=1e-12, atol=1e-14)
    x = tp.tensor(a, requires_grad=True)  # the eager tape, create_graph=True
    (g,) = tp.autograd.grad(x.prod(), x, create_graph=True)
    (g * tp.tensor(v)).sum().backward()
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), th.numpy() @ v, rtol=1e-12, atol=1e-14)


def test_grad_of_grad_along_an_axis_against_finite_differences() -> None:
    a = _values("two", "float64", (3, 4))
    w = np.random.default_rng(5).standard_normal((3,))

    def first(x: Any) -> Any:
        return (TF.grad(lambda y: (y.prod(1) * tp.tensor(w)).sum())(x) ** 2).sum()

    got = TF.grad(first)(tp.tensor(a)).numpy()
    eps, want = 1e-6, np.zeros_like(a)
    for idx in np.ndindex(*a.shape):
        up, down = a.copy(), a.copy()
        up[idx] += eps
        down[idx] -= eps
        want[idx] = (first(tp.tensor(up)).item() - first(tp.tensor(down)).item()) / (2 * eps)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_compile_matches_eager(dtype: str) -> None:
    a = tp.tensor(_values("one", dtype, (3, 4)))

    def f(x: Any) -> Any:
        return x.prod(1) + (x * 2.0).prod(0).sum() + x.prod(-1, keepdim=True).prod()

    np.testing.assert_allclose(tp.compile(f)(a).numpy(), f(a).numpy(), **TOL[dtype])
    grad_f = TF.grad(lambda x: f(x).sum())
    np.testing.assert_allclose(tp.compile(grad_f)(a).numpy(), grad_f(a).numpy(), **TOL[dtype])
    ints = tp.tensor(np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    np.testing.assert_array_equal(tp.compile(lambda x: x.prod(1))(ints).numpy(), [6, 120])
    np.testing.assert_array_equal(tp.compile(lambda x: x.prod(0))(tp.zeros(0, 3)).numpy(), [1.0, 1.0, 1.0])


@pytest.mark.parametrize("opset", [17, 18])
def test_onnx_round_trip(opset: int) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from tensorplay.export import Dim, export
    from tensorplay.export.onnx import from_onnx, to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_ort

    def f(x: Any, n: Any) -> tuple[Any, Any, Any]:
        return x.prod(1), x.prod(0, keepdim=True), n.prod(-1)

    a = _values("one", "float32", (3, 4))
    ints = np.array([[1, 2, 3], [4, -5, 6]], np.int64)
    ep = export(f, (tp.tensor(a), tp.tensor(ints)), dynamic_shapes=[{0: Dim("rows")}, None])
    model = to_onnx(ep, opset=opset)
    check_written(model)
    assert "ReduceProd" in {node.op_type for node in model.graph.node}
    bigger = np.concatenate([a, a[:2] * 0.5])
    for feeds in ([a, ints], [bigger, ints]):
        want = [t.numpy() for t in f(tp.tensor(feeds[0]), tp.tensor(feeds[1]))]
        got = run_ort(model, {i.name: v for i, v in zip(model.graph.input, feeds)})
        for g, w in zip(got, want):
            assert_matches(g, w, "ONNX Runtime")
        back = from_onnx(model).module()(*(tp.tensor(v) for v in feeds))
        for g, w in zip(back, want):
            assert_matches(g.numpy(), w, "imported")
