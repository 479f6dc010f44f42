"""vjp rules: every primitive's tape gradient against float64 central finite differences,
second derivatives (``create_graph=True``) against finite differences of the first derivative,
the documented gradient conventions, and gradient parity with PyTorch."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tests.helpers import as_float64, batch_dims_like, is_float_array, placed, torch_smooth_max_pool
from tests.samples import GRAD_SAMPLES, SAMPLES, Sample, non_contiguous, rand
from tensorplay.ops import PRIMITIVE_NAMES
from tensorplay.spec.table import names
from tensorplay.rules.vjp import VJP_RULES
from tensorplay.testing import assert_close, numerical_vjp

torch = pytest.importorskip("torch")
F = torch.nn.functional
ops = tp.eager

Array = np.ndarray[Any, Any]


# ---- finite-difference machinery ------------------------------------------------------------------

def _to_tensor(value: Any, requires_grad: bool) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    t = tp.from_numpy(value)  # keeps the strides: non-contiguous inputs stay non-contiguous
    if requires_grad:
        t.requires_grad_(True)
    return t


def check_vjp(fn: Callable[..., Any], args: Sequence[Any], wrt: Sequence[int] | None = None, *,
              eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7, seed: int = 0) -> None:
    """The tape gradient (``tp.autograd.grad`` with a random cotangent) equals float64 central differences
    of ``<fn(args), ct>``, entry by entry (``tensorplay.testing.numerical_vjp``)."""
    if wrt is None:
        wrt = [i for i, a in enumerate(args) if is_float_array(a)]
    tensors = [_to_tensor(a, i in wrt) for i, a in enumerate(args)]
    out = fn(*tensors)
    ct = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    grads = tp.autograd.grad(out, [tensors[i] for i in wrt], grad_outputs=tp.tensor(ct, dtype=out.dtype))
    expected = numerical_vjp(fn, tuple(args), ct, eps=eps, argnums=list(wrt))
    for i, g in zip(wrt, grads):
        assert g is not None
        assert tuple(g.shape) == tuple(args[i].shape)
        assert g.dtype.name == args[i].dtype.name
        assert_close(g, expected[i], rtol=rtol, atol=atol, check_dtype=False, msg=f"gradient of input {i}")


def check_second_order(fn: Callable[..., Any], args: Sequence[Any], wrt: Sequence[int] | None = None, *,
                       eps: float = 1e-5, rtol: float = 1e-5, atol: float = 1e-6, seed: int = 1) -> None:
    """``d/dx <d<fn, ct>/dx, v>`` from double backward equals finite differences of the first derivative."""
    if wrt is None:
        wrt = [i for i, a in enumerate(args) if is_float_array(a)]
    rng = np.random.default_rng(seed)
    tensors = [_to_tensor(a, i in wrt) for i, a in enumerate(args)]
    out = fn(*tensors)
    ct = rng.standard_normal(tuple(out.shape))
    vs = [rng.standard_normal(args[i].shape) for i in wrt]

    def first(*arrays: Any) -> list[Array]:
        ts = [_to_tensor(a, i in wrt) for i, a in enumerate(arrays)]
        o = fn(*ts)
        gs = tp.autograd.grad(o, [ts[i] for i in wrt], grad_outputs=tp.tensor(ct, dtype=o.dtype))
        return [g.detach().numpy() for g in gs]

    def first_along_vs(*inputs: Any) -> float:
        """``<d<fn, ct>/dx, v>`` at ``inputs`` (the finite differences pass tensors: back to arrays)."""
        arrays = [x.numpy() if isinstance(x, tp.Tensor) else x for x in inputs]
        return sum(float(np.sum(g * v)) for g, v in zip(first(*arrays), vs))

    grads = tp.autograd.grad(out, [tensors[i] for i in wrt], grad_outputs=tp.tensor(ct, dtype=out.dtype),
                             create_graph=True)
    inner = None
    for g, v in zip(grads, vs):
        if not g.requires_grad:
            continue  # a first derivative that does not depend on the inputs (e.g. d/d beta of layer_norm)
        term = (g * tp.tensor(v)).sum()
        inner = term if inner is None else inner + term
    if inner is None:
        second: Sequence[Any] = [None] * len(wrt)
    else:
        second = tp.autograd.grad(inner, [tensors[i] for i in wrt], allow_unused=True)
    expected = numerical_vjp(first_along_vs, tuple(args), 1.0, eps=eps, argnums=list(wrt))
    for j, i in enumerate(wrt):
        got = np.zeros(expected[i].shape) if second[j] is None else second[j].detach().numpy()
        assert_close(got, expected[i], rtol=rtol, atol=atol, check_dtype=False, msg=f"second derivative, input {i}")


def prim(name: str, **params: Any) -> Callable[..., Any]:
    """``ops.<name>(*inputs, **params)`` as a function of the inputs."""
    method = getattr(ops, name)
    return lambda *xs: method(*xs, **params)


# ---- completeness -----------------------------------------------------------------------------------

def test_every_primitive_has_a_vjp_rule() -> None:
    missing = [name for name in PRIMITIVE_NAMES if name not in VJP_RULES]
    assert not missing, f"primitives without a vjp rule: {missing}"
    assert len(PRIMITIVE_NAMES) >= 71


def test_every_primitive_with_float_inputs_has_a_gradient_sample() -> None:
    covered = {s.prim for s in SAMPLES if s.differentiable and any(is_float_array(a) for a in s.args)}
    covered |= {"max_pool_backward_nd", "max_pool_select_nd"}  # linear in g: tested below
    covered |= {"abs", "relu"}  # kinked: tested away from 0 against PyTorch, and at 0 by convention tests
    no_derivative = set(names(has_derivative=False))
    assert set(PRIMITIVE_NAMES) - no_derivative <= covered, sorted(set(PRIMITIVE_NAMES) - no_derivative - covered)


# ---- every sample of the registry: first derivatives ----------------------------------------------

@pytest.mark.parametrize("sample", GRAD_SAMPLES, ids=[s.id for s in GRAD_SAMPLES])
def test_vjp_matches_finite_differences(sample: Sample) -> None:
    args = [as_float64(a) for a in sample.args]
    if sample.params.get("dtype") == "float32":  # a float32 result: finite differences need a larger step
        check_vjp(prim(sample.prim, **sample.params), args, eps=1e-3, rtol=1e-3, atol=1e-4)
    else:
        check_vjp(prim(sample.prim, **sample.params), args)


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.args and any(is_float_array(a) for a in s.args)
                                    and s.prim not in ("argmax", "argmin")],
                         ids=lambda s: s.id)
def test_cotangents_have_input_shapes_and_dtypes(sample: Sample) -> None:
    """Also at non-smooth points and for mixed dtypes: one cotangent per input, of the input's shape and dtype."""
    inputs = [_to_tensor(a, is_float_array(a)) for a in sample.args]
    with np.errstate(all="ignore"):
        out = prim(sample.prim, **sample.params)(*inputs)
    if not out.requires_grad:
        assert out.dtype.name not in ("float32", "float64") or sample.prim == "stop_gradient"
        return
    g = tp.ones(*out.shape, dtype=out.dtype)
    cts = VJP_RULES[sample.prim](ops, g, tuple(inputs), out, **sample.params)
    assert len(cts) == len(inputs)
    for x, ct in zip(inputs, cts):
        if isinstance(x, tp.Tensor) and x.dtype.name.startswith("float") and ct is not None:
            assert tuple(ct.shape) == tuple(x.shape)
            assert ct.dtype == x.dtype
        elif not (isinstance(x, tp.Tensor) and x.dtype.name.startswith("float")):
            assert ct is None


# ---- broadcasting, scalars, layouts --------------------------------------------------------------

@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((1,), (2, 3)), ((), (2, 2)),
                                    ((2, 1, 3), (4, 1))])
def test_binary_broadcasting(name: str, shapes: tuple[tuple[int, ...], tuple[int, ...]]) -> None:
    x = rand(shapes[0], "float64", 1, 0.5, 2.0)
    y = rand(shapes[1], "float64", 2, 0.5, 2.0) + 0.01  # ties impossible for maximum/minimum
    check_vjp(prim(name), [x, y])


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum"])
def test_binary_with_python_scalars(name: str) -> None:
    x = rand((2, 3), "float64", 3, 0.5, 2.0)
    check_vjp(lambda t: getattr(ops, name)(t, 1.25), [x])
    check_vjp(lambda t: getattr(ops, name)(1.25, t), [x])
    check_vjp(lambda t: getattr(ops, name)(t, 3), [x])


def test_mixed_float32_float64_cotangents_keep_input_dtypes() -> None:
    a = tp.tensor(rand((2, 3), "float32", 1), requires_grad=True)
    b = tp.tensor(rand((3,), "float64", 2), requires_grad=True)
    out = a * b
    assert out.dtype == tp.float64
    ga, gb = tp.autograd.grad(out.sum(), [a, b])
    assert ga.dtype == tp.float32 and gb.dtype == tp.float64
    np.testing.assert_allclose(ga.numpy(), np.broadcast_to(b.detach().numpy(), (2, 3)), rtol=1e-6)
    np.testing.assert_allclose(gb.numpy(), a.detach().numpy().astype(np.float64).sum(0), rtol=1e-6)


def test_int_tensor_with_float_operand_gets_no_cotangent() -> None:
    i = tp.tensor([1, 2, 3])
    x = tp.tensor([0.5, 1.0, 1.5], requires_grad=True)
    out = (i * x).sum()
    (gx,) = tp.autograd.grad(out, [x])
    np.testing.assert_allclose(gx.numpy(), [1.0, 2.0, 3.0])
    cts = VJP_RULES["mul"](ops, tp.ones(3), (i, x), i * x)
    assert cts[0] is None


@pytest.mark.parametrize("name", ["exp", "tanh", "sigmoid", "sin", "log", "sqrt", "rsqrt", "gelu", "erf"])
def test_unary_non_contiguous(name: str) -> None:
    x = non_contiguous(rand((4, 3), "float64", 5, 0.3, 2.0))
    assert not x.flags.c_contiguous
    check_vjp(prim(name), [x])


def test_matmul_batch_broadcast_and_strided() -> None:
    check_vjp(prim("matmul"), [rand((3, 1, 2, 4), "float64", 1), rand((5, 4, 3), "float64", 2)])
    check_vjp(prim("matmul"), [rand((2, 4), "float64", 1), rand((3, 4, 2), "float64", 2)])
    a, b = non_contiguous(rand((2, 3, 4), "float64", 1)), non_contiguous(rand((2, 4, 2), "float64", 2))
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    check_vjp(prim("matmul"), [a, b])


def test_vector_matmul_through_derived_op() -> None:
    check_vjp(lambda a, b: a @ b, [rand((4,), "float64", 1), rand((4, 3), "float64", 2)])
    check_vjp(lambda a, b: a @ b, [rand((2, 4), "float64", 1), rand((4,), "float64", 2)])


# ---- structure ----------------------------------------------------------------------------------

@pytest.mark.parametrize("starts,stops,steps", [
    ((1, 0, 0), (3, 4, 5), (1, 1, 1)),
    ((0, 1, 4), (3, 4, -1), (2, 2, -1)),
    ((2, 3, 0), (-1, 0, 5), (-1, -2, 3)),
    ((0, 0, 1), (3, 4, 4), (1, 3, 1)),
])
def test_slice_steps(starts: tuple[int, ...], stops: tuple[int, ...], steps: tuple[int, ...]) -> None:
    check_vjp(prim("slice", starts=starts, stops=stops, steps=steps), [rand((3, 4, 5), "float64", 7)])


def test_getitem_and_derived_ops() -> None:
    x = rand((3, 4, 5), "float64", 3)
    check_vjp(lambda t: t[1:, None, ::2, -1], [x])
    check_vjp(lambda t: t[:, [0, 2, 2]], [x])
    check_vjp(lambda t: t.transpose(0, 2).reshape(5, 12), [x])
    check_vjp(lambda t: t.mean(1) + t.var(dim=(0, 2)).sum(), [x])
    check_vjp(lambda t: t.expand(2, 3, 4, 5), [x])
    check_vjp(lambda t: t.clamp(-0.5, 0.7), [x])


def test_concat_promotes_and_gives_each_input_its_dtype() -> None:
    a = tp.tensor(rand((2, 3), "float32", 1), requires_grad=True)
    b = tp.tensor(rand((2, 2), "float64", 2), requires_grad=True)
    out = ops.concat(a, b, axis=1)
    ct = rand((2, 5), "float64", 3)
    ga, gb = tp.autograd.grad(out, [a, b], grad_outputs=tp.tensor(ct))
    assert ga.dtype == tp.float32 and gb.dtype == tp.float64
    np.testing.assert_allclose(ga.numpy(), ct[:, :3].astype(np.float32))
    np.testing.assert_allclose(gb.numpy(), ct[:, 3:])


def test_gather_repeated_indices_accumulate_and_scatter_add() -> None:
    x = rand((4, 3), "float64", 1)
    idx = np.array([[0, 2], [2, 2]], np.int64)
    check_vjp(lambda t: ops.gather(t, tp.tensor(idx), axis=0), [x])
    check_vjp(lambda t: ops.gather(t, tp.tensor(np.array([1, -1, 1])), axis=1), [x])
    base, upd = rand((3, 4), "float64", 2), rand((3, 2, 2), "float64", 3)
    check_vjp(lambda b, u: ops.scatter_add(b, tp.tensor(idx), u, axis=1), [base, upd])


def test_cast_float_to_float_and_not_to_int() -> None:
    x = tp.tensor(rand((3,), "float64", 1), requires_grad=True)
    y = ops.cast(x, dtype="float32")
    (g,) = tp.autograd.grad(y, [x], grad_outputs=tp.tensor([1.0, 2.0, 3.0]))
    assert g.dtype == tp.float64
    np.testing.assert_allclose(g.numpy(), [1.0, 2.0, 3.0])
    assert not ops.cast(x, dtype="int64").requires_grad


# ---- conventions ----------------------------------------------------------------------------------

def _grad(fn: Callable[[Any], Any], x: Array) -> Array:
    t = tp.tensor(x, requires_grad=True)
    (g,) = tp.autograd.grad(fn(t).sum(), [t])
    return g.numpy()


def test_maximum_minimum_ties_split() -> None:
    x = np.array([1.0, 2.0, 3.0])
    y = tp.tensor([1.0, 0.0, 3.0], dtype=tp.float64, requires_grad=True)
    t = tp.tensor(x, requires_grad=True)
    gx, gy = tp.autograd.grad(ops.maximum(t, y).sum(), [t, y])
    np.testing.assert_array_equal(gx.numpy(), [0.5, 1.0, 0.5])
    np.testing.assert_array_equal(gy.numpy(), [0.5, 0.0, 0.5])
    gx, gy = tp.autograd.grad(ops.minimum(t, y).sum(), [t, y])
    np.testing.assert_array_equal(gx.numpy(), [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(gy.numpy(), [0.5, 1.0, 0.5])
    np.testing.assert_array_equal(_grad(lambda a: ops.maximum(a, 2.0), x), [0.0, 0.5, 1.0])


def test_reduce_max_min_ties_split() -> None:
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]])
    np.testing.assert_allclose(_grad(lambda a: ops.reduce_max(a, axes=(1,)), x),
                               [[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    np.testing.assert_allclose(_grad(lambda a: ops.reduce_min(a, axes=(0, 1), keepdims=True), x),
                               [[1, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(_grad(lambda a: ops.reduce_max(a, axes=()), x), np.ones((2, 3)))


def test_relu_abs_at_zero_and_sign_floor_ceil_are_zero() -> None:
    x = np.array([-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(_grad(ops.relu, x), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(_grad(ops.abs, x), [-1.0, 0.0, 1.0])
    for name in ("sign", "floor", "ceil"):
        np.testing.assert_array_equal(_grad(getattr(ops, name), x), [0.0, 0.0, 0.0])


def test_sqrt_at_zero() -> None:
    x = tp.tensor([0.0, 4.0], dtype=tp.float64, requires_grad=True)
    (g,) = tp.autograd.grad(ops.sqrt(x), [x], grad_outputs=tp.tensor([0.0, 1.0], dtype=tp.float64))
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.25])  # no 0 * inf = nan
    (g,) = tp.autograd.grad(ops.sqrt(x).sum(), [x])
    assert g.numpy()[0] == np.inf  # as PyTorch


def test_pow_exponent_gradient_at_zero_base() -> None:
    x = tp.tensor([0.0, 2.0, 0.0], dtype=tp.float64, requires_grad=True)
    y = tp.tensor([2.0, 3.0, 0.0], dtype=tp.float64, requires_grad=True)
    gx, gy = tp.autograd.grad(ops.pow(x, y).sum(), [x, y])
    np.testing.assert_allclose(gy.numpy(), [0.0, 8.0 * math.log(2.0), 0.0])
    np.testing.assert_allclose(gx.numpy(), [0.0, 12.0, 0.0])
    tx, ty = torch.tensor([0.0, 2.0, 0.0], dtype=torch.float64, requires_grad=True), \
        torch.tensor([2.0, 3.0, 0.0], dtype=torch.float64, requires_grad=True)
    torch.pow(tx, ty).sum().backward()
    np.testing.assert_allclose(gx.numpy(), tx.grad.numpy())
    np.testing.assert_allclose(gy.numpy(), ty.grad.numpy())


def test_pow_scalar_base_and_zero_exponent() -> None:
    check_vjp(lambda t: ops.pow(2.5, t), [rand((4,), "float64", 1)])
    np.testing.assert_array_equal(_grad(lambda a: ops.pow(a, 0), np.array([0.0, 2.0])), [0.0, 0.0])
    np.testing.assert_allclose(_grad(lambda a: ops.pow(a, 2), np.array([0.0, 3.0])), [0.0, 6.0])


def test_where_gradient_goes_only_to_the_chosen_side() -> None:
    cond = tp.tensor([True, False, True])
    x = tp.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = tp.tensor([4.0, 5.0, 6.0], requires_grad=True)
    gx, gy = tp.autograd.grad(ops.where(cond, x, y).sum(), [x, y])
    np.testing.assert_array_equal(gx.numpy(), [1.0, 0.0, 1.0])
    np.testing.assert_array_equal(gy.numpy(), [0.0, 1.0, 0.0])
    # broadcast operands are reduced back
    b = tp.tensor([2.0], requires_grad=True)
    (gb,) = tp.autograd.grad(ops.where(cond, x, b).sum(), [b])
    np.testing.assert_array_equal(gb.numpy(), [1.0])


def test_max_pool_ties_go_to_the_first_position() -> None:
    x = np.array([[[[1.0, 1.0], [0.0, 1.0]]]])
    g = _grad(lambda a: ops.max_pool_nd(a, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)), x)
    np.testing.assert_array_equal(g, [[[[1.0, 0.0], [0.0, 0.0]]]])


def test_softmax_of_fully_masked_attention_row_gives_zero_not_nan() -> None:
    q = rand((1, 2, 3), "float64", 1)
    k = rand((1, 4, 3), "float64", 2)
    v = rand((1, 4, 2), "float64", 3)
    mask = np.ones((2, 4), bool)
    mask[0] = False
    tq, tk, tv = (tp.tensor(a, requires_grad=True) for a in (q, k, v))
    out = ops.dot_product_attention(tq, tk, tv, tp.tensor(mask), scale=0.7)
    np.testing.assert_array_equal(out.detach().numpy()[0, 0], [0.0, 0.0])
    grads = tp.autograd.grad(out.sum(), [tq, tk, tv], create_graph=True)
    for g in grads:
        assert np.all(np.isfinite(g.detach().numpy()))
    np.testing.assert_array_equal(grads[0].detach().numpy()[0, 0], [0.0, 0.0, 0.0])
    second = tp.autograd.grad(sum((g * g).sum() for g in grads), [tq, tk, tv])
    for s in second:
        assert np.all(np.isfinite(s.numpy()))


# ---- convolution and pooling geometry -------------------------------------------------------------

CONV_CASES = [
    # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 9), (4, 3, 3), (1,), (0,), (1,), 1),
    ((2, 4, 10), (6, 2, 3), (2,), (1,), (1,), 2),
    ((1, 2, 11), (2, 1, 2), (3,), (2,), (2,), 2),
    ((2, 2, 6, 7), (3, 2, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 4, 7, 8), (4, 2, 2, 3), (2, 3), (1, 0), (2, 1), 2),
    ((1, 3, 6, 6), (3, 1, 3, 2), (2, 2), (0, 1), (1, 2), 3),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[f"conv{i}" for i in range(len(CONV_CASES))])
def test_conv_gradients(case: tuple[Any, ...]) -> None:
    xs, ws, s, p, d, g = case
    fn = prim("conv_nd", stride=s, padding=p, dilation=d, groups=g)
    check_vjp(fn, [rand(xs, "float64", 1), rand(ws, "float64", 2)])


CONV_T_CASES = [
    # (x shape, w shape [C, O/groups, *k], stride, padding, output_padding, dilation, groups)
    ((2, 3, 5), (3, 2, 3), (2,), (1,), (1,), (1,), 1),
    ((1, 4, 4), (4, 1, 2), (1,), (0,), (0,), (3,), 2),
    ((1, 2, 4), (2, 2, 3), (1,), (1,), (2,), (3,), 1),  # output_padding >= stride (allowed: < dilation)
    ((2, 2, 3, 4), (2, 3, 3, 2), (2, 1), (1, 0), (1, 0), (1, 2), 1),
    ((1, 4, 3, 3), (4, 1, 2, 2), (3, 2), (0, 1), (2, 1), (1, 1), 2),
]


@pytest.mark.parametrize("case", CONV_T_CASES, ids=[f"convT{i}" for i in range(len(CONV_T_CASES))])
def test_conv_transpose_gradients(case: tuple[Any, ...]) -> None:
    xs, ws, s, p, op, d, g = case
    fn = prim("conv_transpose_nd", stride=s, padding=p, output_padding=op, dilation=d, groups=g)
    check_vjp(fn, [rand(xs, "float64", 1), rand(ws, "float64", 2)])


@pytest.mark.parametrize("case", CONV_CASES[:5], ids=[f"cwg{i}" for i in range(5)])
def test_conv_weight_grad_gradients(case: tuple[Any, ...]) -> None:
    xs, ws, s, p, d, g = case
    x = rand(xs, "float64", 1)
    out = ops.conv_nd(tp.tensor(x), tp.tensor(rand(ws, "float64", 2)), stride=s, padding=p, dilation=d, groups=g)
    gy = rand(tuple(out.shape), "float64", 3)
    fn = prim("conv_weight_grad_nd", kernel_size=tuple(ws[2:]), stride=s, padding=p, dilation=d, groups=g)
    check_vjp(fn, [x, gy])


POOL_CASES = [
    ((2, 2, 9), (3,), (2,), (1,)),
    ((1, 3, 8), (2,), (2,), (0,)),
    ((2, 2, 6, 7), (3, 3), (2, 1), (1, 1)),
    ((1, 2, 5, 5), (2, 3), (1, 2), (0, 1)),
]


@pytest.mark.parametrize("case", POOL_CASES, ids=[f"pool{i}" for i in range(len(POOL_CASES))])
@pytest.mark.parametrize("name", ["max_pool_nd", "avg_pool_nd", "smooth_max_pool_nd"])
def test_pool_gradients(case: tuple[Any, ...], name: str) -> None:
    xs, k, s, p = case
    params: dict[str, Any] = {"kernel_size": k, "stride": s, "padding": p}
    if name == "smooth_max_pool_nd":
        params["beta"] = 1.7
    # distinct values far apart: max-pool is smooth there
    x = np.random.default_rng(3).permutation(int(np.prod(xs))).reshape(xs).astype(np.float64) * 0.1
    check_vjp(prim(name, **params), [x])


@pytest.mark.parametrize("case", POOL_CASES, ids=[f"pool{i}" for i in range(len(POOL_CASES))])
def test_pool_adjoint_primitives_gradients(case: tuple[Any, ...]) -> None:
    xs, k, s, p = case
    params: dict[str, Any] = {"kernel_size": k, "stride": s, "padding": p}
    x = np.random.default_rng(4).permutation(int(np.prod(xs))).reshape(xs).astype(np.float64) * 0.1
    out_shape = tuple(ops.max_pool_nd(tp.tensor(x), **params).shape)
    g = rand(out_shape, "float64", 5)
    h = rand(xs, "float64", 6)
    check_vjp(lambda gg: ops.max_pool_backward_nd(tp.tensor(x), gg, **params), [g])
    check_vjp(lambda hh: ops.max_pool_select_nd(tp.tensor(x), hh, **params), [h])
    check_vjp(prim("max_pool_backward_nd", **params), [x, g])  # zero w.r.t. x (piecewise constant)
    check_vjp(prim("avg_pool_backward_nd", input_shape=tuple(xs[2:]), **params), [g])
    check_vjp(prim("smooth_max_pool_backward_nd", beta=1.3, **params), [x, g])


# ---- norms, softmax, attention -------------------------------------------------------------------

def test_layer_norm_leading_axes_and_float32() -> None:
    check_vjp(prim("layer_norm_last_axis", eps=1e-5), [rand((2, 2, 3, 6), "float64", 1), rand((6,), "float64", 2),
                                             rand((6,), "float64", 3)])
    x32 = tp.tensor(rand((3, 5), "float32", 1), requires_grad=True)
    gam = tp.tensor(rand((5,), "float32", 2), requires_grad=True)
    bet = tp.tensor(rand((5,), "float32", 3), requires_grad=True)
    grads = tp.autograd.grad(ops.layer_norm_last_axis(x32, gam, bet, eps=1e-5).sum(), [x32, gam, bet])
    assert all(g.dtype == tp.float32 for g in grads)


def test_batch_norm_with_batch_statistics_computed_by_ops() -> None:
    def train_bn(x: Any, w: Any, b: Any) -> Any:
        mean = x.mean(dim=(0, 2))
        var = x.var(dim=(0, 2), correction=0)
        return ops.batch_norm(x, mean, var, w, b, eps=1e-5)
    check_vjp(train_bn, [rand((4, 3, 5), "float64", 1), rand((3,), "float64", 2), rand((3,), "float64", 3)])


@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 5, 4), (2, 5, 2)), ((2, 2, 3, 4), (2, 2, 3, 4), (2, 2, 3, 5)),
                                    ((3, 4), (6, 4), (6, 3))])
def test_attention_gradients(shapes: tuple[tuple[int, ...], ...]) -> None:
    q, k, v = (rand(s, "float64", i + 1) for i, s in enumerate(shapes))
    check_vjp(lambda a, b, c: ops.dot_product_attention(a, b, c, None, scale=0.6), [q, k, v])
    n, m = shapes[0][-2], shapes[1][-2]
    mask = np.random.default_rng(7).random((n, m)) > 0.4
    mask[0, :] = False
    mask[-1, 0] = True
    check_vjp(lambda a, b, c: ops.dot_product_attention(a, b, c, tp.tensor(mask), scale=0.6), [q, k, v])


# ---- second derivatives ---------------------------------------------------------------------------

SECOND_ORDER = {
    "tanh": (prim("tanh"), [rand((2, 3), "float64", 1)]),
    "exp": (prim("exp"), [rand((2, 3), "float64", 2, -1.0, 1.0)]),
    "mul": (prim("mul"), [rand((2, 3), "float64", 3), rand((3,), "float64", 4)]),
    "div": (prim("div"), [rand((2, 3), "float64", 3), rand((3,), "float64", 4, 0.5, 2.0)]),
    "pow": (prim("pow"), [rand((2, 3), "float64", 5, 0.5, 2.0), rand((2, 3), "float64", 6, -1.5, 2.0)]),
    "pow-scalar": (lambda x: ops.pow(x, 3.0), [rand((4,), "float64", 5, -2.0, 2.0)]),
    "sqrt": (prim("sqrt"), [rand((5,), "float64", 7, 0.5, 2.0)]),
    "sigmoid": (prim("sigmoid"), [rand((5,), "float64", 8)]),
    "log": (prim("log"), [rand((5,), "float64", 8, 0.5, 2.0)]),
    "rsqrt": (prim("rsqrt"), [rand((5,), "float64", 8, 0.5, 2.0)]),
    "gelu": (prim("gelu"), [rand((5,), "float64", 9)]),
    "gelu-tanh": (prim("gelu", approximate="tanh"), [rand((5,), "float64", 9)]),
    "matmul": (prim("matmul"), [rand((2, 3, 4), "float64", 10), rand((4, 2), "float64", 11)]),
    "softmax": (prim("softmax", axis=-1), [rand((2, 5), "float64", 12)]),
    "log_softmax": (prim("log_softmax", axis=0), [rand((4, 3), "float64", 12)]),
    "layer_norm_last_axis": (prim("layer_norm_last_axis", eps=1e-5), [rand((3, 5), "float64", 13), rand((5,), "float64", 14),
                                                  rand((5,), "float64", 15)]),
    "batch_norm": (prim("batch_norm", eps=1e-5), [rand((3, 2, 2), "float64", 13), rand((2,), "float64", 14),
                                                  rand((2,), "float64", 15, 0.5, 2.0), rand((2,), "float64", 16),
                                                  rand((2,), "float64", 17)]),
    "conv_nd": (prim("conv_nd", stride=(2,), padding=(1,), dilation=(1,), groups=1),
             [rand((1, 2, 7), "float64", 16), rand((3, 2, 3), "float64", 17)]),
    "conv2d-groups": (prim("conv_nd", stride=(1, 2), padding=(1, 0), dilation=(2, 1), groups=2),
                      [rand((1, 2, 5, 5), "float64", 16), rand((2, 1, 2, 2), "float64", 17)]),
    "conv_transpose_nd": (prim("conv_transpose_nd", stride=(2,), padding=(1,), output_padding=(1,), dilation=(1,),
                            groups=1), [rand((1, 2, 4), "float64", 18), rand((2, 3, 3), "float64", 19)]),
    "dot_product_attention": (lambda q, k, v: ops.dot_product_attention(q, k, v, tp.tensor(np.array([[1, 1, 0], [0, 0, 0]], bool)),
                                                scale=0.8),
                  [rand((2, 3), "float64", 20), rand((3, 3), "float64", 21), rand((3, 2), "float64", 22)]),
    "smooth_max_pool_nd": (prim("smooth_max_pool_nd", kernel_size=(3,), stride=(2,), padding=(1,), beta=1.5),
                        [rand((1, 2, 7), "float64", 23)]),
    "max_pool_nd": (prim("max_pool_nd", kernel_size=(2, 2), stride=(1, 1), padding=(1, 1)),
                 [np.random.default_rng(5).permutation(18).reshape(1, 2, 3, 3).astype(np.float64)]),
    "avg_pool_nd": (prim("avg_pool_nd", kernel_size=(3,), stride=(2,), padding=(1,)), [rand((1, 2, 7), "float64", 24)]),
    "reduce_max": (prim("reduce_max", axes=(1,)), [rand((3, 4), "float64", 25)]),
    "composite": (lambda x, w: ops.tanh(x @ w).sum(1, keepdim=True) * x[:, :1].exp(),
                  [rand((3, 4), "float64", 26), rand((4, 4), "float64", 27)]),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_derivative(name: str) -> None:
    fn, args = SECOND_ORDER[name]
    check_second_order(fn, args)


def test_third_derivative_of_tanh() -> None:
    x = tp.tensor([0.3, -0.7], dtype=tp.float64, requires_grad=True)
    (g1,) = tp.autograd.grad(ops.tanh(x).sum(), [x], create_graph=True)
    (g2,) = tp.autograd.grad(g1.sum(), [x], create_graph=True)
    (g3,) = tp.autograd.grad(g2.sum(), [x])
    t = np.tanh(np.array([0.3, -0.7]))
    np.testing.assert_allclose(g3.numpy(), -2 * (1 - t ** 2) ** 2 + 4 * t ** 2 * (1 - t ** 2), rtol=1e-10)


# ---- PyTorch gradient parity ----------------------------------------------------------------------

def _torch_parity(tp_fn: Callable[..., Any], torch_fn: Callable[..., Any], arrays: Sequence[Array],
                  rtol: float = 1e-9, atol: float = 1e-10, seed: int = 0) -> None:
    ts = [tp.tensor(a, requires_grad=True) for a in arrays]
    out = tp_fn(*ts)
    ct = np.random.default_rng(seed).standard_normal(tuple(out.shape))
    grads = tp.autograd.grad(out, ts, grad_outputs=tp.tensor(ct))
    tts = [torch.tensor(a, requires_grad=True) for a in arrays]
    tout = torch_fn(*tts)
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)
    tgrads = torch.autograd.grad(tout, tts, grad_outputs=torch.tensor(ct))
    for i, (g, tg) in enumerate(zip(grads, tgrads)):
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")


_TORCH_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_TORCH_CONV_T = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("case", CONV_CASES + [((1, 2, 4, 4, 3), (3, 2, 2, 2, 2), (1, 1, 1), (0, 1, 0),
                                                (1, 1, 1), 1)], ids=[f"c{i}" for i in range(len(CONV_CASES) + 1)])
def test_torch_conv(case: tuple[Any, ...]) -> None:
    xs, ws, s, p, d, g = case
    _torch_parity(prim("conv_nd", stride=s, padding=p, dilation=d, groups=g),
                  lambda x, w: _TORCH_CONV[len(s)](x, w, stride=s, padding=p, dilation=d, groups=g),
                  [rand(xs, "float64", 1), rand(ws, "float64", 2)])


@pytest.mark.parametrize("case", CONV_T_CASES, ids=[f"ct{i}" for i in range(len(CONV_T_CASES))])
def test_torch_conv_transpose(case: tuple[Any, ...]) -> None:
    xs, ws, s, p, op, d, g = case
    _torch_parity(prim("conv_transpose_nd", stride=s, padding=p, output_padding=op, dilation=d, groups=g),
                  lambda x, w: _TORCH_CONV_T[len(s)](x, w, stride=s, padding=p, output_padding=op, groups=g,
                                                     dilation=d),
                  [rand(xs, "float64", 1), rand(ws, "float64", 2)])


_TORCH_MAX = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_TORCH_AVG = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@pytest.mark.parametrize("case", POOL_CASES + [((1, 2, 4, 4, 4), (2, 2, 2), (2, 1, 2), (1, 0, 0))],
                         ids=[f"p{i}" for i in range(len(POOL_CASES) + 1)])
def test_torch_pools(case: tuple[Any, ...]) -> None:
    xs, k, s, p = case
    x = rand(xs, "float64", 8)
    n = len(k)
    _torch_parity(prim("max_pool_nd", kernel_size=k, stride=s, padding=p),
                  lambda t: _TORCH_MAX[n](t, k, s, p), [x])
    _torch_parity(prim("avg_pool_nd", kernel_size=k, stride=s, padding=p),
                  lambda t: _TORCH_AVG[n](t, k, s, p, count_include_pad=True), [x])


def test_torch_smooth_max_pool() -> None:
    k, s, p, beta = (3, 2), (2, 1), (1, 1), 1.7
    _torch_parity(prim("smooth_max_pool_nd", kernel_size=k, stride=s, padding=p, beta=beta),
                  lambda t: torch_smooth_max_pool(t, k, s, p, beta), [rand((2, 2, 6, 5), "float64", 9)])


def test_torch_layer_norm_softmax_log_softmax_gelu() -> None:
    x = rand((2, 3, 6), "float64", 1)
    gam, bet = rand((6,), "float64", 2), rand((6,), "float64", 3)
    _torch_parity(prim("layer_norm_last_axis", eps=1e-5), lambda a, b, c: F.layer_norm(a, (6,), b, c, eps=1e-5),
                  [x, gam, bet])
    _torch_parity(prim("softmax", axis=1), lambda a: torch.softmax(a, dim=1), [x])
    _torch_parity(prim("log_softmax", axis=-1), lambda a: torch.log_softmax(a, dim=-1), [x])
    _torch_parity(prim("gelu"), lambda a: F.gelu(a), [x])
    _torch_parity(prim("gelu", approximate="tanh"), lambda a: F.gelu(a, approximate="tanh"), [x])


def test_torch_batch_norm() -> None:
    x = rand((4, 3, 5), "float64", 1)
    mean, var = rand((3,), "float64", 2), rand((3,), "float64", 3, 0.5, 2.0)
    w, b = rand((3,), "float64", 4), rand((3,), "float64", 5)

    def torch_bn(xt: Any, mt: Any, vt: Any, wt: Any, bt: Any) -> Any:
        col = (1, 3, 1)
        return (xt - mt.reshape(col)) / torch.sqrt(vt.reshape(col) + 1e-5) * wt.reshape(col) + bt.reshape(col)

    _torch_parity(prim("batch_norm", eps=1e-5), torch_bn, [x, mean, var, w, b])
    # inference-mode F.batch_norm: gradients w.r.t. x, weight and bias
    _torch_parity(lambda xt, wt, bt: ops.batch_norm(xt, tp.tensor(mean), tp.tensor(var), wt, bt, eps=1e-5),
                  lambda xt, wt, bt: F.batch_norm(xt, torch.tensor(mean), torch.tensor(var), wt, bt, False,
                                                  0.1, 1e-5), [x, w, b])
    # training mode: batch statistics computed with ops, vs PyTorch's fused training batch norm

    def tp_train(xt: Any, wt: Any, bt: Any) -> Any:
        return ops.batch_norm(xt, xt.mean(dim=(0, 2)), xt.var(dim=(0, 2), correction=0), wt, bt, eps=1e-5)

    _torch_parity(tp_train, lambda xt, wt, bt: F.batch_norm(xt, None, None, wt, bt, True, 0.1, 1e-5), [x, w, b],
                  rtol=1e-8)


def test_torch_attention() -> None:
    q, k, v = rand((2, 2, 3, 4), "float64", 1), rand((2, 2, 5, 4), "float64", 2), rand((2, 2, 5, 3), "float64", 3)
    _torch_parity(lambda a, b, c: ops.dot_product_attention(a, b, c, None, scale=0.4), lambda a, b, c: F.scaled_dot_product_attention(a, b, c, scale=0.4),
                  [q, k, v], rtol=1e-8)
    mask = np.random.default_rng(2).random((3, 5)) > 0.5
    mask[:, 0] = True  # no fully masked row: PyTorch gives NaN there, tensorplay 0
    _torch_parity(lambda a, b, c: ops.dot_product_attention(a, b, c, tp.tensor(mask), scale=0.4),
                  lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=torch.tensor(mask), scale=0.4),
                  [q, k, v], rtol=1e-8)


@pytest.mark.parametrize("name,torch_fn", [
    ("exp", torch.exp), ("log", torch.log), ("log1p", torch.log1p), ("expm1", torch.expm1),
    ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt), ("sin", torch.sin), ("cos", torch.cos),
    ("tanh", torch.tanh), ("sigmoid", torch.sigmoid), ("erf", torch.erf), ("abs", torch.abs),
    ("relu", torch.relu), ("neg", torch.neg),
])
def test_torch_unary(name: str, torch_fn: Callable[..., Any]) -> None:
    _torch_parity(prim(name), torch_fn, [rand((3, 4), "float64", 2, 0.2, 3.0) * np.array([1, -1, 1, -1])
                                         if name in ("abs", "relu", "neg", "sin", "tanh", "sigmoid", "erf")
                                         else rand((3, 4), "float64", 2, 0.2, 3.0)], rtol=1e-7)


def test_torch_reductions_and_matmul() -> None:
    x = rand((3, 4, 5), "float64", 3)
    _torch_parity(prim("reduce_sum", axes=(0, 2), keepdims=True), lambda a: a.sum(dim=(0, 2), keepdim=True), [x])
    _torch_parity(prim("reduce_max", axes=(1,)), lambda a: a.amax(dim=1), [x])
    _torch_parity(prim("reduce_min", axes=(2,)), lambda a: a.amin(dim=2), [x])
    _torch_parity(prim("matmul"), torch.matmul, [rand((2, 1, 3, 4), "float64", 1), rand((5, 4, 2), "float64", 2)])


def test_smooth_max_pool_backward_3d() -> None:
    params = dict(kernel_size=(2, 2, 2), stride=(1, 2, 1), padding=(1, 0, 1), beta=2.0)
    x = rand((1, 1, 3, 4, 3), "float64", 4)
    out = ops.smooth_max_pool_nd(tp.tensor(x), **params)
    g = rand(tuple(out.shape), "float64", 5)
    check_vjp(prim("smooth_max_pool_backward_nd", **params), [x, g])


_SECOND_SAMPLES = [s for s in GRAD_SAMPLES
                   if s.prim not in ("reduce_max", "reduce_min", "maximum", "minimum") or "float64" in s.id]


@pytest.mark.parametrize("sample", _SECOND_SAMPLES, ids=[s.id for s in _SECOND_SAMPLES])
def test_second_derivative_of_every_sample(sample: Sample) -> None:
    """grad of grad through every rule (rules of rules: max_pool_backward, conv_weight_grad, scatter, ...)."""
    args = [as_float64(a) for a in sample.args]
    if sample.params.get("dtype") == "float32":
        pytest.skip("a float32 result: second differences are too noisy")
    check_second_order(prim(sample.prim, **sample.params), args, rtol=1e-4, atol=1e-5)


# ---- the same rules under the graph recorder ----------------------------------------------------------

def _rule_outputs_traced(sample: Sample, dynamic_batch: bool) -> None:
    from tensorplay.interpreters.graph.trace import trace

    args = list(sample.args)
    positions = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    eager_in = [tp.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args]
    eager_out = getattr(ops, sample.prim)(*eager_in, **sample.params)
    g = np.random.default_rng(0).standard_normal(tuple(eager_out.shape)).astype(eager_out.dtype.name)
    expected = [c for c in VJP_RULES[sample.prim](ops, tp.from_numpy(g), tuple(eager_in), eager_out,
                                                  **sample.params) if c is not None]

    def rule_graph(gt: Any, *ts: Any) -> list[Any]:
        rec = gt.interpreter
        full = placed(args, positions, ts)
        out = getattr(rec, sample.prim)(*full, **sample.params)
        return [c for c in VJP_RULES[sample.prim](rec, gt, tuple(full), out, **sample.params) if c is not None]

    arrays = [g] + [args[i] for i in positions]
    dynamic = batch_dims_like(arrays, g) if dynamic_batch else None
    got = trace(rule_graph, *arrays, dynamic=dynamic)(*arrays)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(np.asarray(a), b.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("sample", GRAD_SAMPLES, ids=[s.id for s in GRAD_SAMPLES])
def test_rules_run_under_the_graph_recorder(sample: Sample) -> None:
    """Rules use only Ops: recorded into a graph and replayed, they give the eager cotangents."""
    _rule_outputs_traced(sample, dynamic_batch=False)


_BATCHED = [s for s in GRAD_SAMPLES if s.prim in (
    "add", "mul", "div", "pow", "exp", "tanh", "sqrt", "maximum", "where", "matmul", "conv_nd", "conv_transpose_nd",
    "max_pool_nd", "avg_pool_nd", "smooth_max_pool_nd", "smooth_max_pool_backward_nd", "layer_norm_last_axis", "batch_norm", "softmax",
    "log_softmax", "dot_product_attention", "gelu") and s.args[0] is not None and np.ndim(s.args[0]) > 1]


@pytest.mark.parametrize("sample", _BATCHED, ids=[s.id for s in _BATCHED])
def test_rules_with_a_symbolic_batch_dim(sample: Sample) -> None:
    """The rules do no arithmetic that needs a concrete batch size."""
    _rule_outputs_traced(sample, dynamic_batch=True)


def test_rules_reading_the_result_are_declared() -> None:
    """The tape keeps the result alive (and checks it was not modified) only for USES_OUTPUT rules."""
    import ast
    import inspect
    import textwrap

    from tensorplay.rules.vjp import USES_OUTPUT

    readers = set()
    for name, rule in VJP_RULES.items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(rule)))
        if any(isinstance(n, ast.Name) and n.id == "output" and isinstance(n.ctx, ast.Load) for n in ast.walk(tree)):
            readers.add(name)
    assert readers == set(USES_OUTPUT)


@pytest.mark.parametrize("name", ["exp", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "softmax",
                                  "log_softmax", "reduce_max", "pow"])
def test_result_reading_rules_work_when_the_result_is_gone(name: str) -> None:
    import gc

    x = tp.tensor(rand((3, 4), "float64", 3, 0.5, 2.0), requires_grad=True)
    params: dict[str, Any] = {"axis": 1} if "softmax" in name else {"axes": (1,)} if name == "reduce_max" else {}
    fn = (lambda t: ops.pow(t, 1.7)) if name == "pow" else prim(name, **params)
    loss = (fn(x) * 2.0).sum()  # fn(x) is referenced only by the tape
    gc.collect()
    (g,) = tp.autograd.grad(loss, x)
    x2 = tp.tensor(x.detach().numpy(), requires_grad=True)
    out = fn(x2)
    (expected,) = tp.autograd.grad(out, x2, grad_outputs=tp.full_like(out, 2.0))
    np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-12)
