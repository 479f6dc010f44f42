"""``to_onnx``: every registry sample of the inference op set, the MLP, the CNN and the transformer block
written as ONNX run in ONNX Runtime and in onnx's reference evaluator with eager's results (1e-5), pass the
full checker and strict shape inference (which reproduces the symbolic output dims), name inputs, dims and
outputs after the user's, and refuse what ONNX cannot express with the primitive and the user's line."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import tensorplay as tp  # noqa: E402
from tensorplay import nn  # noqa: E402
from tensorplay.export import Dim, export  # noqa: E402
from tensorplay.export.decomp import copy_graph, decompose  # noqa: E402
from tensorplay.export.onnx import ONNXExportError, to_onnx  # noqa: E402
from tensorplay.export.onnx.compositions import COMPOSITIONS  # noqa: E402
from tensorplay.export.onnx.lowering import COMPOSED, LOWERINGS, NOT_LOWERED  # noqa: E402
from tensorplay.interpreters.graph.evaluate import evaluate  # noqa: E402
from tensorplay.interpreters.graph.typecheck import typecheck  # noqa: E402
from tensorplay.spec.table import PRIMITIVES  # noqa: E402
from tests.onnx_helpers import (  # noqa: E402
    ORT_MISSING_KERNEL, ORT_REFUSED, assert_matches, check_written, declared_dims, run_ort, run_reference,
)
from tests.samples import SAMPLES, Sample  # noqa: E402
from tests.test_export_models import MODELS, _exported  # noqa: E402
from tests.test_graph_swap import sample_fn  # noqa: E402

INFERENCE = [s for s in SAMPLES if s.prim not in NOT_LOWERED]
RANDOM = [s for s in SAMPLES if PRIMITIVES[s.prim].random]

REFERENCE_GAPS = {
    "conv_transpose_nd-2d": "onnx's reference ConvTranspose does not implement group > 1",
    "conv_transpose_nd-zero-size": "onnx's reference ConvTranspose allocates its result inside the loop over the "
                                   "batch, so a batch of 0 returns None (AttributeError on .astype)",
    "log_softmax-inf-large": "onnx's reference LogSoftmax takes log(softmax), which underflows to -inf at -1000",
}
"""Samples the reference evaluator gets wrong on its own (they are checked against ONNX Runtime only)."""


def test_every_primitive_is_lowered_composed_or_refused_with_a_reason() -> None:
    groups = [set(LOWERINGS), set(COMPOSED), set(NOT_LOWERED)]
    assert set().union(*groups) == set(PRIMITIVES), set(PRIMITIVES) - set().union(*groups)
    assert sum(len(g) for g in groups) == len(PRIMITIVES)  # no primitive in two groups
    assert set(COMPOSITIONS) == set(COMPOSED)


def _float32(sample: Sample) -> Sample:
    args = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
                 for a in sample.args)
    return dataclasses.replace(sample, args=args)


def _written(sample: Sample) -> tuple[Any, Any, list[Any]]:
    """The sample's function, exported with every axis dynamic where the primitive allows and written as ONNX,
    and its example inputs, followed by the same inputs at other sizes of the dims (see :func:`_resized`)."""
    fn, tensors = sample_fn(sample)
    ep = export(fn, tuple(tensors), dynamic_shapes=[Dim.AUTO] * len(tensors) if tensors else None)
    model = to_onnx(ep)
    check_written(model)
    return fn, model, [[t.numpy() for t in tensors], *_resized(ep, [t.numpy() for t in tensors])]


def _resized(ep: Any, arrays: list[Any]) -> list[list[Any]]:
    """The inputs at two more sizes of every dynamic dim: its smallest (1, or its min) and two past the
    example, made by repeating the example's values (which keeps them in the primitive's domain)."""
    out = []
    for pick in (lambda info: max(info.min, 1), lambda info: info.hint + 2 if info.max is None else
                 min(info.hint + 2, info.max)):
        binding = {name: pick(info) for name, info in ep.dims.items()}
        if not binding:
            break
        shapes = [tuple(d if isinstance(d, int) else d.evaluate(binding) for d in p.shape)
                  for p in ep.graph.user_inputs]
        out.append([np.resize(a, shape) if a.size else np.ones(shape, a.dtype) for a, shape in zip(arrays, shapes)])
    return out


def _expected(fn: Any, arrays: list[Any]) -> np.ndarray[Any, Any] | None:
    """Eager's result, or ``None`` when eager refuses these inputs (an index now out of range)."""
    try:
        return np.asarray(fn(*(tp.tensor(a) for a in arrays)).numpy())
    except (IndexError, ValueError, tp.errors.TensorplayError):
        return None


@pytest.mark.parametrize("sample", INFERENCE, ids=lambda s: s.id)
def test_every_sample_of_the_inference_op_set_runs_in_onnx_runtime_and_the_reference_evaluator(
        sample: Sample) -> None:
    fn, model, variants = _written(sample)
    ort_fn, ort_model = fn, model
    for k, arrays in enumerate(variants):
        want = _expected(fn, arrays)
        if want is None:
            assert k > 0, "eager refuses the sample's own inputs"
            continue
        what = f"{sample.id} at {[a.shape for a in arrays]}"
        feeds = {i.name: a for i, a in zip(model.graph.input, arrays)}
        if sample.id not in REFERENCE_GAPS:
            assert_matches(run_reference(model, feeds)[0], want, f"{what}, reference evaluator")
        if ort_model is model:
            try:
                assert_matches(run_ort(model, feeds)[0], want, f"{what}, ONNX Runtime")
                continue
            except ORT_REFUSED:
                assert want.size == 0, "ONNX Runtime refuses non-empty inputs"  # it refuses some empty results
                continue
            except ORT_MISSING_KERNEL:
                assert any(a.dtype == np.float64 for a in arrays), "ONNX Runtime lacks a kernel for a float32 model"
                ort_fn, ort_model, _ = _written(_float32(sample))  # ONNX Runtime runs it in float32
        arrays = [a.astype(np.float32) if a.dtype == np.float64 else a for a in arrays]
        want = np.asarray(ort_fn(*(tp.tensor(a) for a in arrays)).numpy())
        try:
            got = run_ort(ort_model, {i.name: a for i, a in zip(ort_model.graph.input, arrays)})[0]
        except ORT_REFUSED:
            assert want.size == 0, "ONNX Runtime refuses non-empty inputs"
            continue
        assert_matches(got, want, f"{what}, ONNX Runtime (float32)")


@pytest.mark.parametrize("sample", RANDOM, ids=lambda s: s.id)
def test_random_primitives_are_refused_naming_the_primitive_and_line(sample: Sample) -> None:
    fn, tensors = sample_fn(sample)
    with pytest.raises(ONNXExportError, match=rf"primitive {sample.prim} at .*test_graph_swap.py:\d+.*random"):
        to_onnx(export(fn, tuple(tensors)))


def test_dropout_in_training_mode_is_refused_at_the_users_line() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))  # training mode
    ep = export(model, (tp.randn(2, 4),))
    with pytest.raises(ONNXExportError, match=r"random_uniform at .*dropout.*model.eval\(\)"):
        to_onnx(ep)
    model.eval()
    check_written(to_onnx(export(model, (tp.randn(2, 4),))))


def test_state_updates_are_refused() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))  # training mode: running statistics update
    with pytest.raises(ONNXExportError, match="updates state.*running_mean"):
        to_onnx(export(model, (tp.randn(5, 3),)))


# ---- compositions ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.prim in COMPOSED], ids=lambda s: s.id)
def test_compositions_reproduce_the_fused_primitive_in_tensorplay(sample: Sample) -> None:
    fn, tensors = sample_fn(sample)
    ep = export(fn, tuple(tensors))
    graph = copy_graph(ep.graph)
    assert decompose(graph, COMPOSITIONS) == 1
    typecheck(graph)
    assert sample.prim not in {n.target for n in graph.nodes}
    (got,) = evaluate(graph, tp.eager, *tensors)
    assert_matches(got.numpy(), np.asarray(fn(*tensors).numpy()), sample.id, atol=1e-12 if
                   got.numpy().dtype == np.float64 else 1e-6)


def test_smooth_max_pool_composition_keeps_infinities() -> None:
    x = np.zeros((1, 1, 4, 4), np.float32)
    x[0, 0, 0, 0] = np.inf  # each corner lies in one window only
    x[0, 0, 3, 3] = -np.inf
    x[0, 0, 0, 3] = np.nan

    def g(t: Any) -> Any:
        return tp.ops_of([t]).smooth_max_pool_nd(t, kernel_size=(2, 2), stride=(1, 1), padding=(0, 0), beta=2.0)

    t = tp.tensor(x)
    model = to_onnx(export(g, (t,)))
    want = g(t).numpy()
    assert np.isnan(want).any() and np.isinf(want).any()
    assert_matches(run_ort(model, {"t": x})[0], want, "inf and NaN windows")


# ---- the models ---------------------------------------------------------------------------------------------

SIZES = ((1, 1), (2, 7), (16, 64), (1, 64), (16, 1))  # every dynamic dim takes 1 and two other sizes


@pytest.mark.parametrize("opset", [None, 17])
@pytest.mark.parametrize("name", list(MODELS))
def test_models_match_eager_in_onnx_runtime_and_the_reference_evaluator(name: str, opset: int | None) -> None:
    model, ep = _exported(name)
    _, shape, _ = MODELS[name]
    written = to_onnx(ep, opset=opset)
    check_written(written)
    if opset is not None:
        assert [o.version for o in written.opset_import if o.domain == ""] == [opset]
    (x_info,) = written.graph.input
    assert x_info.name == "x"
    assert declared_dims(x_info) == list(shape("batch", "seq"))
    assert [o.name for o in written.graph.output] == ["output"]
    assert {i.name for i in written.graph.initializer} >= {n for n, _ in model.named_parameters()}
    session_input = None
    for b, s in SIZES:
        x = tp.randn(*shape(b, s))
        want = model(x).detach().numpy()
        session_input = {"x": x.numpy()}
        assert_matches(run_ort(written, session_input)[0], want, f"{name} at {shape(b, s)}, ONNX Runtime")
        assert_matches(run_reference(written, session_input)[0], want, f"{name} at {shape(b, s)}, reference")


def test_output_dims_follow_the_users_dims_through_derived_sizes() -> None:
    Batch, Seq = Dim("Batch", min=1, max=64), Dim("Seq", min=2, max=128)

    def f(tokens: Any, scale: Any) -> Any:
        b, s, d = tokens.shape
        flat = tokens.reshape(b * s, d) * scale
        pairs = flat.reshape(b, s, d)[:, 1:, :]  # Seq - 1
        return {"pairs": pairs, "total": flat.sum(-1)}

    ep = export(f, (tp.randn(3, 5, 4), tp.randn(4)), dynamic_shapes={"tokens": {0: Batch, 1: Seq}, "scale": None})
    written = ep.to_onnx()
    check_written(written)
    assert [i.name for i in written.graph.input] == ["tokens", "scale"]
    assert declared_dims(written.graph.input[0]) == ["Batch", "Seq", 4]
    outs = {o.name: declared_dims(o) for o in written.graph.output}
    assert outs == {"output_pairs": ["Batch", "Seq - 1", 4], "output_total": ["Batch*Seq"]}
    for b, s in ((1, 2), (3, 5), (7, 11)):
        x, w = tp.randn(b, s, 4), tp.randn(4)
        want = f(x, w)
        got = run_ort(written, {"tokens": x.numpy(), "scale": w.numpy()})
        assert_matches(got[0], want["pairs"].numpy(), "pairs")
        assert_matches(got[1], want["total"].numpy(), "total", atol=1e-5)


def test_path_writes_the_file(tmp_path: Any) -> None:
    import onnx
    _, ep = _exported("mlp")
    path = tmp_path / "mlp.onnx"
    returned = tp.export.to_onnx(ep, path)
    loaded = onnx.load(str(path))
    assert loaded.graph == returned.graph


def test_bitwise_before_opset_18_is_refused_naming_the_opset() -> None:
    def f(a: Any, b: Any) -> Any:
        return a & b
    ep = export(f, (tp.tensor(np.array([1, 2], np.int64)), tp.tensor(np.array([3, 3], np.int64))))
    with pytest.raises(ONNXExportError, match="bitwise_and at .*opset 18"):
        to_onnx(ep, opset=17)
    check_written(to_onnx(ep, opset=18))


def test_bad_opset_is_refused() -> None:
    _, ep = _exported("mlp")
    with pytest.raises(ValueError, match="opset must be an int from 17"):
        to_onnx(ep, opset=11)


def test_tensorplay_imports_without_onnx_and_to_onnx_says_what_to_install() -> None:
    code = ("import sys; sys.modules['onnx'] = None; sys.modules['onnxruntime'] = None\n"
            "import tensorplay as tp, tensorplay.export\n"
            "from tensorplay.export import Dim, export\n"
            "ep = export(lambda x: x * 2, (tp.randn(2),))\n"
            "try:\n    ep.to_onnx()\nexcept ImportError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert 'pip install "tensorplay[onnx]"' in out.stdout


# ---- derived operations (what models are written with) ----------------------------------------------------------

def _derived() -> dict[str, tuple[Any, tuple[Any, ...], list[dict[int, Any]]]]:
    import tensorplay.nn.functional as F
    B, S = Dim("B", min=1, max=32), Dim("S", min=2, max=64)
    tp.manual_seed(0)
    emb = nn.Embedding(11, 8).eval()
    mha = nn.MultiheadAttention(8, 2).eval()
    causal = tp.tensor(np.tril(np.ones((5, 5), bool)))
    return {
        "mean-over-dynamic-axes": (lambda x: x.mean(0) + x.mean(1).sum(), (tp.randn(5, 7),), [{0: B, 1: S}]),
        "divide-by-a-size": (lambda x: x / x.shape[0], (tp.randn(5, 7),), [{0: B}]),
        "softmax-along-dynamic-axes": (lambda x: x.softmax(0) + x.log_softmax(1), (tp.randn(5, 7),), [{0: B, 1: S}]),
        "cat-chunk": (lambda x: tp.cat([x, x * 2], 1).chunk(2, 1)[1], (tp.randn(5, 6),), [{0: B}]),
        "embedding": (lambda t: emb(t).sum(-1), (tp.tensor(np.array([[1, 2, 3], [4, 5, 10]])),), [{0: B, 1: S}]),
        "topk-sort": (lambda x: x.topk(2, dim=-1).values + x.sort(-1).values[..., :2], (tp.randn(4, 6),), [{0: B}]),
        "masked-attention": (lambda x: mha(x, x, x, attn_mask=causal, need_weights=False)[0], (tp.randn(2, 5, 8),),
                             [{0: B}]),
        "cross-entropy": (lambda x, y: F.cross_entropy(x, y), (tp.randn(6, 4), tp.tensor(np.array([0, 1, 2, 3, 1, 0]))),
                          [{0: B}, {0: B}]),
        "flatten-max": (lambda x: x.flatten(1).relu().max(-1).values, (tp.randn(3, 2, 4),), [{0: B}]),
    }


@pytest.mark.parametrize("name", list(_derived()))
def test_derived_operations_with_dynamic_dims_run_in_onnx_runtime_and_come_back(name: str) -> None:
    from tensorplay.export.onnx import from_onnx
    f, args, spec = _derived()[name]
    written = to_onnx(export(f, args, dynamic_shapes=spec))
    check_written(written)
    feeds = {i.name: a.numpy() for i, a in zip(written.graph.input, args)}
    want = np.asarray(f(*args).detach().numpy())
    assert_matches(run_ort(written, feeds)[0], want, f"{name}, ONNX Runtime")
    assert_matches(run_reference(written, feeds)[0], want, f"{name}, reference evaluator")
    assert_matches(np.asarray(from_onnx(written).module()(*args).detach().numpy()), want, f"{name}, round trip")


def test_inputs_keep_the_forwards_names_even_beside_a_weight_of_the_same_name() -> None:
    class Scale(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.x = nn.Parameter(tp.randn(3))

        def forward(self, x: Any, pair: Any) -> Any:
            return x * self.x + pair[0] - pair[1]

    model = Scale()
    args = (tp.randn(2, 3), (tp.randn(3), tp.randn(3)))
    written = to_onnx(export(model, args, dynamic_shapes={"x": {0: Dim("rows", min=1)}, "pair": None}))
    assert [i.name for i in written.graph.input] == ["x", "pair_0", "pair_1"]
    assert declared_dims(written.graph.input[0]) == ["rows", 3]
    feeds = {"x": args[0].numpy(), "pair_0": args[1][0].numpy(), "pair_1": args[1][1].numpy()}
    assert_matches(run_ort(written, feeds)[0], model(*args).detach().numpy(), "ONNX Runtime")


OPSET_17_FORMS = ("gelu", "bitwise_not", "reduce_max", "reduce_min", "argmax", "argmin")
"""The primitives whose lowering takes another form below opset 18 or 20."""


@pytest.mark.parametrize("sample", [s for s in INFERENCE if s.prim in OPSET_17_FORMS], ids=lambda s: s.id)
def test_the_older_forms_at_opset_17_match_eager(sample: Sample) -> None:
    fn, tensors = sample_fn(sample)
    model = to_onnx(export(fn, tuple(tensors)), opset=17)
    check_written(model)
    feeds = {i.name: t.numpy() for i, t in zip(model.graph.input, tensors)}
    want = np.asarray(fn(*tensors).numpy())
    assert_matches(run_reference(model, feeds)[0], want, f"{sample.id}, reference evaluator")
    try:
        assert_matches(run_ort(model, feeds)[0], want, f"{sample.id}, ONNX Runtime")
    except ORT_MISSING_KERNEL:
        assert any(t.numpy().dtype == np.float64 for t in tensors)
