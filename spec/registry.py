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
from typing import Any

import numpy as np
import numpy.typing as npt

from . import conv, elementwise, linalg, nn, pool, random, reductions, structure
from .aval import Aval
from .table import PRIMITIVES, Primitive

FAMILY_MODULES: dict[str, ModuleType] = {
    "unary": elementwise, "binary": elementwise, "select": elementwise, "reduce": reductions,
    "arg_reduce": reductions, "view": structure, "structure": structure, "creation": structure,
    "linalg": linalg, "conv": conv, "pool": pool, "norm": nn, "softmax": nn, "attention": nn, "random": random,
    "check": structure, "scan": reductions,
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


def _missing(p: Primitive, piece: str, where: str) -> Callable[..., Any]:
    """Stands for a piece not written yet: calling it raises, naming what to write where (the library
    still imports, so the completeness test can list every missing piece at once)."""
    def missing(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"spec: primitive {p.name!r} has no {piece} yet: write it in {where}")
    missing.missing = True  # type: ignore[attr-defined]
    return missing


def _pieces(p: Primitive) -> tuple[Callable[..., Any], Callable[..., Any]]:
    module = FAMILY_MODULES[p.family]
    where = module.__name__.rsplit(".", 1)[-1]
    if p.family in ("unary", "binary") and not hasattr(module, f"{p.name}_rule"):
        generated = elementwise.generated(p)
        if generated is not None:
            return generated
        return (_missing(p, "shape rule", f"spec/{where}.py"),
                _missing(p, "reference", f"the {p.family} reference table of spec/{where}.py"))
    rule = getattr(module, f"{p.name}_rule", None) or _missing(p, "shape rule", f"spec/{where}.py ({p.name}_rule)")
    ref = getattr(module, f"{p.name}_ref", None) or _missing(p, "reference", f"spec/{where}.py ({p.name}_ref)")
    return rule, ref


def is_missing(piece: object) -> bool:
    """True for the stand-in of a piece that is not written yet."""
    return bool(getattr(piece, "missing", False))


SPECS: dict[str, PrimSpec] = {name: PrimSpec(p, *_pieces(p)) for name, p in PRIMITIVES.items()}
"""Every primitive's :class:`PrimSpec`, keyed by primitive name."""
