"""The transforms' trace cache (tensorplay.func.cache): cached calls are never stale.

Each test calls a transformed function through the cache, changes Python state the function reads, and
compares the cached call with the same transform run uncached (``set_caching(False)``: traced at every
call, the behaviour before the cache) or with PyTorch; ``compile_count`` shows the cache was used (one
trace for calls that agree, a retrace after a change).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.func import grad, hessian, jacfwd, jacrev, jvp, vmap
from tensorplay.func.cache import clear_cache, set_caching


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    previous = set_caching(True)
    clear_cache()
    yield
    set_caching(previous)
    clear_cache()


def uncached(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` with the cache off (the transform traces again)."""
    previous = set_caching(False)
    try:
        return fn(*args)
    finally:
        set_caching(previous)


def check(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn`` twice (the first call of a new state may trace, the second runs the cached graph) and
    compare both results with the uncached transform."""
    expected = uncached(fn, *args)
    for _ in range(2):
        close(fn(*args), expected)
    return expected


def close(a: Any, b: Any) -> None:
    la = a if isinstance(a, (tuple, list)) else [a]
    lb = b if isinstance(b, (tuple, list)) else [b]
    assert len(la) == len(lb)
    for u, v in zip(la, lb):
        np.testing.assert_allclose(u.detach().numpy(), v.detach().numpy(), rtol=1e-5, atol=1e-6)


W = tp.tensor([1.0, 2.0, 3.0])


def uses_global(x: Any) -> Any:
    return (x * W).sin().sum()


def test_rebinding_a_global_tensor_is_read_at_every_call() -> None:
    global W
    g = grad(uses_global)
    x = tp.tensor([0.5, -1.0, 2.0])
    check(g, x)
    saved = W
    try:
        W = tp.tensor([-3.0, 0.25, 1.0])
        check(g, x)
        wt = torch.tensor([-3.0, 0.25, 1.0])
        xt = torch.tensor([0.5, -1.0, 2.0])
        np.testing.assert_allclose(g(x).numpy(), (torch.cos(xt * wt) * wt).numpy(), rtol=1e-6)
    finally:
        W = saved
    assert g.compile_count == 1  # the tensor is an input of the cached graph, not a constant


def test_in_place_update_of_a_closed_over_tensor() -> None:
    w = tp.tensor([1.0, 2.0])
    g = vmap(grad(lambda x: (x * w * x).sum()))
    xs = tp.tensor([[1.0, 1.0], [2.0, -1.0]])
    check(g, xs)
    w.mul_(3.0)
    check(g, xs)
    np.testing.assert_allclose(g(xs).numpy(), 2 * xs.numpy() * np.array([3.0, 6.0]), rtol=1e-6)
    assert g.compile_count == 1


def test_python_scalar_and_flag_read_by_the_function_retrace() -> None:
    cfg = {"scale": 2.0, "square": True}
    s = [0.5]

    def f(x: Any) -> Any:
        y = x * cfg["scale"] * s[0]
        return (y * y).sum() if cfg["square"] else y.sum()

    g = grad(f)
    x = tp.tensor([1.0, -2.0])
    check(g, x)
    cfg["scale"] = 3.0
    check(g, x)
    cfg["square"] = False
    check(g, x)
    s[0] = 4.0
    check(g, x)
    np.testing.assert_allclose(g(x).numpy(), [12.0, 12.0])
    assert g.compile_count == 4
    kinds = {r.kind for event in g.recompile_reasons for r in event.reasons}
    assert kinds <= {"value", "structure", "state"} and kinds, kinds


def test_branch_outcome_on_data_retraces() -> None:
    def f(x: Any) -> Any:
        if x.sum() > 0:
            return (x * x).sum()
        return (x * 3.0).sum()

    g = grad(f)
    x = tp.tensor([1.0, 2.0])
    check(g, x)
    check(g, -x)
    np.testing.assert_allclose(g(-x).numpy(), [3.0, 3.0])
    check(g, x)
    assert g.compile_count == 2  # one graph per branch, both cached
    reasons = [r for event in g.recompile_reasons for r in event.reasons]
    assert reasons and reasons[0].kind == "branch"


def test_module_parameter_replaced_and_updated_by_an_optimizer() -> None:
    tp.manual_seed(0)
    model = tp.nn.Linear(3, 2)

    def loss(x: Any) -> Any:
        return model(x).tanh().sum()

    g = jacrev(loss)
    x = tp.tensor([0.3, -0.2, 0.9])
    check(g, x)
    opt = tp.optim.SGD(model.parameters(), lr=0.5)
    out = model(tp.ones(4, 3)).sum()
    out.backward()
    opt.step()
    check(g, x)
    model.weight = tp.nn.Parameter(tp.tensor(np.full((2, 3), 0.1, np.float32)))
    check(g, x)
    wt = torch.full((2, 3), 0.1)
    bt = torch.tensor(model.bias.detach().numpy())
    expected = torch.func.jacrev(lambda v: torch.tanh(wt @ v + bt).sum())(torch.tensor([0.3, -0.2, 0.9]))
    np.testing.assert_allclose(g(x).detach().numpy(), expected.numpy(), rtol=1e-5)
    # parameter values are inputs of the cached graph: only whether a .grad is set specializes (as tp.compile)
    assert g.compile_count >= 2
    assert {r.kind for event in g.recompile_reasons for r in event.reasons} <= {"grad", "layout"}


def test_train_and_eval_retrace() -> None:
    tp.manual_seed(0)
    model = tp.nn.Sequential(tp.nn.Linear(4, 4), tp.nn.Dropout(0.5))
    f = vmap(lambda x: model(x).sum(), randomness="different")
    xs = tp.ones(8, 4)
    model.eval()
    check(f, xs)
    model.train()
    a, b = f(xs), f(xs)
    assert not np.allclose(a.detach().numpy(), b.detach().numpy())  # dropout draws at every call
    model.eval()
    check(f, xs)
    assert f.compile_count == 2
    messages = [r.message for event in f.recompile_reasons for r in event.reasons]
    assert any("training" in m for m in messages), messages


def test_random_draws_are_fresh_at_every_cached_call() -> None:
    g = grad(lambda x: (x * tp.randn(16)).sum())
    x = tp.ones(16)
    g(x)  # the first call runs uncached, the second traces into the cache
    first, second = g(x), g(x)
    assert g.compile_count == 1
    assert not np.allclose(first.numpy(), second.numpy())
    tp.manual_seed(7)
    seeded = g(x)
    tp.manual_seed(7)
    np.testing.assert_array_equal(g(x).numpy(), seeded.numpy())


def test_shapes_dtypes_and_grad_mode_key_the_cache() -> None:
    g = grad(lambda x: (x ** 3).sum())
    for x in (tp.tensor([1.0, 2.0]), tp.tensor([1.0, 2.0, 3.0]), tp.tensor(np.array([1.0, 2.0]))):
        check(g, x)
    with tp.no_grad():
        check(g, tp.tensor([1.0, 2.0]))
    assert g.compile_count == 4


def test_nested_transforms_and_tp_compile_of_them() -> None:
    def f(x: Any) -> Any:
        return (x.sin() * x).sum()

    xs = tp.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    for t in (vmap(grad(f)), vmap(hessian(f)), vmap(jacfwd(grad(f))), grad(lambda x: grad(f)(x).sum())):
        check(t, xs if t.transform == "vmap" else xs[0])
        assert t.compile_count == 1
    psg = vmap(grad(f))
    compiled = tp.compile(psg)
    close(compiled(xs), uncached(psg, xs))
    xt = torch.tensor(xs.numpy())
    expected = torch.func.vmap(torch.func.grad(lambda x: (x.sin() * x).sum()))(xt)
    np.testing.assert_allclose(compiled(xs).numpy(), expected.numpy(), rtol=1e-5)
    assert compiled.compile_count == 1


def test_jvp_is_cached_by_function_identity() -> None:
    w = tp.tensor([[1.0, 2.0], [0.5, -1.0]])

    def f(x: Any) -> Any:
        return (w @ x).tanh()

    x, t = tp.tensor([0.1, 0.2]), tp.tensor([1.0, 0.0])
    for _ in range(2):
        close(list(jvp(f, (x,), (t,))), list(uncached(jvp, f, (x,), (t,))))
    w.add_(1.0)
    for _ in range(2):
        close(list(jvp(f, (x,), (t,))), list(uncached(jvp, f, (x,), (t,))))
    from tensorplay.func.cache import transformed
    assert transformed("jvp", f, {"strict": False, "has_aux": False}, f).compile_count == 1  # jvp's cache entry


def test_a_function_changing_the_state_it_reads_runs_uncached() -> None:
    seen: list[Any] = []
    g = grad(lambda x: (seen.append(1) or x * x).sum())
    x = tp.tensor([1.0, 2.0])
    close(g(x), uncached(g, x))
    n = len(seen)
    close(g(x), uncached(g, x))  # traced into the cache: refused, and the traced values are the result
    assert len(seen) == n + 2  # one run for the refused capture, one for the uncached reference: not two
    assert g.cache_disabled is not None and "changed the Python state" in g.cache_disabled
    g(x)
    assert len(seen) == n + 3  # its Python runs at every call


def test_past_the_recompile_limit_calls_run_uncached() -> None:
    from tensorplay.compiler import config
    state = {"k": 0.0}
    g = grad(lambda x: (x * state["k"]).sum())
    x = tp.tensor([1.0])
    for k in range(config.recompile_limit + 3):
        state["k"] = float(k)
        np.testing.assert_allclose(g(x).numpy(), [float(k)])
    assert g.compile_count == config.recompile_limit
    assert not g.recompile_reasons[-1].cached


def test_errors_are_the_uncached_transform_errors() -> None:
    g = grad(lambda x: x * 2)
    with pytest.raises(ValueError, match="scalar"):
        g(tp.tensor([1.0, 2.0]))


def test_cross_entropy_per_sample_grads_match_torch() -> None:
    gen = np.random.default_rng(0)
    w = gen.standard_normal((10, 32)).astype(np.float32) / 6
    xs = gen.standard_normal((16, 32)).astype(np.float32)
    ys = gen.integers(0, 10, 16)

    def loss(w: Any, x: Any, y: Any) -> Any:
        return F.cross_entropy(F.linear(x[None], w), y[None])

    psg = vmap(grad(loss), in_dims=(None, 0, 0))
    ours = [psg(tp.tensor(w), tp.tensor(xs), tp.tensor(ys)) for _ in range(2)]
    theirs = torch.func.vmap(torch.func.grad(
        lambda w, x, y: torch.nn.functional.cross_entropy(torch.nn.functional.linear(x[None], w), y[None])),
        in_dims=(None, 0, 0))(torch.tensor(w), torch.tensor(xs), torch.tensor(ys))
    for o in ours:
        np.testing.assert_allclose(o.numpy(), theirs.numpy(), rtol=1e-4, atol=1e-6)
    assert psg.compile_count == 1


def test_chunked_vmap_is_not_cached() -> None:
    f = vmap(lambda v: (v * v).sum(), chunk_size=2)
    xs = tp.ones(6, 3)
    check(f, xs)
    assert f.compile_count == 0 and f.cache_disabled is not None and "memory" in f.cache_disabled


def test_backward_through_a_cached_gradient_matches_torch() -> None:
    g = grad(lambda x: (x ** 3).sin().sum())
    for _ in range(3):
        x = tp.tensor([0.5, 1.0, -0.7], requires_grad=True)
        g(x).sum().backward()
        xt = torch.tensor([0.5, 1.0, -0.7], requires_grad=True)
        torch.func.grad(lambda v: (v ** 3).sin().sum())(xt).sum().backward()
        assert x.grad is not None and xt.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5)
    assert g.compile_count == 1


def test_python_arguments_and_keywords_key_the_cache() -> None:
    g = grad(lambda x, s=1.0: (x * s).sin().sum())
    x = tp.tensor([0.25, 1.0])
    for s in (3.0, 3.0, 4.0, 4.0):
        np.testing.assert_allclose(g(x, s=s).numpy(), s * np.cos(s * x.numpy()), rtol=1e-6)
        np.testing.assert_allclose(g(x, s).numpy(), s * np.cos(s * x.numpy()), rtol=1e-6)
    assert g.compile_count == 4  # (keyword, positional) x (3.0, 4.0)


def test_a_function_transformed_anew_at_every_call_is_not_traced_into_the_cache() -> None:
    x = tp.tensor([1.0, 2.0])
    made = []
    for k in range(3):
        g = grad(lambda x, k=k: (x * x * (k + 1)).sum())
        made.append(g)
        np.testing.assert_allclose(g(x).numpy(), 2 * (k + 1) * x.numpy())
    assert [g.compile_count for g in made] == [0, 0, 0]  # each ran once, uncached: no capture paid


def test_a_cache_entry_keeps_code_not_the_traced_call_s_values() -> None:
    g = vmap(grad(lambda w, x: (x @ w).tanh().sum()), in_dims=(None, 0))
    w, xs = tp.ones(32, 16), tp.ones(8, 32)
    check(g, w, xs)
    (spec,) = g.entry().specializations
    graph = spec.program.graph
    assert graph.nodes and all(out.value is None for node in graph.nodes for out in node.outputs)
    assert all(p.value is None for p in graph.inputs)


def test_a_new_function_at_the_address_of_a_dead_one_is_not_taken_for_it() -> None:
    x = tp.tensor([1.0, 2.0])
    counts = []
    for k in range(4):  # each lambda dies at the end of its iteration: the next one may get its id
        g = grad(lambda x, k=k: (x * x * (k + 1)).sum())
        np.testing.assert_allclose(g(x).numpy(), 2 * (k + 1) * x.numpy())
        counts.append(g.compile_count)
        del g
    assert counts == [0, 0, 0, 0]


def test_a_module_and_a_bound_method_as_the_transformed_function() -> None:
    tp.manual_seed(0)
    model = tp.nn.Linear(3, 2)
    per_row = vmap(model)
    xs = tp.tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    for _ in range(3):
        check(per_row, xs)
        with tp.no_grad():
            model.weight.add_(1.0)
    assert per_row.compile_count == 1

    class Holder:
        def __init__(self) -> None:
            self.w = tp.tensor([1.0, 2.0])
            self.s = 2.0

        def loss(self, x: Any) -> Any:
            return (x * self.w * self.s).sum()

    h = Holder()
    x = tp.ones(2)
    for w, s in (([1.0, 2.0], 2.0), ([5.0, 6.0], 3.0), ([5.0, 7.0], 3.0)):
        h.w, h.s = tp.tensor(w), s
        g = grad(h.loss)  # a new bound method each time: one cache entry for (function, object)
        for _ in range(2):
            np.testing.assert_allclose(g(x).numpy(), np.array(w) * s)
    assert g.compile_count == 2  # the scalar changed once; the rebound tensor is an input


# ---- vjp and linearize: a cached forward and a cached pullback, residuals passed between them ----------------

def _np(t: Any) -> Any:
    return t.detach().numpy()


def _vjp_entry(f: Any, has_aux: bool = False) -> Any:
    from tensorplay.func.cache import transformed
    return transformed("vjp", f, {"has_aux": has_aux}, f)


def _linearize_entry(f: Any) -> Any:
    from tensorplay.func.cache import transformed
    return transformed("linearize", f, {}, f)


V = tp.tensor([[1.0, -2.0, 0.5], [0.25, 1.5, -1.0]])


def uses_v(x: Any, y: Any) -> Any:
    return ((V @ x).tanh() * y, (x * x).sum())


def test_vjp_forward_and_pullback_are_cached_and_match_uncached_and_torch() -> None:
    global V
    from tensorplay.func import vjp
    x, y = tp.tensor([0.3, -0.7, 1.1]), tp.tensor([2.0, -1.0])
    ct = (tp.tensor([1.0, 0.5]), tp.tensor(2.0))
    previous = set_caching(False)
    try:
        out_u, fn_u = vjp(uses_v, x, y)
        expected = fn_u(ct)
    finally:
        set_caching(previous)
    vt = torch.tensor(V.numpy())
    out_t, fn_t = torch.func.vjp(lambda x, y: ((vt @ x).tanh() * y, (x * x).sum()),
                                 torch.tensor(x.numpy()), torch.tensor(y.numpy()))
    theirs = fn_t(tuple(torch.tensor(c.numpy()) for c in ct))
    fns = []
    for _ in range(4):
        out, fn = vjp(uses_v, x, y)
        close(list(out), list(out_u))
        for _ in range(2):  # a pullback called twice
            got = fn(ct)
            close(list(got), list(expected))
            for g, t in zip(got, theirs):
                np.testing.assert_allclose(_np(g), t.numpy(), rtol=1e-5, atol=1e-6)
        fns.append(fn)
    assert _vjp_entry(uses_v).compile_count == 1
    assert fns[-1].compile_count == 1  # the pullback graph of that forward, traced once
    saved = V
    try:  # a rebound global is read by the next forward; the pullbacks made before keep their own values
        V = tp.tensor([[0.5, 0.5, 0.5], [-1.0, 2.0, 0.0]])
        out2, fn2 = vjp(uses_v, x, y)
        vt2 = torch.tensor(V.numpy())
        _, fn_t2 = torch.func.vjp(lambda x, y: ((vt2 @ x).tanh() * y, (x * x).sum()),
                                  torch.tensor(x.numpy()), torch.tensor(y.numpy()))
        for g, t in zip(fn2(ct), fn_t2(tuple(torch.tensor(c.numpy()) for c in ct))):
            np.testing.assert_allclose(_np(g), t.numpy(), rtol=1e-5, atol=1e-6)
        close(list(fns[-1](ct)), list(expected))
    finally:
        V = saved
    assert _vjp_entry(uses_v).compile_count == 1  # the tensor is an input of the forward graph


def test_a_pullback_uses_the_values_of_its_own_forward_after_in_place_updates() -> None:
    from tensorplay.func import vjp
    tp.manual_seed(0)
    model = tp.nn.Linear(3, 2)
    opt = tp.optim.SGD(model.parameters(), lr=0.5)
    x = tp.tensor([0.3, -0.2, 0.9])
    ct = tp.tensor([1.0, -2.0])

    def f(x: Any) -> Any:
        return model(x).tanh()

    for step in range(4):
        w0, b0 = (torch.tensor(_np(p).copy()) for p in (model.weight, model.bias))
        x0 = torch.tensor(x.numpy().copy())
        _, fn = vjp(f, x)
        model(tp.ones(3)).sum().backward()
        opt.step()  # the parameters the forward read change in place
        x.mul_(1.5)  # and so does the primal
        _, fn_t = torch.func.vjp(lambda v: torch.tanh(w0 @ v + b0), x0)
        (got,) = fn(ct)
        np.testing.assert_allclose(_np(got), fn_t(torch.tensor(ct.numpy()))[0].numpy(), rtol=1e-5, atol=1e-6)
    assert _vjp_entry(f).compile_count >= 1 and fn.compile_count == 1


def test_dropout_draws_fresh_masks_and_each_pullback_uses_its_own() -> None:
    from tensorplay.func import linearize, vjp
    tp.manual_seed(3)

    def f(x: Any) -> Any:
        return F.dropout(x, p=0.5, training=True) * 3.0

    x = tp.ones(64)
    results = [vjp(f, x) for _ in range(4)]
    lins = [linearize(f, x) for _ in range(4)]
    outs = [_np(out) for out, _ in results]
    assert not np.array_equal(outs[-1], outs[-2])  # the cached forward draws at every call
    for out, fn in reversed(results):  # pullbacks called after later forwards ran
        (g,) = fn(tp.ones(64))
        np.testing.assert_array_equal(_np(g), np.where(_np(out) != 0, 6.0, 0.0))
    t = tp.tensor(np.linspace(1, 2, 64, dtype=np.float32))
    assert not np.array_equal(_np(lins[-1][0]), _np(lins[-2][0]))
    for out, jvp_fn in reversed(lins):
        np.testing.assert_allclose(_np(jvp_fn(t)), np.where(_np(out) != 0, 6.0, 0.0) * t.numpy(), rtol=1e-6)
    assert _vjp_entry(f).compile_count == 1 and results[-1][1].compile_count == 1
    assert _linearize_entry(f).compile_count == 1 and lins[-1][1].compile_count == 1
    tp.manual_seed(11)
    a = _np(vjp(f, x)[0])
    tp.manual_seed(11)
    np.testing.assert_array_equal(_np(vjp(f, x)[0]), a)


def test_batch_norm_running_statistics_update_at_every_cached_vjp() -> None:
    from tensorplay.func import vjp
    tp.manual_seed(0)
    cached_model = tp.nn.BatchNorm1d(3)
    reference = tp.nn.BatchNorm1d(3)
    torch_model = torch.nn.BatchNorm1d(3)
    gen = np.random.default_rng(1)
    xs = [tp.tensor(gen.standard_normal((5, 3)).astype(np.float32)) for _ in range(4)]
    ct = tp.tensor(gen.standard_normal((5, 3)).astype(np.float32))

    def loss_of(model: Any) -> Any:
        def f(x: Any) -> Any:
            y = model(x)
            return y * y.tanh()
        return f

    f = loss_of(cached_model)
    for x in xs:
        out, fn = vjp(f, x)
        previous = set_caching(False)
        try:
            out_u, fn_u = vjp(loss_of(reference), x)
        finally:
            set_caching(previous)
        close(out, out_u)
        close(list(fn(ct)), list(fn_u(ct)))
        xt = torch.tensor(x.numpy(), requires_grad=True)
        yt = torch_model(xt)
        (yt * yt.tanh()).backward(torch.tensor(ct.numpy()))
        assert xt.grad is not None
        np.testing.assert_allclose(_np(fn(ct)[0]), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(_np(getattr(cached_model, name)), _np(getattr(reference, name)), rtol=1e-6)
        np.testing.assert_allclose(_np(getattr(cached_model, name)), getattr(torch_model, name).numpy(), rtol=1e-5)
    assert _vjp_entry(f).compile_count == 1


def test_vjp_with_aux_and_nested_in_vmap_and_grad() -> None:
    from tensorplay.func import vjp

    def f(x: Any) -> Any:
        y = x.sin() * x
        return y, {"cos": x.cos(), "n": 3}

    x = tp.tensor([0.2, -0.4, 1.3])
    ct = tp.tensor([1.0, 2.0, -1.0])
    xt = torch.tensor(x.numpy())
    out_t, fn_t, aux_t = torch.func.vjp(lambda v: (v.sin() * v, {"cos": v.cos()}), xt, has_aux=True)
    for _ in range(3):
        out, fn, aux = vjp(f, x, has_aux=True)
        np.testing.assert_allclose(_np(out), out_t.numpy(), rtol=1e-6)
        np.testing.assert_allclose(_np(aux["cos"]), aux_t["cos"].numpy(), rtol=1e-6)
        assert aux["n"] == 3
        np.testing.assert_allclose(_np(fn(ct)[0]), fn_t(torch.tensor(ct.numpy()))[0].numpy(), rtol=1e-6)
        # grad of a cached pullback (its argument is recorded; the residuals are constants of that recording)
        g = grad(lambda c: (fn(c)[0] ** 2).sum())(ct)
        g_t = torch.func.grad(lambda c: (fn_t(c)[0] ** 2).sum())(torch.tensor(ct.numpy()))
        np.testing.assert_allclose(_np(g), g_t.numpy(), rtol=1e-5)
        # a cached pullback under vmap, and vjp inside vmap (the transform runs uncached there)
        cts = tp.tensor(np.eye(3, dtype=np.float32))
        rows = vmap(lambda c: fn(c)[0])(cts)
        np.testing.assert_allclose(_np(rows), torch.func.vmap(lambda c: fn_t(c)[0])(torch.eye(3)).numpy(), rtol=1e-6)
        xs = tp.tensor(np.array([[0.1, 0.2, 0.3], [1.0, -1.0, 0.5]], dtype=np.float32))
        per_row = vmap(lambda v: vjp(lambda u: u.sin() * u, v)[1](tp.ones(3))[0])(xs)
        expected = torch.func.vmap(lambda v: torch.func.vjp(lambda u: u.sin() * u, v)[1](torch.ones(3))[0])(
            torch.tensor(xs.numpy()))
        np.testing.assert_allclose(_np(per_row), expected.numpy(), rtol=1e-6)
    assert _vjp_entry(f, has_aux=True).compile_count == 1


def test_linearize_is_cached_and_matches_uncached_and_torch() -> None:
    from tensorplay.func import linearize
    w = tp.tensor([[1.0, 0.5], [-0.5, 2.0]])

    def f(x: Any, y: Any) -> Any:
        return {"a": (w @ x).sin() * y, "b": y.exp().sum(), "c": w * 2.0}

    x, y = tp.tensor([0.3, -0.8]), tp.tensor([1.5, 0.5])
    tx, ty = tp.tensor([1.0, 2.0]), tp.tensor([-1.0, 0.5])
    previous = set_caching(False)
    try:
        out_u, fn_u = linearize(f, x, y)
        expected = fn_u(tx, ty)
    finally:
        set_caching(previous)
    wt = torch.tensor(w.numpy())
    _, fn_t = torch.func.linearize(lambda x, y: {"a": (wt @ x).sin() * y, "b": y.exp().sum(), "c": wt * 2.0},
                                   torch.tensor(x.numpy()), torch.tensor(y.numpy()))
    theirs = fn_t(torch.tensor(tx.numpy()), torch.tensor(ty.numpy()))
    for _ in range(4):
        out, fn = linearize(f, x, y)
        for k in ("a", "b", "c"):
            close(out[k], out_u[k])
        for _ in range(2):
            got = fn(tx, ty)
            for k in ("a", "b", "c"):
                close(got[k], expected[k])
                np.testing.assert_allclose(_np(got[k]), theirs[k].numpy(), rtol=1e-5, atol=1e-6)
    assert _linearize_entry(f).compile_count == 1 and fn.compile_count == 1
    w.mul_(2.0)  # the next forward reads the new value; the jvp_fn made before keeps its own
    out2, fn2 = linearize(f, x, y)
    np.testing.assert_allclose(_np(out2["c"]), 2 * _np(out_u["c"]), rtol=1e-6)
    close(fn(tx, ty)["a"], expected["a"])
    assert _linearize_entry(f).compile_count == 1
    with pytest.raises(ValueError, match="shape"):
        fn(tp.ones(3), ty)


def test_vjp_fn_errors_match_the_uncached_ones() -> None:
    from tensorplay.func import vjp
    f = lambda x: x.sin()  # noqa: E731
    x = tp.tensor([1.0, 2.0])
    for _ in range(3):
        _, fn = vjp(f, x)
        with pytest.raises(ValueError, match="shape"):
            fn(tp.ones(3))
        with pytest.raises(ValueError, match="structure"):
            fn((tp.ones(2),))
        with pytest.raises(TypeError, match="one argument"):
            fn(tp.ones(2), tp.ones(2))
    assert _vjp_entry(f).compile_count == 1


def test_backward_through_a_cached_vjp_and_its_pullback_matches_torch() -> None:
    from tensorplay.func import vjp

    def f(x: Any) -> Any:
        return (x.sin() * x).tanh()

    ct = tp.tensor([1.0, 2.0, -1.0])
    for _ in range(4):
        x = tp.tensor([0.3, -0.5, 1.2], requires_grad=True)
        out, fn = vjp(f, x)
        (g,) = fn(ct)
        ((g * g).sum() + out.sum()).backward()  # through the pullback's residuals and the output
        xt = torch.tensor([0.3, -0.5, 1.2], requires_grad=True)
        out_t, fn_t = torch.func.vjp(lambda v: (v.sin() * v).tanh(), xt)
        (g_t,) = fn_t(torch.tensor(ct.numpy()))
        ((g_t * g_t).sum() + out_t.sum()).backward()
        assert x.grad is not None and xt.grad is not None
        np.testing.assert_allclose(_np(g), g_t.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert _vjp_entry(f).compile_count >= 1 and fn.compile_count == 1
