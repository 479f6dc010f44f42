"""``assert_close``: compare tensors, arrays, numbers and pytrees of them, with a message a person can
debug from.

Leaves are tensorplay tensors (any interpreter that holds values: eager, or a graph recorded in
execute mode), numpy arrays and scalars, Python numbers, nested lists of Python numbers (an array
literal) and other array-likes (anything with ``detach().numpy()`` or ``__array__``, e.g. a PyTorch
tensor). Containers are tuples (namedtuples), lists and dicts; ``None`` matches only ``None``;
other objects (strings, shapes, ...) are compared with ``==``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from tensorplay.tensor import Tensor

Array = np.ndarray[Any, Any]

# (rtol, atol) by numpy dtype kind and size: PyTorch's defaults, so a test moved from
# torch.testing.assert_close keeps its meaning. Integers and booleans compare exactly.
_FLOAT_TOLERANCES: Mapping[np.dtype[Any], tuple[float, float]] = {
    np.dtype("float16"): (1e-3, 1e-5),
    np.dtype("float32"): (1.3e-6, 1e-5),
    np.dtype("float64"): (1e-7, 1e-7),
}


class NotCloseError(AssertionError):
    """Raised by :func:`assert_close` (and the checks built on it) when two values differ.

    ``str(error)`` is the full report. The attributes say the same for programs:

    * ``path``: where in the pytree, e.g. ``"[1]['w']"`` (``""`` for the whole value);
    * ``kind``: ``"structure"``, ``"type"``, ``"shape"``, ``"dtype"``, ``"values"``; from
      :func:`~tensorplay.testing.check_grads` also ``"projection"`` (the path is then the argument),
      from :func:`~tensorplay.testing.check_interpreters` ``"interpreter"`` and ``"requires_grad"``;
    * for ``"values"``: ``mismatched`` and ``total`` elements, ``max_abs_diff`` at ``max_abs_index``,
      ``max_rel_diff`` at ``max_rel_index`` (over the mismatched elements whose values are finite;
      ``None`` when every mismatch involves NaN or inf).
    """

    __module__ = "tensorplay.testing"  # where users import it from (and how tracebacks print it)

    def __init__(self, message: str, *, path: str = "", kind: str = "values", mismatched: int = 0,
                 total: int = 0, max_abs_diff: float | None = None,
                 max_abs_index: tuple[int, ...] | None = None, max_rel_diff: float | None = None,
                 max_rel_index: tuple[int, ...] | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.kind = kind
        self.mismatched = mismatched
        self.total = total
        self.max_abs_diff = max_abs_diff
        self.max_abs_index = max_abs_index
        self.max_rel_diff = max_rel_diff
        self.max_rel_index = max_rel_index

    def with_message(self, message: str) -> NotCloseError:
        """The same error (same attributes) with another message."""
        return NotCloseError(message, path=self.path, kind=self.kind, mismatched=self.mismatched, total=self.total,
                             max_abs_diff=self.max_abs_diff, max_abs_index=self.max_abs_index,
                             max_rel_diff=self.max_rel_diff, max_rel_index=self.max_rel_index)


def default_tolerances(*dtypes: Any) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing values of these dtypes (tensorplay or numpy dtypes): the loosest
    of each dtype's defaults -- float16 ``(1e-3, 1e-5)``, float32 ``(1.3e-6, 1e-5)``, float64
    ``(1e-7, 1e-7)`` (PyTorch's), integers and booleans ``(0, 0)``."""
    rtol, atol = 0.0, 0.0
    for dtype in dtypes:
        np_dtype = np.dtype(getattr(dtype, "numpy", dtype))
        r, a = _FLOAT_TOLERANCES.get(np_dtype, (0.0, 0.0))
        rtol, atol = max(rtol, r), max(atol, a)
    return rtol, atol


# ---- leaves ---------------------------------------------------------------------------------------

def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, np.generic)


def _is_literal(value: Any) -> bool:
    """A Python number, or a (nested) non-empty list/tuple of them: an array literal."""
    if _is_number(value):
        return True
    return (type(value) in (list, tuple) and len(value) > 0
            and all(_is_literal(v) for v in value))


def _is_array_like(value: Any) -> bool:
    return (isinstance(value, (Tensor, np.ndarray, np.generic)) or _is_literal(value)
            or hasattr(value, "__array__") or callable(getattr(value, "numpy", None)))


def as_array(value: Any, where: str = "value") -> Array:
    """``value`` (a tensor of an interpreter that holds values, an array-like, a number) as a numpy
    array; a ``TypeError`` naming ``where`` when it has no values (a symbolically traced tensor)."""
    if isinstance(value, Tensor):
        try:
            return np.asarray(value)
        except Exception as error:  # a symbolic recorder has shapes, not values
            raise TypeError(f"{where}: a tensor of {value.interpreter!r} has no values to compare ({error}); "
                            "compare results outside the trace, or trace with execute=True") from None
    if isinstance(value, np.ndarray):
        return value
    detach = getattr(value, "detach", None)
    if callable(detach):  # a PyTorch tensor (or alike) that may require grad
        value = detach()
    to_numpy = getattr(value, "numpy", None)
    if callable(to_numpy) and not isinstance(value, np.generic):
        return np.asarray(to_numpy())
    return np.asarray(value)


def format_path(path: Sequence[Any]) -> str:
    """``(1, 'w')`` -> ``"[1]['w']"``."""
    return "".join(f"[{key!r}]" for key in path)


def _at(path: str) -> str:
    """`` at leaf [1]['w']`` (nothing for the root)."""
    return f" at leaf {path}" if path else ""


def _shape(shape: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


# ---- trees ----------------------------------------------------------------------------------------

def _kind(value: Any) -> str:
    return type(value).__name__


def _children(value: Any) -> Iterator[tuple[Any, Any]]:
    if isinstance(value, dict):
        yield from value.items()
    else:
        yield from enumerate(value)


def _is_container(value: Any) -> bool:
    return isinstance(value, (tuple, list, dict)) and not _is_literal(value)


def _pairs(actual: Any, expected: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    """The leaf pairs of two trees of the same structure (``NotCloseError`` at the first difference)."""
    a_container, e_container = _is_container(actual), _is_container(expected)
    if not a_container and not e_container:
        yield path, actual, expected
        return
    at = _at(format_path(path))
    if a_container != e_container or _kind(actual) != _kind(expected):
        raise NotCloseError(f"structures differ{at}: actual is {_describe(actual)}, expected "
                            f"{_describe(expected)}", path=format_path(path), kind="structure")
    if isinstance(actual, dict):
        if set(actual) != set(expected):
            missing = sorted(map(repr, set(expected) - set(actual)))
            extra = sorted(map(repr, set(actual) - set(expected)))
            raise NotCloseError(f"structures differ{at}: dict keys differ (missing {', '.join(missing) or '-'}; "
                                f"unexpected {', '.join(extra) or '-'})", path=format_path(path), kind="structure")
        for key in expected:
            yield from _pairs(actual[key], expected[key], path + (key,))
        return
    if len(actual) != len(expected):
        raise NotCloseError(f"structures differ{at}: actual is {_describe(actual)}, expected "
                            f"{_describe(expected)}", path=format_path(path), kind="structure")
    for (key, a), (_, e) in zip(_children(actual), _children(expected)):
        yield from _pairs(a, e, path + (key,))


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"a dict with keys {list(value)}"
    if isinstance(value, (tuple, list)) and not _is_literal(value):
        return f"a {_kind(value)} of {len(value)}"
    if value is None:
        return "None"
    if isinstance(value, Tensor):
        return f"a tensor of shape {_shape(value.shape)}"
    return f"a {type(value).__name__}"


# ---- one leaf -------------------------------------------------------------------------------------

def _compare_leaf(actual: Any, expected: Any, path: str, rtol: float | None, atol: float | None,
                  equal_nan: bool, check_dtype: bool) -> None:
    at = _at(path)
    if actual is None or expected is None or not (_is_array_like(actual) and _is_array_like(expected)):
        if actual is None and expected is None:
            return
        if _is_array_like(actual) != _is_array_like(expected) or actual is None or expected is None:
            raise NotCloseError(f"types differ{at}: actual is {_describe(actual)}, expected "
                                f"{_describe(expected)}", path=path, kind="type")
        if not bool(actual == expected):
            raise NotCloseError(f"values differ{at}: actual {actual!r}, expected {expected!r}", path=path,
                                kind="values", mismatched=1, total=1)
        return
    a_weak, e_weak = _is_literal(actual), _is_literal(expected)
    a, e = as_array(actual, f"assert_close: actual{at}"), as_array(expected, f"assert_close: expected{at}")
    if a.shape != e.shape:
        raise NotCloseError(f"shapes differ{at}: actual {_shape(a.shape)}, expected {_shape(e.shape)}",
                            path=path, kind="shape")
    if check_dtype and not (a_weak or e_weak) and a.dtype != e.dtype:
        raise NotCloseError(f"dtypes differ{at}: actual {a.dtype}, expected {e.dtype} (pass "
                            "check_dtype=False to compare the values only)", path=path, kind="dtype")
    strong = [x.dtype for x, weak in ((a, a_weak), (e, e_weak)) if not weak] or [a.dtype, e.dtype]
    default_rtol, default_atol = default_tolerances(*strong)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    _compare_values(a, e, path, rtol, atol, equal_nan, both_typed=not (a_weak or e_weak))


def _compare_values(a: Array, e: Array, path: str, rtol: float, atol: float, equal_nan: bool,
                    both_typed: bool) -> None:
    if a.dtype.kind == "b" or e.dtype.kind == "b" or (a.dtype.kind in "iu" and e.dtype.kind in "iu"
                                                        and rtol == 0 and atol == 0):
        ok = np.asarray(a == e)
        abs_diff = np.abs(a.astype(np.float64) - e.astype(np.float64))
        finite = np.ones(a.shape, dtype=bool)
    else:
        a64, e64 = a.astype(np.float64), e.astype(np.float64)
        finite = np.isfinite(a64) & np.isfinite(e64)
        with np.errstate(invalid="ignore", over="ignore"):
            abs_diff = np.where(finite, np.abs(a64 - e64), 0.0)
            ok = np.where(finite, abs_diff <= atol + rtol * np.abs(e64), a64 == e64)
        if equal_nan:
            ok |= np.isnan(a64) & np.isnan(e64)
    bad = ~ok
    mismatched = int(bad.sum())
    if not mismatched:
        return
    total = int(a.size)
    lines = [f"values differ{_at(path)} (shape {_shape(a.shape)}, dtype {a.dtype}"
             + (f" vs expected {e.dtype}" if both_typed and a.dtype != e.dtype else "") + "):",
             f"  {mismatched} of {total} elements ({100.0 * mismatched / total:.1f}%) differ by more than "
             f"atol + rtol * |expected| (rtol={rtol:g}, atol={atol:g}" + (", NaN equals NaN" if equal_nan else "")
             + ")"]
    bad_finite = bad & finite
    max_abs = max_rel = None
    abs_index = rel_index = None
    if bad_finite.any():
        abs_masked = np.where(bad_finite, abs_diff, -1.0)
        abs_index = _index(int(np.argmax(abs_masked)), a.shape)
        max_abs = float(abs_masked[abs_index])
        e_abs = np.abs(e.astype(np.float64))
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(bad_finite, np.where(e_abs > 0, abs_diff / np.where(e_abs > 0, e_abs, 1.0), math.inf), -1.0)
        rel_index = _index(int(np.argmax(rel)), a.shape)
        max_rel = float(rel[rel_index])
        lines.append(f"  largest absolute difference: {max_abs:.6g} at index {index_text(abs_index)} "
                     f"(actual {_item(a, abs_index)}, expected {_item(e, abs_index)})")
        lines.append(f"  largest relative difference: {max_rel:.6g} at index {index_text(rel_index)} "
                     f"(actual {_item(a, rel_index)}, expected {_item(e, rel_index)})")
    non_finite = int((bad & ~finite).sum())
    if non_finite:
        first = _index(int(np.argmax(bad & ~finite)), a.shape)
        verb = "es involve" if non_finite > 1 else " involves"
        lines.append(f"  {non_finite} mismatch{verb} NaN or inf, the first at index {index_text(first)} "
                     f"(actual {_item(a, first)}, expected {_item(e, first)})")
    raise NotCloseError("\n".join(lines), path=path, kind="values", mismatched=mismatched, total=total,
                        max_abs_diff=max_abs, max_abs_index=abs_index, max_rel_diff=max_rel,
                        max_rel_index=rel_index)


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def index_text(index: tuple[int, ...]) -> str:
    """An element index as written in messages: ``(1, 2)``; ``()`` for a 0-d value."""
    return "(" + ", ".join(str(i) for i in index) + ("," if len(index) == 1 else "") + ")"


def _item(array: Array, index: tuple[int, ...]) -> str:
    value = array[index]
    return f"{value.item()!r}" if isinstance(value, np.generic) else repr(value)


# ---- the public function --------------------------------------------------------------------------

def assert_close(actual: Any, expected: Any, *, rtol: float | None = None, atol: float | None = None,
                 equal_nan: bool = False, check_dtype: bool = True,
                 msg: str | Callable[[str], str] | None = None) -> None:
    """Assert that ``actual`` and ``expected`` are close: same pytree structure, and leaf by leaf the
    same shape, the same dtype (``check_dtype``) and ``|actual - expected| <= atol + rtol * |expected|``
    elementwise.

    * Leaves: tensors (of any interpreter holding values), numpy arrays and scalars, Python numbers,
      nested lists of numbers (array literals) and other array-likes (PyTorch tensors). Python
      numbers and list literals are *weak*: their dtype is not checked (``assert_close(t, [1.0, 2.0])``
      works for a float32 ``t``). Other leaves (strings, ``None``) must be equal.
    * Containers: tuples, namedtuples, lists and dicts must match in type, length and keys.
    * Default tolerances depend on the dtypes (the looser one when they differ): float32
      ``rtol=1.3e-6, atol=1e-5``, float64 ``rtol=1e-7, atol=1e-7``, integers and booleans exact.
      Giving only one of ``rtol``/``atol`` keeps the default of the other. ``inf`` equals only the
      same ``inf``; NaN equals NaN only with ``equal_nan=True``. No broadcasting: shapes must be equal.
    * On failure raises :class:`NotCloseError` (an ``AssertionError``) saying where (the leaf's path),
      the shape and dtype, how many elements and which fraction differ, and the largest absolute and
      relative differences with their indices and both values. ``msg``: a string is put before that
      report; a callable receives the report and returns the message to raise.

    >>> import tensorplay as tp
    >>> from tensorplay.testing import assert_close
    >>> assert_close(tp.tensor([1.0, 2.0]) * 3, [3.0, 6.0])
    >>> assert_close({"a": tp.zeros(2)}, {"a": tp.tensor([0.0, 1e-6])})
    """
    __tracebackhide__ = True
    try:
        for path, a, e in _pairs(actual, expected, ()):
            _compare_leaf(a, e, format_path(path), rtol, atol, equal_nan, check_dtype)
    except NotCloseError as error:  # raised again from here: a traceback ends at the caller's line
        text = str(error) if msg is None else msg(str(error)) if callable(msg) else f"{msg}\n{error}"
        raise error.with_message(text) from None


__all__ = ["NotCloseError", "as_array", "assert_close", "default_tolerances", "format_path"]
