"""The primitive table and the registry of pieces: every primitive is complete, the table agrees with
the ``Ops`` protocol, and nothing else keeps its own list of primitives."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import tensorplay as tp
from tensorplay.interpreters.eager.interpreter import missing_kernels
from tensorplay.ops import PRIMITIVE_NAMES, Ops
from tensorplay.primitives import CORE_PIECES, missing_core_pieces, pieces
from tensorplay.spec.table import PARAM_TYPES, PRIMITIVES, REQUIRED, names, primitive
from tests.samples import SAMPLES

ROOT = Path(__file__).resolve().parent.parent


def missing_pieces() -> dict[str, list[str]]:
    """Primitive -> every piece it lacks: the core's, the eager kernel and the test samples."""
    out = {name: list(found) for name, found in missing_core_pieces().items()}
    for name in missing_kernels():
        out.setdefault(name, []).append("eager kernel")
    sampled = {s.prim for s in SAMPLES}
    for name in PRIMITIVES:
        if name not in sampled:
            out.setdefault(name, []).append("samples (tests/samples.py)")
    return out


def test_every_primitive_has_every_piece() -> None:
    missing = missing_pieces()
    message = "\n".join(f"  {name}: {', '.join(found)}" for name, found in sorted(missing.items()))
    assert not missing, "primitives with missing pieces:\n" + message


def test_the_report_names_a_missing_piece() -> None:
    """The registry reports what it cannot find (checked on a primitive whose vjp rule is taken away)."""
    from tensorplay.rules.vjp import VJP_RULES
    rule = VJP_RULES.pop("exp")
    try:
        assert missing_core_pieces() == {"exp": ["vjp rule"]}
        assert pieces("exp").missing() == ["vjp rule"]
    finally:
        VJP_RULES["exp"] = rule
    assert "exp" not in missing_core_pieces()
    assert CORE_PIECES[0] == "protocol method"


def test_unknown_primitive_names_close_matches() -> None:
    with pytest.raises(KeyError, match="did you mean conv_nd"):
        primitive("conv_n")
    with pytest.raises(KeyError, match="no primitive family 'unary_ops'"):
        names("unary_ops")


def test_protocol_signatures_agree_with_the_table() -> None:
    """Each primitive's ``Ops`` method takes the table's inputs positionally and its params as keywords,
    with the table's defaults, in the table's order."""
    assert PRIMITIVE_NAMES == tuple(PRIMITIVES)
    for name, prim in PRIMITIVES.items():
        sig = inspect.signature(getattr(Ops, name))
        params = [p for p in sig.parameters.values() if p.name != "self"]
        keyword = [(p.name, p.default) for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY]
        expected = [(q.name, inspect.Parameter.empty if q.default is REQUIRED else q.default) for q in prim.params]
        assert keyword == expected, name
        positional = [p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                          inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        variadic = [p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL]
        declared = [i.rstrip("?").lstrip("*") for i in prim.inputs]
        assert (variadic if prim.variadic else positional) == declared, name


def test_table_is_well_formed() -> None:
    for prim in PRIMITIVES.values():
        assert prim.version >= 1
        assert all(p.type in PARAM_TYPES for p in prim.params)
        if prim.random:
            assert prim.inputs[0] == "key" and not prim.has_derivative
        if prim.family in ("unary", "binary"):
            assert prim.dtypes, prim.name


def test_every_interpreter_runs_every_primitive() -> None:
    """The eager interpreter, the recorder and the transforms' dispatcher have a method per primitive."""
    from tensorplay.func.tracing import Dispatch
    from tensorplay.interpreters.graph.recorder import Recorder
    for cls in (type(tp.eager), Recorder, Dispatch):
        lacking = [name for name in PRIMITIVES if not callable(getattr(cls, name, None))]
        assert not lacking, (cls.__name__, lacking)


def _primitive_name_lists(source: str) -> list[int]:
    """Lines of tuple, list and set literals holding three or more primitive names."""
    lines = []
    tree = ast.parse(source)
    exported = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and id(node) not in exported:
            named = [e for e in node.elts if isinstance(e, ast.Constant) and e.value in PRIMITIVES]
            if len(named) >= 3:
                lines.append(node.lineno)
    return lines


def test_no_module_keeps_its_own_list_of_primitives() -> None:
    """Lists of primitive names come from the table; a literal tuple of several primitive names in a
    library module is a list that would go stale when a primitive is added."""
    offenders = []
    files = [p for d in ("tensorplay", "spec", "interpreters") for p in sorted((ROOT / d).rglob("*.py"))]
    assert len(files) > 80
    for path in files:
        if path == ROOT / "spec" / "table.py":
            continue  # the declarations themselves
        offenders += [f"{path.relative_to(ROOT)}:{line}" for line in _primitive_name_lists(path.read_text())]
    assert not offenders, offenders


@pytest.mark.parametrize("name", names(vjp_reads_inputs=False))
def test_rules_declared_value_free_do_not_read_input_values(name: str) -> None:
    """``vjp_reads_inputs=False`` is true of the rule: other values of the same shape give the same
    cotangents."""
    import numpy as np

    from tensorplay.rules.vjp import VJP_RULES

    samples = [s for s in SAMPLES if s.prim == name and any(isinstance(a, np.ndarray) and a.dtype.kind == "f"
                                                          for a in s.args)]
    assert samples, name
    for sample in samples[:3]:
        def tensors(fill: float | None) -> tuple[object, ...]:
            return tuple(tp.tensor(np.full_like(a, fill) if fill is not None and a.dtype.kind == "f" else a)
                         if isinstance(a, np.ndarray) else a for a in sample.args)

        inputs, other = tensors(None), tensors(7.25)
        out = getattr(tp.eager, name)(*inputs, **sample.params)
        g = tp.tensor(np.random.default_rng(0).standard_normal(tuple(out.shape)).astype(out.dtype.name))
        first = VJP_RULES[name](tp.eager, g, inputs, out, **sample.params)
        second = VJP_RULES[name](tp.eager, g, other, out, **sample.params)
        for a, b in zip(first, second):
            assert (a is None) == (b is None), sample.id
            if a is not None:
                np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=sample.id)
