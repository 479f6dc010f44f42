"""The public error hierarchy (defined in :mod:`tensorplay.spec.errors`, the bottom layer, and re-exported)."""

from tensorplay.spec.errors import (
    AutogradError,
    AxisError,
    DTypeError,
    GraphCaptureError,
    MissingRuleError,
    ShapeError,
    TensorplayError,
)


class IndexRangeError(TensorplayError, IndexError):
    """An integer index (an embedding id, a class target, an ``Index`` value) is outside its range."""


__all__ = [
    "AutogradError",
    "AxisError",
    "DTypeError",
    "GraphCaptureError",
    "IndexRangeError",
    "MissingRuleError",
    "ShapeError",
    "TensorplayError",
]
