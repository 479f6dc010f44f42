"""The max-pool kernels' special paths against the general kernel, the ``spec`` reference and PyTorch:
the 2x2 / stride 2 forward, and the separable kernels (row maxima, then window maxima; the first maximum
in row-major order for the backward), with NaN, infinities, ties, odd sizes, non-contiguous inputs and threads."""

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


def _grad_tol(dt: Any) -> dict[str, float]:
    """Tolerance of a pooling gradient against a reference that sums the overlapping windows'
    contributions in another order: a few ulp of the contributions (standard normal, at most four per
    position here), absolute as well as relative, since the contributions can cancel."""
    return {"rtol": 1e-6, "atol": 2e-6} if dt == np.float32 else {"rtol": 1e-13, "atol": 1e-14}


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
@pytest.mark.parametrize("shape", [(2, 3, 8, 10), (3, 2, 9, 7), (3, 2, 9, 8), (1, 1, 2, 5), (2, 2, 3, 3), (2, 2, 3, 2)])
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


@pytest.mark.parametrize("shape", [(4, 5, 12, 14), (4, 5, 11, 13)])
def test_two_by_two_forward_and_backward_split_over_threads_give_the_same_bits(
        monkeypatch: pytest.MonkeyPatch, shape: tuple[int, ...]) -> None:
    from tensorplay.interpreters.eager.kernels import backward as KB

    x = _special_values(shape, np.float32)
    g = RNG.standard_normal((shape[0], shape[1], shape[2] // 2, shape[3] // 2)).astype(np.float32)
    monkeypatch.setattr(threads, "_NUM_THREADS", 1)
    one, one_dx = K.max_pool_nd(x, **TWO), KB.max_pool_backward(x, g, **TWO)
    monkeypatch.setattr(threads, "_NUM_THREADS", 3)
    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 8)
    np.testing.assert_array_equal(K.max_pool_nd(x, **TWO), one)
    np.testing.assert_array_equal(KB.max_pool_backward(x, g, **TWO).view(np.int32), one_dx.view(np.int32))


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
    np.testing.assert_allclose(got, want.reshape(x.shape).numpy(), **_grad_tol(dt))
    np.testing.assert_array_equal(K.max_pool_select_nd(x, x, **params), K.max_pool_nd(x, **params))


# The separable kernels specialise 3-wide windows of stride 2 and 1 (constants the loops unroll on);
# every other width and stride runs the generic row loop; padding leaves border windows with fewer
# in-range columns and rows.
SEPARABLE_GEOMETRIES = [
    ((3, 3), (2, 2), (1, 1)), ((3, 3), (1, 1), (1, 1)), ((3, 3), (2, 2), (0, 0)), ((3, 2), (1, 2), (0, 1)),
    ((2, 3), (2, 1), (1, 1)), ((5, 4), (3, 2), (2, 2)), ((1, 3), (2, 2), (0, 1)), ((2, 2), (1, 3), (1, 1)),
]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", SEPARABLE_GEOMETRIES)
@pytest.mark.parametrize("shape", [(2, 3, 11, 13), (1, 2, 4, 3), (2, 1, 5, 3)])
def test_separable_max_pool_equals_the_reference(dt: Any, geometry: Any, shape: tuple[int, ...]) -> None:
    """Forward, backward and select of the row-then-window kernels against ``spec`` (first maximum in
    row-major order, the first NaN if any), with NaN, infinities and ties, on contiguous, strided and
    Fortran-ordered inputs; inputs unchanged."""
    from tensorplay.spec.pool import max_pool_backward_nd_ref, max_pool_select_nd_ref

    k, s, p = geometry
    params = dict(kernel_size=k, stride=s, padding=p)
    x = _special_values(shape, dt)
    x[0, 0, : shape[2] // 2, :] = 2.0  # a block of ties
    want = max_pool_nd_ref(x, **params)
    g = RNG.standard_normal(want.shape).astype(dt)
    h = RNG.standard_normal(shape).astype(dt)
    want_dx = max_pool_backward_nd_ref(x, g, **params)
    want_sel = max_pool_select_nd_ref(x, h, **params)
    wide = np.zeros(shape[:-1] + (2 * shape[-1],), dt)
    wide[..., ::2] = x
    for inp in (x, wide[..., ::2], np.asfortranarray(x)):
        before = inp.copy()
        np.testing.assert_array_equal(K.max_pool_nd(inp, **params), want)
        np.testing.assert_allclose(K.max_pool_backward_nd(inp, np.asfortranarray(g), **params), want_dx,
                                   **_grad_tol(dt))
        np.testing.assert_array_equal(K.max_pool_select_nd(inp, h, **params), want_sel)
        np.testing.assert_array_equal(inp, before)


@pytest.mark.parametrize("geometry", SEPARABLE_GEOMETRIES[:3])
def test_separable_max_pool_backward_matches_torch_and_is_the_same_over_threads(
        geometry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Finite inputs with ties: the gradient torch's indices give; split over 3 threads, the same bits."""
    k, s, p = geometry
    x = np.round(RNG.standard_normal((3, 4, 17, 16)) * 2).astype(np.float32)  # many ties
    params = dict(kernel_size=k, stride=s, padding=p)
    tx = torch.from_numpy(x).requires_grad_()
    ty = F.max_pool2d(tx, k, s, p)
    g = RNG.standard_normal(tuple(ty.shape)).astype(np.float32)
    ty.backward(torch.from_numpy(g))
    monkeypatch.setattr(threads, "_NUM_THREADS", 1)
    one = K.max_pool_backward_nd(x, g, **params)
    y_one = K.max_pool_nd(x, **params)
    np.testing.assert_allclose(one, tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(y_one, ty.detach().numpy())
    monkeypatch.setattr(threads, "_NUM_THREADS", 3)
    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 8)
    np.testing.assert_array_equal(K.max_pool_backward_nd(x, g, **params), one)
    np.testing.assert_array_equal(K.max_pool_nd(x, **params), y_one)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(3, 4, 26, 26), (3, 4, 11, 11), (2, 3, 9, 8), (2, 3, 8, 7)])
def test_two_by_two_pool_of_relu_outputs_matches_torch(dt: Any, shape: tuple[int, ...]) -> None:
    """What a CNN pools: relu outputs, so windows of tied zeros (the gradient goes to the first, as torch's
    index does), some ``inf``; forward and gradient against torch, contiguous and strided inputs."""
    from tensorplay.interpreters.eager.kernels import backward as KB

    x = np.maximum(np.round(RNG.standard_normal(shape) * 2), 0).astype(dt)
    x.reshape(-1)[3::53] = np.inf
    tx = torch.from_numpy(x).requires_grad_()
    ty = F.max_pool2d(tx, 2, 2)
    g = RNG.standard_normal(tuple(ty.shape)).astype(dt)
    ty.backward(torch.from_numpy(g))
    wide = np.zeros(shape[:-1] + (2 * shape[-1],), dt)
    wide[..., ::2] = x
    for inp in (x, wide[..., ::2]):
        np.testing.assert_array_equal(K.max_pool_nd(inp, **TWO), ty.detach().numpy())
        np.testing.assert_array_equal(KB.max_pool_backward(inp, g, **TWO), tx.grad.numpy())
