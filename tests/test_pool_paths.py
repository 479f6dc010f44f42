"""The max-pool kernels' special paths against the general kernel, the ``spec`` reference and PyTorch:
the 2x2 / stride 2 forward, and the general backward (first maximum found by a scan up to the
window's maximum), with NaN, infinities, ties, odd sizes, non-contiguous inputs and threads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.kernels import pool, threads
from tensorplay.spec.pool import max_pool_nd_ref

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(11)
TWO = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))


def _special_values(shape: tuple[int, ...], dt: Any) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(dt)
    flat = x.reshape(-1)
    flat[::37] = np.nan
    flat[5::41] = np.inf
    flat[7::43] = -np.inf
    flat[11::29] = 0.0  # ties between zeros
    flat[12::29] = 0.0
    return x


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 8, 10), (3, 2, 9, 7), (1, 1, 2, 5), (2, 2, 3, 3)])
def test_two_by_two_forward_equals_the_general_kernel_and_the_reference(dt: Any, shape: tuple[int, ...]) -> None:
    x = _special_values(shape, dt)
    strided = np.zeros(shape[:-1] + (2 * shape[-1],), dt)
    strided[..., ::2] = x
    for inp in (x, strided[..., ::2], np.asfortranarray(x)):
        got = K.max_pool_nd(inp, **TWO)
        geo, osp = pool._geometry("max_pool", inp.shape, (2, 2), (2, 2), (0, 0))
        general = pool._forward("max_pool_fwd", inp, geo, osp)
        np.testing.assert_array_equal(got, general)
        np.testing.assert_array_equal(got, max_pool_nd_ref(x, **TWO))
        assert got.dtype == np.dtype(dt)
    want = F.max_pool2d(torch.from_numpy(x), 2, 2).numpy()
    np.testing.assert_array_equal(K.max_pool_nd(x, **TWO), want)


def test_two_by_two_forward_split_over_threads_gives_the_same_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _special_values((4, 5, 12, 14), np.float32)
    monkeypatch.setattr(threads, "_NUM_THREADS", 1)
    one = K.max_pool_nd(x, **TWO)
    monkeypatch.setattr(threads, "_NUM_THREADS", 3)
    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 8)
    np.testing.assert_array_equal(K.max_pool_nd(x, **TWO), one)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", [((3, 3), (2, 2), (1, 1)), ((2, 3), (1, 2), (1, 0)), ((3, 2), (3, 1), (0, 1))])
def test_general_backward_routes_to_the_first_maximum_like_torch(dt: Any, geometry: Any) -> None:
    """Overlapping and strided windows, padding: torch's indices are the first maximum too (for
    finite values; with NaN both take the first NaN)."""
    k, s, p = geometry
    x = RNG.standard_normal((2, 3, 9, 8)).astype(dt)
    x[0, 0, 2:5, 2:5] = 1.5  # a block of ties
    x[1, 2, 4, 4] = np.nan
    params = dict(kernel_size=k, stride=s, padding=p)
    y, idx = F.max_pool2d(torch.from_numpy(x), k, s, p, return_indices=True)
    g = RNG.standard_normal(tuple(y.shape)).astype(dt)
    want = torch.zeros(x.shape, dtype=y.dtype).reshape(2, 3, -1)
    want.scatter_add_(2, idx.reshape(2, 3, -1), torch.from_numpy(g).reshape(2, 3, -1))
    got = K.max_pool_backward_nd(x, g, **params)
    np.testing.assert_allclose(got, want.reshape(x.shape).numpy(), rtol=1e-6 if dt == np.float32 else 1e-13)
    np.testing.assert_array_equal(K.max_pool_select_nd(x, x, **params), K.max_pool_nd(x, **params))
