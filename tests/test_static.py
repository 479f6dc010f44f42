"""Static checks that CI must keep green: mypy --strict on the packages, and the import layering."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_strict_is_clean_on_the_packages() -> None:
    """The packages and the examples (user code written against the typed API)."""
    from mypy import api

    examples = sorted(str(p) for p in (ROOT / "examples").glob("*.py"))
    stdout, stderr, status = api.run(["--strict", "--no-incremental", "tensorplay", *examples])
    assert status == 0, stdout + stderr


def test_import_layering_contracts_hold() -> None:
    """spec imports nothing of the project; the core of tensorplay never imports an interpreter."""
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (it is part of the test extra)")
    result = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
