"""The reference meaning of every primitive: shape/dtype rules and plain-numpy references.

``spec`` is the bottom layer: it imports only numpy and the standard library.
``SPECS[name]`` is the :class:`PrimSpec` of primitive ``name``.
"""

from spec.aval import Aval
from spec.registry import SPECS, PrimSpec

__all__ = ["SPECS", "Aval", "PrimSpec"]
