"""The top-level function forms a PyTorch user reaches for: ``tp.sum(x, 1)``, ``tp.max(x, dim)``,
``tp.einsum("bij,bjk->bik", a, b)``, ...

Where the function is exactly a :class:`~tensorplay.tensor.Tensor` method (``torch.sum(x, 1)`` is
``x.sum(1)``) it is bound to that method, so its typed overloads are written once and mypy infers the same
result shapes for both spellings (its messages name the method); at run time it is the method behind a
check that the first argument is a tensor (see :func:`_tensor_input`). Every one runs under every
interpreter and transform, since the methods call the tensor's interpreter. ``einsum`` is a function
of its own. ``tensorplay/__init__.py`` imports every name here and lists it in its ``__all__``.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Sequence
from typing import Any

from tensorplay import einsum as _einsum
from tensorplay import math_more as _more
from tensorplay import sequence_ops as _seq
from tensorplay import indexing_ops as _idx
from tensorplay import product_ops as _prod
from tensorplay import statistics_ops as _stats
from tensorplay import structure_ops as _struct
from tensorplay.errors import ArgumentTypeError
from tensorplay.tensor import Tensor, highest_interpreter

AnyTensor = Tensor[*tuple[Any, ...]]

# ---- elementwise ------------------------------------------------------------------------------------
abs = Tensor.abs  # noqa: A001 - PyTorch's names shadow builtins in this namespace on purpose
neg = Tensor.neg
sign = Tensor.sign
exp = Tensor.exp
expm1 = Tensor.expm1
log = Tensor.log
log1p = Tensor.log1p
sqrt = Tensor.sqrt
rsqrt = Tensor.rsqrt
square = Tensor.square
sin = Tensor.sin
cos = Tensor.cos
tanh = Tensor.tanh
sigmoid = Tensor.sigmoid
relu = Tensor.relu
erf = Tensor.erf
floor = Tensor.floor
ceil = Tensor.ceil
round = Tensor.round  # noqa: A001
pow = Tensor.pow  # noqa: A001
maximum = Tensor.maximum
minimum = Tensor.minimum
clamp = Tensor.clamp
clip = Tensor.clamp
isnan = Tensor.isnan
isfinite = Tensor.isfinite
isinf = Tensor.isinf
nan_to_num = Tensor.nan_to_num
masked_fill = Tensor.masked_fill
isclose = Tensor.isclose
allclose = Tensor.allclose
softmax = Tensor.softmax
log_softmax = Tensor.log_softmax

# ---- reductions, scans and orderings -----------------------------------------------------------------
sum = Tensor.sum  # noqa: A001
mean = Tensor.mean
prod = Tensor.prod
logsumexp = Tensor.logsumexp
var = Tensor.var
std = Tensor.std
norm = Tensor.norm
max = Tensor.max  # noqa: A001
min = Tensor.min  # noqa: A001
amax = Tensor.amax
amin = Tensor.amin
argmax = Tensor.argmax
argmin = Tensor.argmin
all = Tensor.all  # noqa: A001
any = Tensor.any  # noqa: A001
cumsum = Tensor.cumsum
sort = Tensor.sort
argsort = Tensor.argsort
topk = Tensor.topk

# ---- linear algebra and structure --------------------------------------------------------------------
matmul = Tensor.matmul
outer = Tensor.outer
tril = Tensor.tril
triu = Tensor.triu
reshape = Tensor.reshape
flatten = Tensor.flatten
transpose = Tensor.transpose
permute = Tensor.permute
squeeze = Tensor.squeeze
unsqueeze = Tensor.unsqueeze
broadcast_to = Tensor.broadcast_to
split = Tensor.split
chunk = Tensor.chunk

# ---- rearrangements, selections, products and more elementwise functions (shape_ops, math_ops) --------
arctan2 = Tensor.atan2
atan2 = Tensor.atan2
bmm = Tensor.bmm
cosh = Tensor.cosh
diag = Tensor.diag
diagonal = Tensor.diagonal
dot = Tensor.dot
flip = Tensor.flip
gather = Tensor.gather
index_select = Tensor.index_select
log10 = Tensor.log10
log2 = Tensor.log2
logical_and = Tensor.logical_and
logical_not = Tensor.logical_not
logical_or = Tensor.logical_or
logical_xor = Tensor.logical_xor
moveaxis = Tensor.movedim
movedim = Tensor.movedim
reciprocal = Tensor.reciprocal
repeat_interleave = Tensor.repeat_interleave
roll = Tensor.roll
sinh = Tensor.sinh
swapaxes = Tensor.transpose
swapdims = Tensor.transpose
tile = Tensor.tile
trace = Tensor.trace
unflatten = Tensor.unflatten


def einsum(equation: str, *operands: AnyTensor | Sequence[AnyTensor]) -> AnyTensor:
    """Einstein summation, as ``torch.einsum``: ``einsum("bij,bjk->bik", a, b)`` (or the operands as one
    list). ``...`` stands for the unnamed axes (broadcast), a letter repeated in one operand takes the
    diagonal, letters absent from the output are summed; without ``->`` the output is the ellipsis,
    then the letters that appear once, alphabetically. Contracted axes go through batched matrix
    products, never through a materialised broadcast product (see :mod:`tensorplay.einsum`)."""
    tensors: list[Any] = list(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) \
        else list(operands)
    ops = highest_interpreter(tensors, tensors[0]._ops if tensors and isinstance(tensors[0], Tensor) else None)
    return _einsum.einsum(ops, equation, tensors)  # type: ignore[no-any-return]


# ---- more math (tensorplay.math_more) -----------------------------------------------------------------
addcdiv = Tensor.addcdiv
addcmul = Tensor.addcmul
clamp_max = Tensor.clamp_max
clamp_min = Tensor.clamp_min
count_nonzero = Tensor.count_nonzero
cumprod = Tensor.cumprod
erfinv = Tensor.erfinv
lerp = Tensor.lerp
logaddexp = Tensor.logaddexp
logaddexp2 = Tensor.logaddexp2
logit = Tensor.logit
nanmean = Tensor.nanmean
nansum = Tensor.nansum

# ---- index-driven operations (tensorplay.indexing_ops) ----------------------------------------------
bincount = Tensor.bincount
median = Tensor.median
quantile = Tensor.quantile
scatter = Tensor.scatter
scatter_add = Tensor.scatter_add
take_along_dim = Tensor.take_along_dim


def searchsorted(sorted_sequence: AnyTensor, values: AnyTensor | float, *, right: bool = False,
                 side: str | None = None, out_int32: bool = False) -> AnyTensor:
    """Insertion points of ``values`` in the ascending last dim of ``sorted_sequence``, as
    ``torch.searchsorted`` (``side="right"`` is ``right=True``; see :func:`tensorplay.indexing_ops.searchsorted`)."""
    if side not in (None, "left", "right"):
        raise ArgumentTypeError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    ops = highest_interpreter([sorted_sequence, values], sorted_sequence._ops if isinstance(sorted_sequence, Tensor)
                              else None)
    return _idx.searchsorted(ops, sorted_sequence, values, right or side == "right", out_int32)  # type: ignore[no-any-return]


def bucketize(input: AnyTensor | float, boundaries: AnyTensor, *, right: bool = False,  # noqa: A002
              out_int32: bool = False) -> AnyTensor:
    """The bucket of each entry of ``input`` among the ascending 1-d ``boundaries``, as ``torch.bucketize``
    (see :func:`tensorplay.indexing_ops.bucketize`)."""
    ops = highest_interpreter([input, boundaries], boundaries._ops if isinstance(boundaries, Tensor) else None)
    return _idx.bucketize(ops, input, boundaries, right, out_int32)  # type: ignore[no-any-return]


def xlogy(input: AnyTensor | float, other: AnyTensor | float) -> AnyTensor:  # noqa: A002 - PyTorch's name
    """``input * log(other)``, 0 where ``input == 0`` unless ``other`` is NaN, as ``torch.xlogy`` (either may
    be a number; see :func:`tensorplay.math_more.xlogy`)."""
    tensors = [v for v in (input, other) if isinstance(v, Tensor)]
    if not tensors:
        raise ArgumentTypeError(f"xlogy: one of input and other must be a tensor, got {type(input).__name__} "
                                f"and {type(other).__name__}")
    return _more.xlogy(highest_interpreter(tensors, tensors[0]._ops), input, other)  # type: ignore[no-any-return]


def meshgrid(*tensors: AnyTensor | Sequence[AnyTensor], indexing: str = "ij") -> tuple[AnyTensor, ...]:
    """Coordinate grids of 1-d tensors (or one list of them), as ``torch.meshgrid``: ``indexing="ij"`` gives
    shape ``[n_0, n_1, ...]``, ``"xy"`` swaps the first two (see :func:`tensorplay.math_more.meshgrid`)."""
    ts: list[Any] = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
    ops = highest_interpreter(ts, ts[0]._ops if ts and isinstance(ts[0], Tensor) else None)
    return _more.meshgrid(ops, ts, indexing)


def tensordot(a: AnyTensor, b: AnyTensor, dims: int | Sequence[int] | Sequence[Sequence[int]] = 2) -> AnyTensor:
    """Sums of products over paired dims, as ``torch.tensordot`` (``dims`` an int or a pair of lists; see
    :func:`tensorplay.math_more.tensordot`)."""
    ops = highest_interpreter([a, b], a._ops if isinstance(a, Tensor) else None)
    return _more.tensordot(ops, a, b, dims)  # type: ignore[no-any-return]


def cdist(x1: AnyTensor, x2: AnyTensor, p: float = 2.0) -> AnyTensor:
    """Pairwise ``p``-norm distances ``[*B, P, M]``, ``[*B, R, M]`` to ``[*B, P, R]``, as ``torch.cdist`` (see
    :func:`tensorplay.math_more.cdist`)."""
    ops = highest_interpreter([x1, x2], x1._ops if isinstance(x1, Tensor) else None)
    return _more.cdist(ops, x1, x2, p)  # type: ignore[no-any-return]


# ---- sequences and structure (tensorplay.sequence_ops) ------------------------------------------------
diff = Tensor.diff
cross = Tensor.cross
kron = Tensor.kron
cummax = Tensor.cummax
cummin = Tensor.cummin
histc = Tensor.histc


def _tensor_list(tensors: tuple[Any, ...]) -> list[Any]:
    return list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)


def block_diag(*tensors: AnyTensor) -> AnyTensor:
    """The block-diagonal matrix ``[sum rows, sum cols]`` of 0-d, 1-d (``[1, n]``) and 2-d blocks, as
    ``torch.block_diag`` (see :func:`tensorplay.sequence_ops.block_diag`)."""
    ts = _tensor_list(tensors)
    ops = highest_interpreter(ts, ts[0]._ops if ts and isinstance(ts[0], Tensor) else None)
    return _seq.block_diag(ops, ts)  # type: ignore[no-any-return]


def cartesian_prod(*tensors: AnyTensor) -> AnyTensor:
    """The Cartesian product ``[n_0 * n_1 * ..., k]`` of ``k`` 1-d tensors, as ``torch.cartesian_prod`` (see
    :func:`tensorplay.sequence_ops.cartesian_prod`)."""
    ts = _tensor_list(tensors)
    ops = highest_interpreter(ts, ts[0]._ops if ts and isinstance(ts[0], Tensor) else None)
    return _seq.cartesian_prod(ops, ts)  # type: ignore[no-any-return]


def trapezoid(y: AnyTensor, x: AnyTensor | None = None, *, dx: float = 1.0, dim: int = -1) -> AnyTensor:
    """The trapezoid rule along ``dim``: ``[..., m, ...]`` to ``[...]``, spacing ``dx`` or the steps of ``x``,
    as ``torch.trapezoid`` (see :func:`tensorplay.sequence_ops.trapezoid`)."""
    if not isinstance(y, Tensor):
        raise ArgumentTypeError(f"trapezoid: y must be a tensor, got {type(y).__name__}")
    return _seq.trapezoid(highest_interpreter([x], y._ops), y, x, dx, dim)  # type: ignore[no-any-return]


def _indices(lower: bool, row: int, col: int, offset: int, dtype: Any) -> AnyTensor:
    from tensorplay.creation import tensor
    return tensor(_seq.triangle_indices(row, col, offset, lower), dtype="int64" if dtype is None else dtype)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None) -> AnyTensor:
    """The ``[2, k]`` int64 (row, column) coordinates of the lower triangle (``j - i <= offset``) of a
    ``row x col`` matrix, row-major, as ``torch.tril_indices``."""
    return _indices(True, row, col, offset, dtype)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None) -> AnyTensor:
    """The ``[2, k]`` int64 (row, column) coordinates of the upper triangle (``j - i >= offset``) of a
    ``row x col`` matrix, row-major, as ``torch.triu_indices``."""
    return _indices(False, row, col, offset, dtype)


# ---- structure and index-structure functions (tensorplay.structure_ops) -------------------------------
clone = Tensor.clone
numel = Tensor.numel
narrow = Tensor.narrow
select = Tensor.select
unbind = Tensor.unbind
t = Tensor.t
ravel = Tensor.ravel
tensor_split = Tensor.tensor_split
hsplit = Tensor.hsplit
vsplit = Tensor.vsplit
dsplit = Tensor.dsplit
split_with_sizes = Tensor.split_with_sizes
rot90 = Tensor.rot90
fliplr = Tensor.fliplr
flipud = Tensor.flipud
take = Tensor.take
index_add = Tensor.index_add
index_copy = Tensor.index_copy
index_fill = Tensor.index_fill
scatter_reduce = Tensor.scatter_reduce
select_scatter = Tensor.select_scatter
slice_scatter = Tensor.slice_scatter
diagonal_scatter = Tensor.diagonal_scatter
diag_embed = Tensor.diag_embed
diagflat = Tensor.diagflat
broadcast_shapes = _struct.broadcast_shapes


def _stack_operands(tensors: Any, where: str) -> tuple[list[Any], Any]:
    """``f(a, b)`` or ``f([a, b])``: the tensors and the interpreter that runs an operation on them."""
    ts = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
    if not ts:
        raise ArgumentTypeError(f"{where}: expects at least one tensor")
    return ts, highest_interpreter(ts, ts[0]._ops if isinstance(ts[0], Tensor) else None)


def hstack(tensors: Sequence[AnyTensor]) -> AnyTensor:
    """Join along dim 1 (dim 0 for 1-d tensors), as ``torch.hstack`` (see :mod:`tensorplay.structure_ops`)."""
    ts, ops = _stack_operands((tensors,), "hstack")
    return _struct.hstack(ops, ts)  # type: ignore[no-any-return]


def vstack(tensors: Sequence[AnyTensor]) -> AnyTensor:
    """The tensors made at least 2-d and joined along dim 0, as ``torch.vstack``."""
    ts, ops = _stack_operands((tensors,), "vstack")
    return _struct.vstack(ops, ts)  # type: ignore[no-any-return]


def row_stack(tensors: Sequence[AnyTensor]) -> AnyTensor:
    """:func:`vstack`, as ``torch.row_stack``."""
    ts, ops = _stack_operands((tensors,), "row_stack")
    return _struct.vstack(ops, ts, "row_stack")  # type: ignore[no-any-return]


def dstack(tensors: Sequence[AnyTensor]) -> AnyTensor:
    """The tensors made at least 3-d and joined along dim 2, as ``torch.dstack``."""
    ts, ops = _stack_operands((tensors,), "dstack")
    return _struct.dstack(ops, ts)  # type: ignore[no-any-return]


def column_stack(tensors: Sequence[AnyTensor]) -> AnyTensor:
    """0-d and 1-d tensors as columns, all joined along dim 1, as ``torch.column_stack``."""
    ts, ops = _stack_operands((tensors,), "column_stack")
    return _struct.column_stack(ops, ts)  # type: ignore[no-any-return]


def _atleast(k: int, tensors: tuple[Any, ...]) -> Any:
    ts, ops = _stack_operands(tensors, f"atleast_{k}d")
    out = tuple(_struct.atleast(ops, x, k) for x in ts)
    return out[0] if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)) else out


def atleast_1d(*tensors: Any) -> Any:
    """One tensor (or a tuple of several, or of a list) with at least 1 dim, as ``torch.atleast_1d``."""
    return _atleast(1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    """One tensor (or a tuple of several) with at least 2 dims (``[n]`` to ``[1, n]``), as ``torch.atleast_2d``."""
    return _atleast(2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    """One tensor (or a tuple of several) with at least 3 dims (``[n]`` to ``[1, n, 1]``, ``[m, n]`` to
    ``[m, n, 1]``), as ``torch.atleast_3d``."""
    return _atleast(3, tensors)


def broadcast_tensors(*tensors: AnyTensor) -> tuple[AnyTensor, ...]:
    """Every tensor broadcast to their common shape, as ``torch.broadcast_tensors``."""
    ts, ops = _stack_operands(tensors, "broadcast_tensors")
    return _struct.broadcast_tensors(ops, ts)


# ---- elementwise aliases and more elementwise math (tensorplay.elementwise_ops) ----------------------------
from collections.abc import Callable  # noqa: E402

from tensorplay import elementwise_ops as _ew  # noqa: E402

negative = Tensor.neg
positive = Tensor.positive
absolute = Tensor.abs
sgn = Tensor.sign
bitwise_not = Tensor.bitwise_not
tan = Tensor.tan
asin = arcsin = Tensor.asin
acos = arccos = Tensor.acos
atan = arctan = Tensor.atan
asinh = arcsinh = Tensor.asinh
acosh = arccosh = Tensor.acosh
atanh = arctanh = Tensor.atanh
trunc = fix = Tensor.trunc
frac = Tensor.frac
signbit = Tensor.signbit
exp2 = Tensor.exp2
erfc = Tensor.erfc
deg2rad = Tensor.deg2rad
rad2deg = Tensor.rad2deg
sinc = Tensor.sinc
isposinf = Tensor.isposinf
isneginf = Tensor.isneginf
isreal = Tensor.isreal
equal = Tensor.equal


def _operands_ops(where: str, *values: Any) -> Any:
    """The interpreter of a binary function's operands (a number may come first, as ``torch.add(2, x)``)."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    if not tensors:
        raise ArgumentTypeError(f"{where}: expected a tensor operand, got {', '.join(type(v).__name__ for v in values)}")
    return highest_interpreter(tensors, tensors[0]._ops)


def add(input: AnyTensor | float, other: AnyTensor | float, *, alpha: float = 1) -> AnyTensor:  # noqa: A002
    """``input + alpha * other`` (broadcasting, dtypes promote), as ``torch.add``."""
    return _ew.add(_operands_ops("add", input, other), input, other, alpha)  # type: ignore[no-any-return]


def sub(input: AnyTensor | float, other: AnyTensor | float, *, alpha: float = 1) -> AnyTensor:  # noqa: A002
    """``input - alpha * other`` (broadcasting; bool refused), as ``torch.sub``."""
    return _ew.sub(_operands_ops("sub", input, other), input, other, alpha)  # type: ignore[no-any-return]


def mul(input: AnyTensor | float, other: AnyTensor | float) -> AnyTensor:  # noqa: A002
    """``input * other`` (broadcasting, dtypes promote), as ``torch.mul``."""
    return _ew.mul(_operands_ops("mul", input, other), input, other)  # type: ignore[no-any-return]


def div(input: AnyTensor | float, other: AnyTensor | float, *, rounding_mode: str | None = None) -> AnyTensor:  # noqa: A002
    """``input / other``, or its quotient rounded (``rounding_mode`` ``'trunc'``/``'floor'``), as ``torch.div``."""
    return _ew.div(_operands_ops("div", input, other), input, other, rounding_mode)  # type: ignore[no-any-return]


def true_divide(input: AnyTensor | float, other: AnyTensor | float) -> AnyTensor:  # noqa: A002
    """``input / other`` (integers give float32), as ``torch.true_divide``."""
    return _ew.div(_operands_ops("true_divide", input, other), input, other)  # type: ignore[no-any-return]


subtract, multiply, divide = sub, mul, div


_Binary = Callable[[Any, Any], AnyTensor]


def _named(function: _Binary, name: str, doc: str) -> _Binary:
    function.__name__ = function.__qualname__ = name
    function.__doc__ = doc
    return function


def _binary(name: str, doc: str) -> _Binary:
    """``tp.<name>(input, other)``: :func:`tensorplay.elementwise_ops.<name>` on the operands' interpreter."""
    implementation = getattr(_ew, name)
    return _named(lambda input, other: implementation(_operands_ops(name, input, other), input, other), name, doc)


def _comparison(prim: str, name: str, what: str) -> _Binary:
    """``tp.<name>(input, other)``: the primitive ``prim`` (a comparison or a bitwise operation)."""
    return _named(lambda input, other: _ew.compare(_operands_ops(name, input, other), prim, input, other), name,
                  f"``{what}`` elementwise (broadcasting), as ``torch.{name}``.")


eq = _comparison("eq", "eq", "input == other")
ne = _comparison("ne", "ne", "input != other")
not_equal = _comparison("ne", "not_equal", "input != other")
lt = _comparison("lt", "lt", "input < other")
less = _comparison("lt", "less", "input < other")
le = _comparison("le", "le", "input <= other")
less_equal = _comparison("le", "less_equal", "input <= other")
gt = _comparison("gt", "gt", "input > other")
greater = _comparison("gt", "greater", "input > other")
ge = _comparison("ge", "ge", "input >= other")
greater_equal = _comparison("ge", "greater_equal", "input >= other")
bitwise_and = _comparison("bitwise_and", "bitwise_and", "input & other")
bitwise_or = _comparison("bitwise_or", "bitwise_or", "input | other")
bitwise_xor = _comparison("bitwise_xor", "bitwise_xor", "input ^ other")
hypot = _binary("hypot", "``sqrt(input^2 + other^2)`` without overflow (float), as ``torch.hypot``.")
copysign = _binary("copysign", "``|input|`` with the sign of ``other`` (a float result), as ``torch.copysign``.")
fmax = _binary("fmax", "The elementwise maximum ignoring NaN, as ``torch.fmax``.")
fmin = _binary("fmin", "The elementwise minimum ignoring NaN, as ``torch.fmin``.")
fmod = _binary("fmod", "C's remainder (the sign of ``input``), as ``torch.fmod``.")
heaviside = _binary("heaviside", "0 below 0, ``values`` at 0, 1 above, as ``torch.heaviside``.")
float_power = _binary("float_power", "``input ** exponent`` in float64, as ``torch.float_power``.")
ldexp = _binary("ldexp", "``input * 2**other`` (a float result), as ``torch.ldexp``.")


def isin(elements: AnyTensor | float, test_elements: AnyTensor | float, *, invert: bool = False) -> AnyTensor:
    """Whether each of ``elements`` is among ``test_elements`` (a bool tensor shaped like ``elements``), as
    ``torch.isin`` (see :func:`tensorplay.elementwise_ops.isin`)."""
    ops = _operands_ops("isin", elements, test_elements)
    return _ew.isin(ops, elements, test_elements, invert)  # type: ignore[no-any-return]


# ---- products, statistics and data-dependent selections (product_ops, statistics_ops, selection_ops) ------
mm = Tensor.mm
mv = Tensor.mv
addmm = Tensor.addmm
addmv = Tensor.addmv
addr = Tensor.addr
baddbmm = Tensor.baddbmm
addbmm = Tensor.addbmm
inner = Tensor.inner
vdot = Tensor.vdot
ger = Tensor.ger
matrix_power = Tensor.matrix_power
aminmax = Tensor.aminmax
kthvalue = Tensor.kthvalue
mode = Tensor.mode
msort = Tensor.msort
logcumsumexp = Tensor.logcumsumexp
cov = Tensor.cov
corrcoef = Tensor.corrcoef
nanmedian = Tensor.nanmedian
nanquantile = Tensor.nanquantile
nonzero = Tensor.nonzero
argwhere = Tensor.argwhere
masked_select = Tensor.masked_select
unique = Tensor.unique
unique_consecutive = Tensor.unique_consecutive


def chain_matmul(*matrices: AnyTensor) -> AnyTensor:
    """The product of 2-d matrices ``[d0, d1] @ [d1, d2] @ ...`` in the cheapest order, as
    ``torch.chain_matmul`` (see :func:`tensorplay.product_ops.chain_matmul`)."""
    ms = _tensor_list(matrices)
    ops = highest_interpreter(ms, ms[0]._ops if ms and isinstance(ms[0], Tensor) else None)
    return _prod.chain_matmul(ops, ms)  # type: ignore[no-any-return]


def var_mean(input: AnyTensor, dim: int | Sequence[int] | bool | None = None,  # noqa: A002 - PyTorch's name
             unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[AnyTensor, AnyTensor]:
    """``(var, mean)`` over ``dim`` with Bessel's ``correction`` (1 by default; ``unbiased=False`` is 0), as
    ``torch.var_mean`` (``var_mean(x, False)`` passes ``unbiased``; see :func:`tensorplay.statistics_ops.var_mean`)."""
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(f"var_mean: input must be a tensor, got {type(input).__name__}")
    return _stats.var_mean(input._ops, input, dim, unbiased, keepdim, correction)


def std_mean(input: AnyTensor, dim: int | Sequence[int] | bool | None = None,  # noqa: A002 - PyTorch's name
             unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[AnyTensor, AnyTensor]:
    """``(std, mean)`` over ``dim``, as ``torch.std_mean`` (see :func:`var_mean`)."""
    if not isinstance(input, Tensor):
        raise ArgumentTypeError(f"std_mean: input must be a tensor, got {type(input).__name__}")
    return _stats.std_mean(input._ops, input, dim, unbiased, keepdim, correction)


def cumulative_trapezoid(y: AnyTensor, x: AnyTensor | None = None, *, dx: float | None = None,
                         dim: int = -1) -> AnyTensor:
    """Running trapezoid-rule integrals along ``dim``: ``[..., m, ...]`` to ``[..., m - 1, ...]``, spacing ``dx``
    or the steps of ``x``, as ``torch.cumulative_trapezoid`` (see
    :func:`tensorplay.statistics_ops.cumulative_trapezoid`)."""
    if not isinstance(y, Tensor):
        raise ArgumentTypeError(f"cumulative_trapezoid: y must be a tensor, got {type(y).__name__}")
    return _stats.cumulative_trapezoid(highest_interpreter([x], y._ops), y, x, dx, dim)  # type: ignore[no-any-return]


# ---- the method forms' first argument -------------------------------------------------------------
def _tensor_input(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` (a :class:`Tensor` method used as ``tp.<name>``) refusing a first argument that is not a
    tensor with an :class:`ArgumentTypeError` naming the function, as ``torch.<name>`` raises a TypeError
    (called unwrapped, a list or a number would fail inside the method with an AttributeError)."""

    def call(input: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - PyTorch's name
        if not isinstance(input, Tensor):
            if name == "pow" and isinstance(input, (int, float)) and args and isinstance(args[0], Tensor):
                return args[0].__rpow__(input)  # torch.pow(2, x): a number raised to a tensor's powers
            raise ArgumentTypeError(f"tp.{name}(): argument 'input' (position 1) must be a Tensor, got "
                                    f"{type(input).__name__}; make one with tp.tensor(...)")
        return method(input, *args, **kwargs)

    functools.update_wrapper(call, method)
    call.__name__ = call.__qualname__ = name
    return call


def _wrap_method_forms() -> None:
    """Every module-level name bound to a :class:`Tensor` method above (``sum = Tensor.sum``, ``clip =
    Tensor.clamp``) becomes its :func:`_tensor_input` form; mypy still sees the method's own (overloaded)
    signature, which the wrapper keeps."""
    namespace = globals()
    for name, bound in list(namespace.items()):
        if name.startswith("_") or not isinstance(bound, types.FunctionType):
            continue
        method: Callable[..., Any] = bound
        if getattr(Tensor, bound.__name__, None) is method:
            namespace[name] = _tensor_input(name, method)


_wrap_method_forms()
