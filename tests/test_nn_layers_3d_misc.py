"""3-d pools / norms / transposed convolution and the smaller layers (Softmin, Softmax2d, LPPool, LocalResponseNorm,
ChannelShuffle, CircularPad, UpsamplingNearest2d / Bilinear2d, RReLU, AlphaDropout, FeatureAlphaDropout) against
PyTorch: values and input / parameter gradients in float32 and float64, odd sizes, padding / stride / ceil_mode
variants, unbatched inputs, train vs eval running statistics, state-dict keys, reprs, statistics of the random
layers (fresh draws eagerly and under ``tp.compile``), ``tp.compile``, ``tp.func.grad``, ``tp.func.vmap`` and
argument errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.errors import ArgumentError, DTypeError, ShapeError, TensorplayError
from tests.torch_cases import assert_values_and_grads_match

torch = pytest.importorskip("torch")
TF = torch.nn.functional
TN = torch.nn
RNG = np.random.default_rng(11)
TOL = {"float32": (2e-5, 2e-5), "float64": (1e-11, 1e-11)}
DTYPES = ["float32", "float64"]


def _close(got: Any, want: Any, dtype: str) -> None:
    got_np = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    want_np = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert got_np.shape == want_np.shape
    assert str(got_np.dtype) == dtype
    np.testing.assert_allclose(got_np, want_np, rtol=TOL[dtype][0], atol=TOL[dtype][1])


def _check(f_tp: Any, f_torch: Any, arrays: list[np.ndarray[Any, Any]], dtype: str,
           params: tuple[Any, Any] | None = None) -> None:
    """Values of ``f`` and the gradients of ``sum(f(*xs) * w)`` in the inputs (and the modules' parameters)."""
    assert_values_and_grads_match(tp, torch, f_tp, f_torch, arrays, dtype, _close, RNG)
    if params is not None:
        ours, theirs = dict(params[0].named_parameters()), dict(params[1].named_parameters())
        assert set(ours) == set(theirs)
        for name in ours:
            _close(ours[name].grad, theirs[name].grad, dtype)


def _twin(ours: Any, theirs: Any, dtype: str) -> tuple[Any, Any]:
    """``ours`` loaded with ``theirs``' state dict (the same keys), both in ``dtype``."""
    theirs = theirs.to(getattr(torch, dtype))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict({k: tp.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    if dtype == "float64":
        ours = ours.double()
    return ours, theirs


# ---- 3-d pools ---------------------------------------------------------------------------------------------

POOLS: list[dict[str, Any]] = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 2, 1), stride=(2, 3, 2), padding=(1, 0, 0), ceil_mode=True),  # a last window dropped
    dict(kernel_size=(2, 3, 3), stride=(3, 2, 2), padding=(0, 1, 1), ceil_mode=True),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("window", POOLS)
def test_max_and_avg_pool3d_match_torch(window: dict[str, Any], dtype: str) -> None:
    a = RNG.standard_normal((2, 3, 5, 6, 7))
    _check(lambda x: F.max_pool3d(x, **window), lambda x: TF.max_pool3d(x, **window), [a], dtype)
    for include in (True, False):
        _check(lambda x: F.avg_pool3d(x, **window, count_include_pad=include),
               lambda x: TF.avg_pool3d(x, **window, count_include_pad=include), [a], dtype)
    _check(lambda x: F.avg_pool3d(x, **window, divisor_override=5),
           lambda x: TF.avg_pool3d(x, **window, divisor_override=5), [a], dtype)
    _check(nn.MaxPool3d(**window), TN.MaxPool3d(**window), [a[0]], dtype)  # unbatched [C, D, H, W]
    _check(nn.AvgPool3d(**window), TN.AvgPool3d(**window), [a[0]], dtype)


def test_pool3d_reprs_match_torch() -> None:
    for window in POOLS + [dict(kernel_size=(2, 1, 2), stride=1)]:
        assert repr(nn.MaxPool3d(**window)) == repr(TN.MaxPool3d(**window))
        assert repr(nn.AvgPool3d(**window)) == repr(TN.AvgPool3d(**window))
    for size in (2, (3, None, 1), (1, 2, 4)):
        assert repr(nn.AdaptiveAvgPool3d(size)) == repr(TN.AdaptiveAvgPool3d(size))
        assert repr(nn.AdaptiveMaxPool3d(size)) == repr(TN.AdaptiveMaxPool3d(size))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [1, (3, None, 2), (2, 4, 5)])
def test_adaptive_pool3d_match_torch(size: Any, dtype: str) -> None:
    a = RNG.standard_normal((2, 3, 5, 6, 7))
    _check(lambda x: F.adaptive_avg_pool3d(x, size), lambda x: TF.adaptive_avg_pool3d(x, size), [a], dtype)
    _check(lambda x: F.adaptive_max_pool3d(x, size), lambda x: TF.adaptive_max_pool3d(x, size), [a], dtype)
    _check(nn.AdaptiveAvgPool3d(size), TN.AdaptiveAvgPool3d(size), [a[1]], dtype)
    _check(nn.AdaptiveMaxPool3d(size), TN.AdaptiveMaxPool3d(size), [a[1]], dtype)


# ---- 3-d norms and transposed convolution --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm3d_train_and_eval_match_torch(dtype: str) -> None:
    ours, theirs = _twin(nn.BatchNorm3d(3), TN.BatchNorm3d(3), dtype)
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(RNG.uniform(0.5, 2, 3)))
        theirs.bias.copy_(torch.tensor(RNG.standard_normal(3)))
    ours.load_state_dict({k: tp.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    for _ in range(2):
        a = RNG.standard_normal((2, 3, 3, 4, 5)) * 2 + 1
        _check(ours, theirs, [a], dtype, params=(ours, theirs))
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name].numpy(), value.numpy(), rtol=TOL[dtype][0], atol=1e-6)
    ours.eval()
    theirs.eval()
    _check(ours, theirs, [RNG.standard_normal((2, 3, 2, 3, 4))], dtype)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("affine,track", [(False, False), (True, True)])
def test_instance_norm3d_matches_torch(affine: bool, track: bool, dtype: str) -> None:
    ours, theirs = _twin(nn.InstanceNorm3d(4, affine=affine, track_running_stats=track),
                         TN.InstanceNorm3d(4, affine=affine, track_running_stats=track), dtype)
    a = RNG.standard_normal((2, 4, 3, 3, 5)) * 3 - 1
    _check(ours, theirs, [a], dtype, params=(ours, theirs) if affine else None)
    _check(ours, theirs, [a[0]], dtype)  # unbatched
    for name, value in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[name].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
    ours.eval()
    theirs.eval()
    _check(ours, theirs, [a], dtype)
    assert repr(ours) == repr(theirs)


CONVT: list[dict[str, Any]] = [
    dict(kernel_size=2),
    dict(kernel_size=(3, 2, 3), stride=(2, 1, 3), padding=(1, 0, 1), output_padding=(1, 0, 2)),
    dict(kernel_size=3, stride=2, groups=2, dilation=(1, 2, 1), bias=False),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", CONVT)
def test_conv_transpose3d_matches_torch(config: dict[str, Any], dtype: str) -> None:
    torch.manual_seed(0)
    ours, theirs = _twin(nn.ConvTranspose3d(4, 6, **config), TN.ConvTranspose3d(4, 6, **config), dtype)
    assert repr(ours) == repr(theirs)
    a = RNG.standard_normal((2, 4, 3, 4, 3))
    _check(ours, theirs, [a], dtype, params=(ours, theirs))
    _check(ours, theirs, [a[0]], dtype)  # unbatched
    fn = {k: v for k, v in config.items() if k != "bias"}
    kernel = fn.pop("kernel_size")
    groups = fn.get("groups", 1)
    ks = kernel if isinstance(kernel, tuple) else (kernel,) * 3
    wt = RNG.standard_normal((4, 6 // groups) + ks)
    _check(lambda x, w, b: F.conv_transpose3d(x, w, b, **fn), lambda x, w, b: TF.conv_transpose3d(x, w, b, **fn),
           [a, wt, RNG.standard_normal(6)], dtype)


# ---- smaller layers --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_softmin_and_softmax2d_match_torch(dtype: str) -> None:
    a = RNG.standard_normal((2, 3, 4, 5)) * 3
    for dim in (0, 1, -1):
        _check(lambda x: F.softmin(x, dim), lambda x: TF.softmin(x, dim), [a], dtype)
    _check(nn.Softmin(1), TN.Softmin(1), [a], dtype)
    _check(nn.Softmax2d(), TN.Softmax2d(), [a], dtype)
    _check(nn.Softmax2d(), TN.Softmax2d(), [a[0]], dtype)
    assert (repr(nn.Softmin(1)), repr(nn.Softmax2d())) == (repr(TN.Softmin(1)), repr(TN.Softmax2d()))


LP: list[tuple[float, dict[str, Any]]] = [
    (2, dict(kernel_size=3)), (1, dict(kernel_size=2, stride=1)), (3, dict(kernel_size=3, stride=2, ceil_mode=True)),
    (1.5, dict(kernel_size=2, stride=3, ceil_mode=True)), (float("inf"), dict(kernel_size=2, stride=1)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm,window", LP)
def test_lp_pools_match_torch(norm: float, window: dict[str, Any], dtype: str) -> None:
    a = RNG.uniform(0.2, 2, (2, 3, 7, 8))  # positive: a negative base to a fractional power is nan in both
    a3 = RNG.uniform(0.2, 2, (2, 3, 4, 5, 6))
    if norm in (1, 3):
        a = a * np.where(RNG.random(a.shape) < 0.3, -1, 1)
        a3 = a3 * np.where(RNG.random(a3.shape) < 0.3, -1, 1)
    _check(lambda x: F.lp_pool2d(x, norm, **window), lambda x: TF.lp_pool2d(x, norm, **window), [a], dtype)
    _check(lambda x: F.lp_pool1d(x, norm, **window), lambda x: TF.lp_pool1d(x, norm, **window), [a[0]], dtype)
    _check(nn.LPPool2d(norm, **window), TN.LPPool2d(norm, **window), [a[0]], dtype)
    _check(nn.LPPool1d(norm, **window), TN.LPPool1d(norm, **window), [a[0, 0]], dtype)
    _check(nn.LPPool3d(norm, **window), TN.LPPool3d(norm, **window), [a3], dtype)
    assert repr(nn.LPPool2d(norm, **window)) == repr(TN.LPPool2d(norm, **window))


def test_lp_pool_of_a_zero_window_is_zero_with_a_zero_gradient() -> None:
    a = np.zeros((1, 2, 4))
    a[0, 0, 2:] = 1.5
    _check(lambda x: F.lp_pool1d(x, 2, 2), lambda x: TF.lp_pool1d(x, 2, 2), [a], "float64")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,size", [((2, 5, 7), 3), ((2, 6, 3, 4), 4), ((1, 3, 2, 3, 2), 5), ((2, 4, 3), 1)])
def test_local_response_norm_matches_torch(shape: tuple[int, ...], size: int, dtype: str) -> None:
    a = RNG.standard_normal(shape) * 3
    _check(lambda x: F.local_response_norm(x, size, 0.3, 0.6, 2.0),
           lambda x: TF.local_response_norm(x, size, 0.3, 0.6, 2.0), [a], dtype)
    _check(nn.LocalResponseNorm(size), TN.LocalResponseNorm(size), [a], dtype)
    assert repr(nn.LocalResponseNorm(size, k=2.0)) == repr(TN.LocalResponseNorm(size, k=2.0))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,groups", [((2, 6, 3), 3), ((1, 6, 2, 2), 2), ((2, 4, 1, 1, 3), 4), ((3, 5, 2), 1)])
def test_channel_shuffle_matches_torch(shape: tuple[int, ...], groups: int, dtype: str) -> None:
    a = RNG.standard_normal(shape)
    _check(lambda x: F.channel_shuffle(x, groups), lambda x: TF.channel_shuffle(x, groups), [a], dtype)
    _check(nn.ChannelShuffle(groups), TN.ChannelShuffle(groups), [a], dtype)
    assert repr(nn.ChannelShuffle(groups)) == repr(TN.ChannelShuffle(groups))


@pytest.mark.parametrize("dtype", DTYPES)
def test_circular_pads_match_torch(dtype: str) -> None:
    for ours, theirs, shape in [(nn.CircularPad1d((2, 1)), TN.CircularPad1d((2, 1)), (2, 3, 4)),
                                (nn.CircularPad1d(3), TN.CircularPad1d(3), (3, 4)),
                                (nn.CircularPad2d((1, 2, 0, 3)), TN.CircularPad2d((1, 2, 0, 3)), (2, 2, 3, 4)),
                                (nn.CircularPad2d(1), TN.CircularPad2d(1), (2, 3, 4)),
                                (nn.CircularPad3d((1, 0, 2, 1, 1, 1)), TN.CircularPad3d((1, 0, 2, 1, 1, 1)),
                                 (1, 2, 2, 3, 4)),
                                (nn.CircularPad3d(1), TN.CircularPad3d(1), (2, 2, 3, 2))]:
        _check(ours, theirs, [RNG.standard_normal(shape)], dtype)
        assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_fixed_mode_upsampling_matches_torch(dtype: str) -> None:
    a = RNG.standard_normal((2, 3, 4, 5))
    for kw in (dict(scale_factor=2), dict(size=(7, 3)), dict(scale_factor=(1.5, 2.5))):
        for ours, theirs in ((nn.UpsamplingNearest2d(**kw), TN.UpsamplingNearest2d(**kw)),
                             (nn.UpsamplingBilinear2d(**kw), TN.UpsamplingBilinear2d(**kw))):
            _check(ours, theirs, [a], dtype)
            assert repr(ours) == repr(theirs)


# ---- random layers ---------------------------------------------------------------------------------------------

def test_rrelu_eval_matches_torch_and_training_slopes_lie_in_bounds() -> None:
    a = RNG.standard_normal((3, 4, 5))
    for dtype in DTYPES:
        _check(lambda x: F.rrelu(x, 0.1, 0.4), lambda x: TF.rrelu(x, 0.1, 0.4), [a], dtype)
        _check(nn.RReLU().eval(), TN.RReLU().eval(), [a], dtype)
    assert repr(nn.RReLU(0.1, 0.3, True)) == repr(TN.RReLU(0.1, 0.3, True))
    assert repr(nn.RReLU()) == repr(TN.RReLU())
    x = tp.tensor(-np.abs(RNG.standard_normal(20000)) - 0.1, requires_grad=True)
    layer = nn.RReLU(0.2, 0.5)
    y = layer(x)
    slopes = y.detach().numpy() / x.detach().numpy()
    assert slopes.min() >= 0.2 and slopes.max() <= 0.5
    assert abs(slopes.mean() - 0.35) < 0.005 and abs(slopes.var() - 0.3 ** 2 / 12) < 0.001
    y.sum().backward()
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), slopes, rtol=1e-12)  # the gradient is the drawn slope
    assert not np.array_equal(layer(x).detach().numpy(), y.detach().numpy())  # a fresh draw per call
    positive = tp.tensor(np.abs(a) + 0.1)
    np.testing.assert_array_equal(layer(positive).numpy(), positive.numpy())


def test_alpha_dropout_keeps_mean_and_variance_and_drops_p() -> None:
    x = tp.tensor(RNG.standard_normal(200000))
    for p in (0.2, 0.5):
        y = F.alpha_dropout(x, p, training=True).numpy()
        assert abs(y.mean()) < 0.015 and abs(y.var() - 1) < 0.02
        dropped = -1.7580993408473766 / np.sqrt((1.7580993408473766 ** 2 * p + 1) * (1 - p)) * (1 - p)
        assert abs(np.mean(np.isclose(y, dropped)) - p) < 0.01
    np.testing.assert_array_equal(F.alpha_dropout(x, 0.5).numpy(), x.numpy())  # training=False by default
    np.testing.assert_array_equal(F.alpha_dropout(x, 1.0, True).numpy(), TF.alpha_dropout(torch.ones(3), 1.0, True)
                                  .numpy()[:1].repeat(x.shape[0]))
    layer = nn.AlphaDropout(0.3)
    assert repr(layer) == repr(TN.AlphaDropout(0.3)) and repr(nn.FeatureAlphaDropout()) == repr(TN.FeatureAlphaDropout())
    assert not np.array_equal(layer(x).numpy(), layer(x).numpy())
    np.testing.assert_array_equal(layer.eval()(x).numpy(), x.numpy())


def test_alpha_dropout_matches_torch_given_the_mask() -> None:
    """With the mask read off our output, torch's formula (its kept-unit affine map) gives our values and
    gradient: kept units ``a * x + b``, dropped ones a constant with a zero gradient."""
    a = RNG.standard_normal((4, 6, 5))
    x = tp.tensor(a, requires_grad=True)
    y = F.feature_alpha_dropout(x, 0.4, training=True)
    y.sum().backward()
    alpha, p = 1.7580993408473766, 0.4
    scale = 1 / np.sqrt((alpha ** 2 * p + 1) * (1 - p))
    got = y.detach().numpy()
    keep = ~np.isclose(got, -alpha * scale * (1 - p))
    assert (keep.all(axis=2) | (~keep).all(axis=2)).all()  # one draw per [N, C]
    want = np.where(keep, a * scale + alpha * scale * p, -alpha * scale * (1 - p))
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), np.where(keep, scale, 0.0), rtol=1e-12)
    ys = [nn.FeatureAlphaDropout(0.5)(tp.tensor(np.ones((50, 40, 3)))).numpy()[:, :, 0] for _ in range(2)]
    assert not np.array_equal(ys[0], ys[1]) and abs(np.mean(ys[0] < 0) - 0.5) < 0.05


def test_random_layers_draw_fresh_numbers_under_compile() -> None:
    x = tp.tensor(-np.abs(RNG.standard_normal((64, 8))) - 0.1)
    rr: Any = tp.compile(lambda t: F.rrelu(t, 0.1, 0.3, training=True))
    ad: Any = tp.compile(lambda t: F.alpha_dropout(t, 0.5, training=True))
    r1, r2 = rr(x).numpy(), rr(x).numpy()
    assert not np.array_equal(r1, r2)
    slopes = r1 / x.numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    d1, d2 = ad(x).numpy(), ad(x).numpy()
    assert not np.array_equal(d1, d2)
    vm = tp.func.vmap(lambda t: F.rrelu(t, 0.1, 0.3, training=True), randomness="different")(x).numpy()
    rows = vm / x.numpy()  # each sample's slopes: its own draw
    assert rows.min() >= 0.1 and rows.max() <= 0.3 and len({tuple(row) for row in rows[:4]}) == 4


# ---- compile, grad, vmap ------------------------------------------------------------------------------------

def _model(x: Any, w: Any) -> Any:
    y = F.conv_transpose3d(x, w, stride=2, padding=1)
    y = F.max_pool3d(y, 3, 2, 1, ceil_mode=True) + F.avg_pool3d(y, 2, ceil_mode=True, count_include_pad=False)
    y = F.local_response_norm(F.channel_shuffle(y, 2), 3)
    y = F.adaptive_avg_pool3d(y, (2, None, 1)) * F.adaptive_max_pool3d(y, (2, 4, 1))
    return F.softmin(F.lp_pool1d(y.reshape(y.shape[0], 4, -1), 2, 2, ceil_mode=True), -1)


def _torch_model(x: Any, w: Any) -> Any:
    y = TF.conv_transpose3d(x, w, stride=2, padding=1)
    y = TF.max_pool3d(y, 3, 2, 1, ceil_mode=True) + TF.avg_pool3d(y, 2, ceil_mode=True, count_include_pad=False)
    y = TF.local_response_norm(TF.channel_shuffle(y, 2), 3)
    y = TF.adaptive_avg_pool3d(y, (2, None, 1)) * TF.adaptive_max_pool3d(y, (2, 4, 1))
    return TF.softmin(TF.lp_pool1d(y.reshape(y.shape[0], 4, -1), 2, 2, ceil_mode=True), -1)


def test_compile_grad_and_vmap_match_torch() -> None:
    a, wa = RNG.standard_normal((3, 2, 3, 4, 3)), RNG.standard_normal((2, 4, 3, 3, 3))
    x, w = tp.tensor(a), tp.tensor(wa)
    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(wa)
    want = _torch_model(tx, tw)
    compiled = tp.compile(_model)
    for _ in range(2):
        _close(compiled(x, w), want, "float64")
    vmapped = tp.func.vmap(lambda xi: _model(xi[None], w)[0])(x)
    _close(vmapped, want, "float64")
    weights = RNG.standard_normal(tuple(want.shape))
    (want * torch.tensor(weights)).sum().backward()

    def loss(xx: Any) -> Any:
        return (_model(xx, w) * tp.tensor(weights)).sum()

    _close(tp.func.grad(loss)(x), tx.grad, "float64")
    _close(tp.compile(tp.func.grad(loss))(x), tx.grad, "float64")


def test_modules_under_compile_and_vmap() -> None:
    torch.manual_seed(1)
    net, tnet = _twin(nn.Sequential(nn.ConvTranspose3d(2, 4, 2), nn.BatchNorm3d(4), nn.RReLU(), nn.MaxPool3d(2),
                                    nn.InstanceNorm3d(4, affine=True)),
                      TN.Sequential(TN.ConvTranspose3d(2, 4, 2), TN.BatchNorm3d(4), TN.RReLU(), TN.MaxPool3d(2),
                                    TN.InstanceNorm3d(4, affine=True)), "float64")
    net.eval()
    tnet.eval()
    a = RNG.standard_normal((2, 2, 3, 4, 3))
    want = tnet(torch.tensor(a))
    compiled = tp.compile(net)
    for _ in range(2):
        _close(compiled(tp.tensor(a)), want, "float64")
    _close(tp.func.vmap(net)(tp.tensor(a)), want, "float64")  # unbatched samples
    up, tup = nn.Sequential(nn.UpsamplingBilinear2d(scale_factor=2), nn.CircularPad2d(1), nn.Softmax2d()), \
        TN.Sequential(TN.UpsamplingBilinear2d(scale_factor=2), TN.CircularPad2d(1), TN.Softmax2d())
    b = RNG.standard_normal((2, 3, 3, 4))
    _close(tp.compile(up)(tp.tensor(b)), tup(torch.tensor(b)), "float64")


# ---- errors ----------------------------------------------------------------------------------------------------

def test_argument_errors_name_the_layer_and_what_was_given() -> None:
    x5 = tp.randn(1, 2, 4, 4, 4)
    cases: list[tuple[Any, type, str]] = [
        (lambda: F.max_pool3d(x5, 2, padding=2), ShapeError, "max_pool3d: padding should be at most half"),
        (lambda: F.max_pool3d(x5, 2, dilation=2), ShapeError, "max_pool3d: dilation other than 1"),
        (lambda: F.max_pool3d(x5, 2, return_indices=True), ArgumentError, "max_pool3d: return_indices"),
        (lambda: F.max_pool3d(tp.randn(4, 4, 4), 2), ShapeError, r"max_pool3d: expected an input \[\*lead, C, D, H, W\]"),
        (lambda: F.avg_pool3d(x5, 5), ShapeError, "avg_pool3d: the kernel 5 is larger"),
        (lambda: F.avg_pool3d(x5, 2, divisor_override=0), ArgumentError, "avg_pool3d: divisor_override"),
        (lambda: nn.MaxPool3d((2, 2)), ShapeError, "MaxPool3d: kernel_size has 2 entries"),
        (lambda: nn.AvgPool3d(0), ShapeError, "AvgPool3d"),
        (lambda: F.adaptive_avg_pool3d(tp.randn(4, 4, 4), 2), ShapeError, "adaptive_avg_pool3d: expected an input"),
        (lambda: nn.AdaptiveMaxPool3d((2, 2)), ShapeError, "AdaptiveMaxPool3d: output_size must be"),
        (lambda: nn.BatchNorm3d(2)(tp.randn(2, 4, 4)), ShapeError, "BatchNorm3d: expected an input"),
        (lambda: nn.InstanceNorm3d(2)(tp.randn(2, 4, 4)), ShapeError, "InstanceNorm3d: expected a 4-d"),
        (lambda: F.conv_transpose3d(x5, tp.randn(2, 2, 2, 2)), ShapeError, "conv_transpose3d: weight must have 5"),
        (lambda: F.softmin(x5), ArgumentError, "softmin: pass dim="),
        (lambda: F.softmin(tp.tensor([1, 2]), 0), DTypeError, "softmin: input must be a float"),
        (lambda: nn.Softmax2d()(tp.randn(2, 3)), ShapeError, "Softmax2d: expected a 3-d"),
        (lambda: F.lp_pool2d(tp.randn(1, 4, 4), 0, 2), ArgumentError, "lp_pool2d: norm_type must be"),
        (lambda: F.local_response_norm(tp.randn(2, 3), 2), ShapeError, "local_response_norm: expected an input"),
        (lambda: nn.LocalResponseNorm(0), ArgumentError, "LocalResponseNorm: size must be a positive int, got 0"),
        (lambda: F.channel_shuffle(tp.randn(1, 6, 2), 4), ShapeError, r"channel_shuffle: the number of channels \(6\)"),
        (lambda: F.channel_shuffle(tp.randn(6, 2), 2), ShapeError, "channel_shuffle: expected an input"),
        (lambda: nn.ChannelShuffle(0), ArgumentError, "ChannelShuffle: groups must be"),
        (lambda: nn.CircularPad1d(1)(tp.randn(3)), ShapeError, "CircularPad1d: expected a 2-d"),
        (lambda: nn.CircularPad1d(5)(tp.randn(2, 3)), ShapeError, "at most the size"),
        (lambda: nn.UpsamplingBilinear2d(scale_factor=2)(tp.randn(1, 2, 3)), ShapeError, "UpsamplingBilinear2d"),
        (lambda: nn.RReLU(0.5, 0.1), ArgumentError, r"RReLU: lower \(0.5\) must be at most upper \(0.1\)"),
        (lambda: F.rrelu(tp.tensor([1, -2])), DTypeError, "rrelu: input must be a float"),
        (lambda: nn.AlphaDropout(1.5), TensorplayError, "AlphaDropout"),
        (lambda: F.feature_alpha_dropout(tp.randn(3), 0.5, True), ShapeError, "feature_alpha_dropout: Feature"),
    ]
    for thunk, error, message in cases:
        with pytest.raises(error, match=message):
            thunk()
