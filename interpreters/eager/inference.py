"""``tp.inference_mode``: grad mode off (as ``tp.no_grad``) with ``tp.is_inference_mode_enabled()`` true.

PyTorch's inference mode also marks the tensors made inside as *inference tensors*, which autograd later
refuses to save; tensorplay has no such mark: inside ``inference_mode`` nothing is recorded (exactly as
``no_grad``), and a tensor made there is an ordinary tensor afterwards. As in PyTorch,
``inference_mode(False)`` turns grad mode on (and inference mode off) for its block, and both are
restored on exit.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar, overload

from tensorplay.interpreters.eager import tape

F = TypeVar("F", bound=Callable[..., Any])


class _InferenceState(threading.local):
    enabled = False


_state = _InferenceState()


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside ``tp.inference_mode()`` (``False`` by default)."""
    return _state.enabled


class InferenceMode:
    """Context manager and decorator: inference mode ``mode`` (grad mode ``not mode``) for the block, the
    previous modes restored after it."""

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)
        self.previous: list[tuple[bool, bool]] = []

    def __enter__(self) -> None:
        self.previous.append((tape.grad_enabled(), _state.enabled))
        tape.set_grad_enabled(not self.mode)
        _state.enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        grad, inference = self.previous.pop()
        tape.set_grad_enabled(grad)
        _state.enabled = inference

    def __call__(self, fn: F) -> F:
        mode = self.mode

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with InferenceMode(mode):
                return fn(*args, **kwargs)
        return wrapped  # type: ignore[return-value]


@overload
def inference_mode(mode: bool = True) -> InferenceMode: ...


@overload
def inference_mode(mode: F) -> F: ...


def inference_mode(mode: Any = True) -> Any:
    """``with tp.inference_mode():``, ``@tp.inference_mode()`` or ``@tp.inference_mode``: nothing inside is
    recorded on the tape and ``tp.is_inference_mode_enabled()`` is true; ``inference_mode(False)`` turns
    both modes back (grad mode on) for its block."""
    if callable(mode):
        return InferenceMode(True)(mode)
    return InferenceMode(mode)


__all__ = ["InferenceMode", "inference_mode", "is_inference_mode_enabled"]
