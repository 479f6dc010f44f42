"""In-place writes between a transform's forward and its returned function (``vjp_fn``, ``jvp_fn``).

The uncached :func:`~tensorplay.func.vjp` and :func:`~tensorplay.func.linearize` keep references to the
primals and outputs of their forward; an in-place update of one of them afterwards (``x.add_(1)``,
an optimizer step) would make the returned function compute with the new values, silently. As the tape
does for ``backward()``, the version counters are read when the forward runs and checked when the
function is called; a change raises :class:`~tensorplay.errors.AutogradError`. (The cached path copies
what it keeps instead, so it uses the forward's values.) Inside a recording (``tp.compile``, a transform's
trace) an in-place write binds the tensor to a new recorded value instead of bumping its counter; the
forward's recorded value still exists, so the function uses it there: the result the cached eager call
gives, under every interpreter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay.errors import AutogradError
from tensorplay.interpreters.eager.tape import version_of
from tensorplay.tensor import Tensor

Watched = list[tuple[str, Any, int, Any]]


def watch(primals: Sequence[Any], outputs: Sequence[Any]) -> Watched:
    """The version of each tensor among ``primals`` and ``outputs`` (flat leaves) now, with its name."""
    watched: Watched = []
    for kind, leaves in (("primal", primals), ("output", outputs)):
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tensor):
                watched.append((f"{kind} {i}", leaf, version_of(leaf), leaf._data))
    return watched


def check_unchanged(watched: Watched, where: str) -> Callable[[], None]:
    """Raise when a watched eager tensor was modified in place since :func:`watch` read it. A recorded
    tensor written in place since (bound to a new recorded value) is bound back to its forward value until
    the returned function is called (after the transform's function ran): recorded values never change, so
    the result uses the forward's values, as the cached path does eagerly."""
    swapped: list[tuple[Any, Any]] = []
    for name, leaf, version, payload in watched:
        now = version_of(leaf)
        if now == version and leaf._data is payload:
            continue
        if now == version and not isinstance(payload, np.ndarray) and not isinstance(leaf._data, np.ndarray):
            swapped.append((leaf, leaf._data))
            leaf._data = payload
            continue
        for other, current in swapped:
            other._data = current
        raise AutogradError(
            f"{where}: {name} (shape {list(leaf.shape)}) was modified in place after the forward pass "
            f"(version {version} then, {now} now), and the result would use its new values; "
            "call the transform again after the update, or update a .clone()")

    def restore() -> None:
        for other, current in swapped:
            other._data = current
    return restore
