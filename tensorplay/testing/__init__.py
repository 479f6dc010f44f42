"""``tensorplay.testing``: test a model under every way of running it.

* :func:`assert_close` -- tensors, arrays, numbers and pytrees of them, with dtype-aware
  tolerances and a report of what differs where (:class:`NotCloseError`).
* :func:`check_grads` -- reverse and forward mode (and, ``order=2``, their compositions) against
  central finite differences in float64 (:func:`numerical_jvp`, :func:`numerical_vjp`).
* :func:`check_interpreters` -- a function, ``@tp.program`` or ``nn.Module`` run eagerly, traced and
  evaluated, traced in execute mode, through its ``GraphModule`` code, re-recorded, under vmap,
  and with its gradient through each of them; compared with eager. The ways of running are a
  registry (:func:`interpreters`, :func:`register_interpreter`) that compile and export join.
* a pytest plugin (``-p tensorplay.testing``, active by itself once tensorplay is installed):
  the ``tp_interpreter`` fixture runs a test once per way of running
  (``tp_interpreter(fn, *args)`` returns what ``fn(*args)`` returns, computed that way), and the
  ``tp_interpreters(*names, exclude=...)`` marker picks the ways for one test.
* :mod:`tensorplay.testing.strategies` -- hypothesis strategies for tensors and shapes with named
  dims that agree across the tensors of one example (needs ``hypothesis``).

See ``docs/testing.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

from tensorplay.testing.compare import NotCloseError, assert_close, default_tolerances
from tensorplay.testing.finite_differences import numerical_jvp, numerical_vjp
from tensorplay.testing.grads import check_grads
from tensorplay.testing.registry import (
    NotApplicable, Runner, interpreters, register_interpreter, unregister_interpreter,
)
from tensorplay.testing.swap import check_interpreters



def pytest_configure(config: Any) -> None:
    """pytest hook: loaded as a plugin (the ``pytest11`` entry point of an installed tensorplay, or
    ``-p tensorplay.testing``), this package registers the real plugin, :mod:`tensorplay.testing.plugin`
    (its hooks, the ``tp_interpreter`` fixture and the ``tp_interpreters`` marker), which imports pytest:
    importing ``tensorplay.testing`` outside pytest does not."""
    plugin = importlib.import_module("tensorplay.testing.plugin")
    if not config.pluginmanager.is_registered(plugin):
        config.pluginmanager.register(plugin, "tensorplay.testing.plugin")


# ``strategies`` imports hypothesis: loaded on first use.
def __getattr__(name: str) -> object:
    if name == "strategies":
        return importlib.import_module("tensorplay.testing.strategies")
    raise AttributeError(f"module 'tensorplay.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "strategies"])


__all__ = [
    "NotApplicable", "NotCloseError", "Runner", "assert_close", "check_grads", "check_interpreters",
    "default_tolerances", "interpreters", "numerical_jvp", "numerical_vjp", "register_interpreter",
    "unregister_interpreter",
]
