"""Jitted waits on shared counters, for handing work to a kernel thread without waking a sleeper
(:mod:`.workers` explains the hand-off; this module holds only the native side).

Every function here runs without the GIL: a thread waiting in one of them leaves the interpreter
to the others, yet stays on its core and sees a change of a counter within about a microsecond.
The counters are the cells of one C-contiguous ``int64`` array; a cell is read and written with
sequentially consistent atomic operations (a ``post`` and a later ``peek`` by another thread are
never reordered, which the sleep hand-shake of :mod:`.workers` relies on).

A wait is bounded by a number of *checks* (one atomic read and one ``pause`` each; the caller turns
microseconds into checks with :func:`checks_per_microsecond`), so a wait that times out simply
returns the value it last saw.

Importing this module imports numba; :mod:`.workers` imports it when it starts its first thread.
"""

from __future__ import annotations

import platform
import time
from typing import Any

import llvmlite.ir as ir  # type: ignore[import-untyped]
from . import _numba_start  # noqa: F401  (numba's CPU target started without scipy.linalg)
import numba
import numpy as np
from numba.core import cgutils as _cgutils, types
from numba.extending import intrinsic

cgutils: Any = _cgutils

_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")


def _cell_pointer(context: Any, builder: Any, array_type: Any, array: Any, index: Any) -> Any:
    made = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, made, [index], wraparound=False)


def _is_cells(cells: Any) -> bool:
    return isinstance(cells, types.Array) and cells.dtype == types.int64 and cells.ndim == 1


def _load_typer(typingctx: Any, cells: Any, index: Any) -> Any:
    """``cells[index]``, read atomically (sequentially consistent)."""
    if not _is_cells(cells):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        return builder.load_atomic(_cell_pointer(context, builder, cells, args[0], args[1]), "seq_cst", 8)

    return types.int64(cells, index), codegen


def _store_typer(typingctx: Any, cells: Any, index: Any, value: Any) -> Any:
    """``cells[index] = value``, written atomically (sequentially consistent)."""
    if not _is_cells(cells):
        return None
    sig = types.void(cells, index, value)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        stored = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(stored, _cell_pointer(context, builder, cells, args[0], args[1]), "seq_cst", 8)
        return context.get_dummy_value()

    return sig, codegen


def _relax_typer(typingctx: Any) -> Any:
    """The CPU's spin-wait hint (x86 ``pause``: it saves power and frees the core's other hyperthread);
    nothing elsewhere (the atomic read already keeps the loop from being folded away)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        if _X86:
            pause = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                   "llvm.x86.sse2.pause")
            builder.call(pause, [])
        return context.get_dummy_value()

    return types.void(), codegen


_load: Any = intrinsic(_load_typer)
_store: Any = intrinsic(_store_typer)
_relax: Any = intrinsic(_relax_typer)


def _jit(f: Any) -> Any:
    return numba.njit(cache=True, nogil=True)(f)


@_jit
def wait_change(cells: Any, index: Any, seen: Any, stop: Any, checks: Any) -> Any:  # pragma: no cover
    """Spin until ``cells[index] != seen`` or ``cells[stop] != 0``, at most ``checks`` times; return
    ``cells[index]`` as last read (``seen`` when the wait ran out or was stopped)."""
    for _ in range(checks):
        value = _load(cells, index)
        if value != seen or _load(cells, stop) != 0:
            return value
        _relax()
    return _load(cells, index)


@_jit
def peek(cells: Any, index: Any) -> Any:  # pragma: no cover
    """``cells[index]`` (an atomic read)."""
    return _load(cells, index)


@_jit
def post(cells: Any, index: Any, value: Any, other: Any) -> Any:  # pragma: no cover
    """``cells[index] = value``, then return ``cells[other]`` (an atomic write, then an atomic read:
    one side of a store-then-check hand-shake)."""
    _store(cells, index, value)
    return _load(cells, other)


@_jit
def post_and_wait(cells: Any, index: Any, value: Any, asleep: Any, watch: Any, seen: Any, stop: Any,
                  checks: Any, linger: Any) -> Any:  # pragma: no cover
    """``cells[index] = value``; then, unless ``cells[asleep]`` is set (returns -1: the caller must wake
    the sleeper), :func:`wait_change` on ``cells[watch]``, and when it changed, spin ``linger`` more
    checks before returning it. All without the GIL: the thread that waits gives the interpreter to
    the one it woke for the whole wait."""
    _store(cells, index, value)
    if _load(cells, asleep) != 0:
        return -1
    got = wait_change(cells, watch, seen, stop, checks)
    if got != seen:
        for _ in range(linger):
            _relax()
    return got


def checks_per_microsecond() -> float:
    """How many checks of :func:`wait_change` take a microsecond on this machine (measured once, over
    about a millisecond; between 5 and 200)."""
    cells = np.zeros(2, np.int64)
    wait_change(cells, 0, 0, 1, 100)  # compiled or loaded before timing
    start = time.perf_counter()
    wait_change(cells, 0, 0, 1, 30_000)
    elapsed_us = (time.perf_counter() - start) * 1e6
    return min(200.0, max(5.0, 30_000 / max(elapsed_us, 1e-3)))
