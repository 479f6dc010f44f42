"""``F.unfold`` / ``F.fold`` (``nn.Unfold`` / ``nn.Fold``), ``F.adaptive_max_pool1d`` / ``2d`` (the layers
too) and ``F.bilinear`` / ``nn.Bilinear`` against PyTorch: values and gradients in float32 and float64,
odd sizes, padding / stride / dilation combinations, overlapping adaptive windows, copied parameters,
``tp.compile`` and ``vmap`` against a loop, and argument errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tests.torch_cases import assert_values_and_grads_match

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(7)
TOL = {"float32": (1e-5, 1e-5), "float64": (1e-12, 1e-12)}  # (rtol, atol)

WINDOWS: list[dict[str, Any]] = [
    dict(kernel_size=3),
    dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 3)),
    dict(kernel_size=(3, 1), dilation=2, padding=1, stride=(1, 2)),
    dict(kernel_size=2, stride=2),
    dict(kernel_size=(1, 4), padding=(0, 3), stride=(3, 1), dilation=(1, 2)),
]


def _close(got: Any, want: Any, dtype: str) -> None:
    want_np = want.detach().numpy() if hasattr(want, "detach") else want
    got_np = got.detach().numpy() if hasattr(got, "detach") else got
    assert got_np.shape == want_np.shape
    assert str(got_np.dtype) == dtype
    np.testing.assert_allclose(got_np, want_np, rtol=TOL[dtype][0], atol=TOL[dtype][1])


def _grad_check(f_tp: Any, f_torch: Any, arrays: list[np.ndarray[Any, Any]], dtype: str) -> None:
    """Values of ``f`` and the gradients of ``sum(f(*xs) * w)`` against torch autograd."""
    assert_values_and_grads_match(tp, torch, f_tp, f_torch, arrays, dtype, _close, RNG)


# ---- unfold / fold ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("window", WINDOWS)
def test_unfold_and_fold_match_torch(window: dict[str, Any], dtype: str) -> None:
    a = RNG.standard_normal((2, 3, 7, 9))
    _grad_check(lambda x: F.unfold(x, **window), lambda x: TF.unfold(x, **window), [a], dtype)
    cols = TF.unfold(torch.tensor(a), **window)
    _grad_check(lambda x: F.fold(x, (7, 9), **window), lambda x: TF.fold(x, (7, 9), **window),
                [RNG.standard_normal(tuple(cols.shape))], dtype)
    # fold(unfold(x)) multiplies each entry by how many blocks cover it: torch's answer
    _grad_check(lambda x: F.fold(F.unfold(x, **window), (7, 9), **window),
                lambda x: TF.fold(TF.unfold(x, **window), (7, 9), **window), [a], dtype)


def test_unbatched_and_modules_match_torch() -> None:
    a = RNG.standard_normal((4, 5, 6))
    window: dict[str, Any] = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    _grad_check(nn.Unfold(**window), torch.nn.Unfold(**window), [a], "float64")
    cols = RNG.standard_normal(tuple(TF.unfold(torch.tensor(a[None]), **window).shape[1:]))
    _grad_check(nn.Fold((5, 6), **window), torch.nn.Fold((5, 6), **window), [cols], "float64")
    assert repr(nn.Unfold(**window)) == repr(torch.nn.Unfold(**window))
    assert repr(nn.Fold((5, 6), **window)) == repr(torch.nn.Fold((5, 6), **window))
    assert repr(nn.Fold(4, 2)) == repr(torch.nn.Fold(4, 2))


def test_unfold_fold_argument_errors() -> None:
    x = tp.randn(2, 3, 5, 5)
    with pytest.raises(ShapeError, match=r"unfold: expected a 4-d input \[N, C, H, W\] or an unbatched 3-d.*\[5, 5\]"):
        F.unfold(tp.randn(5, 5), 2)
    with pytest.raises(ShapeError, match=r"unfold: the spatial size \[5, 5\] with padding \[0, 0\] is too small "
                                         r"for kernel_size \[6, 2\]"):
        F.unfold(x, (6, 2))
    with pytest.raises(ShapeError, match=r"unfold: dilation must be positive on every spatial axis, got dilation=0"):
        F.unfold(x, 2, dilation=0)
    with pytest.raises(ShapeError, match=r"Unfold: padding must be non-negative.*padding=\(1, -1\)"):
        nn.Unfold(2, padding=(1, -1))
    with pytest.raises(ShapeError, match=r"Unfold: stride has 3 entries"):
        nn.Unfold(2, stride=(1, 1, 1))
    with pytest.raises(ShapeError, match=r"unfold: kernel_size must be an int or a tuple of 2 ints, got 2.5"):
        F.unfold(x, 2.5)  # type: ignore[arg-type]
    with pytest.raises(DTypeError, match=r"unfold: expected a tensorplay Tensor as input, got ndarray"):
        F.unfold(np.zeros((1, 1, 3, 3)), 2)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"fold: expected the size of axis 1 \(10\) to be divisible by kh \* kw = 4"):
        F.fold(tp.randn(2, 10, 16), (5, 5), 2)
    with pytest.raises(ShapeError, match=r"fold: expected 16 blocks .* output_size \[5, 5\].* got 15"):
        F.fold(tp.randn(2, 12, 15), (5, 5), 2)
    with pytest.raises(ShapeError, match=r"Fold: output_size must be positive on every spatial axis"):
        nn.Fold((0, 4), 2)
    with pytest.raises(ShapeError, match=r"Fold: expected a 3-d input \[N, C \* kh \* kw, L\] or an unbatched"):
        nn.Fold(4, 2)(tp.randn(1, 2, 4, 9))
    bads: list[dict[str, Any]] = [dict(kernel_size=(6, 2)), dict(kernel_size=2, dilation=0)]
    for bad in bads:  # torch refuses these too
        with pytest.raises(RuntimeError):
            TF.unfold(torch.zeros(2, 3, 5, 5), **bad)


# ---- adaptive max pooling -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n, out", [(7, 3), (10, 4), (5, 5), (3, 5), (9, 1), (11, 6)])
def test_adaptive_max_pool1d_matches_torch(n: int, out: int, dtype: str) -> None:
    a = RNG.standard_normal((2, 3, n))
    _grad_check(lambda x: F.adaptive_max_pool1d(x, out), lambda x: TF.adaptive_max_pool1d(x, out), [a], dtype)
    _grad_check(nn.AdaptiveMaxPool1d(out), torch.nn.AdaptiveMaxPool1d(out), [a[0]], dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("size, out", [((7, 5), (3, 2)), ((10, 9), 4), ((5, 6), (None, 4)), ((3, 8), (5, 3)),
                                       ((6, 7), 1)])
def test_adaptive_max_pool2d_matches_torch(size: tuple[int, int], out: Any, dtype: str) -> None:
    a = RNG.standard_normal((2, 3) + size)
    _grad_check(lambda x: F.adaptive_max_pool2d(x, out), lambda x: TF.adaptive_max_pool2d(x, out), [a], dtype)
    _grad_check(nn.AdaptiveMaxPool2d(out), torch.nn.AdaptiveMaxPool2d(out), [a[1]], dtype)


def test_adaptive_max_pool_nan_repr_and_errors() -> None:
    a = RNG.standard_normal((1, 2, 7))
    a[0, 1, 3] = np.nan
    np.testing.assert_array_equal(F.adaptive_max_pool1d(tp.tensor(a), 3).numpy(),
                                  TF.adaptive_max_pool1d(torch.tensor(a), 3).numpy())
    assert repr(nn.AdaptiveMaxPool2d((2, None))) == repr(torch.nn.AdaptiveMaxPool2d((2, None)))
    with pytest.raises(ArgumentError, match=r"adaptive_max_pool2d: return_indices=True is not supported"):
        F.adaptive_max_pool2d(tp.randn(1, 4, 4), 2, return_indices=True)
    with pytest.raises(ArgumentError, match=r"AdaptiveMaxPool1d: return_indices=True is not supported"):
        nn.AdaptiveMaxPool1d(2, return_indices=True)
    with pytest.raises(ShapeError, match=r"adaptive_max_pool1d: output sizes must be positive ints or None, got 0"):
        F.adaptive_max_pool1d(tp.randn(1, 4, 4), 0)
    with pytest.raises(ShapeError, match=r"AdaptiveMaxPool2d: output_size must be an int or 2 ints"):
        nn.AdaptiveMaxPool2d((1, 2, 3))
    with pytest.raises(ShapeError, match=r"adaptive_max_pool2d: expected an input \[\*lead, C, H, W\] with at "
                                         r"least 3 axes, got shape \[4, 4\]"):
        F.adaptive_max_pool2d(tp.randn(4, 4), 2)
    with pytest.raises(ShapeError, match=r"adaptive_max_pool1d: cannot pool an empty axis"):
        F.adaptive_max_pool1d(tp.randn(2, 0), 2)


# ---- bilinear -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("lead", [(5,), (2, 3), ()])
def test_bilinear_matches_torch(lead: tuple[int, ...], dtype: str) -> None:
    x1, x2 = RNG.standard_normal(lead + (3,)), RNG.standard_normal(lead + (4,))
    w, b = RNG.standard_normal((5, 3, 4)), RNG.standard_normal(5)
    _grad_check(F.bilinear, TF.bilinear, [x1, x2, w, b], dtype)
    _grad_check(lambda p, q, v: F.bilinear(p, q, v), lambda p, q, v: TF.bilinear(p, q, v), [x1, x2, w], dtype)


def test_bilinear_module_with_copied_parameters() -> None:
    ours, theirs = nn.Bilinear(3, 4, 2, dtype="float64"), torch.nn.Bilinear(3, 4, 2, dtype=torch.float64)
    ours.load_state_dict({k: tp.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x1, x2 = RNG.standard_normal((6, 3)), RNG.standard_normal((6, 4))
    _grad_check(ours, theirs, [x1, x2], "float64")
    ours(tp.tensor(x1), tp.tensor(x2)).sum().backward()
    theirs(torch.tensor(x1), torch.tensor(x2)).sum().backward()
    _close(ours.weight.grad, theirs.weight.grad, "float64")
    _close(ours.bias.grad, theirs.bias.grad, "float64")
    assert repr(nn.Bilinear(3, 4, 2, bias=False)) == repr(torch.nn.Bilinear(3, 4, 2, bias=False))
    assert nn.Bilinear(3, 4, 2, bias=False).bias is None


def test_bilinear_init_bound() -> None:
    m = nn.Bilinear(16, 3, 400)
    bound = 1 / 4.0
    for p in (m.weight.detach().numpy(), m.bias.detach().numpy()):
        assert p.min() >= -bound and p.max() <= bound
        assert p.min() < -0.9 * bound and p.max() > 0.9 * bound  # the whole interval, not a narrower one
    assert tuple(m.weight.shape) == tuple(torch.nn.Bilinear(16, 3, 400).weight.shape)


def test_bilinear_errors() -> None:
    w = tp.randn(5, 3, 4)
    with pytest.raises(ShapeError, match=r"bilinear: expected input1 \[\*, 3\].* got shape \[2, 4\]"):
        F.bilinear(tp.randn(2, 4), tp.randn(2, 4), w)
    with pytest.raises(ShapeError, match=r"bilinear: expected input2 \[\*, 4\].* got shape \[2, 3\]"):
        F.bilinear(tp.randn(2, 3), tp.randn(2, 3), w)
    with pytest.raises(ShapeError, match=r"bilinear: input1 and input2 must have the same leading shape"):
        F.bilinear(tp.randn(2, 3), tp.randn(3, 4), w)
    with pytest.raises(ShapeError, match=r"bilinear: expected a 3-d weight"):
        F.bilinear(tp.randn(2, 3), tp.randn(2, 4), tp.randn(3, 4))
    with pytest.raises(ShapeError, match=r"bilinear: expected a bias of shape \[5\].* got \[4\]"):
        F.bilinear(tp.randn(2, 3), tp.randn(2, 4), w, tp.randn(4))
    with pytest.raises(ShapeError, match=r"Bilinear: in2_features must be an int, got float 2.5"):
        nn.Bilinear(3, 2.5, 4)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"Bilinear: expected input1 \[\*, 3\]"):
        nn.Bilinear(3, 4, 2)(tp.randn(2, 4), tp.randn(2, 4))


# ---- compile and vmap ---------------------------------------------------------------------------------------

def _model(x: Any, y: Any, w: Any) -> Any:
    cols = F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    back = F.fold(cols, (5, 7), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    pooled = F.adaptive_max_pool2d(back, (3, 4))  # [N, C, 3, 4]
    flat = pooled.reshape(pooled.shape[0], -1)
    return F.bilinear(flat, y, w)


def _model_torch(x: Any, y: Any, w: Any) -> Any:
    cols = TF.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    back = TF.fold(cols, (5, 7), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    pooled = TF.adaptive_max_pool2d(back, (3, 4))
    return TF.bilinear(pooled.reshape(pooled.shape[0], -1), y, w)


def test_compile_grad_and_vmap_match_eager_loop_and_torch() -> None:
    a, b, w = RNG.standard_normal((3, 2, 5, 7)), RNG.standard_normal((3, 4)), RNG.standard_normal((2, 24, 4))
    args = [tp.tensor(v) for v in (a, b, w)]
    eager = _model(*args)
    _close(eager, _model_torch(*[torch.tensor(v) for v in (a, b, w)]), "float64")
    np.testing.assert_allclose(tp.compile(_model)(*args).numpy(), eager.numpy(), rtol=1e-12, atol=1e-12)
    mapped = tp.func.vmap(lambda x, y: _model(x[None], y[None], args[2])[0])(args[0], args[1])
    loop = np.stack([_model(args[0][i:i + 1], args[1][i:i + 1], args[2]).numpy()[0] for i in range(3)])
    np.testing.assert_allclose(mapped.numpy(), loop, rtol=1e-12, atol=1e-12)

    tx = torch.tensor(a, requires_grad=True)
    _model_torch(tx, torch.tensor(b), torch.tensor(w)).sum().backward()

    def loss(x: Any) -> Any:
        return _model(x, args[1], args[2]).sum()

    _close(tp.func.grad(loss)(args[0]), tx.grad, "float64")
    np.testing.assert_allclose(tp.compile(tp.func.grad(loss))(args[0]).numpy(), tx.grad.numpy(), rtol=1e-10,
                               atol=1e-12)
    net = nn.Sequential(nn.Unfold(2, padding=1), nn.Fold((4, 4), 2, padding=1), nn.AdaptiveMaxPool1d(3))
    c = tp.tensor(RNG.standard_normal((2, 3, 4, 4)))
    np.testing.assert_allclose(tp.compile(net)(c).numpy(), net(c).numpy(), rtol=1e-12, atol=1e-12)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.unfold = nn.Unfold(2, padding=1, stride=(1, 2))
        self.fold = nn.Fold((5, 6), 2, padding=1, stride=(1, 2))
        self.pool = nn.AdaptiveMaxPool2d((3, 4))
        self.bilinear = nn.Bilinear(12, 12, 3)

    def forward(self, x: Any) -> Any:
        y = self.pool(self.fold(self.unfold(x)))
        y = y.reshape(y.shape[0], -1)
        return self.bilinear(y, y * 2.0)


def test_onnx_export_runs_in_onnx_runtime() -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_ort

    model, x = _Net(), tp.randn(2, 1, 5, 6)
    written = to_onnx(export(model, (x,)))
    check_written(written)
    (name,) = [i.name for i in written.graph.input if i.name not in {t.name for t in written.graph.initializer}]
    got = run_ort(written, {name: x.numpy()})[0]
    assert got.shape == (2, 3)
    assert_matches(got, model(x).detach().numpy(), "onnx model")
