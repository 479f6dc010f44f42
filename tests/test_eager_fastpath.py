"""The eager interpreter's shortcuts for Tensor methods and ``nn.functional`` calls on small tensors
(:mod:`tensorplay.interpreters.eager.fastpath`, :mod:`tensorplay.interpreters.eager.losses`).

Each shortcut must give what the generic path gives (``BaseInterpreter``'s entry points, which compose
primitives through ``tensorplay.derived``): values, dtype, shape, gradients, and the same errors for bad
input. Views must share the input's memory. Expected values come from the generic path, ``spec`` and
PyTorch; float32 and float64, non-contiguous and zero-size inputs."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.interpreter import BaseInterpreter
from tensorplay.interpreters.eager.interpreter import aval_of
from tensorplay.spec import SPECS
from tests.helpers import on_one_then_two_threads

torch = pytest.importorskip("torch")
TF = torch.nn.functional
eager = tp.eager
generic = BaseInterpreter  # its entry points compose primitives (the path the shortcuts must match)
DTYPES = (np.float32, np.float64)


def data(shape: tuple[int, ...], dtype: Any = np.float32, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def layouts(shape: tuple[int, ...], dtype: Any) -> list[np.ndarray[Any, Any]]:
    """A C-contiguous array and a non-contiguous one (a transpose of the reversed shape) of ``shape``."""
    base = data(shape, dtype)
    transposed = np.ascontiguousarray(base.T).T
    assert not transposed.flags.c_contiguous or base.ndim < 2
    return [base, transposed]


def same(fast: Any, slow: Any) -> None:
    """Equal values, dtype and shape (NaN equal to NaN)."""
    a, b = np.asarray(fast.detach().numpy()), np.asarray(slow.detach().numpy())
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


def same_error(fast: Callable[[], Any], slow: Callable[[], Any]) -> None:
    """``fast`` raises what ``slow`` (the generic path) raises: the type and the message."""
    with pytest.raises(Exception) as expected:
        slow()
    with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
        fast()


# ---- views ------------------------------------------------------------------------------------------

VIEW_OPS: dict[str, Callable[[Any], Any]] = {
    "x[1:3]": lambda x: x[1:3],
    "x[:, None]": lambda x: x[:, None],
    "x.T": lambda x: x.T,
    "x.reshape(-1)": lambda x: x.reshape(-1),
    "x.reshape(2, -1)": lambda x: x.reshape(2, -1),
    "x.unsqueeze(0)": lambda x: x.unsqueeze(0),
    "x[1]": lambda x: x[1],
    "x[..., 1]": lambda x: x[..., 1],
    "x[1, 2]": lambda x: x[1, 2],
    "x.permute(1, 0)": lambda x: x.permute(1, 0),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_views_share_memory_with_a_contiguous_input(name: str, dtype: Any) -> None:
    x = tp.tensor(data((4, 6), dtype))
    y = VIEW_OPS[name](x)
    assert np.shares_memory(y.numpy(), x.numpy())
    assert y.dtype == x.dtype


@pytest.mark.parametrize("name", list(VIEW_OPS))
def test_views_with_grad_share_memory_and_record_a_view(name: str) -> None:
    x = tp.tensor(data((4, 6), np.float64), requires_grad=True)
    y = VIEW_OPS[name](x)
    assert np.shares_memory(y.detach().numpy(), x.detach().numpy())
    assert y.grad_fn is not None
    w = data(tuple(y.shape), np.float64, seed=3)
    (y * tp.tensor(w)).sum().backward()
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    yt = VIEW_OPS[name](xt)
    (yt * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())


def test_a_view_writes_through_and_shares_the_version_counter() -> None:
    x = tp.tensor(np.zeros((3, 4), np.float32))
    y = x[1:3]
    y[0, 0] = 5.0
    assert x.numpy()[1, 0] == 5.0
    z = x.T
    z.add_(1.0)
    assert x.numpy()[0, 0] == 1.0


KEYS: list[Any] = [
    1, -1, slice(1, 3), slice(None, None, -1), slice(None, None, 2), slice(5, 1, -2), slice(3, 1), Ellipsis, None,
    (slice(None), None), (None, 1), (Ellipsis, 1), (1, Ellipsis), (slice(1, None), slice(None, None, -1)),
    (-1, -2), (0, slice(1, 2), None), (Ellipsis, None), (slice(None), slice(None)), (slice(0, 10),),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_basic_indexing_matches_the_generic_path(key: Any, dtype: Any) -> None:
    for array in layouts((4, 5), dtype):
        for grad in (False, True):
            x = tp.tensor(array, requires_grad=grad)
            fast, slow = x[key], generic.tensor_getitem(eager, x, key)
            same(fast, slow)
            np.testing.assert_array_equal(fast.detach().numpy(), array[key])
            if grad:  # one node that keeps the key (the generic path: slice and reshape nodes, or x itself)
                assert fast._node is not None and fast._node.name == "basic_index" and fast is not x
                assert len(fast._node.edges) == 1 and fast._node.edges[0] is x
                w = tp.tensor(data(tuple(fast.shape), dtype, seed=2))
                g_fast, = tp.autograd.grad((fast * w).sum(), x)
                g_slow, = tp.autograd.grad((slow * w).sum(), x)
                same(g_fast, g_slow)


def test_indexing_a_zero_size_tensor_and_a_0d_result() -> None:
    x = tp.tensor(np.zeros((0, 3), np.float32))
    same(x[1:3], generic.tensor_getitem(eager, x, slice(1, 3)))
    v = tp.tensor(np.arange(4.0))
    y = v[2]
    assert y.shape == () and y.item() == 2.0 and np.shares_memory(y.numpy(), v.numpy())


@pytest.mark.parametrize("key", [10, -7, (1, 2, 3), 1.5, (Ellipsis, Ellipsis), True, np.int64(1), slice(0, 2, 0),
                                 slice(1.0, 2)], ids=repr)
def test_bad_or_unusual_basic_keys_behave_as_the_generic_path(key: Any) -> None:
    x = tp.tensor(data((4, 5)))
    try:
        expected = generic.tensor_getitem(eager, x, key)
    except Exception:
        same_error(lambda: x[key], lambda: generic.tensor_getitem(eager, x, key))
    else:
        same(x[key], expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("index_dtype", [np.int64, np.int32])
def test_tensor_index_is_a_gather_with_its_gradient(dtype: Any, index_dtype: Any) -> None:
    for array in layouts((4, 3), dtype):
        idx = tp.tensor(np.array([[1, -1], [0, 1]], index_dtype))
        x = tp.tensor(array, requires_grad=True)
        y = x[idx]
        same(y, generic.tensor_getitem(eager, x, idx))
        assert y.grad_fn is not None
        y.sum().backward()
        xt = torch.tensor(array, requires_grad=True)
        xt[torch.tensor(idx.numpy().astype(np.int64))].sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    empty = tp.tensor(np.zeros(0, np.int64))
    same(tp.tensor(data((4, 3)))[empty], generic.tensor_getitem(eager, tp.tensor(data((4, 3))), empty))


def test_tensor_index_errors_are_the_generic_ones() -> None:
    x = tp.tensor(data((4, 3)))
    for idx in (tp.tensor(np.array([0, 4])), tp.tensor(np.array([-5])), tp.tensor(np.array([0.5]))):
        same_error(lambda: x[idx], lambda: generic.tensor_getitem(eager, x, idx))
    scalar = tp.tensor(np.float32(1.0))
    same_error(lambda: scalar[tp.tensor(np.array([0]))],
               lambda: generic.tensor_getitem(eager, scalar, tp.tensor(np.array([0]))))


@pytest.mark.parametrize("shape", [(-1,), ((2, -1),), (3, 8), ((24,),), ([4, 6],), (4, 6), (), (True, 24),
                                   (2.0, 12), (-1, -1), (5, -1), (-2, 12), (np.int64(24),)], ids=repr)
def test_reshape_matches_the_generic_path_and_its_errors(shape: tuple[Any, ...]) -> None:
    for array in layouts((4, 6), np.float32):
        x = tp.tensor(array)
        try:
            expected = generic.tensor_reshape(eager, x, shape)
        except Exception:
            same_error(lambda: x.reshape(*shape), lambda: generic.tensor_reshape(eager, x, shape))
            continue
        got = x.reshape(*shape)
        same(got, expected)
        if array.flags.c_contiguous:
            assert np.shares_memory(got.numpy(), x.numpy())
    z = tp.tensor(np.zeros((0, 3), np.float64))
    same(z.reshape(-1), generic.tensor_reshape(eager, z, (-1,)))
    same_error(lambda: z.reshape(-1, 0), lambda: generic.tensor_reshape(eager, z, (-1, 0)))


def test_reshape_to_the_same_shape_is_the_tensor_itself() -> None:
    x = tp.tensor(data((2, 3)), requires_grad=True)
    assert x.reshape(2, 3) is x and x.reshape(2, -1) is x


@pytest.mark.parametrize("dims", [(1, 0), (-1, 0), (0, 1), ((1, 0),), (0, 0), (2, 0), (1,), (1.0, 0)], ids=repr)
def test_permute_matches_the_generic_path_and_its_errors(dims: tuple[Any, ...]) -> None:
    x = tp.tensor(data((3, 4)), requires_grad=True)
    try:
        expected = generic.tensor_permute(eager, x, dims)
    except Exception:
        same_error(lambda: x.permute(*dims), lambda: generic.tensor_permute(eager, x, dims))
        return
    same(x.permute(*dims), expected)


def test_transpose_of_ranks_0_to_3() -> None:
    for shape in [(), (3,), (2, 3), (2, 3, 4)]:
        x = tp.tensor(data(shape, np.float64))
        np.testing.assert_array_equal(x.T.numpy(), data(shape, np.float64).T)
        assert np.shares_memory(x.T.numpy(), x.numpy())
        same(x.T, generic.tensor_permute(eager, x, None))


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3, 3, -4, 1.0, True], ids=repr)
def test_unsqueeze_matches_the_generic_path_and_its_errors(dim: Any) -> None:
    x = tp.tensor(data((2, 3)))
    try:
        expected = generic.tensor_unsqueeze(eager, x, dim)
    except Exception:
        same_error(lambda: x.unsqueeze(dim), lambda: generic.tensor_unsqueeze(eager, x, dim))
        return
    same(x.unsqueeze(dim), expected)


# ---- reductions ---------------------------------------------------------------------------------------

REDUCTIONS: dict[str, Callable[..., Any]] = {
    "sum": lambda x, *a: x.sum(*a), "mean": lambda x, *a: x.mean(*a), "amax": lambda x, *a: x.amax(*a),
    "amin": lambda x, *a: x.amin(*a),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(REDUCTIONS))
@pytest.mark.parametrize("args", [(), (0,), (-1,), (1, True), (None, True), ((0, 1),), (2,)], ids=repr)
def test_reductions_match_pytorch_and_the_generic_path(name: str, args: tuple[Any, ...], dtype: Any) -> None:
    for array in layouts((3, 4), dtype):
        x = tp.tensor(array, requires_grad=True)
        slow_entry = {"mean": lambda: generic.tensor_mean(eager, x, *(args + (None, False)[len(args):]))}.get(
            name, lambda: generic.tensor_reduce(eager, {"sum": "reduce_sum", "amax": "reduce_max",
                                                        "amin": "reduce_min"}[name], x,
                                                *(args + (None, False)[len(args):])))
        try:
            slow = slow_entry()
        except Exception:
            same_error(lambda: REDUCTIONS[name](x, *args), slow_entry)
            continue
        fast = REDUCTIONS[name](x, *args)
        np.testing.assert_allclose(fast.detach().numpy(), slow.detach().numpy(), rtol=1e-6)
        assert fast.dtype == slow.dtype and fast.shape == slow.shape
        xt = torch.tensor(array, requires_grad=True)
        targs = tuple(a for a in args if a is not None) if args[:1] != (None,) else ()
        yt = getattr(xt, name)(*targs) if args[:1] != (None,) else getattr(xt, name)()
        if args == (None, True):
            yt = yt.reshape([1, 1])
        np.testing.assert_allclose(fast.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
        fast.sum().backward()
        yt.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


def test_reductions_of_zero_size_and_integer_tensors() -> None:
    z = tp.tensor(np.zeros((0, 3), np.float32))
    same(z.sum(0), generic.tensor_reduce(eager, "reduce_sum", z, 0, False))
    same(z.sum(), generic.tensor_reduce(eager, "reduce_sum", z, None, False))
    same(z.amax(1), generic.tensor_reduce(eager, "reduce_max", z, 1, False))
    same_error(lambda: z.amax(0), lambda: generic.tensor_reduce(eager, "reduce_max", z, 0, False))
    assert np.isnan(z.mean(0).numpy()).all()
    i = tp.tensor(np.array([[1, 2], [3, 4]], np.int32))
    same(i.sum(1), generic.tensor_reduce(eager, "reduce_sum", i, 1, False))
    assert i.sum().dtype == tp.int64
    same_error(lambda: i.mean(0), lambda: generic.tensor_mean(eager, i, 0, False))


def _bits(a: Any) -> bytes:
    """The bytes of an array (``-0`` differs from ``+0``, NaNs compare by payload), with its dtype and shape."""
    a = np.asarray(a)
    return a.dtype.str.encode() + repr(a.shape).encode() + a.tobytes()


def _spread(shape: tuple[int, ...], dtype: Any, seed: int = 0) -> np.ndarray[Any, Any]:
    """Values over many magnitudes and both signs, where the order of the additions shows in the last bits."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 10.0 ** rng.uniform(-4, 4, shape)).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_sum_is_numpys_sum_bit_for_bit(dtype: Any) -> None:
    """The jitted pairwise sums add in numpy's order: every length through the 8-wide blocks, the 128-item
    blocks and the halving beyond them, whole arrays and rows, signed zeros and subnormals included."""
    from tensorplay.interpreters.eager.fastpath import small_sum

    for n in list(range(1, 300)) + [1000, 4095, 4096, 4097, 65535, 1 << 16]:
        x = _spread((n,), dtype, seed=n)
        assert _bits(small_sum(x, (0,), False)) == _bits(np.add.reduce(x, axis=(0,)))
        assert _bits(small_sum(x, (0,), True)) == _bits(np.add.reduce(x, axis=(0,), keepdims=True))
    for shape in ((2, 4), (64, 64), (3, 5, 7), (5, 1), (7, 129), (2, 300), (1, 1000), (16, 4096)):
        x = _spread(shape, dtype, seed=len(shape))
        every = tuple(range(len(shape)))
        last = (len(shape) - 1,)
        for keepdim in (False, True):
            assert _bits(small_sum(x, every, keepdim)) == _bits(np.add.reduce(x, axis=every, keepdims=keepdim))
            assert _bits(small_sum(x, last, keepdim)) == _bits(np.add.reduce(x, axis=last, keepdims=keepdim))
    tiny = np.finfo(dtype).smallest_subnormal
    for special in ([-0.0] * 9, [-0.0], [-0.0] * 130, [tiny, -tiny, tiny] * 5, [1.0, -1.0] * 70):
        x = np.array(special, dtype)
        assert _bits(small_sum(x, (0,), False)) == _bits(np.add.reduce(x, axis=(0,)))
        rows = np.stack([x, -x])
        assert _bits(small_sum(rows, (1,), False)) == _bits(np.add.reduce(rows, axis=(1,)))


def test_small_sum_leaves_other_inputs_to_numpy() -> None:
    """``None`` (the caller's numpy reduction) for what the kernels do not cover, and for sums that are not
    finite, whose warnings numpy must give."""
    from tensorplay.interpreters.eager.fastpath import SMALL_SUM_MAX, small_sum

    x = data((4, 6))
    assert small_sum(x.T, (0, 1), False) is None  # not row-major
    assert small_sum(x, (0,), False) is None  # not the last axis
    assert small_sum(np.zeros((0, 3), np.float32), (1,), False) is None
    assert small_sum(np.array(2.0, np.float32), (), False) is None
    assert small_sum(np.ones((2, 3), np.int64), (1,), False) is None
    assert small_sum(np.ones(SMALL_SUM_MAX + 1, np.float32), (0,), False) is None
    for bad in ([np.inf, -np.inf], [np.nan, 1.0], [3e38, 3e38]):
        values = np.array(bad, np.float32)
        assert small_sum(values, (0,), False) is None
        assert small_sum(np.stack([np.ones(2, np.float32), values]), (1,), False) is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_shortcut_equals_the_generic_path(dtype: Any) -> None:
    """``x.sum()``/``x.sum(-1)`` give the generic path's bits, dtype, shape, node and gradient; transposed,
    empty and 0-d inputs, with and without grad mode."""
    arrays = [_spread((2, 4), dtype), _spread((64, 64), dtype), _spread((3, 5, 7), dtype), np.float32(1.5).astype(dtype),
              np.zeros((0, 4), dtype), np.full((2, 9), -0.0, dtype)] + layouts((3, 4), dtype)
    for array in arrays:
        for args in ((), (-1,), (-1, True), (None, True)):
            x = tp.tensor(array, requires_grad=True)
            dim, keepdim = (args + (None, False)[len(args):])
            fast = x.sum(*args)
            slow = generic.tensor_reduce(eager, "reduce_sum", x, dim, keepdim)
            assert _bits(fast.detach().numpy()) == _bits(slow.detach().numpy())
            assert fast.grad_fn is not None and repr(fast.grad_fn) == repr(slow.grad_fn)
            w = _spread(tuple(fast.shape), dtype, seed=3)
            g_fast, = tp.autograd.grad((fast * tp.tensor(w)).sum(), x)
            g_slow, = tp.autograd.grad((slow * tp.tensor(w)).sum(), x)
            assert _bits(g_fast.numpy()) == _bits(g_slow.numpy())
            with tp.no_grad():
                assert x.sum(*args).grad_fn is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_shortcut_gives_numpys_warnings_and_values_for_inf_and_nan(dtype: Any) -> None:
    big = np.finfo(dtype).max
    for values in ([np.inf, -np.inf, 1.0], [np.nan, 1.0, 2.0], [big, big, 0.0], [np.inf, 1.0, 2.0]):
        x = tp.tensor(np.array([values, [1.0, 2.0, 3.0]], dtype))
        for args in ((), (-1,)):
            dim = args[0] if args else None
            with warnings.catch_warnings(record=True) as slow_warnings:
                warnings.simplefilter("always")
                slow = generic.tensor_reduce(eager, "reduce_sum", x, dim, False)
            with warnings.catch_warnings(record=True) as fast_warnings:
                warnings.simplefilter("always")
                fast = x.sum(*args)
            assert _bits(fast.numpy()) == _bits(slow.numpy())
            assert [(w.category, str(w.message)) for w in fast_warnings] == \
                [(w.category, str(w.message)) for w in slow_warnings]


def test_reduction_errors_are_the_generic_ones() -> None:
    x = tp.tensor(data((2, 3)))
    for dim in (2, -3, 1.0, (0, 0)):
        same_error(lambda: x.sum(dim), lambda: generic.tensor_reduce(eager, "reduce_sum", x, dim, False))
        same_error(lambda: x.mean(dim), lambda: generic.tensor_mean(eager, x, dim, False))
    same_error(lambda: x.argmax(2), lambda: generic.tensor_arg_reduce(eager, "argmax", x, 2, False))
    same_error(lambda: x.max(5), lambda: generic.tensor_extremum(eager, x, 5, False, True))
    empty = tp.tensor(np.zeros((2, 0), np.float32))
    same_error(lambda: empty.argmax(1), lambda: generic.tensor_arg_reduce(eager, "argmax", empty, 1, False))
    same_error(lambda: empty.max(1), lambda: generic.tensor_extremum(eager, empty, 1, False, True))


def test_primitive_reductions_check_their_params() -> None:
    x = tp.tensor(data((2, 3)))
    for axes in ((0, 0), (3,), (0.0,)):
        same_error(lambda: eager.reduce_sum(x, axes=axes, keepdims=False),
                   lambda: SPECS["reduce_sum"].rule(aval_of(x), axes=axes, keepdims=False))
    np.testing.assert_allclose(eager.reduce_sum(x, axes=[0], keepdims=False).numpy(), x.numpy().sum(0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_and_min_along_a_dim_match_pytorch(dtype: Any, largest: bool, keepdim: bool) -> None:
    array = data((3, 5), dtype)
    array[1, 1] = array[1, 3] = 9.0 if largest else -9.0  # a tie: the first position wins
    array[2, 2] = np.nan
    for dim in (0, 1, -1):
        for src in layouts((3, 5), dtype)[1:] + [array]:
            x = tp.tensor(src, requires_grad=True)
            values, indices = (x.max if largest else x.min)(dim, keepdim)
            slow_v, slow_i = generic.tensor_extremum(eager, x, dim, keepdim, largest)
            same(values, slow_v)
            same(indices, slow_i)
            xt = torch.tensor(src, requires_grad=True)
            vt, it = (xt.max if largest else xt.min)(dim, keepdim)
            np.testing.assert_array_equal(values.detach().numpy(), vt.detach().numpy())
            np.testing.assert_array_equal(indices.numpy(), it.numpy())
            w = data(tuple(values.shape), dtype, seed=5)
            (values * tp.tensor(w)).sum().backward()
            (vt * torch.tensor(w)).sum().backward()
            np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    vector = data((6,), dtype)
    vector[2] = vector[4] = 9.0 if largest else -9.0
    for src in (vector, data((12,), dtype)[::2], np.array([1.0, np.nan, np.nan, 2.0], dtype)):  # 1-d: one take
        x = tp.tensor(src, requires_grad=True)
        values, indices = (x.max if largest else x.min)(-1, keepdim)
        xt = torch.tensor(src, requires_grad=True)
        vt, it = (xt.max if largest else xt.min)(-1, keepdim)
        assert values.shape == tuple(vt.shape) and indices.shape == tuple(it.shape)
        np.testing.assert_array_equal(values.detach().numpy(), vt.detach().numpy())
        np.testing.assert_array_equal(indices.numpy(), it.numpy())
        (values * 3.0).sum().backward()
        (vt * 3.0).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())


def test_max_along_a_dim_second_order_and_in_place_after() -> None:
    x = tp.tensor(data((3, 4), np.float64), requires_grad=True)
    values, _ = x.max(1)
    g, = tp.autograd.grad((values ** 3).sum(), x, create_graph=True)
    h, = tp.autograd.grad(g.sum(), x)
    xt = torch.tensor(x.detach().numpy(), requires_grad=True)
    gt, = torch.autograd.grad((xt.max(1).values ** 3).sum(), xt, create_graph=True)
    ht, = torch.autograd.grad(gt.sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy())
    np.testing.assert_allclose(h.numpy(), ht.numpy())
    y = x * 1.0
    v, _ = y.max(0)
    with tp.no_grad():
        y.mul_(2.0)  # the rule reads only y's shape: the gradient is still defined, as with the gather chain
    v.sum().backward()
    assert x.grad is not None and x.grad.numpy().sum() == 4.0


def test_max_along_a_dim_of_a_0d_and_of_integers() -> None:
    s = tp.tensor(np.float32(3.0), requires_grad=True)
    v, i = s.max(0)
    assert v.shape == () and v.item() == 3.0 and i.item() == 0
    n = tp.tensor(np.array([[3, 1], [2, 5]], np.int64))
    v, i = n.max(1)
    np.testing.assert_array_equal(v.numpy(), [3, 5])
    np.testing.assert_array_equal(i.numpy(), [0, 1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_argmax_matches_pytorch(dtype: Any) -> None:
    for src in layouts((3, 5), dtype):
        x = tp.tensor(src)
        for dim, keep in ((0, False), (-1, True), (None, False)):
            got = x.argmax(dim, keep) if dim is not None else x.argmax()
            want = torch.tensor(src).argmax(dim, keep) if dim is not None else torch.tensor(src).argmax()
            np.testing.assert_array_equal(got.numpy(), want.numpy())
            assert got.dtype == tp.int64


# ---- matmul, where, cat, softmax, elementwise -----------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_of_matrices_and_vectors_matches_the_generic_path(dtype: Any) -> None:
    a, b, v = tp.tensor(data((3, 4), dtype)), tp.tensor(data((4, 2), dtype)), tp.tensor(data((4,), dtype))
    for left, right in ((a, b), (a, v), (v, b), (a.T.T, b)):
        same(left @ right, generic.tensor_matmul(eager, left, right))
    same_error(lambda: a @ a, lambda: generic.tensor_matmul(eager, a, a))


@pytest.mark.parametrize("dtype", DTYPES)
def test_where_and_cat_of_one_float_dtype_match_pytorch_and_keep_errors(dtype: Any) -> None:
    a, b = data((3, 4), dtype), data((3, 4), dtype, seed=1)
    x, y = tp.tensor(a, requires_grad=True), tp.tensor(b, requires_grad=True)
    got = tp.where(x > 0, x, y)
    np.testing.assert_array_equal(got.detach().numpy(), np.where(a > 0, a, b))
    (got * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.where(a > 0, 2.0, 0.0))
    cat = tp.cat([x, y], 1)
    np.testing.assert_array_equal(cat.detach().numpy(), np.concatenate([a, b], 1))
    assert cat.dtype == x.dtype
    bad = tp.tensor(data((2, 4), dtype))
    with pytest.raises(tp.ShapeError):
        tp.where(x > 0, x, bad)
    with pytest.raises(tp.ShapeError):
        tp.cat([x, bad], 1)
    mixed = tp.cat([tp.tensor(a.astype(np.float32)), tp.tensor(b.astype(np.float64))])
    assert mixed.dtype == tp.float64


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_matrix_products_equal_the_matmul_method(dtype: Any) -> None:
    """``a @ b`` of small float matrices of one dtype calls numpy directly: the same values, dtype, tape
    node and gradients as the ``matmul`` method, transposed and zero-size operands, and its errors."""
    for a_shape, b_shape in [((2, 4), (4, 4)), ((5, 3), (3, 7)), ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((1, 1), (1, 1))]:
        for a in layouts(a_shape, dtype) if min(a_shape) > 1 else [data(a_shape, dtype)]:
            for b in layouts(b_shape, dtype) if min(b_shape) > 1 else [data(b_shape, dtype)]:
                x, y = tp.tensor(a, requires_grad=True), tp.tensor(b, requires_grad=True)
                got, slow = x @ y, eager.matmul(x, y)
                same(got, slow)
                assert got.grad_fn is not None and got._node.name == slow._node.name
                got.sum().backward()
                gx, gy = x.grad, y.grad
                x.grad = y.grad = None
                slow.sum().backward()
                same(gx, x.grad)
                same(gy, y.grad)
    x = tp.tensor(data((2, 4), dtype))
    same_error(lambda: x @ tp.tensor(data((3, 4), dtype)), lambda: eager.matmul(x, tp.tensor(data((3, 4), dtype))))
    assert (x @ tp.tensor(data((4, 4), dtype))).grad_fn is None
    mixed = x @ tp.tensor(data((4, 2), np.float64 if dtype == np.float32 else np.float32))
    assert mixed.dtype == tp.float64


@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_shortcut_equals_the_concat_primitive(dtype: Any) -> None:
    """``tp.cat`` of eager float tensors of one dtype skips the primitive's method: the same values, dtype,
    tape node (axis made non-negative) and gradients as ``eager.concat``, and the primitive's errors for
    bad input; transposed and zero-size operands, lists, tuples and generators, inputs unchanged."""
    for a, b in [layouts((3, 4), dtype), (np.zeros((0, 4), dtype), data((2, 4), dtype))]:
        saved = (a.copy(), b.copy())
        for dim in (0, -2, 1, -1):
            x, y = tp.tensor(a, requires_grad=True), tp.tensor(b, requires_grad=True)
            if dim in (1, -1) and a.shape[0] != b.shape[0]:
                same_error(lambda: tp.cat([x, y], dim), lambda: eager.concat(x, y, axis=dim % 2))
                continue
            for items in ([x, y], (x, y)):
                got = tp.cat(items, dim)
                slow = eager.concat(x, y, axis=dim % 2)
                same(got, slow)
                assert got.grad_fn is not None and got._node.params == slow._node.params
            same(tp.cat(t for t in (x, y)), eager.concat(x, y, axis=0))
            weights = tp.tensor(data(tuple(got.shape), dtype, seed=3))
            (tp.cat([x, y], dim) * weights).sum().backward()
            gx, gy = x.grad, y.grad
            x.grad = y.grad = None
            (eager.concat(x, y, axis=dim % 2) * weights).sum().backward()
            same(gx, x.grad)
            same(gy, y.grad)
        np.testing.assert_array_equal(a, saved[0])
        np.testing.assert_array_equal(b, saved[1])
    x = tp.tensor(data((3, 4), dtype))
    with tp.no_grad():
        assert tp.cat([tp.tensor(data((3, 4), dtype), requires_grad=True), x]).grad_fn is None
    assert tp.cat([x, x]).grad_fn is None
    leaf = tp.tensor(data((3, 4), dtype, seed=4), requires_grad=True)  # only a later item requires grad
    joined = tp.cat([x, x, leaf])
    assert joined.grad_fn is not None and all(a is b for a, b in zip(joined._node.inputs, (x, x, leaf), strict=True))
    g, = tp.autograd.grad((joined * tp.tensor(data((9, 4), dtype, seed=5))).sum(), leaf)
    slow_g, = tp.autograd.grad((eager.concat(x, x, leaf, axis=0) * tp.tensor(data((9, 4), dtype, seed=5))).sum(), leaf)
    same(g, slow_g)
    same_error(lambda: tp.cat([x, tp.tensor(data((3, 5), dtype))]),
               lambda: eager.concat(x, tp.tensor(data((3, 5), dtype)), axis=0))
    same_error(lambda: tp.cat([x, tp.tensor(data((12,), dtype))]),
               lambda: eager.concat(x, tp.tensor(data((12,), dtype)), axis=0))
    with pytest.raises(tp.AxisError, match="cat"):
        tp.cat([x, x], 2)
    with pytest.raises(tp.DTypeError, match="element 1"):
        tp.cat([x, a])  # type: ignore[list-item]
    with pytest.raises(tp.ShapeError, match="non-empty"):
        tp.cat([])
    ints = tp.cat([tp.tensor(np.array([1, 2])), tp.tensor(np.array([3]))])
    assert ints.dtype == tp.int64 and ints.tolist() == [1, 2, 3]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_fast_path_matches_pytorch_and_refuses_bad_axes(dtype: Any, name: str) -> None:
    for src in layouts((3, 5), dtype) + [np.zeros((0, 4), dtype)]:
        for dim in (0, 1, -1):
            got = getattr(tp.tensor(src), name)(dim)
            want = getattr(torch.tensor(src), name)(dim)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
            assert got.dtype == tp.tensor(src).dtype
    x = tp.tensor(data((3, 5), dtype))
    for axis in (2, -3):
        with pytest.raises(tp.AxisError):
            getattr(eager, name)(x, axis=axis)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_and_relu_match_pytorch_at_extremes_silently(dtype: Any) -> None:
    values = np.array([-1000.0, -100.0, -20.0, -1.0, -0.0, 0.0, 1e-8, 3.0, 40.0, 1000.0, np.inf, -np.inf, np.nan],
                      dtype)
    with np.errstate(all="raise"):  # any floating-point warning numpy would emit fails the test
        got = tp.tensor(values).sigmoid()
        relu = tp.tensor(values).relu()
    np.testing.assert_allclose(got.numpy(), torch.tensor(values).sigmoid().numpy(), rtol=2e-7 if dtype == np.float32
                               else 1e-15, atol=0)
    np.testing.assert_array_equal(relu.numpy(), torch.tensor(values).relu().numpy())
    assert tp.tensor(dtype(2.0)).sigmoid().shape == ()


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_of_large_arrays_is_within_an_ulp_everywhere_silently(dtype: Any) -> None:
    """From ``_EXP_JIT_MIN`` elements ``exp`` is the kernels' vectorised one: within 1 ulp of the exact
    result over the whole range, subnormal results included, inf and 0 at the ends, NaN kept, no
    warning; any layout; the same bits split over two threads; its gradient is ``g * exp(x)``."""
    from tensorplay.interpreters.eager import interpreter as eager_mod
    from tensorplay.interpreters.eager import kernels as K
    from tensorplay.interpreters.eager.kernels.threads import PARALLEL_MIN_WORK

    finfo = np.finfo(dtype)
    lo, hi = (-110.0, 90.0) if dtype == np.float32 else (-750.0, 711.0)
    x = np.linspace(lo, hi, 6 * eager_mod._EXP_JIT_MIN - 3).astype(dtype)
    x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    with np.errstate(all="raise"):
        got = tp.tensor(x).exp().numpy()
        small = x[4:4 + eager_mod._EXP_JIT_MIN - 1]
        got_small = tp.tensor(small).exp().numpy()
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got_small, np.exp(small))  # below the threshold: numpy's exp
    np.testing.assert_array_equal(got, K.exp(x))  # the kernel's bits (numpy's differ in about 1 entry of 8)
    exact = np.exp(x.astype(np.longdouble))
    ok = np.isfinite(x) & (exact <= finfo.max)
    ulps = np.abs(got[ok].astype(np.longdouble) - exact[ok]) / np.spacing(exact[ok].astype(dtype)).astype(np.longdouble)
    assert float(ulps.max()) < 1.0
    assert (got[ok] > 0).sum() == (exact[ok].astype(dtype) > 0).sum()  # subnormal results are not flushed
    np.testing.assert_array_equal(got[:4], [np.nan, np.inf, 0.0, 1.0])
    assert np.all(got[np.isfinite(x) & (exact > finfo.max)] == np.inf)
    for layout in (np.asfortranarray(x[:4096].reshape(64, 64)), x[::2]):
        np.testing.assert_array_equal(tp.tensor(layout).exp().numpy(), tp.tensor(np.ascontiguousarray(layout)).exp().numpy())
    big = np.random.default_rng(1).standard_normal(2 * PARALLEL_MIN_WORK + 5).astype(dtype) * 10
    one, two = on_one_then_two_threads(lambda: tp.tensor(big).exp().numpy())
    np.testing.assert_array_equal(one, two)
    leaf = tp.tensor(x[8:4104].reshape(64, 64) / 50, requires_grad=True)
    y = leaf.exp()
    (y * 3.0).sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), 3.0 * y.detach().numpy())


def test_float32_tanh_of_large_arrays_is_within_an_ulp_and_a_half_silently() -> None:
    """From ``_TANH_JIT_MIN`` elements a float32 ``tanh`` is the kernels' vectorised one: within 1.5 ulp of
    the exact value from the subnormals to saturation, +-1 at +-inf, NaN kept, ``-0`` kept, no warning; any
    layout; the same bits on one and two threads; below the threshold, and in float64, numpy's ``tanh``; the
    gradient is ``g * (1 - y*y)``."""
    from tensorplay.interpreters.eager import interpreter as eager_mod
    from tensorplay.interpreters.eager import kernels as K
    from tensorplay.interpreters.eager.kernels.threads import PARALLEL_MIN_WORK

    x = np.concatenate([np.linspace(-12, 12, 20001), np.linspace(-1, 1, 20001), np.logspace(-44, 1, 3000),
                        -np.logspace(-44, 1, 3000)]).astype(np.float32)
    x[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    with np.errstate(all="raise"):
        got = tp.tensor(x).tanh().numpy()
        small = x[5:5 + eager_mod._TANH_JIT_MIN - 1]
        got_small = tp.tensor(small).tanh().numpy()
    assert _bits(got_small) == _bits(np.tanh(small))
    assert _bits(got) == _bits(K.tanh(x))
    exact = np.tanh(x[5:].astype(np.float64))
    ulps = np.abs(got[5:] - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert float(ulps.max()) < 1.5
    np.testing.assert_array_equal(got[:5], [np.nan, 1.0, -1.0, 0.0, 0.0])
    assert np.signbit(got[3]) and not np.signbit(got[4])
    x64 = x.astype(np.float64)
    assert _bits(tp.tensor(x64).tanh().numpy()) == _bits(np.tanh(x64))
    for layout in (x[:4096].reshape(64, 64).T, x[::3]):
        assert _bits(tp.tensor(layout).tanh().numpy()) == _bits(tp.tensor(np.ascontiguousarray(layout)).tanh().numpy())
    big = np.random.default_rng(2).standard_normal(2 * PARALLEL_MIN_WORK + 5).astype(np.float32) * 3
    one, two = on_one_then_two_threads(lambda: tp.tensor(big).tanh().numpy())
    assert _bits(one) == _bits(two)
    leaf = tp.tensor(x[5:4101].reshape(64, 64), requires_grad=True)
    y = leaf.tanh()
    (y * 3.0).sum().backward()
    yd = y.detach().numpy()
    np.testing.assert_allclose(leaf.grad.numpy(), 3.0 * (1 - yd * yd), rtol=1e-6, atol=1e-6)  # 1 - y*y cancels


def _unary_names() -> list[str]:
    from tensorplay.spec.table import PRIMITIVES
    return [name for name, prim in PRIMITIVES.items() if prim.family == "unary" and not prim.params]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", _unary_names())
def test_inline_unary_methods_equal_the_unary_path(name: str, dtype: Any) -> None:
    """A float unary method runs its kernel inline; it must give what ``_unary`` (which checks every
    case) gives: values, dtype, the tape node and its gradient, the same error for a dtype numpy refuses;
    contiguous, transposed, zero-size and 0-d inputs, NaN and infinities, the input unchanged."""
    extremes = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e-30, 5.0, -7.5], dtype)
    for x in [*layouts((3, 5), dtype), np.zeros((0, 4), dtype), np.asarray(dtype(0.7)), extremes]:
        before = x.copy()
        try:
            with warnings.catch_warnings(record=True) as slow_warned:
                warnings.simplefilter("always")
                slow = eager._unary(name, tp.tensor(x))
        except Exception:
            same_error(lambda: getattr(eager, name)(tp.tensor(x)), lambda: eager._unary(name, tp.tensor(x)))
            continue
        with warnings.catch_warnings(record=True) as fast_warned:  # silent where ``_unary`` is
            warnings.simplefilter("always")
            same(getattr(eager, name)(tp.tensor(x)), slow)
        assert [str(w.message) for w in fast_warned] == [str(w.message) for w in slow_warned]
        np.testing.assert_array_equal(x, before)
        leaf = tp.tensor(x, requires_grad=True)
        with np.errstate(all="ignore"):  # the gradients of sin(inf) and the like are NaN
            out = getattr(eager, name)(leaf)
            if out.dtype.is_floating_point and x.size and name not in ("floor", "ceil", "round", "sign"):
                assert out.grad_fn is not None
                out.sum().backward()
                reference = tp.tensor(x, requires_grad=True)
                eager._unary(name, reference).sum().backward()
                same(leaf.grad, reference.grad)
        with tp.no_grad():
            assert getattr(eager, name)(tp.tensor(x, requires_grad=True)).grad_fn is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_sigmoid_equals_the_kernel_entry_point(dtype: Any) -> None:
    """The direct call of the jitted sigmoid on small arrays is the entry point's kernel: the same values
    (same kernel, same flat order), and ``None`` where the entry point must convert or split."""
    from tensorplay.interpreters.eager import kernels as K
    from tensorplay.interpreters.eager.fastpath import small_flat

    def small_sigmoid(x: Any) -> Any:
        return small_flat(x, "sigmoid_flat")

    for shape in ((2, 4), (3, 2, 5), (64, 64), (1,), (7,)):
        x = data(shape, dtype) * 4
        np.testing.assert_array_equal(small_sigmoid(x), K.sigmoid(x))
        assert small_sigmoid(x).dtype == dtype
    for other_layout in (np.asfortranarray(data((3, 4), dtype)), data((4, 6), dtype)[:, ::2], data((5, 3), dtype).T):
        np.testing.assert_array_equal(small_sigmoid(other_layout), K.sigmoid(other_layout))  # read in row-major order
        assert small_sigmoid(other_layout).flags.c_contiguous
        assert _bits(small_flat(other_layout, "relu_flat")) == _bits(K.relu(other_layout))
    assert small_sigmoid(np.zeros((0, 4), dtype)) is None
    assert small_sigmoid(np.zeros(5, np.int64)) is None
    big = np.zeros((4096, 1024), dtype)
    one, two = on_one_then_two_threads(lambda: small_sigmoid(big))
    assert one is not None and two is None  # big enough for the threads when there are two


@pytest.mark.parametrize("dtype", DTYPES)
def test_sigmoid_and_relu_ufuncs_give_the_flat_kernels_bits_silently(dtype: Any) -> None:
    """Small float arrays take the kernels' numpy ufuncs (``sigmoid_ufunc_f32``, ``relu_ufunc_f64``, ...: one jitted
    scalar body shared with the flat kernels): on each side of the size thresholds, in any layout, with
    NaN, infinities, huge, tiny and signed zeros, the values are the flat kernels' bit for bit, in the
    input's dtype, with no floating-point warning, and the input is left unchanged."""
    from tensorplay.interpreters.eager import interpreter as eager_mod
    from tensorplay.interpreters.eager import kernels as K

    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e30, -1e30, 1e-40, 88.0, -104.0], dtype)
    sizes = (3, eager_mod._RELU_UFUNC_MIN - 1, eager_mod._RELU_UFUNC_MIN, eager_mod._SIGMOID_UFUNC_MAX,
             eager_mod._SIGMOID_UFUNC_MAX + 1, 4096)
    for n in sizes:
        x = data((n,), dtype) * 30
        x[:min(n, specials.size)] = specials[:n]
        for layout in (x, x[::-1], np.concatenate([x, x])[::2], x.reshape(-1, 1).T):
            before = layout.copy()
            with np.errstate(all="raise"):
                sig = tp.tensor(layout).sigmoid().numpy()
                relu = tp.tensor(layout).relu().numpy()
            assert sig.dtype == dtype and relu.dtype == dtype and sig.shape == layout.shape
            assert _bits(sig) == _bits(K.sigmoid(layout))
            assert _bits(relu) == _bits(K.relu(layout))
            np.testing.assert_array_equal(layout, before)
    uf = eager_mod._jit_ufunc("relu", np.dtype(dtype))
    assert _bits(uf(np.asfortranarray(data((40, 30), dtype)))) == _bits(K.relu(data((40, 30), dtype)))
    assert tp.tensor(dtype(-3.0)).relu().shape == () and tp.tensor(np.zeros((0, 3), dtype)).sigmoid().shape == (0, 3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_calls_its_kernel_directly_with_the_entry_points_bits(dtype: Any, approximate: str) -> None:
    """``F.gelu`` of an array one thread computes calls the jitted kernel itself: the entry point's bits in
    any layout and with special values, its dtype, the input unchanged; large arrays still split over two
    threads with the same bits; a bad ``approximate`` is the entry point's error."""
    from tensorplay.interpreters.eager import kernels as K
    from tensorplay.interpreters.eager.kernels.threads import PARALLEL_MIN_WORK

    x = data((64, 64), dtype) * 4
    x[0, :6] = [np.nan, np.inf, -np.inf, -0.0, -40.0, 1e-30]
    for layout in (x, x.T, x[:, ::3], x[:2, :4].copy()):
        before = layout.copy()
        got = F.gelu(tp.tensor(layout), approximate=approximate).numpy()
        assert _bits(got) == _bits(K.gelu(np.ascontiguousarray(layout), approximate=approximate))
        np.testing.assert_array_equal(layout, before)
    big = data((2 * PARALLEL_MIN_WORK + 7,), dtype)
    one, two = on_one_then_two_threads(lambda: F.gelu(tp.tensor(big), approximate=approximate).numpy())
    assert _bits(one) == _bits(two) == _bits(K.gelu(big, approximate=approximate))
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(tp.tensor(x), approximate="fast")


# ---- fused nn.functional ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_fused_cross_entropy_matches_pytorch(dtype: Any, reduction: str) -> None:
    for n, c in ((1, 1), (2, 4), (64, 64), (5, 300)):
        logits = data((n, c), dtype, seed=n) * 4
        target = np.random.default_rng(c).integers(0, c, n)
        for src in (logits, np.asfortranarray(logits)):
            x = tp.tensor(src, requires_grad=True)
            loss = F.cross_entropy(x, tp.tensor(target), reduction=reduction)
            assert loss.grad_fn is not None and loss.dtype == x.dtype
            loss.backward()
            xt = torch.tensor(src, requires_grad=True)
            want = TF.cross_entropy(xt, torch.tensor(target), reduction=reduction)
            want.backward()
            tol = 2e-6 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(loss.item(), want.item(), rtol=tol * 10)
            np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=tol * 10, atol=tol)


def test_fused_cross_entropy_second_order_matches_pytorch() -> None:
    logits = data((4, 5), np.float64)
    target = np.array([1, 0, 4, 2])
    x = tp.tensor(logits, requires_grad=True)
    g, = tp.autograd.grad(F.cross_entropy(x, tp.tensor(target)), x, create_graph=True)
    h, = tp.autograd.grad((g * g).sum(), x)
    xt = torch.tensor(logits, requires_grad=True)
    gt, = torch.autograd.grad(TF.cross_entropy(xt, torch.tensor(target)), xt, create_graph=True)
    ht, = torch.autograd.grad((gt * gt).sum(), xt)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-10, atol=1e-14)


def test_cross_entropy_outside_the_fused_case_matches_pytorch_and_errors() -> None:
    logits = data((4, 5), np.float64)
    x = tp.tensor(logits, requires_grad=True)
    xt = torch.tensor(logits, requires_grad=True)
    target = np.array([1, -100, 4, 2])  # an ignored entry: the composed form
    np.testing.assert_allclose(F.cross_entropy(x, tp.tensor(target)).item(),
                               TF.cross_entropy(xt, torch.tensor(target)).item(), rtol=1e-12)
    np.testing.assert_allclose(F.cross_entropy(x, tp.tensor(target.astype(np.int32).clip(0))).item(),
                               TF.cross_entropy(xt, torch.tensor(target.clip(0))).item(), rtol=1e-12)
    with pytest.raises(tp.IndexRangeError, match=r"cross_entropy: target 5 at position \[2\] is out of range"):
        F.cross_entropy(x, tp.tensor(np.array([1, 0, 5, 2])))
    with pytest.raises(tp.IndexRangeError, match="target -3"):
        F.cross_entropy(x, tp.tensor(np.array([1, 0, -3, 2])))
    with pytest.raises(tp.ShapeError):
        F.cross_entropy(x, tp.tensor(np.array([1, 0, 2])))


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_without_weight_matches_pytorch(dtype: Any) -> None:
    for shape in ((2, 4), (64, 64), (3, 2, 5)):
        for src in layouts(shape, dtype):
            x = tp.tensor(src, requires_grad=True)
            y = F.layer_norm(x, shape[-1:])
            xt = torch.tensor(src, requires_grad=True)
            yt = TF.layer_norm(xt, shape[-1:])
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=tol, atol=tol)
            w = data(shape, dtype, seed=7)
            (y * tp.tensor(w)).sum().backward()
            (yt * torch.tensor(w)).sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=tol * 10, atol=tol * 10)
    x = tp.tensor(data((2, 4), dtype))
    weight = tp.tensor(data((4,), dtype, seed=1), requires_grad=True)
    y = F.layer_norm(x, (4,), weight)
    y.sum().backward()
    yt = TF.layer_norm(torch.tensor(x.numpy()), (4,), wt := torch.tensor(weight.detach().numpy(), requires_grad=True))
    yt.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(weight.grad.numpy(), wt.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_shape_forms_and_missing_parameters(dtype: Any) -> None:
    """Every spelling of ``normalized_shape`` gives the same bits; a missing weight or bias is exactly ones or
    zeros (the shared constants stay untouched after backward), a strided weight is read correctly, and
    the node's gradient is the one with explicit ones and zeros."""
    src = data((3, 4), dtype)
    x = tp.tensor(src, requires_grad=True)
    reference = F.layer_norm(x, (4,))
    for form in (4, [4], (4,), tp.tensor(src).shape[-1:], (np.int64(4),), [True + 3]):
        assert _bits(F.layer_norm(x, form).detach().numpy()) == _bits(reference.detach().numpy())
    ones, zeros = tp.tensor(np.ones(4, dtype), requires_grad=True), tp.tensor(np.zeros(4, dtype), requires_grad=True)
    explicit = F.layer_norm(x, (4,), ones, zeros)
    assert _bits(explicit.detach().numpy()) == _bits(reference.detach().numpy())
    w = tp.tensor(data((4,), dtype, seed=5))
    g_ref, = tp.autograd.grad((reference * w).sum(), x)
    g_explicit, = tp.autograd.grad((explicit * w).sum(), x)
    assert _bits(g_ref.numpy()) == _bits(g_explicit.numpy())
    again = F.layer_norm(x, (4,))
    assert _bits(again.detach().numpy()) == _bits(reference.detach().numpy())
    strided = tp.tensor(data((8,), dtype, seed=6)[::2])
    for weight, bias in ((strided, None), (None, strided), (strided, strided)):
        got = F.layer_norm(x, (4,), weight, bias)
        xt = torch.tensor(src)
        wt = None if weight is None else torch.tensor(weight.numpy())
        bt = None if bias is None else torch.tensor(bias.numpy())
        tol = 1e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got.detach().numpy(), TF.layer_norm(xt, (4,), wt, bt).numpy(), rtol=tol, atol=tol)
    with pytest.raises(tp.ShapeError):
        F.layer_norm(x, [5])


def test_mean_is_one_node_with_the_generic_values_and_second_order() -> None:
    for src in layouts((3, 4), np.float64):
        x = tp.tensor(src, requires_grad=True)
        for dim, keep in ((0, False), (1, True), (None, False)):
            same(x.mean(dim, keep), generic.tensor_mean(eager, x, dim, keep))
        y = (x * x).mean(1)
        g, = tp.autograd.grad((y * y).sum(), x, create_graph=True)
        h, = tp.autograd.grad(g.sum(), x)
        xt = torch.tensor(src, requires_grad=True)
        yt = (xt * xt).mean(1)
        gt, = torch.autograd.grad((yt * yt).sum(), xt, create_graph=True)
        ht, = torch.autograd.grad(gt.sum(), xt)
        np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-12)
        np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_squaring_is_exactly_the_power(dtype: Any) -> None:
    values = np.concatenate([data((50,), dtype) * 1e3, np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30], dtype)])
    for exponent in (2, 2.0):
        got = (tp.tensor(values) ** exponent).numpy()
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, np.power(values, dtype(exponent)))
        np.testing.assert_array_equal(got, (torch.tensor(values) ** exponent).numpy())
    np.testing.assert_array_equal((tp.tensor(np.array([2, -3])) ** 2).numpy(), [4, 9])


@pytest.mark.parametrize("dtype", DTYPES)
def test_small_row_kernels_equal_the_kernel_entry_points(dtype: Any) -> None:
    """The same jitted kernel: equal up to the summation order its vectorised loops pick (which can
    depend on the buffers' alignment)."""
    from tensorplay.interpreters.eager import kernels as K
    from tensorplay.interpreters.eager.fastpath import small_rows
    tol = {"rtol": 1e-6, "atol": 1e-7} if dtype == np.float32 else {"rtol": 1e-14, "atol": 1e-15}
    for shape in ((2, 4), (3, 2, 5), (64, 64), (1, 1), (7,), (1,)):
        x = data(shape, dtype) * 3
        for name in ("softmax", "log_softmax"):
            np.testing.assert_allclose(small_rows(f"{name}_rows", x), getattr(K, name)(x, axis=-1), **tol)
            np.testing.assert_allclose(getattr(tp.tensor(x), name)(-1).numpy(), getattr(K, name)(x, axis=-1), **tol)
        g, b = data(shape[-1:], dtype, seed=1), data(shape[-1:], dtype, seed=2)
        rows = x.size // shape[-1]
        stats, want_stats = np.empty((rows, 2)), np.empty((rows, 2))
        np.testing.assert_allclose(small_rows("layer_norm_rows", x, g, b, 1e-5, stats),
                                   K.layer_norm_last_axis(x, g, b, eps=1e-5, stats=want_stats), **tol)
        np.testing.assert_allclose(stats, want_stats, **tol)
    assert small_rows("softmax_rows", np.asfortranarray(data((3, 4), dtype))) is None
    assert small_rows("softmax_rows", np.zeros((0, 4), dtype)) is None
    big = np.zeros((4096, 512), dtype)
    one, two = on_one_then_two_threads(lambda: small_rows("softmax_rows", big))
    assert one is not None and two is None  # big enough for the threads when there are two


@pytest.mark.parametrize("key", [slice(1, 3), (slice(None), None), (1, slice(None, None, -2)), (Ellipsis, 0, None)],
                         ids=repr)
def test_basic_index_node_second_derivatives_and_in_place_updates(key: Any) -> None:
    """The ``basic_index`` node's composite rule (``create_graph``) gives the generic path's second
    derivatives, and its rule reads only the input's shape: updating the input in place after indexing
    leaves the gradient as it was (as for ``slice``)."""
    array = data((4, 5), np.float64)
    w = data(np.zeros((4, 5))[key].shape, np.float64, seed=4)

    def grads(index: Any) -> tuple[np.ndarray, np.ndarray]:
        x = tp.tensor(array, requires_grad=True)
        y = index(x)
        g, = tp.autograd.grad((y * y * tp.tensor(w)).sum(), x, create_graph=True)
        gg, = tp.autograd.grad((g * g).sum(), x)
        return g.detach().numpy(), gg.numpy()

    fast, slow = grads(lambda x: x[key]), grads(lambda x: generic.tensor_getitem(eager, x, key))
    for a, b in zip(fast, slow):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    base = tp.tensor(array, requires_grad=True)
    x = base * 1.0
    total = x[key].sum()
    x.mul_(3.0)  # after the view was recorded: its node (and sum's) needs x's shape only
    total.backward()
    want = np.zeros((4, 5))
    want[key] = 1.0
    np.testing.assert_array_equal(base.grad.numpy(), want)
