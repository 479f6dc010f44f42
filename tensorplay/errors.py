"""The public error hierarchy (defined in :mod:`tensorplay.spec.errors`, the bottom layer, and re-exported)."""

from tensorplay.spec.errors import (
    AutogradError,
    AxisError,
    DeviceError,
    DTypeError,
    GraphCaptureError,
    IndexRangeError,
    MissingRuleError,
    ShapeError,
    TensorplayError,
)


__all__ = [
    "AutogradError",
    "AxisError",
    "DeviceError",
    "DTypeError",
    "GraphCaptureError",
    "IndexRangeError",
    "MissingRuleError",
    "ShapeError",
    "TensorplayError",
]
