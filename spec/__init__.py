"""The reference meaning of every primitive: shape/dtype rules and plain-numpy references.

``tensorplay.spec`` is the bottom layer: it imports only numpy and the standard library.
``SPECS[name]`` is the :class:`PrimSpec` of primitive ``name``.
"""

from .aval import Aval
from .registry import SPECS, PrimSpec

__all__ = ["SPECS", "Aval", "PrimSpec"]
