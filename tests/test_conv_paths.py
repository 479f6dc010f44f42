"""The strategies of the convolution kernels (stride-1 flat taps: in cache or one wide GEMM; strided
im2col) against the ``spec`` references (float64) and PyTorch (float32), on odd sizes, non-contiguous
inputs, in blocks, and with non-finite values next to the gaps of the stride-1 layout. Every test runs
twice: with the in-cache path allowed (it takes the stride-1, one-group cases) and with it off."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.kernels import convolution as conv_mod
from tensorplay.spec.conv import conv_nd_ref as conv_ref
from tensorplay.spec.conv import conv_transpose_nd_ref as conv_transpose_ref
from tensorplay.spec.conv import conv_weight_grad_nd_ref as conv_weight_grad_ref
from tests.helpers import count_blas_chunks, on_one_then_two_threads

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(7)

# spatial, kernel, stride, padding, dilation, groups, C, O
CASES = [
    ((11,), (3,), (1,), (1,), (1,), 1, 3, 4),
    ((9, 7), (3, 3), (1, 1), (0, 0), (1, 1), 1, 1, 5),
    ((9, 7), (3, 2), (1, 1), (1, 1), (2, 1), 1, 2, 3),
    ((8, 10), (3, 3), (2, 1), (1, 0), (1, 1), 1, 3, 4),
    ((7, 7), (2, 2), (2, 2), (0, 0), (1, 1), 2, 4, 6),
    ((6, 5), (1, 1), (1, 1), (0, 0), (1, 1), 2, 4, 2),
    ((5, 6, 4), (3, 2, 3), (1, 1, 1), (1, 0, 1), (1, 2, 1), 1, 2, 3),
    ((5, 6, 7), (2, 3, 2), (2, 1, 3), (0, 1, 1), (1, 1, 1), 1, 2, 2),
    ((13, 13), (3, 3), (1, 1), (1, 1), (1, 1), 4, 8, 8),
]


@pytest.fixture(autouse=True, params=["in cache", "wide GEMM"])
def stride1_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test on the in-cache path where it applies, then with only the wide GEMM."""
    if request.param == "wide GEMM":
        monkeypatch.setattr(conv_mod, "_gemm_for_fused", lambda cv, dt: None)
    return str(request.param)


def _randn(shape: tuple[int, ...], dt: Any) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dt)


def _strided(a: np.ndarray) -> np.ndarray:
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    return big[..., ::2]


def _params(case: Any) -> tuple[dict[str, Any], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    sp, k, s, p, d, g, c, o = case
    return dict(stride=s, padding=p, dilation=d, groups=g), (3, c) + sp, (o, c // g) + k, k


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_conv_and_its_adjoints_match_the_reference(dt: Any, case: Any) -> None:
    params, x_shape, w_shape, k = _params(case)
    x, w = _strided(_randn(x_shape, dt)), np.asfortranarray(_randn(w_shape, dt))
    x_before, w_before = x.copy(), w.copy()
    rtol, atol = (2e-5, 2e-5) if dt == np.float32 else (1e-12, 1e-12)
    y = K.conv_nd(x, w, **params)
    assert y.dtype == np.dtype(dt)
    np.testing.assert_allclose(y, conv_ref(x, w, **params), rtol=rtol, atol=atol)
    gy = _strided(_randn(y.shape, dt))
    np.testing.assert_allclose(K.conv_weight_grad_nd(x, gy, kernel_size=k, **params),
                               conv_weight_grad_ref(x, gy, kernel_size=k, **params), rtol=rtol, atol=atol)
    s, p, d = params["stride"], params["padding"], params["dilation"]
    op = tuple((n + 2 * pi - di * (ki - 1) - 1) % si for n, ki, si, pi, di in zip(x_shape[2:], k, s, p, d))
    dx = K.conv_transpose_nd(gy, w, output_padding=op, **params)
    np.testing.assert_allclose(dx, conv_transpose_ref(gy, w, output_padding=op, **params), rtol=rtol, atol=atol)
    assert dx.shape == x.shape
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(w, w_before)


def test_cnn_sizes_match_torch_float32() -> None:
    """The benchmark CNN's layers (one input channel; 16 -> 32 channels) and a padded layer."""
    for n, c, o, hw, pad in ((5, 1, 16, 28, 0), (5, 16, 32, 13, 0), (3, 8, 8, 14, 1)):
        x, w = _randn((n, c, hw, hw), np.float32), _randn((o, c, 3, 3), np.float32) / 3
        params: dict[str, Any] = dict(stride=(1, 1), padding=(pad, pad), dilation=(1, 1), groups=1)
        tx, tw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
        ty = F.conv2d(tx, tw, None, 1, pad)
        np.testing.assert_allclose(K.conv_nd(x, w, **params), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
        gy = _randn(tuple(ty.shape), np.float32)
        ty.backward(torch.from_numpy(gy))
        np.testing.assert_allclose(K.conv_weight_grad_nd(x, gy, kernel_size=(3, 3), **params), tw.grad.numpy(),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(K.conv_transpose_nd(gy, w, output_padding=(0, 0), **params), tx.grad.numpy(),
                                   rtol=1e-4, atol=1e-5)


def test_blocks_of_samples_give_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns built for a few samples at a time (a small block budget) give the one-block results."""
    for case in (CASES[2], CASES[3], CASES[6]):
        params, x_shape, w_shape, k = _params(case)
        x, w = _randn((7,) + x_shape[1:], np.float64), _randn(w_shape, np.float64)
        y = K.conv_nd(x, w, **params)
        gy = _randn(y.shape, np.float64)
        whole = (y, K.conv_weight_grad_nd(x, gy, kernel_size=k, **params),
                 K.conv_transpose_nd(gy, w, output_padding=(0,) * len(k), **params))
        with monkeypatch.context() as patch:
            patch.setattr(conv_mod, "COLS_BLOCK_BYTES", 1)  # one sample per block
            patch.setattr(conv_mod, "FUSED_BLOCK_BYTES", 1)
            blocked = (K.conv_nd(x, w, **params), K.conv_weight_grad_nd(x, gy, kernel_size=k, **params),
                       K.conv_transpose_nd(gy, w, output_padding=(0,) * len(k), **params))
        for a, b in zip(whole, blocked):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_blas_threads_do_not_change_the_results() -> None:
    """One wide GEMM runs on OpenBLAS's threads; one thread or several give the same values up to the
    float32 rounding of a different summation order (OpenBLAS splits the sums differently: a few ulps of
    the output's scale, not bitwise)."""
    from tensorplay.interpreters.eager.kernels import _blas
    if _blas._api() is None:
        pytest.skip("OpenBLAS not found in this process")
    x, w = _randn((16, 8, 20, 20), np.float32), _randn((16, 8, 3, 3), np.float32)
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)

    def run() -> list[np.ndarray]:
        y = K.conv_nd(x, w, **params)
        return [y, K.conv_transpose_nd(y, w, output_padding=(0, 0), **params),
                K.conv_weight_grad_nd(x, y, kernel_size=(3, 3), **params)]

    one, two = on_one_then_two_threads(run)
    for a, b in zip(one, two):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * float(np.abs(a).max()))


def test_weight_gradient_blocks_split_over_threads_give_the_one_thread_result_bitwise(
        monkeypatch: pytest.MonkeyPatch, stride1_path: str) -> None:
    """The wide GEMM's blocks of samples: a chunk of blocks per kernel thread, each block's GEMM on one
    OpenBLAS thread, the blocks' products summed in block order: bitwise the one-thread result (the in-cache
    path sums per-thread partial products instead: test_conv_fused checks it within rounding)."""
    if stride1_path == "in cache":
        pytest.skip("the in-cache path's own split is tested in test_conv_fused")
    chunks = count_blas_chunks(monkeypatch, conv_mod)
    monkeypatch.setattr(conv_mod, "COLS_BLOCK_BYTES", 1)  # one sample per block
    for dt in (np.float32, np.float64):
        x, gy = _randn((5, 6, 11, 10), dt), _randn((5, 4, 9, 8), dt)
        params: dict[str, Any] = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
        chunks.clear()
        one, two = on_one_then_two_threads(lambda: K.conv_weight_grad_nd(x, gy, kernel_size=(3, 3), **params))
        assert 2 in chunks, chunks  # the two-thread run split its five blocks
        np.testing.assert_array_equal(one, two)
        want = conv_weight_grad_ref(x.astype(np.float64), gy.astype(np.float64), kernel_size=(3, 3), **params)
        np.testing.assert_allclose(two, want, rtol=1e-4 if dt == np.float32 else 1e-12,
                                   atol=(1e-4 if dt == np.float32 else 1e-12) * float(np.abs(want).max()))


def test_gaps_never_leak_non_finite_values() -> None:
    """The stride-1 path computes on rows wider than the output (gaps): an infinite input that no window
    of a tap reaches, or an infinite weight, must leave exactly the entries the reference leaves finite."""
    params: dict[str, Any] = dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1)
    x = _randn((2, 1, 6, 7), np.float64)
    x[0, 0, 2, 0] = np.inf  # column 0: read only by the first tap column
    gy = _randn((2, 2, 4, 5), np.float64)
    got = K.conv_weight_grad_nd(x, gy, kernel_size=(3, 3), **params)
    want = conv_weight_grad_ref(x, gy, kernel_size=(3, 3), **params)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-12)
    w = _randn((2, 1, 3, 3), np.float64)
    w[1, 0, 0, 0] = np.inf
    gy[:, 1] = 0.0  # the infinite weight meets only zeros: inf * 0 is NaN where the reference sums it
    got_dx = K.conv_transpose_nd(gy, w, output_padding=(0, 0), **params)
    want_dx = conv_transpose_ref(gy, w, output_padding=(0, 0), **params)
    np.testing.assert_array_equal(np.isnan(got_dx), np.isnan(want_dx))
    ok = np.isfinite(want_dx)
    np.testing.assert_allclose(got_dx[ok], want_dx[ok], rtol=1e-12)
