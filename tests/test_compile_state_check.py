"""The generated state check (:mod:`tensorplay.compiler.state_check`) gives what a plain loop over the
guards' rules gives, for every kind of reading that passes or fails, and a compiled call still sees each
kind of change it guards."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler.guards import TensorMeta
from tensorplay.compiler.state_check import state_check_function
from tensorplay.compiler.values import static_key
from tensorplay.interpreters.eager.interpreter import dtype_name
from tensorplay.tensor import Tensor


def _reference(metas: list[TensorMeta], recorded: list[Any], objects: list[Any], containers: list[Any],
               reads: list[Any], values: list[Any], now_objects: list[Any]) -> bool:
    """The rules, written out one by one."""
    for meta, now in zip(metas, reads):
        if not isinstance(now, Tensor):
            return False
        data = now._data
        if data.shape != meta.shape or dtype_name(data.dtype) != meta.dtype \
                or now._requires_grad != meta.requires_grad:
            return False
        if meta.has_grad is not None and (now._grad is not None) != meta.has_grad:
            return False
    for was, now in zip(recorded, values):
        if now is not was and static_key(now) != static_key(was):
            return False
    if any(now is not was for was, now in zip(objects, now_objects)):
        return False
    return all(c.holds() for c in containers)


class _Container:
    def __init__(self, ok: bool) -> None:
        self.ok = ok

    def holds(self) -> bool:
        return self.ok


def _tensor(shape: tuple[int, ...], dtype: Any, requires_grad: bool, with_grad: bool) -> Any:
    t = tp.tensor(np.zeros(shape, dtype), requires_grad=requires_grad)
    if with_grad:
        t.grad = tp.tensor(np.ones(shape, dtype))
    return t


def _big_endian() -> Any:
    """A tensor whose payload is big-endian float32: not numpy's own dtype object, but named float32."""
    t = tp.tensor(np.zeros((3, 2), np.float32), requires_grad=True)
    t._data = np.zeros((3, 2), ">f4")
    return t


READINGS = {
    "as recorded": _tensor((3, 2), np.float32, True, False),
    "another shape": _tensor((2, 3), np.float32, True, False),
    "another dtype": _tensor((3, 2), np.float64, True, False),
    "big-endian float32": _big_endian(),
    "no requires_grad": _tensor((3, 2), np.float32, False, False),
    "with a grad": _tensor((3, 2), np.float32, True, True),
    "not a tensor": np.zeros((3, 2), np.float32),
}


@pytest.mark.parametrize("reading", sorted(READINGS))
@pytest.mark.parametrize("has_grad", [None, True, False])
@pytest.mark.parametrize("value_kind", ["same object", "equal copy", "different", "array equal", "array changed"])
def test_the_generated_check_agrees_with_the_rules(reading: str, has_grad: bool | None, value_kind: str) -> None:
    metas = [TensorMeta("float32", (3, 2), True, True, has_grad), TensorMeta("int64", (4,), False, True, None)]
    ints = tp.tensor(np.arange(4))
    recorded_list = [1, 2.5, "a"]
    recorded_array = np.arange(3.0)
    recorded = [recorded_list, recorded_array, True]
    values = {"same object": [recorded_list, recorded_array, True],
              "equal copy": [list(recorded_list), recorded_array.copy(), True],
              "different": [[1, 2.5, "b"], recorded_array, True],
              "array equal": [recorded_list, np.arange(3.0), True],
              "array changed": [recorded_list, np.arange(3.0) + 1, True]}[value_kind]
    opt = object()
    for holds, same_object in itertools.product([True, False], [True, False]):
        containers = [_Container(True), _Container(holds)]
        check = state_check_function(metas, recorded, [opt], containers)
        reads = [READINGS[reading], ints]
        now_objects = [opt if same_object else object()]
        want = _reference(metas, recorded, [opt], containers, reads, values, now_objects)
        assert check(reads, values, now_objects) is want, (reading, has_grad, value_kind, holds, same_object)


def test_a_check_with_nothing_to_check_passes() -> None:
    assert state_check_function([], [], [], [])([], [], []) is True


def test_a_dtype_numpy_does_not_know_is_compared_by_name() -> None:
    check = state_check_function([TensorMeta("not-a-numpy-dtype", (2,), False, True, None)], [], [], [])
    assert check([tp.tensor(np.zeros(2, np.float32))], [], []) is False


def test_compiled_calls_see_each_kind_of_guarded_change() -> None:
    """Through the generated check: a tensor's shape, its dtype, its ``requires_grad`` and a Python value read
    by the function each recompile, and the results match eager."""
    state: dict[str, Any] = {"w": tp.tensor(np.ones((2, 3), np.float32)), "scale": 2.0}

    def f(x: Any) -> Any:
        return (x @ state["w"]).sum() * state["scale"]

    compiled = tp.compile(f)
    x = tp.tensor(np.arange(4.0, dtype=np.float32).reshape(2, 2))
    changes = [("shape", lambda: state.update(w=tp.tensor(np.ones((2, 4), np.float32)))),
               ("dtype", lambda: state.update(w=tp.tensor(np.ones((2, 4), np.float64)))),
               ("requires_grad", lambda: state.update(w=tp.tensor(np.ones((2, 4)), requires_grad=True))),
               ("scale", lambda: state.update(scale=3.0))]
    np.testing.assert_allclose(compiled(x).numpy(), f(x).numpy())
    for label, change in changes:
        change()
        count = compiled.compile_count
        got = compiled(x)
        np.testing.assert_allclose(got.detach().numpy(), f(x).detach().numpy(), err_msg=label)
        assert got.requires_grad == (label in ("requires_grad", "scale")), label
        assert compiled.compile_count == count + 1, label
    np.testing.assert_allclose(compiled(x).detach().numpy(), f(x).detach().numpy())
    assert compiled.compile_count == 5  # no change: the last specialization runs
