"""What ``pip install`` puts into site-packages: the ``tensorplay`` package only (``spec`` and
``interpreters`` inside it), no generic top-level import names, and every module of the repository's
``spec/`` and ``interpreters/`` folders."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_installs_only_the_tensorplay_package(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, symlinks=True,
                    ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".mypy_cache",
                                                  ".pytest_cache", ".hypothesis"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source),
                    "-w", str(tmp_path / "dist")], check=True, capture_output=True, text=True)
    (wheel,) = (tmp_path / "dist").glob("tensorplay-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"tensorplay", wheel.name.split("-")[0] + "-" +
                                                wheel.name.split("-")[1] + ".dist-info"}
    top_level = [n for n in names if n.endswith("top_level.txt")]
    assert not top_level or zipfile.ZipFile(wheel).read(top_level[0]).decode().split() == ["tensorplay"]
    for folder in ("spec", "interpreters"):
        expected = {f"tensorplay/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / folder).rglob("*.py")}
        assert expected and expected <= set(names), sorted(expected - set(names))[:5]
