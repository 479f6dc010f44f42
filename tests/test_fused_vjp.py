"""Fused backward rules of the eager tape (``tensorplay.interpreters.eager.fused_vjp``): each equals the
composite vjp rule it replaces (float32 and float64, non-contiguous and broadcast inputs,
zero-size, NaN/inf) and PyTorch's gradient; the tape uses them only without ``create_graph``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.interpreters.eager import fused_vjp, tape
from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.fused_vjp import FUSED_VJP
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.eager.kernels import backward as KB
from tensorplay.rules.util import set_needed_inputs
from tensorplay.rules.vjp import VJP_RULES

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(7)
DTYPES = [np.float32, np.float64]
SPECIAL = [0.0, -0.0, 1e-30, 3.0, -3.0, 9.0, -9.0, 30.0, -30.0, np.inf, -np.inf, np.nan]


def tol(dt: Any) -> dict[str, float]:
    return {"rtol": 2e-5, "atol": 2e-6} if np.dtype(dt) == np.float32 else {"rtol": 1e-12, "atol": 1e-13}


def randn(shape: tuple[int, ...], dt: Any, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(dt)


def strided(a: np.ndarray) -> np.ndarray:
    """The same values as a non-contiguous view (every other element of the last axis)."""
    if a.ndim == 0:
        return a
    big = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
    big[..., ::2] = a
    return big[..., ::2]


def transposed(a: np.ndarray) -> np.ndarray:
    """The same values in Fortran layout."""
    return np.asfortranarray(a)


LAYOUTS: list[Callable[[np.ndarray], np.ndarray]] = [lambda a: a, strided, transposed]
LAYOUT_IDS = ["contiguous", "strided", "fortran"]


def T(a: Any) -> Any:
    """An eager tensor on ``a`` itself (layout kept)."""
    return eager.wrap(a) if isinstance(a, np.ndarray) else a


# ---- fused rule == composite rule ----------------------------------------------------------------------

class Case:
    """One call of a primitive: its inputs, parameters and the cotangent of its result."""

    def __init__(self, name: str, inputs: tuple[Any, ...], params: dict[str, Any] | None = None,
                 note: str = "") -> None:
        self.name, self.inputs, self.params, self.note = name, inputs, params or {}, note

    def __repr__(self) -> str:
        return f"{self.name}[{self.note}]"


def _cases(dt: Any, layout: Callable[[np.ndarray], np.ndarray]) -> Iterator[Case]:
    L = layout
    x = randn((3, 5, 7), dt, 2.0)
    specials = np.array(SPECIAL * 3, dt)[:35].reshape(5, 7)
    for approx in ("none", "tanh"):
        yield Case("gelu", (L(x),), {"approximate": approx}, approx)
        yield Case("gelu", (L(np.concatenate([specials, x[0]])),), {"approximate": approx}, approx + "-special")
        yield Case("gelu", (L(np.linspace(-40, 40, 801).astype(dt).reshape(1, -1)),), {"approximate": approx},
                   approx + "-tails")
        yield Case("gelu", (np.zeros((0, 4), dt),), {"approximate": approx}, approx + "-empty")
    yield Case("relu", (L(np.concatenate([specials, x[0]])),), note="special")
    yield Case("relu", (np.zeros((2, 0), dt),), note="empty")
    for d in (8, 1):
        xs = randn((4, 6, d), dt, 3.0) + 5.0
        gamma, beta = randn((d,), dt), randn((d,), dt)
        yield Case("layer_norm_last_axis", (L(xs), gamma, beta), {"eps": 1e-5}, f"d{d}")
        yield Case("layer_norm_last_axis", (L(xs), np.broadcast_to(np.asarray(1.5, dt), (d,)),
                                  np.broadcast_to(np.asarray(0.0, dt), (d,))), {"eps": 1e-3}, f"d{d}-broadcast-gamma")
    yield Case("layer_norm_last_axis", (np.zeros((0, 3), dt), np.ones(3, dt), np.zeros(3, dt)), {"eps": 1e-5}, "empty")
    xs = randn((4, 6, 8), dt)
    xs[0, 0, 3] = np.nan
    xs[1, 2, 0] = np.inf
    yield Case("layer_norm_last_axis", (xs, np.ones(8, dt), np.zeros(8, dt)), {"eps": 1e-5}, "nan-inf")
    for name in ("softmax", "log_softmax"):
        s = randn((3, 4, 6), dt, 3.0)
        s[0, 1, :3] = -np.inf
        for axis in (-1, 1, 0):
            yield Case(name, (L(s),), {"axis": axis}, f"axis{axis}")
        yield Case(name, (np.zeros((2, 0, 3), dt),), {"axis": 1}, "empty")
        yield Case(name, (L(np.array([[1.0, np.nan, 2.0], [-np.inf] * 3], dt)),), {"axis": -1}, "nan-row")
    a, b = randn((3, 4, 5), dt), randn((4, 1), dt)
    for name in ("add", "sub", "mul", "div"):
        yield Case(name, (L(a), b), note="broadcast")
        yield Case(name, (b, L(a)), note="broadcast-left")
        yield Case(name, (L(a), 2.5), note="scalar")
        yield Case(name, (1.5, L(a)), note="scalar-left")
        yield Case(name, (np.asarray(2.0, dt), np.asarray(-3.0, dt)), note="0d")
    yield Case("neg", (L(a),))
    yield Case("reshape", (L(a),), {"shape": (12, 5)})
    yield Case("permute", (L(a),), {"perm": (2, 0, 1)})
    yield Case("broadcast_to", (b,), {"shape": (2, 4, 5)})
    for axes, keep in (((1,), False), ((0, 2), True), ((), False), ((0, 1, 2), False)):
        yield Case("reduce_sum", (L(a),), {"axes": axes, "keepdims": keep}, f"{axes}-{keep}")
    yield Case("slice", (L(a),), {"starts": (0, 1, 1), "stops": (3, 4, 5), "steps": (1, 1, 2)}, "steps")
    yield Case("slice", (L(a),), {"starts": (2, 0, 4), "stops": (-1, 4, 0), "steps": (-1, 2, -2)}, "negative")
    yield Case("matmul", (L(randn((6, 4), dt)), L(randn((4, 3), dt))), note="2d")
    yield Case("matmul", (randn((2, 6, 4), dt), randn((4, 3), dt)), note="batched-composite")
    p = randn((2, 3, 9, 8), dt)
    p[0, 0, :2, :2] = np.nan
    p[0, 1, :2, :2] = 1.0  # ties: the first position gets the cotangent
    p[1, 2, 2:4, 2:4] = -np.inf
    for k, s, pad in (((2, 2), (2, 2), (0, 0)), ((3, 3), (2, 2), (1, 1)), ((2, 3), (1, 2), (0, 1))):
        yield Case("max_pool_nd", (L(p),), {"kernel_size": k, "stride": s, "padding": pad}, f"k{k}s{s}p{pad}")
    yield Case("gather", (L(a), np.array([[0, 2], [1, 1]])), {"axis": 1})
    q, k_, v = (np.transpose(randn((2, 5, 3, 4), dt), (0, 2, 1, 3)) for _ in range(3))
    mask = RNG.random((5, 5)) < 0.7
    mask[0] = False  # a fully masked query row
    yield Case("dot_product_attention", (q, k_, v, None), {"scale": 0.5}, "nomask")
    yield Case("dot_product_attention", (q, k_, v, mask), {"scale": 0.5}, "mask")
    yield Case("dot_product_attention", (q[:, :, :0], k_, v, None), {"scale": 0.5}, "empty")


def _forward(case: Case) -> Any:
    with tp.no_grad():
        return getattr(eager, case.name)(*(T(x) for x in case.inputs), **case.params)


def _cotangent(out: Any, dt: Any, layout: Callable[[np.ndarray], np.ndarray]) -> Any:
    shape = tuple(out.shape)
    return T(layout(randn(shape, dt)) if len(shape) else np.asarray(RNG.standard_normal(), dt))


def _run(rule: Callable[..., Any], case: Case, g: Any, out: Any,
         mask: tuple[bool, ...] | None = None) -> tuple[Any, ...]:
    set_needed_inputs(mask)
    try:
        with tp.no_grad():
            return tuple(rule(eager, g, tuple(T(x) for x in case.inputs), out, **case.params))
    finally:
        set_needed_inputs(None)


def _assert_same(got: tuple[Any, ...], want: tuple[Any, ...], dt: Any, what: str, atol: float | None = None) -> None:
    assert len(got) == len(want), what
    for i, (a, b) in enumerate(zip(got, want)):
        assert (a is None) == (b is None), f"{what}: cotangent {i} is {a} vs composite {b}"
        if a is None:
            continue
        ad, bd = np.asarray(a._data), np.asarray(b._data)
        assert type(a._data) is np.ndarray, f"{what}: cotangent {i} payload is {type(a._data)}"
        assert ad.shape == bd.shape and ad.dtype == bd.dtype, (what, i, ad.shape, bd.shape, ad.dtype, bd.dtype)
        t = tol(dt) if atol is None else {**tol(dt), "atol": atol}
        np.testing.assert_allclose(ad, bd, err_msg=f"{what}: cotangent {i}", **t)


CASES = [(dt, li, c) for dt in DTYPES for li, lay in enumerate(LAYOUTS) for c in _cases(dt, lay)]


@pytest.mark.parametrize(("dt", "layout", "case"), CASES,
                         ids=[f"{np.dtype(dt).name}-{LAYOUT_IDS[li]}-{c!r}" for dt, li, c in CASES])
def test_fused_rule_equals_composite_rule(dt: Any, layout: int, case: Case) -> None:
    out = _forward(case)
    g = _cotangent(out, dt, LAYOUTS[layout])
    with np.errstate(all="ignore"):
        want = _run(VJP_RULES[case.name], case, g, out)
        got = _run(FUSED_VJP[case.name], case, g, out)
    # the composite tanh form computes 0.5 (1 + tanh u) and 1 - tanh(u)^2, which cancel in float32 for
    # x < -4 (absolute error up to ~1e-6 |g|); the fused kernel uses exp(-2|u|) and has no cancellation
    loose = case.name == "gelu" and np.dtype(dt) == np.float32 and case.params["approximate"] == "tanh"
    _assert_same(got, want, dt, repr(case), atol=1e-5 if loose else None)


@pytest.mark.parametrize("name", ["layer_norm_last_axis", "dot_product_attention", "add", "mul", "matmul"])
def test_fused_rules_skip_cotangents_nobody_needs(name: str) -> None:
    case = next(c for c in _cases(np.float64, LAYOUTS[0]) if c.name == name)
    out = _forward(case)
    g = _cotangent(out, np.float64, LAYOUTS[0])
    n = len(case.inputs)
    for skip in range(n):
        mask = tuple(i != skip for i in range(n))
        got = _run(FUSED_VJP[name], case, g, out, mask)
        assert got[skip] is None, (name, skip)
        want = _run(VJP_RULES[name], case, g, out)
        for i in range(n):
            if i != skip and want[i] is not None:
                np.testing.assert_allclose(got[i]._data, want[i]._data, rtol=1e-12, atol=1e-13)


def test_off_the_fast_path_the_composite_rule_runs() -> None:
    # mixed dtypes, an integer operand: handed to the composite rule (same results, same dtypes)
    x32 = randn((3, 4), np.float32)
    y64 = randn((4,), np.float64)
    case = Case("mul", (x32, y64))
    out = _forward(case)
    g = T(randn(tuple(out.shape), np.float64))
    _assert_same(_run(FUSED_VJP["mul"], case, g, out), _run(VJP_RULES["mul"], case, g, out), np.float32, "mixed")
    case = Case("add", (x32, np.arange(4, dtype=np.int64)))
    out = _forward(case)
    g = T(randn(tuple(out.shape), np.float32))
    got = _run(FUSED_VJP["add"], case, g, out)
    assert got[1] is None and got[0]._data.dtype == np.float32


def test_every_fused_rule_names_a_primitive_with_a_composite_rule() -> None:
    # or an eager tape node whose own backward rule is written with primitives (the conv with a bias)
    assert set(FUSED_VJP) <= set(VJP_RULES) | set(tape.EXTRA_VJP)
    for name in ("gelu", "layer_norm_last_axis", "layer_norm", "softmax", "log_softmax", "relu", "max_pool_nd", "dot_product_attention",
                 "conv_nd", "conv_bias"):
        assert name in FUSED_VJP


# ---- the tape: fused without create_graph, composite with it --------------------------------------------

def _leaf(a: np.ndarray) -> Any:
    return tp.tensor(a, requires_grad=True)


def _block(x: Any, gamma: Any, beta: Any, w: Any) -> Any:
    import tensorplay.nn.functional as F
    h = F.layer_norm(x, (x.shape[-1],), gamma, beta)
    h = F.gelu(h @ w)
    return F.log_softmax(F.softmax(h, dim=-1) * 3.0, dim=-1)


def test_tape_uses_fused_rules_only_without_create_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name, rule in list(FUSED_VJP.items()):
        def spy(*args: Any, _name: str = name, _rule: Any = rule, **kwargs: Any) -> Any:
            calls.append(_name)
            return _rule(*args, **kwargs)
        monkeypatch.setitem(FUSED_VJP, name, spy)
    args = [_leaf(randn((2, 3, 4), np.float64)), _leaf(randn((4,), np.float64)), _leaf(randn((4,), np.float64)),
            _leaf(randn((4, 5), np.float64))]
    _block(*args).sum().backward()
    assert {"layer_norm", "gelu", "softmax", "log_softmax", "matmul"} <= set(calls)  # layer_norm: F's node
    calls.clear()
    tp.autograd.grad(_block(*args).sum(), args, create_graph=True)
    assert calls == []


def test_second_derivatives_use_the_composite_rules() -> None:
    """``grad`` of a ``create_graph=True`` gradient through gelu, layer_norm and softmax equals
    PyTorch's double backward (the first-order graph is recorded by the composite rules)."""
    values = [randn((2, 3, 4), np.float64), randn((4,), np.float64), randn((4,), np.float64),
              randn((4, 5), np.float64)]
    ours = [_leaf(v) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    (gx,) = tp.autograd.grad(_block(*ours).sum(), [ours[0]], create_graph=True)
    (gx * gx).sum().backward()

    def torch_block(x: Any, gamma: Any, beta: Any, w: Any) -> Any:
        h = TF.gelu(TF.layer_norm(x, (x.shape[-1],), gamma, beta) @ w)
        return TF.log_softmax(TF.softmax(h, dim=-1) * 3.0, dim=-1)

    (tgx,) = torch.autograd.grad(torch_block(*theirs).sum(), [theirs[0]], create_graph=True)
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(gx.detach().numpy(), tgx.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-11)


# ---- against PyTorch's gradients ----------------------------------------------------------------------

def _grads_vs_torch(fn: Callable[..., Any], torch_fn: Callable[..., Any], values: list[np.ndarray], dt: Any,
                    rtol: float | None = None) -> None:
    ours = [_leaf(v) for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    out = fn(*ours)
    g = randn(tuple(out.shape), dt)
    out.backward(tp.tensor(g))
    torch_fn(*theirs).backward(torch.tensor(g))
    t = tol(dt) if rtol is None else {"rtol": rtol, "atol": rtol}
    for a, b in zip(ours, theirs):
        assert a.grad.numpy().dtype == np.dtype(dt)
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **t)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_gradient_matches_torch(dt: Any, approximate: str) -> None:
    import tensorplay.nn.functional as F
    x = np.concatenate([randn((500,), dt, 3.0), np.linspace(-12, 12, 241).astype(dt)])
    _grads_vs_torch(lambda a: F.gelu(a, approximate=approximate),
                    lambda a: TF.gelu(a, approximate=approximate), [x], dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_layer_norm_softmax_relu_gradients_match_torch(dt: Any) -> None:
    import tensorplay.nn.functional as F
    values = [randn((4, 5, 16), dt, 2.0), randn((16,), dt), randn((16,), dt)]
    _grads_vs_torch(lambda x, w, b: F.relu(F.layer_norm(x, (16,), w, b)),
                    lambda x, w, b: TF.relu(TF.layer_norm(x, (16,), w, b)), values, dt)
    for axis in (-1, 1, 0):
        _grads_vs_torch(lambda x: F.softmax(x, dim=axis), lambda x: TF.softmax(x, dim=axis), [values[0]], dt)
        _grads_vs_torch(lambda x: F.log_softmax(x, dim=axis), lambda x: TF.log_softmax(x, dim=axis), [values[0]], dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_cnn_and_attention_gradients_match_torch(dt: Any) -> None:
    import tensorplay.nn.functional as F
    x = randn((3, 2, 9, 10), dt)
    _grads_vs_torch(lambda a: F.max_pool2d(a, 2), lambda a: TF.max_pool2d(a, 2), [x], dt)
    _grads_vs_torch(lambda a: F.max_pool2d(a, 3, 2, 1), lambda a: TF.max_pool2d(a, 3, 2, 1), [x], dt)
    logits = randn((8, 10), dt)
    labels = RNG.integers(0, 10, 8)
    ours = _leaf(logits)
    theirs = torch.tensor(logits, requires_grad=True)
    F.cross_entropy(ours, tp.tensor(labels)).backward()
    TF.cross_entropy(theirs, torch.tensor(labels)).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), **tol(dt))
    q, k, v = (randn((2, 3, 6, 4), dt) for _ in range(3))
    _grads_vs_torch(lambda a, b, c: F.scaled_dot_product_attention(a, b, c),
                    lambda a, b, c: TF.scaled_dot_product_attention(a, b, c), [q, k, v], dt)


def test_transformer_block_step_gradients_match_torch() -> None:
    """Every parameter gradient of the benchmark's transformer block (float32) equals PyTorch's."""
    from benchmarks.bench_training import _block_classes
    block, torch_block = _block_classes(tp, torch)
    torch.manual_seed(0)
    theirs = torch_block(16, 4)
    ours = block(16, 4)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x, y = randn((3, 5, 16), np.float32), randn((3, 5, 16), np.float32)
    import tensorplay.nn.functional as F
    F.mse_loss(ours(tp.tensor(x)), tp.tensor(y)).backward()
    TF.mse_loss(theirs(torch.tensor(x)), torch.tensor(y)).backward()
    mine = dict(ours.named_parameters())
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(mine[name].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


# ---- the kernels' special functions ------------------------------------------------------------------

def _ulps(got: np.ndarray, want: np.ndarray, dt: Any) -> float:
    spacing = np.spacing(np.abs(want).astype(dt)).astype(np.float64)
    return float(np.max(np.abs(got.astype(np.float64) - want) / spacing))


@pytest.mark.parametrize("dt", DTYPES)
def test_erf_is_within_a_few_ulp(dt: Any) -> None:
    tiny = float(np.finfo(dt).tiny)
    x = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(tiny, 7, 3000), -np.geomspace(tiny, 7, 3000)])
    x = x.astype(dt)
    want = np.array([math.erf(float(v)) for v in x])
    got = KB.erf(x)
    assert got.dtype == np.dtype(dt)
    assert _ulps(got, want, dt) <= 4
    special = KB.erf(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], dt))
    np.testing.assert_array_equal(special[:2], [1.0, -1.0])
    assert np.isnan(special[2]) and special[3] == 0.0 and special[4] == 0.0
    assert KB.erf(np.zeros((0, 2), dt)).shape == (0, 2)
    assert tp.tensor(x).erf().numpy().dtype == np.dtype(dt)  # the erf primitive uses it


@pytest.mark.parametrize("dt", DTYPES)
def test_gelu_backward_kernel_is_accurate_in_the_tails(dt: Any) -> None:
    """Against ``Phi(x) + x phi(x)`` from libm's ``erfc``/``exp`` in double precision, relative to the
    size of the terms (``Phi + |x| phi``: the derivative itself crosses zero near -0.75)."""
    x = np.concatenate([np.linspace(-38 if dt == np.float64 else -13, 38, 30001), randn((3000,), np.float64)])
    x = x.astype(dt)
    xd = x.astype(np.float64)
    phi = np.array([math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in xd])
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in xd])
    got = KB.gelu_backward(np.ones_like(x), x).astype(np.float64)
    scale = cdf + np.abs(xd) * phi
    ok = scale > np.finfo(dt).tiny * 1e6  # where float32 does not flush to zero
    err = np.abs(got - (cdf + xd * phi))[ok] / scale[ok]
    # float32: x*x rounds (relative 6e-8), so exp(-x*x/2) is off by up to 6e-8 * x*x/2 in the far tail
    assert err.max() < (5e-6 if dt == np.float32 else 2e-15)


@pytest.mark.parametrize("dt", DTYPES)
def test_exp_helper_matches_numpy(dt: Any) -> None:
    lo = -87.0 if dt == np.float32 else -708.0
    x = np.concatenate([np.linspace(lo, 0, 100001), np.linspace(0, 80, 1001), [-np.inf, np.nan, -1e30]]).astype(dt)
    out = np.empty_like(x)
    KB.nbb().exp_into(x, out, 0, x.size)
    want = np.exp(x.astype(np.float64))
    normal = want > np.finfo(dt).tiny
    assert _ulps(out[normal], want[normal], dt) <= 2
    assert out[-3] == 0.0 and np.isnan(out[-2]) and out[-1] == 0.0


def test_fused_module_is_documented() -> None:
    assert fused_vjp.__doc__ and "create_graph" in fused_vjp.__doc__


def test_threaded_kernels_equal_single_threaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Split over threads (forced on small arrays), every backward kernel gives the same bits."""
    from tensorplay.interpreters.eager.kernels import threads
    x = randn((64, 33), np.float32, 2.0)
    g = randn((64, 33), np.float32)
    w = randn((33,), np.float32)
    p = randn((4, 8, 6, 6), np.float32)
    gp = randn((4, 8, 3, 3), np.float32)

    def run() -> list[np.ndarray]:
        dx, dw, db = KB.layer_norm_backward(x, w, g, eps=1e-5)
        assert dx is not None and dw is not None and db is not None
        stats = np.empty((64, 2))
        y = K.layer_norm_last_axis(x, w, w, eps=1e-5, stats=stats)
        saved = KB.layer_norm_backward(x, w, g, eps=1e-5, stats=stats)
        assert all(a is not None for a in saved)
        pool = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
        return [dx, dw, db, y, stats, *saved, KB.gelu_backward(g, x), KB.gelu_backward(g, x, approximate="tanh"),
                KB.relu_backward(g, np.maximum(x, 0)), KB.softmax_backward(x, g, axis=1),
                KB.log_softmax_backward(x, g, axis=0), KB.erf(x), KB.max_pool_backward(p, gp, **pool)]

    monkeypatch.setattr(threads, "_NUM_THREADS", 1)
    single = run()
    monkeypatch.setattr(threads, "_NUM_THREADS", 2)
    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 16)
    for a, b in zip(single, run()):
        np.testing.assert_array_equal(a, b)


# ---- layer_norm's saved statistics -----------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("layout", range(len(LAYOUTS)), ids=LAYOUT_IDS)
def test_layer_norm_saves_row_statistics_for_its_backward(dt: Any, layout: int) -> None:
    """``F.layer_norm`` under recording keeps each row's mean and rstd on its node; the backward that reads
    them gives the bits of the backward that computes them afresh, agrees with PyTorch, and the forward
    gives the same bits as without recording."""
    import tensorplay.nn.functional as F
    from tensorplay.interpreters.eager.losses import LAYER_NORM_NODE
    eps = 1e-5
    xv = LAYOUTS[layout](randn((3, 5, 37), dt, 3.0) + 2.0)
    wv, bv, gv = randn((37,), dt), randn((37,), dt), randn((3, 5, 37), dt)
    x, w, b = (tp.tensor(v, requires_grad=True) for v in (xv, wv, bv))
    y = F.layer_norm(x, (37,), w, b, eps)
    assert y.grad_fn.name == LAYER_NORM_NODE
    stats = y.grad_fn.params["stats"]
    rows = xv.astype(np.float64).reshape(15, 37)
    np.testing.assert_allclose(stats[:, 0], rows.mean(1), rtol=1e-6 if dt == np.float32 else 1e-14)
    np.testing.assert_allclose(stats[:, 1], 1 / np.sqrt(rows.var(1) + eps), rtol=1e-5 if dt == np.float32 else 1e-13)
    with tp.no_grad():
        plain = F.layer_norm(x, (37,), w, b, eps)
    np.testing.assert_array_equal(plain.numpy(), y.detach().numpy())
    y.backward(tp.tensor(gv))
    want = KB.layer_norm_backward(xv, wv, gv, eps=eps)  # no statistics: recomputed from x
    for got, expected in zip((x.grad, w.grad, b.grad), want):
        assert got is not None and expected is not None
        np.testing.assert_array_equal(got.numpy(), expected)
    xt, wt, bt = (torch.tensor(v, requires_grad=True) for v in (xv, wv, bv))
    TF.layer_norm(xt, (37,), wt, bt, eps).backward(torch.tensor(gv))
    for got, t in zip((x.grad, w.grad, b.grad), (xt, wt, bt)):
        np.testing.assert_allclose(got.numpy(), t.grad.numpy(), **tol(dt))


def test_layer_norm_records_statistics_only_when_recording() -> None:
    import tensorplay.nn.functional as F
    x = tp.tensor(randn((4, 6), np.float32))
    assert F.layer_norm(x, (6,)).grad_fn is None
    w = tp.tensor(np.ones(6, np.float32), requires_grad=True)
    y = F.layer_norm(x, (6,), w)  # only the weight wants a gradient
    assert y.grad_fn.params["stats"].shape == (4, 2)
    y.sum().backward()
    assert w.grad is not None
    np.testing.assert_allclose(w.grad.numpy(), TF.layer_norm(torch.tensor(x.numpy()), (6,)).sum(0).numpy(),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [np.empty((3, 2)), np.empty((4, 2), np.float32), np.empty((4, 3)),
                                 np.empty((2, 4)).T])
def test_layer_norm_kernels_name_bad_statistics(bad: np.ndarray) -> None:
    x = randn((4, 5), np.float64)
    w = np.ones(5)
    with pytest.raises(ValueError, match=r"layer_norm: stats must be a row-major float64 array of shape \(4, 2\)"):
        K.layer_norm_last_axis(x, w, w, eps=1e-5, stats=bad)
    with pytest.raises(ValueError, match=r"layer_norm_backward: stats must be .* \(4, 2\), got"):
        KB.layer_norm_backward(x, w, x, eps=1e-5, stats=bad)


@pytest.mark.parametrize("eps", [np.float64(1e-3), np.float32(1e-3), 1, np.int64(1)])
def test_layer_norm_takes_numpy_and_int_eps_as_their_float_value(eps: Any) -> None:
    import tensorplay.nn.functional as F
    from tensorplay.interpreters.eager.losses import LAYER_NORM_NODE
    xv = randn((5, 6), np.float64)
    x = tp.tensor(xv, requires_grad=True)
    y = F.layer_norm(x, (6,), eps=eps)
    assert y.grad_fn.name == LAYER_NORM_NODE and type(y.grad_fn.params["eps"]) is float
    y.sum().backward()
    xt = torch.tensor(xv, requires_grad=True)
    yt = TF.layer_norm(xt, (6,), eps=float(eps))
    yt.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), yt.detach().numpy(), rtol=1e-12, atol=1e-13)
    assert x.grad is not None and xt.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)
