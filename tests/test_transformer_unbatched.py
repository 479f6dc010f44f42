"""Unbatched inputs (one sequence ``[n, d_model]``, no batch axis) to ``MultiheadAttention`` and the transformer
layers, against PyTorch: outputs, attention weights and masks of the unbatched shapes (key padding ``[m]``,
attention ``[n, m]`` or ``[nhead, n, m]``), for both ``batch_first`` settings; gradients for one layer; a mix
of batched and unbatched arguments is a ShapeError, as PyTorch rejects it; an unknown activation name is an
ArgumentError."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.errors import ArgumentError, ArgumentTypeError, ShapeError

D, H, FF = 16, 2, 32
T, S = 5, 4
RTOL, ATOL = 3e-4, 3e-5
pytestmark = pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")  # PyTorch's, batch_first=False


def _load(ours: Any, theirs: torch.nn.Module) -> None:
    """PyTorch's parameters into ``ours`` (strict, same names in the same order); both in eval mode."""
    state = theirs.state_dict()
    assert list(ours.state_dict()) == list(state)
    ours.load_state_dict({k: v.detach().numpy() for k, v in state.items()}, strict=True)
    ours.eval()
    theirs.eval()


def _rand(*shape: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _padding(length: int) -> np.ndarray:
    """``[length]``, True (padded) at the last position."""
    mask = np.zeros(length, dtype=bool)
    mask[-1] = True
    return mask


def _banded(n: int, m: int, heads: int | None = None) -> np.ndarray:
    """A bool attention mask ``[n, m]`` (or ``[heads, n, m]``, a different band per head), True where a
    query may not attend; every query keeps at least one key."""
    rows = np.arange(n)[:, None]
    cols = np.arange(m)[None, :]
    if heads is None:
        return np.asarray((cols > rows + 1) & (cols > 0))
    return np.stack([(cols > rows + h) & (cols > 0) for h in range(heads)])


def _run(ours: Any, theirs: torch.nn.Module, arrays: list[np.ndarray], masks: dict[str, np.ndarray],
         **kwargs: Any) -> tuple[Any, Any]:
    """``(ours(...), theirs(...))`` on the same arrays and masks, PyTorch without autograd."""
    out = ours(*[tp.tensor(a) for a in arrays], **{k: tp.tensor(v) for k, v in masks.items()}, **kwargs)
    with torch.no_grad():
        ref = theirs(*[torch.tensor(a) for a in arrays], **{k: torch.tensor(v) for k, v in masks.items()},
                     **kwargs)
    return out, ref


def _close(got: Any, want: Any) -> None:
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL)


# ---- MultiheadAttention ---------------------------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("masks", ["none", "padding", "mask2d", "mask3d", "float"])
def test_mha_unbatched_matches_torch(batch_first: bool, average: bool, masks: str) -> None:
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(D, H, batch_first=batch_first)
    ours = nn.MultiheadAttention(D, H, batch_first=batch_first)
    _load(ours, theirs)
    query, key, value = _rand(T, D, seed=1), _rand(S, D, seed=2), _rand(S, D, seed=3)
    given = {"none": {}, "padding": {"key_padding_mask": _padding(S)},
             "mask2d": {"attn_mask": _banded(T, S), "key_padding_mask": _padding(S)},
             "mask3d": {"attn_mask": _banded(T, S, H)},
             "float": {"attn_mask": np.where(_banded(T, S), -1e9, 0.5).astype(np.float32)}}[masks]
    (out, w), (ref, ref_w) = _run(ours, theirs, [query, key, value], given, average_attn_weights=average)
    _close(out, ref)
    assert tuple(ref_w.shape) == ((T, S) if average else (H, T, S))
    _close(w, ref_w)
    # self-attention (one fused projection) and no weights
    (out, w), (ref, ref_w) = _run(ours, theirs, [query, query, query], {"attn_mask": _banded(T, T)},
                                  need_weights=False)
    _close(out, ref)
    assert w is None and ref_w is None


def test_mha_batch_first_false_batched_still_matches_torch() -> None:
    torch.manual_seed(0)
    theirs = torch.nn.MultiheadAttention(D, H)
    ours = nn.MultiheadAttention(D, H, batch_first=False)
    _load(ours, theirs)
    q, kv = _rand(T, 3, D, seed=1), _rand(S, 3, D, seed=2)
    (out, w), (ref, ref_w) = _run(ours, theirs, [q, kv, kv], {"attn_mask": _banded(T, S)},
                                  average_attn_weights=False)
    _close(out, ref)
    _close(w, ref_w)


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_mixed_batched_and_unbatched_is_a_shape_error(batch_first: bool) -> None:
    mha = nn.MultiheadAttention(D, H, batch_first=batch_first)
    q2, kv2, kv3 = tp.randn(T, D), tp.randn(S, D), tp.randn(S, 3, D)
    with pytest.raises(AssertionError):  # PyTorch rejects the mix too
        torch.nn.MultiheadAttention(D, H, batch_first=batch_first)(torch.randn(T, D), torch.randn(S, 3, D),
                                                                    torch.randn(S, 3, D))
    with pytest.raises(ShapeError, match="MultiheadAttention: .*key"):
        mha(q2, kv3, kv3)
    with pytest.raises(ShapeError, match="MultiheadAttention: .*value"):
        mha(q2, kv2, kv3)
    with pytest.raises(ShapeError, match=r"MultiheadAttention: key_padding_mask must be \[4\], got \[3, 4\]"):
        mha(q2, kv2, kv2, key_padding_mask=tp.zeros(3, S, dtype=tp.bool))
    with pytest.raises(ShapeError, match=r"MultiheadAttention: attn_mask must be \[5, 4\] or \[2, 5, 4\]"):
        mha(q2, kv2, kv2, attn_mask=tp.zeros(3 * H, T, S, dtype=tp.bool))
    if not batch_first:
        with pytest.raises(ShapeError, match=r"query \[5, 3, 16\] is batched, so key must be 3-d"):
            mha(tp.randn(T, 3, D), kv2, kv2)
        with pytest.raises(ShapeError, match=r"batch_first=False expects query \[n, B, 16\] \(batched\) or "
                                             r"\[n, 16\] \(unbatched\), got \[5, 3, 1, 16\]"):
            mha(tp.randn(T, 3, 1, D))


# ---- the transformer layers -------------------------------------------------------------------------------

def _layers(kind: str, batch_first: bool, norm_first: bool) -> tuple[Any, torch.nn.Module]:
    """``(ours, theirs)`` of ``kind``, PyTorch's parameters loaded into ours."""
    torch.manual_seed(0)
    common: dict[str, Any] = {"dim_feedforward": FF, "dropout": 0.0, "batch_first": batch_first,
                              "norm_first": norm_first}
    pair: tuple[Any, torch.nn.Module]
    if kind == "encoder_layer":
        pair = nn.TransformerEncoderLayer(D, H, **common), torch.nn.TransformerEncoderLayer(D, H, **common)
    elif kind == "decoder_layer":
        pair = nn.TransformerDecoderLayer(D, H, **common), torch.nn.TransformerDecoderLayer(D, H, **common)
    elif kind == "encoder":
        pair = (nn.TransformerEncoder(nn.TransformerEncoderLayer(D, H, **common), 2, nn.LayerNorm(D)),
                torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D, H, **common), 2, torch.nn.LayerNorm(D)))
    elif kind == "decoder":
        pair = (nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, **common), 2, nn.LayerNorm(D)),
                torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, **common), 2, torch.nn.LayerNorm(D)))
    else:
        pair = (nn.Transformer(D, H, 1, 1, **common), torch.nn.Transformer(D, H, 1, 1, **common))
    _load(*pair)
    return pair


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("kind", ["encoder_layer", "decoder_layer", "encoder", "decoder", "transformer"])
def test_layers_unbatched_match_torch(kind: str, batch_first: bool, norm_first: bool) -> None:
    ours, theirs = _layers(kind, batch_first, norm_first)
    src, tgt = _rand(S, D, seed=1), _rand(T, D, seed=2)
    if kind == "encoder_layer":
        cases = [([src], {"src_mask": _banded(S, S)}), ([src], {"src_key_padding_mask": _padding(S)}),
                 ([src], {"src_mask": _banded(S, S, H), "src_key_padding_mask": _padding(S)})]
    elif kind == "encoder":
        cases = [([src], {"mask": _banded(S, S)}), ([src], {"src_key_padding_mask": _padding(S)})]
    elif kind in ("decoder_layer", "decoder"):
        cases = [([tgt, src], {"tgt_mask": _banded(T, T), "memory_mask": _banded(T, S, H)}),
                 ([tgt, src], {"tgt_key_padding_mask": _padding(T), "memory_key_padding_mask": _padding(S)})]
    else:
        cases = [([src, tgt], {"src_mask": _banded(S, S, H), "tgt_mask": _banded(T, T), "memory_mask": _banded(T, S),
                               "src_key_padding_mask": _padding(S), "tgt_key_padding_mask": _padding(T),
                               "memory_key_padding_mask": _padding(S)})]
    cases.append((cases[0][0], {}))
    expected = (S, D) if kind.startswith("encoder") else (T, D)
    for arrays, masks in cases:
        out, ref = _run(ours, theirs, arrays, masks)
        assert tuple(ref.shape) == expected
        _close(out, ref)


@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_unbatched_gradients_match_torch(batch_first: bool) -> None:
    ours, theirs = _layers("decoder_layer", batch_first, norm_first=False)
    arrays = [_rand(T, D, seed=1), _rand(S, D, seed=2)]
    masks = {"tgt_mask": _banded(T, T), "memory_key_padding_mask": _padding(S)}
    xs = [tp.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = ours(*xs, **{k: tp.tensor(v) for k, v in masks.items()})
    ref = theirs(*ts, **{k: torch.tensor(v) for k, v in masks.items()})
    _close(out, ref)
    c = _rand(T, D, seed=9)
    (out * tp.tensor(c)).sum().backward()
    (ref * torch.tensor(c)).sum().backward()
    for x, t in zip(xs, ts):
        assert x.grad is not None and t.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=RTOL, atol=ATOL)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        tg = theirs_params[name].grad
        assert p.grad is not None and tg is not None, name
        np.testing.assert_allclose(p.grad.numpy(), tg.numpy(), err_msg=name, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("batch_first", [False, True])
def test_layers_mixed_batched_and_unbatched_are_shape_errors(batch_first: bool) -> None:
    batched = (lambda n: tp.randn(3, n, D)) if batch_first else (lambda n: tp.randn(n, 3, D))
    dec = nn.TransformerDecoderLayer(D, H, FF, batch_first=batch_first)
    with pytest.raises(ShapeError, match=r"TransformerDecoderLayer: memory \[.*\] and tgt \[5, 16\] must have the "
                                         r"same batch axes \(one is batched, the other unbatched\)"):
        dec(tp.randn(T, D), batched(S))
    with pytest.raises(ShapeError, match=r"TransformerDecoderLayer: memory \[4, 16\] and tgt .* \(one is batched"):
        dec(batched(T), tp.randn(S, D))
    with pytest.raises(ShapeError, match=r"TransformerDecoderLayer: tgt_key_padding_mask must be \[5\], got \[3, 5\]"):
        dec(tp.randn(T, D), tp.randn(S, D), tgt_key_padding_mask=tp.zeros(3, T, dtype=tp.bool))
    enc = nn.TransformerEncoderLayer(D, H, FF, batch_first=batch_first)
    with pytest.raises(ShapeError, match=r"TransformerEncoderLayer: src_key_padding_mask must be \[3, 4\], got \[4\]"):
        enc(batched(S), src_key_padding_mask=tp.zeros(S, dtype=tp.bool))
    with pytest.raises(ShapeError, match=r"TransformerEncoderLayer: src_mask must be \[4, 4\] or \[2, 4, 4\]"):
        enc(tp.randn(S, D), src_mask=tp.zeros(3 * H, S, S, dtype=tp.bool))
    model = nn.Transformer(D, H, 1, 1, dim_feedforward=FF, batch_first=batch_first)
    with pytest.raises(ShapeError, match=r"Transformer: src \[4, 16\] and tgt .* \(one is batched, the other"):
        model(tp.randn(S, D), batched(T))


# ---- the activation argument --------------------------------------------------------------------------------

@pytest.mark.parametrize("make, owner", [
    (lambda a: nn.TransformerEncoderLayer(D, H, activation=a), "TransformerEncoderLayer"),
    (lambda a: nn.TransformerDecoderLayer(D, H, activation=a), "TransformerDecoderLayer"),
    (lambda a: nn.Transformer(D, H, 1, 1, activation=a), "TransformerEncoderLayer"),
])
def test_unknown_activation_is_an_argument_error(make: Any, owner: str) -> None:
    with pytest.raises(RuntimeError):  # PyTorch rejects the name too
        torch.nn.TransformerEncoderLayer(D, H, activation="swish")
    with pytest.raises(ArgumentError, match=f"{owner}: activation must be 'relu', 'gelu' or a callable, "
                                            f"got 'swish'"):
        make("swish")
    with pytest.raises(ArgumentTypeError, match=f"{owner}: activation must be 'relu', 'gelu' or a callable, "
                                                f"got int 3"):
        make(3)
