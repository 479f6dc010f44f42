"""tp.compile guards the Python values a function reads inside containers: lists, tuples, dicts, sets,
nested ones and the attributes of the user's objects held in them, at the path the function reads them
through. Each kind of change is compared with the eager call (the function itself), and an unchanged
state keeps one specialization."""

from __future__ import annotations

import math
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import UnguardedStateWarning
from tensorplay.errors import GraphCaptureError

X = tp.tensor([1.0, -2.0, 3.0])


def _messages(compiled: Any) -> list[str]:
    return [r.message for event in compiled.recompile_reasons for r in event.reasons]


def _same(compiled: Any, fn: Callable[..., Any], *args: Any) -> None:
    """The compiled call gives the eager result (values and dtype)."""
    got = compiled(*args)
    want = fn(*args)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def _steady(compiled: Any, fn: Callable[..., Any], calls: int = 3) -> None:
    """Calls with nothing changed use the specialization compiled last."""
    count = compiled.compile_count
    for _ in range(calls):
        _same(compiled, fn, X)
    assert compiled.compile_count == count


class Holder:
    def __init__(self, scale: float) -> None:
        self.scale = scale


def test_a_float_in_a_closed_over_list() -> None:
    s = [1.5]

    def fn(x: Any) -> Any:
        return x * s[0]

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    _steady(compiled, fn)
    assert compiled.compile_count == 1 and compiled.recompile_reasons == []
    s[0] = 4.0
    _same(compiled, fn, X)
    assert compiled.compile_count == 2
    assert any("closure s[0] was 1.5, now 4.0" in m for m in _messages(compiled)), _messages(compiled)
    assert all(r.fix for event in compiled.recompile_reasons for r in event.reasons)
    _steady(compiled, fn)


CFG: dict[str, Any] = {"k": 2.0}


def _scaled_by_cfg(x: Any) -> Any:
    return x * CFG["k"]


def test_a_float_in_a_global_dict() -> None:
    CFG["k"] = 2.0
    compiled = tp.compile(_scaled_by_cfg)
    _same(compiled, _scaled_by_cfg, X)
    _steady(compiled, _scaled_by_cfg)
    CFG["k"] = 3.0
    _same(compiled, _scaled_by_cfg, X)
    assert any("global CFG['k'] was 2.0, now 3.0" in m for m in _messages(compiled))
    _steady(compiled, _scaled_by_cfg)
    assert compiled.compile_count == 2


def test_lists_in_tuples_and_nested_dicts() -> None:
    t = ([1.5], 2.0)
    nested = {"opt": {"lr": 0.5, "steps": [1, 2]}}

    def fn(x: Any) -> Any:
        return x * t[0][0] + nested["opt"]["lr"] * nested["opt"]["steps"][1]

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    _steady(compiled, fn)
    t[0][0] = -1.0
    _same(compiled, fn, X)
    nested["opt"]["lr"] = 0.25
    _same(compiled, fn, X)
    nested["opt"]["steps"][1] = 7
    _same(compiled, fn, X)
    messages = _messages(compiled)
    for text in ("closure t[0][0] was 1.5, now -1.0", "closure nested['opt']['lr'] was 0.5, now 0.25",
                 "closure nested['opt']['steps'][1] was 2, now 7"):
        assert any(text in m for m in messages), (text, messages)
    _steady(compiled, fn)
    assert compiled.compile_count == 4


def test_attributes_of_objects_inside_containers() -> None:
    holders = [Holder(2.0)]
    table = {"h": Holder(0.5)}

    def fn(x: Any) -> Any:
        return x * holders[0].scale + table["h"].scale

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    _steady(compiled, fn)
    holders[0].scale = 3.0
    _same(compiled, fn, X)
    table["h"] = Holder(-1.0)  # another object at the same path: its attribute is read again
    _same(compiled, fn, X)
    messages = _messages(compiled)
    assert any("holders[0].scale was 2.0, now 3.0" in m for m in messages), messages
    assert any("table['h'].scale was 0.5, now -1.0" in m for m in messages), messages
    _steady(compiled, fn)


def test_append_pop_and_len_recompile() -> None:
    s = [1.0, 2.0]

    def total(x: Any) -> Any:
        out = x * len(s)
        for v in s:
            out = out + v
        return out

    compiled = tp.compile(total)
    _same(compiled, total, X)
    _steady(compiled, total)
    s.append(3.0)
    _same(compiled, total, X)
    assert any("closure s: length was 2, now 3" in m for m in _messages(compiled)), _messages(compiled)
    _steady(compiled, total)
    s.pop()
    s.pop()
    _same(compiled, total, X)
    _steady(compiled, total)


def test_keys_added_removed_and_reordered() -> None:
    cfg: dict[str, float] = {"a": 1.0}

    def fn(x: Any) -> Any:
        out = x * cfg.get("b", 10.0)
        for key in cfg:  # the order of the keys decides the order of the additions
            out = out * 0.5 + cfg[key]
        return out

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    _steady(compiled, fn)
    cfg["b"] = 2.0
    _same(compiled, fn, X)
    assert any("closure cfg: key 'b' added" in m for m in _messages(compiled)), _messages(compiled)
    _steady(compiled, fn)
    del cfg["a"]
    cfg["a"] = 1.0  # same entries, another order: the loop adds them in the other order
    _same(compiled, fn, X)
    assert any("closure cfg: the order of its keys changed" in m for m in _messages(compiled)), _messages(compiled)
    del cfg["a"]
    _same(compiled, fn, X)
    assert any("closure cfg: key 'a' removed" in m for m in _messages(compiled)), _messages(compiled)
    _steady(compiled, fn)
    assert compiled.compile_count == 4
    del cfg["b"]
    cfg["a"] = 1.0  # the first state again: its specialization is used
    _steady(compiled, fn)
    assert compiled.compile_count == 4


def test_a_container_rebound_to_another_type_and_entries_of_another_type() -> None:
    s: Any = [2]

    def fn(x: Any) -> Any:
        return x * s[0]

    x = tp.tensor([1, 2, 3])  # an integer tensor: x * 2 stays integer, x * 2.0 does not
    compiled = tp.compile(fn)
    _same(compiled, fn, x)
    s[0] = 2.0
    _same(compiled, fn, x)
    assert any("closure s[0] was 2, now 2.0" in m for m in _messages(compiled)), _messages(compiled)
    s = (2.0,)
    _same(compiled, fn, x)
    assert any("closure s was a list, now a tuple" in m for m in _messages(compiled)), _messages(compiled)


def test_nan_entries_stay_alike_and_sets_are_guarded() -> None:
    s = [math.nan]
    flags = {"double"}

    def fn(x: Any) -> Any:
        return x + s[0] if "nan" in flags else x * (2.0 if "double" in flags else 1.0)

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    s[0] = float("nan")  # another NaN object: alike
    _steady(compiled, fn)
    assert compiled.compile_count == 1
    flags.discard("double")
    _same(compiled, fn, X)
    flags.add("nan")
    out = compiled(X)
    assert np.isnan(out.numpy()).all()
    assert any("closure flags: its elements changed" in m for m in _messages(compiled)), _messages(compiled)


def test_tensors_appended_to_a_list_are_seen() -> None:
    ws = [tp.ones(3)]

    def fn(x: Any) -> Any:
        out = x
        for w in ws:
            out = out * w
        return out

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    ws[0] = tp.full((3,), 2.0)  # a tensor entry rebound: read again, no recompile
    _same(compiled, fn, X)
    assert compiled.compile_count == 1
    ws.append(tp.full((3,), -1.0))
    _same(compiled, fn, X)
    assert any("closure ws: length was 1, now 2" in m for m in _messages(compiled)), _messages(compiled)


class Scaled(tp.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scales = [1.0, 2.0]
        self.options = Holder(0.5)

    def forward(self, x: Any) -> Any:
        return x * self.scales[1] + self.options.scale


def test_containers_and_objects_held_by_a_module() -> None:
    model = Scaled()
    compiled = tp.compile(model)
    _same(compiled, model, X)
    _steady(compiled, model)
    model.scales[1] = 5.0
    _same(compiled, model, X)
    model.options.scale = -3.0
    _same(compiled, model, X)
    messages = _messages(compiled)
    assert any("self.scales[1] was 2.0, now 5.0" in m for m in messages), messages
    assert any("self.options.scale was 0.5, now -3.0" in m for m in messages), messages


class Affine:
    def __init__(self) -> None:
        self.scale = 2.0
        self.shifts = {"b": 1.0}

    def apply(self, x: Any) -> Any:
        return x * self.scale + self.shifts["b"]


def test_a_bound_method_reads_its_objects_values_again() -> None:
    obj = Affine()
    compiled = tp.compile(obj.apply)
    _same(compiled, obj.apply, X)
    obj.scale = 3.0
    _same(compiled, obj.apply, X)
    obj.shifts["b"] = -4.0
    _same(compiled, obj.apply, X)
    messages = _messages(compiled)
    assert any("self.scale was 2.0, now 3.0" in m for m in messages), messages
    assert any("self.shifts['b'] was 1.0, now -4.0" in m for m in messages), messages
    _steady(compiled, obj.apply)


def test_a_mutable_default_argument() -> None:
    def fn(x: Any, s: list[float] = [1.0]) -> Any:  # noqa: B006 - the point of the test
        return x * s[0]

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    fn.__defaults__[0][0] = 6.0  # type: ignore[index]
    _same(compiled, fn, X)
    assert compiled.compile_count == 2


def test_attributes_of_a_users_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tp_user_settings.py").write_text(textwrap.dedent("""
        SCALES = {"k": 2.0}
        OFFSET = 1.0
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import tp_user_settings as settings  # type: ignore[import-not-found]
    try:
        def fn(x: Any) -> Any:
            return x * settings.SCALES["k"] + settings.OFFSET

        compiled = tp.compile(fn)
        _same(compiled, fn, X)
        settings.SCALES["k"] = 4.0
        _same(compiled, fn, X)
        settings.OFFSET = -1.0
        _same(compiled, fn, X)
        messages = _messages(compiled)
        assert any("settings.SCALES['k'] was 2.0, now 4.0" in m for m in messages), messages
        assert any("settings.OFFSET was 1.0, now -1.0" in m for m in messages), messages
    finally:
        sys.modules.pop("tp_user_settings", None)


def test_large_containers_are_guarded_by_value_and_deep_ones_warn() -> None:
    table = [float(i) for i in range(500)]

    def fn(x: Any) -> Any:
        return x * table[321]

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    table[321] = -1.0
    _same(compiled, fn, X)
    assert any("closure table[321] was 321.0, now -1.0" in m for m in _messages(compiled))
    rows = [[float(i)] for i in range(100)]

    def row(x: Any) -> Any:
        return x * rows[5][0]

    with pytest.warns(UnguardedStateWarning, match="closure rows holds 100 entries"):
        tp.compile(row)(X)
    deep: Any = [[[[[[[[2.0]]]]]]]]

    def deepest(x: Any) -> Any:
        return x * deep[0][0][0][0][0][0][0][0]

    with pytest.warns(UnguardedStateWarning, match="more than 6 levels"):
        tp.compile(deepest)(X)
    small = [[3.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a small nested container warns nothing
        tp.compile(lambda x: x * small[0][0] * table[0])(X)


def test_state_changed_by_the_function_itself_is_refused_at_capture() -> None:
    log: list[float] = []

    def fn(x: Any) -> Any:
        log.append(1.0)
        return x * len(log)

    with pytest.raises(GraphCaptureError, match=r"changed the Python state it reads while it was captured: "
                                                r"closure log: length was 0, now 1"):
        tp.compile(fn)(X)


W_NP = np.ones(3, dtype=np.float32)


def _scaled_by_numpy(x: Any) -> Any:
    return x * (W_NP * 2.0)  # numpy arithmetic: its result is baked into the compiled code


def test_numpy_arrays_rebound_or_changed_in_place() -> None:
    global W_NP
    W_NP = np.ones(3, dtype=np.float32)
    compiled = tp.compile(_scaled_by_numpy)
    _same(compiled, _scaled_by_numpy, X)
    _steady(compiled, _scaled_by_numpy)
    W_NP[0] = 5.0
    _same(compiled, _scaled_by_numpy, X)
    assert any("global W_NP was numpy array float32[3] with other values, now changed" in m
               for m in _messages(compiled)), _messages(compiled)
    W_NP = np.full(3, -1.0, dtype=np.float32)
    _same(compiled, _scaled_by_numpy, X)
    table = {"w": np.ones(3, dtype=np.float32)}
    in_dict = tp.compile(lambda x: x * table["w"])
    np.testing.assert_array_equal(in_dict(X).numpy(), X.numpy())
    table["w"] = np.zeros(3, dtype=np.float32)
    np.testing.assert_array_equal(in_dict(X).numpy(), np.zeros(3, dtype=np.float32))


class Settings:
    lr = 0.1
    sizes = [1.0, 2.0]


class Scaler:
    scale = 2.0


def test_class_attributes_read_through_the_class_or_an_instance() -> None:
    Settings.lr, Settings.sizes = 0.1, [1.0, 2.0]
    Scaler.scale = 2.0
    scaler = Scaler()

    def fn(x: Any) -> Any:
        return x * Settings.lr + Settings.sizes[1] + scaler.scale

    compiled = tp.compile(fn)
    _same(compiled, fn, X)
    _steady(compiled, fn)
    Settings.lr = 0.5
    _same(compiled, fn, X)
    Settings.sizes[1] = 7.0
    _same(compiled, fn, X)
    Scaler.scale = 3.0  # read through the instance: its class's attribute
    _same(compiled, fn, X)
    scaler.scale = 10.0  # an instance attribute now shadows it
    _same(compiled, fn, X)
    messages = _messages(compiled)
    for text in ("global Settings.lr was 0.1, now 0.5", "Settings.sizes[1] was 2.0, now 7.0",
                 "type(scaler).scale was 2.0, now 3.0", "closure scaler: attribute 'scale' added"):
        assert any(text in m for m in messages), (text, messages)
    _steady(compiled, fn)
