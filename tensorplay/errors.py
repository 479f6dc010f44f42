"""The public error hierarchy (defined in :mod:`tensorplay.spec.errors`, the bottom layer, and re-exported)."""

from tensorplay.spec.errors import (
    ArgumentError,
    ArgumentTypeError,
    AutogradError,
    AxisError,
    DeviceError,
    DTypeError,
    GraphCaptureError,
    IndexRangeError,
    KeyLookupError,
    MissingRuleError,
    ShapeError,
    TensorplayError,
)


__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "AutogradError",
    "AxisError",
    "DeviceError",
    "DTypeError",
    "GraphCaptureError",
    "IndexRangeError",
    "KeyLookupError",
    "MissingRuleError",
    "ShapeError",
    "TensorplayError",
]
