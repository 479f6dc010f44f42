"""The layer operations of the ``Ops`` surface: the same functions under every interpreter, typed like the
functions of :mod:`tensorplay.prefix`."""

from __future__ import annotations

import inspect
import typing
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import prefix
from tensorplay.interpreter import LAYER_OPS
from tensorplay.ops import Ops


def _signature_without_first(fn: Any) -> list[tuple[str, Any, Any, Any]]:
    params = list(inspect.signature(fn).parameters.values())[1:]
    return [(p.name, p.kind, p.default, p.annotation) for p in params]


@pytest.mark.parametrize("name", LAYER_OPS)
def test_protocol_overloads_are_the_prefix_overloads(name: str) -> None:
    """``Ops.<name>`` is typed by exactly the overloads of ``prefix.<name>`` (without ``ops``)."""
    function = getattr(prefix, name)
    expected = [_signature_without_first(f) for f in typing.get_overloads(function)] or \
        [_signature_without_first(function)]
    method = getattr(Ops, name)
    got = [_signature_without_first(f) for f in typing.get_overloads(method)] or [_signature_without_first(method)]
    assert got == expected


def test_every_interpreter_has_the_layer_operations() -> None:
    from tensorplay.func.tracing import Dispatch
    from tensorplay.interpreters.graph.recorder import Recorder
    for cls in (type(tp.eager), Recorder, Dispatch):
        assert all(callable(getattr(cls, name, None)) for name in LAYER_OPS), cls


def _model(ops: Any, w: Any, b: Any, k: Any, g: Any, x: Any) -> Any:
    """A small model written against Ops with the layer operations only."""
    h = ops.conv(k, None, x, stride=1, padding=1)
    h = ops.max_pool(h.relu(), 2)
    h = ops.avg_pool(h, 1)
    h = ops.smooth_max_pool(h, 1, 1, 0, 5.0)
    h = ops.layer_norm(h.reshape(h.shape[0], -1), g)
    h = ops.dropout(h, 0.5, training=False)
    return ops.linear(w, b, h)


def test_layer_operations_run_the_same_under_every_interpreter() -> None:
    """One model through the Ops surface: eager, recorded (symbolic and execute), vmapped and differentiated."""
    from tensorplay.func import grad, vmap
    rng = np.random.default_rng(0)
    w, b = tp.tensor(rng.standard_normal((3, 8))), tp.tensor(rng.standard_normal(3))
    k, g = tp.tensor(rng.standard_normal((2, 1, 3, 3))), tp.tensor(rng.standard_normal(8))
    x = tp.tensor(rng.standard_normal((5, 1, 4, 4)))

    def f(x: Any) -> Any:
        return _model(tp.ops_of(x), w, b, k, g, x)

    expected = f(x).numpy()
    for execute in (False, True):
        np.testing.assert_allclose(tp.graph.trace(f, x, execute=execute)(x).numpy(), expected, rtol=1e-12)
    per_sample = vmap(lambda xi: f(xi[None])[0])(x)
    np.testing.assert_allclose(per_sample.numpy(), expected, rtol=1e-12)
    gx = grad(lambda v: f(v).sum())(x)
    xt = x.detach().requires_grad_()
    f(xt).sum().backward()
    assert xt.grad is not None
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_apply_runs_a_primitive_by_name() -> None:
    x = tp.tensor([1.0, -2.0])
    np.testing.assert_array_equal(tp.eager.apply("relu", (x,)).numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(tp.eager.apply("reduce_sum", (x,), {"axes": (0,)}).numpy(), -1.0)
    gm = tp.graph.trace(lambda v: tp.ops_of(v).apply("exp", (v,)), x)
    assert [n.target for n in gm.graph.nodes] == ["exp"]
    with pytest.raises(KeyError, match="did you mean relu"):
        tp.eager.apply("relux", (x,))
