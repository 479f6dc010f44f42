"""Tensors in a safetensors container, with checksums and a versioned header: no pickle anywhere.

Every file tensorplay writes (saved tensors, saved programs) is one safetensors file: an 8-byte
little-endian header length, a JSON header (each tensor's dtype, shape and byte range, plus string
metadata) and the raw little-endian tensor bytes. tensorplay adds to the metadata:

* ``tensorplay.format``: what the file holds (``"tensors"`` or ``"program"``);
* ``tensorplay.schema``: the schema version of that format (``"major.minor"``);
* ``tensorplay.checksums``: a JSON object, tensor name -> SHA-256 of its bytes;
* ``tensorplay.header_sha256`` (in formats that ask for it, see :func:`encode`): the SHA-256 of the rest of
  the header (every other metadata entry, and every tensor's name, dtype and shape; :func:`header_digest`).
  With the checksums of the bytes it covers everything a reader builds from the file.

Reading checks, in order and with a message naming the file: the file is not a pickle stream or a zip
archive (the ``torch.save`` format, which holds pickles); the header is complete, valid JSON and describes
byte ranges that exactly tile the data; the format is the expected one and its schema is not newer than
this tensorplay reads; the header matches its checksum (where it has one, or the format's schema requires one);
every tensor has a checksum, every checksum a tensor, and every checksum matches.
Only then are arrays made (by the ``safetensors`` library, which reads raw buffers and runs no code).

The ``safetensors`` library is a runtime dependency: a small, audited reader and writer of exactly this
layout, used across the ecosystem, so files are readable by other tools.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

from tensorplay.export.errors import FileFormatError

FORMAT_KEY = "tensorplay.format"
SCHEMA_KEY = "tensorplay.schema"
CHECKSUMS_KEY = "tensorplay.checksums"
HEADER_SHA_KEY = "tensorplay.header_sha256"

DTYPE_CODES = {"float32": "F32", "float64": "F64", "int32": "I32", "int64": "I64", "bool": "BOOL"}
"""numpy dtype name -> safetensors dtype code, for the dtypes tensorplay has."""
_ITEM_SIZES = {"F32": 4, "F64": 8, "I32": 4, "I64": 8, "BOOL": 1}
_MAX_HEADER = 100_000_000
MAX_JSON_DEPTH = 256
"""The deepest nesting of arrays and objects a file's JSON may have (header, checksums, tree, program): checked
before decoding, so a deeply nested file is refused with a message, never a ``RecursionError``."""
_BRACKET_STEPS = np.zeros(256, dtype=np.int8)
_BRACKET_STEPS[[ord("["), ord("{")]] = 1
_BRACKET_STEPS[[ord("]"), ord("}")]] = -1
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def checksum(array: np.ndarray[Any, Any]) -> str:
    """SHA-256 (hex) of ``array``'s bytes in C order, little-endian: what the file stores."""
    return hashlib.sha256(_little_endian(array).tobytes()).hexdigest()


def _little_endian(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    array = np.asarray(array, order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return array


def dim_order(array: np.ndarray[Any, Any]) -> list[int] | None:
    """The axes from the slowest-varying to the fastest in memory, when that is not ``0, 1, ..., n-1`` (an
    ``F``-ordered weight, say); ``None`` for a C-ordered array. Files hold C-ordered bytes; loading lays a
    tensor out as it was saved, because BLAS may round differently for another layout."""
    if array.ndim < 2 or array.flags.c_contiguous:
        return None
    order = [int(a) for a in np.argsort([-abs(s) for s in array.strides], kind="stable")]
    return None if order == list(range(array.ndim)) else order


def with_dim_order(array: np.ndarray[Any, Any], order: list[int] | None) -> np.ndarray[Any, Any]:
    """A copy of ``array`` laid out in memory as ``order`` says (see :func:`dim_order`)."""
    if order is None:
        return np.array(array, copy=True, order="C")
    if sorted(order) != list(range(array.ndim)):
        raise ValueError(f"dim_order {order} is not a permutation of the {array.ndim} axes")
    return np.ascontiguousarray(np.transpose(array, order)).transpose(np.argsort(order))


def parse_version(text: str, what: str) -> tuple[int, int]:
    """``"1.2"`` -> ``(1, 2)``; anything else is a :class:`FileFormatError` naming ``what``."""
    parts = text.split(".") if isinstance(text, str) else []
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise FileFormatError(f"{what}: the schema version must look like '1.0', got {text!r}")
    return int(parts[0]), int(parts[1])


def check_schema(found: str, supported: tuple[int, int], what: str, kind: str) -> tuple[int, int]:
    """Refuse a schema this tensorplay cannot read: another major version, or a newer minor version."""
    major, minor = parse_version(found, what)
    if major != supported[0] or minor > supported[1]:
        raise FileFormatError(
            f"{what}: the {kind} needs schema {major}.{minor}; this tensorplay reads up to "
            f"{supported[0]}.{supported[1]}. Load it with a tensorplay that reads schema {major}.{minor}, or save "
            "it again with this one")
    return major, minor


def header_digest(entries: Mapping[str, tuple[str, list[int]]], metadata: Mapping[str, str]) -> str:
    """SHA-256 (hex) of a header: ``entries`` (tensor name -> ``(dtype code, shape)``) and every ``metadata``
    entry but the digest's own, in a canonical JSON form (sorted keys, no spaces, ASCII)."""
    canonical = {"metadata": {k: v for k, v in metadata.items() if k != HEADER_SHA_KEY},
                 "tensors": {name: [code, list(shape)] for name, (code, shape) in entries.items()}}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def encode(arrays: Mapping[str, np.ndarray[Any, Any]], kind: str, schema: str,
           metadata: Mapping[str, str] | None = None, seal: bool = False) -> bytes:
    """The bytes of a file holding ``arrays`` (name -> array of a tensorplay dtype) and ``metadata``. With
    ``seal``, the header's own checksum (:func:`header_digest`) is stored too."""
    from safetensors.numpy import save

    tensors: dict[str, np.ndarray[Any, Any]] = {}
    sums: dict[str, str] = {}
    for name, array in arrays.items():
        array = np.asarray(array)
        if array.dtype.name not in DTYPE_CODES:
            raise TypeError(f"cannot save tensor {name!r} of dtype {array.dtype}: tensorplay saves "
                            f"{', '.join(DTYPE_CODES)}")
        tensors[name] = _little_endian(array)
        sums[name] = checksum(tensors[name])
    meta = dict(metadata or {})
    meta.update({FORMAT_KEY: kind, SCHEMA_KEY: schema, CHECKSUMS_KEY: json.dumps(sums, sort_keys=True)})
    if seal:
        entries = {name: (DTYPE_CODES[a.dtype.name], list(a.shape)) for name, a in tensors.items()}
        meta[HEADER_SHA_KEY] = header_digest(entries, meta)
    return bytes(save(tensors, metadata=meta))


def _refuse(where: str, problem: str) -> FileFormatError:
    return FileFormatError(f"{where}: {problem}")


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in the JSON ``text`` (0 for a scalar), counted without decoding it
    (brackets inside strings do not count)."""
    codes = np.frombuffer(_JSON_STRING.sub("", text).encode("utf-8"), dtype=np.uint8)
    return int(np.cumsum(_BRACKET_STEPS[codes], dtype=np.int64).max(initial=0))


def parse_json(text: str, where: str, what: str) -> Any:
    """The JSON ``text`` (``what`` in the file at ``where``), decoded once its nesting is known to be at most
    :data:`MAX_JSON_DEPTH`; a :class:`FileFormatError` naming the file and ``what`` otherwise, or if it is not
    valid JSON."""
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise _refuse(where, f"{what} nests {depth} levels deep; tensorplay files nest at most {MAX_JSON_DEPTH} "
                             "(the file was tampered with or not written by tensorplay)")
    try:
        return json.loads(text)
    except ValueError as error:
        raise _refuse(where, f"{what} is not valid JSON ({error})") from None


def check_json_depth(text: str, what: str) -> None:
    """At save: refuse (``ValueError``) to write JSON that loading would refuse as too deeply nested."""
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise ValueError(f"{what}: the saved structure nests {depth} levels deep in the file's JSON; a file holds "
                         f"at most {MAX_JSON_DEPTH} (flatten the nesting of the object saved)")


def _could_be_header(data: bytes) -> bool:
    """Whether ``data`` starts as a safetensors file can: a header length this reader accepts, then ``{``.
    (A pickle stream or a zip archive never does: see :func:`sniff`.)"""
    return len(data) >= 9 and struct.unpack("<Q", data[:8])[0] <= _MAX_HEADER and data[8:9] == b"{"


def sniff(data: bytes, where: str) -> None:
    """Refuse, with a clear message, bytes that are a pickle stream or a zip archive (``torch.save``).

    Only bytes that cannot start a safetensors file are judged by those formats' markers: a valid header's
    length may well begin with the bytes of a pickle's protocol marker (``0x80, 0x01`` is a header of 384
    bytes), but its header then starts with ``{`` at byte 8, where a pickle of protocol 4 or 5 holds the
    high bytes of its first frame's length and a zip archive its compression method, neither ever ``{``."""
    if _could_be_header(data):
        return
    if data[:1] == b"\x80" and len(data) > 1 and data[1] <= 5:
        raise _refuse(where, "this is a pickle stream, which can run arbitrary code when loaded; tensorplay never "
                             "unpickles. Save tensors with tp.save and programs with tp.export.save")
    if data[:4] == b"PK\x03\x04":
        raise _refuse(where, "this is a zip archive (the torch.save format, which holds pickles); tensorplay never "
                             "unpickles. Convert the tensors to numpy and save them with tp.save")


def read_header(data: bytes, where: str) -> tuple[dict[str, Any], dict[str, str], int]:
    """``(tensor entries, metadata, data start)`` of a safetensors file, checked to tile the data exactly."""
    sniff(data, where)
    if len(data) < 8:
        raise _refuse(where, f"the file is truncated: {len(data)} bytes, fewer than the 8-byte header length")
    (size,) = struct.unpack("<Q", data[:8])
    if size > _MAX_HEADER:
        raise _refuse(where, f"not a tensorplay file: the header length field says {size} bytes")
    if 8 + size > len(data):
        raise _refuse(where, f"the file is truncated: the header needs {size} bytes, only {len(data) - 8} follow")
    if data[8:9] != b"{":
        raise _refuse(where, f"not a tensorplay file: the header does not start with '{{' (it starts with "
                             f"{bytes(data[8:12])!r})")
    try:
        text = data[8:8 + size].decode("utf-8")
    except UnicodeDecodeError as error:
        raise _refuse(where, f"not a tensorplay file: the header is not UTF-8 ({error})") from None
    header = parse_json(text, where, "the header")
    if not isinstance(header, dict):
        raise _refuse(where, "not a tensorplay file: the header is not a JSON object")
    metadata = header.pop("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _refuse(where, "not a tensorplay file: its metadata is not a table of strings")
    start = 8 + size
    ranges = []
    for name, entry in header.items():
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
            raise _refuse(where, f"tensor {name!r}: malformed header entry {entry!r}")
        code, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if code not in _ITEM_SIZES:
            raise _refuse(where, f"tensor {name!r} has dtype {code!r}; tensorplay reads {', '.join(_ITEM_SIZES)}")
        if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
            raise _refuse(where, f"tensor {name!r}: malformed shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)
                and 0 <= offsets[0] <= offsets[1]):
            raise _refuse(where, f"tensor {name!r}: malformed byte range {offsets!r}")
        if offsets[1] - offsets[0] != int(np.prod(shape, dtype=np.int64)) * _ITEM_SIZES[code]:
            raise _refuse(where, f"tensor {name!r}: byte range {offsets} does not fit shape {shape} of {code}")
        ranges.append((offsets[0], offsets[1], name))
    ranges.sort()
    position = 0
    for begin, end, name in ranges:
        if begin != position:
            raise _refuse(where, f"tensor {name!r}: its bytes start at {begin}, expected {position} (the header "
                                 "was tampered with)")
        position = end
    available = len(data) - start
    if available < position:
        raise _refuse(where, f"the file is truncated: the tensors need {position} bytes of data, only {available} "
                             "are there")
    if available > position:
        raise _refuse(where, f"{available - position} unexpected bytes after the tensor data (the file was tampered "
                             "with or not written by tensorplay)")
    return header, metadata, start


def decode(data: bytes, kind: str, supported: tuple[int, int], where: str,
           sealed_from: tuple[int, int] | None = None) -> tuple[dict[str, np.ndarray[Any, Any]], dict[str, str]]:
    """``(arrays, metadata)`` of a file of ``kind`` written by :func:`encode`, after every check of the
    module docstring (:class:`FileFormatError` on any failure). A file of schema ``sealed_from`` or newer must
    carry the header's checksum (``encode(..., seal=True)``); any file that carries one has it checked."""
    header, metadata, _ = read_header(data, where)
    found_kind = metadata.get(FORMAT_KEY)
    if found_kind is None:
        raise _refuse(where, "not a tensorplay file (a safetensors file without tensorplay's metadata)")
    if found_kind != kind:
        raise _refuse(where, f"this file holds {found_kind!r}, expected {kind!r}")
    version = check_schema(metadata.get(SCHEMA_KEY, ""), supported, where, f"{kind} file")
    _check_seal(header, metadata, version, sealed_from, where)
    sums = parse_json(metadata.get(CHECKSUMS_KEY, ""), where, "the checksum table")
    if not isinstance(sums, dict) or set(sums) != set(header):
        missing = sorted(set(header) - set(sums)) if isinstance(sums, dict) else sorted(header)
        extra = sorted(set(sums) - set(header)) if isinstance(sums, dict) else []
        raise _refuse(where, f"the checksum table does not match the tensors (without a checksum: {missing}; "
                             f"checksum without a tensor: {extra}); the file was tampered with")
    arrays = _arrays(data, where)
    for name, array in arrays.items():
        if checksum(array) != sums[name]:
            raise _refuse(where, f"tensor {name!r} does not match its checksum: the file was corrupted or tampered "
                                 "with")
    return arrays, metadata


def _check_seal(header: Mapping[str, Any], metadata: Mapping[str, str], version: tuple[int, int],
                sealed_from: tuple[int, int] | None, where: str) -> None:
    found = metadata.get(HEADER_SHA_KEY)
    if found is None:
        if sealed_from is not None and version >= sealed_from:
            raise _refuse(where, f"the header has no checksum, which files of schema {version[0]}.{version[1]} "
                                 "carry: the file was tampered with")
        return
    entries = {name: (entry["dtype"], entry["shape"]) for name, entry in header.items()}
    if header_digest(entries, metadata) != found:
        raise _refuse(where, "the header (what the file holds and how: its structure, names, dtypes, shapes and "
                             "flags) does not match its checksum: the file was corrupted or tampered with")


def _arrays(data: bytes, where: str) -> dict[str, np.ndarray[Any, Any]]:
    from safetensors import SafetensorError
    from safetensors.numpy import load

    try:
        return dict(load(data))
    except (SafetensorError, ValueError) as error:
        raise _refuse(where, f"the tensors cannot be read: {error}") from None


def decode_plain(data: bytes, where: str) -> dict[str, np.ndarray[Any, Any]] | None:
    """The tensors of a safetensors file written by another tool (no tensorplay metadata, so no checksums:
    its layout is still checked), by name in file order; ``None`` when the file has tensorplay's metadata."""
    header, metadata, _ = read_header(data, where)
    if FORMAT_KEY in metadata:
        return None
    ours = sorted(k for k in metadata if k.startswith("tensorplay."))
    if ours:
        raise _refuse(where, f"the file has tensorplay metadata ({', '.join(ours)}) but no {FORMAT_KEY!r}: it was "
                             "tampered with")
    arrays = _arrays(data, where)
    order = sorted(header, key=lambda n: header[n]["data_offsets"][0])
    return {name: arrays[name] for name in order}


def read_bytes(path: Any) -> bytes:
    """The whole file at ``path`` (a path or a binary file object)."""
    if hasattr(path, "read"):
        data = path.read()
        if not isinstance(data, bytes):
            raise TypeError(f"expected a binary file, got one that reads {type(data).__name__}")
        return data
    with open(path, "rb") as handle:
        return handle.read()


def write_bytes(path: Any, data: bytes) -> None:
    """Write ``data`` to ``path`` (a path or a binary file object)."""
    if hasattr(path, "write"):
        path.write(data)
        return
    with open(path, "wb") as handle:
        handle.write(data)


__all__ = ["CHECKSUMS_KEY", "DTYPE_CODES", "FORMAT_KEY", "HEADER_SHA_KEY", "MAX_JSON_DEPTH", "SCHEMA_KEY", "check_schema", "checksum",
           "check_json_depth", "decode", "decode_plain", "dim_order", "encode", "header_digest", "json_depth",
           "parse_json", "parse_version", "read_bytes", "read_header", "sniff", "with_dim_order",
           "write_bytes"]
