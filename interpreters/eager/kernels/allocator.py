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
* ``M_TRIM_THRESHOLD`` = 64 MiB: up to that much free memory at the top of the heap is kept for
  the next allocation instead of being returned at once.

The cost is resident memory: up to 64 MiB of freed memory may stay mapped after a peak (glibc
reuses it for later allocations). Nothing is changed when the user set any ``MALLOC_*`` variable
or ``GLIBC_TUNABLES`` (their choice wins), when another allocator is preloaded (``LD_PRELOAD``),
or when ``TP_MALLOC_TUNING=0``. :func:`describe` says what was done, for benchmark reports.
"""

from __future__ import annotations

import ctypes
import os

ENV_VAR = "TP_MALLOC_TUNING"
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
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
    _STATE["description"] = (f"glibc mallopt M_MMAP_THRESHOLD={MMAP_THRESHOLD >> 20} MiB, "
                             f"M_TRIM_THRESHOLD={TRIM_THRESHOLD >> 20} MiB" if ok else "mallopt failed: glibc defaults")


def describe() -> str:
    """What :func:`tune` did in this process."""
    return _STATE["description"]
