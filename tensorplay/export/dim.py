"""Declaring dynamic dims: :class:`Dim`, derived dims, the ``AUTO``/``STATIC``/``DYNAMIC`` markers, and
the normalised form of a declaration (:class:`Constraint`, :class:`EqualityConstraint`).

* ``Dim("Seq", min=2, max=4096)``: a named dim; its domain is exactly what is declared (``min`` defaults
  to 0, ``max`` to unbounded): no size is special, 0 and 1 included. The same name at several input axes
  ties them. A requirement of the program that contradicts the declaration is an export error
  (:class:`~tensorplay.export.errors.ConstraintViolationError`).
* ``2*d + 1``, ``d - 1``: a derived dim (root, scale, offset) whose size follows from its root's.
* ``Dim.STATIC`` (or ``None``, or an int): the example's size, fixed. ``Dim.DYNAMIC``: dynamic, with a range
  the exporter infers from the program (a specialisation to a constant is still an error). ``Dim.AUTO``:
  dynamic where the program allows, else static, silently. The markers take bounds: ``Dim.AUTO(min=2)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tensorplay.symbolic import SymDim

HINT_KINDS = ("auto", "static", "dynamic")


def _check_bounds(min: Any, max: Any, what: str) -> tuple[int, int | None]:
    low = 0 if min is None else min
    if isinstance(low, bool) or not isinstance(low, int) or low < 0:
        raise ValueError(f"{what}: min must be an int >= 0, got {min!r}")
    if max is not None and (isinstance(max, bool) or not isinstance(max, int) or max < low):
        raise ValueError(f"{what}: max must be an int >= min ({low}), got {max!r}")
    return low, max


def declared_here() -> str:
    """``file.py:12`` of the user's code calling into tensorplay (where a dim is declared)."""
    from tensorplay.interpreters.graph.recorder import user_location
    location = user_location(2)
    return str(location) if location is not None else "<unknown>"


class DimHint:
    """One of the markers ``Dim.AUTO``, ``Dim.STATIC``, ``Dim.DYNAMIC``; calling ``AUTO`` or ``DYNAMIC`` with
    ``min``/``max`` gives a bounded marker."""

    def __init__(self, kind: str, min: int | None = None, max: int | None = None) -> None:
        if kind not in HINT_KINDS:
            raise ValueError(f"unknown dim marker {kind!r}; expected one of {', '.join(HINT_KINDS)}")
        self.kind = kind
        self.min, self.max = _check_bounds(min, max, f"Dim.{kind.upper()}")
        self.bounded = min is not None or max is not None

    def __call__(self, *, min: int | None = None, max: int | None = None) -> DimHint:
        """``Dim.AUTO(min=2, max=64)``: the same marker with bounds."""
        if self.kind == "static":
            raise TypeError("Dim.STATIC takes no bounds")
        return DimHint(self.kind, min, max)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DimHint) and (self.kind, self.min, self.max) == (other.kind, other.min, other.max)

    def __hash__(self) -> int:
        return hash((self.kind, self.min, self.max))

    def __repr__(self) -> str:
        bounds = []
        if self.min:
            bounds.append(f"min={self.min}")
        if self.max is not None:
            bounds.append(f"max={self.max}")
        return f"Dim.{self.kind.upper()}" + (f"({', '.join(bounds)})" if bounds else "")


class Dim:
    """A named dynamic dim (see the module docstring). ``name`` is a Python identifier; it is what
    ``range_constraints``, error messages and call-time checks show."""

    AUTO: ClassVar[DimHint] = DimHint("auto")
    STATIC: ClassVar[DimHint] = DimHint("static")
    DYNAMIC: ClassVar[DimHint] = DimHint("dynamic")

    def __init__(self, name: str, *, min: int | None = None, max: int | None = None) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"Dim: the name must be a Python identifier, got {name!r}")
        self.name = name
        self.min, self.max = _check_bounds(min, max, f"Dim({name!r})")
        self.declared_at = declared_here()

    @property
    def expr(self) -> SymDim:
        """The symbolic size."""
        return SymDim(self.name)

    def __add__(self, offset: int) -> DerivedDim:
        return DerivedDim(self, 1, _int(offset, "+"))

    __radd__ = __add__

    def __sub__(self, offset: int) -> DerivedDim:
        return DerivedDim(self, 1, -_int(offset, "-"))

    def __mul__(self, scale: int) -> DerivedDim:
        return DerivedDim(self, _int(scale, "*"), 0)

    __rmul__ = __mul__

    def refined(self, min: int | None = None, max: int | None = None) -> Dim:
        """The same dim (name, declaration site) with new bounds (``None`` keeps a bound)."""
        new = Dim.__new__(Dim)
        new.name = self.name
        new.min, new.max = _check_bounds(self.min if min is None else min, self.max if max is None else max,
                                         f"Dim({self.name!r})")
        new.declared_at = self.declared_at
        return new

    def __repr__(self) -> str:
        bounds = "" if not self.min else f", min={self.min}"
        bounds += "" if self.max is None else f", max={self.max}"
        return f"Dim({self.name!r}{bounds})"


def _int(value: Any, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"a derived dim is built with ints: cannot apply {op} {value!r}")
    return value


class DerivedDim:
    """``scale * root + offset`` (``scale`` a positive int): a size that follows from its root dim."""

    def __init__(self, root: Dim, scale: int, offset: int) -> None:
        if scale <= 0:
            raise ValueError(f"a derived dim needs a positive scale, got {scale} * {root.name}")
        self.root = root
        self.scale = scale
        self.offset = offset

    @property
    def expr(self) -> SymDim:
        """The symbolic size (``2*d + 1``)."""
        value = self.scale * self.root.expr + self.offset
        assert isinstance(value, SymDim)
        return value

    @property
    def name(self) -> str:
        """The expression as text (``2*d + 1``)."""
        return str(self.expr)

    def __add__(self, offset: int) -> DerivedDim:
        return DerivedDim(self.root, self.scale, self.offset + _int(offset, "+"))

    __radd__ = __add__

    def __sub__(self, offset: int) -> DerivedDim:
        return DerivedDim(self.root, self.scale, self.offset - _int(offset, "-"))

    def __mul__(self, scale: int) -> DerivedDim:
        k = _int(scale, "*")
        return DerivedDim(self.root, self.scale * k, self.offset * k)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"<derived dim {self.name} of {self.root!r}>"


def dims(names: str, *, min: int | None = None, max: int | None = None) -> tuple[Dim, ...]:
    """Several dims with the same bounds: ``B, T = dims("B T", max=64)``."""
    return tuple(Dim(n, min=min, max=max) for n in names.replace(",", " ").split())


@dataclass(frozen=True)
class Constraint:
    """What one input axis is declared to be: ``source`` (the input's name, ``x`` or ``xs_0`` for a leaf of a
    container), ``dim`` (the axis), the dim's ``name`` (``None`` when static), its ``min`` and ``max`` (for a
    static axis, both are its size), and for a derived size its ``root`` name, ``scale`` and ``offset``
    (the size is ``scale * root + offset``)."""

    source: str
    dim: int
    name: str | None
    min: int
    max: int | None
    root: str | None = None
    scale: int = 1
    offset: int = 0

    @property
    def is_static(self) -> bool:
        """True when the axis has one allowed size."""
        return self.name is None

    def __str__(self) -> str:
        if self.name is None:
            return f"{self.source}.shape[{self.dim}] == {self.min}"
        return f"{self.source}.shape[{self.dim}] = {self.name}"


@dataclass(frozen=True)
class EqualityConstraint:
    """Input axes whose sizes must stay equal: ``sites`` (``(source, axis)`` pairs, at least two) and the
    ``name`` of the dim they share (``None`` for an unnamed tie)."""

    sites: tuple[tuple[str, int], ...]
    name: str | None = None

    def __post_init__(self) -> None:
        if len(self.sites) < 2:
            raise ValueError(f"EqualityConstraint: needs at least two (input, axis) sites, got {list(self.sites)}")
        for site in self.sites:
            if not (isinstance(site, tuple) and len(site) == 2 and isinstance(site[0], str)
                    and isinstance(site[1], int)):
                raise TypeError(f"EqualityConstraint: each site is a (input name, axis) pair, got {site!r}")

    def __str__(self) -> str:
        sites = " == ".join(f"{s}.shape[{a}]" for s, a in self.sites)
        return f"{sites}" + (f" ({self.name})" if self.name else "")


__all__ = ["Constraint", "DerivedDim", "Dim", "DimHint", "EqualityConstraint", "declared_here", "dims"]
