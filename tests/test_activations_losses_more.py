"""The activations and losses composed from the primitives (``softplus`` ... ``threshold``, ``prelu``,
``binary_cross_entropy[_with_logits]``, ``smooth_l1_loss``, ``huber_loss``, ``kl_div``, ``cosine_similarity``,
``pairwise_distance``, ``normalize``) and their modules, against PyTorch: values at large ``|x|``, 0, -0, the
kinks, infinities and NaN, gradients (the side a kink takes included), reductions, weight broadcasting, the
dtypes refused, modules with copied parameters and their reprs, and a few under ``tp.compile``, ``vmap``,
``grad`` and ONNX Runtime."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.errors import ArgumentError, DTypeError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = ["float32", "float64"]
TOL = {"float32": dict(rtol=2e-6, atol=2e-6), "float64": dict(rtol=1e-12, atol=1e-12)}

SPECIAL = [0.0, -0.0, 1e-8, -1e-8, 0.25, -0.25, 0.5, -0.5, 1.0, -1.0, 1.5, -2.0, 3.0, -3.0, 2.999, -2.999, 6.0,
           5.5, 6.5, 0.75, 19.9, 20.0, 20.5, -20.5, 40.0, -40.0, 100.0, -100.0, 1e4, -1e4]
NONFINITE = [float("inf"), float("nan"), float("nan")]

# name: (tensorplay function, torch function); each takes one tensor
UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "softplus": (F.softplus, TF.softplus),
    "softplus(beta=2,threshold=5)": (lambda x: F.softplus(x, beta=2.0, threshold=5.0),
                                     lambda x: TF.softplus(x, beta=2.0, threshold=5.0)),
    "softplus(beta=0.5)": (lambda x: F.softplus(x, 0.5), lambda x: TF.softplus(x, 0.5)),
    "elu": (F.elu, TF.elu),
    "elu(alpha=0.5)": (lambda x: F.elu(x, alpha=0.5), lambda x: TF.elu(x, alpha=0.5)),
    "selu": (F.selu, TF.selu),
    "celu": (F.celu, TF.celu),
    "celu(alpha=2)": (lambda x: F.celu(x, alpha=2.0), lambda x: TF.celu(x, alpha=2.0)),
    "relu6": (F.relu6, TF.relu6),
    "hardtanh": (F.hardtanh, TF.hardtanh),
    "hardtanh(-2,3)": (lambda x: F.hardtanh(x, min_val=-2.0, max_val=3.0),
                       lambda x: TF.hardtanh(x, min_val=-2.0, max_val=3.0)),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid),
    "hardswish": (F.hardswish, TF.hardswish),
    "mish": (F.mish, TF.mish),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid),
    "softsign": (F.softsign, TF.softsign),
    "tanhshrink": (F.tanhshrink, TF.tanhshrink),
    "softshrink": (F.softshrink, TF.softshrink),
    "softshrink(1)": (lambda x: F.softshrink(x, lambd=1.0), lambda x: TF.softshrink(x, lambd=1.0)),
    "hardshrink": (F.hardshrink, TF.hardshrink),
    "hardshrink(1)": (lambda x: F.hardshrink(x, lambd=1.0), lambda x: TF.hardshrink(x, lambd=1.0)),
    "threshold(0.5,-2)": (lambda x: F.threshold(x, 0.5, -2.0), lambda x: TF.threshold(x, 0.5, -2.0)),
    "threshold(-1,20)": (lambda x: F.threshold(x, threshold=-1.0, value=20.0),
                         lambda x: TF.threshold(x, threshold=-1.0, value=20.0)),
    "glu": (F.glu, TF.glu),
    "prelu": (lambda x: F.prelu(x, tp.tensor(np.array([0.3], x.dtype.numpy))),
              lambda x: TF.prelu(x, torch.tensor([0.3], dtype=x.dtype))),
}


def _tp(a: np.ndarray[Any, Any], grad: bool = False) -> Any:
    return tp.tensor(a, requires_grad=grad)


def _close(got: Any, want: Any, dtype: str, what: str, scale: float = 1.0) -> None:
    g = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    w = want.detach().numpy()
    assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(g, w, rtol=tol["rtol"] * scale, atol=tol["atol"] * scale, equal_nan=True, err_msg=what)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_values_and_gradients_match_torch(name: str, dtype: str) -> None:
    f, g = UNARY[name]
    # PyTorch's vectorised hardswish gives -inf * 0 = nan at -inf; the function (and its scalar kernel) is 0
    values = np.array(SPECIAL + NONFINITE + ([] if name == "hardswish" else [float("-inf")]), dtype=dtype)
    _close(f(_tp(values)), g(torch.tensor(values)), dtype, f"{name} values")
    if name != "glu":  # glu pairs elements up
        zeros = values == 0
        np.testing.assert_array_equal(np.signbit(f(_tp(values)).numpy()[zeros]),
                                      np.signbit(g(torch.tensor(values)).numpy()[zeros]), err_msg=f"{name}: sign of 0")
    # gradients at finite points (the kinks included), against a non-constant cotangent
    finite = np.array(SPECIAL, dtype=dtype)
    x = _tp(finite, grad=True)
    tx = torch.tensor(finite, requires_grad=True)
    y, ty = f(x), g(tx)
    w = np.linspace(0.5, 1.5, int(np.prod(ty.shape))).astype(dtype).reshape(tuple(ty.shape))
    (y * _tp(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    # PyTorch's hardsigmoid backward multiplies by a float32 1/6 even in float64
    _close(x.grad, tx.grad, dtype, f"{name} gradient", 1e5 if name == "hardsigmoid" and dtype == "float64" else 1.0)
    # gradients at inf, -inf and NaN (which side NaN takes; no 0 * inf from a branch not taken)
    odd = np.array([float("inf"), float("-inf"), float("nan"), 1.0], dtype=dtype)
    x, tx = _tp(odd, grad=True), torch.tensor(odd, requires_grad=True)
    f(x).sum().backward()
    g(tx).sum().backward()
    _close(x.grad, tx.grad, dtype, f"{name} gradient at inf, -inf, nan",
           1e5 if name == "hardsigmoid" and dtype == "float64" else 1.0)


@pytest.mark.parametrize("name", list(UNARY))
def test_integer_and_bool_inputs_follow_torch(name: str) -> None:
    f, g = UNARY[name]
    for arr in (np.array([-7, -2, 0, 1, 3, 4, 8, 30]), np.array([True, False, True, False])):
        try:
            want = g(torch.tensor(arr))
        except (RuntimeError, NotImplementedError):
            with pytest.raises(DTypeError) as info:
                f(_tp(arr))
            assert name.split("(")[0] in str(info.value) and arr.dtype.name in str(info.value), str(info.value)
            continue
        got = f(_tp(arr))
        assert got.dtype.name == str(want.dtype).removeprefix("torch."), (name, got.dtype, want.dtype)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=name)


def test_glu_halves_dim_and_refuses_odd_and_0d() -> None:
    a = np.random.default_rng(0).standard_normal((4, 6, 2))
    for dim in (0, 1, -2):
        _close(F.glu(_tp(a), dim), TF.glu(torch.tensor(a), dim), "float64", f"glu dim={dim}")
    _close(nn.GLU(1)(_tp(a)), torch.nn.GLU(1)(torch.tensor(a)), "float64", "GLU(1)")
    with pytest.raises(ShapeError, match="glu.*even.*5"):
        F.glu(tp.randn(2, 5))
    with pytest.raises(ShapeError, match="glu.*0-d"):
        F.glu(tp.tensor(1.0))


def test_prelu_per_channel_values_and_gradients() -> None:
    rng = np.random.default_rng(1)
    for shape in ((2, 3), (2, 3, 4), (2, 3, 2, 2)):
        a = rng.standard_normal(shape)
        a.flat[0] = 0.0
        w = rng.standard_normal(3)
        x, wt = _tp(a, True), _tp(w, True)
        tx, twt = torch.tensor(a, requires_grad=True), torch.tensor(w, requires_grad=True)
        y, ty = F.prelu(x, wt), TF.prelu(tx, twt)
        _close(y, ty, "float64", f"prelu {shape}")
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        _close(x.grad, tx.grad, "float64", "prelu input grad")
        _close(wt.grad, twt.grad, "float64", "prelu weight grad")
    with pytest.raises(ShapeError, match="prelu.*3 elements.*4 channels"):
        F.prelu(tp.randn(2, 4), tp.randn(3))


def test_bad_arguments_are_argument_errors_naming_the_function() -> None:
    x = tp.randn(3)
    for call, name in ((lambda: F.softshrink(x, -1.0), "softshrink"), (lambda: F.hardshrink(x, -0.5), "hardshrink"),
                       (lambda: F.hardtanh(x, 2.0, 1.0), "hardtanh"), (lambda: F.celu(x, 0.0), "celu"),
                       (lambda: F.smooth_l1_loss(x, x, beta=-1.0), "smooth_l1_loss"),
                       (lambda: F.huber_loss(x, x, delta=0.0), "huber_loss"),
                       (lambda: F.kl_div(x, x, reduction="avg"), "kl_div"),
                       (lambda: F.binary_cross_entropy(x.sigmoid(), x.sigmoid(), reduction="avg"),
                        "binary_cross_entropy")):
        with pytest.raises(ValueError, match=name):
            call()
    with pytest.raises(ArgumentError):
        F.softshrink(x, -1.0)


# ---- losses -------------------------------------------------------------------------------------------

REDUCTIONS = ["mean", "sum", "none"]
RNG = np.random.default_rng(7)
LOGITS = np.concatenate([RNG.standard_normal(10) * 3, [0.0, -0.0, 1e4, -1e4, 50.0, -50.0]]).reshape(4, 4)
TARGETS = np.concatenate([RNG.uniform(size=12), [0.0, 1.0, 1.0, 0.0]]).reshape(4, 4)


def _loss_check(f: Callable[..., Any], g: Callable[..., Any], arrays: list[np.ndarray[Any, Any]], dtype: str,
                what: str, grads: tuple[int, ...] = (0,), scale: float = 1.0) -> None:
    """``f`` (tensorplay) and ``g`` (torch) on ``arrays`` (cast to ``dtype``): values and the gradients of the
    arguments numbered in ``grads``."""
    arrays = [a.astype(dtype) for a in arrays]
    xs = [_tp(a, i in grads) for i, a in enumerate(arrays)]
    txs = [torch.tensor(a, requires_grad=i in grads) for i, a in enumerate(arrays)]
    y, ty = f(*xs), g(*txs)
    _close(y, ty, dtype, f"{what} value", scale)
    cot = np.linspace(0.5, 1.5, int(np.prod(ty.shape))).astype(dtype).reshape(tuple(ty.shape))
    (y * _tp(cot)).sum().backward()
    (ty * torch.tensor(cot)).sum().backward()
    for i in grads:
        _close(xs[i].grad, txs[i].grad, dtype, f"{what} gradient of argument {i}", scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_is_stable_and_matches_torch(reduction: str, dtype: str) -> None:
    w_full, w_row, w_col = RNG.uniform(0.5, 2, (4, 4)), RNG.uniform(0.5, 2, (4,)), RNG.uniform(0.5, 2, (4, 1))
    pos = RNG.uniform(0.5, 3, (4,))
    _loss_check(lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=reduction),
                lambda x, t: TF.binary_cross_entropy_with_logits(x, t, reduction=reduction),
                [LOGITS, TARGETS], dtype, "bce_with_logits", grads=(0, 1))
    for w in (w_full, w_row, w_col):
        _loss_check(lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, w, reduction, _tp(pos.astype(dtype))),
                    lambda x, t, w: TF.binary_cross_entropy_with_logits(x, t, w, reduction=reduction,
                                                                        pos_weight=torch.tensor(pos.astype(dtype))),
                    [LOGITS, TARGETS, w], dtype, f"bce_with_logits weight{w.shape} pos_weight", grads=(0, 1))
    out = F.binary_cross_entropy_with_logits(tp.tensor([1e4, -1e4]), tp.tensor([0.0, 1.0]), reduction="none")
    np.testing.assert_array_equal(out.numpy(), [1e4, 1e4])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_clamps_the_log_and_matches_torch(reduction: str, dtype: str) -> None:
    probs = np.clip(1 / (1 + np.exp(-LOGITS.clip(-30, 30))), 1e-6, 1 - 1e-6)
    w = RNG.uniform(0.5, 2, (4,))
    _loss_check(lambda p, t: F.binary_cross_entropy(p, t, reduction=reduction),
                lambda p, t: TF.binary_cross_entropy(p, t, reduction=reduction), [probs, TARGETS], dtype, "bce",
                grads=(0, 1), scale=10.0)
    _loss_check(lambda p, t, w: F.binary_cross_entropy(p, t, w, reduction),
                lambda p, t, w: TF.binary_cross_entropy(p, t, w, reduction=reduction), [probs, TARGETS, w], dtype,
                "bce weight", grads=(0,), scale=10.0)
    edge = np.array([0.0, 1.0, 0.0, 1.0, 1e-50], dtype=dtype)
    tgt = np.array([1.0, 0.0, 0.0, 1.0, 1.0], dtype=dtype)
    _close(F.binary_cross_entropy(_tp(edge), _tp(tgt), reduction=reduction),
           TF.binary_cross_entropy(torch.tensor(edge), torch.tensor(tgt), reduction=reduction), dtype, "bce at 0, 1")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_smooth_l1_and_huber_match_torch(reduction: str, dtype: str) -> None:
    a = RNG.standard_normal((3, 5)) * 2
    b = a.copy()
    b[0, :4] = a[0, :4] - np.array([0.0, 1.0, -1.0, 0.5])  # differences at the knots of beta=1, delta=1 and 0.5
    for beta in (1.0, 0.5, 0.0, 2.5):
        _loss_check(lambda x, t: F.smooth_l1_loss(x, t, reduction, beta),
                    lambda x, t: TF.smooth_l1_loss(x, t, reduction=reduction, beta=beta), [a, b], dtype,
                    f"smooth_l1_loss beta={beta}", grads=(0, 1))
    for delta in (1.0, 0.5, 3.0):
        _loss_check(lambda x, t: F.huber_loss(x, t, reduction, delta),
                    lambda x, t: TF.huber_loss(x, t, reduction=reduction, delta=delta), [a, b], dtype,
                    f"huber_loss delta={delta}", grads=(0, 1))


@contextlib.contextmanager
def _no_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
def test_kl_div_matches_torch(reduction: str, dtype: str) -> None:
    logp = np.log(RNG.dirichlet(np.ones(5), size=3))
    q = RNG.dirichlet(np.ones(5), size=3)
    q[0, 0] = 0.0  # 0 log 0 = 0
    _loss_check(lambda x, t: F.kl_div(x, t, reduction=reduction),
                lambda x, t: TF.kl_div(x, t, reduction=reduction), [logp, q], dtype, "kl_div", grads=(0,))
    _loss_check(lambda x, t: F.kl_div(x, t, reduction, log_target=True),
                lambda x, t: TF.kl_div(x, t, reduction=reduction, log_target=True), [logp, np.log(q + 0.1)], dtype,
                "kl_div log_target", grads=(0, 1))
    _loss_check(lambda x, t: F.kl_div(x, t, reduction=reduction),
                lambda x, t: TF.kl_div(x, t, reduction=reduction), [logp, q[:1]], dtype, "kl_div broadcast")
    with pytest.warns(UserWarning, match="kl_div: reduction='mean'") if reduction == "mean" else _no_warning():
        F.kl_div(_tp(logp), _tp(q), reduction=reduction)


@pytest.mark.parametrize("dtype", DTYPES)
def test_distances_match_torch(dtype: str) -> None:
    a, b = RNG.standard_normal((4, 3, 5)), RNG.standard_normal((4, 3, 5))
    a[0, :, 0] = 0.0  # a zero vector along dim 1
    for dim in (1, 0, -1):
        _loss_check(lambda x, y: F.cosine_similarity(x, y, dim), lambda x, y: TF.cosine_similarity(x, y, dim),
                    [a, b], dtype, f"cosine_similarity dim={dim}", grads=(1,) if dim == 1 else (0, 1), scale=5.0)
    _loss_check(lambda x, y: F.cosine_similarity(x, y, dim=-1), lambda x, y: TF.cosine_similarity(x, y, dim=-1),
                [a, b[0, 0]], dtype, "cosine_similarity broadcast", grads=(0, 1), scale=5.0)
    for p in (2.0, 1.0, 3.0):
        for keepdim in (False, True):
            _loss_check(lambda x, y: F.pairwise_distance(x, y, p, keepdim=keepdim),
                        lambda x, y: TF.pairwise_distance(x, y, p, keepdim=keepdim), [a, b], dtype,
                        f"pairwise_distance p={p} keepdim={keepdim}", grads=(0, 1), scale=5.0)
    for p, dim in ((2.0, 1), (1.0, -1), (3.0, 0)):
        _loss_check(lambda x: F.normalize(x, p, dim), lambda x: TF.normalize(x, p, dim), [a], dtype,
                    f"normalize p={p} dim={dim}", scale=5.0)


LOSS_DTYPE_CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "binary_cross_entropy_with_logits": (F.binary_cross_entropy_with_logits, TF.binary_cross_entropy_with_logits),
    "binary_cross_entropy": (F.binary_cross_entropy, TF.binary_cross_entropy),
    "smooth_l1_loss": (F.smooth_l1_loss, TF.smooth_l1_loss),
    "huber_loss": (F.huber_loss, TF.huber_loss),
    "kl_div": (F.kl_div, TF.kl_div),
    "cosine_similarity": (lambda a, b: F.cosine_similarity(a, b, 0), lambda a, b: TF.cosine_similarity(a, b, 0)),
    "pairwise_distance": (F.pairwise_distance, TF.pairwise_distance),
}


@pytest.mark.parametrize("name", list(LOSS_DTYPE_CASES))
def test_loss_dtypes_follow_torch(name: str) -> None:
    f, g = LOSS_DTYPE_CASES[name]
    arrays = {"int64": np.array([0, 1, 1]), "float32": np.array([0.25, 0.5, 0.75], np.float32),
              "float64": np.array([0.25, 0.5, 0.75]), "bool": np.array([False, True, True])}
    for da in arrays:
        for db in arrays:
            a, b = arrays[da], arrays[db]
            try:
                want = g(torch.tensor(a), torch.tensor(b))
            except (RuntimeError, NotImplementedError):
                with pytest.raises(DTypeError) as info:
                    f(_tp(a), _tp(b))
                assert name in str(info.value), str(info.value)
                continue
            got = f(_tp(a), _tp(b))
            assert got.dtype.name == str(want.dtype).removeprefix("torch."), (name, da, db, got.dtype, want.dtype)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6, err_msg=f"{name} {da} {db}")


def test_losses_at_infinities_and_nan_match_torch() -> None:
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 2.0, -1e4])
    t = np.array([0.3, 0.3, 0.5, 0.0, 1.0, 0.2])
    for name in ("binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "kl_div"):
        _loss_check(lambda a, b: getattr(F, name)(a, b, reduction="none"),
                    lambda a, b: getattr(TF, name)(a, b, reduction="none"), [x, t], "float64", name,
                    grads=(0,) if name == "kl_div" else (0, 1))


def test_bce_refuses_probabilities_outside_0_1_eagerly() -> None:
    for bad in (1.5, -0.1, float("nan")):
        with pytest.raises(ArgumentError, match="binary_cross_entropy: all elements of input should be between 0 and 1"):
            F.binary_cross_entropy(tp.tensor([0.5, bad]), tp.tensor([0.0, 1.0]))
        with pytest.raises(RuntimeError, match="between 0 and 1"):
            TF.binary_cross_entropy(torch.tensor([0.5, bad]), torch.tensor([0.0, 1.0]))


def test_integer_bounds_of_hardtanh_and_threshold_truncate_as_torch() -> None:
    a = np.arange(-3, 4)
    for lo, hi in ((-1.5, 2.5), (-0.5, 0.5), (-2.7, 1.7)):
        got, want = F.hardtanh(_tp(a), lo, hi), TF.hardtanh(torch.tensor(a), lo, hi)
        assert got.dtype.name == "int64" and got.tolist() == want.tolist(), (lo, hi)
    for th, val in ((-0.5, 2.7), (0.5, -1.5), (1.9, 7.9)):
        got, want = F.threshold(_tp(a), th, val), TF.threshold(torch.tensor(a), th, val)
        assert got.dtype.name == "int64" and got.tolist() == want.tolist(), (th, val)


def test_loss_shapes_are_checked() -> None:
    with pytest.raises(ShapeError, match="binary_cross_entropy_with_logits.*target shape"):
        F.binary_cross_entropy_with_logits(tp.randn(3, 2), tp.rand(3))
    with pytest.raises(ShapeError, match="pos_weight.*does not broadcast"):
        F.binary_cross_entropy_with_logits(tp.randn(3, 2), tp.rand(3, 2), pos_weight=tp.rand(3))
    with pytest.raises(ShapeError, match="smooth_l1_loss"):
        F.smooth_l1_loss(tp.randn(3, 2), tp.randn(2))


# ---- modules ------------------------------------------------------------------------------------------

MODULES: list[tuple[Callable[[], Any], Callable[[], Any]]] = [
    (nn.Softplus, torch.nn.Softplus), (lambda: nn.Softplus(2.0, 10.0), lambda: torch.nn.Softplus(2.0, 10.0)),
    (nn.ELU, torch.nn.ELU), (lambda: nn.ELU(0.3, True), lambda: torch.nn.ELU(0.3, True)),
    (nn.SELU, torch.nn.SELU), (lambda: nn.CELU(1.5), lambda: torch.nn.CELU(1.5)), (nn.ReLU6, torch.nn.ReLU6),
    (lambda: nn.ReLU6(inplace=True), lambda: torch.nn.ReLU6(inplace=True)), (nn.Hardtanh, torch.nn.Hardtanh),
    (lambda: nn.Hardtanh(-0.5, 2.0), lambda: torch.nn.Hardtanh(-0.5, 2.0)), (nn.Hardsigmoid, torch.nn.Hardsigmoid),
    (nn.Hardswish, torch.nn.Hardswish), (nn.Mish, torch.nn.Mish), (nn.LogSigmoid, torch.nn.LogSigmoid),
    (nn.Softsign, torch.nn.Softsign), (nn.GLU, torch.nn.GLU), (nn.Tanhshrink, torch.nn.Tanhshrink),
    (nn.Softshrink, torch.nn.Softshrink), (lambda: nn.Hardshrink(0.25), lambda: torch.nn.Hardshrink(0.25)),
    (lambda: nn.Threshold(0.1, 20.0), lambda: torch.nn.Threshold(0.1, 20.0)),
    (nn.PReLU, torch.nn.PReLU), (lambda: nn.PReLU(3, 0.1), lambda: torch.nn.PReLU(3, 0.1)),
]


@pytest.mark.parametrize("i", range(len(MODULES)))
def test_modules_match_torch_modules_with_copied_parameters(i: int) -> None:
    make, make_torch = MODULES[i]
    m, tm = make().double(), make_torch().double()
    assert repr(m) == repr(tm)
    state = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    assert set(state) == set(m.state_dict())
    for k, v in state.items():  # same initial values, then random ones copied over
        np.testing.assert_allclose(m.state_dict()[k].numpy(), v, rtol=1e-7)
        new = RNG.standard_normal(v.shape)
        with torch.no_grad():
            tm.state_dict()[k].copy_(torch.tensor(new))
    m.load_state_dict({k: tp.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    a = RNG.standard_normal((2, 3, 4)) * 4
    x, tx = _tp(a, True), torch.tensor(a, requires_grad=True)
    y, ty = m(x), tm(tx.clone())
    _close(y, ty, "float64", repr(m))
    y.sum().backward()
    ty.sum().backward()
    _close(x.grad, tx.grad, "float64", f"{m!r} gradient", 1e5 if isinstance(m, nn.Hardsigmoid) else 1.0)
    for (name, p), (_, tp_) in zip(m.named_parameters(), tm.named_parameters()):
        _close(p.grad, tp_.grad, "float64", f"{m!r} gradient of {name}")


LOSS_MODULES: list[tuple[Callable[[], Any], Callable[[], Any], bool]] = [
    (nn.BCEWithLogitsLoss, torch.nn.BCEWithLogitsLoss, False),
    (lambda: nn.BCEWithLogitsLoss(tp.tensor([1.0, 2.0, 0.5, 1.5]).double(), "sum", tp.tensor([2.0] * 4).double()),
     lambda: torch.nn.BCEWithLogitsLoss(torch.tensor([1.0, 2.0, 0.5, 1.5]).double(), reduction="sum",
                                        pos_weight=torch.tensor([2.0] * 4).double()), False),
    (nn.BCELoss, torch.nn.BCELoss, True),
    (lambda: nn.BCELoss(tp.tensor([1.0, 2.0, 0.5, 1.5]).double(), "none"),
     lambda: torch.nn.BCELoss(torch.tensor([1.0, 2.0, 0.5, 1.5]).double(), reduction="none"), True),
    (lambda: nn.SmoothL1Loss("sum", 0.5), lambda: torch.nn.SmoothL1Loss(reduction="sum", beta=0.5), False),
    (lambda: nn.HuberLoss(delta=0.5), lambda: torch.nn.HuberLoss(delta=0.5), False),
    (lambda: nn.KLDivLoss("batchmean"), lambda: torch.nn.KLDivLoss(reduction="batchmean"), True),
    (lambda: nn.KLDivLoss(log_target=True), lambda: torch.nn.KLDivLoss(log_target=True), False),
    (nn.CosineSimilarity, torch.nn.CosineSimilarity, False),
    (lambda: nn.PairwiseDistance(1.0, keepdim=True), lambda: torch.nn.PairwiseDistance(1.0, keepdim=True), False),
]


@pytest.mark.parametrize("i", range(len(LOSS_MODULES)))
def test_loss_modules_match_torch(i: int) -> None:
    make, make_torch, probs = LOSS_MODULES[i]
    m, tm = make(), make_torch()
    assert repr(m) == repr(tm)
    a = RNG.standard_normal((3, 4))
    b = RNG.uniform(0.05, 0.95, (3, 4))
    if probs:
        a = 1 / (1 + np.exp(-a))
    _close(m(_tp(a), _tp(b)), tm(torch.tensor(a), torch.tensor(b)), "float64", repr(m))


# ---- transforms, compile, ONNX --------------------------------------------------------------------------

def _composite(x: Any) -> Any:
    y = F.softplus(x) + F.elu(x) * F.hardswish(x) + F.mish(x) - F.logsigmoid(x) + F.hardtanh(x, -0.5, 2.0)
    return F.glu(y * F.selu(x), -1) + F.softshrink(F.tanhshrink(x[..., :2]))


def _composite_torch(x: Any) -> Any:
    y = TF.softplus(x) + TF.elu(x) * TF.hardswish(x) + TF.mish(x) - TF.logsigmoid(x) + TF.hardtanh(x, -0.5, 2.0)
    return TF.glu(y * TF.selu(x), -1) + TF.softshrink(TF.tanhshrink(x[..., :2]))


def test_compile_vmap_and_grad_match_eager_and_torch() -> None:
    a = RNG.standard_normal((5, 4)) * 3
    eager = _composite(_tp(a)).numpy()
    _close(_tp(eager), _composite_torch(torch.tensor(a)), "float64", "composite eager")
    np.testing.assert_allclose(tp.compile(_composite)(_tp(a)).numpy(), eager, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tp.func.vmap(_composite)(_tp(a)).numpy(), eager, rtol=1e-12, atol=1e-12)

    def loss(x: Any, t: Any) -> Any:
        return (F.binary_cross_entropy_with_logits(x, t, pos_weight=tp.tensor([2.0, 1.0, 0.5, 3.0]).double())
                + F.huber_loss(x, t, delta=0.5) + F.kl_div(F.logsigmoid(x), t, reduction="batchmean")
                + _composite(x).sum() + F.cosine_similarity(x, t).sum())

    def loss_torch(x: Any, t: Any) -> Any:
        return (TF.binary_cross_entropy_with_logits(x, t, pos_weight=torch.tensor([2.0, 1.0, 0.5, 3.0]).double())
                + TF.huber_loss(x, t, delta=0.5) + TF.kl_div(TF.logsigmoid(x), t, reduction="batchmean")
                + _composite_torch(x).sum() + TF.cosine_similarity(x, t).sum())

    t = RNG.uniform(size=(5, 4))
    tx = torch.tensor(a, requires_grad=True)
    loss_torch(tx, torch.tensor(t)).backward()
    g = tp.func.grad(loss)(_tp(a), _tp(t))
    _close(g, tx.grad, "float64", "grad of the losses")
    g_compiled = tp.compile(tp.func.grad(loss))(_tp(a), _tp(t))
    np.testing.assert_allclose(g_compiled.numpy(), g.numpy(), rtol=1e-10, atol=1e-12)
    per_row = tp.func.vmap(lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction="sum")
                           + F.smooth_l1_loss(x, t, beta=0.5) + F.pairwise_distance(x, t))(_tp(a), _tp(t))
    want = torch.stack([TF.binary_cross_entropy_with_logits(torch.tensor(r), torch.tensor(s), reduction="sum")
                        + TF.smooth_l1_loss(torch.tensor(r), torch.tensor(s), beta=0.5)
                        + TF.pairwise_distance(torch.tensor(r), torch.tensor(s)) for r, s in zip(a, t)])
    _close(per_row, want, "float64", "vmap of per-row losses")


def test_jvp_of_an_activation_matches_torch() -> None:
    a, v = RNG.standard_normal(6) * 3, RNG.standard_normal(6)
    _, tangent = tp.func.jvp(lambda x: F.mish(x) + F.celu(x, 0.5) + F.hardswish(x), (_tp(a),), (_tp(v),))
    _, want = torch.func.jvp(lambda x: TF.mish(x) + TF.celu(x, 0.5) + TF.hardswish(x),
                             (torch.tensor(a),), (torch.tensor(v),))
    _close(tangent, want, "float64", "jvp")


def test_onnx_export_of_a_model_with_several_runs_in_onnx_runtime() -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_ort

    model = nn.Sequential(nn.Linear(6, 8), nn.Mish(), nn.Linear(8, 8), nn.Hardswish(), nn.PReLU(1), nn.GLU(),
                          nn.Softplus(2.0), nn.ELU(), nn.LogSigmoid(), nn.Hardtanh(-3.0, 0.0), nn.SELU(),
                          nn.Softshrink(), nn.Threshold(-2.0, 5.0))
    x = tp.randn(5, 6) * 3
    written = to_onnx(export(model, (x,)))
    check_written(written)
    (name,) = [i.name for i in written.graph.input if i.name not in {t.name for t in written.graph.initializer}]
    assert_matches(run_ort(written, {name: x.numpy()})[0], model(x).detach().numpy(), "onnx model")


def test_glu_exports_with_a_dynamic_even_dim() -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import Dim, export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, run_ort

    k = Dim("k", min=1, max=32)
    ep = export(lambda x: F.glu(x, 0), (tp.randn(4, 3),), dynamic_shapes={"x": {0: 2 * k}})
    written = to_onnx(ep)
    for n in (2, 10, 64):
        x = tp.randn(n, 3)
        want = TF.glu(torch.tensor(x.numpy()), 0).numpy()
        np.testing.assert_allclose(ep.module()(x).numpy(), want, rtol=1e-6, atol=1e-6)
        assert_matches(run_ort(written, {written.graph.input[0].name: x.numpy()})[0], want, f"glu at {n}")
