"""A vector on the left of ``tp.matmul`` / ``Tensor.matmul`` whose size is not the matrix's rows is reported,
as for ``@``; ``Ops.matmul`` (the rank >= 2 primitive, which refuses a vector at run time) reports one."""

from __future__ import annotations

import tensorplay as tp
from tensorplay import Ops, Tensor
from tensorplay.dims import Batch, Feat, Hidden


def wrong_rows(v: Tensor[Hidden], w: Tensor[Feat, Hidden], ws: Tensor[Batch, Feat, Hidden]) -> None:
    tp.matmul(v, w)  # E: Argument 1 has incompatible type "Tensor[Hidden]"
    v.matmul(ws)  # E: Argument 1 has incompatible type "Tensor[Batch, Feat, Hidden]"


def batch_dims_are_kept(v: Tensor[Feat], ws: Tensor[Batch, Feat, Hidden]) -> Tensor[Hidden]:
    y = tp.matmul(v, ws)
    return y  # E: Incompatible return value type (got "Tensor[Batch, Hidden]", expected "Tensor[Hidden]")


def primitive_refuses_a_vector(ops: Ops, v: Tensor[Feat], w: Tensor[Feat, Hidden]) -> None:
    ops.matmul(v, w)  # E: Argument 1 to "matmul" of "Ops" has incompatible type "Tensor[Feat]"
