"""``tensorplay.compiler``: ``tp.compile`` and its machinery.

* :func:`compile` (also ``tp.compile``) -- capture, guards, the pass pipeline and a backend;
* :func:`reset` -- forget every compiled specialization and backend state;
* :data:`config` -- process-wide settings (:mod:`.settings`);
* :func:`register_backend`, :func:`lookup_backend`, :func:`list_backends` -- backends
  (:mod:`.backends`): ``"numba"`` (default) and ``"eager"`` are built in.

Layering: this package is high level; it imports the interpreters, never the other way round.
"""

from tensorplay.compiler.api import MODES, compile, reset
from tensorplay.compiler.backends import BackendError, list_backends, lookup_backend, register_backend
from tensorplay.compiler.compiled import (
    CompiledFunction, CompiledModule, RecompileEvent, RecompileLimitError,
)
from tensorplay.compiler.guards import Reason
from tensorplay.compiler.settings import CompileConfigError, CompileTypeError, Config, config
from tensorplay.compiler.sources import UnguardedStateWarning

__all__ = [
    "BackendError", "CompileConfigError", "CompileTypeError", "CompiledFunction", "CompiledModule", "Config",
    "MODES", "Reason", "RecompileEvent", "RecompileLimitError", "compile", "config", "list_backends",
    "UnguardedStateWarning", "lookup_backend", "register_backend", "reset",
]
