"""Typed data inputs: index tensors whose bound does not match what they index."""

from __future__ import annotations

from typing import Any

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Classes, Feat, Seq, Vocab


def embed_labels(emb: nn.Embedding[Vocab, Feat], labels: Index[Classes, Batch]) -> None:
    emb(labels)  # E: Argument 1 has incompatible type "Index[Classes, Batch]"; expected "Index[Vocab, Batch]"


def embed_raw_ints(emb: nn.Embedding[Vocab, Feat], ids: Tensor[Batch, Seq]) -> None:
    emb(ids)  # E: Argument 1 has incompatible type "Tensor[Batch, Seq]"; expected "Index[Vocab, *tuple[Never, ...]]"


def targets_from_the_vocabulary(logits: Tensor[Batch, Classes], tokens: Index[Vocab, Batch]) -> None:
    F.cross_entropy(logits, tokens)  # E: Cannot infer value of type parameter "C" of "cross_entropy"


def targets_not_batched_like_logits(logits: Tensor[Batch, Classes], y: Index[Classes, Seq]) -> None:
    F.cross_entropy(logits, y)  # E: Cannot infer value of type parameter "N" of "cross_entropy"


def loss_module_targets(loss: nn.CrossEntropyLoss, logits: Tensor[Batch, Classes], y: Index[Vocab, Batch]) -> None:
    loss(logits, y)  # E: Cannot infer function type argument


def bound_is_not_the_table(table: Tensor[Vocab, Feat]) -> Index[Vocab, Batch, Seq]:
    raw: Any = [[1, 2, 3]]
    return tp.index(raw, bound=Classes(10), shape=(Batch(1), Seq(3)))  # E: Argument "bound" to "index" has incompatible type "Classes"; expected "Vocab"


def index_shape_swapped(raw: Any, v: Vocab, b: Batch, s: Seq) -> Index[Vocab, Batch, Seq]:
    return tp.index(raw, bound=v, shape=(s, b))  # E: Argument "shape" to "index" has incompatible type "tuple[Seq, Batch]"; expected "tuple[Batch, Seq]"
