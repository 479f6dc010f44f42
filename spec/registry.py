"""One :class:`PrimSpec` per primitive of the table (:mod:`.table`): its shape/dtype rule and its
numpy reference.

``SPECS[name].rule(*avals, **params)`` and ``SPECS[name].reference(*values, **params)``
take the primitive's inputs positionally and its static parameters as keywords. The two
functions of primitive ``p`` are ``p_rule`` and ``p_ref`` in the spec module of its family
(:data:`FAMILY_MODULES`); the elementwise families generate them from the table's dtype
rule and the module's table of reference functions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType

import numpy as np
import numpy.typing as npt

from . import conv, elementwise, linalg, nn, pool, random, reductions, structure
from .aval import Aval
from .table import PRIMITIVES, Primitive

FAMILY_MODULES: dict[str, ModuleType] = {
    "unary": elementwise, "binary": elementwise, "select": elementwise, "reduce": reductions,
    "arg_reduce": reductions, "view": structure, "structure": structure, "creation": structure,
    "linalg": linalg, "conv": conv, "pool": pool, "norm": nn, "softmax": nn, "attention": nn, "random": random,
}
"""The spec module that holds the rules and references of each family."""


@dataclass(frozen=True)
class PrimSpec:
    """The meaning of one primitive: its declaration, shape rule and reference."""

    primitive: Primitive
    rule: Callable[..., Aval]
    reference: Callable[..., npt.NDArray[np.generic]]

    @property
    def name(self) -> str:
        """The primitive's name."""
        return self.primitive.name

    @property
    def n_inputs(self) -> int | None:
        """The number of tensor inputs (``None``: variadic)."""
        return self.primitive.n_inputs

    @property
    def params(self) -> tuple[str, ...]:
        """The static parameter names, in order."""
        return self.primitive.param_names


def _pieces(p: Primitive) -> tuple[Callable[..., Aval], Callable[..., npt.NDArray[np.generic]]]:
    module = FAMILY_MODULES[p.family]
    rule, ref = getattr(module, f"{p.name}_rule", None), getattr(module, f"{p.name}_ref", None)
    if rule is None and ref is None and p.family in ("unary", "binary"):
        return elementwise.generated(p)
    if rule is None or ref is None:
        raise ImportError(f"spec: primitive {p.name!r} (family {p.family}) has no {p.name}_rule/{p.name}_ref "
                          f"in {module.__name__}")
    return rule, ref


SPECS: dict[str, PrimSpec] = {name: PrimSpec(p, *_pieces(p)) for name, p in PRIMITIVES.items()}
"""Every primitive's :class:`PrimSpec`, keyed by primitive name."""
