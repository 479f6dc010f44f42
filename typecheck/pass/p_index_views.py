"""The typed style for losses and embeddings written the PyTorch way: views of an ``Index`` stay
``Index`` (``y.reshape(-1)``, ``y.view(-1)``, ``ids.unsqueeze(0)``), so a language model's loss
``F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))`` type-checks with the classes checked; and
the layers PyTorch users reach for (``TransformerEncoder``, ``RMSNorm``, ``GroupNorm``,
``AdaptiveAvgPool2d``, ``Dropout2d``, ``F.pad``, ``nn.utils``, ``tp.utils.data``) keep their types."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NewType, assert_type

import numpy as np

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Channels, Height, Seq, Vocab, Width
from tensorplay.utils.data import DataLoader, TensorDataset

Model = NewType("Model", int)
AnyTensor = Tensor[*tuple[Any, ...]]  # a tensor of any shape (a bare ``Tensor`` is "Missing type arguments")


class TinyLM(nn.Module):
    def __init__(self, vocab: Vocab, d: Model) -> None:
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, 2, dim_feedforward=16, dropout=0.0, batch_first=True, norm_first=True), 1)
        self.norm = nn.RMSNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: Index[Vocab, Batch, Seq]) -> Tensor[Batch, Seq, Vocab]:
        x = self.tok(ids)
        assert_type(x, Tensor[Batch, Seq, Model])
        h = self.encoder(x, is_causal=True)
        assert_type(h, Tensor[Batch, Seq, Model])
        return self.head(self.norm(h))

    if TYPE_CHECKING:
        __call__ = forward

    def loss(self, ids: Index[Vocab, Batch, Seq], targets: Index[Vocab, Batch, Seq]) -> Tensor[()]:
        logits = self(ids)
        flat_targets = targets.reshape(-1)
        assert_type(flat_targets, Index[Vocab, int])
        assert_type(targets.view(-1), Index[Vocab, int])
        return F.cross_entropy(logits.reshape(-1, self.vocab), flat_targets)


def one_sequence(model: TinyLM, ids: Index[Vocab, Seq]) -> Tensor[Batch, Seq, Vocab]:
    batch = ids.unsqueeze(0)  # a batch of one: still an Index with the vocabulary bound
    assert_type(batch, Index[Vocab, Literal[1], Seq])
    return model(batch.with_shape(Batch(1), ids.shape[0]))


def image_head(x: Tensor[Batch, Channels, Height, Width], c: Channels) -> AnyTensor:
    y = nn.GroupNorm(1, c)(F.pad(x, (1, 1, 1, 1), mode="reflect"))
    y = nn.Dropout2d(0.1)(y)
    return nn.AdaptiveAvgPool2d(1)(y).flatten(1)


def main() -> None:
    tp.manual_seed(0)
    vocab, d, b, s = Vocab(11), Model(8), Batch(4), Seq(6)
    model = TinyLM(vocab, d)
    raw = np.random.default_rng(0).integers(0, vocab, size=(b, s + 1))
    data = tp.index(raw, bound=vocab)
    loader = DataLoader(TensorDataset(data), batch_size=2, shuffle=True, generator=tp.Generator().manual_seed(0))
    opt = tp.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        for (chunk,) in loader:
            seq = tp.index(chunk, bound=vocab, shape=(Batch(2), Seq(s + 1)))
            ids, targets = seq[:, :-1].with_shape(Batch(2), s), seq[:, 1:].with_shape(Batch(2), s)
            opt.zero_grad()
            loss = model.loss(ids, targets)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(loss.item())
    assert np.mean(losses[-2:]) < np.mean(losses[:2])
    single = tp.index(raw[0, :s], bound=vocab, shape=(s,))
    assert tuple(one_sequence(model.eval(), single).shape) == (1, s, vocab)
    img = tp.randn(Batch(2), Channels(3), Height(5), Width(5))
    assert tuple(image_head(img, Channels(3)).shape) == (2, 3)


if __name__ == "__main__":
    main()
