"""``ExportedProgram``: signature, state, ``module()``, the flat contract, mutations, randomness, and running
under every interpreter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.func as TF
import tensorplay.nn.functional as F
from tensorplay import Tensor, nn
from tensorplay.export import (
    Dim, ExportedProgram, ExportGraphSignature, GraphSignature, InputKind, OutputKind, WeightType, export,
)
from tests.export_helpers import as_array, assert_same_bits


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(6, 2)
        self.register_buffer("offset", tp.full((2,), 0.5))
        self.register_buffer("scratch", tp.zeros(2), persistent=False)

    def forward(self, x: Tensor[Any, Any]) -> Tensor[Any, Any]:
        h = self.drop(self.bn(self.fc1(x)).relu())
        return self.fc2(h) + self.offset + self.scratch


def _net(train: bool) -> Net:
    tp.manual_seed(0)
    return Net().train(train)


def test_signature_state_and_views() -> None:
    model = _net(train=True)
    ep = export(model, (tp.randn(5, 4),), dynamic_shapes={"x": {0: Dim("batch", min=2)}})
    sig = ep.graph_signature
    assert sig.parameters == ["fc1.weight", "fc1.bias", "bn.weight", "bn.bias", "fc2.weight", "fc2.bias"]
    assert sig.buffers == [name for name, _ in model.named_buffers()]
    assert set(sig.buffers) == {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked", "offset", "scratch"}
    assert sig.non_persistent_buffers == ["scratch"]
    assert sig.user_inputs == ["x"] and sig.random_keys == ["key"]
    assert [s.kind for s in sig.input_specs] == [InputKind.PARAMETER] * 6 + [InputKind.BUFFER] * 5 + \
        [InputKind.USER_INPUT, InputKind.RANDOM_KEY]
    assert sig.buffers_to_mutate and set(sig.buffers_to_mutate.values()) == {
        "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}
    assert [s.kind for s in sig.output_specs][-1] is OutputKind.USER_OUTPUT
    assert sig.is_param("fc1.weight") and not sig.is_param("offset") and sig.is_buffer("offset")
    assert list(sig.get_param_to_buffer().values()) == sig.parameters + sig.buffers
    assert sig.assertion_dep_token is None and sig.backward_signature is None
    weights = sig.weight_types()
    assert weights["fc1.weight"] is WeightType.PARAMETER and weights["scratch"] is WeightType.OPTIONAL_STATE
    assert weights[next(iter(sig.buffers_to_mutate))] is WeightType.BUFFER_MUTATION
    assert set(ep.state_dict) == set(model.state_dict()) and set(ep.constants) == {"scratch"}
    assert [n for n, _ in ep.named_parameters()] == sig.parameters and len(list(ep.buffers())) == 5
    assert "def forward(ops" in ep.code and "Range constraints: {batch: [2, inf]}" in str(ep)
    # the signature can be edited on a deep copy; the compact form converts back
    clone = sig.clone()
    clone.replace_all_uses("x", "images")
    assert clone.user_inputs == ["images"] and sig.user_inputs == ["x"]
    compact = sig.compact()
    assert isinstance(compact, GraphSignature) and compact.non_persistent_buffers == ["scratch"]
    full = compact.to_export_graph_signature()
    assert isinstance(full, ExportGraphSignature) and full.parameters == sig.parameters
    assert full.non_persistent_buffers == ["scratch"] and full.user_inputs == ["x"]
    hook = clone.get_replace_hook()
    out = clone.user_outputs[0]
    hook(out, "renamed", "output")
    assert clone.user_outputs == ["renamed"]
    hook("renamed", "ignored", "some_node")
    assert clone.user_outputs == ["renamed"]


def test_the_program_is_a_snapshot_and_module_is_cached() -> None:
    model = _net(train=False)
    x = tp.randn(3, 4)
    ep = export(model, (x,), dynamic_shapes={"x": {0: Dim("batch")}})
    before = model(x)
    with tp.no_grad():
        model.fc2.weight.mul_(0.0)  # changing the model does not change the program
    assert_same_bits(ep.module()(x), before)
    m = ep.module()
    assert ep.module() is m
    ep.invalidate_unlifted()
    assert ep.module() is not m
    assert set(m.state_dict()) == set(model.state_dict())
    with pytest.raises(TypeError, match="not called directly"):
        ep(x)


def test_buffer_mutations_are_applied_by_module_and_returned_by_the_flat_contract() -> None:
    model = _net(train=True)
    model.drop.p = 0.0
    reference = _net(train=True)
    reference.drop.p = 0.0
    ep = export(model, (tp.randn(5, 4),), dynamic_shapes={"x": {0: Dim("batch", min=2)}})
    module = ep.module()
    for step in range(3):
        x = tp.randn(4 + step, 4)
        assert_same_bits(module(x), reference(x))
        for name, value in reference.named_buffers():
            assert_same_bits(module.get_buffer(name) if hasattr(module, "get_buffer") else dict(module.named_buffers())[name],
                  value)
    # the flat contract: state in, (new state..., outputs) out, nothing written
    state = {**ep.state_dict, **ep.constants}
    saved = {name: as_array(t).copy() for name, t in state.items()}
    x = tp.randn(6, 4)
    outs = ep.run_flat(ep.placeholder_values([x], state, keys=[tp.tensor(np.array([1, 2]))]))
    for name, t in state.items():
        assert np.array_equal(as_array(t), saved[name]), name
    expected = reference(x)
    specs = ep.graph_signature.output_specs
    assert len(outs) == len(specs) == 4
    buffers = dict(reference.named_buffers())
    for spec, value in zip(specs, outs):
        assert_same_bits(value, buffers[str(spec.target)] if spec.kind is OutputKind.BUFFER_MUTATION else expected)


def test_dropout_draws_fresh_keys_per_call_and_replays_with_the_same_key() -> None:
    model = _net(train=True)
    ep = export(model, (tp.randn(5, 4),), dynamic_shapes={"x": {0: Dim("batch", min=2)}})
    state = {**ep.state_dict, **ep.constants}
    x = tp.randn(8, 4)
    key = tp.tensor(np.array([7, 3]))
    a = ep.run_flat(ep.placeholder_values([x], state, keys=[key]))[-1]
    b = ep.run_flat(ep.placeholder_values([x], state, keys=[key]))[-1]
    c = ep.run_flat(ep.placeholder_values([x], state, keys=[tp.tensor(np.array([7, 4]))]))[-1]
    assert_same_bits(a, b)
    assert not np.array_equal(as_array(a), as_array(c))
    # module(): keys from the global generator, as eager draws them
    eager_model = _net(train=True)
    module = ep.module()
    tp.manual_seed(11)
    first = module(x)
    second = module(x)
    assert not np.array_equal(as_array(first), as_array(second))
    tp.manual_seed(11)
    assert_same_bits(eager_model(x), first)


def test_keyword_and_nested_arguments_and_static_values() -> None:
    def f(x: Tensor[Any, Any], pair: tuple[Tensor[Any], Tensor[Any]], *, scale: float, bias: Tensor[Any]) \
            -> dict[str, Any]:
        return {"out": x * pair[0] * scale + pair[1] + bias, "scale": scale}

    args = (tp.randn(3, 2), (tp.randn(2), tp.randn(2)))
    kwargs = {"scale": 2.0, "bias": tp.randn(2)}
    ep = export(f, args, kwargs, dynamic_shapes={"x": {0: Dim("n")}})
    new = (tp.randn(5, 2), (tp.randn(2), tp.randn(2)))
    got = ep.module()(*new, scale=2.0, bias=kwargs["bias"])
    expected = f(*new, scale=2.0, bias=kwargs["bias"])
    assert got["scale"] == 2.0
    assert_same_bits(got["out"], expected["out"])
    with pytest.raises(TypeError, match="static argument was 2.0 when traced, now 3.0"):
        ep.module()(*new, scale=3.0, bias=kwargs["bias"])
    with pytest.raises(TypeError, match="args must be a tuple"):
        export(f, [tp.randn(2)])  # type: ignore[arg-type]


def test_closures_become_constants_unless_strict() -> None:
    table = tp.randn(4)

    def f(x: Tensor[Any]) -> Tensor[Any]:
        return x + table

    ep = export(f, (tp.randn(4),))
    assert ep.graph_signature.lifted_tensor_constants == list(ep.tensor_constants)
    assert len(ep.tensor_constants) == 1
    x = tp.randn(4)
    expected = f(x)
    table.mul_(0.0)  # the program holds the value it was exported with
    assert_same_bits(ep.module()(x), expected)
    with pytest.raises(tp.GraphCaptureError, match=r"strict=True.*closure or a global, shape \[4\]"):
        export(f, (tp.randn(4),), strict=True)


def test_the_exported_module_runs_under_trace_grad_and_vmap() -> None:
    tp.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 1))
    ep = export(model, (tp.randn(4, 3),), dynamic_shapes={"x": {0: Dim("batch")}})
    module = ep.module()
    x = tp.randn(6, 3)
    gm = tp.graph.trace(lambda v: module(v).sum(), x)
    assert_same_bits(gm(x), model(x).sum())
    g_exported = TF.grad(lambda v: module(v).sum())(x)
    g_eager = TF.grad(lambda v: model(v).sum())(x)
    np.testing.assert_allclose(as_array(g_exported), as_array(g_eager), rtol=1e-6, atol=1e-7)
    per_row = TF.vmap(lambda row: module(row[None])[0])(x)
    np.testing.assert_allclose(as_array(per_row), as_array(model(x)), rtol=1e-6, atol=1e-6)
    loss = module(x).sum()
    loss.backward()  # the eager tape records through the program: gradients reach its parameters
    weight = dict(module.named_parameters())["0.weight"]
    assert weight.grad is not None and weight.grad.shape == (5, 3)


def test_export_joint_gives_gradient_and_loss_outputs() -> None:
    from tensorplay.export import export_joint
    tp.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    x, y = tp.randn(5, 3), tp.tensor(np.array([0, 1, 1, 0, 1]))

    def loss_fn(out: Tensor[Any, Any], target: Tensor[Any]) -> Tensor[()]:
        return F.cross_entropy(out, target)

    ep = export_joint(model, (x,), loss_fn, (y,), dynamic_shapes={"x": {0: Dim("batch")}, "target": {0: Dim("batch")}})
    backward = ep.graph_signature.backward_signature
    assert backward is not None
    assert sorted(backward.gradients_to_parameters.values()) == sorted(n for n, _ in model.named_parameters())
    loss, grads = ep.module()(x, y)
    reference = loss_fn(model(x), y)
    reference.backward()
    np.testing.assert_allclose(as_array(loss), as_array(reference), rtol=1e-6)
    for name, p in model.named_parameters():
        np.testing.assert_allclose(as_array(grads[name]), as_array(p.grad), rtol=1e-5, atol=1e-6, err_msg=name)
