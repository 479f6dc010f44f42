"""The in-cache stride-1 convolution (``kernels.convolution``'s jitted path calling OpenBLAS's ``gemm``)
and the eager shortcut of the convolution layer (``interpreters.eager.fastpath_conv``): values against
``spec`` and PyTorch, the tape's gradients (fused and ``create_graph``), the nodes recorded, what graph
recorders see, and the errors. Each test checks that the path it is about actually ran."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as TF
from tensorplay.interpreters.eager import fastpath_conv
from tensorplay.interpreters.eager import kernels as K
from tensorplay.interpreters.eager.kernels import _blas
from tensorplay.interpreters.eager.kernels import convolution as conv_mod
from tensorplay.spec.conv import conv_nd_ref, conv_transpose_nd_ref, conv_weight_grad_nd_ref
from tests.helpers import (assert_close_to_scale, count_blas_chunks, count_calls, layer_matches_torch,
                           on_one_then_two_threads)

torch = pytest.importorskip("torch")
TORCH_CONV = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}
TP_CONV = {1: TF.conv1d, 2: TF.conv2d, 3: TF.conv3d}
RNG = np.random.default_rng(11)

if _blas.gemm_address("float32") is None:  # pragma: no cover - a BLAS without 64-bit CBLAS entry points
    pytest.skip("no CBLAS gemm with 64-bit integers in this process", allow_module_level=True)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the in-cache kernels' runs (``forward``, ``backward``) and the eager shortcut's."""
    seen = count_calls(monkeypatch, conv_mod, {"_fused_forward": "forward", "_fused_backward": "backward"})
    seen["shortcut"] = 0
    real_shortcut = fastpath_conv._shortcut

    def shortcut(*args: Any) -> Any:
        made = real_shortcut(*args)
        seen["shortcut"] += made is not None
        return made
    monkeypatch.setattr(fastpath_conv, "_shortcut", shortcut)
    return seen


def _randn(shape: tuple[int, ...], dt: Any) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dt)


def _close(got: Any, want: Any, dt: Any) -> None:
    assert_close_to_scale(got, want, 2e-5 if dt == np.float32 else 1e-11)


# spatial, kernel, padding, dilation, C, O, N
CASES = [
    ((28, 28), (3, 3), (0, 0), (1, 1), 1, 16, 9),     # the CNN's first layer, fewer samples
    ((13, 13), (3, 3), (0, 0), (1, 1), 16, 32, 5),    # its second layer
    ((11, 9), (3, 2), (1, 2), (2, 1), 3, 5, 4),       # odd sizes, padding, dilation
    ((13,), (5,), (2,), (1,), 2, 3, 3),               # 1-d
    ((5, 6, 4), (3, 2, 3), (1, 0, 1), (1, 2, 1), 2, 3, 2),  # 3-d
    ((7, 7), (1, 1), (0, 0), (1, 1), 4, 2, 3),        # 1x1
]


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES)
def test_in_cache_kernels_match_spec(dt: Any, case: Any, ran: dict[str, int]) -> None:
    sp, k, p, d, c, o, n = case
    params: dict[str, Any] = dict(stride=(1,) * len(sp), padding=p, dilation=d, groups=1)
    x = _randn((n, c) + sp, dt)[..., ::-1]  # non-contiguous
    w, b = _randn((o, c) + k, dt), _randn((o,), dt)
    x_before = x.copy()
    y = K.conv_bias_nd(x, w, b, **params)
    want = conv_nd_ref(x, w, **params) + b.reshape((o,) + (1,) * len(sp))
    _close(y, want, dt)
    assert y.dtype == dt
    np.testing.assert_array_equal(x, x_before)  # inputs never mutated
    _close(K.conv_nd(x, w, **params), conv_nd_ref(x, w, **params), dt)
    g = _randn(y.shape, dt)
    _close(K.conv_transpose_nd(g, w, output_padding=(0,) * len(sp), **params),
           conv_transpose_nd_ref(g, w, output_padding=(0,) * len(sp), **params), dt)
    _close(K.conv_weight_grad_nd(x, g, kernel_size=k, **params),
           conv_weight_grad_nd_ref(x, g, kernel_size=k, **params), dt)
    grads = K.conv_backward_nd(x, w, g, True, True, True, **params)
    assert grads is not None
    gx, gw, gb = grads
    _close(gx, conv_transpose_nd_ref(g, w, output_padding=(0,) * len(sp), **params), dt)
    _close(gw, conv_weight_grad_nd_ref(x, g, kernel_size=k, **params), dt)
    _close(gb, g.sum(axis=(0,) + tuple(range(2, g.ndim)), dtype=np.float64), dt)
    only_w = K.conv_backward_nd(x, w, g, False, True, False, **params)
    assert only_w is not None and only_w[0] is None and only_w[2] is None
    _close(only_w[1], gw, dt)
    assert ran["forward"] == 2 and ran["backward"] == 4


def test_in_cache_path_keeps_non_finite_values_where_torch_does(ran: dict[str, int]) -> None:
    x, w, b = _randn((3, 2, 9, 8), np.float64), _randn((4, 2, 3, 3), np.float64), _randn((4,), np.float64)
    x[0, 1, 4, 0] = np.inf  # a column read by one tap column only: the gaps must not spread it
    x[2, 0, 0, 7] = np.nan
    w[3, 1, 0, 0] = -np.inf
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.conv2d(tx, tw, tb, 1, 1)
    g = _randn(tuple(ty.shape), np.float64)
    ty.backward(torch.tensor(g))
    y = K.conv_bias_nd(x, w, b, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    grads = K.conv_backward_nd(x, w, g, True, True, True, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    assert grads is not None
    for got, want in zip((y,) + grads, (ty, tx.grad, tw.grad, tb.grad)):
        assert want is not None and got is not None
        want_np = want.detach().numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want_np))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want_np))
        _close(got, want_np, np.float64)
    assert ran["forward"] == 1 and ran["backward"] == 1


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", CASES[:5])
def test_the_layer_shortcut_matches_torch_with_tape_gradients(dt: Any, with_bias: bool, case: Any,
                                                              ran: dict[str, int]) -> None:
    sp, k, p, d, c, o, n = case
    rank = len(sp)
    x, w, b = _randn((n, c) + sp, dt), _randn((o, c) + k, dt), _randn((o,), dt)
    y, _ = layer_matches_torch(lambda xx, ww, bb: TP_CONV[rank](xx, ww, bb, 1, p, d),
                               lambda xx, ww, bb: TORCH_CONV[rank](xx, ww, bb, 1, p, d), (x, w, b), with_bias,
                               lambda shape: _randn(shape, dt), lambda a, c: _close(a, c, dt))
    assert y._node is not None and y._node.name == ("conv_bias" if with_bias else "conv_nd")
    assert ran["shortcut"] == 1 and ran["forward"] == 1 and ran["backward"] == 1


def test_the_shortcut_agrees_with_the_generic_layer_on_values_and_second_derivatives(ran: dict[str, int]) -> None:
    x, w, b = _randn((3, 2, 7, 6), np.float64), _randn((3, 2, 3, 3), np.float64), _randn((3,), np.float64)

    def run(shortcut: bool) -> list[np.ndarray]:
        tx, tw, tb = (tp.tensor(a, requires_grad=True) for a in (x, w, b))
        if shortcut:
            y = TF.conv2d(tx, tw, tb, 1, 1)
        else:
            y = tp.prefix.conv(tp.eager, tw, tb, tx, 1, 1)  # the generic layer: conv_nd, reshape, add
        loss = (y * y).sum()
        gx, gw, gb = tp.autograd.grad(loss, [tx, tw, tb], create_graph=True)
        (ggw,) = tp.autograd.grad((gx * gx).sum() + gb.sum(), [tw])
        return [y.detach().numpy(), gx.detach().numpy(), gw.detach().numpy(), gb.detach().numpy(), ggw.numpy()]

    for got, want in zip(run(True), run(False)):
        _close(got, want, np.float64)
    assert ran["shortcut"] == 1


def test_without_grad_and_with_frozen_parts(ran: dict[str, int]) -> None:
    x, w, b = _randn((4, 1, 10, 10), np.float32), _randn((5, 1, 3, 3), np.float32), _randn((5,), np.float32)
    with tp.no_grad():
        y = TF.conv2d(tp.tensor(x, requires_grad=True), tp.tensor(w, requires_grad=True), tp.tensor(b))
    assert y._node is None
    tx, tw, tb = tp.tensor(x), tp.tensor(w), tp.tensor(b, requires_grad=True)  # only the bias trains
    y = TF.conv2d(tx, tw, tb)
    y.sum().backward()
    assert tb.grad is not None and tx.grad is None and tw.grad is None
    _close(tb.grad.numpy(), np.full(5, 4 * 8 * 8, np.float32), np.float32)
    assert ran["shortcut"] == 2


def test_empty_batch_and_non_contiguous_inputs(ran: dict[str, int]) -> None:
    w, b = _randn((3, 2, 3, 3), np.float32), _randn((3,), np.float32)
    tw, tb = tp.tensor(w, requires_grad=True), tp.tensor(b, requires_grad=True)
    empty = TF.conv2d(tp.tensor(np.zeros((0, 2, 6, 6), np.float32), requires_grad=True), tw, tb)
    assert tuple(empty.shape) == (0, 3, 4, 4)
    empty.sum().backward()
    assert tw.grad is not None and tb.grad is not None
    np.testing.assert_array_equal(tw.grad.numpy(), np.zeros_like(w))
    np.testing.assert_array_equal(tb.grad.numpy(), np.zeros_like(b))
    x = _randn((6, 2, 8, 9), np.float32).transpose(0, 1, 3, 2)  # non-contiguous payload
    y = TF.conv2d(tp.tensor(x), tp.tensor(w), tp.tensor(b), padding=1)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1)
    _close(y.numpy(), want.numpy(), np.float32)
    assert ran["shortcut"] == 2


def test_modules_take_the_shortcut(ran: dict[str, int]) -> None:
    tp.manual_seed(0)
    layer = tp.nn.Conv2d(2, 4, 3, padding=1)
    x = _randn((3, 2, 6, 5), np.float32)
    y = layer(tp.tensor(x))
    ref = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(layer.weight.detach().numpy()),
                                     torch.tensor(layer.bias.detach().numpy()), padding=1)
    _close(y.detach().numpy(), ref.detach().numpy(), np.float32)
    assert y._node is not None and y._node.name == "conv_bias"
    assert ran["shortcut"] == 1


def test_unusual_calls_take_the_generic_path_with_its_errors(ran: dict[str, int]) -> None:
    x, w = tp.tensor(_randn((2, 3, 8, 8), np.float32)), tp.tensor(_randn((4, 3, 3, 3), np.float32))
    unbatched = TF.conv2d(tp.tensor(_randn((3, 8, 8), np.float32)), w, None)
    assert tuple(unbatched.shape) == (4, 6, 6)
    same = TF.conv2d(x, w, None, padding="same")
    assert tuple(same.shape) == (2, 4, 8, 8)
    mixed = TF.conv2d(x, tp.tensor(_randn((4, 3, 3, 3), np.float64)), None)
    assert mixed.dtype == tp.float64
    assert ran["shortcut"] == 0
    with pytest.raises(tp.ShapeError, match=r"bias must be \[4\]"):
        TF.conv2d(x, w, tp.tensor(np.zeros(5, np.float32)))
    with pytest.raises(tp.ShapeError) as shortcut_error:
        TF.conv2d(x, tp.tensor(_randn((4, 2, 3, 3), np.float32)))
    with pytest.raises(tp.ShapeError) as generic_error:
        tp.prefix.conv(tp.eager, tp.tensor(_randn((4, 2, 3, 3), np.float32)), None, x)
    assert str(shortcut_error.value) == str(generic_error.value)
    assert ran["shortcut"] == 0


def test_graph_recorders_and_transforms_see_the_primitives(ran: dict[str, int]) -> None:
    x, w, b = _randn((2, 2, 6, 6), np.float64), _randn((3, 2, 3, 3), np.float64), _randn((3,), np.float64)

    def f(w: Any, b: Any, x: Any) -> Any:
        return (TF.conv2d(x, w, b, padding=1) ** 2).sum()

    for execute in (False, True):  # symbolic and concrete recording
        module = tp.graph.trace(f, tp.tensor(w), tp.tensor(b), tp.tensor(x), execute=execute)
        names = [node.target for node in module.graph.nodes]
        assert "conv_nd" in names and "add" in names and "conv_bias" not in names
    gw, gb = tp.func.grad(f, argnums=(0, 1))(tp.tensor(w), tp.tensor(b), tp.tensor(x))
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    (torch.nn.functional.conv2d(torch.tensor(x), tw, tb, padding=1) ** 2).sum().backward()
    assert tw.grad is not None and tb.grad is not None
    _close(gw.numpy(), tw.grad.numpy(), np.float64)
    _close(gb.numpy(), tb.grad.numpy(), np.float64)
    batched = tp.func.vmap(lambda xs: TF.conv2d(xs, tp.tensor(w), tp.tensor(b)))(tp.tensor(_randn((2, 1, 2, 5, 5), np.float64)))
    assert tuple(batched.shape) == (2, 1, 3, 3, 3)
    assert ran["shortcut"] == 0  # transforms record through their own interpreters


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_the_in_cache_path_splits_samples_over_threads(dt: Any, ran: dict[str, int],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads the in-cache path runs blocks of samples on both (OpenBLAS held to one thread):
    the forward and the input gradient are bitwise the one-thread results; the weight and bias
    gradients are summed per thread and then added (float rounding of that order); a non-finite input
    in the second chunk and each gradient alone take the same split."""
    chunks = count_blas_chunks(monkeypatch, conv_mod)
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    x, w, b = _randn((7, 3, 9, 8), dt), _randn((5, 3, 3, 3), dt), _randn((5,), dt)
    x[6, 1, 4, 4] = np.inf
    g = _randn((7, 5, 9, 8), dt)
    needs = [(True, True, True), (True, False, False), (False, True, False), (False, False, True)]

    def compute() -> list[Any]:
        out: list[Any] = [K.conv_bias_nd(x, w, b, **params)]
        for need in needs:
            out.extend(K.conv_backward_nd(x, w, g, *need, **params))
        return out

    one, two = on_one_then_two_threads(compute)
    assert chunks == [1] * 5 + [2] * 5
    np.testing.assert_array_equal(one[0], two[0])
    for i, (a, c) in enumerate(zip(one[1:], two[1:])):
        assert (a is None) == (c is None)
        if a is None:
            continue
        if i % 3 == 0:  # input gradients: each sample on one thread, computed alike
            np.testing.assert_array_equal(a, c)
        else:
            np.testing.assert_array_equal(np.isfinite(a), np.isfinite(c))
            _close(np.where(np.isfinite(a), a, 0), np.where(np.isfinite(c), c, 0), dt)
    want = conv_nd_ref(x, w, **params) + b[:, None, None]
    _close(two[0], want, dt)
    assert ran["forward"] == 2 and ran["backward"] == 8


# spatial, kernel, padding, dilation, C, O, N: the forward builds its columns at the output positions only,
# each short row moved in whole 64-byte chunks that may run past it
OUTPUT_COLUMN_CASES = [
    ((28, 28), (3, 3), (0, 0), (1, 1), 1, 16, 6),     # the CNN's first layer (rows of 26: two chunks)
    ((13, 13), (3, 3), (0, 0), (1, 1), 16, 32, 5),    # its second layer (more column rows than outputs)
    ((9, 11), (3, 3), (1, 1), (1, 1), 3, 18, 4),      # padded
    ((12, 10), (3, 2), (2, 1), (2, 3), 2, 9, 3),      # dilation, odd sizes
    ((17,), (5,), (2,), (2,), 1, 4, 3),               # 1-d
    ((5, 6, 4), (2, 2, 2), (1, 0, 1), (1, 2, 1), 1, 6, 2),  # 3-d
    ((6, 5), (1, 1), (0, 0), (1, 1), 2, 3, 3),        # 1x1
    ((7, 40), (3, 3), (0, 0), (1, 1), 2, 3, 2),       # rows of 38: three chunks of float32, five of float64
]


@pytest.fixture
def output_columns(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the runs of the output-columns forward kernel."""
    return count_calls(monkeypatch, conv_mod._nc(), {"forward_output_blocks": "runs"})


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", OUTPUT_COLUMN_CASES)
def test_the_forward_on_output_columns_matches_spec(dt: Any, with_bias: bool, case: Any,
                                                    output_columns: dict[str, int]) -> None:
    sp, k, p, d, c, o, n = case
    params: dict[str, Any] = dict(stride=(1,) * len(sp), padding=p, dilation=d, groups=1)
    x = _randn((n, c) + sp, dt)[..., ::-1]  # non-contiguous
    w, b = _randn((o, c) + k, dt), (_randn((o,), dt) if with_bias else None)
    x_before, w_before = x.copy(), w.copy()
    y = K.conv_bias_nd(x, w, b, **params)
    want = conv_nd_ref(x, w, **params)
    if b is not None:
        want = want + b.reshape((o,) + (1,) * len(sp))
    assert y.dtype == dt and y.shape == want.shape
    _close(y, want, dt)
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(w, w_before)
    assert output_columns["runs"] >= 1  # one per thread that got samples


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("padding", [(0, 0), (1, 2)])
def test_the_forward_in_blocks_of_samples_matches_one_block(dt: Any, padding: tuple[int, int],
                                                            output_columns: dict[str, int],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of two samples (the last one short) give what one block of all samples gives: each block's
    columns start where its own samples are, and the chunks that run past a row are overwritten."""
    params: dict[str, Any] = dict(stride=(1, 1), padding=padding, dilation=(1, 1), groups=1)
    x, w, b = _randn((5, 3, 9, 13), dt), _randn((4, 3, 3, 3), dt), _randn((4,), dt)
    whole = K.conv_bias_nd(x, w, b, **params)
    per_sample = 3 * 9 * math.prod(s + 2 * p - 2 for s, p in zip((9, 13), padding)) * np.dtype(dt).itemsize
    monkeypatch.setattr(conv_mod, "FUSED_BLOCK_BYTES", 2 * per_sample + 1)
    assert conv_mod._geometry("conv", x.shape, 4, (3, 3), 1, (1, 1), padding, (1, 1))[0].output_block(
        np.dtype(dt).itemsize) == 2
    blocks = K.conv_bias_nd(x, w, b, **params)
    assert output_columns["runs"] >= 2
    _close(blocks, whole, dt)
    _close(blocks, conv_nd_ref(x, w, **params) + b[:, None, None], dt)


def test_output_columns_keep_non_finite_values_where_torch_does(output_columns: dict[str, int]) -> None:
    x, w, b = _randn((3, 1, 9, 8), np.float64), _randn((6, 1, 3, 3), np.float64), _randn((6,), np.float64)
    x[0, 0, 4, 0] = np.inf   # the first column: read by one tap column only
    x[1, 0, 8, 7] = -np.inf  # the last corner
    x[2, 0, 0, 3] = np.nan
    w[5, 0, 2, 2] = np.inf
    want = torch.nn.functional.conv2d(*(torch.tensor(a) for a in (x, w, b)), stride=1, padding=1).numpy()
    y = K.conv_bias_nd(x, w, b, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(y), np.isinf(want))
    _close(y, want, np.float64)
    assert output_columns["runs"] == 1


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_output_columns_split_over_threads_bitwise(dt: Any, output_columns: dict[str, int],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With two threads each sample is still computed alone, on one thread: the one-thread bits."""
    chunks = count_blas_chunks(monkeypatch, conv_mod)
    x, w, b = _randn((7, 2, 10, 9), dt), _randn((12, 2, 3, 3), dt), _randn((12,), dt)
    x[5, 1, 3, 3] = np.nan
    one, two = on_one_then_two_threads(
        lambda: K.conv_bias_nd(x, w, b, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1))
    assert chunks == [1, 2]
    np.testing.assert_array_equal(one, two)
    assert output_columns["runs"] == 3
    _close(two, conv_nd_ref(x, w, stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1) + b[:, None, None], dt)


def test_the_cnn_layer_on_output_columns_matches_torch_with_gradients(output_columns: dict[str, int]) -> None:
    """The benchmark CNN's first layer through ``conv2d``: values and tape gradients against PyTorch."""
    x, w, b = _randn((5, 1, 28, 28), np.float32), _randn((16, 1, 3, 3), np.float32), _randn((16,), np.float32)
    tx, tw, tb = (tp.tensor(a, requires_grad=True) for a in (x, w, b))
    y = TF.conv2d(tx, tw, tb)
    rx, rw, rb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ry = torch.nn.functional.conv2d(rx, rw, rb)
    assert_close_to_scale(y.detach().numpy(), ry.detach().numpy(), 1e-5)
    g = _randn(tuple(ry.shape), np.float32)
    (y * tp.tensor(g)).sum().backward()
    ry.backward(torch.tensor(g))
    for got, want in ((tx.grad, rx.grad), (tw.grad, rw.grad), (tb.grad, rb.grad)):
        assert got is not None and want is not None
        assert_close_to_scale(got.numpy(), want.numpy(), 1e-4)
    assert output_columns["runs"] == 1


def test_samples_of_any_size_up_to_a_block_split_over_threads_and_one_sample_keeps_openblas_threads() -> None:
    """At two threads the in-cache path takes every convolution with enough samples to split whose
    columns fit in ``COLS_BLOCK_BYTES`` (beyond ``FUSED_BLOCK_BYTES`` too); a single sample, or larger
    ones, take the wide GEMM on OpenBLAS's threads; at one thread the in-cache path takes them all."""
    def decisions() -> list[bool]:
        out = []
        for shape, w_shape in (((8, 64, 56, 56), (64, 64, 3, 3)), ((1, 64, 56, 56), (64, 64, 3, 3)),
                               ((8, 64, 112, 112), (64, 64, 3, 3)), ((16, 3, 64, 64), (64, 3, 3, 3))):
            cv = conv_mod._geometry("conv", shape, w_shape[0], w_shape[2:], 1, (1, 1), (1, 1), (1, 1))[0]
            out.append(conv_mod._gemm_for_fused(cv, np.dtype(np.float32)) is not None)
        return out

    sizes = [conv_mod._geometry("conv", s, 64, (3, 3), 1, (1, 1), (1, 1), (1, 1))[0].sample_bytes(4)
             for s in ((8, 64, 56, 56), (8, 64, 112, 112))]
    assert conv_mod.FUSED_BLOCK_BYTES < sizes[0] <= conv_mod.COLS_BLOCK_BYTES < sizes[1]
    one, two = on_one_then_two_threads(decisions)
    assert one == [True, True, True, True]
    assert two == [True, False, False, True]


def test_large_samples_split_over_threads_give_the_one_thread_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """Samples beyond ``FUSED_BLOCK_BYTES`` (one per block) split over two threads: the forward and the input
    gradient bitwise as on one thread, the weight and bias gradients within rounding."""
    monkeypatch.setattr(conv_mod, "FUSED_BLOCK_BYTES", 1 << 10)
    chunks = count_blas_chunks(monkeypatch, conv_mod)
    params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    x, w, b = _randn((4, 6, 12, 11), np.float64), _randn((5, 6, 3, 3), np.float64), _randn((5,), np.float64)
    g = _randn((4, 5, 12, 11), np.float64)
    one, two = on_one_then_two_threads(
        lambda: [K.conv_bias_nd(x, w, b, **params), *K.conv_backward_nd(x, w, g, True, True, True, **params)])
    assert chunks == [1, 1, 2, 2]
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    for a, c in zip(one[2:], two[2:]):
        _close(c, a, np.float64)
    _close(two[0], conv_nd_ref(x, w, **params) + b[:, None, None], np.float64)
