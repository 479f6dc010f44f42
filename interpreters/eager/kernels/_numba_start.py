"""numba's start-up without scipy's: imported (first) by every module of jitted code, it starts numba's CPU
target before any kernel compiles or loads from the cache.

When numba's CPU target starts (the first compilation or cached load in a process) it imports
``numba.np.arraymath``, which checks that BLAS is there for ``np.dot`` by importing
``scipy.linalg.cython_blas`` when scipy is installed. Importing that module runs ``scipy.linalg``'s package
``__init__``, which imports most of scipy (its array-API layer, ``numpy.f2py``, ``charset_normalizer``, ...):
measured 0.15-0.4 s of a fresh process's first kernel (0.6-1.2 s in all), a cost every first eager step and
every first compilation paid, though no tensorplay kernel calls scipy.

:func:`start` loads the one Cython module numba checks for from its file, on its own, while numba's target
starts, then removes it from ``sys.modules`` again, so that a later ``import scipy.linalg`` (by the
program, or by numba when jitted code does call ``np.dot``) runs the package as usual (Cython hands back
the same module object). Where scipy is absent, ``scipy.linalg`` is already imported, numba has started,
or anything here fails, numba starts the usual way.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

_BLAS = "scipy.linalg.cython_blas"
_STARTED = False


def _standalone_cython_blas() -> ModuleType | None:
    """``scipy.linalg.cython_blas`` loaded from its file without running ``scipy.linalg``'s ``__init__``
    (in ``sys.modules`` from here on), or None where that does not apply."""
    if "scipy.linalg" in sys.modules or _BLAS in sys.modules:
        return None
    spec = importlib.util.find_spec("scipy")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "linalg")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "cython_blas" + suffix)
        if os.path.exists(path):
            break
    else:
        return None
    importlib.import_module("scipy")  # numba's check imports the top-level package and reads its __config__

    blas_spec = importlib.util.spec_from_file_location(_BLAS, path)
    if blas_spec is None or blas_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(blas_spec)
    sys.modules[_BLAS] = module
    try:
        blas_spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(_BLAS, None)
        raise
    return module


def start() -> None:
    """Start numba's CPU target now (once per process), with scipy's BLAS module loaded on its own for the
    check it makes (see the module docstring)."""
    global _STARTED
    if _STARTED:
        return
    _STARTED = True
    if "numba.np.arraymath" in sys.modules:  # numba's target has started already
        return
    blas = None
    try:
        blas = _standalone_cython_blas()
        from numba.core.registry import cpu_target

        cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001 - an optimisation only: numba starts the usual way on its first use
        pass
    finally:
        if blas is not None and sys.modules.get(_BLAS) is blas:
            del sys.modules[_BLAS]


start()
