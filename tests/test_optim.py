"""tensorplay.optim against PyTorch: 20 training steps of the same model with the same data give the
same parameters; state dicts, parameter groups and schedulers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn, optim

tnn = torch.nn


def make_models() -> tuple[nn.Module, Any]:
    theirs = tnn.Sequential(tnn.Conv2d(1, 3, 3), tnn.ReLU(), tnn.Flatten(), tnn.Linear(3 * 4 * 4, 8), tnn.Tanh(),
                            tnn.Linear(8, 4))
    ours = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 4 * 4, 8), nn.Tanh(),
                         nn.Linear(8, 4))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def batches(n: int) -> list[tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]]:
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((8, 1, 6, 6)).astype(np.float32), rng.integers(0, 4, 8)) for _ in range(n)]


def train(model: Any, opt: Any, data: list[Any], framework: str, scheduler: Any = None) -> list[float]:
    losses = []
    for x, y in data:
        opt.zero_grad()
        if framework == "tp":
            loss = F.cross_entropy(model(tp.tensor(x)), tp.tensor(y))
        else:
            loss = torch.nn.functional.cross_entropy(model(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(float(loss.item()))
    return losses


def assert_same_parameters(ours: nn.Module, theirs: Any, rtol: float = 2e-4, atol: float = 2e-5) -> None:
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.detach().numpy(), theirs_params[name].detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


OPTIMIZERS: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("sgd", lambda p: optim.SGD(p, lr=0.1), lambda p: torch.optim.SGD(p, lr=0.1)),
    ("sgd-momentum", lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
    ("sgd-dampening-wd", lambda p: optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01),
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, dampening=0.3, weight_decay=0.01)),
    ("sgd-nesterov", lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("sgd-maximize", lambda p: optim.SGD(p, lr=0.01, momentum=0.5, maximize=True),
     lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.5, maximize=True)),
    ("adam", lambda p: optim.Adam(p, lr=0.01), lambda p: torch.optim.Adam(p, lr=0.01)),
    ("adam-wd-amsgrad", lambda p: optim.Adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.05, amsgrad=True),
     lambda p: torch.optim.Adam(p, lr=0.01, betas=(0.8, 0.99), weight_decay=0.05, amsgrad=True)),
    ("adamw", lambda p: optim.AdamW(p, lr=0.01), lambda p: torch.optim.AdamW(p, lr=0.01)),
    ("adamw-amsgrad", lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True, eps=1e-6),
     lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1, amsgrad=True, eps=1e-6)),
]


@pytest.mark.parametrize("name,make_ours,make_theirs", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_twenty_steps_match_pytorch(name: str, make_ours: Callable[[Any], Any],
                                    make_theirs: Callable[[Any], Any]) -> None:
    ours, theirs = make_models()
    data = batches(2) * 10  # 20 steps over two fixed batches, so the loss must go down
    losses = train(ours, make_ours(ours.parameters()), data, "tp")
    losses_t = train(theirs, make_theirs(theirs.parameters()), data, "torch")
    np.testing.assert_allclose(losses, losses_t, rtol=2e-4, atol=1e-5)
    assert_same_parameters(ours, theirs)
    if not name.endswith("maximize"):
        assert sum(losses[-2:]) < sum(losses[:2])


def test_param_groups_and_schedulers_match_pytorch() -> None:
    ours, theirs = make_models()
    data = batches(12)

    def groups(model: Any) -> list[dict[str, Any]]:
        params = list(model.parameters())
        return [{"params": params[:2], "lr": 0.2}, {"params": params[2:]}]

    opt = optim.SGD(groups(ours), lr=0.05, momentum=0.9)
    opt_t = torch.optim.SGD(groups(theirs), lr=0.05, momentum=0.9)
    sched = optim.StepLR(opt, step_size=3, gamma=0.5)
    sched_t = torch.optim.lr_scheduler.StepLR(opt_t, step_size=3, gamma=0.5)
    train(ours, opt, data, "tp", sched)
    train(theirs, opt_t, data, "torch", sched_t)
    assert_same_parameters(ours, theirs)
    assert sched.get_last_lr() == pytest.approx(sched_t.get_last_lr())
    assert [g["lr"] for g in opt.param_groups] == pytest.approx([g["lr"] for g in opt_t.param_groups])


def test_cosine_annealing_lr_sequence_matches_pytorch() -> None:
    p = nn.Parameter(np.zeros(2, dtype=np.float32))
    pt = torch.nn.Parameter(torch.zeros(2))
    opt, opt_t = optim.Adam([p], lr=0.1), torch.optim.Adam([pt], lr=0.1)
    sched = optim.CosineAnnealingLR(opt, T_max=10, eta_min=0.001)
    sched_t = torch.optim.lr_scheduler.CosineAnnealingLR(opt_t, T_max=10, eta_min=0.001)
    ours, theirs = [], []
    for _ in range(25):
        ours.append(sched.get_last_lr()[0])
        theirs.append(sched_t.get_last_lr()[0])
        opt_t.step()
        sched.step()
        sched_t.step()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9)


def test_state_dict_resumes_training_exactly() -> None:
    data = batches(10)
    ours, _ = make_models()
    reference = optim.Adam(ours.parameters(), lr=0.01, amsgrad=True)
    start = {k: v.numpy().copy() for k, v in ours.state_dict().items()}
    train(ours, reference, data, "tp")
    final = {k: v.numpy().copy() for k, v in ours.state_dict().items()}

    resumed, _ = make_models()
    resumed.load_state_dict(start)
    first = optim.Adam(resumed.parameters(), lr=0.01, amsgrad=True)
    train(resumed, first, data[:5], "tp")
    saved_model = {k: v.numpy().copy() for k, v in resumed.state_dict().items()}
    saved_opt = first.state_dict()
    assert saved_opt["param_groups"][0]["params"] == list(range(len(list(resumed.parameters()))))
    assert saved_opt["state"][0]["step"] == 5

    fresh, _ = make_models()
    fresh.load_state_dict(saved_model)
    second = optim.Adam(fresh.parameters(), lr=0.5, amsgrad=True)
    second.load_state_dict(saved_opt)
    assert second.param_groups[0]["lr"] == 0.01
    train(fresh, second, data[5:], "tp")
    for k, v in fresh.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), final[k], err_msg=k)


def test_zero_grad_versions_and_errors() -> None:
    lin = nn.Linear(3, 2)
    opt = optim.SGD(lin.parameters(), lr=0.1)
    lin(tp.randn(4, 3)).sum().backward()
    assert lin.weight.grad is not None
    opt.zero_grad(set_to_none=False)
    assert lin.weight.grad is not None and not lin.weight.grad.numpy().any()
    opt.zero_grad()
    assert lin.weight.grad is None
    before = lin.weight.detach().numpy().copy()
    opt.step()  # no gradients: nothing changes
    np.testing.assert_array_equal(lin.weight.detach().numpy(), before)
    # an update is an in-place change: backward through a graph saved before it is refused
    x = tp.randn(4, 3)
    out = (lin.weight * 2.0).sum() + lin(x).sum()
    lin(x).sum().backward()
    opt.step()
    with pytest.raises(tp.AutogradError, match="modified in place"):
        out.backward()
    with pytest.raises(optim.OptimizerError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(optim.OptimizerError, match="non-leaf"):
        optim.SGD([lin.weight * 2.0], lr=0.1)
    with pytest.raises(optim.OptimizerError, match="more than one parameter group"):
        optim.SGD([{"params": [lin.weight]}, {"params": [lin.weight]}], lr=0.1)
    with pytest.raises(optim.OptimizerError, match="Nesterov"):
        optim.SGD(lin.parameters(), lr=0.1, nesterov=True)
    with pytest.raises(optim.OptimizerError, match="beta"):
        optim.Adam(lin.parameters(), betas=(1.0, 0.9))
    with pytest.raises(optim.OptimizerError, match="parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})


def test_closure_is_evaluated() -> None:
    p = nn.Parameter(np.array([3.0], dtype=np.float32))
    opt = optim.SGD([p], lr=0.25)

    def closure() -> Any:
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    assert float(loss.item()) == 9.0
    assert float(p.detach().numpy()[0]) == pytest.approx(3.0 - 0.25 * 6.0)


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_updates_with_any_memory_layout_match_pytorch(kind: str) -> None:
    """Row-major weights used as ``x @ w.T`` get column-major gradients (the transpose of ``x^T g``): the
    fused update reads a row-major copy of the gradient and must still match PyTorch; so must float64
    parameters."""
    rng = np.random.default_rng(4)
    w_np = rng.standard_normal((5, 3)).astype(np.float32)
    w64_np = rng.standard_normal((3, 2))
    x_np = rng.standard_normal((4, 3)).astype(np.float32)
    w, w64 = nn.Parameter(w_np.copy()), nn.Parameter(w64_np.copy())
    wt, wt64 = torch.nn.Parameter(torch.tensor(w_np)), torch.nn.Parameter(torch.tensor(w64_np))
    assert w.detach().numpy().flags.c_contiguous
    make = (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)) if kind == "sgd" else \
        (lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True))
    make_t = (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True)) if kind == "sgd" else \
        (lambda ps: torch.optim.Adam(ps, lr=0.05, amsgrad=True))
    opt, opt_t = make([w, w64]), make_t([wt, wt64])
    for _ in range(5):
        opt.zero_grad()
        opt_t.zero_grad()
        ((tp.tensor(x_np) @ w.T).tanh().sum() + (w64 * w64).sum()).backward()
        (torch.nn.functional.linear(torch.tensor(x_np), wt).tanh().sum() + (wt64 * wt64).sum()).backward()
        assert w.grad is not None and not w.grad.numpy().flags.c_contiguous
        opt.step()
        opt_t.step()
    np.testing.assert_allclose(w.detach().numpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w64.detach().numpy(), wt64.detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("dampening", [0.0, 0.25, 0.999])  # 1 - 0.999 rounds apart in float32
def test_fused_sgd_momentum_step_is_pytorchs_arithmetic_bitwise(dtype: Any, dampening: float) -> None:
    """The fused kernel's heavy-ball step (momentum, buffer already started, no weight decay, nesterov or
    maximize) gives what PyTorch's own tensor operations give, bit for bit:
    ``buf.mul_(momentum).add_(g, alpha=1 - dampening)``, ``p.add_(buf, alpha=-lr)`` (odd length: the
    vectorised loops' tails too)."""
    from tensorplay.optim import _numba_kernels as kernels

    gen = np.random.default_rng(5)
    p, g, buf = (gen.standard_normal(1001).astype(dtype) for _ in range(3))
    tp_, tg, tbuf = (torch.tensor(a.copy()) for a in (p, g, buf))
    tbuf.mul_(0.9).add_(tg, alpha=1 - dampening)
    tp_.add_(tbuf, alpha=-0.05)
    kernels.sgd_update(p, g, buf, dtype(0.05), dtype(0.9), dtype(1 - dampening), dtype(0), False, False, False, True)
    np.testing.assert_array_equal(buf, tbuf.numpy())
    np.testing.assert_array_equal(p, tp_.numpy())


def _layout(a: np.ndarray[Any, Any], kind: str) -> np.ndarray[Any, Any]:
    """``a``'s values as a row-major, column-major or strided (every other column of a wider array) array."""
    if kind == "strided":
        wide = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
        wide[:, ::2] = a
        return wide[:, ::2]
    return np.asarray(a, order=kind).copy(order=kind)  # type: ignore[call-overload]


@pytest.mark.parametrize("kind", ["sgd", "adam", "adamw-amsgrad"])
@pytest.mark.parametrize("param_layout", ["C", "F", "strided"])
@pytest.mark.parametrize("grad_layout", ["C", "F", "strided"])
def test_every_layout_gets_the_same_bits(kind: str, param_layout: str, grad_layout: str) -> None:
    """A parameter and gradient in any layout (column-major weights, the attention's packed
    ``in_proj_weight`` whose gradient arrives row-major, strided views) are updated by the one fused
    kernel: the same bits as row-major arrays, the gradient left as it was, the parameter updated in place."""
    rng = np.random.default_rng(6)
    w_np = rng.standard_normal((6, 5)).astype(np.float32)
    grads = [rng.standard_normal((6, 5)).astype(np.float32) * np.float32(10.0 ** -i) for i in range(3)]
    make = {"sgd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
            "adam": lambda ps: optim.Adam(ps, lr=0.05),
            "adamw-amsgrad": lambda ps: optim.AdamW(ps, lr=0.05, amsgrad=True)}[kind]
    results = []
    for p_layout, g_layout in ((param_layout, grad_layout), ("C", "C")):
        w = nn.Parameter(w_np)
        w._data = _layout(w_np, p_layout)
        data = w._data
        opt = make([w])
        for g_np in grads:
            grad = _layout(g_np, g_layout)
            w.grad = tp.tensor(grad)
            w.grad._data = grad
            opt.step()
            np.testing.assert_array_equal(grad, g_np)
        assert w._data is data  # updated in place
        results.append(np.array(data))
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_adam_takes_one_minus_beta_exactly_like_pytorch(cls: str) -> None:
    """``1 - beta2`` taken in float32 (``1 - 0.999f``) is 1.3e-5 off ``0.001f`` (cancellation): the second
    moment after one step must be PyTorch's bit for bit (``(c2 g) g`` from zero, no rounding to differ)."""
    rng = np.random.default_rng(8)
    w0 = rng.standard_normal((7, 5)).astype(np.float32)
    g = rng.standard_normal((7, 5)).astype(np.float32)
    w, wt = nn.Parameter(w0.copy()), torch.nn.Parameter(torch.tensor(w0))
    opt, opt_t = getattr(optim, cls)([w], lr=1e-3), getattr(torch.optim, cls)([wt], lr=1e-3)
    w.grad, wt.grad = tp.tensor(g.copy()), torch.tensor(g.copy())
    opt.step()
    opt_t.step()
    ours = opt.state.get_state(w)["exp_avg_sq"]
    theirs = opt_t.state[wt]["exp_avg_sq"].numpy()
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(opt.state.get_state(w)["exp_avg"], opt_t.state[wt]["exp_avg"].numpy())
    np.testing.assert_allclose(w.detach().numpy(), wt.detach().numpy(), rtol=2e-7, atol=0)


SGD_CONFIGS = [{}, {"momentum": 0.9}, {"momentum": 0.9, "dampening": 0.1}, {"momentum": 0.9, "nesterov": True},
               {"momentum": 0.9, "weight_decay": 0.01}, {"weight_decay": 0.1}, {"momentum": 0.9, "maximize": True}]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("config", SGD_CONFIGS, ids=[",".join(c) or "plain" for c in SGD_CONFIGS])
def test_sgd_is_pytorchs_bit_for_bit(dtype: Any, config: dict[str, Any]) -> None:
    """Ten steps on gradients of scales 1e-6 to 10, an odd number of elements (the vectorised loops'
    tails): the parameters and momentum buffers are PyTorch's, bit for bit (its CPU kernels round
    ``add(x, alpha=a)`` once, as an FMA, and so do ours)."""
    rng = np.random.default_rng(9)
    w0 = rng.standard_normal((33, 17)).astype(dtype)
    w, wt = nn.Parameter(w0.copy()), torch.nn.Parameter(torch.tensor(w0))
    opt, opt_t = optim.SGD([w], lr=0.01, **config), torch.optim.SGD([wt], lr=0.01, **config)
    for _ in range(10):
        g = rng.standard_normal((33, 17)).astype(dtype) * dtype(10.0 ** rng.integers(-6, 2))
        w.grad, wt.grad = tp.tensor(g.copy()), torch.tensor(g.copy())
        opt.step()
        opt_t.step()
    np.testing.assert_array_equal(w.detach().numpy(), wt.detach().numpy())
    if "momentum" in config:
        np.testing.assert_array_equal(opt.state.get_state(w)["momentum_buffer"],
                                      opt_t.state[wt]["momentum_buffer"].numpy())
