"""Tensor hooks, retain_grad, post-accumulate hooks and inference_mode, each compared with PyTorch.

Every test runs one program twice, through ``tp`` and through ``torch`` (the same method names), and
compares what the hooks saw and the gradients that came out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.errors import AutogradError, GraphCaptureError

X = [0.5, -1.25, 2.0]
W = [1.5, 0.25, -0.75]


def _np(t: Any) -> Any:
    if t is None:
        return None
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t._data)


def _both(program: Callable[[Any], Any]) -> None:
    """Run ``program(lib)`` for tp and torch; it returns a list of tensors/None/bools/floats to compare."""
    ours, theirs = program(tp), program(torch)
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if isinstance(b, (bool, str)) or b is None:
            assert a == b, (i, a, b)
        else:
            np.testing.assert_allclose(_np(a), _np(b), rtol=1e-6, atol=1e-7, err_msg=f"item {i}")


def _leaf(lib: Any, values: list[float] = X) -> Any:
    return lib.tensor(values, dtype=lib.float64, requires_grad=True)


def test_scaling_hook_on_a_non_leaf_changes_what_flows_on() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        h = x.sin() * 2
        h.register_hook(lambda g: g * 3)
        (h * h).sum().backward()
        return [x.grad, h.grad]  # h.grad: None (no retain_grad)
    _both(program)


def test_replacing_and_observing_hooks_on_a_leaf() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        seen: list[Any] = []
        x.register_hook(lambda g: seen.append(g.clone()))  # returns None: observes only
        x.register_hook(lambda g: lib.ones_like(g) * 7)     # replaces
        x.register_hook(lambda g: seen.append(g.clone()))   # sees the replacement
        (x.exp() * x).sum().backward()
        return [seen[0], seen[1], x.grad]
    _both(program)


def test_hooks_run_in_registration_order_and_chain() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        h = x * x
        order: list[str] = []

        def first(g: Any) -> Any:
            order.append("first")
            return g + 1

        def second(g: Any) -> Any:
            order.append("second")
            return g * 10
        h.register_hook(first)
        h.register_hook(second)
        h.sum().backward()
        return ["".join(order), x.grad]
    _both(program)


def test_removed_hooks_no_longer_run() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        h = x * 3
        calls: list[int] = []
        keep = h.register_hook(lambda g: calls.append(1))
        gone = h.register_hook(lambda g: g * 100)
        gone.remove()
        gone.remove()  # a second remove does nothing
        leaf_gone = x.register_hook(lambda g: g * 5)
        leaf_gone.remove()
        with x.register_hook(lambda g: g * 2):  # a handle is a context manager: removed on exit
            pass
        h.sum().backward()
        keep.remove()
        return [x.grad, len(calls) == 1]
    _both(program)


def test_retain_grad_on_an_intermediate_used_twice() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        h = x * 2
        other = x + 1  # not retained
        h.retain_grad()
        y = (h * h).sum() + (h.sin() * other).sum()
        y.backward()
        return [h.grad, x.grad, other.grad, h.retains_grad, other.retains_grad, x.retains_grad, h.is_leaf]
    _both(program)


def test_retain_grad_on_a_leaf_is_a_no_op() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        x.retain_grad()
        (x * x).sum().backward()
        return [x.grad, x.retains_grad]
    _both(program)


def test_retain_grad_sees_the_gradient_after_the_hooks_in_either_order() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        a, b = x * 2, x * 4
        a.retain_grad()
        a.register_hook(lambda g: g * 10)
        b.register_hook(lambda g: g * 10)
        b.retain_grad()
        (a * 3 + b * b).sum().backward()
        return [a.grad, b.grad, x.grad]
    _both(program)


def test_a_leaf_hook_runs_once_with_the_summed_gradient() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        seen: list[Any] = []
        x.register_hook(lambda g: seen.append(g.clone()))
        (x * 2 + x * 3 + x.sin()).sum().backward()
        return [len(seen) == 1, seen[0], x.grad]
    _both(program)


def test_hooks_and_retained_grads_over_two_backward_calls() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        x.register_hook(lambda g: g * 2)
        h = x.exp()
        h.retain_grad()
        h.register_hook(lambda g: g + 1)
        y = (h * x).sum()
        y.backward(retain_graph=True)
        first = [x.grad.clone(), h.grad.clone()]
        y.backward()
        return first + [x.grad, h.grad]
    _both(program)


def test_hook_on_the_output_and_on_a_leaf_given_to_backward() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        y = (x * x).sum()
        y.register_hook(lambda g: g * 4)
        y.backward()
        z = _leaf(lib)
        z.register_hook(lambda g: g * 3)
        z.backward(lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64))
        return [x.grad, z.grad]
    _both(program)


def test_post_accumulate_grad_hooks() -> None:
    def program(lib: Any) -> list[Any]:
        w = _leaf(lib, W)
        x = _leaf(lib)
        seen: list[Any] = []
        w.register_hook(lambda g: g * 2)
        w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
        handle = x.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.clone()))
        (w * x).sum().backward()
        handle.remove()
        (w * x * x).sum().backward()
        lib.autograd.grad((w * x).sum(), w)  # no accumulation: no post-accumulate hook
        return [len(seen) == 3] + seen
    _both(program)


def test_hooks_with_create_graph_double_backward() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        x.register_hook(lambda g: g * 2)
        h = x * x
        h.register_hook(lambda g: g * 3)
        y = (h * x).sum()
        (g,) = lib.autograd.grad(y, x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x)
        z = _leaf(lib)
        q = z.sin()
        q.register_hook(lambda g: g * q)  # the hook's result is differentiated through
        (q * q).sum().backward(create_graph=True)
        first = z.grad.clone()
        z.grad.sum().backward()
        return [g, gg, first, z.grad]
    _both(program)


def test_autograd_grad_runs_the_hooks_on_the_paths_it_needs() -> None:
    def program(lib: Any) -> list[Any]:
        x, w = _leaf(lib), _leaf(lib, W)
        x.register_hook(lambda g: g * 2)
        a = x * 2
        b = w * 3
        a.retain_grad()
        b.retain_grad()
        b_calls: list[int] = []
        b.register_hook(lambda g: b_calls.append(1))  # b leads to w only: not needed for d/dx
        a.register_hook(lambda g: g * 10)
        y = (a * b).sum()
        gx, ga = lib.autograd.grad(y, [x, a], retain_graph=True)
        found = [gx, ga, a.grad, b.grad, len(b_calls) == 0, x.grad]
        (gw,) = lib.autograd.grad(y, w)
        return found + [gw, len(b_calls) == 1, b.grad]
    _both(program)


def test_in_place_update_after_hooks() -> None:
    def program(lib: Any) -> list[Any]:
        x = _leaf(lib)
        h = x * 2
        h.retain_grad()  # follows h to its new value
        seen: list[Any] = []
        h.register_hook(lambda g: seen.append(g.clone()))  # stays with the old value
        h.mul_(5)
        (h * h).sum().backward()
        return [h.grad, seen[0], x.grad, h.retains_grad]
    _both(program)


@pytest.mark.parametrize("decorator", ["no_grad", "no_grad()", "inference_mode", "inference_mode()"])
def test_grad_mode_decorators(decorator: str) -> None:
    def program(lib: Any) -> list[Any]:
        name, call = decorator.rstrip("()"), decorator.endswith("()")
        factory = getattr(lib, name)
        deco = factory() if call else factory

        def f(x: Any) -> Any:
            """doc"""
            return x * 2, lib.is_grad_enabled(), lib.is_inference_mode_enabled()
        wrapped = deco(f)
        out, grad_on, inference_on = wrapped(_leaf(lib))
        return [out, out.requires_grad, grad_on, inference_on, wrapped.__name__, wrapped.__doc__,
                lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
    _both(program)


def test_inference_mode_nesting() -> None:
    def program(lib: Any) -> list[Any]:
        states: list[Any] = []
        x = _leaf(lib)
        with lib.inference_mode():
            states += [lib.is_grad_enabled(), lib.is_inference_mode_enabled(), (x * 2).requires_grad]
            with lib.inference_mode(False):
                states += [lib.is_grad_enabled(), lib.is_inference_mode_enabled(), (x * 2).requires_grad]
            states += [lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
        with lib.no_grad():
            with lib.inference_mode(False):
                states += [lib.is_grad_enabled()]
            with lib.inference_mode():
                pass
            states += [lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
        states += [lib.is_grad_enabled(), lib.is_inference_mode_enabled()]
        return states
    _both(program)


def test_enable_grad_decorator_inside_no_grad() -> None:
    @tp.enable_grad
    def f(x: Any) -> Any:
        return x * 2
    with tp.no_grad():
        assert f(_leaf(tp)).requires_grad
    assert tp.autograd.inference_mode is tp.inference_mode


# ---- errors -------------------------------------------------------------------------------------

def _torch_message(fn: Callable[[], Any]) -> str:
    with pytest.raises(RuntimeError) as info:
        fn()
    return str(info.value)


def test_hook_on_a_tensor_without_gradient_is_refused() -> None:
    wanted = _torch_message(lambda: torch.tensor(X).register_hook(lambda g: g))  # type: ignore[no-untyped-call]
    with pytest.raises(AutogradError, match=wanted) as info:
        tp.tensor(X).register_hook(lambda g: g)
    assert isinstance(info.value, RuntimeError) and "register_hook" in str(info.value)
    _torch_message(lambda: torch.tensor(X).retain_grad())
    with pytest.raises(AutogradError, match="can't retain_grad on a tensor that has requires_grad=False"):
        tp.tensor(X).retain_grad()
    _torch_message(lambda: torch.tensor(X).register_post_accumulate_grad_hook(lambda t: None))  # type: ignore[no-untyped-call]
    with pytest.raises(AutogradError, match="doesn't require gradient"):
        tp.tensor(X).register_post_accumulate_grad_hook(lambda t: None)


def test_post_accumulate_hook_on_a_non_leaf_is_refused() -> None:
    wanted = _torch_message(lambda: (_leaf(torch) * 2).register_post_accumulate_grad_hook(lambda t: None))
    with pytest.raises(AutogradError, match=wanted):
        (_leaf(tp) * 2).register_post_accumulate_grad_hook(lambda t: None)


@pytest.mark.parametrize("bad", ["shape", "dtype", "type"])
def test_a_hook_returning_a_wrong_gradient_is_refused(bad: str) -> None:
    def make(lib: Any) -> Callable[[Any], Any]:
        return {"shape": lambda g: g.sum(), "dtype": lambda g: g.to(lib.float32), "type": lambda g: 1.0}[bad]
    for lib, error in ((torch, (RuntimeError, TypeError)), (tp, AutogradError)):
        x = _leaf(lib)
        h = x * 2
        h.register_hook(make(lib))
        with pytest.raises(error):
            h.sum().backward()
    x = _leaf(tp)
    x.register_hook(make(tp))
    with pytest.raises(AutogradError, match="hook '<lambda>'"):
        (x * 2).sum().backward()


def test_hooks_are_refused_on_recorded_tensors() -> None:
    def f(x: Any) -> Any:
        x.register_hook(lambda g: g * 2)
        return (x * x).sum()
    with pytest.raises(GraphCaptureError, match="eager tape only.*tensorplay.func.grad"):
        tp.func.grad(f)(tp.tensor(X))
    with pytest.raises(GraphCaptureError, match="eager tape only"):
        tp.graph.trace(f, tp.tensor(X))

    w = tp.tensor(W, requires_grad=True)

    def step(x: Any) -> Any:
        w.register_hook(lambda g: g * 2)  # an eager parameter inside a compiled function
        return (w * x).sum()
    with pytest.raises(GraphCaptureError, match="tp.compile"):
        tp.compile(step)(tp.tensor(X))

    def train(x: Any) -> Any:
        loss = (w * x).sum()
        loss.backward()  # reaches w, whose hook the compiled code could not run
        return loss
    w = tp.tensor(W, requires_grad=True)
    w.register_hook(lambda g: g * 2)
    with pytest.raises(GraphCaptureError, match="tensor hooks"):
        tp.compile(train)(tp.tensor(X))
    train(tp.tensor(X))  # eagerly: the hook runs
    np.testing.assert_allclose(_np(w.grad), 2 * np.array(X))

    def retain(x: Any) -> Any:
        (x * 2).retain_grad()
        return x.sum()
    with pytest.raises(GraphCaptureError, match="retain_grad"):
        tp.func.grad(retain)(tp.tensor(X))


def test_leaf_hooks_go_with_the_leaf() -> None:
    from tensorplay.interpreters.eager import hooks
    before = len(hooks._LEAVES)
    x = _leaf(tp)
    x.register_hook(lambda g: g)
    assert len(hooks._LEAVES) == before + 1
    del x
    assert len(hooks._LEAVES) == before
