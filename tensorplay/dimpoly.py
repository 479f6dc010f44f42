"""Dim arithmetic as polynomials: the algebra shared by ``tp.relate`` (run time) and the mypy plugin.

A dim expression is a :class:`Poly`: a sum of integer-coefficient monomials over named atoms (the
fully qualified names of dims such as ``tensorplay.dims.Seq``). A floor division that does not
divide exactly becomes one opaque atom (``(Seq - 1)//2``), so ``(Seq - 1)//2 + 1`` is written the
same way wherever it comes from and can be compared. This module imports nothing of the project
(mypy loads it, and so does the run time).

The comparison rule (:func:`compare`) reports two expressions as *different* only when they differ
for every choice of sizes in which every dim is at least 1 and the *declared* dims (those that take
part in a relation) are at least 2; anything else it cannot decide is unknown, never an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Monomial = tuple[str, ...]  # sorted atom names, repeated for powers; () is the constant term

_FLOORDIVS: dict[str, tuple[Poly, int]] = {}  # opaque atom name -> (numerator, divisor)


class Poly:
    """An immutable polynomial ``{monomial: coefficient}`` with integer coefficients."""

    __slots__ = ("terms", "_key")

    def __init__(self, terms: Mapping[Monomial, int]) -> None:
        self.terms: dict[Monomial, int] = {m: c for m, c in terms.items() if c != 0}
        self._key: tuple[tuple[Monomial, int], ...] = tuple(sorted(self.terms.items()))

    # ---- construction ---------------------------------------------------------------------
    @staticmethod
    def const(n: int) -> Poly:
        return Poly({(): n})

    @staticmethod
    def atom(name: str) -> Poly:
        return Poly({(name,): 1})

    # ---- arithmetic -----------------------------------------------------------------------
    def __add__(self, other: Poly) -> Poly:
        out = dict(self.terms)
        for m, c in other.terms.items():
            out[m] = out.get(m, 0) + c
        return Poly(out)

    def __neg__(self) -> Poly:
        return Poly({m: -c for m, c in self.terms.items()})

    def __sub__(self, other: Poly) -> Poly:
        return self + (-other)

    def __mul__(self, other: Poly) -> Poly:
        out: dict[Monomial, int] = {}
        for m1, c1 in self.terms.items():
            for m2, c2 in other.terms.items():
                m = tuple(sorted(m1 + m2))
                out[m] = out.get(m, 0) + c1 * c2
        return Poly(out)

    def floordiv(self, k: int) -> Poly:
        """``self // k``: exact when every coefficient divides by ``k``, else one opaque atom."""
        if k == 1:
            return self
        if k <= 0:
            raise ValueError(f"dim arithmetic: floor division by {k}; expected a positive divisor")
        value = self.value()
        if value is not None:
            return Poly.const(value // k)
        # (k*Q + R + r)//k == Q + (R + r mod k)//k + r div k, exactly, for integer Q
        whole = Poly({m: c // k for m, c in self.terms.items() if m and c % k == 0})
        rest = {m: c for m, c in self.terms.items() if m and c % k != 0}
        q, r = divmod(self.terms.get((), 0), k)
        whole = whole + Poly.const(q)
        if not rest:
            return whole
        if r:
            rest[()] = r
        inner = Poly(rest)
        name = f"({inner.text()})//{k}"
        _FLOORDIVS.setdefault(name, (inner, k))
        return whole + Poly.atom(name)

    # ---- inspection -----------------------------------------------------------------------
    def value(self) -> int | None:
        """The number, for a constant polynomial."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and () in self.terms:
            return self.terms[()]
        return None

    def atoms(self) -> set[str]:
        return {a for m in self.terms for a in m}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Poly) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def text(self, short: bool = False) -> str:
        """Readable form: ``Heads*HeadDim``, ``Seq - 1``, ``2*A + B``; ``short`` drops module paths."""
        if not self.terms:
            return "0"
        parts: list[str] = []
        for m, c in sorted(self.terms.items(), key=lambda mc: (-len(mc[0]), mc[0])):
            names = [_short(a) if short else a for a in m]
            body = "*".join(names)
            mag = abs(c)
            piece = body if body and mag == 1 else (f"{mag}*{body}" if body else str(mag))
            if not parts:
                parts.append(piece if c > 0 else f"-{piece}")
            else:
                parts.append(f"+ {piece}" if c > 0 else f"- {piece}")
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"Poly({self.text()!r})"

    def evaluate(self, sizes: Mapping[str, int]) -> int | None:
        """The value with ``sizes`` for the atoms (``None`` when one is missing)."""
        total = 0
        for m, c in self.terms.items():
            term = c
            for a in m:
                size = atom_value(a, sizes)
                if size is None:
                    return None
                term *= size
            total += term
        return total


def atom_value(name: str, sizes: Mapping[str, int]) -> int | None:
    """The size of one atom: looked up, or computed for an opaque floor division."""
    if name in sizes:
        return sizes[name]
    fd = _FLOORDIVS.get(name)
    if fd is None:
        return None
    inner = fd[0].evaluate(sizes)
    return None if inner is None else inner // fd[1]


def _short(name: str) -> str:
    if name.startswith("("):
        return name  # an opaque floor division keeps its text (already built from long names)
    return name.rsplit(".", 1)[-1]


def substitute(p: Poly, relations: Mapping[str, Poly], depth: int = 0) -> Poly:
    """Replace every atom that has a declared definition by that definition (recursively)."""
    if depth > 16 or not any(a in relations for a in p.atoms()):
        return p
    out = Poly({})
    for m, c in p.terms.items():
        term = Poly.const(c)
        for a in m:
            term = term * (relations[a] if a in relations else Poly.atom(a))
        out = out + term
    return substitute(out, relations, depth + 1)


def product(ps: Iterable[Poly]) -> Poly:
    out = Poly.const(1)
    for p in ps:
        out = out * p
    return out


def _common_factor(d: Poly) -> Monomial:
    """The largest monomial dividing every term of ``d``."""
    monos = list(d.terms)
    first = monos[0]
    common: list[str] = []
    for a in sorted(set(first)):
        n = min(m.count(a) for m in monos)
        common += [a] * n
    return tuple(common)


def _divide(d: Poly, factor: Monomial) -> Poly:
    out: dict[Monomial, int] = {}
    for m, c in d.terms.items():
        rest = list(m)
        for a in factor:
            rest.remove(a)
        out[tuple(rest)] = c
    return Poly(out)


def compare(a: Poly, b: Poly, relations: Mapping[str, Poly], declared: set[str]) -> bool | None:
    """``True`` when ``a == b`` after the relations, ``False`` when provably different (see the module
    docstring for the rule), ``None`` when it cannot be decided."""
    if a == b:
        return True
    d = substitute(a, relations) - substitute(b, relations)
    if not d.terms:
        return True
    if any(a in _FLOORDIVS or a.startswith("(") for a in d.atoms()):
        return None  # an inexact floor division may be 0 or anything: nothing to prove with it
    d = _divide(d, _common_factor(d))  # a common factor is a product of sizes >= 1: never 0
    if d.value() is not None:
        return False
    coeffs = [c for m, c in d.terms.items() if m]
    constant = d.terms.get((), 0)
    if all(c > 0 for c in coeffs) and constant >= 0 or all(c < 0 for c in coeffs) and constant <= 0:
        return False  # monotonic in every atom and away from 0 at all atoms == 1: never 0
    if not d.atoms() <= declared:
        return None
    low = sum(c * 2 ** len(m) for m, c in d.terms.items() if m) + constant  # every declared atom at 2
    if all(c > 0 for c in coeffs) and low > 0:
        return False
    if all(c < 0 for c in coeffs) and low < 0:
        return False
    return None
