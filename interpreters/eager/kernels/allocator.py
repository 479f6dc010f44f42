"""Keeping glibc from handing the eager interpreter's large temporaries back to the kernel.

Every eager op returns a new array, and a training step allocates and frees dozens of multi-MB
arrays (activations, their gradients, im2col columns). With glibc's default settings, freed
memory at the top of the heap is returned to the kernel once more than twice the current mmap
threshold is free (and blocks above that threshold are mmapped and unmapped on every call), so
the next step touches fresh pages and page-faults through its whole working set again. Measured
on the CNN training step of ``benchmarks`` (one thread, CPU time): 30-38 ms with glibc's defaults,
16-21 ms with the settings below; PyTorch's step took 18-22 ms.

:func:`tune` (called once when the eager kernels are imported) sets, on glibc only:

* ``M_MMAP_THRESHOLD`` = 32 MiB (glibc's largest): blocks below it come from the heap, not
  from a fresh mapping each time;
* ``M_TRIM_THRESHOLD`` = 256 MiB: up to that much free memory at the top of the heap is kept for
  the next allocation instead of being returned at once;
* a heap reserve: the main heap is grown once by :data:`HEAP_RESERVE` (blocks just below the
  mmap threshold, freed at once: address space only, nothing is touched, so nothing becomes
  resident). glibc mmaps a block at or above the threshold only when the heap cannot serve it, so
  with the reserve a block of up to ~190 MiB (a [64, 256, 784] per-sample gradient is 51 MiB) comes
  from the heap too, and its pages are reused by the next call instead of faulted in afresh.
  Measured (one thread, fresh processes): allocating and filling 51 MiB 5.0 -> 1.6 ms (283 -> 0
  page faults per call); the per-sample gradients of the 784-256-10 MLP at batch 64
  (``python -m benchmarks func``'s row) 6.73 -> 2.81 ms, the same peak resident memory; the
  benchmark training steps unchanged.

The cost is resident memory: up to 256 MiB of freed memory may stay mapped after a peak (glibc
reuses it for later allocations). Nothing is changed when the user set any ``MALLOC_*`` variable
or ``GLIBC_TUNABLES`` (their choice wins), when another allocator is preloaded (``LD_PRELOAD``),
or when ``TP_MALLOC_TUNING=0``. :func:`describe` says what was done, for benchmark reports.
"""

from __future__ import annotations

import ctypes
import os

ENV_VAR = "TP_MALLOC_TUNING"
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 256 << 20
HEAP_RESERVE_BLOCK = MMAP_THRESHOLD - (8 << 10)
HEAP_RESERVE_BLOCKS = 6
HEAP_RESERVE = HEAP_RESERVE_BLOCKS * HEAP_RESERVE_BLOCK
"""Bytes the main heap is grown by once: blocks just below the mmap threshold (so they come from the heap),
together below the trim threshold (so freeing them keeps the space at the top of the heap)."""
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_STATE: dict[str, str] = {"description": "not applied yet"}


def _user_choice() -> str | None:
    """Why the user's own allocator settings take precedence (None: they made no choice)."""
    if os.environ.get(ENV_VAR, "").strip() == "0":
        return f"{ENV_VAR}=0"
    for key in os.environ:
        if key.startswith("MALLOC_") or key == "GLIBC_TUNABLES":
            return f"{key} is set"
    if os.environ.get("LD_PRELOAD", "").strip():
        return "LD_PRELOAD is set"
    return None


def tune() -> None:
    """Apply the settings of the module docstring once per process (no-op off glibc or when the
    user chose their own)."""
    if "done" in _STATE:
        return
    _STATE["done"] = "yes"
    reason = _user_choice()
    if reason is not None:
        _STATE["description"] = f"left as configured ({reason})"
        return
    try:
        libc_name = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError, AttributeError):
        libc_name = ""
    if not libc_name.startswith("glibc"):
        _STATE["description"] = "left as is (not glibc)"
        return
    try:
        libc = ctypes.CDLL(None)
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and \
            libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    except (OSError, AttributeError):
        ok = False
    if not ok:
        _STATE["description"] = "mallopt failed: glibc defaults"
        return
    reserved = _reserve_heap(libc)
    _STATE["description"] = (f"glibc mallopt M_MMAP_THRESHOLD={MMAP_THRESHOLD >> 20} MiB, "
                             f"M_TRIM_THRESHOLD={TRIM_THRESHOLD >> 20} MiB, "
                             + (f"heap reserve {reserved >> 20} MiB" if reserved else "no heap reserve"))


def _reserve_heap(libc: ctypes.CDLL) -> int:
    """Grow the main heap by :data:`HEAP_RESERVE` (see the module docstring); returns the bytes reserved
    (0 when malloc refused: a tight address-space or data limit)."""
    malloc, free = libc.malloc, libc.free
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.restype, free.argtypes = None, [ctypes.c_void_p]
    blocks = [malloc(HEAP_RESERVE_BLOCK) for _ in range(HEAP_RESERVE_BLOCKS)]
    for block in reversed(blocks):
        if block:
            free(block)
    return HEAP_RESERVE if all(blocks) else 0


def describe() -> str:
    """What :func:`tune` did in this process."""
    return _STATE["description"]
