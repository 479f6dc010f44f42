"""Capture semantics of the graph recorder: captured closures and globals become inputs, module
state is captured by name, execute-mode guards, symbolic-mode refusals with the user's line,
in-place ops recorded functionally, nested recorders, random keys."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import GraphCaptureError, ShapeError
from tensorplay.spec.aval import Aval
from tensorplay.graph import GuardError, Recorder, evaluate, sym, trace, typecheck
from tests.test_graph_swap import typecheck_every_recording  # noqa: F401 (autouse fixture)

GLOBAL_SCALE = tp.tensor([1.0, 2.0, 3.0])


def line_of(marker: str) -> int:
    """The line number in this file of the (unique) line containing ``marker``."""
    lines = inspect.getsource(inspect.getmodule(line_of)).splitlines()  # type: ignore[arg-type]
    hits = [i + 1 for i, text in enumerate(lines) if marker in text and "line_of(" not in text]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def kinds(gm: Any) -> dict[str, str]:
    return {str(p.name): str(p.kind) for p in gm.graph.inputs}


# ---- captured tensors ----------------------------------------------------------------------------

def test_closure_and_global_tensors_are_captured_inputs_not_copies() -> None:
    w = tp.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]])

    def f(x: Any) -> Any:
        return (x * GLOBAL_SCALE) @ w.T

    x = tp.ones(2, 3)
    gm = trace(f, x)
    typecheck(gm.graph)
    assert sorted(kinds(gm).values()) == ["captured", "captured", "user_input"]
    np.testing.assert_array_equal(gm(x).numpy(), f(x).numpy())
    GLOBAL_SCALE.mul_(2.0)  # the graph reads the tensor each call: no silent constant copy
    try:
        np.testing.assert_array_equal(gm(x).numpy(), f(x).numpy())
        np.testing.assert_array_equal(gm(x).numpy(), [[2.0, 10.0], [2.0, 10.0]])
    finally:
        GLOBAL_SCALE.div_(2.0)


def test_a_captured_tensor_used_twice_is_one_input() -> None:
    c = tp.tensor([1.0, 2.0])
    gm = trace(lambda x: x * c + c, tp.zeros(2))
    assert [p.kind for p in gm.graph.inputs] == ["user_input", "captured"]


def test_numpy_arrays_become_constants() -> None:
    table = np.array([0.5, -1.0], dtype=np.float32)
    gm = trace(lambda x: x + table, tp.ones(2))
    assert [p.kind for p in gm.graph.inputs] == ["user_input", "constant"]
    np.testing.assert_array_equal(gm(tp.ones(2)).numpy(), [1.5, 0.0])


def test_state_override_by_name() -> None:
    c = tp.tensor([1.0, 2.0])
    gm = trace(lambda x: x * c, tp.ones(2))
    name = [p.name for p in gm.graph.inputs if p.kind == "captured"][0]
    out = gm(tp.ones(2), state={name: tp.tensor([5.0, 6.0])})
    np.testing.assert_array_equal(out.numpy(), [5.0, 6.0])
    out = evaluate(gm.graph, tp.eager, tp.ones(2), state={name: tp.tensor([7.0, 8.0])})[0]
    np.testing.assert_array_equal(out.numpy(), [7.0, 8.0])


# ---- module state ----------------------------------------------------------------------------------

class DuckModule:
    """A module by duck typing: named_parameters / named_buffers and a call."""

    def __init__(self) -> None:
        self.weight = tp.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        self.bias = tp.tensor([0.5, -0.5], requires_grad=True)
        self.scale = tp.tensor(2.0)

    def named_parameters(self) -> Any:
        return iter([("layer.weight", self.weight), ("layer.bias", self.bias)])

    def named_buffers(self) -> Any:
        return iter([("scale", self.scale)])

    def __call__(self, x: Any) -> Any:
        return (x @ self.weight.T + self.bias) * self.scale


def test_module_parameters_and_buffers_are_captured_by_name() -> None:
    m = DuckModule()
    x = tp.tensor([[1.0, 1.0]])
    gm = trace(m, x)
    typecheck(gm.graph)
    assert kinds(gm) == {"layer.weight": "parameter", "layer.bias": "parameter", "scale": "buffer",
                         "x": "user_input"}
    assert "layer_weight" in gm.code  # names are made identifiers in the generated code
    with tp.no_grad():
        np.testing.assert_array_equal(gm(x).numpy(), m(x).numpy())
        m.weight.mul_(0.0)  # an optimizer step updates parameters in place: the graph sees it
        np.testing.assert_array_equal(gm(x).numpy(), [[1.0, -1.0]])


def test_graph_run_eagerly_supports_backward_through_parameters() -> None:
    m = DuckModule()
    x = tp.tensor([[1.0, 2.0]])
    m(x).sum().backward()
    expected = m.weight.grad.numpy().copy()  # type: ignore[union-attr]
    m.weight.grad = None
    trace(m, x)(x).sum().backward()
    np.testing.assert_array_equal(m.weight.grad.numpy(), expected)  # type: ignore[union-attr]


def test_nn_module_state_and_batch_norm_statistics() -> None:
    nn = pytest.importorskip("tensorplay.nn")
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    x = tp.randn(5, 4)
    before = model[1].running_mean.numpy().copy()
    gm = trace(model, x)
    np.testing.assert_array_equal(model[1].running_mean.numpy(), before)  # tracing mutates nothing
    kinds_ = kinds(gm)
    assert kinds_["0.weight"] == "parameter" and kinds_["1.running_mean"] == "buffer"
    assert {p.name for p, _ in gm.graph.mutations} >= {"1.running_mean", "1.running_var"}
    gm(x)
    assert not np.array_equal(model[1].running_mean.numpy(), before)  # running the graph updates them


# ---- execute mode: guards --------------------------------------------------------------------------

def branchy(x: Any) -> Any:
    if x.sum() > 0:  # GUARD-LINE
        return x * 2.0
    return x - 1.0


def test_execute_mode_records_guards_and_rechecks_them() -> None:
    pos, neg = tp.tensor([1.0, 2.0]), tp.tensor([-1.0, -2.0])
    gm = trace(branchy, pos, execute=True)
    typecheck(gm.graph)
    (guard,) = gm.graph.guards
    assert guard.kind == "bool" and guard.outcome is True
    assert guard.location is not None and guard.location.lineno == line_of("# GUARD-LINE")
    assert guard.check(np.array(True)) and not guard.check(np.array(False))
    assert "guard bool(" in str(gm) and "_guard(0, ops," in gm.code
    np.testing.assert_array_equal(gm(tp.tensor([3.0, 4.0])).numpy(), [6.0, 8.0])
    with pytest.raises(GuardError, match="guard failed: bool"):
        gm(neg)
    gm_neg = trace(branchy, neg, execute=True)
    np.testing.assert_array_equal(gm_neg(neg).numpy(), [-2.0, -3.0])


def test_execute_mode_item_and_int_reads_are_guards_and_values_are_kept() -> None:
    def f(x: Any) -> Any:
        n = int(x.argmax())
        return x * float(x.max().item()) + n

    x = tp.tensor([1.0, 5.0, 2.0])
    gm = trace(f, x, execute=True)
    assert [g.kind for g in gm.graph.guards] == ["int", "item"]
    assert gm.graph.guards[0].outcome == 1 and gm.graph.guards[1].outcome == 5.0
    np.testing.assert_array_equal(gm.graph.outputs[0].value, f(x).numpy())  # type: ignore[union-attr]
    np.testing.assert_array_equal(gm(x).numpy(), f(x).numpy())


def test_execute_mode_mask_indexing_specialises_with_a_guard() -> None:
    x = tp.tensor([1.0, -2.0, 3.0])
    gm = trace(lambda v: v[v > 0], x, execute=True)
    assert [g.kind for g in gm.graph.guards] == ["concrete"]
    np.testing.assert_array_equal(gm(x).numpy(), [1.0, 3.0])


# ---- symbolic mode: refusals ------------------------------------------------------------------------

REFUSALS = [
    ("bool", lambda x: x * 2.0 if x.sum() > 0 else x, "bool\\(\\) of a recorded tensor.*control flow"),  # R-bool
    ("item", lambda x: x * x.sum().item(), "t.item\\(\\)"),  # R-item
    ("int", lambda x: x * int(x.sum()), "int\\(\\) of a recorded tensor"),  # R-int
    ("float", lambda x: x * float(x.sum()), "float\\(\\) of a recorded tensor"),  # R-float
    ("numpy", lambda x: x.numpy(), "t.numpy\\(\\)"),  # R-numpy
    ("mask", lambda x: x[x > 0], "result size depends on the mask"),  # R-mask
]


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c[0])
def test_symbolic_mode_refuses_data_dependent_python(case: tuple[str, Any, str]) -> None:
    name, fn, message = case
    with pytest.raises(GraphCaptureError, match=message) as info:
        trace(fn, tp.tensor([1.0, -2.0]))
    text = str(info.value)
    assert "tp.where" in text and "execute=True" in text
    assert f"test_graph_capture.py:{line_of(f'# R-{name}')}" in text


def test_len_and_iteration_over_a_symbolic_dim_are_refused() -> None:
    x = tp.ones(4, 3)
    with pytest.raises(GraphCaptureError, match="len\\(\\) of a tensor needs the value of the symbolic dim B"):
        trace(lambda v: v * len(v), x, dynamic={0: {0: "B"}})
    with pytest.raises(GraphCaptureError, match="iterating over a tensor.*symbolic dim B"):
        trace(lambda v: sum(row for row in v), x, dynamic={0: {0: "B"}})
    # a static axis is iterated (unrolled): no data is read
    gm = trace(lambda v: sum(row for row in v), x)
    np.testing.assert_array_equal(gm(x).numpy(), [4.0, 4.0, 4.0])


def test_shape_errors_name_the_users_line() -> None:
    def f(x: Any, y: Any) -> Any:
        return x @ y  # SHAPE-LINE

    with pytest.raises(ShapeError, match="inner dimensions differ") as info:
        trace(f, tp.ones(2, 3), tp.ones(4, 5))
    assert f"test_graph_capture.py:{line_of('# SHAPE-LINE')}" in str(info.value)
    assert "while recording matmul" in str(info.value)


def test_equal_code_from_two_files_is_told_apart() -> None:
    """Code objects compare equal across files (their file name is not compared): the recorder's look-ups go
    by identity, so the same function text compiled as tensorplay's and as the user's keeps each file's
    verdict and each file's line in errors."""
    from tensorplay.interpreters.graph.recorder import _is_internal

    source = "def f(x, y):\n    return x @ y\n"
    namespaces: dict[str, dict[str, Any]] = {}
    for filename in ("<tensorplay-twin>", "user_twin.py"):
        namespaces[filename] = {}
        exec(compile(source, filename, "exec"), namespaces[filename])
    internal, user = (namespaces[k]["f"] for k in ("<tensorplay-twin>", "user_twin.py"))
    assert internal.__code__ == user.__code__ and internal.__code__ is not user.__code__
    assert _is_internal(internal.__code__) and not _is_internal(user.__code__)
    with pytest.raises(ShapeError) as info:
        trace(user, tp.ones(2, 3), tp.ones(4, 5))
    assert "user_twin.py:2" in str(info.value)


def test_nodes_record_the_users_source_location() -> None:
    def f(x: Any) -> Any:
        y = x.relu()  # LOC-RELU
        return y.sum()  # LOC-SUM

    gm = trace(f, tp.ones(3))
    locations = {n.target: n.location for n in gm.graph.nodes}
    assert locations["relu"].lineno == line_of("# LOC-RELU")
    assert locations["reduce_sum"].lineno == line_of("# LOC-SUM")
    assert locations["relu"].filename == __file__
    assert gm.graph.nodes[0].meta["location"] == locations["relu"]


def test_a_tensor_escaping_a_trace_cannot_be_used() -> None:
    leaked: list[Any] = []

    def f(x: Any) -> Any:
        leaked.append(x * 2.0)
        return x

    trace(f, tp.ones(2))
    with pytest.raises(GraphCaptureError, match="recording that has finished"):
        leaked[0] + tp.ones(2)


def test_backward_inside_a_recording_is_refused() -> None:
    with pytest.raises(GraphCaptureError, match="tensorplay.func.grad"):
        trace(lambda x: x.sum().backward(), tp.ones(2))


# ---- in place, functionally ------------------------------------------------------------------------

def test_inplace_ops_and_setitem_rebind_the_handle() -> None:
    def f(x: Any) -> Any:
        y = x * 1.0
        alias = y
        y += 1.0
        y.mul_(2.0)
        y[0, 1:] = -1.0
        y[1] = x[0]
        z = x.clone()
        z.zero_()
        return y, alias, z

    x = tp.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    expected = f(x.clone())
    gm = trace(f, x)
    typecheck(gm.graph)
    got = gm(x)
    np.testing.assert_array_equal(got[0].numpy(), expected[0].numpy())
    np.testing.assert_array_equal(got[2].numpy(), expected[2].numpy())
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(2, 3))  # the input is untouched


def test_inplace_on_a_captured_tensor_is_recorded_as_a_mutation() -> None:
    c = tp.zeros(2)

    def f(x: Any) -> Any:
        c.add_(x)
        return c

    gm = trace(f, tp.ones(2))
    np.testing.assert_array_equal(c.numpy(), [0.0, 0.0])  # tracing runs nothing
    np.testing.assert_array_equal(gm(tp.ones(2)).numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(gm(tp.ones(2)).numpy(), [2.0, 2.0])  # every call writes, as eager calls
    np.testing.assert_array_equal(c.numpy(), [2.0, 2.0])


# ---- nested recorders ------------------------------------------------------------------------------

def test_levels_increase_and_inner_recordings_capture_outer_values() -> None:
    outer = Recorder()
    inner = Recorder()
    assert tp.eager.level < outer.level < inner.level
    x = outer.input("x", Aval((3,), "float32"))
    y = outer.exp(x)

    def g(v: Any) -> Any:
        return v * y  # y is a value of the outer recording: captured by the inner one

    inner_gm = trace(g, tp.ones(3))
    (captured,) = [p for p in inner_gm.graph.inputs if p.kind == "captured"]
    assert captured.source is y
    # evaluating the inner graph with the outer recorder inlines it there
    (z,) = evaluate(inner_gm.graph, outer, x)
    outer.graph.outputs = [z._data]
    typecheck(outer.graph)
    assert [n.target for n in outer.graph.nodes] == ["exp", "mul"]
    out = evaluate(outer.graph, tp.eager, tp.tensor([0.0, 1.0, 2.0]))[0]
    np.testing.assert_allclose(out.numpy(), np.arange(3) * np.exp(np.arange(3)), rtol=1e-6)
    with pytest.raises(GraphCaptureError, match="pass it in state"):
        evaluate(inner_gm.graph, tp.eager, tp.ones(3))


def test_graph_module_called_under_another_trace_is_inlined() -> None:
    inner = trace(lambda v: v.relu() * 2.0, tp.ones(3))
    outer = trace(lambda v: inner(v + 1.0).sum(), tp.ones(3))
    typecheck(outer.graph)
    assert [n.target for n in outer.graph.nodes] == ["add", "relu", "mul", "reduce_sum"]
    x = tp.tensor([-3.0, 0.0, 1.0])
    assert outer(x).item() == ((x + 1.0).relu() * 2.0).sum().item()


# ---- random keys -----------------------------------------------------------------------------------

def test_random_keys_are_inputs_drawn_per_call() -> None:
    def f(x: Any) -> Any:
        return tp.prefix.dropout(x._ops, x, 0.5, key=x._ops.random_key()) if hasattr(x._ops, "random_key") else x

    import tensorplay.prefix  # noqa: F401

    x = tp.ones(64)
    tp.manual_seed(7)
    gm = trace(f, x)
    assert [p.kind for p in gm.graph.inputs] == ["user_input", "random_key"]
    tp.manual_seed(7)
    first, second = gm(x).numpy(), gm(x).numpy()
    assert not np.array_equal(first, second)  # a fresh key (mask) per call
    tp.manual_seed(7)
    np.testing.assert_array_equal(gm(x).numpy(), first)  # replayable from the seed


def test_inlined_nodes_keep_their_original_source_locations() -> None:
    def f(x: Any) -> Any:
        return x.exp()  # INLINE-LOC

    gm = trace(f, tp.ones(2))
    outer = trace(lambda v: evaluate(gm.graph, tp.ops_of(v), v)[0] + 1.0, tp.ones(2))
    exp_node, add_node = outer.graph.nodes
    assert exp_node.location.lineno == line_of("# INLINE-LOC")
    assert add_node.location.lineno != exp_node.location.lineno


def test_execute_mode_with_symbolic_dims_uses_the_example_sizes() -> None:
    def f(x: Any) -> Any:
        m = x.sum(0) / x.shape[0]
        return m * 2.0 if m.sum() > -100.0 else m

    x = tp.randn(5, 3)
    gm = trace(f, x, execute=True, dynamic={0: {0: "B"}})
    typecheck(gm.graph)
    assert gm.graph.outputs[0].aval.shape == (3,)
    assert gm.graph.nodes[1].inputs[1].value == sym("B")
    np.testing.assert_array_equal(gm.graph.outputs[0].value, f(x).numpy())  # type: ignore[union-attr]
    x7 = tp.randn(7, 3)
    np.testing.assert_array_equal(gm(x7).numpy(), f(x7).numpy())
