"""More activations of ``tensorplay.nn.functional`` (re-exported there): ``softplus``, ``elu``, ``selu``, ``celu``,
``relu6``, ``hardtanh``, ``hardsigmoid``, ``hardswish``, ``mish``, ``logsigmoid``, ``softsign``, ``glu``,
``tanhshrink``, ``softshrink``, ``hardshrink``, ``threshold`` and ``prelu``.

Each is composed from the primitives (``where``, comparisons, ``exp``/``expm1``/``log1p``, ``tanh``, ...), so
it runs eagerly, records into graphs, compiles, exports to ONNX and goes through every transform (``grad``,
``vmap``, ``jvp``) with no rule of its own. Shapes: ``input[*S]`` to ``[*S]`` except :func:`glu`, which halves
``dim``. Values, gradients at the kinks (which side a boundary point takes) and the dtypes accepted follow
PyTorch. A branch :func:`where` does not select is fed an input it cannot overflow on (``exp`` of at most 0),
so its zero cotangent never meets an infinite derivative (``0 * inf = nan``). ``inplace=`` is accepted for
PyTorch compatibility and ignored, as in :func:`tensorplay.nn.functional.relu`.
"""

from __future__ import annotations

from typing import Any, TypeVarTuple

from tensorplay import derived
from tensorplay.errors import ArgumentError, DTypeError, ShapeError
from tensorplay.nn._util import ops_for
from tensorplay.nn.functional import _float_input
from tensorplay.tensor import Tensor

S = TypeVarTuple("S")
AnyTensor = Tensor[*tuple[Any, ...]]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _float_ops(where: str, input: AnyTensor) -> Any:
    """The interpreter of ``input``, which must be a float tensor (a :class:`DTypeError` naming ``where``)."""
    ops = ops_for(where, input)
    _float_input(where, input)
    return ops


def _no_bool(where: str, input: AnyTensor) -> Any:
    """The interpreter of ``input``, which may be any numeric tensor but not bool (PyTorch has no bool kernel)."""
    ops = ops_for(where, input)
    if input.dtype.name == "bool":
        raise DTypeError(f"{where}: input must be a numeric (float or integer) tensor, got bool "
                         f"(input: bool{list(input.shape)}); convert with .float() first")
    return ops


def _as_float(ops: Any, input: AnyTensor) -> AnyTensor:
    """``input`` itself if float, else cast to float32 (PyTorch's default dtype), as true division does."""
    return input if input.dtype.is_floating_point else ops.cast(input, dtype="float32")


def stable_softplus(ops: Any, x: AnyTensor) -> AnyTensor:
    """``log(1 + exp(x))`` without overflow: ``max(x, 0) + log1p(exp(-|x|))``; its derivative is
    ``sigmoid(x)`` everywhere (0.5 at 0) and it is exact for ``|x|`` up to the largest float."""
    pos = ops.gt(x, 0.0)
    return ops.add(ops.where(pos, x, 0.0), ops.log1p(ops.exp(ops.where(pos, ops.neg(x), x))))  # type: ignore[no-any-return]


def softplus(input: Tensor[*S], beta: float = 1.0, threshold: float = 20.0) -> Tensor[*S]:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold`` (PyTorch's switch to
    the linear function; the gradient there is 1, elsewhere ``sigmoid(beta * x)``). Float tensors only."""
    ops = _float_ops("softplus", input)
    z = ops.mul(input, float(beta))
    return ops.where(ops.gt(z, float(threshold)), input, ops.div(stable_softplus(ops, z), float(beta)))  # type: ignore[no-any-return]


def _elu(ops: Any, x: AnyTensor, alpha: float, scale: float, input_scale: float) -> AnyTensor:
    """``scale * x`` where ``x > 0``, else ``scale * alpha * (exp(input_scale * x) - 1)`` (the gradient at 0 is
    the negative side's; NaN takes the positive side's, as PyTorch)."""
    neg_side = ops.le(x, 0.0)
    neg = ops.mul(ops.expm1(ops.mul(ops.where(neg_side, x, 0.0), input_scale)), alpha)
    out = ops.where(neg_side, neg, x)
    return out if scale == 1.0 else ops.mul(out, scale)  # type: ignore[no-any-return]


def elu(input: Tensor[*S], alpha: float = 1.0, inplace: bool = False) -> Tensor[*S]:
    """``x`` where positive, else ``alpha * (exp(x) - 1)``. Float tensors only."""
    return _elu(_float_ops("elu", input), input, float(alpha), 1.0, 1.0)


def selu(input: Tensor[*S], inplace: bool = False) -> Tensor[*S]:
    """``scale * elu(x, alpha)`` with the self-normalising constants ``alpha = 1.6732632...``,
    ``scale = 1.0507009...``. Float tensors only."""
    return _elu(_float_ops("selu", input), input, SELU_ALPHA, SELU_SCALE, 1.0)


def celu(input: Tensor[*S], alpha: float = 1.0, inplace: bool = False) -> Tensor[*S]:
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``. Float tensors only."""
    alpha = float(alpha)
    if alpha == 0.0:
        raise ArgumentError("celu: alpha must be non-zero (it divides x), got 0.0")
    return _elu(_float_ops("celu", input), input, alpha, 1.0, 1.0 / alpha)


def _hardtanh(ops: Any, x: AnyTensor, lo: float, hi: float) -> AnyTensor:
    """``x`` clipped to ``[lo, hi]``; the gradient is 1 strictly inside and 0 at and beyond the bounds, and
    NaN stays NaN and passes its gradient, as PyTorch's ``hardtanh``."""
    if x.dtype.is_floating_point:
        lo_v: float | int = float(lo)
        hi_v: float | int = float(hi)
    else:
        lo_v, hi_v = int(lo), int(hi)  # an integer input gives an integer result (PyTorch truncates the bounds)
    # a bound itself keeps its own value (-0.0 stays -0.0, as PyTorch's clamp) but takes no gradient
    at_bound = ops.stop_gradient(x)
    low = ops.where(ops.lt(x, lo_v), lo_v, at_bound)
    high = ops.where(ops.gt(x, hi_v), hi_v, at_bound)
    return ops.where(ops.le(x, lo_v), low, ops.where(ops.ge(x, hi_v), high, x))  # type: ignore[no-any-return]


def hardtanh(input: Tensor[*S], min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor[*S]:
    """``input`` clipped to ``[min_val, max_val]`` (``min_val <= max_val``); float or integer tensors (an
    integer result), not bool, as PyTorch."""
    ops = _no_bool("hardtanh", input)
    if min_val > max_val:
        raise ArgumentError(f"hardtanh: min_val must not exceed max_val, got min_val={min_val}, max_val={max_val}")
    return _hardtanh(ops, input, min_val, max_val)


def relu6(input: Tensor[*S], inplace: bool = False) -> Tensor[*S]:
    """``min(max(x, 0), 6)`` (``hardtanh(x, 0, 6)``: gradient 0 at 0 and 6); float or integer tensors."""
    return _hardtanh(_no_bool("relu6", input), input, 0.0, 6.0)


def hardsigmoid(input: Tensor[*S], inplace: bool = False) -> Tensor[*S]:
    """``relu6(x + 3) / 6``: 0 at and below -3, 1 at and above 3, ``x / 6 + 1/2`` between (gradient 1/6
    strictly inside, 0 at the bounds and at NaN, as PyTorch). Float tensors only."""
    ops = _float_ops("hardsigmoid", input)
    inside = ops.logical_and(ops.gt(input, -3.0), ops.lt(input, 3.0))
    inner = ops.where(inside, ops.add(ops.div(input, 6.0), 0.5), ops.stop_gradient(input))  # NaN stays NaN
    return ops.where(ops.le(input, -3.0), 0.0, ops.where(ops.ge(input, 3.0), 1.0, inner))  # type: ignore[no-any-return]


def hardswish(input: Tensor[*S], inplace: bool = False) -> Tensor[*S]:
    """``x * relu6(x + 3) / 6``: 0 at and below -3, ``x`` at and above 3, ``x (x + 3) / 6`` between (so the
    gradient is 0 at -3 and 1 at 3, and 1 at NaN, as PyTorch). Float tensors only."""
    ops = _float_ops("hardswish", input)
    x = ops.where(ops.logical_and(ops.gt(input, -3.0), ops.lt(input, 3.0)), input, 0.0)  # finite where unused
    inner = ops.div(ops.mul(x, ops.add(x, 3.0)), 6.0)
    return ops.where(ops.le(input, -3.0), 0.0, ops.where(ops.lt(input, 3.0), inner, input))  # type: ignore[no-any-return]


def mish(input: Tensor[*S], inplace: bool = False) -> Tensor[*S]:
    """``x * tanh(softplus(x))`` (the softplus without overflow). Float tensors only."""
    ops = _float_ops("mish", input)
    return ops.mul(input, ops.tanh(stable_softplus(ops, input)))  # type: ignore[no-any-return]


def logsigmoid(input: Tensor[*S]) -> Tensor[*S]:
    """``log(sigmoid(x)) = -softplus(-x)``, exact for large ``|x|`` (``x`` itself far below 0, ``-exp(-x)``
    far above, never ``log(0)``). Float tensors only."""
    ops = _float_ops("logsigmoid", input)
    return ops.neg(stable_softplus(ops, ops.neg(input)))  # type: ignore[no-any-return]


def softsign(input: Tensor[*S]) -> Tensor[*S]:
    """``x / (1 + |x|)``; an integer input gives a float32 result (true division), bool is refused, as
    PyTorch."""
    ops = _no_bool("softsign", input)
    x = _as_float(ops, input)
    return ops.div(x, ops.add(ops.abs(x), 1.0))  # type: ignore[no-any-return]


def tanhshrink(input: Tensor[*S]) -> Tensor[*S]:
    """``x - tanh(x)``; an integer input gives a float32 result, bool is refused, as PyTorch."""
    ops = _no_bool("tanhshrink", input)
    x = _as_float(ops, input)
    return ops.sub(x, ops.tanh(x))  # type: ignore[no-any-return]


def _check_lambd(where: str, lambd: float) -> float:
    if not lambd >= 0:
        raise ArgumentError(f"{where}: lambd must be greater than or equal to 0, got {lambd}")
    return float(lambd)


def softshrink(input: Tensor[*S], lambd: float = 0.5) -> Tensor[*S]:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between (bounds included; gradient 0
    there). ``lambd >= 0``; float tensors only."""
    ops = _float_ops("softshrink", input)
    lam = _check_lambd("softshrink", lambd)
    shrunk = ops.where(ops.gt(input, lam), ops.sub(input, lam), ops.where(ops.lt(input, -lam), ops.add(input, lam), input))
    return ops.where(ops.le(ops.abs(input), lam), 0.0, shrunk)  # type: ignore[no-any-return]


def hardshrink(input: Tensor[*S], lambd: float = 0.5) -> Tensor[*S]:
    """``x`` where ``|x| > lambd``, else 0 (bounds included). ``lambd >= 0``; float tensors only."""
    ops = _float_ops("hardshrink", input)
    lam = _check_lambd("hardshrink", lambd)
    return ops.where(ops.le(ops.abs(input), lam), 0.0, input)  # type: ignore[no-any-return]


def threshold(input: Tensor[*S], threshold: float, value: float, inplace: bool = False) -> Tensor[*S]:
    """``x`` where ``x > threshold``, else ``value`` (NaN stays NaN); float or integer tensors (an integer
    result: ``threshold`` and ``value`` are truncated, as PyTorch), not bool."""
    ops = _no_bool("threshold", input)
    if input.dtype.is_floating_point:
        th: float | int = float(threshold)
        val: float | int = float(value)
    else:
        th, val = int(threshold), int(value)
    return ops.where(ops.le(input, th), val, input)  # type: ignore[no-any-return]


def glu(input: AnyTensor, dim: int = -1) -> AnyTensor:
    """Gated linear unit: ``input`` split in halves ``a, b`` along ``dim`` (of even size ``2h``), ``a *
    sigmoid(b)``, shaped as ``input`` with ``h`` at ``dim``. Float tensors only; a 0-d input or an odd size is
    a :class:`ShapeError`. To export with a dynamic ``dim``, declare its size as ``2 * k``."""
    ops = _float_ops("glu", input)
    if input.ndim == 0:
        raise ShapeError("glu: input must have at least one dim (it is halved along dim), got a 0-d tensor")
    axis = derived.normalize_axis(dim, input.ndim, "glu")
    size = input.shape[axis]
    if isinstance(size, int) and size % 2:
        raise ShapeError(f"glu: the size of dim {dim} must be even (it is halved), got {size} "
                         f"(input: {input.dtype.name}{list(input.shape)})")
    half = size // 2  # a symbolic size must be declared even (2 * k) for the halves to agree
    lead = (slice(None),) * axis
    a = derived.getitem(ops, input, lead + (slice(0, half),))
    b = derived.getitem(ops, input, lead + (slice(half, None),))
    return ops.mul(a, ops.sigmoid(b))  # type: ignore[no-any-return]


def prelu(input: AnyTensor, weight: AnyTensor) -> AnyTensor:
    """``x`` where positive, else ``weight * x``; ``weight`` has one element (shared) or one per channel, the
    channel being dim 1 (``input[N, C, *d]``, ``weight[C]``), as PyTorch. Float tensors of one dtype only."""
    ops = ops_for("prelu", input, weight)
    _float_input("prelu", input)
    if not isinstance(weight, Tensor):
        raise DTypeError(f"prelu: weight must be a tensorplay Tensor, got {type(weight).__name__}")
    if weight.dtype != input.dtype:
        raise DTypeError(f"prelu: weight must have the input's dtype, got input {input.dtype.name}"
                         f"{list(input.shape)} and weight {weight.dtype.name}{list(weight.shape)}")
    if weight.ndim > 1:
        raise ShapeError(f"prelu: weight must be 0-d or 1-d, got shape {list(weight.shape)}")
    count = 1 if weight.ndim == 0 else weight.shape[0]
    if count == 1:
        w = derived.reshape(ops, weight, ())
    else:
        channels = input.shape[1] if input.ndim >= 2 else 1
        if input.ndim == 0 or channels != count:
            raise ShapeError(f"prelu: weight has {count} elements but the input has {channels} channels "
                             f"(dim 1 of input {list(input.shape)}); use 1 or exactly that many")
        w = derived.reshape(ops, weight, (count,) + (1,) * (input.ndim - 2))
    return ops.where(ops.gt(input, 0.0), input, ops.mul(w, input))  # type: ignore[no-any-return]
