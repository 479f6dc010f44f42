"""Saving and loading exported programs: a versioned JSON program and safetensors tensors, no pickle.

:func:`serialize` gives a :class:`SerializedArtifact`: the program as JSON (UTF-8 bytes) and three safetensors
blobs (the state dict, the constants, the example inputs). :func:`save` writes one file: a safetensors file
holding every tensor (``state_dict/<name>``, ``constants/<name>``, ``example_inputs/<name>``) with the JSON
program and its SHA-256 in the metadata (:mod:`tensorplay.export.tensorfile` describes the container and its
checks).

The JSON program has a schema version (``major.minor``; :data:`SCHEMA`): a file with another major version, or
a newer minor one, is refused with the version it needs. It names every primitive it uses with its version
(the primitive table's, ``tensorplay.spec.table``), and every node by primitive name, inputs (values by name,
literals by type), params and output aval. Loading checks, before building anything: every field is known
(an unknown field is refused, not ignored), every primitive exists at the version the file needs, every
param is one the primitive declares and has the declared type, every value is defined before use, every
tensor the program lists is present with its dtype, shape and checksum; then the graph is type-checked
(every shape rule re-run). Loading never imports or calls anything named in a file: names are looked up in
the primitive table, and the only objects built are graphs, tensors, dicts, lists and tuples.
"""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensorplay.export.dynamic import DimInfo, ShapeSpec
from tensorplay.export.errors import FileFormatError
from tensorplay.export.program import CallSpec, ExportedProgram, ModuleCallEntry, value_name
from tensorplay.export.signature import (
    ExportGraphSignature, InputKind, InputSpec, OutputKind, OutputSpec, TensorArgument,
)
from tensorplay.export.tensorfile import (
    check_json_depth, check_schema, checksum, decode, dim_order, encode, parse_json, read_bytes, with_dim_order,
    write_bytes,
)
from tensorplay.export.weights import _Reader, _Writer, decode_scalar, encode_scalar
from tensorplay.tensor import ValuesIndices
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.ir import INPUT_KINDS, Graph, Literal, Location, Var
from tensorplay.pytree import Structure
from tensorplay.spec.aval import Aval
from tensorplay.spec.dtypes import DTYPES
from tensorplay.spec.table import PRIMITIVES
from tensorplay.symbolic import SymDim, parse_dim

SCHEMA = (1, 0)
"""The program schema this tensorplay writes, and the newest it reads (``major.minor``)."""
PROGRAM_KIND = "program"
PROGRAM_KEY = "tensorplay.program"
PROGRAM_SHA_KEY = "tensorplay.program_sha256"
ROLES = ("state_dict", "constants", "example_inputs")


@dataclass
class SerializedArtifact:
    """A serialized program: ``exported_program`` (the JSON program, UTF-8) and the ``state_dict``, ``constants``
    and ``example_inputs`` tensors (each a safetensors file's bytes)."""

    exported_program: bytes
    state_dict: bytes
    constants: bytes
    example_inputs: bytes


# ---- small encoders ----------------------------------------------------------------------------------------

def _dim(d: Any) -> Any:
    return d if isinstance(d, int) else str(d)


def _shape(shape: Sequence[Any]) -> list[Any]:
    return [_dim(d) for d in shape]


def _param(value: Any, type_: str, where: str) -> Any:
    if type_ in ("dim",):
        return _dim(value)
    if type_ == "dims":
        return [_dim(d) for d in value]
    if type_ == "ints":
        return [int(v) for v in value]
    if type_ == "int_pairs":
        return [[int(a), int(b)] for a, b in value]
    if type_ == "float":
        return encode_scalar(float(value), where)
    return encode_scalar(value, where)


def _literal(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": encode_scalar(value, "literal")}
    if isinstance(value, SymDim):
        return {"dim": str(value)}
    raise TypeError(f"cannot serialize literal {value!r}")


class _LeafMarker:
    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index


def structure_to_json(structure: Structure | None, where: str) -> Any:
    """A :class:`~tensorplay.pytree.Structure` as JSON (tuples, lists, dicts, ``None``; static leaves must be JSON
    scalars)."""
    if structure is None:
        return None
    import optree
    template = optree.tree_unflatten(structure.spec, [_LeafMarker(i) for i in range(len(structure.static))])

    def node(value: Any) -> Any:
        if isinstance(value, _LeafMarker):
            if structure.is_tensor[value.index]:
                return {"tensor": True}
            static = structure.static[value.index]
            if isinstance(static, SymDim):  # a size the program returns: evaluated per call
                return {"dim": str(static)}
            return {"value": encode_scalar(static, where)}
        if value is None:
            return {"none": True}
        if type(value) is tuple:
            return {"tuple": [node(v) for v in value]}
        if type(value) is ValuesIndices:  # max(dim), min(dim), sort, topk: a type of tensorplay's own
            return {"values_indices": [node(v) for v in value]}
        if type(value) is list:
            return {"list": [node(v) for v in value]}
        if type(value) in (dict, collections.OrderedDict):
            kind = "dict" if type(value) is dict else "ordered_dict"
            items = []
            for key, item in value.items():
                if isinstance(key, bool) or not isinstance(key, (str, int)):
                    raise TypeError(f"{where}: cannot save a dict key {key!r} (strings and ints only)")
                items.append([key, node(item)])
            return {kind: items}
        raise TypeError(f"{where}: cannot save a {type(value).__name__} in the arguments or results (tuples, lists, "
                        "dicts and None only; a loaded file may not name types to construct)")

    return node(template)


def structure_from_json(data: Any, where: str) -> Structure | None:
    """The inverse of :func:`structure_to_json` (a malformed entry is a :class:`FileFormatError`)."""
    if data is None:
        return None
    import optree
    leaves: list[tuple[Any, bool]] = []

    def node(entry: Any) -> Any:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise FileFormatError(f"{where}: malformed structure entry {entry!r}")
        (kind, body), = entry.items()
        if kind == "tensor" and body is True:
            leaves.append((None, True))
            return _LeafMarker(len(leaves) - 1)
        if kind == "value":
            leaves.append((decode_scalar(body, where), False))
            return _LeafMarker(len(leaves) - 1)
        if kind == "dim" and isinstance(body, str):
            try:
                leaves.append((parse_dim(body), False))
            except ValueError:
                raise FileFormatError(f"{where}: {body!r} is not a size expression") from None
            return _LeafMarker(len(leaves) - 1)
        if kind == "none" and body is True:
            return None
        if kind in ("tuple", "list") and isinstance(body, list):
            items = [node(v) for v in body]
            return tuple(items) if kind == "tuple" else items
        if kind == "values_indices" and isinstance(body, list) and len(body) == 2:
            return ValuesIndices(*(node(v) for v in body))
        if kind in ("dict", "ordered_dict") and isinstance(body, list):
            pairs = []
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                        and not isinstance(item[0], bool)):
                    raise FileFormatError(f"{where}: malformed dict item {item!r}")
                pairs.append((item[0], node(item[1])))
            return dict(pairs) if kind == "dict" else collections.OrderedDict(pairs)
        raise FileFormatError(f"{where}: unknown structure entry {kind!r}")

    try:
        template = node(data)
    except RecursionError:
        raise FileFormatError(f"{where}: the structure is nested too deeply") from None
    markers, spec = optree.tree_flatten(template, is_leaf=lambda x: isinstance(x, _LeafMarker), none_is_leaf=False)
    ordered = [leaves[m.index] for m in markers]
    return Structure(spec, tuple(v for v, _ in ordered), tuple(t for _, t in ordered))


# ---- encoding a program --------------------------------------------------------------------------------------

def _location(location: Location | None) -> Any:
    return None if location is None else [location.filename, location.lineno, location.function]


def _tensor_entry(array: np.ndarray[Any, Any], **extra: Any) -> dict[str, Any]:
    entry = {"dtype": array.dtype.name, "shape": list(array.shape), "sha256": checksum(array), **extra}
    order = dim_order(array)
    return entry if order is None else {**entry, "dim_order": order}


def program_json(ep: ExportedProgram, opset_version: Mapping[str, int] | None = None
                 ) -> tuple[dict[str, Any], dict[str, dict[str, np.ndarray[Any, Any]]]]:
    """The JSON program of ``ep`` and its tensors by role (``state_dict``, ``constants``, ``example_inputs``)."""
    graph = ep.graph
    used = sorted({n.target for n in graph.nodes})
    versions = {name: PRIMITIVES[name].version for name in used}
    for name, version in (opset_version or {}).items():
        if name not in PRIMITIVES:
            raise ValueError(f"serialize: opset_version names {name!r}, which is not a primitive")
        if PRIMITIVES[name].version != version:
            raise ValueError(f"serialize: opset_version asks for {name} version {version}; this tensorplay implements "
                             f"version {PRIMITIVES[name].version}")
    inputs = []
    for p in graph.inputs:
        entry: dict[str, Any] = {"name": str(p.name), "kind": p.kind, "dtype": p.aval.dtype, "shape": _shape(p.shape)}
        if p._meta is not None and "index_bound" in p._meta:
            entry["index_bound"] = int(p._meta["index_bound"])
        inputs.append(entry)
    nodes = []
    for node in graph.nodes:
        declared = {q.name: q.type for q in PRIMITIVES[node.target].params}
        where = f"node {node.target}"
        ins: list[Any] = []
        for v in node.inputs:
            if v is None:
                ins.append(None)
            elif isinstance(v, Literal):
                ins.append({"literal": _literal(v.value)})
            else:
                ins.append({"value": value_name(v)})
        out = node.out
        nodes.append({"target": node.target, "inputs": ins,
                      "params": {k: _param(value, declared[k], where) for k, value in node.params.items()},
                      "output": {"name": value_name(out), "dtype": out.aval.dtype, "shape": _shape(out.shape)},
                      "location": _location(node.location)})
    sig = ep.graph_signature
    arrays: dict[str, dict[str, np.ndarray[Any, Any]]] = {role: {} for role in ROLES}
    tensors: dict[str, Any] = {"state_dict": {}, "constants": {}}
    weights = sig.weight_types()
    for spec in sig.input_specs:
        if spec.kind not in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
            continue
        target = str(spec.target)
        role = "state_dict" if target in ep.state_dict else "constants"
        t = ep.state_dict[target] if role == "state_dict" else ep.constants[target]
        array = np.asarray(t._ops.concrete(t))
        arrays[role][target] = array
        from tensorplay.nn.parameter import Parameter
        tensors[role][target] = _tensor_entry(array, role=weights[spec.arg.name].name,
                                              parameter=isinstance(t, Parameter),
                                              requires_grad=bool(t.requires_grad))
    example_tree = None
    if ep.example_inputs is not None:
        writer = _Writer()
        example_tree = writer.node(list(ep.example_inputs), [])
        arrays["example_inputs"] = writer.arrays
    tensors["example_inputs"] = {name: _tensor_entry(a) for name, a in arrays["example_inputs"].items()}
    program = {
        "schema": f"{SCHEMA[0]}.{SCHEMA[1]}",
        "name": ep.name,
        "primitives": versions,
        "inputs": inputs,
        "nodes": nodes,
        "outputs": [value_name(v) for v in graph.outputs if isinstance(v, Var)],
        "mutations": [[str(p.name), value_name(v)] for p, v in graph.mutations if isinstance(v, Var)],
        "signature": {
            "inputs": [{"kind": s.kind.value, "arg": s.arg.name, "target": s.target, "persistent": s.persistent}
                       for s in sig.input_specs],
            "outputs": [{"kind": s.kind.value, "arg": s.arg.name, "target": s.target} for s in sig.output_specs],
        },
        "dims": [{"name": i.name, "min": i.min, "max": i.max, "kind": i.kind, "declared_at": i.declared_at,
                  "hint": i.hint, "note": i.note} for i in ep.dims.values()],
        "call": {"names": list(ep.call_spec.names), "keyword": sorted(ep.call_spec.keyword),
                 "defaults": _defaults_json(ep.call_spec.defaults),
                 "in_tree": structure_to_json(ep.call_spec.in_tree, "the arguments"),
                 "out_tree": structure_to_json(ep.call_spec.out_tree, "the results")},
        "module_calls": [_module_call_json(e) for e in ep.module_call_graph],
        "tensors": tensors,
        "example_inputs": example_tree,
    }
    return program, arrays


def _defaults_json(defaults: Mapping[str, Any]) -> list[list[Any]]:
    """The defaults a file can hold (JSON scalars); an argument whose default is something else must be given
    when the loaded program is called."""
    out = []
    for name, value in defaults.items():
        try:
            out.append([name, encode_scalar(value, name)])
        except TypeError:
            continue
    return out


def _module_call_json(entry: ModuleCallEntry) -> dict[str, Any]:
    try:
        structures = [structure_to_json(entry.in_structure, entry.path),
                      structure_to_json(entry.out_structure, entry.path)]
    except TypeError:  # a submodule called with something a file cannot hold: unflatten cannot rebuild it
        structures = [None, None]
    return {"path": entry.path, "parent": entry.parent, "inputs": entry.inputs, "outputs": entry.outputs,
            "in_structure": structures[0], "out_structure": structures[1], "module_type": entry.module_type,
            "defines": entry.defines}


def serialize(ep: ExportedProgram, opset_version: Mapping[str, int] | None = None,
              pickle_protocol: int = 4) -> SerializedArtifact:
    """``ep`` as a :class:`SerializedArtifact`. ``opset_version`` (primitive name -> version) asserts the
    versions the file must carry (a primitive this tensorplay implements at another version is an error);
    ``pickle_protocol`` is accepted for compatibility with code written for other exporters and unused:
    nothing is pickled."""
    program, arrays = program_json(ep, opset_version)
    plain = json.dumps(program, sort_keys=False, allow_nan=False)
    check_json_depth(plain, "serialize")
    text = plain.encode("utf-8")
    version = f"{SCHEMA[0]}.{SCHEMA[1]}"
    return SerializedArtifact(text, *(encode(arrays[role], role, version) for role in ROLES))


def save(ep: ExportedProgram, f: Any) -> None:
    """Write ``ep`` to ``f`` (a path or a binary file object) as one safetensors file (module docstring)."""
    program, arrays = program_json(ep)
    text = json.dumps(program, allow_nan=False)
    check_json_depth(text, "tp.export.save")
    flat = {f"{role}/{name}": array for role in ROLES for name, array in arrays[role].items()}
    version = f"{SCHEMA[0]}.{SCHEMA[1]}"
    metadata = {PROGRAM_KEY: text, PROGRAM_SHA_KEY: hashlib.sha256(text.encode("utf-8")).hexdigest()}
    write_bytes(f, encode(flat, PROGRAM_KIND, version, metadata))


def load(f: Any) -> ExportedProgram:
    """The program :func:`save` wrote to ``f`` (a path or a binary file object); every check of the module
    docstring runs first (:class:`~tensorplay.export.errors.FileFormatError` on any failure)."""
    where = f"tp.export.load({str(f)!r})" if not hasattr(f, "read") else "tp.export.load"
    arrays, metadata = decode(read_bytes(f), PROGRAM_KIND, SCHEMA, where)
    text = metadata.get(PROGRAM_KEY)
    if text is None:
        raise FileFormatError(f"{where}: the file holds no program")
    if hashlib.sha256(text.encode("utf-8")).hexdigest() != metadata.get(PROGRAM_SHA_KEY):
        raise FileFormatError(f"{where}: the program does not match its checksum: the file was corrupted or "
                              "tampered with")
    by_role: dict[str, dict[str, np.ndarray[Any, Any]]] = {role: {} for role in ROLES}
    for key, array in arrays.items():
        role, _, name = key.partition("/")
        if role not in by_role:
            raise FileFormatError(f"{where}: unexpected tensor {key!r} (not state_dict/, constants/ or "
                                  "example_inputs/)")
        by_role[role][name] = array
    return _Decoder(where).program(_parse(text, where), by_role)


def deserialize(artifact: SerializedArtifact | bytes | str, state_dict: Any = None, constants: Any = None,
                example_inputs: Any = None) -> ExportedProgram:
    """The program of a :class:`SerializedArtifact` (or of its JSON program, with the tensors given apart).
    ``state_dict``, ``constants`` and ``example_inputs`` override the artifact's: safetensors bytes (as
    :func:`serialize` makes them) or mappings of names to tensors or arrays. Every tensor is checked against the
    program's table (dtype, shape, checksum)."""
    where = "ExportedProgram.deserialize"
    if isinstance(artifact, SerializedArtifact):
        text: bytes | str = artifact.exported_program
        state_dict = artifact.state_dict if state_dict is None else state_dict
        constants = artifact.constants if constants is None else constants
        example_inputs = artifact.example_inputs if example_inputs is None else example_inputs
    else:
        text = artifact
    if isinstance(text, bytes):
        from tensorplay.export.tensorfile import sniff
        sniff(text, where)
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise FileFormatError(f"{where}: the program is not UTF-8 JSON") from None
    by_role = {role: _arrays(blob, role, where) for role, blob in
               zip(ROLES, (state_dict, constants, example_inputs))}
    return _Decoder(where).program(_parse(text, where), by_role)


def _arrays(blob: Any, role: str, where: str) -> dict[str, np.ndarray[Any, Any]]:
    if blob is None:
        return {}
    if isinstance(blob, (bytes, bytearray)):
        return decode(bytes(blob), role, SCHEMA, f"{where} ({role})")[0]
    if isinstance(blob, Mapping):
        from tensorplay.tensor import Tensor
        return {str(k): np.asarray(v._ops.concrete(v) if isinstance(v, Tensor) else v) for k, v in blob.items()}
    raise TypeError(f"{where}: {role} must be safetensors bytes or a mapping of names to tensors, got "
                    f"{type(blob).__name__}")


def _parse(text: str, where: str) -> dict[str, Any]:
    data = parse_json(text, where, "the program")
    if not isinstance(data, dict):
        raise FileFormatError(f"{where}: the program is not a JSON object")
    return data


# ---- decoding ------------------------------------------------------------------------------------------------

_PROGRAM_FIELDS = {"schema", "name", "primitives", "inputs", "nodes", "outputs", "mutations", "signature", "dims",
                   "call", "module_calls", "tensors", "example_inputs"}


class _Decoder:
    """Builds an :class:`ExportedProgram` from a JSON program, checking everything on the way."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, problem: str) -> FileFormatError:
        return FileFormatError(f"{self.where}: {problem}")

    def fields(self, obj: Any, required: set[str], optional: set[str], what: str) -> dict[str, Any]:
        if not isinstance(obj, dict):
            raise self.fail(f"{what}: expected a JSON object, got {type(obj).__name__}")
        unknown = sorted(set(obj) - required - optional)
        if unknown:
            raise self.fail(f"{what}: unknown field(s) {unknown} (the file was not written by this version of "
                            "the schema, or was tampered with)")
        missing = sorted(required - set(obj))
        if missing:
            raise self.fail(f"{what}: missing field(s) {missing}")
        return obj

    def typed(self, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
        if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (
                kind if isinstance(kind, tuple) else (kind,))):
            raise self.fail(f"{what}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
        return value

    def dim(self, value: Any, what: str, negative: bool = False) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0 and not negative:
                raise self.fail(f"{what}: negative size {value}")
            return value
        if isinstance(value, str):
            try:
                return parse_dim(value)
            except (ValueError, RecursionError):
                raise self.fail(f"{what}: {value!r} is not a size expression") from None
        raise self.fail(f"{what}: expected a size (an int or a dim expression), got {value!r}")

    def aval(self, entry: Mapping[str, Any], what: str) -> Aval:
        dtype = entry.get("dtype")
        if dtype not in DTYPES:
            raise self.fail(f"{what}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}")
        shape = self.typed(entry.get("shape"), list, f"{what} shape")
        return Aval(tuple(self.dim(d, f"{what} shape") for d in shape), dtype)

    def param(self, value: Any, type_: str, what: str) -> Any:
        if type_ == "int":
            return self.typed(value, int, what)
        if type_ == "float":
            result = decode_scalar(value, what)
            if isinstance(result, bool) or not isinstance(result, (int, float)):
                raise self.fail(f"{what}: expected a float, got {value!r}")
            return float(result)
        if type_ == "scalar":
            result = decode_scalar(value, what)
            if not isinstance(result, (bool, int, float)):
                raise self.fail(f"{what}: expected a bool, int or float, got {value!r}")
            return result
        if type_ == "bool":
            return self.typed(value, bool, what)
        if type_ == "str":
            return self.typed(value, str, what)
        if type_ == "dtype":
            if value not in DTYPES:
                raise self.fail(f"{what}: unknown dtype {value!r}")
            return value
        # sizes in params may be negative where the primitive says so (slice bounds count from the end): its
        # shape rule, run when the graph is type-checked, is the judge
        if type_ == "dim":
            return self.dim(value, what, negative=True)
        items = self.typed(value, list, what)
        if type_ == "dims":
            return tuple(self.dim(v, what, negative=True) for v in items)
        if type_ == "ints":
            return tuple(self.typed(v, int, what) for v in items)
        if type_ == "int_pairs":
            pairs = []
            for pair in items:
                if not (isinstance(pair, list) and len(pair) == 2):
                    raise self.fail(f"{what}: expected [int, int] pairs, got {pair!r}")
                pairs.append((self.typed(pair[0], int, what), self.typed(pair[1], int, what)))
            return tuple(pairs)
        raise self.fail(f"{what}: unknown param type {type_!r}")  # pragma: no cover - the table is checked

    def literal(self, entry: Any, what: str) -> Literal:
        if not isinstance(entry, dict) or len(entry) != 1:
            raise self.fail(f"{what}: malformed literal {entry!r}")
        (kind, body), = entry.items()
        if kind == "bool":
            return Literal(self.typed(body, bool, what))
        if kind == "int":
            return Literal(self.typed(body, int, what))
        if kind == "float":
            value = decode_scalar(body, what)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.fail(f"{what}: malformed float literal {body!r}")
            return Literal(float(value))
        if kind == "dim":
            d = self.dim(body, what)
            return Literal(d)
        raise self.fail(f"{what}: unknown literal kind {kind!r}")

    def primitives(self, table: Any) -> None:
        if not isinstance(table, dict):
            raise self.fail("the primitive table is not a JSON object")
        for name, version in table.items():
            declared = PRIMITIVES.get(name)
            if declared is None:
                raise self.fail(f"the program uses primitive {name!r}, which this tensorplay does not have (it was "
                                "written by a newer or different tensorplay); refusing to load it")
            if version != declared.version:
                raise self.fail(f"the program needs primitive {name!r} version {version}; this tensorplay implements "
                                f"version {declared.version}")

    def graph(self, data: Mapping[str, Any]) -> tuple[Graph, dict[str, Var]]:
        graph = Graph()
        values: dict[str, Var] = {}
        for i, entry in enumerate(self.typed(data["inputs"], list, "inputs")):
            what = f"inputs[{i}]"
            self.fields(entry, {"name", "kind", "dtype", "shape"}, {"index_bound"}, what)
            name = self.typed(entry["name"], str, f"{what} name")
            if entry["kind"] not in INPUT_KINDS or entry["kind"] == "captured":
                raise self.fail(f"{what}: unknown input kind {entry['kind']!r}")
            if name in values:
                raise self.fail(f"{what}: the name {name!r} is used twice")
            var = graph.add_input(name, self.aval(entry, what), entry["kind"])
            if var.name != name:
                raise self.fail(f"{what}: the name {name!r} is used twice")
            if "index_bound" in entry:
                var.meta["index_bound"] = self.typed(entry["index_bound"], int, f"{what} index_bound")
            values[name] = var
        used = self.typed(data["primitives"], dict, "primitives")
        for i, entry in enumerate(self.typed(data["nodes"], list, "nodes")):
            what = f"nodes[{i}]"
            self.fields(entry, {"target", "inputs", "params", "output", "location"}, set(), what)
            target = entry["target"]
            if not isinstance(target, str) or target not in PRIMITIVES:
                raise self.fail(f"{what}: unknown primitive {target!r}")
            if target not in used:
                raise self.fail(f"{what}: primitive {target!r} is missing from the program's primitive table")
            what = f"{what} ({target})"
            declared = PRIMITIVES[target]
            params_in = self.typed(entry["params"], dict, f"{what} params")
            unknown = sorted(set(params_in) - set(declared.param_names))
            if unknown:
                raise self.fail(f"{what}: unknown param(s) {unknown}; {target} takes "
                                f"{', '.join(declared.param_names) or 'none'}")
            params: dict[str, Any] = {}
            for q in declared.params:
                if q.name in params_in:
                    params[q.name] = self.param(params_in[q.name], q.type, f"{what} param {q.name}")
                elif q.required:
                    raise self.fail(f"{what}: missing required param {q.name!r}")
                else:
                    params[q.name] = q.default
            inputs: list[Any] = []
            for k, item in enumerate(self.typed(entry["inputs"], list, f"{what} inputs")):
                if item is None:
                    inputs.append(None)
                elif isinstance(item, dict) and set(item) == {"value"}:
                    source = values.get(item["value"]) if isinstance(item["value"], str) else None
                    if source is None:
                        raise self.fail(f"{what}: input {k} reads {item['value']!r}, which is not defined before it")
                    inputs.append(source)
                elif isinstance(item, dict) and set(item) == {"literal"}:
                    inputs.append(self.literal(item["literal"], f"{what} input {k}"))
                else:
                    raise self.fail(f"{what}: malformed input {item!r}")
            out = self.fields(entry["output"], {"name", "dtype", "shape"}, set(), f"{what} output")
            location = entry["location"]
            loc = None
            if location is not None:
                if not (isinstance(location, list) and len(location) == 3 and isinstance(location[0], str)
                        and isinstance(location[1], int) and isinstance(location[2], str)):
                    raise self.fail(f"{what}: malformed location {location!r}")
                loc = Location(location[0], location[1], location[2])
            node = graph.append(target, inputs, params, self.aval(out, f"{what} output"), loc)
            name = self.typed(out["name"], str, f"{what} output name")
            if name in values:
                raise self.fail(f"{what}: the value name {name!r} is defined twice")
            node.out.meta["name"] = name
            values[name] = node.out
        graph.outputs = [self._value(values, n, "outputs") for n in self.typed(data["outputs"], list, "outputs")]
        mutations: list[tuple[Var, Var | Literal]] = []
        for item in self.typed(data["mutations"], list, "mutations"):
            if not (isinstance(item, list) and len(item) == 2):
                raise self.fail(f"mutations: malformed entry {item!r}")
            mutations.append((self._value(values, item[0], "mutations"), self._value(values, item[1], "mutations")))
        graph.mutations = mutations
        from tensorplay.interpreters.graph.typecheck import GraphTypeError, typecheck
        try:
            typecheck(graph)
        except GraphTypeError as error:
            raise self.fail(f"the graph is inconsistent: {error}") from None
        return graph, values

    def _value(self, values: Mapping[str, Var], name: Any, what: str) -> Var:
        if not isinstance(name, str) or name not in values:
            raise self.fail(f"{what}: {name!r} is not a value of the graph")
        return values[name]

    def signature(self, data: Any, graph: Graph) -> ExportGraphSignature:
        self.fields(data, {"inputs", "outputs"}, set(), "signature")
        inputs = []
        for i, entry in enumerate(self.typed(data["inputs"], list, "signature inputs")):
            self.fields(entry, {"kind", "arg", "target", "persistent"}, set(), f"signature inputs[{i}]")
            try:
                inputs.append(InputSpec(InputKind(entry["kind"]), TensorArgument(str(entry["arg"])), entry["target"],
                                        entry["persistent"]))
            except ValueError as error:
                raise self.fail(f"signature inputs[{i}]: {error}") from None
        outputs = []
        for i, entry in enumerate(self.typed(data["outputs"], list, "signature outputs")):
            self.fields(entry, {"kind", "arg", "target"}, set(), f"signature outputs[{i}]")
            try:
                outputs.append(OutputSpec(OutputKind(entry["kind"]), TensorArgument(str(entry["arg"])),
                                          entry["target"]))
            except ValueError as error:
                raise self.fail(f"signature outputs[{i}]: {error}") from None
        names = [str(p.name) for p in graph.inputs]
        if [s.arg.name for s in inputs] != names:
            raise self.fail(f"the signature's inputs {[s.arg.name for s in inputs]} are not the graph's {names}")
        flat = [value_name(v) for _, v in graph.mutations if isinstance(v, Var)] + \
            [value_name(v) for v in graph.outputs if isinstance(v, Var)]
        if [s.arg.name for s in outputs] != flat:
            raise self.fail(f"the signature's outputs {[s.arg.name for s in outputs]} are not the graph's {flat}")
        return ExportGraphSignature(inputs, outputs)

    def tensor(self, arrays: Mapping[str, np.ndarray[Any, Any]], name: str, entry: Any, what: str
               ) -> np.ndarray[Any, Any]:
        self.fields(entry, {"dtype", "shape", "sha256"}, {"role", "parameter", "requires_grad", "dim_order"}, what)
        array = arrays.get(name)
        if array is None:
            raise self.fail(f"{what}: the tensor is missing")
        if array.dtype.name != entry["dtype"] or list(array.shape) != entry["shape"]:
            raise self.fail(f"{what}: expected {entry['dtype']}{entry['shape']}, got {array.dtype.name}"
                            f"{list(array.shape)}")
        if checksum(array) != entry["sha256"]:
            raise self.fail(f"{what}: the tensor does not match the program's checksum (corrupted, tampered with, "
                            "or from another program)")
        try:
            return with_dim_order(array, entry.get("dim_order"))
        except (ValueError, TypeError):
            raise self.fail(f"{what}: malformed dim_order {entry.get('dim_order')!r}") from None

    def state(self, table: Any, arrays: Mapping[str, Mapping[str, np.ndarray[Any, Any]]]
              ) -> tuple[dict[str, Any], dict[str, Any]]:
        self.fields(table, {"state_dict", "constants", "example_inputs"}, set(), "tensors")
        out: list[dict[str, Any]] = []
        for role in ("state_dict", "constants"):
            entries = self.typed(table[role], dict, f"tensors {role}")
            extra = sorted(set(arrays[role]) - set(entries))
            if extra:
                raise self.fail(f"{role}: tensors {extra} are not in the program's table")
            tensors: dict[str, Any] = {}
            for name, entry in entries.items():
                array = self.tensor(arrays[role], name, entry, f"{role} tensor {name!r}")
                if entry.get("parameter") is True:
                    from tensorplay.nn.parameter import Parameter
                    tensors[name] = Parameter(array, requires_grad=entry.get("requires_grad") is True)
                else:
                    tensors[name] = eager.wrap(array)
            out.append(tensors)
        return out[0], out[1]

    def examples(self, tree: Any, table: Any, arrays: Mapping[str, np.ndarray[Any, Any]]
                 ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        if tree is None:
            return None
        entries = self.typed(table, dict, "tensors example_inputs")
        if not arrays:  # the example inputs were left out: the program works without them
            return None
        checked = {name: self.tensor(arrays, name, entry, f"example input {name!r}") for name, entry in entries.items()}
        value = _Reader(checked, self.where).node(tree)
        if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], tuple)
                and isinstance(value[1], dict)):
            raise self.fail("example_inputs: expected [args, kwargs]")
        return value[0], value[1]

    def program(self, data: dict[str, Any], arrays: Mapping[str, Mapping[str, np.ndarray[Any, Any]]]
                ) -> ExportedProgram:
        check_schema(data.get("schema", ""), SCHEMA, self.where, "program")
        self.fields(data, _PROGRAM_FIELDS, set(), "the program")
        self.primitives(data["primitives"])
        try:
            graph, _ = self.graph(data)
        except RecursionError:
            raise self.fail("the program is nested too deeply") from None
        signature = self.signature(data["signature"], graph)
        dims: dict[str, DimInfo] = {}
        for i, entry in enumerate(self.typed(data["dims"], list, "dims")):
            self.fields(entry, {"name", "min", "max", "kind", "declared_at", "hint", "note"}, set(), f"dims[{i}]")
            try:
                info = DimInfo(str(entry["name"]), self.typed(entry["min"], int, "dim min"),
                               None if entry["max"] is None else self.typed(entry["max"], int, "dim max"),
                               str(entry["kind"]), str(entry["declared_at"]), self.typed(entry["hint"], int, "hint"),
                               str(entry["note"]))
            except TypeError as error:
                raise self.fail(f"dims[{i}]: {error}") from None
            dims[info.name] = info
        missing = sorted(graph.symbols - set(dims))
        if missing:
            raise self.fail(f"the graph uses dims {missing} that the program does not declare")
        call = self.fields(data["call"], {"names", "keyword", "in_tree", "out_tree"}, {"defaults"}, "call")
        defaults: dict[str, Any] = {}
        for item in self.typed(call.get("defaults", []), list, "call defaults"):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                raise self.fail(f"call defaults: malformed entry {item!r}")
            defaults[item[0]] = decode_scalar(item[1], f"{self.where}: call defaults")
        in_tree = structure_from_json(call["in_tree"], f"{self.where}: call in_tree")
        if in_tree is None:
            raise self.fail("call: the argument structure is missing")
        call_spec = CallSpec([str(n) for n in self.typed(call["names"], list, "call names")],
                             {str(n) for n in self.typed(call["keyword"], list, "call keyword")}, in_tree,
                             structure_from_json(call["out_tree"], f"{self.where}: call out_tree"), defaults)
        calls = [self.module_call(e, i) for i, e in enumerate(self.typed(data["module_calls"], list, "module_calls"))]
        state, constants = self.state(data["tensors"], arrays)
        examples = self.examples(data["example_inputs"], data["tensors"]["example_inputs"], arrays["example_inputs"])
        shapes = {str(p.name): tuple(p.shape) for p in graph.user_inputs}
        program = ExportedProgram(graph, signature, state, constants, dims, call_spec, example_inputs=examples,
                                  module_call_graph=calls, constraints=ShapeSpec(shapes, dims).constraints(),
                                  name=str(data["name"]))
        for spec in signature.input_specs:
            if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR) and \
                    str(spec.target) not in state and str(spec.target) not in constants:
                raise self.fail(f"input {spec.arg.name!r} ({spec.kind.value}) has no tensor")
        return program

    def module_call(self, entry: Any, i: int) -> ModuleCallEntry:
        what = f"module_calls[{i}]"
        self.fields(entry, {"path", "parent", "inputs", "outputs", "in_structure", "out_structure", "module_type",
                            "defines"}, set(), what)
        return ModuleCallEntry(str(entry["path"]), entry["parent"] if isinstance(entry["parent"], int) else None,
                               [str(n) for n in self.typed(entry["inputs"], list, what)],
                               structure_from_json(entry["in_structure"], f"{self.where}: {what}"),
                               [str(n) for n in self.typed(entry["outputs"], list, what)],
                               structure_from_json(entry["out_structure"], f"{self.where}: {what}"),
                               str(entry["module_type"]), [str(n) for n in self.typed(entry["defines"], list, what)])



__all__ = ["PROGRAM_KIND", "SCHEMA", "SerializedArtifact", "deserialize", "load", "program_json", "save", "serialize",
           "structure_from_json", "structure_to_json"]
