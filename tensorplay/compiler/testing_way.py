"""The ``compiled`` way of running for :mod:`tensorplay.testing` (``check_interpreters`` and the
``tp_interpreter`` fixture): ``tp.compile`` the program, then call it twice (the first call captures
and compiles, the second takes the cached specialization) and return the second result.

Registered when this module is imported; the package metadata names it in the
``tensorplay.testing.interpreters`` entry-point group, so the testing registry imports it by itself.
"""

from __future__ import annotations

from typing import Any

from tensorplay import random_state
from tensorplay.testing.registry import register_interpreter
from tensorplay.testing.ways import ModuleState


def run_compiled(fn: Any, *args: Any) -> Any:
    """tp.compile (the numba backend), called twice: the cached specialization's result (the random
    generator and a module's buffers are put back between the calls, so the second call sees what the
    first saw)."""
    from tensorplay.compiler import compile as compile_
    compiled = compile_(fn, isolate_recompiles=True)
    seed, buffers = random_state.get_state(), ModuleState(fn)
    before = buffers.snapshot()
    compiled(*args)
    random_state.set_state(seed)
    buffers.restore(before)
    return compiled(*args)


register_interpreter("compiled", run_compiled, description="tp.compile, called twice (cached path)",
                     replace=True)

__all__ = ["run_compiled"]
