"""``tp.compile`` of a model or loss with an absent parameter, buffer or submodule (``None``), set after the
first call: the compiled function must see the new one (as eager and PyTorch do), not the graph traced
without it."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

import tensorplay as tp

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 3)).astype(np.float32)
Y = RNG.integers(0, 3, 6)
W = np.array([5.0, 1.0, 0.5], dtype=np.float32)


def _call(f: Any, *args: Any) -> np.ndarray[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(f(*args).detach().numpy())


def test_loss_weight_buffer_set_after_compiling() -> None:
    loss = tp.nn.CrossEntropyLoss()
    compiled = tp.compile(lambda x, y: loss(x, y))
    x, y = tp.tensor(X), tp.tensor(Y)
    np.testing.assert_allclose(_call(compiled, x, y),
                               torch.nn.functional.cross_entropy(torch.tensor(X), torch.tensor(Y)).numpy(), rtol=1e-6)
    loss.weight = tp.tensor(W)
    expected = torch.nn.functional.cross_entropy(torch.tensor(X), torch.tensor(Y), weight=torch.tensor(W)).numpy()
    np.testing.assert_allclose(_call(compiled, x, y), expected, rtol=1e-6)
    loss.weight = None
    np.testing.assert_allclose(_call(compiled, x, y),
                               torch.nn.functional.cross_entropy(torch.tensor(X), torch.tensor(Y)).numpy(), rtol=1e-6)


def test_linear_bias_parameter_set_after_compiling() -> None:
    lin = tp.nn.Linear(3, 2, bias=False)
    tlin = torch.nn.Linear(3, 2, bias=False)
    lin.load_state_dict(tlin.state_dict())
    compiled = tp.compile(lin)
    x = tp.tensor(X)
    np.testing.assert_allclose(_call(compiled, x), tlin(torch.tensor(X)).detach().numpy(), rtol=1e-6)
    bias = np.array([1.0, -2.0], dtype=np.float32)
    lin.bias = tp.nn.Parameter(tp.tensor(bias))
    tlin.bias = torch.nn.Parameter(torch.tensor(bias))
    np.testing.assert_allclose(_call(compiled, x), tlin(torch.tensor(X)).detach().numpy(), rtol=1e-6)


class _Head(tp.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = tp.nn.Linear(3, 3)
        self.register_module("act", None)

    def forward(self, x: Any) -> Any:
        y = self.lin(x)
        return y if self.act is None else self.act(y)


def test_submodule_set_after_compiling() -> None:
    head = _Head()
    tlin = torch.nn.Linear(3, 3)
    head.lin.load_state_dict(tlin.state_dict())
    compiled = tp.compile(head)
    x = tp.tensor(X)
    np.testing.assert_allclose(_call(compiled, x), tlin(torch.tensor(X)).detach().numpy(), rtol=1e-6, atol=1e-7)
    head.act = tp.nn.ReLU()
    np.testing.assert_allclose(_call(compiled, x), torch.relu(tlin(torch.tensor(X))).detach().numpy(), rtol=1e-6,
                               atol=1e-7)
