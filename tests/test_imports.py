"""Every module of tensorplay (spec and the interpreters included) imports first in a fresh process.

A fresh process runs ``tensorplay/__init__.py`` before any submodule, completely, so a module that
``import tensorplay`` loads is always loaded in the same state: checking ``import tensorplay`` once in a
fresh process covers all of them. Every other module (loaded lazily: nn, optim, func, the rules, the numba
kernels, ...) is imported first in its own process, forked from one in which only the third-party
dependencies are loaded, so a circular import that breaks only in some order is found.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = r'''
import importlib, os, sys, traceback
import numpy, optree  # the third-party dependencies only
root = sys.argv[1]
modules = []
for dirpath, _, files in os.walk(os.path.join(root, "tensorplay"), followlinks=True):
    if "__pycache__" in dirpath:
        continue
    for name in files:
        if name.endswith(".py") and name != "__main__.py":
            dotted = os.path.relpath(os.path.join(dirpath, name), root)[:-3].replace(os.sep, ".")
            modules.append(dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted)

def first_import(module):
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(module)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    return pid

pid = first_import("tensorplay")
if os.waitpid(pid, 0)[1]:
    print("FAILED tensorplay"); sys.exit(1)
import tensorplay  # which modules does it load?
lazy = sorted(m for m in modules if m not in sys.modules)
failed, running = [], []
for module in lazy:
    running.append((module, first_import(module)))
    if len(running) == 2:
        m, p = running.pop(0)
        if os.waitpid(p, 0)[1]:
            failed.append(m)
for m, p in running:
    if os.waitpid(p, 0)[1]:
        failed.append(m)
print("CHECKED", len(modules), "LAZY", len(lazy), "FAILED", failed)
sys.exit(1 if failed else 0)
'''


def test_every_module_imports_first_in_a_fresh_process() -> None:
    result = subprocess.run([sys.executable, "-c", _SCRIPT, str(ROOT)], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    counts = result.stdout.split()
    assert int(counts[counts.index("CHECKED") + 1]) > 100 and int(counts[counts.index("LAZY") + 1]) > 20


def test_import_tensorplay_leaves_numba_and_the_high_level_packages_unloaded() -> None:
    code = ("import sys, tensorplay; loaded = [m for m in ('numba', 'tensorplay.nn', 'tensorplay.func', "
            "'tensorplay.optim', 'tensorplay.testing') if m in sys.modules]; assert not loaded, loaded")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
