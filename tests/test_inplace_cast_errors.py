"""An in-place operation whose result type cannot be cast to the tensor's dtype (``int.add_(1.5)``) raises a
``DTypeError`` naming the result type the library's promotion gives (what ``x + other`` would be), the same
wording for every operation, and leaves the tensor unchanged."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import DTypeError

OPS: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "add_": (lambda x, o: x.add_(o), lambda x, o: x + o),
    "sub_": (lambda x, o: x.sub_(o), lambda x, o: x - o),
    "mul_": (lambda x, o: x.mul_(o), lambda x, o: x * o),
    "div_": (lambda x, o: x.div_(o), lambda x, o: x / o),
    "+=": (lambda x, o: x.__iadd__(o), lambda x, o: x + o),
    "*=": (lambda x, o: x.__imul__(o), lambda x, o: x * o),
}
OTHERS: dict[str, tuple[Callable[[], Any], str]] = {  # the operand, and the result type PyTorch's rules give
    "python float": (lambda: 1.5, "float32"), "float32 tensor": (lambda: tp.tensor(np.full(3, 0.5, np.float32)), "float32"),
    "float64 tensor": (lambda: tp.tensor(np.full(3, 0.5)), "float64"),
}


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("other", sorted(OTHERS))
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_the_error_names_the_libraries_result_type(op: str, other: str, dtype: str) -> None:
    in_place, out_of_place = OPS[op]
    x = tp.tensor(np.array([1, 2, 3], dtype=dtype))
    make, result = OTHERS[other]
    operand = make()
    assert out_of_place(x, operand).dtype.name == result
    with pytest.raises(DTypeError) as got:
        in_place(x, operand)
    name = op if op.endswith("_") else {"+=": "add_", "*=": "mul_"}[op]
    assert str(got.value) == f"{name}: result type {result} can't be cast to the tensor's dtype {dtype} in place"
    np.testing.assert_array_equal(x.numpy(), [1, 2, 3])
