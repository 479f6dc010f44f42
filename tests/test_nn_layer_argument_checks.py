"""Conv, ConvTranspose and pooling layers check their window arguments when built: a kernel_size, stride
or dilation below 1, a negative padding or output_padding, an output_padding not below max(stride,
dilation), groups that do not divide the channels. Each is a ValueError naming the layer, the argument
and the value given. torch refuses every one of these too (some when built, the rest on the layer's
first call, where no input can make them work); both refusals are checked here, and the valid
neighbours still build and give torch's output shape."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import tensorplay as tp
from tensorplay import nn

CONVS = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d"]
BAD_CONV: list[tuple[str, Any]] = [
    ("kernel_size", 0), ("kernel_size", -1), ("kernel_size", (3, 0)), ("stride", 0), ("stride", -2),
    ("stride", (1, 0)), ("padding", -1), ("padding", (0, -1)), ("dilation", 0), ("dilation", -2),
    ("groups", 0), ("groups", -1), ("groups", 4), ("output_padding", -1), ("output_padding", 1),
    ("output_padding", (0, 2)),
]
POOLS = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d"]
BAD_POOL: list[tuple[str, Any]] = [
    ("kernel_size", 0), ("kernel_size", -1), ("kernel_size", (2, 0)), ("stride", 0), ("stride", -1),
    ("stride", (0, 1)), ("padding", -1), ("padding", (-1, 0)), ("padding", 2),
]


def rank(cls: str) -> int:
    return int(cls[-2])


def fits(cls: str, value: Any) -> bool:
    """A tuple value is written for 2-d layers; rank 1 and 3 take ints only here."""
    return not isinstance(value, tuple) or rank(cls) == 2


def torch_refuses(make: Any, cls: str, channels: int = 6) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            layer = make()
            layer(torch.ones((2, channels) + (9,) * rank(cls)))
        except (RuntimeError, ValueError, TypeError):
            return True
    return False


def conv_args(cls: str, name: str, value: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"in_channels": 6, "out_channels": 6, "kernel_size": 3, name: value}
    if name == "groups" and value == 4:
        args["in_channels"] = 8  # 8 channels, 4 groups: out_channels 6 does not divide
    return args


@pytest.mark.parametrize("name,value", BAD_CONV, ids=[f"{n}={v}" for n, v in BAD_CONV])
@pytest.mark.parametrize("cls", CONVS)
def test_conv_refuses_bad_arguments_when_built(cls: str, name: str, value: Any) -> None:
    if not fits(cls, value) or (name == "output_padding" and "Transpose" not in cls):
        pytest.skip("not an argument of this layer")
    args = conv_args(cls, name, value)
    assert torch_refuses(lambda: getattr(torch.nn, cls)(**args), cls, args["in_channels"])
    with pytest.raises(ValueError, match=rf"{cls}: .*{name}.*{value if name != 'groups' else ''}"):
        getattr(nn, cls)(**args)


@pytest.mark.parametrize("name,value", BAD_POOL, ids=[f"{n}={v}" for n, v in BAD_POOL])
@pytest.mark.parametrize("cls", POOLS)
def test_pool_refuses_bad_arguments_when_built(cls: str, name: str, value: Any) -> None:
    if not fits(cls, value):
        pytest.skip("not an argument of this layer")
    args = {"kernel_size": 3, name: value}
    assert torch_refuses(lambda: getattr(torch.nn, cls)(**args), cls)
    with pytest.raises(ValueError, match=rf"{cls}: .*{name}"):
        getattr(nn, cls)(**args)


def test_the_message_names_the_value_given() -> None:
    with pytest.raises(ValueError, match=r"Conv2d: kernel_size must be positive .* got kernel_size=0$"):
        nn.Conv2d(3, 4, kernel_size=0)
    with pytest.raises(ValueError, match=r"Conv1d: stride must be positive .* got stride=0$"):
        nn.Conv1d(3, 4, 3, stride=0)
    with pytest.raises(ValueError, match=r"ConvTranspose2d: padding must be non-negative .* got padding=\(0, -1\)$"):
        nn.ConvTranspose2d(3, 4, 3, padding=(0, -1))
    with pytest.raises(ValueError, match=r"MaxPool2d: stride must be positive .* got stride=\(0, 1\)$"):
        nn.MaxPool2d(2, stride=(0, 1))
    with pytest.raises(ValueError, match=r"AvgPool1d: kernel_size must be positive .* got kernel_size=-1$"):
        nn.AvgPool1d(-1)


GOOD: list[tuple[str, dict[str, Any]]] = [
    ("Conv2d", {"kernel_size": 1, "stride": 3, "padding": 0}),
    ("Conv1d", {"kernel_size": 2, "dilation": 3, "padding": 2, "groups": 2}),
    ("Conv3d", {"kernel_size": (1, 2, 3), "stride": (1, 2, 1)}),
    ("ConvTranspose1d", {"kernel_size": 3, "stride": 2, "output_padding": 1}),
    ("ConvTranspose2d", {"kernel_size": 3, "dilation": 3, "output_padding": (2, 0), "groups": 3}),
    ("ConvTranspose2d", {"kernel_size": 2, "stride": (1, 4), "output_padding": (0, 3)}),
]


@pytest.mark.parametrize("cls,kwargs", GOOD, ids=[f"{c}-{i}" for i, (c, _) in enumerate(GOOD)])
def test_valid_edges_build_and_match_pytorch_shapes(cls: str, kwargs: dict[str, Any]) -> None:
    shape = (2, 6) + (9,) * rank(cls)
    ours = getattr(nn, cls)(6, 6, **kwargs)(tp.ones(*shape))
    theirs = getattr(torch.nn, cls)(6, 6, **kwargs)(torch.ones(shape))
    assert tuple(ours.shape) == tuple(theirs.shape)


@pytest.mark.parametrize("cls", POOLS)
def test_valid_pool_edges_match_pytorch_shapes(cls: str) -> None:
    shape = (2, 3) + (9,) * rank(cls)
    for kwargs in ({"kernel_size": 1}, {"kernel_size": 4, "stride": 1, "padding": 2}, {"kernel_size": 2,
                                                                                          "stride": 5}):
        ours = getattr(nn, cls)(**kwargs)(tp.ones(*shape))
        theirs = getattr(torch.nn, cls)(**kwargs)(torch.ones(shape))
        assert tuple(ours.shape) == tuple(theirs.shape), kwargs
