"""Compiled vs eager on every registry sample: values with both backends (the ``"eager"`` backend runs
the same kernels, so it must agree bitwise; the ``"numba"`` backend within float rounding), and the
gradients of every differentiable sample through a compiled training region (forward and backward
compiled together, joined to the tape as one node), zero-size samples of every primitive included."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.spec.table import PRIMITIVES
from tests.samples import GRAD_SAMPLES, SAMPLES, ZERO_SIZE_GRAD_SAMPLES, ZERO_SIZE_SAMPLES, Sample
from tests.test_graph_swap import sample_fn

BACKENDS = ("eager", "numba", "numba-all-kernels")


def compiler(backend: str) -> Any:
    """``tp.compile`` with ``backend``; ``numba-all-kernels`` gives every fusion group its kernel (however
    small), so the generated kernels are exercised on the small samples too."""
    if backend == "numba-all-kernels":
        return lambda fn: tp.compile(fn, backend="numba", options={"small_kernels": True})
    return lambda fn: tp.compile(fn, backend=backend)


def tolerance(dtype: np.dtype[Any]) -> dict[str, float]:
    """Fused kernels contract multiply-adds and sum in float64: results differ from numpy by rounding."""
    return {"rtol": 2e-6, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}


def assert_same(got: Any, expected: Any, exact: bool, what: str) -> None:
    assert isinstance(got, tp.Tensor) and isinstance(expected, tp.Tensor), what
    assert got.interpreter is tp.eager, what
    a, b = got.detach().numpy(), expected.detach().numpy()
    assert a.dtype == b.dtype and a.shape == b.shape, (what, a.dtype, b.dtype, a.shape, b.shape)
    if exact or a.dtype.kind not in "f":
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f"), f"{what}: values differ"
    else:
        np.testing.assert_allclose(a, b, equal_nan=True, err_msg=what, **tolerance(a.dtype))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.id)
def test_compiled_sample_matches_eager(sample: Sample, backend: str) -> None:
    fn, tensors = sample_fn(sample)
    expected = fn(*tensors)
    compiled = compiler(backend)(fn)
    got = compiled(*tensors)
    assert_same(got, expected, backend == "eager", f"{sample.id} ({backend})")
    again = compiled(*tensors)  # the cached specialization
    assert_same(again, expected, backend == "eager", f"{sample.id} ({backend}, second call)")
    assert compiled.compile_count == 1


def test_every_primitive_has_a_zero_size_sample_with_its_gradient_compiled() -> None:
    assert {s.prim for s in ZERO_SIZE_SAMPLES} == set(PRIMITIVES)
    differentiable = {name for name, p in PRIMITIVES.items() if p.has_derivative}
    assert {s.prim for s in ZERO_SIZE_GRAD_SAMPLES} == differentiable
    assert {id(s) for s in ZERO_SIZE_GRAD_SAMPLES} <= {id(s) for s in _GRADIENT_SAMPLES}


_GRADIENT_SAMPLES = GRAD_SAMPLES + [s for s in ZERO_SIZE_GRAD_SAMPLES if all(s is not g for g in GRAD_SAMPLES)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sample", _GRADIENT_SAMPLES, ids=lambda s: s.id)
def test_compiled_sample_gradients_match_eager(sample: Sample, backend: str) -> None:
    fn, _ = sample_fn(sample)
    positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]

    def leaves() -> list[Any]:
        out = []
        for i in positions:
            a = sample.args[i]
            t = tp.tensor(a)
            if a.dtype.kind == "f":
                t.requires_grad_(True)
            out.append(t)
        return out

    def loss(*tensors: Any) -> Any:
        out = fn(*tensors)
        weight = np.random.default_rng(7).standard_normal(tuple(out.shape)).astype(out.dtype.name)
        return (out * tp.tensor(weight)).sum()

    eager_inputs = leaves()
    loss(*eager_inputs).backward()
    compiled_inputs = leaves()
    value = compiler(backend)(loss)(*compiled_inputs)
    assert value.grad_fn is not None and value.requires_grad
    value.backward()
    for k, (mine, ref) in enumerate(zip(compiled_inputs, eager_inputs)):
        if ref.grad is None:
            assert mine.grad is None, f"{sample.id}: input {k} got a gradient eagerly not"
            continue
        assert mine.grad is not None, f"{sample.id}: input {k} has no gradient"
        a, b = mine.grad.numpy(), ref.grad.numpy()
        assert a.dtype == b.dtype and a.shape == b.shape
        tol = {"rtol": 1e-4, "atol": 1e-5} if a.dtype == np.float32 else {"rtol": 1e-9, "atol": 1e-10}
        np.testing.assert_allclose(a, b, err_msg=f"{sample.id} ({backend}) input {k}", **tol)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_matmul_with_an_empty_inner_dim_gives_zeros_as_pytorch(backend: str) -> None:
    a, b = tp.ones(3, 2, 0, requires_grad=True), tp.ones(0, 1, requires_grad=True)
    ta, tb = torch.ones(3, 2, 0, requires_grad=True), torch.ones(0, 1, requires_grad=True)
    out = compiler(backend)(lambda u, v: u @ v)(a, b)
    expected = ta @ tb
    assert out.shape == tuple(expected.shape) and out.detach().numpy().tolist() == expected.tolist()
    compiler(backend)(lambda u, v: (u @ v).sum())(a, b).backward()
    (ta @ tb).sum().backward()
    assert a.grad is not None and b.grad is not None and ta.grad is not None and tb.grad is not None
    assert a.grad.shape == tuple(ta.grad.shape) and b.grad.shape == tuple(tb.grad.shape)
