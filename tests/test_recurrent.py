"""``nn.RNN`` (tanh, relu), ``nn.LSTM``, ``nn.GRU`` and their cells against PyTorch: torch's state dict
loaded into ours (same names and shapes), then outputs, final states and gradients (input, initial state
and every parameter) compared in float32 and float64 over batch_first, 1 and 2 layers, bidirectional,
given and default initial states, unbatched input and sequence length 1; dropout between layers; a
compiled forward and backward against eager; the transforms; and the shape / argument errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensorplay as tp  # noqa: E402
from tensorplay import func, nn  # noqa: E402
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError  # noqa: E402

KINDS = ("rnn_tanh", "rnn_relu", "lstm", "gru")
DTYPES = ("float32", "float64")
I, H, T, B = 3, 4, 5, 2


def close(got: Any, want: Any, dtype: str, what: str = "") -> None:
    """``got`` (a numpy array) within float32's or float64's tolerance of ``want``."""
    rtol, atol = (2e-5, 2e-6) if dtype == "float32" else (1e-11, 1e-13)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=what)


def grad_of(t: Any) -> np.ndarray[Any, Any]:
    assert t.grad is not None
    return t.grad.numpy()  # type: ignore[no-any-return]


LAYERS = {"rnn_tanh": (nn.RNN, torch.nn.RNN), "rnn_relu": (nn.RNN, torch.nn.RNN), "lstm": (nn.LSTM, torch.nn.LSTM),
          "gru": (nn.GRU, torch.nn.GRU)}
CELLS = {"rnn_tanh": (nn.RNNCell, torch.nn.RNNCell), "rnn_relu": (nn.RNNCell, torch.nn.RNNCell),
         "lstm": (nn.LSTMCell, torch.nn.LSTMCell), "gru": (nn.GRUCell, torch.nn.GRUCell)}


def _pair(classes: dict[str, Any], kind: str, dtype: str, seed: int, kw: dict[str, Any]) -> tuple[Any, Any]:
    """A torch module of ``classes[kind]`` (seeded) and ours built with the same arguments, holding torch's
    parameters."""
    ours_cls, theirs_cls = classes[kind]
    if kind.startswith("rnn"):
        kw["nonlinearity"] = kind[4:]
    torch.manual_seed(seed)
    theirs = theirs_cls(I, H, **kw).to(getattr(torch, dtype))
    ours = ours_cls(I, H, dtype=dtype, **kw)
    copy_params(theirs, ours)
    return theirs, ours


def layer_pair(kind: str, dtype: str, seed: int = 0, **kw: Any) -> tuple[Any, Any]:
    """A torch recurrent layer (seeded) and ours, holding torch's parameters."""
    return _pair(LAYERS, kind, dtype, seed, kw)


def cell_pair(kind: str, dtype: str, seed: int = 0, **kw: Any) -> tuple[Any, Any]:
    """A torch recurrent cell (seeded) and ours, holding torch's parameters."""
    return _pair(CELLS, kind, dtype, seed, kw)


def copy_params(theirs: Any, ours: Any) -> None:
    state = theirs.state_dict()
    assert [(k, tuple(v.shape)) for k, v in ours.state_dict().items()] == [(k, tuple(v.shape)) for k, v in
                                                                          state.items()]
    result = ours.load_state_dict({k: tp.tensor(v.detach().numpy().copy()) for k, v in state.items()})
    assert not result.missing_keys and not result.unexpected_keys


def randn(*shape: int, dtype: str, seed: int) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def states(kind: str, shape: tuple[int, ...], dtype: str, seed: int) -> list[np.ndarray[Any, Any]]:
    return [randn(*shape, dtype=dtype, seed=seed + k) for k in range(2 if kind == "lstm" else 1)]


def as_hx(kind: str, arrays: list[Any] | None, wrap: Any) -> Any:
    if arrays is None:
        return None
    wrapped = [wrap(a) for a in arrays]
    return tuple(wrapped) if kind == "lstm" else wrapped[0]


def flat(kind: str, result: Any) -> list[Any]:
    """``(output, h_n)`` or ``(output, (h_n, c_n))`` (or a cell's result) as a flat list."""
    if not isinstance(result, tuple):
        return [result]
    out: list[Any] = []
    for r in result:
        out += list(r) if isinstance(r, tuple) else [r]
    return out


def ours_np(t: Any) -> np.ndarray[Any, Any]:
    return t.detach().numpy()  # type: ignore[no-any-return]


def compare(kind: str, dtype: str, theirs: Any, ours: Any, x: np.ndarray[Any, Any], hx: list[Any] | None,
            grads: bool = False) -> None:
    """Run both on ``x`` (and ``hx``), compare every result; with ``grads`` also the gradients of a loss
    touching every result w.r.t. the input, the initial state and every parameter."""
    tx = torch.tensor(x, requires_grad=grads)
    thx = None if hx is None else [torch.tensor(a, requires_grad=grads) for a in hx]
    want = flat(kind, theirs(tx, as_hx(kind, thx, lambda a: a)))
    px = tp.tensor(x, requires_grad=grads)
    phx = None if hx is None else [tp.tensor(a, requires_grad=grads) for a in hx]
    got = flat(kind, ours(px, as_hx(kind, phx, lambda a: a)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        assert g.dtype.name == dtype
        close(ours_np(g), w.detach().numpy(), dtype)
    if not grads:
        return
    weights = [randn(*w.shape, dtype=dtype, seed=50 + k) for k, w in enumerate(want)]
    sum(((w * torch.tensor(c)).sum() for w, c in zip(want, weights)), torch.tensor(0.0, dtype=tx.dtype)).backward()
    loss = got[0] * tp.tensor(weights[0])
    total = loss.sum()
    for g, c in zip(got[1:], weights[1:]):
        total = total + (g * tp.tensor(c)).sum()
    total.backward()
    close(grad_of(px), tx.grad.numpy(), dtype, "input")
    for k, (a, b) in enumerate(zip(phx or [], thx or [])):
        close(grad_of(a), b.grad.numpy(), dtype, f"hx[{k}]")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        close(grad_of(p), theirs_params[name].grad.numpy(), dtype, name)


# ---- parameters --------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True}, {"num_layers": 3, "bias": False}])
def test_parameter_names_shapes_and_init_match_torch(kind: str, kw: dict[str, Any]) -> None:
    theirs, ours = layer_pair(kind, "float32", **kw)  # copy_params asserts names, shapes and order
    tp.manual_seed(1)
    ours.reset_parameters()
    bound = 1 / H ** 0.5
    values = [ours_np(p).ravel() for p in ours.parameters()]
    assert all(v.std() > 0.1 * bound for v in values)  # each drawn, not constant
    pooled = np.concatenate(values)
    assert np.all(np.abs(pooled) <= bound)
    assert pooled.max() > 0.7 * bound and pooled.min() < -0.7 * bound  # over the whole of +-1/sqrt(H)
    assert len(ours.all_weights) == len(theirs.all_weights)
    assert repr(ours) == repr(theirs)


@pytest.mark.parametrize("kind", KINDS)
def test_cell_parameters_and_repr_match_torch(kind: str) -> None:
    theirs, ours = cell_pair(kind, "float32", bias=False)
    assert repr(ours) == repr(theirs)
    assert ours.bias_ih is None and ours.bias_hh is None


# ---- forward values and gradients ----------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("num_layers,bidirectional", [(1, False), (2, False), (1, True), (2, True)])
def test_forward_matches_torch(kind: str, dtype: str, batch_first: bool, num_layers: int,
                               bidirectional: bool) -> None:
    theirs, ours = layer_pair(kind, dtype, num_layers=num_layers, bidirectional=bidirectional,
                              batch_first=batch_first)
    x = randn(*((B, T, I) if batch_first else (T, B, I)), dtype=dtype, seed=1)
    compare(kind, dtype, theirs, ours, x, None)
    hx = states(kind, (num_layers * (1 + bidirectional), B, H), dtype, seed=2)
    compare(kind, dtype, theirs, ours, x, hx)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kw", [{}, {"num_layers": 2, "bidirectional": True, "batch_first": True}])
def test_gradients_match_torch_autograd(kind: str, dtype: str, kw: dict[str, Any]) -> None:
    theirs, ours = layer_pair(kind, dtype, **kw)
    layers = kw.get("num_layers", 1) * (1 + kw.get("bidirectional", False))
    x = randn(*((B, T, I) if kw.get("batch_first") else (T, B, I)), dtype=dtype, seed=3)
    compare(kind, dtype, theirs, ours, x, states(kind, (layers, B, H), dtype, seed=4), grads=True)
    ours.zero_grad()
    theirs.zero_grad()
    compare(kind, dtype, theirs, ours, x, None, grads=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("given", [False, True])
def test_unbatched_input(kind: str, given: bool) -> None:
    theirs, ours = layer_pair(kind, "float64", num_layers=2, bidirectional=True, batch_first=True)
    hx = states(kind, (4, H), "float64", seed=5) if given else None
    compare(kind, "float64", theirs, ours, randn(T, I, dtype="float64", seed=6), hx, grads=True)


@pytest.mark.parametrize("kind", KINDS)
def test_sequence_length_one_and_bias_free(kind: str) -> None:
    theirs, ours = layer_pair(kind, "float32", num_layers=2, bidirectional=True, bias=False)
    compare(kind, "float32", theirs, ours, randn(1, B, I, dtype="float32", seed=7),
            states(kind, (4, B, H), "float32", seed=8), grads=True)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("given", [False, True])
def test_cells_match_torch_cells(kind: str, dtype: str, batched: bool, given: bool) -> None:
    theirs, ours = cell_pair(kind, dtype)
    x = randn(*((B, I) if batched else (I,)), dtype=dtype, seed=9)
    hx = states(kind, (B, H) if batched else (H,), dtype, seed=10) if given else None
    compare(kind, dtype, theirs, ours, x, hx, grads=True)


# ---- dropout -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind", KINDS)
def test_dropout_is_off_in_eval_and_zeroes_layer_inputs_at_p_one(kind: str) -> None:
    theirs, ours = layer_pair(kind, "float64", num_layers=3, dropout=0.5, bidirectional=True)
    x = randn(T, B, I, dtype="float64", seed=11)
    theirs.eval()
    ours.eval()
    compare(kind, "float64", theirs, ours, x, None)
    # in training, p=1 is deterministic: every layer above the first sees zeros, as in torch
    theirs, ours = layer_pair(kind, "float64", num_layers=2, dropout=1.0)
    compare(kind, "float64", theirs, ours, x, states(kind, (2, B, H), "float64", seed=12))


def test_dropout_in_training_masks_between_layers_only() -> None:
    _, ours = layer_pair("gru", "float64", num_layers=2, dropout=0.5)
    x = tp.tensor(randn(T, B, I, dtype="float64", seed=13))
    tp.manual_seed(5)
    first = ours_np(ours(x)[0])
    tp.manual_seed(5)
    np.testing.assert_array_equal(ours_np(ours(x)[0]), first)  # the global generator drives the masks
    ours.eval()
    assert not np.allclose(first, ours_np(ours(x)[0]))
    _, single = layer_pair("gru", "float64", num_layers=2, dropout=0.0)
    single.train()
    np.testing.assert_array_equal(ours_np(single(x)[0]), ours_np(ours(x)[0]))  # eval == no dropout


def test_dropout_with_one_layer_warns_as_torch() -> None:
    with pytest.warns(UserWarning, match="dropout"):
        nn.LSTM(I, H, dropout=0.3)


# ---- compile and transforms ----------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_compiled_forward_and_backward_match_eager(kind: str, dtype: str) -> None:
    _, model = layer_pair(kind, dtype, num_layers=2, bidirectional=True, batch_first=True)
    x = tp.tensor(randn(B, T, I, dtype=dtype, seed=14))

    def loss(x: Any) -> Any:
        out = flat(kind, model(x))
        total = (out[0] * out[0]).sum()
        for t in out[1:]:
            total = total + t.sum()
        return total

    expected = loss(x)
    expected.backward()
    want = {n: grad_of(p).copy() for n, p in model.named_parameters()}
    model.zero_grad()
    compiled = tp.compile(loss)
    for _ in range(2):  # the second call reuses the specialization
        model.zero_grad()
        got = compiled(x)
        assert got.grad_fn is not None and repr(got.grad_fn) == "<CompiledBackward>"
        close(got.item(), expected.item(), dtype)
        got.backward()
        for name, p in model.named_parameters():
            close(grad_of(p), want[name], dtype, name)


def test_export_with_a_dynamic_batch_reproduces_eager() -> None:
    from tensorplay.export import Dim, export
    _, model = layer_pair("lstm", "float32", num_layers=2, bidirectional=True, batch_first=True)
    ep = export(model, (tp.randn(B, T, I),), dynamic_shapes={"input": {0: Dim("b", min=1, max=64)}})
    for batch in (1, 7):
        x = tp.randn(batch, T, I)
        for got, want in zip(flat("lstm", ep.module()(x)), flat("lstm", model(x))):
            np.testing.assert_array_equal(ours_np(got), ours_np(want))


def test_grad_and_vmap_transforms_match_torch() -> None:
    theirs, ours = layer_pair("lstm", "float64", num_layers=2)
    xs = randn(3, T, I, dtype="float64", seed=15)  # three unbatched sequences
    batched = ours(tp.tensor(xs.transpose(1, 0, 2).copy()))[0]
    mapped = func.vmap(lambda s: ours(s)[0])(tp.tensor(xs))
    np.testing.assert_allclose(ours_np(mapped), ours_np(batched).transpose(1, 0, 2), rtol=1e-12, atol=1e-14)
    g = func.grad(lambda s: ours(s)[1][1].sum())(tp.tensor(xs[0]))
    tx = torch.tensor(xs[0], requires_grad=True)
    theirs(tx)[1][1].sum().backward()
    np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-11, atol=1e-13)


# ---- errors ------------------------------------------------------------------------------------

def test_wrong_input_and_state_shapes_are_shape_errors() -> None:
    lstm = nn.LSTM(I, H, num_layers=2)
    x = tp.randn(T, B, I)
    with pytest.raises(ShapeError, match=r"input.*2-d.*3-d.*got 4-d of shape \[1, 5, 2, 3\]"):
        lstm(x.unsqueeze(0))
    with pytest.raises(ShapeError, match=r"input_size.*\[\.\.\., 3\], got \[5, 2, 4\]"):
        lstm(tp.randn(T, B, I + 1))
    with pytest.raises(ShapeError, match=r"h_0 \(hx\[0\]\) of shape \[2, 2, 4\], got \[1, 2, 4\]"):
        lstm(x, (tp.zeros(1, B, H), tp.zeros(2, B, H)))
    with pytest.raises(ShapeError, match=r"c_0 \(hx\[1\]\) of shape \[2, 2, 4\], got \[2, 3, 4\]"):
        lstm(x, (tp.zeros(2, B, H), tp.zeros(2, B + 1, H)))
    with pytest.raises(ShapeError, match=r"LSTM: expected h_0 \(hx\[0\]\) of shape \[2, 4\], got \[2, 1, 4\]"):
        lstm(tp.randn(T, I), (tp.zeros(2, 1, H), tp.zeros(2, 1, H)))  # unbatched input takes 2-d states
    with pytest.raises(ArgumentTypeError, match="tuple"):
        lstm(x, tp.zeros(2, B, H))  # type: ignore[arg-type]
    gru = nn.GRU(I, H, batch_first=True, bidirectional=True)
    with pytest.raises(ShapeError, match=r"GRU: expected hx of shape \[2, 5, 4\], got \[2, 2, 4\]"):
        gru(tp.randn(T, B, I), tp.zeros(2, B, H))  # batch_first: the batch is axis 0 of the input
    with pytest.raises(ShapeError, match="sequence length"):
        gru(tp.randn(B, 0, I))
    with pytest.raises(DTypeError, match="float32.*float64"):
        gru(tp.randn(B, T, I, dtype="float64"))
    with pytest.raises(DTypeError, match="hx"):
        gru(tp.randn(B, T, I), tp.zeros(2, B, H, dtype="float64"))


def test_wrong_cell_shapes_are_shape_errors() -> None:
    cell = nn.GRUCell(I, H)
    with pytest.raises(ShapeError, match=r"GRUCell: expected input to be 1-d.*2-d.*got 3-d of shape \[1, 2, 3\]"):
        cell(tp.randn(1, B, I))
    with pytest.raises(ShapeError, match=r"input_size.*got \[2, 5\]"):
        cell(tp.randn(B, 5))
    with pytest.raises(ShapeError, match=r"expected hx of shape \[2, 4\], got \[3, 4\]"):
        cell(tp.randn(B, I), tp.zeros(B + 1, H))
    with pytest.raises(ShapeError, match=r"expected hx of shape \[4\], got \[1, 4\]"):
        cell(tp.randn(I), tp.zeros(1, H))
    lstm_cell = nn.LSTMCell(I, H)
    with pytest.raises(ShapeError, match=r"c_0 \(hx\[1\]\) of shape \[2, 4\], got \[2, 5\]"):
        lstm_cell(tp.randn(B, I), (tp.zeros(B, H), tp.zeros(B, H + 1)))
    with pytest.raises(DTypeError, match="Tensor"):
        cell(np.zeros((B, I), dtype="float32"))  # type: ignore[arg-type]


def test_constructor_arguments_are_checked() -> None:
    with pytest.raises(ArgumentError, match="proj_size=2 is not supported"):
        nn.LSTM(I, H, proj_size=2)
    with pytest.raises(ArgumentError, match="nonlinearity 'gelu'"):
        nn.RNN(I, H, nonlinearity="gelu")
    with pytest.raises(ArgumentError, match="nonlinearity 'sigmoid'"):
        nn.RNNCell(I, H, nonlinearity="sigmoid")
    with pytest.raises(ArgumentError, match="dropout.*1.5"):
        nn.GRU(I, H, num_layers=2, dropout=1.5)
    with pytest.raises(ShapeError, match="hidden_size must be positive, got 0"):
        nn.GRU(I, 0)
    with pytest.raises(ShapeError, match="num_layers must be positive, got 0"):
        nn.RNN(I, H, num_layers=0)
    with pytest.raises(ShapeError, match="input_size must be an int"):
        nn.LSTMCell(2.5, H)  # type: ignore[arg-type]
