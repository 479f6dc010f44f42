"""The documented contracts of compile and export that code written for other libraries relies on: the
error a bad backend raises, ``call_exported`` on user arguments, the decomposition table as a ``dict`` and
the graph signature's renaming and copying."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp


# ---- 9. a backend returning no callable is a TypeError -------------------------------------------------------

@pytest.mark.parametrize("returned", [42, None, "compiled", [lambda *a: a]])
def test_a_backend_returning_no_callable_raises_type_error(returned: Any) -> None:
    def backend(gm: Any, examples: Any, **kwargs: Any) -> Any:
        return returned

    compiled = tp.compile(lambda x: x * 2.0, backend=backend)
    with pytest.raises(TypeError, match=rf"returned a {type(returned).__name__}, not a callable"):
        compiled(tp.randn(3))


def test_backend_error_is_still_a_value_error_for_unknown_names() -> None:
    from tensorplay.compiler import BackendError
    assert issubclass(BackendError, TypeError) and issubclass(BackendError, ValueError)
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        tp.compile(lambda x: x, backend="nope")(tp.randn(2))


# ---- 10. call_exported takes the user's arguments ------------------------------------------------------------

class _Counter(tp.nn.Module):
    """A linear layer, a ReLU, another linear layer, and a buffer counting the calls (a state mutation)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = tp.nn.Sequential(tp.nn.Linear(3, 4), tp.nn.ReLU(), tp.nn.Linear(4, 2))
        self.register_buffer("calls", tp.zeros(1))

    def forward(self, x: Any) -> Any:
        self.calls.add_(1.0)
        return self.net(x)


def _torch_twin(seq: Any) -> Any:
    """The PyTorch ``Sequential`` of ``seq`` (Linear(3, 4), ReLU, Linear(4, 2)) with its weights."""
    import torch
    twin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    with torch.no_grad():
        for (_, mine), (_, theirs) in zip(seq.named_parameters(), twin.named_parameters()):
            theirs.copy_(torch.from_numpy(mine.detach().numpy().copy()))
    return twin


def test_call_exported_takes_the_user_arguments_and_fills_in_the_state() -> None:
    import torch
    tp.manual_seed(0)
    seq = tp.nn.Sequential(tp.nn.Linear(3, 4), tp.nn.ReLU(), tp.nn.Linear(4, 2))
    ep = tp.export.export(seq, (tp.randn(5, 3),), dynamic_shapes={"x": {0: tp.export.Dim("batch", min=1)}})
    call = tp.export.ExportedProgram.call_exported(ep)
    x = np.random.default_rng(1).standard_normal((7, 3)).astype(np.float32)
    (out,) = call(tp.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), _torch_twin(seq)(torch.from_numpy(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    # by keyword, as the exported function's argument is named
    (by_name,) = call(x=tp.tensor(x))
    np.testing.assert_array_equal(by_name.detach().numpy(), out.detach().numpy())
    # the user's arguments are checked as module() checks them
    with pytest.raises(TypeError):
        call(tp.tensor(x), tp.tensor(x))
    with pytest.raises(tp.export.InputConstraintError, match="axis 1"):
        call(tp.randn(2, 5))


def test_call_exported_returns_mutations_then_outputs_and_mutates_nothing() -> None:
    tp.manual_seed(0)
    model = _Counter()
    ep = tp.export.export(model, (tp.randn(2, 3),))
    before = {name: t.detach().numpy().copy() for name, t in {**ep.state_dict, **ep.constants}.items()}
    x = tp.randn(2, 3)
    new_calls, out = tp.export.ExportedProgram.call_exported(ep)(x)
    np.testing.assert_array_equal(new_calls.detach().numpy(), before["calls"] + 1.0)
    import torch
    expected = _torch_twin(model.net)(torch.from_numpy(x.detach().numpy().copy())).detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), expected, rtol=1e-5, atol=1e-6)
    for name, t in {**ep.state_dict, **ep.constants}.items():
        np.testing.assert_array_equal(t.detach().numpy(), before[name], err_msg=name)


# ---- 11. CustomDecompTable is a validated dict ----------------------------------------------------------------

def _builder(graph: Any, node: Any) -> Any:
    return node.inputs[0]


def test_custom_decomp_table_is_a_dict_with_its_methods() -> None:
    from tensorplay.export import CustomDecompTable, default_decompositions
    table = CustomDecompTable()
    assert isinstance(table, dict)
    assert dict(table) == default_decompositions()  # the defaults, by primitive name
    only = CustomDecompTable.fromkeys(["gelu", "layer_norm"], _builder)
    assert isinstance(only, CustomDecompTable) and dict(only) == {"gelu": _builder, "layer_norm_last_axis": _builder}
    assert only.setdefault("gelu", print) is _builder  # present: unchanged
    assert only.setdefault(tp.Tensor.sigmoid, _builder) is _builder and "sigmoid" in only
    name, builder = only.popitem()
    assert (name, builder) == ("sigmoid", _builder) and "sigmoid" not in only
    assert only.pop("layer_norm") is _builder and only.pop("layer_norm", None) is None
    assert only.get("softmax") is None and only.get("gelu") is _builder and only.get("not_a_primitive", 1) == 1
    merged = only | {"softmax": _builder}
    assert isinstance(merged, CustomDecompTable) and set(merged) == {"gelu", "softmax"} and set(only) == {"gelu"}
    only |= {"rsqrt": _builder}
    assert set(only) == {"gelu", "rsqrt"}
    copied = only.copy()
    copied.clear()
    assert isinstance(copied, CustomDecompTable) and set(only) == {"gelu", "rsqrt"}


def test_every_write_to_the_table_is_validated_and_a_failed_one_changes_nothing() -> None:
    import copy

    from tensorplay.export import CustomDecompTable
    table = CustomDecompTable({"gelu": _builder})
    writes = [
        lambda: table.__setitem__("relu", "not callable"),
        lambda: table.update({"softmax": _builder, "sigmoid": 3}),
        lambda: table.update([("softmaxx", _builder)]),
        lambda: table.update(gelu=None),
        lambda: table.setdefault("softmax"),
        lambda: table.__ior__({"softmax": None}),
        lambda: CustomDecompTable.fromkeys(["softmax"]),
        lambda: CustomDecompTable.fromkeys(["no_such_primitive"], _builder),
    ]
    for write in writes:
        with pytest.raises((TypeError, KeyError)):
            write()
        assert dict(table) == {"gelu": _builder}
    with pytest.raises(KeyError, match="did you mean softmax"):
        table.update({"softmaxx": _builder})
    # copies keep the entries (a removed default stays removed)
    defaults = CustomDecompTable()
    defaults.remove("attention")
    for other in (copy.copy(defaults), copy.deepcopy(defaults), defaults.copy()):
        assert "dot_product_attention" not in other and set(other) == set(defaults)


def test_run_decompositions_takes_a_table_built_with_dict_methods() -> None:
    from tensorplay.export import CustomDecompTable
    fn = lambda x: tp.sigmoid(x) * tp.nn.functional.gelu(x)  # noqa: E731
    ep = tp.export.export(fn, (tp.randn(4),))
    table = CustomDecompTable.fromkeys(["sigmoid"], CustomDecompTable()["sigmoid"])
    decomposed = ep.run_decompositions(table)
    targets = [n.target for n in decomposed.graph.nodes]
    assert "sigmoid" not in targets and "gelu" in targets
    import torch
    x = np.linspace(-3, 3, 4, dtype=np.float32)
    t = torch.from_numpy(x)
    np.testing.assert_allclose(decomposed.module()(tp.tensor(x)).numpy(),
                               (torch.sigmoid(t) * torch.nn.functional.gelu(t)).numpy(), rtol=1e-5, atol=1e-6)


# ---- 12. the signature renames across every spec; clone() is deep ------------------------------------------------

def _signature() -> Any:
    tp.manual_seed(0)
    model = _Counter()
    return tp.export.export(model, (tp.randn(2, 3),)).graph_signature


def test_replace_all_uses_renames_a_value_in_every_spec() -> None:
    sig = _signature()
    assert sig.is_param("net.0.weight") and sig.is_buffer("calls")
    clone = sig.clone()
    clone.replace_all_uses("net.0.weight", "w")
    assert clone.is_param("w") and not clone.is_param("net.0.weight")
    assert clone.inputs_to_parameters["w"] == "net.0.weight"  # the state it reads keeps its name
    assert clone.parameters == sig.parameters
    clone.replace_all_uses("calls", "count")
    assert clone.is_buffer("count") and not clone.is_buffer("calls")
    # an output value renamed: every output spec that names it follows
    (mutation,) = clone.buffers_to_mutate
    clone.replace_all_uses(mutation, "new_count")
    assert clone.buffers_to_mutate == {"new_count": "calls"}
    (out,) = clone.user_outputs
    clone.replace_all_uses(out, "y")
    assert clone.user_outputs == ["y"]
    # the original is untouched
    assert sig.is_param("net.0.weight") and not sig.is_param("w") and sig.is_buffer("calls")
    assert sig.buffers_to_mutate == {mutation: "calls"} and sig.user_outputs == [out]


def test_an_output_whose_target_is_a_user_input_follows_its_rename() -> None:
    from tensorplay.export import ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec
    from tensorplay.export.signature import TensorArgument
    sig = ExportGraphSignature([InputSpec(InputKind.USER_INPUT, TensorArgument("x"))],
                               [OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument("x_new"), "x"),
                                OutputSpec(OutputKind.USER_OUTPUT, TensorArgument("x"))])
    sig.replace_all_uses("x", "images")
    assert sig.user_inputs == ["images"] and sig.user_inputs_to_mutate == {"x_new": "images"}
    assert sig.user_outputs == ["images"]


def test_clone_is_deep() -> None:
    sig = _signature()
    before = str(sig)
    clone = sig.clone()
    clone.input_specs[0].arg.name = "edited"
    clone.input_specs[0].target = "edited"
    clone.input_specs.pop()
    clone.output_specs[0].arg.name = "edited"
    clone.output_specs.append(clone.output_specs[0])
    assert str(sig) == before and sig.input_specs[0].arg.name == "net.0.weight"
