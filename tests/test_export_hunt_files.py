"""tp.save / tp.load edge cases found by hunting: what is saved comes back (names the safetensors header
reserves, every dtype at 0-d and zero size, non-contiguous layouts, unicode and long names, many entries)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

import tensorplay as tp


def _roundtrip(obj: Any) -> Any:
    buf = io.BytesIO()
    tp.save(obj, buf)
    return tp.load(io.BytesIO(buf.getvalue()))


def _same_array(got: Any, want: np.ndarray[Any, Any]) -> None:
    array = np.asarray(got.numpy())
    assert array.dtype == want.dtype and array.shape == want.shape and array.tobytes() == want.tobytes()


@pytest.mark.parametrize("key", ["__metadata__", "tensorplay.tree", "tensorplay.checksums"])
def test_keys_that_are_header_names_load_back(key: str) -> None:
    """``__metadata__`` is the safetensors header's own key: a tensor of that name made a header with the key
    twice, which tp.load refused ('its metadata is not a table of strings') and safetensors too."""
    a, b = np.arange(3, dtype=np.float32), np.array([[1, 2]], dtype=np.int64)
    out = _roundtrip({key: tp.tensor(a), "nested": {key: tp.tensor(b)}, "__metadata__#1": tp.tensor(b)})
    assert list(out) == [key, "nested", "__metadata__#1"] and list(out["nested"]) == [key]
    _same_array(out[key], a)
    _same_array(out["nested"][key], b)
    _same_array(out["__metadata__#1"], b)


def test_a_bare_tensor_list_and_numpy_arrays_under_the_reserved_name() -> None:
    a = np.arange(4, dtype=np.float64).reshape(2, 2)
    out = _roundtrip({"__metadata__": a, "x": [tp.tensor(a.T)]})
    assert isinstance(out["__metadata__"], np.ndarray) and np.array_equal(out["__metadata__"], a)
    _same_array(out["x"][0], np.ascontiguousarray(a.T))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool"])
def test_every_dtype_at_0d_zero_size_and_strided(dtype: str) -> None:
    base = (np.arange(24) % 3).astype(dtype).reshape(2, 3, 4)
    cases = {"0d": np.array(1, dtype=dtype), "empty": np.zeros((0, 3), dtype=dtype),
             "empty3": np.zeros((3, 0, 0), dtype=dtype), "strided": base[:, ::2, ::-1],
             "permuted": base.transpose(2, 0, 1), "fortran": np.asfortranarray(base)}
    out = _roundtrip({k: tp.tensor(v) for k, v in cases.items()})
    for k, v in cases.items():
        _same_array(out[k], np.array(v, order="C"))


def test_unicode_long_and_many_names() -> None:
    names = ["名字", "é\n\"\\\t", "", "x" * 20000, *(f"k{i}" for i in range(2000))]
    obj = {n: tp.tensor(np.array([i], dtype=np.int32)) for i, n in enumerate(names)}
    out = _roundtrip(obj)
    assert list(out) == names
    for i, n in enumerate(names):
        _same_array(out[n], np.array([i], dtype=np.int32))
