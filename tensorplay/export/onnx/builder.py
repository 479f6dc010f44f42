"""The ONNX graph under construction: nodes, initializers, unique names, operands cast to a dtype, and
symbolic sizes computed at run time from the inputs' shapes.

Every node is made with ``onnx.helper`` (never by writing protobuf fields). A symbolic size (a
:class:`~tensorplay.symbolic.SymDim` such as ``Batch*Seq`` or ``(H - 1)//2 + 1``) becomes an ``int64[1]``
tensor computed from ``Shape`` of the user input that carries each of its dims; a shape (a tuple of sizes)
becomes an ``int64[n]`` tensor (a constant when every size is an int).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tensorplay.export.dynamic import linear_parts
from tensorplay.export.onnx.errors import ONNXExportError
from tensorplay.interpreters.graph.ir import Literal, Node, Var
from tensorplay.symbolic import FloorDiv, SymDim

ONNX_DTYPES = {"float32": 1, "float64": 11, "int32": 6, "int64": 7, "bool": 9}
"""tensorplay dtype name -> ``onnx.TensorProto`` element type."""

DTYPE_NAMES = {code: name for name, code in ONNX_DTYPES.items()}
"""``onnx.TensorProto`` element type -> tensorplay dtype name."""


def dim_param(d: Any) -> int | str:
    """A shape entry as ONNX writes it: an int, or the symbolic size's text (``Batch``, ``Batch*Seq``)."""
    return d if isinstance(d, int) else str(d)


class GraphBuilder:
    """Collects the nodes and initializers of one ONNX graph (see the module docstring).

    ``opset`` is the default domain's opset; ``sources`` maps each root dim name to ``(input name, axis,
    scale, offset)``: the user input whose axis ``axis`` has size ``scale*dim + offset``."""

    def __init__(self, opset: int, sources: dict[str, tuple[str, int, int, int]]) -> None:
        from onnx import helper, numpy_helper
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.opset = opset
        self.sources = sources
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.names: dict[int, str] = {}
        self._used: set[str] = set()
        self._consts: dict[tuple[str, bytes, tuple[int, ...]], str] = {}
        self._dims: dict[Any, str] = {}
        self.scope = "graph"
        self.where = ""

    # ---- names -----------------------------------------------------------------------------------------------
    def reserve(self, name: str) -> str:
        """``name`` made unique in this graph (``name``, ``name_1``, ...) and marked used."""
        out, i = name, 0
        while out in self._used:
            i += 1
            out = f"{name}_{i}"
        self._used.add(out)
        return out

    def at(self, node: Node, scope: str) -> None:
        """Name what follows after tensorplay value ``scope`` and remember the user's line of ``node``."""
        self.scope = scope
        self.where = str(node.location) if node.location is not None else ""

    # ---- nodes -----------------------------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: str | None, out: str | None = None, **attrs: Any) -> str:
        """Append one node with one output; returns the output's name (``out``, or a fresh one in the scope)."""
        name = out if out is not None else self.reserve(f"{self.scope}/{op_type}")
        node = self.helper.make_node(op_type, ["" if i is None else i for i in inputs], [name],
                                     name=self.reserve(f"{self.scope}/{op_type}:node"),
                                     doc_string=self.where or None, **attrs)
        self.nodes.append(node)
        return name

    def op_n(self, op_type: str, inputs: Sequence[str], n_outputs: int, **attrs: Any) -> list[str]:
        """Append one node with ``n_outputs`` outputs; returns their names."""
        names = [self.reserve(f"{self.scope}/{op_type}:{i}") for i in range(n_outputs)]
        self.nodes.append(self.helper.make_node(op_type, list(inputs), names,
                                                name=self.reserve(f"{self.scope}/{op_type}:node"),
                                                doc_string=self.where or None, **attrs))
        return names

    # ---- constants ------------------------------------------------------------------------------------------
    def const(self, value: Any, dtype: str) -> str:
        """An initializer holding ``value`` as ``dtype`` (equal small constants are shared)."""
        array = np.asarray(value, dtype=np.dtype(dtype))
        key = (dtype, array.tobytes(), array.shape)
        found = self._consts.get(key) if array.size <= 16 else None
        if found is not None:
            return found
        name = self.reserve(f"{self.scope}/const" if array.size > 16 else f"const_{dtype}_{len(self._consts)}")
        self.initializers.append(self.numpy_helper.from_array(array, name))
        if array.size <= 16:
            self._consts[key] = name
        return name

    def ints(self, values: Sequence[int]) -> str:
        """An ``int64[len(values)]`` constant."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(len(values)), "int64")

    # ---- operands -------------------------------------------------------------------------------------------
    def value(self, v: Var) -> str:
        """The ONNX name of graph value ``v``."""
        return self.names[id(v)]

    def operand(self, v: Var | Literal | None, dtype: str) -> str:
        """``v`` as a tensor of ``dtype``: a value (cast when its dtype differs) or a scalar literal (a 0-d
        constant, or a symbolic size computed at run time)."""
        if v is None:
            raise ONNXExportError(f"{self.scope}: an operand is missing (at {self.where})")
        if isinstance(v, Literal):
            if isinstance(v.value, SymDim):
                return self.cast(self.op("Squeeze", self.dim(v.value), self.ints([0])), "int64", dtype)
            return self.const(v.value, dtype)
        return self.cast(self.value(v), v.aval.dtype, dtype)

    def cast(self, name: str, src: str, dst: str) -> str:
        """``name`` (of dtype ``src``) as ``dst`` (itself when they agree)."""
        if src == dst:
            return name
        return self.op("Cast", name, to=ONNX_DTYPES[dst])

    # ---- symbolic sizes -------------------------------------------------------------------------------------
    def dim(self, d: Any) -> str:
        """An ``int64[1]`` tensor holding size ``d`` (an int or a :class:`SymDim`) at run time."""
        if not isinstance(d, SymDim):
            return self.ints([int(d)])
        found = self._dims.get(d)
        if found is not None:
            return found
        saved = self.scope
        self.scope = f"size[{d}]"
        try:
            total: str | None = None
            constant = 0
            for mono, coef in d._key:
                if mono == ():
                    constant += coef
                    continue
                term = self._monomial(mono)
                if coef != 1:
                    term = self.op("Mul", term, self.ints([coef]))
                total = term if total is None else self.op("Add", total, term)
            assert total is not None  # a SymDim has a symbol
            if constant:
                total = self.op("Add", total, self.ints([constant]))
        finally:
            self.scope = saved
        self._dims[d] = total
        return total

    def _monomial(self, mono: tuple[Any, ...]) -> str:
        out: str | None = None
        for atom in mono:
            factor = self._symbol(atom) if isinstance(atom, str) else self._floordiv(atom)
            out = factor if out is None else self.op("Mul", out, factor)
        assert out is not None
        return out

    def _floordiv(self, atom: FloorDiv) -> str:
        return self.op("Div", self.dim(atom.num), self.ints([atom.den]))  # sizes are >= 0: truncation is floor

    def _symbol(self, name: str) -> str:
        found = self._dims.get(name)
        if found is not None:
            return found
        source = self.sources.get(name)
        if source is None:
            raise ONNXExportError(f"to_onnx: the size {name} is used by the program but no user input carries it "
                                  "(ONNX computes symbolic sizes from the inputs' shapes)")
        input_name, axis, scale, offset = source
        size = self.op("Shape", input_name, start=axis, end=axis + 1)
        if offset:
            size = self.op("Sub", size, self.ints([offset]))
        if scale != 1:
            size = self.op("Div", size, self.ints([scale]))
        self._dims[name] = size
        return size

    def shape(self, dims: Sequence[Any]) -> str:
        """An ``int64[len(dims)]`` tensor holding the sizes ``dims`` (ints and symbolic sizes)."""
        if not any(isinstance(d, SymDim) for d in dims):
            return self.ints([int(d) for d in dims])
        parts = [self.dim(d) for d in dims]
        return parts[0] if len(parts) == 1 else self.op("Concat", *parts, axis=0)


    def pin(self, name: str, dims: Sequence[Any], always: bool = False) -> str:
        """``name`` reshaped to its own shape ``dims`` when they are symbolic (or ``always``), so that shape
        inference (which reads the sizes computed from the inputs' shapes) knows them; else ``name`` itself."""
        if not always and not any(isinstance(d, SymDim) for d in dims):
            return name
        return self.op("Reshape", name, self.shape(dims), allowzero=1)


def dim_sources(inputs: Sequence[Var]) -> dict[str, tuple[str, int, int, int]]:
    """Root dim name -> ``(input name, axis, scale, offset)`` of the first user input axis whose size is
    ``scale*dim + offset`` (an axis of exactly the dim is preferred)."""
    out: dict[str, tuple[str, int, int, int]] = {}
    for exact in (True, False):
        for p in inputs:
            for axis, d in enumerate(p.shape):
                if not isinstance(d, SymDim) or d.linear_in() is None:
                    continue
                root, scale, offset = linear_parts(d)
                if root in out or (exact and (scale, offset) != (1, 0)):
                    continue
                out[root] = (str(p.name), axis, scale, offset)
    return out


__all__ = ["DTYPE_NAMES", "GraphBuilder", "ONNX_DTYPES", "dim_param", "dim_sources"]
