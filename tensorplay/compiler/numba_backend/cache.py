"""The on-disk kernel cache: generated kernels as real source files, so numba's ``cache=True`` works.

A function made by ``exec`` cannot be cached by numba (it has no file); each generated kernel is
written as ``kernel.py`` in its own entry directory and imported from there, and numba keeps its
compiled code in that entry's ``__pycache__``. The entry's name is a SHA-256 of everything the
machine code depends on: the kernel's source, the versions of tensorplay, numba, llvmlite, numpy and
Python, the CPU (name and features) and every codegen option (fastmath flags, parallel, threading
layer, error model, boundscheck). numba's own cache index ignores several of these and would load
a build made for another setting; here a changed option is a different entry.

Where: ``tensorplay.compiler.config.cache_dir``, else ``TP_COMPILE_CACHE_DIR``, else the per-user
cache directory (``$XDG_CACHE_HOME/tensorplay/kernels``, by default ``~/.cache/...``), created
private to the user. ``config.force_disable_caches`` builds every kernel in a fresh temporary
directory instead.

Integrity: ``manifest.json`` records the key, the SHA-256 of ``kernel.py`` and, once numba has
compiled the kernel, of every file numba wrote. An entry whose files do not match (corrupt,
truncated, edited, or numba files that were not recorded) is a miss: its ``__pycache__`` is
discarded and the kernel is rebuilt; nothing unverified is loaded. An entry that fails to import or
compile is rebuilt once in a fresh directory, never a crash.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

CODEGEN: dict[str, Any] = {
    "fastmath": ("contract", "nsz", "reassoc"),
    "nogil": True,
    "error_model": "numpy",
    "boundscheck": False,
    "parallel": False,
}
"""The default codegen options of generated kernels (``options`` of ``tp.compile`` may change
``fastmath``; NaN and inf keep their meaning: ``nnan``/``ninf`` are never set)."""

CACHE_FORMAT = 2
"""Bumped when the layout of an entry or the way kernels are loaded changes (old entries then miss)."""

_LOCK = threading.RLock()
_LOADED: dict[str, Any] = {}
_TEMP: list[str] = []


def _environment() -> dict[str, Any]:
    import importlib

    from tensorplay.interpreters.eager.kernels import _numba_start  # noqa: F401  (numba started without scipy)
    import numba
    import numpy as np

    import tensorplay
    llvmlite: Any = importlib.import_module("llvmlite")
    llvm: Any = importlib.import_module("llvmlite.binding")
    numba_config: Any = importlib.import_module("numba.core.config")
    try:
        cpu = llvm.get_host_cpu_name()
        features = llvm.get_host_cpu_features().flatten()
    except Exception:  # pragma: no cover - very old llvmlite
        cpu, features = platform.processor(), ""
    return {
        "tensorplay": getattr(tensorplay, "__version__", "?"), "numba": numba.__version__,
        "llvmlite": llvmlite.__version__, "numpy": np.__version__, "python": sys.version.split()[0],
        "machine": platform.machine(), "cpu": cpu, "cpu_features": features,
        "threading_layer": str(numba_config.THREADING_LAYER), "cpu_name_override": os.environ.get("NUMBA_CPU_NAME", ""),
        "opt": str(numba_config.OPT), "fastmath_env": os.environ.get("NUMBA_FASTMATH", ""),
    }


_ENV: dict[str, Any] | None = None


def environment() -> dict[str, Any]:
    """Versions, CPU and numba settings the cache key covers (computed once per process)."""
    global _ENV
    if _ENV is None:
        _ENV = _environment()
    return _ENV


def cache_root() -> Path:
    """The cache directory (see the module docstring); created, private to the user."""
    from tensorplay.compiler.settings import config
    if config.force_disable_caches:
        with _LOCK:
            if not _TEMP:
                _TEMP.append(tempfile.mkdtemp(prefix="tensorplay-kernels-"))
            return Path(_TEMP[0])
    chosen = config.cache_dir or os.environ.get("TP_COMPILE_CACHE_DIR", "").strip()
    if chosen:
        root = Path(chosen).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
        root = Path(base) / "tensorplay" / "kernels"
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    return root


def entry_key(source: str, options: dict[str, Any]) -> str:
    """The cache key of a kernel (see the module docstring)."""
    payload = json.dumps({"format": CACHE_FORMAT, "source": source, "options": options, "env": environment()},
                         sort_keys=True,
                         default=repr)
    return hashlib.sha256(payload.encode()).hexdigest()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _module_text(source: str, name: str, options: dict[str, Any], key: str) -> str:
    flags = options["fastmath"]
    if isinstance(flags, (tuple, list, set)) and flags:  # a sorted literal: the file's text must not vary
        fastmath = "{" + ", ".join(repr(f) for f in sorted(flags)) + "}"
    else:
        fastmath = repr(bool(flags))
    return (f"# generated by tensorplay.compile; cache key {key}\n"
            "import numpy as np\nimport numba\n\n\n"
            f"@numba.njit(cache=True, nogil={options['nogil']!r}, fastmath={fastmath}, "
            f"error_model={options['error_model']!r}, boundscheck={options['boundscheck']!r})\n"
            + source.replace("def kernel(", f"def {name}(", 1))


def _numba_files(entry: Path) -> dict[str, str]:
    cache = entry / "__pycache__"
    if not cache.is_dir():
        return {}
    return {p.name: _sha(p) for p in sorted(cache.iterdir()) if p.is_file() and p.suffix in (".nbi", ".nbc")}


def _verified(entry: Path, key: str, text: str) -> bool:
    """Whether ``entry`` holds exactly ``text`` under ``key``; numba files not in the manifest are dropped."""
    kernel = entry / "kernel.py"
    manifest_path = entry / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("key") != key or kernel.read_text() != text or manifest.get("source") != _sha(kernel):
            return False
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    recorded = manifest.get("numba") or {}
    if _numba_files(entry) != recorded:
        shutil.rmtree(entry / "__pycache__", ignore_errors=True)
        manifest["numba"] = {}
        _write_manifest(entry, manifest)
    return True


def _write_manifest(entry: Path, manifest: dict[str, Any]) -> None:
    tmp = entry / f"manifest.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(manifest, sort_keys=True))
    os.replace(tmp, entry / "manifest.json")


def _write_entry(entry: Path, key: str, text: str) -> None:
    shutil.rmtree(entry, ignore_errors=True)
    entry.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = entry / f"kernel.{os.getpid()}.tmp"
    tmp.write_text(text)
    os.replace(tmp, entry / "kernel.py")
    _write_manifest(entry, {"key": key, "source": _sha(entry / "kernel.py"), "numba": {}})


def _import(entry: Path, name: str, key: str) -> Any:
    """Import ``entry``'s ``kernel.py`` as module ``tensorplay_kernel_<key>`` (registered in ``sys.modules``:
    numba's cached code refers to its module by name)."""
    module_name = f"tensorplay_kernel_{key[:40]}"
    existing = sys.modules.get(module_name)
    if existing is not None and getattr(existing, "__file__", None) == str(entry / "kernel.py"):
        return getattr(existing, name)
    spec = importlib.util.spec_from_file_location(module_name, entry / "kernel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return getattr(module, name)


def _signature(arg_types: list[tuple[str, int]]) -> Any:
    import numba
    types: list[Any] = []
    for dtype, ndim in arg_types:
        if dtype == "int":
            types.append(numba.types.int64)
        else:
            scalar = numba.types.boolean if dtype == "bool" else getattr(numba.types, dtype)
            types.append(numba.types.Array(scalar, ndim, "C"))
    return numba.types.void(*types)


def _seal(entry: Path) -> None:
    """Record the files numba wrote for the entry (a later process verifies them before loading)."""
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        manifest["numba"] = _numba_files(entry)
        _write_manifest(entry, manifest)
    except (OSError, ValueError):
        pass


def load_kernel(source: str, arg_types: list[tuple[str, int]], options: dict[str, Any] | None = None) -> Any:
    """The compiled kernel for ``source`` (a ``def kernel(...)``) with argument types ``arg_types``
    (``("int", 0)`` for a size, ``(dtype, ndim)`` for a C-contiguous array), from the cache (see the
    module docstring). The same source and options give the same dispatcher in a process."""
    opts = dict(CODEGEN, **(options or {}))
    key = entry_key(source, opts)
    with _LOCK:
        found = _LOADED.get(key)
        if found is not None:
            return found
        name = f"kernel_{key[:16]}"
        text = _module_text(source, name, opts, key)
        root = cache_root()
        entry = root / key[:2] / key
        if not _verified(entry, key, text):
            _write_entry(entry, key, text)
        signature = _signature(arg_types)
        try:
            fn = _import(entry, name, key)
            fn.compile(signature.args)
        except Exception:  # numba could not use the entry: rebuild it, then (once more) in a fresh directory
            sys.modules.pop(f"tensorplay_kernel_{key[:40]}", None)
            try:
                _write_entry(entry, key, text)
                fn = _import(entry, name, key)
                fn.compile(signature.args)
            except Exception:
                sys.modules.pop(f"tensorplay_kernel_{key[:40]}", None)
                entry = Path(tempfile.mkdtemp(prefix="tensorplay-kernel-"))
                _TEMP.append(str(entry))
                _write_entry(entry, key, text)
                fn = _import(entry, name, key)
                fn.compile(signature.args)
        _seal(entry)
        _LOADED[key] = fn
        return fn


def reset() -> None:
    """Forget the kernels loaded in this process (the files stay)."""
    with _LOCK:
        _LOADED.clear()


__all__ = ["CODEGEN", "cache_root", "entry_key", "environment", "load_kernel", "reset"]
