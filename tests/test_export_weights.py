"""``tp.save`` / ``tp.load``: tensors and nested state dicts in safetensors, with checksums, no pickle."""

from __future__ import annotations

import io
import json
import pickle
import struct
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.export import FileFormatError
from tensorplay.export.tensorfile import CHECKSUMS_KEY, HEADER_SHA_KEY, SCHEMA_KEY, encode, header_digest, read_header


@pytest.fixture
def no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any use of pickle while the test runs fails it."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle was called")

    for name in ("loads", "load", "dumps", "dump"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


def _bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    tp.save(obj, buffer)
    return buffer.getvalue()


def _load(data: bytes) -> Any:
    return tp.load(io.BytesIO(data))


def _array(t: Any) -> np.ndarray[Any, Any]:
    return np.asarray(t.detach().numpy() if isinstance(t, tp.Tensor) else t)


def test_round_trip_of_every_dtype_and_odd_shapes(no_pickle: None) -> None:
    rng = np.random.default_rng(0)
    values = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64": rng.standard_normal((2, 0, 5)),
        "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
        "i64": np.array(7, dtype=np.int64),
        "b": np.array([True, False, True]),
        "strided": np.arange(12.0).reshape(3, 4).T,
        "special": np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32),
    }
    obj = {k: tp.tensor(v) for k, v in values.items()}
    back = _load(_bytes(obj))
    assert list(back) == list(obj)
    for key, value in values.items():
        got = _array(back[key])
        assert got.dtype == value.dtype and got.shape == value.shape, key
        assert np.array_equal(got, value, equal_nan=True), key
        assert got.tobytes() == np.ascontiguousarray(value).tobytes(), key  # bit-identical (-0.0, nan payloads)


def test_nested_state_with_scalars_parameters_and_arrays(no_pickle: None) -> None:
    param = nn.Parameter(tp.randn(2, 3))
    grad_leaf = tp.randn(4, requires_grad=True)
    obj = {"model": OrderedDict(w=param, b=tp.zeros(3)), "step": 12, "lr": 0.5, "name": "adam", "none": None,
           "inf": float("inf"), "pairs": [(1, tp.ones(2)), ("x", np.arange(3))], 3: grad_leaf}
    back = _load(_bytes(obj))
    assert isinstance(back["model"]["w"], nn.Parameter) and back["model"]["w"].requires_grad
    assert not isinstance(back["model"]["b"], nn.Parameter)
    assert back["step"] == 12 and back["lr"] == 0.5 and back["name"] == "adam" and back["none"] is None
    assert back["inf"] == float("inf")
    assert isinstance(back["pairs"], list) and isinstance(back["pairs"][0], tuple)
    assert isinstance(back["pairs"][1][1], np.ndarray) and np.array_equal(back["pairs"][1][1], np.arange(3))
    assert back[3].requires_grad and np.array_equal(_array(back[3]), _array(grad_leaf))
    np.testing.assert_array_equal(_array(back["model"]["w"]), _array(param))
    # loading gives new storage: writing to it leaves the saved tensors alone
    back["model"]["b"]._data[...] = 5.0
    assert float(_array(obj["model"]["b"]).sum()) == 0.0


def test_state_dict_round_trip_through_a_file(tmp_path: Path, no_pickle: None) -> None:
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    model(tp.randn(6, 4))  # moves the batch-norm statistics
    path = tmp_path / "model.safetensors"
    tp.save(model.state_dict(), path)
    other = nn.Sequential(nn.Linear(4, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))
    other.load_state_dict(tp.load(path))
    for (name, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert np.array_equal(_array(a), _array(b)), name
    # other safetensors readers see the usual names
    header, _, _ = read_header(path.read_bytes(), "test")
    assert set(header) == set(model.state_dict())


def test_a_pickle_stream_is_refused_without_unpickling(no_pickle: None) -> None:
    payload = b"\x80\x04\x95" + b"cos\nsystem\n(S'echo owned'\ntR." + b"\x00" * 16
    with pytest.raises(FileFormatError, match="pickle stream.*never unpickles"):
        _load(payload)


def test_a_torch_save_file_is_refused(tmp_path: Path) -> None:
    import torch
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2)}, path)
    with pytest.raises(FileFormatError, match=r"zip archive \(the torch.save format"):
        tp.load(path)


@pytest.mark.parametrize("cut", [0, 5, 8, 20, -1, -7])
def test_a_truncated_file_is_refused(cut: int) -> None:
    data = _bytes({"w": tp.randn(3, 4), "b": tp.randn(4)})
    with pytest.raises(FileFormatError, match="truncated"):
        _load(data[:cut])


def test_a_changed_byte_is_refused(no_pickle: None) -> None:
    data = bytearray(_bytes({"w": tp.randn(3, 4)}))
    data[-3] ^= 0x40
    with pytest.raises(FileFormatError, match="does not match its checksum"):
        _load(bytes(data))


def test_trailing_bytes_and_foreign_files_are_refused() -> None:
    data = _bytes({"w": tp.randn(2)})
    with pytest.raises(FileFormatError, match="unexpected bytes after the tensor data"):
        _load(data + b"\x00")
    with pytest.raises(FileFormatError, match="not a tensorplay file"):
        _load(b"just some text that is long enough")


def test_safetensors_files_of_other_tools_load_as_a_dict_of_tensors(tmp_path: Path, no_pickle: None) -> None:
    import torch
    from safetensors.torch import save_file
    weights = {"layer.weight": torch.randn(3, 2), "layer.bias": torch.arange(3, dtype=torch.int64)}
    path = tmp_path / "model.safetensors"
    save_file(weights, str(path))
    loaded = tp.load(path)
    assert set(loaded) == set(weights)
    for name, value in weights.items():
        assert np.array_equal(_array(loaded[name]), value.numpy()), name
    with pytest.raises(FileFormatError, match="truncated"):
        _load(path.read_bytes()[:-4])
    save_file({"half": torch.zeros(2, dtype=torch.float16)}, str(path))
    with pytest.raises(FileFormatError, match="tensor 'half' has dtype 'F16'; tensorplay reads"):
        tp.load(path)


def _rewrite_metadata(data: bytes, **changes: str) -> bytes:
    """``data`` with its metadata changed, and its header checksum made again (so the checks after it run)."""
    size = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + size])
    header["__metadata__"].update(changes)
    entries = {k: (v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"}
    header["__metadata__"][HEADER_SHA_KEY] = header_digest(entries, header["__metadata__"])
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data[8 + size:]


def test_a_file_from_a_newer_tensorplay_is_refused_with_the_versions() -> None:
    data = _bytes({"w": tp.randn(2)})
    with pytest.raises(FileFormatError, match=r"needs schema 1\.3; this tensorplay reads up to 1\.2"):
        _load(_rewrite_metadata(data, **{SCHEMA_KEY: "1.3"}))
    with pytest.raises(FileFormatError, match=r"needs schema 2\.0; this tensorplay reads up to 1\.2"):
        _load(_rewrite_metadata(data, **{SCHEMA_KEY: "2.0"}))


def test_a_tampered_checksum_table_or_tree_is_refused() -> None:
    data = _bytes({"w": tp.randn(2)})
    with pytest.raises(FileFormatError, match="checksum table does not match"):
        _load(_rewrite_metadata(data, **{CHECKSUMS_KEY: json.dumps({})}))
    with pytest.raises(FileFormatError, match="does not hold"):
        _load(_rewrite_metadata(data, **{"tensorplay.tree": json.dumps({"tensor": "x", "requires_grad": False,
                                                                        "parameter": False})}))
    # a pickle smuggled into the tree as a value is data, never code
    smuggled = _rewrite_metadata(data, **{"tensorplay.tree": json.dumps({"dict": [["w", {"value": "\x80\x04..."}]]})})
    with pytest.raises(FileFormatError, match="does not mention"):
        _load(smuggled)


def test_extra_tensors_not_in_the_tree_are_refused() -> None:
    blob = encode({"w": np.zeros(2, np.float32), "hidden": np.zeros(1, np.float32)}, "tensors", "1.0",
                  {"tensorplay.tree": json.dumps({"dict": [["w", {"ndarray": "w"}]]})})
    with pytest.raises(FileFormatError, match="does not mention.*hidden"):
        _load(blob)


def test_unsupported_objects_are_refused_when_saving() -> None:
    with pytest.raises(TypeError, match="cannot save a object"):
        tp.save({"w": object()}, io.BytesIO())
    with pytest.raises(TypeError, match="dtype"):
        tp.save(np.zeros(2, np.complex64), io.BytesIO())
