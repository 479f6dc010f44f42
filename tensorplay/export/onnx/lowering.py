"""The lowering table: primitive name -> a function emitting standard ONNX operators for one graph node.

A lowering is ``lower(b, node) -> name``: it reads the node's inputs as operands of the dtype the primitive
computes in (:meth:`GraphBuilder.operand` casts, and makes scalar literals constants), emits nodes with
``b.op`` and returns the name of the value holding the node's result, whose dtype and shape are the node's.
Operands follow tensorplay's promotion (PyTorch's), so a weak Python scalar takes the tensor's dtype.

:data:`LOWERINGS` covers the inference op set: every primitive but the random draws and the gradient
primitives (:data:`NOT_LOWERED` says why each of those is refused). ``dot_product_attention`` and
``smooth_max_pool_nd`` are rewritten into other primitives first (:mod:`.compositions`), so they lower
as their compositions. Where an operator is newer than the target opset (``Gelu`` before 20, the bitwise
operators before 18, ``ReduceMax`` axes inputs before 18) the lowering composes older ones.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tensorplay.export.onnx.builder import GraphBuilder
from tensorplay.export.onnx.errors import ONNXExportError
from tensorplay.interpreters.graph.ir import Literal, Node, Var
from tensorplay.spec.dtypes import is_float, result_type
from tensorplay.spec.elementwise import binary_dtype
from tensorplay.spec.table import PRIMITIVES
from tensorplay.symbolic import SymDim

Lowering = Callable[[GraphBuilder, Node], str]

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


def _x(node: Node, i: int = 0) -> Var:
    v = node.inputs[i]
    assert isinstance(v, Var), (node.target, i, v)
    return v


def _out(node: Node) -> str:
    return str(node.aval.dtype)


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _refuse(node: Node, why: str) -> ONNXExportError:
    where = f" at {node.location}" if node.location is not None else ""
    return ONNXExportError(f"to_onnx: primitive {node.target}{where} cannot be written as ONNX: {why}")


# ---- elementwise unary ------------------------------------------------------------------------------------

def _unary(op_type: str) -> Lowering:
    def lower(b: GraphBuilder, node: Node) -> str:
        return b.op(op_type, b.operand(node.inputs[0], _out(node)))
    return lower


def _float_or_identity(op_type: str) -> Lowering:
    """Rounding: ``op_type`` on floats; integers are already whole."""
    def lower(b: GraphBuilder, node: Node) -> str:
        x = b.operand(node.inputs[0], _out(node))
        return b.op(op_type, x) if is_float(_out(node)) else b.op("Identity", x)
    return lower


def _sign(b: GraphBuilder, node: Node) -> str:
    x = b.operand(node.inputs[0], _out(node))
    return b.op("Identity", x) if _out(node) == "bool" else b.op("Sign", x)


def _relu(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    x = b.operand(node.inputs[0], dtype)
    return b.op("Relu", x) if is_float(dtype) else b.op("Max", x, b.const(0, dtype))


def _log1p(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    return b.op("Log", b.op("Add", b.operand(node.inputs[0], dtype), b.const(1.0, dtype)))


def _expm1(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    return b.op("Sub", b.op("Exp", b.operand(node.inputs[0], dtype)), b.const(1.0, dtype))


def _rsqrt(b: GraphBuilder, node: Node) -> str:
    return b.op("Reciprocal", b.op("Sqrt", b.operand(node.inputs[0], _out(node))))


def _gelu(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    x = b.operand(node.inputs[0], dtype)
    approximate = node.params["approximate"]
    if b.opset >= 20:
        return b.op("Gelu", x, approximate=approximate)

    def c(v: float) -> str:
        return b.const(v, dtype)
    if approximate == "tanh":
        cube = b.op("Mul", x, b.op("Mul", x, x))
        inner = b.op("Mul", c(math.sqrt(2.0 / math.pi)), b.op("Add", x, b.op("Mul", c(0.044715), cube)))
        phi = b.op("Add", c(1.0), b.op("Tanh", inner))
    else:
        phi = b.op("Add", c(1.0), b.op("Erf", b.op("Mul", x, c(math.sqrt(0.5)))))
    return b.op("Mul", b.op("Mul", c(0.5), x), phi)


def _logical_not(b: GraphBuilder, node: Node) -> str:
    x = _x(node)
    return b.op("Not", b.operand(x, "bool"))


def _bitwise_not(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    x = b.operand(node.inputs[0], dtype)
    if dtype == "bool":
        return b.op("Not", x)
    if b.opset >= 18:
        return b.op("BitwiseNot", x)
    return b.op("Sub", b.op("Neg", x), b.const(1, dtype))  # ~x == -x - 1 in two's complement


# ---- elementwise binary -----------------------------------------------------------------------------------

def _compute(node: Node) -> str:
    """The dtype both operands of a binary node are cast to."""
    x, y = node.inputs
    assert x is not None and y is not None
    if PRIMITIVES[node.target].dtypes == "compare":
        return result_type([x.aval.dtype, y.aval.dtype])
    return binary_dtype(node.target, x.aval, y.aval)


def _operands(b: GraphBuilder, node: Node, dtype: str) -> tuple[str, str]:
    return b.operand(node.inputs[0], dtype), b.operand(node.inputs[1], dtype)


def _binary(op_type: str, bool_op: str | None = None) -> Lowering:
    """``op_type`` on the promoted operands; ``bool_op`` when they are bool (``add`` of masks is ``Or``)."""
    def lower(b: GraphBuilder, node: Node) -> str:
        dtype = _compute(node)
        x, y = _operands(b, node, dtype)
        if dtype == "bool":
            if bool_op is None:
                raise _refuse(node, "bool operands")
            return b.op(bool_op, x, y)
        return b.op(op_type, x, y)
    return lower


def _compare(op_type: str, negate: bool = False) -> Lowering:
    def lower(b: GraphBuilder, node: Node) -> str:
        dtype = _compute(node)
        if dtype == "bool" and op_type != "Equal":  # ONNX orders numbers only
            dtype = "int32"
        out = b.op(op_type, *_operands(b, node, dtype))
        return b.op("Not", out) if negate else out
    return lower


def _logical(op_type: str) -> Lowering:
    def lower(b: GraphBuilder, node: Node) -> str:
        return b.op(op_type, *_operands(b, node, "bool"))
    return lower


def _bitwise(op_type: str, bool_op: str) -> Lowering:
    def lower(b: GraphBuilder, node: Node) -> str:
        dtype = _compute(node)
        x, y = _operands(b, node, dtype)
        if dtype == "bool":
            return b.op(bool_op, x, y)
        if b.opset < 18:
            raise _refuse(node, f"ONNX has {op_type} from opset 18 on; this export targets opset {b.opset} "
                                "(pass opset=18 or newer)")
        return b.op(op_type, x, y)
    return lower


def _atan2(b: GraphBuilder, node: Node) -> str:
    dtype = _compute(node)
    y, x = _operands(b, node, dtype)

    def c(v: float) -> str:
        return b.const(v, dtype)
    zero = c(0.0)
    base = b.op("Atan", b.op("Div", y, x))
    left = b.op("Where", b.op("GreaterOrEqual", y, zero), b.op("Add", base, c(math.pi)),
                b.op("Sub", base, c(math.pi)))
    axis = b.op("Where", b.op("Greater", y, zero), c(math.pi / 2),
                b.op("Where", b.op("Less", y, zero), c(-math.pi / 2), zero))
    out = b.op("Where", b.op("Greater", x, zero), base, b.op("Where", b.op("Less", x, zero), left, axis))
    either = b.op("Add", x, y)
    return b.op("Where", b.op("IsNaN", either), either, out)


def _where(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    return b.op("Where", b.operand(node.inputs[0], "bool"), b.operand(node.inputs[1], dtype),
                b.operand(node.inputs[2], dtype))


# ---- reductions, scans ------------------------------------------------------------------------------------

def _reduce(op_type: str) -> Lowering:
    def lower(b: GraphBuilder, node: Node) -> str:
        dtype = _out(node)
        axes = tuple(_norm_axis(a, _x(node).ndim) for a in node.params["axes"])
        keepdims = int(bool(node.params["keepdims"]))
        compute = "int32" if dtype == "bool" else dtype
        x = b.operand(node.inputs[0], compute)
        if not axes:
            return b.op("Identity", b.cast(x, compute, dtype))
        if op_type == "ReduceSum" or b.opset >= 18:
            out = b.op(op_type, x, b.ints(axes), keepdims=keepdims)
        else:
            out = b.op(op_type, x, axes=list(axes), keepdims=keepdims)
        if op_type in ("ReduceMax", "ReduceMin") and is_float(compute):
            # ONNX Runtime's ReduceMax/ReduceMin skip NaN; tensorplay (as numpy and PyTorch) gives NaN: the sum
            # of the NaNs (every other value read as 0) is NaN exactly where a reduced slice holds one
            nan = b.op("IsNaN", x)
            nans = b.op("ReduceSum", b.op("Where", nan, x, b.const(0.0, compute)), b.ints(axes), keepdims=keepdims)
            out = b.op("Where", b.op("IsNaN", nans), nans, out)
        return b.cast(out, compute, dtype)
    return lower


def _arg(op_type: str) -> Lowering:
    """``ArgMax``/``ArgMin`` (the first extremum); for floats the first NaN counts as the extremum, which ONNX
    leaves open, so a row holding a NaN takes the position of its first NaN."""
    def lower(b: GraphBuilder, node: Node) -> str:
        x = _x(node)
        src = "int32" if x.aval.dtype == "bool" else x.aval.dtype
        attrs: dict[str, Any] = {"axis": _norm_axis(node.params["axis"], x.ndim),
                                 "keepdims": int(bool(node.params["keepdims"]))}
        values = b.operand(x, src)
        out = b.op(op_type, values, select_last_index=0, **attrs)
        if is_float(src):
            nan = b.cast(b.op("IsNaN", values), "bool", "int32")
            first_nan = b.op("ArgMax", nan, select_last_index=0, **attrs)
            any_nan = b.op("Greater", b.op("ReduceMax", nan, axes=[attrs["axis"]], keepdims=attrs["keepdims"])
                           if b.opset < 18 else b.op("ReduceMax", nan, b.ints([attrs["axis"]]),
                                                     keepdims=attrs["keepdims"]), b.const(0, "int32"))
            out = b.op("Where", any_nan, first_nan, out)
        return b.cast(out, "int64", _out(node))
    return lower


def _cumsum(b: GraphBuilder, node: Node) -> str:
    x = _x(node)
    return b.op("CumSum", b.operand(x, _out(node)), b.const(_norm_axis(node.params["axis"], x.ndim), "int64"))


def _argsort(b: GraphBuilder, node: Node) -> str:
    """A stable sort as two stable ``TopK`` passes (ONNX keeps equal values in index order): by value (NaN
    read as 0), then by "is NaN", so NaNs go last ascending and first descending."""
    x = _x(node)
    axis = _norm_axis(node.params["axis"], x.ndim)
    largest = int(bool(node.params["descending"]))
    src = x.aval.dtype
    compute = src if src in ("float32", "float64", "int64") else ("int64" if src == "int32" else "int32")
    values = b.operand(x, compute)
    k = b.dim(x.shape[axis])
    if not is_float(compute):
        return b.pin(b.op_n("TopK", [values, k], 2, axis=axis, largest=largest, sorted=1)[1], node.aval.shape)
    nan = b.op("IsNaN", values)
    clean = b.op("Where", nan, b.const(0, compute), values)
    first = b.op_n("TopK", [clean, k], 2, axis=axis, largest=largest, sorted=1)[1]
    flags = b.op("GatherElements", b.cast(nan, "bool", "int32"), first, axis=axis)
    second = b.op_n("TopK", [flags, k], 2, axis=axis, largest=largest, sorted=1)[1]
    return b.pin(b.op("GatherElements", first, second, axis=axis), node.aval.shape)


# ---- views and structure ----------------------------------------------------------------------------------

def _reshape(b: GraphBuilder, node: Node) -> str:
    return b.op("Reshape", b.operand(node.inputs[0], _out(node)), b.shape(node.params["shape"]), allowzero=1)


def _permute(b: GraphBuilder, node: Node) -> str:
    return b.op("Transpose", b.operand(node.inputs[0], _out(node)), perm=list(node.params["perm"]))


def _broadcast_to(b: GraphBuilder, node: Node) -> str:
    return b.op("Expand", b.operand(node.inputs[0], _out(node)), b.shape(node.params["shape"]))


def _slice_bound(bound: Any, size: Any, step: int, stop: bool) -> Any:
    """A slice bound as ONNX reads it: ``size + c`` (``c <= 0``) counts from the end, so it is the constant
    ``c``, and ``size`` itself is the axis's end (ONNX reads 0 as the first index: a start at the end, as in
    ``x[x.shape[0]:]``, is an empty slice); ``-1`` as a backward stop runs through index 0."""
    if stop and step < 0 and isinstance(bound, int) and bound == -1:
        return INT64_MIN
    if isinstance(bound, SymDim) or isinstance(size, SymDim):
        offset = bound - size
        if isinstance(offset, int) and offset <= 0:
            return INT64_MAX if offset == 0 else offset
    return bound


def _slice(b: GraphBuilder, node: Node) -> str:
    """One ``Slice`` for the axes with constant bounds (shape inference reads those), another for the axes
    whose bounds are computed from the inputs' sizes."""
    x = _x(node)
    out = b.operand(x, _out(node))
    groups: dict[bool, list[tuple[int, Any, Any, int]]] = {False: [], True: []}
    for axis, (start, stop, step, size) in enumerate(zip(node.params["starts"], node.params["stops"],
                                                         node.params["steps"], x.shape)):
        if step == 1 and isinstance(start, int) and start == 0 and (stop is size or stop == size):
            continue  # the whole axis
        lo, hi = _slice_bound(start, size, step, False), _slice_bound(stop, size, step, True)
        groups[isinstance(lo, SymDim) or isinstance(hi, SymDim)].append((axis, lo, hi, step))
    if not groups[False] and not groups[True]:
        return b.op("Identity", out)
    for entries in (groups[False], groups[True]):
        if entries:
            axes, starts, stops, steps = zip(*entries)
            out = b.op("Slice", out, b.shape(starts), b.shape(stops), b.ints(axes), b.ints(steps))
    clamped = [a for a, *_ in groups[False] if isinstance(x.shape[a], SymDim) and not (
        isinstance(node.aval.shape[a], SymDim) and not node.aval.shape[a].is_symbol)]
    return b.pin(out, node.aval.shape, always=True) if clamped else out  # inference cannot know the clamp


def _pad(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    pairs = node.params["pads"]
    pads = [p[0] for p in pairs] + [p[1] for p in pairs]
    x = b.operand(node.inputs[0], dtype)
    if not any(pads):
        return b.op("Identity", x)
    return b.op("Pad", x, b.shape(pads), b.const(node.params["value"], dtype), mode="constant")


def _concat(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    axis = _norm_axis(node.params["axis"], len(node.aval.shape))
    return b.op("Concat", *(b.operand(v, dtype) for v in node.inputs), axis=axis)


def _indices(b: GraphBuilder, v: Var | Literal | None, size: Any) -> str:
    """int64 indices with negative ones wrapped by ``size``."""
    idx = b.operand(v, "int64")
    zero = b.const(0, "int64")
    return b.op("Where", b.op("Less", idx, zero), b.op("Add", idx, b.op("Squeeze", b.dim(size), b.ints([0]))), idx)


def _gather(b: GraphBuilder, node: Node) -> str:
    x = _x(node)
    axis = _norm_axis(node.params["axis"], x.ndim)
    return b.op("Gather", b.operand(x, _out(node)), b.operand(node.inputs[1], "int64"), axis=axis)


def _scatter_add(b: GraphBuilder, node: Node) -> str:
    """``base[..., idx[i], ...] += updates[..., i, ...]`` as ``ScatterND`` with the axis moved to the front."""
    dtype = _out(node)
    base, idx, upd = _x(node, 0), node.inputs[1], _x(node, 2)
    axis = _norm_axis(node.params["axis"], base.ndim)
    n_idx = len(idx.aval.shape) if idx is not None else 0
    lead = list(range(axis))
    front = [axis, *lead, *range(axis + 1, base.ndim)]
    data = b.op("Transpose", b.operand(base, dtype), perm=front)
    upd_perm = [*range(axis, axis + n_idx), *lead, *range(axis + n_idx, upd.ndim)]
    updates = b.op("Transpose", b.operand(upd, dtype), perm=upd_perm)
    indices = b.op("Unsqueeze", _indices(b, idx, base.shape[axis]), b.ints([n_idx]))
    out = b.op("ScatterND", data, indices, updates, reduction="add")
    back = [0] * base.ndim
    for i, p in enumerate(front):
        back[p] = i
    return b.op("Transpose", out, perm=back)


def _cast(b: GraphBuilder, node: Node) -> str:
    x = _x(node)
    return b.op("Identity", b.cast(b.value(x), x.aval.dtype, _out(node)))


def _identity(b: GraphBuilder, node: Node) -> str:
    return b.op("Identity", b.operand(node.inputs[0], _out(node)))


def _full(b: GraphBuilder, node: Node) -> str:
    from onnx import numpy_helper
    dtype = _out(node)
    value = numpy_helper.from_array(np.asarray([node.params["value"]], dtype=np.dtype(dtype)), "value")
    return b.op("ConstantOfShape", b.shape(node.params["shape"]), value=value)


def _iota(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    compute = "int64" if dtype == "bool" else dtype
    length = b.cast(b.op("Squeeze", b.dim(node.params["length"]), b.ints([0])), "int64", compute)
    out = b.op("Range", b.const(0, compute), length, b.const(1, compute))
    return b.cast(out, compute, dtype)


# ---- linear algebra, convolution, pooling, normalisation ---------------------------------------------------

def _matmul(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    return b.op("MatMul", b.operand(node.inputs[0], dtype), b.operand(node.inputs[1], dtype))


def _spatial_pads(padding: tuple[int, ...]) -> list[int]:
    return list(padding) * 2


def _spatial_pin(b: GraphBuilder, node: Node, out: str) -> str:
    """``out`` pinned to the node's shape when ONNX's inference cannot give it: a weight of symbolic shape
    (the output's rank is then unknown) or a spatial size that is a dim itself (inference computes it)."""
    w = node.inputs[1] if len(node.inputs) > 1 else None
    symbolic_weight = isinstance(w, Var) and any(isinstance(d, SymDim) for d in w.shape)
    spatial_dim = any(isinstance(d, SymDim) and d.is_symbol for d in node.aval.shape[2:])
    return b.pin(out, node.aval.shape) if symbolic_weight or spatial_dim else out


def _conv(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    p = node.params
    return _spatial_pin(b, node, b.op("Conv", b.operand(node.inputs[0], dtype), b.operand(node.inputs[1], dtype),
                strides=list(p["stride"]), pads=_spatial_pads(p["padding"]), dilations=list(p["dilation"]),
                group=int(p["groups"])))


def _conv_transpose(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    p = node.params
    return _spatial_pin(b, node, b.op("ConvTranspose", b.operand(node.inputs[0], dtype),
                                      b.operand(node.inputs[1], dtype), strides=list(p["stride"]),
                                      pads=_spatial_pads(p["padding"]), dilations=list(p["dilation"]),
                                      output_padding=list(p["output_padding"]), group=int(p["groups"])))


def _pool(op_type: str, **extra: Any) -> Lowering:
    def lower(b: GraphBuilder, node: Node) -> str:
        p = node.params
        return _spatial_pin(b, node, b.op(op_type, b.operand(node.inputs[0], _out(node)),
                                          kernel_shape=list(p["kernel_size"]), strides=list(p["stride"]),
                                          pads=_spatial_pads(p["padding"]), **extra))
    return lower


def _layer_norm(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    x, gamma, beta = (b.operand(v, dtype) for v in node.inputs)
    return b.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=float(node.params["eps"]))


def _batch_norm(b: GraphBuilder, node: Node) -> str:
    dtype = _out(node)
    x, mean, var, weight, bias = (b.operand(v, dtype) for v in node.inputs)
    return b.op("BatchNormalization", x, weight, bias, mean, var, epsilon=float(node.params["eps"]))


def _softmax(op_type: str) -> Lowering:
    def lower(b: GraphBuilder, node: Node) -> str:
        return b.op(op_type, b.operand(node.inputs[0], _out(node)), axis=int(node.params["axis"]))
    return lower


LOWERINGS: dict[str, Lowering] = {
    "neg": _unary("Neg"), "abs": _unary("Abs"), "sign": _sign, "exp": _unary("Exp"), "log": _unary("Log"),
    "log1p": _log1p, "expm1": _expm1, "sqrt": _unary("Sqrt"), "rsqrt": _rsqrt, "sin": _unary("Sin"),
    "cos": _unary("Cos"), "tan": _unary("Tan"), "tanh": _unary("Tanh"), "sigmoid": _unary("Sigmoid"),
    "relu": _relu, "gelu": _gelu, "erf": _unary("Erf"), "floor": _float_or_identity("Floor"),
    "ceil": _float_or_identity("Ceil"), "round": _float_or_identity("Round"), "logical_not": _logical_not,
    "bitwise_not": _bitwise_not,
    "add": _binary("Add", "Or"), "sub": _binary("Sub"), "mul": _binary("Mul", "And"), "div": _binary("Div"),
    "pow": _binary("Pow"), "maximum": _binary("Max", "Or"), "minimum": _binary("Min", "And"), "atan2": _atan2,
    "eq": _compare("Equal"), "ne": _compare("Equal", negate=True), "lt": _compare("Less"),
    "le": _compare("LessOrEqual"), "gt": _compare("Greater"), "ge": _compare("GreaterOrEqual"),
    "logical_and": _logical("And"), "logical_or": _logical("Or"),
    "bitwise_and": _bitwise("BitwiseAnd", "And"), "bitwise_or": _bitwise("BitwiseOr", "Or"),
    "bitwise_xor": _bitwise("BitwiseXor", "Xor"), "where": _where,
    "reduce_sum": _reduce("ReduceSum"), "reduce_max": _reduce("ReduceMax"), "reduce_min": _reduce("ReduceMin"),
    "reduce_prod": _reduce("ReduceProd"),
    "argmax": _arg("ArgMax"), "argmin": _arg("ArgMin"), "cumsum": _cumsum, "argsort": _argsort,
    "reshape": _reshape, "permute": _permute, "broadcast_to": _broadcast_to, "slice": _slice, "pad": _pad,
    "concat": _concat, "gather": _gather, "scatter_add": _scatter_add, "cast": _cast, "stop_gradient": _identity,
    "full": _full, "iota": _iota, "matmul": _matmul, "conv_nd": _conv, "conv_transpose_nd": _conv_transpose,
    "max_pool_nd": _pool("MaxPool"), "avg_pool_nd": _pool("AveragePool", count_include_pad=1),
    "layer_norm_last_axis": _layer_norm, "batch_norm": _batch_norm, "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"),
    # a recorded range check of indices: ONNX has no assertion operator, and ONNX Runtime's Gather refuses
    # out-of-range indices itself
    "check_index": _identity,
}
"""Primitive name -> lowering (see the module docstring)."""

COMPOSED = ("dot_product_attention", "smooth_max_pool_nd")
"""Primitives rewritten into other primitives before lowering (:mod:`.compositions`)."""

NOT_LOWERED: dict[str, str] = {
    **{name: "it draws random numbers, which an ONNX model cannot reproduce (dropout in training mode draws: "
             "call model.eval() before exporting)" for name in PRIMITIVES if PRIMITIVES[name].random},
    **{name: "it is a gradient primitive (export the model for inference, without gradients)"
       for name in PRIMITIVES if name.endswith(("_backward_nd", "_select_nd", "_grad_nd"))},
}
"""Primitive name -> why it is refused (every primitive is lowered, composed or refused)."""


def lower_node(b: GraphBuilder, node: Node) -> str:
    """Emit ``node``'s lowering; an :class:`ONNXExportError` naming the primitive and the user's line when
    it has none."""
    lowering = LOWERINGS.get(node.target)
    if lowering is None:
        raise _refuse(node, NOT_LOWERED.get(node.target, "it has no ONNX lowering"))
    return lowering(b, node)


__all__ = ["COMPOSED", "LOWERINGS", "NOT_LOWERED", "Lowering", "lower_node"]
