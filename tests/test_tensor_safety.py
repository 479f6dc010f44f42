"""No silent wrong values at the tensor's edges: conversions to and from numpy, integer overflow,
gradient assignment, indexing with masks, writes with repeated indices, in-place ops on views of
leaves, and the clamp gradient. PyTorch (CPU) and numpy are the oracles."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.errors import AutogradError, DTypeError, ShapeError

# ---- numpy conversion (__array__) -------------------------------------------------------------


def test_numpy_copy_true_never_aliases() -> None:
    x = tp.tensor([1.0, 2.0])
    a = np.array(x, copy=True)
    a[0] = 5.0
    assert x.tolist() == [1.0, 2.0]
    b = np.asarray(x)  # copy=None shares memory for a plain eager tensor, as PyTorch's numpy()
    b[0] = 7.0
    assert x.tolist() == [7.0, 2.0]
    assert np.shares_memory(np.array(x, copy=False), x.numpy())


def test_numpy_of_a_tensor_that_requires_grad_is_a_copy() -> None:
    w = tp.ones(3, requires_grad=True)
    for array in (np.array(w, copy=True), np.asarray(w), np.asarray(w, dtype=np.float32)):
        array[0] = 5.0
    assert w.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="requires grad"):
        np.array(w, copy=False)
    (w * 2).sum().backward()
    assert w.grad is not None and w.grad.tolist() == [2.0, 2.0, 2.0]


def test_numpy_copy_false_with_another_dtype_raises() -> None:
    with pytest.raises(ValueError, match="float64"):
        np.array(tp.ones(2), dtype=np.float64, copy=False)
    assert np.array(tp.ones(2), dtype=np.float64).dtype == np.float64


# ---- integer overflow ---------------------------------------------------------------------------


@pytest.mark.parametrize("data, dtype", [
    ([2**63], None), (2**63, None), ([2**40], tp.int32), ([-(2**63) - 1], None), ([[1, 2**70]], None),
    ([1e20], tp.int64), ([2.0**63], tp.int64), ([2.0**31], tp.int32), ([float("nan")], tp.int32),
    ([float("inf")], tp.int64),
])
def test_tensor_refuses_integers_that_do_not_fit(data: Any, dtype: Any) -> None:
    with pytest.raises(OverflowError, match="tensor: (value|the int)"):
        tp.tensor(data, dtype=dtype)


@pytest.mark.parametrize("data, where", [
    ([[1, 2**63]], "[0][1]"), (((1, 2), (3, 2**63)), "[1][1]"), ([[[1, 2]], [[3, -(2**63) - 1]]], "[1][0][1]"),
    ([True, 2**64], "[1]"), ([(1, 2), [2**70, 0]], "[1][0]"),
])
def test_an_int_that_fits_no_integer_dtype_is_refused_with_its_position(data: Any, where: str) -> None:
    # numpy makes float64 (or uint64, or objects) of these; PyTorch refuses them
    with pytest.raises((ValueError, OverflowError, RuntimeError)):
        torch.tensor(data)
    with pytest.raises(OverflowError, match=rf"the int -?\d+ at index {re.escape(where)} fits no integer dtype"):
        tp.tensor(data)


def test_an_int_that_does_not_fit_a_given_dtype_names_its_position() -> None:
    data = [[1, 2], [3, 2**40]]
    with pytest.raises(RuntimeError, match="overflow"):
        torch.tensor(data, dtype=torch.int32)
    with pytest.raises(OverflowError, match=r"the int 1099511627776 at index \[1\]\[1\] does not fit int32"):
        tp.tensor(data, dtype=tp.int32)
    with pytest.raises(OverflowError, match=r"the int 9223372036854775808 at index \[1\] does not fit int64"):
        tp.tensor([1, 2**63], dtype=tp.int64)  # numpy's float64 would name 9.223372036854776e+18
    with pytest.raises(OverflowError, match=r"value 1099511627776 at index \[1\]\[1\] does not fit int32"):
        tp.tensor(np.array(data), dtype=tp.int32)
    with pytest.raises(OverflowError, match=r"value nan at index \[0\]\[1\] cannot be converted to int32"):
        tp.tensor(np.array([[1.0, np.nan]]), dtype=tp.int32)


@pytest.mark.parametrize("data, dtype", [([1.5, 2**70], None), ([1.5, 2**63], None), ([2**63, 2**64], tp.float64),
                                         ([1, -(2**70)], tp.float32), ([2**70, 0], tp.bool)])
def test_big_ints_with_floats_or_a_float_dtype_become_floats_as_in_pytorch(data: Any, dtype: Any) -> None:
    want = torch.tensor(data, dtype=None if dtype is None else getattr(torch, dtype.name))
    got = tp.tensor(data, dtype=dtype)
    assert got.dtype.name == str(want.dtype).removeprefix("torch.")
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("dtype", [None, tp.float64])
def test_an_int_too_large_for_any_float_is_refused_with_its_position(dtype: Any) -> None:
    with pytest.raises(OverflowError):
        torch.tensor([1.5, 10**400], dtype=None if dtype is None else torch.float64)
    with pytest.raises(OverflowError, match=r"at index \[1\] is too large for any float dtype"):
        tp.tensor([1.5, 10**400], dtype=dtype)


@pytest.mark.parametrize("make", [
    lambda m: m.full((2,), 2**63), lambda m: m.full((2,), -(2**63) - 1), lambda m: m.full((2,), 2**40, dtype=m.int32),
    lambda m: m.full((2,), float("inf"), dtype=m.int32), lambda m: m.full((2,), 1e300, dtype=m.float32),
    lambda m: m.full_like(m.ones(2, dtype=m.int32), 2**40), lambda m: m.full_like(m.ones(2, dtype=m.int64), 2**63),
    lambda m: m.ones(2, dtype=m.int32).fill_(2**40), lambda m: m.ones(2, dtype=m.int32).fill_(float("nan")),
    lambda m: m.ones(2).fill_(1e300), lambda m: m.ones(2, dtype=m.int32).masked_fill(m.tensor([True, False]), 2**40),
    lambda m: m.arange(2**63, 2**63 + 2), lambda m: m.arange(0, 2**63 + 5, 2**62),
])
def test_fill_values_the_dtype_cannot_hold_are_refused_as_in_pytorch(make: Any) -> None:
    with pytest.raises((RuntimeError, OverflowError)):
        make(torch)
    with pytest.raises(OverflowError, match="does not fit|cannot be converted|beyond the range"):
        make(tp)


def test_where_refuses_a_scalar_its_result_dtype_cannot_hold_as_pytorch() -> None:
    mask = [True, False]
    with pytest.raises(RuntimeError, match="overflow"):
        torch.where(torch.tensor(mask), torch.tensor([1, 2]), 2**63)
    with pytest.raises(OverflowError, match="where: scalar operand: the int 9223372036854775808 does not fit int64"):
        tp.where(tp.tensor(mask), tp.tensor([1, 2]), 2**63)  # numpy wrapped it to -2**63
    assert tp.where(tp.tensor(mask), tp.tensor([1, 2]), 2**62).tolist() == [1, 2**62]


@pytest.mark.parametrize("op", [lambda a, s: a + s, lambda a, s: s - a, lambda a, s: a * s])
def test_arithmetic_with_an_int_scalar_beyond_the_dtype_names_it(op: Any) -> None:
    # the exact answer fits no int64; PyTorch wraps it around silently, numpy raised a message without the op
    with pytest.raises(OverflowError, match=r"(add|sub|mul): scalar operand: the int 9223372036854775808 does not fit"):
        op(tp.tensor([1, 2]), 2**63)
    with pytest.raises(OverflowError, match=r"scalar operand: the int 2147483648 does not fit int32"):
        op(tp.tensor([1, 2], dtype=tp.int32), 2**31)
    with pytest.raises(OverflowError, match="scalar operand: .* is too large for any float dtype"):
        op(tp.tensor([1.0, 2.0]), 10**400)
    assert op(tp.tensor([1, 2]), 2**40).tolist() == op(torch.tensor([1, 2]), 2**40).tolist()
    x = tp.tensor([1, 2])  # a comparison with such an int is exact (Python's answer), not refused
    assert (x < 2**63).tolist() == [True, True] and (x == 2**63).tolist() == [False, False]
    assert (x > -(2**70)).tolist() == [True, True]


def test_full_refuses_only_the_values_that_do_not_fit() -> None:
    with pytest.raises(OverflowError, match="does not fit int64"):
        tp.full((2,), 2**63)
    assert tp.full((2,), 2**63 - 1).tolist() == [2**63 - 1] * 2
    assert tp.full((1,), 2**63, dtype=tp.float32).tolist() == torch.full((1,), 2**63, dtype=torch.float32).tolist()
    assert tp.full((1,), 2.7, dtype=tp.int32).tolist() == torch.full((1,), 2.7, dtype=torch.int32).tolist()
    mask = [True, False]
    assert (tp.ones(2, dtype=tp.int32).masked_fill(tp.tensor(mask), 2**31 - 1).tolist()
            == torch.ones(2, dtype=torch.int32).masked_fill(torch.tensor(mask), 2**31 - 1).tolist())


def test_integers_at_the_limits_are_exact() -> None:
    assert tp.tensor([-(2**63), 2**63 - 1]).tolist() == [-(2**63), 2**63 - 1]
    assert tp.tensor([2**31 - 1], dtype=tp.int32).tolist() == [2**31 - 1]
    assert tp.tensor([3.7, -3.7], dtype=tp.int32).tolist() == torch.tensor([3.7, -3.7], dtype=torch.int32).tolist()


def test_arange_refuses_values_past_its_dtype() -> None:
    with pytest.raises(OverflowError, match="arange"):
        tp.arange(2**31, 2**31 + 2, dtype=tp.int32)
    assert tp.arange(2**31 - 2, 2**31, dtype=tp.int64).tolist() == [2**31 - 2, 2**31 - 1]


# ---- numpy subclasses ---------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
def test_from_numpy_views_subclasses_as_plain_arrays() -> None:
    m = np.matrix([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    t = tp.from_numpy(m)
    assert type(t.numpy()) is np.ndarray
    assert t[0].shape == (2,) and t.sum(0).shape == (2,)  # a matrix would keep rows 2-d
    m[0, 0] = 9.0
    assert t[0, 0].item() == 9.0  # still shares memory


@pytest.mark.parametrize("make", [tp.from_numpy, tp.tensor, tp.nn.Parameter, lambda a: tp.ones(2) + a,
                                  lambda a: tp.index(a.astype(np.int64), bound=5)])
def test_masked_arrays_are_refused(make: Any) -> None:
    masked = np.ma.array(np.array([1.0, 2.0], dtype=np.float32), mask=[False, True])
    with pytest.raises(DTypeError, match="masked array"):
        make(masked)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix
def test_load_state_dict_does_not_keep_a_subclass_as_payload() -> None:
    lin = tp.nn.Linear(2, 1)
    lin.load_state_dict({"weight": np.matrix([[1.0, 2.0]], dtype=np.float32),
                         "bias": np.array([0.0], dtype=np.float32)}, assign=True)
    assert type(lin.weight.detach().numpy()) is np.ndarray
    assert lin(tp.ones(3, 2)).shape == (3, 1)


# ---- gradient assignment ------------------------------------------------------------------------


def test_grad_setter_checks_type_shape_and_dtype() -> None:
    p = tp.ones(2, 3, requires_grad=True)
    with pytest.raises(ShapeError, match=r"shape \[3\], expected the tensor's shape \[2, 3\]"):
        p.grad = tp.ones(3)
    with pytest.raises(DTypeError, match="float64, expected the tensor's dtype tensorplay.float32"):
        p.grad = tp.ones(2, 3, dtype=tp.float64)
    with pytest.raises(DTypeError, match="expected a Tensor or None, got ndarray"):
        p.grad = np.ones((2, 3), dtype=np.float32)  # type: ignore[assignment]
    p.grad = tp.full((2, 3), 0.5)
    tp.optim.SGD([p], lr=1.0).step()
    np.testing.assert_allclose(p.detach().numpy(), np.full((2, 3), 0.5))
    p.grad = None
    assert p.grad is None


# ---- indexing with a bool mask and other items --------------------------------------------------

_RNG = np.random.default_rng(0)
_M3 = np.array([True, False, True])
_M4 = np.array([True, False, True, True])
_M5 = np.array([True, False, False, True, True])
_M34 = _RNG.random((3, 4)) > 0.5
_M45 = _RNG.random((4, 5)) > 0.4
MASK_KEYS: list[tuple[Any, ...]] = [
    (_M3, 0), (slice(1, None), _M4), (0, _M4), (None, _M3), (_M3,), (_M34,), (_M34, 1), (Ellipsis, _M5),
    (0, _M45), (None, _M34, None), (slice(None), _M45), (_M3, Ellipsis, 0), (1, _M4, 2), (_M3, slice(None, None, 2)),
    (np.array(True),), (np.array(False),), (0, np.array(True)), (slice(0, 2), _M4, slice(1, 4)),
]


def _as_tensors(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(tp.tensor(k) if isinstance(k, np.ndarray) else k for k in key)


@pytest.mark.parametrize("key", MASK_KEYS, ids=lambda k: "-".join(type(i).__name__ for i in k))
def test_bool_mask_with_other_items_follows_numpy(key: tuple[Any, ...]) -> None:
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    expected = x[key]
    np.testing.assert_array_equal(tp.tensor(x)[_as_tensors(key)].numpy(), expected)
    # the same selection recorded in execute mode (the mask is read once, as a guard), and its gradient
    gm = tp.graph.trace(lambda t, *k: t[k], tp.tensor(x), *[k for k in _as_tensors(key)], execute=True)
    np.testing.assert_array_equal(gm(tp.tensor(x), *_as_tensors(key)).numpy(), expected)
    w = tp.tensor(x, requires_grad=True)
    w[_as_tensors(key)].sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    xt[tuple(torch.tensor(k) if isinstance(k, np.ndarray) else k for k in key)].sum().backward()
    assert w.grad is not None and xt.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), xt.grad.numpy())


@pytest.mark.parametrize("key", [(0, slice(None), [1, 2]), (0, None, [1, 2]), (0, Ellipsis, [1, 2]),
                                 (0, slice(None), _M5)], ids=["int-slice-list", "int-None-list",
                                                              "int-ellipsis-list", "int-slice-mask"])
def test_int_and_tensor_index_split_by_a_slice_are_refused(key: tuple[Any, ...]) -> None:
    # numpy puts the index axes first, PyTorch in place: no silent choice
    x = tp.zeros(3, 4, 5)
    with pytest.raises(ShapeError, match="numpy .* and PyTorch"):
        x[_as_tensors(key)]
    assert x[0][:, [1, 2]].shape == (4, 2)


@pytest.mark.parametrize("key", [([1, 2], slice(None), 0), (slice(None), 0, [1, 2]), (0, [1, 2], 1),
                                 ([0, 2], None, 0)])
def test_int_and_tensor_index_where_numpy_and_pytorch_agree(key: tuple[Any, ...]) -> None:
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    np.testing.assert_array_equal(tp.tensor(x)[key].numpy(), x[key])
    np.testing.assert_array_equal(tp.tensor(x)[key].numpy(), torch.tensor(x)[key].numpy())


def test_an_empty_list_index_selects_nothing() -> None:
    x = tp.ones(3, 4)
    assert x[[]].shape == (0, 4) == tuple(torch.ones(3, 4)[[]].shape)
    assert x[1, []].shape == (0,)


# ---- writes with repeated indices ---------------------------------------------------------------

REPEATS: list[Any] = [[0, 0], [2, 0, 2, 2], np.array([[1, 1], [0, 1]])]


def _numpy_write(base: np.ndarray[Any, Any], index: Any, value: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    out = base.copy()
    out[index] = value
    return out


@pytest.mark.parametrize("index", REPEATS, ids=["twice", "three-times", "2d"])
def test_repeated_index_writes_take_the_last_value_in_every_mode(index: Any) -> None:
    from tensorplay.testing import numerical_vjp

    base = np.array([5.0, 6.0, 7.0])
    value = np.arange(1.0, 1.0 + np.size(index)).reshape(np.shape(index))
    expected = _numpy_write(base, index, value)
    weights = np.array([1.0, 10.0, 100.0])

    def write(a: Any, b: Any) -> Any:
        out = a * 1
        out[index] = b
        return out

    plain = tp.tensor(base)
    plain[index] = tp.tensor(value)
    np.testing.assert_array_equal(plain.numpy(), expected)
    a, b = tp.tensor(base, requires_grad=True), tp.tensor(value, requires_grad=True)
    taped = write(a, b)
    np.testing.assert_array_equal(taped.detach().numpy(), expected)
    (taped * tp.tensor(weights)).sum().backward()
    gm = tp.graph.trace(write, tp.tensor(base), tp.tensor(value))
    np.testing.assert_array_equal(gm(tp.tensor(base), tp.tensor(value)).numpy(), expected)
    batched = tp.func.vmap(write)(tp.tensor(np.stack([base, base + 1])), tp.tensor(np.stack([value, -value])))
    np.testing.assert_array_equal(batched.numpy(), np.stack([expected, _numpy_write(base + 1, index, -value)]))
    fgrads = tp.func.grad(lambda x, y: (write(x, y) * tp.tensor(weights)).sum(), argnums=(0, 1))(
        tp.tensor(base), tp.tensor(value))

    numerics = numerical_vjp(lambda x, y: write(x, y) * tp.tensor(weights), (tp.tensor(base), tp.tensor(value)),
                             np.ones(3))
    for taped_grad, func_grad, numeric in [(a.grad, fgrads[0], numerics[0]), (b.grad, fgrads[1], numerics[1])]:
        assert taped_grad is not None
        np.testing.assert_allclose(taped_grad.numpy(), numeric, atol=1e-6)
        np.testing.assert_allclose(func_grad.numpy(), numeric, atol=1e-6)
    tangent = tp.func.jvp(write, (tp.tensor(base), tp.tensor(value)), (tp.zeros(3, dtype=tp.float64),
                                                                      tp.tensor(np.ones_like(value))))[1]
    np.testing.assert_array_equal(tangent.numpy(), _numpy_write(np.zeros(3), index, np.ones_like(value)))


# ---- clamp's gradient ---------------------------------------------------------------------------

CLAMP_POINTS = [-1.0, 0.0, 0.25, 1.0, 2.0]  # below, on the lower bound, inside, on the upper bound, above


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (0.0, None), (None, 1.0), (2.0, 0.0)])
def test_clamp_gradient_is_one_on_the_bounds_in_every_mode(bounds: tuple[Any, Any]) -> None:
    lo, hi = bounds
    t = torch.tensor(CLAMP_POINTS, dtype=torch.float64, requires_grad=True)
    t.clamp(lo, hi).sum().backward()
    assert t.grad is not None
    expected_value, expected_grad = t.clamp(lo, hi).detach().numpy(), t.grad.numpy()
    x = tp.tensor(CLAMP_POINTS, dtype=tp.float64, requires_grad=True)
    y = x.clamp(lo, hi)
    y.sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), expected_value)
    assert x.grad is not None
    np.testing.assert_array_equal(x.grad.numpy(), expected_grad)
    plain = tp.tensor(CLAMP_POINTS, dtype=tp.float64)
    np.testing.assert_array_equal(tp.func.grad(lambda v: v.clamp(lo, hi).sum())(plain).numpy(), expected_grad)
    tangent = tp.func.jvp(lambda v: v.clamp(lo, hi), (plain,), (tp.ones(5, dtype=tp.float64),))[1]
    np.testing.assert_array_equal(tangent.numpy(), expected_grad)
    per_row = tp.func.vmap(tp.func.grad(lambda v: v.clamp(lo, hi).sum()))(tp.stack([plain, plain]))
    np.testing.assert_array_equal(per_row.numpy(), np.stack([expected_grad, expected_grad]))
    gm = tp.graph.trace(lambda v: v.clamp(lo, hi), plain)
    np.testing.assert_array_equal(gm(plain).numpy(), expected_value)
    z = tp.tensor(CLAMP_POINTS, dtype=tp.float64, requires_grad=True)
    w = z * 1.0
    w.clamp_(lo, hi)  # in place: the same value and gradient
    w.sum().backward()
    np.testing.assert_array_equal(w.detach().numpy(), expected_value)
    assert z.grad is not None
    np.testing.assert_array_equal(z.grad.numpy(), expected_grad)


def test_clamp_keeps_nan_and_integer_dtypes() -> None:
    assert np.isnan(tp.tensor([float("nan")]).clamp(0.0, 1.0).item())
    assert tp.tensor([1, 5, -3]).clamp(0, 2).tolist() == [1, 2, 0]
    assert tp.tensor([1, 5, -3]).clamp(0, 2).dtype == tp.int64


# ---- in-place operations through views of leaves -------------------------------------------------

VIEW_WRITES = {
    "slice-mul_": lambda w: w[0:2].mul_(3.0),
    "transpose-zero_": lambda w: w.reshape(2, 2).T.zero_(),
    "view-add_": lambda w: w.view(2, 2)[0].add_(1.0),
    "slice-setitem": lambda w: w[1:].__setitem__(0, 5.0),
    "slice-copy_": lambda w: w[2:].copy_(tp.zeros(2)),
    "slice-clamp_": lambda w: w[1:3].clamp_(0.0, 0.5),
}


@pytest.mark.parametrize("write", VIEW_WRITES.values(), ids=list(VIEW_WRITES))
def test_in_place_through_a_view_of_a_leaf_that_requires_grad_is_refused(write: Any) -> None:
    w = tp.ones(4, requires_grad=True)
    with pytest.raises(AutogradError, match="a view of a leaf tensor that requires grad"):
        write(w)
    assert w.tolist() == [1.0, 1.0, 1.0, 1.0]
    tw = torch.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        tw[0:2].mul_(3.0)
    with tp.no_grad():
        write(w)  # allowed outside grad mode, as PyTorch (an optimizer-style update)
    assert w.tolist() != [1.0, 1.0, 1.0, 1.0]
    detached = tp.ones(4, requires_grad=True).detach()
    write(detached)  # a view of a tensor that needs no grad: fine


# ---- gradients made with create_graph -----------------------------------------------------------

def test_create_graph_gradients_are_separate_and_writeable() -> None:
    a, b = tp.ones(2, requires_grad=True), tp.ones(2, requires_grad=True)
    (a + b).sum().backward(create_graph=True)
    assert a.grad is not None and b.grad is not None
    assert not np.shares_memory(a.grad.detach().numpy(), b.grad.detach().numpy())
    a.grad.detach().numpy()[0] = 9.0  # writing one gradient leaves the other alone
    assert b.grad.tolist() == [1.0, 1.0]
    for reset in (tp.optim.SGD([a, b], lr=0.1).zero_grad, tp.nn.Linear(1, 1).zero_grad):
        reset(set_to_none=False)
    tp.optim.SGD([a, b], lr=0.1).zero_grad(set_to_none=False)
    assert a.grad.tolist() == [0.0, 0.0] and b.grad.tolist() == [0.0, 0.0]
    c = tp.ones(3, requires_grad=True)
    (c * 2).sum().backward(create_graph=True)  # the gradient is a broadcast (read-only) view
    model = tp.nn.Linear(3, 1)
    model.weight.grad = tp.tensor([[1.0, 2.0, 3.0]])
    model.zero_grad(set_to_none=False)
    assert model.weight.grad is not None and model.weight.grad.tolist() == [[0.0, 0.0, 0.0]]
    tp.optim.SGD([c], lr=0.1).zero_grad(set_to_none=False)
    assert c.grad is not None and c.grad.tolist() == [0.0, 0.0, 0.0]
