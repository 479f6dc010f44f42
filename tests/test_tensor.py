"""The Tensor surface: factories, dtypes, repr, operators, methods and indexing (vs numpy / PyTorch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp


def arr(shape: tuple[int, ...], seed: int = 0, dtype: Any = np.float32) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---- factories and dtypes ----------------------------------------------------------------------

def test_tensor_infers_dtypes_like_pytorch() -> None:
    assert tp.tensor([1.0, 2.0]).dtype == tp.float32
    assert tp.tensor([1, 2]).dtype == tp.int64
    assert tp.tensor([True, False]).dtype == tp.bool
    assert tp.tensor(np.zeros(2, np.float64)).dtype == tp.float64
    assert tp.tensor([1, 2], dtype=tp.float64).dtype == tp.float64
    assert tp.tensor(3.5).shape == ()


def test_tensor_copies_but_from_numpy_shares() -> None:
    a = np.zeros(3, np.float32)
    copied, shared = tp.tensor(a), tp.from_numpy(a)
    a[0] = 7.0
    assert copied.tolist() == [0.0, 0.0, 0.0]
    assert shared.tolist() == [7.0, 0.0, 0.0]


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_shape_factories_accept_both_spellings(name: str) -> None:
    a = getattr(tp, name)(2, 3)
    b = getattr(tp, name)((2, 3))
    assert a.shape == b.shape == (2, 3)
    assert a.dtype == tp.float32
    assert getattr(tp, name)(0, 4).numel() == 0


def test_value_factories_match_torch() -> None:
    np.testing.assert_array_equal(tp.arange(5).numpy(), torch.arange(5).numpy())
    np.testing.assert_allclose(tp.arange(0, 1, 0.25).numpy(), torch.arange(0, 1, 0.25).numpy())
    assert tp.arange(5).dtype == tp.int64 and tp.arange(0.0, 2.0).dtype == tp.float32
    np.testing.assert_allclose(tp.linspace(-1, 1, 7).numpy(), torch.linspace(-1, 1, 7).numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(tp.eye(3, 2).numpy(), torch.eye(3, 2).numpy())
    full = tp.full((2, 2), 1.5)
    assert full.tolist() == [[1.5, 1.5], [1.5, 1.5]] and full.dtype == tp.float32
    assert tp.full((2,), 3).dtype == tp.int64
    x = tp.tensor(arr((2, 3)))
    assert tp.zeros_like(x).shape == (2, 3) and tp.ones_like(x, dtype=tp.int64).dtype == tp.int64
    assert tp.full_like(x, 2.0).tolist() == [[2.0] * 3] * 2


def test_bad_factory_arguments_raise_clear_errors() -> None:
    with pytest.raises(tp.ShapeError, match="negative"):
        tp.zeros(2, -1)
    with pytest.raises(tp.ShapeError, match="must be an int"):
        tp.ones(2.5, 3)  # type: ignore[arg-type]
    with pytest.raises(tp.DTypeError, match="unknown dtype"):
        tp.zeros(2, dtype="complex128")
    with pytest.raises(tp.DTypeError, match="not supported"):
        tp.from_numpy(np.zeros(2, np.complex64))


def test_random_is_seeded_and_counter_based() -> None:
    tp.manual_seed(123)
    a, b = tp.randn(4), tp.randn(4)
    tp.manual_seed(123)
    a2 = tp.randn(4)
    assert a.tolist() == a2.tolist()
    assert a.tolist() != b.tolist()
    u = tp.rand(1000)
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    r = tp.randint(-2, 3, (500,))
    assert r.dtype == tp.int64 and set(r.tolist()) == {-2, -1, 0, 1, 2}
    n = tp.randn(20000, dtype=tp.float64)
    assert abs(n.mean().item()) < 0.05 and abs(n.var().item() - 1.0) < 0.05


# ---- metadata and conversion -----------------------------------------------------------------------

def test_metadata() -> None:
    x = tp.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and isinstance(x.shape, tp.Size)
    assert x.ndim == x.dim() == 3 and x.numel() == 24 and len(x) == 2
    assert x.size() == (2, 3, 4) and x.size(-1) == 4
    assert repr(x.shape) == "tp.Size([2, 3, 4])"
    with pytest.raises(tp.AxisError, match="out of range"):
        x.size(3)


def test_item_and_tolist() -> None:
    assert tp.tensor([[2.5]]).item() == 2.5
    assert isinstance(tp.tensor(3).item(), int)
    with pytest.raises(ValueError, match="2 elements"):
        tp.tensor([1.0, 2.0]).item()
    assert tp.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert np.asarray(tp.tensor([1.0, 2.0])).dtype == np.float32


@pytest.mark.parametrize("values", [[0.0, 0.0, 0.0], [0.5, 1.25], [1e-6, 1.0], [1.0, float("nan"), float("inf")],
                                    [[1.0, 2.0], [3.0, 4.0]]])
def test_repr_matches_pytorch(values: Any) -> None:
    assert repr(tp.tensor(values)) == repr(torch.tensor(values))


def test_repr_of_other_dtypes_and_grad() -> None:
    assert repr(tp.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(tp.tensor([True, False])) == "tensor([ True, False])"
    assert repr(tp.tensor([1.0], dtype=tp.float64)) == "tensor([1.], dtype=tensorplay.float64)"
    assert repr(tp.tensor([1.0], requires_grad=True)) == "tensor([1.], requires_grad=True)"


# ---- operators ----------------------------------------------------------------------------------

BINARY_OPS = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / b), ("pow", lambda a, b: abs(a) ** b), ("lt", lambda a, b: a < b),
    ("ge", lambda a, b: a >= b), ("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b),
]


@pytest.mark.parametrize("name,fn", BINARY_OPS, ids=[n for n, _ in BINARY_OPS])
def test_binary_operators_broadcast_like_torch(name: str, fn: Any) -> None:
    a, b = arr((2, 1, 3), 1), arr((4, 1), 2)
    expected = fn(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    got = fn(tp.tensor(a), tp.tensor(b)).numpy()
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6, equal_nan=True)


@pytest.mark.parametrize("scalar", [2, 2.5])
def test_python_scalars_on_either_side_are_weak(scalar: Any) -> None:
    for dtype in (np.float32, np.float64, np.int64, np.int32):
        a = (np.arange(1, 4)).astype(dtype)
        for fn in (lambda x: x + scalar, lambda x: scalar * x, lambda x: x - scalar, lambda x: scalar - x,
                   lambda x: x / scalar, lambda x: scalar / x):
            expected = fn(torch.from_numpy(a))
            got = fn(tp.tensor(a))
            assert got.dtype.name == str(expected.dtype).replace("torch.", ""), (dtype, scalar)
            np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)


def test_promotion_matches_torch() -> None:
    pairs = [(np.float32, np.float64), (np.int64, np.float32), (np.int32, np.int64), (np.bool_, np.int32),
             (np.bool_, np.float32)]
    for da, db in pairs:
        a, b = np.ones(2, da), np.ones(2, db)
        expected = torch.from_numpy(a) * torch.from_numpy(b)
        got = tp.tensor(a) * tp.tensor(b)
        assert got.dtype.name == str(expected.dtype).replace("torch.", "")


def test_numpy_scalars_and_arrays_as_operands() -> None:
    x = tp.tensor([1.0, 2.0])
    assert (x * np.float32(2.0)).tolist() == [2.0, 4.0]
    assert (x + np.array([1.0, 1.0], np.float32)).tolist() == [2.0, 3.0]
    with pytest.raises(tp.DTypeError, match="expected a Tensor or a Python scalar"):
        x + "a"  # type: ignore[operator]


def test_matmul_handles_vectors_and_batches_like_torch() -> None:
    cases = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
             ((2, 1, 3, 4), (5, 4, 2)), ((3, 2, 0), (0, 5)), ((2, 0, 4), (4, 3)), ((0, 4), (4, 5))]
    for sa, sb in cases:  # the last three: empty operands (a batched left one with K = 0 used to fail)
        a, b = arr(sa, 1), arr(sb, 2)
        expected = (torch.from_numpy(a) @ torch.from_numpy(b)).numpy()
        np.testing.assert_allclose((tp.tensor(a) @ tp.tensor(b)).numpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(tp.ShapeError, match="matmul"):
        tp.zeros(3, 4) @ tp.zeros(5, 2)


def test_shape_errors_name_the_primitive_and_shapes_and_leave_inputs_alone() -> None:
    a, b = arr((2, 3)), arr((3, 2))
    ta, tb = tp.tensor(a), tp.tensor(b)
    with pytest.raises(tp.ShapeError) as info:
        ta + tb
    message = str(info.value)
    assert "add" in message and "[2, 3]" in message and "[3, 2]" in message
    np.testing.assert_array_equal(ta.numpy(), a)
    np.testing.assert_array_equal(tb.numpy(), b)


def test_dtype_errors() -> None:
    with pytest.raises(tp.DTypeError, match="sub"):
        tp.tensor([True]) - tp.tensor([False])
    with pytest.raises(tp.DTypeError, match="mean"):
        tp.tensor([1, 2]).mean()


# ---- methods ----------------------------------------------------------------------------------

UNARY_METHODS = ["exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "sqrt", "abs", "neg", "floor", "ceil",
                 "sign", "log1p", "expm1", "rsqrt", "erf"]


@pytest.mark.parametrize("name", UNARY_METHODS)
def test_unary_methods_match_torch(name: str) -> None:
    a = arr((3, 4), 5)
    if name in ("log", "sqrt", "rsqrt", "log1p"):
        a = np.abs(a) + 0.1
    expected = getattr(torch.from_numpy(a), name)().numpy()
    np.testing.assert_allclose(getattr(tp.tensor(a), name)().numpy(), expected, rtol=2e-6, atol=1e-6)


def test_reductions_match_torch() -> None:
    a = arr((3, 4, 5), 6)
    ta, tt = tp.tensor(a), torch.from_numpy(a)
    np.testing.assert_allclose(ta.sum().numpy(), tt.sum().numpy(), rtol=1e-5)
    np.testing.assert_allclose(ta.sum((0, 2)).numpy(), tt.sum((0, 2)).numpy(), rtol=1e-5)
    np.testing.assert_allclose(ta.mean(-1, keepdim=True).numpy(), tt.mean(-1, keepdim=True).numpy(), rtol=1e-5)
    np.testing.assert_allclose(ta.var(1).numpy(), tt.var(1).numpy(), rtol=1e-4)
    np.testing.assert_array_equal(ta.max(1).values.numpy(), tt.max(1).values.numpy())
    np.testing.assert_array_equal(ta.max(1).indices.numpy(), tt.max(1).indices.numpy())
    np.testing.assert_array_equal(ta.min().numpy(), tt.min().numpy())
    np.testing.assert_array_equal(ta.argmax(2).numpy(), tt.argmax(2).numpy())
    np.testing.assert_array_equal(ta.argmax().numpy(), tt.argmax().numpy())
    np.testing.assert_array_equal(ta.argmin(0, keepdim=True).numpy(), tt.argmin(0, keepdim=True).numpy())
    assert tp.tensor([[True, False]]).sum().dtype == tp.int64
    with pytest.raises(tp.AxisError, match="duplicate"):
        ta.sum((1, -2))
    assert np.isnan(tp.zeros(0).mean().item())


def test_softmax_methods_match_torch() -> None:
    a = arr((3, 5), 7)
    np.testing.assert_allclose(tp.tensor(a).softmax(-1).numpy(), torch.from_numpy(a).softmax(-1).numpy(), rtol=1e-5)
    np.testing.assert_allclose(tp.tensor(a).log_softmax(0).numpy(), torch.from_numpy(a).log_softmax(0).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_shape_methods_match_torch() -> None:
    a = arr((2, 3, 4), 8)
    ta, tt = tp.tensor(a), torch.from_numpy(a)
    pairs = [
        (ta.reshape(6, -1), tt.reshape(6, -1)), (ta.view((4, 6)), tt.view(4, 6)), (ta.transpose(0, 2), tt.transpose(0, 2)),
        (ta.permute(1, 2, 0), tt.permute(1, 2, 0)), (ta.mT, tt.mT), (ta.unsqueeze(-1), tt.unsqueeze(-1)),
        (ta.unsqueeze(0).squeeze(0), tt.unsqueeze(0).squeeze(0)), (ta.flatten(1), tt.flatten(1)),
        (ta.flatten(), tt.flatten()), (ta[:, :1].expand(2, 5, 4), tt[:, :1].expand(2, 5, 4)),
        (ta[:, :1].expand(-1, 3, -1), tt[:, :1].expand(-1, 3, -1)), (ta.contiguous(), tt.contiguous()),
        (ta.clone(), tt.clone()), (ta.clamp(-0.5, 0.5), tt.clamp(-0.5, 0.5)), (ta.clamp(min=0.0), tt.clamp(min=0.0)),
    ]
    for got, expected in pairs:
        assert tuple(got.shape) == tuple(expected.shape)
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
    assert ta.T.shape == (4, 3, 2)
    assert tp.zeros(1, 3, 1).squeeze().shape == (3,)
    assert tp.zeros(2, 3).squeeze(0).shape == (2, 3)
    with pytest.raises(tp.ShapeError, match="reshape"):
        ta.reshape(5, -1)
    with pytest.raises(tp.ShapeError, match="only one dimension can be -1"):
        ta.reshape(-1, -1)


def test_dtype_conversions() -> None:
    x = tp.tensor([1.7, -1.7])
    assert x.astype(tp.int64).tolist() == [1, -1]
    assert x.to(tp.float64).dtype == tp.float64
    assert x.long().dtype == tp.int64 and x.double().dtype == tp.float64 and x.bool().dtype == tp.bool
    assert x.astype(tp.float32) is x


# ---- indexing --------------------------------------------------------------------------------

INDEX_KEYS: list[Any] = [
    0, -1, (1, 2), slice(None), slice(1, None), slice(None, None, -1), slice(3, 0, -2), (Ellipsis, 1),
    (None, 0), (slice(None), None, 2), (1, Ellipsis, None), (slice(0, 0),), (slice(-2, None), slice(None, None, 2)),
    ([2, 0, 2],), (slice(None), [1, 1]), (0, [[0, 1], [2, 3]]), (Ellipsis, [0, -1]),
]


@pytest.mark.parametrize("key", INDEX_KEYS, ids=[repr(k) for k in INDEX_KEYS])
def test_indexing_matches_numpy(key: Any) -> None:
    a = arr((3, 4, 5), 9)
    got = tp.tensor(a)[key]
    expected = a[key]
    assert tuple(got.shape) == expected.shape
    np.testing.assert_array_equal(got.numpy(), expected)


def test_indexing_with_tensors() -> None:
    a = arr((4, 3), 10)
    x = tp.tensor(a)
    np.testing.assert_array_equal(x[tp.tensor([3, 0])].numpy(), a[[3, 0]])
    mask = a[:, 0] > 0
    np.testing.assert_array_equal(x[tp.tensor(mask)].numpy(), a[mask])
    np.testing.assert_array_equal(x[x > 0].numpy(), a[a > 0])
    with pytest.raises(tp.DTypeError, match="int64, int32 or bool"):
        x[tp.tensor([0.0])]


def test_indexing_errors() -> None:
    x = tp.zeros(3, 4)
    with pytest.raises(tp.AxisError, match="index 3 is out of range for axis 0 of size 3"):
        x[3]
    with pytest.raises(tp.ShapeError, match="too many indices"):
        x[0, 0, 0]
    with pytest.raises(tp.ShapeError, match="single ellipsis"):
        x[..., ...]
    with pytest.raises(IndexError):
        x[tp.tensor([5])]


def test_iteration_and_bool() -> None:
    rows = list(tp.tensor([[1, 2], [3, 4]]))
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]
    assert bool(tp.tensor([1.0])) and not bool(tp.tensor(0.0))
    with pytest.raises(ValueError):
        bool(tp.zeros(2))


# ---- joins, where, programs ------------------------------------------------------------------------

def test_cat_stack_where_match_torch() -> None:
    a, b = arr((2, 3), 11), arr((2, 3), 12)
    ta, tb, xa, xb = tp.tensor(a), tp.tensor(b), torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_array_equal(tp.cat([ta, tb], 1).numpy(), torch.cat([xa, xb], 1).numpy())
    np.testing.assert_array_equal(tp.stack([ta, tb], -1).numpy(), torch.stack([xa, xb], -1).numpy())
    np.testing.assert_array_equal(tp.where(ta > 0, ta, 0.0).numpy(), torch.where(xa > 0, xa, 0.0).numpy())
    with pytest.raises(tp.ShapeError, match="stack"):
        tp.stack([ta, tp.zeros(3, 2)])
    with pytest.raises(tp.ShapeError, match="concat"):
        tp.cat([ta, tp.zeros(3, 2)], 1)


def test_program_decorator_runs_under_any_interpreter() -> None:
    @tp.program
    def affine(ops: Any, w: Any, b: Any, x: Any) -> Any:
        return ops.relu(ops.linear(w, b, x))

    w, b, x = tp.tensor(arr((5, 3), 1)), tp.tensor(arr((5,), 2)), tp.tensor(arr((7, 2, 3), 3))
    out = affine(w, b, x)
    assert out.shape == (7, 2, 5)
    np.testing.assert_array_equal(affine.run(tp.eager, w, b, x).numpy(), out.numpy())
    expected = torch.relu(torch.nn.functional.linear(torch.from_numpy(x.numpy()), torch.from_numpy(w.numpy()),
                                                     torch.from_numpy(b.numpy())))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    assert tp.ops_of(x) is tp.eager and tp.ops_of() is tp.eager


def test_inplace_ops_and_setitem_without_grad() -> None:
    x = tp.zeros(2, 3)
    view = x[0]
    x.add_(1.0)
    x.mul_(tp.tensor([1.0, 2.0, 3.0]))
    assert x.tolist() == [[1, 2, 3], [1, 2, 3]]
    assert view.tolist() == [1, 2, 3]  # a view shares memory with its base, as in PyTorch
    x[1] = 0.0
    x[0, 1:] = tp.tensor([9.0, 8.0])
    assert x.tolist() == [[1, 9, 8], [0, 0, 0]]
    x.zero_()
    assert x.sum().item() == 0
    i = tp.tensor([1, 2])
    with pytest.raises(tp.DTypeError):
        i.add_(0.5)
