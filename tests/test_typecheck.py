"""The typecheck suite: programs that must pass ``mypy --strict`` and programs that must fail.

``typecheck/pass/*.py`` must produce no error. ``typecheck/fail/*.py`` mark every line
that must be reported with ``# E: <fragment>`` (several markers on one line mean several
errors); every marked line must be reported with a message containing its fragment, and
nothing else may be reported. Notes are ignored. All files are checked by one mypy run
(through ``mypy.api``), so module names must be unique across both folders.

The suite runs twice: plain mypy, and mypy with ``tensorplay.mypy_plugin`` (dim arithmetic).
``# P: <fragment>`` marks an error only the plugin run reports, ``# N: <fragment>`` one only the
plain run reports (where the plugin computes a size mypy typed ``int``, the message changes);
``# E:`` errors must be reported by both runs, and the pass programs must be clean in both.

The pass programs are also run (their ``main()``), so the annotations they rely on are
checked against what the library does at run time.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PASS_DIR = ROOT / "typecheck" / "pass"
FAIL_DIR = ROOT / "typecheck" / "fail"
PASS_FILES = sorted(PASS_DIR.glob("*.py"))
FAIL_FILES = sorted(FAIL_DIR.glob("*.py"))

_LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): (?P<severity>error|note|warning): (?P<message>.*)$")
_MARK = re.compile(r"#\s*([EPN]):\s*(.*?)\s*(?=#\s*[EPN]:|$)")
MODES = ["plain", "plugin"]


def expected_errors(path: Path, mode: str = "plugin") -> dict[int, list[str]]:
    """Line number -> the message fragments marked on it with ``# E: ...``, and ``# P: ...`` for the plugin run
    or ``# N: ...`` for the plain run."""
    out: dict[int, list[str]] = {}
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        marks = _MARK.findall(text)
        fragments = [m for kind, m in marks if m and (kind == "E" or kind == {"plugin": "P", "plain": "N"}[mode])]
        if fragments:
            out[number] = fragments
    return out


def _config(mode: str, tmp: Path) -> Path:
    """pyproject.toml's mypy settings, plus the plugin for the plugin run (as a user's mypy.ini would say)."""
    if mode == "plain":
        return ROOT / "pyproject.toml"
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    lines = ["[mypy]", "plugins = tensorplay.mypy_plugin"]
    lines += [f"{k} = {v}" for k, v in settings.items() if k != "overrides"]
    for override in settings.get("overrides", []):
        modules = override["module"]
        lines.append(f"[mypy-{','.join(modules) if isinstance(modules, list) else modules}]")
        lines += [f"{k} = {v}" for k, v in override.items() if k != "module"]
    path = tmp / "mypy-plugin.ini"
    path.write_text("\n".join(lines) + "\n")
    return path


@lru_cache(maxsize=2)
def mypy_report(mode: str = "plain") -> dict[str, list[tuple[int, str]]]:
    """Run mypy once over every typecheck file; resolved path -> [(line, message)] of its errors."""
    import tempfile

    from mypy import api

    files = [str(p) for p in PASS_FILES + FAIL_FILES]
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as env:
        env.setenv("TENSORPLAY_MYPY_PLUGIN_STRICT", "1")  # a plugin bug fails the run instead of going quiet
        stdout, stderr, status = api.run([
            "--strict", "--config-file", str(_config(mode, Path(tmp))), "--no-error-summary",
            "--show-error-codes", "--hide-error-context", "--no-pretty", "--show-absolute-path",
            "--cache-dir", str(ROOT / ".mypy_cache" / mode), *files,
        ])
    if status == 2 or stderr.strip():
        raise RuntimeError(f"mypy did not run: {stderr}{stdout}")
    report: dict[str, list[tuple[int, str]]] = {}
    for line in stdout.splitlines():
        m = _LINE.match(line)
        if m and m["severity"] == "error":
            report.setdefault(str(Path(m["path"]).resolve()), []).append((int(m["line"]), m["message"]))
    return report


def test_typecheck_file_names_are_unique() -> None:
    names = [p.stem for p in PASS_FILES + FAIL_FILES]
    assert len(names) == len(set(names)), "typecheck files share a module name"
    assert len(PASS_FILES) >= 5 and FAIL_FILES


def test_at_least_30_failing_cases() -> None:
    assert sum(len(expected_errors(p, "plain")) for p in FAIL_FILES) >= 30


def test_at_least_40_failing_cases_for_the_plugin() -> None:
    """Dim arithmetic (reshape, cat/stack, slicing, conv/pool): cases only the plugin reports."""
    plugin_only = sum(len(re.findall(r"#\s*P:", p.read_text())) for p in FAIL_FILES)
    assert plugin_only >= 40, plugin_only


@pytest.mark.parametrize("mode", MODES)
def test_library_modules_type_check_for_the_suite(mode: str) -> None:
    """Errors inside the library files the suite imports would make the cases meaningless."""
    report = mypy_report(mode)
    suite = {str(p.resolve()) for p in PASS_FILES + FAIL_FILES}
    lib = {path: errs for path, errs in report.items() if path not in suite and "/tensorplay/" in path
           and any(f"/tensorplay/{name}" in path for name in ("tensor.py", "ops.py", "prefix.py", "creation.py",
                                                               "index.py", "shapecheck.py"))}
    assert not lib, lib


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", PASS_FILES, ids=lambda p: p.stem)
def test_pass_program_type_checks(path: Path, mode: str) -> None:
    errors = mypy_report(mode).get(str(path.resolve()), [])
    assert not errors, "\n".join(f"{path.name}:{line}: {msg}" for line, msg in errors)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", FAIL_FILES, ids=lambda p: p.stem)
def test_fail_program_reports_exactly_the_marked_errors(path: Path, mode: str) -> None:
    expected = expected_errors(path, mode)
    assert expected or mode == "plain", f"{path.name} marks no expected error"
    got: dict[int, list[str]] = {}
    for line, msg in mypy_report(mode).get(str(path.resolve()), []):
        got.setdefault(line, []).append(msg)
    problems = []
    for line, fragments in sorted(expected.items()):
        messages = list(got.get(line, []))
        for fragment in fragments:
            hit = next((m for m in messages if fragment in m), None)
            if hit is None:
                problems.append(f"{path.name}:{line}: expected an error containing {fragment!r}, got {messages}")
            else:
                messages.remove(hit)
        problems += [f"{path.name}:{line}: unexpected error: {m}" for m in messages]
    for line, messages in sorted(got.items()):
        if line not in expected:
            problems += [f"{path.name}:{line}: unexpected error: {m}" for m in messages]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", PASS_FILES, ids=lambda p: p.stem)
def test_pass_program_runs(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"typecheck_pass_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        module.main()
    finally:
        sys.modules.pop(spec.name, None)
