"""A compiled training step that takes the model as an argument (the optimizer a closure or an argument):
``backward()`` and ``optimizer.step()`` inside, checked against the same steps in PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn

RNG = np.random.default_rng(0)


def _pair() -> tuple[nn.Module, torch.nn.Module]:
    ours = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    with torch.no_grad():
        for (_, p), q in zip(ours.named_parameters(), theirs.parameters()):
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))
    return ours, theirs


@pytest.mark.parametrize("how", ["model_arg", "model_and_optimizer_args", "closure"])
def test_a_compiled_step_with_the_model_as_an_argument_matches_torch(how: str) -> None:
    ours, theirs = _pair()
    opt = tp.optim.AdamW(ours.parameters(), lr=0.05, weight_decay=0.1)
    topt = torch.optim.AdamW(theirs.parameters(), lr=0.05, weight_decay=0.1)

    def step(model: Any, o: Any, x: Any, y: Any) -> Any:
        o.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        clip = nn.utils.clip_grad_norm_ if isinstance(model, nn.Module) else torch.nn.utils.clip_grad_norm_
        clip(model.parameters(), 0.5)
        o.step()
        return loss

    if how == "model_arg":
        fn = tp.compile(lambda m, a, b: step(m, opt, a, b))
        call = lambda x, y: fn(ours, x, y)  # noqa: E731
    elif how == "model_and_optimizer_args":
        compiled = tp.compile(step)
        call = lambda x, y: compiled(ours, opt, x, y)  # noqa: E731
    else:
        fn2 = tp.compile(lambda a, b: step(ours, opt, a, b))
        call = lambda x, y: fn2(x, y)  # noqa: E731
    for _ in range(4):
        x = RNG.standard_normal((6, 4)).astype(np.float32)
        y = RNG.standard_normal((6, 3)).astype(np.float32)
        loss = call(tp.tensor(x), tp.tensor(y))
        want = step(theirs, topt, torch.from_numpy(x), torch.from_numpy(y))
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5, atol=1e-6)
        for p, q in zip(ours.parameters(), theirs.parameters()):
            assert isinstance(p._data, np.ndarray)  # the user's parameters hold arrays again after the call
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5)
    # the model still runs eagerly, with the updated weights
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(ours(tp.tensor(x)).detach().numpy(), theirs(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_backward_inside_with_the_module_as_an_argument() -> None:
    ours, theirs = _pair()
    fn = tp.compile(lambda m, x: (loss := m(x).sum(), loss.backward(), loss)[2])
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    loss = fn(ours, tp.tensor(x))
    want = theirs(torch.from_numpy(x)).sum()
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


class _PosModel(nn.Module):
    """An embedding of positions made inside forward (``tp.arange``), as a language model's."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(6, 4)
        self.pos = nn.Embedding(8, 4)
        self.head = nn.Linear(4, 6)

    def forward(self, idx: Any) -> Any:
        return self.head(self.tok(idx) + self.pos(tp.arange(idx.shape[1])))


class _TorchPosModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(6, 4)
        self.pos = torch.nn.Embedding(8, 4)
        self.head = torch.nn.Linear(4, 6)

    def forward(self, idx: Any) -> Any:
        return self.head(self.tok(idx) + self.pos(torch.arange(idx.shape[1])))


def test_a_module_argument_is_state_so_what_its_parameters_make_inside_is_recorded() -> None:
    """``pos(arange(T))`` involves only the module's parameter and a tensor made inside: it must be recorded
    (gradient, and the updated weights read at every call), not computed once at capture and baked in."""
    ours, theirs = _PosModel(), _TorchPosModel()
    theirs.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in ours.state_dict().items()})
    opt = tp.optim.SGD(ours.parameters(), lr=0.5)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.5)

    def step(model: Any, o: Any, x: Any, y: Any, F: Any) -> Any:
        o.zero_grad()
        loss = F.cross_entropy(model(x).reshape(-1, 6), y.reshape(-1))
        loss.backward()
        o.step()
        return loss

    compiled = tp.compile(lambda m, x, y: step(m, opt, x, y, nn.functional))
    for _ in range(4):
        x = RNG.integers(0, 6, (3, 5))
        y = RNG.integers(0, 6, (3, 5))
        loss = compiled(ours, tp.tensor(x), tp.tensor(y))
        want = step(theirs, topt, torch.from_numpy(x), torch.from_numpy(y), torch.nn.functional)
        np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(ours.pos.weight.detach().numpy(), theirs.pos.weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-6)
    other = _PosModel()  # another module object: its own parameters, not the first one's
    x = RNG.integers(0, 6, (2, 5))
    got = tp.compile(lambda m, x: m(x))
    np.testing.assert_allclose(got(other, tp.tensor(x)).detach().numpy(), other(tp.tensor(x)).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(got(ours, tp.tensor(x)).detach().numpy(), ours(tp.tensor(x)).detach().numpy(), rtol=1e-6)
