"""PyTorch's transformer layers with its structure, parameter names and semantics, so a PyTorch state dict
loads: ``TransformerEncoderLayer``/``TransformerEncoder``, ``TransformerDecoderLayer``/``TransformerDecoder``
and the whole encoder-decoder ``Transformer``.

Every layer is post-norm by default (``norm_first=True`` for pre-norm) and takes ``batch_first=False`` by
default, as PyTorch: sequences are ``[n, B, d_model]`` (or one unbatched ``[n, d_model]``), or
``[*lead, n, d_model]`` with ``batch_first=True``. Unbatched arguments take unbatched masks (key padding
``[m]``, attention ``[n, m]`` or ``[nhead, n, m]``); mixing batched and unbatched arguments is a ShapeError.
Masks are those of :class:`MultiheadAttention`: a bool attention mask ``[n, m]`` (or ``[B * nhead, n, m]``)
and a bool key padding mask ``[B, m]`` are True where attention is *not* allowed, a float mask is added to
the scores; ``is_causal=True`` without a mask applies the causal mask (PyTorch wants the mask as well and
treats the flag as a hint).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple

import numpy as np

from tensorplay.creation import tensor as _tensor
from tensorplay.devices import check_device
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from tensorplay.nn import functional as F
from tensorplay.nn import init
from tensorplay.nn._util import layer_size, numel
from tensorplay.nn.attention import MultiheadAttention
from tensorplay.nn.container import ModuleList
from tensorplay.nn.dropout import Dropout
from tensorplay.nn.linear import Linear
from tensorplay.nn.module import Module
from tensorplay.nn.normalization import LayerNorm
from tensorplay.tensor import Tensor

D = TypeVar("D", bound=int)
N = TypeVar("N")
Lead = TypeVarTuple("Lead")
AnyTensor = Tensor[*tuple[Any, ...]]
_ACTIVATIONS: dict[str, Callable[[AnyTensor], AnyTensor]] = {"relu": F.relu, "gelu": F.gelu}


def _activation(activation: Any, owner: str) -> Callable[[AnyTensor], AnyTensor]:
    """The feed-forward activation of layer ``owner``: ``'relu'``, ``'gelu'`` or a callable; an unknown name
    is an :class:`ArgumentError`, anything else not callable an :class:`ArgumentTypeError`."""
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ArgumentError(f"{owner}: activation must be 'relu', 'gelu' or a callable, got {activation!r}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise ArgumentTypeError(f"{owner}: activation must be 'relu', 'gelu' or a callable, got "
                                f"{type(activation).__name__} {activation!r}")
    return activation  # type: ignore[no-any-return]


def _residual(x: AnyTensor, norm: Module, block: Callable[[AnyTensor], AnyTensor], norm_first: bool) -> AnyTensor:
    """One residual sub-block: pre-norm ``x + block(norm(x))`` or post-norm ``norm(x + block(x))``."""
    if norm_first:
        return x + block(norm(x))
    return norm(x + block(x))  # type: ignore[no-any-return]


def _sequence(owner: str, name: str, x: Any, d_model: int, batch_first: bool) -> tuple[tuple[Any, ...], Any]:
    """``(batch axes, length)`` of the sequence argument ``name``: ``[n, B, d_model]`` or unbatched
    ``[n, d_model]`` (no batch axes; ``batch_first=False``) or ``[*lead, n, d_model]``; anything else is a
    :class:`ShapeError` naming ``owner`` and ``name``."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"{owner}: {name} must be a tensorplay Tensor, got {type(x).__name__}")
    shape = tuple(x.shape)
    if batch_first:
        if len(shape) >= 2 and shape[-1] == d_model:
            return shape[:-2], shape[-2]
        expected = f"[*lead, n, {d_model}] (batch_first=True)"
    else:
        if len(shape) == 3 and shape[-1] == d_model:
            return shape[1:2], shape[0]
        if len(shape) == 2 and shape[-1] == d_model:
            return (), shape[0]
        expected = f"[n, B, {d_model}] or unbatched [n, {d_model}] (batch_first=False)"
    raise ShapeError(f"{owner}: {name} must be {expected}, got {list(shape)}")


def _same_batch(owner: str, a_name: str, a: AnyTensor, a_lead: tuple[Any, ...], b_name: str, b: AnyTensor,
                b_lead: tuple[Any, ...]) -> None:
    """Two sequence arguments with batch axes ``a_lead`` and ``b_lead`` must have the same ones (both
    unbatched, as PyTorch, which rejects a mix); otherwise a :class:`ShapeError` naming both."""
    if a_lead == b_lead:
        return
    mixed = " (one is batched, the other unbatched)" if not a_lead or not b_lead else ""
    raise ShapeError(f"{owner}: {a_name} {list(a.shape)} and {b_name} {list(b.shape)} must have the same batch "
                     f"axes{mixed}")


def _check_masks(owner: str, heads: int, lead: tuple[Any, ...], n: Any, m: Any, mask_name: str, mask: Any,
                 padding_name: str, padding: Any) -> None:
    """An attention mask ``[n, m]`` or ``[B * heads, n, m]`` and a key padding mask ``[*lead, m]``, each
    optional; a wrong shape is a :class:`ShapeError` naming ``owner`` and the argument."""
    for name, value in ((mask_name, mask), (padding_name, padding)):
        if value is not None and not isinstance(value, Tensor):
            raise DTypeError(f"{owner}: {name} must be a tensorplay Tensor or None, got {type(value).__name__}")
    if mask is not None and tuple(mask.shape) not in ((n, m), (numel(lead) * heads, n, m)):
        raise ShapeError(f"{owner}: {mask_name} must be [{n}, {m}] or [{numel(lead) * heads}, {n}, {m}], got "
                         f"{list(mask.shape)}")
    if padding is not None and tuple(padding.shape) != lead + (m,):
        raise ShapeError(f"{owner}: {padding_name} must be {list(lead + (m,))}, got {list(padding.shape)}")


def _attend(attn: MultiheadAttention[Any], dropout: Dropout, query: AnyTensor, kv: AnyTensor,
            mask: AnyTensor | None, key_padding_mask: AnyTensor | None, is_causal: bool) -> AnyTensor:
    """``dropout(attn(query, kv, kv))`` without the weights (self-attention when ``kv`` is ``query``)."""
    out, _ = attn(query, kv, kv, attn_mask=mask, key_padding_mask=key_padding_mask, need_weights=False,
                  is_causal=is_causal)
    return dropout(out)


class _Layer(Module):
    """What the encoder and decoder layers share, built in PyTorch's order: ``self_attn``
    (``multihead_attn`` for a decoder layer), ``linear1``, ``dropout``, ``linear2``, ``norm1``, ``norm2``
    (``norm3``), ``dropout1``, ``dropout2`` (``dropout3``)."""

    def __init__(self, owner: str, decoder: bool, d_model: Any, nhead: int, dim_feedforward: int, dropout: float,
                 activation: Any, layer_norm_eps: float, batch_first: bool, norm_first: bool, bias: bool,
                 dtype: Any) -> None:
        super().__init__()
        layer_size(dim_feedforward, "dim_feedforward", owner)

        def attention() -> MultiheadAttention[Any]:
            return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                      dtype=dtype)

        def norm() -> LayerNorm[Any]:
            return LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)

        self.self_attn = attention()
        if decoder:
            self.multihead_attn = attention()
        self.linear1: Linear[Any, int] = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2: Linear[int, Any] = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1, self.norm2 = norm(), norm()
        if decoder:
            self.norm3 = norm()
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        if decoder:
            self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation, owner)
        self.batch_first = batch_first

    def _sa_block(self, x: AnyTensor, mask: AnyTensor | None, key_padding_mask: AnyTensor | None,
                  is_causal: bool) -> AnyTensor:
        return _attend(self.self_attn, self.dropout1, x, x, mask, key_padding_mask, is_causal)

    def _feed_forward(self, x: AnyTensor, out_dropout: Dropout) -> AnyTensor:
        """``out_dropout(linear2(dropout(activation(linear1(x)))))``."""
        return out_dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _sequence(self, name: str, x: Any) -> tuple[tuple[Any, ...], Any]:
        return _sequence(type(self).__name__, name, x, int(self.self_attn.embed_dim), self.batch_first)


class TransformerEncoderLayer(_Layer, Generic[D]):
    """Self-attention then a feed-forward block, each with a residual connection, dropout and LayerNorm.

    Post-norm (``norm_first=False``): ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``. Pre-norm:
    ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``. ``ff(x) = linear2(dropout(activation(linear1(x))))``.
    Inputs are ``[n, B, d_model]`` (``batch_first=False``, PyTorch's default) or ``[*lead, n, d_model]``
    (``batch_first=True``)."""

    def __init__(self, d_model: D, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[AnyTensor], AnyTensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, dtype: Any = None) -> None:
        super().__init__("TransformerEncoderLayer", False, d_model, nhead, dim_feedforward, dropout, activation,
                         layer_norm_eps, batch_first, norm_first, bias, dtype)

    def _ff_block(self, x: AnyTensor) -> AnyTensor:
        return self._feed_forward(x, self.dropout2)

    def forward(self, src: Tensor[*Lead, N, D], src_mask: AnyTensor | None = None,
                src_key_padding_mask: AnyTensor | None = None, is_causal: bool = False) -> Tensor[*Lead, N, D]:
        """The encoded sequence, same shape as ``src``. ``src_mask`` is ``[n, n]`` or ``[B * nhead, n, n]``;
        ``src_key_padding_mask[B, n]`` is True at padded positions (no query attends to them)."""
        lead, n = self._sequence("src", src)
        _check_masks("TransformerEncoderLayer", self.self_attn.num_heads, lead, n, n, "src_mask", src_mask,
                     "src_key_padding_mask", src_key_padding_mask)
        x: AnyTensor = _residual(src, self.norm1,
                                 lambda y: self._sa_block(y, src_mask, src_key_padding_mask, is_causal),
                                 self.norm_first)
        return _residual(x, self.norm2, self._ff_block, self.norm_first)

    if TYPE_CHECKING:
        __call__ = forward


class TransformerDecoderLayer(_Layer, Generic[D]):
    """Self-attention over ``tgt``, attention from ``tgt`` to ``memory``, then a feed-forward block, each
    with a residual connection, dropout and LayerNorm.

    Post-norm (``norm_first=False``): ``x = norm1(x + sa(x)); x = norm2(x + mha(x, memory));
    x = norm3(x + ff(x))``. Pre-norm: ``x = x + sa(norm1(x)); x = x + mha(norm2(x), memory);
    x = x + ff(norm3(x))``. ``tgt`` is ``[t, B, d_model]`` and ``memory`` ``[s, B, d_model]``
    (``batch_first=False``, PyTorch's default) or ``[*lead, t, d_model]`` and ``[*lead, s, d_model]``."""

    def __init__(self, d_model: D, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[AnyTensor], AnyTensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, dtype: Any = None) -> None:
        super().__init__("TransformerDecoderLayer", True, d_model, nhead, dim_feedforward, dropout, activation,
                         layer_norm_eps, batch_first, norm_first, bias, dtype)

    def _mha_block(self, x: AnyTensor, memory: AnyTensor, mask: AnyTensor | None,
                   key_padding_mask: AnyTensor | None, is_causal: bool) -> AnyTensor:
        return _attend(self.multihead_attn, self.dropout2, x, memory, mask, key_padding_mask, is_causal)

    def _ff_block(self, x: AnyTensor) -> AnyTensor:
        return self._feed_forward(x, self.dropout3)

    def forward(self, tgt: Tensor[*Lead, N, D], memory: AnyTensor, tgt_mask: AnyTensor | None = None,
                memory_mask: AnyTensor | None = None, tgt_key_padding_mask: AnyTensor | None = None,
                memory_key_padding_mask: AnyTensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor[*Lead, N, D]:
        """The decoded sequence, same shape as ``tgt``. ``tgt_mask`` is ``[t, t]`` (or ``[B * nhead, t, t]``),
        ``memory_mask`` ``[t, s]`` (or ``[B * nhead, t, s]``); ``tgt_key_padding_mask[B, t]`` and
        ``memory_key_padding_mask[B, s]`` are True at padded positions. ``tgt_is_causal`` /
        ``memory_is_causal`` without the matching mask apply the causal mask."""
        lead, t = self._sequence("tgt", tgt)
        memory_lead, s = self._sequence("memory", memory)
        _same_batch("TransformerDecoderLayer", "memory", memory, memory_lead, "tgt", tgt, lead)
        heads = self.self_attn.num_heads
        _check_masks("TransformerDecoderLayer", heads, lead, t, t, "tgt_mask", tgt_mask, "tgt_key_padding_mask",
                     tgt_key_padding_mask)
        _check_masks("TransformerDecoderLayer", heads, lead, t, s, "memory_mask", memory_mask,
                     "memory_key_padding_mask", memory_key_padding_mask)
        x: AnyTensor = _residual(tgt, self.norm1,
                                 lambda y: self._sa_block(y, tgt_mask, tgt_key_padding_mask, tgt_is_causal),
                                 self.norm_first)
        x = _residual(x, self.norm2, lambda y: self._mha_block(y, memory, memory_mask, memory_key_padding_mask,
                                                                memory_is_causal), self.norm_first)
        return _residual(x, self.norm3, self._ff_block, self.norm_first)

    if TYPE_CHECKING:
        __call__ = forward


def _clones(owner: str, layer: Any, kind: type[Module], name: str, num_layers: Any) -> ModuleList:
    """``num_layers`` deep copies of ``layer`` (each its own parameters, initialised as ``layer``)."""
    if not isinstance(layer, kind):
        raise ArgumentTypeError(f"{owner}: {name} must be a {kind.__name__}, got {type(layer).__name__}")
    count = layer_size(num_layers, "num_layers", owner)
    return ModuleList([copy.deepcopy(layer) for _ in range(count)])


class TransformerEncoder(Module, Generic[D]):
    """``num_layers`` copies of ``encoder_layer`` (independent parameters, each initialised as the given
    layer), applied in turn, then ``norm`` when given. ``layers`` is a ``ModuleList`` (PyTorch's names:
    ``layers.0.self_attn.in_proj_weight``, ...)."""

    def __init__(self, encoder_layer: TransformerEncoderLayer[D], num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _clones("TransformerEncoder", encoder_layer, TransformerEncoderLayer, "encoder_layer",
                              num_layers)
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(self, src: Tensor[*Lead, N, D], mask: AnyTensor | None = None,
                src_key_padding_mask: AnyTensor | None = None,
                is_causal: bool | None = None) -> Tensor[*Lead, N, D]:
        """``src`` through every layer (each with ``mask``, ``src_key_padding_mask`` and ``is_causal``), then
        ``norm``."""
        x: AnyTensor = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            x = self.norm(x)
        return x

    if TYPE_CHECKING:
        __call__ = forward


class TransformerDecoder(Module, Generic[D]):
    """``num_layers`` copies of ``decoder_layer`` (independent parameters, each initialised as the given
    layer), applied in turn to ``tgt`` with the same ``memory``, then ``norm`` when given (PyTorch's names:
    ``layers.0.multihead_attn.in_proj_weight``, ..., ``norm.weight``)."""

    def __init__(self, decoder_layer: TransformerDecoderLayer[D], num_layers: int,
                 norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _clones("TransformerDecoder", decoder_layer, TransformerDecoderLayer, "decoder_layer",
                              num_layers)
        self.num_layers = len(self.layers)
        self.norm = norm

    def forward(self, tgt: Tensor[*Lead, N, D], memory: AnyTensor, tgt_mask: AnyTensor | None = None,
                memory_mask: AnyTensor | None = None, tgt_key_padding_mask: AnyTensor | None = None,
                memory_key_padding_mask: AnyTensor | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor[*Lead, N, D]:
        """``tgt`` through every layer (each with ``memory`` and the masks of
        :meth:`TransformerDecoderLayer.forward`), then ``norm``; same shape as ``tgt``."""
        x: AnyTensor = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        if self.norm is not None:
            x = self.norm(x)
        return x

    if TYPE_CHECKING:
        __call__ = forward


class Transformer(Module, Generic[D]):
    """PyTorch's encoder-decoder ``Transformer``: ``encoder`` (``num_encoder_layers`` encoder layers and a
    final LayerNorm ``encoder.norm``) and ``decoder`` (``num_decoder_layers`` decoder layers and
    ``decoder.norm``), or ``custom_encoder`` / ``custom_decoder``. Every parameter with more than one
    dimension is then re-initialised Xavier-uniform, as PyTorch. ``src`` is ``[s, B, d_model]`` and ``tgt``
    ``[t, B, d_model]`` (``batch_first=False``, the default) or ``[*lead, s, d_model]`` and
    ``[*lead, t, d_model]``."""

    def __init__(self, d_model: D = 512, nhead: int = 8, num_encoder_layers: int = 6,  # type: ignore[assignment]
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[AnyTensor], AnyTensor] = "relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        size = layer_size(d_model, "d_model", "Transformer")
        if device is not None:
            check_device(device, "Transformer")
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first,
                      bias, dtype)
        self.encoder: Module = custom_encoder if custom_encoder is not None else TransformerEncoder(
            TransformerEncoderLayer(*layer_args), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self.decoder: Module = custom_decoder if custom_decoder is not None else TransformerDecoder(
            TransformerDecoderLayer(*layer_args), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype))
        self._reset_parameters()
        self.d_model = size
        self.nhead = nhead
        self.batch_first = batch_first

    def _reset_parameters(self) -> None:
        """Xavier-uniform for every parameter with more than one dimension (PyTorch's initialisation)."""
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(self, src: AnyTensor, tgt: Tensor[*Lead, N, D], src_mask: AnyTensor | None = None,
                tgt_mask: AnyTensor | None = None, memory_mask: AnyTensor | None = None,
                src_key_padding_mask: AnyTensor | None = None, tgt_key_padding_mask: AnyTensor | None = None,
                memory_key_padding_mask: AnyTensor | None = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor[*Lead, N, D]:
        """``decoder(tgt, encoder(src))``, same shape as ``tgt``; ``src_mask`` / ``src_key_padding_mask``
        go to the encoder, the others to every decoder layer (see :meth:`TransformerDecoderLayer.forward`).
        ``src`` and ``tgt`` must have the same batch axes and ``d_model`` features."""
        src_lead, _ = _sequence("Transformer", "src", src, self.d_model, self.batch_first)
        tgt_lead, _ = _sequence("Transformer", "tgt", tgt, self.d_model, self.batch_first)
        _same_batch("Transformer", "src", src, src_lead, "tgt", tgt, tgt_lead)
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,  # type: ignore[no-any-return]
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    if TYPE_CHECKING:
        __call__ = forward

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> AnyTensor:
        """The float causal mask ``[sz, sz]``: ``-inf`` above the diagonal (a query may not attend to later
        positions), 0 elsewhere; float32 unless ``dtype`` is given."""
        size = layer_size(sz, "sz", "Transformer.generate_square_subsequent_mask")
        mask = np.triu(np.full((size, size), -np.inf, dtype=np.float32), 1)
        return _tensor(mask, dtype=dtype, device=device)
