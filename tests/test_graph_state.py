"""State seen by a GraphModule: writes to eager tensors from outside the traced function are part of
the graph (every call repeats them, as eager calls would), temporaries built while tracing stay
constants, and ``state=`` overrides and module attributes are checked on every call."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import DTypeError, GraphCaptureError, ShapeError
from tensorplay.graph import trace

# ---- in-place writes to eager tensors while tracing ---------------------------------------------


def _same_as_eager(make: Any, calls: int = 3, execute: bool = False) -> None:
    """``make()`` returns ``(fn, state, x)``; tracing ``fn`` and calling the graph ``calls`` times gives
    the same outputs and leaves ``state`` as calling ``fn`` eagerly does, on fresh copies."""
    fn, state, x = make()
    expected = [fn(x).numpy().copy() for _ in range(calls)]
    expected_state = state.numpy().copy()
    fn, state, x = make()
    gm = trace(fn, x, execute=execute)
    np.testing.assert_array_equal(state.numpy(), make()[1].numpy())  # tracing itself changes nothing
    got = [gm(x).numpy().copy() for _ in range(calls)]
    np.testing.assert_array_equal(np.array(got), np.array(expected))
    np.testing.assert_array_equal(state.numpy(), expected_state)


def _counter() -> tuple[Any, Any, Any]:
    count = tp.zeros(())

    def f(x: Any) -> Any:
        count.add_(1.0)
        return x * count

    return f, count, tp.ones(2)


def _setitem_global() -> tuple[Any, Any, Any]:
    history = tp.zeros(3)

    def f(x: Any) -> Any:
        history[1:] = history[:2] + x.sum()
        return x[:1] * 0.0 + history  # a read through a recorded value (an eager-only op would run at trace time)

    return f, history, tp.tensor([1.0, 2.0])


def _copy_and_fill() -> tuple[Any, Any, Any]:
    last = tp.zeros(2)

    def f(x: Any) -> Any:
        out = x + last
        last.copy_(x * 2.0)
        return out

    return f, last, tp.tensor([1.0, 3.0])


@pytest.mark.parametrize("make", [_counter, _setitem_global, _copy_and_fill])
@pytest.mark.parametrize("execute", [False, True])
def test_writes_to_eager_globals_are_repeated_by_every_call(make: Any, execute: bool) -> None:
    _same_as_eager(make, execute=execute)


def test_temporaries_built_while_tracing_stay_constants() -> None:
    def f(x: Any) -> Any:
        buf = tp.zeros(3)
        buf.add_(1.0)
        buf[0] = 5.0
        pos = tp.arange(3).float()  # made by an eager op on a temporary
        pos.mul_(2.0)
        return x * buf + pos

    x = tp.ones(3)
    gm = trace(f, x)
    for _ in range(3):
        np.testing.assert_array_equal(gm(x).numpy(), f(x).numpy())
    assert not gm.graph.mutations


def test_a_module_buffer_updated_in_forward_advances_on_every_call() -> None:
    class Counting(tp.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("calls", tp.zeros(()))

        def forward(self, x: Any) -> Any:
            self.calls.add_(1.0)
            return x + self.calls

    m = Counting()
    gm = trace(m, tp.zeros(2))
    assert m.calls.item() == 0.0
    np.testing.assert_array_equal(gm(tp.zeros(2)).numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(gm(tp.zeros(2)).numpy(), [2.0, 2.0])
    assert m.calls.item() == 2.0


def test_writes_that_cannot_be_recorded_are_refused() -> None:
    steps = tp.zeros((), dtype=tp.int64)
    with pytest.raises(DTypeError, match="can't be cast"):
        trace(lambda x: (steps.add_(0.5), x)[1], tp.ones(1))  # as eagerly: float into int in place
    w = tp.ones(2, requires_grad=True)
    opt = tp.optim.SGD([w], lr=0.1)

    def train_step(x: Any) -> Any:
        loss = (w * x).sum()
        opt.step()
        return loss

    with pytest.raises(GraphCaptureError, match=r"SGD.step\(\) inside a traced function"):
        trace(train_step, tp.ones(2))
    with pytest.raises(GraphCaptureError, match="nn.init"):
        trace(lambda x: (tp.nn.init.zeros_(w), x)[1], tp.ones(2))
    buf = tp.zeros(2)
    with pytest.raises(GraphCaptureError, match="created inside the traced function"):
        trace(lambda x: (lambda t: (t.add_(x), t)[1])(tp.zeros(2)), tp.ones(2))
    assert buf.tolist() == [0.0, 0.0] and w.tolist() == [1.0, 1.0]


# ---- state overrides and reassigned module attributes ------------------------------------------

def _linear() -> tuple[Any, Any, Any]:
    tp.manual_seed(0)
    lin = tp.nn.Linear(3, 2)
    x = tp.randn(4, 3)
    return lin, trace(lin, x), x


@pytest.mark.parametrize("value, error, message", [
    (tp.ones(3), ShapeError, r"state\['weight'\]: expected shape \[2, 3\], got \[3\]"),
    (tp.ones(1, 3), ShapeError, r"expected shape \[2, 3\], got \[1, 3\]"),
    (tp.ones(2, 3, dtype=tp.float64), DTypeError, "expected dtype float32, got float64"),
    (tp.ones(2, 3, dtype=tp.int64), DTypeError, "expected dtype float32, got int64"),
    ([[1.0] * 3] * 2, TypeError, "expected a tensor or a numpy array, got list"),
])
def test_state_overrides_must_have_the_traced_shape_and_dtype(value: Any, error: type, message: str) -> None:
    _, gm, x = _linear()
    with pytest.raises(error, match=message):
        gm(x, state={"weight": value})


def test_state_names_are_checked() -> None:
    lin, gm, x = _linear()
    with pytest.raises(KeyError, match="no input named 'wieght'; the graph reads 'bias', 'weight'"):
        gm(x, state={"wieght": tp.ones(2, 3)})
    with pytest.raises(KeyError, match="no input named 'input'"):
        gm(x, state={"input": x})
    w = tp.randn(2, 3)
    np.testing.assert_allclose(gm(x, state={"weight": w}).detach().numpy(),
                               tp.func.functional_call(lin, {"weight": w}, (x,)).detach().numpy())


def test_reassigned_parameters_and_buffers_are_seen_or_refused() -> None:
    lin, gm, x = _linear()
    lin.weight = tp.nn.Parameter(tp.randn(2, 3))
    np.testing.assert_array_equal(gm(x).detach().numpy(), lin(x).detach().numpy())
    lin.weight = tp.nn.Parameter(tp.randn(3, 3))
    with pytest.raises(ShapeError, match=r"parameter 'weight' \(reassigned after tracing\): expected shape"):
        gm(x)
    lin.weight = tp.nn.Parameter(tp.randn(2, 3).double())
    with pytest.raises(DTypeError, match="reassigned after tracing"):
        gm(x)
    lin.bias = None
    lin.weight = tp.nn.Parameter(tp.randn(2, 3))
    with pytest.raises(KeyError, match="'bias' was removed after tracing"):
        gm(x)
    bn = tp.nn.BatchNorm1d(3).eval()
    gm_bn = trace(bn, x)
    bn.running_mean = tp.full((3,), 2.0)
    np.testing.assert_allclose(gm_bn(x).detach().numpy(), bn(x).detach().numpy(), atol=1e-6)
