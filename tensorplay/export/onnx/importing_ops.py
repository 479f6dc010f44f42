"""The import table: ONNX operator -> tensorplay operations, and the context that interprets a graph.

A value is a tensor (a :class:`~tensorplay.Tensor` of whatever interpreter runs the forward) or a *static*
value: a numpy array known while tracing (an integer initializer, a ``Constant``, a ``Shape`` and
arithmetic on it), whose entries may be symbolic sizes (an object array of ints and
:class:`~tensorplay.symbolic.SymDim`). An operator whose inputs are all static is computed in numpy when
it has a static form (:data:`STATIC`); a static value read as a tensor becomes a constant (a 0-d one a
Python scalar, which takes the other operand's dtype, as ONNX's same-type operands do).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay.export.onnx.builder import DTYPE_NAMES
from tensorplay.export.onnx.errors import ONNXImportError
from tensorplay.symbolic import SymDim

Importer = Callable[["Context", Any, list[Any], dict[str, Any]], list[Any]]

_BIG = 2**62  # ONNX slice bounds at or beyond this mean "the end"


def node_label(node: Any) -> str:
    """``node 'name' (Op)`` for messages."""
    return f"node {node.name or '<unnamed>'!r} ({node.op_type})"


def _is_static(v: Any) -> bool:
    return isinstance(v, np.ndarray)


def _has_sym(a: np.ndarray[Any, Any]) -> bool:
    return a.dtype == object and any(isinstance(e, SymDim) for e in a.flat)


class Context:
    """Interprets one ONNX graph with tensorplay operations (see the module docstring)."""

    def __init__(self, module: Any, init: dict[str, np.ndarray[Any, Any]], params: dict[str, str]) -> None:
        self.module = module
        self.init = init
        self.params = params
        self.node: Any = None
        self.ops: Any = None

    # ---- values -------------------------------------------------------------------------------------------
    def fail(self, why: str) -> ONNXImportError:
        """An import error naming the current node."""
        return ONNXImportError(f"from_onnx: {node_label(self.node)}: {why}")

    def tensor(self, v: Any) -> Any:
        """``v`` as a tensor (a static value becomes a constant)."""
        import tensorplay as tp
        if not _is_static(v):
            return v
        if _has_sym(v):
            flat = [self.ops.add(self.ops.full(shape=(), value=0, dtype="int64"), e) for e in v.flat]
            if v.ndim == 0:
                return flat[0]
            pieces = [self.ops.reshape(t, shape=(1,)) for t in flat]
            joined = pieces[0] if len(pieces) == 1 else self.ops.concat(*pieces, axis=0)
            return self.ops.reshape(joined, shape=v.shape)
        return tp.tensor(np.ascontiguousarray(v.astype(v.dtype if v.dtype != object else np.int64)))

    def operand(self, v: Any) -> Any:
        """An elementwise operand: a tensor, or a Python scalar for a 0-d static value."""
        if _is_static(v) and v.ndim == 0:
            return v.item() if v.dtype != object else v.flat[0]  # a Python number or a symbolic size
        return self.tensor(v)

    def ints(self, v: Any, what: str) -> tuple[Any, ...]:
        """A static value as a tuple of sizes (ints and symbolic sizes)."""
        if v is None:
            return ()
        if not _is_static(v):
            raise self.fail(f"{what} must be a constant (or computed from shapes), got a tensor computed from data")
        return tuple(e if isinstance(e, SymDim) else int(e) for e in np.asarray(v).reshape(-1))

    def scalar(self, v: Any, what: str) -> Any:
        """A static value as one Python number."""
        if _is_static(v):
            return v.reshape(-1)[0].item() if v.dtype != object else v.reshape(-1)[0]
        raise self.fail(f"{what} must be a constant")

    # ---- running ------------------------------------------------------------------------------------------
    def read(self, env: dict[str, Any], name: str) -> Any:
        if name == "":
            return None
        if name in env:
            return env[name]
        if name in self.params:
            target = self.module
            for part in self.params[name].split("."):
                target = getattr(target, part)
            return target
        if name in self.init:
            return np.asarray(self.init[name])
        raise ONNXImportError(f"from_onnx: {node_label(self.node)} reads {name!r}, which no node, input or "
                              "initializer defines before it")

    def run(self, graph: Any, env: dict[str, Any]) -> Any:
        """The graph's outputs (one value, or a tuple) for the inputs ``env`` (name -> tensor)."""
        import tensorplay as tp
        from onnx import helper
        self.ops = tp.ops_of(list(env.values()))
        env = dict(env)
        for node in graph.node:
            self.node = node
            ins = [self.read(env, n) for n in node.input]
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            static = STATIC.get(node.op_type)
            if static is not None and (node.op_type in ("Shape", "Size", "Constant") or
                                       all(v is None or _is_static(v) for v in ins)):
                outs = static(self, node, ins, attrs)
            else:
                outs = IMPORTERS[node.op_type](self, node, ins, attrs)
            for name, value in zip(node.output, outs):
                if name:
                    env[name] = value
            for name in node.output[len(outs):]:
                if name and (any(name in n.input for n in graph.node) or name in [o.name for o in graph.output]):
                    raise self.fail(f"output {name!r} is not supported (only the first output is imported)")
        results = [self.tensor(env[o.name]) if o.name in env else self.tensor(self.read(env, o.name))
                   for o in graph.output]
        return results[0] if len(results) == 1 else tuple(results)


# ---- helpers -------------------------------------------------------------------------------------------------

def _dtype(ctx: Context, code: int) -> str:
    name = DTYPE_NAMES.get(int(code))
    if name is None:
        raise ctx.fail(f"element type {code} is not supported (supported: {', '.join(DTYPE_NAMES.values())})")
    return name


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _name(t: Any) -> str:
    """A tensor's dtype name."""
    return str(t.dtype.name)


def _reshape(ctx: Context, x: Any, shape: Sequence[Any]) -> Any:
    return ctx.ops.reshape(x, shape=tuple(shape))


def _product(values: Sequence[Any]) -> Any:
    out: Any = 1
    for v in values:
        out = out * v
    return out


# ---- elementwise ---------------------------------------------------------------------------------------------

def _unary(prim: str) -> Importer:
    def imp(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        return [getattr(ctx.ops, prim)(ctx.tensor(ins[0]))]
    return imp


def _binary(prim: str) -> Importer:
    def imp(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        x, y = ctx.operand(ins[0]), ctx.operand(ins[1])
        if not hasattr(x, "shape") and not hasattr(y, "shape"):
            x = ctx.tensor(ins[0])
        return [getattr(ctx.ops, prim)(x, y)]
    return imp


def _truncating_div(ctx: Context, x: Any, y: Any) -> Any:
    """Integers ``x / y`` truncated toward zero, as ONNX's ``Div``, exactly: the floor quotient (exact at every
    size, where a division through floats loses int64 and int32 digits past 2**24), one more where it is
    negative and inexact."""
    from tensorplay.floordiv import floor_divide
    q = floor_divide(x, y)
    inexact = ctx.ops.ne(ctx.ops.sub(x, ctx.ops.mul(q, y)), 0)
    return ctx.ops.add(q, ctx.ops.cast(ctx.ops.logical_and(inexact, ctx.ops.lt(q, 0)), dtype=_name(q)))


def _div(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x, y = ctx.operand(ins[0]), ctx.operand(ins[1])
    if not hasattr(x, "shape") and not hasattr(y, "shape"):
        x = ctx.tensor(ins[0])
    source = next(v for v in (x, y) if hasattr(v, "shape"))
    if _name(source).startswith("int"):
        return [_truncating_div(ctx, x, y)]  # ONNX divides integers truncating toward zero
    return [ctx.ops.div(x, y)]


def _variadic(prim: str) -> Importer:
    def imp(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        out = ctx.tensor(ins[0])
        for v in ins[1:]:
            out = getattr(ctx.ops, prim)(out, ctx.operand(v))
        return [out]
    return imp


def _pow(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    out = ctx.ops.pow(x, ctx.operand(ins[1]))
    return [out if out.dtype == x.dtype else ctx.ops.cast(out, dtype=_name(x))]


def _reciprocal(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    return [ctx.ops.div(1.0, ctx.tensor(ins[0]))]


def _atan(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    return [ctx.ops.atan2(ctx.tensor(ins[0]), 1.0)]


def _isnan(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    return [ctx.ops.ne(x, x)]


def _xor(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    return [ctx.ops.ne(ctx.tensor(ins[0]), ctx.operand(ins[1]))]


def _gelu(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    approximate = at.get("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else str(approximate)
    return [ctx.ops.gelu(ctx.tensor(ins[0]), approximate=approximate)]


def _where(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x, y = ctx.operand(ins[1]), ctx.operand(ins[2])
    if not hasattr(x, "shape") and not hasattr(y, "shape"):
        x = ctx.tensor(ins[1])
    return [ctx.ops.where(ctx.tensor(ins[0]), x, y)]


def _identity(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    return [ins[0]]


def _dropout(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    if len(ins) > 2 and ins[2] is not None and (not _is_static(ins[2]) or bool(ctx.scalar(ins[2], "training_mode"))):
        raise ctx.fail("Dropout in training mode draws random numbers; only inference Dropout is imported")
    return [ins[0]]


# ---- reductions, orderings -----------------------------------------------------------------------------------

def _reduce_axes(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any], rank: int) -> tuple[int, ...] | None:
    axes = ctx.ints(ins[1], "axes") if len(ins) > 1 and ins[1] is not None else tuple(at.get("axes", ()))
    if not axes:
        return None if at.get("noop_with_empty_axes", 0) else tuple(range(rank))
    return tuple(_axis(int(a), rank) for a in axes)


def _reduce(prim: str, mean: bool = False) -> Importer:
    def imp(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        x = ctx.tensor(ins[0])
        axes = _reduce_axes(ctx, node, ins, at, x.ndim)
        if axes is None:
            return [x]
        keep = bool(at.get("keepdims", 1))
        out = getattr(ctx.ops, prim)(x, axes=axes, keepdims=keep)
        if mean:
            count = _product([x.shape[a] for a in axes])
            out = _truncating_div(ctx, out, count) if _name(out).startswith("int") else ctx.ops.div(out, count)
        # an ONNX reduction keeps its input's type (tensorplay sums int32 as int64)
        return [out if out.dtype == x.dtype else ctx.ops.cast(out, dtype=_name(x))]
    return imp


def _arg(prim: str) -> Importer:
    def imp(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        if at.get("select_last_index", 0):
            raise ctx.fail("select_last_index=1 is not supported (tensorplay takes the first extremum)")
        x = ctx.tensor(ins[0])
        return [getattr(ctx.ops, prim)(x, axis=_axis(int(at.get("axis", 0)), x.ndim),
                                       keepdims=bool(at.get("keepdims", 1)))]
    return imp


def _cumsum(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    if at.get("exclusive", 0) or at.get("reverse", 0):
        raise ctx.fail("exclusive or reverse CumSum is not supported")
    x = ctx.tensor(ins[0])
    out = ctx.ops.cumsum(x, axis=_axis(int(ctx.scalar(ins[1], "axis")), x.ndim))
    return [out if out.dtype == x.dtype else ctx.ops.cast(out, dtype=_name(x))]


def _topk(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    from tensorplay.sorting import take_along_axis
    if not at.get("sorted", 1):
        raise ctx.fail("unsorted TopK is not supported")
    x = ctx.tensor(ins[0])
    axis = _axis(int(at.get("axis", -1)), x.ndim)
    k = ctx.scalar(ins[1], "k")
    order = ctx.ops.argsort(x, axis=axis, descending=bool(at.get("largest", 1)))
    if not (k is x.shape[axis] or k == x.shape[axis]):
        stops = tuple(k if i == axis else d for i, d in enumerate(x.shape))
        order = ctx.ops.slice(order, starts=(0,) * x.ndim, stops=stops, steps=(1,) * x.ndim)
    return [take_along_axis(ctx.ops, x, order, axis), order]


def _gather_elements(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    from tensorplay.sorting import take_along_axis
    x = ctx.tensor(ins[0])
    idx = ctx.tensor(ins[1])
    axis = _axis(int(at.get("axis", 0)), x.ndim)
    idx = ctx.ops.cast(idx, dtype="int64")
    wrapped = ctx.ops.where(ctx.ops.lt(idx, 0), ctx.ops.add(idx, x.shape[axis]), idx)
    return [take_along_axis(ctx.ops, x, wrapped, axis)]


# ---- shapes and structure ------------------------------------------------------------------------------------

def _target_shape(ctx: Context, x: Any, shape: tuple[Any, ...], allowzero: bool) -> tuple[Any, ...]:
    out = [x.shape[i] if (not allowzero and isinstance(d, int) and d == 0) else d for i, d in enumerate(shape)]
    if any(isinstance(d, int) and d == -1 for d in out):
        known = _product([d for d in out if not (isinstance(d, int) and d == -1)])
        total = _product(list(x.shape))
        out = [total // known if isinstance(d, int) and d == -1 else d for d in out]
    return tuple(out)


def _reshape_op(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    return [_reshape(ctx, x, _target_shape(ctx, x, ctx.ints(ins[1], "shape"), bool(at.get("allowzero", 0))))]


def _transpose(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    perm = tuple(at.get("perm", range(x.ndim - 1, -1, -1)))
    return [ctx.ops.permute(x, perm=tuple(int(p) for p in perm))]


def _is_int(d: Any, value: int | None = None) -> bool:
    return isinstance(d, int) and (value is None or d == value)


def _broadcast_dim(x: Any, y: Any) -> Any:
    """One output dim of ONNX's bidirectional broadcast of ``x`` (the input's) with ``y`` (Expand's shape).

    A 1 on either side gives the other; otherwise the sides must agree, so a known size that is not 1 (0
    included: a 1 broadcasts to 0) wins over a symbol, which then can only be that size or 1."""
    if _is_int(x, 1):
        return y
    if _is_int(y, 1) or _is_int(x):
        return x
    return y if _is_int(y) else x


def _broadcast(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    rank = max(len(a), len(b))
    a, b = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    return tuple(_broadcast_dim(x, y) for x, y in zip(a, b))


def _expand(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    return [ctx.ops.broadcast_to(x, shape=_broadcast(tuple(x.shape), ctx.ints(ins[1], "shape")))]


def _squeeze(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ins[0]
    shape = tuple(x.shape)
    axes = ctx.ints(ins[1], "axes") if len(ins) > 1 and ins[1] is not None else tuple(
        i for i, d in enumerate(shape) if isinstance(d, int) and d == 1)
    drop = {_axis(int(a), len(shape)) for a in axes}
    new = tuple(d for i, d in enumerate(shape) if i not in drop)
    return [x.reshape(new) if _is_static(x) else _reshape(ctx, x, new)]


def _unsqueeze(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ins[0]
    shape = list(x.shape)
    axes = sorted(_axis(int(a), len(shape) + len(ctx.ints(ins[1], "axes"))) for a in ctx.ints(ins[1], "axes"))
    for a in axes:
        shape.insert(a, 1)
    return [x.reshape(shape) if _is_static(x) else _reshape(ctx, x, shape)]


def _flatten(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    axis = _axis(int(at.get("axis", 1)), x.ndim)
    return [_reshape(ctx, x, (_product(x.shape[:axis]), _product(x.shape[axis:])))]


def _slice_bounds(start: Any, stop: Any, step: int, size: Any) -> tuple[Any, Any]:
    """ONNX bounds (negative from the end, clamped) as tensorplay's normalised ones."""
    if isinstance(size, int) and isinstance(start, int) and isinstance(stop, int):
        lo, hi, _ = slice(start, stop, step).indices(size)
        return lo, (-1 if step < 0 and hi < 0 else hi)

    def norm(v: Any, is_stop: bool) -> Any:
        if isinstance(v, SymDim):
            return v
        if v >= _BIG:
            return size if step > 0 else size - 1
        if v <= -_BIG:
            return -1 if (is_stop and step < 0) else 0
        return size + v if v < 0 else v
    return norm(start, False), norm(stop, True)


def _slice(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ins[0]
    shape = tuple(x.shape)
    starts, stops = ctx.ints(ins[1], "starts"), ctx.ints(ins[2], "ends")
    axes = ctx.ints(ins[3], "axes") if len(ins) > 3 and ins[3] is not None else tuple(range(len(starts)))
    steps = ctx.ints(ins[4], "steps") if len(ins) > 4 and ins[4] is not None else (1,) * len(starts)
    lo, hi, st = [0] * len(shape), list(shape), [1] * len(shape)
    for a, s, e, k in zip(axes, starts, stops, steps):
        a = _axis(int(a), len(shape))
        lo[a], hi[a] = _slice_bounds(s, e, int(k), shape[a])
        st[a] = int(k)
    if _is_static(x):
        index = tuple(slice(a, None if b == -1 and c < 0 else b, c) for a, b, c in zip(lo, hi, st))
        return [x[index]]
    return [ctx.ops.slice(x, starts=tuple(lo), stops=tuple(hi), steps=tuple(st))]


def _pad(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    mode = at.get("mode", b"constant")
    if (mode.decode() if isinstance(mode, bytes) else mode) != "constant":
        raise ctx.fail(f"Pad mode {mode!r} is not supported (only constant)")
    x = ctx.tensor(ins[0])
    pads = ctx.ints(ins[1], "pads")
    value = ctx.scalar(ins[2], "constant_value") if len(ins) > 2 and ins[2] is not None else 0.0
    axes = ctx.ints(ins[3], "axes") if len(ins) > 3 and ins[3] is not None else tuple(range(x.ndim))
    pairs = [(0, 0)] * x.ndim
    n = len(axes)
    for i, a in enumerate(axes):
        pairs[_axis(int(a), x.ndim)] = (int(pads[i]), int(pads[i + n]))
    if any(p < 0 for pair in pairs for p in pair):
        raise ctx.fail("negative pads (cropping) are not supported")
    return [ctx.ops.pad(x, pads=tuple(pairs), value=value)]


def _concat(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    xs = [ctx.tensor(v) for v in ins if v is not None]
    return [ctx.ops.concat(*xs, axis=int(at["axis"]))]


def _gather(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    return [ctx.ops.gather(x, ctx.tensor(ins[1]), axis=_axis(int(at.get("axis", 0)), x.ndim))]


def _scatter_nd(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    reduction = at.get("reduction", b"none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    data, idx, upd = (ctx.tensor(v) for v in ins)
    if reduction != "add" or not (isinstance(idx.shape[-1], int) and idx.shape[-1] == 1):
        raise ctx.fail("only ScatterND with reduction='add' and one index per update (indices[..., 1]) is "
                       "supported (tensorplay's scatter_add along axis 0)")
    return [ctx.ops.scatter_add(data, _reshape(ctx, idx, tuple(idx.shape[:-1])), upd, axis=0)]


def _cast(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    return [ctx.ops.cast(ctx.tensor(ins[0]), dtype=_dtype(ctx, at["to"]))]


def _constant_of_shape(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    from onnx import numpy_helper
    value = numpy_helper.to_array(at["value"]) if "value" in at else np.zeros(1, np.float32)
    dtype = _dtype(ctx, {v: k for k, v in DTYPE_NAMES.items()}.get(value.dtype.name, -1))
    return [ctx.ops.full(shape=ctx.ints(ins[0], "shape"), value=value.reshape(-1)[0].item(), dtype=dtype)]


def _range(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    start, limit, delta = (ctx.scalar(v, n) for v, n in zip(ins, ("start", "limit", "delta")))
    dtype = str(np.asarray(ins[0]).dtype)
    if not (isinstance(start, (int, float)) and start == 0 and delta == 1):
        raise ctx.fail("Range with a computed limit is supported from start 0 with delta 1 only")
    return [ctx.ops.iota(length=limit if isinstance(limit, SymDim) else int(limit), dtype=dtype)]


# ---- layers ----------------------------------------------------------------------------------------------------

def _matmul(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = _reshape(ctx, a, (1, a.shape[0]))
    if squeeze_b:
        b = _reshape(ctx, b, (b.shape[0], 1))
    out = ctx.ops.matmul(a, b)
    if squeeze_a or squeeze_b:
        shape = tuple(out.shape)
        shape = shape[:-2] + ((shape[-2],) if not squeeze_a else ()) + ((shape[-1],) if not squeeze_b else ())
        out = _reshape(ctx, out, shape)
    return [out]


def _gemm(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    a, b = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    if at.get("transA", 0):
        a = ctx.ops.permute(a, perm=(1, 0))
    if at.get("transB", 0):
        b = ctx.ops.permute(b, perm=(1, 0))
    out = ctx.ops.matmul(a, b)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    if alpha != 1.0:
        out = ctx.ops.mul(out, alpha)
    if len(ins) > 2 and ins[2] is not None:
        c = ctx.tensor(ins[2])
        out = ctx.ops.add(out, c if beta == 1.0 else ctx.ops.mul(c, beta))
    return [out]


def _auto_pad(at: dict[str, Any]) -> str:
    auto = at.get("auto_pad", b"NOTSET")
    return auto.decode() if isinstance(auto, bytes) else str(auto)


def _symmetric(ctx: Context, at: dict[str, Any], rank: int) -> tuple[int, ...]:
    """The padding of a ConvTranspose: explicit and the same at both ends of each axis."""
    auto = _auto_pad(at)
    if auto not in ("NOTSET", "VALID"):
        raise ctx.fail(f"ConvTranspose with auto_pad {auto!r} is not supported (give explicit pads)")
    pads = [0] * (2 * rank) if auto == "VALID" else list(at.get("pads", [0] * (2 * rank)))
    if pads[:rank] != pads[rank:]:
        raise ctx.fail(f"ConvTranspose with asymmetric pads {pads} is not supported")
    return tuple(int(p) for p in pads[:rank])


def _static_sizes(ctx: Context, x: Any, why: str) -> list[int]:
    sizes = list(x.shape[2:])
    if not all(isinstance(d, int) for d in sizes):
        raise ctx.fail(f"{why} needs the spatial sizes, which are dynamic here ({list(x.shape)}): give the "
                       "model static spatial sizes or explicit pads")
    return [int(d) for d in sizes]


def _window_pads(ctx: Context, x: Any, at: dict[str, Any], kernel: Sequence[Any], strides: Sequence[int],
                 dilations: Sequence[int], ceil_mode: bool) -> list[tuple[int, int]]:
    """Per spatial axis the ``(begin, end)`` padding of a sliding window (Conv, MaxPool, AveragePool): from
    ``pads``, or computed for ``auto_pad`` SAME_UPPER / SAME_LOWER (output size ``ceil(in / stride)``, the odd
    element at the end / the beginning), with ``ceil_mode``'s extra end padding (a last, partial window that
    starts inside the input or its begin padding, as ONNX Runtime and PyTorch)."""
    rank = len(kernel)
    auto = _auto_pad(at)

    def spans(why: str) -> list[int]:  # the dilated kernel sizes (a Conv's weight may have dynamic axes)
        if not all(isinstance(k, int) for k in kernel):
            raise ctx.fail(f"{why} needs the kernel's sizes, which are dynamic here ({list(kernel)})")
        return [(int(k) - 1) * int(d) + 1 for k, d in zip(kernel, dilations)]

    if auto in ("SAME_UPPER", "SAME_LOWER"):
        sizes = _static_sizes(ctx, x, f"auto_pad {auto}")
        pairs = []
        for n, s, w in zip(sizes, strides, spans(f"auto_pad {auto}")):
            total = max(0, (-(-n // s) - 1) * s + w - n)
            small = total // 2
            pairs.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
    elif auto in ("NOTSET", "VALID"):
        pads = [0] * (2 * rank) if auto == "VALID" else [int(p) for p in at.get("pads", [0] * (2 * rank))]
        if len(pads) != 2 * rank or any(p < 0 for p in pads):
            raise ctx.fail(f"pads must be {2 * rank} non-negative ints (begins, then ends), got {pads}")
        pairs = list(zip(pads[:rank], pads[rank:]))
    else:
        raise ctx.fail(f"unknown auto_pad {auto!r} (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)")
    if ceil_mode:
        sizes = _static_sizes(ctx, x, "ceil_mode")
        for i, (n, s, w) in enumerate(zip(sizes, strides, spans("ceil_mode"))):
            begin, end = pairs[i]
            covered = n + begin + end
            if covered < w:
                continue  # no window fits: the pooling reports the empty output
            out = -(-(covered - w) // s) + 1
            if (out - 1) * s >= n + begin:
                out -= 1  # the last window would start in the end padding
            pairs[i] = (begin, end + max(0, (out - 1) * s + w - covered))
    return pairs


def _padded(ctx: Context, x: Any, pairs: list[tuple[int, int]], fill: float) -> tuple[Any, tuple[int, ...]]:
    """``x`` and the symmetric padding to give the window operation: unchanged when every axis is padded
    alike at both ends, else ``x`` padded explicitly with ``fill`` and no padding left."""
    if all(b == e for b, e in pairs):
        return x, tuple(b for b, _ in pairs)
    return ctx.ops.pad(x, pads=((0, 0), (0, 0), *pairs), value=fill), (0,) * len(pairs)


def _bias(ctx: Context, out: Any, ins: list[Any]) -> Any:
    if len(ins) > 2 and ins[2] is not None:
        bias = ctx.tensor(ins[2])
        out = ctx.ops.add(out, _reshape(ctx, bias, (bias.shape[0],) + (1,) * (out.ndim - 2)))
    return out


def _conv(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x, w = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    rank = x.ndim - 2
    strides, dilations = tuple(at.get("strides", (1,) * rank)), tuple(at.get("dilations", (1,) * rank))
    pairs = _window_pads(ctx, x, at, list(w.shape[2:]), strides, dilations, ceil_mode=False)
    x, padding = _padded(ctx, x, pairs, 0.0)
    out = ctx.ops.conv_nd(x, w, stride=strides, padding=padding, dilation=dilations, groups=int(at.get("group", 1)))
    return [_bias(ctx, out, ins)]


def _conv_transpose(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    if "output_shape" in at:
        raise ctx.fail("ConvTranspose with output_shape is not supported (give pads and output_padding)")
    x, w = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    rank = x.ndim - 2
    out = ctx.ops.conv_transpose_nd(x, w, stride=tuple(at.get("strides", (1,) * rank)),
                                    padding=_symmetric(ctx, at, rank),
                                    output_padding=tuple(at.get("output_padding", (0,) * rank)),
                                    dilation=tuple(at.get("dilations", (1,) * rank)), groups=int(at.get("group", 1)))
    return [_bias(ctx, out, ins)]


def _pool(prim: str) -> Importer:
    def imp(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        x = ctx.tensor(ins[0])
        rank = x.ndim - 2
        if any(d != 1 for d in at.get("dilations", ())):
            raise ctx.fail(f"dilated pooling (dilations {list(at['dilations'])}) is not supported")
        kernel = tuple(int(k) for k in at["kernel_shape"])
        strides = tuple(int(s) for s in at.get("strides", (1,) * rank))
        ceil_mode = bool(at.get("ceil_mode", 0))
        pairs = _window_pads(ctx, x, at, kernel, strides, (1,) * rank, ceil_mode)
        if prim == "avg_pool_nd":
            plain = _window_pads(ctx, x, at, kernel, strides, (1,) * rank, False) if ceil_mode else pairs
            if pairs != plain:
                raise ctx.fail("AveragePool with ceil_mode=1 whose last window passes the padded input is not "
                               "supported (its divisor leaves that part out)")
            if any(b or e for b, e in pairs) and not at.get("count_include_pad", 0):
                raise ctx.fail("AveragePool with padding must count the padding (count_include_pad=1)")
        fill = 0.0 if prim == "avg_pool_nd" else -math.inf
        x, padding = _padded(ctx, x, pairs, fill)
        return [getattr(ctx.ops, prim)(x, kernel_size=kernel, stride=strides, padding=padding)]
    return imp


def _global_average_pool(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ctx.tensor(ins[0])
    axes = tuple(range(2, x.ndim))
    return [ctx.ops.div(ctx.ops.reduce_sum(x, axes=axes, keepdims=True), _product([x.shape[a] for a in axes]))]


def _layer_norm(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x, gamma = ctx.tensor(ins[0]), ctx.tensor(ins[1])
    if _axis(int(at.get("axis", -1)), x.ndim) != x.ndim - 1:
        raise ctx.fail("LayerNormalization over more than the last axis is not supported")
    beta = ctx.tensor(ins[2]) if len(ins) > 2 and ins[2] is not None else ctx.ops.mul(gamma, 0.0)
    return [ctx.ops.layer_norm_last_axis(x, gamma, beta, eps=float(at.get("epsilon", 1e-5)))]


def _batch_norm(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    if at.get("training_mode", 0):
        raise ctx.fail("BatchNormalization in training mode is not supported")
    x, scale, bias, mean, var = (ctx.tensor(v) for v in ins[:5])
    return [ctx.ops.batch_norm(x, mean, var, scale, bias, eps=float(at.get("epsilon", 1e-5)))]


def _softmax(prim: str) -> Importer:
    def imp(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        x = ctx.tensor(ins[0])
        return [getattr(ctx.ops, prim)(x, axis=int(at.get("axis", -1)))]
    return imp


# ---- static forms (all inputs known while tracing) --------------------------------------------------------------

def _np_binary(fn: Callable[[Any, Any], Any]) -> Importer:
    def static(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
        a, b = ins
        out = fn(a, b)
        return [np.asarray(out, dtype=object if (a.dtype == object or b.dtype == object) else None)]
    return static


def _np_div(a: Any, b: Any) -> Any:
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return np.true_divide(a, b)
    if a.dtype != object and b.dtype != object:  # integer constants: ONNX truncates toward zero
        return (np.abs(a) // np.abs(b)) * (np.sign(a) * np.sign(b))
    return a // b  # sizes are >= 0: ONNX's truncation is floor


def _s_shape(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    shape = list(ins[0].shape)
    start, end = at.get("start", 0), at.get("end", len(shape))
    part = shape[slice(start, end)]
    sym = any(isinstance(d, SymDim) for d in part)
    return [np.asarray(part, dtype=object if sym else np.int64).reshape(len(part))]


def _s_size(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    total = _product(list(ins[0].shape))
    return [np.asarray(total, dtype=object if isinstance(total, SymDim) else np.int64)]


def _s_constant(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    from onnx import numpy_helper
    if "value" in at:
        return [numpy_helper.to_array(at["value"])]
    for key, dtype in (("value_float", np.float32), ("value_int", np.int64), ("value_floats", np.float32),
                       ("value_ints", np.int64)):
        if key in at:
            return [np.asarray(at[key], dtype=dtype)]
    raise ctx.fail(f"Constant with {', '.join(at)} is not supported")


def _s_gather(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    return [np.take(ins[0], ins[1].astype(np.int64), axis=int(at.get("axis", 0)))]


def _s_concat(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    parts = [v for v in ins if v is not None]
    kind = object if any(p.dtype == object for p in parts) else None
    return [np.concatenate([p.astype(object) if kind else p for p in parts], axis=int(at["axis"]))]


def _s_cast(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    dtype = _dtype(ctx, at["to"])
    x = ins[0]
    return [x if x.dtype == object else x.astype(dtype)]


def _s_reshape(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    x = ins[0]
    shape = [int(d) for d in ctx.ints(ins[1], "shape")]
    shape = [x.shape[i] if d == 0 and not at.get("allowzero", 0) else d for i, d in enumerate(shape)]
    return [x.reshape(shape)]


def _s_range(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    if any(v.dtype == object for v in ins):
        return _range(ctx, node, ins, at)
    return [np.arange(ins[0].item(), ins[1].item(), ins[2].item(), dtype=ins[0].dtype)]


def _s_where(ctx: Context, node: Any, ins: list[Any], at: dict[str, Any]) -> list[Any]:
    return [np.where(ins[0], ins[1], ins[2])]


STATIC: dict[str, Importer] = {
    "Shape": _s_shape, "Size": _s_size, "Constant": _s_constant, "Gather": _s_gather, "Concat": _s_concat,
    "Cast": _s_cast, "Reshape": _s_reshape, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Slice": _slice,
    "Identity": _identity, "Add": _np_binary(np.add), "Sub": _np_binary(np.subtract),
    "Mul": _np_binary(np.multiply), "Div": _np_binary(_np_div), "Range": _s_range, "Where": _s_where,
    "Equal": _np_binary(np.equal),
}
"""ONNX operator -> its numpy form, used when every input is static."""


IMPORTERS: dict[str, Importer] = {
    "Neg": _unary("neg"), "Abs": _unary("abs"), "Sign": _unary("sign"), "Exp": _unary("exp"), "Log": _unary("log"),
    "Sqrt": _unary("sqrt"), "Sin": _unary("sin"), "Cos": _unary("cos"), "Tan": _unary("tan"),
    "Tanh": _unary("tanh"), "Sigmoid": _unary("sigmoid"), "Relu": _unary("relu"), "Erf": _unary("erf"),
    "Floor": _unary("floor"), "Ceil": _unary("ceil"), "Round": _unary("round"), "Not": _unary("logical_not"),
    "BitwiseNot": _unary("bitwise_not"), "Reciprocal": _reciprocal, "Atan": _atan, "IsNaN": _isnan,
    "Gelu": _gelu, "Identity": _identity, "Dropout": _dropout,
    "Add": _binary("add"), "Sub": _binary("sub"), "Mul": _binary("mul"), "Div": _div, "Pow": _pow,
    "Max": _variadic("maximum"), "Min": _variadic("minimum"), "Equal": _binary("eq"), "Less": _binary("lt"),
    "LessOrEqual": _binary("le"), "Greater": _binary("gt"), "GreaterOrEqual": _binary("ge"),
    "And": _binary("logical_and"), "Or": _binary("logical_or"), "Xor": _xor,
    "BitwiseAnd": _binary("bitwise_and"), "BitwiseOr": _binary("bitwise_or"), "BitwiseXor": _binary("bitwise_xor"),
    "Where": _where,
    "ReduceSum": _reduce("reduce_sum"), "ReduceMax": _reduce("reduce_max"), "ReduceMin": _reduce("reduce_min"),
    "ReduceProd": _reduce("reduce_prod"),
    "ReduceMean": _reduce("reduce_sum", mean=True), "ArgMax": _arg("argmax"), "ArgMin": _arg("argmin"),
    "CumSum": _cumsum, "TopK": _topk, "GatherElements": _gather_elements,
    "Reshape": _reshape_op, "Transpose": _transpose, "Expand": _expand, "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze, "Flatten": _flatten, "Slice": _slice, "Pad": _pad, "Concat": _concat,
    "Gather": _gather, "ScatterND": _scatter_nd, "Cast": _cast, "ConstantOfShape": _constant_of_shape,
    "Range": _range, "Shape": _s_shape, "Size": _s_size, "Constant": _s_constant,
    "MatMul": _matmul, "Gemm": _gemm, "Conv": _conv, "ConvTranspose": _conv_transpose,
    "MaxPool": _pool("max_pool_nd"), "AveragePool": _pool("avg_pool_nd"), "GlobalAveragePool": _global_average_pool,
    "LayerNormalization": _layer_norm, "BatchNormalization": _batch_norm, "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"),
}
"""ONNX operator (default domain) -> its tensorplay form."""


__all__ = ["Context", "IMPORTERS", "Importer", "STATIC", "node_label"]
