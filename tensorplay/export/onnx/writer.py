"""``to_onnx``: an exported program as an ONNX model.

The model's inputs are the program's user inputs, named after the forward's parameters (``x``; ``x_0``,
``x_1`` for the items of a tuple argument), their dynamic axes named after the user's dims (``["Batch",
"Seq", 64]``); its outputs are named ``output`` (``output_0``, ``output_1``, ... for a tuple, ``output_<key>``
for a dict), with symbolic sizes written as expressions (``Batch*Seq``). Parameters, buffers and constant
tensors become initializers named after their state-dict entries. Every node keeps the user's source line
as its ``doc_string`` and is named after the tensorplay value it computes. The dims' ranges are kept in the
model's metadata (``tensorplay.dims``, with the example's sizes; ``tensorplay.state``: which initializers
were parameters, buffers or constants), which :func:`~tensorplay.export.onnx.from_onnx` reads back.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from tensorplay.export.decomp import copy_graph, decompose
from tensorplay.export.onnx.builder import ONNX_DTYPES, GraphBuilder, dim_param, dim_sources
from tensorplay.export.onnx.compositions import COMPOSITIONS
from tensorplay.export.onnx.deps import OLDEST_OPSET, newest_opset, require_onnx
from tensorplay.export.onnx.errors import ONNXExportError
from tensorplay.export.onnx.lowering import lower_node
from tensorplay.export.program import ExportedProgram, name_values, value_name
from tensorplay.export.signature import InputKind
from tensorplay.interpreters.graph.ir import Literal, Var
from tensorplay.pytree import leaf_names

DIMS_METADATA = "tensorplay.dims"
"""The metadata key holding the dims' ranges and example sizes: JSON ``{name: [min, max or null, example]}``."""

STATE_METADATA = "tensorplay.state"
"""The metadata key holding the role of each initializer that was state: JSON ``{name: "parameter" | "buffer" |
"constant_tensor"}``."""


def _opset(opset: int | None) -> int:
    onnx = require_onnx()
    if opset is None:
        return newest_opset()
    newest = int(onnx.defs.onnx_opset_version())
    if not isinstance(opset, int) or isinstance(opset, bool) or not OLDEST_OPSET <= opset <= newest:
        raise ValueError(f"to_onnx: opset must be an int from {OLDEST_OPSET} to {newest} (the newest this onnx "
                         f"package knows), got {opset!r}")
    return opset


def _output_names(ep: ExportedProgram, count: int) -> list[str]:
    tree = ep.call_spec.out_tree
    if tree is not None and tree.n_tensors == count:
        names = leaf_names(tree, "output")
        if len(set(names)) == count:
            return names
    return ["output"] if count == 1 else [f"output_{i}" for i in range(count)]


def _input_names(ep: ExportedProgram, users: list[Var]) -> list[str]:
    """The forward's parameter names for the user inputs (``x``; ``x_0``, ``x_1`` for a tuple's items), which
    the graph's placeholders may have lost to a weight of the same name."""
    import optree
    call = ep.call_spec
    paths = optree.treespec_paths(call.in_tree.spec)
    names = ["_".join([call.names[path[0]], *(str(k) for k in path[1:])])
             for path, is_tensor in zip(paths, call.in_tree.is_tensor)
             if is_tensor and path and isinstance(path[0], int) and path[0] < len(call.names)]
    return names if len(names) == len(users) else [str(p.name) for p in users]


def _value_info(helper: Any, name: str, v: Var | Literal) -> Any:
    return helper.make_tensor_value_info(name, ONNX_DTYPES[v.aval.dtype], [dim_param(d) for d in v.aval.shape])


def _rename(b: GraphBuilder, old: str, new: str) -> None:
    """Rename value ``old`` (a node output) to ``new`` wherever it appears."""
    for node in b.nodes:
        for i, name in enumerate(node.output):
            if name == old:
                node.output[i] = new
        for i, name in enumerate(node.input):
            if name == old:
                node.input[i] = new


def to_onnx(ep: ExportedProgram, path: str | os.PathLike[str] | None = None, *, opset: int | None = None) -> Any:
    """``ep`` as an ``onnx.ModelProto`` (see the module docstring), checked with
    ``onnx.checker.check_model(full_check=True)``; with ``path``, also written there. ``opset``: the default
    domain's opset, from 17 on (default: the newest the installed ONNX Runtime loads).

    Raises :class:`~tensorplay.export.onnx.ONNXExportError` naming the primitive and the user's line for
    what ONNX cannot express (random draws such as dropout in training mode, gradient primitives, state
    the program mutates), and ``ImportError`` (saying ``pip install "tensorplay[onnx]"``) without onnx."""
    onnx = require_onnx()
    from onnx import helper
    target = _opset(opset)
    if ep.graph.mutations:
        mutated = ", ".join(s.target or s.arg.name for s in ep.graph_signature.output_specs
                            if s.kind.value.endswith("mutation"))
        raise ONNXExportError(f"to_onnx: the program updates state ({mutated}); an ONNX model has no state "
                              "(export the model in eval mode, e.g. batch norm without running statistics updates)")
    graph = copy_graph(ep.graph)
    decompose(graph, COMPOSITIONS)
    name_values(graph)
    users = [p for p, s in zip(graph.inputs, ep.graph_signature.input_specs) if s.kind is InputKind.USER_INPUT]
    b = GraphBuilder(target, dim_sources(users))
    state = {**ep.state_dict, **ep.constants}
    inputs = []
    kinds: dict[str, str] = {}
    read = {id(v) for n in graph.nodes for v in n.inputs} | {id(v) for v in graph.outputs}
    for p, wanted in zip(users, _input_names(ep, users)):  # first: the user's names win over the weights'
        b.names[id(p)] = b.reserve(wanted)
        inputs.append(_value_info(helper, b.names[id(p)], p))
    for p, spec in zip(graph.inputs, ep.graph_signature.input_specs):
        if spec.kind is InputKind.USER_INPUT:
            continue
        if spec.kind is InputKind.RANDOM_KEY:
            b.names[id(p)] = b.reserve(str(p.name))  # refused by the random primitive that reads it
        elif id(p) in read:  # state nothing reads (a batch counter) is left out
            name = b.reserve(str(spec.target))
            b.initializers.append(onnx.numpy_helper.from_array(np.ascontiguousarray(state[str(spec.target)]._data),
                                                               name))
            b.names[id(p)] = name
            kinds[name] = spec.kind.value
    for node in graph.nodes:
        name = value_name(node.out)
        b.at(node, name)
        start = len(b.nodes)
        result = lower_node(b, node)
        if len(b.nodes) > start and result == b.nodes[-1].output[0] and result != name and name not in b._used:
            _rename(b, result, b.reserve(name))
            result = name
        b.names[id(node.out)] = result
    outputs = []
    graph_inputs = {str(p.name) for p in users}
    done: set[str] = set()
    for v, out_name in zip(graph.outputs, _output_names(ep, len(graph.outputs))):
        b.scope = out_name
        src = b.operand(v, v.aval.dtype)
        produced = any(src in n.output for n in b.nodes)
        if produced and src not in graph_inputs and src not in done and out_name not in b._used:
            _rename(b, src, b.reserve(out_name))
            b.names = {k: out_name if n == src else n for k, n in b.names.items()}
        else:
            b.op("Identity", src, out=b.reserve(out_name))
        done.add(out_name)
        outputs.append(_value_info(helper, out_name, v))
    onnx_graph = helper.make_graph(b.nodes, ep.name, inputs, outputs, initializer=b.initializers,
                                   doc_string="exported by tensorplay")
    opsets = [helper.make_opsetid("", target)]
    model = helper.make_model(onnx_graph, opset_imports=opsets, producer_name="tensorplay",
                              ir_version=helper.find_min_ir_version_for(opsets))
    helper.set_model_props(model, {
        DIMS_METADATA: json.dumps({name: [info.min, info.max, info.hint] for name, info in ep.dims.items()}),
        STATE_METADATA: json.dumps(kinds)})
    onnx.checker.check_model(model, full_check=True)
    if path is not None:
        onnx.save(model, os.fspath(path))
    return model


__all__ = ["DIMS_METADATA", "STATE_METADATA", "to_onnx"]
