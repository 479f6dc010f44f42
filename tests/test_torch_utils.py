"""``nn.utils`` (gradient clipping, flat parameter vectors) and devices, as PyTorch users write them."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.errors import DeviceError, DTypeError, ShapeError
from tensorplay.nn import functional as F

RNG = np.random.default_rng(0)


def _with_grads(dtype: Any = np.float32, empty: bool = True) -> tuple[list[Any], list[Any]]:
    shapes = [(3, 4), (5,), (2, 2, 2)] + ([(0, 3)] if empty else [])
    grads = [RNG.standard_normal(s).astype(dtype) * 3 for s in shapes]
    ours = [tp.zeros(*g.shape, dtype=str(g.dtype), requires_grad=True) for g in grads]
    theirs = [torch.zeros(g.shape, dtype=getattr(torch, str(g.dtype)), requires_grad=True) for g in grads]
    for a, b, g in zip(ours, theirs, grads):
        a.grad = tp.tensor(g)
        b.grad = torch.tensor(g)
    return ours, theirs


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0, 0.0])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_grad_norm_matches_pytorch(norm_type: float, max_norm: float, dtype: Any) -> None:
    # an empty gradient adds nothing (PyTorch refuses it for the inf norm: no identity for max)
    ours, theirs = _with_grads(dtype, empty=norm_type != float("inf"))
    held = ours[0].grad
    total = nn.utils.clip_grad_norm_(ours, max_norm, norm_type)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    np.testing.assert_allclose(total.numpy(), expected.numpy(), rtol=1e-6)
    assert total.dtype.name == str(expected.dtype).removeprefix("torch.")
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6)
    assert ours[0].grad is held  # scaled in place, as PyTorch


def test_clip_grad_norm_skips_parameters_without_grad_and_takes_one_tensor() -> None:
    p, q = tp.zeros(3, requires_grad=True), tp.zeros(2, requires_grad=True)
    p.grad = tp.tensor([3.0, 4.0, 0.0])
    assert nn.utils.clip_grad_norm_([p, q], 1.0).item() == pytest.approx(5.0)
    assert q.grad is None
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8, 0.0], rtol=1e-5)
    assert nn.utils.clip_grad_norm_(p, 10.0).item() == pytest.approx(1.0, rel=1e-5)
    assert nn.utils.clip_grad_norm_([q], 1.0).item() == 0.0  # no gradients at all


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_clip_grad_norm_nonfinite() -> None:
    ours, theirs = _with_grads()
    ours[0].grad.numpy()[0, 0] = np.inf
    theirs[0].grad[0, 0] = np.inf
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError, match="non-finite"):
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True)
    assert np.isinf(nn.utils.clip_grad_norm_(ours, 1.0).item())
    torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_clip_grad_value_matches_pytorch() -> None:
    ours, theirs = _with_grads()
    ours[1].grad.numpy()[0] = np.nan
    theirs[1].grad[0] = np.nan
    assert nn.utils.clip_grad_value_(ours, 0.7) is None
    torch.nn.utils.clip_grad_value_(theirs, 0.7)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_clipping_inside_a_compiled_training_step_matches_eager() -> None:
    def setup() -> tuple[nn.Module, Any]:
        tp.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        return model, tp.optim.SGD(model.parameters(), lr=0.1)

    def stepper(model: nn.Module, opt: Any) -> Any:
        def step(x: Any, y: Any) -> Any:
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            nn.utils.clip_grad_value_(model.parameters(), 0.05)
            opt.step()
            return loss, norm
        return step

    eager_model, eager_opt = setup()
    model, opt = setup()
    eager_step, compiled = stepper(eager_model, eager_opt), tp.compile(stepper(model, opt))
    for i in range(3):
        x = tp.tensor(RNG.standard_normal((5, 4)).astype(np.float32))
        y = tp.tensor(RNG.standard_normal((5, 3)).astype(np.float32) * 5)
        (loss, norm), (loss2, norm2) = eager_step(x, y), compiled(x, y)
        np.testing.assert_allclose(loss2.item(), loss.item(), rtol=1e-5)
        np.testing.assert_allclose(norm2.item(), norm.item(), rtol=1e-5)
        assert norm.item() > 0.5  # the clipping acts
    for (name, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    assert compiled.compile_count == 1


def test_parameters_to_vector_and_back_match_pytorch() -> None:
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    ours = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    vec = nn.utils.parameters_to_vector(ours.parameters())
    expected = torch.nn.utils.parameters_to_vector(theirs.parameters())
    np.testing.assert_array_equal(vec.detach().numpy(), expected.detach().numpy())
    c = RNG.standard_normal(vec.shape[0]).astype(np.float32)
    (vec * tp.tensor(c)).sum().backward()
    (expected * torch.tensor(c)).sum().backward()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_array_equal(p.grad.numpy(), q.grad.numpy())  # the gradient reaches each parameter
    new = RNG.standard_normal(vec.shape[0]).astype(np.float32)
    weight = ours[0].weight
    nn.utils.vector_to_parameters(tp.tensor(new), ours.parameters())
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs.parameters())
    assert ours[0].weight is weight
    for p, q in zip(ours.parameters(), theirs.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


def test_parameters_to_vector_runs_under_every_way() -> None:
    from tensorplay.testing import check_interpreters
    assert "exported" in check_interpreters(lambda a, b: nn.utils.parameters_to_vector([a, b]),
                                            tp.randn(2, 3), tp.randn(4))


def test_vector_to_parameters_checks_the_length() -> None:
    with pytest.raises(ShapeError, match="7 entries, the parameters 6"):
        nn.utils.vector_to_parameters(tp.zeros(7), [tp.zeros(2, 3)])
    with pytest.raises(ShapeError, match="1-d"):
        nn.utils.vector_to_parameters(tp.zeros(2, 3), [tp.zeros(2, 3)])
    with pytest.raises(TypeError, match="iterable of tensors"):
        nn.utils.parameters_to_vector(tp.zeros(3))  # type: ignore[arg-type]


# ---- devices --------------------------------------------------------------------------------------------

def test_cpu_device_moves_are_no_ops() -> None:
    x = tp.randn(2, 3)
    device = tp.device("cpu")
    assert x.to("cpu") is x and x.to(device) is x and x.cpu() is x and x.to(device="cpu:0") is x
    assert x.device == device == "cpu" == tp.device("cpu", 0) and str(x.device) == str(torch.ones(1).device)
    assert repr(device) == repr(torch.device("cpu")) and not x.is_cuda
    assert x.to("cpu", tp.float64).dtype == tp.float64 and x.to(device, dtype=tp.float64).dtype == tp.float64
    assert x.to(tp.zeros(1, dtype=tp.int64)).dtype == tp.int64
    assert x.to(tp.float32) is x and x.to(tp.float64).dtype == tp.float64  # to(dtype) as before
    model = nn.Linear(3, 2)
    assert model.to(device) is model and model.cpu() is model and model.to("cpu").weight.dtype == tp.float32
    assert model.to("cpu", tp.float64).weight.dtype == tp.float64


def test_device_moves_run_inside_compiled_and_exported_functions() -> None:
    from tensorplay.testing import check_interpreters
    device = tp.device("cpu")
    assert "exported" in check_interpreters(lambda x: (x.to(device) * 2).cpu().to("cpu", tp.float64), tp.randn(3))


@pytest.mark.parametrize("call", [
    lambda x: x.to("cuda"), lambda x: x.to("cuda:0", tp.float32), lambda x: x.cuda(), lambda x: x.to(device="mps"),
    lambda x: tp.device("cuda"), lambda x: nn.Linear(2, 2).to("cuda"), lambda x: nn.Linear(2, 2).cuda(),
])
def test_other_devices_are_a_clear_error(call: Any) -> None:
    with pytest.raises(DeviceError, match="CPU only"):
        call(tp.randn(2))


def test_device_choice_idiom_picks_the_cpu() -> None:
    device = tp.device("cuda" if tp.cuda.is_available() else "cpu")
    assert device == "cpu" and tp.cuda.device_count() == 0
    assert tp.randn(2).to(device).device == device


def test_a_misspelt_dtype_is_still_a_dtype_error() -> None:
    with pytest.raises(DTypeError, match="unknown dtype 'flaot32'"):
        tp.randn(2).to("flaot32")
