"""docs/compile.md's Python blocks run as written."""

from __future__ import annotations

from tests.markdown import ROOT, python_blocks

BLOCKS = python_blocks(ROOT / "docs" / "compile.md")


def test_compile_doc_blocks_run() -> None:
    assert BLOCKS
    for index, block in enumerate(BLOCKS):
        exec(compile(block, f"docs/compile.md[python block {index}]", "exec"), {})
