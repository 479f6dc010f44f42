"""The graph recordings (``tp.graph.trace``) active in this thread, for in-place writes to eager tensors.

A traced function runs once, at trace time, and the graph it leaves runs on every call. An
in-place write to an eager tensor there (a global counter, a closure's buffer) would happen once
and not be part of the graph, so later calls would silently skip it. ``trace`` enters
:func:`recording` around the function; while it is active, a write to an eager tensor is

* done eagerly when the tensor was created while the recording runs (``buf = tp.zeros(3);
  buf[0] = 1``, a temporary built from constants): it is part of building a constant, the same
  on every call;
* recorded otherwise (state from outside the function): the graph computes the new value and
  writes it back into the tensor on every call (``graph.mutations``). That holds for a write through
  a view too: a view of such a tensor (basic indexing, ``view``/``reshape``, ``T``/``transpose``,
  ``unsqueeze``, ``detach``, ...) is the recording's while it is active, so ``c[0] = c[0] + 1.0`` and
  ``c[0:1].add_(1.0)`` are recorded writes to ``c``
  (:mod:`tensorplay.interpreters.graph.views`);
* refused for writes that cannot be recorded (an optimizer step, an ``nn.init`` function on a
  tensor from outside), and for a write to a tensor from outside of a value computed eagerly from
  such tensors (``c[0] = c.sum()``: eager results computed from outside state are noted by
  :func:`note_derived`), which the graph would write as a trace-time constant at every call.

Tensors created while a recording is active are noted (weakly) by ``Tensor.__init__``; ``active``
counts the recordings open in any thread, so outside recordings that costs one list lookup.
Transforms (``grad``, ``vmap``, ...) run their function's Python once per call, so its writes to
eager tensors happen once per call, as eagerly: they are not redirected.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

active = [0]  # recordings open in any thread (cheap test before the thread-local lookup)
_count_lock = threading.Lock()


class Frame:
    """One active recording: its recorder and the eager tensors created since it started."""

    __slots__ = ("recorder", "made", "derived")

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        # id -> weak reference (a WeakSet would compare tensors with ==, which is elementwise)
        self.made: dict[int, weakref.ref[Any]] = {}
        self.derived: dict[int, weakref.ref[Any]] = {}  # eager tensors computed from state from outside

    def created(self, tensor: Any) -> bool:
        """Whether ``tensor`` was created while this recording ran."""
        ref = self.made.get(id(tensor))
        return ref is not None and ref() is tensor


class _Stack(threading.local):
    def __init__(self) -> None:
        self.frames: list[Frame] = []
        self.creators: list[Any] = []  # every recording in progress (traces and transforms), innermost last


_stack = _Stack()


@contextmanager
def recording(recorder: Any) -> Iterator[Frame]:
    """Mark ``recorder`` as recording a traced function in this thread for the block (innermost last)."""
    frame = Frame(recorder)
    _stack.frames.append(frame)
    with _count_lock:
        active[0] += 1
    try:
        yield frame
    finally:
        _stack.frames.pop()
        with _count_lock:
            active[0] -= 1


def note_created(tensor: Any) -> None:
    """Called for every new tensor while some recording is active: remember the eager ones made in
    this thread's innermost recording."""
    frames = _stack.frames
    if frames and getattr(tensor._ops, "level", None) == 0:
        frames[-1].made[id(tensor)] = weakref.ref(tensor)


def note_derived(made: Any, inputs: tuple[Any, ...]) -> None:
    """Called for an eager result ``made`` of ``inputs`` while some recording is active: remember it when
    an input is eager state from outside this thread's innermost recording, or was itself computed from
    such state (its value is then a trace-time reading of that state)."""
    frames = _stack.frames
    if not frames:
        return
    frame = frames[-1]
    for x in inputs:
        ops = getattr(x, "_ops", None)
        if ops is None or getattr(ops, "level", None) != 0:
            continue
        ref = frame.derived.get(id(x))
        if not frame.created(x) or (ref is not None and ref() is x):
            frame.derived[id(made)] = weakref.ref(made)
            return


def derived_from_outside(tensor: Any) -> bool:
    """Whether ``tensor`` (eager) was computed, while this thread's innermost recording runs, from state
    from outside it (see :func:`note_derived`)."""
    frames = _stack.frames
    if not frames:
        return False
    ref = frames[-1].derived.get(id(tensor))
    return ref is not None and ref() is tensor


def outside_state(tensor: Any) -> Frame | None:
    """The innermost active recording when ``tensor`` (eager) is state from outside it -- a write to
    it must be recorded -- else ``None`` (no recording, or a tensor the recording itself created)."""
    if not active[0]:
        return None
    frames = _stack.frames
    if not frames or frames[-1].created(tensor):
        return None
    return frames[-1]


def created_by(tensor: Any, recorder: Any) -> bool:
    """Whether ``tensor`` (eager) was created while ``recorder`` records a traced function in this thread
    (its innermost recording): a temporary built from constants, whose value is the same on every call."""
    frames = _stack.frames
    return bool(frames) and frames[-1].recorder is recorder and frames[-1].created(tensor)


def refuse_outside_write(tensor: Any, what: str) -> None:
    """Raise for a write to ``tensor`` that cannot be recorded when it is state from outside an active
    recording (``what`` names the operation, e.g. ``"optimizer.step()"``)."""
    if outside_state(tensor) is None:
        return
    from tensorplay.errors import GraphCaptureError
    raise GraphCaptureError(
        f"{what} inside a traced function would update tensor(s) from outside it (shape "
        f"{list(tensor._data.shape)}) once, at trace time, and the graph would not repeat it on later "
        "calls; call it outside the traced function")


# ---- the interpreter that tensor factories use ------------------------------------------------------

@contextmanager
def creating_in(recorder: Any) -> Iterator[None]:
    """For the block, tensor factories with no tensor argument (``tp.randn(3)``, ``tp.rand(2, 2)``) run in
    ``recorder``: every function being recorded (``tp.graph.trace``, the transforms, ``ops.map``) enters
    this, so a random draw inside it becomes a random primitive fed by a key input of the recording (fresh
    numbers at every run of the graph, one draw per sample under ``vmap``) instead of an eager draw baked
    into the graph as a constant."""
    creators = _stack.creators
    creators.append(recorder)
    try:
        yield
    finally:
        creators.pop()


def creating_interpreter(default: Any) -> Any:
    """The innermost recording in progress in this thread (see :func:`creating_in`), else ``default``."""
    creators = _stack.creators
    return creators[-1] if creators else default


__all__ = ["Frame", "active", "created_by", "creating_in", "creating_interpreter", "derived_from_outside",
           "note_created", "note_derived", "outside_state", "recording", "refuse_outside_write"]
