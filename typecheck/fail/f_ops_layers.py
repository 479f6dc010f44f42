"""Layer operations called through ``Ops`` with mismatched shapes: mypy reports each one."""

from __future__ import annotations

from typing import Literal, NewType

from tensorplay import Ops, Tensor
from tensorplay.dims import Batch, Channels, Height, Seq, Width

OutC = NewType("OutC", int)
H2 = NewType("H2", int)
W2 = NewType("W2", int)
Model = NewType("Model", int)
Other = NewType("Other", int)
K3 = Literal[3]


def conv_keeps_names(ops: Ops, k: Tensor[OutC, Channels, K3, K3],
                     x: Tensor[Batch, Channels, Height, Width]) -> Tensor[Batch, OutC, H2, W2]:
    return ops.conv(k, None, x, padding="same")  # E: Incompatible return value type (got "Tensor[Batch, OutC, int, int]", expected "Tensor[Batch, OutC, H2, W2]")


def conv_channel_mismatch(ops: Ops, k: Tensor[OutC, Channels, K3, K3], x: Tensor[Batch, Height, Width, Channels]) -> None:
    ops.conv(k, None, x, padding="same")  # E: Cannot infer value of type parameter "InC" of "conv" of "Ops"


def pool_out_names_swapped(ops: Ops, x: Tensor[Batch, Channels, Height, Width]) -> Tensor[Batch, Channels, H2, W2]:
    return ops.max_pool(x, 2, out=(W2, H2))  # E: Argument "out" to "max_pool" of "Ops" has incompatible type "tuple[type[W2], type[H2]]"; expected "tuple[type[H2], type[W2]]"


def linear_feature_mismatch(ops: Ops, w: Tensor[OutC, Model], x: Tensor[Batch, Other]) -> None:
    ops.linear(w, None, x)  # E: Cannot infer value of type parameter "In" of "linear" of "Ops"


def layer_norm_gamma_size(ops: Ops, g: Tensor[Other], x: Tensor[Batch, Seq, Model]) -> None:
    ops.layer_norm(x, g)  # E: Cannot infer value of type parameter "D" of "layer_norm" of "Ops"


def attention_weights_of_another_model(ops: Ops, w: Tensor[Other, Other], x: Tensor[Batch, Seq, Model]) -> None:
    ops.attention(w, w, w, w, x, 2)  # E: Cannot infer value of type parameter "D" of "attention" of "Ops"


def smooth_pool_needs_beta(ops: Ops, x: Tensor[Batch, Channels, Height, Width]) -> None:
    ops.smooth_max_pool(x, 2)  # E: No overload variant of "smooth_max_pool" of "Ops" matches argument types "Tensor[Batch, Channels, Height, Width]", "int"


def map_result_type(ops: Ops, x: Tensor[Batch, Seq, Model]) -> Tensor[Batch, Seq, Model]:
    def one(v: Tensor[Model]) -> Tensor[Other]:
        return v.sum().reshape(Other(1))

    mapped = ops.map(2, x, one)
    return mapped  # E: Incompatible return value type (got "Tensor[Batch, Seq, Other]", expected "Tensor[Batch, Seq, Model]")
