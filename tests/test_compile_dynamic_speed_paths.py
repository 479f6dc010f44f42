"""Training steps compiled with a symbolic batch dim (``tp.compile(step, dynamic=True)``) run the code a
static compilation runs: sizes the function's Python pins (``Linear``'s check of the feature dim, a
layer norm's width) become constants, the same fusion groups get kernels, nothing more falls back to the
eager interpreter, every symbolic size is computed once per call, and each size decision is guarded once.

The steps are small versions of the benchmarks' MLP (SGD with momentum), CNN and transformer block
(Adam); each runs at several batch sizes against the same step in eager mode (loss, gradients, updated
parameters), with exactly one compilation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from benchmarks.bench_training import _block_classes
from tensorplay import nn, optim
from tensorplay.compiler.passes.specialize import pinned_sizes
from tensorplay.symbolic import SymDim
from tests.helpers import training_step

Block = _block_classes(tp, None)[0]


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(48, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))


def _cnn() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 8, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 2 * 2, 10))


def _block() -> nn.Module:
    return Block(16, 4)


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[Any], Any], str]] = {
    "mlp": (_mlp, lambda p: optim.SGD(p, lr=0.05, momentum=0.9), "ce"),
    "cnn": (_cnn, lambda p: optim.SGD(p, lr=0.05, momentum=0.9), "ce"),
    # eps well above the rounding noise of gradients that are zero in exact arithmetic (the attention's key
    # bias), which Adam's first step would scale up to the learning rate
    "block": (_block, lambda p: optim.Adam(p, lr=1e-2, eps=1e-4), "mse"),
}
CAPTURED_BATCH = {"mlp": 64, "cnn": 16, "block": 4}


def _batch(kind: str, batch: int, seed: int) -> tuple[Any, Any]:
    rng = np.random.default_rng(seed)
    if kind == "mlp":
        x = rng.standard_normal((batch, 48))
    elif kind == "cnn":
        x = rng.standard_normal((batch, 1, 14, 14))
    else:
        x = rng.standard_normal((batch, 5, 16))
    y = rng.standard_normal((batch, 5, 16)).astype(np.float32) if kind == "block" else rng.integers(0, 10, batch)
    return tp.tensor(x.astype(np.float32)), tp.tensor(y)


def _training(kind: str) -> tuple[nn.Module, Callable[[Any, Any], Any]]:
    """A model and its training step ``step(x, y) -> loss`` (zero grads, forward, loss, backward, update)."""
    build, make_opt, loss = MODELS[kind]
    tp.manual_seed(5)
    model = build()
    opt = make_opt(model.parameters())
    loss_fn = F.cross_entropy if loss == "ce" else F.mse_loss
    return model, training_step(model, opt, loss_fn)


def _assert_close(got: Any, want: Any, what: str) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6, err_msg=what)


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_dynamic_step_matches_eager_at_every_batch_size_with_one_compilation(kind: str) -> None:
    eager_model, eager_step = _training(kind)
    model, step = _training(kind)
    compiled = tp.compile(step, dynamic=True)
    sizes = [CAPTURED_BATCH[kind], 1, 7, 128, 0]
    for k, batch in enumerate(sizes):
        x, y = _batch(kind, batch, seed=k)
        want = eager_step(x, y)
        got = compiled(x, y)
        _assert_close(got.detach().numpy(), want.detach().numpy(), f"{kind} loss at batch {batch}")
        for (name, p), (_, q) in zip(model.named_parameters(), eager_model.named_parameters()):
            assert (p.grad is None) == (q.grad is None), f"{kind} {name}.grad at batch {batch}"
            if q.grad is not None:
                _assert_close(p.grad.numpy(), q.grad.numpy(), f"{kind} {name}.grad at batch {batch}")
            _assert_close(p.detach().numpy(), q.detach().numpy(), f"{kind} {name} after the step at batch {batch}")
    assert compiled.compile_count == 1, compiled.recompile_reasons
    assert len(compiled.specializations) == 1


def _code(kind: str, dynamic: bool) -> Any:
    """The generated function of ``kind``'s step compiled at its captured batch."""
    _, step = _training(kind)
    compiled = tp.compile(step, dynamic=dynamic)
    compiled(*_batch(kind, CAPTURED_BATCH[kind], seed=0))
    assert compiled.compile_count == 1
    program = compiled.specializations[0].program
    assert program.backward is None  # backward() and step() are inside: one generated function
    return program


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_dynamic_code_has_the_static_kernels_and_fallbacks(kind: str) -> None:
    static, dynamic = _code(kind, False).forward, _code(kind, True).forward
    assert "_s_" not in static.source and "_s_" in dynamic.source  # the dynamic code reads the batch size
    assert len(dynamic.kernels) == len(static.kernels)
    assert sorted(dynamic.fallbacks) == sorted(static.fallbacks)
    assert sorted(p.source for p in dynamic.kernels) == sorted(p.source for p in static.kernels)


@pytest.mark.parametrize("kind, varying", [("mlp", 1), ("block", 2)])
def test_sizes_the_function_pins_are_constants_in_the_dynamic_graph(kind: str, varying: int) -> None:
    """Every dim of the arguments is captured symbolic, but ``Linear`` checks the feature dim and the layer
    norm the model width: only the batch (and the block's sequence) stay symbolic in the compiled graph."""
    program = _code(kind, True)
    assert len(program.graph.symbols) == varying, program.graph.symbols
    body = program.forward.source
    assert body.count(".shape[") == varying  # one read per varying size, at the top


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_each_symbolic_size_is_computed_once_per_call(kind: str) -> None:
    source = _code(kind, True).forward.source
    plumbing = re.compile(r"(_key = |_bufs = |try:$|finally:$|with _rt\.quiet\(\):$|_arena\.|(_b\d+, )+= _bufs$)")
    lines = [line.strip() for line in source.splitlines()[1:]]
    lines = [line for line in lines if not plumbing.match(line)]  # the buffer plan's set-up, not the sizes
    header = [line for line in lines if re.match(r"_[sz]\w* = ", line)]
    body = [line for line in lines if not re.match(r"_[sz]\w* = ", line)]
    assert header and lines[:len(header)] == header  # the sizes come first
    definitions = [line.split(" = ", 1)[1] for line in header]
    assert len(definitions) == len(set(definitions))
    arithmetic = re.compile(r"\b_s_\w+\s*(\*|//|\+|-)|(\*|//|\+|-)\s*_s_\w+\b")
    assert not [line for line in body if arithmetic.search(line)]


def test_a_pinned_size_still_guards_the_call() -> None:
    """A dim pinned by the function's check is a constant in the code, and a call where the check goes the
    other way compiles again (and is right)."""
    def f(x: Any) -> Any:
        if x.shape[1] == 4:
            return (x * 2.0).reshape(x.shape[0], 2, x.shape[1] // 2).sum(2)
        return x.sum(1, keepdim=True)

    compiled = tp.compile(f, dynamic=True)
    rng = np.random.default_rng(1)
    for shape in ((3, 4), (5, 4), (1, 4)):
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(compiled(tp.tensor(x)).numpy(), (2 * x).reshape(shape[0], 2, 2).sum(2),
                                   rtol=1e-6)
    assert compiled.compile_count == 1
    assert len(compiled.specializations[0].program.graph.symbols) == 1
    x = rng.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(compiled(tp.tensor(x)).numpy(), x.sum(1, keepdims=True), rtol=1e-6)
    assert compiled.compile_count == 2


def test_a_size_check_repeated_in_a_loop_is_guarded_once() -> None:
    layer = nn.Linear(8, 8)

    def f(x: Any) -> Any:
        out = layer(x)
        for _ in range(3):
            out = out + layer(x)  # each call checks x's feature dim again
        return out

    compiled = tp.compile(f, dynamic=True)
    x = tp.tensor(np.random.default_rng(2).standard_normal((3, 8)).astype(np.float32))
    np.testing.assert_allclose(compiled(x).detach().numpy(), f(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    decisions = [(g.expr, g.op, g.other, g.outcome) for g in compiled.specializations[0].guards.size_guards]
    assert decisions and len(decisions) == len(set(decisions))


def test_dynamic_training_region_with_backward_outside() -> None:
    """A compiled forward (backward outside, so forward and backward are two generated functions) with a
    symbolic batch: gradients against eager at several batch sizes, one compilation."""
    tp.manual_seed(7)
    model = _mlp()
    twin = _mlp()
    twin.load_state_dict(model.state_dict())
    compiled = tp.compile(model, dynamic=True)
    for k, batch in enumerate((6, 1, 7, 0)):
        x, y = _batch("mlp", batch, seed=10 + k)
        for m in (model, twin):
            m.zero_grad()
        F.cross_entropy(compiled(x), y).backward()
        F.cross_entropy(twin(x), y).backward()
        for (name, p), (_, q) in zip(model.named_parameters(), twin.named_parameters()):
            _assert_close(p.grad.numpy(), q.grad.numpy(), f"{name}.grad at batch {batch}")
    assert compiled.compile_count == 1
    program = compiled._compiled.specializations[0].program
    assert program.backward_graph is not None and len(program.backward_graph.symbols) <= 1


class _Decision:
    def __init__(self, expr: Any, op: str, other: Any, outcome: Any) -> None:
        self.expr, self.op, self.other, self.outcome = expr, op, other, outcome


def test_pinned_sizes_solves_the_equalities_that_held() -> None:
    a, b, c, d = (SymDim(n) for n in "abcd")
    decisions = [
        _Decision(a, "==", 784, True),             # a == 784 held
        _Decision(2 * b + 1, "value", None, 9),    # int(2*b + 1) read 9
        _Decision(c - a, "!=", 16, False),         # c - a != 16 did not hold: c = a + 16
        _Decision(d, "==", 5, False),              # d == 5 did not hold: says nothing
        _Decision(d * d, "==", 25, True),          # not linear: d could be 5 or -5
        _Decision(3 * d, "==", 10, True),          # no integer solution
    ]
    assert pinned_sizes(decisions) == {"a": 784, "b": 4, "c": 800}
    assert pinned_sizes([_Decision(a, ">", 3, True)]) == {}


def test_repeated_calls_do_not_evaluate_the_size_guards_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per-call guard cost does not grow with the guards: a call with the same tensors as the last one reuses
    the verdict on its sizes; a call with new tensors evaluates each guard once."""
    from tensorplay.compiler.capture import SizeGuard

    layer = nn.Linear(8, 4)
    compiled = tp.compile(lambda x: layer(x).sum(), dynamic=True)
    x = tp.tensor(np.ones((3, 8), np.float32))
    compiled(x)
    assert compiled.specializations[0].guards.size_guards
    evaluated: list[Any] = []
    holds = SizeGuard.holds

    def counting(self: Any, binding: dict[str, int]) -> bool:
        evaluated.append(self)
        return holds(self, binding)

    monkeypatch.setattr(SizeGuard, "holds", counting)
    for _ in range(5):
        compiled(x)
    assert len(evaluated) <= 1
    evaluated.clear()
    for batch in (2, 5):
        x_new = tp.tensor(np.ones((batch, 8), np.float32))
        np.testing.assert_allclose(compiled(x_new).detach().numpy(), layer(x_new).sum().detach().numpy(), rtol=1e-5)
    assert len(evaluated) == 2 * len(compiled.specializations[0].guards.size_guards)
    assert compiled.compile_count == 1


def test_the_benchmarks_dynamic_rows_serve_two_batch_sizes_with_one_compilation(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``python -m benchmarks compile`` has a dynamic-batch row beside each static compiled step; its
    tensorplay step is ``tp.compile(dynamic=True)`` and serves the benchmark's batch and a smaller one."""
    from benchmarks import bench_compile

    monkeypatch.setenv("TP_COMPILE_CACHE_DIR", "")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "")
    names = [case.name for case in bench_compile.cases()]
    static = [n for n in names if n.startswith("compiled train step: ")]
    dynamic = [n for n in names if n.startswith("compiled train step (dynamic batch): ")]
    assert len(static) == 3 and [n.replace(" (dynamic batch)", "") for n in dynamic] == static
    step = bench_compile.dynamic_step("mlp", "tensorplay")
    loss = step()
    assert np.isfinite(float(loss))
