"""The public error hierarchy (defined in :mod:`spec.errors`, the bottom layer, and re-exported)."""

from spec.errors import (
    AutogradError,
    AxisError,
    DTypeError,
    GraphCaptureError,
    MissingRuleError,
    ShapeError,
    TensorplayError,
)

__all__ = [
    "AutogradError",
    "AxisError",
    "DTypeError",
    "GraphCaptureError",
    "MissingRuleError",
    "ShapeError",
    "TensorplayError",
]
