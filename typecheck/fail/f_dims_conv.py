"""Convolution, pooling and transposed convolution: output sizes from kernel, stride, padding and dilation."""

from __future__ import annotations

from typing import Literal, NewType

import tensorplay as tp
from tensorplay import Ops, Tensor
from tensorplay import prefix as P
from tensorplay.dims import Batch, Channels, Seq

OutC = NewType("OutC", int)
Height = NewType("Height", int)
Width = NewType("Width", int)
H2 = NewType("H2", int)
W2 = NewType("W2", int)
tp.relate(Height, 2 * tp.dim(H2))   # the input is twice the half-size grid: stride-2 layers divide exactly
tp.relate(Width, 2 * tp.dim(W2))

K2 = Literal[2]
K3 = Literal[3]
K5 = Literal[5]
L7 = Literal[7]
L28 = Literal[28]
Image = Tensor[Batch, Channels, Height, Width]
Half = Tensor[Batch, Channels, H2, W2]


def needs_7x7(x: Tensor[Batch, Channels, L7, L7]) -> None:
    print(x)


def strided_conv_named_as_input(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Image) -> None:
    P.conv(ops, k, None, x, stride=2, padding=1, out=(Height, Width))  # P: conv: output spatial dim 0 is H2 for input [Batch, Channels, Height, Width] (kernel 3, stride 2, padding 1, dilation 1; out = (in + 2p - d(k-1) - 1)//s + 1), but it is named Height (using Height == 2 * H2)


def padding_forgotten(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Image) -> None:
    P.conv(ops, k, None, x, out=(Height, Width))  # P: conv: output spatial dim 0 is Height - 2


def dilation_needs_more_padding(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Image) -> None:
    P.conv(ops, k, None, x, padding=1, dilation=2, out=(Height, Width))  # P: output spatial dim 0 is Height - 2 for input [Batch, Channels, Height, Width] (kernel 3, stride 1, padding 1, dilation 2


def pool_named_as_input(ops: Ops, x: Image) -> None:
    P.max_pool(ops, x, 2, out=(Height, Width))  # P: max_pool: output spatial dim 0 is H2 for input [Batch, Channels, Height, Width] (kernel 2, stride 2, padding 0, dilation 1; out = (in + 2p - k)//s + 1), but it is named Height


def avg_pool_without_padding(ops: Ops, x: Image) -> None:
    P.avg_pool(ops, x, 3, 1, out=(Height, Width))  # P: avg_pool: output spatial dim 0 is Height - 2


def transposed_conv_named_as_input(ops: Ops, k: Tensor[Channels, OutC, K2, K2], x: Half) -> None:
    P.conv_transpose(ops, k, None, x, stride=2, out=(H2, W2))  # P: conv_transpose: output spatial dim 0 is 2*H2 for input [Batch, Channels, H2, W2] (kernel 2, stride 2, padding 0, dilation 1; out = (in-1)s - 2p + d(k-1) + output_padding + 1), but it is named H2


def transposed_conv_missing_output_padding(ops: Ops, k: Tensor[Channels, OutC, K3, K3], x: Half) -> None:
    P.conv_transpose(ops, k, None, x, stride=2, padding=1, out=(Height, Width))  # P: conv_transpose: output spatial dim 0 is 2*H2 - 1


def conv1d_valid(ops: Ops, k: Tensor[OutC, Channels, K5], x: Tensor[Batch, Channels, Seq]) -> None:
    P.conv(ops, k, None, x, out=(Seq,))  # P: conv: output spatial dim 0 is Seq - 4


def literal_conv_shrinks(ops: Ops, k: Tensor[OutC, Channels, K5, K5], x: Tensor[Batch, Channels, L28, L28]
                         ) -> Tensor[Batch, OutC, L28, L28]:
    return P.conv(ops, k, None, x)  # P: Incompatible return value type (got "Tensor[Batch, OutC, Literal[24], Literal[24]]", expected "Tensor[Batch, OutC, Literal[28], Literal[28]]") # N: (got "Tensor[Batch, OutC, int, int]"


def literal_pool_chain(ops: Ops, x: Tensor[Batch, Channels, L28, L28]) -> None:
    y = P.max_pool(ops, x, 2)
    needs_7x7(y)  # P: Argument 1 to "needs_7x7" has incompatible type "Tensor[Batch, Channels, Literal[14], Literal[14]]" # N: incompatible type "Tensor[Batch, Channels, int, int]"


def literal_strided_conv(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Tensor[Batch, Channels, L28, L28]
                         ) -> Tensor[Batch, OutC, Literal[14], Literal[14]]:
    return P.conv(ops, k, None, x, stride=2)  # P: (got "Tensor[Batch, OutC, Literal[13], Literal[13]]", expected "Tensor[Batch, OutC, Literal[14], Literal[14]]") # N: (got "Tensor[Batch, OutC, int, int]"
