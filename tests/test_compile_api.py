"""tp.compile's entry point: argument validation (in the documented order), decorator forms, modules and
bound methods, config, the backend registry and contract, and reset."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.compiler import (
    BackendError, CompileConfigError, CompileTypeError, CompiledFunction, CompiledModule, config, list_backends,
    lookup_backend, register_backend,
)
from tensorplay.compiler import backends as backend_registry


def f(x: Any) -> Any:
    return (x * 2.0 + 1.0).relu()


# ---- validation -------------------------------------------------------------------------------------

def test_validation_errors_in_the_documented_order() -> None:
    everything_wrong: dict[str, Any] = dict(dynamic=True, dynamic_shapes="yes", mode="default", options=[1],
                                            recompile_limit=0)
    with pytest.raises(CompileConfigError, match="either dynamic= or dynamic_shapes="):
        tp.compile(3, **everything_wrong)
    everything_wrong.pop("dynamic")
    with pytest.raises(CompileTypeError, match="dynamic_shapes is an alias of dynamic"):
        tp.compile(3, **everything_wrong)
    everything_wrong.pop("dynamic_shapes")
    with pytest.raises(CompileConfigError, match="either mode= or options="):
        tp.compile(3, **everything_wrong)
    everything_wrong.pop("mode")
    with pytest.raises(CompileTypeError, match="options must be a dict"):
        tp.compile(3, **everything_wrong)
    everything_wrong.pop("options")
    with config.patch(recompile_limit=0):
        with pytest.raises(CompileConfigError, match=r"config\.recompile_limit must be an int >= 1, got 0"):
            tp.compile(3, **everything_wrong)
    with pytest.raises(CompileTypeError, match="not callable"):
        tp.compile(3, **everything_wrong)
    with pytest.raises(CompileConfigError, match="recompile_limit must be at least 1, got 0"):
        tp.compile(f, **everything_wrong)


def test_each_config_setting_is_checked_when_compile_is_called() -> None:
    for name, bad in [("dynamic_shapes", "no"), ("assume_static_by_default", 1), ("accumulated_recompile_limit", 0),
                      ("verbose", None), ("fail_on_recompile_limit_hit", "x"), ("force_disable_caches", 2),
                      ("cache_dir", 3)]:
        with config.patch(**{name: bad}):
            with pytest.raises(CompileConfigError, match=name):
                tp.compile(f)
    with pytest.raises(AttributeError, match="no setting 'recompile_limt'"):
        config.recompile_limt = 3  # type: ignore[attr-defined]


def test_other_argument_errors() -> None:
    with pytest.raises(CompileConfigError, match="unknown mode 'fastest'"):
        tp.compile(f, mode="fastest")
    with pytest.raises(CompileTypeError, match="dynamic must be None, True or False"):
        tp.compile(f, dynamic="yes")  # type: ignore[call-overload]
    with pytest.raises(CompileTypeError, match="fullgraph must be True or False"):
        tp.compile(f, fullgraph=1)  # type: ignore[call-overload]
    with pytest.raises(BackendError, match="unknown backend 'inductor'; the backends are eager, numba"):
        tp.compile(f, backend="inductor")


def test_dynamic_shapes_is_an_alias_of_dynamic() -> None:
    compiled = tp.compile(f, dynamic_shapes=True)
    assert isinstance(compiled, CompiledFunction)
    for n in (3, 5, 1):
        compiled(tp.randn(n, 2))
    assert compiled.compile_count == 1


# ---- forms --------------------------------------------------------------------------------------------

def test_disable_returns_the_model_itself() -> None:
    assert tp.compile(f, disable=True) is f
    model = nn.Linear(2, 3)
    assert tp.compile(model, disable=True) is model
    assert tp.compile(disable=True)(f) is f


def test_decorator_forms_functions_methods_and_modules() -> None:
    @tp.compile
    def g(x: Any) -> Any:
        return x.exp().sum()

    @tp.compile(backend="eager", name="h_compiled")
    def h(x: Any) -> Any:
        return x.sin()

    x = tp.randn(4, 3)
    np.testing.assert_allclose(g(x).numpy(), x.exp().sum().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(h(x).numpy(), x.sin().numpy())
    assert h.__name__ == "h_compiled" and isinstance(g, CompiledFunction)

    class Scaler:
        def __init__(self) -> None:
            self.scale = tp.tensor(3.0)

        def apply(self, x: Any) -> Any:
            return x * self.scale

    s = Scaler()
    bound = tp.compile(s.apply)
    np.testing.assert_allclose(bound(x).numpy(), (x * 3.0).numpy())
    s.scale = tp.tensor(4.0)  # rebinding the attribute is seen
    np.testing.assert_allclose(bound(x).numpy(), (x * 4.0).numpy())

    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    compiled = tp.compile(model)
    assert isinstance(compiled, CompiledModule) and compiled._orig_mod is model
    with tp.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert list(compiled.parameters()) == list(model.parameters())  # attributes are the module's
    assert compiled.training and not compiled.eval().training


# ---- backends -----------------------------------------------------------------------------------------

@pytest.fixture
def custom_backend() -> Iterator[list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []

    def recording_backend(graph_module: Any, example_inputs: Any, **kwargs: Any) -> Any:
        calls.append({"graph": graph_module.graph, "examples": list(example_inputs), "kwargs": kwargs})
        return lookup_backend("eager")(graph_module, example_inputs, **kwargs)

    register_backend("recording", recording_backend)
    yield calls
    backend_registry._REGISTERED.pop("recording", None)


def test_backend_contract(custom_backend: list[dict[str, Any]]) -> None:
    assert "recording" in list_backends() and {"eager", "numba"} <= set(list_backends())
    w = tp.randn(3, 2)

    def g(x: Any, y: Any) -> Any:
        return (x @ w) * y

    x, y = tp.randn(4, 3), tp.randn(4, 2)
    compiled = tp.compile(g, backend="recording", mode="max-autotune", dynamic=False, strict_native=True,
                          name="g1")
    np.testing.assert_array_equal(compiled(x, y).numpy(), g(x, y).numpy())
    (call,) = custom_backend
    assert call["kwargs"] == {"name": "g1", "mode": "max-autotune", "dynamic": False, "strict_native": True}
    graph = call["graph"]
    assert [p.kind for p in graph.placeholders] == ["user_input", "user_input", "captured"]
    for p, example in zip(graph.placeholders, call["examples"]):  # example inputs in placeholder order
        assert example.shape == tuple(p.shape) and example.dtype == p.dtype
    np.testing.assert_array_equal(call["examples"][2], w.numpy())
    tp.compile(g, backend="recording", options={"fastmath": True})(x, y)
    assert custom_backend[-1]["kwargs"] == {"name": "g", "options": {"fastmath": True}}


def test_backend_errors_are_errors() -> None:
    def returns_nothing(gm: Any, examples: Any, **kwargs: Any) -> Any:
        return 42

    def broken(gm: Any, examples: Any, **kwargs: Any) -> Any:
        raise RuntimeError("backend exploded")

    with pytest.raises(BackendError, match="returned a int, not a callable"):
        tp.compile(f, backend=returns_nothing)(tp.randn(2))
    with pytest.raises(RuntimeError, match="backend exploded"):  # never a silent fall back
        tp.compile(f, backend=broken)(tp.randn(2))
    with pytest.raises(BackendError, match="already registered"):
        register_backend("dup", returns_nothing)
        register_backend("dup", broken)
    backend_registry._REGISTERED.pop("dup", None)
    with pytest.raises(BackendError, match="built-in backend"):
        register_backend("numba", broken)
    with pytest.raises(BackendError, match="must be callable"):
        register_backend("x", 3)  # type: ignore[arg-type]
    with pytest.raises(BackendError, match="unknown option"):
        tp.compile(f, options={"fusoin": False})(tp.randn(2))


def test_register_backend_as_decorator() -> None:
    @register_backend
    def my_backend(gm: Any, examples: Any, **kwargs: Any) -> Any:
        return lookup_backend("eager")(gm, examples)

    try:
        assert lookup_backend("my_backend") is my_backend
        x = tp.randn(3)
        np.testing.assert_array_equal(tp.compile(f, backend="my_backend")(x).numpy(), f(x).numpy())
    finally:
        backend_registry._REGISTERED.pop("my_backend", None)


def test_the_numba_backend_refuses_to_fall_back_with_strict_native() -> None:
    def g(x: Any, m: Any, v: Any, w: Any, b: Any) -> Any:
        return tp.eager.batch_norm(x, m, v, w, b, eps=1e-5)  # decomposed into pointwise ops by a pass

    args = [tp.randn(4, 3), tp.randn(3), tp.rand(3) + 0.5, tp.randn(3), tp.randn(3)]
    got = tp.compile(g, strict_native=True)(*args)
    np.testing.assert_allclose(got.numpy(), g(*args).numpy(), rtol=1e-5, atol=1e-6)


def test_reset_forgets_specializations_but_not_the_accumulated_count() -> None:
    compiled = tp.compile(f)
    x = tp.randn(2, 2)
    compiled(x)
    compiled(x)
    assert compiled.compile_count == 1
    tp.compiler.reset()
    assert compiled.specializations == []
    compiled(x)
    assert compiled.compile_count == 2
