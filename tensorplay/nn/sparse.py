"""``Embedding``: a lookup table indexed by integer tensors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple

from tensorplay.nn import functional as F
from tensorplay.nn import init
from tensorplay.nn._util import check_padding_idx, layer_size
from tensorplay.nn.linear import empty_parameter
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

if TYPE_CHECKING:
    from tensorplay.index import Index

Num = TypeVar("Num", bound=int)
Dim = TypeVar("Dim", bound=int)
Lead = TypeVarTuple("Lead")


class Embedding(Module, Generic[Num, Dim]):
    """``weight[Num, Dim]`` rows looked up by integer ``indices[*lead] -> [*lead, Dim]``.

    Weights start ``N(0, 1)`` (row ``padding_idx`` zero, and it gets no gradient), as PyTorch.
    An index outside ``[0, Num)`` raises :class:`~tensorplay.nn.functional.IndexRangeError`.
    """

    def __init__(self, num_embeddings: Num, embedding_dim: Dim, padding_idx: int | None = None,
                 dtype: Any = None) -> None:
        super().__init__()
        num = layer_size(num_embeddings, "num_embeddings", "Embedding")
        dim = layer_size(embedding_dim, "embedding_dim", "Embedding")
        if padding_idx is not None:
            padding_idx = check_padding_idx(padding_idx, num, "Embedding")
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = padding_idx
        self.weight = empty_parameter((num, dim), dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """``N(0, 1)``; the padding row zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight._data[self.padding_idx] = 0

    def forward(self, indices: Index[Num, *Lead]) -> Tensor[*Lead, Dim]:
        """The rows at ``indices``: an ``Index[Num, *Lead]`` made by ``tp.index(ids, bound=num)``, so mypy
        checks that the ids index this table (plain integer tensors are accepted at run time too)."""
        return F.embedding(indices, self.weight, self.padding_idx)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")
