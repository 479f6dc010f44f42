"""``nn.TransformerDecoderLayer``, ``nn.TransformerDecoder`` and ``nn.Transformer`` against PyTorch: the same
state dict names (loaded strictly from PyTorch), the same outputs in eval mode with causal, padding and float
masks, the same gradients for the inputs and every parameter, a compiled forward equal to eager, PyTorch's
initialisation of ``Transformer`` and shape errors that name the argument."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.errors import ArgumentError, ArgumentTypeError, ShapeError
from tensorplay.testing import check_interpreters

D, H, FF = 16, 2, 32
B, T, S = 3, 5, 4
RTOL, ATOL = 3e-4, 3e-5
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's, batch_first=False


def _load(ours: Any, theirs: torch.nn.Module) -> None:
    """PyTorch's parameters into ``ours`` (strict), after checking both name them the same, in order."""
    state = theirs.state_dict()
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict({k: v.detach().numpy() for k, v in state.items()}, strict=True)


def _seq(length: int, batch_first: bool, seed: int) -> np.ndarray:
    shape = (B, length, D) if batch_first else (length, B, D)
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _padding(length: int, padded: int) -> np.ndarray:
    """``[B, length]``, True at the last ``padded`` positions of batch rows 1 and 2 (never a whole row)."""
    mask = np.zeros((B, length), dtype=bool)
    mask[1:, length - padded:] = True
    return mask


def _compare(ours: Any, theirs: torch.nn.Module, arrays: list[np.ndarray], masks: dict[str, np.ndarray],
             ours_kwargs: dict[str, Any] | None = None, grads: bool = True) -> None:
    """``ours(*arrays, **masks)`` against ``theirs`` in eval mode; with ``grads`` the gradients of
    ``sum(out * c)`` for the inputs and every parameter too. ``ours_kwargs`` are passed to ours only."""
    xs = [tp.tensor(a, requires_grad=grads) for a in arrays]
    ts = [torch.tensor(a, requires_grad=grads) for a in arrays]
    out = ours(*xs, **{k: tp.tensor(v) for k, v in masks.items()}, **(ours_kwargs or {}))
    ref = theirs(*ts, **{k: torch.tensor(v) for k, v in masks.items()})
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    if not grads:
        return
    c = np.random.default_rng(9).standard_normal(tuple(ref.shape)).astype(np.float32)
    ours.zero_grad()
    theirs.zero_grad()
    (out * tp.tensor(c)).sum().backward()
    (ref * torch.tensor(c)).sum().backward()
    for x, t in zip(xs, ts):
        assert x.grad is not None and t.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=RTOL, atol=ATOL)
    theirs_params = dict(theirs.named_parameters())
    named = dict(ours.named_parameters())
    assert list(named) == list(theirs_params)
    for name, p in named.items():
        tg = theirs_params[name].grad
        assert p.grad is not None and tg is not None, name
        np.testing.assert_allclose(p.grad.numpy(), tg.numpy(), err_msg=name, rtol=RTOL, atol=ATOL)


def _causal(n: int) -> np.ndarray:
    return torch.nn.Transformer.generate_square_subsequent_mask(n).numpy()


# ---- TransformerDecoderLayer ----------------------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("batch_first", [True, False])
def test_decoder_layer_matches_pytorch(norm_first: bool, activation: str, batch_first: bool) -> None:
    torch.manual_seed(0)
    kwargs = dict(dim_feedforward=FF, activation=activation, batch_first=batch_first, norm_first=norm_first)
    theirs = torch.nn.TransformerDecoderLayer(D, H, **kwargs).eval()  # type: ignore[arg-type]
    ours = nn.TransformerDecoderLayer(D, H, **kwargs).eval()  # type: ignore[arg-type]
    _load(ours, theirs)
    tgt, memory = _seq(T, batch_first, 1), _seq(S, batch_first, 2)
    causal = _causal(T)
    # bool masks (True = not allowed): causal target mask, padding of both sequences; gradients too
    _compare(ours, theirs, [tgt, memory], {"tgt_mask": causal != 0, "tgt_key_padding_mask": _padding(T, 1),
                                           "memory_key_padding_mask": _padding(S, 2)})
    # float masks, added to the scores
    memory_mask = np.random.default_rng(3).standard_normal((T, S)).astype(np.float32)
    _compare(ours, theirs, [tgt, memory], {"tgt_mask": causal, "memory_mask": memory_mask}, grads=False)
    # tgt_is_causal alone makes the causal mask PyTorch is given explicitly
    got = ours(tp.tensor(tgt), tp.tensor(memory), tgt_is_causal=True)
    ref = theirs(torch.tensor(tgt), torch.tensor(memory), tgt_mask=torch.tensor(causal), tgt_is_causal=True)
    np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_decoder_layer_callable_activation_and_per_head_mask() -> None:
    torch.manual_seed(1)
    theirs = torch.nn.TransformerDecoderLayer(D, H, FF, activation=torch.nn.functional.silu, batch_first=True,
                                              bias=False).eval()
    ours = nn.TransformerDecoderLayer(D, H, FF, activation=tp.nn.functional.silu, batch_first=True,
                                      bias=False).eval()
    _load(ours, theirs)
    per_head = np.random.default_rng(4).standard_normal((B * H, T, S)).astype(np.float32)
    _compare(ours, theirs, [_seq(T, True, 5), _seq(S, True, 6)], {"memory_mask": per_head})


def test_dropout_is_active_only_in_training() -> None:
    layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.5, batch_first=True)
    tgt, memory = tp.tensor(_seq(T, True, 7)), tp.tensor(_seq(S, True, 8))
    layer.eval()
    a, b = layer(tgt, memory).detach().numpy(), layer(tgt, memory).detach().numpy()
    np.testing.assert_array_equal(a, b)
    layer.train()
    assert not np.allclose(layer(tgt, memory).detach().numpy(), a)


# ---- TransformerDecoder ----------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_stack_with_final_norm_matches_pytorch(batch_first: bool) -> None:
    torch.manual_seed(2)
    layer = torch.nn.TransformerDecoderLayer(D, H, FF, batch_first=batch_first, norm_first=True)
    theirs = torch.nn.TransformerDecoder(layer, 2, norm=torch.nn.LayerNorm(D)).eval()
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF, batch_first=batch_first, norm_first=True),
                                 2, norm=nn.LayerNorm(D)).eval()
    _load(ours, theirs)
    assert ours.layers[0].linear1.weight is not ours.layers[1].linear1.weight  # each layer its own parameters
    tgt, memory = _seq(T, batch_first, 10), _seq(S, batch_first, 11)
    _compare(ours, theirs, [tgt, memory], {"tgt_mask": _causal(T) != 0, "memory_key_padding_mask": _padding(S, 1)})
    # tgt_is_causal reaches every layer: the causal mask without passing it (PyTorch needs it passed)
    got = ours(tp.tensor(tgt), tp.tensor(memory), tgt_is_causal=True)
    ref = theirs(torch.tensor(tgt), torch.tensor(memory), tgt_mask=torch.tensor(_causal(T)), tgt_is_causal=True)
    np.testing.assert_allclose(got.detach().numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)


# ---- Transformer -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_first, layers", [(False, (1, 2)), (True, (2, 1))])
def test_transformer_matches_pytorch(batch_first: bool, layers: tuple[int, int]) -> None:
    torch.manual_seed(3)
    kwargs = dict(d_model=D, nhead=H, num_encoder_layers=layers[0], num_decoder_layers=layers[1],
                  dim_feedforward=FF, batch_first=batch_first)
    theirs = torch.nn.Transformer(**kwargs).eval()  # type: ignore[arg-type]
    ours = nn.Transformer(**kwargs).eval()  # type: ignore[arg-type]
    _load(ours, theirs)
    src, tgt = _seq(S, batch_first, 12), _seq(T, batch_first, 13)
    _compare(ours, theirs, [src, tgt], {"tgt_mask": _causal(T) != 0, "src_key_padding_mask": _padding(S, 1),
                                        "tgt_key_padding_mask": _padding(T, 2),
                                        "memory_key_padding_mask": _padding(S, 1)})
    src_mask = np.random.default_rng(14).standard_normal((S, S)).astype(np.float32)
    _compare(ours, theirs, [src, tgt], {"src_mask": src_mask, "tgt_mask": _causal(T)}, grads=False)


def test_generate_square_subsequent_mask_is_pytorchs() -> None:
    for n in (1, 4, 7):
        mask = nn.Transformer.generate_square_subsequent_mask(n)
        assert mask.dtype == tp.float32
        np.testing.assert_array_equal(mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(n).numpy())
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=tp.float64).dtype == tp.float64


def test_transformer_initialises_matrices_xavier_uniform() -> None:
    tp.manual_seed(0)
    model = nn.Transformer(D, H, 1, 1, dim_feedforward=64)
    theirs = torch.nn.Transformer(D, H, 1, 1, dim_feedforward=64)
    matrices = 0
    for (name, p), (_, t) in zip(model.named_parameters(), theirs.named_parameters()):
        if p.ndim > 1:
            matrices += 1
            fan_out, fan_in = p.shape
            bound = math.sqrt(6.0 / (fan_in + fan_out))
            values = np.abs(p.detach().numpy())
            # within Xavier's bound and filling it (Linear's default bound 1/sqrt(fan_in) is smaller
            # for linear1 and the attention projections)
            assert values.max() <= bound and values.max() > 0.9 * bound, name
            assert np.abs(t.detach().numpy()).max() <= bound
        elif name.endswith("norm1.weight") or name.endswith("norm.weight"):
            np.testing.assert_array_equal(p.detach().numpy(), 1.0)
    assert matrices == 10  # encoder: in_proj, out_proj, linear1, linear2; decoder: two attentions more


# ---- compile ---------------------------------------------------------------------------------------------

def test_compiled_transformer_forward_matches_eager() -> None:
    tp.manual_seed(4)
    model = nn.Transformer(D, H, 1, 2, dim_feedforward=FF, batch_first=True).eval()
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(T)

    def forward(src: Any, tgt: Any, padding: Any) -> Any:
        return model(src, tgt, tgt_mask=tgt_mask, memory_key_padding_mask=padding)

    src, tgt, padding = tp.tensor(_seq(S, True, 15)), tp.tensor(_seq(T, True, 16)), tp.tensor(_padding(S, 2))
    compiled = tp.compile(forward)
    np.testing.assert_allclose(compiled(src, tgt, padding).detach().numpy(),
                               forward(src, tgt, padding).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


class _Seq2Seq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.model = nn.Transformer(8, 2, 1, 1, dim_feedforward=16, dropout=0.1, activation="gelu",
                                    batch_first=True, norm_first=True)

    def forward(self, src: Any, tgt: Any) -> Any:
        return self.model(src, tgt, tgt_is_causal=True)


@pytest.mark.filterwarnings("ignore::UserWarning")  # compile: the layers' sizes lie deep inside containers
@pytest.mark.parametrize("training", [True, False])
def test_transformer_under_every_way_of_running(training: bool) -> None:
    ways = check_interpreters(_Seq2Seq().train(training), tp.randn(2, 4, 8), tp.randn(2, 5, 8))
    assert sorted(ways) == ["compiled", "eager", "exported", "graph_module", "retraced", "traced",
                            "traced_execute", "vmap"]


# ---- errors ----------------------------------------------------------------------------------------------

def _layer_call(**overrides: Any) -> Callable[[], Any]:
    layer = nn.TransformerDecoderLayer(D, H, FF)  # batch_first=False: [n, B, D]
    args: dict[str, Any] = {"tgt": tp.randn(T, B, D), "memory": tp.randn(S, B, D)}
    args.update(overrides)
    return lambda: layer(**args)


@pytest.mark.parametrize("overrides, message", [
    ({"tgt": tp.randn(T, B, D + 1)}, r"tgt must be \[n, B, 16\] or unbatched \[n, 16\] \(batch_first=False\), got \[5, 3, 17\]"),
    ({"tgt": tp.randn(B, D)}, r"memory \[4, 3, 16\] and tgt \[3, 16\] must have the same batch axes \(one is "
                              r"batched, the other unbatched\)"),
    ({"tgt": tp.randn(B, D, 1, 1)}, r"tgt must be \[n, B, 16\] or unbatched \[n, 16\]"),
    ({"memory": tp.randn(S, B, 8)}, r"memory must be \[n, B, 16\]"),
    ({"memory": tp.randn(S, B + 1, D)}, r"memory \[4, 4, 16\] and tgt \[5, 3, 16\] must have the same batch"),
    ({"tgt_mask": tp.zeros(T, S)}, r"tgt_mask must be \[5, 5\] or \[6, 5, 5\], got \[5, 4\]"),
    ({"memory_mask": tp.zeros(T, T)}, r"memory_mask must be \[5, 4\] or \[6, 5, 4\], got \[5, 5\]"),
    ({"tgt_key_padding_mask": tp.zeros(T, B)}, r"tgt_key_padding_mask must be \[3, 5\], got \[5, 3\]"),
    ({"memory_key_padding_mask": tp.zeros(B, T)}, r"memory_key_padding_mask must be \[3, 4\], got \[3, 5\]"),
])
def test_decoder_layer_shape_errors_name_the_argument(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ShapeError, match="TransformerDecoderLayer: " + message):
        _layer_call(**overrides)()


def test_transformer_and_decoder_errors() -> None:
    model = nn.Transformer(D, H, 1, 1, dim_feedforward=FF, batch_first=True)
    with pytest.raises(ShapeError, match=r"Transformer: src \[2, 4, 16\] and tgt \[3, 5, 16\] must have the same"):
        model(tp.randn(2, S, D), tp.randn(3, T, D))
    with pytest.raises(ShapeError, match=r"Transformer: tgt must be \[\*lead, n, 16\] \(batch_first=True\)"):
        model(tp.randn(B, S, D), tp.randn(B, T, 8))
    with pytest.raises(ShapeError, match=r"TransformerEncoderLayer: src_key_padding_mask must be \[3, 4\]"):
        model(tp.randn(B, S, D), tp.randn(B, T, D), src_key_padding_mask=tp.zeros(B, T))
    with pytest.raises(ArgumentTypeError, match="decoder_layer must be a TransformerDecoderLayer"):
        nn.TransformerDecoder(nn.TransformerEncoderLayer(D, H), 2)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="TransformerDecoderLayer: activation must be 'relu', 'gelu' or a callable"):
        nn.TransformerDecoderLayer(D, H, activation="swish")
    with pytest.raises(ShapeError, match="num_layers must be an int"):
        nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H), 2.0)  # type: ignore[arg-type]
