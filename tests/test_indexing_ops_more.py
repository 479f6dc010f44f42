"""``scatter``, ``scatter_add``, ``take_along_dim``, ``searchsorted``, ``bucketize``, ``bincount``, ``median``,
``quantile`` (tensorplay.indexing_ops) and ``randperm``, ``bernoulli``, ``normal`` (tensorplay.random_draws)
against PyTorch: values for int and float dtypes, negative dims, non-contiguous inputs, gradients against
torch.autograd, ``tp.compile`` and ``vmap`` against eager loops, errors, and for the random draws their
distributions, reproducibility under ``tp.manual_seed`` and fresh numbers at every compiled call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import random_state
from tensorplay.errors import ArgumentError, DTypeError, GraphCaptureError, IndexRangeError, ShapeError

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(11)


def _t(a: Any, grad: bool = False) -> Any:
    return tp.tensor(a, requires_grad=grad)


def _same(got: Any, want: Any, rtol: float = 1e-12, atol: float = 1e-12) -> None:
    g = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    w = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert g.shape == w.shape, (g.shape, w.shape)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)


def _index(shape: tuple[int, ...], bound: int) -> np.ndarray:
    return RNG.integers(0, bound, size=shape).astype(np.int64)


# ---- scatter / scatter_add ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("dim", [0, 1, -1, -3])
def test_scatter_add_and_scatter_match_torch(dtype: str, dim: int) -> None:
    x = (RNG.standard_normal((4, 5, 3)) * 10).astype(dtype)
    src = (RNG.standard_normal((3, 6, 3)) * 10).astype(dtype)  # larger than index along dim 1: only a block is read
    ishape = (3, 4, 2)
    bound = x.shape[dim]
    idx = _index(ishape, bound)
    want = torch.from_numpy(x).scatter_add(dim, torch.from_numpy(idx), torch.from_numpy(src))
    _same(_t(x).scatter_add(dim, _t(idx), _t(src)), want)
    _same(tp.scatter_add(_t(x), dim, _t(idx), _t(src)), want)
    # scatter with distinct targets per slice (PyTorch leaves repeated targets unspecified)
    n = x.shape[dim]
    perm_shape = list(ishape)
    perm_shape[dim] = min(ishape[dim], n)
    perm = np.argsort(RNG.random(tuple(s if i != dim % 3 else n for i, s in enumerate(perm_shape))), axis=dim)
    perm = np.take(perm, np.arange(perm_shape[dim]), axis=dim).astype(np.int64)
    want = torch.from_numpy(x).scatter(dim, torch.from_numpy(perm), torch.from_numpy(src))
    _same(_t(x).scatter(dim, _t(perm), _t(src)), want)
    _same(tp.scatter(_t(x), dim, _t(perm), 7), torch.from_numpy(x).scatter(dim, torch.from_numpy(perm), 7))


def test_scatter_repeated_targets_take_the_last_writer_and_noncontiguous_inputs() -> None:
    x = RNG.standard_normal((6, 4)).T  # non-contiguous [4, 6]
    src = RNG.standard_normal((8, 4))[::2].T  # non-contiguous [4, 4]
    idx = np.array([[0, 0, 2, 0], [5, 1, 5, 5], [3, 3, 3, 3], [1, 2, 1, 2]], dtype=np.int64)
    got = tp.scatter(_t(x), 1, _t(idx), _t(src))
    writes = np.array(x)  # a loop in row-major order of index: the last write wins
    for i in range(4):
        for j in range(4):
            writes[i, idx[i, j]] = src[i, j]
    _same(got, writes)
    _same(tp.scatter_add(_t(x), 1, _t(idx), _t(src)),
          torch.from_numpy(np.ascontiguousarray(x)).scatter_add(1, torch.from_numpy(idx),
                                                                torch.from_numpy(np.ascontiguousarray(src))))


def test_scatter_gradients_match_torch() -> None:
    x = RNG.standard_normal((4, 5))
    src = RNG.standard_normal((3, 5))
    idx = np.array([[0, 1, 2, 3, 0], [1, 3, 0, 2, 2], [3, 0, 1, 1, 3]], dtype=np.int64)  # repeats in a column
    dist = np.argsort(RNG.random((4, 5)), axis=0)[:3].astype(np.int64)
    w = RNG.standard_normal((4, 5))
    for name, index in (("scatter_add", idx), ("scatter", dist)):
        tx, ts = _t(x, True), _t(src, True)
        (getattr(tp, name)(tx, 0, _t(index), ts) * _t(w)).sum().backward()
        qx, qs = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
        (getattr(torch, name)(qx, 0, torch.from_numpy(index), qs) * torch.from_numpy(w)).sum().backward()
        _same(tx.grad, qx.grad)
        _same(ts.grad, qs.grad)


def test_scatter_errors_name_the_function_and_argument() -> None:
    x = _t(np.zeros((3, 4)))
    with pytest.raises(DTypeError, match="scatter_add: index must be an int64 tensor, got int32"):
        tp.scatter_add(x, 0, _t(np.zeros((1, 4), np.int32)), _t(np.ones((1, 4))))
    with pytest.raises(IndexRangeError, match="scatter: index"):
        tp.scatter(x, 0, _t(np.array([[3, 0, 0, 0]])), _t(np.ones((1, 4))))
    with pytest.raises(IndexRangeError, match="scatter_add: index"):
        tp.scatter_add(x, 1, _t(np.array([[-1]])), _t(np.ones((1, 1))))
    with pytest.raises(ShapeError, match="scatter_add: index must have the rank of the input"):
        tp.scatter_add(x, 0, _t(np.zeros(4, np.int64)), _t(np.ones(4)))
    with pytest.raises(ShapeError, match="exceeds the src size"):
        tp.scatter_add(x, 0, _t(np.zeros((2, 4), np.int64)), _t(np.ones((1, 4))))
    with pytest.raises(ShapeError, match="exceeds the input size 4 along dim 1"):
        tp.scatter(x, 0, _t(np.zeros((1, 5), np.int64)), _t(np.ones((1, 5))))
    with pytest.raises(DTypeError, match="scatter: src must have the input's dtype float64, got float32"):
        tp.scatter(x, 0, _t(np.zeros((1, 4), np.int64)), _t(np.ones((1, 4), np.float32)))


# ---- take_along_dim ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_take_along_dim_matches_torch_with_broadcasting_and_none(dtype: str) -> None:
    x = (RNG.standard_normal((5, 3, 4)) * 10).astype(dtype)[:, ::-1]  # non-contiguous
    xc = np.ascontiguousarray(x)
    for dim, ishape in ((1, (5, 6, 1)), (-1, (1, 3, 2)), (0, (2, 3, 4))):
        idx = _index(ishape, x.shape[dim])
        _same(tp.take_along_dim(_t(x), _t(idx), dim),
              torch.take_along_dim(torch.from_numpy(xc), torch.from_numpy(idx), dim))
    idx = _index((7,), x.size)
    _same(_t(x).take_along_dim(_t(idx)), torch.take_along_dim(torch.from_numpy(xc), torch.from_numpy(idx)))
    # argsort then take_along_dim sorts, as in numpy/torch
    order = torch.argsort(torch.from_numpy(xc), dim=2)
    _same(tp.take_along_dim(_t(x), _t(order.numpy()), 2), torch.sort(torch.from_numpy(xc), dim=2).values)


def test_take_along_dim_gradient_and_errors() -> None:
    x = RNG.standard_normal((3, 4))
    idx = np.array([[0, 0, 3], [2, 1, 2], [3, 3, 3]], dtype=np.int64)
    tx = _t(x, True)
    (tp.take_along_dim(tx, _t(idx), 1) ** 2).sum().backward()
    qx = torch.tensor(x, requires_grad=True)
    (torch.take_along_dim(qx, torch.from_numpy(idx), 1) ** 2).sum().backward()
    _same(tx.grad, qx.grad)
    with pytest.raises(DTypeError, match="take_along_dim: indices must be an int64 tensor"):
        tp.take_along_dim(_t(x), _t(idx.astype(np.float32)), 1)
    with pytest.raises(ShapeError, match="take_along_dim: input and indices shapes"):
        tp.take_along_dim(_t(x), _t(np.zeros((2, 2), np.int64)), 1)
    with pytest.raises(IndexRangeError, match="take_along_dim: indices"):
        tp.take_along_dim(_t(x), _t(np.array([[4]])), 1)


# ---- searchsorted / bucketize / bincount ----------------------------------------------------------

@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_searchsorted_and_bucketize_match_torch(right: bool, dtype: str) -> None:
    seq = np.sort(RNG.integers(-5, 6, size=9)).astype(dtype)  # repeats: left and right differ
    vals = RNG.integers(-7, 8, size=(3, 4)).astype(dtype)
    ts, tv = torch.from_numpy(seq), torch.from_numpy(vals)
    _same(tp.searchsorted(_t(seq), _t(vals), right=right), torch.searchsorted(ts, tv, right=right))
    _same(tp.searchsorted(_t(seq), _t(vals), side="right" if right else "left"), torch.searchsorted(ts, tv, right=right))
    _same(tp.bucketize(_t(vals), _t(seq), right=right), torch.bucketize(tv, ts, right=right))
    _same(tp.bucketize(_t(vals), _t(seq), right=right, out_int32=True),
          torch.bucketize(tv, ts, right=right, out_int32=True))
    _same(tp.searchsorted(_t(seq), 2, right=right), torch.searchsorted(ts, 2, right=right))
    nd = np.sort(RNG.integers(-5, 6, size=(3, 6)), axis=1).astype(dtype)
    _same(tp.searchsorted(_t(nd), _t(vals), right=right),
          torch.searchsorted(torch.from_numpy(nd), tv, right=right))


def test_searchsorted_nan_values_and_errors() -> None:
    seq = np.array([1.0, 2.0, 3.0])
    vals = np.array([np.nan, 2.0, -np.inf, np.inf, 0.0, 1.5])
    for right in (False, True):
        _same(tp.searchsorted(_t(seq), _t(vals), right=right),
              torch.searchsorted(torch.from_numpy(seq), torch.from_numpy(vals), right=right))
        # NaN entries sort last (numpy's order; torch's binary search answers by where it probes them, e.g.
        # 4 for inf in [1, 2, 3, nan]); a NaN value counts past every entry, as in torch
        finite = vals[~np.isnan(vals)]
        for with_nan in (np.array([1.0, 2.0, 3.0, np.nan]), np.array([1.0, 2.0, np.nan, np.nan])):
            _same(tp.searchsorted(_t(with_nan), _t(finite), right=right),
                  np.searchsorted(with_nan, finite, side="right" if right else "left").astype(np.int64))
            assert tp.searchsorted(_t(with_nan), float("nan"), right=right).item() == 4
    with pytest.raises(ShapeError, match="searchsorted: sorted_sequence .* must share their leading dims"):
        tp.searchsorted(_t(np.zeros((2, 3))), _t(np.zeros((3, 3))))
    with pytest.raises(ShapeError, match="bucketize: boundaries must be a 1-d tensor"):
        tp.bucketize(_t(vals), _t(np.zeros((2, 3))))


def test_bincount_matches_torch_and_refuses_a_symbolic_recording() -> None:
    x = RNG.integers(0, 6, size=20)
    w32 = RNG.standard_normal(20).astype(np.float32)
    tx = torch.from_numpy(x)
    _same(tp.bincount(_t(x)), torch.bincount(tx))
    _same(_t(x).bincount(minlength=9), torch.bincount(tx, minlength=9))
    _same(tp.bincount(_t(x), _t(w32)), torch.bincount(tx, torch.from_numpy(w32)), rtol=1e-6, atol=1e-6)
    _same(tp.bincount(_t(x), _t(x)), torch.bincount(tx, tx))  # int weights: float64
    _same(tp.bincount(_t(np.zeros(0, np.int64))), torch.bincount(torch.zeros(0, dtype=torch.int64)))
    tw = _t(w32.astype(np.float64), True)
    (tp.bincount(_t(x), tw) ** 2).sum().backward()
    counts = np.bincount(x, w32.astype(np.float64))  # torch has no bincount derivative: d/dw_i = 2 out[x_i]
    _same(tw.grad, 2 * counts[x])
    with pytest.raises(IndexRangeError, match="bincount: input must be non-negative, got -1 at position 1"):
        tp.bincount(_t(np.array([0, -1])))
    with pytest.raises(ShapeError, match="bincount: input must be a 1-d tensor"):
        tp.bincount(_t(np.zeros((2, 2), np.int64)))
    with pytest.raises(GraphCaptureError, match="bincount: the output length depends on the input's values"):
        tp.func.vmap(lambda r: tp.bincount(r, minlength=6))(_t(x.reshape(4, 5)))
    compiled: Any = tp.compile(lambda v, w: tp.bincount(v, w) * 2)  # specialised on max(input), checked at every call
    for v in (x, np.array([0, 3, 3, 1]), np.array([0, 3, 1, 9]), np.array([4, 4, 0, 1])):
        wv = RNG.standard_normal(v.size)
        _same(compiled(_t(v), _t(wv)), torch.bincount(torch.from_numpy(v), torch.from_numpy(wv)) * 2)


# ---- median / quantile -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_median_matches_torch(dtype: str) -> None:
    x = np.stack([RNG.permutation(24)[:7] for _ in range(12)]).reshape(3, 4, 7).astype(dtype)  # distinct per row
    xt = np.ascontiguousarray(x.transpose(2, 0, 1))
    for dim, keepdim in ((-1, False), (0, True), (1, False)):
        for arr, tarr in ((x, x), (x.transpose(2, 0, 1), xt)):  # also a non-contiguous input
            got = tp.median(_t(arr), dim, keepdim)
            want = torch.median(torch.from_numpy(np.ascontiguousarray(tarr)), dim, keepdim)
            _same(got.values, want.values)
            _same(got.indices, want.indices)
    _same(_t(x).median(), torch.from_numpy(x).median())
    _same(tp.median(_t(x[0, 0, :6])), torch.median(torch.from_numpy(x[0, 0, :6])))  # even count: the lower one


def test_median_nan_rows_and_gradient() -> None:
    x = np.array([[3.0, np.nan, 1.0, np.nan], [4.0, 1.0, 2.0, 8.0]])
    got, want = tp.median(_t(x), 1), torch.median(torch.from_numpy(x), 1)
    _same(got.values, want.values)
    _same(got.indices, want.indices)
    a = RNG.standard_normal((5, 6))
    ta, qa = _t(a, True), torch.tensor(a, requires_grad=True)
    (tp.median(ta, 0).values * _t(np.arange(6.0))).sum().backward()
    (torch.median(qa, 0).values * torch.arange(6.0, dtype=torch.float64)).sum().backward()
    _same(ta.grad, qa.grad)


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_matches_torch(interpolation: str) -> None:
    x = RNG.standard_normal((4, 7, 5))
    tx = torch.from_numpy(x)
    q = np.array([0.0, 0.125, 0.3, 0.5, 0.875, 1.0])
    for dim, keepdim in ((1, False), (-1, True), (None, False), (None, True)):
        _same(tp.quantile(_t(x), _t(q), dim, keepdim, interpolation=interpolation),
              torch.quantile(tx, torch.from_numpy(q), dim, keepdim, interpolation=interpolation), 1e-12, 1e-12)
        _same(_t(x).quantile(0.3, dim, keepdim, interpolation=interpolation),
              torch.quantile(tx, 0.3, dim, keepdim, interpolation=interpolation), 1e-12, 1e-12)
    x32 = x[:, ::2].astype(np.float32)  # non-contiguous float32
    _same(tp.quantile(_t(x32), _t(q.astype(np.float32)), 0, interpolation=interpolation),
          torch.quantile(torch.from_numpy(np.ascontiguousarray(x32)), torch.from_numpy(q.astype(np.float32)), 0,
                         interpolation=interpolation), 1e-6, 1e-6)


def test_quantile_nan_gradient_and_errors() -> None:
    x = np.array([[1.0, np.nan, 3.0], [2.0, 0.0, 5.0]])
    _same(tp.quantile(_t(x), 0.4, 1), torch.quantile(torch.from_numpy(x), 0.4, 1))
    a = RNG.standard_normal((6, 5))
    q = np.array([0.1, 0.5, 0.77])
    ta, qa = _t(a, True), torch.tensor(a, requires_grad=True)
    w = RNG.standard_normal((3, 5))
    (tp.quantile(ta, _t(q), 0) * _t(w)).sum().backward()
    (torch.quantile(qa, torch.from_numpy(q), 0) * torch.from_numpy(w)).sum().backward()
    _same(ta.grad, qa.grad)
    with pytest.raises(DTypeError, match="quantile: input must be a float32 or float64 tensor, got int64"):
        tp.quantile(_t(np.arange(4)), 0.5)
    with pytest.raises(ArgumentError, match=r"quantile: q must be in \[0, 1\], got 1.5"):
        tp.quantile(_t(a), 1.5)
    with pytest.raises(ArgumentError, match=r"quantile: q values must be in \[0, 1\]"):
        tp.quantile(_t(a), _t(np.array([0.2, -0.1])))
    with pytest.raises(ArgumentError, match="quantile: interpolation must be one of"):
        tp.quantile(_t(a), 0.5, interpolation="cubic")


# ---- under tp.compile and vmap ---------------------------------------------------------------------

def _pipeline(x: Any, idx: Any, src: Any, seq: Any) -> Any:
    a = tp.scatter_add(x, 1, idx, src)
    b = tp.scatter(x, 1, idx, src)
    c = tp.take_along_dim(a, idx, 1)
    d = tp.searchsorted(seq, x).to(tp.float64)
    e = tp.bucketize(x, seq, right=True).to(tp.float64)
    m = tp.median(b, 1).values
    q = tp.quantile(a, tp.tensor(np.array([0.25, 0.6])), 1)
    return a.sum() + b.sum() * 2 + c.sum() * 3 + d.sum() + e.sum() * 5 + m.sum() * 7 + q.sum() * 11


def test_compile_and_vmap_match_eager() -> None:
    seq = _t(np.sort(RNG.standard_normal(6)))
    compiled = tp.compile(_pipeline)
    for rows in (3, 5):
        x = _t(RNG.standard_normal((rows, 4)))
        idx = _t(np.argsort(RNG.random((rows, 4)), axis=1)[:, :3].astype(np.int64))
        src = _t(RNG.standard_normal((rows, 3)))
        _same(compiled(x, idx, src, seq), _pipeline(x, idx, src, seq))
    xs = RNG.standard_normal((4, 3, 5))
    idxs = np.stack([np.argsort(RNG.random((3, 5)), axis=1)[:, :2] for _ in range(4)]).astype(np.int64)
    srcs = RNG.standard_normal((4, 3, 2))
    got = tp.func.vmap(_pipeline, in_dims=(0, 0, 0, None))(_t(xs), _t(idxs), _t(srcs), seq)
    want = np.stack([_pipeline(_t(xs[i]), _t(idxs[i]), _t(srcs[i]), seq).numpy() for i in range(4)])
    _same(got, want)
    g = tp.func.grad(lambda x: _pipeline(x, _t(idxs[0]), _t(srcs[0]), seq))(_t(xs[0]))
    gc = tp.compile(tp.func.grad(lambda x: _pipeline(x, _t(idxs[0]), _t(srcs[0]), seq)))(_t(xs[0]))
    _same(gc, g)


# ---- random draws ------------------------------------------------------------------------------------

def test_randperm_is_a_uniform_permutation_and_reproducible() -> None:
    tp.manual_seed(3)
    perms = np.stack([tp.randperm(6).numpy() for _ in range(3000)])
    assert perms.dtype == np.int64
    assert all(np.array_equal(np.sort(p), np.arange(6)) for p in perms[:50])
    assert (np.sort(perms, axis=1) == np.arange(6)).all()
    freq = np.stack([(perms == v).mean(axis=0) for v in range(6)])  # each value at each place: 1/6
    assert np.abs(freq - 1 / 6).max() < 0.035
    tp.manual_seed(3)
    np.testing.assert_array_equal(tp.randperm(6).numpy(), perms[0])
    assert tp.randperm(0).shape == (0,)
    assert tp.randperm(5, dtype=tp.int32).numpy().dtype == np.int32
    with pytest.raises(ArgumentError, match="randperm: n must be a non-negative int, got -1"):
        tp.randperm(-1)


def test_bernoulli_and_normal_distributions_and_reproducibility() -> None:
    tp.manual_seed(5)
    p = np.linspace(0.05, 0.95, 10)
    draws = tp.bernoulli(_t(np.broadcast_to(p, (4000, 10)).copy())).numpy()
    assert draws.dtype == np.float64 and set(np.unique(draws)) <= {0.0, 1.0}
    np.testing.assert_allclose(draws.mean(axis=0), p, atol=0.03)
    fixed = _t(np.zeros(20000, np.float32)).bernoulli(0.3).numpy()
    assert fixed.dtype == np.float32 and abs(fixed.mean() - 0.3) < 0.015
    mean, std = np.array([-2.0, 0.0, 3.0]), np.array([0.5, 1.0, 2.0])
    z = tp.normal(_t(np.broadcast_to(mean, (20000, 3)).copy()), _t(std)).numpy()
    np.testing.assert_allclose(z.mean(axis=0), mean, atol=0.05)
    np.testing.assert_allclose(z.std(axis=0), std, rtol=0.03)
    scalar = tp.normal(1.0, 3.0, (20000,)).numpy()
    assert scalar.dtype == np.float32 and abs(scalar.mean() - 1.0) < 0.1 and abs(scalar.std() - 3.0) < 0.1
    half = tp.normal(_t(np.zeros(5)), 2.0)
    assert half.shape == (5,)
    tp.manual_seed(42)
    first = (tp.bernoulli(_t(np.full(8, 0.5))).numpy(), tp.normal(_t(mean), _t(std)).numpy(), tp.randperm(9).numpy())
    tp.manual_seed(42)
    again = (tp.bernoulli(_t(np.full(8, 0.5))).numpy(), tp.normal(_t(mean), _t(std)).numpy(), tp.randperm(9).numpy())
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    gen_a, gen_b = tp.Generator().manual_seed(1), tp.Generator().manual_seed(1)
    np.testing.assert_array_equal(tp.randperm(7, generator=gen_a).numpy(), tp.randperm(7, generator=gen_b).numpy())
    with pytest.raises(ArgumentError, match="bernoulli: input probabilities must be in"):
        tp.bernoulli(_t(np.array([0.5, 1.5])))
    with pytest.raises(DTypeError, match="bernoulli: input must be a float32 or float64 tensor"):
        tp.bernoulli(_t(np.array([0, 1])))
    with pytest.raises(ArgumentError, match="normal: std must be >= 0"):
        tp.normal(_t(mean), _t(-std))
    with pytest.raises(ShapeError, match="normal: mean and std shapes"):
        tp.normal(_t(np.zeros(3)), _t(np.ones(4)))


def test_normal_gradients_follow_the_reparametrisation() -> None:
    mean, std = _t(np.array([0.5, -1.0, 2.0]), True), _t(np.array([1.0, 2.0, 0.5]), True)
    out = tp.normal(mean, std)
    (out * 3).sum().backward()
    np.testing.assert_allclose(mean.grad.numpy(), np.full(3, 3.0))
    z = (out.detach().numpy() - mean.detach().numpy()) / std.detach().numpy()  # torch: grad * (out - mean) / std
    np.testing.assert_allclose(std.grad.numpy(), 3 * z, rtol=1e-12)


def test_compiled_draws_are_fresh_every_call_and_replay_the_eager_numbers() -> None:
    def noisy(p: Any) -> Any:
        return tp.bernoulli(p) + tp.normal(p, p * 2) + tp.randperm(p.shape[0]).to(tp.float64)

    compiled = tp.compile(noisy)
    p = _t(np.linspace(0.1, 0.9, 16))
    tp.manual_seed(7)
    first = compiled(p).numpy()
    state = random_state.get_state()
    second = compiled(p).numpy()
    assert not np.array_equal(first, second)
    tp.manual_seed(7)
    np.testing.assert_array_equal(noisy(p).numpy(), first)  # the same keys give the same numbers
    assert random_state.get_state() == state
    rows = tp.func.vmap(lambda r: tp.bernoulli(r) + tp.normal(r, 1.0), randomness="different")(
        _t(np.full((6, 400), 0.5)))
    r = rows.numpy()
    assert not np.array_equal(r[0], r[1])  # each batch entry draws its own numbers
    assert abs(r.mean() - 1.0) < 0.1
