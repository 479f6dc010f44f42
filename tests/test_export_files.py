"""Saved programs: JSON + safetensors round trips, the fixture of this version, and every refusal."""

from __future__ import annotations

import builtins
import hashlib
import io
import json
import pickle
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import Tensor, nn
from tensorplay.export import Dim, ExportedProgram, FileFormatError, export
from tensorplay.export.files import PROGRAM_KEY, PROGRAM_SHA_KEY
from tensorplay.export.tensorfile import decode, encode
from tests.fixtures.export_fixture import FIXTURE, EXPECTED, FixtureNet, fixture_inputs
from tests.export_helpers import assert_same_bits, assert_same_up_to_cpu_rounding

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any use of pickle while the test runs fails it (numba's own cache is warmed first: it unpickles)."""
    _flat_run(_exported()[1], tp.randn(3, 6), 0)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle was called")

    for name in ("loads", "load"):
        monkeypatch.setattr(pickle, name, refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)


@contextmanager
def no_imports() -> Iterator[None]:
    """Within the block, importing a module that is not loaded yet fails (loading must import nothing named in
    a file)."""
    real_import = builtins.__import__

    def guarded(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level == 0 and name not in sys.modules:
            raise AssertionError(f"loading imported {name!r}")
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = guarded
    try:
        yield
    finally:
        builtins.__import__ = real_import


def _exported() -> tuple[FixtureNet, ExportedProgram]:
    tp.manual_seed(0)
    model = FixtureNet().train()
    args = fixture_inputs(0)
    ep = export(model, (args[0],), dynamic_shapes={"x": {0: Dim("batch", min=2, max=64)}})
    return model, ep


def _flat_run(ep: ExportedProgram, x: Any, key: int) -> tuple[Any, ...]:
    state = {**ep.state_dict, **ep.constants}
    keys = [tp.tensor(np.array([9, key + i])) for i in range(len(ep.graph_signature.random_keys))]
    return ep.run_flat(ep.placeholder_values([x], state, keys))


def _saved(ep: ExportedProgram) -> bytes:
    buffer = io.BytesIO()
    tp.export.save(ep, buffer)
    return buffer.getvalue()


def _load(data: bytes) -> ExportedProgram:
    with no_imports():
        return tp.export.load(io.BytesIO(data))


def test_save_load_and_serialize_round_trips_are_bit_identical(no_pickle: None) -> None:
    _, ep = _exported()
    data = _saved(ep)
    loaded = _load(data)
    artifact = ep.serialize()
    with no_imports():
        deserialized = ExportedProgram.deserialize(artifact)
    assert b'"schema": "1.0"' in artifact.exported_program
    for other in (loaded, deserialized):
        assert str(other.range_constraints) == str(ep.range_constraints) == "{batch: [2, 64]}"
        assert str(other.graph_signature) == str(ep.graph_signature)
        assert other.code == ep.code and str(other.graph) == str(ep.graph)
        assert other.constraints == ep.constraints
        for n in (2, 5, 64):
            x = tp.randn(n, 6)
            for a, b in zip(_flat_run(ep, x, n), _flat_run(other, x, n)):
                assert_same_bits(a, b)
        assert other.example_inputs is not None
        assert_same_bits(other.example_inputs[0][0], ep.example_inputs[0][0])  # type: ignore[index]
    # separate tensors can be given to deserialize, as bytes or as tensors
    again = ExportedProgram.deserialize(artifact.exported_program, dict(ep.state_dict), artifact.constants, None)
    assert again.example_inputs is None
    x = tp.randn(3, 6)
    for a, b in zip(_flat_run(ep, x, 1), _flat_run(again, x, 1)):
        assert_same_bits(a, b)


def test_a_file_path_round_trip_keeps_the_call_time_checks(tmp_path: Path) -> None:
    _, ep = _exported()
    path = tmp_path / "net.tpx"
    tp.export.save(ep, path)
    loaded = tp.export.load(path)
    with pytest.raises(tp.export.InputConstraintError, match=r"batch=1 violates batch >= 2 \(input 'x' axis 0; batch "
                                                             r"declared at .*test_export_files.py"):
        loaded.module()(tp.randn(1, 6))


def test_the_fixture_of_this_version_loads_and_gives_the_same_results(no_pickle: None) -> None:
    """Written by tests/fixtures/export_fixture.py with this version; every later version must load it and give
    these results: the same bits on the machine that wrote it, the same up to the last bits of float rounding on
    another CPU (BLAS and the vector kernels choose their code per processor)."""
    tp.export.load(FIXTURES / FIXTURE)  # the loader's own lazy imports (safetensors) happen here, not below
    with no_imports():
        ep = tp.export.load(FIXTURES / FIXTURE)
        expected = tp.load(FIXTURES / EXPECTED)
    for case in expected["cases"]:
        keys = [tp.tensor(k) for k in case["keys"]]
        state = {**ep.state_dict, **ep.constants}
        outs = ep.run_flat(ep.placeholder_values([case["x"]], state, keys))
        assert len(outs) == len(case["outputs"])
        for got, want in zip(outs, case["outputs"]):
            assert_same_up_to_cpu_rounding(got, want)


def test_the_fixture_matches_the_eager_model_with_its_weights() -> None:
    ep = tp.export.load(FIXTURES / FIXTURE)
    model = FixtureNet().train()
    model.load_state_dict(ep.state_dict)
    module = ep.module()
    for n in (2, 7):
        x = fixture_inputs(n)[0]
        tp.manual_seed(5)
        got = module(x)
        tp.manual_seed(5)
        want = model(x)
        # the file records the batch-norm statistics of the version that wrote it; eager now takes them from
        # shifted values (more exact in float32), so the two agree to float32 rounding, not bit for bit
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
        for name, buffer in model.named_buffers():
            np.testing.assert_allclose(np.asarray(dict(module.named_buffers())[name]), np.asarray(buffer),
                                       rtol=1e-5, atol=1e-6)


# ---- refusals -----------------------------------------------------------------------------------------------

def _tampered(data: bytes, edit: Callable[[dict[str, Any]], None], *, keep_checksum: bool = False) -> bytes:
    """The file with its JSON program edited (and its checksum recomputed unless ``keep_checksum``)."""
    arrays, metadata = decode(data, "program", (1, 0), "test")
    program = json.loads(metadata[PROGRAM_KEY])
    edit(program)
    text = json.dumps(program)
    meta = {PROGRAM_KEY: text,
            PROGRAM_SHA_KEY: metadata[PROGRAM_SHA_KEY] if keep_checksum else hashlib.sha256(text.encode()).hexdigest()}
    return encode(arrays, "program", "1.0", meta)


def _edit_node(target: str, change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def edit(program: dict[str, Any]) -> None:
        change(next(n for n in program["nodes"] if n["target"] == target))
    return edit


@pytest.mark.parametrize("edit, message", [
    (lambda p: p.update(schema="1.3"), r"the program needs schema 1\.3; this tensorplay reads up to 1\.0"),
    (lambda p: p.update(schema="2.0"), r"the program needs schema 2\.0; this tensorplay reads up to 1\.0"),
    (lambda p: p["primitives"].update(matmul=2), r"needs primitive 'matmul' version 2; this tensorplay implements "
                                                  r"version 1"),
    (lambda p: p["primitives"].update(fused_magic=1), r"primitive 'fused_magic', which this tensorplay does not have"),
    (_edit_node("matmul", lambda n: n.update(target="os.system")), r"nodes\[\d+\]: unknown primitive 'os.system'"),
    (_edit_node("layer_norm_last_axis", lambda n: n["params"].update(eps="1e-5")),
     r"param eps: expected a float, got '1e-5'"),
    (_edit_node("reduce_sum", lambda n: n["params"].update(axes=[0.5])), r"param axes: expected int"),
    (_edit_node("reduce_sum", lambda n: n["params"].update(code="__import__('os')")),
     r"unknown param\(s\) \['code'\]; reduce_sum takes axes, keepdims"),
    (_edit_node("matmul", lambda n: n.update(pickle="gASVCgAAAAAAAACMBHBvc3iUjAZzeXN0ZW2Uk5Qu")),
     r"unknown field\(s\) \['pickle'\]"),
    (lambda p: p.update(loader="pickle"), r"the program: unknown field\(s\) \['loader'\]"),
    (_edit_node("matmul", lambda n: n["output"].update(shape=["batch", 99])), "the graph is inconsistent"),
    (_edit_node("matmul", lambda n: n["inputs"].__setitem__(0, {"value": "not_defined_yet"})),
     "reads 'not_defined_yet', which is not defined before it"),
    (lambda p: p["tensors"]["state_dict"]["fc1.weight"].update(sha256="0" * 64),
     r"state_dict tensor 'fc1.weight': the tensor does not match the program's checksum"),
])
def test_a_tampered_program_is_refused(edit: Callable[[dict[str, Any]], None], message: str,
                                       no_pickle: None) -> None:
    _, ep = _exported()
    with pytest.raises(FileFormatError, match=message):
        _load(_tampered(_saved(ep), edit))


def test_a_program_that_does_not_match_its_checksum_is_refused() -> None:
    _, ep = _exported()
    data = _tampered(_saved(ep), lambda p: p.update(name="renamed"), keep_checksum=True)
    with pytest.raises(FileFormatError, match="the program does not match its checksum"):
        _load(data)


@pytest.mark.parametrize("cut", [3, 100, 1000, -1])
def test_a_truncated_program_is_refused(cut: int) -> None:
    _, ep = _exported()
    with pytest.raises(FileFormatError, match="truncated"):
        _load(_saved(ep)[:cut])


def test_pickles_and_foreign_files_are_refused(tmp_path: Path, no_pickle: None) -> None:
    with pytest.raises(FileFormatError, match="pickle stream"):
        _load(b"\x80\x05\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94.")
    with pytest.raises(FileFormatError, match="zip archive"):
        _load(b"PK\x03\x04" + b"\x00" * 64)
    with pytest.raises(FileFormatError, match="pickle stream"):
        ExportedProgram.deserialize(b"\x80\x04K\x01.")
    tensors = io.BytesIO()
    tp.save({"w": tp.randn(2)}, tensors)
    with pytest.raises(FileFormatError, match="this file holds 'tensors', expected 'program'"):
        _load(tensors.getvalue())


def test_tensors_from_another_program_are_refused() -> None:
    _, ep = _exported()
    artifact = ep.serialize()
    tp.manual_seed(99)
    _, other = _exported()
    with tp.no_grad():
        next(iter(other.state_dict.values())).add_(1.0)
    with pytest.raises(FileFormatError, match="does not match the program's checksum"):
        ExportedProgram.deserialize(artifact.exported_program, other.serialize().state_dict, artifact.constants)


def test_serialize_options() -> None:
    _, ep = _exported()
    assert ep.serialize(opset_version={"matmul": 1}, pickle_protocol=2).exported_program
    with pytest.raises(ValueError, match="asks for matmul version 3; this tensorplay implements version 1"):
        ep.serialize(opset_version={"matmul": 3})

    def closure_free(x: Tensor[Any], t: tuple[int, str]) -> Any:
        return x * t[0]

    ep2 = export(closure_free, (tp.randn(2), (3, "label")))
    loaded = ExportedProgram.deserialize(ep2.serialize())
    assert_same_bits(loaded.module()(tp.ones(2), (3, "label")), tp.ones(2) * 3)

    class Odd:
        def __init__(self, k: float) -> None:
            self.k = k

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Odd) and other.k == self.k

    def uses_object(x: Tensor[Any], odd: Odd) -> Any:
        return x * odd.k

    ep3 = export(uses_object, (tp.randn(2), Odd(2.0)))
    with pytest.raises(TypeError, match="cannot save a Odd"):
        ep3.serialize()


def test_unflatten_works_on_a_loaded_program() -> None:
    model, ep = _exported()
    loaded = _load(_saved(ep))
    unflat = tp.export.unflatten(loaded)
    assert [name for name, _ in unflat.named_children()] == [name for name, _ in model.named_children()]


class _Config:
    def __init__(self, k: float) -> None:
        self.k = k


class _Scale(nn.Module):
    def forward(self, x: Tensor[Any], cfg: _Config) -> Tensor[Any]:
        return x * cfg.k


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = _Scale()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: Tensor[Any, Any]) -> Tensor[Any, Any]:
        return self.lin(self.scale(x, _Config(3.0)))


def test_a_submodule_called_with_an_object_runs_inside_its_parent_after_loading() -> None:
    tp.manual_seed(0)
    model = _Outer()
    ep = export(model, (tp.randn(3, 2),))
    loaded = _load(_saved(ep))
    unflat = tp.export.unflatten(loaded)
    x = tp.randn(3, 2)
    assert_same_bits(unflat(x), model(x))
    assert_same_bits(unflat.lin(x), model.lin(x))
    with pytest.raises(tp.GraphCaptureError, match="'scale' cannot run on its own"):
        unflat.scale(x, _Config(3.0))
