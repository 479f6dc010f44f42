"""Transform traces merge repeated calls: a primitive applied again to the same values with the same params is
recorded once (the sweeps that walk the trace node by node then see each distinct computation once); random
draws and views are never merged. Results are checked against PyTorch."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import tensorplay as tp
from tensorplay.func import grad, vmap
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
