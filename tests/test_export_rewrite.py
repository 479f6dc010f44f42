"""``run_decompositions`` with a ``CustomDecompTable``, and ``unflatten`` with a ``FlatArgsAdapter``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import Tensor, nn
from tensorplay.export import (
    CustomDecompTable, Dim, ExportedProgram, FlatArgsAdapter, UnflattenedModule, default_decompositions, export,
    unflatten,
)
from tensorplay.graph import Graph, Node, typecheck
from tensorplay.pytree import Structure
from tests.export_helpers import as_array


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.proj = nn.Linear(8, 4)

    def forward(self, x: Tensor[Any, Any, Any]) -> Tensor[Any, Any, Any]:
        return F.softmax(self.proj(F.gelu(self.norm(x))), dim=-1)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(3, 8)
        self.attn = nn.MultiheadAttention(8, 2)
        self.head = Head()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: Tensor[Any, Any, Any]) -> Tensor[Any, Any, Any]:
        h = self.embed(x).sigmoid()
        h = h + self.attn(h, need_weights=False)[0]
        out = self.head(h)
        return self.bn(out.transpose(1, 2)).transpose(1, 2)


def _program(train: bool = False) -> tuple[Model, ExportedProgram]:
    tp.manual_seed(0)
    model = Model().train(train)
    ep = export(model, (tp.randn(2, 5, 3),), dynamic_shapes={"x": {0: Dim("b", min=2), 1: Dim("s", min=1)}})
    return model, ep


def test_the_table_validates_and_can_be_trimmed() -> None:
    table = CustomDecompTable()
    assert set(table) == set(default_decompositions())
    assert "layer_norm" in table and "layer_norm_last_axis" in table and tp.Tensor.sigmoid in table
    with pytest.raises(TypeError, match="must be a builder"):
        table["relu"] = "not callable"  # type: ignore[assignment]
    with pytest.raises(KeyError, match="no primitive 'softmaxx' to decompose; did you mean softmax"):
        table["softmaxx"] = lambda g, n: n.inputs[0]
    entry = table.remove("attention")
    assert entry is default_decompositions()["dot_product_attention"]
    assert "dot_product_attention" not in table.materialize()
    with pytest.raises(KeyError, match="no entry"):
        table.remove("dot_product_attention")
    assert isinstance(table.materialize(), dict) and "gelu" in table.materialize()


def test_default_decompositions_rewrite_a_copy_that_agrees_with_the_original() -> None:
    model, ep = _program()
    before = [n.target for n in ep.graph.nodes]
    decomposed = ep.run_decompositions()
    assert [n.target for n in ep.graph.nodes] == before  # the original is untouched
    targets = {n.target for n in decomposed.graph.nodes}
    assert not targets & set(default_decompositions())
    typecheck(decomposed.graph)
    for b, s in ((2, 1), (3, 7)):
        x = tp.randn(b, s, 3)
        np.testing.assert_allclose(as_array(decomposed.module()(x)), as_array(model(x)), rtol=2e-5, atol=2e-6)
    assert decomposed.graph_signature.user_outputs[0] in {str(n.out.meta["name"]) for n in decomposed.graph.nodes}


def test_targets_without_an_entry_are_untouched_and_custom_builders_run() -> None:
    model, ep = _program()
    table = CustomDecompTable({})

    def sigmoid_via_tanh(graph: Graph, node: Node) -> Any:
        half = graph.emit("mul", node.inputs[0], 0.5)
        return graph.emit("add", graph.emit("mul", graph.emit("tanh", half), 0.5), 0.5)

    table[tp.Tensor.sigmoid] = sigmoid_via_tanh
    decomposed = ep.run_decompositions(table)
    targets = [n.target for n in decomposed.graph.nodes]
    assert "sigmoid" not in targets and "tanh" in targets
    assert targets.count("softmax") == [n.target for n in ep.graph.nodes].count("softmax")
    x = tp.randn(2, 4, 3)
    np.testing.assert_allclose(as_array(decomposed.module()(x)), as_array(model(x)), rtol=1e-5, atol=1e-6)
    with pytest.raises(tp.GraphCaptureError, match="the decomposition of softmax gives"):
        ep.run_decompositions({"softmax": lambda graph, node: graph.emit("reduce_sum", node.inputs[0], axes=(-1,),
                                                                         keepdims=False)})


def test_decomposing_back_into_itself_is_reported() -> None:
    _, ep = _program()
    with pytest.raises(tp.GraphCaptureError, match="decomposes back into itself"):
        ep.run_decompositions({"sigmoid": lambda graph, node: graph.emit("sigmoid", node.inputs[0])})


def test_unflatten_keeps_the_hierarchy_and_each_submodule_runs() -> None:
    model, ep = _program()
    flat = unflatten(ep)
    assert isinstance(flat, UnflattenedModule)
    assert [n for n, _ in flat.named_modules()] == [n for n, _ in model.named_modules()]
    assert set(flat.state_dict()) == set(model.state_dict())
    x = tp.randn(3, 6, 3)
    assert np.array_equal(as_array(flat(x)), as_array(ep.module()(x)))
    h = tp.randn(3, 6, 8)
    assert np.array_equal(as_array(flat.head(h)), as_array(model.head(h)))
    assert np.array_equal(as_array(flat.head.proj(h)), as_array(model.head.proj(h)))
    assert "InterpreterModule[Head]" in repr(flat)
    # after decompositions the hierarchy is the same and agrees with the decomposed program
    decomposed = unflatten(ep.run_decompositions())
    assert [n for n, _ in decomposed.named_modules()] == [n for n, _ in model.named_modules()]
    np.testing.assert_allclose(as_array(decomposed(x)), as_array(model(x)), rtol=2e-5, atol=2e-6)


def test_unflatten_applies_buffer_mutations_like_the_flat_program() -> None:
    model, ep = _program(train=True)
    flat = unflatten(ep)
    reference = _program(train=True)[0]
    for b in (2, 5):
        x = tp.randn(b, 3, 3)
        assert np.array_equal(as_array(flat(x)), as_array(reference(x)))
    for name, buffer in reference.named_buffers():
        assert np.array_equal(as_array(dict(flat.named_buffers())[name]), as_array(buffer)), name
    del model


class PairToSingle(FlatArgsAdapter):
    """Calls with ``(x, extra)`` run the program exported for ``(x,)``: the extra argument is dropped."""

    def adapt(self, target_spec: Structure, input_spec: Structure, input_args: list[Any]) -> list[Any]:
        assert target_spec.n_tensors == 1
        return input_args[:1]


def test_a_flat_args_adapter_adapts_other_argument_layouts() -> None:
    model, ep = _program()
    x = tp.randn(2, 3, 3)
    with pytest.raises(TypeError, match=r"Model: expected at most 1 positional argument\(s\) \(x\), got 2"):
        unflatten(ep)(x, tp.zeros(1))
    adapted = unflatten(ep, flat_args_adapter=PairToSingle())
    assert np.array_equal(as_array(adapted(x, tp.zeros(1))), as_array(model(x)))
