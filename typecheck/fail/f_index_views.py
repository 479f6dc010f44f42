"""The errors people see when a loss or an embedding gets the wrong kind of integer tensor (see
docs/shapes.md, "Losses and embeddings, typed"): views of an ``Index`` keep its bound, so a mix-up of
vocabularies is still caught after ``reshape(-1)`` or ``unsqueeze(0)``."""

from __future__ import annotations

from typing import NewType

import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Classes, Seq, Vocab

Model = NewType("Model", int)


def targets_as_a_plain_tensor(logits: Tensor[Batch, Seq, Vocab], y: Tensor[Batch, Seq], v: Vocab) -> Tensor[()]:
    return F.cross_entropy(logits.reshape(-1, v), y.reshape(-1))  # E: Argument 2 to "cross_entropy" has incompatible type "Tensor[int]"; expected "Tensor[int, Vocab]"


def targets_of_another_vocabulary(logits: Tensor[Batch, Seq, Vocab], y: Index[Classes, Batch, Seq],
                                  v: Vocab) -> Tensor[()]:
    return F.cross_entropy(logits.reshape(-1, v), y.reshape(-1))  # E: Cannot infer value of type parameter "C" of "cross_entropy"


def one_sequence_of_labels(emb: nn.Embedding[Vocab, Model], labels: Index[Classes, Seq]) -> None:
    emb(labels.unsqueeze(0))  # E: Argument 1 has incompatible type "Index[Classes, Literal[1], Seq]"; expected "Index[Vocab, Literal[1], Seq]"


def flat_view_is_still_an_index(y: Index[Vocab, Batch, Seq]) -> Index[Classes, int]:
    return y.view(-1)  # E: Incompatible return value type (got "Index[Vocab, int]", expected "Index[Classes, int]")


def raw_ids_into_an_embedding(emb: nn.Embedding[Vocab, Model], ids: Tensor[Batch, Seq]) -> None:
    emb(ids.reshape(-1))  # E: Argument 1 has incompatible type "Tensor[int]"; expected "Index[Vocab, *tuple[Never, ...]]"


def bare_tensor_annotation(state: dict[str, Tensor]) -> None:  # E: Missing type arguments for generic type "Tensor[()]"
    pass


def encoder_width(layer: nn.TransformerEncoderLayer[Model], x: Tensor[Batch, Seq, Vocab]) -> None:
    layer(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Seq, Vocab]"; expected "Tensor[Batch, Seq, Model]"


def rms_norm_width(norm: nn.RMSNorm[Model], x: Tensor[Batch, Vocab]) -> None:
    norm(x)  # E: Argument 1 has incompatible type "Tensor[Batch, Vocab]"; expected "Tensor[Batch, Model]"
