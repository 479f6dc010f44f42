"""Channel dropout at every rank, against torch 2.x: which axes get their own draw (dropout2d draws per
[N, C] at every rank, so a 5-d [N, C, D, H, W] input drops whole [D, H, W] volumes; dropout3d reads a
non-5-d input as unbatched, one draw per first-axis entry; dropout1d takes 2-d/3-d only), which inputs
raise, and the deprecation warnings torch gives (in training and in evaluation alike)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

SIZES = (12, 10, 3, 2, 2, 2)
FUNCS = ["dropout1d", "dropout2d", "dropout3d"]


def call(lib: str, name: str, ndim: int, training: bool = True, p: float = 0.5) -> tuple[Any, list[str]]:
    """(the output as numpy, or the exception type's name; the warning messages)."""
    shape = SIZES[:ndim]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if lib == "torch":
                out: Any = getattr(torch.nn.functional, name)(torch.ones(shape), p, training).numpy()
            else:
                x = tp.ones(*shape) if ndim else tp.tensor(np.float32(1.0))
                out = getattr(F, name)(x, p, training).numpy()
        except Exception as e:  # noqa: BLE001 - the kind is compared below
            out = type(e).__name__
    return out, [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def draw_axes(y: np.ndarray[Any, Any]) -> list[int]:
    """The axes along which the output is not constant (the mask's own axes)."""
    return [ax for ax in range(y.ndim)
            if not np.array_equal(y, np.broadcast_to(y.take([0], axis=ax), y.shape))]


def first_sentences(messages: list[str]) -> list[str]:
    return [m.split(". ")[0] for m in messages]


@pytest.mark.parametrize("ndim", range(7))
@pytest.mark.parametrize("name", FUNCS)
def test_draw_axes_errors_and_warnings_match_pytorch(name: str, ndim: int) -> None:
    tp.manual_seed(ndim)
    torch.manual_seed(ndim)
    ours, our_warnings = call("tp", name, ndim)
    theirs, their_warnings = call("torch", name, ndim)
    assert first_sentences(our_warnings) == first_sentences(their_warnings)
    if isinstance(theirs, str):
        assert isinstance(ours, str), f"{name} of a {ndim}-d input: torch raises {theirs}, tensorplay ran"
        return
    assert not isinstance(ours, str), f"{name} of a {ndim}-d input: torch runs, tensorplay raised {ours}"
    assert ours.shape == theirs.shape
    assert draw_axes(ours) == draw_axes(theirs)
    assert set(np.unique(ours)) <= {0.0, 2.0}


@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("name", FUNCS)
def test_evaluation_is_the_identity_with_pytorch_warnings_and_errors(name: str, ndim: int) -> None:
    ours, our_warnings = call("tp", name, ndim, training=False)
    theirs, their_warnings = call("torch", name, ndim, training=False)
    assert first_sentences(our_warnings) == first_sentences(their_warnings)
    assert isinstance(ours, str) == isinstance(theirs, str)
    if not isinstance(theirs, str):
        np.testing.assert_array_equal(ours, theirs)


def test_the_five_d_dropout2d_message_is_pytorchs_and_points_at_the_caller() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.dropout2d(tp.ones(2, 3, 4, 5, 6), 0.5)
    _, theirs = call("torch", "dropout2d", 5)
    assert [str(w.message) for w in caught] == theirs
    assert caught[0].filename == __file__


LAYERS: list[tuple[Callable[[], Any], Callable[[], Any]]] = [
    (lambda: nn.Dropout1d(0.5), lambda: torch.nn.Dropout1d(0.5)),
    (lambda: nn.Dropout2d(0.5), lambda: torch.nn.Dropout2d(0.5)),
    (lambda: nn.Dropout3d(0.5), lambda: torch.nn.Dropout3d(0.5)),
]


@pytest.mark.parametrize("ndim", [2, 3, 4, 5])
@pytest.mark.parametrize("make,make_t", LAYERS, ids=["1d", "2d", "3d"])
def test_layers_match_pytorch(make: Callable[[], Any], make_t: Callable[[], Any], ndim: int) -> None:
    layer, layer_t = make(), make_t()
    assert repr(layer) == repr(layer_t)
    shape = SIZES[:ndim]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            theirs: Any = layer_t(torch.ones(shape)).numpy()
        except RuntimeError:
            with pytest.raises(ValueError):
                layer(tp.ones(*shape))
            return
        ours = layer(tp.ones(*shape)).numpy()
        assert draw_axes(ours) == draw_axes(theirs)
        x = tp.ones(*shape)
        assert layer.eval()(x) is x


def test_drop_rate_and_scale() -> None:
    tp.manual_seed(0)
    y = F.dropout3d(tp.ones(40, 50, 2, 2, 2), 0.3).numpy()
    per_channel = y[:, :, 0, 0, 0]
    assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.7)}
    assert 0.25 < float(np.mean(per_channel == 0.0)) < 0.35
