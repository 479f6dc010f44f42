"""The rewrite API of the graph (what compiler passes use): users kept up to date, replace uses, erase,
insert before, dead-code elimination; every rewrite leaves a graph that type-checks, and the work is linear
in what a rewrite touches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.graph import Graph, Node, trace, typecheck
from tensorplay.spec.aval import Aval


def chain(n: int) -> Graph:
    g = Graph()
    x = g.add_input("x", Aval((4,), "float32"))
    v: Any = x
    for _ in range(n):
        v = g.emit("relu", v)
    g.outputs = [v]
    return g


def test_users_follow_every_change() -> None:
    g = Graph()
    x = g.add_input("x", Aval((3,), "float32"))
    a = g.emit("exp", x)
    b = g.emit("add", a, x)
    assert set(x.users) == {a.producer, b.producer} and set(a.users) == {b.producer}
    assert b.producer is not None
    b.producer.inputs = (x, x)
    assert set(a.users) == set() and list(x.users) == [a.producer, b.producer]
    g.outputs = [b]
    assert not g.is_used(a) and g.is_used(b)


def test_replace_all_uses_visits_users_outputs_and_mutations() -> None:
    g = Graph()
    x = g.add_input("x", Aval((3,), "float32"))
    a = g.emit("exp", x)
    b = g.emit("log", a)
    c = g.emit("mul", a, b)
    g.outputs = [a, c]
    assert a.producer is not None and b.producer is not None
    with g.inserting_before(b.producer):
        s = g.emit("sin", x)
    assert g.replace_all_uses(a, s) == 3  # log, mul and the output
    assert g.outputs[0] is s and set(s.users) == {b.producer, c.producer} and not a.users
    g.erase(a.producer)
    typecheck(g)
    assert [n.target for n in g.nodes] == ["sin", "log", "mul"]
    # a replacement defined after its new users is caught by the type checker
    late = g.emit("cos", x)
    g.replace_all_uses(s, late)
    with pytest.raises(tp.graph.GraphTypeError, match="defined later"):
        typecheck(g)


def test_erase_insert_before_and_dead_code() -> None:
    g = Graph()
    x = g.add_input("x", Aval((3,), "float32"))
    a = g.emit("exp", x)
    dead = g.emit("cos", a)
    b = g.emit("log", a)
    g.outputs = [b]
    assert a.producer is not None and b.producer is not None and dead.producer is not None
    with pytest.raises(ValueError, match="still used"):
        g.erase(a.producer)
    with g.inserting_before(b.producer):
        s = g.emit("sin", x)
        t = g.emit("add", s, 1.0)
    g.replace_all_uses(a, t)
    assert g.eliminate_dead_code() == 2  # cos, then exp (its last user gone)
    assert [n.target for n in g.nodes] == ["sin", "add", "log"]
    typecheck(g)
    out = tp.graph.evaluate(g, tp.eager, np.array([0.1, 0.2, 0.3], np.float32))[0]
    np.testing.assert_allclose(out.numpy(), np.log(np.sin([0.1, 0.2, 0.3]) + 1.0), rtol=1e-6)
    with pytest.raises(ValueError, match="already erased"):
        g.erase(dead.producer)


def test_rewrite_replaces_a_node_in_place_and_typechecks() -> None:
    gm = trace(lambda v: (v.relu() * 2.0).sum(), tp.tensor([-1.0, 2.0, -3.0]))
    g = gm.graph
    relu = next(n for n in g.nodes if n.target == "relu")

    def as_maximum(graph: Graph, node: Node) -> Any:
        return graph.emit("maximum", node.inputs[0], 0.0)

    g.rewrite(relu, as_maximum)
    typecheck(g)
    assert [n.target for n in g.nodes] == ["maximum", "mul", "reduce_sum"]
    gm.recompile()
    assert gm(tp.tensor([-1.0, 2.0, -3.0])).item() == 4.0


def test_a_pass_over_a_long_graph_walks_the_node_list_a_constant_number_of_times(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rewriting every node of a 3,000-node chain: no rewrite scans the graph (uses are found through
    ``users``, erasures and insertions are applied in one pass when the node list is read next)."""
    g = chain(3000)
    scans = {"compact": 0, "users": 0}
    original_compact, original_users = Graph._compact, Graph.users

    def counting_compact(self: Graph) -> None:
        scans["compact"] += 1
        original_compact(self)

    def counting_users(self: Graph) -> Any:
        scans["users"] += 1
        return original_users(self)

    monkeypatch.setattr(Graph, "_compact", counting_compact)
    monkeypatch.setattr(Graph, "users", counting_users)
    for node in list(g.nodes):
        g.rewrite(node, lambda graph, nd: graph.emit("maximum", nd.inputs[0], 0.0))
    assert scans == {"compact": 0, "users": 0}
    assert len(g.nodes) == 3000 and scans["compact"] == 1
    assert g.eliminate_dead_code() == 0
    typecheck(g)
    assert {n.target for n in g.nodes} == {"maximum"}
