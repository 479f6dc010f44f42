"""Per-op cost of common tensor operations on small tensors: tensorplay eager vs PyTorch eager.

Each operation is spelled once, against the shared PyTorch-style API (``lib`` is ``tensorplay`` or
``torch``, ``F`` its ``nn.functional``), and timed on float32 tensors of 8 elements (shape (2, 4))
and of 64x64, without autograd (plain tensors) and with autograd recording (operands that
require grad; only the forward is timed). At these sizes the time is the library's own per-op
bookkeeping (dispatch, shape checks, wrapping, recording), not arithmetic.

Run with ``python -m benchmarks dispatch`` (each library alone in its own process, see
:mod:`benchmarks.isolated`); the geometric mean of the ratios is printed under the table.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.cases import Case, normal, rng

GROUPING = "module"
TIMING = {"repeat": 5, "min_time": 0.01, "warmup_time": 0.05}

SHAPES = {"8": (2, 4), "64x64": (64, 64)}

# name -> op(lib, F, v) where v holds a, b (like the shape), w (square, last dim), idx, labels
OPS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "a + b": lambda lib, F, v: v.a + v.b,
    "a - b": lambda lib, F, v: v.a - v.b,
    "a * b": lambda lib, F, v: v.a * v.b,
    "a / b": lambda lib, F, v: v.a / v.b,
    "a * 2.0 + 1.0": lambda lib, F, v: v.a * 2.0 + 1.0,
    "a ** 2": lambda lib, F, v: v.a ** 2,
    "a.relu()": lambda lib, F, v: v.a.relu(),
    "a.exp()": lambda lib, F, v: v.a.exp(),
    "a.tanh()": lambda lib, F, v: v.a.tanh(),
    "a.sigmoid()": lambda lib, F, v: v.a.sigmoid(),
    "a.abs()": lambda lib, F, v: v.a.abs(),
    "a.sum()": lambda lib, F, v: v.a.sum(),
    "a.sum(-1)": lambda lib, F, v: v.a.sum(-1),
    "a.mean(0)": lambda lib, F, v: v.a.mean(0),
    "a.max(-1)": lambda lib, F, v: v.a.max(-1),
    "a.argmax(-1)": lambda lib, F, v: v.a.argmax(-1),
    "a.softmax(-1)": lambda lib, F, v: v.a.softmax(-1),
    "a @ w": lambda lib, F, v: v.a @ v.w,
    "a[1:3]": lambda lib, F, v: v.a[1:3],
    "a[:, None]": lambda lib, F, v: v.a[:, None],
    "a[idx] (tensor index)": lambda lib, F, v: v.a[v.idx],
    "a.T": lambda lib, F, v: v.a.T,
    "a.reshape(-1)": lambda lib, F, v: v.a.reshape(-1),
    "a.unsqueeze(0)": lambda lib, F, v: v.a.unsqueeze(0),
    "a > b": lambda lib, F, v: v.a > v.b,
    "where(a > 0, a, b)": lambda lib, F, v: lib.where(v.a > 0, v.a, v.b),
    "cat([a, b])": lambda lib, F, v: lib.cat([v.a, v.b]),
    "a.clone()": lambda lib, F, v: v.a.clone(),
    "layer_norm(a)": lambda lib, F, v: F.layer_norm(v.a, v.a.shape[-1:]),
    "gelu(a)": lambda lib, F, v: F.gelu(v.a),
    "cross_entropy(a, labels)": lambda lib, F, v: F.cross_entropy(v.a, v.labels),
}


class _Values:
    """The operands of one row, as tensors of one library."""

    def __init__(self, lib: Any, shape: tuple[int, ...], requires_grad: bool) -> None:
        def t(a: np.ndarray[Any, Any], grad: bool = False) -> Any:
            return lib.tensor(a, requires_grad=grad)

        self.a = t(normal(1, *shape), requires_grad)
        self.b = t(normal(2, *shape) + 3.0, requires_grad)  # away from 0 (division)
        self.w = t(normal(3, shape[-1], shape[-1]), requires_grad)
        self.idx = t(np.array([1, 0, 1], np.int64))
        self.labels = t(rng(4).integers(0, shape[-1], shape[0]))


def _builder(library: str, op: Callable[[Any, Any, Any], Any], shape: tuple[int, ...],
             recording: bool) -> Callable[[], Callable[[], Any]]:
    def build() -> Callable[[], Any]:
        import importlib

        lib = importlib.import_module(library)
        F = importlib.import_module(f"{library}.nn.functional")
        values = _Values(lib, shape, recording)
        return lambda: op(lib, F, values)
    return build


def cases() -> list[Case]:
    """Every op at both sizes, without and with autograd recording."""
    out = []
    for recording in (False, True):
        for size, shape in SHAPES.items():
            for name, op in OPS.items():
                label = f"{name} [{size}{', autograd' if recording else ''}]"
                out.append(Case(label, {lib: _builder(lib, op, shape, recording) for lib in ("tensorplay", "torch")}))
    return out
