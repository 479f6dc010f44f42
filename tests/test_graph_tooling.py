"""Tooling around the IR: typecheck (and its error messages), the jaxpr-style printer, the
generated code of a GraphModule, the Graphviz view, trace's arguments, rewrites with builders."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.spec.aval import Aval
from tensorplay.errors import DTypeError, ShapeError
from tensorplay.graph import (
    Graph, GraphModule, GraphTypeError, Literal, Node, Var, evaluate, format_graph, sym, to_dot, trace, typecheck,
)
from tests.test_graph_swap import typecheck_every_recording  # noqa: F401 (autouse fixture)


def mlp(params: Any, x: Any) -> Any:
    (w1, b1), (w2, b2) = params
    return ((x @ w1.T + b1).relu() @ w2.T + b2).log_softmax(-1)


def small_graph() -> Graph:
    g = Graph()
    x = g.add_input("x", Aval((sym("B"), 3), "float32"))
    y = g.emit("mul", x, 2.0)
    z = g.emit("relu", y)
    g.outputs = [g.emit("reduce_sum", z, axes=(1,))]
    return g


# ---- typecheck --------------------------------------------------------------------------------------

def test_typecheck_accepts_recorded_and_hand_built_graphs() -> None:
    assert typecheck(small_graph()) is not None
    params = [(tp.randn(4, 3), tp.randn(4)), (tp.randn(2, 4), tp.randn(2))]
    typecheck(trace(lambda x: mlp(params, x), tp.randn(5, 3), dynamic={0: {0: "B"}}).graph)


def test_typecheck_reports_a_wrong_aval_with_node_index_primitive_and_both_avals() -> None:
    g = small_graph()
    g.nodes[1].outputs[0].aval = Aval((sym("B"), 4), "float32")
    with pytest.raises(GraphTypeError, match=r"node 1 \(relu\).*output aval float32\[B,4\] differs from "
                                             r"the rule's float32\[B,3\]"):
        typecheck(g)


def test_typecheck_reports_use_before_definition_and_double_assignment() -> None:
    g = small_graph()
    g.nodes[0], g.nodes[1] = g.nodes[1], g.nodes[0]
    with pytest.raises(GraphTypeError, match=r"node 0 \(relu\).*is defined later"):
        typecheck(g)
    g = small_graph()
    g.nodes.append(g.nodes[1])
    with pytest.raises(GraphTypeError, match=r"node 3 \(relu\).*assigned more than once"):
        typecheck(g)
    g = small_graph()
    stray = Var(Aval((2,), "float32"))
    g.nodes[1].inputs = (stray,)
    with pytest.raises(GraphTypeError, match="is not defined in this graph"):
        typecheck(g)


def test_typecheck_reports_rule_failures_unknown_targets_and_bad_outputs() -> None:
    g = small_graph()
    g.nodes[2].params = {"axes": (5,), "keepdims": False}
    with pytest.raises(GraphTypeError, match=r"node 2 \(reduce_sum\): the shape rule rejects"):
        typecheck(g)
    g = small_graph()
    g.nodes[1].target = "frobnicate"
    with pytest.raises(GraphTypeError, match="not a primitive"):
        typecheck(g)
    g = small_graph()
    g.outputs = [Var(Aval((), "float32"))]
    with pytest.raises(GraphTypeError, match="output 0"):
        typecheck(g)


# ---- vocabulary and rewrites -------------------------------------------------------------------------

def test_vocabulary_for_passes() -> None:
    gm = trace(lambda x: (x * 2.0).relu(), tp.ones(2, 3), dynamic={0: {0: "N"}})
    g = gm.graph
    assert [p.name for p in g.placeholders] == ["x"]
    assert [n.target for n in g.nodes] == ["mul", "relu"]
    node: Node = g.nodes[0]
    assert node.meta["val"] == Aval((sym("N"), 3), "float32")
    assert node.args[0] is g.placeholders[0] and node.args[1] == Literal(2.0)
    assert g.placeholders[0].meta["val"] == Aval((sym("N"), 3), "float32")
    assert g.symbols == frozenset({"N"})
    assert g.users()[node.out] == [g.nodes[1]]


def test_rewrite_with_a_builder() -> None:
    gm = trace(lambda x: x.relu().sum(), tp.tensor([-1.0, 2.0, -3.0, 4.0]))
    g = gm.graph

    def relu_as_maximum(graph: Graph, node: Node) -> Any:
        return graph.emit("maximum", node.inputs[0], 0.0)

    (relu,) = [n for n in g.nodes if n.target == "relu"]
    g.rewrite(relu, relu_as_maximum)
    typecheck(g)
    assert [n.target for n in g.nodes] == ["maximum", "reduce_sum"]
    gm.recompile()
    assert gm(tp.tensor([-1.0, 2.0, -3.0, 4.0])).item() == 6.0
    assert "ops.maximum(x, 0.0)" in gm.code


# ---- printer, code, dot ------------------------------------------------------------------------------

def test_printer_is_jaxpr_like() -> None:
    assert format_graph(small_graph()) == (
        "{ lambda ; x:f32[B,3]. let\n"
        "    a:f32[B,3] = mul x 2.0\n"
        "    b:f32[B,3] = relu a\n"
        "    c:f32[B] = reduce_sum[axes=(1,) keepdims=False] b\n"
        "  in (c) }")


def test_printer_shows_state_kinds_and_locations() -> None:
    w = tp.ones(4, 3)
    gm = trace(lambda x: x @ w.T, tp.ones(2, 3))
    text = str(gm)
    # w (an eager closure tensor) is captured itself; the view w.T is recorded on it, so a write through
    # a view of w would reach w
    assert text.startswith("{ lambda captured_0:f32[4,3] ; x:f32[2,3]. let")
    assert "permute[perm=(1, 0)] captured_0" in text
    assert "# captured: captured_0" in text
    assert "test_graph_tooling.py:" in format_graph(gm.graph, show_locations=True)


def test_generated_code_is_readable_and_runs() -> None:
    params = [(tp.randn(4, 3), tp.randn(4)), (tp.randn(2, 4), tp.randn(2))]
    x = tp.randn(5, 3)
    gm = trace(lambda v: mlp(params, v), x, dynamic={0: {0: "B"}})
    code = gm.code
    assert code.startswith("def forward(ops, v, captured_0, captured_1, captured_2, captured_3):")
    assert "    B = v.shape[0]\n" in code
    assert "permute = ops.permute(captured_0, perm=(1, 0))  # float32[3,4]  test_graph_tooling.py:" in code
    assert "matmul = ops.matmul(v, permute)  # float32[B,4]  test_graph_tooling.py:" in code
    assert "ops.log_softmax(" in code and code.rstrip().endswith("return (log_softmax,)")
    compile(code, "<test>", "exec")
    for n in (5, 1, 9):
        xs = tp.randn(n, 3)
        np.testing.assert_array_equal(gm(xs).numpy(), mlp(params, xs).numpy())


def test_symbolic_params_are_computed_from_input_shapes_in_code() -> None:
    gm = trace(lambda x: x.reshape(-1, 2).sum(0) / x.shape[0], tp.ones(4, 6), dynamic={0: {0: "B"}})
    assert "shape=(3*B, 2)" in gm.code and "ops.div(reduce_sum, B)" in gm.code
    np.testing.assert_array_equal(gm(tp.ones(7, 6)).numpy(), [3.0, 3.0])


def test_dot_view() -> None:
    gm = trace(lambda x: (x + 1.0).exp(), tp.ones(2))
    dot = to_dot(gm.graph)
    assert dot.startswith('digraph "graph" {') and dot.rstrip().endswith("}")
    assert 'label="add"' in dot and 'label="exp"' in dot and "user_input" in dot and "-> output" in dot
    assert gm.to_dot() == dot


# ---- trace arguments -----------------------------------------------------------------------------------

def test_dynamic_specifications() -> None:
    x, y = tp.ones(4, 3), tp.ones(3, 5)
    T = sym("T")
    forms: list[Any] = [
        {0: {0: "B"}, 1: {1: "N"}},
        [("B", None), (None, "N")],
        {"x": {0: "B"}, "y": [None, "N"]},
    ]
    for dynamic in forms:
        gm = trace(lambda x, y: x @ y, x, y, dynamic=dynamic)
        assert gm.graph.outputs[0].aval == Aval((sym("B"), sym("N")), "float32")
    gm = trace(lambda z: z[1:], tp.ones(7, 2), dynamic={0: {0: 2 * T + 1}})
    assert gm.graph.outputs[0].aval.shape == (2 * T, 2)
    assert gm(tp.ones(9, 2)).shape == (8, 2)
    with pytest.raises(ShapeError, match="not of the form 2\\*T \\+ 1"):
        gm(tp.ones(8, 2))
    with pytest.raises(ValueError, match="no input named 'q'"):
        trace(lambda x: x, x, dynamic={"q": {0: "B"}})
    with pytest.raises(ValueError, match="axis 5 is out of range"):
        trace(lambda x: x, x, dynamic={0: {5: "B"}})


def test_pytree_inputs_outputs_and_static_arguments() -> None:
    def f(inputs: dict[str, Any], scale: float, flags: tuple[bool, ...]) -> Any:
        out = inputs["a"] * scale + inputs["b"][0]
        return {"out": out, "both": [out, inputs["b"][1]], "flag": flags[0]}

    args = ({"a": tp.ones(2), "b": (tp.ones(2), tp.zeros(2))}, 3.0, (True,))
    gm = trace(f, *args)
    assert [p.name for p in gm.graph.user_inputs] == ["inputs_a", "inputs_b_0", "inputs_b_1"]
    out = gm(*args)
    assert out["flag"] is True and out["out"].tolist() == [4.0, 4.0] and out["both"][1].tolist() == [0.0, 0.0]
    with pytest.raises(TypeError, match="static argument was 3.0 when traced, now 2.0"):
        gm(args[0], 2.0, (True,))


def test_graph_module_checks_inputs() -> None:
    gm = trace(lambda x: x * 2.0, tp.ones(2, 3))
    with pytest.raises(ShapeError, match="graph input 'x': expected shape \\[2, 3\\], got \\[3, 2\\]"):
        gm(tp.ones(3, 2))
    with pytest.raises(DTypeError, match="expected dtype float32, got float64"):
        gm(tp.ones(2, 3, dtype=tp.float64))
    with pytest.raises(TypeError, match="expected a tuple of 1 items, got a tuple of 2 items"):
        gm(tp.ones(2, 3), tp.ones(2, 3))
    assert isinstance(gm, GraphModule) and "GraphModule" in repr(gm)


def test_evaluate_accepts_numpy_inputs_and_returns_a_flat_tuple() -> None:
    gm = trace(lambda x: (x + 1.0, x.sum()), tp.ones(3))
    a, b = evaluate(gm.graph, tp.eager, np.zeros(3, dtype=np.float32))
    assert a.tolist() == [1.0, 1.0, 1.0] and b.item() == 0.0


def test_graph_exports_the_capture_error_compile_code_imports() -> None:
    from tensorplay.graph import GraphCaptureError
    assert GraphCaptureError is tp.GraphCaptureError
    with pytest.raises(GraphCaptureError, match="bool"):
        trace(lambda x: x * 2 if x.sum() > 0 else x, tp.ones(2))
