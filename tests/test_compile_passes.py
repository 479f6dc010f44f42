"""The pass pipeline, pass by pass: each rewrites the graph in place and leaves it well typed (``typecheck``
after every pass), keeps what it computes (the graph evaluated eagerly before and after agrees), and does
its own job: normalization, constant folding, decomposition, CSE (never merging random draws), DCE, fusion
grouping (convex groups, reductions as epilogues), shape propagation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.passes import (
    PIPELINE, decompose, eliminate_common_subexpressions, eliminate_dead_code, fold_constants, group_pointwise,
    normalize, optimize, propagate_shapes,
)
from tensorplay.graph import Graph, evaluate, trace, typecheck
from tensorplay.interpreters.graph.ir import Var


def _graph(fn: Any, *args: Any) -> Graph:
    return trace(fn, *args).graph


def _same_results(graph: Graph, before: list[Any], args: list[Any]) -> None:
    after = evaluate(graph, tp.eager, *args)
    for a, b in zip(after, before):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6, atol=1e-7)


def block_graph() -> tuple[Graph, list[Any]]:
    tp.manual_seed(0)
    ln = tp.nn.LayerNorm(8)
    attn = tp.nn.MultiheadAttention(8, 2)
    fc = tp.nn.Linear(8, 8)

    def f(x: Any) -> Any:
        h = ln(x)
        y = x + attn(h, need_weights=False)[0]
        return (y + fc(tp.nn.functional.gelu(y))).square().mean()

    x = tp.randn(2, 5, 8)
    return _graph(f, x), [x]


@pytest.mark.parametrize("name", [name for name, _ in PIPELINE])
def test_every_pass_keeps_the_graph_well_typed_and_its_results(name: str) -> None:
    graph, args = block_graph()
    before = evaluate(graph, tp.eager, *args)
    for pass_name, run in PIPELINE:
        run(graph)
        typecheck(graph)
        _same_results(graph, before, args)
        if pass_name == name:
            break


def test_optimize_with_check_typechecks_after_each_pass() -> None:
    graph, args = block_graph()
    before = evaluate(graph, tp.eager, *args)
    optimize(graph, check=True)
    _same_results(graph, before, args)


def test_normalization_removes_identities_composes_chains_and_orders_literals() -> None:
    def f(x: Any) -> Any:
        y = x.reshape(6, 2).reshape(3, 4).reshape(12)  # one reshape
        z = x.permute(1, 0).permute(1, 0)  # the identity
        return (2.0 * y).sum() + z.detach().sum() + (y * 2.0).sum()

    x = tp.randn(3, 4)
    graph = _graph(f, x)
    before = evaluate(graph, tp.eager, x)
    assert normalize(graph) > 0
    typecheck(graph)
    targets = [n.target for n in graph.nodes]
    assert targets.count("reshape") == 1 and "permute" not in targets and "stop_gradient" not in targets
    muls = [n for n in graph.nodes if n.target == "mul"]
    assert all(type(n.inputs[0]) is Var for n in muls)  # literals on the right
    eliminate_common_subexpressions(graph)
    assert sum(n.target == "mul" for n in graph.nodes) == 1  # 2*y and y*2 are one expression now
    _same_results(graph, before, [x])


def test_a_square_permutation_is_not_an_identity() -> None:
    x = tp.randn(3, 3)
    graph = _graph(lambda x: x.T * 1.0, x)
    normalize(graph)
    assert [n.target for n in graph.nodes] == ["permute", "mul"]


def test_constant_folding() -> None:
    graph = Graph()
    x = graph.add_input("x", _aval((4,), "float32"))
    c = graph.emit("add", graph.emit("mul", graph.emit("iota", length=4, dtype="float32"), 2.0), 1.0)
    graph.outputs = [graph.emit("add", x, c)]
    arg = tp.randn(4)
    before = evaluate(graph, tp.eager, arg)
    assert fold_constants(graph) == 3
    typecheck(graph)
    assert [n.target for n in graph.nodes] == ["add"]
    folded = [p for p in graph.inputs if p.kind == "constant"]
    assert len(folded) == 1 and folded[0].meta["plan"].kind == "const"
    np.testing.assert_array_equal(folded[0].source, [1.0, 3.0, 5.0, 7.0])
    _same_results(graph, before, [arg])


def test_folding_leaves_random_draws_and_large_results_alone() -> None:
    graph = Graph()
    key = graph.add_input("key", _aval((2,), "int64"), "constant", np.array([3, 4]))
    draw = graph.emit("random_uniform", key, shape=(3,), dtype="float32")
    big = graph.emit("full", shape=(1 << 17,), value=1.0, dtype="float32")
    graph.outputs = [draw, big]
    assert fold_constants(graph) == 0


def _aval(shape: tuple[int, ...], dtype: str) -> Any:
    from tensorplay.spec.aval import Aval
    return Aval(shape, dtype)


def test_cse_merges_duplicates_but_never_random_draws() -> None:
    graph = Graph()
    x = graph.add_input("x", _aval((3,), "float32"))
    key = graph.add_input("key", _aval((2,), "int64"), "random_key")
    a, b = graph.emit("exp", x), graph.emit("exp", x)
    r1 = graph.emit("random_normal", key, shape=(3,), dtype="float32")
    r2 = graph.emit("random_normal", key, shape=(3,), dtype="float32")
    graph.outputs = [graph.emit("add", a, b), graph.emit("add", r1, r2)]
    assert eliminate_common_subexpressions(graph) == 1
    typecheck(graph)
    assert [n.target for n in graph.nodes].count("exp") == 1
    assert [n.target for n in graph.nodes].count("random_normal") == 2


def test_dce_removes_what_nothing_reads() -> None:
    graph = Graph()
    x = graph.add_input("x", _aval((3,), "float32"))
    graph.emit("sin", graph.emit("cos", x))  # dead chain
    graph.outputs = [graph.emit("exp", x)]
    assert eliminate_dead_code(graph) == 2
    typecheck(graph)
    assert [n.target for n in graph.nodes] == ["exp"]


def test_decomposition_of_batch_norm() -> None:
    args = [tp.randn(4, 3, 5), tp.randn(3), tp.rand(3) + 0.5, tp.randn(3), tp.randn(3)]
    graph = _graph(lambda x, m, v, w, b: tp.eager.batch_norm(x, m, v, w, b, eps=1e-5), *args)
    before = evaluate(graph, tp.eager, *args)
    assert decompose(graph) == 1
    typecheck(graph)
    assert "batch_norm" not in [n.target for n in graph.nodes]
    _same_results(graph, before, args)
    assert decompose(graph, {}) == 0  # an empty table rewrites nothing


def test_fusion_groups_are_convex_and_take_reductions_as_epilogues() -> None:
    def f(x: Any, b: Any) -> Any:
        h = (x + b).relu()  # group 1
        s = h.sum(0)        # its epilogue
        e = h.exp()         # numpy (transcendental), reads the group
        return (e * 2.0 - h).sum(), s  # a second group after exp

    x, b = tp.randn(4, 3), tp.randn(3)
    graph = _graph(f, x, b)
    groups = group_pointwise(graph)
    assert len(groups) == 2
    first = [n.target for n in groups[0]]
    assert first[:2] == ["add", "relu"] and "reduce_sum" in first
    assert "exp" not in [n.target for g in groups for n in g]
    typecheck(graph)
    ids = {id(n): k for k, g in enumerate(groups) for n in g}
    assert all(n.meta.get("fusion_group") == ids.get(id(n)) for n in graph.nodes)


def test_independent_groups_a_node_reads_are_merged() -> None:
    """An optimizer-like update: the momentum chain and the scaled-gradient chain (read through a transpose)
    meet in one node; they become one kernel, never a group next to a lone numpy pass."""
    def update(buf: Any, grad_t: Any, p: Any, keep: Any) -> Any:
        scaled = grad_t.T * keep          # a chain of its own (its input is a view)
        scaled = scaled + 0.0 * keep
        new_buf = buf * 0.9 + scaled      # meets the momentum chain here
        return p - new_buf * 0.1, new_buf

    args = [tp.randn(6, 4), tp.randn(4, 6), tp.randn(6, 4), tp.tensor(np.float32(0.5))]
    graph = _graph(update, *args)
    before = evaluate(graph, tp.eager, *args)
    groups = group_pointwise(graph)
    assert len(groups) == 1, [[n.target for n in g] for g in groups]
    (group,) = groups
    order = {id(n): k for k, n in enumerate(graph.nodes)}
    assert [order[id(n)] for n in group] == sorted(order[id(n)] for n in group)  # in graph order
    pointwise = [n for n in graph.nodes if n.target in ("mul", "add", "sub") and tuple(n.outputs[0].shape) == (6, 4)]
    assert len(pointwise) == 6 and all(n.meta.get("fusion_group") == 0 for n in pointwise)
    typecheck(graph)
    _same_results(graph, before, args)
    compiled = tp.compile(update, options={"small_kernels": True})
    for got, want in zip(compiled(*args), update(*args)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, atol=1e-7)


def test_dependent_groups_are_not_merged() -> None:
    """A node reading two groups where one depends on the other (through a numpy node): merging would
    make a cycle, so they stay apart."""
    def f(x: Any) -> Any:
        a = x * 2.0 + 1.0
        b = a.exp() * 3.0 + 1.0   # depends on the first group through exp (not fusible)
        return a * b

    x = tp.randn(5, 3)
    graph = _graph(f, x)
    before = evaluate(graph, tp.eager, x)
    groups = group_pointwise(graph)
    assert [[n.target for n in g] for g in groups] == [["mul", "add"], ["mul", "add", "mul"]]
    typecheck(graph)
    _same_results(graph, before, [x])


def test_two_partner_groups_where_one_feeds_the_other_are_not_both_merged() -> None:
    """A node reading three groups of one shape: ``g`` (the condition) and two it is independent of, where the
    second depends on the first through a numpy node (exp). Merging all three made a cycle (tp.compile raised
    "the fusion groups form a cycle"); only partners independent of each other are merged."""
    def f(x: Any, y: Any) -> Any:
        a = x + 1.0
        c = a.exp() * 2.0
        cond = (y * 3.0) > 0.0
        return tp.where(cond, a, c)

    x, y = tp.randn(7, 3), tp.randn(7, 3)
    graph = _graph(f, x, y)
    before = evaluate(graph, tp.eager, x, y)
    group_pointwise(graph)
    typecheck(graph)
    _same_results(graph, before, [x, y])
    compiled = tp.compile(f)
    for _ in range(2):
        np.testing.assert_array_equal(compiled(x, y).numpy(), f(x, y).numpy())


def test_shape_propagation_annotates() -> None:
    graph, _ = block_graph()
    assert propagate_shapes(graph) == len(graph.nodes)
    for node in graph.nodes:
        assert node.meta["static_shape"] == tuple(node.outputs[0].shape)
        assert "shape_mismatch" not in node.meta


def test_every_fusible_primitive_has_kernel_code() -> None:
    """A primitive the fusion pass groups must have scalar code in the numba backend's kernels, or the
    compiled call fails when it is grouped (``round`` once did, after it joined the table)."""
    from tensorplay.compiler.numba_backend.kernels import KERNEL_CODE_TARGETS
    from tensorplay.compiler.passes.fusion import FUSIBLE

    assert FUSIBLE <= KERNEL_CODE_TARGETS, sorted(FUSIBLE - KERNEL_CODE_TARGETS)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_round_in_a_fused_group_rounds_half_to_even(dtype: str) -> None:
    x = tp.tensor(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, np.nan, np.inf], dtype=dtype))
    compiled = tp.compile(lambda v: (v * 1.0).round() + 0.0, options={"small_kernels": True})
    np.testing.assert_array_equal(compiled(x).numpy(), np.round(x.numpy()))
