"""Convolution and pooling: channel mismatches and output spatial dims named with the wrong dims."""

from __future__ import annotations

from typing import Literal, NewType

from tensorplay import Ops, Tensor
from tensorplay import prefix as P
from tensorplay.dims import Batch, Channels, Height, Width

OutC = NewType("OutC", int)
H2 = NewType("H2", int)
W2 = NewType("W2", int)
K3 = Literal[3]


def conv_keeps_size(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Tensor[Batch, Channels, Height, Width]
                    ) -> Tensor[Batch, OutC, Height, Width]:
    return P.conv(ops, k, None, x, stride=2, out=(H2, W2))  # E: Argument "out" to "conv" has incompatible type "tuple[type[H2], type[W2]]"; expected "tuple[type[Height], type[Width]]"


def pool_output_named_as_input(ops: Ops, x: Tensor[Batch, Channels, Height, Width]) -> Tensor[Batch, Channels, Height, Width]:
    return P.max_pool(ops, x, 2)  # E: Incompatible return value type (got "Tensor[Batch, Channels, int, int]", expected "Tensor[Batch, Channels, Height, Width]")


def out_names_swapped(ops: Ops, x: Tensor[Batch, Channels, Height, Width]) -> Tensor[Batch, Channels, H2, W2]:
    return P.avg_pool(ops, x, 2, out=(W2, H2))  # E: Argument "out" to "avg_pool" has incompatible type "tuple[type[W2], type[H2]]"; expected "tuple[type[H2], type[W2]]"


def conv_on_channels_last(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Tensor[Batch, Height, Width, Channels]) -> None:
    P.conv(ops, k, None, x, padding="same")  # E: Cannot infer value of type parameter "InC" of "conv"


def conv_bias_size(ops: Ops, k: Tensor[OutC, Channels, K3, K3], b: Tensor[Channels],
                   x: Tensor[Batch, Channels, Height, Width]) -> None:
    P.conv(ops, k, b, x, padding="same")  # E: Cannot infer value of type parameter "OutC" of "conv"


def chained_convs(ops: Ops, k1: Tensor[OutC, Channels, K3, K3], k2: Tensor[OutC, Channels, K3, K3],
                  x: Tensor[Batch, Channels, Height, Width]) -> None:
    y = P.conv(ops, k1, None, x, padding="same")
    P.conv(ops, k2, None, y, padding="same")  # E: Cannot infer value of type parameter "InC" of "conv"


def same_padding_named_differently(ops: Ops, k: Tensor[OutC, Channels, K3, K3],
                                   x: Tensor[Batch, Channels, Height, Width]) -> Tensor[Batch, OutC, H2, W2]:
    return P.conv(ops, k, None, x, padding="same")  # E: Incompatible return value type (got "Tensor[Batch, OutC, int, int]", expected "Tensor[Batch, OutC, H2, W2]")
