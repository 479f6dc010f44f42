"""mypy on a user's file outside the repository sees the installed package's annotations: the wheel
ships ``py.typed`` (PEP 561) and the editable install is a plain path entry that mypy follows."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# a typed model with one deliberate shape error (line 18: fc2 applied to the input features)
USER_FILE = '''\
from __future__ import annotations

import tensorplay as tp
from tensorplay import Tensor, nn
from tensorplay.dims import Batch, Classes, Feat, Hidden


class Net(nn.Module):
    def __init__(self, f: Feat, h: Hidden, c: Classes) -> None:
        super().__init__()
        self.fc1 = nn.Linear(f, h)
        self.fc2 = nn.Linear(h, c)

    def forward(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Classes]:
        return self.fc2(self.fc1(x).relu())

    def skips_a_layer(self, x: Tensor[Batch, Feat]) -> Tensor[Batch, Classes]:
        return self.fc2(x)
'''
SHAPE_ERROR = ('user_model.py:18: error: Argument 1 has incompatible type "Tensor[Batch, Feat]"; '
               'expected "Tensor[Batch, Hidden]"')


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A mypy cache shared by the tests of this module."""
    return tmp_path_factory.mktemp("mypy_cache")


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository (an editable install builds its link tree inside the project)."""
    dest = tmp_path_factory.mktemp("typed") / "src"
    shutil.copytree(ROOT, dest, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache",
                                                  ".pytest_cache", ".hypothesis"))
    return dest


def _venv(where: Path) -> Path:
    """A virtual environment without pip that sees this interpreter's packages (numpy, ...)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(where)],
                   check=True, capture_output=True)
    return where / "bin" / "python"


def _pip_install(python: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-build-isolation", *args], check=True, capture_output=True, text=True)


def _mypy_from_outside(python: Path, workdir: Path, cache: Path) -> str:
    """``mypy --strict user_model.py`` run in ``workdir`` (outside the repository) for ``python``; ``cache``
    is shared by the tests (numpy's and the standard library's entries are the same for both installs)."""
    from mypy import api

    workdir.mkdir()
    (workdir / "user_model.py").write_text(USER_FILE)
    where = Path.cwd()
    try:
        os.chdir(workdir)
        stdout, stderr, _ = api.run(["--strict", "--no-error-summary", "--cache-dir", str(cache),
                                     "--python-executable", str(python), "--config-file", "", "user_model.py"])
    finally:
        os.chdir(where)
    assert not stderr.strip(), stderr
    return stdout


def _assert_sees_the_package(report: str) -> None:
    assert "Cannot find implementation or library stub" not in report, report
    assert "has type \"Any\"" not in report, report
    assert report.strip().splitlines() == [SHAPE_ERROR + "  [arg-type]"], report


def test_the_wheel_ships_py_typed_and_mypy_checks_against_it(source: Path, cache: Path, tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source),
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, text=True)
    (wheel,) = (tmp_path / "dist").glob("tensorplay-*.whl")
    assert "tensorplay/py.typed" in zipfile.ZipFile(wheel).namelist()
    python = _venv(tmp_path / "venv")
    _pip_install(python, str(wheel))
    _assert_sees_the_package(_mypy_from_outside(python, tmp_path / "user", cache))


def test_mypy_follows_the_editable_install(source: Path, cache: Path, tmp_path: Path) -> None:
    python = _venv(tmp_path / "venv")
    _pip_install(python, "-e", str(source))
    where = subprocess.run([str(python), "-c", "import tensorplay; print(tensorplay.__file__)"], cwd=tmp_path,
                           check=True, capture_output=True, text=True).stdout.strip()
    assert Path(where).resolve() == (source / "tensorplay" / "__init__.py").resolve()  # edits show through
    _assert_sees_the_package(_mypy_from_outside(python, tmp_path / "user", cache))
