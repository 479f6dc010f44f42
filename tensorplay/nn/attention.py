"""``MultiheadAttention`` with PyTorch's parameter names and semantics (``batch_first`` layout).

Parameters: ``in_proj_weight[3D, D]`` (query, key and value projections stacked),
``in_proj_bias[3D]``, ``out_proj.weight[D, D]`` and ``out_proj.bias[D]``, so a
``torch.nn.MultiheadAttention`` state dict loads as is. Inputs are
``x[*lead, n, D]`` with any leading shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple


from tensorplay import prefix as _prefix_module
from tensorplay.derived import causal_mask, mean, transpose
from tensorplay.errors import DTypeError, ShapeError
from tensorplay.nn import init
from tensorplay.nn._util import layer_size, masked_softmax, numel, ops_for, random_key, shape_of
from tensorplay.nn.linear import Linear, empty_parameter
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

prefix: Any = _prefix_module  # typed loosely: the layers check shapes at run time

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

D = TypeVar("D", bound=int)
N = TypeVar("N")
Lead = TypeVarTuple("Lead")
AnyTensor = Tensor[*tuple[Any, ...]]


def _split_heads(ops: Any, t: AnyTensor, heads: int) -> AnyTensor:
    """``[*lead, n, d] -> [*lead, heads, n, d // heads]``."""
    shape = tuple(t.shape)
    lead, n, d = shape[:-2], shape[-2], shape[-1]
    r = len(lead)
    t = ops.reshape(t, shape=lead + (n, heads, d // heads))
    return ops.permute(t, perm=tuple(range(r)) + (r + 1, r, r + 2))  # type: ignore[no-any-return]


def _merge_heads(ops: Any, t: AnyTensor) -> AnyTensor:
    """``[*lead, heads, n, dh] -> [*lead, n, heads * dh]``."""
    shape = tuple(t.shape)
    lead, h, n, dh = shape[:-3], shape[-3], shape[-2], shape[-1]
    r = len(lead)
    t = ops.permute(t, perm=tuple(range(r)) + (r + 1, r, r + 2))
    return ops.reshape(t, shape=lead + (n, h * dh))  # type: ignore[no-any-return]


def _check_time_major(query: AnyTensor, key: AnyTensor, value: AnyTensor, d: int) -> bool:
    """Whether ``batch_first=False`` inputs are unbatched: ``query[n, D]``, ``key`` / ``value[m, D]`` (True)
    or batched ``[n, B, D]``, ``[m, B, D]`` (False); any other rank, or a mix of the two, is a
    :class:`ShapeError` naming the arguments. Unbatched inputs need no transposition: they are one
    sequence, the ``[*lead, n, D]`` layout with no leading axes."""
    if query.ndim not in (2, 3):
        raise ShapeError(f"MultiheadAttention: batch_first=False expects query [n, B, {d}] (batched) or "
                         f"[n, {d}] (unbatched), got {list(query.shape)}")
    for name, t in (("key", key), ("value", value)):
        if t.ndim != query.ndim:
            kind = "batched" if query.ndim == 3 else "unbatched"
            raise ShapeError(f"MultiheadAttention: query {list(query.shape)} is {kind}, so {name} must be "
                             f"{query.ndim}-d as well, got {list(t.shape)}")
    return query.ndim == 2


class MultiheadAttention(Module, Generic[D]):
    """Multi-head attention ``softmax(q k^T / sqrt(d_head)) v`` with input and output projections.

    ``forward(query, key=None, value=None, ...)`` returns ``(output, weights)`` like PyTorch; ``key``
    and ``value`` default to ``query`` (self-attention, one fused projection). Masks follow PyTorch:
    a bool ``attn_mask`` ``[n, m]`` or ``[B*heads, n, m]`` and ``key_padding_mask[*lead, m]`` are
    True where attention is *not* allowed; float masks are added to the scores. Unlike PyTorch,
    ``batch_first`` defaults to True (inputs ``[*lead, n, D]``). With ``batch_first=False`` inputs are
    ``[n, B, D]``, or unbatched ``query[n, D]``, ``key``/``value[m, D]`` as PyTorch (then
    ``key_padding_mask[m]``, ``attn_mask[n, m]`` or ``[heads, n, m]``, output ``[n, D]`` and weights
    ``[n, m]`` or ``[heads, n, m]``: the unbatched shapes of both layouts are the same).
    """

    def __init__(self, embed_dim: D, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = True, dtype: Any = None) -> None:
        super().__init__()
        layer_size(embed_dim, "embed_dim", "MultiheadAttention")
        layer_size(num_heads, "num_heads", "MultiheadAttention", positive=True)
        if embed_dim % num_heads:
            raise ShapeError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        if add_bias_kv or add_zero_attn:
            raise ShapeError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        if (kdim is not None and kdim != embed_dim) or (vdim is not None and vdim != embed_dim):
            raise ShapeError(f"MultiheadAttention: kdim/vdim different from embed_dim ({embed_dim}) are not "
                             f"supported, got kdim={kdim}, vdim={vdim}")
        self.embed_dim = embed_dim
        self.kdim = embed_dim
        self.vdim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.in_proj_weight = empty_parameter((3 * int(embed_dim), int(embed_dim)), dtype, order="F")
        if bias:
            self.in_proj_bias = empty_parameter((3 * int(embed_dim),), dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj: Linear[D, D] = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: Xavier-uniform in-projection, zero biases."""
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _project(self, ops: Any, query: AnyTensor, key: AnyTensor,
                 value: AnyTensor) -> tuple[AnyTensor, AnyTensor, AnyTensor]:
        """``q, k, v``, each ``[*lead, heads, n, head_dim]``. Self-attention (``key`` and ``value`` are
        ``query``) runs one GEMM with the whole stacked weight and slices its ``[*lead, n, 3D]`` result;
        otherwise each input gets its own projection by a row block of the stacked weight."""
        w, b, h, d = self.in_proj_weight, self.in_proj_bias, self.num_heads, int(self.embed_dim)
        if key is query and value is query:
            # one GEMM three times as wide: on the benchmark block (512 tokens, D=64) the step took
            # 3.88 ms instead of 4.25 (two threads; one thread: 5.10 against 5.18)
            y = ops.linear(w, b, query)
            rank = y.ndim
            starts, stops = (0,) * (rank - 1), tuple(y.shape[:-1])
            return tuple(_split_heads(ops, ops.slice(y, starts=starts + (i * d,), stops=stops + ((i + 1) * d,),
                                                     steps=(1,) * rank), h)
                         for i in range(3))  # type: ignore[return-value]
        out = []
        for i, x in enumerate((query, key, value)):
            wi = ops.slice(w, starts=(i * d, 0), stops=((i + 1) * d, d), steps=(1, 1))
            bi = None if b is None else ops.slice(b, starts=(i * d,), stops=((i + 1) * d,), steps=(1,))
            out.append(_split_heads(ops, ops.linear(wi, bi, x), h))
        return out[0], out[1], out[2]

    def _masks(self, ops: Any, lead: tuple[Any, ...], n: int, m: int, attn_mask: AnyTensor | None,
               key_padding_mask: AnyTensor | None, is_causal: bool) -> tuple[AnyTensor | None, AnyTensor | None]:
        """``(allowed bool mask, additive float mask)``, each broadcastable to ``[*lead, heads, n, m]``."""
        allowed: AnyTensor | None = None
        additive: AnyTensor | None = None
        h = self.num_heads

        def add(mask: AnyTensor, target_shape: tuple[Any, ...]) -> None:
            nonlocal allowed, additive
            if tuple(mask.shape) != target_shape:
                mask = ops.reshape(mask, shape=target_shape)
            if mask.dtype.name == "bool":
                ok = ops.logical_not(mask)
                allowed = ok if allowed is None else ops.logical_and(allowed, ok)
            elif mask.dtype.name in ("float32", "float64"):
                additive = mask if additive is None else ops.add(additive, mask)
            else:
                raise DTypeError(f"MultiheadAttention: masks must be bool or float, got {mask.dtype}")

        if attn_mask is None and is_causal:
            allowed = causal_mask(ops, n, m)
        if attn_mask is not None:
            if tuple(attn_mask.shape) == (n, m):
                add(attn_mask, (n, m))
            elif attn_mask.ndim == 3 and tuple(attn_mask.shape) == (numel(lead) * h, n, m):
                add(attn_mask, lead + (h, n, m))
            else:
                raise ShapeError(f"MultiheadAttention: attn_mask must be [{n}, {m}] or [{numel(lead) * h}, {n}, {m}], "
                                 f"got {list(attn_mask.shape)}")
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != lead + (m,):
                raise ShapeError(f"MultiheadAttention: key_padding_mask must be {list(lead + (m,))}, got "
                                 f"{list(key_padding_mask.shape)}")
            add(key_padding_mask, lead + (1, 1, m))
        return allowed, additive

    def forward(self, query: Tensor[*Lead, N, D], key: AnyTensor | None = None, value: AnyTensor | None = None,
                key_padding_mask: AnyTensor | None = None, need_weights: bool = True,
                attn_mask: AnyTensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor[*Lead, N, D], AnyTensor | None]:
        """``(output[*lead, n, D], weights)``; weights are ``None`` unless ``need_weights`` (then
        ``[*lead, n, m]`` averaged over heads, or ``[*lead, heads, n, m]``). With ``batch_first=False``
        the output is ``[n, B, D]`` and the weights ``[B, n, m]`` / ``[B, heads, n, m]`` (PyTorch's), or
        for unbatched ``[n, D]`` inputs ``[n, D]`` and ``[n, m]`` / ``[heads, n, m]``; a mix of batched
        and unbatched inputs is a :class:`ShapeError`."""
        key = query if key is None else key
        value = key if value is None else value
        ops = ops_for("MultiheadAttention", query, key, value, self.in_proj_weight, self.in_proj_bias,
                      self.out_proj.weight, self.out_proj.bias)
        d = int(self.embed_dim)
        if query.ndim < 2 or query.shape[-1] != d or key.shape[-1] != d or value.shape[-1] != d:
            raise ShapeError(f"MultiheadAttention: expected inputs [*lead, n, {d}], got query {list(query.shape)}, "
                             f"key {list(key.shape)}, value {list(value.shape)}")
        unbatched = not self.batch_first and _check_time_major(query, key, value, d)
        if not self.batch_first and not unbatched:
            same_kv = key is query and value is query
            key_in, value_in = key, value
            query = transpose(ops, query, 0, 1)
            key = value = query
            if not same_kv:
                key = transpose(ops, key_in, 0, 1)
                value = key if value_in is key_in else transpose(ops, value_in, 0, 1)
        assert key is not None and value is not None
        qshape = shape_of(query)
        lead, n, m = qshape[:-2], qshape[-2], key.shape[-2]
        if tuple(key.shape[:-2]) != lead or tuple(value.shape[:-1]) != tuple(key.shape[:-1]):
            raise ShapeError(f"MultiheadAttention: query {list(query.shape)}, key {list(key.shape)} and value "
                             f"{list(value.shape)} must share their leading axes (and key/value their length)")
        q, k, v = self._project(ops, query, key, value)
        allowed, additive = self._masks(ops, lead, n, m, attn_mask, key_padding_mask, is_causal)
        scale = _prefix_module.attention_scale(self.head_dim)
        drop = self.dropout if self.training else 0.0
        weights: AnyTensor | None = None
        if not need_weights and additive is None and drop == 0.0:
            o = ops.dot_product_attention(q, k, v, allowed, scale=scale)
        else:
            scores = ops.mul(ops.matmul(q, transpose(ops, k, -2, -1)), scale)
            if allowed is not None:
                scores = ops.where(allowed, scores, float("-inf"))
            if additive is not None:
                scores = ops.add(scores, additive)
            probs = masked_softmax(ops, scores)
            if need_weights:
                weights = mean(ops, probs, -3, False) if average_attn_weights else probs
            if drop > 0.0:
                probs = prefix.dropout(ops, probs, drop, True, key=random_key(ops))
            o = ops.matmul(probs, v)
        out = self.out_proj(_merge_heads(ops, o))
        if not self.batch_first and not unbatched:
            out = transpose(ops, out, 0, 1)
        return out, weights

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return ""
