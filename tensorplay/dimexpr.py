"""Declared relations between dims: ``tp.relate(Model, tp.dim(Heads) * HeadDim)``.

A relation says that one named dim is an expression of others (sums, products, floor divisions
and integer constants)::

    Heads = NewType("Heads", int)
    HeadDim = NewType("HeadDim", int)
    Model = NewType("Model", int)
    tp.relate(Model, tp.dim(Heads) * HeadDim)       # Model == Heads * HeadDim

It is declared once, at module level next to the dims, and read twice: the mypy plugin
(``tensorplay.mypy_plugin``) reads the call statically, so ``x.reshape(b, s, Heads(h), HeadDim(d))`` on a
``Tensor[Batch, Seq, Model]`` type-checks and ``x.reshape(b, s, Heads(h), Model(m))`` is reported; at run
time ``@tp.shapecheck`` checks the relation with the real sizes bound by a call.

``tp.dim(X)`` wraps a dim so Python can do arithmetic on it (a ``NewType`` cannot be multiplied);
once one operand is wrapped the others may be plain dims or ints: ``tp.dim(Seq) - 1``,
``(tp.dim(Height) - 1) // 2 + 1``, ``tp.dim(Left) + Right``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Union

from tensorplay.dimpoly import Poly

DimLike = Union["DimExpr", int, Callable[[int], int]]
"""What dim arithmetic accepts: a :class:`DimExpr`, an int, or a dim (a ``NewType`` of ``int`` or an
``int`` subclass: both are callables from ``int`` to the dim for mypy)."""

_RELATIONS: dict[str, Poly] = {}   # subject dim's full name -> its expression
_TEXTS: dict[str, str] = {}        # subject dim's full name -> the expression as written
_DIMS: dict[str, object] = {}      # full name -> the dim object (for @tp.shapecheck)


def dim_name(d: object) -> str:
    """The full name of a dim (``module.Name``), as mypy spells it."""
    name = getattr(d, "__name__", None)
    module = getattr(d, "__module__", None)
    if not isinstance(name, str) or not isinstance(module, str):
        raise TypeError(f"dim arithmetic: expected a dim (a NewType of int, or an int subclass), got {d!r}")
    return f"{module}.{name}"


def _text(x: object) -> str:
    if isinstance(x, DimExpr):
        return x.text
    return str(x) if isinstance(x, int) else str(getattr(x, "__name__", x))


def _wrap(text: str, op: str, right: bool = False) -> str:
    """``text`` parenthesized where it is a sum inside ``op`` (or the right side of ``-``)."""
    loose = " + " in text or " - " in text
    if loose and (op in ("*", "//") or (right and op == "-")):
        return f"({text})"
    if right and op == "//" and (" * " in text or " // " in text):
        return f"({text})"
    return text


def _combine(a: object, op: str, b: object, poly: Poly) -> DimExpr:
    return DimExpr(poly, f"{_wrap(_text(a), op)} {op} {_wrap(_text(b), op, right=True)}")


def _poly(x: object) -> Poly:
    if isinstance(x, DimExpr):
        return x.poly
    if isinstance(x, bool):
        raise TypeError(f"dim arithmetic: expected a dim, a dim expression or an int, got the bool {x!r}")
    if isinstance(x, int):
        return Poly.const(int(x))
    if callable(x) and (hasattr(x, "__supertype__") or (isinstance(x, type) and issubclass(x, int))):
        name = dim_name(x)
        _DIMS.setdefault(name, x)
        return Poly.atom(name)
    raise TypeError(f"dim arithmetic: expected a dim (a NewType of int, or an int subclass), a dim expression "
                    f"or an int, got {x!r}")


class DimExpr:
    """A size written in terms of dims: ``+``, ``-``, ``*`` and ``//`` (by a positive int) build more."""

    __slots__ = ("poly", "text")

    def __init__(self, poly: Poly, text: str = "") -> None:
        self.poly = poly
        self.text = text or poly.text(short=True)

    def __add__(self, other: DimLike) -> DimExpr:
        return _combine(self, "+", other, self.poly + _poly(other))

    def __radd__(self, other: DimLike) -> DimExpr:
        return _combine(other, "+", self, _poly(other) + self.poly)

    def __sub__(self, other: DimLike) -> DimExpr:
        return _combine(self, "-", other, self.poly - _poly(other))

    def __rsub__(self, other: DimLike) -> DimExpr:
        return _combine(other, "-", self, _poly(other) - self.poly)

    def __mul__(self, other: DimLike) -> DimExpr:
        return _combine(self, "*", other, self.poly * _poly(other))

    def __rmul__(self, other: DimLike) -> DimExpr:
        return _combine(other, "*", self, _poly(other) * self.poly)

    def __floordiv__(self, k: int) -> DimExpr:
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise TypeError(f"dim arithmetic: // takes a positive int divisor, got {k!r}")
        return _combine(self, "//", k, self.poly.floordiv(k))

    def __repr__(self) -> str:
        return f"tp.dim({self.text})"


def dim(d: DimLike) -> DimExpr:
    """``d`` as a :class:`DimExpr`, to write arithmetic on dims: ``tp.dim(Heads) * HeadDim``."""
    return DimExpr(_poly(d), _text(d))


def relate(subject: Callable[[int], int], expr: DimLike) -> None:
    """Declare ``subject == expr`` (for example ``tp.relate(Model, tp.dim(Heads) * HeadDim)``).

    Write it at module level, next to the dims and before the functions that rely on it: the mypy plugin
    reads it there, and ``@tp.shapecheck`` checks it whenever a call binds ``subject`` and every dim of
    ``expr``. Declaring a different expression for the same dim is an error."""
    name = dim_name(subject)
    _poly(subject)
    poly = _poly(expr)
    if subject_in(poly, name):
        raise ValueError(f"relate({name.rsplit('.', 1)[-1]}, {poly.text(short=True)}): a dim cannot be defined "
                         "in terms of itself")
    known = _RELATIONS.get(name)
    if known is not None and known != poly:
        raise ValueError(f"relate(): {name.rsplit('.', 1)[-1]} is already declared as "
                         f"{known.text(short=True)}; cannot also declare it as {poly.text(short=True)}")
    _RELATIONS[name] = poly
    _TEXTS.setdefault(name, _text(expr))


def subject_in(poly: Poly, name: str) -> bool:
    return name in poly.atoms()


def relation_text(name: str) -> str:
    """``Model == Heads * HeadDim``: a declared relation as written."""
    return f"{name.rsplit('.', 1)[-1]} == {_TEXTS.get(name) or _RELATIONS[name].text(short=True)}"


def relations() -> dict[str, Poly]:
    """The relations declared so far in this process: subject's full name -> expression (a copy)."""
    return dict(_RELATIONS)


def dim_object(name: str) -> object | None:
    """The dim object of a full name seen in a relation."""
    return _DIMS.get(name)


__all__ = ["DimExpr", "DimLike", "dim", "relate", "relations"]
