"""``tp.save(obj, path)`` and ``tp.load(path)``: tensors and nested state dicts, with no pickle.

The safe replacement for the ``torch.save`` habit: ``obj`` is a tensor, a numpy array, or dicts, lists and
tuples of them (and of ints, floats, bools, strings and ``None``), e.g. ``model.state_dict()`` or an
optimizer's. The file is a safetensors file (:mod:`tensorplay.export.tensorfile`): the tensors by their
dotted path (``fc1.weight``; a top-level dict of tensors keeps its keys, so other safetensors readers see
the usual names), each with a checksum, and the nesting as JSON metadata (the tree: keys, containers,
scalars, ``requires_grad`` and ``Parameter`` flags). Since schema 1.1 the header has a checksum too, so every
byte that decides what :func:`load` returns (tree, names, dtypes, shapes, flags, data) is checked; files of
schema 1.0 (written before) still load, with the checks they had (their tensors' bytes). Schema 1.2 added
entries for an ``OrderedDict`` (what ``state_dict()`` returns: it loads back as one, in its order) and for an
:class:`~tensorplay.index.Index` tensor's bound (it loads back as an ``Index`` with that bound, its values
checked against it); a file that holds neither is still written as 1.1, so older versions read it. Loading
builds only tensors, arrays, dicts, ordered dicts, lists, tuples and JSON scalars: nothing named in the file
is imported or run::

    tp.save(model.state_dict(), "model.safetensors")
    model.load_state_dict(tp.load("model.safetensors"))
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

import numpy as np

from tensorplay.export.errors import FileFormatError
from tensorplay.errors import TensorplayError
from tensorplay.export.tensorfile import (
    SCHEMA_KEY, check_json_depth, decode, decode_plain, dim_order, encode, parse_json, parse_version, read_bytes,
    with_dim_order, write_bytes,
)
from tensorplay.tensor import Tensor

KIND = "tensors"
SCHEMA = (1, 2)
"""The schema of saved tensors this tensorplay reads up to (``major.minor``): 1.1 added the header's checksum,
which files from 1.1 on must carry; 1.2 the ``ordered_dict`` tree entry and the ``index_bound`` of a tensor
entry. A file is written at the lowest schema that holds its tree (:data:`PLAIN_SCHEMA` without 1.2's
entries), so a version that reads only 1.1 still reads it."""
PLAIN_SCHEMA = (1, 1)
"""The schema of a file whose tree uses no entry newer than 1.1."""
SEALED_FROM = (1, 1)
TREE_KEY = "tensorplay.tree"


def encode_scalar(value: Any, where: str) -> Any:
    """A JSON value for a Python scalar: ints, bools, strings and ``None`` as themselves, finite floats as
    numbers, non-finite floats as ``{"float": "inf"}`` (JSON has no inf or nan)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    raise TypeError(f"{where}: cannot save a {type(value).__name__}; expected a tensor, a numpy array, a dict, "
                    "list or tuple, or an int, float, bool, string or None")


def decode_scalar(value: Any, where: str) -> Any:
    """The inverse of :func:`encode_scalar` (anything else is a :class:`FileFormatError`)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict) and set(value) == {"float"} and value["float"] in ("inf", "-inf", "nan"):
        return float(value["float"])
    raise FileFormatError(f"{where}: unexpected value {value!r}")


class _Writer:
    """Flattens an object into tensors (by dotted path) and a JSON tree, using the entries of schemas up to
    ``newest`` (by default 1.1's: a saved program's example inputs, whose file schema has no newer entries,
    record an ``OrderedDict`` as a dict and an ``Index`` as a tensor)."""

    def __init__(self, newest: tuple[int, int] = PLAIN_SCHEMA) -> None:
        self.arrays: dict[str, np.ndarray[Any, Any]] = {}
        self.newest = newest
        self.schema = PLAIN_SCHEMA
        """The lowest schema holding the entries written so far."""

    def name_for(self, path: list[str]) -> str:
        base = ".".join(path) if path else "tensor"
        name, i = base, 1
        while name in self.arrays or name == "__metadata__":  # the header's own key cannot name a tensor
            name, i = f"{base}#{i}", i + 1
        return name

    def node(self, value: Any, path: list[str]) -> Any:
        where = "tp.save" + (f" ({'.'.join(path)})" if path else "")
        if isinstance(value, Tensor):
            name = self.name_for(path)
            array = self.arrays[name] = np.asarray(value._ops.concrete(value))
            from tensorplay.index import Index
            from tensorplay.nn.parameter import Parameter
            entry: dict[str, Any] = {"tensor": name, "requires_grad": bool(value.requires_grad),
                                     "parameter": isinstance(value, Parameter)}
            if isinstance(value, Index) and self.newest >= (1, 2):
                entry["index_bound"] = int(value.bound)
                self.schema = max(self.schema, (1, 2))
            order = dim_order(array)
            return entry if order is None else {**entry, "dim_order": order}
        if isinstance(value, np.ndarray):
            name = self.name_for(path)
            self.arrays[name] = value
            order = dim_order(value)
            return {"ndarray": name} if order is None else {"ndarray": name, "dim_order": order}
        if isinstance(value, dict):
            items = []
            for key, item in value.items():
                if isinstance(key, bool) or not isinstance(key, (str, int)):
                    raise TypeError(f"{where}: dict keys must be strings or ints, got {key!r}")
                items.append([key, self.node(item, [*path, str(key)])])
            if isinstance(value, OrderedDict) and self.newest >= (1, 2):
                self.schema = max(self.schema, (1, 2))
                return {"ordered_dict": items}
            return {"dict": items}
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            kind = "list" if isinstance(value, list) else "tuple"
            return {kind: [self.node(item, [*path, str(i)]) for i, item in enumerate(value)]}
        return {"value": encode_scalar(value, where)}


def save(obj: Any, f: Any) -> None:
    """Save ``obj`` (a tensor, numpy array, or nested dicts/lists/tuples of them and of JSON scalars) to ``f``,
    a path or a binary file object, as a safetensors file (see the module docstring). Tensors are saved
    with their values (a recorded tensor must have data); ``requires_grad`` and ``Parameter``-ness are kept."""
    writer = _Writer(SCHEMA)
    tree = writer.node(obj, [])
    text = json.dumps(tree)
    check_json_depth(text, "tp.save")
    schema = f"{writer.schema[0]}.{writer.schema[1]}"
    write_bytes(f, encode(writer.arrays, KIND, schema, {TREE_KEY: text}, seal=True))


_TENSOR_FIELDS = frozenset({"tensor", "requires_grad", "parameter"})
_TENSOR_OPTIONAL = {(1, 0): frozenset({"dim_order"}), (1, 2): frozenset({"dim_order", "index_bound"})}


class _Reader:
    def __init__(self, arrays: dict[str, np.ndarray[Any, Any]], where: str,
                 schema: tuple[int, int] = PLAIN_SCHEMA) -> None:
        self.arrays = arrays
        self.used: set[str] = set()
        self.where = where
        self.schema = schema
        self.optional = _TENSOR_OPTIONAL[(1, 2) if schema >= (1, 2) else (1, 0)]

    def array(self, name: Any, order: Any = None) -> np.ndarray[Any, Any]:
        if not isinstance(name, str) or name not in self.arrays or name in self.used:
            raise FileFormatError(f"{self.where}: the tree refers to tensor {name!r}, which the file does not "
                                  "hold (or refers to it twice)")
        self.used.add(name)
        try:
            return with_dim_order(self.arrays[name], order)
        except (ValueError, TypeError):
            raise FileFormatError(f"{self.where}: tensor {name!r} has a malformed dim_order {order!r}") from None

    def node(self, node: Any) -> Any:
        if not isinstance(node, dict) or len(node) == 0:
            raise FileFormatError(f"{self.where}: malformed tree entry {node!r}")
        if "ndarray" in node and set(node) <= {"ndarray", "dim_order"}:
            return self.array(node["ndarray"], node.get("dim_order"))
        if "tensor" in node:
            if not _TENSOR_FIELDS <= set(node) <= _TENSOR_FIELDS | self.optional:
                raise FileFormatError(f"{self.where}: malformed tensor entry {node!r}")
            array = self.array(node["tensor"], node.get("dim_order"))
            if "index_bound" in node:
                return self.index(node, array)
            if node["parameter"] is True:
                from tensorplay.nn.parameter import Parameter
                return Parameter(array, requires_grad=node["requires_grad"] is True)
            from tensorplay.creation import from_numpy
            t = from_numpy(array)
            if node["requires_grad"] is True:
                t.requires_grad_(True)
            return t
        if len(node) != 1:
            raise FileFormatError(f"{self.where}: malformed tree entry {node!r}")
        (kind, body), = node.items()
        if (kind == "dict" or kind == "ordered_dict" and self.schema >= (1, 2)) and isinstance(body, list):
            out: dict[Any, Any] = {} if kind == "dict" else OrderedDict()
            for item in body:
                if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                        and not isinstance(item[0], bool)):
                    raise FileFormatError(f"{self.where}: malformed dict item {item!r}")
                out[item[0]] = self.node(item[1])
            return out
        if kind in ("list", "tuple") and isinstance(body, list):
            items = [self.node(item) for item in body]
            return items if kind == "list" else tuple(items)
        if kind == "value":
            return decode_scalar(body, self.where)
        raise FileFormatError(f"{self.where}: unknown tree entry {kind!r}")

    def index(self, node: dict[str, Any], array: np.ndarray[Any, Any]) -> Any:
        """An ``Index`` tensor: int64 values checked against the bound (never a parameter, never grad)."""
        bound = node["index_bound"]
        if type(bound) is not int or bound < 0 or node["parameter"] is not False or node["requires_grad"] is not False:
            raise FileFormatError(f"{self.where}: malformed index tensor entry {node!r}")
        if array.dtype != np.int64:
            raise FileFormatError(f"{self.where}: index tensor {node['tensor']!r} holds {array.dtype}, not int64")
        from tensorplay.index import index
        try:
            return index(array, bound)
        except TensorplayError as error:
            raise FileFormatError(f"{self.where}: index tensor {node['tensor']!r}: {error}") from None


def load(f: Any) -> Any:
    """Load what :func:`save` wrote to ``f`` (a path or a binary file object): tensors come back as eager
    tensors (``Parameter`` or ``Index`` with its bound where one was saved), numpy arrays as arrays, an
    ``OrderedDict`` as one (files of schema 1.1 and before recorded neither: a plain dict, a plain tensor). A safetensors file written by another
    tool (weights published for PyTorch, say) loads as a dict of tensors by name (its layout is checked; it
    has no checksums). A truncated, tampered, too-new or pickle-bearing file raises
    :class:`~tensorplay.export.errors.FileFormatError`."""
    where = f"tp.load({str(f)!r})" if not hasattr(f, "read") else "tp.load"
    data = read_bytes(f)
    plain = decode_plain(data, where)
    if plain is not None:  # written by another safetensors tool: a dict of tensors by name
        from tensorplay.creation import from_numpy
        return {name: from_numpy(np.array(array, copy=True)) for name, array in plain.items()}
    arrays, metadata = decode(data, KIND, SCHEMA, where, sealed_from=SEALED_FROM)
    tree = parse_json(metadata.get(TREE_KEY, ""), where, "the tree of the saved object")
    reader = _Reader(arrays, where, parse_version(metadata[SCHEMA_KEY], where))
    try:
        result = reader.node(tree)
    except RecursionError:
        raise FileFormatError(f"{where}: the saved object is nested too deeply") from None
    unused = sorted(set(arrays) - reader.used)
    if unused:
        raise FileFormatError(f"{where}: the file holds tensors the tree does not mention: {unused}")
    return result


__all__ = ["SCHEMA", "decode_scalar", "encode_scalar", "load", "save"]
