"""The math functions of :mod:`tensorplay.math_more` (``lerp``, ``addcmul``, ``addcdiv``, ``logaddexp``,
``logaddexp2``, ``logit``, ``xlogy``, ``erfinv``, ``clamp_min``/``clamp_max``, ``cumprod``, ``nansum``, ``nanmean``,
``count_nonzero``, ``meshgrid``, ``tensordot``, ``cdist``) against PyTorch: values at 0, -0, infinities, NaN and
1e4, broadcasting and strided inputs, gradients, the dtypes promoted or refused, argument errors, and a few
under ``tp.compile``, ``vmap``, ``jvp`` and ONNX Runtime."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import TensorplayError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy warns at the NaN and inf edge values

DTYPES = ["float32", "float64"]
TOL = {"float32": dict(rtol=3e-6, atol=3e-6), "float64": dict(rtol=1e-12, atol=1e-12)}
RNG = np.random.default_rng(7)
INF, NAN = float("inf"), float("nan")
EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 1e4, -1e4, INF, -INF, NAN]


def _np(t: Any) -> Any:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(got: Any, want: Any, dtype: str, what: str, scale: float = 1.0) -> None:
    g, w = _np(got), _np(want)
    assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(g, w, rtol=tol["rtol"] * scale, atol=tol["atol"] * scale, equal_nan=True,
                               err_msg=what)


def _pairs(dtype: str) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    a, b = zip(*itertools.product(EDGE, EDGE))
    return np.array(a, dtype), np.array(b, dtype)


def _grads(f: Callable[..., Any], arrays: list[np.ndarray[Any, Any]]) -> tuple[list[Any], Any]:
    ts = [tp.tensor(a, requires_grad=True) for a in arrays]
    out = f(*ts)
    out.sum().backward()
    return [t.grad for t in ts], out


def _torch_grads(f: Callable[..., Any], arrays: list[np.ndarray[Any, Any]]) -> tuple[list[Any], Any]:
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = f(*ts)
    out.sum().backward()
    return [t.grad for t in ts], out


# name: (tensorplay, torch, pairs whose gradients differ on purpose); each takes two tensors
BINARY: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[[Any, Any], Any]]] = {
    # at equal infinities torch's gradient is NaN (inf - inf); ours routes it to the first operand
    "logaddexp": (tp.logaddexp, torch.logaddexp, lambda a, b: (a == b) & np.isinf(a)),
    "logaddexp2": (lambda a, b: a.logaddexp2(b), torch.logaddexp2, lambda a, b: (a == b) & np.isinf(a)),
    # x == 0 with y in {0, inf}: torch's d/dx is log(y) = -inf/inf and d/dy 0/0; ours 0 (the value is 0 there)
    "xlogy": (tp.xlogy, torch.xlogy, lambda a, b: (a == 0) & ((b == 0) | (b == INF))),
    "lerp(0.3)": (lambda a, b: a.lerp(b, 0.3), lambda a, b: torch.lerp(a, b, 0.3), lambda a, b: a != a),
    "lerp(0.8)": (lambda a, b: tp.lerp(a, b, 0.8), lambda a, b: torch.lerp(a, b, 0.8), lambda a, b: a != a),
    "clamp_min": (tp.clamp_min, torch.clamp_min, lambda a, b: (a == b) | (a != a) | (b != b)),
    "clamp_max": (lambda a, b: a.clamp_max(b), torch.clamp_max, lambda a, b: (a == b) | (a != a) | (b != b)),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_values_and_gradients_at_edges_match_torch(name: str, dtype: str) -> None:
    ours, theirs, differs = BINARY[name]
    a, b = _pairs(dtype)
    (ga, gb), out = _grads(ours, [a, b])
    (ta, tb), want = _torch_grads(theirs, [a, b])
    _close(out, want, dtype, f"{name} values")
    keep = ~differs(a, b)
    _close(_np(ga)[keep], _np(ta)[keep], dtype, f"{name} d/dinput")
    _close(_np(gb)[keep], _np(tb)[keep], dtype, f"{name} d/dother")


def test_logaddexp_infinities_and_large_values_are_exact() -> None:
    a = tp.tensor([-INF, INF, -INF, 1e4, -1e4, 0.0])
    b = tp.tensor([-INF, INF, 2.0, 1e4, -1e4, -1e30])
    got = tp.logaddexp(a, b).numpy()
    want = torch.logaddexp(torch.tensor(a.numpy()), torch.tensor(b.numpy())).numpy()
    np.testing.assert_array_equal(got, want)
    assert got[0] == -INF and got[1] == INF


@pytest.mark.parametrize("dtype", DTYPES)
def test_lerp_with_a_tensor_weight_broadcasts_and_matches_torch(dtype: str) -> None:
    s, e = RNG.standard_normal((3, 4)).astype(dtype), RNG.standard_normal((4,)).astype(dtype)
    w = np.array([[0.0], [0.49], [1.0]], dtype)
    (gs, ge, gw), out = _grads(lambda s, e, w: s.lerp(e, w), [s, e, w])
    (ts, te, tw), want = _torch_grads(torch.lerp, [s, e, w])
    _close(out, want, dtype, "lerp values")
    for g, t, what in ((gs, ts, "start"), (ge, te, "end"), (gw, tw, "weight")):
        _close(g, t, dtype, f"lerp d/d{what}")
    assert tp.lerp(tp.tensor(s), tp.tensor(np.broadcast_to(e, s.shape).copy()), 1.0).numpy().tolist() == \
        np.broadcast_to(e, s.shape).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addcmul_addcdiv_broadcast_strided_and_gradients_match_torch(name: str, dtype: str) -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(dtype)
    t1 = RNG.standard_normal((8, 3)).astype(dtype)  # used as [3, 8][:, ::2], a strided [3, 4]
    t2 = RNG.uniform(0.5, 2.0, (4,)).astype(dtype)
    ours = (lambda x, a, b: getattr(x, name)(a.transpose(0, 1)[:, ::2], b, value=-0.5))
    theirs = (lambda x, a, b: getattr(torch, name)(x, a.T[:, ::2], b, value=-0.5))
    grads, out = _grads(ours, [x, t1, t2])
    want_grads, want = _torch_grads(theirs, [x, t1, t2])
    _close(out, want, dtype, f"{name} values")
    for g, t in zip(grads, want_grads):
        _close(g, t, dtype, f"{name} gradient")
    one = getattr(tp, name)(tp.tensor(x), tp.tensor(x), tp.tensor(x))
    _close(one, getattr(torch, name)(torch.tensor(x), torch.tensor(x), torch.tensor(x)), dtype, f"{name} value=1")


# name: (tensorplay, torch, inputs)
UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], list[float]]] = {
    "logit": (tp.logit, torch.logit, [0.0, -0.0, 1e-7, 0.25, 0.5, 0.75, 0.999, 1.0, 1.5, -0.5, INF, NAN]),
    "logit(eps=0.1)": (lambda x: x.logit(eps=0.1), lambda x: torch.logit(x, eps=0.1),
                       [0.0, 0.05, 0.1, 0.3, 0.5, 0.9, 0.95, 1.0, NAN]),
    "erfinv": (tp.erfinv, torch.erfinv, [0.0, -0.0, 1e-9, 0.1, -0.3, 0.5, 0.75, -0.9, 0.99, 1.0, -1.0, 1.5,
                                           -1.01, INF, NAN]),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_values_and_gradients_match_torch(name: str, dtype: str) -> None:
    ours, theirs, values = UNARY[name]
    x = np.array(values, dtype)
    (g,), out = _grads(ours, [x])
    (t,), want = _torch_grads(theirs, [x])
    _close(out, want, dtype, f"{name} values")
    _close(g, t, dtype, f"{name} gradient", scale=4.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_erfinv_is_accurate_across_the_range(dtype: str) -> None:
    y = np.concatenate([np.linspace(-0.9, 0.9, 1001), 1.0 - np.geomspace(1e-7, 0.1, 50)]).astype(dtype)
    got = tp.erfinv(tp.tensor(y)).numpy()
    want = torch.erfinv(torch.tensor(y)).numpy()
    if dtype == "float32":  # computed in float64: the nearest float32 or its neighbour
        np.testing.assert_array_less(np.abs(got - want), 1.01 * np.spacing(np.abs(want)) + 1e-45)
    else:
        inner = np.abs(y) <= 0.9
        np.testing.assert_allclose(got[inner], want[inner], rtol=2e-15, atol=1e-300)
        np.testing.assert_allclose(got[~inner], want[~inner], rtol=1e-9)
    back = tp.erf(tp.erfinv(tp.tensor(y.astype(np.float64)))).numpy()
    np.testing.assert_allclose(back, y.astype(np.float64), rtol=1e-15, atol=1e-16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cumprod_values_and_zero_safe_gradients_match_torch(dtype: str) -> None:
    a = RNG.uniform(0.5, 1.5, (4, 9)).astype(dtype) * np.sign(RNG.standard_normal((4, 9))).astype(dtype)
    a[1, 3] = 0.0  # one zero
    a[2, 2] = a[2, 6] = 0.0  # two zeros
    a[3, 0] = -0.0
    for dim in (0, 1, -1):
        (g,), out = _grads(lambda x: tp.cumprod(x, dim) * tp.tensor(np.arange(1.0, 10.0, dtype=dtype)), [a])
        (t,), want = _torch_grads(lambda x: torch.cumprod(x, dim) * torch.arange(1.0, 10.0, dtype=x.dtype), [a])
        _close(out, want, dtype, f"cumprod values dim {dim}")
        _close(g, t, dtype, f"cumprod gradient dim {dim}", scale=2.0)
    strided = tp.tensor(a).transpose(0, 1)[::2]
    _close(strided.cumprod(1), torch.tensor(a).T[::2].cumprod(1), dtype, "cumprod of a strided view")


def test_cumprod_is_a_log_depth_scan_for_large_sizes() -> None:
    a = RNG.uniform(0.99, 1.01, (3, 5000))
    got = tp.tensor(a).cumprod(1).numpy()
    np.testing.assert_allclose(got, torch.tensor(a).cumprod(1).numpy(), rtol=1e-12)
    from tensorplay.export import export
    ep = export(lambda x: x.cumprod(1), (tp.tensor(a),))
    n_mul = sum(1 for node in ep.graph.nodes if node.target == "mul")
    assert n_mul == 13, n_mul  # ceil(log2(5000)) == 13 steps


def test_cumprod_dtypes_and_0d_follow_torch() -> None:
    for values in ([1, 2, 3, -4], [True, False, True]):
        got = tp.cumprod(tp.tensor(values), 0)
        want = torch.cumprod(torch.tensor(values), 0)
        assert str(got.dtype).rsplit(".", 1)[-1] == str(want.dtype).rsplit(".", 1)[-1] == "int64"
        assert got.numpy().tolist() == want.numpy().tolist()
    assert tp.cumprod(tp.tensor([1.0, 2.0]), 0, dtype=tp.float64).dtype == tp.float64
    assert float(tp.tensor(2.5).cumprod(-1)) == 2.5


@pytest.mark.parametrize("dtype", DTYPES)
def test_nansum_nanmean_and_count_nonzero_match_torch(dtype: str) -> None:
    a = RNG.standard_normal((3, 4, 5)).astype(dtype)
    a[0, 1, :] = NAN
    a[1, :, 2] = NAN
    a[2, 2, 2] = 0.0
    a[2, 3, :] = 0.0
    for dim, keepdim in ((None, False), (1, False), ((0, 2), True), (-1, True)):
        kw: dict[str, Any] = {} if dim is None else {"dim": dim, "keepdim": keepdim}
        for name in ("nansum", "nanmean"):
            (g,), out = _grads(lambda x: getattr(x, name)(**kw), [a])
            (t,), want = _torch_grads(lambda x: getattr(torch, name)(x, **kw), [a])
            _close(out, want, dtype, f"{name} {kw}")
            if name == "nanmean":  # a group of NaN only: torch's gradient is NaN (inf * 0), ours 0
                groups = np.isnan(a).all(axis=dim, keepdims=True) if dim is not None else np.isnan(a).all()
                g = np.where(np.broadcast_to(groups, a.shape), NAN, _np(g))
            _close(g, t, dtype, f"{name} gradient {kw}")
        cdim = {} if dim is None else {"dim": dim}
        got = tp.count_nonzero(tp.tensor(a), **cdim)
        want = torch.count_nonzero(torch.tensor(a), **cdim)
        assert got.dtype == tp.int64 and got.numpy().tolist() == want.numpy().tolist(), cdim
    ints = np.array([[1, 0, 3], [0, 0, 2]])
    assert tp.nansum(tp.tensor(ints), 1).numpy().tolist() == torch.nansum(torch.tensor(ints), 1).tolist()
    assert tp.count_nonzero(tp.tensor(ints) > 0, 0).numpy().tolist() == [1, 0, 2]


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_matches_torch(indexing: str) -> None:
    xs = [RNG.standard_normal(n) for n in (3, 4, 2)]
    for k in (1, 2, 3):
        got = tp.meshgrid(*[tp.tensor(x) for x in xs[:k]], indexing=indexing)
        want = torch.meshgrid(*[torch.tensor(x) for x in xs[:k]], indexing=indexing)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
    (ga, gb), _ = _grads(lambda a, b: tp.meshgrid([a, b], indexing=indexing)[0] * 2
                         + tp.meshgrid(a, b, indexing=indexing)[1] ** 2, xs[:2])
    (ta, tb), _ = _torch_grads(lambda a, b: torch.meshgrid(a, b, indexing=indexing)[0] * 2
                               + torch.meshgrid(a, b, indexing=indexing)[1] ** 2, xs[:2])
    _close(ga, ta, "float64", "meshgrid grad a")
    _close(gb, tb, "float64", "meshgrid grad b")


@pytest.mark.parametrize("dims", [0, 1, 2, ([1, 0], [0, 2]), ([2], [1]), [[0, 2], [2, 0]]])
def test_tensordot_matches_torch(dims: Any) -> None:
    a, b = RNG.standard_normal((3, 4, 5)), RNG.standard_normal((4, 5, 3)) if dims != 1 else RNG.standard_normal((5, 2))
    if dims == ([1, 0], [0, 2]):
        b = RNG.standard_normal((4, 2, 3))
    if dims == ([2], [1]):
        b = RNG.standard_normal((2, 5))
    if dims == [[0, 2], [2, 0]]:
        b = RNG.standard_normal((5, 2, 3))
    (ga, gb), out = _grads(lambda x, y: tp.tensordot(x, y, dims), [a, b])
    (ta, tb), want = _torch_grads(lambda x, y: torch.tensordot(x, y, dims), [a, b])
    _close(out, want, "float64", f"tensordot {dims}")
    _close(ga, ta, "float64", "tensordot grad a")
    _close(gb, tb, "float64", "tensordot grad b")
    ints = tp.tensordot(tp.tensor([[1, 2], [3, 4]]), tp.tensor([[5, 6], [7, 8]]), 1)
    assert ints.numpy().tolist() == torch.tensordot(torch.tensor([[1, 2], [3, 4]]),
                                                    torch.tensor([[5, 6], [7, 8]]), 1).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [2.0, 1.0, INF, 0.5])
def test_cdist_values_and_gradients_match_torch(p: float, dtype: str) -> None:
    x1 = RNG.standard_normal((2, 1, 5, 3)).astype(dtype)
    x2 = RNG.standard_normal((3, 4, 3)).astype(dtype)
    x2[0, 1] = x1[0, 0, 2]  # a zero distance: gradient 0 there, as torch
    (g1, g2), out = _grads(lambda a, b: tp.cdist(a, b, p=p), [x1, x2])
    (t1, t2), want = _torch_grads(lambda a, b: torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist"),
                                  [x1, x2])
    _close(out, want, dtype, f"cdist p={p}", scale=3.0)
    _close(g1, t1, dtype, f"cdist grad x1 p={p}", scale=3.0)
    _close(g2, t2, dtype, f"cdist grad x2 p={p}", scale=3.0)


@pytest.mark.parametrize("name", ["lerp", "addcmul", "addcdiv", "logaddexp", "logaddexp2", "logit", "xlogy",
                                  "erfinv", "nanmean", "cdist", "clamp_min"])
def test_integer_inputs_promote_or_are_refused_as_torch(name: str) -> None:
    calls: dict[str, Callable[[Any, Any], Any]] = {
        "lerp": lambda m, i: m.lerp(i, i, 0.5), "addcmul": lambda m, i: m.addcmul(i, i, i, value=2),
        "addcdiv": lambda m, i: m.addcdiv(i, i, i), "logaddexp": lambda m, i: m.logaddexp(i, i),
        "logaddexp2": lambda m, i: m.logaddexp2(i, i), "logit": lambda m, i: m.logit(i),
        "xlogy": lambda m, i: m.xlogy(i, i), "erfinv": lambda m, i: m.erfinv(i - 2),
        "nanmean": lambda m, i: m.nanmean(i), "cdist": lambda m, i: m.cdist(i[None, :, None], i[None, :, None]),
        "clamp_min": lambda m, i: m.clamp_min(i, 1.5),
    }
    values = [1, 2, 3]
    try:
        want = calls[name](torch, torch.tensor(values))
    except (RuntimeError, NotImplementedError):
        with pytest.raises(TensorplayError, match=name):
            calls[name](tp, tp.tensor(values))
        return
    got = calls[name](tp, tp.tensor(values))
    assert str(got.dtype).rsplit(".", 1)[-1] == str(want.dtype).rsplit(".", 1)[-1], (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, equal_nan=True)


def test_bad_arguments_are_tensorplay_errors_naming_the_function() -> None:
    x, i = tp.randn(3, 4), tp.tensor([1, 2, 3])
    cases: list[tuple[Callable[[], Any], str]] = [
        (lambda: x.lerp(x.double(), 0.5), "lerp"), (lambda: x.lerp(x, "a"), "lerp"),  # type: ignore[arg-type]
        (lambda: x.addcmul(x, 3.0), "addcmul"),  # type: ignore[arg-type]
        (lambda: x.addcdiv(x, x, value="2"), "addcdiv"),  # type: ignore[arg-type]
        (lambda: tp.addcdiv(x, i, i), "addcdiv"), (lambda: tp.logaddexp(i, i), "logaddexp"),
        (lambda: x.logit(eps="0.1"), "logit"),  # type: ignore[arg-type]
        (lambda: x.cumprod(5), "cumprod"), (lambda: x.cumprod(1.0), "cumprod"),  # type: ignore[arg-type]
        (lambda: i.nanmean(), "nanmean"), (lambda: x.count_nonzero("a"), "count_nonzero"),  # type: ignore[arg-type]
        (lambda: tp.meshgrid(x, x), "meshgrid"), (lambda: tp.meshgrid(i, x[0]), "meshgrid"),
        (lambda: tp.meshgrid(i, indexing="yx"), "meshgrid"),
        (lambda: tp.tensordot(x, x, 1), "tensordot"), (lambda: tp.tensordot(x, x, 3), "tensordot"),
        (lambda: tp.tensordot(x, x.double(), 0), "tensordot"),
        (lambda: tp.tensordot(x, x, "a"), "tensordot"),  # type: ignore[arg-type]
        (lambda: tp.tensordot(x, x, ([0], [0, 1])), "tensordot"), (lambda: tp.tensordot(x, x, ([0, 0], [0, 0])), "tensordot"),
        (lambda: tp.cdist(x, tp.randn(2, 5)), "cdist"), (lambda: tp.cdist(x, x, p=-1.0), "cdist"),
        (lambda: tp.cdist(x[0], x), "cdist"), (lambda: tp.cdist(x, x.double()), "cdist"),
        (lambda: tp.xlogy(1.0, 2.0), "xlogy"),
    ]
    for call, where in cases:
        with pytest.raises(TensorplayError, match=where):
            call()


def _composite(a: Any, b: Any) -> Any:
    y = tp.logaddexp(a, b) + a.xlogy(b.abs() + 0.5) + tp.lerp(a, b, 0.25) + a.addcdiv(b, b.abs() + 1, value=0.5)
    y = y + (a.sigmoid() * 0.98 + 0.01).logit() + tp.logaddexp2(a, -b) + (b.tanh() * 0.9).erfinv()
    return y.cumprod(-1) + tp.cdist(a, b) + tp.tensordot(a, b.transpose(0, 1), 1) + a.clamp_min(0.1).nansum(0)


def _composite_torch(a: Any, b: Any) -> Any:
    y = torch.logaddexp(a, b) + a.xlogy(b.abs() + 0.5) + torch.lerp(a, b, 0.25) + a.addcdiv(b, b.abs() + 1, value=0.5)
    y = y + (a.sigmoid() * 0.98 + 0.01).logit() + torch.logaddexp2(a, -b) + (b.tanh() * 0.9).erfinv()
    return (y.cumprod(-1) + torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")
            + torch.tensordot(a, b.T, 1) + a.clamp_min(0.1).nansum(0))


def test_compile_grad_vmap_and_jvp_match_eager_and_torch() -> None:
    a, b = RNG.standard_normal((4, 4)), RNG.standard_normal((4, 4))
    eager = _composite(tp.tensor(a), tp.tensor(b))
    _close(eager, _composite_torch(torch.tensor(a), torch.tensor(b)), "float64", "composite eager", scale=10.0)
    np.testing.assert_allclose(tp.compile(_composite)(tp.tensor(a), tp.tensor(b)).numpy(), eager.numpy(),
                               rtol=1e-12, atol=1e-12)

    def loss(x: Any, y: Any) -> Any:
        return _composite(x, y).sum()

    g = tp.func.grad(loss, argnums=(0, 1))(tp.tensor(a), tp.tensor(b))
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    _composite_torch(ta, tb).sum().backward()
    _close(g[0], ta.grad, "float64", "grad a", scale=10.0)
    _close(g[1], tb.grad, "float64", "grad b", scale=10.0)
    gc = tp.compile(tp.func.grad(loss, argnums=(0, 1)))(tp.tensor(a), tp.tensor(b))
    np.testing.assert_allclose(gc[0].numpy(), g[0].numpy(), rtol=1e-10, atol=1e-12)

    def row(x: Any, y: Any) -> Any:
        return (tp.logaddexp(x, y) + x.lerp(y, 0.7) + x.xlogy(y.abs()) + x.cumprod(0) + x.logit(eps=0.2)
                + x.addcmul(x, y) + tp.meshgrid(x, y)[0].sum(1) + y.erfinv().nan_to_num())

    rows = RNG.uniform(-0.9, 0.9, (5, 6)), RNG.uniform(-0.9, 0.9, (5, 6))
    got = tp.func.vmap(row)(tp.tensor(rows[0]), tp.tensor(rows[1]))
    loop = np.stack([row(tp.tensor(r), tp.tensor(s)).numpy() for r, s in zip(*rows)])
    np.testing.assert_allclose(got.numpy(), loop, rtol=1e-12, atol=1e-12)

    def jrow(x: Any, y: Any) -> Any:
        return (x.logaddexp(y) + x.xlogy(y.abs()) + x.cumprod(0) + x.logit(eps=0.2) + x.lerp(y, 0.7)
                + y.erfinv() + x.addcdiv(x, y.abs() + 1))

    def jrow_torch(x: Any, y: Any) -> Any:
        return (x.logaddexp(y) + x.xlogy(y.abs()) + x.cumprod(0) + x.logit(eps=0.2) + x.lerp(y, 0.7)
                + y.erfinv() + x.addcdiv(x, y.abs() + 1))

    tangents = RNG.standard_normal(6), RNG.standard_normal(6)
    _, tangent = tp.func.jvp(jrow, (tp.tensor(rows[0][0]), tp.tensor(rows[1][0])),
                             (tp.tensor(tangents[0]), tp.tensor(tangents[1])))
    _, want = torch.func.jvp(jrow_torch, (torch.tensor(rows[0][0]), torch.tensor(rows[1][0])),
                             (torch.tensor(tangents[0]), torch.tensor(tangents[1])))
    _close(tangent, want, "float64", "jvp", scale=10.0)


def test_onnx_export_of_several_runs_in_onnx_runtime() -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_ort

    def model(a: Any, b: Any) -> Any:
        y = tp.logaddexp(a, b) + a.xlogy(b.abs()) + tp.lerp(a, b, 0.6) + a.addcmul(b, b) + tp.xlogy(2.0, b.abs())
        z = y.cumprod(1) + tp.cdist(a, b, p=1.0) + tp.tensordot(a, b, ([1], [1])) + a.logit(eps=0.1)
        return z + tp.meshgrid(a[0], b[:, 0], indexing="xy")[0] + a.nanmean(0) + tp.logaddexp2(a, b)

    a, b = tp.tensor(RNG.uniform(-2, 2, (5, 5)).astype(np.float32)), tp.tensor(RNG.uniform(-2, 2, (5, 5)).astype(np.float32))
    written = to_onnx(export(model, (a, b)))
    check_written(written)
    names = [i.name for i in written.graph.input if i.name not in {t.name for t in written.graph.initializer}]
    out = run_ort(written, dict(zip(names, (a.numpy(), b.numpy()))))[0]
    assert_matches(out, model(a, b).numpy(), "onnx model")


def test_onnx_export_of_erfinv_matches_in_the_reference_evaluator() -> None:
    """erfinv solves in float64, and ONNX Runtime has no float64 Erf kernel: onnx's reference evaluator runs it."""
    pytest.importorskip("onnx")
    from tensorplay.export import export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_reference

    y = tp.tensor(RNG.uniform(-0.999, 0.999, (4, 6)).astype(np.float32))
    written = to_onnx(export(lambda y: y.erfinv() * 2, (y,)))
    check_written(written)
    (name,) = [i.name for i in written.graph.input if i.name not in {t.name for t in written.graph.initializer}]
    assert_matches(run_reference(written, {name: y.numpy()})[0], torch.erfinv(torch.tensor(y.numpy())).numpy() * 2,
                   "onnx erfinv")


def _sized(x: Any) -> Any:
    return (x.cumprod(1) + tp.nansum(x, 1, keepdim=True) + tp.cdist(x, x) @ x
            + tp.tensordot(x, x, ([0], [0]))[:2, :1] + tp.meshgrid(x[0], x[:, 0], indexing="xy")[0].sum())


def test_compile_follows_changing_sizes() -> None:
    compiled = tp.compile(_sized)
    for n in (5, 7, 9, 7):
        x = tp.tensor(RNG.standard_normal((2, n)))
        np.testing.assert_allclose(compiled(x).numpy(), _sized(x).numpy(), rtol=1e-12, atol=1e-12)


def test_onnx_export_with_a_dynamic_dim() -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import Dim, export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, run_ort

    def model(a: Any, b: Any) -> Any:
        return tp.cdist(a, b, p=INF) + tp.logaddexp(a, b[:1]).sum(1, keepdim=True) + tp.tensordot(a, b, ([1], [1]))

    n = Dim("n", min=2, max=64)
    a, b = tp.randn(4, 3), tp.randn(5, 3)
    written = to_onnx(export(model, (a, b), dynamic_shapes={"a": {0: n}, "b": None}))
    for rows in (2, 9):
        a = tp.randn(rows, 3)
        names = [i.name for i in written.graph.input if i.name not in {t.name for t in written.graph.initializer}]
        assert_matches(run_ort(written, dict(zip(names, (a.numpy(), b.numpy()))))[0], model(a, b).numpy(),
                       f"dynamic onnx model, {rows} rows")


def test_erfinv_second_and_third_derivatives_match_torch() -> None:
    g1 = tp.func.grad(lambda z: z.erfinv())
    g2 = tp.func.grad(g1)
    g3 = tp.func.grad(g2)
    for v in (0.0, 0.3, -0.7, 0.95):
        t = torch.tensor(v, dtype=torch.float64, requires_grad=True)
        (d1,) = torch.autograd.grad(t.erfinv(), t, create_graph=True)
        (d2,) = torch.autograd.grad(d1, t, create_graph=True)
        (d3,) = torch.autograd.grad(d2, t)
        y = tp.tensor(v, dtype=tp.float64)
        np.testing.assert_allclose([float(g1(y)), float(g2(y)), float(g3(y))],
                                   [d1.item(), d2.item(), d3.item()], rtol=1e-13, atol=1e-14, err_msg=str(v))
