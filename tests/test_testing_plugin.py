"""The pytest plugin of tensorplay.testing, loaded with ``-p tensorplay.testing`` in a pytester run
(so it does not depend on the installed entry point): the tp_interpreter fixture, the
tp_interpreters marker, skips, the report header, and how failures render."""

from __future__ import annotations

import pytest

from tensorplay.testing import interpreters

pytest_plugins = ["pytester"]

# the module is already imported by this session, so the inner run cannot rewrite its asserts (it has none)
PLUGIN = ("-p", "tensorplay.testing", "-p", "no:cacheprovider", "-W", "ignore::pytest.PytestAssertRewriteWarning")


def run(pytester: pytest.Pytester, source: str, *extra: str) -> pytest.RunResult:
    pytester.makepyfile(test_user=source)
    return pytester.runpytest(*PLUGIN, *extra)


def test_the_fixture_runs_a_test_once_per_way(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import tensorplay as tp
from tensorplay.testing import assert_close

SEEN = []

def model(w, x):
    return {"y": (x @ w.T).relu(), "n": x.shape[0]}

def test_model(tp_interpreter):
    SEEN.append(tp_interpreter.name)
    w, x = tp.randn(4, 3), tp.randn(5, 3)
    out = tp_interpreter(model, w, x)
    assert out["n"] == 5
    assert_close(out["y"], model(w, x)["y"])

def test_every_way_was_seen():
    assert SEEN == %r
""" % list(interpreters()), "-v")
    result.assert_outcomes(passed=len(interpreters()) + 1)
    for name in interpreters():
        result.stdout.fnmatch_lines([f"*test_model?{name}? PASSED*"])


def test_the_marker_selects_and_excludes_ways(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import pytest
import tensorplay as tp

@pytest.mark.tp_interpreters("eager", "traced")
def test_two(tp_interpreter):
    assert tp_interpreter.name in ("eager", "traced")

@pytest.mark.tp_interpreters(exclude=["vmap", "retraced"])
def test_all_but_two(tp_interpreter):
    assert tp_interpreter.name not in ("vmap", "retraced")
""")
    result.assert_outcomes(passed=2 + len(interpreters()) - 2)


def test_an_unknown_way_in_the_marker_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import pytest

@pytest.mark.tp_interpreters("eagr")
def test_x(tp_interpreter):
    pass
""")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_x: @pytest.mark.tp_interpreters: unknown way(s) of running 'eagr'; "
                                 "registered: eager*"])


def test_a_way_that_cannot_run_the_program_skips(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import tensorplay as tp

def test_creation(tp_interpreter):
    tp_interpreter(lambda: tp.zeros(2))
""", "-rs")
    result.assert_outcomes(passed=len(interpreters()) - 1, skipped=1)
    result.stdout.fnmatch_lines(["*vmap: vmap: the program takes no tensor argument to map over*"])


def test_report_header_lists_the_ways_when_verbose(pytester: pytest.Pytester) -> None:
    result = run(pytester, "def test_nothing():\n    pass\n", "-v")
    result.stdout.fnmatch_lines(["tensorplay.testing ways of running: " + ", ".join(interpreters())])
    result = run(pytester, "def test_nothing():\n    pass\n")
    assert "tensorplay.testing ways of running" not in result.stdout.str()


def test_a_failure_shows_the_report_at_the_test_line_without_toolkit_frames(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import tensorplay as tp
from tensorplay.testing import assert_close

def test_mismatch(tp_interpreter):
    out = tp_interpreter(lambda x: x * 2.0, tp.ones(2, 2))
    assert_close(out, [[2.0, 2.0], [2.0, 2.5]])
""", "--tb=long", "-k", "eager")
    result.assert_outcomes(failed=1, deselected=len(interpreters()) - 1)
    result.stdout.fnmatch_lines([
        ">       assert_close(out, [[2.0, 2.0], [2.0, 2.5]])",
        "E       tensorplay.testing.NotCloseError: values differ (shape [2, 2], dtype float32):",
        "E         1 of 4 elements (25.0%) differ by more than atol + rtol * |expected| (rtol=1.3e-06, atol=1e-05)",
        "E         largest absolute difference: 0.5 at index (1, 1) (actual 2.0, expected 2.5)",
        "E         largest relative difference: 0.2 at index (1, 1) (actual 2.0, expected 2.5)",
    ])
    assert "compare.py" not in result.stdout.str()


def test_without_the_plugin_the_fixture_is_unknown(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="def test_x(tp_interpreter):\n    pass\n")
    result = pytester.runpytest("-p", "no:tensorplay.testing", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*fixture 'tp_interpreter' not found*"])
