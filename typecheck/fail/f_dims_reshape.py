"""Reshapes whose sizes do not multiply out: dim arithmetic, reported by tensorplay.mypy_plugin."""

from __future__ import annotations

from typing import Literal, NewType

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Channels, Heads, Seq

HeadDim = NewType("HeadDim", int)
Model = NewType("Model", int)
Height = NewType("Height", int)
Width = NewType("Width", int)
Pixels = NewType("Pixels", int)
tp.relate(Model, tp.dim(Heads) * HeadDim)
tp.relate(Pixels, tp.dim(Height) * Width)

L2 = Literal[2]
L3 = Literal[3]
L4 = Literal[4]


def head_split_forgot_to_divide(x: Tensor[Batch, Seq, Model], b: Batch, s: Seq, h: Heads, m: Model) -> None:
    x.reshape(b, s, h, m)  # P: reshape: cannot view Tensor[Batch, Seq, Model] as [Batch, Seq, Heads, Model]: Batch*Seq*Model elements against Batch*Seq*Heads*Model (using Model == Heads * HeadDim)


def heads_dropped(x: Tensor[Batch, Seq, Model], b: Batch, s: Seq, d: HeadDim) -> None:
    x.reshape(b, s, d)  # P: cannot view Tensor[Batch, Seq, Model] as [Batch, Seq, HeadDim]


def merge_forgot_head_dim(y: Tensor[Batch, Seq, Heads, HeadDim], b: Batch, s: Seq, h: Heads) -> None:
    y.reshape(b, s, h)  # P: Batch*Seq*Heads*HeadDim elements against Batch*Seq*Heads


def tuple_form(x: Tensor[Batch, Seq, Model], b: Batch, s: Seq, h: Heads, m: Model) -> None:
    x.view((b, s, h, m))  # P: reshape: cannot view Tensor[Batch, Seq, Model] as [Batch, Seq, Heads, Model]


def heads_twice(x: Tensor[Batch, Seq, Model], b: Batch, s: Seq, h: Heads, d: HeadDim) -> None:
    x.reshape(b, s, h, h, d)  # P: as [Batch, Seq, Heads, Heads, HeadDim]


def extra_constant_axis(x: Tensor[Batch, Seq, Model], b: Batch, s: Seq, h: Heads, d: HeadDim) -> None:
    x.reshape(b, s, h, d, 2)  # P: against Batch*Seq*Heads*HeadDim*2


def literal_sizes(x: Tensor[L2, L3, L4]) -> None:
    x.reshape(6, 5)  # P: cannot view Tensor[2, 3, 4] as [6, 5]: 2*3*4 elements against 6*5


def literal_hole_does_not_divide(x: Tensor[L2, L3, L4]) -> None:
    x.reshape(5, -1)  # P: reshape: cannot view Tensor[2, 3, 4] as [5, -1]: 24 elements do not divide by 5


def image_flatten_forgot_width(x: Tensor[Batch, Channels, Height, Width], b: Batch, c: Channels, h: Height) -> None:
    x.reshape(b, c, h)  # P: cannot view Tensor[Batch, Channels, Height, Width] as [Batch, Channels, Height]


def pixels_against_height(x: Tensor[Batch, Channels, Pixels], b: Batch, c: Channels, h: Height) -> None:
    x.reshape(b, c, h)  # P: against Batch*Channels*Height (using Pixels == Height * Width)


def reshape_in_return(x: Tensor[Batch, Seq, Model], h: Heads, m: Model) -> Tensor[Batch, Seq, Heads, Model]:
    b, s, _ = x.shape
    return x.reshape(b, s, h, m)  # P: cannot view Tensor[Batch, Seq, Model] as [Batch, Seq, Heads, Model]
