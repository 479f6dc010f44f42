"""The error hierarchy shared by every layer.

It lives at the bottom layer (``tensorplay.spec``) so that shape rules can raise it;
``tensorplay.errors`` re-exports it as the public hierarchy.
"""

from __future__ import annotations


class TensorplayError(Exception):
    """Base class of every error tensorplay raises on purpose."""


class ShapeError(TensorplayError, ValueError):
    """Shapes do not fit: the message names the primitive, argument, axis and both shapes."""


class DTypeError(TensorplayError, TypeError):
    """A dtype is not accepted: the message names the primitive, argument, expected and given dtype."""


class AxisError(ShapeError, IndexError):
    """An axis is out of range for the rank of the tensor it applies to."""


class GraphCaptureError(TensorplayError, RuntimeError):
    """An operation cannot be recorded into a graph (for example a data-dependent branch)."""


class AutogradError(TensorplayError, RuntimeError):
    """Autograd was used in a way that cannot give a correct gradient."""


class IndexRangeError(TensorplayError, IndexError):
    """An integer index (an embedding id, a class target, an ``Index`` value) is outside its range."""


class MissingRuleError(TensorplayError, NotImplementedError):
    """A transform met a primitive that has no rule for it."""


class DeviceError(TensorplayError, RuntimeError):
    """A device other than the CPU was asked for (tensorplay runs on the CPU only)."""
