"""Symbolic dims through every shape rule: each registry sample is recorded with its input sizes
made symbolic (one name per distinct size), the recorded output aval evaluated at the example
sizes must be the eager result's shape, and the graph must run on the examples bit for bit. Plus
the geometry formulas of conv/pool over a symbolic ``H`` and whole models with a dynamic batch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.graph import SymDim, sym, trace, typecheck
from tests.samples import SAMPLES, Sample
from tests.test_graph_swap import sample_fn
from tests.test_graph_swap import typecheck_every_recording  # noqa: F401 (autouse fixture)

TENSOR_SAMPLES = [s for s in SAMPLES if any(isinstance(a, np.ndarray) for a in s.args)]


def evaluated(shape: tuple[Any, ...], binding: dict[str, int]) -> tuple[int, ...]:
    return tuple(d.evaluate(binding) if isinstance(d, SymDim) else d for d in shape)


@pytest.mark.parametrize("sample", TENSOR_SAMPLES, ids=lambda s: s.id)
def test_symbolic_dims_through_every_shape_rule(sample: Sample) -> None:
    fn, tensors = sample_fn(sample)
    # random keys are [2] by definition: their size stays static
    symbolic = not sample.prim.startswith("random")
    dynamic = {i: {a: f"d{n}" for a, n in enumerate(t.shape) if n >= 2 and symbolic}
               for i, t in enumerate(tensors)}
    expected = fn(*tensors)
    gm = trace(fn, *tensors, dynamic=dynamic)
    typecheck(gm.graph)
    binding = {f"d{n}": n for t in tensors for n in t.shape}
    (out,) = gm.graph.outputs
    assert evaluated(out.aval.shape, binding) == tuple(expected.shape), out.aval
    assert out.aval.dtype == expected.dtype.name
    got = gm(*tensors)
    assert np.array_equal(got.numpy(), expected.numpy(), equal_nan=True)


def test_symbolic_dims_appear_in_outputs() -> None:
    """The sweep above really is symbolic: most outputs keep symbolic dims."""
    count = 0
    for sample in TENSOR_SAMPLES:
        if sample.prim.startswith("random"):
            continue
        fn, tensors = sample_fn(sample)
        dynamic = {i: {a: f"d{n}" for a, n in enumerate(t.shape) if n >= 2} for i, t in enumerate(tensors)}
        gm = trace(fn, *tensors, dynamic=dynamic)
        count += any(isinstance(d, SymDim) for d in gm.graph.outputs[0].aval.shape)
    assert count > 0.7 * len(TENSOR_SAMPLES)


@pytest.mark.parametrize("k,s,p,d", [(3, 1, 1, 1), (3, 2, 1, 1), (5, 2, 2, 1), (3, 3, 0, 2), (2, 2, 0, 1)])
def test_conv_and_pool_geometry_over_a_symbolic_height(k: int, s: int, p: int, d: int) -> None:
    H = sym("H")
    x = tp.randn(1, 2, 11, 4)
    w = tp.randn(3, 2, k, 1)
    gm = trace(lambda x: x._ops.conv_nd(x, w, stride=(s, 1), padding=(p, 0), dilation=(d, 1), groups=1),
               x, dynamic={0: {2: "H"}})
    expected = (H + 2 * p - d * (k - 1) - 1) // s + 1
    assert gm.graph.outputs[0].aval.shape == (1, 3, expected, 4)
    for h in range(d * (k - 1) + 1, 14):
        assert expected.evaluate({"H": h}) == (h + 2 * p - d * (k - 1) - 1) // s + 1
        xs = tp.randn(1, 2, h, 4)
        assert gm(xs).shape[2] == expected.evaluate({"H": h})
    if p <= k // 2:
        pool = trace(lambda x: x._ops.max_pool_nd(x, kernel_size=(k, 1), stride=(s, 1), padding=(p, 0)),
                     x, dynamic={0: {2: "H"}})
        assert pool.graph.outputs[0].aval.shape[2] == (H + 2 * p - k) // s + 1
    tw = tp.randn(2, 3, k, 1)
    tconv = trace(lambda x: x._ops.conv_transpose_nd(x, tw, stride=(s, 1), padding=(p, 0), output_padding=(0, 0),
                                                 dilation=(d, 1), groups=1), x, dynamic={0: {2: "H"}})
    assert tconv.graph.outputs[0].aval.shape[2] == (H - 1) * s - 2 * p + d * (k - 1) + 1


def test_conv_output_size_prints_like_the_formula() -> None:
    H = sym("H")
    x = tp.randn(2, 1, 9, 9)
    w = tp.randn(4, 1, 3, 3)
    gm = trace(lambda x: x._ops.conv_nd(x, w, stride=(2, 2), padding=(1, 1), dilation=(1, 1), groups=1),
               x, dynamic={0: {2: "H", 3: "W"}})
    assert str(gm.graph.outputs[0].aval) == "float32[2,4,(H + 1)//2,(W + 1)//2]"
    assert gm.graph.outputs[0].aval.shape[2] == (H + 2 * 1 - 3) // 2 + 1


def test_models_with_a_dynamic_batch() -> None:
    nn = pytest.importorskip("tensorplay.nn")
    tp.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(4 * 4 * 4, 10)).eval()
    gm = trace(cnn, tp.randn(3, 1, 8, 8), dynamic={0: {0: "B"}})
    typecheck(gm.graph)
    assert gm.graph.outputs[0].aval.shape == (sym("B"), 10)
    for batch in (1, 2, 5):
        x = tp.randn(batch, 1, 8, 8)
        assert np.array_equal(gm(x).detach().numpy(), cnn(x).detach().numpy())

    attn = nn.MultiheadAttention(8, 2)
    gm = trace(lambda x: attn(x, x, x)[0], tp.randn(2, 5, 8), dynamic={0: {0: "B", 1: "T"}})
    typecheck(gm.graph)
    assert gm.graph.outputs[0].aval.shape == (sym("B"), sym("T"), 8)
    x = tp.randn(3, 7, 8)
    assert np.array_equal(gm(x).detach().numpy(), attn(x, x, x)[0].detach().numpy())


def test_reshape_with_minus_one_and_mean_over_a_symbolic_axis() -> None:
    def f(x: Any) -> Any:
        return x.reshape(-1, 4).mean(0), x.flatten(), x[:, -1], x.sum(0) / x.shape[0]

    gm = trace(f, tp.randn(6, 2, 4), dynamic={0: {0: "B"}})
    B = sym("B")
    assert [o.aval.shape for o in gm.graph.outputs] == [(4,), (8 * B,), (B, 4), (2, 4)]
    x = tp.randn(5, 2, 4)
    for got, expected in zip(gm(x), f(x)):
        assert np.array_equal(got.numpy(), expected.numpy())
