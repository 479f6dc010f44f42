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

Two more of numba's start-up costs are deferred to their first real use (each left as it is where numba,
or the module, is already imported):

* numba's config imports ``yaml`` (PyYAML, 12-30 ms) to read a ``.numba_config.yaml`` that is almost never
  there: while the config imports, ``yaml`` cannot be imported, then the config gets a stand-in that imports
  it when read (a ``.numba_config.yaml`` read later, by ``numba.core.config.reload_config()``, still works).
* numba's typing context makes a ``cffi.FFI()`` (which imports ``pycparser`` and builds its lexer, ~20 ms)
  for typing jitted calls of cffi functions: while numba's target starts, ``cffi.FFI`` makes a stand-in
  that builds the real ``FFI`` on its first use (``ffi.typeof(...)`` when numba meets a cffi function).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

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


class _LazyYaml:
    """Stands for the ``yaml`` module in numba's config: imports it on the first attribute read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("yaml"), name)


def _import_numba_config() -> None:
    """Import numba's config with ``yaml`` deferred (see the module docstring): while it imports, ``yaml`` is
    unimportable, then the config's ``yaml`` is a :class:`_LazyYaml`. Left alone where the config or
    ``yaml`` is imported already, ``yaml`` is not installed, or a ``.numba_config.yaml`` is there to read."""
    if ("numba.core.config" in sys.modules or "yaml" in sys.modules or os.path.isfile(".numba_config.yaml")
            or importlib.util.find_spec("yaml") is None):
        return
    sys.modules["yaml"] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        config: Any = importlib.import_module("numba.core.config")
    finally:
        if "yaml" in sys.modules and sys.modules["yaml"] is None:
            del sys.modules["yaml"]
    config.yaml = _LazyYaml()
    config._HAVE_YAML = True


class _DeferredFFI:
    """Stands for the ``cffi.FFI()`` numba's typing keeps: builds it on the first attribute read."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self._ffi: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._ffi is None:
            self._ffi = self._make()
        return getattr(self._ffi, name)


def _deferring_cffi() -> Any:
    """``cffi`` with ``FFI`` replaced by a maker of :class:`_DeferredFFI` (undo with :func:`_restore_cffi`),
    or None where cffi is absent or numba's cffi support is set up already."""
    if "numba.core.typing.cffi_utils" in sys.modules or importlib.util.find_spec("cffi") is None:
        return None
    cffi: Any = importlib.import_module("cffi")
    real = cffi.FFI
    cffi.FFI = lambda: _DeferredFFI(real)
    return (cffi, real)


def _restore_cffi(patched: Any) -> None:
    if patched is not None:
        module, real = patched
        module.FFI = real


def start() -> None:
    """Start numba's CPU target now (once per process), with scipy's BLAS module loaded on its own for the
    check it makes (see the module docstring)."""
    global _STARTED
    if _STARTED:
        return
    _STARTED = True
    if "numba.np.arraymath" in sys.modules:  # numba's target has started already
        return
    blas = patched = None
    try:
        _import_numba_config()
        blas = _standalone_cython_blas()
        patched = _deferring_cffi()
        from numba.core.registry import cpu_target

        cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001 - an optimisation only: numba starts the usual way on its first use
        pass
    finally:
        _restore_cffi(patched)
        if blas is not None and sys.modules.get(_BLAS) is blas:
            del sys.modules[_BLAS]


start()
