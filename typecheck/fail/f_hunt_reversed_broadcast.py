"""The smaller operand first still reports what does not broadcast, and a vector on the left of ``@``
whose size is not the matrix's rows."""

from __future__ import annotations

from tensorplay import Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq


def wrong_bias_first(x: Tensor[Batch, Seq, Feat], b: Tensor[Hidden]) -> None:
    b + x  # E: Unsupported operand types for + ("Tensor[Hidden]" and "Tensor[Batch, Seq, Feat]")
    b * x  # E: Unsupported operand types for * ("Tensor[Hidden]" and "Tensor[Batch, Seq, Feat]")


def wrong_kept_axis_first(x: Tensor[Batch, Feat], y: Tensor[Seq, Feat]) -> None:
    x.sum(-1, keepdim=True) / y  # E: Unsupported operand types for / ("Tensor[Batch, Literal[1]]" and "Tensor[Seq, Feat]")


def result_keeps_the_larger_shape(x: Tensor[Batch, Feat], b: Tensor[Feat]) -> Tensor[Feat]:
    y = b + x
    return y  # E: Incompatible return value type (got "Tensor[Batch, Feat]", expected "Tensor[Feat]")


def wrong_vector(v: Tensor[Hidden], w: Tensor[Feat, Hidden]) -> None:
    v @ w  # E: Unsupported operand types for @ ("Tensor[Hidden]" and "Tensor[Feat, Hidden]")
