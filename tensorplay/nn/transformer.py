"""``TransformerEncoderLayer`` and ``TransformerEncoder`` with PyTorch's structure, parameter names and
semantics (post-norm by default, ``norm_first=True`` for pre-norm; ``batch_first=False`` by default, as
PyTorch), so a PyTorch state dict loads. Masks are those of :class:`MultiheadAttention`: a bool
``src_mask[n, n]`` is True where attention is *not* allowed, a float one is added to the scores;
``is_causal=True`` without a mask applies the causal mask.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple

from tensorplay.errors import ShapeError
from tensorplay.nn import functional as F
from tensorplay.nn._util import layer_size
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


def _activation(activation: Any) -> Callable[[AnyTensor], AnyTensor]:
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ShapeError(f"TransformerEncoderLayer: activation should be 'relu' or 'gelu' (or a callable), "
                             f"got {activation!r}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise ShapeError(f"TransformerEncoderLayer: activation must be 'relu', 'gelu' or a callable, got "
                         f"{activation!r}")
    return activation  # type: ignore[no-any-return]


class TransformerEncoderLayer(Module, Generic[D]):
    """Self-attention then a feed-forward block, each with a residual connection, dropout and LayerNorm.

    Post-norm (``norm_first=False``): ``x = norm1(x + sa(x)); x = norm2(x + ff(x))``. Pre-norm:
    ``x = x + sa(norm1(x)); x = x + ff(norm2(x))``. ``ff(x) = linear2(dropout(activation(linear1(x))))``.
    Inputs are ``[n, B, d_model]`` (``batch_first=False``, PyTorch's default) or ``[*lead, n, d_model]``
    (``batch_first=True``)."""

    def __init__(self, d_model: D, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | Callable[[AnyTensor], AnyTensor] = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True, dtype: Any = None) -> None:
        super().__init__()
        layer_size(dim_feedforward, "dim_feedforward", "TransformerEncoderLayer")
        self.self_attn: MultiheadAttention[D] = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                                   batch_first=batch_first, dtype=dtype)
        self.linear1: Linear[D, int] = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2: Linear[int, D] = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1: LayerNorm[D] = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2: LayerNorm[D] = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        self.batch_first = batch_first

    def _sa_block(self, x: AnyTensor, mask: AnyTensor | None, key_padding_mask: AnyTensor | None,
                  is_causal: bool) -> AnyTensor:
        out, _ = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)
        return self.dropout1(out)

    def _ff_block(self, x: AnyTensor) -> AnyTensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src: Tensor[*Lead, N, D], src_mask: AnyTensor | None = None,
                src_key_padding_mask: AnyTensor | None = None, is_causal: bool = False) -> Tensor[*Lead, N, D]:
        """The encoded sequence, same shape as ``src``. ``src_key_padding_mask[B, n]`` is True at padded
        positions (no query attends to them)."""
        x: AnyTensor = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))  # type: ignore[arg-type]
        return x

    if TYPE_CHECKING:
        __call__ = forward


class TransformerEncoder(Module, Generic[D]):
    """``num_layers`` copies of ``encoder_layer`` (independent parameters, each initialised as the given
    layer), applied in turn, then ``norm`` when given. ``layers`` is a ``ModuleList`` (PyTorch's names:
    ``layers.0.self_attn.in_proj_weight``, ...)."""

    def __init__(self, encoder_layer: TransformerEncoderLayer[D], num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a TransformerEncoderLayer, got "
                            f"{type(encoder_layer).__name__}")
        count = layer_size(num_layers, "num_layers", "TransformerEncoder")
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(count)])
        self.num_layers = count
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
