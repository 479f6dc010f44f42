"""Mismatched inner dims in matmul and linear: each marked line is a realistic bug mypy reports."""

from __future__ import annotations

from typing import TypeVarTuple

from tensorplay import Ops, Tensor
from tensorplay import prefix as P
from tensorplay.dims import Batch, Classes, Feat, Hidden, Seq

Lead = TypeVarTuple("Lead")


def forgot_transpose(x: Tensor[Batch, Feat], w: Tensor[Hidden, Feat]) -> Tensor[Batch, Hidden]:
    return x @ w  # E: Unsupported operand types for @ ("Tensor[Batch, Feat]" and "Tensor[Hidden, Feat]")  # E: Returning Any


def wrong_weight(x: Tensor[Batch, Feat], w1: Tensor[Feat, Hidden], w2: Tensor[Feat, Classes]) -> Tensor[Batch, Classes]:
    h = x @ w1
    return h @ w2  # E: Unsupported operand types for @ ("Tensor[Batch, Hidden]" and "Tensor[Feat, Classes]")  # E: Returning Any


def batched_inner(q: Tensor[Batch, Seq, Feat], k: Tensor[Batch, Seq, Feat]) -> Tensor[Batch, Seq, Seq]:
    return q @ k  # E: Unsupported operand types for @


def result_mislabelled(x: Tensor[Batch, Feat], w: Tensor[Feat, Hidden]) -> Tensor[Batch, Classes]:
    return x @ w  # E: Unsupported operand types for @ ("Tensor[Batch, Feat]" and "Tensor[Feat, Hidden]")  # E: Returning Any


def linear_in_features(ops: Ops, w: Tensor[Hidden, Feat], b: Tensor[Hidden], x: Tensor[Batch, Hidden]) -> None:
    P.linear(ops, w, b, x)  # E: Cannot infer value of type parameter "In" of "linear"


def linear_bias(ops: Ops, w: Tensor[Hidden, Feat], b: Tensor[Feat], x: Tensor[Batch, Feat]) -> None:
    P.linear(ops, w, b, x)  # E: Cannot infer value of type parameter "Out" of "linear"


def stacked_layers(ops: Ops, w1: Tensor[Hidden, Feat], w2: Tensor[Classes, Feat], x: Tensor[*Lead, Feat]
                   ) -> Tensor[*Lead, Classes]:
    h = ops.relu(P.linear(ops, w1, None, x))
    return P.linear(ops, w2, None, h)  # E: Cannot infer value of type parameter "In" of "linear"


def ops_linear(ops: Ops, w: Tensor[Classes, Hidden], x: Tensor[Batch, Seq, Feat]) -> None:
    ops.linear(w, None, x)  # E: Cannot infer value of type parameter "In" of "linear" of "Ops"


def ops_matmul(ops: Ops, a: Tensor[Batch, Seq, Feat], b: Tensor[Hidden, Classes]) -> None:
    ops.matmul(a, b)  # E: Argument 1 to "matmul" of "Ops" has incompatible type "Tensor[Batch, Seq, Feat]"


def linear_output_used_as_input(ops: Ops, w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
    return P.linear(ops, w, None, x)  # E: Argument 2 to "linear" has incompatible type "Tensor[Hidden, Feat]"; expected "Tensor[Feat, Feat]"
