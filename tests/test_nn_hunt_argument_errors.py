"""Layer and loss functions given a non-tensor (a numpy array, a list, None) where a tensor is required
raise a DTypeError naming the function and the argument, as PyTorch raises a TypeError naming them;
before, numpy or Python errors escaped ("'numpy.ndarray' object has no attribute '_data'", "not a Python
scalar: ndarray"), or a numpy target was silently accepted by one loss and not by another."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.errors import DTypeError

F = tp.nn.functional
X = np.ones((4, 5), dtype=np.float32)
LABELS = np.zeros(4, dtype=np.int64)
W5 = np.ones((3, 5), dtype=np.float32)

# (name, tensorplay call, the same call in PyTorch, the words the message must contain)
CASES: list[tuple[str, Callable[[], Any], Callable[[], Any], tuple[str, ...]]] = [
    ("mse numpy target", lambda: F.mse_loss(tp.tensor(X), X), lambda: torch.nn.functional.mse_loss(torch.tensor(X), X),
     ("mse_loss", "target", "ndarray")),
    ("mse None target", lambda: F.mse_loss(tp.tensor(X), None),
     lambda: torch.nn.functional.mse_loss(torch.tensor(X), None), ("mse_loss", "target", "NoneType")),
    ("mse list target", lambda: F.mse_loss(tp.tensor(X), X.tolist()),
     lambda: torch.nn.functional.mse_loss(torch.tensor(X), X.tolist()), ("mse_loss", "target", "list")),
    ("l1 numpy target", lambda: F.l1_loss(tp.tensor(X), X), lambda: torch.nn.functional.l1_loss(torch.tensor(X), X),
     ("l1_loss", "target", "ndarray")),
    ("cross_entropy numpy target", lambda: F.cross_entropy(tp.tensor(X), LABELS),
     lambda: torch.nn.functional.cross_entropy(torch.tensor(X), LABELS), ("cross_entropy", "target", "ndarray")),
    ("nll numpy target", lambda: F.nll_loss(tp.tensor(X), LABELS),
     lambda: torch.nn.functional.nll_loss(torch.tensor(X), LABELS), ("nll_loss", "target", "ndarray")),
    ("cross_entropy numpy weight",
     lambda: F.cross_entropy(tp.tensor(X), tp.tensor(LABELS), weight=np.ones(5, dtype=np.float32)),
     lambda: torch.nn.functional.cross_entropy(torch.tensor(X), torch.tensor(LABELS),
                                               weight=np.ones(5, dtype=np.float32)),
     ("cross_entropy", "argument 3", "ndarray")),
    ("linear numpy weight", lambda: F.linear(tp.tensor(X), W5),
     lambda: torch.nn.functional.linear(torch.tensor(X), W5), ("linear", "argument 2", "ndarray")),
    ("conv1d numpy weight", lambda: F.conv1d(tp.tensor(np.ones((1, 1, 3), dtype=np.float32)),
                                             np.ones((1, 1, 1), dtype=np.float32)),
     lambda: torch.nn.functional.conv1d(torch.ones(1, 1, 3), np.ones((1, 1, 1), dtype=np.float32)),
     ("conv1d", "argument 2", "ndarray")),
    ("layer_norm numpy weight", lambda: F.layer_norm(tp.tensor(X), 5, weight=np.ones(5, dtype=np.float32)),
     lambda: torch.nn.functional.layer_norm(torch.tensor(X), (5,), weight=np.ones(5, dtype=np.float32)),
     ("layer_norm", "argument 2", "ndarray")),
    ("batch_norm numpy running stats", lambda: F.batch_norm(tp.tensor(X), np.zeros(5), np.ones(5)),
     lambda: torch.nn.functional.batch_norm(torch.tensor(X), np.zeros(5), np.ones(5)),
     ("batch_norm", "argument 2", "ndarray")),
    ("embedding numpy weight", lambda: F.embedding(tp.tensor(np.array([0])), np.ones((5, 3), dtype=np.float32)),
     lambda: torch.nn.functional.embedding(torch.tensor([0]), np.ones((5, 3), dtype=np.float32)),
     ("embedding", "argument 2", "ndarray")),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_non_tensor_argument_is_a_dtype_error_naming_it(case: tuple[str, Callable[[], Any], Callable[[], Any],
                                                                      tuple[str, ...]]) -> None:
    _, call, torch_call, words = case
    with pytest.raises((TypeError, AttributeError)):  # PyTorch refuses each of these too
        torch_call()
    with pytest.raises(DTypeError) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_tensors_and_optional_none_still_accepted() -> None:
    out = F.linear(tp.tensor(X), tp.tensor(W5), None)
    expected = torch.nn.functional.linear(torch.tensor(X), torch.tensor(W5), None)
    np.testing.assert_allclose(out.numpy(), expected.numpy())
    loss = F.cross_entropy(tp.tensor(X), tp.index(tp.tensor(LABELS), bound=5))
    np.testing.assert_allclose(loss.numpy(), torch.nn.functional.cross_entropy(torch.tensor(X),
                                                                              torch.tensor(LABELS)).numpy(), rtol=1e-6)
