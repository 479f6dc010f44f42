"""``from_onnx``: an ONNX model as an :class:`~tensorplay.export.ExportedProgram`.

The model's graph is interpreted by a :class:`~tensorplay.nn.Module` whose forward applies tensorplay
operations node by node (:mod:`.importing_ops`), and that module is exported like any other (``export``
with the model's dims): so the program holds ordinary primitives and runs evaluated, compiled, under the
transforms, and fine-tunes.

* Graph inputs become the user inputs (named after them, made identifiers); an axis with a ``dim_param``
  becomes the :class:`~tensorplay.export.Dim` of that name (one name, one dim), with the range a
  tensorplay-written model records in its metadata (else ``[0, inf]``), an axis with neither size nor name
  a dim of its own.
* Initializers become parameters and buffers as a tensorplay-written model's metadata records them; in
  other models, those of rank >= 1 of a float dtype become parameters (named after them: ``fc1.weight`` is
  parameter ``weight`` of submodule ``fc1``); other initializers (integer ones, scalars) are constants.
* Integer values computed from shapes (``Shape``, and ``Gather``, ``Concat``, ``Mul``, ... on them) are
  computed at trace time as sizes (symbolic where the dims are), so a ``Reshape`` to a computed shape
  becomes a ``reshape`` to symbolic sizes.

An operator without a mapping, or a node of another domain, is refused with its op type and node name
(:class:`~tensorplay.export.onnx.ONNXImportError`), before anything runs.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

import numpy as np

from tensorplay.export.onnx.builder import DTYPE_NAMES
from tensorplay.export.onnx.deps import require_onnx
from tensorplay.export.onnx.errors import ONNXImportError
from tensorplay.export.onnx.importing_ops import IMPORTERS, Context, node_label
from tensorplay.export.onnx.writer import DIMS_METADATA, STATE_METADATA

OLDEST_IMPORTED_OPSET = 13
"""Older opsets give Softmax, Squeeze and the reductions other meanings; such models are refused."""


def _identifier(name: str, used: set[str]) -> str:
    out = re.sub(r"\W", "_", name) or "_"
    if out[0].isdigit():
        out = f"_{out}"
    base, i = out, 0
    while out in used:
        i += 1
        out = f"{base}_{i}"
    used.add(out)
    return out


def _load(model: Any) -> Any:
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        return onnx.load_from_string(bytes(model))
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model))
    raise TypeError(f"from_onnx: expected an onnx.ModelProto, a path or the model's bytes, got {type(model).__name__}")


def _check_supported(model: Any) -> None:
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    version = opsets.get("ai.onnx")
    if version is None or version < OLDEST_IMPORTED_OPSET:
        raise ONNXImportError(f"from_onnx: the model uses default-domain opset {version}; opset "
                              f"{OLDEST_IMPORTED_OPSET} or newer is supported (convert it with "
                              "onnx.version_converter)")
    for node in model.graph.node:
        if node.domain not in ("", "ai.onnx"):
            raise ONNXImportError(f"from_onnx: {node_label(node)} is of the custom domain {node.domain!r}; only "
                                  "standard ONNX operators (the default domain) are supported")
        if node.op_type not in IMPORTERS:
            raise ONNXImportError(f"from_onnx: {node_label(node)}: operator {node.op_type!r} has no tensorplay "
                                  "mapping")


def _state_metadata(model: Any) -> dict[str, str]:
    """Initializer name -> its role in a tensorplay-written model (``parameter``, ``buffer``, ...)."""
    for prop in model.metadata_props:
        if prop.key == STATE_METADATA:
            try:
                return {str(k): str(v) for k, v in json.loads(prop.value).items()}
            except (ValueError, AttributeError):
                raise ONNXImportError(f"from_onnx: malformed {STATE_METADATA} metadata {prop.value!r}") from None
    return {}


def _dims_metadata(model: Any) -> dict[str, tuple[int, int | None, int | None]]:
    """Dim name -> (min, max, example size) from a tensorplay-written model's metadata."""
    for prop in model.metadata_props:
        if prop.key == DIMS_METADATA:
            try:
                raw = json.loads(prop.value)
                return {str(k): (int(v[0]), None if v[1] is None else int(v[1]),
                                 int(v[2]) if len(v) > 2 and v[2] is not None else None) for k, v in raw.items()}
            except (ValueError, TypeError, IndexError, KeyError):
                raise ONNXImportError(f"from_onnx: malformed {DIMS_METADATA} metadata {prop.value!r}") from None
    return {}


def from_onnx(model: Any) -> Any:
    """An :class:`~tensorplay.export.ExportedProgram` computing what ONNX model ``model`` (an
    ``onnx.ModelProto``, a path, or its bytes) computes; see the module docstring. Raises
    :class:`~tensorplay.export.onnx.ONNXImportError` for an operator, domain or element type it does not
    map, naming the op type and the node."""
    import tensorplay as tp
    from tensorplay import nn
    from tensorplay.export import Dim, export
    from onnx import numpy_helper

    proto = _load(model)
    _check_supported(proto)
    graph = proto.graph
    init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    ranges = _dims_metadata(proto)
    used: set[str] = set()
    inputs = [i for i in graph.input if i.name not in init]
    params: dict[str, str] = {}  # initializer -> parameter path
    root = nn.Module()
    roles = _state_metadata(proto)
    for name, array in init.items():
        role = roles.get(name)
        if role is None and array.dtype.kind == "f" and array.ndim >= 1 and array.dtype.name in DTYPE_NAMES.values():
            role = "parameter"
        if role == "parameter":
            params[name] = _attach(root, name, tp.nn.Parameter(tp.tensor(np.ascontiguousarray(array))))
        elif role == "buffer":
            params[name] = _attach(root, name, tp.tensor(np.ascontiguousarray(array)), buffer=True)
    dims: dict[str, Any] = {}
    hints: dict[str, int] = {}
    dynamic: list[dict[int, Any]] = []
    examples: list[Any] = []
    for i in inputs:
        tensor_type = i.type.tensor_type
        dtype = DTYPE_NAMES.get(tensor_type.elem_type)
        if dtype is None:
            raise ONNXImportError(f"from_onnx: input {i.name!r} has element type {tensor_type.elem_type}; "
                                  f"supported: {', '.join(DTYPE_NAMES.values())}")
        spec: dict[int, Any] = {}
        shape = []
        for axis, d in enumerate(tensor_type.shape.dim):
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
                continue
            label = d.dim_param or f"{i.name}_{axis}"
            if label not in dims:
                low, high, hint = ranges.get(label, (0, None, None))
                dims[label] = Dim(_identifier(label, used), min=low, max=high)
                hints[label] = _hint(dims[label]) if hint is None else hint
            spec[axis] = dims[label]
            shape.append(hints[label])
        dynamic.append(spec)
        rng = np.random.default_rng(0)
        example = rng.standard_normal(shape).astype(dtype) if dtype.startswith("float") else np.zeros(shape, dtype)
        examples.append(tp.tensor(example))
    names = [_identifier(i.name, used) for i in inputs]
    module = _module(root, graph, init, params, [i.name for i in inputs], names)
    return export(module, tuple(examples), dynamic_shapes=tuple(dynamic))


def _hint(dim: Any) -> int:
    """An example size for a dim without a recorded one: 2 or more, within its range."""
    low = max(int(dim.min), 2)
    return low if dim.max is None else min(low, int(dim.max))


def _attach(root: Any, name: str, param: Any, buffer: bool = False) -> str:
    """Register ``param`` (a buffer when ``buffer``) under ``name`` split at dots into submodules (a part the
    module cannot take, such as ``forward``, is renamed); returns its path."""
    from tensorplay import nn
    parts = [p for p in name.split(".") if p] or ["param"]
    module = root
    path = []
    for part in parts[:-1]:
        child = module._modules.get(part)
        if child is None:
            child = nn.Module()
            part = _register(module, part, lambda key, c=child: module.register_module(key, c))
        module = child
        path.append(part)
    leaf = _register(module, parts[-1], (lambda key: module.register_buffer(key, param)) if buffer else
                     (lambda key: module.register_parameter(key, param)))
    return ".".join([*path, leaf])


def _register(module: Any, name: str, register: Any) -> str:
    """``register(name)``, or under a made-up identifier when the module refuses ``name``; returns the name."""
    try:
        register(name)
        return name
    except KeyError:
        key = _identifier(f"p_{name}", set(module._parameters) | set(module._buffers) | set(module._modules) |
                          set(dir(module)))
        register(key)
        return key


def _module(root: Any, graph: Any, init: dict[str, Any], params: dict[str, str], onnx_inputs: list[str],
            names: list[str]) -> Any:
    """A module whose forward (arguments ``names``) interprets ``graph``, holding ``root``'s parameters."""
    import inspect

    from tensorplay import nn

    def forward(self: Any, *args: Any) -> Any:
        return Context(self, init, params).run(graph, dict(zip(onnx_inputs, args)))

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    forward.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", kind)] + [inspect.Parameter(n, kind) for n in names])
    cls = type(f"ONNX_{_identifier(graph.name or 'model', set())}", (nn.Module,), {"forward": forward})
    module = cls()
    for key, child in root._modules.items():
        setattr(module, key, child)
    for key, p in root._parameters.items():
        module.register_parameter(key, p)
    for key, t in root._buffers.items():
        module.register_buffer(key, t)
    return module


__all__ = ["OLDEST_IMPORTED_OPSET", "from_onnx"]
