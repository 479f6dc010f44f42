"""The eager shortcut of the dense layer (``interpreters.eager.fastpath_linear`` and
``kernels.linear``): values and tape gradients against PyTorch and the generic layer
(``tensorplay.prefix.linear``), the node recorded, second derivatives, layouts, empty and non-finite
inputs, the cases left to the generic path with its errors, and what graph recorders and transforms
see. Each test checks whether the path it is about ran."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as TF
from tensorplay.interpreters.eager.kernels import linear as linear_kernels
from tests.helpers import assert_close_to_scale, count_calls, layer_matches_torch

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(5)


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the runs of the shortcut's forward and of its fused backward."""
    return count_calls(monkeypatch, linear_kernels, {"linear": "forward", "linear_backward": "backward"})


def _randn(shape: tuple[int, ...], dt: Any) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dt)


def _close(got: Any, want: Any, dt: Any) -> None:
    assert_close_to_scale(got, want, 2e-6 if dt == np.float32 else 1e-13)


# input shape, out features, weight order, input layout
CASES = [
    ((5, 7), 4, "C", "contiguous"),
    ((2, 3, 7), 4, "F", "contiguous"),       # nn.Linear's column-major weight, a 3-d input
    ((2, 3, 2, 5), 6, "C", "contiguous"),   # two leading axes folded
    ((1, 1), 1, "F", "contiguous"),
    ((6, 3, 9), 5, "F", "transposed"),       # a non-contiguous input (copied by the fold)
    ((33, 17), 11, "C", "strided"),          # every other column of a wider array
]


def _input(shape: tuple[int, ...], layout: str, dt: Any) -> np.ndarray:
    if layout == "transposed":
        return _randn(shape[:-3] + (shape[-2], shape[-3], shape[-1]), dt).swapaxes(-3, -2)
    if layout == "strided":
        return _randn(shape[:-1] + (2 * shape[-1],), dt)[..., ::2]
    return _randn(shape, dt)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("case", CASES)
def test_the_shortcut_matches_torch_with_tape_gradients(dt: Any, with_bias: bool, case: Any,
                                                        ran: dict[str, int]) -> None:
    shape, out, order, layout = case
    x = _input(shape, layout, dt)
    w = np.asarray(_randn((out, shape[-1]), dt), order=order)
    b = _randn((out,), dt)
    before = (x.copy(), w.copy(), b.copy())
    y, (tx, tw, tb) = layer_matches_torch(TF.linear, torch.nn.functional.linear, (x, w, b), with_bias,
                                          lambda shape: _randn(shape, dt), lambda a, c: _close(a, c, dt))
    assert y._node is not None and y._node.name == "linear"
    assert tw._data.flags.f_contiguous == (order == "F" or w.shape[0] == 1 or w.shape[1] == 1)
    assert tw.grad is not None and tw.grad.numpy().flags.f_contiguous == tw._data.flags.f_contiguous
    for given, copy in zip((x, w, b), before):
        np.testing.assert_array_equal(given, copy)
    assert ran == {"forward": 1, "backward": 1}


def test_forward_is_bitwise_the_generic_layer_and_second_derivatives_agree(ran: dict[str, int]) -> None:
    x, w, b = _randn((4, 3, 6), np.float64), _randn((5, 6), np.float64), _randn((5,), np.float64)

    def run(shortcut: bool) -> list[np.ndarray]:
        tx, tw, tb = (tp.tensor(a, requires_grad=True) for a in (x, w, b))
        y = TF.linear(tx, tw, tb) if shortcut else tp.prefix.linear(tp.eager, tw, tb, tx)
        loss = (y * y * y).sum()
        gx, gw, gb = tp.autograd.grad(loss, [tx, tw, tb], create_graph=True)
        ggx, ggw = tp.autograd.grad((gx * gx).sum() + (gw * gb[:, None]).sum(), [tx, tw])
        return [y.detach().numpy(), gx.detach().numpy(), gw.detach().numpy(), gb.detach().numpy(), ggx.numpy(),
                ggw.numpy()]

    got, want = run(True), run(False)
    np.testing.assert_array_equal(got[0], want[0])
    for a, c in zip(got[1:], want[1:]):
        _close(a, c, np.float64)
    # create_graph runs the composite rule; the second pass (no create_graph) reaches y's node again
    assert ran == {"forward": 1, "backward": 1}


def test_no_grad_and_frozen_parts(ran: dict[str, int]) -> None:
    x, w, b = _randn((8, 3), np.float32), _randn((2, 3), np.float32), _randn((2,), np.float32)
    with tp.no_grad():
        y = TF.linear(tp.tensor(x, requires_grad=True), tp.tensor(w, requires_grad=True), tp.tensor(b))
    assert y._node is None
    tx, tw, tb = tp.tensor(x), tp.tensor(w), tp.tensor(b, requires_grad=True)  # only the bias trains
    TF.linear(tx, tw, tb).sum().backward()
    assert tb.grad is not None and tx.grad is None and tw.grad is None
    np.testing.assert_array_equal(tb.grad.numpy(), np.full(2, 8, np.float32))
    tx = tp.tensor(x, requires_grad=True)  # only the input
    TF.linear(tx, tp.tensor(w), tp.tensor(b)).sum().backward()
    assert tx.grad is not None
    _close(tx.grad.numpy(), np.broadcast_to(w.sum(0), x.shape), np.float32)
    assert ran == {"forward": 3, "backward": 2}


def test_empty_and_non_finite_inputs(ran: dict[str, int]) -> None:
    w, b = _randn((3, 4), np.float32), _randn((3,), np.float32)
    tw, tb = tp.tensor(w, requires_grad=True), tp.tensor(b, requires_grad=True)
    empty = TF.linear(tp.tensor(np.zeros((2, 0, 4), np.float32), requires_grad=True), tw, tb)
    assert tuple(empty.shape) == (2, 0, 3)
    empty.sum().backward()
    assert tw.grad is not None and tb.grad is not None
    np.testing.assert_array_equal(tw.grad.numpy(), np.zeros_like(w))
    np.testing.assert_array_equal(tb.grad.numpy(), np.zeros_like(b))
    no_features = TF.linear(tp.tensor(np.zeros((5, 0), np.float32)), tp.tensor(np.zeros((3, 0), np.float32)), tb)
    np.testing.assert_array_equal(no_features.detach().numpy(), np.broadcast_to(b, (5, 3)))
    x = _randn((4, 4), np.float32)
    x[1, 2], x[3, 0] = np.nan, np.inf
    y = TF.linear(tp.tensor(x), tp.tensor(w), tp.tensor(b))
    want = torch.nn.functional.linear(torch.tensor(x), torch.tensor(w), torch.tensor(b)).numpy()
    np.testing.assert_array_equal(np.isnan(y.numpy()), np.isnan(want))
    _close(y.numpy(), want, np.float32)
    assert ran["forward"] == 3


def test_modules_take_the_shortcut(ran: dict[str, int]) -> None:
    tp.manual_seed(0)
    layer = tp.nn.Linear(5, 3)
    x = _randn((2, 4, 5), np.float32)
    y = layer(tp.tensor(x))
    ref = torch.nn.functional.linear(torch.tensor(x), torch.tensor(layer.weight.detach().numpy()),
                                     torch.tensor(layer.bias.detach().numpy()))
    _close(y.detach().numpy(), ref.detach().numpy(), np.float32)
    assert y._node is not None and y._node.name == "linear"
    attention = tp.nn.MultiheadAttention(8, 2)
    q = tp.tensor(_randn((3, 4, 8), np.float32), requires_grad=True)
    out, _ = attention(q, need_weights=False)
    out.sum().backward()
    ref_attention = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    ref_attention.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in attention.state_dict().items()})
    rq = torch.tensor(q.detach().numpy(), requires_grad=True)
    ref_out, _ = ref_attention(rq, rq, rq, need_weights=False)
    ref_out.sum().backward()
    _close(out.detach().numpy(), ref_out.detach().numpy(), np.float32)
    assert q.grad is not None and rq.grad is not None and attention.in_proj_weight.grad is not None
    _close(q.grad.numpy(), rq.grad.numpy(), np.float32)
    _close(attention.in_proj_weight.grad.numpy(), ref_attention.in_proj_weight.grad.numpy(), np.float32)
    # self-attention: one in-projection (q, k and v together) and the output projection
    assert ran == {"forward": 1 + 2, "backward": 2}
    kv = tp.tensor(_randn((3, 6, 8), np.float32), requires_grad=True)
    cross, _ = attention(q, kv, kv, need_weights=False)
    cross.sum().backward()
    rkv = torch.tensor(kv.detach().numpy(), requires_grad=True)
    ref_cross, _ = ref_attention(rq, rkv, rkv, need_weights=False)
    ref_cross.sum().backward()
    _close(cross.detach().numpy(), ref_cross.detach().numpy(), np.float32)
    assert kv.grad is not None and rkv.grad is not None
    _close(kv.grad.numpy(), rkv.grad.numpy(), np.float32)
    _close(q.grad.numpy(), rq.grad.numpy(), np.float32)  # both calls' gradients accumulated
    assert ran == {"forward": 3 + 4, "backward": 2 + 4}  # cross-attention: q, k, v apart, and the output


def test_unusual_calls_take_the_generic_path_with_its_errors(ran: dict[str, int]) -> None:
    w, b = tp.tensor(_randn((4, 3), np.float32)), tp.tensor(_randn((4,), np.float32))
    vector = TF.linear(tp.tensor(_randn((3,), np.float32)), w, b)
    assert tuple(vector.shape) == (4,)
    mixed = TF.linear(tp.tensor(_randn((2, 3), np.float64)), w, b)
    assert mixed.dtype == tp.float64
    integer = TF.linear(tp.tensor(np.ones((2, 3), np.int64)), w, b)
    assert integer.dtype == tp.float32
    assert ran["forward"] == 0
    x = tp.tensor(_randn((2, 5, 3), np.float32))
    for weight, bias in ((tp.tensor(_randn((4, 2), np.float32)), b), (w, tp.tensor(np.zeros(5, np.float32)))):
        with pytest.raises(tp.ShapeError) as shortcut_error:
            TF.linear(x, weight, bias)
        with pytest.raises(tp.ShapeError) as generic_error:
            tp.prefix.linear(tp.eager, weight, bias, x)
        assert str(shortcut_error.value) == str(generic_error.value)
    assert ran["forward"] == 0


def test_an_input_changed_in_place_after_the_forward_is_refused(ran: dict[str, int]) -> None:
    tw = tp.tensor(_randn((2, 3), np.float32), requires_grad=True)
    x = tp.tensor(_randn((4, 3), np.float32))
    y = TF.linear(x, tw, None)
    x.add_(1.0)
    with pytest.raises(tp.AutogradError, match=r"input 0 of .linear. .shape \[4, 3\]. was modified in place"):
        y.sum().backward()
    assert ran["forward"] == 1


def test_graph_recorders_and_transforms_see_the_primitives(ran: dict[str, int]) -> None:
    x, w, b = _randn((3, 2, 4), np.float64), _randn((5, 4), np.float64), _randn((5,), np.float64)

    def f(w: Any, b: Any, x: Any) -> Any:
        return (TF.linear(x, w, b) ** 2).sum()

    for execute in (False, True):  # symbolic and concrete recording
        module = tp.graph.trace(f, tp.tensor(w), tp.tensor(b), tp.tensor(x), execute=execute)
        names = [node.target for node in module.graph.nodes]
        assert "matmul" in names and "add" in names and "linear" not in names
    gw, gb = tp.func.grad(f, argnums=(0, 1))(tp.tensor(w), tp.tensor(b), tp.tensor(x))
    tw, tb = torch.tensor(w, requires_grad=True), torch.tensor(b, requires_grad=True)
    (torch.nn.functional.linear(torch.tensor(x), tw, tb) ** 2).sum().backward()
    assert tw.grad is not None and tb.grad is not None
    _close(gw.numpy(), tw.grad.numpy(), np.float64)
    _close(gb.numpy(), tb.grad.numpy(), np.float64)
    rows = tp.func.vmap(lambda xs: TF.linear(xs, tp.tensor(w), tp.tensor(b)))(tp.tensor(x))
    _close(rows.numpy(), x @ w.T + b, np.float64)
    dx = _randn(x.shape, np.float64)
    _, tangent = tp.func.jvp(lambda xs: TF.linear(xs, tp.tensor(w), tp.tensor(b)), (tp.tensor(x),), (tp.tensor(dx),))
    _close(tangent.numpy(), dx @ w.T, np.float64)
    assert ran["forward"] == 0  # transforms record through their own interpreters
