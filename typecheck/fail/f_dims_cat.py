"""tp.cat / tp.stack: the other dims must agree, and the concatenated dim is the sum."""

from __future__ import annotations

from typing import Literal, NewType

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq

Left = NewType("Left", int)
Right = NewType("Right", int)
Both = NewType("Both", int)
tp.relate(Both, tp.dim(Left) + Right)

L3 = Literal[3]
L4 = Literal[4]
L8 = Literal[8]


def needs_eight(x: Tensor[Batch, L8]) -> None:
    print(x)


def features_differ(a: Tensor[Batch, Seq, Feat], b: Tensor[Batch, Seq, Hidden]) -> None:
    tp.cat([a, b], 1)  # P: cat: tensor 1 [Batch, Seq, Hidden] does not match tensor 0 [Batch, Seq, Feat] on axis 2 (Hidden against Feat; the dims off the concatenation axis 1 must agree)


def ranks_differ(a: Tensor[Batch, Seq, Feat], b: Tensor[Batch, Feat]) -> None:
    tp.cat([a, b], 0)  # P: cat: tensor 1 has rank 2, tensor 0 has rank 3: [Batch, Seq, Feat] and [Batch, Feat]


def negative_axis(a: Tensor[Batch, Seq, Feat], b: Tensor[Batch, Hidden, Feat]) -> None:
    tp.cat([a, b], -1)  # P: on axis 1 (Hidden against Seq; the dims off the concatenation axis 2 must agree)


def shifted_pieces(x: Tensor[Batch, Seq, Feat]) -> None:
    tp.cat([x[:, 1:], x[:, :-2]], 0)  # P: on axis 1 (Seq - 2 against Seq - 1


def sum_is_declared(left: Tensor[Batch, Left], right: Tensor[Batch, Right]) -> Tensor[Batch, Left]:
    return tp.cat([left, right], 1)  # P: Incompatible return value type (got "Tensor[Batch, Both]", expected "Tensor[Batch, Left]")


def sum_of_undeclared(x: Tensor[Batch, Seq], y: Tensor[Batch, Feat]) -> Tensor[Batch, Seq]:
    return tp.cat([x, y], 1)  # P: return value: shape [Batch, Feat + Seq] where expected Tensor[Batch, Seq] (Feat + Seq against Seq)


def literal_sum(a: Tensor[Batch, L3], b: Tensor[Batch, L4]) -> None:
    needs_eight(tp.cat([a, b], 1))  # P: Argument 1 to "needs_eight" has incompatible type "Tensor[Batch, Literal[7]]"; expected "Tensor[Batch, Literal[8]]"


def concatenated_twice(x: Tensor[Batch, Seq]) -> Tensor[Batch, Seq]:
    return tp.cat([x, x], 1)  # P: (2*Seq against Seq)


def stack_mismatch(a: Tensor[Batch, Feat], b: Tensor[Batch, Hidden]) -> None:
    tp.stack([a, b], 1)  # P: stack: tensor 1 [Batch, Hidden] does not match tensor 0 [Batch, Feat] on axis 1 (Hidden against Feat; stacked tensors must have one shape)


def stack_counts(a: Tensor[Batch, Feat]) -> Tensor[Batch, Literal[2], Feat]:
    return tp.stack([a, a, a], 1)  # P: Incompatible return value type (got "Tensor[Batch, Literal[3], Feat]", expected "Tensor[Batch, Literal[2], Feat]")


def stack_of_shifted(x: Tensor[Seq, Feat]) -> None:
    tp.stack([x[1:], x[:-2]], 1)  # P: stack: tensor 1 [Seq - 2, Feat] does not match tensor 0 [Seq - 1, Feat] on axis 0
