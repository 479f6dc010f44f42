"""Dynamic shapes at export: declaring dims, requirements that contradict them (with fixes), call-time checks."""

from __future__ import annotations

import json
from typing import Any, NewType

import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import Tensor, nn
from tensorplay.export import (
    AdditionalInputs, Constraint, ConstraintViolationError, Dim, EqualityConstraint, FromAnnotations,
    InputConstraintError, ShapesCollection, SuggestedFix, apply_fixes, dims, export,
)
from tests.export_helpers import assert_same_bits


# ---- declaring dims -------------------------------------------------------------------------------------------

def test_dim_validation_and_derived_dims() -> None:
    with pytest.raises(ValueError, match="identifier"):
        Dim("not a name")
    with pytest.raises(ValueError, match="min must be an int >= 0"):
        Dim("n", min=-1)
    with pytest.raises(ValueError, match="max must be an int >= min"):
        Dim("n", min=5, max=4)
    d = Dim("d", min=1, max=10)
    derived = 2 * d + 1
    assert derived.name == "2*d + 1" and derived.root is d and (derived.scale, derived.offset) == (2, 1)
    assert (d - 1).name == "d - 1" and ((d + 1) * 3).name == "3*d + 3"
    assert repr(Dim.AUTO(min=2)) == "Dim.AUTO(min=2)" and repr(Dim.STATIC) == "Dim.STATIC"
    with pytest.raises(TypeError, match="STATIC takes no bounds"):
        Dim.STATIC(min=1)
    a, b = dims("a b", max=8)
    assert (a.name, b.name, a.max, b.max) == ("a", "b", 8, 8)
    with pytest.raises(ValueError, match="at least two"):
        EqualityConstraint((("x", 0),))


def test_no_size_is_special_the_domain_is_what_is_declared() -> None:
    def f(x: Tensor[Any, Any], y: Tensor[Any, Any]) -> Tensor[Any, Any]:
        return (x * 2.0 + y).sum(-1)

    batch = Dim("batch", min=0, max=16)
    ep = export(f, (tp.randn(1, 3), tp.randn(1, 3)), dynamic_shapes=({0: batch}, {0: batch}))
    assert str(ep.range_constraints) == "{batch: [0, 16]}"
    for n in (0, 1, 2, 16):
        x, y = tp.randn(n, 3), tp.randn(n, 3)
        assert_same_bits(ep.module()(x, y), f(x, y))
    with pytest.raises(InputConstraintError, match=r"batch=17 violates batch <= 16 \(input 'x' axis 0; batch declared at "
                                                    r".*test_export_dynamic.py"):
        ep.module()(tp.randn(17, 3), tp.randn(17, 3))


def test_call_time_checks_name_the_dim_and_where_it_was_declared() -> None:
    def f(x: Tensor[Any, Any, Any], y: Tensor[Any, Any]) -> Tensor[Any, Any, Any]:
        return x + y

    seq = Dim("Seq", min=2, max=4096)
    ep = export(f, (tp.randn(3, 5, 4), tp.randn(5, 4)), dynamic_shapes={"x": {1: seq}, "y": {0: seq}})
    declared = f"Seq declared at {seq.declared_at}"
    with pytest.raises(InputConstraintError, match=r"Seq=1 violates Seq >= 2 \(input 'x' axis 1; ") as info:
        ep.module()(tp.randn(3, 1, 4), tp.randn(1, 4))
    assert declared in str(info.value)
    with pytest.raises(InputConstraintError, match=r"input 'y' axis 0 has Seq = 6, so Seq=6, but input 'x' axis 1 gives "
                                                    r"Seq=5: the sizes that share dim Seq must agree"):
        ep.module()(tp.randn(3, 5, 4), tp.randn(6, 4))
    with pytest.raises(InputConstraintError, match=r"input 'x' axis 0 has size 4, expected 3 \(a static size"):
        ep.module()(tp.randn(4, 5, 4), tp.randn(5, 4))
    with pytest.raises(tp.DTypeError, match="input 'y' must have dtype float32, got float64"):
        ep.module()(tp.randn(3, 5, 4), tp.randn(5, 4, dtype=tp.float64))


def test_derived_dims_tie_sizes_by_formula() -> None:
    def f(x: Tensor[Any], y: Tensor[Any]) -> Tensor[Any]:
        return x[1:].reshape(-1, 2).sum(-1) + y  # x has 2*d + 1 entries, y has d

    d = Dim("d", min=1, max=50)
    ep = export(f, (tp.randn(7), tp.randn(3)), dynamic_shapes=({0: 2 * d + 1}, {0: d}))
    assert list(ep.range_constraints) == ["d"]
    assert [str(c) for c in ep.constraints] == ["x.shape[0] = 2*d + 1", "y.shape[0] = d"]
    for n in (1, 4, 50):
        x, y = tp.randn(2 * n + 1), tp.randn(n)
        assert_same_bits(ep.module()(x, y), f(x, y))
    with pytest.raises(InputConstraintError, match=r"input 'x' axis 0 has size 8, which is not of the form 2\*d \+ 1"):
        ep.module()(tp.randn(8), tp.randn(3))
    with pytest.raises(ValueError, match="not of the form 2\\*d \\+ 1"):
        export(f, (tp.randn(6), tp.randn(3)), dynamic_shapes=({0: 2 * d + 1}, {0: d}))


# ---- contradictions at export -------------------------------------------------------------------------------

def _fixes(error: ConstraintViolationError) -> list[dict[str, Any]]:
    found = [json.loads(line.split("suggested fix: ", 1)[1]) for line in str(error).splitlines()
             if "suggested fix: " in line]
    assert found == [f.to_json() for f in error.fixes]  # the message carries the same fixes, as JSON
    return found


def test_a_dim_specialised_to_a_constant_raises_with_the_line_and_a_fix() -> None:
    w = tp.randn(4, 3)

    def f(x: Tensor[Any, Any]) -> Tensor[Any, Any]:
        return x @ w  # fixes x's last dim to 4

    feat = Dim("feat")
    spec = ({0: Dim("batch"), 1: feat},)
    with pytest.raises(ConstraintViolationError) as info:
        export(f, (tp.randn(2, 4),), dynamic_shapes=spec)
    text = str(info.value)
    assert "the program specialises feat to 4" in text and "matmul at" in text
    assert "test_export_dynamic.py" in text and "return x @ w" not in text  # the location, not source text
    assert _fixes(info.value) == [{"kind": "specialize", "dim": "feat", "value": 4}]
    fixed = apply_fixes(spec, info.value)
    ep = export(f, (tp.randn(2, 4),), dynamic_shapes=fixed)
    assert list(ep.range_constraints) == ["batch"]
    x = tp.randn(5, 4)
    assert_same_bits(ep.module()(x), f(x))


def test_two_dims_forced_equal_raise_with_a_tie_fix() -> None:
    def f(x: Tensor[Any, Any], y: Tensor[Any, Any]) -> Tensor[Any, Any]:
        return x + y

    spec = {"x": {0: Dim("A")}, "y": {0: Dim("B")}}
    with pytest.raises(ConstraintViolationError, match="the program requires A == B") as info:
        export(f, (tp.randn(3, 2), tp.randn(3, 2)), dynamic_shapes=spec)
    assert _fixes(info.value) == [{"kind": "tie", "dim": "A", "to": "B"}]
    ep = export(f, (tp.randn(3, 2), tp.randn(3, 2)), dynamic_shapes=apply_fixes(spec, info.value.fixes))
    assert list(ep.range_constraints) == ["B"]
    assert any(isinstance(c, EqualityConstraint) and c.sites == (("x", 0), ("y", 0)) for c in ep.constraints)


def test_a_narrowed_range_raises_with_a_bound_fix() -> None:
    kernel = tp.randn(2, 3, 5)

    def f(x: Tensor[Any, Any, Any]) -> Tensor[Any, Any, Any]:
        return F.conv1d(x, kernel)  # needs length >= 5

    spec = ({2: Dim("L", max=100)},)
    with pytest.raises(ConstraintViolationError, match=r"the program requires L >= 5 \(conv_nd at .*test_export_dynamic"
                                                       r"\.py:\d+ in f") as info:
        export(f, (tp.randn(1, 3, 9),), dynamic_shapes=spec)
    assert _fixes(info.value) == [{"kind": "set_min", "dim": "L", "value": 5}]
    ep = export(f, (tp.randn(1, 3, 9),), dynamic_shapes=apply_fixes(spec, str(info.value)))  # the message works too
    assert str(ep.range_constraints) == "{L: [5, 100]}"
    for n in (5, 6, 100):
        x = tp.randn(1, 3, n)
        assert_same_bits(ep.module()(x), f(x))


def test_python_branches_on_sizes_are_requirements() -> None:
    def f(x: Tensor[Any, Any]) -> Tensor[Any, Any]:
        if x.shape[0] > 8:
            return x * 2.0
        return x + 1.0

    with pytest.raises(ConstraintViolationError, match=r"requires n <= 8 \(a comparison of sizes at .*in f") as info:
        export(f, (tp.randn(3, 2),), dynamic_shapes=({0: Dim("n")},))
    assert info.value.fixes == (SuggestedFix("set_max", "n", 8),)
    # a declared range that decides the branch needs no fix: the branch is taken for every allowed size
    ep = export(f, (tp.randn(3, 2),), dynamic_shapes=({0: Dim("n", max=8)},))
    x = tp.randn(8, 2)
    assert_same_bits(ep.module()(x), f(x))
    # strict: no comparison is decided from the example; the dim it needs is reported, with the comparison
    with pytest.raises(ConstraintViolationError, match=r"specialises n to 3 \(.*in f: cannot decide n > 8"):
        export(f, (tp.randn(3, 2),), dynamic_shapes=({0: Dim("n")},), strict=True)


def test_dynamic_and_auto_dims_take_what_the_program_needs() -> None:
    kernel = tp.randn(2, 3, 5)

    def f(x: Tensor[Any, Any, Any]) -> Tensor[Any, Any, Any]:
        return F.conv1d(x, kernel)

    ep = export(f, (tp.randn(1, 3, 9),), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO, 2: Dim.DYNAMIC},))
    assert str(ep.range_constraints) == "{x_0: [0, inf], x_2: [5, inf]}"  # channels became static
    assert "the program needs x_2 >= 5" in ep.dims["x_2"].note
    with pytest.raises(InputConstraintError, match="x_2=4 violates x_2 >= 5.*the program needs x_2 >= 5"):
        ep.module()(tp.randn(1, 3, 4))
    with pytest.raises(ConstraintViolationError, match="specialises x_1 to 3"):
        export(f, (tp.randn(1, 3, 9),), dynamic_shapes=({1: Dim.DYNAMIC},))


def test_the_example_must_fit_the_declaration() -> None:
    def f(x: Tensor[Any, Any], y: Tensor[Any, Any]) -> Tensor[Any, Any]:
        return x * y

    with pytest.raises(ValueError, match=r"input 'x' axis 0 has size 1 in the example, outside the declared range of "
                                         r"n \[2, inf\]"):
        export(f, (tp.randn(1, 2), tp.randn(1, 2)), dynamic_shapes=({0: Dim("n", min=2)}, None))
    n = Dim("n")
    with pytest.raises(ValueError, match="sizes that share a dim must be equal"):
        export(f, (tp.randn(3, 2), tp.randn(4, 2)), dynamic_shapes=({0: n}, {0: n}))
    with pytest.raises(ValueError, match="two different declarations of dim 'n'"):
        export(f, (tp.randn(3, 2), tp.randn(3, 2)), dynamic_shapes=({0: n}, {0: Dim("n", max=9)}))
    with pytest.raises(ValueError, match="no argument named 'z'"):
        export(f, (tp.randn(3, 2), tp.randn(3, 2)), dynamic_shapes={"z": {0: n}})
    with pytest.raises(ValueError, match="rank 2 .* 3 entries"):
        export(f, (tp.randn(3, 2), tp.randn(3, 2)), dynamic_shapes=((n, None, None), None))


# ---- ways of writing a spec -------------------------------------------------------------------------------------

def _pair_model(xs: list[Tensor[Any, Any]], scale: dict[str, Tensor[Any]]) -> Tensor[Any, Any]:
    return (xs[0] + xs[1]) * scale["s"]


def test_nested_specs_and_shapes_collection_agree() -> None:
    xs = [tp.randn(3, 4), tp.randn(3, 4)]
    scale = {"s": tp.randn(4)}
    b = Dim("b")
    nested = export(_pair_model, (xs, scale), dynamic_shapes={"xs": [{0: b}, {0: b}], "scale": None})
    shapes = ShapesCollection()
    shapes[xs[0]] = {0: b}
    shapes[xs[1]] = {0: b}
    collected = export(_pair_model, (xs, scale), dynamic_shapes=shapes)
    assert nested.constraints == collected.constraints
    new = ([tp.randn(6, 4), tp.randn(6, 4)], {"s": tp.randn(4)})
    assert_same_bits(nested.module()(*new), _pair_model(*new))
    assert_same_bits(collected.module()(*new), _pair_model(*new))
    stray = ShapesCollection()
    stray[tp.randn(3, 4)] = {0: b}
    with pytest.raises(ValueError, match="not among the inputs"):
        export(_pair_model, (xs, scale), dynamic_shapes=stray)


def test_constraint_lists_are_a_spec() -> None:
    def f(x: Tensor[Any, Any], y: Tensor[Any, Any]) -> Tensor[Any, Any]:
        return x - y

    constraints: list[Any] = [Constraint("x", 0, "n", 1, 10), EqualityConstraint((("x", 0), ("y", 0)), "n")]
    ep = export(f, (tp.randn(3, 2), tp.randn(3, 2)), dynamic_shapes=constraints)
    assert str(ep.range_constraints) == "{n: [1, 10]}"
    x, y = tp.randn(7, 2), tp.randn(7, 2)
    assert_same_bits(ep.module()(x, y), f(x, y))


def test_additional_inputs_infer_dynamic_and_tied_dims() -> None:
    def f(x: Tensor[Any, Any], y: Tensor[Any, Any]) -> Tensor[Any, Any]:
        return x + y.sum(-1, keepdim=True)

    extra = AdditionalInputs()
    extra.add((tp.randn(5, 3), tp.randn(5, 7)))
    extra.add((tp.randn(2, 3), tp.randn(2, 1)))
    ep = export(f, (tp.randn(3, 3), tp.randn(3, 2)), dynamic_shapes=extra)
    # x's and y's first axes vary together: one dim; y's second axis varies on its own; x's second is static
    assert list(ep.range_constraints) == ["x_0", "y_1"]
    extra.verify(ep)
    x, y = tp.randn(11, 3), tp.randn(11, 9)
    assert_same_bits(ep.module()(x, y), f(x, y))


Batch = NewType("Batch", int)
Seq = NewType("Seq", int)
Model = NewType("Model", int)


class Typed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x: Tensor[Batch, Seq, Model], mask: Tensor[Batch, Seq]) -> Tensor[Batch, Seq, Model]:
        return self.proj(x) * mask.unsqueeze(-1)


def test_dims_from_the_types_need_no_boilerplate() -> None:
    tp.manual_seed(0)
    model = Typed()
    args = (tp.randn(2, 5, 8), tp.ones(2, 5))
    ep = export(model, args, dynamic_shapes=FromAnnotations())
    assert list(ep.range_constraints) == ["Batch", "Seq"]  # Model is fixed by the weights: it became static
    assert "annotation of 'x'" in ep.dims["Batch"].declared_at
    new = (tp.randn(4, 9, 8), tp.ones(4, 9))
    assert_same_bits(ep.module()(*new), model(*new))
    ranged = export(model, args, dynamic_shapes=FromAnnotations(ranges={"Seq": (2, 4096)}))
    assert str(ranged.range_constraints) == "{Batch: [0, inf], Seq: [2, 4096]}"
    with pytest.raises(InputConstraintError, match=r"Seq=1 violates Seq >= 2"):
        ranged.module()(tp.randn(4, 1, 8), tp.ones(4, 1))
    with pytest.raises(ConstraintViolationError, match="specialises Model to 8"):
        export(model, args, dynamic_shapes=FromAnnotations(ranges={"Model": (1, 64)}))
    with pytest.raises(ValueError, match="ranges for Heads, which no annotation"):
        export(model, args, dynamic_shapes=FromAnnotations(ranges={"Heads": (1, 8)}))
