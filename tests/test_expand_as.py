"""``Tensor.expand_as`` against PyTorch: values, gradients (summed over the broadcast axes), float32 and
float64, added leading axes and zero-size targets; a shape that cannot broadcast and a non-tensor are named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.errors import TensorplayError


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("source,target", [((3, 1), (3, 4)), ((1,), (2, 5)), ((2, 1, 3), (4, 2, 6, 3)),
                                           ((1, 3), (0, 3)), ((), (2, 2))])
def test_expand_as_matches_pytorch(dtype: str, source: tuple[int, ...], target: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(source) + len(target))
    a = rng.standard_normal(source).astype(dtype)
    b = np.zeros(target, dtype)
    x, tx = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = x.expand_as(tp.tensor(b)), tx.expand_as(torch.tensor(b))
    assert tuple(y.shape) == tuple(ty.shape) and y.dtype.name == dtype
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    weights = rng.standard_normal(target).astype(dtype)
    (y * tp.tensor(weights)).sum().backward()
    (ty * torch.tensor(weights)).sum().backward()
    assert x.grad is not None and tx.grad is not None
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-14}
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), **tol)  # summation order differs


def test_expand_as_errors_name_the_problem() -> None:
    with pytest.raises(TensorplayError, match="3"):
        tp.ones(3, 2).expand_as(tp.ones(4, 2))
    with pytest.raises(TensorplayError, match="must be a tensor"):
        tp.ones(3).expand_as((3,))  # type: ignore[arg-type]


def test_expand_as_under_vmap_compile_and_grad() -> None:
    """The same per-row values through ``vmap``, ``tp.compile`` and ``grad`` (each output element of
    ``expand_as`` reads its source element, so the gradient counts the copies)."""
    a = tp.tensor(np.random.default_rng(5).standard_normal((4, 3, 1)))
    b = tp.zeros(4, 3, 5)

    def f(x: tp.Tensor, y: tp.Tensor) -> tp.Tensor:
        return (x.expand_as(y) * 2.0).sum(-1)

    want = f(a, b).numpy()
    np.testing.assert_allclose(tp.func.vmap(f)(a, b).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(tp.compile(f)(a, b).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(tp.func.grad(lambda x: f(x, b).sum())(a).numpy(), np.full((4, 3, 1), 10.0))
