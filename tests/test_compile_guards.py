"""tp.compile's guards: each kind of guard (shape, dtype, requires_grad, grad mode, scalar value, container
structure, branch outcome, Python values read from outside) recompiles with a reason in the user's
vocabulary; recompile limits; logging; dynamic shapes (compile counts over batch-size sequences, no 0/1
specialization, exact guards for branches on sizes); the fast path and in-place updates."""

from __future__ import annotations

from typing import Any, NewType

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.compiler import RecompileLimitError, config

Batch = NewType("Batch", int)
Feat = NewType("Feat", int)


def _reasons(compiled: Any) -> list[Any]:
    return [r for event in compiled.recompile_reasons for r in event.reasons]


def _kinds(compiled: Any) -> set[str]:
    return {r.kind for r in _reasons(compiled)}


def test_shape_guard_names_the_argument_and_the_annotated_dim() -> None:
    def norm(x: Tensor[Batch, Feat]) -> Tensor[Batch]:
        return (x * x).sum(-1)

    compiled = tp.compile(norm, dynamic=False)
    compiled(tp.randn(32, 4))
    compiled(tp.randn(64, 4))
    (reason,) = _reasons(compiled)
    assert reason.kind == "shape"
    assert "x: Batch was 32, now 64 (axis 0)" in reason.message
    assert "declare Batch dynamic" in reason.fix


def test_dtype_requires_grad_and_grad_mode_guards() -> None:
    def g(x: Any) -> Any:
        return (x * 3.0).sum()

    compiled = tp.compile(g)
    x = tp.randn(3)
    compiled(x)
    compiled(x.double())
    assert "dtype" in _kinds(compiled)
    assert any("x: dtype was float32, now float64" in r.message for r in _reasons(compiled))
    leaf = tp.randn(3).requires_grad_(True)
    out = compiled(leaf)
    assert "requires_grad" in _kinds(compiled) and out.requires_grad
    with tp.no_grad():
        assert not compiled(leaf).requires_grad
    assert "grad_mode" in _kinds(compiled)
    assert any("grad mode was enabled, now disabled" in r.message for r in _reasons(compiled))


def test_scalar_value_and_container_structure_guards() -> None:
    def g(xs: Any, scale: float, mode: str) -> Any:
        out = xs[0] * scale
        return out + xs[1] if mode == "add" else out

    compiled = tp.compile(g)
    a, b = tp.randn(3), tp.randn(3)
    compiled((a, b), 2.0, "add")
    np.testing.assert_allclose(compiled((a, b), 3.0, "add").numpy(), (a * 3.0 + b).numpy(), rtol=1e-6)
    assert any(r.kind == "value" and "scale was 2.0" in r.message for r in _reasons(compiled))
    np.testing.assert_allclose(compiled((a, b), 3.0, "mul").numpy(), (a * 3.0).numpy(), rtol=1e-6)
    compiled([a, b], 3.0, "mul")  # a list is another structure than a tuple
    assert "structure" in _kinds(compiled)


def test_branch_outcome_guard_reruns_the_other_branch_with_the_source_line() -> None:
    def g(x: Any) -> Any:
        if x.sum() > 0:  # the data-dependent branch
            return x * 2.0
        return x - 1.0

    compiled = tp.compile(g)
    pos, neg = tp.ones(3), -tp.ones(3)
    np.testing.assert_allclose(compiled(pos).numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(compiled(neg).numpy(), [-2.0, -2.0, -2.0])  # never the wrong branch
    (reason,) = _reasons(compiled)
    assert reason.kind == "branch" and "gave True when captured, now False" in reason.message
    assert reason.location.endswith(f"test_compile_guards.py:{g.__code__.co_firstlineno + 1} in g")
    np.testing.assert_allclose(compiled(pos).numpy(), [2.0, 2.0, 2.0])  # both branches stay cached
    assert compiled.compile_count == 2


class _Holder:
    """An object whose tensor attribute a compiled function reads (a state guard)."""

    w: Any = None


def _scale(x: Any, k: Any) -> Any:
    return x * k


def _plus_one(x: Any) -> Any:
    return x + 1.0


def _pair(xs: Any) -> Any:
    return xs[0] + xs[1]


def _branch(x: Any) -> Any:
    return x * 2.0 if x.sum() > 0 else x


def _on_size(x: Any) -> Any:
    return x.sum(0) if x.shape[0] > 4 else x.amax(0)


_HOLDER = _Holder()


def _read_state(x: Any) -> Any:
    return x * _HOLDER.w


def _leaf(*shape: int, grad: bool = False) -> Any:
    t = tp.randn(*shape).requires_grad_(True)
    if grad:
        t.grad = tp.zeros(*shape)
    return t


X = tp.randn(4, 3)
GUARD_CASES = [  # kind, function, first call, second call, tp.compile options, text the message must hold
    ("shape", _plus_one, (X,), (tp.randn(5, 3),), {"dynamic": False}, "x: axis 0: size was 4, now 5"),
    ("rank", _plus_one, (X,), (tp.randn(12),), {}, "x: rank was 2 [4, 3], now 1 [12]"),
    ("dtype", _plus_one, (X,), (X.double(),), {}, "x: dtype was float32, now float64"),
    ("requires_grad", _plus_one, (X,), (_leaf(4, 3),), {}, "x: requires_grad was False, now True"),
    ("layout", _plus_one, (X,), (tp.randn(3, 4).T,), {}, "x: layout was contiguous, now strided"),
    ("grad", _plus_one, (_leaf(4, 3),), (_leaf(4, 3, grad=True),), {}, "x: .grad was None, now set"),
    ("value", _scale, (X, 2.0), (X, 3.0), {}, "k was 2.0, now 3.0"),
    ("value", _scale, (X, 2.0), (X, X), {}, "k was 2.0, now a tensor"),
    ("structure", _scale, (X, X), (X, 2.0), {}, "k was a tensor, now 2.0"),
    ("structure", _pair, ((X, X),), ([X, X],), {}, "the arguments' structure was"),
    ("branch", _branch, (tp.ones(3),), (-tp.ones(3),), {}, "(bool) gave True when captured, now False"),
    ("size", _on_size, (tp.ones(8, 3),), (tp.ones(2, 3),), {"dynamic": True}, "> 4 was True when captured"),
]


@pytest.mark.parametrize("kind, fn, first, second, options, text", GUARD_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GUARD_CASES)])
def test_every_guard_kind_names_the_argument_and_the_fix(kind: str, fn: Any, first: tuple[Any, ...],
                                                         second: tuple[Any, ...], options: dict[str, Any],
                                                         text: str) -> None:
    compiled = tp.compile(fn, isolate_recompiles=True, **options)
    compiled(*first)
    compiled(*second)
    found = [r for r in _reasons(compiled) if r.kind == kind]
    assert found, f"no {kind} reason among {[str(r) for r in _reasons(compiled)]}"
    assert any(text in r.message for r in found), [r.message for r in found]
    assert all(r.fix for r in found), f"a {kind} reason says nothing about what to do: {found}"
    if kind in ("branch", "size"):  # the user's line that created the guard
        assert all(f"test_compile_guards.py:{fn.__code__.co_firstlineno + 1}" in r.location for r in found)


def test_grad_mode_and_state_guards_name_the_state_and_the_fix() -> None:
    compiled = tp.compile(_plus_one, isolate_recompiles=True)
    compiled(X)
    with tp.no_grad():
        compiled(X)
    (reason,) = _reasons(compiled)
    assert reason.kind == "grad_mode" and "grad mode was enabled, now disabled" in reason.message and reason.fix
    _HOLDER.w = tp.ones(3)
    compiled = tp.compile(_read_state)
    compiled(X)
    _HOLDER.w = tp.full((3,), 2.0)  # an attribute of a plain object rebound: read again, no recompile
    np.testing.assert_allclose(compiled(X).numpy(), 2.0 * X.numpy())
    assert compiled.compile_count == 1
    _HOLDER.w = tp.ones(3).double()
    compiled(X)
    (reason,) = _reasons(compiled)
    assert reason.kind == "dtype" and "_HOLDER.w: dtype was float32, now float64" in reason.message and reason.fix


def test_python_values_read_from_outside_are_guarded() -> None:
    global _SCALE
    _SCALE = 2.0

    def g(x: Any) -> Any:
        return x * _SCALE

    compiled = tp.compile(g)
    x = tp.randn(3)
    np.testing.assert_allclose(compiled(x).numpy(), (x * 2.0).numpy())
    _SCALE = 5.0
    np.testing.assert_allclose(compiled(x).numpy(), (x * 5.0).numpy())
    assert any(r.kind == "value" and "global _SCALE was 2.0, now 5.0" in r.message for r in _reasons(compiled))


_SCALE = 2.0


def test_module_training_flag_is_guarded() -> None:
    tp.manual_seed(0)
    model = tp.nn.Sequential(tp.nn.Linear(4, 4), tp.nn.Dropout(0.5))
    compiled = tp.compile(model)
    x = tp.ones(2, 4)
    with tp.no_grad():
        compiled(x)
        model.eval()
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert any("training was True, now False" in r.message for r in _reasons(compiled))


# ---- limits and logging ---------------------------------------------------------------------------------

def test_recompile_limit_compiles_uncached_then_fullgraph_raises(capsys: pytest.CaptureFixture[str]) -> None:
    def g(x: Any, k: int) -> Any:
        return x * k

    compiled = tp.compile(g, recompile_limit=2)
    x = tp.randn(3)
    for k in range(4):
        np.testing.assert_allclose(compiled(x, k).numpy(), (x * k).numpy())  # never run uncaptured
    assert len(compiled.specializations) == 2 and compiled.compile_count == 4
    assert [e.cached for e in compiled.recompile_reasons] == [True, False, False]
    strict = tp.compile(g, recompile_limit=1, fullgraph=True)
    strict(x, 1)
    with pytest.raises(RecompileLimitError, match=r"reached its recompile limit \(1 specializations\)"):
        strict(x, 2)
    with config.patch(fail_on_recompile_limit_hit=True):
        limited = tp.compile(g, recompile_limit=1)
        limited(x, 1)
        with pytest.raises(RecompileLimitError, match="k was 1, now 2"):
            limited(x, 2)


def test_accumulated_recompile_limit() -> None:
    def g(x: Any, k: int) -> Any:
        return x + k

    with config.patch(accumulated_recompile_limit=3):
        compiled = tp.compile(g, recompile_limit=1)
        x = tp.randn(2)
        for k in range(3):
            compiled(x, k)
        with pytest.raises(RecompileLimitError, match="accumulated limit"):
            compiled(x, 3)
        tp.compiler.reset()  # reset does not clear the accumulated count
        with pytest.raises(RecompileLimitError):
            compiled(x, 4)


def test_recompile_reasons_are_printed_when_asked(capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    def g(x: Any) -> Any:
        return x + 1

    compiled = tp.compile(g, dynamic=False)
    compiled(tp.randn(2))
    monkeypatch.setenv("TP_LOG_RECOMPILES", "1")
    compiled(tp.randn(3))
    err = capsys.readouterr().err
    assert "tp.compile: recompiling g" in err and "[shape] specialization 0: x: axis 0: size was 2, now 3" in err
    monkeypatch.delenv("TP_LOG_RECOMPILES")
    with config.patch(verbose=True):
        compiled(tp.randn(4))
    assert "size was" in capsys.readouterr().err


# ---- dynamic shapes -------------------------------------------------------------------------------------

SIZES = (32, 64, 1, 7, 1024)


def mlp_step(w: Any, x: Any) -> Any:
    return (x @ w).relu().sum(-1)


@pytest.mark.parametrize("dynamic, expected", [(None, 2), (True, 1), (False, len(SIZES))])
def test_batch_size_sequences_compile_at_most_twice(dynamic: bool | None, expected: int) -> None:
    w = tp.randn(5, 3)
    compiled = tp.compile(mlp_step, dynamic=dynamic)
    for n in SIZES:
        x = tp.randn(n, 5)
        np.testing.assert_allclose(compiled(w, x).numpy(), mlp_step(w, x).numpy(), rtol=1e-5, atol=1e-6)
    assert compiled.compile_count == expected
    for n in (3, 1, 64):  # more sizes, 1 included: no recompilation once the dim is symbolic
        compiled(w, tp.randn(n, 5))
    assert compiled.compile_count == (expected if dynamic is not False else len(SIZES) + 1)


@pytest.mark.parametrize("dynamic, expected", [(None, 2), (True, 1)])
def test_a_training_step_over_batch_sizes_compiles_at_most_twice(dynamic: bool | None, expected: int) -> None:
    """backward() inside the function: the reverse sweep's shape comparisons add no guard on a size of 1."""
    import copy

    import tensorplay.nn.functional as F

    tp.manual_seed(0)
    model = tp.nn.Sequential(tp.nn.Linear(5, 8), tp.nn.ReLU(), tp.nn.Linear(8, 3))
    twin = copy.deepcopy(model)
    opt, twin_opt = tp.optim.SGD(model.parameters(), lr=0.1), tp.optim.SGD(twin.parameters(), lr=0.1)

    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for p in model.parameters():  # .grad set from the first call on, as after any earlier step
        p.grad = tp.zeros_like(p)
    compiled = tp.compile(step, dynamic=dynamic)
    gen = np.random.default_rng(0)
    for n in SIZES + (1, 3):
        x, y = tp.randn(n, 5), tp.tensor(gen.integers(0, 3, n))
        twin_opt.zero_grad()
        expected_loss = F.cross_entropy(twin(x), y)
        expected_loss.backward()
        twin_opt.step()
        np.testing.assert_allclose(compiled(x, y).item(), expected_loss.item(), rtol=1e-5, err_msg=f"batch {n}")
    for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    assert compiled.compile_count == expected, [str(e) for e in compiled.recompile_reasons]
    assert "size" not in _kinds(compiled)


def test_size_one_is_an_ordinary_size() -> None:
    compiled = tp.compile(lambda x, b: x + b, dynamic=True)
    b = tp.randn(4)
    for n in (1, 5, 1, 2):
        x = tp.randn(n, 4)
        np.testing.assert_allclose(compiled(x, b).numpy(), (x + b).numpy(), rtol=1e-6)
    assert compiled.compile_count == 1


def test_a_branch_on_a_size_adds_a_guard_on_that_size() -> None:
    def g(x: Any) -> Any:
        if x.shape[0] > 4:
            return x.sum(0)
        return x.amax(0)

    compiled = tp.compile(g, dynamic=True)
    for n in (8, 16):
        np.testing.assert_allclose(compiled(tp.ones(n, 3)).numpy(), [n, n, n])
    assert compiled.compile_count == 1
    np.testing.assert_allclose(compiled(tp.ones(2, 3)).numpy(), [1.0, 1.0, 1.0])
    (reason,) = _reasons(compiled)
    assert reason.kind == "size" and "> 4 was True when captured; now" in reason.message
    assert f"test_compile_guards.py:{g.__code__.co_firstlineno + 1}" in reason.location


# ---- the fast path and in-place updates -----------------------------------------------------------------

def test_in_place_updates_of_arguments_and_captured_tensors_are_seen() -> None:
    w = tp.randn(3)

    def g(x: Any) -> Any:
        return x * w

    compiled = tp.compile(g)
    x = tp.randn(3)
    first = compiled(x).numpy().copy()
    x.add_(1.0)
    np.testing.assert_allclose(compiled(x).numpy(), (x * w).numpy())
    w.mul_(2.0)
    np.testing.assert_allclose(compiled(x).numpy(), (x * w).numpy())
    assert not np.allclose(first, compiled(x).numpy())
    assert compiled.compile_count == 1


def test_an_in_place_update_re_evaluates_data_guards() -> None:
    def g(x: Any) -> Any:
        return x + 1.0 if bool(x[0] > 0) else x - 1.0

    compiled = tp.compile(g)
    x = tp.ones(2)
    np.testing.assert_allclose(compiled(x).numpy(), [2.0, 2.0])
    x.mul_(-1.0)  # same tensor object, new version: the branch must be re-checked
    np.testing.assert_allclose(compiled(x).numpy(), [-2.0, -2.0])


def test_rebinding_free_tensors_is_seen() -> None:
    global _W
    _W = tp.ones(3)

    def g(x: Any) -> Any:
        return x * _W

    compiled = tp.compile(g)
    x = tp.randn(3)
    np.testing.assert_allclose(compiled(x).numpy(), x.numpy())
    _W = tp.full((3,), 2.0)
    np.testing.assert_allclose(compiled(x).numpy(), 2.0 * x.numpy())
    assert compiled.compile_count == 1  # same shape and dtype: the new tensor is read, no recompile
    _W = tp.ones(4)
    with pytest.raises(tp.ShapeError):
        compiled(x)  # eager raises the shape error too
    assert any(r.kind == "shape" and "_W" in r.message for r in _reasons(compiled))


_W = tp.ones(3)


def test_module_parameters_replaced_or_updated_are_seen() -> None:
    model = tp.nn.Linear(3, 2)
    compiled = tp.compile(model)
    x = tp.randn(4, 3)
    with tp.no_grad():
        compiled(x)
        model.weight.mul_(0.5)
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
        model.bias = tp.nn.Parameter(tp.ones(2))
        np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert compiled.compile_count == 1
