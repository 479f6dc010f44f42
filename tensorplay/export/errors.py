"""The errors of ``tensorplay.export`` (part of the :mod:`tensorplay.errors` hierarchy)."""

from __future__ import annotations

from typing import Any

from tensorplay.errors import GraphCaptureError, ShapeError, TensorplayError


class FileFormatError(TensorplayError, ValueError):
    """A file (a saved program or saved tensors) is refused: truncated, tampered with, written by a newer
    tensorplay, not a tensorplay file, or carrying something tensorplay never loads (a pickle). The message
    names the file, what was expected and what was found."""


class ConstraintViolationError(ShapeError):
    """At export: the program requires something of a dynamic dim that contradicts its declaration (a dim
    specialised to a constant, two dims forced equal, a range narrowed).

    ``violations`` describes each one (dim, requirement, the operation and the user's line that imposed it);
    ``fixes`` holds the machine-readable suggested fixes (:class:`~tensorplay.export.dynamic.SuggestedFix`),
    which :func:`~tensorplay.export.apply_fixes` applies to a ``dynamic_shapes`` spec."""

    def __init__(self, message: str, violations: tuple[Any, ...] = (), fixes: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.violations = violations
        self.fixes = fixes


class InputConstraintError(ShapeError):
    """At call time: an input violates the exported program's dims (a min, a max, a tie, a static size);
    the message names the dim, the input and axis, and where the dim was declared."""


class CapturedStateWriteError(GraphCaptureError):
    """At export: the program writes to a tensor it reads from outside (a closure or a global, not a
    buffer or parameter of the exported module): an exported program can only update module state."""


__all__ = ["CapturedStateWriteError", "ConstraintViolationError", "FileFormatError", "InputConstraintError"]
