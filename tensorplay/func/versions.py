"""In-place writes between a transform's forward and its returned function (``vjp_fn``, ``jvp_fn``).

The uncached :func:`~tensorplay.func.vjp` and :func:`~tensorplay.func.linearize` keep references to the
primals and outputs of their forward; an in-place update of one of them afterwards (``x.add_(1)``,
an optimizer step) would make the returned function compute with the new values, silently. As the tape
does for ``backward()``, the version counters are read when the forward runs and checked when the
function is called; a change raises :class:`~tensorplay.errors.AutogradError`. (The cached path copies
what it keeps instead, so it uses the forward's values.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorplay.errors import AutogradError
from tensorplay.interpreters.eager.tape import version_of
from tensorplay.tensor import Tensor

Watched = list[tuple[str, Any, int]]


def watch(primals: Sequence[Any], outputs: Sequence[Any]) -> Watched:
    """The version of each tensor among ``primals`` and ``outputs`` (flat leaves) now, with its name."""
    watched: Watched = []
    for kind, leaves in (("primal", primals), ("output", outputs)):
        for i, leaf in enumerate(leaves):
            if isinstance(leaf, Tensor):
                watched.append((f"{kind} {i}", leaf, version_of(leaf)))
    return watched


def check_unchanged(watched: Watched, where: str) -> None:
    """Raise when a watched tensor was modified in place since :func:`watch` read it."""
    for name, leaf, version in watched:
        now = version_of(leaf)
        if now != version:
            raise AutogradError(
                f"{where}: {name} (shape {list(leaf.shape)}) was modified in place after the forward pass "
                f"(version {version} then, {now} now), and the result would use its new values; "
                "call the transform again after the update, or update a .clone()")
