"""The pytest plugin of :mod:`tensorplay.testing` (its hooks are reached as ``tensorplay.testing``'s
attributes, so ``-p tensorplay.testing`` and the ``pytest11`` entry point load it).

* ``tp_interpreter``: a fixture parametrized over the registered ways of running (test ids
  ``test_x[eager]``, ``test_x[traced]``, ...). Its value is the way's :class:`Runner`:
  ``tp_interpreter(fn, *args)`` returns what ``fn(*args)`` returns, computed that way; a way that
  cannot run ``fn`` (:class:`NotApplicable`) skips the test.
* ``@pytest.mark.tp_interpreters("eager", "traced")`` restricts one test to those ways;
  ``@pytest.mark.tp_interpreters(exclude=["vmap"])`` drops some.
* With ``-v`` the report header lists the registered ways. Failures of :func:`assert_close` and the checks
  built on it show the report at the test's own line (the toolkit's frames are hidden).
"""

from __future__ import annotations

from typing import Any

import pytest

from tensorplay.testing.registry import NotApplicable, Runner, interpreters, select

MARKER = "tp_interpreters"


def pytest_configure(config: pytest.Config) -> None:
    """Declare the ``tp_interpreters`` marker."""
    config.addinivalue_line("markers", f"{MARKER}(*names, exclude=()): run the tp_interpreter fixture only with "
                                       "these ways of running (all when no names), minus exclude")


def pytest_report_header(config: pytest.Config) -> list[str]:
    """With ``-v``, one header line: the registered ways of running (reading the registry imports the
    transforms, which a test run that never asks for them should not pay for)."""
    if config.get_verbosity() <= 0:
        return []
    return ["tensorplay.testing ways of running: " + ", ".join(interpreters())]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize every test that uses ``tp_interpreter`` over the selected ways."""
    if "tp_interpreter" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker(MARKER)
    names = list(marker.args) if marker is not None and marker.args else None
    exclude = list(marker.kwargs.get("exclude", ())) if marker is not None else []
    try:
        runners = select(names, exclude)
    except ValueError as error:
        pytest.fail(f"{metafunc.definition.nodeid}: @pytest.mark.{MARKER}: {error}", pytrace=False)
    metafunc.parametrize("tp_interpreter", runners, ids=[r.name for r in runners], indirect=True)


class _SkippingRunner:
    """A :class:`Runner` for a test: :class:`NotApplicable` becomes a skip."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.name = runner.name
        self.description = runner.description

    def __call__(self, fn: Any, *args: Any) -> Any:
        __tracebackhide__ = True
        try:
            return self.runner(fn, *args)
        except NotApplicable as reason:
            pytest.skip(f"{self.name}: {reason}")

    def __repr__(self) -> str:
        return repr(self.runner)


@pytest.fixture
def tp_interpreter(request: pytest.FixtureRequest) -> _SkippingRunner:
    """A way of running (one per test instance): ``tp_interpreter(fn, *args)`` returns what ``fn(*args)``
    returns, computed that way."""
    runner = getattr(request, "param", None)
    if not isinstance(runner, Runner):  # not parametrized by the hook (e.g. requested dynamically)
        runner = interpreters()["eager"]
    return _SkippingRunner(runner)
