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


class ArgumentError(TensorplayError, ValueError):
    """An argument's value is outside what the function accepts (an unknown mode or reduction name, a
    probability outside ``[0, 1]``, a zero slice step): the message names the function, the argument,
    what it accepts and what it got."""


class ArgumentTypeError(TensorplayError, TypeError):
    """An argument has a Python type the function does not take (a float seed): the message names the
    function, the argument, the expected type and the type and value given."""


class KeyLookupError(TensorplayError, KeyError):
    """A name or key is missing or not allowed (a KeyError, so ``except KeyError`` catches it); unlike a
    bare KeyError, ``str()`` is the plain message, without quotes around it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""
