"""Making the eager interpreter's results: a new tensor around a numpy array, its tape node when an
input requires grad, and the bookkeeping of views (a shared version counter, the viewed base).

Every eager operation ends here, so this is the thinnest code of the dispatch path: one tensor, and a
tape node only when recording (an input requires grad and grad mode is on).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay import recording
from tensorplay.interpreters.eager import tape
from tensorplay.spec.table import names
from tensorplay.tensor import Tensor

_RECORDING_ACTIVE = recording.active
_RECORDABLE = frozenset(names("view"))  # the view primitives (basic indexing: fastpath.getitem)

Array = np.ndarray[Any, Any]
AnyTensor = Tensor[*tuple[Any, ...]]


def result(ops: Any, name: str, inputs: tuple[Any, ...], params: dict[str, Any], out: Array) -> AnyTensor:
    """A new tensor holding ``out``, recorded as primitive ``name`` of ``inputs`` when needed."""
    made: AnyTensor = Tensor(ops, out)
    if _RECORDING_ACTIVE[0]:
        recording.note_derived(made, inputs)
    for x in inputs:
        if isinstance(x, Tensor) and x._requires_grad:
            if out.dtype.kind == "f" and tape.grad_enabled():  # integer and bool results carry no gradient
                tape.attach(made, name, inputs, params)
            break
    return made


def share_version(x: AnyTensor) -> list[int]:
    """The version box of ``x`` (created on first use), shared by every view of it."""
    box = x._version
    if box is None:
        box = x._version = [0]
    return box


def view(ops: Any, name: str, x: AnyTensor, params: dict[str, Any], out: Array) -> AnyTensor:
    """A view of ``x`` holding ``out`` (primitive ``name``): it shares ``x``'s version counter and
    names ``x``'s base, so in-place checks see through it.

    While ``tp.graph.trace`` records a function and ``x`` is state from outside it, the view is the
    recording's instead (``name`` recorded on ``x`` captured): a write through it is then a recorded
    write to ``x`` (see :mod:`tensorplay.interpreters.graph.views`), not a trace-time write."""
    if _RECORDING_ACTIVE[0] and name in _RECORDABLE and params:
        frame = recording.outside_state(x)
        if frame is not None:
            return getattr(frame.recorder, name)(x, **params)  # type: ignore[no-any-return]
    made: AnyTensor = Tensor(ops, out)
    if _RECORDING_ACTIVE[0]:
        recording.note_derived(made, (x,))
    box = x._version  # ``share_version`` inline: views are made on every slice
    if box is None:
        box = x._version = [0]
    made._version = box
    base = x._base
    made._base = x if base is None else base
    if x._requires_grad and out.dtype.kind == "f" and tape.grad_enabled():
        tape.attach(made, name, (x,), params)  # its saved output watches the shared counter
    return made


__all__ = ["result", "share_version", "view"]
