"""Export reproduces eager: every registry sample, the MLP, CNN and transformer block with dynamic batch and
sequence dims (and random shapes within the declared ranges), and a training step over 10 steps, each after
a save and a load."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorplay as tp
import tensorplay.func as TF
import tensorplay.nn.functional as F
from tensorplay import Tensor, nn
from tensorplay.demo import DigitsCNN
from tensorplay.export import Dim, ExportedProgram, export
from benchmarks.bench_training import _block_classes
from tests.samples import SAMPLES, Sample
from tests.test_graph_swap import sample_fn
from tests.export_helpers import as_array, assert_same_bits, round_trip


# ---- every registry sample ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.id)
def test_every_sample_exported_with_dynamic_dims_saved_and_loaded_reproduces_eager(sample: Sample) -> None:
    fn, tensors = sample_fn(sample)
    spec = [Dim.AUTO] * len(tensors)  # every axis dynamic where the primitive allows it
    ep = export(fn, tuple(tensors), dynamic_shapes=spec if tensors else None)
    loaded = round_trip(ep)
    expected = fn(*tensors)
    assert_same_bits(loaded.module()(*tensors), expected, sample.id)
    assert_same_bits(ep.module()(*tensors), expected, sample.id)


# ---- models -----------------------------------------------------------------------------------------------------

def _mlp() -> nn.Module:
    tp.manual_seed(1)
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 5)).eval()


def _cnn() -> nn.Module:
    tp.manual_seed(2)
    return DigitsCNN().eval()


def _block() -> nn.Module:
    import torch
    block = _block_classes(tp, torch)[0]  # the pre-norm transformer block of the training benchmark
    tp.manual_seed(3)
    return block(16, 4).eval()  # type: ignore[no-any-return]


BATCH = Dim("batch", min=1, max=16)
SEQ = Dim("seq", min=1, max=64)
MODELS = {
    "mlp": (_mlp, lambda b, s: (b, 20), {0: BATCH}),
    "cnn": (_cnn, lambda b, s: (b, 1, 8, 8), {0: BATCH}),
    "block": (_block, lambda b, s: (b, s, 16), {0: BATCH, 1: SEQ}),
}
_EXPORTED: dict[str, tuple[nn.Module, ExportedProgram]] = {}


def _exported(name: str) -> tuple[nn.Module, ExportedProgram]:
    if name not in _EXPORTED:
        make, shape, spec = MODELS[name]
        model = make()
        ep = export(model, (tp.randn(*shape(3, 5)),), dynamic_shapes={"x": spec})
        _EXPORTED[name] = (model, round_trip(ep))
    return _EXPORTED[name]


@pytest.mark.parametrize("name", list(MODELS))
def test_models_with_dynamic_dims_reproduce_eager_bit_for_bit(name: str) -> None:
    model, loaded = _exported(name)
    _, shape, _ = MODELS[name]
    expected_ranges = "{batch: [1, 16], seq: [1, 64]}" if name == "block" else "{batch: [1, 16]}"
    assert str(loaded.range_constraints) == expected_ranges
    for b, s in ((1, 1), (2, 7), (16, 64)):
        x = tp.randn(*shape(b, s))
        assert_same_bits(loaded.module()(x), model(x), f"{name} at {shape(b, s)}")


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(list(MODELS)), b=st.integers(1, 16), s=st.integers(1, 64), seed=st.integers(0, 2**31))
def test_random_shapes_within_the_declared_ranges(name: str, b: int, s: int, seed: int) -> None:
    model, loaded = _exported(name)
    _, shape, _ = MODELS[name]
    x = tp.tensor(np.random.default_rng(seed).standard_normal(shape(b, s)).astype(np.float32))
    assert_same_bits(loaded.module()(x), model(x), f"{name} at {shape(b, s)}")


# ---- a training step -----------------------------------------------------------------------------------------

class TrainStep(nn.Module):
    """One SGD step of a small network on ``(x, y)``: forward, cross-entropy, gradients (``tensorplay.func``), an
    in-place update of the parameters. Returns the loss."""

    def __init__(self, lr: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Dropout(0.2), nn.Linear(12, 3))
        self.lr = lr

    def forward(self, x: Tensor[Any, Any], y: Tensor[Any]) -> Tensor[()]:
        params = dict(self.net.named_parameters())

        def loss_of(p: dict[str, Any]) -> Any:
            return F.cross_entropy(TF.functional_call(self.net, p, (x,)), y)

        grads, loss = TF.grad_and_value(loss_of)(params)
        with tp.no_grad():
            for name, p in params.items():
                p.sub_(grads[name] * self.lr)
        return loss


def _batches(n: int) -> list[tuple[Tensor[Any, Any], Tensor[Any]]]:
    rng = np.random.default_rng(7)
    out = []
    for i in range(n):
        size = 4 + 3 * (i % 4)
        out.append((tp.tensor(rng.standard_normal((size, 6)).astype(np.float32)), tp.tensor(rng.integers(0, 3, size))))
    return out


def test_an_exported_training_step_reproduces_ten_eager_steps_after_save_and_load() -> None:
    tp.manual_seed(4)
    eager_step = TrainStep(lr=0.1)
    tp.manual_seed(4)
    exported_model = TrainStep(lr=0.1)
    batch = Dim("batch", min=1, max=64)
    x0, y0 = _batches(1)[0]
    ep = export(exported_model, (x0, y0), dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    kinds = {s.kind.value for s in ep.graph_signature.output_specs}
    assert kinds == {"parameter_mutation", "user_output"}
    step = round_trip(ep).module()
    tp.manual_seed(10)
    eager_losses = [eager_step(x, y) for x, y in _batches(10)]
    tp.manual_seed(10)
    exported_losses = [step(x, y) for x, y in _batches(10)]
    for i, (a, b) in enumerate(zip(exported_losses, eager_losses)):
        assert_same_bits(a, b, f"loss of step {i}")
    exported_params = dict(step.named_parameters())
    for name, p in eager_step.named_parameters():
        assert_same_bits(exported_params[name], p, name)
    assert not np.array_equal(as_array(exported_params["net.0.weight"]), as_array(dict(exported_model.named_parameters())["net.0.weight"]))
