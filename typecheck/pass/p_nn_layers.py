"""Generic ``tensorplay.nn`` layers (``Linear[In, Out]``, ``Conv2d[InC, OutC]``, ``Embedding[Vocab, D]``,
``LayerNorm[D]``, ``MultiheadAttention[D]``) applied to ``Tensor[*Lead, ...]``: a small text
classifier and a small image classifier, trained for a few steps."""

from __future__ import annotations

from typing import NewType, assert_type

import numpy as np

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Channels, Classes, Height, Seq, Vocab, Width
from tensorplay.optim import SGD

Model = NewType("Model", int)
OutC = NewType("OutC", int)
H2 = NewType("H2", int)
W2 = NewType("W2", int)
Flat = NewType("Flat", int)


class TextClassifier(nn.Module):
    def __init__(self, vocab: Vocab, d: Model, classes: Classes) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.attn = nn.MultiheadAttention(d, num_heads=2)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, ids: Index[Vocab, Batch, Seq]) -> Tensor[Batch, Classes]:
        x = self.embed(ids)
        assert_type(x, Tensor[Batch, Seq, Model])
        a, _ = self.attn(x, need_weights=False)
        h = self.norm(x + a)
        return self.head(h.mean(1))


class ImageClassifier(nn.Module):
    def __init__(self, cin: Channels, cout: OutC, classes: Classes, flat: Flat) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3, padding=1)
        self.fc = nn.Linear(flat, classes)

    def forward(self, img: Tensor[Batch, Channels, Height, Width]) -> Tensor[Batch, Classes]:
        b, _, h, w = img.shape
        y = self.conv(img, out=(H2(h), W2(w))).relu()
        assert_type(y, Tensor[Batch, OutC, H2, W2])
        n, c, hh, ww = y.shape
        return self.fc(y.reshape(n, Flat(c * hh * ww)))


def main() -> None:
    tp.manual_seed(0)
    vocab, d, classes, b, s = Vocab(20), Model(8), Classes(3), Batch(6), Seq(5)
    text = TextClassifier(vocab, d, classes)
    raw = np.random.default_rng(0).integers(0, vocab, size=(b, s))
    ids = tp.index(raw, bound=vocab, shape=(b, s))
    labels = tp.index(np.arange(b) % classes, bound=classes, shape=(b,))
    opt = SGD(text.parameters(), lr=0.1)
    first = float(F.cross_entropy(text(ids), labels))
    for _ in range(5):
        opt.zero_grad()
        loss = F.cross_entropy(text(ids), labels)
        assert_type(loss, Tensor[()])
        loss.backward()
        opt.step()
    assert float(F.cross_entropy(text(ids), labels)) < first

    image = ImageClassifier(Channels(1), OutC(2), classes, Flat(2 * 4 * 4))
    img = tp.randn(b, Channels(1), Height(4), Width(4))
    logits = image(img)
    assert tuple(logits.shape) == (6, 3)
    assert tuple(nn.CrossEntropyLoss()(logits, labels).shape) == ()


if __name__ == "__main__":
    main()
