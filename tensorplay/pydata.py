"""Checks on the Python numbers handed to the factories (``tp.tensor``, ``tp.full``, ...).

numpy turns a Python int that fits no int64 into uint64, float64 or an object array, each of which
loses it silently (``np.array([1, 2**63])`` is float64). PyTorch refuses such an int; so do these
helpers, naming the value and where it sits in the nested lists and tuples (``index [0][1]``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

_NESTED = (list, tuple)


def is_int(value: Any) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_int_or_bool(value: Any) -> bool:
    return isinstance(value, (int, np.integer, bool, np.bool_))


def find_leaf(data: Any, test: Callable[[Any], bool]) -> tuple[Any, tuple[int, ...]] | None:
    """The first leaf of ``data`` (nested lists and tuples; anything else is a leaf) for which ``test``
    holds, with its index path, depth first; None when there is none. Stops at the first hit, having
    looked at nothing after it."""
    if not isinstance(data, _NESTED):
        return (data, ()) if test(data) else None
    stack: list[tuple[Any, tuple[int, ...]]] = [(iter(enumerate(data)), ())]
    while stack:
        items, path = stack[-1]
        for i, item in items:
            if isinstance(item, _NESTED):
                stack.append((iter(enumerate(item)), path + (i,)))
                break
            if test(item):
                return item, path + (i,)
        else:
            stack.pop()
    return None


def at(path: tuple[int, ...]) -> str:
    """``(0, 1)`` as ``" at index [0][1]"``; nothing for a bare scalar (no path)."""
    return " at index " + "".join(f"[{i}]" for i in path) if path else ""


def show_int(value: Any) -> str:
    """An int as written, with the middle of a very long one left out."""
    text = str(int(value))
    return text if len(text) <= 40 else f"{text[:12]}...{text[-6:]} ({len(text.lstrip('-'))} digits)"


def has_non_int(data: Any) -> bool:
    """Whether some leaf of ``data`` is not an int or a bool (a float, an array, ...): then numpy's float
    result is what PyTorch infers too, rather than a promotion of ints too large for int64."""
    return find_leaf(data, lambda v: not _is_int_or_bool(v)) is not None


def int_range(dtype: np.dtype[Any]) -> tuple[int, int]:
    """The inclusive range of the integer numpy ``dtype``."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


def _fits_no_float(value: Any) -> bool:
    try:
        float(value)
    except OverflowError:
        return True
    return False


def check_ints_fit(data: Any, dtype: np.dtype[Any], where: str, inferred: bool) -> None:
    """An :class:`OverflowError` naming the first int of ``data`` (nested lists and tuples) outside the
    range of the integer ``dtype``, and its position; ``inferred`` says the dtype was not given (int64,
    the widest integer dtype, was inferred from the ints, so such an int fits none)."""
    low, high = int_range(dtype)
    found = find_leaf(data, lambda v: is_int(v) and not low <= int(v) <= high)
    if found is None:
        return
    value, path = found
    if inferred:
        raise OverflowError(
            f"{where}: the int {show_int(value)}{at(path)} fits no integer dtype (the widest, int64, holds "
            f"[{low}, {high}]); pass dtype=tp.float64 to store it rounded to a float")
    raise OverflowError(f"{where}: the int {show_int(value)}{at(path)} does not fit {dtype.name} "
                        f"(range [{low}, {high}])")


def check_ints_to_float(data: Any, where: str) -> None:
    """An :class:`OverflowError` naming the first int of ``data`` too large for any float (``10**400``)."""
    found = find_leaf(data, lambda v: is_int(v) and _fits_no_float(v))
    if found is not None:
        value, path = found
        raise OverflowError(f"{where}: the int {show_int(value)}{at(path)} is too large for any float dtype "
                            "(float64 holds magnitudes up to about 1.8e308)")


def check_scalar_fits(value: Any, dtype: np.dtype[Any], where: str) -> None:
    """An :class:`OverflowError` when the Python or numpy number ``value`` cannot be stored in ``dtype``
    without wrapping around or overflowing (as PyTorch's ``full`` refuses it): an int outside an integer
    dtype's range, an inf or NaN or too large a float for an integer dtype, a finite number beyond a float
    dtype's range. A bool dtype takes every number; other values are left to the caller."""
    if dtype.kind == "b" or isinstance(value, (bool, np.bool_)):
        return
    if dtype.kind in "iu":
        low, high = int_range(dtype)
        if is_int(value):
            if not low <= int(value) <= high:
                raise OverflowError(f"{where}: the int {show_int(value)} does not fit {dtype.name} "
                                    f"(range [{low}, {high}])")
        elif isinstance(value, (float, np.floating)):
            # a float bound compares as float: 2**63 - 1 rounds up to 2**63, which already does not fit
            if not (float(low) <= float(value) < float(high) + 1.0):
                raise OverflowError(f"{where}: the float {value!r} cannot be converted to {dtype.name} "
                                    f"(range [{low}, {high}])")
    elif dtype.kind == "f" and isinstance(value, (int, float, np.integer, np.floating)):
        if is_int(value) and _fits_no_float(value):
            raise OverflowError(f"{where}: the int {show_int(value)} is too large for any float dtype "
                                "(float64 holds magnitudes up to about 1.8e308)")
        big = float(np.finfo(dtype).max)
        if np.isfinite(float(value)) and abs(float(value)) > big:
            raise OverflowError(f"{where}: {value!r} is beyond the range of {dtype.name} (magnitudes up to "
                                f"{big:.6g}); it would become inf")


def check_int_operand(value: Any, dtype: np.dtype[Any], where: str) -> None:
    """An :class:`OverflowError` when ``value`` is a Python int that the operation, computing in
    ``dtype``, cannot hold: beyond an integer dtype's range (numpy would raise its own message, or
    wrap around inside ``where``) or beyond every float. Anything else passes."""
    if not is_int(value):
        return
    if dtype.kind in "iu":
        check_scalar_fits(value, dtype, where)
    elif dtype.kind == "f" and _fits_no_float(value):
        raise OverflowError(f"{where}: the int {show_int(value)} is too large for any float dtype "
                            "(float64 holds magnitudes up to about 1.8e308)")
