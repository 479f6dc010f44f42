"""docs/testing.md runs as written: its Python blocks, in order, in one namespace (a ```text block
right after a Python block is what that block prints), then as one pytest file with the
``tensorplay.testing`` plugin (its tests pass under every way of running)."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from tensorplay.testing import interpreters
from tests.markdown import ROOT, code_blocks

pytest_plugins = ["pytester"]

DOC = ROOT / "docs" / "testing.md"
BLOCKS = code_blocks(DOC)
PYTHON = [code for language, code in BLOCKS if language == "python"]


def test_doc_has_every_part() -> None:
    text = "\n".join(PYTHON)
    for needed in ("check_interpreters(", "tp_interpreter", "check_grads(", "@given(", "assert_close("):
        assert needed in text, needed


@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")  # the plugin declares tp_interpreters
def test_blocks_run_in_order_and_print_what_the_doc_shows() -> None:
    namespace: dict[str, object] = {"__name__": "docs_testing"}
    shown = 0
    for i, (language, code) in enumerate(BLOCKS):
        if language != "python":
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, f"docs/testing.md[block {i}]", "exec"), namespace)
        follower = BLOCKS[i + 1] if i + 1 < len(BLOCKS) else ("", "")
        if follower[0] == "text":
            assert out.getvalue() == follower[1], f"block {i} prints something else than the doc shows"
            shown += 1
    assert shown >= 1


def test_doc_tests_pass_under_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_doc="\n".join(PYTHON))
    result = pytester.runpytest("-p", "tensorplay.testing", "-q", "-p", "no:cacheprovider",
                                "-W", "ignore::pytest.PytestAssertRewriteWarning")
    tests = re.findall(r"^def (test_\w+)\(", "\n".join(PYTHON), flags=re.M)
    ways = len(interpreters())
    # two fixture tests (the second excludes vmap) and two hypothesis tests
    assert len(tests) == 4
    result.assert_outcomes(passed=ways + (ways - 1) + 2)
