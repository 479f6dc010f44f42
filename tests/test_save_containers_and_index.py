"""``tp.load`` returns what ``tp.save`` saved: an ``OrderedDict`` (what ``state_dict()`` returns) stays an
``OrderedDict`` in its order, as ``torch.load`` gives it back, and an ``Index`` tensor keeps its bound. Both are
recorded in the file's tree, which the header checksum covers, so changing either is refused; files of
schema 1.1 (``tests/fixtures/tensors_v1_1.safetensors``) load as they did."""

from __future__ import annotations

import io
import json
import struct
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.export import FileFormatError
from tensorplay.index import Index
from tests.fixtures.tensors_fixture import FIXTURE, expected


def _round_trip(obj: Any) -> Any:
    buffer = io.BytesIO()
    tp.save(obj, buffer)
    return tp.load(io.BytesIO(buffer.getvalue()))


def _torch_round_trip(obj: Any) -> Any:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _names(n: int, seed: int) -> list[Any]:
    """``n`` distinct keys in an order that is neither sorted nor insertion-by-length: dotted, unicode,
    long, with separators, and ints."""
    rng = np.random.default_rng(seed)
    pool = [f"layer{i}.weight" if i % 4 == 0 else f"blöck_{i}.β" if i % 4 == 1 else i * 7 - 3 if i % 4 == 2
            else "k" * (i % 50 + 1) + f"#{i}" for i in range(n)]
    return [pool[i] for i in rng.permutation(n)]


SIZES = [0, 1, 2, 3, 7, 33, 257]


@pytest.mark.parametrize("n", SIZES)
def test_an_ordered_dict_loads_back_as_one_in_its_order(n: int) -> None:
    keys = _names(n, n)
    arrays = {k: np.arange(i + 1, dtype=np.float32) * 0.5 - i for i, k in enumerate(keys)}
    saved = OrderedDict((k, tp.tensor(a)) for k, a in arrays.items())
    back = _round_trip(saved)
    want = _torch_round_trip(OrderedDict((k, torch.tensor(a)) for k, a in arrays.items()))
    assert type(back) is type(want) is OrderedDict
    assert list(back) == list(want) == keys
    for k in keys:
        np.testing.assert_array_equal(back[k].numpy(), want[k].numpy())


@pytest.mark.parametrize("n", [0, 1, 5, 40])
def test_plain_dicts_stay_plain_and_nested_ordered_dicts_keep_their_type(n: int) -> None:
    keys = _names(n, 100 + n)
    inner = OrderedDict((k, i) for i, k in enumerate(keys))
    obj = {"plain": {k: float(i) for i, k in enumerate(keys)}, "list": [inner, (OrderedDict(), {})],
           "state": OrderedDict([("z", inner), ("a", {"x": tp.ones(2)})])}
    back = _round_trip(obj)
    want = _torch_round_trip({**obj, "state": OrderedDict([("z", inner), ("a", {"x": torch.ones(2)})])})
    for got, ref in [(back, want), (back["plain"], want["plain"]), (back["list"][0], want["list"][0]),
                     (back["list"][1][0], want["list"][1][0]), (back["list"][1][1], want["list"][1][1]),
                     (back["state"], want["state"]), (back["state"]["z"], want["state"]["z"]),
                     (back["state"]["a"], want["state"]["a"])]:
        assert type(got) is type(ref)
        assert list(got) == list(ref)
    assert back["list"][0] == want["list"][0]


def test_a_module_state_dict_round_trips_as_torch_s_does() -> None:
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    back = _round_trip(model.state_dict())
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    want = _torch_round_trip(tmodel.state_dict())
    assert type(back) is type(want) is OrderedDict and list(back) == list(want)
    model.load_state_dict(back)


INDEX_CASES = [((), 1), ((0,), 3), ((5,), 5), ((2, 3), 7), ((4, 1, 3), 2 ** 40), ((3, 4), 12)]


@pytest.mark.parametrize("shape,bound", INDEX_CASES)
def test_an_index_tensor_loads_back_with_its_bound(shape: tuple[int, ...], bound: int) -> None:
    rng = np.random.default_rng(len(shape))
    values = rng.integers(0, min(bound, 1000), size=shape, dtype=np.int64)
    ids = tp.index(values, bound)
    back = _round_trip({"ids": ids, "view": ids.T if len(shape) == 2 else ids, "list": [ids]})
    for got in (back["ids"], back["list"][0]):
        assert isinstance(got, Index) and got.bound == bound and type(got.bound) is int
        assert got.numpy().dtype == np.int64 and not got.requires_grad
        np.testing.assert_array_equal(got.numpy(), values)
    assert isinstance(back["view"], Index) and back["view"].bound == bound
    np.testing.assert_array_equal(back["view"].numpy(), values.T if len(shape) == 2 else values)
    alone = _round_trip(ids)
    assert isinstance(alone, Index) and alone.bound == bound
    np.testing.assert_array_equal(alone.numpy(), values)


def test_an_index_under_a_typed_bound_and_an_int64_tensor_stay_distinct() -> None:
    ids = tp.index(np.array([3, 0, 2]), tp.dims.Vocab(4))
    plain = tp.tensor(np.array([3, 0, 2]))
    back = _round_trip(OrderedDict([("ids", ids), ("plain", plain)]))
    assert isinstance(back["ids"], Index) and back["ids"].bound == 4
    assert type(back["plain"]) is tp.Tensor
    emb = torch.nn.functional.embedding(torch.tensor(back["ids"].numpy()), torch.eye(4))
    np.testing.assert_array_equal(emb.numpy(), np.eye(4, dtype=np.float32)[[3, 0, 2]])


# ---- the information is covered by the header checksum ---------------------------------------------------

def _saved(obj: Any) -> bytes:
    buffer = io.BytesIO()
    tp.save(obj, buffer)
    return buffer.getvalue()


def _split(data: bytes) -> tuple[dict[str, Any], bytes]:
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + size]), data[8 + size:]


def _join(header: dict[str, Any], body: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def _schema(data: bytes) -> str:
    return str(_split(data)[0]["__metadata__"]["tensorplay.schema"])


def _edit_tree(data: bytes, old: str, new: str, reseal: bool = False, **meta: str) -> bytes:
    header, body = _split(data)
    text = header["__metadata__"]["tensorplay.tree"]
    assert old in text
    header["__metadata__"]["tensorplay.tree"] = text.replace(old, new)
    header["__metadata__"].update(meta)
    if reseal:  # what a forger who recomputes the header checksum writes: the values are still checked
        from tensorplay.export.tensorfile import header_digest
        entries = {k: (v["dtype"], v["shape"]) for k, v in header.items() if k != "__metadata__"}
        header["__metadata__"]["tensorplay.header_sha256"] = header_digest(entries, header["__metadata__"])
    return _join(header, body)


def _state() -> Any:
    return OrderedDict([("w", tp.ones(2)), ("ids", tp.index([1, 4], 5))])


EDITS = {
    "ordered_dict read as dict": ('{"ordered_dict"', '{"dict"', {}),
    "bound 5 read as 9": ('"index_bound": 5', '"index_bound": 9', {}),
    "bound dropped": (', "index_bound": 5', "", {}),
    "schema 1.2 read as 1.1": ('"ordered_dict"', '"ordered_dict"', {"tensorplay.schema": "1.1"}),
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=list(EDITS))
def test_changing_the_container_kind_or_the_bound_is_refused(edit: tuple[str, str, dict[str, str]]) -> None:
    old, new, meta = edit
    with pytest.raises(FileFormatError, match="does not match its checksum"):
        tp.load(io.BytesIO(_edit_tree(_saved(_state()), old, new, **meta)))


def test_a_resealed_file_is_still_checked_against_its_bound_and_schema() -> None:
    data = _saved(_state())
    with pytest.raises(FileFormatError, match="index tensor 'ids'.*out of range|index tensor 'ids'.*bound"):
        tp.load(io.BytesIO(_edit_tree(data, '"index_bound": 5', '"index_bound": 3', reseal=True)))
    with pytest.raises(FileFormatError, match="malformed index tensor entry"):
        tp.load(io.BytesIO(_edit_tree(data, '"index_bound": 5', '"index_bound": -1', reseal=True)))
    with pytest.raises(FileFormatError, match="unknown tree entry 'ordered_dict'|malformed tensor entry"):
        tp.load(io.BytesIO(_edit_tree(data, '"ordered_dict"', '"ordered_dict"', reseal=True,
                                      **{"tensorplay.schema": "1.1"})))


def test_files_need_schema_1_2_only_when_they_hold_its_entries() -> None:
    """A file without an ordered dict or an index is written as 1.1, which older versions read; one with either
    says it needs 1.2, so a version reading only 1.1 refuses it with the versions, not a malformed entry."""
    from tensorplay.export.tensorfile import decode
    assert _schema(_saved({"w": tp.ones(2), "n": [1, (2, None)]})) == "1.1"
    for obj in [OrderedDict(), {"ids": tp.index([0], 1)}, [OrderedDict([("a", 1)])]]:
        data = _saved(obj)
        assert _schema(data) == "1.2"
        with pytest.raises(FileFormatError, match=r"needs schema 1\.2; this tensorplay reads up to 1\.1"):
            decode(data, "tensors", (1, 1), "an older tensorplay")


def test_a_file_of_schema_1_1_loads_as_it_did() -> None:
    """Saved by tensorplay at schema 1.1 (``python -m tests.fixtures.tensors_fixture``): the ordered dict it
    held loads as a dict in its order and the index as an int64 tensor, as 1.1 recorded them."""
    path = Path(__file__).parent / "fixtures" / FIXTURE
    assert _schema(path.read_bytes()) == "1.1"
    back = tp.load(path)
    want = expected()
    assert type(back) is dict and list(back) == list(want)
    assert type(back["model"]) is dict and list(back["model"]) == list(want["model"])
    for k, v in want["model"].items():
        assert isinstance(back["model"][k], nn.Parameter)
        got = back["model"][k].detach().numpy()
        assert got.dtype == v.dtype and np.array_equal(got, v)
    assert type(back["ids"]) is tp.Tensor
    np.testing.assert_array_equal(back["ids"].numpy(), want["ids"])
    assert back["step"] == want["step"] and back["lrs"] == want["lrs"]
    assert back["pair"][1] is None
    np.testing.assert_array_equal(back["pair"][0].numpy(), want["pair"][0])
