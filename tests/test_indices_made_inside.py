"""Index tensors created inside a compiled or exported function (``tp.arange(n)``, ``tp.tensor([...])``,
``tp.index(...)``) drive every indexing operation as they do eagerly: ``nn.Embedding`` / ``F.embedding``
(the table a parameter of a closed-over module, an argument, or a closed-over tensor), advanced indexing
``x[idx]`` on any axis, ``x[idx] = v`` (index_put), ``F.one_hot`` and the targets of ``F.cross_entropy``.
Each is compared with PyTorch, under ``tp.compile`` (both backends, and with gradients) and under
``tp.export`` after a save and a load."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.export import export
from tests.export_helpers import as_array, round_trip

AnyTensor = tp.Tensor[*tuple[Any, ...]]
RNG = np.random.default_rng(0)
TABLE = RNG.standard_normal((10, 4)).astype(np.float32)
X = RNG.standard_normal((3, 4)).astype(np.float32)


def _embedding_module() -> nn.Embedding:
    emb = nn.Embedding(10, 4)
    emb.load_state_dict({"weight": tp.tensor(TABLE.copy())})
    return emb


EMB = _embedding_module()
CLOSED = tp.tensor(TABLE.copy())  # a closed-over tensor (not a parameter)


def _index_put(x: AnyTensor) -> AnyTensor:
    y = x.clone()
    y[tp.tensor([0, 2])] = 5.0
    y[:, tp.arange(2)] = -1.0
    return y


def _index_put_torch(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[torch.tensor([0, 2])] = 5.0
    y[:, torch.arange(2)] = -1.0
    return y


# name -> (tensorplay function of x[3, 4], the same in PyTorch)
CASES: dict[str, tuple[Callable[[AnyTensor], AnyTensor], Callable[[torch.Tensor], torch.Tensor]]] = {
    "module_embedding_arange": (lambda x: EMB(tp.arange(7)).sum(0) + x,
                                lambda x: torch.from_numpy(TABLE)[torch.arange(7)].sum(0) + x),
    "module_embedding_tensor": (lambda x: EMB(tp.tensor([[0, 1], [2, 9]])).sum((0, 1)) * x,
                                lambda x: torch.from_numpy(TABLE)[torch.tensor([[0, 1], [2, 9]])].sum((0, 1)) * x),
    "module_embedding_index": (lambda x: EMB(tp.index([3, 3, 8], 10)) @ x.T,
                               lambda x: torch.from_numpy(TABLE)[torch.tensor([3, 3, 8])] @ x.T),
    "embedding_of_argument": (lambda x: F.embedding(tp.tensor([2, 0, 2, 1]), x),
                              lambda x: torch.nn.functional.embedding(torch.tensor([2, 0, 2, 1]), x)),
    "embedding_of_closure": (lambda x: F.embedding(tp.arange(3), CLOSED) + x,
                             lambda x: torch.from_numpy(TABLE)[:3] + x),
    "getitem_closure_axis0": (lambda x: CLOSED[tp.tensor([9, 0, 4])] - x,
                              lambda x: torch.from_numpy(TABLE)[torch.tensor([9, 0, 4])] - x),
    "getitem_parameter_axis1": (lambda x: EMB.weight[:3, tp.tensor([3, 1, 1, 0])] * x,
                                lambda x: torch.from_numpy(TABLE)[:3, torch.tensor([3, 1, 1, 0])] * x),
    "getitem_argument": (lambda x: x[tp.tensor([2, -1, 0])][:, tp.arange(2)],
                         lambda x: x[torch.tensor([2, -1, 0])][:, torch.arange(2)]),
    "index_put": (_index_put, _index_put_torch),
    "one_hot": (lambda x: F.one_hot(tp.tensor([3, 0, 1]), 4).float() * x,
                lambda x: torch.nn.functional.one_hot(torch.tensor([3, 0, 1]), 4).float() * x),
    "cross_entropy_target": (lambda x: F.cross_entropy(x, tp.tensor([0, 3, 1]), reduction="none"),
                             lambda x: torch.nn.functional.cross_entropy(x, torch.tensor([0, 3, 1]),
                                                                         reduction="none")),
}


def _torch_expected(name: str, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return CASES[name][1](torch.from_numpy(x.copy())).numpy()


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("name", list(CASES))
def test_compiled_with_indices_made_inside_matches_pytorch(name: str, backend: str) -> None:
    fn = CASES[name][0]
    compiled = tp.compile(fn, backend=backend)
    for x in (X, 2 * X):  # the second call reuses the specialization with new values
        np.testing.assert_allclose(as_array(compiled(tp.tensor(x))), _torch_expected(name, x),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
    assert compiled.compile_count == 1


@pytest.mark.parametrize("name", list(CASES))
def test_exported_with_indices_made_inside_matches_pytorch_after_save_and_load(name: str) -> None:
    fn = CASES[name][0]
    loaded = round_trip(export(fn, (tp.tensor(X),)))
    for x in (X, 2 * X):
        np.testing.assert_allclose(as_array(loaded.module()(tp.tensor(x))), _torch_expected(name, x),
                                   rtol=1e-5, atol=1e-6, err_msg=name)


class _Positional(nn.Module):
    """Token plus positional embeddings, the positions made inside ``forward``."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(10, 4)
        self.pos = nn.Embedding(6, 4)

    def forward(self, ids: AnyTensor) -> AnyTensor:
        return self.tok(ids) + self.pos(tp.arange(ids.shape[-1]))  # type: ignore[no-any-return]


def test_compiled_positional_embedding_gradients_match_pytorch() -> None:
    tp.manual_seed(0)
    model = _Positional()
    ids = np.array([[1, 4, 4, 9, 0], [2, 2, 3, 0, 7]], np.int64)
    weight = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    tok = torch.tensor(as_array(model.tok.weight), requires_grad=True)
    pos = torch.tensor(as_array(model.pos.weight), requires_grad=True)
    expected = tok[torch.from_numpy(ids)] + pos[torch.arange(5)]
    (expected * torch.from_numpy(weight)).sum().backward()

    step = tp.compile(lambda i: (model(i) * tp.tensor(weight)).sum())
    loss = step(tp.tensor(ids))
    loss.backward()
    np.testing.assert_allclose(as_array(loss), (expected * torch.from_numpy(weight)).sum().item(), rtol=1e-5)
    assert model.tok.weight.grad is not None and model.pos.weight.grad is not None
    assert tok.grad is not None and pos.grad is not None
    np.testing.assert_allclose(as_array(model.tok.weight.grad), tok.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(as_array(model.pos.weight.grad), pos.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("way", ["compile", "export"])
def test_an_out_of_range_index_made_inside_is_a_clear_error(way: str) -> None:
    def fn(x: AnyTensor) -> AnyTensor:
        return EMB(tp.arange(11)).sum() + x

    with pytest.raises(tp.IndexRangeError, match=r"embedding: index 10 .*out of range"):
        if way == "compile":
            tp.compile(fn)(tp.tensor(X))
        else:
            export(fn, (tp.tensor(X),)).module()(tp.tensor(X))
