"""What a fresh process builds and imports for its first eager training step: only the kernels, dtypes and
modules the step uses (each check in a fresh process, with a timeout; no timings)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np

_DEMO_STEP = """
    import numpy as np
    import tensorplay as tp
    from tensorplay.demo.train import TrainConfig, make_model, make_optimizer, sample_batch, train_step
    config = TrainConfig()
    model = make_model(config)
    opt = make_optimizer(model, config)
    x, y = sample_batch(config)
    losses = [train_step(model, opt, x, y) for _ in range(STEPS)]
"""


def _run(code: str, steps: int = 1) -> str:
    program = f"STEPS = {steps}" + textwrap.dedent(_DEMO_STEP) + textwrap.dedent(code)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_float32_demo_steps_build_each_kernel_for_float32_only() -> None:
    """The demo's first eager training steps (float32 images; three, so that relu's ufunc is built too) leave
    every jitted kernel of the library with one signature, its float arrays float32 where the step passes
    them, and the numpy ufuncs with their float32 loop only: nothing was compiled (or loaded) for float64 or a
    second layout."""
    out = json.loads(_run("""
        import json, sys
        from numba.core.registry import CPUDispatcher
        from numba.np.ufunc.dufunc import DUFunc
        found, ufuncs = {}, {}
        for name, module in list(sys.modules.items()):
            if module is None or not name.startswith("tensorplay"):
                continue
            for attr, value in vars(module).items():
                if isinstance(value, CPUDispatcher) and value.signatures:
                    found[attr] = [[str(t) for t in sig] for sig in value.signatures]
                elif isinstance(value, DUFunc):
                    ufuncs[attr] = value.ufunc.types
        print(json.dumps({"loss": losses[-1], "kernels": found, "ufuncs": ufuncs}))
    """, steps=3))
    assert np.isfinite(out["loss"])
    kernels = out["kernels"]
    assert {"forward_output_blocks", "backward", "max_pool2x2_fwd", "cross_entropy_rows", "adam_update"} <= set(kernels)
    for name, signatures in kernels.items():
        assert len(signatures) == 1, (name, signatures)
    loops = [loop for ufunc in out["ufuncs"].values() for loop in ufunc]
    assert loops == ["f->f"]  # relu's, on the convolutions' outputs
    for name in ("forward_output_blocks", "backward", "max_pool2x2_fwd", "cross_entropy_rows", "adam_update"):
        floats = [t for t in kernels[name][0] if t.startswith("array(float")]
        assert floats and floats[0].startswith("array(float32"), (name, floats)


def test_making_tensors_leaves_numpy_ma_unimported_and_masked_arrays_are_still_refused() -> None:
    """``numpy.ma`` (15 ms to import) is not imported to check that an input is not a masked array (numba
    imports it on its first kernel call: a program of numpy-backed ops never does); once a masked array
    exists, it is still refused with the library's error."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import sys
        import numpy as np
        import tensorplay as tp
        x = tp.tensor(np.arange(6.0).reshape(2, 3)) + tp.tensor([1.0, 2.0, 3.0])
        before = "numpy.ma" in sys.modules
        import numpy.ma as ma
        try:
            tp.tensor(ma.masked_array([1.0, 2.0], mask=[0, 1]))
            error = "none"
        except tp.errors.DTypeError as e:
            error = "masked" if "masked array" in str(e) else str(e)
        print(before, error, float(x.sum()))
    """)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "masked", "27.0"]


def test_a_compiled_training_step_imports_only_the_transform_machinery_it_uses(tmp_path: Any) -> None:
    """``tp.compile`` of a training step imports :mod:`tensorplay.func.tracing` (its backward) but none of the
    transforms (``vmap``, ``jacrev``, ...), and its capture's relu builds no numpy ufunc; the transforms import
    on first use afterwards, and importing a submodule named as its transform leaves the package's attribute
    the transform."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        import numpy as np
        import tensorplay as tp
        from tensorplay import nn, optim
        import tensorplay.nn.functional as F
        model = nn.Sequential(nn.Linear(4, 128), nn.ReLU(), nn.Linear(128, 3))  # relu on 640 elements
        opt = optim.SGD(model.parameters(), lr=0.1)
        def step(x, y):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss
        compiled = tp.compile(step)
        x, y = tp.tensor(np.ones((5, 4), np.float32)), tp.tensor(np.arange(5) % 3)
        with tp.compiler.config.patch(cache_dir={str(tmp_path)!r}):
            first, second = float(compiled(x, y)), float(compiled(x, y))
        loaded = sorted(m for m in sys.modules if m.startswith("tensorplay.func."))
        from numba.np.ufunc.dufunc import DUFunc
        from tensorplay.interpreters.eager.kernels import _numba_kernels
        ufuncs = [name for name, v in vars(_numba_kernels).items() if isinstance(v, DUFunc)]
        import tensorplay.func.jac  # imports the vmap, jvp and vjp submodules
        from tensorplay.func import grad
        print(",".join(loaded), ufuncs == [], first > second, tp.func.vmap.__module__, tp.func.jvp.__module__,
              float(grad(lambda v: (v * v).sum())(tp.tensor([1.0, 2.0]))[1]),
              tp.func.vmap(lambda v: v * 2)(tp.tensor([1.0, 3.0])).tolist() == [2.0, 6.0])
    """)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["tensorplay.func.cache,tensorplay.func.tracing", "True", "True",
                                   "tensorplay.func.vmap", "tensorplay.func.jvp", "4.0", "True"]


def test_after_precompiling_the_demo_workload_a_fresh_demo_step_compiles_nothing(tmp_path: Any) -> None:
    """``python -m tensorplay.precompile --only demo`` fills empty kernel caches; a fresh process's first demo
    training step and evaluation forward then load every kernel (no numba compilation), with the same loss as
    when nothing was cached."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), TP_COMPILE_CACHE_DIR=str(tmp_path / "tp"))
    done = subprocess.run([sys.executable, "-m", "tensorplay.precompile", "--only", "demo", "--jobs", "1"],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "kernel signatures compiled" in done.stdout and "failed" not in done.stdout
    count = """
        from numba.core import event
        compiled = []
        class Count(event.Listener):
            def on_start(self, ev):
                compiled.append(ev.data["dispatcher"].py_func.__qualname__)
            def on_end(self, ev):
                pass
        with event.install_listener("numba:compile", Count()):
            losses = [train_step(model, opt, x, y)]
            model.eval()
            with tp.no_grad():
                model(tp.tensor(x))
        print(len(compiled), losses[0])
    """
    program = "STEPS = 0" + textwrap.dedent(_DEMO_STEP) + textwrap.dedent(
        "from tensorplay.interpreters.eager.kernels import _numba_start") + textwrap.dedent(count)
    warm = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600, env=env)
    assert warm.returncode == 0, warm.stderr
    n_compiled, loss = warm.stdout.split()[-2:]
    assert n_compiled == "0"
    fresh_env = dict(env, NUMBA_CACHE_DIR=str(tmp_path / "other"), TP_COMPILE_CACHE_DIR=str(tmp_path / "other-tp"))
    cold = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=900, env=fresh_env)
    assert cold.returncode == 0, cold.stderr
    cold_compiled, cold_loss = cold.stdout.split()[-2:]
    assert int(cold_compiled) > 0 and cold_loss == loss
