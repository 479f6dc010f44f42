"""Shape mistakes in PyTorch's function forms are caught like those of the methods."""

from __future__ import annotations

import tensorplay as tp
from tensorplay import Tensor
from tensorplay.dims import Batch, Feat, Hidden


def product_of_mismatched_inner_dims(x: Tensor[Batch, Feat], w: Tensor[Hidden, Feat]) -> None:
    tp.matmul(x, w)  # E: Cannot infer function type argument


def reduced_axis_kept(x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
    total = tp.sum(x, -1)
    return total  # E: Incompatible return value type (got "Tensor[Batch]", expected "Tensor[Batch, Feat]")


def max_along_a_dim_is_a_pair(x: Tensor[Batch, Feat]) -> Tensor[Batch]:
    return tp.max(x, -1)  # E: Incompatible return value type (got "ValuesIndices[Batch]", expected "Tensor[Batch]")


def outer_of_a_matrix(x: Tensor[Batch, Feat], v: Tensor[Feat]) -> None:
    tp.outer(x, v)  # E: Argument 1 has incompatible type "Tensor[Batch, Feat]"


def elementwise_keeps_the_shape(x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
    return tp.exp(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Feat]"; expected "Tensor[Batch, Hidden]"


def sort_keeps_the_shape(x: Tensor[Batch, Feat]) -> Tensor[Feat, Batch]:
    return tp.sort(x).values  # E: Incompatible return value type (got "Tensor[Batch, Feat]", expected "Tensor[Feat, Batch]")
