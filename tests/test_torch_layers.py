"""Layers and functions PyTorch users reach for: ``F.pad``, adaptive average pooling, ``Dropout2d``,
``GroupNorm``, ``RMSNorm``, ``TransformerEncoderLayer``/``TransformerEncoder`` and ``Tensor.narrow``.
Values and gradients against PyTorch; every way of running (trace, compile, export, vmap) against eager."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.errors import ArgumentError, AxisError, ShapeError
from tensorplay.nn import functional as F
from tensorplay.testing import check_interpreters

RNG = np.random.default_rng(0)
ALL_WAYS = sorted(["eager", "traced", "traced_execute", "graph_module", "retraced", "vmap", "compiled", "exported"])
"""Every way of running a program (sorted: the registry lists the plugged-in ways in the order they were loaded)."""


def _values_and_grads(ours: Any, theirs: Any, *arrays: np.ndarray, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``ours(*tensors)`` and ``theirs(*torch tensors)`` agree, and so do the gradients of ``sum(out * c)``
    (random ``c``) with respect to every input."""
    xs = [tp.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = ours(*xs), theirs(*ts)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    c = RNG.standard_normal(tuple(ref.shape)).astype(arrays[0].dtype)
    (out * tp.tensor(c)).sum().backward()
    (ref * torch.tensor(c)).sum().backward()
    for x, t in zip(xs, ts):
        assert x.grad is not None and t.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol)


# ---- F.pad ------------------------------------------------------------------------------------------------

PADS = [(1, 2), (2, 0, 1, 3), (0, 0, 2, 2), (1, -1), (-2, 1, 0, 2)]


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pads", PADS)
def test_pad_matches_pytorch_values_and_gradients(mode: str, pads: tuple[int, ...]) -> None:
    x = RNG.standard_normal((2, 3, 5, 6))
    if mode != "constant":  # PyTorch pads 3-d inputs on 1 axis and 4-d inputs on 2 axes in these modes
        x = x[0] if len(pads) == 2 else x
    _values_and_grads(lambda t: F.pad(t, pads, mode=mode), lambda t: torch.nn.functional.pad(t, pads, mode=mode), x)


def test_pad_constant_value_and_float32() -> None:
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    out = F.pad(tp.tensor(x), (1, 1, 2, 0), value=-7.5)
    assert out.dtype == tp.float32
    np.testing.assert_array_equal(out.numpy(), torch.nn.functional.pad(torch.tensor(x), (1, 1, 2, 0), value=-7.5))


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad_under_every_way_of_running(mode: str) -> None:
    assert sorted(check_interpreters(lambda t: F.pad(t, (1, 2, 2, 1), mode=mode), tp.randn(2, 3, 4, 5))) == ALL_WAYS


@pytest.mark.parametrize("args, message", [
    (((1,), "constant"), "even length"),
    (((1, 1, 1, 1, 1, 1), "constant"), "only 2"),
    (((5, 0), "reflect"), "below the size"),
    (((6, 0), "circular"), "at most the size"),
    (((1, 1), "wrap"), "mode must be"),
    (((-3, -3), "constant"), "crop more"),
])
def test_pad_errors_name_the_problem(args: tuple[Any, str], message: str) -> None:
    with pytest.raises(ShapeError, match=message):
        F.pad(tp.randn(2, 5), args[0], mode=args[1])


def test_pad_replicate_of_an_empty_axis_is_an_error() -> None:
    with pytest.raises(ShapeError, match="empty"):
        F.pad(tp.zeros(2, 0), (1, 1), mode="replicate")


# ---- adaptive average pooling ---------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, (3, 4), (None, 3), (7, 10), (5, 13)])
def test_adaptive_avg_pool2d_matches_pytorch(size: Any) -> None:
    x = RNG.standard_normal((2, 3, 7, 10))
    _values_and_grads(nn.AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size), x, rtol=1e-12, atol=1e-12)
    _values_and_grads(nn.AdaptiveAvgPool2d(size), torch.nn.AdaptiveAvgPool2d(size), x[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("size", [1, 3, 4, 10])
def test_adaptive_avg_pool1d_matches_pytorch(size: int) -> None:
    x = RNG.standard_normal((2, 3, 10)).astype(np.float32)
    _values_and_grads(lambda t: F.adaptive_avg_pool1d(t, size), lambda t: torch.nn.functional.adaptive_avg_pool1d(t, size), x)


def test_adaptive_avg_pool_under_every_way_of_running() -> None:
    assert sorted(check_interpreters(nn.AdaptiveAvgPool2d((3, 2)), tp.randn(2, 3, 7, 5))) == ALL_WAYS
    assert sorted(check_interpreters(nn.AdaptiveAvgPool1d(1), tp.randn(2, 3, 7))) == ALL_WAYS


def test_adaptive_avg_pool_errors() -> None:
    with pytest.raises(ShapeError, match="positive ints"):
        nn.AdaptiveAvgPool2d(0)
    with pytest.raises(ShapeError, match="at least 3 axes"):
        nn.AdaptiveAvgPool2d(2)(tp.randn(4, 4))
    with pytest.raises(ShapeError, match="empty axis"):
        nn.AdaptiveAvgPool1d(2)(tp.zeros(2, 3, 0))


# ---- Dropout2d ------------------------------------------------------------------------------------------

def test_dropout2d_zeroes_whole_channels_and_scales_the_rest() -> None:
    tp.manual_seed(0)
    layer = nn.Dropout2d(0.5)
    x = tp.ones(16, 32, 3, 4)
    y = layer(x).numpy()
    per_channel = y[..., :1, :1]
    assert np.all(y == per_channel)  # one decision per (sample, channel)
    assert set(np.unique(y)) <= {0.0, 2.0}
    assert 0.4 < np.mean(per_channel == 0.0) < 0.6
    assert layer.eval()(x) is x


def test_dropout2d_of_a_3d_input_drops_rows_as_pytorch() -> None:
    with pytest.warns(UserWarning, match="Received a 3D input to dropout2d"):
        y = F.dropout2d(tp.ones(8, 16, 5), 0.5).numpy()
    assert np.all(y == y[..., :1])  # [N, C, L]: one decision per (N, C), as torch.nn.functional.dropout2d


def test_dropout2d_gradient_is_the_mask() -> None:
    x = tp.randn(4, 6, 2, 3, requires_grad=True)
    y = F.dropout2d(x, 0.3)
    y.sum().backward()
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), (y.detach().numpy() / x.detach().numpy()), rtol=1e-5)


def test_dropout2d_under_every_way_of_running() -> None:
    assert sorted(check_interpreters(nn.Dropout2d(0.4), tp.randn(2, 3, 4, 5))) == ALL_WAYS


def test_dropout2d_refuses_inputs_without_channels() -> None:
    with pytest.warns(UserWarning, match="Received a 1-D input"), \
            pytest.raises(ShapeError, match="at least 2 dimensions"):
        F.dropout2d(tp.randn(3), 0.5)
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d, which is deprecated"):
        F.dropout2d(tp.randn(3, 4), 0.5)  # element-wise, as torch (tests/test_nn_dropout_ranks.py)


# ---- GroupNorm and RMSNorm ------------------------------------------------------------------------------

def _copy_params(ours: nn.Module, theirs: torch.nn.Module) -> None:
    for name, p in theirs.named_parameters():
        with torch.no_grad():
            p.copy_(torch.tensor(RNG.standard_normal(tuple(p.shape)).astype(np.float32)))
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


@pytest.mark.parametrize("groups, shape", [(3, (2, 6, 4, 5)), (1, (3, 4, 7)), (2, (2, 4, 3)), (2, (2, 4, 3, 2, 2))])
def test_group_norm_matches_pytorch(groups: int, shape: tuple[int, ...]) -> None:
    ours, theirs = nn.GroupNorm(groups, shape[1]), torch.nn.GroupNorm(groups, shape[1])
    _copy_params(ours, theirs)
    _values_and_grads(ours, theirs, RNG.standard_normal(shape).astype(np.float32), rtol=1e-4, atol=1e-5)
    w = tp.tensor(ours.weight.detach().numpy(), requires_grad=True)
    out = F.group_norm(tp.tensor(np.ones(shape, np.float32)), groups, w)  # a constant group: eps keeps it finite
    assert np.isfinite(out.detach().numpy()).all()


@pytest.mark.parametrize("normalized, eps", [(5, None), ((4, 5), 1e-3), (5, 0.1)])
def test_rms_norm_matches_pytorch(normalized: Any, eps: float | None) -> None:
    ours, theirs = nn.RMSNorm(normalized, eps=eps), torch.nn.RMSNorm(normalized, eps=eps)
    _copy_params(ours, theirs)
    for dtype in (np.float32, np.float64):
        _values_and_grads(ours.to(dtype), theirs.to(torch.float64 if dtype == np.float64 else torch.float32),
                          RNG.standard_normal((2, 3, 4, 5)).astype(dtype), rtol=1e-5, atol=1e-6)


def test_norms_under_every_way_of_running() -> None:
    assert sorted(check_interpreters(nn.GroupNorm(2, 4), tp.randn(3, 4, 5))) == ALL_WAYS
    assert sorted(check_interpreters(nn.RMSNorm(5), tp.randn(3, 4, 5))) == ALL_WAYS


def test_norm_errors() -> None:
    with pytest.raises(ShapeError, match="divisible"):
        nn.GroupNorm(3, 4)
    with pytest.raises(ShapeError, match="expected 4 channels"):
        nn.GroupNorm(2, 4)(tp.randn(2, 6, 3))
    with pytest.raises(ShapeError, match="trailing axes"):
        nn.RMSNorm(4)(tp.randn(2, 5))


# ---- TransformerEncoderLayer / TransformerEncoder --------------------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_transformer_encoder_matches_pytorch(norm_first: bool, batch_first: bool, activation: str) -> None:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation, batch_first=batch_first,
                                             norm_first=norm_first)
    theirs = torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(8), enable_nested_tensor=False).eval()
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=activation,
                                                            batch_first=batch_first, norm_first=norm_first),
                                 2, norm=nn.LayerNorm(8)).eval()
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((3, 5, 8)).astype(np.float32)
    n = 5 if batch_first else 3
    mask = torch.nn.Transformer.generate_square_subsequent_mask(n)
    _values_and_grads(ours, theirs, x, rtol=2e-4, atol=2e-5)
    expected = theirs(torch.tensor(x), mask=mask, is_causal=True).detach().numpy()
    for got in (ours(tp.tensor(x), mask=tp.tensor(mask.numpy()), is_causal=True),  # float mask
                ours(tp.tensor(x), mask=tp.tensor(mask.numpy() != 0)),  # bool mask: True = not allowed
                ours(tp.tensor(x), is_causal=True)):  # the causal mask made for us
        np.testing.assert_allclose(got.detach().numpy(), expected, rtol=2e-4, atol=2e-5)
    padding = np.zeros((3, 5), dtype=bool) if batch_first else np.zeros((5, 3), dtype=bool)
    padding[:, -2:] = True
    np.testing.assert_allclose(
        ours(tp.tensor(x), src_key_padding_mask=tp.tensor(padding)).detach().numpy(),
        theirs(torch.tensor(x), src_key_padding_mask=torch.tensor(padding)).detach().numpy(), rtol=2e-4, atol=2e-5)


def test_transformer_state_dict_names_are_pytorch_names() -> None:
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 2)
    theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16), 2, enable_nested_tensor=False)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    a, b = ours.layers[0].linear1.weight, ours.layers[1].linear1.weight
    assert a is not b  # each layer its own parameters


class _Causal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(
            8, 2, 16, dropout=0.1, activation="gelu", batch_first=True, norm_first=True), 2)

    def forward(self, x: Any) -> Any:
        return self.encoder(x, is_causal=True)


@pytest.mark.parametrize("training", [True, False])
def test_transformer_encoder_under_every_way_of_running(training: bool) -> None:
    model = _Causal().train(training)
    assert sorted(check_interpreters(model, tp.randn(2, 5, 8))) == ALL_WAYS


def test_transformer_rejects_an_unknown_activation() -> None:
    with pytest.raises(ArgumentError, match=r"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a "
                                            r"callable, got 'swishy'"):
        nn.TransformerEncoderLayer(8, 2, activation="swishy")


# ---- Tensor.narrow --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim, start, length", [(0, 0, 2), (1, 1, 2), (-1, -3, 2), (2, 4, 0), (1, 0, 3)])
def test_narrow_matches_pytorch(dim: int, start: int, length: int) -> None:
    x = RNG.standard_normal((2, 3, 4))
    _values_and_grads(lambda t: t.narrow(dim, start, length), lambda t: t.narrow(dim, start, length), x)


def test_narrow_takes_a_0d_tensor_start_and_runs_everywhere() -> None:
    x = tp.randn(3, 5)
    np.testing.assert_array_equal(x.narrow(1, tp.tensor(2), 2).numpy(), x.numpy()[:, 2:4])
    assert sorted(check_interpreters(lambda t: t.narrow(1, 1, 3), tp.randn(2, 5))) == ALL_WAYS


@pytest.mark.parametrize("args, error, message", [
    ((3, 0, 1), AxisError, "out of range"),
    ((1, 3, 3), ShapeError, r"start \(3\) \+ length \(3\) exceeds the size \(5\)"),
    ((1, 6, 0), ShapeError, "start 6 is out of range"),
    ((1, 0, -1), ShapeError, "non-negative"),
])
def test_narrow_errors(args: tuple[int, int, int], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        tp.randn(2, 5).narrow(*args)


# ---- edge cases: empty batches, non-contiguous inputs ---------------------------------------------------

LAYERS: list[tuple[str, Any, Any]] = [
    ("pad_reflect", lambda t: F.pad(t, (1, 2, 2, 1), mode="reflect"),
     lambda t: torch.nn.functional.pad(t, (1, 2, 2, 1), mode="reflect")),
    ("pad_constant", lambda t: F.pad(t, (1, 2, 0, 1), value=3.0),
     lambda t: torch.nn.functional.pad(t, (1, 2, 0, 1), value=3.0)),
    ("adaptive", lambda t: F.adaptive_avg_pool2d(t, (2, 3)), lambda t: torch.nn.functional.adaptive_avg_pool2d(t, (2, 3))),
    ("group_norm", lambda t: F.group_norm(t, 2), lambda t: torch.nn.functional.group_norm(t, 2)),
    ("rms_norm", lambda t: F.rms_norm(t, (5,)), lambda t: torch.nn.functional.rms_norm(t, (5,))),
    ("narrow", lambda t: t.narrow(2, 1, 2), lambda t: t.narrow(2, 1, 2)),
]


@pytest.mark.parametrize("name, ours, theirs", LAYERS, ids=[v[0] for v in LAYERS])
def test_layers_on_non_contiguous_and_empty_inputs(name: str, ours: Any, theirs: Any) -> None:
    base = RNG.standard_normal((5, 4, 4, 2)).astype(np.float32)
    x = np.transpose(base, (3, 1, 2, 0))  # [2, 4, 4, 5], not contiguous
    view = tp.tensor(base).permute(3, 1, 2, 0)
    assert not view.numpy().flags.c_contiguous
    got = ours(view).numpy()
    np.testing.assert_allclose(got, theirs(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    empty = np.zeros((0, 4, 4, 5), dtype=np.float32)
    assert tuple(ours(tp.tensor(empty)).shape) == tuple(theirs(torch.tensor(empty)).shape)
