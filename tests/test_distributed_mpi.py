"""Data-parallel training over MPI, run for real: ``mpiexec -n 2`` on the programs of tests/mpi/worker.py.

Each scenario is one ``mpiexec`` launch with a timeout that kills the whole process group (mpiexec and
every rank), so a hang fails the test instead of the suite. Skipped, with the reason printed, only where
MPI (mpi4py and an ``mpiexec``) is not installed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "mpi" / "worker.py"
TIMEOUT = 240.0


def _mpi_missing() -> str | None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install 'tensorplay[mpi]')"
    if shutil.which("mpiexec") is None:
        return "no mpiexec on PATH (pip install 'tensorplay[mpi]' brings MPICH's)"
    return None


MISSING = _mpi_missing()
if MISSING is not None:
    print(f"tests/test_distributed_mpi.py skipped: {MISSING}")
pytestmark = pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


def run_mpi(args: list[str], n: int = 2, **env: str) -> tuple[int, str]:
    """``mpiexec -n n python *args``: (exit status, stdout and stderr), killed as a group at the timeout."""
    environ = {k: v for k, v in os.environ.items() if k != "TP_NUM_THREADS"}
    environ.update(env, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(["mpiexec", "-n", str(n), sys.executable, *args], cwd=ROOT, env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"mpiexec -n {n} python {' '.join(args)} did not finish in {TIMEOUT} s (killed):\n{out}")
    finally:
        if proc.poll() is None:  # pragma: no cover - an interrupted test: leave no rank behind
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


def result_of(scenario: str, **env: str) -> Any:
    code, out = run_mpi([str(WORKER), scenario], **env)
    assert code == 0, out
    (line,) = [x for x in out.splitlines() if x.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def test_collectives_across_two_ranks() -> None:
    # values are checked on every rank inside the worker, against numpy on every rank's inputs
    out = result_of("collectives")  # TP_NUM_THREADS unset: the two ranks share the cores
    assert out["threads"] == max(1, out["cpus"] // 2)
    assert "rank 0: [3]; rank 1: [4]" in out["shape"]
    assert "rank 0: float32; rank 1: float64" in out["dtype"]
    assert "rank 0: sum; rank 1: max" in out["op"]
    assert "different src values (rank 0: 0; rank 1: 1)" in out["src"]
    assert "rank 0: barrier; rank 1: all_gather" in out["collective"]


def test_two_ranks_b64_match_one_process_b128() -> None:
    # the worker asserts bitwise identical parameters on both ranks after every step, and <= 1e-6 here
    out = result_of("ddp", TP_NUM_THREADS="1")
    for mode in ("eager", "compiled", "no_sync"):
        print(f"{mode}: largest relative difference {out[mode]['max_relative_difference']:.3g}")
        assert out[mode]["max_relative_difference"] <= 1e-6
        assert out[mode]["moved"] > 1e-3  # every parameter trained
    assert "cannot run inside the compiled code" in out["compiled_backward"]
    assert out["unused_parameter"]
    assert "the ranks' models differ" in out["different_models"]
    assert "rank 0: 2 tensors, 10 elements; rank 1: 2 tensors, 15 elements" in out["different_models"]


def test_a_raising_rank_stops_the_others(tmp_path: Path) -> None:
    """Rank 1 raises while rank 0 waits in a barrier: the job ends (before the timeout, with a failing
    status), rank 1 reports its error and the abort, and rank 0 never gets past the barrier. The ranks'
    stderr is read from files they write themselves: what mpiexec relays can be cut off by the abort."""
    code, out = run_mpi([str(WORKER), "raise"], TP_TEST_STDERR_DIR=str(tmp_path))
    assert code != 0
    failing = (tmp_path / "rank1.err").read_text()
    assert "rank 1 fails on purpose" in failing, failing
    assert "rank 1 of 2 raised RuntimeError; aborting every rank (MPI_Abort)" in failing, failing
    assert "RESULT" not in out


def test_distributed_demo() -> None:
    pytest.importorskip("sklearn")
    code, out = run_mpi(["-m", "tensorplay.demo", "--distributed", "--epochs", "3", "--limit", "1000"])
    assert code == 0, out
    assert "data parallel over 2 processes (MPI), batch 32 per rank" in out
    assert re.search(r"^rank 0: \d+ images/s", out, re.M) and re.search(r"^rank 1: \d+ images/s", out, re.M)
    accuracy = re.search(r"final test accuracy ([\d.]+)% after 3 epochs \(rank 0\)", out)
    assert accuracy is not None and float(accuracy.group(1)) > 50, out  # chance is 10%
    assert out.count("final test accuracy") == 1  # printed by rank 0 only


def test_the_docs_script_runs_on_two_ranks(tmp_path: Path) -> None:
    from tests.markdown import python_blocks
    (block,) = python_blocks(ROOT / "docs" / "distributed.md")
    script = tmp_path / "train.py"
    script.write_text(block)
    code, out = run_mpi([str(script)])
    assert code == 0, out
    assert "2 process(es), final loss" in out  # and the script asserted identical weights on both ranks
