"""tensorplay.testing.check_interpreters and the registry of ways of running: every built-in way agrees
with eager on functions, programs, modules and pytrees; a way that disagrees is reported with the way,
the output leaf and the assert_close report; new ways register without editing the toolkit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.func as F
from tensorplay import random_state
from tensorplay.testing import (
    NotApplicable, NotCloseError, assert_close, check_interpreters, interpreters, register_interpreter,
    unregister_interpreter,
)
from tensorplay.testing.ways import run_vmap

BUILT_IN = ["eager", "traced", "traced_execute", "graph_module", "retraced", "vmap"]  # then ways registered later


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Ways a test registers, removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        unregister_interpreter(name)


def test_built_in_ways_are_registered_first_in_order() -> None:
    assert list(interpreters())[:6] == BUILT_IN
    assert all(r.description for r in interpreters().values())


def test_a_function_with_pytree_arguments_and_outputs_runs_every_way() -> None:
    tp.manual_seed(0)

    def f(params: dict[str, Any], x: Any, scale: float) -> Any:
        h = (x @ params["w"].T + params["b"]).relu() * scale
        return {"h": h, "stats": (h.sum(), h.max(-1)), "positive": h > 0, "rows": x.shape[0]}

    params = {"w": tp.randn(4, 3), "b": tp.randn(4)}
    assert check_interpreters(f, params, tp.randn(5, 3), 0.5) == list(interpreters())  # every way ran


def test_a_program_and_a_module_run_every_way() -> None:
    @tp.program
    def affine(ops: Any, w: Any, x: Any) -> Any:
        return ops.tanh(ops.linear(w, None, x))

    assert check_interpreters(affine, tp.randn(2, 3), tp.randn(4, 3)) == list(interpreters())  # every way ran
    tp.manual_seed(1)
    model = tp.nn.Sequential(tp.nn.Conv2d(2, 3, 3, padding=1), tp.nn.ReLU(), tp.nn.Flatten(),
                             tp.nn.Linear(3 * 4 * 4, 2))
    assert check_interpreters(model, tp.randn(2, 2, 4, 4)) == list(interpreters())  # every way ran


def test_randomness_is_replayed_in_every_way_and_the_generator_ends_as_after_one_call() -> None:
    model = tp.nn.Dropout(0.5)
    x = tp.randn(4, 6)
    tp.manual_seed(7)
    check_interpreters(model, x)
    after_check = random_state.get_state()
    tp.manual_seed(7)
    model(x)
    assert random_state.get_state() == after_check


def test_buffers_must_end_as_eager_leaves_them_and_end_so() -> None:
    tp.manual_seed(2)
    bn = tp.nn.BatchNorm1d(3)
    x = tp.randn(4, 3)
    check_interpreters(bn, x, exclude=["vmap"])
    reference = tp.nn.BatchNorm1d(3)
    reference(x)
    assert_close(dict(bn.named_buffers()), dict(reference.named_buffers()))
    # vmap refuses to update the running statistics once per sample (as PyTorch refuses)
    with pytest.raises(ValueError, match="one update per sample"):
        check_interpreters(bn, x, interpreters=["vmap"], grads=False)


def test_a_way_that_forgets_a_buffer_update_is_reported(registered: list[str]) -> None:
    import copy

    def on_a_copy(fn: Any, *args: Any) -> Any:
        """runs a deep copy of the module: the module's own buffers are never updated"""
        return copy.deepcopy(fn)(*args)

    register_interpreter("on_a_copy", on_a_copy)
    registered.append("on_a_copy")
    with pytest.raises(NotCloseError, match=r"the way 'on_a_copy' leaves the module's buffers different"):
        check_interpreters(tp.nn.BatchNorm1d(3), tp.randn(4, 3), interpreters=["on_a_copy"], grads=False)


def test_a_disagreeing_way_is_named_with_the_leaf_and_the_report(registered: list[str]) -> None:
    def shifted(fn: Any, *args: Any) -> Any:
        """adds 0.5 to element [1, 2] of output 'b'"""
        out = fn(*args)
        bumped = out["b"].numpy().copy()
        bumped[1, 2] += 0.5
        return {"a": out["a"], "b": tp.tensor(bumped)}

    register_interpreter("shifted", shifted)
    registered.append("shifted")
    with pytest.raises(NotCloseError) as info:
        check_interpreters(lambda x: {"a": x + 1.0, "b": x * 2.0}, tp.ones(2, 3), interpreters=["shifted"])
    lines = str(info.value).splitlines()
    assert lines[0] == ("check_interpreters(<lambda>): <lambda> run with the way 'shifted' (adds 0.5 to element "
                        "[1, 2] of output 'b') differs from eager:")
    assert lines[1] == "values differ at leaf ['b'] (shape [2, 3], dtype float32):"
    assert lines[2].startswith("  1 of 6 elements (16.7%)")
    assert lines[3] == "  largest absolute difference: 0.5 at index (1, 2) (actual 2.5, expected 2.0)"
    assert info.value.path == "['b']" and info.value.mismatched == 1


def test_a_wrong_gradient_is_reported_as_such(registered: list[str]) -> None:
    def bad_gradients(fn: Any, *args: Any) -> Any:
        out = fn(*args)
        if str(getattr(fn, "__name__", "")).startswith("gradient of"):
            return {k: v * 1.01 for k, v in out.items()}
        return out

    register_interpreter("bad_gradients", bad_gradients, description="wrong gradients")
    registered.append("bad_gradients")
    with pytest.raises(NotCloseError) as info:
        check_interpreters(lambda w, x: (x @ w).sin(), tp.randn(3, 2), tp.randn(4, 3),
                           interpreters=["bad_gradients"])
    message = str(info.value)
    assert message.startswith("check_interpreters(<lambda>): the gradient of <lambda> (tensorplay.func.vjp) run "
                              "with the way 'bad_gradients' (wrong gradients) differs from eager:")
    assert "values differ at leaf [\"gradient w.r.t. argument 0 ('w')\"]" in message


def test_gradients_of_module_parameters_through_every_way() -> None:
    tp.manual_seed(3)
    model = tp.nn.Sequential(tp.nn.Linear(3, 4), tp.nn.Tanh(), tp.nn.Linear(4, 1))
    model[0].weight.requires_grad_(False)  # frozen: not differentiated
    assert check_interpreters(model, tp.randn(5, 3)) == list(interpreters())  # every way ran


def test_requires_grad_must_match(registered: list[str]) -> None:
    register_interpreter("detaching", lambda fn, *args: fn(*args).detach(), description="detaches")
    registered.append("detaching")
    w = tp.randn(2, requires_grad=True)
    with pytest.raises(NotCloseError, match="requires_grad differs: False, eager gives True"):
        check_interpreters(lambda x: x * w, tp.randn(2), interpreters=["detaching"])


def test_outputs_must_belong_to_eager_s_interpreter(registered: list[str]) -> None:
    from tensorplay.graph import trace

    def still_recording(fn: Any, *args: Any) -> Any:
        seen = []
        trace(lambda *xs: seen.append(fn(*xs)) or seen[0], *args, execute=True)
        return seen[0]  # a value of the (closed) execute-mode recorder: it has values, but is not eager

    register_interpreter("still_recording", still_recording)
    registered.append("still_recording")
    with pytest.raises(NotCloseError, match="the interpreter differs: .*, eager gives") as info:
        check_interpreters(lambda x: x * 2.0, tp.ones(2), interpreters=["still_recording"], grads=False)
    assert info.value.kind == "interpreter"


def test_an_exception_in_a_way_gets_a_note_naming_it(registered: list[str]) -> None:
    def broken(fn: Any, *args: Any) -> Any:
        raise tp.ShapeError("no such shape")

    register_interpreter("broken", broken, description="always fails")
    registered.append("broken")
    with pytest.raises(tp.ShapeError) as info:
        check_interpreters(lambda x: x, tp.ones(1), interpreters=["broken"])
    assert any("the way 'broken': always fails" in note for note in info.value.__notes__)


def test_not_applicable_ways_are_skipped() -> None:
    assert "vmap" not in check_interpreters(lambda: tp.arange(3.0) * 2.0)
    with pytest.raises(NotApplicable, match="no tensor argument"):
        run_vmap(lambda: tp.zeros(1))


def test_the_vmap_way_compares_every_row_with_a_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    real = F.vmap

    def same_row_everywhere(fn: Any, **kw: Any) -> Any:
        def batched(*args: Any) -> Any:
            outs = real(fn, **kw)(*args)  # the way maps a function returning a list of tensors
            return [tp.stack([o[0]] * o.shape[0]) for o in outs]
        return batched

    x = tp.randn(2, 3)
    assert_close(run_vmap(lambda a: a.sum(-1), x), x.sum(-1))
    monkeypatch.setattr(F, "vmap", same_row_everywhere)
    with pytest.raises(NotCloseError, match=r"^vmap: row 1 of the batched result differs from the program run on "
                                            r"row 1 alone"):
        run_vmap(lambda a: a.sum(-1), x)


def test_registry_errors() -> None:
    with pytest.raises(ValueError, match="'eager' is already registered"):
        register_interpreter("eager", lambda fn, *args: fn(*args))
    with pytest.raises(ValueError, match="name must be a non-empty identifier-like string"):
        register_interpreter("no spaces", lambda fn, *args: fn(*args))
    with pytest.raises(TypeError, match="run must be callable"):
        register_interpreter("x", 3)  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="no way of running named 'nope'"):
        unregister_interpreter("nope")
    with pytest.raises(ValueError, match=r"unknown way\(s\) of running 'nope'; registered: eager, traced"):
        check_interpreters(lambda x: x, tp.ones(1), interpreters=["nope"])


def test_tolerances_reach_the_checks_of_the_ways() -> None:
    # matmul batched (vmap) and unbatched may differ in the last bits: default float32 tolerances
    rng = np.random.default_rng(0)
    a, b = tp.tensor(rng.standard_normal((3, 64, 64)).astype(np.float32)), tp.tensor(
        rng.standard_normal((64, 64)).astype(np.float32))
    check_interpreters(lambda x, y: x @ y, a, b, rtol=1e-5, atol=1e-5)


def test_gradients_are_compared_to_their_own_tolerances() -> None:
    from tensorplay.testing.swap import gradient_tolerances

    assert gradient_tolerances(tp.float32) == (1e-4, 1e-5)
    assert gradient_tolerances(tp.float64) == (1e-7, 1e-7)
    # bitwise outputs do not ask for bitwise gradients (the tape's fused attention kernel rounds differently)
    tp.manual_seed(0)
    mha = tp.nn.MultiheadAttention(8, 2)
    check_interpreters(mha, tp.randn(2, 5, 8), exclude=["vmap"], rtol=0.0, atol=0.0)


class _EntryPoint:
    """Stands for an installed package's entry point in the tensorplay.testing.interpreters group."""

    def __init__(self, name: str, load: Any) -> None:
        self.name, self.value, self.load = name, f"fake.module:{name}", load


def test_entry_points_register_ways_when_the_registry_is_first_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorplay.testing import registry

    def load() -> None:
        register_interpreter("from_entry_point", lambda fn, *args: fn(*args), description="registered on load")

    monkeypatch.setattr(registry, "entry_points", lambda group: [_EntryPoint("from_entry_point", load)]
                        if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setitem(registry._loaded, "entry_points", False)
    try:
        assert list(interpreters())[-1] == "from_entry_point"
        assert "from_entry_point" in check_interpreters(lambda x: x * 2.0, tp.ones(2))
    finally:
        unregister_interpreter("from_entry_point")


def test_a_broken_entry_point_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from tensorplay.testing import registry

    def load() -> None:
        raise ImportError("no module named fake")

    monkeypatch.setattr(registry, "entry_points", lambda group: [_EntryPoint("broken", load)])
    monkeypatch.setitem(registry._loaded, "entry_points", False)
    with pytest.raises(ImportError) as info:
        interpreters()
    assert any("way of running 'broken' (fake.module:broken)" in note for note in info.value.__notes__)
