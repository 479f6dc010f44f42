"""The ``exported`` way of ``tensorplay.testing.check_interpreters``: export (every axis ``Dim.AUTO``), save,
load, run; registered from ``tensorplay.export.way`` (named in the package's entry points)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tensorplay as tp
import tensorplay.export.way  # noqa: F401 - registers the way (the installed entry point does the same)
from tensorplay import Tensor, nn
from tensorplay.testing import check_interpreters, interpreters


def test_the_way_is_registered_and_named_in_the_entry_points() -> None:
    assert "exported" in interpreters()
    meta = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["tensorplay.testing.interpreters"]["exported"] == "tensorplay.export.way"


def test_modules_with_state_mutations_and_randomness_run_the_exported_way() -> None:
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dropout(0.3), nn.Linear(6, 2))
    assert check_interpreters(model, tp.randn(5, 4), interpreters=["eager", "exported"]) == ["eager", "exported"]
    attention = nn.MultiheadAttention(8, 2)
    check_interpreters(attention, tp.randn(2, 5, 8), interpreters=["eager", "exported"], rtol=0.0, atol=0.0)


@tp.program
def affine(ops: Any, w: Tensor[Any, Any], x: Tensor[Any, Any]) -> Any:
    return ops.linear(w, None, x), x.shape[0]  # a size among the results is this call's size


def test_programs_pytrees_and_sizes_among_the_results() -> None:
    check_interpreters(affine, tp.randn(3, 4), tp.randn(5, 4), interpreters=["eager", "exported"])

    def f(params: dict[str, Any], xs: list[Tensor[Any, Any]], scale: float) -> dict[str, Any]:
        return {"sum": (xs[0] @ params["w"]).sum(-1) * scale, "n": xs[1].shape[0] + 1}

    check_interpreters(f, {"w": tp.randn(3, 2)}, [tp.randn(4, 3), tp.randn(6)], 0.5,
                       interpreters=["eager", "exported"])
