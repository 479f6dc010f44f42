"""torch.func parity for every transform on a suite of functions.

Each function is written once against a functional namespace ``F`` and tensor methods, so
the same source runs with ``tensorplay.nn.functional`` and ``torch.nn.functional``:
an MLP loss, a small conv net, an attention block, a function with an auxiliary output,
and a function differentiated with respect to several arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.func as tpf
from tensorplay.nn import functional as TPF
from tensorplay.testing import assert_close as public_assert_close

torch = pytest.importorskip("torch")
tf = pytest.importorskip("torch.func")
TF = torch.nn.functional

RTOL, ATOL = 2e-4, 2e-5
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


# ---- the suite ----------------------------------------------------------------------------------------

def mlp_loss(F: Any, p: dict[str, Any], x: Any, y: Any) -> Any:
    h = F.linear(x, p["w0"], p["b0"]).tanh()
    return F.cross_entropy(F.linear(h, p["w1"], p["b1"]), y)


def conv_net(F: Any, w: Any, b: Any, v: Any, x: Any) -> Any:
    h = F.conv2d(x, w, b, padding=1).relu()
    h = F.max_pool2d(h, 2)
    h = h.reshape(h.shape[0], -1)
    return F.log_softmax(h @ v, dim=-1).sum() * -0.1


def attention_block(F: Any, x: Any, wq: Any, wk: Any, wv: Any, g: Any, b: Any) -> Any:
    d = x.shape[-1]
    h = F.layer_norm(x, (d,), g, b)
    q, k, v = h @ wq, h @ wk, h @ wv
    att = F.softmax((q @ k.transpose(-1, -2)) * (1.0 / d ** 0.5), dim=-1)
    return ((att @ v + x) ** 2).mean()


def with_aux(F: Any, x: Any) -> Any:
    y = x.sin() * x
    return y.sum(), {"y": y, "norm": (x * x).sum()}


def multi_arg(F: Any, a: Any, b: Any, c: Any) -> Any:
    return (a.sin() * b).sum() + (b @ c).tanh().sum()


def _rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def _f32(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> np.ndarray[Any, Any]:
    return (scale * rng.standard_normal(shape)).astype(np.float32)


def mlp_args(rng: np.random.Generator, n: int = 5) -> tuple[Any, ...]:
    p = {"w0": _f32(rng, 6, 4, scale=0.5), "b0": _f32(rng, 6, scale=0.1),
         "w1": _f32(rng, 3, 6, scale=0.5), "b1": _f32(rng, 3, scale=0.1)}
    return p, _f32(rng, n, 4), rng.integers(0, 3, n)


def conv_args(rng: np.random.Generator, n: int = 2) -> tuple[Any, ...]:
    return _f32(rng, 3, 2, 3, 3, scale=0.3), _f32(rng, 3, scale=0.1), _f32(rng, 27, 4, scale=0.3), _f32(rng, n, 2, 6, 6)


def attention_args(rng: np.random.Generator, t: int = 4, d: int = 6) -> tuple[Any, ...]:
    return (_f32(rng, t, d), _f32(rng, d, d, scale=0.4), _f32(rng, d, d, scale=0.4), _f32(rng, d, d, scale=0.4),
            1.0 + _f32(rng, d, scale=0.1), _f32(rng, d, scale=0.1))


# (name, function, args maker, argnums)
SCALAR_CASES: list[tuple[str, Callable[..., Any], Callable[[np.random.Generator], tuple[Any, ...]], Any]] = [
    ("mlp_loss", mlp_loss, mlp_args, 0),
    ("conv_net", conv_net, conv_args, (0, 2)),
    ("attention_block", attention_block, attention_args, (0, 1, 4)),
    ("multi_arg", multi_arg, lambda r: (_f32(r, 3), _f32(r, 3), _f32(r, 3, 2)), (0, 2)),
]


def to_tp(tree: Any) -> Any:
    def conv(a: Any) -> Any:
        return tp.tensor(a) if isinstance(a, np.ndarray) else a
    return _map(conv, tree)


def to_torch(tree: Any) -> Any:
    def conv(a: Any) -> Any:
        return torch.tensor(a) if isinstance(a, np.ndarray) else a
    return _map(conv, tree)


def _map(fn: Callable[[Any], Any], tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _map(fn, v) for k, v in tree.items()}
    if isinstance(tree, (tuple, list)):
        return type(tree)(_map(fn, v) for v in tree)
    return fn(tree)


def assert_close(ours: Any, theirs: Any, rtol: float = RTOL, atol: float = ATOL) -> None:
    """tensorplay's result against PyTorch's: the same pytree, leaf by leaf the same shape and close values
    (not the dtype: torch.func.jvp of conv_net gives a float64 tangent for a float32 output)."""
    __tracebackhide__ = True
    public_assert_close(ours, theirs, rtol=rtol, atol=atol, check_dtype=False)


def bind(fn: Callable[..., Any], F: Any) -> Callable[..., Any]:
    def f(*args: Any) -> Any:
        return fn(F, *args)
    f.__name__ = fn.__name__
    return f


IDS = [c[0] for c in SCALAR_CASES]


# ---- reverse mode -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,fn,make,argnums", SCALAR_CASES, ids=IDS)
def test_grad_matches_torch(name: str, fn: Any, make: Any, argnums: Any) -> None:
    args = make(_rng())
    ours = tpf.grad(bind(fn, TPF), argnums=argnums)(*to_tp(args))
    theirs = tf.grad(bind(fn, TF), argnums=argnums)(*to_torch(args))
    assert_close(ours, theirs)


@pytest.mark.parametrize("name,fn,make,argnums", SCALAR_CASES, ids=IDS)
def test_grad_and_value_matches_torch(name: str, fn: Any, make: Any, argnums: Any) -> None:
    args = make(_rng())
    ours = tpf.grad_and_value(bind(fn, TPF), argnums=argnums)(*to_tp(args))
    theirs = tf.grad_and_value(bind(fn, TF), argnums=argnums)(*to_torch(args))
    assert_close(ours, theirs)


@pytest.mark.parametrize("name,fn,make,argnums", SCALAR_CASES, ids=IDS)
def test_vjp_matches_torch(name: str, fn: Any, make: Any, argnums: Any) -> None:
    args = make(_rng())
    pos = _float_positions(args, argnums)
    a_tp, a_t = to_tp(args), to_torch(args)
    out, vjp_fn = tpf.vjp(_split(bind(fn, TPF), a_tp, pos), *(a_tp[i] for i in pos))
    out_t, vjp_t = tf.vjp(_split(bind(fn, TF), a_t, pos), *(a_t[i] for i in pos))
    assert_close(out, out_t)
    ct = np.float32(1.7)
    assert_close(vjp_fn(tp.tensor(ct)), vjp_t(torch.tensor(ct)))


def test_vjp_non_scalar_output_and_pytree_cotangents() -> None:
    x = _f32(_rng(), 3, 4)

    def f(F: Any, x: Any) -> Any:
        return {"a": x.sin(), "b": (x * x).sum(-1)}

    out, vjp_fn = tpf.vjp(bind(f, TPF), tp.tensor(x))
    out_t, vjp_t = tf.vjp(bind(f, TF), torch.tensor(x))
    ct = {"a": _f32(_rng(), 3, 4), "b": _f32(_rng(), 3)}
    assert_close(out, out_t)
    assert_close(vjp_fn(to_tp(ct)), vjp_t(to_torch(ct)))


def test_aux_output_matches_torch() -> None:
    x = _f32(_rng(), 5)
    ours = tpf.grad(bind(with_aux, TPF), has_aux=True)(tp.tensor(x))
    theirs = tf.grad(bind(with_aux, TF), has_aux=True)(torch.tensor(x))
    assert_close(ours, theirs)
    value = tpf.grad_and_value(bind(with_aux, TPF), has_aux=True)(tp.tensor(x))
    value_t = tf.grad_and_value(bind(with_aux, TF), has_aux=True)(torch.tensor(x))
    assert_close(value, value_t)
    out, vjp_fn, aux = tpf.vjp(bind(with_aux, TPF), tp.tensor(x), has_aux=True)
    out_t, vjp_t, aux_t = tf.vjp(bind(with_aux, TF), torch.tensor(x), has_aux=True)
    assert_close((out, aux, vjp_fn(tp.tensor(np.float32(1.0)))), (out_t, aux_t, vjp_t(torch.tensor(1.0))))
    jac = tpf.jacrev(bind(with_aux, TPF), has_aux=True)(tp.tensor(x))
    jac_t = tf.jacrev(bind(with_aux, TF), has_aux=True)(torch.tensor(x))
    assert_close(jac, jac_t)
    jac = tpf.jacfwd(bind(with_aux, TPF), has_aux=True)(tp.tensor(x))
    jac_t = tf.jacfwd(bind(with_aux, TF), has_aux=True)(torch.tensor(x))
    assert_close(jac, jac_t)
    out, tan, aux = tpf.jvp(bind(with_aux, TPF), (tp.tensor(x),), (tp.ones(5),), has_aux=True)
    out_t, tan_t, aux_t = tf.jvp(bind(with_aux, TF), (torch.tensor(x),), (torch.ones(5),), has_aux=True)
    assert_close((out, tan, aux), (out_t, tan_t, aux_t))


# ---- forward mode -----------------------------------------------------------------------------------------

def _float_positions(args: tuple[Any, ...], argnums: Any) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else tuple(argnums)


def _tangents(rng: np.random.Generator, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_map(lambda a: _f32(rng, *a.shape) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a, a)
                 for a in args)


def _split(fn: Callable[..., Any], args: tuple[Any, ...], positions: tuple[int, ...]) -> Callable[..., Any]:
    """``fn`` as a function of the arguments at ``positions`` (the others fixed)."""
    def g(*diff: Any) -> Any:
        full = list(args)
        for i, d in zip(positions, diff):
            full[i] = d
        return fn(*full)
    return g


@pytest.mark.parametrize("name,fn,make,argnums", SCALAR_CASES, ids=IDS)
def test_jvp_matches_torch(name: str, fn: Any, make: Any, argnums: Any) -> None:
    rng = _rng()
    args = make(rng)
    pos = _float_positions(args, argnums)
    tans = _tangents(rng, tuple(args[i] for i in pos))
    a_tp, a_t = to_tp(args), to_torch(args)
    ours = tpf.jvp(_split(bind(fn, TPF), a_tp, pos), tuple(a_tp[i] for i in pos), to_tp(tans))
    theirs = tf.jvp(_split(bind(fn, TF), a_t, pos), tuple(a_t[i] for i in pos), to_torch(tans))
    assert_close(ours, theirs)


@pytest.mark.parametrize("name,fn,make,argnums", SCALAR_CASES, ids=IDS)
def test_linearize_matches_torch(name: str, fn: Any, make: Any, argnums: Any) -> None:
    rng = _rng()
    args = make(rng)
    pos = _float_positions(args, argnums)
    a_tp, a_t = to_tp(args), to_torch(args)
    out, jvp_fn = tpf.linearize(_split(bind(fn, TPF), a_tp, pos), *(a_tp[i] for i in pos))
    out_t, jvp_t = tf.linearize(_split(bind(fn, TF), a_t, pos), *(a_t[i] for i in pos))
    assert_close(out, out_t)
    for _ in range(2):  # jvp_fn is reusable
        tans = _tangents(rng, tuple(args[i] for i in pos))
        assert_close(jvp_fn(*to_tp(tans)), jvp_t(*to_torch(tans)))


# ---- Jacobians and Hessians --------------------------------------------------------------------------------

@pytest.mark.parametrize("name,fn,make,argnums", SCALAR_CASES, ids=IDS)
@pytest.mark.parametrize("mode", ["jacrev", "jacfwd"])
def test_jacobians_match_torch(mode: str, name: str, fn: Any, make: Any, argnums: Any) -> None:
    args = make(_rng())
    ours = getattr(tpf, mode)(bind(fn, TPF), argnums=argnums)(*to_tp(args))
    theirs = getattr(tf, mode)(bind(fn, TF), argnums=argnums)(*to_torch(args))
    assert_close(ours, theirs)


def test_jacobians_of_vector_functions_and_pytree_outputs() -> None:
    x, y = _f32(_rng(), 3), _f32(_rng(), 2, 3)

    def f(F: Any, x: Any, y: Any) -> Any:
        return {"u": (y * x).tanh(), "v": (x * x).sum()}

    for mode in ("jacrev", "jacfwd"):
        for argnums in (0, 1, (0, 1)):
            ours = getattr(tpf, mode)(bind(f, TPF), argnums=argnums)(tp.tensor(x), tp.tensor(y))
            theirs = getattr(tf, mode)(bind(f, TF), argnums=argnums)(torch.tensor(x), torch.tensor(y))
            assert_close(ours, theirs)


@pytest.mark.parametrize("chunk_size", [1, 2, 5, None])
def test_jacrev_chunk_size(chunk_size: int | None) -> None:
    x = _f32(_rng(), 7)

    def f(F: Any, x: Any) -> Any:
        return (x[:, None] * x[None, :]).sin()

    ours = tpf.jacrev(bind(f, TPF), chunk_size=chunk_size)(tp.tensor(x))
    theirs = tf.jacrev(bind(f, TF), chunk_size=chunk_size)(torch.tensor(x))
    assert_close(ours, theirs)


def test_hessians_match_torch() -> None:
    rng = _rng()
    x = _f32(rng, 4)

    def f(F: Any, x: Any) -> Any:
        return (x.sin() * x).sum() + (x * x).sum() ** 2

    assert_close(tpf.hessian(bind(f, TPF))(tp.tensor(x)), tf.hessian(bind(f, TF))(torch.tensor(x)), rtol=1e-3)
    # Hessian of the attention block with respect to a small input
    args = attention_args(rng, t=2, d=3)
    ours = tpf.hessian(bind(attention_block, TPF), argnums=0)(*to_tp(args))
    theirs = tf.hessian(bind(attention_block, TF), argnums=0)(*to_torch(args))
    assert_close(ours, theirs, rtol=1e-3, atol=1e-4)
    # several argnums: a nested tuple of blocks
    a, b = _f32(rng, 2), _f32(rng, 3)

    def g(F: Any, a: Any, b: Any) -> Any:
        return ((a[:, None] * b[None, :]).tanh() ** 2).sum()

    ours = tpf.hessian(bind(g, TPF), argnums=(0, 1))(tp.tensor(a), tp.tensor(b))
    theirs = tf.hessian(bind(g, TF), argnums=(0, 1))(torch.tensor(a), torch.tensor(b))
    assert_close(ours, theirs, rtol=1e-3, atol=1e-4)


# ---- vmap and per-sample gradients --------------------------------------------------------------------------

def test_per_sample_gradients_of_the_mlp_match_torch() -> None:
    p, x, y = mlp_args(_rng(), n=6)

    def sample(F: Any, p: Any, x: Any, y: Any) -> Any:
        return mlp_loss(F, p, x[None], y[None])

    ours = tpf.vmap(tpf.grad(bind(sample, TPF)), in_dims=(None, 0, 0))(*to_tp((p, x, y)))
    theirs = tf.vmap(tf.grad(bind(sample, TF)), in_dims=(None, 0, 0))(*to_torch((p, x, y)))
    assert_close(ours, theirs)


def test_per_sample_gradients_of_the_conv_net_match_torch() -> None:
    args = conv_args(_rng(), n=3)

    def sample(F: Any, w: Any, b: Any, v: Any, x: Any) -> Any:
        return conv_net(F, w, b, v, x[None])

    dims = (None, None, None, 0)
    ours = tpf.vmap(tpf.grad(bind(sample, TPF), argnums=(0, 1, 2)), in_dims=dims)(*to_tp(args))
    theirs = tf.vmap(tf.grad(bind(sample, TF), argnums=(0, 1, 2)), in_dims=dims)(*to_torch(args))
    assert_close(ours, theirs)


def test_vmap_of_the_attention_block_matches_torch() -> None:
    rng = _rng()
    args = attention_args(rng)
    xs = _f32(rng, 5, *args[0].shape)
    dims = (0, None, None, None, None, None)
    batch = (xs,) + args[1:]
    assert_close(tpf.vmap(bind(attention_block, TPF), in_dims=dims)(*to_tp(batch)),
                 tf.vmap(bind(attention_block, TF), in_dims=dims)(*to_torch(batch)))
    grads = tpf.vmap(tpf.grad(bind(attention_block, TPF), argnums=(1, 2)), in_dims=dims)(*to_tp(batch))
    grads_t = tf.vmap(tf.grad(bind(attention_block, TF), argnums=(1, 2)), in_dims=dims)(*to_torch(batch))
    assert_close(grads, grads_t)


def test_vmap_of_multi_arg_and_aux_functions_matches_torch() -> None:
    rng = _rng()
    a, b, c = _f32(rng, 4, 3), _f32(rng, 3), _f32(rng, 3, 2, 4)
    dims = (0, None, 2)
    assert_close(tpf.vmap(bind(multi_arg, TPF), in_dims=dims)(*to_tp((a, b, c))),
                 tf.vmap(bind(multi_arg, TF), in_dims=dims)(*to_torch((a, b, c))))
    x = _f32(rng, 4, 5)
    ours = tpf.vmap(tpf.grad(bind(with_aux, TPF), has_aux=True))(tp.tensor(x))
    grads, aux = ours
    grads_t, aux_t = tf.vmap(tf.grad(bind(with_aux, TF), has_aux=True))(torch.tensor(x))
    assert_close(grads, grads_t)
    assert_close(aux["y"], aux_t["y"])


def test_jacrev_and_jacfwd_of_vmap_match_torch() -> None:
    x = _f32(_rng(), 3, 4)

    def f(F: Any, r: Any) -> Any:
        return (r.sin() * r.sum()).tanh()

    for mode in ("jacrev", "jacfwd"):
        ours = getattr(tpf, mode)(tpf.vmap(bind(f, TPF)))(tp.tensor(x))
        theirs = getattr(tf, mode)(tf.vmap(bind(f, TF)))(torch.tensor(x))
        assert_close(ours, theirs)
