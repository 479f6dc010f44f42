"""Swapping interpreters with tensorplay.testing.check_interpreters: every registry sample, every derived op
and every nn layer runs eagerly and through graphs -- recorded then evaluated; recorded, re-recorded
(inlined into a second graph) then evaluated; the generated ``GraphModule`` code; an execute-mode
recording (its recorded values and its replay) -- and every recorded graph is type-checked. Results
must be bitwise identical (the same kernels run every time). Then vmap (a batch against a loop) and the
gradient through every way (``tensorplay.func.vjp`` against the eager tape) agree to the default
tolerances."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.graph import Graph, GraphModule, Recorder, evaluate, trace, typecheck
from tensorplay.testing import assert_close, check_interpreters
from tests.samples import SAMPLES, Sample

AnyFn = Callable[..., Any]
GRAPH_WAYS = ["traced", "traced_execute", "graph_module", "retraced"]


@pytest.fixture(autouse=True)
def typecheck_every_recording(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every graph a test records (every ``trace``) is type-checked when its GraphModule is made."""
    original = GraphModule.__init__

    def init(self: GraphModule, graph: Graph, *args: Any, **kwargs: Any) -> None:
        typecheck(graph)
        original(self, graph, *args, **kwargs)

    monkeypatch.setattr(GraphModule, "__init__", init)


def reinline(graph: Graph, *args: Any) -> Graph:
    """Record a function that evaluates ``graph`` under the recorder: the graph inlined into another."""
    inlined = trace(lambda *xs: evaluate(graph, tp.ops_of(xs), *xs), *args).graph
    typecheck(inlined)
    return inlined


def swap(fn: AnyFn, *args: Any, vmap: bool = True) -> None:
    """Every graph way agrees bitwise with eager; vmap agrees to the default tolerances, and so do the
    gradients through every registered way, with ``atol=1e-4`` (float32 gradients here reach 80, and
    a batched sum rounds its small entries differently from one sample's)."""
    check_interpreters(fn, *args, interpreters=GRAPH_WAYS, rtol=0.0, atol=0.0, grads=False)
    with np.errstate(all="ignore"):
        check_interpreters(fn, *args, exclude=[] if vmap else ["vmap"], grad_atol=1e-4)


# ---- every registry sample ----------------------------------------------------------------------

def sample_fn(sample: Sample) -> tuple[AnyFn, list[Any]]:
    """``f(*tensors)`` calling the sample's primitive under the tensors' interpreter, and the tensors."""
    positions = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]

    def f(*tensors: Any) -> Any:
        args = list(sample.args)
        for i, t in zip(positions, tensors):
            args[i] = t
        return getattr(tp.ops_of(tensors), sample.prim)(*args, **sample.params)

    return f, [tp.from_numpy(sample.args[i]) for i in positions]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.id)
def test_registry_sample_three_ways(sample: Sample) -> None:
    fn, tensors = sample_fn(sample)
    if not tensors:  # creation primitives: record with an explicit recorder (a trace without inputs runs eagerly)
        recorder = Recorder()
        recorder.graph.outputs = [getattr(recorder, sample.prim)(**sample.params)._data]
        typecheck(recorder.graph)
        expected = fn()
        for what, graph in [("recorded", recorder.graph), ("re-recorded", reinline(recorder.graph))]:
            (got,) = evaluate(graph, tp.eager)
            assert_close(got, expected, rtol=0.0, atol=0.0, equal_nan=True, msg=f"{what}, evaluated")
            assert got.interpreter is tp.eager and not got.requires_grad
        return
    swap(fn, *tensors)
    gm = trace(fn, *tensors)
    assert [n.target for n in gm.graph.nodes] == [sample.prim]
    assert len(reinline(gm.graph, *tensors).nodes) == len(gm.graph.nodes)


# ---- every derived op ---------------------------------------------------------------------------

def _r(*shape: int, seed: int = 0, dtype: str = "float32", low: float = -2.0) -> Any:
    return tp.tensor(np.random.default_rng(seed).uniform(low, 2.0, size=shape).astype(dtype))


def _derived_cases() -> list[tuple[str, str, str, AnyFn, list[Any]]]:
    """(id, module, function, call, tensors): ``call(fn, ops, *tensors)``."""
    x, y = _r(2, 3, 4), _r(2, 3, 4, seed=1)
    w, b = _r(5, 4, seed=2), _r(5, seed=3)
    img, cw, cb = _r(2, 3, 3, 6, 6, seed=4), _r(4, 3, 3, 3, seed=5), _r(4, seed=6)
    twc = _r(3, 2, 3, 3, seed=7)
    seq = _r(2, 5, 8, seed=8)
    ws = [_r(8, 8, seed=9 + i) for i in range(4)]
    mask = tp.tensor(np.tril(np.ones((5, 5), dtype=bool)))
    P, Q = "tensorplay.derived", "tensorplay.prefix"
    return [
        ("reduce_sum", P, "reduce", lambda f, ops, a: f(ops, "reduce_sum", a, (0, -1), False), [x]),
        ("reduce_max_keepdim", P, "reduce", lambda f, ops, a: f(ops, "reduce_max", a, 1, True), [x]),
        ("mean", P, "mean", lambda f, ops, a: f(ops, a, (1, 2), False), [x]),
        ("var", P, "var", lambda f, ops, a: f(ops, a, -1, True, 1), [x]),
        ("argmax_flat", P, "arg_reduce", lambda f, ops, a: f(ops, "argmax", a, None, False), [x]),
        ("argmin_axis", P, "arg_reduce", lambda f, ops, a: f(ops, "argmin", a, 1, True), [x]),
        ("clamp", P, "clamp", lambda f, ops, a: f(ops, a, -0.5, 0.5), [x]),
        ("reshape", P, "reshape", lambda f, ops, a: f(ops, a, (6, -1)), [x]),
        ("flatten", P, "flatten", lambda f, ops, a: f(ops, a, 1, 2), [x]),
        ("permute", P, "permute", lambda f, ops, a: f(ops, a, (2, 0, 1)), [x]),
        ("transpose", P, "transpose", lambda f, ops, a: f(ops, a, 0, -1), [x]),
        ("unsqueeze", P, "unsqueeze", lambda f, ops, a: f(ops, a, -1), [x]),
        ("squeeze", P, "squeeze", lambda f, ops, a: f(ops, f.__globals__["unsqueeze"](ops, a, 1), None), [x]),
        ("expand", P, "expand", lambda f, ops, a: f(ops, a[:, :1], (-1, 5, -1)), [x]),
        ("matmul_batched", P, "matmul", lambda f, ops, a, c: f(ops, a, c.transpose(1, 2)), [x, y]),
        ("matmul_vector", P, "matmul", lambda f, ops, a, c: f(ops, a, c[0, 0]), [x, y]),
        ("getitem_basic", P, "getitem", lambda f, ops, a: f(ops, a, (slice(None), -1, slice(None, None, 2))), [x]),
        ("getitem_none_ellipsis", P, "getitem", lambda f, ops, a: f(ops, a, (None, Ellipsis, 1)), [x]),
        ("getitem_gather", P, "getitem", lambda f, ops, a: f(ops, a, (slice(None), [2, 0, 2])), [x]),
        ("linear", Q, "linear", lambda f, ops, a, c, d: f(ops, c, d, a), [x, w, b]),
        ("linear_no_bias", Q, "linear", lambda f, ops, a, c: f(ops, c, None, a), [x, w]),
        ("map", Q, "map", lambda f, ops, a: f(ops, 2, a, lambda t: ops.softmax(t, axis=-1)), [x]),
        ("conv", Q, "conv", lambda f, ops, a, c, d: f(ops, c, d, a, 1, 1), [img, cw, cb]),
        ("conv_stride_same", Q, "conv", lambda f, ops, a, c: f(ops, c, None, a, 1, "same"), [img, cw]),
        ("conv_transpose", Q, "conv_transpose", lambda f, ops, a, c: f(ops, c, None, a, 2, 1), [img, twc]),
        ("max_pool", Q, "max_pool", lambda f, ops, a: f(ops, a, 2), [img]),
        ("avg_pool", Q, "avg_pool", lambda f, ops, a: f(ops, a, 3, 2, 1), [img]),
        ("smooth_max_pool", Q, "smooth_max_pool", lambda f, ops, a: f(ops, a, 2, 1, 1, 4.0), [img]),
        ("layer_norm", Q, "layer_norm", lambda f, ops, a, c, d: f(ops, a, c, d), [seq, ws[0][0], ws[1][0]]),
        ("layer_norm_plain", Q, "layer_norm", lambda f, ops, a: f(ops, a, None, None), [seq]),
        ("attention", Q, "attention", lambda f, ops, a, *w4: f(ops, *w4, a, 2), [seq, *ws]),
        ("attention_mask", Q, "attention", lambda f, ops, a, m, *w4: f(ops, *w4, a, 4, m), [seq, mask, *ws]),
        ("dropout", Q, "dropout", lambda f, ops, a, k: f(ops, a, 0.3, key=k), [x, tp.tensor(np.array([5, 1]))]),
    ]


DERIVED = _derived_cases()


@pytest.mark.parametrize("case", DERIVED, ids=lambda c: c[0])
def test_derived_op_three_ways(case: tuple[str, str, str, AnyFn, list[Any]]) -> None:
    _, module, name, call, tensors = case
    fn = getattr(importlib.import_module(module), name)
    swap(lambda *ts: call(fn, tp.ops_of(ts), *ts), *tensors)


def test_tensor_methods_three_ways() -> None:
    x, y = _r(3, 4), _r(3, 4, seed=1)

    def f(a: Any, b: Any) -> Any:
        c = (a * 2.0 - b / 3.0) ** 2.0 + 1.5
        d = tp.where(a > b, c.exp().log1p(), -c.abs().sqrt())
        e = tp.cat([d, a.sigmoid()], dim=0).softmax(-1)
        return e.sum(), e.mean(0), e.max(1), e @ a.T, tp.stack([a, b], 1).clamp(-1, 1), (a < 0) & (b > 0)

    swap(f, x, y)


# ---- every nn layer ---------------------------------------------------------------------------

def _layers() -> list[tuple[str, AnyFn]]:
    """(id, make) where make() -> (module, inputs)."""
    def img(*shape: int) -> Any:
        return _r(*shape, seed=11)

    return [
        ("Linear", lambda nn: (nn.Linear(6, 4), [img(2, 3, 6)])),
        ("Conv1d", lambda nn: (nn.Conv1d(3, 4, 3, padding=1), [img(2, 3, 9)])),
        ("Conv2d", lambda nn: (nn.Conv2d(3, 4, 3, stride=2, padding=1), [img(2, 3, 8, 8)])),
        ("Conv3d", lambda nn: (nn.Conv3d(2, 3, 2), [img(1, 2, 4, 4, 4)])),
        ("ConvTranspose1d", lambda nn: (nn.ConvTranspose1d(3, 2, 3, stride=2), [img(2, 3, 5)])),
        ("ConvTranspose2d", lambda nn: (nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1), [img(2, 3, 5, 5)])),
        ("MaxPool1d", lambda nn: (nn.MaxPool1d(2), [img(2, 3, 8)])),
        ("MaxPool2d", lambda nn: (nn.MaxPool2d(3, stride=2, padding=1), [img(2, 3, 7, 7)])),
        ("AvgPool1d", lambda nn: (nn.AvgPool1d(3, stride=1, padding=1), [img(2, 3, 8)])),
        ("AvgPool2d", lambda nn: (nn.AvgPool2d(2), [img(2, 3, 6, 6)])),
        ("LayerNorm", lambda nn: (nn.LayerNorm(6), [img(2, 3, 6)])),
        ("BatchNorm1d-train", lambda nn: (nn.BatchNorm1d(3), [img(4, 3, 5)])),
        ("BatchNorm2d-train", lambda nn: (nn.BatchNorm2d(3), [img(4, 3, 5, 5)])),
        ("BatchNorm2d-eval", lambda nn: (nn.BatchNorm2d(3).eval(), [img(4, 3, 5, 5)])),
        ("Embedding", lambda nn: (nn.Embedding(10, 4), [tp.tensor(np.array([[1, 2, 9], [0, 0, 3]]))])),
        ("Dropout-train", lambda nn: (nn.Dropout(0.4), [img(3, 8)])),
        ("Dropout-eval", lambda nn: (nn.Dropout(0.4).eval(), [img(3, 8)])),
        ("MultiheadAttention", lambda nn: (nn.MultiheadAttention(8, 2), [img(2, 5, 8)])),
        ("ReLU", lambda nn: (nn.ReLU(), [img(3, 4)])),
        ("GELU", lambda nn: (nn.GELU(), [img(3, 4)])),
        ("Tanh", lambda nn: (nn.Tanh(), [img(3, 4)])),
        ("Sigmoid", lambda nn: (nn.Sigmoid(), [img(3, 4)])),
        ("SiLU", lambda nn: (nn.SiLU(), [img(3, 4)])),
        ("LeakyReLU", lambda nn: (nn.LeakyReLU(0.2), [img(3, 4)])),
        ("Softmax", lambda nn: (nn.Softmax(-1), [img(3, 4)])),
        ("LogSoftmax", lambda nn: (nn.LogSoftmax(1), [img(3, 4)])),
        ("Flatten", lambda nn: (nn.Flatten(), [img(2, 3, 4)])),
        ("Identity", lambda nn: (nn.Identity(), [img(2, 3)])),
        ("Sequential-MLP", lambda nn: (nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), [img(4, 6)])),
        ("Sequential-CNN", lambda nn: (nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                                     nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5)),
                                       [img(2, 3, 6, 6)])),
        ("CrossEntropyLoss", lambda nn: (nn.CrossEntropyLoss(), [img(4, 5), tp.tensor(np.array([0, 4, 2, 1]))])),
        ("NLLLoss", lambda nn: (nn.NLLLoss(), [img(4, 5).log_softmax(1), tp.tensor(np.array([0, 4, 2, 1]))])),
        ("MSELoss", lambda nn: (nn.MSELoss(), [img(4, 5), _r(4, 5, seed=12)])),
        ("L1Loss", lambda nn: (nn.L1Loss(), [img(4, 5), _r(4, 5, seed=12)])),
    ]


# vmap refuses a training batch norm (one statistics update per sample: see the test below)
_NO_VMAP = {"BatchNorm1d-train", "BatchNorm2d-train", "Sequential-CNN"}


@pytest.mark.parametrize("case", _layers(), ids=lambda c: c[0])
def test_nn_layer_three_ways(case: tuple[str, AnyFn]) -> None:
    """Buffer mutations (batch-norm statistics) are replayed by every way; dropout draws the same numbers."""
    nn = pytest.importorskip("tensorplay.nn")
    name, make = case
    try:
        tp.manual_seed(0)
        module, inputs = make(nn)
    except AttributeError as error:
        pytest.skip(f"layer not available: {error}")
    swap(module, *inputs, vmap=name not in _NO_VMAP)
    gm = trace(module, *inputs)
    params = {n for n, _ in module.named_parameters()}
    assert {p.name for p in gm.graph.inputs if p.kind == "parameter"} == params


def test_vmap_of_a_training_batch_norm_refuses_per_sample_statistics() -> None:
    tp.manual_seed(0)
    with pytest.raises(ValueError, match="one update per sample"):
        check_interpreters(tp.nn.BatchNorm1d(3), _r(4, 3, 5), interpreters=["vmap"], grads=False)
