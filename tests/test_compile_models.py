"""Compiled vs eager on whole models -- the MLP, the CNN and the pre-norm transformer block -- in float32
and float64: forward values, gradients through a compiled training region (``loss.backward()`` outside
the compiled function), whole training steps compiled with ``backward()`` and ``optimizer.step()``
inside, and the ``compiled`` way of ``tensorplay.testing.check_interpreters``."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn, optim
from benchmarks.bench_training import _block_classes
from tensorplay.testing import check_interpreters

DTYPES = ("float32", "float64")


Block = _block_classes(tp, None)[0]
"""The benchmarks' pre-norm transformer block (layer norm, self-attention, layer norm, GELU MLP, residuals)."""


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 5))


def cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3), nn.ReLU(),
                         nn.Flatten(), nn.Linear(6 * 2 * 2, 5))


def block() -> nn.Module:
    return Block(16, 4)


def data(kind: str, dtype: str, batch: int = 6, seed: int = 0) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    if kind == "mlp":
        x = rng.standard_normal((batch, 12))
    elif kind == "cnn":
        x = rng.standard_normal((batch, 1, 10, 10))
    else:
        x = rng.standard_normal((batch, 7, 16))
    if kind == "block":
        y = tp.tensor(rng.standard_normal((batch, 7, 16)).astype(dtype))
    else:
        y = tp.tensor(rng.integers(0, 5, batch))
    return tp.tensor(x.astype(dtype)), y


MODELS: dict[str, Callable[[], nn.Module]] = {"mlp": mlp, "cnn": cnn, "block": block}


def make(kind: str, dtype: str) -> nn.Module:
    tp.manual_seed(3)
    model = MODELS[kind]()
    return model.double() if dtype == "float64" else model


def loss_of(kind: str, model: Any, x: Any, y: Any) -> Any:
    out = model(x)
    return F.mse_loss(out, y) if kind == "block" else F.cross_entropy(out, y)


def kernels_everywhere(fn: Any) -> Any:
    """``tp.compile`` giving every fusion group its kernel: the models here are small, and the generated
    kernels are what these tests exercise."""
    return tp.compile(fn, options={"small_kernels": True})


def tol(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-6} if dtype == "float32" else {"rtol": 1e-10, "atol": 1e-12}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", list(MODELS))
def test_compiled_forward_and_training_region_gradients_match_eager(kind: str, dtype: str) -> None:
    model = make(kind, dtype)
    x, y = data(kind, dtype)
    eager_loss = loss_of(kind, model, x, y)
    eager_loss.backward()
    expected = {n: p.grad.numpy().copy() for n, p in model.named_parameters()}
    model.zero_grad()
    compiled = kernels_everywhere(lambda x, y: loss_of(kind, model, x, y))
    loss = compiled(x, y)
    assert loss.grad_fn is not None and repr(loss.grad_fn) == "<CompiledBackward>"
    np.testing.assert_allclose(loss.item(), eager_loss.item(), **tol(dtype))
    loss.backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), expected[name], err_msg=name, **tol(dtype))
    model.eval()
    with tp.no_grad():
        np.testing.assert_allclose(kernels_everywhere(model)(x).numpy(), model(x).numpy(), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", list(MODELS))
def test_a_whole_training_step_compiles_with_backward_and_step_inside(kind: str, dtype: str) -> None:
    eager_model = make(kind, dtype)
    model = copy.deepcopy(eager_model)
    # Adam on the MLP (the block's key bias has a zero gradient, whose rounding noise Adam would amplify
    # into different updates), SGD with momentum on the others
    make_opt: Callable[[Any], Any] = (lambda ps: optim.AdamW(ps, lr=1e-2)) if kind == "mlp" else \
        (lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-3))
    eager_opt, opt = make_opt(eager_model.parameters()), make_opt(model.parameters())

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = loss_of(kind, model, x, y)
        loss.backward()
        opt.step()
        return loss

    compiled = kernels_everywhere(step)
    for i in range(4):
        x, y = data(kind, dtype, seed=i)
        eager_opt.zero_grad()
        expected = loss_of(kind, eager_model, x, y)
        expected.backward()
        eager_opt.step()
        got = compiled(x, y)
        np.testing.assert_allclose(got.item(), expected.item(), **tol(dtype), err_msg=f"step {i}")
    for (name, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), err_msg=name,
                                   **({"rtol": 2e-4, "atol": 2e-5} if dtype == "float32" else tol(dtype)))
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), err_msg=f"{name}.grad",
                                   **({"rtol": 2e-4, "atol": 2e-5} if dtype == "float32" else tol(dtype)))
    # the first step creates the optimizer state as zeros at call time: every step shares one specialization
    assert compiled.compile_count == 1


@pytest.fixture
def compiled_way() -> Iterator[None]:
    """The ``compiled`` way registered for the test (as the package's entry point does once installed); the
    registry is left as it was found (the installed entry point's way stays registered for later tests)."""
    from tensorplay.compiler.testing_way import run_compiled
    from tensorplay.testing import interpreters, register_interpreter, unregister_interpreter
    previous = interpreters().get("compiled")
    register_interpreter("compiled", run_compiled, replace=True)
    yield
    if previous is None:
        unregister_interpreter("compiled")
    else:
        register_interpreter("compiled", previous.run, description=previous.description, replace=True)


@pytest.mark.parametrize("kind", list(MODELS))
def test_compiled_way_of_check_interpreters(kind: str, compiled_way: None) -> None:
    model = make(kind, "float64")
    x, _ = data(kind, "float64")
    assert check_interpreters(model, x, interpreters=["eager", "compiled"]) == ["eager", "compiled"]
