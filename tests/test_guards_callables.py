"""Cached traces (``tp.compile`` and the cached transforms) guard the callables the function reaches, not only
its tensors and Python values: rebinding a helper function (a global, a closure cell, an object's attribute, a
dict entry), swapping a method on a class, swapping a submodule or a global model, a method's own globals, and
a function's default arguments (``__defaults__``, ``__kwdefaults__``) all retrace, and the next call agrees with
the Python run afresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.func as T
from tensorplay.func.cache import set_caching

nn = tp.nn
Scenario = tuple[Callable[[Any], Any], Callable[[], None]]


def _times(k: float) -> Callable[[Any], Any]:
    return lambda a: a * k


def helper(a: Any) -> Any:
    return a * 2.0


SCALE = 2.0


class Holder:
    def __init__(self) -> None:
        self.fn = _times(2.0)


class Activation:
    def act(self, a: Any) -> Any:
        return a * 2.0

    def scaled(self, a: Any) -> Any:
        return a * SCALE


def _global_helper() -> Scenario:
    def f(a: Any) -> Any:
        return helper(a).sin()

    def change() -> None:
        globals()["helper"] = _times(10.0)
    return f, change


def _closure_cell() -> Scenario:
    fn = _times(2.0)

    def f(a: Any) -> Any:
        return fn(a).sin()

    def change() -> None:
        nonlocal fn
        fn = _times(10.0)
    return f, change


def _object_attribute() -> Scenario:
    holder = Holder()

    def f(a: Any) -> Any:
        return holder.fn(a).sin()

    def change() -> None:
        holder.fn = _times(10.0)
    return f, change


def _dict_entry() -> Scenario:
    table = {"act": _times(2.0)}

    def f(a: Any) -> Any:
        return table["act"](a).sin()

    def change() -> None:
        table["act"] = _times(10.0)
    return f, change


def _class_method() -> Scenario:
    cls = type("Local", (Activation,), {"act": Activation.act})  # replaced below, not added
    obj = cls()

    def f(a: Any) -> Any:
        return obj.act(a).sin()

    def change() -> None:
        cls.act = lambda self, a: a * 10.0  # type: ignore[attr-defined]
    return f, change


def _method_global() -> Scenario:
    obj = Activation()

    def f(a: Any) -> Any:
        return obj.scaled(a).sin()

    def change() -> None:
        globals()["SCALE"] = 10.0
    return f, change


def _library_function() -> Scenario:
    act = tp.sin

    def f(a: Any) -> Any:
        return act(a * 2.0)

    def change() -> None:
        nonlocal act
        act = tp.cos
    return f, change


def _submodule() -> Scenario:
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3))

    def f(a: Any) -> Any:
        return model(a)

    def change() -> None:
        model[1] = nn.Sigmoid()
    return f, change


def _module_attribute() -> Scenario:
    tp.manual_seed(1)

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.act = nn.Tanh()

        def forward(self, a: Any) -> Any:
            return self.act(self.lin(a))

    block = Block()

    def f(a: Any) -> Any:
        return block(a)

    def change() -> None:
        block.act = nn.Sigmoid()
    return f, change


def _module_helper_method() -> Scenario:
    tp.manual_seed(3)

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def scale(self, a: Any) -> Any:  # a method besides forward, reading a global
            return a * SCALE

        def forward(self, a: Any) -> Any:
            return self.scale(self.lin(a)).tanh()

    model = Scaled()

    def f(a: Any) -> Any:
        return model(a)

    def change() -> None:
        globals()["SCALE"] = 10.0
    return f, change


def _model_rebound() -> Scenario:
    tp.manual_seed(2)
    models = {"now": nn.Sequential(nn.Linear(3, 3), nn.Tanh())}
    other = nn.Sequential(nn.Linear(3, 3), nn.Sigmoid())
    other.load_state_dict(models["now"].state_dict())  # the same tensors' values: only the code differs

    def f(a: Any) -> Any:
        return models["now"](a)

    def change() -> None:
        models["now"] = other
    return f, change


def _defaults() -> Scenario:
    def f(a: Any, k: float = 2.0) -> Any:
        return (a * k).sin()

    def change() -> None:
        f.__defaults__ = (10.0,)
    return f, change


def _keyword_defaults() -> Scenario:
    def f(a: Any, *, k: float = 2.0) -> Any:
        return (a * k).sin()

    def change() -> None:
        f.__kwdefaults__ = {"k": 10.0}
    return f, change


SCENARIOS = {f.__name__.strip("_"): f for f in (
    _global_helper, _closure_cell, _object_attribute, _dict_entry, _class_method, _method_global, _library_function,
    _submodule, _module_attribute, _module_helper_method, _model_rebound, _defaults, _keyword_defaults)}


def _ways(f: Callable[[Any], Any]) -> dict[str, tuple[Callable[..., Any], Callable[..., Any]]]:
    """Each cached way of running ``f`` and the same computation run afresh (uncached)."""
    def total(a: Any) -> Any:
        return f(a).sum()

    def uncached(transform: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            previous = set_caching(False)
            try:
                return transform(*args)
            finally:
                set_caching(previous)
        return run

    return {"compile": (tp.compile(f), f), "grad": (T.grad(total), uncached(T.grad(total))),
            "vmap": (T.vmap(f), uncached(T.vmap(f)))}


@pytest.mark.parametrize("way", ["compile", "grad", "vmap"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_changed_callable_retraces(name: str, way: str) -> None:
    saved = {"helper": helper, "SCALE": SCALE}
    try:
        f, change = SCENARIOS[name]()
        cached, fresh = _ways(f)[way]
        x = tp.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
        before = [cached(x).detach().numpy() for _ in range(3)]  # traced, then from the cache
        for got in before:
            np.testing.assert_allclose(got, fresh(x).detach().numpy(), rtol=1e-12)
        change()
        want = fresh(x).detach().numpy()
        assert not np.allclose(want, before[0]), "the change must change the result"
        for _ in range(2):
            np.testing.assert_allclose(cached(x).detach().numpy(), want, rtol=1e-12)
        assert cached.recompile_reasons, "the change was seen as a reason to retrace"
    finally:
        globals().update(saved)
