"""Prefix-polymorphic layer operations, written once against ``Ops``.

Each takes any leading shape ``*lead`` and keeps it: the leading axes are
flattened into the primitive's batch axis, the primitive runs, and the axes
are restored. A per-sample model is therefore also a batched model. Weight
layouts follow PyTorch (``linear`` weight ``[out, in]``, conv weight
``[outC, inC/groups, *k]``, transposed conv weight ``[inC, outC/groups, *k]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar, TypeVarTuple, overload

import numpy as np

from tensorplay.dropout_probability import dropout_probability
from tensorplay.errors import DTypeError, ShapeError
from tensorplay.spec.shapes import fmt_shape
from tensorplay.derived import matmul, numel_of, reshape, unsqueeze  # noqa: F401 (reshape re-exported)

if TYPE_CHECKING:
    from tensorplay.ops import Ops
    from tensorplay.tensor import Tensor

AnyTensor = Any
IntOrTuple = int | Sequence[int]

# Typing-only names. The public signatures below are overloads that mypy checks: the leading
# shape ``*Lead`` is kept, feature/channel dims must agree, and output spatial dims that mypy
# cannot compute are named by the caller with ``out=(H2, W2)`` (NewType dims, or their values,
# which are then checked at run time). Without ``out`` they are typed ``int``.
Lead = TypeVarTuple("Lead")
S = TypeVarTuple("S")
T = TypeVarTuple("T")
A0 = TypeVar("A0")
A1 = TypeVar("A1")
A2 = TypeVar("A2")
In = TypeVar("In")
Out = TypeVar("Out")
D = TypeVar("D")
E = TypeVar("E")
Hd = TypeVar("Hd")
Hv = TypeVar("Hv")
N = TypeVar("N")
InC = TypeVar("InC")
OutC = TypeVar("OutC")
K1 = TypeVar("K1")
K2 = TypeVar("K2")
K3 = TypeVar("K3")
L1 = TypeVar("L1")
L2 = TypeVar("L2")
L3 = TypeVar("L3")
O1 = TypeVar("O1")
O2 = TypeVar("O2")
O3 = TypeVar("O3")
Padding = IntOrTuple | Literal["valid", "same"]
One = Literal[1]


def int_tuple(value: IntOrTuple, rank: int, name: str, where: str) -> tuple[int, ...]:
    """``value`` as a tuple of ``rank`` ints (an int is repeated). A float (``stride=1.5``), a bool or a
    tuple of the wrong length is a :class:`ShapeError` naming ``where`` and ``name``, never truncated."""
    if type(value) is int:  # the common spellings first: no checks left to make
        return (value,) * rank
    if type(value) is tuple and len(value) == rank and all(type(v) is int for v in value):
        return value

    def one(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ShapeError(f"{where}: {name} must be an int or a tuple of {rank} ints, got {value!r}")
        return int(v)

    if not isinstance(value, (tuple, list)):
        return (one(value),) * rank
    out = tuple(one(v) for v in value)
    if len(out) != rank:
        raise ShapeError(f"{where}: {name} has {len(out)} entries {list(out)}, expected {rank} "
                         f"(one per spatial dim)")
    return out


def attention_scale(head_dim: Any) -> float:
    """``1/sqrt(head_dim)``, the default attention scale; 1 for a zero-size head (whose scores are all 0)."""
    return 1.0 / math.sqrt(head_dim) if head_dim else 1.0


@overload
def map(ops: Ops, lead: Literal[0], x: Tensor[*S], f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[*T]: ...


@overload
def map(ops: Ops, lead: Literal[1], x: Tensor[A0, *S], f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[A0, *T]: ...


@overload
def map(ops: Ops, lead: Literal[2], x: Tensor[A0, A1, *S],
        f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[A0, A1, *T]: ...


@overload
def map(ops: Ops, lead: Literal[3], x: Tensor[A0, A1, A2, *S],
        f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[A0, A1, A2, *T]: ...


@overload
def map(ops: Ops, lead: int, x: Tensor[*tuple[Any, ...]],
        f: Callable[[Tensor[*tuple[Any, ...]]], Tensor[*tuple[Any, ...]]]) -> Tensor[*tuple[Any, ...]]: ...


def map(ops: Ops, lead: int, x: AnyTensor, f: Callable[[AnyTensor], AnyTensor]) -> AnyTensor:
    """Apply the single-sample function ``f`` independently to every sample of ``x[*lead, *sample]``
    (``lead`` is the number of leading axes); the result is ``[*lead, *f(sample).shape]``, as in
    TorchLean's ``Program.map``. ``f`` need not know about batches: it is traced once on one sample
    and run as one batched computation through the batching rules (not a Python loop); random draws
    inside ``f`` differ from sample to sample. ``lead == 0`` is ``f(x)``."""
    return ops.map(lead, x, f)


def _flatten_lead(ops: Ops, x: AnyTensor, keep: int, where: str) -> tuple[AnyTensor, tuple[Any, ...]]:
    """``x[*lead, *tail]`` with ``len(tail) == keep`` -> (``x[N, *tail]``, ``lead``)."""
    if x.ndim < keep:
        raise ShapeError(f"{where}: expected an input with at least {keep} axes (channels and spatial dims), "
                         f"got shape {list(x.shape)}")
    shape = tuple(x.shape)
    lead, tail = shape[:x.ndim - keep], shape[x.ndim - keep:]
    if len(lead) == 1:
        return x, lead
    return ops.reshape(x, shape=(numel_of(lead),) + tail), lead


@contextmanager
def _errors_name_the_input(given: Sequence[Any], flat: Sequence[Any]) -> Iterator[None]:
    """A shape or dtype error of a primitive run on the flattened input ``flat`` names the input as the
    caller gave it (``given``), not only the internal reshape."""
    try:
        yield
    except (ShapeError, DTypeError) as error:
        inner, outer = fmt_shape(flat), fmt_shape(given)
        text = str(error)
        if inner == outer or inner not in text:
            raise
        new = type(error)(text.replace(inner, f"{outer} (as {inner}: leading axes flattened)", 1))
        raise new.with_traceback(error.__traceback__) from None


def _restore_lead(ops: Ops, y: AnyTensor, lead: tuple[Any, ...]) -> AnyTensor:
    if len(lead) == 1:
        return y
    return ops.reshape(y, shape=lead + tuple(y.shape[1:]))


@overload
def linear(ops: Ops, w: Tensor[Out, In], b: Tensor[Out], x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]: ...


@overload
def linear(ops: Ops, w: Tensor[Out, In], b: None, x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]: ...


def linear(ops: Ops, w: AnyTensor, b: AnyTensor | None, x: AnyTensor) -> AnyTensor:
    """``x[*lead, in] @ w[out, in]^T + b[out] -> [*lead, out]`` (``b`` may be ``None``)."""
    if w.ndim != 2:
        raise ShapeError(f"linear: weight must be [out, in], got shape {list(w.shape)}")
    if x.ndim == 0 or x.shape[-1] != w.shape[1]:
        raise ShapeError(f"linear: input feature size {x.shape[-1] if x.ndim else '(0-d input)'} does not match "
                         f"the weight's in-features {w.shape[1]} (x: {list(x.shape)}, w: {list(w.shape)})")
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise ShapeError(f"linear: bias must be [{w.shape[0]}], got shape {list(b.shape)}")
    wt = ops.permute(w, perm=(1, 0))
    if x.ndim > 2:
        flat = ops.reshape(x, shape=(numel_of(x.shape[:-1]), x.shape[-1]))
        y = ops.matmul(flat, wt)
        y = ops.reshape(y, shape=tuple(x.shape[:-1]) + (w.shape[0],))
    else:
        y = matmul(ops, x, wt)  # type: ignore[arg-type]
    return y if b is None else ops.add(y, b)


def _same_padding(kernel: tuple[int, ...], dilation: tuple[int, ...], stride: tuple[int, ...],
                  where: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...] | None]:
    if any(s != 1 for s in stride):
        raise ShapeError(f"{where}: padding='same' needs stride 1, got stride {list(stride)}")
    totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
    if all(t % 2 == 0 for t in totals):
        return tuple(t // 2 for t in totals), None
    return (0,) * len(kernel), tuple((t // 2, t - t // 2) for t in totals)


def _check_out(where: str, shape: tuple[Any, ...], out: Sequence[Any] | None, rank: int) -> None:
    """The ``out=`` names of the output spatial dims: one per spatial dim; sizes given as ints
    (or NewType values) must match the output ``shape`` (dims given as types only name them)."""
    if out is None:
        return
    names = tuple(out)
    if len(names) != rank:
        raise ShapeError(f"{where}: out= names {len(names)} output spatial dims, but the output has {rank} "
                         f"(output shape {list(shape)})")
    actual = shape[len(shape) - rank:]
    for i, (name, size) in enumerate(zip(names, actual)):
        if isinstance(name, int) and isinstance(size, int) and name != size:
            raise ShapeError(f"{where}: out= says output spatial dim {i} has size {name}, but the output has "
                             f"{size} (output spatial shape {list(actual)}, output shape {list(shape)})")


@overload  # padding='same' keeps the input's spatial dims (more specific than the int-sized overloads below)
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],  # type: ignore[overload-overlap]
         stride: Literal[1] = 1, *, padding: Literal["same"], dilation: IntOrTuple = 1,
         groups: Literal[1] = 1) -> Tensor[*Lead, OutC, L1, L2]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],  # type: ignore[overload-overlap]
         stride: Literal[1] = 1, *, padding: Literal["same"], dilation: IntOrTuple = 1,
         groups: Literal[1] = 1) -> Tensor[*Lead, OutC, L1]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None,  # type: ignore[overload-overlap]
         x: Tensor[*Lead, InC, L1, L2, L3],
         stride: Literal[1] = 1, *, padding: Literal["same"], dilation: IntOrTuple = 1,
         groups: Literal[1] = 1) -> Tensor[*Lead, OutC, L1, L2, L3]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
         out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, OutC, O1, O2]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
         out: tuple[type[O1]]) -> Tensor[*Lead, OutC, O1]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2, L3],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
         out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
         out: tuple[O1, O2]) -> Tensor[*Lead, OutC, O1, O2]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
         out: tuple[O1]) -> Tensor[*Lead, OutC, O1]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2, L3],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
         out: tuple[O1, O2, O3]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1,
         groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1,
         groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int]: ...


@overload
def conv(ops: Ops, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2, L3],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1,
         groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int, int]: ...


@overload
def conv(ops: Ops, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None, x: Tensor[*tuple[Any, ...]],
         stride: IntOrTuple, padding: Padding, dilation: IntOrTuple, groups: int, *,
         out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...


@overload
def conv(ops: Ops, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None, x: Tensor[*tuple[Any, ...]],
         stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, *, groups: int,
         out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...


def conv(ops: Ops, w: AnyTensor, b: AnyTensor | None, x: AnyTensor, stride: IntOrTuple = 1,
         padding: IntOrTuple | str = 0, dilation: IntOrTuple = 1, groups: int = 1, *,
         out: Sequence[Any] | None = None) -> AnyTensor:
    """N-d convolution (cross-correlation) of ``x[*lead, inC, *spatial]`` with ``w[outC, inC/groups, *k]``
    plus ``b[outC]``, giving ``[*lead, outC, *out]``; ``out = (in + 2p - d(k-1) - 1)//s + 1``.
    ``padding`` may be ``"same"`` (stride 1; output spatial = input spatial) or ``"valid"`` (0).

    Typing: ``out=(H2, W2)`` names the output spatial dims for mypy (NewType dims, or sizes such as
    ``(H2(14), W2(14))``, which are checked here); ``padding="same"`` keeps the input's names;
    otherwise they are typed ``int``. Grouped convolutions (``groups=...``) are typed loosely."""
    rank = w.ndim - 2
    if rank not in (1, 2, 3):
        raise ShapeError(f"conv: weight must be [outC, inC/groups, *kernel] with 1 to 3 spatial dims, "
                         f"got shape {list(w.shape)}")
    kernel = tuple(w.shape[2:])
    s = int_tuple(stride, rank, "stride", "conv")
    d = int_tuple(dilation, rank, "dilation", "conv")
    flat, lead = _flatten_lead(ops, x, rank + 1, "conv")
    if isinstance(padding, str):
        if padding == "valid":
            p = (0,) * rank
        elif padding == "same":
            p, explicit = _same_padding(kernel, d, s, "conv")
            if explicit is not None:
                flat = ops.pad(flat, pads=((0, 0), (0, 0)) + explicit)
        else:
            raise ShapeError(f"conv: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
    else:
        p = int_tuple(padding, rank, "padding", "conv")
    with _errors_name_the_input(x.shape, flat.shape):
        y = ops.conv_nd(flat, w, stride=s, padding=p, dilation=d, groups=groups)
    if b is not None:
        if tuple(b.shape) != (w.shape[0],):
            raise ShapeError(f"conv: bias must be [{w.shape[0]}], got shape {list(b.shape)}")
        y = ops.add(y, ops.reshape(b, shape=(w.shape[0],) + (1,) * rank))
    _check_out("conv", lead + tuple(y.shape[1:]), out, rank)
    return _restore_lead(ops, y, lead)


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
                   stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                   dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                   out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, OutC, O1, O2]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
                   stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                   dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                   out: tuple[type[O1]] | tuple[O1]) -> Tensor[*Lead, OutC, O1]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
                   stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                   dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                   out: tuple[O1, O2]) -> Tensor[*Lead, OutC, O1, O2]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1, K2, K3], b: Tensor[OutC] | None,
                   x: Tensor[*Lead, InC, L1, L2, L3], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                   output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                   out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1, K2, K3], b: Tensor[OutC] | None,
                   x: Tensor[*Lead, InC, L1, L2, L3], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                   output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                   out: tuple[O1, O2, O3]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
                   stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                   dilation: IntOrTuple = 1, groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
                   stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                   dilation: IntOrTuple = 1, groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[InC, OutC, K1, K2, K3], b: Tensor[OutC] | None,
                   x: Tensor[*Lead, InC, L1, L2, L3], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                   output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                   groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int, int]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None,
                   x: Tensor[*tuple[Any, ...]], stride: IntOrTuple, padding: IntOrTuple, output_padding: IntOrTuple,
                   dilation: IntOrTuple, groups: int, *, out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...


@overload
def conv_transpose(ops: Ops, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None,
                   x: Tensor[*tuple[Any, ...]], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                   output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, *, groups: int,
                   out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...


def conv_transpose(ops: Ops, w: AnyTensor, b: AnyTensor | None, x: AnyTensor, stride: IntOrTuple = 1,
                   padding: IntOrTuple = 0, output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                   groups: int = 1, *, out: Sequence[Any] | None = None) -> AnyTensor:
    """Transposed convolution of ``x[*lead, inC, *spatial]`` with ``w[inC, outC/groups, *k]`` plus
    ``b[outC]``: ``out = (in-1)s - 2p + d(k-1) + output_padding + 1`` per spatial dim.
    ``out=`` names the output spatial dims as for :func:`conv`."""
    rank = w.ndim - 2
    if rank not in (1, 2, 3):
        raise ShapeError(f"conv_transpose: weight must be [inC, outC/groups, *kernel] with 1 to 3 spatial dims, "
                         f"got shape {list(w.shape)}")
    s = int_tuple(stride, rank, "stride", "conv_transpose")
    p = int_tuple(padding, rank, "padding", "conv_transpose")
    op = int_tuple(output_padding, rank, "output_padding", "conv_transpose")
    d = int_tuple(dilation, rank, "dilation", "conv_transpose")
    flat, lead = _flatten_lead(ops, x, rank + 1, "conv_transpose")
    with _errors_name_the_input(x.shape, flat.shape):
        y = ops.conv_transpose_nd(flat, w, stride=s, padding=p, output_padding=op, dilation=d, groups=groups)
    out_channels = w.shape[1] * groups
    if b is not None:
        if tuple(b.shape) != (out_channels,):
            raise ShapeError(f"conv_transpose: bias must be [{out_channels}], got shape {list(b.shape)}")
        y = ops.add(y, ops.reshape(b, shape=(out_channels,) + (1,) * rank))
    _check_out("conv_transpose", lead + tuple(y.shape[1:]), out, rank)
    return _restore_lead(ops, y, lead)


def _pool(ops: Ops, prim: str, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None,
          padding: IntOrTuple, out: Sequence[Any] | None = None, **extra: Any) -> AnyTensor:
    rank = 2 if isinstance(kernel_size, int) else len(tuple(kernel_size))
    k = int_tuple(kernel_size, rank, "kernel_size", prim)
    s = k if stride is None else int_tuple(stride, rank, "stride", prim)
    p = int_tuple(padding, rank, "padding", prim)
    if x.ndim < rank:
        raise ShapeError(f"{prim}: expected an input with at least {rank} spatial axes, got shape {list(x.shape)}")
    shape = tuple(x.shape)
    lead, spatial = shape[:x.ndim - rank], shape[x.ndim - rank:]
    flat = ops.reshape(x, shape=(numel_of(lead), 1) + spatial)
    with _errors_name_the_input(shape, flat.shape):
        y = getattr(ops, f"{prim}_nd")(flat, kernel_size=k, stride=s, padding=p, **extra)
    _check_out(prim, lead + tuple(y.shape[2:]), out, rank)
    return ops.reshape(y, shape=lead + tuple(y.shape[2:]))


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, O1, O2]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[type[O1]]) -> Tensor[*Lead, O1]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, O1, O2, O3]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[O1, O2]) -> Tensor[*Lead, O1, O2]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[O1]) -> Tensor[*Lead, O1]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[O1, O2, O3]) -> Tensor[*Lead, O1, O2, O3]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: int | tuple[int, int], stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*Lead, int, int]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: tuple[int], stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*Lead, int]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: tuple[int, int, int], stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*Lead, int, int, int]: ...


@overload
def max_pool(ops: Ops, x: Tensor[*tuple[Any, ...]], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*tuple[Any, ...]]: ...


def max_pool(ops: Ops, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: Sequence[Any] | None = None) -> AnyTensor:
    """Window max over the trailing ``len(kernel_size)`` axes of ``x[*lead, *spatial]`` (an int kernel means
    2-d); ``stride`` defaults to the kernel; padding is ``-inf`` and at most ``k//2``.
    ``out=(H2, W2)`` names the output spatial dims for mypy (sizes given as ints are checked)."""
    return _pool(ops, "max_pool", x, kernel_size, stride, padding, out)


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, O1, O2]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[type[O1]]) -> Tensor[*Lead, O1]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, O1, O2, O3]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[O1, O2]) -> Tensor[*Lead, O1, O2]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[O1]) -> Tensor[*Lead, O1]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: tuple[O1, O2, O3]) -> Tensor[*Lead, O1, O2, O3]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: int | tuple[int, int], stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*Lead, int, int]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: tuple[int], stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*Lead, int]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: tuple[int, int, int], stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*Lead, int, int, int]: ...


@overload
def avg_pool(ops: Ops, x: Tensor[*tuple[Any, ...]], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0) -> Tensor[*tuple[Any, ...]]: ...


def avg_pool(ops: Ops, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
             padding: IntOrTuple = 0, *, out: Sequence[Any] | None = None) -> AnyTensor:
    """Window mean over the trailing spatial axes; padded positions count as zeros. ``out=`` as for ``max_pool``."""
    return _pool(ops, "avg_pool", x, kernel_size, stride, padding, out)


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float, *, out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, O1, O2]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float, *, out: tuple[type[O1]]) -> Tensor[*Lead, O1]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float, *, out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, O1, O2, O3]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float, *, out: tuple[O1, O2]) -> Tensor[*Lead, O1, O2]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float, *, out: tuple[O1]) -> Tensor[*Lead, O1]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float, *, out: tuple[O1, O2, O3]) -> Tensor[*Lead, O1, O2, O3]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1, L2], kernel_size: int | tuple[int, int], stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float) -> Tensor[*Lead, int, int]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1], kernel_size: tuple[int], stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float) -> Tensor[*Lead, int]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*Lead, L1, L2, L3], kernel_size: tuple[int, int, int], stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float) -> Tensor[*Lead, int, int, int]: ...


@overload
def smooth_max_pool(ops: Ops, x: Tensor[*tuple[Any, ...]], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float) -> Tensor[*tuple[Any, ...]]: ...


def smooth_max_pool(ops: Ops, x: AnyTensor, kernel_size: IntOrTuple, stride: IntOrTuple | None,
                    padding: IntOrTuple, beta: float, *, out: Sequence[Any] | None = None) -> AnyTensor:
    """Window ``logsumexp(beta * x) / beta`` over the trailing spatial axes: a smooth maximum that tends to
    max-pool as ``beta`` grows, and a smooth minimum for negative ``beta`` (any finite non-zero number;
    there is no default). Padded cells take part with value 0: each adds ``exp(beta * 0)`` to its
    window's sum (TorchLean's convention). ``out=`` as for ``max_pool``."""
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not math.isfinite(beta) or beta == 0:
        raise ShapeError(f"smooth_max_pool: beta must be a finite non-zero number, got {beta!r}")
    return _pool(ops, "smooth_max_pool", x, kernel_size, stride, padding, out, beta=float(beta))


def layer_norm(ops: Ops, x: Tensor[*Lead, D], gamma: Tensor[D] | None = None, beta: Tensor[D] | None = None,
               eps: float = 1e-5) -> Tensor[*Lead, D]:
    """Normalise the last axis of ``x[*lead, D]`` then scale by ``gamma[D]`` and shift by ``beta[D]``
    (``None`` means 1 and 0)."""
    xa: AnyTensor = x
    if xa.ndim == 0:
        raise ShapeError("layer_norm: expected an input with a feature axis, got a 0-d tensor")
    dim, dtype = xa.shape[-1], xa.dtype.name
    g = gamma if gamma is not None else ops.full(shape=(dim,), value=1.0, dtype=dtype)
    b = beta if beta is not None else ops.full(shape=(dim,), value=0.0, dtype=dtype)
    return ops.layer_norm_last_axis(x, g, b, eps=eps)


def _split_heads(ops: Ops, t: AnyTensor, heads: int) -> AnyTensor:
    shape = tuple(t.shape)
    lead, n, d = shape[:-2], shape[-2], shape[-1]
    t = ops.reshape(t, shape=lead + (n, heads, d // heads))
    rank = len(lead)
    return ops.permute(t, perm=tuple(range(rank)) + (rank + 1, rank, rank + 2))


def _merge_heads(ops: Ops, t: AnyTensor) -> AnyTensor:
    shape = tuple(t.shape)
    lead, h, n, dh = shape[:-3], shape[-3], shape[-2], shape[-1]
    rank = len(lead)
    t = ops.permute(t, perm=tuple(range(rank)) + (rank + 1, rank, rank + 2))
    return ops.reshape(t, shape=lead + (n, h * dh))


@overload
def attention(ops: Ops, wq: Tensor[D, Hd], wk: Tensor[D, Hd], wv: Tensor[D, Hv], wo: Tensor[Hv, E],
              x: Tensor[*Lead, N, D], num_heads: int, mask: Tensor[*tuple[Any, ...]] | None = None,
              output_bias: None = None) -> Tensor[*Lead, N, E]: ...


@overload
def attention(ops: Ops, wq: Tensor[D, Hd], wk: Tensor[D, Hd], wv: Tensor[D, Hv], wo: Tensor[Hv, E],
              x: Tensor[*Lead, N, D], num_heads: int, mask: Tensor[*tuple[Any, ...]] | None = None, *,
              output_bias: Tensor[E]) -> Tensor[*Lead, N, E]: ...


def attention(ops: Ops, wq: AnyTensor, wk: AnyTensor, wv: AnyTensor, wo: AnyTensor, x: AnyTensor,
              num_heads: int, mask: AnyTensor | None = None, output_bias: AnyTensor | None = None) -> AnyTensor:
    """Multi-head self-attention on ``x[*lead, n, d_model]`` (TorchLean's layout: weights are input-major,
    so queries are ``x @ wq``).

    ``wq, wk: [d_model, num_heads * head_dim]``, ``wv: [d_model, num_heads * value_dim]``,
    ``wo: [num_heads * value_dim, d_out]`` (``num_heads * head_dim`` need not equal ``d_model``); each head
    attends with scale ``1/sqrt(head_dim)``; ``mask`` is bool (``[n, n]`` or ``[*lead, n, n]``),
    ``True`` meaning *may attend*, and a row with nothing allowed gives zeros; ``output_bias[d_out]`` is
    added last. Result ``[*lead, n, d_out]``."""
    if x.ndim < 2:
        raise ShapeError(f"attention: expected x[*lead, n, d_model], got shape {list(x.shape)}")
    if isinstance(num_heads, bool) or not isinstance(num_heads, int) or num_heads <= 0:
        raise ShapeError(f"attention: num_heads must be a positive int, got {num_heads!r}")
    d = x.shape[-1]
    for name, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo)):
        if w.ndim != 2:
            raise ShapeError(f"attention: {name} must be a matrix, got shape {list(w.shape)}")
    for name, w in (("wq", wq), ("wk", wk), ("wv", wv)):
        if w.shape[0] != d:
            raise ShapeError(f"attention: {name} must be [d_model, num_heads * head_dim] = [{d}, ...] for x of "
                             f"shape {list(x.shape)}, got {list(w.shape)}")
    if tuple(wk.shape) != tuple(wq.shape):
        raise ShapeError(f"attention: wk must have wq's shape {list(wq.shape)}, got {list(wk.shape)}")
    for name, w in (("wq", wq), ("wv", wv)):
        if isinstance(w.shape[1], int) and w.shape[1] % num_heads:
            raise ShapeError(f"attention: {name} has {w.shape[1]} columns, which num_heads={num_heads} does not "
                             f"divide (columns are num_heads * head_dim)")
    if wo.shape[0] != wv.shape[1]:
        raise ShapeError(f"attention: wo must have wv's {wv.shape[1]} columns as rows, got shape {list(wo.shape)}")
    if output_bias is not None and tuple(output_bias.shape) != (wo.shape[1],):
        raise ShapeError(f"attention: output_bias must be [{wo.shape[1]}], got {list(output_bias.shape)}")
    if mask is not None and mask.dtype.name != "bool":
        raise DTypeError(f"attention: mask must be bool (True = may attend), got {mask.dtype}")
    q = _split_heads(ops, matmul(ops, x, wq), num_heads)  # type: ignore[arg-type]
    k = _split_heads(ops, matmul(ops, x, wk), num_heads)  # type: ignore[arg-type]
    v = _split_heads(ops, matmul(ops, x, wv), num_heads)  # type: ignore[arg-type]
    head_mask = mask if mask is None or mask.ndim <= 2 else unsqueeze(ops, mask, -3)  # type: ignore[arg-type]
    o = ops.dot_product_attention(q, k, v, head_mask, scale=attention_scale(wq.shape[1] // num_heads))
    y = matmul(ops, _merge_heads(ops, o), wo)  # type: ignore[arg-type]
    return y if output_bias is None else ops.add(y, output_bias)


def dropout(ops: Ops, x: Tensor[*S], p: float = 0.5, training: bool = True, *,
            key: Tensor[*tuple[Any, ...]] | None = None) -> Tensor[*S]:
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``; identity when not
    ``training``. The mask is drawn from ``key`` (``[2]`` int64); by default from a fresh key of the
    interpreter (``ops.random_key()``: the global generator eagerly, a key input of a recorded graph,
    so a compiled or exported graph draws a new mask each call)."""
    p = dropout_probability("dropout", p)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return ops.mul(x, 0.0)
    if key is None:
        key = ops.random_key()
    xa: AnyTensor = x
    keep = ops.ge(ops.random_uniform(key, shape=tuple(xa.shape), dtype=xa.dtype.name), p)
    return ops.where(keep, ops.mul(x, 1.0 / (1.0 - p)), 0.0)


__all__ = ["map", "linear", "conv", "conv_transpose", "max_pool", "avg_pool", "smooth_max_pool", "layer_norm",
           "attention", "dropout", "reshape"]
