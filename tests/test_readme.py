"""The README's Python examples run as written (so the tour stays true)."""

from __future__ import annotations

import pytest

from tests.markdown import ROOT, python_blocks

BLOCKS = python_blocks(ROOT / "README.md")


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int) -> None:
    exec(compile(BLOCKS[index], f"README.md[python block {index}]", "exec"), {})
