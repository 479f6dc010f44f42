"""Factories take PyTorch's ``device=`` (the CPU a no-op, other devices a DeviceError) and the random ones a
``generator=``, eagerly, under tp.compile and under export with a dynamic dim."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.errors import DeviceError
from tensorplay.export import Dim

FACTORIES: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    # name: (tensorplay call, the same call in torch), each given device=
    "tensor": (lambda d: tp.tensor([[1, 2], [3, 4]], device=d), lambda d: torch.tensor([[1, 2], [3, 4]], device=d)),
    "tensor_float": (lambda d: tp.tensor([1.5, -2.0], dtype=tp.float64, device=d),
                     lambda d: torch.tensor([1.5, -2.0], dtype=torch.float64, device=d)),
    "zeros": (lambda d: tp.zeros(2, 3, device=d), lambda d: torch.zeros(2, 3, device=d)),
    "ones": (lambda d: tp.ones((2, 3), dtype=tp.bool, device=d), lambda d: torch.ones((2, 3), dtype=torch.bool, device=d)),
    "empty": (lambda d: tp.empty(0, 3, device=d), lambda d: torch.empty(0, 3, device=d)),
    "full": (lambda d: tp.full((2, 2), 7, device=d), lambda d: torch.full((2, 2), 7, device=d)),
    "eye": (lambda d: tp.eye(3, 2, device=d), lambda d: torch.eye(3, 2, device=d)),
    "arange": (lambda d: tp.arange(5, device=d), lambda d: torch.arange(5, device=d)),
    "arange3": (lambda d: tp.arange(1, 2, 0.25, device=d), lambda d: torch.arange(1, 2, 0.25, device=d)),
    "linspace": (lambda d: tp.linspace(0, 1, 5, device=d), lambda d: torch.linspace(0, 1, 5, device=d)),
    "zeros_like": (lambda d: tp.zeros_like(tp.ones(2, dtype=tp.int64), device=d),
                   lambda d: torch.zeros_like(torch.ones(2, dtype=torch.int64), device=d)),
    "ones_like": (lambda d: tp.ones_like(tp.zeros(2), device=d), lambda d: torch.ones_like(torch.zeros(2), device=d)),
    "full_like": (lambda d: tp.full_like(tp.zeros(3), 2.5, device=d), lambda d: torch.full_like(torch.zeros(3), 2.5, device=d)),
    "empty_like": (lambda d: tp.empty_like(tp.zeros(2, 0), device=d), lambda d: torch.empty_like(torch.zeros(2, 0), device=d)),
}
RANDOM: dict[str, Callable[..., Any]] = {
    "randn": lambda d: tp.randn(2, 3, device=d),
    "rand": lambda d: tp.rand(4, device=d),
    "randint": lambda d: tp.randint(0, 5, (3,), device=d),
    "randn_like": lambda d: tp.randn_like(tp.zeros(2), device=d),
    "rand_like": lambda d: tp.rand_like(tp.zeros(2), device=d),
}
CPU_DEVICES = [None, "cpu", "cpu:0", tp.device("cpu"), tp.device("cpu", 0)]


@pytest.mark.parametrize("device", CPU_DEVICES, ids=repr)
@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_a_cpu_device_is_a_no_op(name: str, device: Any) -> None:
    ours, theirs = FACTORIES[name]
    want = theirs(None if device is None else str(device)).numpy()
    got = ours(device)
    assert got.device == tp.device("cpu")
    assert got.dtype.name == str(want.dtype) and tuple(got.shape) == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("device", CPU_DEVICES, ids=repr)
@pytest.mark.parametrize("name", sorted(RANDOM))
def test_random_factories_take_a_cpu_device(name: str, device: Any) -> None:
    tp.manual_seed(3)
    want = RANDOM[name](None).numpy()
    tp.manual_seed(3)
    np.testing.assert_array_equal(RANDOM[name](device).numpy(), want)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "mps", tp.device] , ids=str)
@pytest.mark.parametrize("name", sorted(FACTORIES) + sorted(RANDOM))
def test_another_device_is_the_error_to_gives(name: str, device: Any) -> None:
    call = FACTORIES[name][0] if name in FACTORIES else RANDOM[name]
    if device is tp.device:  # not a device at all
        with pytest.raises(DeviceError, match=f"{name.split('_float')[0].rstrip('3')}: device: expected a device"):
            call(3)
        return
    with pytest.raises(DeviceError) as caught:
        call(device)
    with pytest.raises(DeviceError) as to_error:
        tp.zeros(1).to(device)
    message = str(caught.value)
    assert message.startswith(name.split("_float")[0].rstrip("3") + ": ")
    assert message.split(": ", 1)[1] == str(to_error.value).split(": ", 1)[1]  # the same words as .to()
    assert "CPU only" in message


def test_device_of_an_input_inside_compile_and_export() -> None:
    def f(idx: Any) -> Any:
        T = idx.shape[1]
        mask = tp.triu(tp.ones(T, T, dtype=tp.bool, device=idx.device), 1)
        pos = tp.arange(T, device=idx.device) + tp.zeros(T, dtype=tp.int64, device=idx.device)
        return idx * mask.sum(dim=0) + pos + tp.full((T,), 1, device=idx.device) + tp.eye(T, device=idx.device).sum(0)

    def want(idx: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(idx)
        T = t.shape[1]
        return (t * torch.triu(torch.ones(T, T, dtype=torch.bool), 1).sum(0) + torch.arange(T) + 1 + 1).numpy()

    x = np.arange(12, dtype=np.int64).reshape(2, 6)
    np.testing.assert_array_equal(f(tp.tensor(x)).numpy(), want(x))
    compiled = tp.compile(f, dynamic=True)
    for t in (1, 6, 9):
        xi = np.arange(2 * t, dtype=np.int64).reshape(2, t)
        np.testing.assert_allclose(compiled(tp.tensor(xi)).numpy(), want(xi))
    ep = tp.export.export(f, (tp.tensor(x),), dynamic_shapes={"idx": {1: Dim("seq", min=1, max=64)}})
    for t in (1, 5, 64):
        xi = np.arange(2 * t, dtype=np.int64).reshape(2, t)
        np.testing.assert_allclose(ep.module()(tp.tensor(xi)).numpy(), want(xi))


@pytest.mark.parametrize("name", ["randn", "rand", "randint"])
def test_random_factories_take_a_generator(name: str) -> None:
    call: dict[str, Callable[[tp.Generator | None], Any]] = {
        "randn": lambda g: tp.randn(3, 4, generator=g),
        "rand": lambda g: tp.rand(5, generator=g, dtype=tp.float64),
        "randint": lambda g: tp.randint(-3, 9, (4, 2), generator=g),
    }
    make = call[name]
    first = make(tp.Generator().manual_seed(5)).numpy()
    tp.manual_seed(0)
    state = tp.random_state.get_state()
    again = make(tp.Generator().manual_seed(5)).numpy()
    assert tp.random_state.get_state() == state  # the global stream is untouched
    np.testing.assert_array_equal(first, again)
    gen = tp.Generator().manual_seed(5)
    make(gen)
    assert not np.array_equal(make(gen).numpy(), first)  # the generator advanced
    if name == "randint":
        assert first.dtype == np.int64 and first.min() >= -3 and first.max() < 9


def test_a_generator_inside_compile_is_refused() -> None:
    gen = tp.Generator().manual_seed(0)
    compiled = tp.compile(lambda x: x + tp.randn(3, generator=gen))
    with pytest.raises(tp.GraphCaptureError, match="generator"):
        compiled(tp.zeros(3))
