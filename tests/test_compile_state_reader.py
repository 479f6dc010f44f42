"""The guards read every source of a specialization in one generated function
(:class:`tensorplay.compiler.state_reader.StateReader`): each source gets what its own reader returns, now
and after the state changed (attributes rebound or removed, entries deleted, a sub-object replaced), each
step shared by several paths is read once, and a compiled call still sees each kind of change."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.compiler.sources import MISSING, _cell_reader, _const_reader, _step
from tensorplay.compiler.state_reader import StateReader


class _Holder:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _tree() -> tuple[dict[str, Any], Any]:
    inner = _Holder(scale=0.5, items=[1, 2, {"k": "v"}], _parameters={"w": "W"})
    root = {"cfg": _Holder(inner=inner, flag=True), "list": [10, 20, 30], 1: "one"}
    return root, (lambda: root)


def _readers(read_root: Any) -> list[Any]:
    cfg = _step(read_root, None, "cfg")
    inner = _step(cfg, "__dict__", "inner")
    items = _step(inner, "__dict__", "items")
    return [
        _step(cfg, "__dict__", "flag"),
        _step(inner, "__dict__", "scale"),
        _step(items, None, 0),
        _step(_step(items, None, 2), None, "k"),
        _step(inner, "_parameters", "w"),
        _step(inner, "_buffers", "b"),              # a table the object lacks: missing
        _step(read_root, None, 1),
        _step(_step(read_root, None, "list"), None, 5),  # past the end: missing
        _step(read_root, None, "cfg"),               # a reader that is also another's parent
        _step(cfg, "__dict__", "flag"),              # the same path twice, as two readers
        _const_reader(7),
    ]


def _changes(root: dict[str, Any]) -> list[Any]:
    def rebind() -> None:
        root["cfg"].inner.scale = 2.0

    def drop_item() -> None:
        root["cfg"].inner.items.pop(0)

    def replace_object() -> None:
        root["cfg"] = _Holder(inner=_Holder(scale=3.0, items=[], _parameters={}), flag=False)

    def remove_attribute() -> None:
        del root["cfg"].inner

    def not_a_container() -> None:
        root["list"] = 5

    return [rebind, drop_item, replace_object, remove_attribute, not_a_container]


def test_every_source_reads_what_its_own_reader_reads_as_the_state_changes() -> None:
    root, read_root = _tree()
    readers = _readers(read_root)
    together = StateReader(readers)
    assert together() == [r() for r in readers]
    assert together()[5] is MISSING and together()[7] is MISSING
    for change in _changes(root):
        change()
        assert together() == [r() for r in readers], change.__name__
    assert together()[1] is MISSING  # the attribute holding ``inner`` was removed


def test_shared_steps_are_read_once() -> None:
    calls = []
    root, _ = _tree()

    def read_root() -> Any:
        calls.append(1)
        return root

    readers = _readers(read_root)
    together = StateReader(readers)
    calls.clear()
    together()
    assert len(calls) == 1  # every path starts at the root: read once, not once per source
    # distinct steps: the root, cfg, flag, inner, scale, items, items[0], items[2], items[2]['k'], w, b, [1], list, list[5],
    # and the constant; the repeated 'flag' path and 'cfg' read again come from the steps already read
    assert together.n_steps == 15, together.source
    read = [line.split(" = ", 1)[1] for line in together.lines]
    assert len(read) == len(set(read)), together.source  # each object's __dict__ and each table read once too


def test_a_cell_reader_and_unhashable_keys() -> None:
    value = {"a": 1}
    cell = (lambda: value).__closure__[0]  # type: ignore[index]
    key = [1, 2]  # an unhashable key: looked up as given, kept apart from other keys

    class Odd(dict[Any, Any]):
        def __getitem__(self, k: Any) -> Any:
            return "list key" if isinstance(k, list) else super().__getitem__(k)

    holder = {"odd": Odd(x=1)}
    readers = [_step(_cell_reader(cell), None, "a"), _step(_step(lambda: holder, None, "odd"), None, key),
               _step(_step(lambda: holder, None, "odd"), None, "x")]
    together = StateReader(readers)
    assert together() == [1, "list key", 1] == [r() for r in readers]
    value["a"] = 2
    assert together() == [2, "list key", 1]


@pytest.mark.parametrize("change", ["rebind_param", "in_place", "eps", "training", "replace_module"])
def test_compiled_calls_see_each_change_of_module_state(change: str) -> None:
    """A module's parameters and attributes, read through the shared reader, are never stale."""
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.Tanh(), nn.Linear(8, 3))
    x = tp.tensor(np.random.default_rng(0).standard_normal((4, 6)))

    def forward() -> Any:
        return model(x)

    compiled = tp.compile(forward)
    before = compiled().detach().numpy()
    np.testing.assert_allclose(before, forward().detach().numpy(), rtol=1e-6, atol=1e-6)
    first: Any = model[0]
    norm: Any = model[1]
    if change == "rebind_param":
        first.weight = nn.Parameter(tp.tensor(np.ones((8, 6), np.float32)))
    elif change == "in_place":
        with tp.no_grad():
            first.bias.mul_(3.0)
    elif change == "eps":
        norm.eps = 0.5
    elif change == "training":
        model.eval()
        norm.eps = 0.25
    else:
        model[3] = nn.Linear(8, 3)
    want = forward().detach().numpy()
    assert not np.allclose(before, want, rtol=1e-4, atol=1e-4)  # the change shows in the result
    np.testing.assert_allclose(compiled().detach().numpy(), want, rtol=1e-6, atol=1e-6)
