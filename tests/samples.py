"""The sample registry ("op infos"): sample inputs for every primitive.

Each :class:`Sample` names a primitive, its inputs (numpy arrays, Python
scalars or ``None``) and its static params. Generic tests run every sample
through every check (eager vs spec, graph vs eager, gradients, ...).
``SAMPLES`` covers float32 and float64, 0-d tensors, zero-size dims,
broadcasting, scalars on either side, non-contiguous inputs and negative axes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorplay.spec.table import PRIMITIVES, names
from tests.helpers import is_float_array

FLOATS = ("float32", "float64")


@dataclass
class Sample:
    """One call of a primitive: ``ops.<prim>(*args, **params)``."""

    prim: str
    args: tuple[Any, ...]
    params: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    differentiable: bool = True  # whether finite differences make sense at these inputs

    @property
    def id(self) -> str:
        """A readable test id."""
        return f"{self.prim}-{self.note}" if self.note else self.prim


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def rand(shape: tuple[int, ...], dtype: str = "float32", seed: int = 0, low: float = -2.0,
         high: float = 2.0) -> np.ndarray[Any, Any]:
    """Uniform random values of ``shape`` and ``dtype`` (deterministic per seed)."""
    return _rng(seed).uniform(low, high, size=shape).astype(dtype)


def non_contiguous(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The same values, laid out as a transposed view (not C-contiguous when rank >= 2)."""
    if array.ndim < 2:
        wide = np.empty(array.shape[:-1] + (array.shape[-1] * 2,) if array.ndim else (), dtype=array.dtype)
        if array.ndim:
            wide[..., ::2] = array
            return wide[..., ::2]
        return array
    return np.ascontiguousarray(np.swapaxes(array, -1, -2)).swapaxes(-1, -2)


# Sample knowledge per primitive, where the family's defaults do not fit: the input range of unary
# primitives defined (or smooth) only on part of the line, and those not smooth at a sampled point.
UNARY_RANGE = {"log": (0.1, 3.0), "log1p": (0.1, 3.0), "sqrt": (0.1, 3.0), "rsqrt": (0.1, 3.0), "tan": (-1.2, 1.2)}
KINKED = ("abs", "relu")  # derivative undefined at 0, which random samples avoid only by luck
UNARY_WITH_OWN_SAMPLES = ("gelu", "logical_not")  # a parameter, or bool semantics: sampled below
BINARY = tuple(n for n in names("binary") if PRIMITIVES[n].dtypes.startswith("promote") and n != "pow")
COMPARE = names("binary", dtypes="compare")
LOGICAL = names("binary", dtypes="logical")
INTEGRAL_UNARY = names("unary", dtypes="int_or_bool")  # integer and bool inputs only: sampled below
BITWISE = names("binary", dtypes="bitwise")


def _elementwise() -> Iterator[Sample]:
    for i, prim in enumerate(n for n in names("unary") if n not in UNARY_WITH_OWN_SAMPLES + INTEGRAL_UNARY):
        low, high = UNARY_RANGE.get(prim, (-3.0, 3.0))
        smooth = PRIMITIVES[prim].has_derivative and prim not in KINKED
        for dtype in FLOATS:
            yield Sample(prim, (rand((3, 4), dtype, i, low, high),), note=dtype, differentiable=smooth)
        yield Sample(prim, (rand((), "float32", i, low, high),), note="0d", differentiable=smooth)
        yield Sample(prim, (rand((0, 3), "float32", i),), note="empty", differentiable=False)
        yield Sample(prim, (non_contiguous(rand((4, 3), "float64", i, low, high)),), note="strided",
                     differentiable=smooth)
    for dtype in FLOATS:
        for approximate in ("none", "tanh"):
            yield Sample("gelu", (rand((2, 5), dtype, 3),), {"approximate": approximate}, note=f"{approximate}-{dtype}")
    yield Sample("exp", (np.arange(6, dtype=np.int64).reshape(2, 3),), note="int", differentiable=False)
    yield Sample("neg", (np.arange(6, dtype=np.int32),), note="int32", differentiable=False)
    yield Sample("logical_not", (np.array([True, False, True]),), note="bool", differentiable=False)
    yield Sample("logical_not", (np.array([0.0, 2.0, -1.0], dtype=np.float32),), note="float", differentiable=False)
    for i, prim in enumerate(BINARY):
        smooth = prim not in ("maximum", "minimum")
        for dtype in FLOATS:
            yield Sample(prim, (rand((3, 4), dtype, i), rand((3, 4), dtype, i + 50, 0.5, 2.0)), note=dtype)
        yield Sample(prim, (rand((2, 1, 4), "float32", i), rand((3, 1), "float32", i + 1, 0.5, 2)), note="broadcast",
                     differentiable=smooth)
        yield Sample(prim, (rand((3,), "float32", i), 2.5), note="scalar-right")
        yield Sample(prim, (1.5, rand((3,), "float32", i, 0.5, 2)), note="scalar-left")
        yield Sample(prim, (np.arange(6, dtype=np.int64), 2.5), note="int-floatscalar", differentiable=False)
        yield Sample(prim, (rand((0, 2), "float32", i), rand((2,), "float32", i + 1, 0.5, 2)), note="empty",
                     differentiable=False)
        yield Sample(prim, (rand((2, 3), "float32", i), rand((2, 3), "float64", i + 1, 0.5, 2)), note="f32-f64",
                     differentiable=False)
        yield Sample(prim, (non_contiguous(rand((3, 4), "float64", i)), rand((4,), "float64", i + 1, 0.5, 2)),
                     note="strided")
    yield Sample("pow", (rand((3, 4), "float64", 7, 0.5, 2.0), rand((3, 4), "float64", 8, -1.5, 1.5)), note="f64")
    yield Sample("pow", (rand((3,), "float32", 7, 0.5, 2.0), 2), note="int-exponent")
    yield Sample("pow", (2.0, rand((3,), "float32", 7, -1.0, 1.0)), note="scalar-base")
    yield Sample("add", (np.array([True, False]), np.array([True, True])), note="bool", differentiable=False)
    yield Sample("mul", (np.arange(4, dtype=np.int32), np.arange(4, dtype=np.int64)), note="int32-int64",
                 differentiable=False)
    yield Sample("div", (np.arange(1, 5, dtype=np.int64), np.array([2, 2, 3, 3], dtype=np.int64)), note="int-int",
                 differentiable=False)
    yield Sample("maximum", (np.array([1.0, np.nan, 3.0], np.float32), np.array([2.0, 1.0, np.nan], np.float32)),
                 note="nan", differentiable=False)
    for i, prim in enumerate(COMPARE + LOGICAL):
        yield Sample(prim, (np.array([1.0, 2.0, 3.0, np.nan], np.float32), np.array([2.0, 2.0, 1.0, 1.0], np.float32)),
                     note="f32", differentiable=False)
        yield Sample(prim, (rand((2, 3), "float64", i), 0.0), note="scalar", differentiable=False)
        yield Sample(prim, (np.arange(4, dtype=np.int64), np.arange(4, dtype=np.int64)[::-1].copy()), note="int",
                     differentiable=False)
    yield from _integral()
    yield Sample("where", (rand((3, 4), "float64", 1) > 0, rand((3, 4), "float64", 2), rand((4,), "float64", 3)),
                 note="broadcast")
    yield Sample("where", (rand((3,), "float32", 1) > 0, rand((3,), "float32", 2), 0.0), note="scalar")
    yield Sample("where", (np.array([True, False]), np.array([1, 2], np.int64), np.array([1.5, 2.5], np.float32)),
                 note="mixed", differentiable=False)


def _integral() -> Iterator[Sample]:
    """Bitwise primitives: integers (negative ones and wide ones too), bool, Python int and bool scalars."""
    ints = np.array([[0, 6, -7], [2**40, -1, 5]], np.int64)
    for prim in INTEGRAL_UNARY:
        yield Sample(prim, (ints,), note="int64", differentiable=False)
        yield Sample(prim, (np.array([3, -4, 0], np.int32),), note="int32", differentiable=False)
        yield Sample(prim, (np.array([True, False]),), note="bool", differentiable=False)
        yield Sample(prim, (np.array(5, np.int64),), note="0d", differentiable=False)
        yield Sample(prim, (np.zeros((0, 2), np.int64),), note="empty", differentiable=False)
        yield Sample(prim, (non_contiguous(ints),), note="strided", differentiable=False)
    for prim in BITWISE:
        yield Sample(prim, (ints, np.array([3, -1, 12], np.int64)), note="int64-broadcast", differentiable=False)
        yield Sample(prim, (np.array([5, -6], np.int32), np.array([3, 3], np.int64)), note="int32-int64",
                     differentiable=False)
        yield Sample(prim, (np.array([True, True, False, False]), np.array([True, False, True, False])), note="bool",
                     differentiable=False)
        yield Sample(prim, (np.array([5, -6], np.int32), 3), note="int-scalar", differentiable=False)
        yield Sample(prim, (6, np.array([True, False])), note="scalar-left-bool", differentiable=False)
        yield Sample(prim, (np.array([True, False]), True), note="bool-scalar", differentiable=False)
        yield Sample(prim, (np.zeros((0, 3), np.int64), np.array([1, 2, 3], np.int64)), note="empty",
                     differentiable=False)


def _reductions() -> Iterator[Sample]:
    for i, prim in enumerate(("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")):
        smooth = prim in ("reduce_sum", "reduce_prod")
        for dtype in FLOATS:
            yield Sample(prim, (rand((3, 4, 5), dtype, i),), {"axes": (1,), "keepdims": False}, note=f"axis1-{dtype}",
                         differentiable=smooth or dtype == "float64")
        yield Sample(prim, (rand((3, 4), "float64", i),), {"axes": (0, 1), "keepdims": True}, note="all-keep")
        yield Sample(prim, (rand((3, 4), "float64", i),), {"axes": (-1,), "keepdims": False}, note="negative")
        yield Sample(prim, (rand((3, 4), "float64", i),), {"axes": (), "keepdims": False}, note="noaxes")
        yield Sample(prim, (non_contiguous(rand((4, 3), "float64", i)),), {"axes": (1,), "keepdims": False},
                     note="strided")
        yield Sample(prim, (np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]),), {"axes": (1,), "keepdims": False},
                     note="ties", differentiable=False)
    yield Sample("reduce_sum", (rand((0, 3), "float32", 0),), {"axes": (0,), "keepdims": False}, note="empty",
                 differentiable=False)
    yield Sample("reduce_sum", (np.array([[True, False], [True, True]]),), {"axes": (1,), "keepdims": False},
                 note="bool", differentiable=False)
    yield Sample("reduce_sum", (np.arange(6, dtype=np.int32).reshape(2, 3),), {"axes": (0,), "keepdims": False},
                 note="int32", differentiable=False)
    with_zeros = rand((3, 4), "float64", 7)
    with_zeros[0, 1] = 0.0  # row 0: one zero; row 1: two zeros; row 2: none
    with_zeros[1, 0] = with_zeros[1, 3] = 0.0
    yield Sample("reduce_prod", (with_zeros,), {"axes": (1,), "keepdims": False}, note="zeros")
    yield Sample("reduce_prod", (with_zeros,), {"axes": (0, 1), "keepdims": False}, note="zeros-all-axes")
    yield Sample("reduce_prod", (rand((0, 3), "float32", 0),), {"axes": (0,), "keepdims": False}, note="empty",
                 differentiable=False)
    yield Sample("reduce_prod", (np.array([[True, False], [True, True]]),), {"axes": (1,), "keepdims": False},
                 note="bool", differentiable=False)
    yield Sample("reduce_prod", (np.arange(1, 7, dtype=np.int32).reshape(2, 3),), {"axes": (0,), "keepdims": True},
                 note="int32", differentiable=False)
    for dtype in FLOATS:
        yield Sample("cumsum", (rand((3, 4, 2), dtype, 6),), {"axis": 1}, note=dtype)
    yield Sample("cumsum", (rand((4,), "float64", 6),), {"axis": -1}, note="1d")
    yield Sample("cumsum", (non_contiguous(rand((3, 4), "float64", 6)),), {"axis": 0}, note="strided")
    yield Sample("cumsum", (rand((2, 0), "float32", 6),), {"axis": 1}, note="empty", differentiable=False)
    yield Sample("cumsum", (np.array([[True, False], [True, True]]),), {"axis": 0}, note="bool", differentiable=False)
    yield Sample("cumsum", (np.arange(6, dtype=np.int32).reshape(2, 3),), {"axis": 1}, note="int32",
                 differentiable=False)
    ties = np.array([[3.0, np.nan, 1.0, 3.0, np.nan, 2.0], [0.0, -0.0, np.inf, -np.inf, 1.0, 0.0]])
    for descending in (False, True):
        yield Sample("argsort", (ties,), {"axis": 1, "descending": descending}, note=f"ties-nan-{descending}",
                     differentiable=False)
        yield Sample("argsort", (rand((3, 4, 2), "float32", 7),), {"axis": 0, "descending": descending},
                     note=f"axis0-{descending}", differentiable=False)
    yield Sample("argsort", (np.array([[2, 0, 2, 1]], np.int32),), {"axis": -1}, note="int32", differentiable=False)
    yield Sample("argsort", (np.array([True, False, True]),), {"axis": 0, "descending": True}, note="bool",
                 differentiable=False)
    yield Sample("argsort", (rand((0, 3), "float32", 7),), {"axis": 0}, note="empty", differentiable=False)
    for prim in ("argmax", "argmin"):
        yield Sample(prim, (rand((3, 4), "float32", 5),), {"axis": 1, "keepdims": False}, note="f32",
                     differentiable=False)
        yield Sample(prim, (np.array([[1.0, 3.0, 3.0], [np.nan, 2.0, 0.0]]),), {"axis": -1, "keepdims": True},
                     note="ties-nan", differentiable=False)


def _structure() -> Iterator[Sample]:
    x = rand((2, 3, 4), "float64", 11)
    yield Sample("reshape", (x,), {"shape": (6, 4)}, note="merge")
    yield Sample("reshape", (non_contiguous(rand((3, 4), "float64", 1)),), {"shape": (12,)}, note="strided")
    yield Sample("reshape", (rand((), "float32", 1),), {"shape": (1, 1)}, note="0d")
    yield Sample("reshape", (rand((0, 3), "float32", 1),), {"shape": (3, 0)}, note="empty", differentiable=False)
    yield Sample("permute", (x,), {"perm": (2, 0, 1)})
    yield Sample("permute", (rand((2, 3), "float32", 2),), {"perm": (1, 0)}, note="f32")
    yield Sample("broadcast_to", (rand((3, 1), "float64", 3),), {"shape": (2, 3, 4)})
    yield Sample("broadcast_to", (rand((), "float32", 3),), {"shape": (2, 2)}, note="0d")
    yield Sample("slice", (x,), {"starts": (0, 1, 0), "stops": (2, 3, 4), "steps": (1, 1, 2)}, note="step2")
    yield Sample("slice", (x,), {"starts": (1, 2, 3), "stops": (-1, -1, 0), "steps": (-1, -1, -2)}, note="negative")
    yield Sample("slice", (x,), {"starts": (0, 3, 0), "stops": (2, 3, 4), "steps": (1, 1, 1)}, note="empty")
    yield Sample("pad", (rand((2, 3), "float64", 4),), {"pads": ((1, 0), (2, 1)), "value": 0.0})
    yield Sample("pad", (rand((2, 3), "float32", 4),), {"pads": ((0, 0), (1, 1)), "value": -1.5}, note="value")
    yield Sample("concat", (rand((2, 3), "float64", 5), rand((1, 3), "float64", 6)), {"axis": 0})
    yield Sample("concat", (rand((2, 3), "float32", 5), rand((2, 0), "float32", 6), rand((2, 2), "float32", 7)),
                 {"axis": -1}, note="empty-piece")
    yield Sample("concat", (rand((2,), "float32", 5), rand((2,), "float64", 6)), {"axis": 0}, note="promote",
                 differentiable=False)
    yield Sample("gather", (rand((4, 3), "float64", 8), np.array([3, 0, 0, -1], np.int64)), {"axis": 0})
    yield Sample("gather", (rand((2, 5), "float32", 8), np.array([[1, 2], [4, 4]], np.int64)), {"axis": 1},
                 note="2d-index")
    yield Sample("gather", (rand((2, 5), "float32", 8), np.zeros((0,), np.int64)), {"axis": 1}, note="empty",
                 differentiable=False)
    yield Sample("scatter_add", (rand((4, 3), "float64", 9), np.array([1, 1, 3], np.int64),
                                 rand((3, 3), "float64", 10)), {"axis": 0})
    yield Sample("scatter_add", (rand((2, 5), "float32", 9), np.array([0, 4, 0], np.int64),
                                 rand((2, 3), "float32", 10)), {"axis": -1}, note="axis-1")
    for src, dst in (("float32", "float64"), ("float64", "float32"), ("float32", "int64"), ("int64", "float32"),
                     ("bool", "float32"), ("float32", "bool")):
        values = rand((3,), src, 12) if src.startswith("float") else np.array([0, 1, 5]).astype(src)
        yield Sample("cast", (values,), {"dtype": dst}, note=f"{src}-{dst}",
                     differentiable=src.startswith("float") and dst.startswith("float"))
    yield Sample("stop_gradient", (rand((3,), "float64", 13),), differentiable=False)
    yield Sample("full", (), {"shape": (2, 3), "value": 1.5, "dtype": "float32"}, differentiable=False)
    yield Sample("full", (), {"shape": (0,), "value": 1, "dtype": "int64"}, note="empty", differentiable=False)
    yield Sample("iota", (), {"length": 5, "dtype": "int64"}, differentiable=False)
    yield Sample("iota", (), {"length": 0, "dtype": "float32"}, note="empty", differentiable=False)
    yield Sample("check_index", (np.array([[0, 3], [2, 1]], np.int64),), {"bound": 4, "what": "target"},
                 differentiable=False)
    yield Sample("check_index", (np.array([1, -100, 0], np.int32),), {"bound": 2, "what": "target", "allowed": (-100,)},
                 note="allowed-int32", differentiable=False)
    yield Sample("check_index", (np.zeros((0, 2), np.int64),), {"bound": 0, "what": "index"}, note="empty",
                 differentiable=False)


def _linalg_nn() -> Iterator[Sample]:
    for dtype in FLOATS:
        yield Sample("matmul", (rand((3, 4), dtype, 1), rand((4, 5), dtype, 2)), note=dtype)
    yield Sample("matmul", (rand((2, 1, 3, 4), "float64", 1), rand((5, 4, 2), "float64", 2)), note="batch-broadcast")
    yield Sample("matmul", (non_contiguous(rand((3, 4), "float64", 1)), rand((4, 2), "float64", 2)), note="strided")
    yield Sample("matmul", (rand((0, 4), "float32", 1), rand((4, 2), "float32", 2)), note="empty", differentiable=False)
    yield Sample("matmul", (rand((2, 3), "float32", 1), rand((3, 2), "float64", 2)), note="promote",
                 differentiable=False)
    conv = dict(stride=(1,), padding=(1,), dilation=(1,), groups=1)
    yield Sample("conv_nd", (rand((2, 3, 7), "float64", 1), rand((4, 3, 3), "float64", 2)), conv, note="1d")
    yield Sample("conv_nd", (rand((2, 4, 6, 5), "float64", 1), rand((6, 2, 3, 2), "float64", 2)),
                 dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2), note="2d-groups")
    yield Sample("conv_nd", (rand((1, 2, 4, 4, 3), "float32", 1), rand((3, 2, 2, 2, 2), "float32", 2)),
                 dict(stride=(1, 1, 1), padding=(0, 1, 0), dilation=(1, 1, 1), groups=1), note="3d")
    yield Sample("conv_nd", (rand((0, 3, 5), "float32", 1), rand((2, 3, 3), "float32", 2)), conv, note="empty",
                 differentiable=False)
    yield Sample("conv_transpose_nd", (rand((2, 3, 5), "float64", 1), rand((3, 2, 3), "float64", 2)),
                 dict(stride=(2,), padding=(1,), output_padding=(1,), dilation=(1,), groups=1), note="1d")
    yield Sample("conv_transpose_nd", (rand((1, 4, 3, 4), "float64", 1), rand((4, 1, 2, 3), "float64", 2)),
                 dict(stride=(1, 2), padding=(0, 1), output_padding=(0, 0), dilation=(2, 1), groups=2), note="2d")
    yield Sample("conv_weight_grad_nd", (rand((2, 4, 6, 5), "float64", 1), rand((2, 6, 3, 3), "float64", 2)),
                 dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2))
    pool = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    pool_pad = dict(kernel_size=(3, 3), stride=(2, 1), padding=(1, 1))
    x4 = rand((2, 3, 5, 6), "float64", 3)
    for prim in ("max_pool_nd", "avg_pool_nd"):
        yield Sample(prim, (x4,), pool, note="2x2", differentiable=True)
        yield Sample(prim, (rand((2, 3, 5, 6), "float32", 3),), pool_pad, note="pad-f32")
        yield Sample(prim, (rand((2, 1, 7), "float64", 3),), dict(kernel_size=(3,), stride=(2,), padding=(1,)),
                     note="1d")
        yield Sample(prim, (rand((1, 1, 4, 4, 4), "float64", 3),),
                     dict(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0)), note="3d")
    yield Sample("max_pool_nd", (np.array([[[[1.0, 1.0], [0.0, 1.0]]]]),), pool, note="ties", differentiable=False)
    yield Sample("smooth_max_pool_nd", (x4,), dict(pool_pad, beta=2.0))
    yield Sample("smooth_max_pool_nd", (rand((2, 3, 5, 6), "float32", 3),), dict(pool, beta=8.0), note="f32")
    g_pool = rand((2, 3, 3, 6), "float64", 4)
    yield Sample("max_pool_backward_nd", (x4, g_pool), pool_pad, differentiable=False)
    yield Sample("max_pool_select_nd", (x4, rand((2, 3, 5, 6), "float64", 5)), pool_pad, differentiable=False)
    yield Sample("avg_pool_backward_nd", (g_pool,), dict(pool_pad, input_shape=(5, 6)))
    yield Sample("smooth_max_pool_backward_nd", (x4, g_pool), dict(pool_pad, beta=2.0))
    for dtype in FLOATS:
        yield Sample("layer_norm_last_axis", (rand((2, 3, 8), dtype, 1), rand((8,), dtype, 2), rand((8,), dtype, 3)),
                     {"eps": 1e-5}, note=dtype)
    yield Sample("layer_norm_last_axis", (rand((8,), "float64", 1), rand((8,), "float64", 2), rand((8,), "float64", 3)),
                 {"eps": 1e-5}, note="1d")
    yield Sample("layer_norm_last_axis", (rand((0, 4), "float32", 1), rand((4,), "float32", 2), rand((4,), "float32", 3)),
                 {"eps": 1e-5}, note="empty", differentiable=False)
    yield Sample("batch_norm", (rand((4, 3, 5), "float64", 1), rand((3,), "float64", 2),
                                rand((3,), "float64", 3, 0.5, 2.0), rand((3,), "float64", 4),
                                rand((3,), "float64", 5)), {"eps": 1e-5})
    yield Sample("batch_norm", (rand((4, 3), "float32", 1), rand((3,), "float32", 2),
                                rand((3,), "float32", 3, 0.5, 2.0), rand((3,), "float32", 4),
                                rand((3,), "float32", 5)), {"eps": 1e-5}, note="2d-f32")
    for prim in ("softmax", "log_softmax"):
        for dtype in FLOATS:
            yield Sample(prim, (rand((3, 5), dtype, 1),), {"axis": -1}, note=dtype)
        yield Sample(prim, (rand((3, 4, 2), "float64", 1),), {"axis": 1}, note="middle-axis")
        yield Sample(prim, (np.array([[0.0, -np.inf, 1.0], [1000.0, 0.0, -1000.0]]),), {"axis": -1},
                     note="inf-large", differentiable=False)
    q = rand((2, 3, 4), "float64", 1)
    k = rand((2, 5, 4), "float64", 2)
    v = rand((2, 5, 6), "float64", 3)
    yield Sample("dot_product_attention", (q, k, v, None), {"scale": 0.5})
    mask = rand((3, 5), "float64", 4) > -1.0
    mask[1, :] = False
    yield Sample("dot_product_attention", (q, k, v, mask), {"scale": 0.5}, note="mask-fully-masked-row")
    yield Sample("dot_product_attention", (rand((2, 2, 3, 4), "float32", 1), rand((2, 2, 3, 4), "float32", 2),
                               rand((2, 2, 3, 4), "float32", 3), None), {"scale": 0.5}, note="heads-f32")


def _random() -> Iterator[Sample]:
    key = np.array([42, 7], np.int64)
    yield Sample("random_uniform", (key,), {"shape": (3, 4), "dtype": "float32"}, differentiable=False)
    yield Sample("random_normal", (key,), {"shape": (5,), "dtype": "float64"}, differentiable=False)
    yield Sample("random_randint", (key,), {"shape": (2, 3), "low": -3, "high": 4, "dtype": "int64"},
                 differentiable=False)
    yield Sample("random_uniform", (key,), {"shape": (0, 2), "dtype": "float64"}, note="empty", differentiable=False)


def _zero_size() -> Iterator[Sample]:
    """Zero-size dims for the primitives the families above sample only with sizes >= 1: an empty
    batch, an empty feature or inner axis, an empty window of keys; the differentiable ones keep their
    derivative (an empty cotangent, or zeros where the output is not empty)."""
    def zs(prim: str, args: tuple[Any, ...], params: dict[str, Any] | None = None, note: str = "") -> Sample:
        return Sample(prim, args, params or {}, note="zero-size" + (f"-{note}" if note else ""),
                      differentiable=PRIMITIVES[prim].has_derivative)
    empty, row = rand((0, 3), "float64", 21), rand((3,), "float64", 22, 0.5, 2.0)
    yield zs("matmul", (rand((3, 2, 0), "float64", 1), rand((0, 1), "float64", 2)), note="inner")
    yield zs("matmul", (rand((2, 0), "float32", 1), rand((0, 3), "float32", 2)), note="inner-2d")
    yield zs("matmul", (rand((2, 0, 4), "float64", 1), rand((4, 3), "float64", 2)), note="rows")
    yield zs("gelu", (rand((0, 3), "float32", 3),), {"approximate": "tanh"})
    yield zs("pow", (rand((0, 3), "float64", 4, 0.5, 2.0), row))
    for prim in COMPARE + LOGICAL:
        yield zs(prim, (empty, row))
    yield zs("logical_not", (np.zeros((0, 2), np.bool_),))
    yield zs("where", (np.zeros((0, 3), np.bool_), empty, row))
    yield zs("stop_gradient", (empty,))
    yield zs("cast", (rand((0, 3), "float32", 5),), {"dtype": "float64"})
    for prim in ("reduce_max", "reduce_min", "reduce_sum", "reduce_prod"):
        yield zs(prim, (rand((0, 4), "float64", 6),), {"axes": (1,), "keepdims": True})
    for prim in ("argmax", "argmin"):
        yield zs(prim, (rand((0, 4), "float32", 6),), {"axis": 1, "keepdims": False})
    yield zs("cumsum", (rand((0, 4), "float64", 6),), {"axis": 1}, note="other-axis")
    yield zs("broadcast_to", (rand((3, 1), "float64", 7),), {"shape": (2, 3, 0)})
    yield zs("permute", (rand((2, 0, 3), "float64", 7),), {"perm": (2, 0, 1)})
    yield zs("slice", (rand((2, 0, 4), "float64", 7),), {"starts": (0, 0, 0), "stops": (2, 0, 4), "steps": (1, 1, 2)})
    yield zs("pad", (rand((0, 3), "float64", 8),), {"pads": ((1, 0), (2, 1)), "value": 0.5}, note="to-nonempty")
    yield zs("reshape", (rand((2, 0, 3), "float64", 8),), {"shape": (0, 6)})
    yield zs("concat", (rand((0, 3), "float64", 8), rand((0, 2), "float64", 9)), {"axis": 1})
    yield zs("gather", (rand((4, 0), "float64", 8), np.array([1, 3], np.int64)), {"axis": 0})
    yield zs("scatter_add", (rand((4, 3), "float64", 9), np.zeros((0,), np.int64), rand((0, 3), "float64", 10)),
             {"axis": 0})
    for prim in ("softmax", "log_softmax"):
        yield zs(prim, (rand((0, 5), "float64", 11),), {"axis": -1})
        yield zs(prim, (rand((3, 0), "float64", 11),), {"axis": -1}, note="axis")
    yield zs("layer_norm_last_axis", (rand((0, 4), "float64", 1), rand((4,), "float64", 2), rand((4,), "float64", 3)),
             {"eps": 1e-5})
    yield zs("batch_norm", (rand((0, 3, 5), "float64", 1), rand((3,), "float64", 2), rand((3,), "float64", 3, 0.5, 2.0),
                            rand((3,), "float64", 4), rand((3,), "float64", 5)), {"eps": 1e-5})
    yield zs("dot_product_attention", (rand((2, 0, 4), "float64", 1), rand((2, 5, 4), "float64", 2),
                                       rand((2, 5, 6), "float64", 3), None), {"scale": 0.5}, note="queries")
    conv1 = dict(stride=(1,), padding=(1,), dilation=(1,), groups=1)
    yield zs("conv_nd", (rand((0, 3, 5), "float64", 1), rand((2, 3, 3), "float64", 2)), conv1)
    yield zs("conv_nd", (rand((2, 0, 5), "float64", 1), rand((2, 0, 3), "float64", 2)), conv1, note="channels")
    yield zs("conv_transpose_nd", (rand((0, 3, 5), "float64", 1), rand((3, 2, 3), "float64", 2)),
             dict(stride=(2,), padding=(1,), output_padding=(1,), dilation=(1,), groups=1))
    yield zs("conv_weight_grad_nd", (rand((0, 4, 6, 5), "float64", 1), rand((0, 6, 3, 3), "float64", 2)),
             dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2), note="to-nonempty")
    pool = dict(kernel_size=(3, 3), stride=(2, 1), padding=(1, 1))
    x0, g0 = rand((0, 3, 5, 6), "float64", 3), rand((0, 3, 3, 6), "float64", 4)
    for prim in ("max_pool_nd", "avg_pool_nd"):
        yield zs(prim, (x0,), pool)
    yield zs("smooth_max_pool_nd", (x0,), dict(pool, beta=2.0))
    yield zs("max_pool_backward_nd", (x0, g0), pool)
    yield zs("max_pool_select_nd", (x0, rand((0, 3, 5, 6), "float64", 5)), pool)
    yield zs("avg_pool_backward_nd", (g0,), dict(pool, input_shape=(5, 6)))
    yield zs("smooth_max_pool_backward_nd", (x0, g0), dict(pool, beta=2.0))
    key = np.array([42, 7], np.int64)
    yield zs("random_normal", (key,), {"shape": (3, 0), "dtype": "float32"})
    yield zs("random_randint", (key,), {"shape": (0,), "low": 0, "high": 4, "dtype": "int64"})


def is_zero_size(sample: Sample) -> bool:
    """Whether the sample has an input with a zero-size dim, or an output shape param with one (``full``,
    ``iota``, random factories, ``broadcast_to``, ``reshape``)."""
    shape = sample.params.get("shape")
    return (any(isinstance(a, np.ndarray) and a.size == 0 for a in sample.args)
            or (isinstance(shape, tuple) and 0 in shape) or sample.params.get("length") == 0)


SAMPLES: list[Sample] = [*_elementwise(), *_reductions(), *_structure(), *_linalg_nn(), *_random(), *_zero_size()]
"""Every sample, in a stable order."""

ZERO_SIZE_SAMPLES: list[Sample] = [s for s in SAMPLES if is_zero_size(s)]
"""The samples with a zero-size dim: every primitive has at least one."""

GRAD_SAMPLES: list[Sample] = [s for s in SAMPLES if s.differentiable and any(is_float_array(a) for a in s.args)]
"""The samples whose derivatives the rule tests check: differentiable at their inputs, with a float array input."""

ZERO_SIZE_GRAD_SAMPLES: list[Sample] = [s for s in ZERO_SIZE_SAMPLES if PRIMITIVES[s.prim].has_derivative
                                        and any(is_float_array(a) for a in s.args)]
"""The zero-size samples of differentiable primitives (the older ``empty`` ones included, which the finite
difference checks skip): their gradients are compared across interpreters."""
