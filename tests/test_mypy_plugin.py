"""tensorplay.mypy_plugin across modules and runs: relations declared in one module, used in another.

The typecheck suite checks the rules; this checks that a relation declared next to its dims in one
module still applies when mypy reads that module from its cache (the dims keep it in their metadata).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

DIMS = '''
from typing import NewType
import tensorplay as tp
from tensorplay.dims import Heads
HeadDim = NewType("HeadDim", int)
Model = NewType("Model", int)
tp.relate(Model, tp.dim(Heads) * HeadDim)
'''

USE = '''
from tensorplay import Tensor
from tensorplay.dims import Batch, Heads
from model_dims import HeadDim, Model

def split(x: Tensor[Batch, Model], b: Batch, h: Heads, d: HeadDim, m: Model) -> None:
    x.reshape(b, h, d)
    x.reshape(b, h, m)
'''


def _run(tmp: Path) -> list[str]:
    from mypy import api

    config = tmp / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nplugins = tensorplay.mypy_plugin\n"
                      "[mypy-numba.*,torch.*,sklearn.*,tqdm.*,einops.*]\nignore_missing_imports = True\n")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TENSORPLAY_MYPY_PLUGIN_STRICT", "1")
        env.setenv("MYPYPATH", os.pathsep.join([str(ROOT), str(tmp)]))
        env.chdir(tmp)
        stdout, stderr, status = api.run(["--config-file", str(config), "--cache-dir", str(tmp / "cache"),
                                          "--no-error-summary", "--hide-error-context", "use_dims.py",
                                          "model_dims.py"])
    assert status in (0, 1) and not stderr, stdout + stderr
    return [line for line in stdout.splitlines() if ": error:" in line]


def test_a_relation_from_a_cached_module_still_applies(tmp_path: Path) -> None:
    (tmp_path / "model_dims.py").write_text(DIMS)
    (tmp_path / "use_dims.py").write_text(USE)
    first = _run(tmp_path)
    (tmp_path / "use_dims.py").write_text(USE + "\n# edited: only this module is checked again\n")
    second = _run(tmp_path)
    for errors in (first, second):
        assert len(errors) == 1, errors
        assert errors[0].startswith("use_dims.py:8: error: reshape: cannot view Tensor[Batch, Model] as "
                                    "[Batch, Heads, Model]"), errors
        assert "(using Model == Heads * HeadDim)" in errors[0]
