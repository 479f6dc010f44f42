"""A compiled training step updates the tensors its optimizer holds: replacing an entry of a group's ``params``
list, or a model's parameter that the optimizer still holds the old one of, recompiles, and the step then does
what eager does. Numpy arrays the function reaches are guarded by value up to 1 MiB (``tp.tensor(a)`` and
numpy arithmetic bake their values in), and a larger one is named in an ``UnguardedStateWarning``."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import optim
from tensorplay.compiler import UnguardedStateWarning
from tests.helpers import training_step


def _step(model: Any, opt: Any) -> Callable[[Any, Any], Any]:
    return training_step(model, opt, F.mse_loss)  # type: ignore[no-any-return]


def _pair(kind: str) -> tuple[Any, Any]:
    tp.manual_seed(0)
    model = nn.Linear(3, 2)
    twin = copy.deepcopy(model)
    make = (lambda m: optim.SGD(m.parameters(), lr=0.1, momentum=0.9)) if kind == "sgd" else \
        (lambda m: optim.Adam(m.parameters(), lr=0.01))
    return (model, make(model)), (twin, make(twin))


def _replace_in_optimizer(model: Any, opt: Any) -> None:
    opt.param_groups[0]["params"][0] = nn.Parameter(tp.zeros(2, 3))


def _replace_on_model(model: Any, opt: Any) -> None:
    model.weight = nn.Parameter(tp.ones(2, 3))


@pytest.mark.parametrize("kind", ["sgd", "adam"])
@pytest.mark.parametrize("change", [_replace_in_optimizer, _replace_on_model])
def test_the_optimizers_tensors_are_guarded(kind: str, change: Callable[[Any, Any], None]) -> None:
    (model, opt), (twin, twin_opt) = _pair(kind)
    eager, compiled = _step(model, opt), tp.compile(_step(twin, twin_opt))
    x, y = tp.randn(4, 3), tp.randn(4, 2)
    for _ in range(2):
        np.testing.assert_allclose(compiled(x, y).item(), eager(x, y).item(), rtol=1e-6)
    change(model, opt)
    change(twin, twin_opt)
    for _ in range(3):
        np.testing.assert_allclose(compiled(x, y).item(), eager(x, y).item(), rtol=1e-6)
        for a, b in zip(model.parameters(), twin.parameters()):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-7)
            assert (a.grad is None) == (b.grad is None)
            if a.grad is not None and b.grad is not None:
                np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=1e-6, atol=1e-7)
        for a, b in zip(opt.param_groups[0]["params"], twin_opt.param_groups[0]["params"]):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-6, atol=1e-7)
    assert compiled.compile_count >= 2 and any("param" in str(r) or "weight" in str(r)
                                               for r in compiled.recompile_reasons)


@pytest.mark.parametrize("n_bytes", [16, 4100, 65536, 1 << 20])
@pytest.mark.parametrize("use", ["tensor", "numpy-sum", "direct"])
def test_a_numpy_array_changed_in_place_is_seen(n_bytes: int, use: str) -> None:
    table = {"a": np.ones(n_bytes // 4, np.float32)}

    def f(x: Any) -> Any:
        a = table["a"]
        if use == "tensor":
            return x * tp.tensor(a[:3])
        if use == "numpy-sum":
            return x * float(a.sum())
        return x * a[:3]

    compiled = tp.compile(f)
    x = tp.tensor(np.arange(3.0, dtype=np.float32))
    for value in (1.0, 1.0, 3.0, 3.0, -2.0):
        table["a"][:] = value
        np.testing.assert_allclose(compiled(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert compiled.compile_count == 3  # captured, then once per new value


def test_a_larger_array_is_named_as_unguarded() -> None:
    big = np.ones((1 << 20) // 4 + 1, np.float32)

    def f(x: Any) -> Any:
        return x * float(big[0])

    with pytest.warns(UnguardedStateWarning, match="numpy array of"):
        tp.compile(f)(tp.ones(3))
