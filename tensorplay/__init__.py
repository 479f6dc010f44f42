"""tensorplay: shape-typed tensor programs.

``import tensorplay as tp``. Models are written once against the ``Ops``
protocol (or with tensor methods) and run under the eager interpreter
(``tp.eager``), the graph recorder, or inside transforms.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from tensorplay.interpreters.eager import tape as _tape
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.eager import hooks as _hooks  # noqa: F401  (Tensor.register_hook and friends)
from tensorplay.interpreters.eager.inference import inference_mode, is_inference_mode_enabled
from tensorplay import autograd, cuda, dims, graph
from tensorplay.creation import (
    arange, cat, empty, empty_like, eye, from_numpy, full, full_like, linspace, manual_seed, ones,
    ones_like, rand, rand_like, randint, randn, randn_like, stack, tensor, where, zeros, zeros_like,
)
from tensorplay.dispatch import Program, ops_of
from tensorplay.floordiv import floor_divide, remainder
from tensorplay.dispatch import program as program  # the decorator shadows the submodule name
from tensorplay.devices import device
from tensorplay.dtypes import DType, bool_, float32, float64, int32, int64
from tensorplay.export.weights import load, save
from tensorplay.errors import (
    ArgumentError, ArgumentTypeError, AutogradError, AxisError, DeviceError, DTypeError, GraphCaptureError,
    IndexRangeError, KeyLookupError, MissingRuleError, ShapeError, TensorplayError,
)
from tensorplay.functions import (
    abs, all, allclose, amax, amin, any, argmax, argmin, argsort, broadcast_to, ceil, chunk, clamp, clip, cos, cumsum,
    einsum, erf, exp, expm1, flatten, floor, isclose, isfinite, isinf, isnan, log, log1p, log_softmax, logsumexp,
    masked_fill, matmul, max, maximum, mean, min, minimum, nan_to_num, neg, norm, outer, permute, pow, prod, relu,
    reshape, round, rsqrt, sigmoid, sign, sin, softmax, sort, split, sqrt, square, squeeze, std, sum, tanh, topk,
    transpose, tril, triu, unsqueeze, var,
)
from tensorplay.functions import (  # rearrangements, selections, products, more elementwise functions
    arctan2, atan2, bmm, cosh, diag, diagonal, dot, flip, gather, index_select, log10, log2, logical_and,
    logical_not, logical_or, logical_xor, moveaxis, movedim, reciprocal, repeat_interleave, roll, sinh, swapaxes,
    swapdims, tile, trace, unflatten,
)
from tensorplay.functions import (  # more math (tensorplay.math_more)
    addcdiv, addcmul, cdist, clamp_max, clamp_min, count_nonzero, cumprod, erfinv, lerp, logaddexp, logaddexp2, logit,
    meshgrid, nanmean, nansum, tensordot, xlogy,
)
from tensorplay.functions import (  # index-driven operations (tensorplay.indexing_ops)
    bincount, bucketize, median, quantile, scatter, scatter_add, searchsorted, take_along_dim,
)
from tensorplay.functions import (  # tensorplay.structure_ops
    atleast_1d, atleast_2d, atleast_3d, broadcast_shapes, broadcast_tensors, clone, column_stack, diag_embed,
    diagflat, diagonal_scatter, dsplit, dstack, fliplr, flipud, hsplit, hstack, index_add, index_copy, index_fill,
    narrow, numel, ravel, rot90, row_stack, scatter_reduce, select, select_scatter, slice_scatter, split_with_sizes,
    t, take, tensor_split, unbind, vsplit, vstack,
)
from tensorplay.functions import (  # sequences and structure (tensorplay.sequence_ops)
    block_diag, cartesian_prod, cross, cummax, cummin, diff,
    histc, kron, trapezoid, tril_indices, triu_indices,
)
from tensorplay.functions import (  # tensorplay.elementwise_ops
    absolute, acos, acosh, add, arccos, arccosh, arcsin, arcsinh, arctan, arctanh, asin, asinh, atan, atanh,
    bitwise_and, bitwise_not, bitwise_or, bitwise_xor, copysign, deg2rad, div, divide, eq, equal, erfc, exp2, fix,
    float_power, fmax, fmin, fmod, frac, ge, greater, greater_equal, gt, heaviside, hypot, isin, isneginf,
    isposinf, isreal, ldexp, le, less, less_equal, lt, mul, multiply, ne, negative, not_equal, positive, rad2deg,
    sgn, signbit, sinc, sub, subtract, tan, true_divide, trunc,
)
from tensorplay.functions import (  # products, statistics, data-dependent selections (product_ops, statistics_ops, selection_ops)
    addbmm, addmm, addmv, addr, aminmax, argwhere, baddbmm, chain_matmul, corrcoef, cov, cumulative_trapezoid, ger,
    inner, kthvalue, logcumsumexp, masked_select, matrix_power, mm, mode, msort, mv, nanmedian, nanquantile, nonzero,
    std_mean, unique, unique_consecutive, var_mean, vdot,
)
from tensorplay.generator import Generator
from tensorplay.dimexpr import DimExpr, dim, relate
from tensorplay.index import Index, index
from tensorplay.ops import Interpreter, Ops
from tensorplay.sampling import multinomial
from tensorplay.random_draws import bernoulli, normal, randperm
from tensorplay.shapecheck import shapecheck
from tensorplay.tensor import Size, Tensor, ValuesIndices

bool = bool_  # noqa: A001 - PyTorch spelling tp.bool
no_grad = _tape.no_grad
enable_grad = _tape.enable_grad
is_grad_enabled = _tape.grad_enabled


class set_grad_enabled:  # noqa: N801 - PyTorch spelling
    """``tp.set_grad_enabled(mode)``: sets grad mode now; as a context manager, restores it on exit."""

    def __init__(self, mode: builtins.bool) -> None:
        self.previous = _tape.grad_enabled()
        _tape.set_grad_enabled(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        _tape.set_grad_enabled(self.previous)


__version__ = "0.1.0"

_LAZY_SUBMODULES = ("compiler", "export", "func", "nn", "optim", "testing", "utils")

if TYPE_CHECKING:  # mypy sees the lazily loaded subpackages as attributes: tp.nn.Linear, tp.func.grad
    from tensorplay import compiler as compiler
    from tensorplay import export as export
    from tensorplay import func as func
    from tensorplay import nn as nn
    from tensorplay import optim as optim
    from tensorplay import testing as testing
    from tensorplay import utils as utils
    from tensorplay.compiler import compile as compile


def _transform_cache_factory() -> object:
    """The compiler's factory of cached transforms (:mod:`tensorplay.compile_hooks`), loaded on first use."""
    import importlib
    return importlib.import_module("tensorplay.compiler.transform_cache").make


from tensorplay import compile_hooks as _compile_hooks  # noqa: E402

_compile_hooks.set_transform_cache_provider(_transform_cache_factory)


def __getattr__(name: str) -> object:
    """``tp.compiler``, ``tp.export``, ``tp.func``, ``tp.nn``, ``tp.optim`` and ``tp.testing`` (and
    ``tp.compile``) load on first use, keeping ``import tensorplay`` fast."""
    import importlib
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"tensorplay.{name}")
    if name == "compile":
        return importlib.import_module("tensorplay.compiler").compile
    raise AttributeError(f"module 'tensorplay' has no attribute {name!r}")

# The public names. mypy --strict (no implicit re-export) only lets users write ``tp.zeros`` for
# names listed here: add every new public name.
__all__ = [
    "ArgumentError", "ArgumentTypeError", "KeyLookupError",
    "AutogradError", "AxisError", "DeviceError", "DType", "DTypeError", "Generator", "GraphCaptureError", "Index", "IndexRangeError",
    "Interpreter", "MissingRuleError", "Ops", "Program", "ShapeError", "Size", "Tensor", "TensorplayError",
    "DimExpr", "arange", "autograd", "bool", "bool_", "cat", "compile", "compiler", "cuda", "device", "dim", "dims", "eager",
    "empty", "empty_like", "enable_grad", "export", "eye", "graph",
    "float32", "float64", "from_numpy", "func", "nn", "optim", "full", "full_like", "index", "int32", "int64", "is_grad_enabled",
    "floor_divide", "linspace", "load", "manual_seed", "multinomial", "remainder", "no_grad", "ones", "ones_like", "ops_of", "program", "rand", "rand_like",
    "randint", "randn", "randn_like", "relate", "save", "set_grad_enabled", "shapecheck", "stack", "tensor", "testing", "utils",
    "where",
    "zeros", "zeros_like", "ValuesIndices",
    # PyTorch's top-level function forms (tensorplay.functions)
    "abs", "all", "allclose", "amax", "amin", "any", "argmax", "argmin", "argsort", "broadcast_to", "ceil", "chunk",
    "clamp", "clip", "cos", "cumsum", "einsum", "erf", "exp", "expm1", "flatten", "floor", "isclose", "isfinite",
    "isinf", "isnan", "log", "log1p", "log_softmax", "logsumexp", "masked_fill", "matmul", "max", "maximum", "mean",
    "min", "minimum", "nan_to_num", "neg", "norm", "outer", "permute", "pow", "prod", "relu", "reshape", "round",
    "rsqrt", "sigmoid", "sign", "sin", "softmax", "sort", "split", "sqrt", "square", "squeeze", "std", "sum", "tanh",
    "topk", "transpose", "tril", "triu", "unsqueeze", "var",
    # tensorplay.shape_ops and tensorplay.math_ops, through tensorplay.functions
    "arctan2", "atan2", "bmm", "cosh", "diag", "diagonal", "dot", "flip", "gather", "index_select", "log10", "log2",
    "logical_and", "logical_not", "logical_or", "logical_xor", "moveaxis", "movedim", "reciprocal",
    "repeat_interleave", "roll", "sinh", "swapaxes", "swapdims", "tile", "trace", "unflatten",
    # tensorplay.math_more, through tensorplay.functions
    "addcdiv", "addcmul", "cdist", "clamp_max", "clamp_min", "count_nonzero", "cumprod", "erfinv",
    "lerp", "logaddexp", "logaddexp2", "logit", "meshgrid", "nanmean", "nansum", "tensordot", "xlogy",
    # tensorplay.sequence_ops, through tensorplay.functions
    "block_diag", "cartesian_prod", "cross", "cummax", "cummin", "diff",
    "histc", "kron", "trapezoid", "tril_indices", "triu_indices",
    # inference mode (tensorplay.interpreters.eager.inference)
    "inference_mode", "is_inference_mode_enabled",
    # tensorplay.indexing_ops, through tensorplay.functions, and tensorplay.random_draws
    "bernoulli", "bincount", "bucketize", "median", "normal", "quantile", "randperm", "scatter", "scatter_add",
    "searchsorted", "take_along_dim",
    # tensorplay.structure_ops, through tensorplay.functions
    "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_shapes", "broadcast_tensors", "clone", "column_stack",
    "diag_embed", "diagflat", "diagonal_scatter", "dsplit", "dstack", "fliplr", "flipud", "hsplit", "hstack",
    "index_add", "index_copy", "index_fill", "narrow", "numel", "ravel", "rot90", "row_stack", "scatter_reduce",
    "select", "select_scatter", "slice_scatter", "split_with_sizes", "t", "take", "tensor_split", "unbind", "vsplit",
    "vstack",
    # tensorplay.elementwise_ops, through tensorplay.functions
    "absolute", "acos", "acosh", "add", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "asin",
    "asinh", "atan", "atanh", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "copysign", "deg2rad",
    "div", "divide", "eq", "equal", "erfc", "exp2", "fix", "float_power", "fmax", "fmin", "fmod", "frac", "ge",
    "greater", "greater_equal", "gt", "heaviside", "hypot", "isin", "isneginf", "isposinf", "isreal", "ldexp",
    "le", "less", "less_equal", "lt", "mul", "multiply", "ne", "negative", "not_equal", "positive", "rad2deg",
    "sgn", "signbit", "sinc", "sub", "subtract", "tan", "true_divide", "trunc",
    # tensorplay.product_ops, statistics_ops and selection_ops, through tensorplay.functions
    "addbmm", "addmm", "addmv", "addr", "aminmax", "argwhere", "baddbmm", "chain_matmul", "corrcoef", "cov",
    "cumulative_trapezoid", "ger", "inner", "kthvalue", "logcumsumexp", "masked_select", "matrix_power", "mm", "mode",
    "msort", "mv", "nanmedian", "nanquantile", "nonzero", "std_mean", "unique", "unique_consecutive", "var_mean",
    "vdot",
]
