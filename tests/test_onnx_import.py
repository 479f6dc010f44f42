"""``from_onnx``: tensorplay -> ONNX -> tensorplay reproduces every inference sample and the models; dims come
back as dims and initializers as parameters; the imported program runs evaluated, compiled, under grad and
vmap, and fine-tunes like the original; a model written by hand with onnx.helper (Gemm, Conv with bias,
Flatten, ReduceMean) matches ONNX Runtime; unsupported operators and custom domains are refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorplay as tp  # noqa: E402
import tensorplay.func as TF  # noqa: E402
import tensorplay.nn.functional as F  # noqa: E402
from tensorplay import optim  # noqa: E402
from tensorplay.export import Dim, InputConstraintError, export  # noqa: E402
from tensorplay.export.onnx import ONNXImportError, from_onnx, to_onnx  # noqa: E402
from tensorplay.export.onnx.lowering import NOT_LOWERED  # noqa: E402
from tests.onnx_helpers import assert_matches, run_ort  # noqa: E402
from tests.samples import SAMPLES, Sample  # noqa: E402
from tests.test_export_models import MODELS, _exported  # noqa: E402
from tests.test_graph_swap import sample_fn  # noqa: E402
from tests.test_onnx_export import _expected, _resized  # noqa: E402


def _array(t: Any) -> np.ndarray[Any, Any]:
    return np.asarray(t.detach().numpy())


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.prim not in NOT_LOWERED], ids=lambda s: s.id)
def test_every_inference_sample_survives_the_round_trip(sample: Sample) -> None:
    fn, tensors = sample_fn(sample)
    ep = export(fn, tuple(tensors), dynamic_shapes=[Dim.AUTO] * len(tensors) if tensors else None)
    back = from_onnx(to_onnx(ep))
    assert dict(back.range_constraints) == dict(ep.range_constraints)
    for arrays in [[t.numpy() for t in tensors], *_resized(ep, [t.numpy() for t in tensors])]:
        want = _expected(fn, arrays)
        if want is not None:
            got = back.module()(*(tp.tensor(a) for a in arrays))
            assert_matches(_array(got), want, f"{sample.id} at {[a.shape for a in arrays]}")


_IMPORTED: dict[str, Any] = {}


def _imported(name: str) -> tuple[Any, Any]:
    model, ep = _exported(name)
    if name not in _IMPORTED:
        _IMPORTED[name] = from_onnx(to_onnx(ep).SerializeToString())  # from the model's bytes
    return model, _IMPORTED[name]


@pytest.mark.parametrize("name", list(MODELS))
def test_models_round_trip_with_their_dims_and_parameters(name: str) -> None:
    model, back = _imported(name)
    _, ep = _exported(name)
    _, shape, _ = MODELS[name]
    assert dict(back.range_constraints) == dict(ep.range_constraints)
    originals = dict(model.named_parameters())
    imported = dict(back.named_parameters())
    assert set(imported) == set(originals)
    for key, p in originals.items():
        assert np.array_equal(_array(imported[key]), _array(p)), key
    for b, s in ((1, 1), (2, 7), (16, 64)):
        x = tp.randn(*shape(b, s))
        assert_matches(_array(back.module()(x)), _array(model(x)), f"{name} at {shape(b, s)}")
    with pytest.raises(InputConstraintError, match="batch=17 violates batch <= 16"):
        back.module()(tp.randn(*shape(17, 3)))  # the range came back with the dim


@pytest.mark.parametrize("name", list(MODELS))
def test_imported_models_run_compiled_and_under_grad_and_vmap(name: str) -> None:
    model, back = _imported(name)
    _, shape, _ = MODELS[name]
    imported = back.module()
    compiled = tp.compile(imported)
    x = tp.randn(*shape(3, 5))
    assert_matches(_array(compiled(x)), _array(model(x)), "compiled")

    def loss(m: Any) -> Any:
        return lambda t: (m(t) * m(t)).sum()
    g_back = TF.grad(loss(imported))(x)
    g_model = TF.grad(loss(model))(x)
    assert_matches(_array(g_back), _array(g_model), "grad", atol=1e-4)
    xs = tp.randn(2, *shape(3, 5))
    stacked = TF.vmap(imported)(xs)
    assert_matches(_array(stacked), np.stack([_array(model(xs[i])) for i in range(2)]), "vmap")


def test_an_imported_model_fine_tunes_like_the_original() -> None:
    model, back = _imported("mlp")
    imported = back.module()
    rng = np.random.default_rng(0)
    x = tp.tensor(rng.standard_normal((16, 20)).astype(np.float32))
    y = tp.tensor(rng.integers(0, 5, 16))
    import copy
    original = copy.deepcopy(model)
    losses = []
    for net in (original, imported):
        opt = optim.SGD(list(net.parameters()), lr=0.1)
        run = []
        for _ in range(5):
            opt.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            run.append(float(loss.item()))
        losses.append(run)
    assert losses[0][-1] < losses[0][0]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    tuned = dict(imported.named_parameters())
    for key, p in original.named_parameters():
        np.testing.assert_allclose(_array(tuned[key]), _array(p), rtol=1e-5, atol=1e-6)


# ---- a model written with onnx.helper -----------------------------------------------------------------------------

def _hand_written() -> Any:
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "conv.w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "conv.b")
    fc = numpy_helper.from_array(rng.standard_normal((5, 4 * 5 * 5)).astype(np.float32), "fc.w")
    fc_b = numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "fc.b")
    nodes = [
        helper.make_node("Conv", ["x", "conv.w", "conv.b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], name="fc", transB=1, alpha=0.5),
        helper.make_node("ReduceMean", ["logits"], ["m"], name="mean", axes=[1], keepdims=1),
        helper.make_node("Sub", ["logits", "m"], ["centred"], name="centre"),
    ]
    graph = helper.make_graph(nodes, "handmade", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 5, 5])],
                              [helper.make_tensor_value_info("centred", TensorProto.FLOAT, ["N", 5])],
                              initializer=[w, b, fc, fc_b])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def test_a_model_written_with_onnx_helper_matches_onnx_runtime() -> None:
    model = _hand_written()
    back = from_onnx(model)
    assert list(back.range_constraints) == ["N"]
    assert {name for name, _ in back.named_parameters()} == {"conv.w", "conv.b", "fc.w", "fc.b"}
    for n in (1, 3, 8):
        x = np.random.default_rng(n).standard_normal((n, 2, 5, 5)).astype(np.float32)
        want = run_ort(model, {"x": x})[0]
        assert_matches(_array(back.module()(tp.tensor(x))), want, f"N={n}")


def _one_node(op_type: str, domain: str = "") -> Any:
    node = helper.make_node(op_type, ["x"], ["y"], name="the_node", domain=domain or None)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(graph, opset_imports=opsets)


def test_an_unsupported_operator_is_refused_with_its_type_and_node_name() -> None:
    with pytest.raises(ONNXImportError, match=r"node 'the_node' \(HardSwish\).*'HardSwish' has no tensorplay"):
        from_onnx(_one_node("HardSwish"))


def test_a_custom_domain_is_refused_with_the_node_name() -> None:
    with pytest.raises(ONNXImportError, match=r"node 'the_node' \(FusedThing\) is of the custom domain 'com.example'"):
        from_onnx(_one_node("FusedThing", "com.example"))


def test_an_old_opset_is_refused() -> None:
    model = _one_node("Relu")
    model.opset_import[0].version = 11
    with pytest.raises(ONNXImportError, match="opset 11.*13 or newer"):
        from_onnx(model)


def test_a_path_is_read(tmp_path: Any) -> None:
    model, ep = _exported("mlp")
    path = tmp_path / "mlp.onnx"
    ep.to_onnx(path)
    back = tp.export.from_onnx(path)
    x = tp.randn(4, 20)
    assert_matches(_array(back.module()(x)), _array(model(x)), "from a path")


def test_buffers_come_back_as_buffers_and_unread_state_is_left_out() -> None:
    from tensorplay import nn
    tp.manual_seed(5)
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    model(tp.randn(8, 4))  # training mode: the running statistics move away from 0 and 1
    model.eval()
    ep = export(model, (tp.randn(2, 4),), dynamic_shapes={"x": {0: Dim("B", min=1)}})
    written = to_onnx(ep)
    assert "1.num_batches_tracked" not in {i.name for i in written.graph.initializer}  # nothing reads it
    back = from_onnx(written)
    assert sorted(n for n, _ in back.named_parameters()) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    assert sorted(n for n, _ in back.named_buffers()) == ["1.running_mean", "1.running_var"]
    x = tp.randn(5, 4)
    assert_matches(_array(back.module()(x)), _array(model(x)), "batch norm in eval mode")
    assert_matches(run_ort(written, {"x": x.numpy()})[0], _array(model(x)), "ONNX Runtime")


def _torch_models() -> dict[str, tuple[Any, tuple[int, ...]]]:
    import torch
    torch.manual_seed(0)
    return {
        "mlp": (torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)), (4, 6)),
        "cnn": (torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                    torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 5)), (2, 1, 8, 8)),
        "layernorm-gelu-softmax": (torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.GELU(),
                                                       torch.nn.Softmax(-1)), (4, 6)),
    }


@pytest.mark.parametrize("name", ["mlp", "cnn", "layernorm-gelu-softmax"])
def test_models_pytorch_exports_to_onnx_import_and_match_pytorch(name: str) -> None:
    import io
    import warnings

    import torch
    model, shape = _torch_models()[name]
    model.eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, (torch.randn(*shape),), buffer, input_names=["x"], output_names=["y"],
                              dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, dynamo=False, opset_version=17)
        except Exception as error:  # pragma: no cover - PyTorch's exporter needs extras of its own
            pytest.skip(f"torch.onnx.export is not available here: {error}")
    back = from_onnx(buffer.getvalue())
    assert list(back.range_constraints) == ["N"]
    assert {n for n, _ in back.named_parameters()} == {n for n, _ in model.named_parameters()}
    for n in (1, 3, 5):
        x = np.random.default_rng(n).standard_normal((n, *shape[1:])).astype(np.float32)
        want = model(torch.from_numpy(x)).detach().numpy()
        assert_matches(_array(back.module()(tp.tensor(x))), want, f"{name} at N={n}")


def test_pooling_constants_and_inference_dropout_written_by_hand_match_onnx_runtime() -> None:
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Dropout", ["f"], ["d"], name="dropout"),  # no training_mode: inference, the identity
        helper.make_node("Constant", [], ["c"], name="const", value=two),
        helper.make_node("Mul", ["d", "c"], ["m"], name="double"),
        helper.make_node("Shape", ["x"], ["s"], name="shape", start=0, end=1),
        helper.make_node("Constant", [], ["cols"], name="cols", value_ints=[3]),
        helper.make_node("Concat", ["s", "cols"], ["target"], name="target", axis=0),
        helper.make_node("Expand", ["m"], ["y"], name="expand"),  # y: [N, 3], the target shape's own
    ]
    nodes[-1].input.append("target")
    graph = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    back = from_onnx(model)
    for n in (1, 2, 6):
        x = np.random.default_rng(n).standard_normal((n, 3, 4, 5)).astype(np.float32)
        assert_matches(_array(back.module()(tp.tensor(x))), run_ort(model, {"x": x})[0], f"N={n}")


def test_expand_to_a_constant_size_gives_that_size_where_the_input_dim_is_symbolic() -> None:
    # x: [A, B] with A in [1, 2] broadcast to [2, 2, B]: Expand's 2 is the output's size whatever A is (A = 1
    # broadcasts), and the 0 and 1 of the zero-size sample likewise (see the round trip of broadcast_to-zero-size)
    ep = export(lambda x: x.broadcast_to((2, 2, x.shape[1])), (tp.tensor(np.ones((2, 3))),),
                dynamic_shapes=[{0: Dim("A", min=1, max=2), 1: Dim("B")}])
    model = to_onnx(ep)
    back = from_onnx(model)
    for dims in [(1, 3), (2, 0), (1, 1)]:
        x = np.random.default_rng(sum(dims)).standard_normal(dims)
        want = np.broadcast_to(x, (2, 2, dims[1]))
        assert_matches(_array(back.module()(tp.tensor(x))), want, f"x of shape {dims}")
        assert_matches(run_ort(model, {model.graph.input[0].name: x})[0], want, f"x of shape {dims}, ONNX Runtime")


def test_dropout_in_training_mode_is_refused_with_the_node_name() -> None:
    training = helper.make_tensor("training", TensorProto.BOOL, [], [True])
    node = helper.make_node("Dropout", ["x", "", "training"], ["y"], name="drop")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], initializer=[training])
    with pytest.raises(ONNXImportError, match=r"node 'drop' \(Dropout\): Dropout in training mode"):
        from_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))


@pytest.mark.parametrize("name", list(MODELS))
def test_models_written_at_opset_17_round_trip(name: str) -> None:
    model, ep = _exported(name)
    _, shape, _ = MODELS[name]
    back = from_onnx(to_onnx(ep, opset=17))  # Gelu composed, reduction axes as attributes
    for b, s in ((1, 1), (2, 7), (16, 64)):
        x = tp.randn(*shape(b, s))
        assert_matches(_array(back.module()(x)), _array(model(x)), f"{name} at {shape(b, s)}")
