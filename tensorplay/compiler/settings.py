"""Process-wide settings of ``tp.compile``: the object ``tensorplay.compiler.config``.

Set attributes directly (``tp.compiler.config.verbose = True``) or for a block with
``with tp.compiler.config.patch(recompile_limit=2): ...``. Values are checked when
:func:`tensorplay.compiler.compile` is called (an invalid value raises there, naming the setting).

* ``dynamic_shapes`` (``None``/bool): the default of ``compile(dynamic=...)``.
* ``assume_static_by_default`` (bool): with ``dynamic=None``, the first call is compiled static and
  a dim whose size changes is recompiled symbolic; ``False`` compiles dynamic from the first call.
* ``recompile_limit`` (int >= 1): cached specializations per function (``compile(recompile_limit=)``
  overrides it).
* ``accumulated_recompile_limit`` (int >= 1): captures of one compiled wrapper in all (cached or not);
  past it, a call raises. :func:`~tensorplay.compiler.reset` does not clear the count.
* ``verbose`` (bool): print every recompilation and its reasons (also ``TP_LOG_RECOMPILES=1``).
* ``fail_on_recompile_limit_hit`` (bool): raise at the recompile limit instead of compiling the call
  again without caching it.
* ``force_disable_caches`` (bool): bypass the on-disk kernel cache (kernels are built in a fresh
  temporary directory).
* ``cache_dir`` (``None``/str): where generated kernels are cached (default: ``TP_COMPILE_CACHE_DIR``,
  else the per-user cache directory, ``$XDG_CACHE_HOME/tensorplay/kernels``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from tensorplay.errors import TensorplayError


class CompileConfigError(TensorplayError, ValueError):
    """A setting of ``tensorplay.compiler.config``, or an argument of ``tp.compile``, has an invalid value."""


class CompileTypeError(TensorplayError, TypeError):
    """An argument of ``tp.compile`` has the wrong type (a non-callable model, non-dict options, ...)."""


_FIELDS: dict[str, tuple[Any, str]] = {
    "dynamic_shapes": (None, "None, True or False"),
    "assume_static_by_default": (True, "True or False"),
    "recompile_limit": (8, "an int >= 1"),
    "accumulated_recompile_limit": (256, "an int >= 1"),
    "verbose": (False, "True or False"),
    "fail_on_recompile_limit_hit": (False, "True or False"),
    "force_disable_caches": (False, "True or False"),
    "cache_dir": (None, "None or a directory path (str)"),
}


def _valid(name: str, value: Any) -> bool:
    if name == "dynamic_shapes":
        return value is None or isinstance(value, bool)
    if name in ("recompile_limit", "accumulated_recompile_limit"):
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1
    if name == "cache_dir":
        return value is None or (isinstance(value, str) and bool(value))
    return isinstance(value, bool)


class Config:
    """The settings (see the module docstring). Unknown names are refused when set."""

    dynamic_shapes: bool | None
    assume_static_by_default: bool
    recompile_limit: int
    accumulated_recompile_limit: int
    verbose: bool
    fail_on_recompile_limit_hit: bool
    force_disable_caches: bool
    cache_dir: str | None

    def __init__(self) -> None:
        for name, (default, _) in _FIELDS.items():
            object.__setattr__(self, name, default)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _FIELDS:
            raise AttributeError(f"tensorplay.compiler.config has no setting {name!r}; the settings are "
                                 f"{', '.join(_FIELDS)}")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in _FIELDS) + ")"

    def validate(self) -> None:
        """Raise :class:`CompileConfigError` naming the first setting with an invalid value."""
        for name, (_, expected) in _FIELDS.items():
            value = getattr(self, name)
            if not _valid(name, value):
                raise CompileConfigError(f"tensorplay.compiler.config.{name} must be {expected}, got {value!r}")

    def as_dict(self) -> dict[str, Any]:
        """The current values."""
        return {name: getattr(self, name) for name in _FIELDS}

    def reset(self) -> None:
        """Every setting back to its default."""
        for name, (default, _) in _FIELDS.items():
            object.__setattr__(self, name, default)

    @contextlib.contextmanager
    def patch(self, **changes: Any) -> Iterator[Config]:
        """Set ``changes`` for the block; the previous values come back afterwards."""
        saved = {name: getattr(self, name) for name in changes if name in _FIELDS}
        try:
            for name, value in changes.items():
                setattr(self, name, value)
            yield self
        finally:
            for name, value in saved.items():
                object.__setattr__(self, name, value)


config = Config()
"""The process-wide settings."""

__all__ = ["CompileConfigError", "CompileTypeError", "Config", "config"]
