"""``tp.shapecheck``: annotated shapes checked at call time (and at trace time under the recorder)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Generic, Literal, NewType, TypeVar, TypeVarTuple

import pytest

import tensorplay as tp
import tensorplay.nn as nn
from tensorplay import Index, Tensor
from tensorplay.dims import Batch, Classes, Feat, Hidden, Seq, Vocab
from tensorplay.graph import trace

ROOT = Path(__file__).resolve().parent.parent
Lead = TypeVarTuple("Lead")
In = TypeVar("In")
Out = TypeVar("Out")


@tp.shapecheck
def mlp(w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
    return x @ w.T


@tp.shapecheck
def linear(w: Tensor[Out, In], x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]:
    return x @ w.T


@tp.shapecheck
def rgb(x: Tensor[Batch, Literal[3]]) -> Tensor[Batch]:
    return x.sum(-1)


@tp.shapecheck
def pair(a: Tensor[*Lead, Feat], b: Tensor[*Lead, Feat]) -> Tensor[*Lead, Feat]:
    return a + b


def test_accepts_matching_shapes_and_returns_the_result() -> None:
    y = mlp(tp.randn(5, 3), tp.randn(2, 3))
    assert tuple(y.shape) == (2, 5)
    assert tuple(linear(tp.randn(4, 3), tp.randn(6, 2, 3)).shape) == (6, 2, 4)
    assert tuple(linear(tp.randn(4, 3), tp.randn(3)).shape) == (4,)
    assert mlp.__name__ == "mlp" and mlp.__wrapped__ is not None  # type: ignore[attr-defined]


def test_named_dim_mismatch_names_function_argument_axis_dim_and_sizes() -> None:
    with pytest.raises(tp.ShapeError) as info:
        mlp(tp.randn(5, 4), tp.randn(2, 3))
    msg = str(info.value)
    assert msg.startswith("mlp(): argument 'x' axis 1 (dim 'Feat'): expected size 4")
    assert "bound by argument 'w' axis 1" in msg and "got 3" in msg
    assert "shape [2, 3]" in msg and "annotation Tensor[Batch, Feat]" in msg


def test_literal_size_mismatch() -> None:
    assert tuple(rgb(tp.randn(2, 3)).shape) == (2,)
    with pytest.raises(tp.ShapeError, match=r"rgb\(\): argument 'x' axis 1 \(Literal\[3\]\): expected size 3, got 4"):
        rgb(tp.randn(2, 4))


def test_wrong_rank() -> None:
    with pytest.raises(tp.ShapeError, match=r"argument 'x': expected rank 2, got rank 3; shape \[2, 3, 1\]"):
        mlp(tp.randn(5, 3), tp.randn(2, 3, 1))
    with pytest.raises(tp.ShapeError, match=r"argument 'x': expected rank >= 1, got rank 0"):
        linear(tp.randn(5, 3), tp.tensor(1.0))


def test_typevars_bind_across_arguments() -> None:
    with pytest.raises(tp.ShapeError, match=r"argument 'x' axis 2 \(dim 'In'\): expected size 3 \(bound by "
                                            r"argument 'w' axis 1\), got 4"):
        linear(tp.randn(5, 3), tp.randn(7, 2, 4))


def test_variadic_prefix_must_agree() -> None:
    assert tuple(pair(tp.randn(2, 3, 4), tp.randn(2, 3, 4)).shape) == (2, 3, 4)
    with pytest.raises(tp.ShapeError, match=r"argument 'b' axes 0\.\.1 \(dims '\*Lead'\): expected \[2, 3\] "
                                            r"\(bound by argument 'a' axes 0\.\.1\), got \[3, 2\]"):
        pair(tp.randn(2, 3, 4), tp.randn(3, 2, 4))
    with pytest.raises(tp.ShapeError, match=r"expected \[2\] .* got \[\]"):
        pair(tp.randn(2, 4), tp.randn(4))


def test_return_value_is_checked() -> None:
    @tp.shapecheck
    def drops_an_axis(x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
        return x.sum(-1)  # type: ignore[return-value]

    with pytest.raises(tp.ShapeError, match=r"drops_an_axis\(\): return value: expected rank 2, got rank 1"):
        drops_an_axis(tp.randn(2, 3))

    @tp.shapecheck
    def swaps(x: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
        return x.T  # type: ignore[return-value]

    with pytest.raises(tp.ShapeError, match=r"return value axis 0 \(dim 'Batch'\): expected size 2 \(bound by "
                                            r"argument 'x' axis 0\), got 3"):
        swaps(tp.randn(2, 3))


def test_keyword_arguments_optional_tuples_and_lists() -> None:
    @tp.shapecheck
    def f(x: Tensor[Batch, Feat], *, bias: Tensor[Feat] | None = None,
          extra: list[Tensor[Batch, Feat]] | None = None) -> tuple[Tensor[Batch, Feat], Tensor[Feat]]:
        b = bias if bias is not None else tp.zeros(x.shape[1])
        return x + b, b

    f(tp.randn(2, 3))
    f(tp.randn(2, 3), bias=tp.randn(3), extra=[tp.randn(2, 3)])
    with pytest.raises(tp.ShapeError, match=r"argument 'bias' axis 0 \(dim 'Feat'\)"):
        f(tp.randn(2, 3), bias=tp.randn(4))
    with pytest.raises(tp.ShapeError, match=r"argument 'extra'\[1\] axis 0 \(dim 'Batch'\)"):
        f(tp.randn(2, 3), extra=[tp.randn(2, 3), tp.randn(5, 3)])

    @tp.shapecheck
    def g(x: Tensor[Batch, Feat]) -> tuple[Tensor[Batch, Feat], Tensor[Batch]]:
        return x, x.sum(0)  # type: ignore[return-value]

    with pytest.raises(tp.ShapeError, match=r"return value\[1\] axis 0 \(dim 'Batch'\): expected size 2"):
        g(tp.randn(2, 3))


def test_int_arguments_annotated_with_a_dim_bind_it() -> None:
    @tp.shapecheck
    def make(h: Hidden, x: Tensor[Batch, Hidden]) -> Tensor[Batch, Hidden]:
        return x

    make(Hidden(4), tp.randn(2, 4))
    with pytest.raises(tp.ShapeError, match=r"argument 'x' axis 1 \(dim 'Hidden'\): expected size 4 \(bound by "
                                            r"argument 'h'\), got 5"):
        make(Hidden(4), tp.randn(2, 5))


def test_index_bound_binds_its_dim() -> None:
    @tp.shapecheck
    def lookup(table: Tensor[Vocab, Feat], ids: Index[Vocab, *Lead]) -> Tensor[*Lead, Feat]:
        return table[ids]

    ids = tp.index([[1, 2, 3]], bound=Vocab(10))
    assert tuple(lookup(tp.randn(10, 4), ids).shape) == (1, 3, 4)
    with pytest.raises(tp.ShapeError, match=r"argument 'ids' bound \(dim 'Vocab'\): expected size 12 \(bound by "
                                            r"argument 'table' axis 0\), got 10"):
        lookup(tp.randn(12, 4), ids)


class Affine(Generic[In, Out]):
    """A layer whose weight annotation names its dims: ``forward``'s check binds them from ``self``."""

    weight: Tensor[Out, In]

    def __init__(self, i: int, o: int) -> None:
        self.weight = tp.randn(o, i)

    @tp.shapecheck
    def forward(self, x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]:
        return x @ self.weight.T


def test_methods_bind_dims_from_annotated_attributes() -> None:
    layer: Affine[Feat, Hidden] = Affine(3, 4)
    assert tuple(layer.forward(tp.randn(2, 3)).shape) == (2, 4)
    with pytest.raises(tp.ShapeError, match=r"Affine\.forward\(\): argument 'x' axis 1 \(dim 'In'\): expected "
                                            r"size 3 \(bound by attribute 'self\.weight' axis 1\), got 5"):
        layer.forward(tp.randn(2, 5))


class Head(nn.Module, Generic[In]):
    def __init__(self, d: int, c: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, c)

    @tp.shapecheck
    def forward(self, x: Tensor[Batch, Seq, In]) -> Tensor[Batch, Classes]:
        return self.fc(x.mean(1))  # type: ignore[arg-type, return-value]


def test_on_a_module_forward() -> None:
    head: Head[Feat] = Head(4, 3)
    assert tuple(head(tp.randn(2, 5, 4)).shape) == (2, 3)
    with pytest.raises(tp.ShapeError, match=r"Head\.forward\(\): argument 'x': expected rank 3, got rank 2"):
        head(tp.randn(2, 4))


def test_local_dims_defined_before_the_function_resolve() -> None:
    Local = NewType("Local", int)

    @tp.shapecheck
    def f(x: Tensor[Local, Local]) -> Tensor[Local]:
        return x.sum(0)

    assert tuple(f(tp.randn(3, 3)).shape) == (3,)
    with pytest.raises(tp.ShapeError, match="dim 'Local'"):
        f(tp.randn(3, 4))


def test_unresolvable_annotation_is_a_clear_error() -> None:
    @tp.shapecheck
    def f(x: Tensor[Later]) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(TypeError, match=r"shapecheck: cannot resolve the annotations of .*f\(\)"):
        f(tp.randn(2))


def test_functions_without_shape_annotations_pass_through() -> None:
    @tp.shapecheck
    def f(x: Any, n: int = 2) -> Any:
        return x

    t = tp.randn(2)
    assert f(t) is t


def test_switching_off_with_the_context_manager_and_the_flag() -> None:
    bad = (tp.randn(5, 4), tp.randn(2, 3))
    with tp.shapecheck.disabled():
        assert not tp.shapecheck.is_enabled()
        with pytest.raises(tp.ShapeError, match="matmul"):  # only the primitive's own check remains
            mlp(*bad)
        with tp.shapecheck.enabled():
            with pytest.raises(tp.ShapeError, match="mlp"):
                mlp(*bad)
    assert tp.shapecheck.is_enabled()
    tp.shapecheck.set_enabled(False)
    try:
        with pytest.raises(tp.ShapeError, match="matmul"):
            mlp(*bad)
    finally:
        tp.shapecheck.set_enabled(True)


def test_environment_variable_switches_it_off() -> None:
    code = ("import tensorplay as tp\n"
            "from tensorplay import Tensor\n"
            "from tensorplay.dims import Batch\n"
            "@tp.shapecheck\n"
            "def f(x: Tensor[Batch, Batch]) -> None: pass\n"
            "f(tp.randn(2, 3))\n"
            "print(tp.shapecheck.is_enabled())\n")
    env = dict(os.environ, TP_SHAPECHECK="0")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_runs_at_trace_time_under_the_graph_recorder() -> None:
    calls = []

    @tp.shapecheck
    def f(w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
        calls.append(1)
        return x @ w.T

    w = tp.randn(5, 3)
    gm = trace(lambda x: f(w, x), tp.randn(2, 3))
    assert len(calls) == 1
    out = gm(tp.randn(2, 3))          # the recorded graph does not run Python: no check, no cost
    assert tuple(out.shape) == (2, 5) and len(calls) == 1
    with pytest.raises(tp.ShapeError, match=r"f\(\): argument 'x' axis 1 \(dim 'Feat'\): expected size 3"):
        trace(lambda x: f(w, x), tp.randn(2, 4))


def test_symbolic_dims_are_not_refused() -> None:
    @tp.shapecheck
    def f(a: Tensor[Batch, Feat], b: Tensor[Batch, Feat]) -> Tensor[Batch, Feat]:
        return a * b

    gm = trace(f, tp.randn(4, 3), tp.randn(4, 3), dynamic={0: {0: "B"}, 1: {0: "B"}})
    assert tuple(gm(tp.randn(6, 3), tp.randn(6, 3)).shape) == (6, 3)


def test_int_attributes_annotated_with_a_typevar_bind_it() -> None:
    """``nn.Linear`` declares ``in_features: In``: a checked forward binds ``In`` from it."""
    forward = tp.shapecheck(nn.Linear.forward)
    layer = nn.Linear(6, 2)
    assert tuple(forward(layer, tp.randn(3, 6)).shape) == (3, 2)
    with pytest.raises(tp.ShapeError, match=r"Linear\.forward\(\): argument 'x' axis 1 \(dim 'In'\): expected "
                                            r"size 6 \(bound by attribute 'self\.in_features'\), got 4"):
        forward(layer, tp.randn(3, 4))
