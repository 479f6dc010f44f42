"""Swapped axes, wrong ranks and mismatched elementwise shapes."""

from __future__ import annotations

from typing import NewType

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq

Flat = NewType("Flat", int)


def encode(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Feat]:
    return x.relu()


def time_major_input(x: Tensor[Seq, Batch, Feat]) -> None:
    encode(x)  # E: Argument 1 to "encode" has incompatible type "Tensor[Seq, Batch, Feat]"; expected "Tensor[Batch, Seq, Feat]"


def transposed_wrong_axes(x: Tensor[Batch, Seq, Feat]) -> None:
    encode(x.transpose(0, 1))  # E: Argument 1 to "encode" has incompatible type "Tensor[Seq, Batch, Feat]"


def swapped_return(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Feat, Seq]:
    return x  # E: Incompatible return value type (got "Tensor[Batch, Seq, Feat]", expected "Tensor[Batch, Feat, Seq]")


def attention_scores(q: Tensor[Batch, Seq, Feat], k: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Seq]:
    return q.transpose(-2, -1) @ k  # E: Unsupported operand types for @ ("Tensor[Batch, Feat, Seq]" and "Tensor[Batch, Seq, Feat]")  # E: Returning Any


def missing_batch_axis(x: Tensor[Seq, Feat]) -> None:
    encode(x)  # E: Argument 1 to "encode" has incompatible type "Tensor[Seq, Feat]"; expected "Tensor[Batch, Seq, Feat]"


def extra_axis(x: Tensor[Batch, Seq, Feat]) -> None:
    encode(x.unsqueeze(0))  # E: Argument 1 to "encode" has incompatible type "Tensor[Literal[1], Batch, Seq, Feat]"


def pooled_wrong_axis(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Feat]:
    return x.mean(-1)  # E: Incompatible return value type (got "Tensor[Batch, Seq]", expected "Tensor[Batch, Feat]")


def reduced_batch_away(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Feat]:
    return x.sum(0)  # E: Incompatible return value type (got "Tensor[Seq, Feat]", expected "Tensor[Batch, Feat]")


def flatten_forgot_batch(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Flat]:
    b, s, f = x.shape
    return x.reshape(Flat(b * s * f))  # E: Too few arguments for "reshape" of "Tensor"  # E: Argument 1 to "reshape" of "Tensor" has incompatible type "Flat"; expected "Batch"


def softmax_without_keepdim(x: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Feat]:
    e = x.exp()
    return e / e.sum(-1)  # E: Unsupported operand types for / ("Tensor[Batch, Seq, Feat]" and "Tensor[Batch, Seq]")  # E: Returning Any


def residual_mismatch(x: Tensor[Batch, Hidden], h: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
    return x + h  # E: Unsupported operand types for + ("Tensor[Batch, Hidden]" and "Tensor[Batch, Feat]")  # E: Returning Any


def bias_of_wrong_size(x: Tensor[Batch, Feat], b: Tensor[Hidden]) -> Tensor[Batch, Feat]:
    return x + b  # E: Unsupported operand types for + ("Tensor[Batch, Feat]" and "Tensor[Hidden]")  # E: Returning Any


def select_between_mismatched(mask: Tensor[Batch, Seq], a: Tensor[Batch, Seq], b: Tensor[Batch, Feat]) -> None:
    tp.where(mask, a, b)  # E: Cannot infer value of type parameter "S" of "where"


def zeros_wrong_dims(b: Batch, f: Feat) -> Tensor[Batch, Hidden]:
    return tp.zeros(b, f)  # E: Too many arguments for "zeros"  # E: Argument 2 to "zeros" has incompatible type "Feat"; expected "Hidden"
