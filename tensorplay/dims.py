"""Dimension types: ``NewType`` dims give readable mypy errors and honest ``x.shape`` types.

``Batch(32)`` is a typed size for constructors and ``reshape``; ``Literal[3]``
is for sizes that are truly fixed. Define your own with
``Hidden = NewType("Hidden", int)``, and relate them with
``relate(Model, dim(Heads) * HeadDim)`` (see :mod:`tensorplay.dimexpr`).
"""

from __future__ import annotations

from typing import NewType

from tensorplay.dimexpr import DimExpr, dim, relate

Batch = NewType("Batch", int)
Seq = NewType("Seq", int)
Feat = NewType("Feat", int)
Channels = NewType("Channels", int)
Height = NewType("Height", int)
Width = NewType("Width", int)
Depth = NewType("Depth", int)
Heads = NewType("Heads", int)
Hidden = NewType("Hidden", int)
Classes = NewType("Classes", int)
Vocab = NewType("Vocab", int)
Flat = NewType("Flat", int)

__all__ = ["Batch", "Seq", "Feat", "Channels", "Height", "Width", "Depth", "Heads", "Hidden", "Classes",
           "Vocab", "Flat", "DimExpr", "dim", "relate"]
