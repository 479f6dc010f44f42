"""Interpreters that do not implement the ``Ops`` protocol: a missing primitive or a wrong signature."""

from __future__ import annotations

from typing import Any, TypeVarTuple

from tensorplay import Ops, Tensor
from tensorplay.dims import Batch, Feat, Hidden

S = TypeVarTuple("S")


def model(ops: Ops, w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
    return ops.relu(ops.linear(w, None, x))


class ActivationsOnly:
    """An interpreter sketch that only knows a few primitives."""

    name = "activations"

    def relu(self, x: Tensor[*S]) -> Tensor[*S]:
        return x

    def tanh(self, x: Tensor[*S]) -> Tensor[*S]:
        return x


def run_partial(w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> None:
    model(ActivationsOnly(), w, x)  # E: Argument 1 to "model" has incompatible type "ActivationsOnly"; expected "Ops"


def store_partial() -> None:
    ops: Ops = ActivationsOnly()  # E: Incompatible types in assignment (expression has type "ActivationsOnly", variable has type "Ops")


class TorchNamedOps(Ops):
    """Spells the axis parameter the PyTorch way."""

    def softmax(self, x: Tensor[*S], *, dim: int) -> Tensor[*S]:  # E: Signature of "softmax" incompatible with supertype "tensorplay.ops.Ops"
        return x


class ExtraArgOps(Ops):
    """Adds a required parameter the protocol does not pass."""

    def relu(self, x: Tensor[*S], inplace: bool) -> Tensor[*S]:  # E: Signature of "relu" incompatible with supertype "tensorplay.ops.Ops"
        return x


class WrongAxesOps(Ops):
    """Takes one axis where the protocol passes a tuple of axes."""

    def reduce_sum(self, x: Tensor[*tuple[Any, ...]], *, axes: int,  # E: Argument 2 of "reduce_sum" is incompatible with supertype "tensorplay.ops.Ops"; supertype defines the argument type as "tuple[int, ...]"
                   keepdims: bool = False) -> Tensor[*tuple[Any, ...]]:
        return x


class ShapeChangingOps(Ops):
    """Claims that an elementwise primitive changes the shape."""

    def exp(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:  # E: Argument 1 of "exp" is incompatible with supertype "tensorplay.ops.Ops"  # E: Return type "Tensor[Batch, Feat]" of "exp" incompatible with return type "Tensor[*S]"
        return x
