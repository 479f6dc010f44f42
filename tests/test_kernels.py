"""The eager interpreter's compute kernels against PyTorch and plain numpy formulas."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from tests.helpers import torch_smooth_max_pool

torch = pytest.importorskip("torch")
F = torch.nn.functional

import tensorplay as tp  # noqa: E402
from tensorplay.interpreters.eager import kernels as K  # noqa: E402
from tensorplay.interpreters.eager.kernels import _support  # noqa: E402

RNG = np.random.default_rng(0)
DTYPES = [np.float32, np.float64]


def tol(dt: Any) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-5} if np.dtype(dt) == np.float32 else {"rtol": 1e-10, "atol": 1e-12}


def randn(*shape: int, dtype: Any = np.float32, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def strided(a: np.ndarray) -> np.ndarray:
    """Same values, non-contiguous (every other element of a bigger buffer on the last axis)."""
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    v = big[..., ::2]
    assert not v.flags.c_contiguous or a.shape[-1] <= 1
    return v


def fortran(a: np.ndarray) -> np.ndarray:
    """Same values, Fortran (transposed) layout."""
    return np.asfortranarray(a)


LAYOUTS = [lambda a: a, strided, fortran]


def t(a: np.ndarray) -> Any:
    return torch.from_numpy(np.ascontiguousarray(a))


def assert_close(got: np.ndarray, want: Any, dt: Any, **kw: float) -> None:
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.dtype == np.dtype(dt), (got.dtype, dt)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, **{**tol(dt), **kw})


def unchanged(*arrays: np.ndarray) -> list[np.ndarray]:
    return [a.copy() for a in arrays]


# ---- packaging ------------------------------------------------------------------------------


def test_import_does_not_import_numba() -> None:
    code = ("import sys; import tensorplay.interpreters.eager.kernels as k; "
            "assert 'numba' not in sys.modules, 'numba imported eagerly'; "
            "assert k.softmax and k.conv_nd")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_threaded_paths_match_single_thread() -> None:
    """Big inputs split their outer loop over threads; each element is computed the same way."""
    x = randn(2100, 1000, scale=3.0)
    g, b = randn(1000), randn(1000)
    xp = randn(4, 64, 66, 66)
    cases = [
        lambda: K.softmax(x, axis=-1),
        lambda: K.softmax(x, axis=0),  # one outer block: the columns are split
        lambda: K.log_softmax(x.reshape(3, 700, 1000), axis=1),
        lambda: K.layer_norm_last_axis(x, g, b, eps=1e-5),
        lambda: K.gelu(x, approximate="none"),
        lambda: K.avg_pool_nd(xp, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1)),
        lambda: K.scatter_add(x, np.arange(2100) % 7, x, axis=0),
    ]
    n = K.num_threads()
    K.set_num_threads(2)
    try:
        many = [f() for f in cases]
        K.set_num_threads(1)
        one = [f() for f in cases]
    finally:
        K.set_num_threads(n)
    for a, c in zip(many, one):
        np.testing.assert_array_equal(a, c)
    assert_close(many[1], torch.softmax(t(x), 0), np.float32)
    with pytest.raises(ValueError):
        K.set_num_threads(0)


def test_single_threaded_blas_restores_the_thread_count() -> None:
    from tensorplay.interpreters.eager.kernels import _blas
    api = _blas._api()
    if api is None:
        pytest.skip("OpenBLAS not found in this process")
    setter, getter = api
    before = getter()
    setter(2)
    try:
        with _blas.single_threaded_blas():
            assert getter() == 1
            a = randn(4, 30, 30)
            np.testing.assert_allclose(a @ a, np.einsum("bij,bjk->bik", a, a), rtol=1e-4, atol=1e-4)
        assert getter() == 2
        with _blas.single_threaded_blas(False):
            assert getter() == 2
        with pytest.raises(RuntimeError), _blas.single_threaded_blas():
            raise RuntimeError
        assert getter() == 2
    finally:
        setter(before)


def test_vexp_is_accurate_over_its_whole_range() -> None:
    nb = _support.nb()
    for dt, lo, hi in [(np.float32, -87.3, 88.7), (np.float64, -708.0, 709.7)]:
        x = np.linspace(lo, hi, 200_001).astype(dt)
        out = np.empty_like(x)
        nb.exp_into(x, out, 0, x.size)
        ref = np.exp(x.astype(np.longdouble))
        ulps = float(np.max(np.abs((out - ref) / ref))) / float(np.finfo(dt).eps)
        assert ulps < 2.0, (dt, ulps)
        special = np.array([np.nan, np.inf, -np.inf, 1e4, -1e4, 0.0], dt)
        o = np.empty_like(special)
        nb.exp_into(special, o, 0, special.size)
        np.testing.assert_array_equal(o, np.array([np.nan, np.inf, 0, np.inf, 0, 1], dt))


# ---- layer_norm, softmax, log_softmax, gelu ---------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (5, 33), (2, 3, 300), (700, 257)])
@pytest.mark.parametrize("layout", range(3))
def test_layer_norm_matches_torch(dt: Any, shape: tuple[int, ...], layout: int) -> None:
    x = LAYOUTS[layout](randn(*shape, dtype=dt, scale=3.0) + 5.0)
    d = shape[-1]
    g, b = randn(d, dtype=dt), randn(d, dtype=dt)
    before = unchanged(x, g, b)
    got = K.layer_norm_last_axis(x, strided(g), b, eps=1e-5)
    want = F.layer_norm(t(x), (d,), t(g), t(b), 1e-5)
    assert_close(got, want, dt, rtol=1e-5 if dt == np.float32 else 1e-10, atol=1e-5 if dt == np.float32 else 1e-10)
    for a, c in zip((x, g, b), before):
        np.testing.assert_array_equal(a, c)


def test_layer_norm_zero_size_and_dtypes() -> None:
    assert K.layer_norm_last_axis(np.zeros((0, 4), np.float32), np.ones(4, np.float32), np.zeros(4, np.float32),
                        eps=1e-5).shape == (0, 4)
    assert K.layer_norm_last_axis(np.zeros((3, 0)), np.ones(0), np.zeros(0), eps=1e-5).shape == (3, 0)
    out = K.layer_norm_last_axis(np.arange(6).reshape(2, 3), np.ones(3, np.float32), np.zeros(3, np.float32), eps=1e-5)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out[0], [-1.2247, 0.0, 1.2247], atol=1e-4)
    with pytest.raises(ValueError):
        K.layer_norm_last_axis(np.zeros((2, 3)), np.ones(4), np.zeros(3), eps=1e-5)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,axis", [((10,), 0), ((4, 37), -1), ((4, 37), 0), ((9, 1), 0), ((1, 9), 0),
                                        ((3, 5, 6), 1), ((3, 5, 1), 1),
                                        ((2, 3, 4, 5), 2), ((1, 4000, 70), 1), ((600, 300), -1)])
@pytest.mark.parametrize("layout", range(3))
def test_softmax_and_log_softmax_match_torch(dt: Any, shape: tuple[int, ...], axis: int, layout: int) -> None:
    x = LAYOUTS[layout](randn(*shape, dtype=dt, scale=4.0))
    before = x.copy()
    assert_close(K.softmax(x, axis=axis), torch.softmax(t(x), axis), dt)
    assert_close(K.log_softmax(x, axis=axis), torch.log_softmax(t(x), axis), dt)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("d", [1, 3, 10, 13, 33, 129, 1024])
def test_row_kernels_give_each_row_the_same_bits_wherever_a_threads_rows_begin(dt: Any, d: int) -> None:
    """The row kernels read row ``i + 1`` (its sum, max or dot product) while finishing row ``i``; a thread's
    first row must still be added up as every other row is, or the bits would depend on the thread count."""
    from tensorplay.interpreters.eager.kernels._support import nb
    from tensorplay.interpreters.eager.kernels.backward import nbb
    from tensorplay.interpreters.eager.kernels.rows import NO_STATS
    x = randn(64, d, dtype=dt, scale=3.0) + 1.0
    x[4, d // 2] = np.nan
    g, b = randn(d, dtype=dt), randn(d, dtype=dt)
    cotangent = randn(64, d, dtype=dt)
    kernels: list[tuple[str, Any, tuple[Any, ...]]] = [
        ("layer_norm", nb().layer_norm_rows, (g, b, 1e-5, NO_STATS)),
        ("softmax", nb().softmax_rows, ()), ("log_softmax", nb().log_softmax_rows, ()),
        ("softmax backward", nbb().softmax_bwd_rows, (cotangent,)),
        ("log_softmax backward", nbb().log_softmax_bwd_rows, (cotangent,))]
    for name, kernel, args in kernels:
        whole = np.empty_like(x)
        kernel(x, *args, whole, 0, 64)
        for bounds in ([0, 1, 64], [0, 3, 64], [0, 2, 2, 5, 6, 64], list(range(65))):
            split = np.full_like(x, 7.0)
            for lo, hi in zip(bounds[:-1], bounds[1:]):
                kernel(x, *args, split, lo, hi)
            np.testing.assert_array_equal(split, whole, err_msg=f"{name} split at {bounds}")


def test_the_row_kernel_modules_agree_on_the_pipelined_row_length() -> None:
    from tensorplay.interpreters.eager.kernels import _numba_backward, _numba_kernels
    assert _numba_backward.PIPELINED_ROW_BYTES == _numba_kernels.PIPELINED_ROW_BYTES


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("d", [10, 13, 31, 300])
def test_row_kernels_give_the_same_bits_wherever_their_rows_lie_in_memory(dt: Any, d: int) -> None:
    """A row kernel whose output loop also adds up the next row must not let LLVM's run-time overlap check
    pick another summation order when arrays lie close together: here a two-row input directly followed
    in memory by the output, and rows computed one call each (a fresh scratch row per call, which the
    allocator may place right after the input's last row)."""
    from tensorplay.interpreters.eager.kernels._support import nb
    from tensorplay.interpreters.eager.kernels.backward import nbb
    from tensorplay.interpreters.eager.kernels.rows import NO_STATS
    rows = 2
    x = randn(rows, d, dtype=dt, scale=3.0) + 1.0
    g, b = randn(d, dtype=dt), randn(d, dtype=dt)
    cot = randn(rows, d, dtype=dt)
    kernels: list[tuple[str, Any, tuple[Any, ...]]] = [
        ("layer_norm", nb().layer_norm_rows, (g, b, 1e-5, NO_STATS)),
        ("softmax backward", nbb().softmax_bwd_rows, (cot,)),
        ("log_softmax backward", nbb().log_softmax_bwd_rows, (cot,))]
    for name, kernel, args in kernels:
        apart = np.empty_like(x)
        kernel(x, *args, apart, 0, rows)
        for gap in range(0, 40):
            buf = np.empty(2 * rows * d + gap, dt)
            xa = buf[:rows * d].reshape(rows, d)
            xa[...] = x
            adjacent = buf[rows * d + gap:].reshape(rows, d)
            kernel(xa, *args, adjacent, 0, rows)
            np.testing.assert_array_equal(adjacent, apart, err_msg=f"{name}, output {gap} elements after x")
            one_by_one = np.empty_like(x)
            for i in range(rows):
                kernel(x, *args, one_by_one, i, i + 1)
            np.testing.assert_array_equal(one_by_one, apart, err_msg=f"{name}, one row per call")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_inf_nan_rows(dt: Any, axis: int) -> None:
    x = randn(4, 6, dtype=dt)
    x[0] = -np.inf          # all -inf: NaN (as PyTorch)
    x[1, 2] = np.nan        # NaN propagates through the row
    x[2, :3] = -np.inf      # partial -inf: those entries are exactly 0
    x[3, 1] = np.inf        # +inf: NaN (as PyTorch)
    if axis == 0:
        x = np.ascontiguousarray(x.T)
    for ours, theirs in [(K.softmax, torch.softmax), (K.log_softmax, torch.log_softmax)]:
        got = ours(x, axis=axis)
        want = theirs(t(x), axis).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], **tol(dt))
    sm = K.softmax(x, axis=axis)
    part = sm[2] if axis == 1 else sm[:, 2]
    assert np.all(part[:3] == 0) and abs(part.sum() - 1) < 1e-5


def test_softmax_extreme_values_and_zero_size() -> None:
    x = np.array([[1e30, -1e30, 0.0], [-1e4, -1e4 - 1, -1e4 - 100]], np.float32)
    assert_close(K.softmax(x, axis=1), torch.softmax(t(x), 1), np.float32)
    assert_close(K.log_softmax(x, axis=1), torch.log_softmax(t(x), 1), np.float32)
    for shape, axis in [((0, 5), 1), ((5, 0), 1), ((3, 0, 2), 0)]:
        assert K.softmax(np.zeros(shape, np.float32), axis=axis).shape == shape
        assert K.log_softmax(np.zeros(shape), axis=axis).dtype == np.float64
    assert K.softmax(np.arange(3), axis=0).dtype == np.float32
    with pytest.raises(IndexError):
        K.softmax(np.zeros((2, 3)), axis=2)


def _gelu_ref(x: np.ndarray, approximate: str) -> np.ndarray:
    """float64 reference without the cancellation of ``1 + erf`` / ``1 + tanh`` in the left tail."""
    xd = x.astype(np.float64)
    if approximate == "none":
        return np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in xd.ravel()]).reshape(x.shape)
    u = math.sqrt(2 / math.pi) * (xd + 0.044715 * xd ** 3)
    with np.errstate(over="ignore"):
        return xd / (1 + np.exp(-2 * u))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch_and_tail_reference(dt: Any, approximate: str) -> None:
    x = strided(randn(40, 300, dtype=dt, scale=3.0))
    assert_close(K.gelu(x, approximate=approximate), F.gelu(t(x), approximate=approximate), dt)
    tail = np.linspace(-12, 12, 2001).astype(dt)
    got = K.gelu(tail, approximate=approximate)
    ref = _gelu_ref(tail, approximate)
    # float32: the exponent -x*x/2 rounds (relative error ~ x*x * 6e-8), so the far left tail
    # (values below 1e-15) is accurate to ~1e-5; PyTorch's float32 gives 0 or garbage there
    near = np.abs(tail) <= 6
    rel = 5e-6 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(got[near], ref[near], rtol=rel, atol=0)
    normal = np.abs(ref) > 1e-30  # float32 flushes what lies below its normal range
    np.testing.assert_allclose(got[normal], ref[normal], rtol=3e-5 if dt == np.float32 else 1e-12, atol=0)
    assert np.all(np.abs(got[~normal]) <= 1e-30)
    special = np.array([np.nan, 0.0, -40.0, 40.0], dt)
    want = F.gelu(t(special), approximate=approximate).numpy()
    np.testing.assert_array_equal(K.gelu(special, approximate=approximate), want)
    assert K.gelu(np.array([np.inf], dt), approximate=approximate)[0] == np.inf  # PyTorch's erf form: NaN
    assert K.gelu(np.zeros((0, 3), dt), approximate=approximate).shape == (0, 3)


def test_float32_gelu_gives_each_element_the_same_bits_whatever_the_block_it_falls_in() -> None:
    """The float32 erf kernel runs whole blocks of 256 elements one pass per stage (four elements
    side by side in the polynomial stages) and the rest in one fused loop: both are the same
    operations, so each element's bits depend on its value only (saved programs promise these
    bits), NaN keeping its own payload and sign."""
    kernel = _support.nb().gelu_erf32
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(1500) * 5, np.linspace(-16, 16, 977),
                        rng.integers(0, 2 ** 32, 600, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3e38, -3e38])]).astype(np.float32)
    x = x[rng.permutation(x.size)]
    whole = np.empty_like(x)
    kernel(x, whole, 0, x.size)
    one_by_one = np.empty_like(x)
    for i in range(x.size):
        kernel(x, one_by_one, i, i + 1)
    np.testing.assert_array_equal(whole.view(np.uint32), one_by_one.view(np.uint32))
    for start, stop in ((3, 258), (5, 261), (1, 514), (7, 263)):
        part = np.full(x.size, 7.0, np.float32)
        kernel(x, part, start, stop)
        np.testing.assert_array_equal(part[start:stop].view(np.uint32), whole[start:stop].view(np.uint32))
        assert np.all(part[:start] == 7.0) and np.all(part[stop:] == 7.0)
    nan = np.isnan(x)
    assert nan.sum() > 0
    quiet = np.uint32(0x00400000)
    np.testing.assert_array_equal(whole[nan].view(np.uint32), x[nan].view(np.uint32) | quiet)
    body = ~nan & (np.abs(x) <= 6) & (np.abs(x) > 1e-30)  # below, x/2 rounds in float32 (to 0 at 1e-45)
    np.testing.assert_allclose(whole[body], _gelu_ref(x[body], "none"), rtol=5e-6, atol=0)


def test_gelu_rejects_unknown_mode() -> None:
    with pytest.raises(ValueError):
        K.gelu(np.zeros(3), approximate="fast")


# ---- pooling --------------------------------------------------------------------------------

POOL_CASES = [
    # spatial shape, kernel, stride, padding
    ((9,), (3,), (2,), (1,)),
    ((8,), (2,), (2,), (0,)),
    ((7, 6), (2, 2), (2, 2), (0, 0)),
    ((11, 11), (2, 2), (2, 2), (0, 0)),
    ((8, 9), (2, 2), (2, 2), (0, 0)),
    ((26, 26), (2, 2), (2, 2), (0, 0)),
    ((7, 9), (3, 2), (2, 1), (1, 1)),
    ((5, 6, 7), (2, 3, 3), (1, 2, 3), (1, 1, 0)),
    ((4, 4, 4), (2, 2, 2), (2, 2, 2), (0, 0, 0)),
]


def _torch_pool(kind: str, nsp: int) -> Any:
    return getattr(F, f"{kind}_pool{nsp}d")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("layout", range(3))
def test_max_pool_forward_backward_select(dt: Any, case: Any, layout: int) -> None:
    sp, k, s, p = case
    nsp = len(sp)
    x = LAYOUTS[layout](randn(2, 3, *sp, dtype=dt))
    before = x.copy()
    params = dict(kernel_size=k, stride=s, padding=p)
    tx = t(x).requires_grad_()
    ty, idx = _torch_pool("max", nsp)(tx, k, s, p, return_indices=True)
    y = K.max_pool_nd(x, **params)
    assert_close(y, ty, dt, rtol=0, atol=0)
    g = strided(randn(*y.shape, dtype=dt))
    ty.backward(t(g))
    assert_close(K.max_pool_backward_nd(x, g, **params), tx.grad, dt)
    h = randn(*x.shape, dtype=dt)
    want = np.take_along_axis(h.reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1), axis=2).reshape(y.shape)
    assert_close(K.max_pool_select_nd(x, fortran(h), **params), want, dt, rtol=0, atol=0)
    np.testing.assert_array_equal(x, before)


def test_max_pool_ties_go_to_first_position_and_nan_wins() -> None:
    x = np.array([[[[1.0, 5.0, 5.0, 2.0], [5.0, 0.0, 5.0, 5.0]]]], np.float32)
    params = dict(kernel_size=(2, 4), stride=(1, 1), padding=(0, 0))
    np.testing.assert_array_equal(K.max_pool_backward_nd(x, np.ones((1, 1, 1, 1), np.float32), **params),
                                  [[[[0, 1, 0, 0], [0, 0, 0, 0]]]])
    h = np.arange(8, dtype=np.float32).reshape(x.shape)
    assert K.max_pool_select_nd(x, h, **params).item() == 1.0
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 1, 3] = np.nan
    assert np.isnan(K.max_pool_nd(x, **params)).all()
    # the first NaN (row-major) counts as the maximum
    np.testing.assert_array_equal(K.max_pool_backward_nd(x, np.ones((1, 1, 1, 1), np.float32), **params),
                                  [[[[0, 0, 0, 0], [0, 1, 0, 0]]]])
    assert K.max_pool_select_nd(x, h, **params).item() == 5.0


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("hw", [(7, 9), (8, 9), (7, 8), (6, 10), (2, 2), (3, 3), (2, 7)])
def test_max_pool_backward_primitive_takes_the_2x2_kernel_with_the_general_routing(dt: Any, hw: Any) -> None:
    """``max_pool_backward_nd`` (what compiled programs and the composite rules call) is the eager rule's
    entry point: the 2x2 stride-2 kernel where it applies, the general one otherwise; both route each
    window's cotangent to its first maximum (the first NaN), so they agree bit for bit, ties included
    (odd and even heights and widths: the 2x2 kernel's flat pairs line up with the rows differently)."""
    from tensorplay.interpreters.eager.kernels import backward as KB
    from tensorplay.interpreters.eager.kernels import pool

    assert K.max_pool_backward_nd is KB.max_pool_backward
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, (2, 3) + hw).astype(dt)  # many ties
    x[0, 0, 1, 1] = x[1, 2, hw[0] - 2, hw[1] - 1] = np.nan
    x[1, 1, 0, 0] = np.inf
    x[0, 2, hw[0] - 1, 0] = -np.inf
    params = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    g = strided(randn(2, 3, hw[0] // 2, hw[1] // 2, dtype=dt))
    fast = K.max_pool_backward_nd(x, g, **params)
    general = pool.max_pool_backward(x, g, **params)
    assert fast.dtype == np.dtype(dt)
    np.testing.assert_array_equal(fast, general)
    assert np.count_nonzero(fast) == g.size  # each window's cotangent lands once (the odd row and column get 0)


def test_max_pool_padding_is_minus_inf() -> None:
    x = -np.ones((1, 1, 3, 3)) * 7
    y = K.max_pool_nd(x, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))
    np.testing.assert_array_equal(y, -7 * np.ones((1, 1, 3, 3)))
    x = np.full((1, 1, 4), -np.inf)
    np.testing.assert_array_equal(K.max_pool_nd(x, kernel_size=(2,), stride=(2,), padding=(1,)),
                                  np.full((1, 1, 3), -np.inf))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_avg_pool_forward_backward(dt: Any, case: Any) -> None:
    sp, k, s, p = case
    nsp = len(sp)
    x = strided(randn(2, 3, *sp, dtype=dt))
    tx = t(x).requires_grad_()
    ty = _torch_pool("avg", nsp)(tx, k, s, p, count_include_pad=True)
    y = K.avg_pool_nd(x, kernel_size=k, stride=s, padding=p)
    assert_close(y, ty, dt)
    g = fortran(randn(*y.shape, dtype=dt))
    ty.backward(t(g))
    assert_close(K.avg_pool_backward_nd(g, input_shape=sp, kernel_size=k, stride=s, padding=p), tx.grad, dt)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("beta", [0.5, 20.0, -3.0])
def test_smooth_max_pool_forward_backward(dt: Any, case: Any, beta: float) -> None:
    sp, k, s, p = case
    x = fortran(randn(2, 3, *sp, dtype=dt, scale=2.0))
    tx = t(x).requires_grad_()
    ty = torch_smooth_max_pool(tx, k, s, p, beta)
    y = K.smooth_max_pool_nd(x, kernel_size=k, stride=s, padding=p, beta=beta)
    assert_close(y, ty, dt)
    g = randn(*y.shape, dtype=dt)
    ty.backward(t(g))
    got = K.smooth_max_pool_backward_nd(x, strided(g), kernel_size=k, stride=s, padding=p, beta=beta)
    assert_close(got, tx.grad, dt)


def test_smooth_max_pool_is_stable_for_large_beta() -> None:
    x = randn(1, 2, 8, 8, scale=50.0)
    params = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    y = K.smooth_max_pool_nd(x, beta=1e4, **params)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, K.max_pool_nd(x, **params), atol=1e-3)


def test_pool_zero_size_and_bad_geometry() -> None:
    for fn in (K.max_pool_nd, K.avg_pool_nd):
        assert fn(np.zeros((0, 3, 4, 4), np.float32), kernel_size=(2, 2), stride=(2, 2),
                  padding=(0, 0)).shape == (0, 3, 2, 2)
        assert fn(np.zeros((2, 0, 5)), kernel_size=(2,), stride=(1,), padding=(0,)).shape == (2, 0, 4)
    assert K.max_pool_backward_nd(np.zeros((0, 1, 4)), np.zeros((0, 1, 2)), kernel_size=(2,), stride=(2,),
                               padding=(0,)).shape == (0, 1, 4)
    assert K.avg_pool_backward_nd(np.zeros((1, 0, 2, 2)), input_shape=(4, 4), kernel_size=(2, 2),
                               stride=(2, 2), padding=(0, 0)).shape == (1, 0, 4, 4)
    with pytest.raises(ValueError):
        K.max_pool_nd(np.zeros((1, 1, 4, 4)), kernel_size=(2,), stride=(2,), padding=(0,))
    with pytest.raises(ValueError):
        K.max_pool_backward_nd(np.zeros((1, 1, 4)), np.zeros((1, 1, 3)), kernel_size=(2,), stride=(2,),
                            padding=(0,))


def test_pool_on_large_input_uses_threads_consistently() -> None:
    x = randn(8, 16, 40, 40)
    params = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
    ty = F.max_pool2d(t(x), 3, 2, 1)
    assert_close(K.max_pool_nd(x, **params), ty, np.float32, rtol=0, atol=0)
    assert_close(K.avg_pool_nd(x, **params), F.avg_pool2d(t(x), 3, 2, 1), np.float32)


# ---- convolution ----------------------------------------------------------------------------

CONV_CASES = [
    # spatial, kernel, stride, padding, dilation, groups, C, O
    ((10,), (3,), (1,), (1,), (1,), 1, 3, 4),
    ((11,), (3,), (2,), (2,), (2,), 2, 4, 6),
    ((8, 9), (3, 3), (1, 1), (1, 1), (1, 1), 1, 3, 5),
    ((9, 8), (3, 2), (2, 1), (1, 0), (1, 2), 3, 6, 3),
    ((7, 7), (1, 1), (1, 1), (0, 0), (1, 1), 2, 4, 6),
    ((9, 9), (5, 5), (3, 2), (2, 1), (1, 1), 1, 2, 3),
    ((5, 6, 7), (3, 2, 3), (1, 2, 2), (1, 0, 1), (1, 1, 2), 1, 2, 3),
    ((4, 5, 4), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1, 3, 2),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_and_its_adjoints_match_torch(dt: Any, case: Any) -> None:
    sp, k, s, p, d, g, c, o = case
    nsp = len(sp)
    x = strided(randn(3, c, *sp, dtype=dt))
    w = fortran(randn(o, c // g, *k, dtype=dt))
    before = unchanged(x, w)
    params = dict(stride=s, padding=p, dilation=d, groups=g)
    tx, tw = t(x).requires_grad_(), t(w).requires_grad_()
    ty = getattr(F, f"conv{nsp}d")(tx, tw, None, s, p, d, g)
    y = K.conv_nd(x, w, **params)
    assert_close(y, ty, dt, rtol=1e-4 if dt == np.float32 else 1e-10)
    gy = strided(randn(*y.shape, dtype=dt))
    ty.backward(t(gy))
    assert_close(K.conv_weight_grad_nd(x, gy, kernel_size=k, **params), tw.grad, dt,
                 rtol=1e-4 if dt == np.float32 else 1e-10, atol=1e-4 if dt == np.float32 else 1e-10)
    # conv_transpose with the same weight is the adjoint w.r.t. the input; output_padding fills
    # the positions that stride skipped, so the input shape is recovered exactly
    op = tuple((sp[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) % s[i] for i in range(nsp))
    dx = K.conv_transpose_nd(gy, w, stride=s, padding=p, output_padding=op, dilation=d, groups=g)
    assert_close(dx, tx.grad, dt, rtol=1e-4 if dt == np.float32 else 1e-10,
                 atol=1e-5 if dt == np.float32 else 1e-10)
    for a, b in zip((x, w), before):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", [
    # spatial, kernel, stride, padding, output_padding, dilation, groups, C, O
    ((5,), (3,), (2,), (1,), (1,), (1,), 1, 2, 3),
    ((4, 5), (3, 3), (2, 3), (1, 0), (1, 2), (1, 1), 2, 4, 6),
    ((3, 4), (2, 2), (1, 1), (0, 0), (1, 0), (2, 1), 1, 3, 2),
    ((3, 3, 2), (2, 3, 2), (2, 1, 2), (0, 1, 1), (0, 0, 1), (1, 1, 1), 1, 2, 2),
    ((6, 6), (1, 1), (1, 1), (0, 0), (0, 0), (1, 1), 2, 4, 4),
])
def test_conv_transpose_matches_torch(case: Any) -> None:
    sp, k, s, p, op, d, g, c, o = case
    nsp = len(sp)
    for dt in DTYPES:
        x = fortran(randn(2, c, *sp, dtype=dt))
        w = strided(randn(c, o // g, *k, dtype=dt))
        want = getattr(F, f"conv_transpose{nsp}d")(t(x), t(w), None, s, p, op, g, d)
        got = K.conv_transpose_nd(x, w, stride=s, padding=p, output_padding=op, dilation=d, groups=g)
        assert_close(got, want, dt, rtol=1e-4 if dt == np.float32 else 1e-10,
                     atol=1e-5 if dt == np.float32 else 1e-10)


def test_conv_batch_blocks_and_threads(monkeypatch: Any) -> None:
    from tensorplay.interpreters.eager.kernels import convolution as conv_mod
    x = randn(9, 3, 12, 12)
    w = randn(5, 3, 3, 3)
    want = F.conv2d(t(x), t(w), None, 1, 1)
    params = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    full = K.conv_nd(x, w, **params)
    monkeypatch.setattr(conv_mod, "COLS_BLOCK_BYTES", 3 * 27 * 144 * 4)  # three samples per block
    assert_close(K.conv_nd(x, w, **params), want, np.float32, rtol=1e-4)
    gw = K.conv_weight_grad_nd(x, np.ones_like(full), kernel_size=(3, 3), **params)
    tw = t(w).requires_grad_()
    F.conv2d(t(x), tw, None, 1, 1).sum().backward()
    assert_close(gw, tw.grad, np.float32, rtol=1e-4, atol=1e-4)
    dx = K.conv_transpose_nd(full, w, stride=(1, 1), padding=(1, 1), output_padding=(0, 0), dilation=(1, 1),
                          groups=1)
    assert_close(dx, F.conv_transpose2d(t(full), t(w), None, 1, 1), np.float32, rtol=1e-4, atol=1e-4)


def test_conv_larger_batch_with_threads_enabled_matches_torch() -> None:
    x = randn(16, 8, 24, 24)
    w = randn(16, 8, 3, 3)
    params = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    n = K.num_threads()
    K.set_num_threads(2)
    try:
        y = K.conv_nd(x, w, **params)
        gw = K.conv_weight_grad_nd(x, y, kernel_size=(3, 3), **params)
        dx = K.conv_transpose_nd(y, w, stride=(1, 1), padding=(1, 1), output_padding=(0, 0), dilation=(1, 1),
                              groups=1)
    finally:
        K.set_num_threads(n)
    tw = t(w).requires_grad_()
    ty = F.conv2d(t(x), tw, None, 1, 1)
    assert_close(y, ty, np.float32, rtol=1e-4, atol=1e-4)
    ty.backward(ty.detach())
    assert_close(gw, tw.grad, np.float32, rtol=1e-4, atol=1e-2)
    assert_close(dx, F.conv_transpose2d(ty.detach(), t(w), None, 1, 1), np.float32, rtol=1e-4, atol=1e-3)


def test_conv_zero_size_and_errors() -> None:
    params = dict(stride=(1,), padding=(0,), dilation=(1,), groups=1)
    assert K.conv_nd(np.zeros((0, 2, 5), np.float32), np.ones((3, 2, 3), np.float32), **params).shape == (0, 3, 3)
    y = K.conv_nd(np.ones((2, 0, 5)), np.ones((3, 0, 3)), **params)
    assert y.shape == (2, 3, 3) and not y.any()
    assert K.conv_nd(np.ones((1, 2, 2)), np.ones((3, 2, 3)), **params).shape == (1, 3, 0)
    assert K.conv_weight_grad_nd(np.ones((0, 2, 5)), np.ones((0, 3, 3)), kernel_size=(3,), **params).shape == (3, 2, 3)
    assert K.conv_transpose_nd(np.ones((0, 2, 5)), np.ones((2, 3, 3)), stride=(1,), padding=(0,),
                            output_padding=(0,), dilation=(1,), groups=1).shape == (0, 3, 7)
    with pytest.raises(ValueError):
        K.conv_nd(np.ones((1, 3, 5)), np.ones((4, 2, 3)), **params)  # C/groups mismatch
    with pytest.raises(ValueError):
        K.conv_nd(np.ones((1, 2, 5)), np.ones((4, 2, 3)), stride=(1, 1), padding=(0,), dilation=(1,), groups=1)


# ---- gather, scatter_add ----------------------------------------------------------------------


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_is_numpy_take(dt: Any, axis: int) -> None:
    x = strided((RNG.standard_normal((4, 5, 6)) * 10).astype(dt))
    n = x.shape[axis]
    idx = RNG.integers(-n, n, size=(3, 2))
    got = K.gather(x, idx, axis=axis)
    np.testing.assert_array_equal(got, np.take(x, idx, axis=axis))
    assert got.dtype == x.dtype and not np.shares_memory(got, x)
    assert K.gather(x, np.zeros((0,), np.int64), axis=axis).shape == tuple(
        np.take(x, np.zeros((0,), np.int64), axis=axis).shape)


def test_gather_out_of_range_names_index_and_size() -> None:
    x = np.zeros((3, 4))
    with pytest.raises(IndexError, match=r"index 4 .*axis 1 with size 4"):
        K.gather(x, np.array([0, 4, 9]), axis=1)
    with pytest.raises(IndexError, match=r"index -4 .*size 3"):
        K.gather(x, np.array([[-4]]), axis=0)
    with pytest.raises(IndexError):
        K.scatter_add(x, np.array([5]), np.zeros((3, 1)), axis=1)
    with pytest.raises(TypeError):
        K.gather(x, np.array([0.5]), axis=0)


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_add_accumulates_repeats(dt: Any, axis: int) -> None:
    base = fortran((RNG.standard_normal((4, 5, 70)) * 10).astype(dt))
    n = base.shape[axis]
    idx = RNG.integers(-n, n, size=(9,))
    idx[:3] = 1  # repeated
    upd_shape = base.shape[:axis] + idx.shape + base.shape[axis + 1:]
    upd = strided((RNG.standard_normal(upd_shape) * 10).astype(dt))
    before = unchanged(base, upd)
    got = K.scatter_add(base, idx, upd, axis=axis)
    want = np.array(base, copy=True)
    where = tuple([slice(None)] * axis + [idx])
    np.add.at(want, where, upd)
    assert got.dtype == np.dtype(dt)
    np.testing.assert_allclose(got, want, **tol(dt if dt != np.int64 else np.float64))
    for a, b in zip((base, upd), before):
        np.testing.assert_array_equal(a, b)


def test_scatter_add_is_adjoint_of_gather_and_handles_empty() -> None:
    x = randn(50, 300, dtype=np.float64)
    idx = RNG.integers(0, 50, size=(20, 3))
    u = randn(20, 3, 300, dtype=np.float64)
    lhs = np.sum(K.gather(x, idx, axis=0) * u)
    rhs = np.sum(x * K.scatter_add(np.zeros_like(x), idx, u, axis=0))
    assert abs(lhs - rhs) < 1e-9 * abs(lhs)
    base = randn(3, 4)
    out = K.scatter_add(base, np.zeros((0,), np.int64), np.zeros((3, 0), np.float32), axis=1)
    np.testing.assert_array_equal(out, base)
    assert out is not base


# ---- attention ------------------------------------------------------------------------------


def _attention_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, scale: float) -> np.ndarray:
    s = scale * (q.astype(np.float64) @ np.swapaxes(k.astype(np.float64), -1, -2))
    if mask is not None:
        s = np.where(mask, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(s - m)
    den = e.sum(-1, keepdims=True)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)
    return p @ v.astype(np.float64)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("mask_kind", ["none", "causal", "broadcast", "full_row"])
def test_attention_matches_reference(dt: Any, mask_kind: str) -> None:
    b, h, n, m, d, dv = 2, 3, 5, 7, 8, 4
    q = strided(randn(b, h, n, d, dtype=dt))
    k = fortran(randn(b, h, m, d, dtype=dt))
    v = randn(b, h, m, dv, dtype=dt)
    mask: np.ndarray | None = None
    if mask_kind == "causal":
        mask = np.tril(np.ones((n, m), bool))
    elif mask_kind == "broadcast":
        mask = RNG.random((b, 1, 1, m)) > 0.3
    elif mask_kind == "full_row":
        mask = RNG.random((b, h, n, m)) > 0.5
        mask[0, 1, 2] = False
    scale = 1 / math.sqrt(d)
    got = K.dot_product_attention(q, k, v, mask, scale=scale)
    want = _attention_ref(q, k, v, mask, scale)
    assert_close(got, want, dt)
    if mask_kind == "none":
        assert_close(got, F.scaled_dot_product_attention(t(q), t(k), t(v)), dt)
    if mask_kind == "full_row":
        assert np.all(got[0, 1, 2] == 0)


def test_attention_batch_prefixes_broadcast() -> None:
    q = randn(2, 3, 5, 4)
    k = randn(1, 3, 6, 4)
    v = randn(2, 1, 6, 7)
    mask = RNG.random((6,)) > 0.3
    got = K.dot_product_attention(q, k, v, mask, scale=0.5)
    want = _attention_ref(q, k, v, mask, 0.5)
    assert_close(got, want, np.float32)
    got2 = K.dot_product_attention(q[:1, :1], k, np.broadcast_to(v, (2, 3, 6, 7)), None, scale=0.5)
    assert_close(got2, _attention_ref(q[:1, :1], k, np.broadcast_to(v, (2, 3, 6, 7)), None, 0.5), np.float32)


def test_attention_many_heads_with_threads_enabled() -> None:
    q, k, v = randn(4, 8, 64, 32), randn(4, 8, 64, 32), randn(4, 8, 64, 16)
    mask = RNG.random((4, 1, 64, 64)) > 0.2
    n = K.num_threads()
    K.set_num_threads(2)
    try:
        got = K.dot_product_attention(q, k, v, mask, scale=0.2)
    finally:
        K.set_num_threads(n)
    assert_close(got, _attention_ref(q, k, v, mask, 0.2), np.float32)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n, m", [(128, 128), (97, 97), (70, 133), (131, 64)])
def test_attention_causal_blocks_match_the_reference_pytorch_and_the_full_path(dt: Any, n: int, m: int) -> None:
    """A causal (prefix) mask takes the block path (odd sizes, more keys than queries, a key prefix
    shorter than the rows, non-contiguous operands); it equals the float64 reference, PyTorch's causal
    attention, and the full computation under the same mask given per head (which never blocks)."""
    from tensorplay.interpreters.eager.kernels import attention_blocks
    b, h, d, dv = 2, 3, 16, 8
    q = strided(randn(b, h, n, d, dtype=dt))
    k = fortran(randn(b, h, m, d, dtype=dt))
    v = randn(b, h, m, dv, dtype=dt)
    mask = np.tril(np.ones((n, m), bool), k=m - n if m < n else 0)
    found = attention_blocks.prefix_blocks(mask, n, m)
    assert found is not None and found[0][-1][2] == int(mask.sum(1).max())
    scale = 1 / math.sqrt(d)
    got = K.dot_product_attention(q, k, v, mask, scale=scale)
    assert_close(got, _attention_ref(q, k, v, mask, scale), dt)
    full = K.dot_product_attention(q, k, v, np.broadcast_to(mask, (b, h, n, m)).copy(), scale=scale)
    assert_close(got, full, dt)
    if n == m:
        with torch.no_grad():
            ref = F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True)
        assert_close(got, ref, dt)


def test_attention_blocks_only_for_prefix_masks_worth_skipping_and_finite_values() -> None:
    """Masks that are not one prefix per row, that differ per batch entry, or that allow (almost) every
    key take the full path; so does a causal mask when ``v`` holds inf or NaN, which the full
    computation spreads to every row (0 * inf) and must still do."""
    from tensorplay.interpreters.eager.kernels import attention_blocks
    causal = np.tril(np.ones((64, 64), bool))
    assert attention_blocks.prefix_blocks(causal, 64, 64) is not None
    assert attention_blocks.prefix_blocks(causal[None, None], 64, 64) is not None
    holes = causal.copy()
    holes[40, 3] = False
    assert attention_blocks.prefix_blocks(holes, 64, 64) is None
    assert attention_blocks.prefix_blocks(np.broadcast_to(causal, (2, 64, 64)), 64, 64) is None
    assert attention_blocks.prefix_blocks(np.ones((64, 64), bool), 64, 64) is None
    assert attention_blocks.prefix_blocks(causal.astype(np.float32), 64, 64) is None
    q, k, v = randn(2, 64, 8), randn(2, 64, 8), randn(2, 64, 4)
    v[1, 60, 2] = np.inf
    assert attention_blocks.usable(causal, 64, 64, v) is None
    got = K.dot_product_attention(q, k, v, causal, scale=0.3)
    want = K.dot_product_attention(q, k, v, np.broadcast_to(causal, (2, 64, 64)).copy(), scale=0.3)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert not np.isfinite(got[1, :, 2]).any() and np.isfinite(got[0]).all()  # NaN (0 * inf) or inf


def test_attention_causal_blocks_threaded_equal_one_thread() -> None:
    q, k, v = randn(4, 4, 128, 32), randn(4, 4, 128, 32), randn(4, 4, 128, 16)
    mask = np.tril(np.ones((128, 128), bool))
    n = K.num_threads()
    K.set_num_threads(1)
    try:
        one = K.dot_product_attention(q, k, v, mask, scale=0.2)
        K.set_num_threads(2)
        two = K.dot_product_attention(q, k, v, mask, scale=0.2)
    finally:
        K.set_num_threads(n)
    np.testing.assert_array_equal(one, two)  # the stacks of GEMMs run on one OpenBLAS thread either way


def test_attention_zero_sizes_and_errors() -> None:
    q = randn(2, 3, 4)
    assert K.dot_product_attention(q, randn(2, 0, 4), randn(2, 0, 5), None, scale=1.0).tolist() == np.zeros((2, 3, 5)).tolist()
    assert K.dot_product_attention(randn(2, 0, 4), randn(2, 6, 4), randn(2, 6, 5), None, scale=1.0).shape == (2, 0, 5)
    with pytest.raises(TypeError):
        K.dot_product_attention(q, q, q, np.ones((3, 3)), scale=1.0)
    with pytest.raises(ValueError):
        K.dot_product_attention(q, randn(2, 3, 5), q, None, scale=1.0)


# ---- random -----------------------------------------------------------------------------------


def test_random_ops_follow_the_spec_key_mapping_and_are_reproducible() -> None:
    key = np.array([42, 7], np.int64)

    def gen() -> np.random.Generator:
        # spec/random.py: both words form Philox's 128-bit key; Philox's counter stays 0
        return np.random.Generator(np.random.Philox(key=np.array([42, 7], dtype=np.uint64)))

    u = K.random_uniform(key, shape=(3, 4), dtype="float32")
    np.testing.assert_array_equal(u, gen().random((3, 4), dtype=np.float32))
    assert u.dtype == np.float32 and ((0 <= u) & (u < 1)).all()
    np.testing.assert_array_equal(K.random_uniform(key, shape=(6,), dtype="float64"), gen().random(6))
    z = K.random_normal(key, shape=(5,), dtype="float64")
    np.testing.assert_array_equal(z, gen().standard_normal((5,)))
    assert K.random_normal(key, shape=(5,), dtype="float32").dtype == np.float32
    r = K.random_randint(key, shape=(100,), low=-3, high=5, dtype="int32")
    np.testing.assert_array_equal(r, gen().integers(-3, 5, size=(100,)).astype(np.int32))
    assert r.dtype == np.int32 and r.min() >= -3 and r.max() < 5
    np.testing.assert_array_equal(K.random_uniform(key, shape=(3, 4), dtype="float32"), u)
    # consecutive counters give unrelated streams, not the same stream shifted
    nxt = K.random_uniform(np.array([42, 8]), shape=(64,), dtype="float64")
    cur = K.random_uniform(key, shape=(64,), dtype="float64")
    assert not np.isin(nxt, cur).any()
    assert K.random_normal(key, shape=(0, 3), dtype="float32").shape == (0, 3)
    with pytest.raises(TypeError):
        K.random_uniform(np.array([1.0, 2.0]), shape=(2,), dtype="float32")


# ---- properties shared by every kernel ---------------------------------------------------------


def test_every_primitive_kernel_is_exported() -> None:
    names = ["layer_norm_last_axis", "softmax", "log_softmax", "gelu", "max_pool_nd", "max_pool_backward_nd",
             "max_pool_select_nd", "avg_pool_nd", "avg_pool_backward_nd", "smooth_max_pool_nd",
             "smooth_max_pool_backward_nd", "conv_nd", "conv_transpose_nd", "conv_weight_grad_nd", "gather",
             "scatter_add", "dot_product_attention", "random_uniform", "random_normal", "random_randint"]
    from tensorplay.ops import PRIMITIVE_NAMES
    for name in names:
        assert name in PRIMITIVE_NAMES, name
        assert callable(getattr(K, name))


@pytest.mark.parametrize("fn,args,params", [
    (K.softmax, (randn(3, 4),), dict(axis=1)),
    (K.gelu, (randn(3, 4),), dict(approximate="none")),
    (K.max_pool_nd, (randn(1, 2, 4, 4),), dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))),
    (K.conv_nd, (randn(1, 2, 4, 4), randn(3, 2, 1, 1)), dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)),
])
def test_results_are_fresh_arrays(fn: Any, args: tuple[np.ndarray, ...], params: dict[str, Any]) -> None:
    out1 = fn(*args, **params)
    out2 = fn(*args, **params)
    assert not any(np.shares_memory(out1, a) for a in args)
    assert not np.shares_memory(out1, out2)
    np.testing.assert_array_equal(out1, out2)


def test_float_dtype_rules() -> None:
    x32, x64 = randn(2, 3), randn(2, 3, dtype=np.float64)
    assert K.layer_norm_last_axis(x32, np.ones(3), np.zeros(3, np.float32), eps=1e-5).dtype == np.float64
    assert K.gelu(np.arange(4), approximate="tanh").dtype == np.float32
    assert K.dot_product_attention(x32[None], x64[None], x32[None], None, scale=1.0).dtype == np.float64
    for combo in itertools.product([np.float32, np.float64], repeat=2):
        xs = randn(1, 1, 5, dtype=combo[0])
        ws = randn(1, 1, 3, dtype=combo[1])
        y = K.conv_nd(xs, ws, stride=(1,), padding=(0,), dilation=(1,), groups=1)
        assert y.dtype == np.result_type(*combo)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_sigmoid_kernel_matches_exact_sigmoid_and_pytorch(dtype: Any, layout: str) -> None:
    """The one-pass sigmoid: within a few ulps of ``1/(1+exp(-x))`` computed in float64 wherever the result
    is a normal number, exactly 0 and 1 far out, NaN for NaN; any layout; the input is left alone."""
    gen = np.random.default_rng(7)
    base = np.concatenate([gen.standard_normal(3000) * 12, [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30,
                                                            30.0, -30.0, 80.0, -80.0, 1000.0, -1000.0]])
    x = np.resize(base.astype(dtype), (61, 101))
    x = {"contiguous": x, "transposed": x.T, "strided": x[:, ::3]}[layout]
    before = x.copy()
    got = K.sigmoid(x)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_array_equal(x, before)
    with np.errstate(over="ignore"):
        exact = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    tiny = np.finfo(dtype).tiny
    normal = np.isfinite(exact) & (exact >= tiny)
    np.testing.assert_allclose(got[normal], exact[normal], rtol=4 * np.finfo(dtype).eps, atol=0)
    assert np.all(np.abs(got[~normal & ~np.isnan(x)] - exact[~normal & ~np.isnan(x)]) <= tiny)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(x))
    np.testing.assert_array_equal(got[x == np.inf], 1.0)
    np.testing.assert_array_equal(got[x == -np.inf], 0.0)
    np.testing.assert_allclose(got, torch.sigmoid(torch.from_numpy(np.ascontiguousarray(x))).numpy(),
                               rtol=4 * np.finfo(dtype).eps, atol=tiny)
    assert K.sigmoid(np.zeros((0, 4), dtype)).shape == (0, 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided", "small"])
def test_relu_kernel_is_numpy_maximum_bit_for_bit(dtype: Any, layout: str) -> None:
    """The jitted relu gives ``numpy.maximum(x, 0)`` exactly (NaN stays NaN, ``-0`` becomes ``+0``, the
    infinities stay), in any layout, through the kernel entry point and the eager ``relu`` on both sides
    of the size where the eager interpreter switches to the kernel; the input is left alone; autograd's
    gradient is PyTorch's."""
    gen = np.random.default_rng(8)
    base = np.concatenate([gen.standard_normal(5000), [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, -1e-310]])
    x = np.resize(base.astype(dtype), (71, 103))
    x = {"contiguous": x, "transposed": x.T, "strided": x[:, ::3], "small": x[:3, :5]}[layout]
    before = x.copy()
    want = np.maximum(x, np.zeros((), dtype))
    for got in (K.relu(x), tp.tensor(x).relu().numpy()):
        assert got.dtype == dtype and got.shape == x.shape
        np.testing.assert_array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))
    np.testing.assert_array_equal(x, before)
    leaf = tp.tensor(x, requires_grad=True)
    leaf.relu().sum().backward()
    ref = torch.tensor(np.ascontiguousarray(x), requires_grad=True)
    torch.relu(ref).sum().backward()
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(leaf.grad.numpy()[finite], ref.grad.numpy()[finite])
    assert K.relu(np.zeros((0, 4), dtype)).shape == (0, 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [1, 5, 13, 37, 64, 255, 256, 300])
def test_layer_norm_rows_give_the_same_bits_with_and_without_statistics_or_output(dtype: Any, d: int) -> None:
    """Short rows (their own loops) and long ones (the pipelined loop): the output does not depend on whether
    the statistics are saved, the statistics not on whether the output is written, and both match float64
    numpy (biased variance)."""
    rng = np.random.default_rng(d)
    rows = 9
    x = (rng.standard_normal((rows, d)) * 3 + 2).astype(dtype)
    g, b = rng.standard_normal(d).astype(dtype), rng.standard_normal(d).astype(dtype)
    with_stats, without = np.empty_like(x), np.empty_like(x)
    stats, only = np.empty((rows, 2)), np.empty((rows, 2))
    kernels = _support.nb()
    kernels.layer_norm_rows(x, g, b, 1e-5, stats, with_stats, 0, rows)
    kernels.layer_norm_rows(x, g, b, 1e-5, np.empty((0, 2)), without, 0, rows)
    kernels.layer_norm_rows(x, g, b, 1e-5, only, np.empty((0, d), dtype), 0, rows)
    np.testing.assert_array_equal(with_stats, without)
    np.testing.assert_array_equal(stats, only)
    wide = x.astype(np.float64)
    mean, var = wide.mean(1, keepdims=True), wide.var(1, keepdims=True)
    tol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(with_stats, (wide - mean) / np.sqrt(var + 1e-5) * g + b, rtol=tol, atol=tol)
    np.testing.assert_allclose(stats[:, 0], mean[:, 0], rtol=tol, atol=tol)
