"""Slices by constants change a dim (``Seq`` -> ``Seq - 1``): the shifted tensors must meet their partners."""

from __future__ import annotations

from typing import Literal, NewType, TypeVar

from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq, Vocab
from tensorplay.nn import functional as F

N = TypeVar("N")
D = TypeVar("D")
L10 = Literal[10]
L8 = Literal[8]


def next_token_loss(pred: Tensor[Batch, Seq, Vocab], target: Tensor[Batch, Seq, Vocab]) -> Tensor[()]:
    return ((pred - target) ** 2).mean()


def pair(a: Tensor[N, D], b: Tensor[N, D]) -> Tensor[N, D]:
    return a - b


def shifted_return(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Feat]:
    return x[:, 1:]  # P: return value: shape [Batch, Seq - 1, Feat] where expected Tensor[Batch, Seq, Feat] (Seq - 1 against Seq)


def inputs_and_targets_misaligned(x: Tensor[Batch, Seq, Feat]) -> None:
    inputs, targets = x[:, :-1], x[:, 2:]
    inputs - targets  # P: -: the shapes [Batch, Seq - 1, Feat] and [Batch, Seq - 2, Feat] do not broadcast: axis 1 has Seq - 1 against Seq - 2


def annotated_assignment(x: Tensor[Batch, Seq, Feat]) -> None:
    y: Tensor[Batch, Seq, Feat] = x[:, :-1]  # P: assignment to 'y': shape [Batch, Seq - 1, Feat]
    print(y)


def returned_variable(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Feat]:
    y = x[:, 1:]  # P: return value: shape [Batch, Seq - 1, Feat]
    return y


def literal_slice(x: Tensor[Batch, L10]) -> Tensor[Batch, L10]:
    return x[:, 2:]  # P: Incompatible return value type (got "Tensor[Batch, Literal[8]]", expected "Tensor[Batch, Literal[10]]")


def strided_literal(x: Tensor[Batch, L10], y: Tensor[Batch, L8]) -> None:
    x[:, ::2] + y  # P: Unsupported operand types for + ("Tensor[Batch, Literal[5]]" and "Tensor[Batch, Literal[8]]")


def loss_of_unshifted_targets(logits: Tensor[Batch, Seq, Vocab], onehot: Tensor[Batch, Seq, Vocab]) -> None:
    next_token_loss(logits[:, :-1], onehot)  # P: next_token_loss(): argument 'pred' has shape [Batch, Seq - 1, Vocab]; expected Tensor[Batch, Seq, Vocab]


def typevar_bound_twice(x: Tensor[Seq, Feat]) -> None:
    pair(x[1:], x[2:])  # P: pair(): argument 'b' has shape [Seq - 2, Feat]; its dim N is Seq - 2, but argument 'a' binds it to Seq - 1


def ellipsis_slice(x: Tensor[Batch, Seq, Feat]) -> None:
    x[..., 1:] * x[..., :-2]  # P: *: the shapes [Batch, Seq, Feat - 1] and [Batch, Seq, Feat - 2]


def comparison_of_shifts(x: Tensor[Batch, Seq]) -> None:
    x[:, 1:] > x[:, :-2]  # P: >: the shapes [Batch, Seq - 1] and [Batch, Seq - 2]


def contracted_dim_shortened(x: Tensor[Batch, Feat], w: Tensor[Feat, Hidden]) -> None:
    x[:, 1:] @ w  # P: @: the contracted dims differ: [Batch, Feat - 1] @ [Feat, Hidden] contracts Feat - 1 with Feat


def window_shorter_than_axis(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Feat]:
    return x[:, 1:-1]  # P: (Seq - 2 against Seq)


def new_axis_then_shift(x: Tensor[Seq, Feat]) -> Tensor[Literal[1], Seq, Feat]:
    return x[None, 1:]  # P: return value: shape [1, Seq - 1, Feat]


def cross_entropy_on_a_misaligned_shift(logits: Tensor[Batch, Vocab, Seq], ids: Index[Vocab, Batch, Seq]) -> None:
    F.cross_entropy(logits[:, :, :-1], ids[:, 2:])  # P: cross_entropy(): argument 'target' has shape [Batch, Seq - 2]; its dim *Lead is Seq - 2, but argument 'input' binds it to Seq - 1


def index_slice_returned(ids: Index[Vocab, Batch, Seq]) -> Index[Vocab, Batch, Seq]:
    return ids[:, 1:]  # P: return value: shape [Batch, Seq - 1] where expected Tensor[Batch, Seq] (Seq - 1 against Seq)
