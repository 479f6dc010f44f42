"""The batched outer-product kernel (``matmul`` with a contracted size of 1, per-sample weight gradients)
against ``np.matmul``: one batch shape (its direct path) and broadcast batch shapes, float32 and float64,
non-contiguous operands, empty batches, and eager ``tp.matmul`` through it."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.interpreters.eager.kernels.outer import outer_matmul

SHAPES = [
    ((128, 32, 1), (128, 1, 64)),  # one batch shape, above the kernel's size threshold
    ((4, 8, 64, 1), (4, 8, 1, 300)),  # two batch axes
    ((2, 3, 1), (2, 1, 5)),  # small: numpy's multiply
    ((1, 300, 1), (7, 1, 300)),  # broadcast batch
    ((300, 1), (9, 1, 300)),  # an unbatched operand
    ((0, 300, 1), (0, 1, 300)),  # an empty batch
]


@pytest.mark.parametrize("shape_a, shape_b", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["contiguous", "fortran", "reversed"])
def test_outer_matmul_matches_numpy(shape_a: tuple[int, ...], shape_b: tuple[int, ...], dtype: type,
                                    layout: str) -> None:
    rng = np.random.default_rng(len(shape_a) * 10 + len(shape_b))
    a = rng.standard_normal(shape_a).astype(dtype)
    b = rng.standard_normal(shape_b).astype(dtype)
    if layout == "fortran":
        a = np.asfortranarray(a)
    elif layout == "reversed":
        a, b = a[::-1], b[::-1]
    before = (a.copy(), b.copy())
    out = outer_matmul(a, b)
    expected = np.matmul(a, b)
    assert out.dtype == expected.dtype and out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=0)
    np.testing.assert_array_equal(a, before[0])  # the inputs are not written
    np.testing.assert_array_equal(b, before[1])


def test_eager_matmul_of_outer_shapes_and_its_gradient() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 40, 1)).astype(np.float32)
    b = rng.standard_normal((128, 1, 50)).astype(np.float32)
    ta, tb = tp.tensor(a, requires_grad=True), tp.tensor(b, requires_grad=True)
    out = ta @ tb
    np.testing.assert_allclose(out.detach().numpy(), a * b, rtol=1e-6)
    out.sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), np.broadcast_to(b.sum(-1, keepdims=True), a.shape), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tb.grad.numpy(), np.broadcast_to(a.sum(-2, keepdims=True), b.shape), rtol=1e-5, atol=1e-5)


def test_one_and_two_threads_give_the_same_bits() -> None:
    """Every entry is one product: the bits are the same with one kernel thread and two (a split of the rows over
    the threads was tried and dropped: right after a step's GEMMs it ran against OpenBLAS's spinning threads)."""
    from tests.helpers import on_one_then_two_threads

    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        a = rng.standard_normal((33, 128, 1)).astype(dtype)  # 33 rows: chunks of unequal size
        b = rng.standard_normal((33, 1, 257)).astype(dtype)
        one, two = on_one_then_two_threads(lambda: outer_matmul(a, b))
        np.testing.assert_array_equal(one, two)
        np.testing.assert_array_equal(one, a * b)
