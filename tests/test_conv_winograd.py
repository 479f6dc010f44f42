"""The Winograd F(2x2, 3x3) path of the convolution kernels (3x3, stride 1, one group, at least
``winograd.MIN_CHANNELS`` channels): against the ``spec`` reference (float64) and PyTorch, on odd
sizes, every padding it takes, tiny planes, non-contiguous inputs, blocks of samples, an empty
batch, non-finite inputs (which must take the exact im2col path), and gradients through the tape.

Tolerance (documented in :mod:`winograd`): the error stays within a small multiple of the direct
sum's; asserted here as ``1e-5`` (float32) and ``1e-12`` (float64) of the largest output magnitude.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as TF
from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.kernels import convolution as conv_mod
from tensorplay.interpreters.eager.kernels import winograd
from tensorplay.spec.conv import conv_nd_ref as conv_ref
from tests.helpers import count_blas_chunks, on_one_then_two_threads
from tensorplay.spec.conv import conv_transpose_nd_ref as conv_transpose_ref

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(13)
C = winograd.MIN_CHANNELS

# n, c, o, h, w, padding
SHAPES = [
    (2, C, C + 1, 7, 9, 0),
    (3, C + 5, C, 6, 5, 1),
    (1, C, C, 4, 4, 2),
    (2, C, C, 1, 1, 1),
    (1, C, C + 3, 3, 8, 0),
    (2, C, C, 2, 3, (1, 2)),
]


def _randn(shape: tuple[int, ...], dt: Any) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dt)


def _close(got: np.ndarray, want: np.ndarray, dt: Any) -> None:
    assert got.shape == want.shape and got.dtype == np.dtype(dt)
    scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    tol = 1e-5 if dt == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=0, atol=tol * scale)


MIN_OUTPUT_SIZE = winograd.MIN_OUTPUT_SIZE


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """What each Winograd convolution run reported (``True``: its result stands; ``False``: something
    was not finite and the caller computed the convolution again), so each test proves the path it
    means was taken, with the output-size threshold lowered to 1 so that small odd planes exercise it."""
    monkeypatch.setattr(winograd, "MIN_OUTPUT_SIZE", 1)
    seen: list[bool] = []
    real = winograd.conv3x3

    def counting(*args: Any) -> bool:
        seen.append(real(*args))
        return seen[-1]

    monkeypatch.setattr(winograd, "conv3x3", counting)
    return seen


def _pad(p: Any) -> tuple[int, int]:
    return (p, p) if isinstance(p, int) else p


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_and_input_gradient_match_the_reference(dt: Any, shape: Any, calls: list[bool]) -> None:
    n, c, o, h, w, p = shape
    params: dict[str, Any] = dict(stride=(1, 1), padding=_pad(p), dilation=(1, 1), groups=1)
    x, wt = _randn((n, c, h, w), dt), _randn((o, c, 3, 3), dt)
    x_before, w_before = x.copy(), wt.copy()
    y = K.conv_nd(x, wt, **params)
    _close(y, conv_ref(x, wt, **params), dt)
    gy = _randn(y.shape, dt)
    dx = K.conv_transpose_nd(gy, wt, output_padding=(0, 0), **params)
    _close(dx, conv_transpose_ref(gy, wt, output_padding=(0, 0), **params), dt)
    assert len(calls) == 2
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(wt, w_before)


def test_matches_torch_float32_on_a_resnet_like_layer(calls: list[bool]) -> None:
    x, w = _randn((2, 64, 23, 17), np.float32), _randn((64, 64, 3, 3), np.float32) / 24
    y = K.conv_nd(x, w, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, 1, 1).numpy()
    _close(y, want, np.float32)
    assert calls == [1]


def test_non_contiguous_inputs(calls: list[bool]) -> None:
    base = _randn((2, C, 9, 14), np.float64)
    x = base[:, :, :, ::2]  # strided columns
    w = np.asfortranarray(_randn((C, C, 3, 3), np.float64))
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    _close(K.conv_nd(x, w, **params), conv_ref(np.ascontiguousarray(x), np.ascontiguousarray(w), **params),
           np.float64)
    assert calls == [1]


def test_blocks_of_samples_give_the_same_results(monkeypatch: pytest.MonkeyPatch, calls: list[bool]) -> None:
    x, w = _randn((5, C, 7, 6), np.float64), _randn((C + 2, C, 3, 3), np.float64)
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    whole = K.conv_nd(x, w, **params)
    monkeypatch.setattr(conv_mod, "COLS_BLOCK_BYTES", 1)  # one sample per block
    blocked = K.conv_nd(x, w, **params)
    np.testing.assert_allclose(blocked, whole, rtol=1e-13, atol=1e-13)
    assert len(calls) == 2


def test_deterministic_run_to_run(calls: list[bool]) -> None:
    x, w = _randn((3, C, 10, 11), np.float32), _randn((C, C, 3, 3), np.float32)
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    np.testing.assert_array_equal(K.conv_nd(x, w, **params), K.conv_nd(x, w, **params))
    assert len(calls) == 2


def test_blas_threads_do_not_change_the_results(calls: list[bool]) -> None:
    """The sixteen GEMMs run on OpenBLAS's threads when large enough; one thread or two agree."""
    from tensorplay.interpreters.eager.kernels import _blas
    if _blas._api() is None:
        pytest.skip("OpenBLAS not found in this process")
    x, w = _randn((4, 64, 40, 40), np.float32), _randn((64, 64, 3, 3), np.float32)  # 6.9M-MAC GEMMs
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    one, two = on_one_then_two_threads(lambda: K.conv_nd(x, w, **params))
    np.testing.assert_allclose(one, two, rtol=1e-5, atol=1e-5 * float(np.abs(one).max()))  # summation order
    assert len(calls) == 2


def test_empty_batch() -> None:
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    y = K.conv_nd(np.zeros((0, C, 5, 5), np.float32), _randn((C, C, 3, 3), np.float32), **params)
    assert y.shape == (0, C, 5, 5) and y.dtype == np.float32


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_non_finite_inputs_take_the_exact_path(bad: float, calls: list[bool]) -> None:
    """A transform subtracts neighbours (inf - inf is NaN), so Winograd's result for a non-finite input
    is not the convolution's: it reports so and the exact im2col path computes it again, where the
    entries the reference leaves finite stay finite and equal."""
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    x, w = _randn((1, C, 8, 8), np.float64), _randn((C, C, 3, 3), np.float64)
    x[0, 3, 4, 4] = bad
    got, want = K.conv_nd(x, w, **params), conv_ref(x, w, **params)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-12, atol=1e-12)
    w[2, 1, 0, 0] = bad
    x[0, 3, 4, 4] = 1.0
    got_dx = K.conv_transpose_nd(x, w, output_padding=(0, 0), **params)
    want_dx = conv_transpose_ref(x, w, output_padding=(0, 0), **params)
    np.testing.assert_array_equal(np.isnan(got_dx), np.isnan(want_dx))
    assert calls == [False, False]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_non_finite_filter_takes_the_exact_path(dt: Any, calls: list[bool]) -> None:
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    x, w = _randn((2, C, 7, 9), dt), _randn((C + 1, C, 3, 3), dt)
    w[C, 2, 1, 1] = np.nan
    got, want = K.conv_nd(x, w, **params), conv_ref(x, w, **params)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))  # output channel C only
    ok = np.isfinite(want)
    _close(got[ok], want[ok], dt)
    assert calls == [False]


def test_overflow_inside_the_transforms_takes_the_exact_path(calls: list[bool]) -> None:
    """Finite float32 inputs whose transformed patches overflow (``3e38 - (-3e38)``) while the direct sums,
    with small weights, do not: the result is the exact path's, all finite."""
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    x = _randn((1, C, 6, 6), np.float32) * np.float32(1e-3)
    x[0, 0, 2, 2], x[0, 0, 2, 4] = 3e38, -3e38
    w = np.full((C, C, 3, 3), 1e-3, np.float32)
    got, want = K.conv_nd(x, w, **params), conv_ref(x, w, **params)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(np.isfinite(got), True)
    # the direct sums cancel 3e35 against -3e35: their rounding is relative to the largest term
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * float(np.abs(want).max()))
    assert calls == [False]


def test_few_channels_keep_im2col(calls: list[bool]) -> None:
    x, w = _randn((2, C - 1, 6, 6), np.float32), _randn((C, C - 1, 3, 3), np.float32)
    K.conv_nd(x, w, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    assert calls == []


def test_only_large_outputs_take_the_path(monkeypatch: pytest.MonkeyPatch, calls: list[bool]) -> None:
    monkeypatch.setattr(winograd, "MIN_OUTPUT_SIZE", MIN_OUTPUT_SIZE)
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    w = _randn((C, C, 3, 3), np.float32)
    small = _randn((1, C, MIN_OUTPUT_SIZE - 1, 40), np.float32)
    K.conv_nd(small, w, **params)
    K.conv_transpose_nd(small, w, output_padding=(0, 0), **params)
    assert calls == []
    large = _randn((1, C, MIN_OUTPUT_SIZE, MIN_OUTPUT_SIZE), np.float32)
    _close(K.conv_nd(large, w, **params), conv_ref(large, w, **params), np.float32)
    assert calls == [1]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gradients_through_the_tape_match_torch(dt: Any, calls: list[bool]) -> None:
    x, w, b = _randn((2, C, 9, 8), dt), _randn((C + 1, C, 3, 3), dt) / 17, _randn((C + 1,), dt)
    gy = _randn((2, C + 1, 9, 8), dt)
    tx, tw, tb = (tp.tensor(a, requires_grad=True) for a in (x, w, b))
    y = TF.conv2d(tx, tw, tb, 1, 1)
    y.backward(tp.tensor(gy))
    rx, rw, rb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ry = torch.nn.functional.conv2d(rx, rw, rb, 1, 1)
    ry.backward(torch.tensor(gy))
    _close(np.asarray(y.detach().numpy()), ry.detach().numpy(), dt)
    for got, want in ((tx, rx), (tw, rw), (tb, rb)):
        assert got.grad is not None and want.grad is not None
        _close(np.asarray(got.grad.numpy()), want.grad.numpy(), dt)
    assert len(calls) == 2  # the forward and the input gradient



def test_blocks_split_over_threads_give_the_one_thread_result_bitwise(calls: list[bool],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Several blocks of samples run in chunks on the kernel threads, each block's GEMMs on one OpenBLAS
    thread: the result is bitwise the one-thread result, bias included."""
    splits = count_blas_chunks(monkeypatch, winograd)
    x, w, b = _randn((5, C, 12, 13), np.float32), _randn((C, C, 3, 3), np.float32), _randn((C,), np.float32)
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 0), dilation=(1, 1), groups=1)
    block = 16 * C * 6 * 7 * 4  # the transformed tiles of one sample: five blocks
    monkeypatch.setattr(conv_mod, "COLS_BLOCK_BYTES", block)
    one, two = on_one_then_two_threads(lambda: K.conv_bias_nd(x, w, b, **params))
    np.testing.assert_array_equal(one, two)
    assert splits == [2] and len(calls) == 2
    want = conv_ref(x.astype(np.float64), w.astype(np.float64), **params) + b[:, None, None]
    np.testing.assert_allclose(two, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_filter_transform_is_g_w_g_transposed_without_blas(dt: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``U = G w G^T`` per filter (against a float64 ``einsum``), computed without a GEMM: OpenBLAS's threads,
    once woken, spin while the kernel threads split the blocks."""
    w = np.random.default_rng(3).standard_normal((6, 5, 3, 3)).astype(dt)
    want = np.einsum("ai,ocij,bj->aboc", winograd._G, w.astype(np.float64), winograd._G).reshape(16, 6, 5)
    called = []
    real_matmul, real_einsum = np.matmul, np.einsum
    monkeypatch.setattr(np, "matmul", lambda *a, **k: called.append("matmul") or real_matmul(*a, **k))
    monkeypatch.setattr(np, "einsum", lambda *a, **k: called.append("einsum") or real_einsum(*a, **k))
    u = winograd.filter_transform(w)
    assert called == []
    assert u.dtype == np.dtype(dt) and u.shape == (16, 6, 5) and u.flags.c_contiguous
    np.testing.assert_allclose(u, want, rtol=1e-6 if dt == np.float32 else 1e-14, atol=1e-6 if dt == np.float32 else 1e-14)


def test_blocks_come_in_multiples_of_the_cpus_whatever_the_thread_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three blocks' worth of samples on a two-CPU machine make four blocks (two per thread, not two and
    one), at one thread as at two: the same blocks, so the same bits."""
    monkeypatch.setattr(winograd, "cpu_threads", lambda: 2)
    nw = winograd._nw()
    blocks: list[int] = []
    real_input_tiles = nw.input_tiles

    class Counting:
        def __getattr__(self, name: str) -> Any:
            if name == "input_tiles":
                return lambda *args: blocks.append(args[-1] - args[-2]) or real_input_tiles(*args)
            return getattr(nw, name)
    monkeypatch.setattr(winograd, "_nw", lambda: Counting())
    n, c, o, h = 8, C, C + 2, 10
    x, w = RNG.standard_normal((n, c, h, h)), RNG.standard_normal((o, c, 3, 3))
    per_sample = 16 * (C + 2) * 5 * 6 * 8
    one, two = on_one_then_two_threads(lambda: _conv3x3(x, w, n * per_sample // 3 + 1))
    assert blocks == [2] * 8  # 4 blocks of 2 samples, at each setting
    np.testing.assert_array_equal(one, two)
    np.testing.assert_allclose(one, conv_ref(x, w, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1),
                               rtol=1e-12, atol=1e-12 * np.abs(one).max())


def _conv3x3(x: np.ndarray, w: np.ndarray, block_bytes: int) -> np.ndarray:
    y = np.empty((x.shape[0], w.shape[0]) + x.shape[2:], x.dtype)
    winograd.conv3x3(x, w, None, (1, 1), y, block_bytes)
    return y
