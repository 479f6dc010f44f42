"""The small hooks export needs in the core: value ranges of symbolic sizes, a decider for comparisons the
``>= 0`` assumption cannot settle, module-call observers, and batch norm training under a dynamic batch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.graph import trace
from tensorplay.nn import module as module_mod
from tensorplay.symbolic import SymDim, deciding, sym


def test_bounds_of_expressions_under_ranges() -> None:
    b, s = sym("B"), sym("S")
    assert (2 * b + 1).bounds({"B": (2, 10)}) == (5, 21)
    assert (b * s - 3).bounds({"B": (1, None), "S": (2, 4)}) == (-1, math.inf)
    expr = (b - 1) // 2
    assert isinstance(expr, SymDim) and expr.bounds({"B": (3, 9)}) == (1, 4)
    neg = -b
    assert isinstance(neg, SymDim) and neg.bounds({}) == (-math.inf, 0)
    for value in range(3, 10):  # the bounds hold at every point of the range
        low, high = expr.bounds({"B": (3, 9)})
        assert low <= expr.evaluate({"B": value}) <= high


def test_a_decider_answers_what_the_sign_rules_cannot() -> None:
    n = sym("n")
    with pytest.raises(tp.GraphCaptureError, match="cannot decide n > 8"):
        bool(n > 8)
    asked: list[tuple[str, str]] = []

    def decider(diff: SymDim, op: str) -> bool | None:
        asked.append((str(diff), op))
        return True if op == ">" else None

    with deciding(decider):
        assert n > 8
        with pytest.raises(tp.GraphCaptureError):
            bool(n < 8)
    assert asked == [("n - 8", ">"), ("n - 8", "<")]
    with pytest.raises(tp.GraphCaptureError):  # removed again after the block
        bool(n > 8)
    assert n + 1 > 0  # decided by the sign rules: the decider is not asked


def test_module_call_observers_see_every_call() -> None:
    model = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    seen: list[str] = []

    def observe(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        seen.append(type(module).__name__)
        return module.forward(*args, **kwargs)

    module_mod.call_observers.append(observe)
    try:
        model(tp.randn(4, 2))
    finally:
        module_mod.call_observers.remove(observe)
    assert seen == ["Sequential", "Linear", "ReLU"]
    model(tp.randn(4, 2))
    assert len(seen) == 3


def test_batch_norm_training_traces_with_a_dynamic_batch_and_matches_eager() -> None:
    tp.manual_seed(0)
    recorded, reference = nn.BatchNorm1d(3), nn.BatchNorm1d(3)
    gm = trace(recorded, tp.randn(4, 3), dynamic={0: {0: "B"}})
    for batch in (2, 5, 9):
        x = tp.randn(batch, 3)
        out, expected = gm(x), reference(x)
        assert np.array_equal(out.detach().numpy(), expected.detach().numpy())
        for (name, a), (_, b) in zip(recorded.named_buffers(), reference.named_buffers()):
            assert np.array_equal(a.numpy(), b.numpy()), name
