"""Saved files (``tp.save`` and ``tp.export.save``): every valid file loads back, every byte that decides
what loading returns is checked, and malformed metadata is a :class:`FileFormatError` naming the file."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.export import FileFormatError, export


def _saved(obj: Any) -> bytes:
    buffer = io.BytesIO()
    tp.save(obj, buffer)
    return buffer.getvalue()


def _program_bytes() -> bytes:
    """A small saved program (no example inputs, so its header is short enough for every pickle-like
    header length below to be reachable by padding)."""
    fn = eval(compile("lambda x: x * 2.0 + 1.0", "m.py", "eval"))  # a short source name: a short header
    ep = export(fn, (tp.ones(3),))
    ep.example_inputs = None
    buffer = io.BytesIO()
    tp.export.save(ep, buffer)
    return buffer.getvalue()


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    """``(header JSON, tensor bytes)`` of a safetensors file, read by hand (not by the code under test)."""
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + size]), data[8 + size:]


def _join(header: dict[str, Any] | bytes, body: bytes, length: int | None = None) -> bytes:
    """A safetensors file of ``header`` (an object, or its JSON bytes) and ``body``; with ``length``, the header
    is padded with spaces to exactly that many bytes (valid JSON, as the safetensors writer pads)."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    if length is not None:
        assert length >= len(text)
        text = text + b" " * (length - len(text))
    return struct.pack("<Q", len(text)) + text + body


def _with_header_length(data: bytes, length: int) -> bytes:
    (size,) = struct.unpack("<Q", data[:8])
    return _join(data[8:8 + size].rstrip(b" "), data[8 + size:], length)


# ---- 1. a valid file is never mistaken for a pickle or a zip -------------------------------------------------

def test_tp_save_files_with_names_of_every_length_load_back() -> None:
    lengths = set()
    for n in range(1, 240):
        key = "k" * n
        data = _saved({key: tp.ones(2), "b": tp.arange(3)})
        lengths.add(struct.unpack("<Q", data[:8])[0])
        back = tp.load(io.BytesIO(data))
        assert list(back) == [key, "b"], n
        np.testing.assert_array_equal(back[key].numpy(), np.ones(2, np.float32))
    # the header lengths whose first two bytes read like a pickle's protocol marker were among them
    assert {896, 1152, 1408} <= lengths


@pytest.mark.parametrize("high", range(6))
def test_tp_load_reads_a_header_of_every_low_byte(high: int) -> None:
    """Header lengths ``high * 256 + low`` for every low byte: the first two bytes are ``low, high``, so
    ``0x80, 0..5`` looks like a pickle protocol marker to a check reading only the leading bytes."""
    data = _saved({"w": tp.tensor([[1.0, 2.0], [3.0, 4.0]]), "b": tp.tensor([5, 6])})
    natural = len(data[8:8 + struct.unpack("<Q", data[:8])[0]].rstrip(b" "))
    for low in range(256):
        length = high * 256 + low
        if length < natural:
            continue
        back = tp.load(io.BytesIO(_with_header_length(data, length)))
        np.testing.assert_array_equal(back["w"].numpy(), np.array([[1.0, 2.0], [3.0, 4.0]], np.float32))
        np.testing.assert_array_equal(back["b"].numpy(), np.array([5, 6]))


def test_tp_export_load_reads_a_header_of_every_low_byte() -> None:
    data = _program_bytes()
    natural = len(data[8:8 + struct.unpack("<Q", data[:8])[0]].rstrip(b" "))
    assert natural <= 0x580  # so 0x580 (bytes 0x80, 0x05) is among the lengths below
    x = tp.tensor([1.0, -2.0, 0.5])
    for length in range(natural, natural + 256):
        ep = tp.export.load(io.BytesIO(_with_header_length(data, length)))
        np.testing.assert_array_equal(ep.module()(x).numpy(), x.numpy() * 2.0 + 1.0)


@pytest.mark.parametrize("loader", [tp.load, tp.export.load])
def test_pickles_and_zips_are_still_refused_by_their_markers(loader: Any, tmp_path: Any) -> None:
    import pickle

    import torch
    for protocol in range(2, 6):
        with pytest.raises(FileFormatError, match="pickle stream"):
            loader(io.BytesIO(pickle.dumps({"w": [1.0] * 40}, protocol=protocol)))
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(FileFormatError, match="zip archive"):
        loader(path)
    # a header length that is not followed by a JSON object is not a tensorplay file
    with pytest.raises(FileFormatError, match=r"header does not start with '\{'"):
        loader(io.BytesIO(struct.pack("<Q", 4) + b"[1] "))


# ---- 2. the checksums cover everything tp.load builds ---------------------------------------------------------

def _tree(header: dict[str, Any]) -> Any:
    return json.loads(header["__metadata__"]["tensorplay.tree"])


def _set_tree(header: dict[str, Any], tree: Any) -> None:
    header["__metadata__"]["tensorplay.tree"] = json.dumps(tree)


def _swap_keys(header: dict[str, Any]) -> None:
    tree = _tree(header)
    (ka, a), (kb, b), *rest = tree["dict"]
    tree["dict"] = [[ka, b], [kb, a], *rest]
    _set_tree(header, tree)


def _flip(flag: str) -> Any:
    def edit(header: dict[str, Any]) -> None:
        tree = _tree(header)
        tree["dict"][0][1][flag] = not tree["dict"][0][1][flag]
        _set_tree(header, tree)
    return edit


def _rename_key(header: dict[str, Any]) -> None:
    tree = _tree(header)
    tree["dict"][1][0] = "renamed"
    _set_tree(header, tree)


def _set_entry(name: str, **change: Any) -> Any:
    def edit(header: dict[str, Any]) -> None:
        header[name].update(change)
    return edit


def _set_meta(**change: str) -> Any:
    def edit(header: dict[str, Any]) -> None:
        header["__metadata__"].update(change)
    return edit


TAMPERS = {
    "swap two keys' tensors": _swap_keys,
    "flip requires_grad": _flip("requires_grad"),
    "flip parameter": _flip("parameter"),
    "rename a key": _rename_key,
    "float32 read as int32": _set_entry("w", dtype="I32"),
    "[2, 3] read as [3, 2]": _set_entry("w", shape=[3, 2]),
    "[2, 3] read as [6]": _set_entry("w", shape=[6]),
    "int64 read as float64": _set_entry("b", dtype="F64"),
    "a stored scalar changed": lambda h: _set_tree(h, {**_tree(h), "dict": [*_tree(h)["dict"][:2],
                                                                            ["step", {"value": 99}]]}),
}


def _state() -> dict[str, Any]:
    return {"w": tp.randn(2, 3, requires_grad=True), "b": tp.tensor([1, 2, 3, 4]), "step": 7}


@pytest.mark.parametrize("edit", TAMPERS.values(), ids=list(TAMPERS))
def test_tp_load_refuses_a_file_whose_structure_dtypes_shapes_or_flags_were_changed(edit: Any) -> None:
    header, body = _split(_saved(_state()))
    edit(header)
    with pytest.raises(FileFormatError, match=r"tp\.load: the header .* does not match its checksum"):
        tp.load(io.BytesIO(_join(header, body)))


def test_the_untampered_file_loads_with_its_flags() -> None:
    state = _state()
    header, body = _split(_saved(state))
    back = tp.load(io.BytesIO(_join(header, body)))  # rewritten by hand, unchanged: still loads
    assert back["w"].requires_grad and not back["b"].requires_grad and back["step"] == 7
    np.testing.assert_array_equal(back["w"].detach().numpy(), state["w"].detach().numpy())
    assert back["b"].numpy().dtype == np.int64


def test_a_file_whose_header_checksum_was_removed_is_refused() -> None:
    header, body = _split(_saved(_state()))
    del header["__metadata__"]["tensorplay.header_sha256"]
    with pytest.raises(FileFormatError, match=r"the header has no checksum, which files of schema 1\.1 carry"):
        tp.load(io.BytesIO(_join(header, body)))
    # nor does removing the format too make it a foreign file, loaded without checks
    del header["__metadata__"]["tensorplay.format"]
    with pytest.raises(FileFormatError, match="has tensorplay metadata .* but no 'tensorplay.format'"):
        tp.load(io.BytesIO(_join(header, body)))


def _schema_1_0_file(state: dict[str, np.ndarray[Any, Any]]) -> bytes:
    """A ``tp.save`` file as schema 1.0 wrote it, built by hand: the safetensors library's writer, a tree, and a
    checksum table (tensor name -> SHA-256 of its little-endian bytes), no header checksum."""
    import hashlib

    from safetensors.numpy import save
    tree = {"dict": [[k, {"tensor": k, "requires_grad": False, "parameter": False}] for k in state]}
    sums = {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest() for k, v in state.items()}
    return bytes(save(state, metadata={"tensorplay.tree": json.dumps(tree), "tensorplay.format": "tensors",
                                       "tensorplay.schema": "1.0", "tensorplay.checksums": json.dumps(sums)}))


def test_files_of_schema_1_0_still_load() -> None:
    state = {"w": np.arange(6.0, dtype=np.float32).reshape(2, 3), "i": np.array([3, -1], np.int64)}
    back = tp.load(io.BytesIO(_schema_1_0_file(state)))
    assert list(back) == ["w", "i"]
    for k, v in state.items():
        got = back[k].numpy()
        assert got.dtype == v.dtype and got.tobytes() == v.tobytes(), k


# ---- 3. deeply nested JSON is refused before it is decoded --------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def _reseal(header: dict[str, Any]) -> None:
    """Make the header checksum of an edited ``tp.save`` header again, so the checks after it run."""
    from tensorplay.export.tensorfile import header_digest
    meta = header["__metadata__"]
    entries = {k: (v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"}
    meta["tensorplay.header_sha256"] = header_digest(entries, meta)


def _program_with(data: bytes, **change: str) -> bytes:
    header, body = _split(data)
    header["__metadata__"].update(change)
    if "tensorplay.program" in change:
        import hashlib
        header["__metadata__"]["tensorplay.program_sha256"] = hashlib.sha256(change["tensorplay.program"].encode()
                                                                             ).hexdigest()
    return _join(header, body)


def _written(tmp_path: Any, data: bytes) -> Any:
    path = tmp_path / "deep.safetensors"
    path.write_bytes(data)
    return path


def test_tp_load_refuses_deeply_nested_checksums_and_trees_naming_the_file(tmp_path: Any) -> None:
    for key in ("tensorplay.checksums", "tensorplay.tree"):
        header, body = _split(_saved({"w": tp.ones(2)}))
        header["__metadata__"][key] = DEEP
        _reseal(header)
        path = _written(tmp_path, _join(header, body))
        with pytest.raises(FileFormatError, match=rf"tp\.load\('{path}'\): the .* nests 100000 levels deep"):
            tp.load(path)
    # a schema 1.0 file (no header checksum) reads its checksum table the same way
    header, body = _split(_schema_1_0_file({"w": np.ones(2, np.float32)}))
    header["__metadata__"]["tensorplay.checksums"] = DEEP
    path = _written(tmp_path, _join(header, body))
    with pytest.raises(FileFormatError, match=rf"tp\.load\('{path}'\): the checksum table nests 100000 levels"):
        tp.load(path)


def test_tp_export_load_refuses_deeply_nested_json_naming_the_file(tmp_path: Any) -> None:
    for key in ("tensorplay.checksums", "tensorplay.program"):
        path = _written(tmp_path, _program_with(_program_bytes(), **{key: DEEP}))
        with pytest.raises(FileFormatError, match=rf"tp\.export\.load\('{path}'\): the .* nests 100000 levels deep"):
            tp.export.load(path)
    with pytest.raises(FileFormatError, match=r"deserialize: the program nests 100000 levels deep"):
        tp.export.ExportedProgram.deserialize(DEEP.encode())


@pytest.mark.parametrize("loader", [tp.load, tp.export.load])
def test_a_deeply_nested_header_is_refused(loader: Any) -> None:
    header = b'{"__metadata__": {"x": ' + DEEP.encode() + b"}}"
    with pytest.raises(FileFormatError, match="the header nests 100002 levels deep"):
        loader(io.BytesIO(_join(header, b"")))


def test_nesting_within_the_bound_round_trips_and_deeper_is_refused_at_save() -> None:
    obj: Any = tp.ones(1)
    for _ in range(60):
        obj = [obj]
    back = tp.load(io.BytesIO(_saved(obj)))
    for _ in range(60):
        assert isinstance(back, list) and len(back) == 1
        back = back[0]
    np.testing.assert_array_equal(back.numpy(), np.ones(1, np.float32))
    for _ in range(200):
        obj = [obj]
    with pytest.raises(ValueError, match="tp.save: the saved structure nests 521 levels deep"):
        _saved(obj)
