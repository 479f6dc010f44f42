"""The typecheck suite: programs that must pass ``mypy --strict`` and programs that must fail.

``typecheck/pass/*.py`` must produce no error. ``typecheck/fail/*.py`` mark every line
that must be reported with ``# E: <fragment>`` (several markers on one line mean several
errors); every marked line must be reported with a message containing its fragment, and
nothing else may be reported. Notes are ignored. All files are checked by one mypy run
(through ``mypy.api``), so module names must be unique across both folders.

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
_MARK = re.compile(r"#\s*E:\s*(.*?)\s*(?=#\s*E:|$)")


def expected_errors(path: Path) -> dict[int, list[str]]:
    """Line number -> the message fragments marked on it with ``# E: ...``."""
    out: dict[int, list[str]] = {}
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if "# E:" in text:
            out[number] = [m for m in _MARK.findall(text[text.index("# E:"):]) if m]
    return out


@lru_cache(maxsize=1)
def mypy_report() -> dict[str, list[tuple[int, str]]]:
    """Run mypy once over every typecheck file; resolved path -> [(line, message)] of its errors."""
    from mypy import api

    files = [str(p) for p in PASS_FILES + FAIL_FILES]
    stdout, stderr, status = api.run([
        "--strict", "--config-file", str(ROOT / "pyproject.toml"), "--no-error-summary",
        "--show-error-codes", "--hide-error-context", "--no-pretty", "--show-absolute-path",
        "--cache-dir", str(ROOT / ".mypy_cache"), *files,
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
    assert sum(len(expected_errors(p)) for p in FAIL_FILES) >= 30


def test_library_modules_type_check_for_the_suite() -> None:
    """Errors inside the library files the suite imports would make the cases meaningless."""
    report = mypy_report()
    suite = {str(p.resolve()) for p in PASS_FILES + FAIL_FILES}
    lib = {path: errs for path, errs in report.items() if path not in suite and "/tensorplay/" in path
           and any(f"/tensorplay/{name}" in path for name in ("tensor.py", "ops.py", "prefix.py", "creation.py",
                                                               "index.py", "shapecheck.py"))}
    assert not lib, lib


@pytest.mark.parametrize("path", PASS_FILES, ids=lambda p: p.stem)
def test_pass_program_type_checks(path: Path) -> None:
    errors = mypy_report().get(str(path.resolve()), [])
    assert not errors, "\n".join(f"{path.name}:{line}: {msg}" for line, msg in errors)


@pytest.mark.parametrize("path", FAIL_FILES, ids=lambda p: p.stem)
def test_fail_program_reports_exactly_the_marked_errors(path: Path) -> None:
    expected = expected_errors(path)
    assert expected, f"{path.name} marks no expected error"
    got: dict[int, list[str]] = {}
    for line, msg in mypy_report().get(str(path.resolve()), []):
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
