"""Symbolic dimensions: ``SymDim`` expressions over named sizes.

A shape entry is an ``int`` or a :class:`SymDim`: an integer expression built
from names (``batch``, ``H``) with ``+``, ``-``, ``*`` and ``//`` by positive
integers, e.g. ``2*batch + 1`` or ``(H - 1)//2 + 1``. Expressions are kept in a
canonical form (a sum of monomials with integer coefficients; floor divisions
are atoms), so equal expressions compare equal and hash alike, and an
expression whose symbols cancel is a plain ``int``::

    >>> B = sym("B")
    >>> (2 * B + 1 - B) == B + 1
    True
    >>> (B + 3) - B
    3
    >>> str((B + 2 - 3) // 2 + 1)
    '(B + 1)//2'

Every symbol stands for a size, so it is assumed to be ``>= 0``; comparisons
are decided when that assumption decides them (``B + 1 > 0``) and otherwise
refuse with :class:`~tensorplay.errors.GraphCaptureError`, as do ``int()``
and ``len()``: a symbolic size has no value while a graph is being recorded.
:meth:`SymDim.evaluate` gives the value under a binding ``{name: int}``.

This module is part of the core layer: the graph IR, shape rules (through
duck typing) and export use it.
"""

from __future__ import annotations

import ast
import numbers
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Union

from tensorplay import compile_hooks
from tensorplay.spec.errors import GraphCaptureError

Dim = Union[int, "SymDim"]
"""A shape entry: a concrete size or a symbolic expression."""

_Atom = Union[str, "FloorDiv"]
_Monomial = tuple[_Atom, ...]
_Key = tuple[tuple[_Monomial, int], ...]


def _atom_key(atom: _Atom) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom))


def _monomial_key(mono: _Monomial) -> tuple[int, tuple[tuple[int, str], ...]]:
    return (len(mono), tuple(_atom_key(a) for a in mono))


def _make(terms: dict[_Monomial, int]) -> Dim:
    """An ``int`` when only the constant term is left, else a :class:`SymDim`."""
    items = [(m, c) for m, c in terms.items() if c != 0]
    if not items or (len(items) == 1 and items[0][0] == ()):
        return items[0][1] if items else 0
    items.sort(key=lambda mc: (mc[0] == (), _monomial_key(mc[0])))
    return SymDim._from_key(tuple(items))


def _terms_of(value: Dim) -> dict[_Monomial, int]:
    if isinstance(value, SymDim):
        return dict(value._key)
    return {(): int(value)} if value else {}


def _is_int(value: object) -> bool:
    if type(value) is int:
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _as_int(value: object) -> int:
    return int(value)  # type: ignore[call-overload, no-any-return]


class FloorDiv:
    """An atom ``num // den`` of a :class:`SymDim` (``den`` a positive int, ``num`` not divisible by it)."""

    __slots__ = ("num", "den", "_hash")

    def __init__(self, num: SymDim, den: int) -> None:
        self.num = num
        self.den = den
        self._hash = hash((num._key, den))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FloorDiv) and self.den == other.den and self.num._key == other.num._key

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        inner = self.num.to_source()
        if len(self.num._key) > 1 or self.num._key[0][1] != 1:
            inner = f"({inner})"
        return f"{inner}//{self.den}"

    __repr__ = __str__


class SymDim:
    """A symbolic size: an integer expression over named dims. Build one with :func:`sym`.

    Supports ``+``, ``-`` and ``*`` with ints and other ``SymDim``s, ``//`` and ``%`` by
    positive ints (and exact ``//`` by a monomial), ``==`` (structural, after
    canonicalisation), hashing, ``str`` (readable, valid Python) and
    :meth:`evaluate` under a binding ``{name: int}``.
    """

    __slots__ = ("_key", "_hash")

    _key: _Key
    _hash: int

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"a symbolic dim needs a Python identifier as its name, got {name!r}")
        self._key = ((((name,)), 1),)
        self._hash = hash(self._key)

    @classmethod
    def _from_key(cls, key: _Key) -> SymDim:
        out = object.__new__(cls)
        out._key = key
        out._hash = hash(key)
        return out

    # ---- structure ---------------------------------------------------------------------------
    @property
    def is_symbol(self) -> bool:
        """True for a bare name (``B``), false for a compound expression (``2*B + 1``)."""
        return len(self._key) == 1 and self._key[0][1] == 1 and len(self._key[0][0]) == 1 and \
            isinstance(self._key[0][0][0], str)

    @property
    def name(self) -> str:
        """The name of a bare symbol; a ``ValueError`` for an expression."""
        if not self.is_symbol:
            raise ValueError(f"{self} is an expression, not a single named dim")
        atom = self._key[0][0][0]
        assert isinstance(atom, str)
        return atom

    @property
    def free_symbols(self) -> frozenset[str]:
        """The names the expression mentions."""
        names: set[str] = set()
        for mono, _ in self._key:
            for atom in mono:
                if isinstance(atom, str):
                    names.add(atom)
                else:
                    names |= atom.num.free_symbols
        return frozenset(names)

    def linear_in(self) -> tuple[str, int, int] | None:
        """``(name, a, c)`` when the expression is ``a*name + c`` (``a != 0``), else ``None``."""
        terms = dict(self._key)
        const = terms.pop((), 0)
        if len(terms) != 1:
            return None
        (mono, coef), = terms.items()
        if len(mono) != 1 or not isinstance(mono[0], str):
            return None
        return mono[0], coef, const

    # ---- arithmetic --------------------------------------------------------------------------
    def __add__(self, other: object) -> Dim:
        if not isinstance(other, SymDim) and not _is_int(other):
            return NotImplemented
        terms = dict(self._key)
        for mono, coef in _terms_of(other).items():  # type: ignore[arg-type]
            terms[mono] = terms.get(mono, 0) + coef
        return _make(terms)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return _make({m: -c for m, c in self._key})

    def __pos__(self) -> SymDim:
        return self

    def __sub__(self, other: object) -> Dim:
        if not isinstance(other, SymDim) and not _is_int(other):
            return NotImplemented
        terms = dict(self._key)
        for mono, coef in _terms_of(other).items():  # type: ignore[arg-type]
            terms[mono] = terms.get(mono, 0) - coef
        return _make(terms)

    def __rsub__(self, other: object) -> Dim:
        if not _is_int(other):
            return NotImplemented
        terms = {m: -c for m, c in self._key}
        terms[()] = terms.get((), 0) + _as_int(other)
        return _make(terms)

    def __mul__(self, other: object) -> Dim:
        if _is_int(other):
            k = _as_int(other)
            return _make({m: c * k for m, c in self._key})
        if not isinstance(other, SymDim):
            return NotImplemented
        terms: dict[_Monomial, int] = {}
        for m1, c1 in self._key:
            for m2, c2 in other._key:
                mono = tuple(sorted(m1 + m2, key=_atom_key))
                terms[mono] = terms.get(mono, 0) + c1 * c2
        return _make(terms)

    __rmul__ = __mul__

    def __floordiv__(self, other: object) -> Dim:
        if isinstance(other, SymDim):
            return self._exact_div(other)
        if not _is_int(other):
            return NotImplemented
        den = _as_int(other)
        if den <= 0:
            raise ValueError(f"symbolic dim {self} // {den}: only division by a positive int is supported")
        outside: dict[_Monomial, int] = {}
        inside: dict[_Monomial, int] = {}
        for mono, coef in self._key:
            q, r = divmod(coef, den)
            if q:
                outside[mono] = q
            if r:
                inside[mono] = r
        if not inside or list(inside) == [()]:  # what is left is a constant in [0, den)
            return _make(outside)
        num = _make(inside)
        assert isinstance(num, SymDim)
        nested = num._key
        if len(nested) == 1 and nested[0][1] == 1 and len(nested[0][0]) == 1 and \
                isinstance(nested[0][0][0], FloorDiv):  # (x // a) // b == x // (a*b)
            inner = nested[0][0][0]
            return _make(outside) + (inner.num // (inner.den * den))
        outside[(FloorDiv(num, den),)] = outside.get((FloorDiv(num, den),), 0) + 1
        return _make(outside)

    def _exact_div(self, other: SymDim) -> Dim:
        if len(other._key) == 1:
            dmono, dcoef = other._key[0]
            terms: dict[_Monomial, int] = {}
            for mono, coef in self._key:
                rest = list(mono)
                ok = coef % dcoef == 0
                for atom in dmono:
                    if ok and atom in rest:
                        rest.remove(atom)
                    else:
                        ok = False
                if not ok:
                    break
                terms[tuple(rest)] = coef // dcoef
            else:
                return _make(terms)
        raise GraphCaptureError(
            f"symbolic dims: cannot divide {self} by {other} exactly; only exact division by a product "
            "of dims, or floor division by a positive int, is supported")

    def __rfloordiv__(self, other: object) -> Dim:
        if not _is_int(other):
            return NotImplemented
        raise GraphCaptureError(f"symbolic dims: {other} // {self} divides by a symbolic size; "
                                "only division by a positive int is supported")

    def __truediv__(self, other: object) -> float:
        if not isinstance(other, (SymDim, numbers.Real)) or isinstance(other, bool):
            return NotImplemented
        return self._as_float(f"{self} / {other}") / _float_value(other, f"{self} / {other}")

    def __rtruediv__(self, other: object) -> float:
        if not isinstance(other, numbers.Real) or isinstance(other, bool):
            return NotImplemented
        return float(other) / self._as_float(f"{other} / {self}")

    def __pow__(self, other: object) -> Any:
        if _is_int(other) and _as_int(other) >= 0:  # an integer power stays a symbolic size
            out: Any = 1
            for _ in range(_as_int(other)):
                out = out * self
            return out
        if not isinstance(other, (SymDim, numbers.Real)) or isinstance(other, bool):
            return NotImplemented
        return self._as_float(f"{self} ** {other}") ** _float_value(other, f"{self} ** {other}")

    def _as_float(self, expression: str) -> float:
        """The value of the size for ``expression``, a float of it (which cannot stay symbolic)."""
        return float(self.value_for(f"{expression} (a Python float computed from a symbolic size; tensor "
                                    "arithmetic such as x / size, or // on sizes, keeps it symbolic)"))

    def __mod__(self, other: object) -> Dim:
        if not _is_int(other):
            return NotImplemented
        return self - (self // other) * _as_int(other)

    # ---- comparisons -------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if isinstance(other, SymDim):
            return self._key == other._key
        if _is_int(other):
            handler = compile_hooks.handler()
            if handler is not None:  # tensorplay.compile decides it on the captured size (a guard)
                return bool(handler.decide_dim(self, "==", other))
            return False  # a canonical expression equal to an int would be that int
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self) -> int:
        return self._hash

    def _sign_bounds(self) -> tuple[bool, bool, int]:
        """(every coefficient >= 0, every coefficient <= 0, constant), symbols being sizes >= 0."""
        terms = dict(self._key)
        const = terms.pop((), 0)
        return all(c >= 0 for c in terms.values()), all(c <= 0 for c in terms.values()), const

    def _decide(self, other: object, op: str) -> bool:
        if not isinstance(other, SymDim) and not _is_int(other):
            return NotImplemented  # type: ignore[no-any-return]
        diff: Any = self - other
        if not isinstance(diff, SymDim):
            d = int(diff)
            return {"<": d < 0, "<=": d <= 0, ">": d > 0, ">=": d >= 0}[op]
        nonneg, nonpos, c = diff._sign_bounds()
        if nonneg and op in (">", ">="):  # diff >= c
            if (c > 0) if op == ">" else (c >= 0):
                return True
        if nonneg and op in ("<", "<=") and ((c >= 0) if op == "<" else (c > 0)):
            return False
        if nonpos and op in ("<", "<="):  # diff <= c
            if (c < 0) if op == "<" else (c <= 0):
                return True
        if nonpos and op in (">", ">=") and ((c <= 0) if op == ">" else (c < 0)):
            return False
        for decider in reversed(_deciders):
            decided = decider(diff, op)
            if decided is not None:
                return decided
        raise GraphCaptureError(
            f"cannot decide {self} {op} {other} while recording: the comparison depends on the value of "
            f"symbolic dims {', '.join(sorted(diff.free_symbols))}. Keep the dim static, or express the "
            "computation without branching on its size")

    def bounds(self, ranges: Mapping[str, tuple[int, int | None]]) -> tuple[float, float]:
        """The smallest and largest values the expression takes when each symbol ``s`` ranges over
        ``ranges[s] = (min, max)`` (``max`` ``None``: unbounded; a symbol not in ``ranges`` is ``>= 0``).
        Interval arithmetic: the bounds hold, though they need not be tight for expressions that repeat
        a symbol. Infinite bounds are ``float('inf')`` / ``-float('inf')``."""
        low: float = 0
        high: float = 0
        for mono, coef in self._key:
            lo, hi = float(coef), float(coef)
            for atom in mono:
                if isinstance(atom, str):
                    lo_a, hi_a = ranges.get(atom, (0, None))
                    a_lo, a_hi = float(lo_a), float("inf") if hi_a is None else float(hi_a)
                else:
                    n_lo, n_hi = atom.num.bounds(ranges)
                    a_lo, a_hi = n_lo // atom.den, n_hi // atom.den
                products = [_times(x, y) for x in (lo, hi) for y in (a_lo, a_hi)]
                lo, hi = min(products), max(products)
            low, high = low + lo, high + hi
        return low, high

    def __lt__(self, other: object) -> bool:
        return self._decide(other, "<")

    def __le__(self, other: object) -> bool:
        return self._decide(other, "<=")

    def __gt__(self, other: object) -> bool:
        return self._decide(other, ">")

    def __ge__(self, other: object) -> bool:
        return self._decide(other, ">=")

    def __bool__(self) -> bool:
        if self._decide(0, ">"):
            return True
        if _deciders:  # a decider knows the values: non-zero means negative
            return self._decide(0, "<")
        raise GraphCaptureError(f"cannot decide whether symbolic dim {self} is zero while recording")

    # ---- conversions: refused ------------------------------------------------------------------
    def _no_value(self, what: str) -> GraphCaptureError:
        caller = _caller_names()
        if "__iter__" in caller:
            what = "iterating over a tensor"
        elif "__len__" in caller:
            what = "len() of a tensor"
        return GraphCaptureError(
            f"{what} needs the value of the symbolic dim {self}, which is only known when the graph "
            "runs. Use x.shape[i] (a symbolic size) in shape arithmetic instead, reduce or map over the "
            "axis with tensor operations, or trace with that dim static")

    def _captured_value(self, what: str) -> int:
        handler = compile_hooks.handler()
        if handler is not None:  # tensorplay.compile reads the captured size (a guard)
            return int(handler.dim_value(self, what))
        raise self._no_value(what)

    def value_for(self, what: str) -> int:
        """The size as an ``int``, for ``what`` (an operation that cannot keep it symbolic, named in the
        words of the user's code): under ``tp.compile`` the captured size, guarded (the compiled code
        specialises on it); otherwise a :class:`~tensorplay.errors.GraphCaptureError` saying ``what`` needs
        the value (export reports it as a specialisation, with the user's line)."""
        return self._captured_value(what)

    def __int__(self) -> int:
        return self._captured_value("int() of a size")

    def __index__(self) -> int:
        return self._captured_value("using a size as a Python int")

    def __float__(self) -> float:
        return float(self._captured_value("float() of a size"))

    # ---- evaluation and printing --------------------------------------------------------------
    def subs(self, binding: Mapping[str, Any]) -> Any:
        """Substitute the bound names (ints or other dims); unbound names stay symbolic."""
        total: Any = 0
        for mono, coef in self._key:
            term: Any = coef
            for atom in mono:
                if isinstance(atom, str):
                    value = binding.get(atom)
                    term = term * (SymDim(atom) if value is None else value)
                else:
                    term = term * (atom.num.subs(binding) // atom.den)
            total = total + term
        return total

    def evaluate(self, binding: Mapping[str, int]) -> int:
        """The value under ``binding`` (every free name must be bound)."""
        missing = self.free_symbols - set(binding)
        if missing:
            raise KeyError(f"evaluating {self}: no value for symbolic dim(s) {', '.join(sorted(missing))}")
        value = self.subs(binding)
        if isinstance(value, SymDim):  # pragma: no cover - every name was bound
            raise KeyError(f"evaluating {self}: result {value} is still symbolic")
        return int(value)

    def to_source(self, names: Mapping[str, str] | None = None) -> str:
        """The expression as Python source; ``names`` renames symbols (default: their own names)."""
        parts: list[tuple[int, str]] = []
        for mono, coef in self._key:
            if mono == ():
                parts.append((coef, str(abs(coef))))
                continue
            atoms = []
            bare = len(mono) == 1 and abs(coef) == 1
            for atom in mono:
                if isinstance(atom, str):
                    atoms.append(names.get(atom, atom) if names else atom)
                else:
                    text = _floordiv_source(atom, names)
                    atoms.append(text if bare else f"({text})")
            body = "*".join(atoms)
            parts.append((coef, body if abs(coef) == 1 else f"{abs(coef)}*{body}"))
        out = ""
        for i, (coef, text) in enumerate(parts):
            if i == 0:
                out = (f"-({text})" if "//" in text and not text.endswith(")") else f"-{text}") \
                    if coef < 0 else text
            else:
                out += f" - {text}" if coef < 0 else f" + {text}"
        return out

    def __str__(self) -> str:
        return self.to_source()

    __repr__ = __str__

    def __reduce__(self) -> Any:
        return (parse_dim, (str(self),))


def _float_value(value: object, expression: str) -> float:
    """``value`` (a number or a symbolic size) as a float, for ``expression`` (see :meth:`SymDim._as_float`)."""
    return value._as_float(expression) if isinstance(value, SymDim) else float(value)  # type: ignore[arg-type]


def _times(x: float, y: float) -> float:
    """``x * y`` where a zero bound times an infinite one is 0 (a size of 0 times any size)."""
    return 0.0 if x == 0 or y == 0 else x * y


_deciders: list[Callable[[SymDim, str], bool | None]] = []


@contextmanager
def deciding(decider: Callable[[SymDim, str], bool | None]) -> Iterator[None]:
    """Within the block, a comparison of symbolic sizes that the ``>= 0`` assumption cannot decide asks
    ``decider(diff, op)`` whether ``diff op 0`` holds (``op`` one of ``< <= > >=``); ``None`` means it
    cannot tell either, and the comparison raises as usual. Export uses it to decide with the declared
    ranges of its dims, and to record what the program requires of them."""
    _deciders.append(decider)
    try:
        yield
    finally:
        _deciders.remove(decider)


def _floordiv_source(atom: FloorDiv, names: Mapping[str, str] | None) -> str:
    inner = atom.num.to_source(names)
    if len(atom.num._key) > 1 or atom.num._key[0][1] != 1:
        inner = f"({inner})"
    return f"{inner}//{atom.den}"


def _caller_names(depth: int = 6) -> tuple[str, ...]:
    frame = sys._getframe(2)
    names: list[str] = []
    while frame is not None and len(names) < depth:
        names.append(frame.f_code.co_name)
        frame = frame.f_back  # type: ignore[assignment]
    return tuple(names)


def sym(name: str) -> SymDim:
    """A named symbolic dim: ``B = sym("B")``; build expressions with ``2*B + 1``."""
    return SymDim(name)


def symbols(names: str | Iterable[str]) -> tuple[SymDim, ...]:
    """Several dims at once: ``B, T = symbols("B T")``."""
    items = names.replace(",", " ").split() if isinstance(names, str) else list(names)
    return tuple(SymDim(n) for n in items)


def is_symbolic(value: object) -> bool:
    """True for a :class:`SymDim`."""
    return isinstance(value, SymDim)


def is_static_shape(shape: Iterable[object]) -> bool:
    """True when every entry of ``shape`` is a concrete int."""
    return all(not isinstance(d, SymDim) for d in shape)


def free_symbols(values: Iterable[object]) -> frozenset[str]:
    """The names mentioned by any ``SymDim`` in ``values``."""
    out: set[str] = set()
    for v in values:
        if isinstance(v, SymDim):
            out |= v.free_symbols
    return frozenset(out)


def evaluate_dim(value: Any, binding: Mapping[str, Any]) -> Any:
    """``value`` with its symbols substituted (ints and non-dims are returned unchanged)."""
    return value.subs(binding) if isinstance(value, SymDim) else value


def bind_shape(pattern: Iterable[Any], shape: Iterable[Any], binding: dict[str, Any], where: str) -> None:
    """Bind the symbols of ``pattern`` (a shape with ``SymDim`` entries) from the actual ``shape``.

    Bare names bind directly; ``a*name + c`` entries are solved for ``name``. A conflict
    (a name bound to two sizes, or a size that does not fit the pattern) raises ``ValueError``
    naming ``where``, the axis and both values. Entries that cannot be solved are skipped
    (call :func:`check_shape` afterwards)."""
    pattern = tuple(pattern)
    shape = tuple(shape)
    if len(pattern) != len(shape):
        raise ValueError(f"{where}: expected rank {len(pattern)} (shape [{', '.join(map(str, pattern))}]), "
                         f"got rank {len(shape)} (shape [{', '.join(map(str, shape))}])")
    for axis, (p, actual) in enumerate(zip(pattern, shape)):
        if not isinstance(p, SymDim):
            continue
        lin = p.linear_in()
        if lin is None:
            continue
        name, a, c = lin
        if name in binding:
            continue
        num = actual - c
        if isinstance(num, int) and num % a:
            raise ValueError(f"{where}: axis {axis} has size {actual}, which is not of the form {p}")
        binding[name] = num // a if a != 1 else num


def check_shape(pattern: Iterable[Any], shape: Iterable[Any], binding: Mapping[str, Any], where: str) -> None:
    """Check that ``shape`` equals ``pattern`` under ``binding``; ``ValueError`` naming the axis otherwise."""
    pattern = tuple(pattern)
    shape = tuple(shape)
    if len(pattern) != len(shape):
        raise ValueError(f"{where}: expected rank {len(pattern)}, got rank {len(shape)}")
    for axis, (p, actual) in enumerate(zip(pattern, shape)):
        expected = p.subs(binding) if isinstance(p, SymDim) else p
        if expected != actual:
            what = f"{expected} (= {p})" if isinstance(p, SymDim) else f"{expected}"
            raise ValueError(f"{where}: axis {axis} has size {actual}, expected {what}")


# ---- parsing (for serialisation) -----------------------------------------------------------------

def parse_dim(text: str) -> Dim:
    """Parse ``"2*B + 1"``, ``"(H - 1)//2 + 1"`` or ``"7"`` back into a dim (the inverse of ``str``)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ValueError(f"not a dim expression: {text!r}") from None
    result: Dim = _parse_node(tree.body, text)
    return result


def _parse_node(node: ast.AST, text: str) -> Any:
    if isinstance(node, ast.Constant) and _is_int(node.value):
        return _as_int(node.value)
    if isinstance(node, ast.Name):
        return SymDim(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _parse_node(node.operand, text)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _parse_node(node.left, text), _parse_node(node.right, text)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.FloorDiv):
            return left // right
        if isinstance(node.op, ast.Mod):
            return left % right
    raise ValueError(f"not a dim expression: {text!r} (only names, ints, + - * // % and parentheses)")


__all__ = [
    "Dim", "FloorDiv", "SymDim", "bind_shape", "check_shape", "deciding", "evaluate_dim", "free_symbols",
    "is_static_shape", "is_symbolic", "parse_dim", "sym", "symbols",
]
