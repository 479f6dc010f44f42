"""Transform traces merge repeated calls: a primitive applied again to the same values with the same params is
recorded once (the sweeps that walk the trace node by node then see each distinct computation once); random
draws and views are never merged. Results are checked against PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.func import grad, vmap
from tensorplay.func.cache import set_caching
from tensorplay.func.tracing import trace_for_transform
from tensorplay.interpreters.graph.recorder import Recorder, foreign_aval
from tensorplay.pytree import tree_flatten


def _targets(recorder: Recorder) -> list[str]:
    return [n.target for n in recorder.graph.nodes]


def test_a_merging_recorder_records_a_repeated_call_once() -> None:
    x0 = tp.tensor([0.5, -1.0, 2.0])
    for execute in (False, True):
        rec = Recorder(execute=execute, merge=True)
        x = rec.input("x", foreign_aval(x0), "user_input", x0.numpy() if execute else None)
        a, b = x.sin(), x.sin()
        c, d = x * 2.0, x * 2.0
        e = x * 2  # an int literal is another operand than the float 2.0
        assert a._data is b._data and c._data is d._data and e._data is not c._data
        assert _targets(rec).count("sin") == 1 and _targets(rec).count("mul") == 2
        r1, r2 = x.reshape(3, 1), x.reshape(3, 1)  # views are recorded each time
        assert r1._data is not r2._data
        if execute:
            np.testing.assert_allclose(a._data.value, np.sin(x0.numpy()))
        rec.close()
    plain = Recorder()
    x = plain.input("x", foreign_aval(x0), "user_input")
    x.sin()
    x.sin()
    assert _targets(plain).count("sin") == 2  # the default recorder records every call


def test_a_transform_trace_has_each_distinct_computation_once_and_matches_torch() -> None:
    def f(x: Any) -> Any:
        return (x.sin() * x.sin()).sum() + (x.sin() * 3.0).sum()

    x = tp.tensor([0.25, -0.5, 1.5])
    leaves, spec = tree_flatten((x,))
    traced = trace_for_transform(f, leaves, spec, [0], "grad")
    assert [n.target for n in traced.graph.nodes].count("sin") == 1
    xt = torch.tensor(x.numpy())
    expected = torch.func.grad(lambda v: (v.sin() * v.sin()).sum() + (v.sin() * 3.0).sum())(xt)
    np.testing.assert_allclose(grad(f)(x).numpy(), expected.numpy(), rtol=1e-6)
    xs = tp.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    per_row = torch.func.vmap(torch.func.grad(lambda v: (v.sin() * v.sin()).sum() + (v.sin() * 3.0).sum()))
    np.testing.assert_allclose(vmap(grad(f))(xs).numpy(), per_row(torch.tensor(xs.numpy())).numpy(), rtol=1e-6)
    # random draws are never merged: two draws are two draws
    tp.manual_seed(0)
    out = vmap(lambda x: tp.rand(8) - tp.rand(8) + x, randomness="different")(tp.zeros(3, 8))
    assert np.all(out.numpy() != 0.0)
    g = grad(lambda x: (x * tp.randn(16) - x * tp.randn(16)).sum())(tp.ones(16))
    assert np.all(g.numpy() != 0.0)


def test_vmap_batches_only_what_its_outputs_need(monkeypatch: Any) -> None:
    from tensorplay.interpreters.eager.interpreter import EagerInterpreter
    calls: list[str] = []
    original = EagerInterpreter.exp

    def counting(self: Any, *args: Any, **kw: Any) -> Any:
        calls.append("exp")
        return original(self, *args, **kw)

    monkeypatch.setattr(EagerInterpreter, "exp", counting)
    xs = tp.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))

    def f(x: Any) -> Any:
        unused = x.exp() * 2.0  # nothing reads it
        del unused
        return (x * x).sin().sum()

    previous = set_caching(False)
    try:
        got = vmap(grad(f))(xs)
    finally:
        set_caching(previous)
    assert calls == []  # the dead value is neither batched nor computed
    expected = torch.func.vmap(torch.func.grad(lambda v: (v * v).sin().sum()))(torch.tensor(xs.numpy()))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-6)
    # a check of index values is kept where the checked value is dead: a bad target still raises
    logits = tp.tensor(np.zeros((2, 4), dtype=np.float32))
    with pytest.raises(IndexError, match="target"):
        vmap(lambda z, t: (F.cross_entropy(z[None], t[None]), z.sin())[1])(logits, tp.tensor(np.array([1, 7])))


def test_uncached_transforms_leave_no_trace_for_the_cycle_collector() -> None:
    import gc

    from tensorplay.func import hessian, jacfwd, jacrev, jvp
    from tensorplay.interpreters.graph.ir import Node, Var

    def f(x: Any) -> Any:
        return (x.tanh() * x).sum()

    x = tp.tensor([0.5, -1.0, 2.0])
    xs = tp.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    calls = [lambda: grad(f)(x), lambda: vmap(grad(f))(xs), lambda: jvp(f, (x,), (x,)), lambda: jacrev(f)(x),
             lambda: jacfwd(f)(x), lambda: hessian(f)(x)]
    previous = set_caching(False)
    gc.collect()
    gc.freeze()  # once: the collections below look only at what the calls make, not the whole suite's heap
    try:
        for call in calls:
            call()  # warm up
            gc.collect()
            gc.disable()
            try:
                result = call()
                gc.set_debug(gc.DEBUG_SAVEALL)
                gc.collect()
                left = [o for o in gc.garbage if isinstance(o, (Node, Var))]
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
            assert not left, f"{len(left)} graph objects left to the cycle collector"
            assert result is not None
    finally:
        gc.unfreeze()
        set_caching(previous)
    np.testing.assert_allclose(hessian(f)(x).numpy(), torch.func.hessian(
        lambda v: (v.tanh() * v).sum())(torch.tensor(x.numpy())).numpy(), rtol=1e-5, atol=1e-6)


def test_emitted_work_merges_only_in_traces_that_will_be_compiled() -> None:
    """A sweep's emissions (recorded at the location of the node it interprets) merge only when the trace becomes
    a cached graph (``merge_emitted``, set while a capture runs): there every node left costs at every call; an
    uncached trace runs once and would only pay the look-ups."""
    from tensorplay.interpreters.graph.ir import Location
    from tensorplay.spec.aval import Aval

    for emitted, merges in ((False, False), (True, True)):
        rec = Recorder(merge=True, merge_emitted=emitted)
        x = rec.input("x", Aval((3,), "float32"))
        assert x.sin()._data is x.sin()._data  # the traced function's own calls always merge
        rec.location_override = Location("rule.py", 1, "rule")
        assert (rec.cos(x)._data is rec.cos(x)._data) is merges
        rec.close()
    # the Hessian a cached transform computes, from a graph traced under the capture, matches PyTorch
    from tensorplay.func import hessian
    a = np.linspace(-1, 1, 9, dtype=np.float32).reshape(3, 3)
    z = np.array([0.3, -0.2, 0.9], dtype=np.float32)

    def f(v: Any) -> Any:
        return ((tp.tensor(a) @ v).tanh() * v).sum() + (v * v).sum() * 0.5

    def tf(v: torch.Tensor) -> torch.Tensor:
        return ((torch.tensor(a) @ v).tanh() * v).sum() + (v * v).sum() * 0.5

    h = hessian(f)
    for _ in range(3):  # uncached, then traced into the cache, then cached
        np.testing.assert_allclose(h(tp.tensor(z)).numpy(), torch.func.hessian(tf)(torch.tensor(z)).numpy(),
                                   rtol=1e-5, atol=1e-6)
