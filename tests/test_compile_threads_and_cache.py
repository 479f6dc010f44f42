"""Four Python threads calling one compiled function get what one thread gets (no deadlock, no threading-layer
abort), and the on-disk kernel cache: where it lives, reuse across processes, invalidation when a codegen
option changes, a corrupt or tampered entry as a safe miss, and force_disable_caches."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay.compiler import config
from tensorplay.compiler.numba_backend import cache
from tests.helpers import run_in_threads

ROOT = Path(__file__).resolve().parents[1]


def test_four_threads_calling_one_compiled_function() -> None:
    tp.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    compiled = tp.compile(model)
    inputs = [tp.randn(8 + k, 16) for k in range(4)]  # different batch sizes: captures race too
    with tp.no_grad():
        expected = [model(x).numpy() for x in inputs]
    def call(k: int, r: int) -> Any:
        with tp.no_grad():
            return compiled(inputs[(k + r) % 4]).numpy()

    results = run_in_threads(4, call, rounds=5)
    for (k, r), got in results.items():
        np.testing.assert_allclose(got, expected[(k + r) % 4], rtol=1e-5, atol=1e-6)


def test_threads_training_with_a_compiled_region_each_on_its_own_model() -> None:
    def train(seed: int) -> np.ndarray[Any, Any]:
        model = nn.Linear(5, 1)  # its initial draws race on the global generator: overwritten, seeded per thread
        gen = np.random.default_rng(seed)
        model.load_state_dict({"weight": tp.tensor(gen.standard_normal((1, 5)).astype(np.float32)),
                               "bias": tp.tensor(gen.standard_normal(1).astype(np.float32))})
        loss_fn = tp.compile(lambda x: model(x).square().mean())
        x = tp.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(4, 5))
        for _ in range(10):
            model.zero_grad()
            loss_fn(x).backward()
            with tp.no_grad():
                for p in model.parameters():
                    p.sub_(0.1 * p.grad)
        return np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])

    expected = [train(s) for s in range(4)]
    got: dict[int, Any] = {}
    threads = [threading.Thread(target=lambda s=s: got.__setitem__(s, train(s))) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for s in range(4):
        np.testing.assert_allclose(got[s], expected[s], rtol=1e-6)


# ---- the kernel cache ---------------------------------------------------------------------------------------

def fused(x: Any, b: Any) -> Any:
    """One fusion group with a reduction epilogue (on at least SMALL_GROUP elements, so it gets a kernel)."""
    return ((x + b).relu() * 3.0 - b).sum(0)


@pytest.fixture
def fresh_cache(tmp_path: Path) -> Any:
    tp.compiler.reset()
    with config.patch(cache_dir=str(tmp_path)):
        yield tmp_path
    tp.compiler.reset()


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*") if (p / "kernel.py").exists())


def test_kernels_are_source_files_in_the_configured_directory(fresh_cache: Path) -> None:
    x, b = tp.randn(64, 128), tp.randn(128)
    np.testing.assert_allclose(tp.compile(fused)(x, b).numpy(), fused(x, b).numpy(), rtol=1e-5)
    entries = _entries(fresh_cache)
    assert entries
    for entry in entries:
        manifest = json.loads((entry / "manifest.json").read_text())
        assert manifest["key"] == entry.name and manifest["numba"]  # numba's files are recorded once compiled
        assert "@numba.njit(cache=True" in (entry / "kernel.py").read_text()


def test_the_default_directory_is_per_user_and_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TP_COMPILE_CACHE_DIR", raising=False)
    root = cache.cache_root()
    assert root == tmp_path / "xdg" / "tensorplay" / "kernels"
    assert root.stat().st_mode & 0o077 == 0
    monkeypatch.setenv("TP_COMPILE_CACHE_DIR", str(tmp_path / "env"))
    assert cache.cache_root() == tmp_path / "env"
    with config.patch(cache_dir=str(tmp_path / "config")):
        assert cache.cache_root() == tmp_path / "config"  # the setting wins over the environment


def test_a_changed_codegen_option_is_another_entry(fresh_cache: Path) -> None:
    x, b = tp.randn(64, 128), tp.randn(128)
    tp.compile(fused)(x, b)
    default = set(_entries(fresh_cache))
    got = tp.compile(fused, options={"fastmath": False})(x, b)
    changed = set(_entries(fresh_cache)) - default
    assert changed, "a kernel built without fast-math must not reuse the fast-math build"
    for entry in changed:
        assert "fastmath=False" in (entry / "kernel.py").read_text()
    np.testing.assert_allclose(got.numpy(), fused(x, b).numpy(), rtol=1e-6)


def test_the_key_covers_versions_cpu_and_options(monkeypatch: pytest.MonkeyPatch) -> None:
    env = cache.environment()
    assert {"tensorplay", "numba", "llvmlite", "numpy", "cpu", "cpu_features", "threading_layer"} <= set(env)
    source = "def kernel(n0, a0, o0):\n    for i0 in range(n0):\n        o0[i0] = a0[i0]\n"
    base = cache.entry_key(source, dict(cache.CODEGEN))
    assert cache.entry_key(source, dict(cache.CODEGEN, fastmath=())) != base
    assert cache.entry_key(source.replace("a0[i0]", "-a0[i0]"), dict(cache.CODEGEN)) != base
    for option, value in (("parallel", True), ("error_model", "python"), ("boundscheck", True)):
        assert cache.entry_key(source, dict(cache.CODEGEN, **{option: value})) != base, option
    for name in ("tensorplay", "numba", "llvmlite", "numpy", "python", "cpu", "cpu_features", "threading_layer"):
        monkeypatch.setattr(cache, "_ENV", dict(env, **{name: str(env[name]) + "-other"}))
        assert cache.entry_key(source, dict(cache.CODEGEN)) != base, f"a changed {name} must miss the cache"
    monkeypatch.setattr(cache, "_ENV", env)
    assert cache.entry_key(source, dict(cache.CODEGEN)) == base


@pytest.mark.parametrize("damage", ["kernel", "numba", "manifest", "extra"])
def test_a_corrupt_or_tampered_entry_is_a_safe_miss(fresh_cache: Path, damage: str) -> None:
    x, b = tp.randn(64, 128), tp.randn(128)
    tp.compile(fused)(x, b)
    entries = _entries(fresh_cache)
    assert entries
    for entry in entries:
        if damage == "kernel":  # edited source: rewritten from the generator, never imported as it is
            (entry / "kernel.py").write_text("raise SystemExit('tampered')\n")
        elif damage == "numba":  # garbage where numba's compiled code was: discarded, rebuilt
            for f in (entry / "__pycache__").iterdir():
                f.write_bytes(b"\x80\x04garbage")
        elif damage == "manifest":
            (entry / "manifest.json").write_text("{not json")
        else:  # a numba file the manifest does not know: dropped before numba could read it
            (entry / "__pycache__" / "kernel.kernel_x-1.py311.nbi").write_bytes(b"junk")
    tp.compiler.reset()
    for name in [n for n in sys.modules if n.startswith("tensorplay_kernel_")]:
        del sys.modules[name]
    got = tp.compile(fused)(x, b)
    np.testing.assert_allclose(got.numpy(), fused(x, b).numpy(), rtol=1e-5)
    for entry in _entries(fresh_cache):
        assert "tampered" not in (entry / "kernel.py").read_text()
        assert not (entry / "__pycache__" / "kernel.kernel_x-1.py311.nbi").exists()


def test_force_disable_caches_builds_in_a_temporary_directory(tmp_path: Path) -> None:
    tp.compiler.reset()
    with config.patch(cache_dir=str(tmp_path), force_disable_caches=True):
        tp.compile(fused)(tp.randn(64, 128), tp.randn(128))
        assert not _entries(tmp_path)
        assert str(cache.cache_root()).startswith(str(Path(os.environ.get("TMPDIR", "/tmp"))))
    tp.compiler.reset()


def test_a_second_process_loads_kernels_from_the_cache(tmp_path: Path) -> None:
    script = ("import time, tensorplay as tp\n"
              "from tests.test_compile_threads_and_cache import fused\n"
              "f = tp.compile(fused)\nx, b = tp.randn(64, 128), tp.randn(128)\nf(x, b)\n"
              "from tensorplay.compiler.numba_backend import cache\n"
              "print(sorted(p.name for p in cache.cache_root().glob('*/*')))\n")
    env = {**os.environ, "TP_COMPILE_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    first = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                           check=True)
    stamps = {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/*/__pycache__/*")}
    second = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True,
                            check=True)
    assert first.stdout == second.stdout and stamps and first.stdout != "[]\n"
    assert {p: p.stat().st_mtime_ns for p in tmp_path.glob("*/*/__pycache__/*")} == stamps  # nothing rebuilt
