"""``x[key] = value`` with a key numpy refuses raises the library's error for that key (what ``x[key]`` raises:
it names the index, the axis and the size), not numpy's bare ``IndexError``, with autograd recording or not;
nothing is written."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import TensorplayError

KEYS: dict[str, Any] = {
    "int out of range": 5, "negative int out of range": -4, "int tensor out of range": np.array([5]),
    "float tensor": np.array([0.0]), "bool mask of another length": np.array([True, False]),
    "too many indices": (0, 0), "slice then int out of range": (slice(None), 7),
}


def _key(raw: Any) -> Any:
    return tp.tensor(raw) if isinstance(raw, np.ndarray) else raw


@pytest.mark.parametrize("name", sorted(KEYS))
@pytest.mark.parametrize("taped", [False, True])
def test_a_bad_key_is_named_and_nothing_is_written(name: str, taped: bool) -> None:
    shape = (3, 4) if name.startswith("slice") else (3,)
    base = tp.tensor(np.arange(float(np.prod(shape))).reshape(shape), requires_grad=taped)
    x = base * 1.0 if taped else base
    before = x.detach().numpy().copy()
    key = _key(KEYS[name])
    with pytest.raises(TensorplayError) as got:
        x[key] = 1.0
    assert "out of bounds for axis" not in str(got.value) and "arrays used as indices" not in str(got.value)
    try:
        with tp.no_grad():
            x[key]
    except TensorplayError as reading:
        assert type(got.value) is type(reading) and str(got.value) == str(reading)
    except IndexError as reading:
        assert str(reading) in str(got.value)
    np.testing.assert_array_equal(x.detach().numpy(), before)
