"""numba starts without importing ``scipy.linalg`` (most of scipy) for tensorplay's kernels, and numba's own
BLAS-backed functions and a later ``import scipy.linalg`` still work (each check in a fresh process)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("scipy") is None, reason="scipy is not installed")


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_first_eager_kernel_and_compiled_step_leave_scipy_linalg_unimported() -> None:
    out = _run("""
        import sys, tempfile
        import numpy as np
        import tensorplay as tp
        x = tp.tensor(np.linspace(-1, 1, 4096, dtype=np.float32))
        y = x.relu()                      # the eager kernels: numba starts here
        step = tp.compile(lambda v: (v * 2.0 + 1.0).relu().sum())
        with tp.compiler.config.patch(cache_dir=tempfile.mkdtemp()):
            s = step(x)
        assert 'numba' in sys.modules
        print('scipy.linalg' in sys.modules, float(y.sum()), float(s))
    """)
    imported, relu_sum, step_sum = out.split()
    assert imported == "False"
    import numpy as np

    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    assert float(relu_sum) == pytest.approx(float(np.maximum(x, 0).sum(dtype=np.float64)), rel=1e-6)
    assert float(step_sum) == pytest.approx(float(np.maximum(x * 2 + 1, 0).sum(dtype=np.float64)), rel=1e-5)


def test_numba_blas_functions_and_scipy_linalg_still_work_after() -> None:
    out = _run("""
        import numpy as np
        import tensorplay as tp
        tp.tensor(np.ones(4096, np.float32)).relu()
        import numba
        @numba.njit
        def dot(a, b):
            return np.dot(a, b)
        a = np.arange(9.0).reshape(3, 3)
        assert np.array_equal(dot(a, a), a @ a)
        import scipy.linalg
        import scipy.linalg.cython_blas
        assert scipy.linalg.cython_blas.__pyx_capi__
        from scipy.linalg import cython_blas
        assert cython_blas is scipy.linalg.cython_blas
        print(scipy.linalg.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0])).tolist())
    """)
    assert out == "[1.0, 0.5]"


def test_the_kernels_numpy_ufuncs_are_built_on_first_use_only() -> None:
    """Each of the kernels' numpy ufuncs is built on its first use, for the one dtype used: float32 relus
    build relu's float32 loop and nothing else (no sigmoid, no float64 loop), after the calls that take
    ``numpy.maximum`` (the same bytes); a float32 sigmoid then adds sigmoid's float32 loop, a float64 relu
    relu's float64 loop."""
    out = _run("""
        import numpy as np
        import tensorplay as tp
        from tensorplay.interpreters.eager.kernels import _numba_kernels as nk

        def loops():  # the numpy loops of every ufunc the kernels' module has built so far
            built = [(name, v) for name, v in vars(nk).items() if isinstance(v, nk.numba.np.ufunc.dufunc.DUFunc)]
            return sorted(f"{name}:{t}" for name, v in built for t in v.ufunc.types)

        from tensorplay.interpreters.eager import interpreter
        x = np.linspace(-3, 3, 1000, dtype=np.float32)
        for _ in range(interpreter._RELU_UFUNC_AFTER):  # numpy.maximum until the ufunc pays back
            first = tp.tensor(x).relu().numpy()
        before_relu = loops()
        r = tp.tensor(x).relu().numpy()
        after_relu = loops()
        s = tp.tensor(x).sigmoid().numpy()
        after_sigmoid = loops()
        r64 = tp.tensor(x.astype(np.float64)).relu().numpy()
        assert before_relu == [] and first.tobytes() == r.tobytes()
        print(",".join(after_relu), ",".join(after_sigmoid), ",".join(loops()),
              float(np.abs(r - np.maximum(x, 0)).max()),
              float(np.abs(s - 1 / (1 + np.exp(-x.astype(np.float64)))).max()), r64.dtype,
              float(np.abs(r64 - np.maximum(x, 0)).max()))
    """)
    after_relu, after_sigmoid, after_f64, relu_err, sig_err, dtype64, relu64_err = out.split()
    assert after_relu.split(",") == ["relu_ufunc_f32:f->f"]
    assert after_sigmoid.split(",") == ["relu_ufunc_f32:f->f", "sigmoid_ufunc_f32:f->f"]
    assert after_f64.split(",") == ["relu_ufunc_f32:f->f", "relu_ufunc_f64:d->d", "sigmoid_ufunc_f32:f->f"]
    assert float(relu_err) == 0.0 and float(sig_err) < 1e-6
    assert dtype64 == "float64" and float(relu64_err) == 0.0


def test_yaml_and_cffi_wait_for_their_first_use_and_then_work(tmp_path: Any) -> None:
    """A process whose kernels all come from the caches (an eager relu, a compiled step: the second such
    process) imports neither ``yaml`` nor ``pycparser`` (cffi's C parser) while numba starts; afterwards numba
    still types a jitted call of a cffi function, ``yaml`` imports and parses, and numba's config still reads
    a ``.numba_config.yaml`` when reloaded where there is one."""
    pytest.importorskip("cffi")
    pytest.importorskip("yaml")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / ".numba_config.yaml").write_text("debug_cache: 1\n")
    code = f"""
        import math, os, sys
        import numpy as np
        os.environ["NUMBA_CACHE_DIR"] = {str(tmp_path / "numba")!r}
        import tensorplay as tp
        x = tp.tensor(np.linspace(-1, 1, 4096, dtype=np.float32))
        x.relu()
        step = tp.compile(lambda v: (v * 2.0 + 1.0).relu().sum())
        with tp.compiler.config.patch(cache_dir={str(tmp_path / "kernels")!r}):
            step(x)
        print('yaml' in sys.modules, 'pycparser' in sys.modules)
        import cffi, numba
        ffi = cffi.FFI()
        ffi.cdef('double cos(double);')
        cos = ffi.dlopen(None).cos
        @numba.njit
        def call(v):
            return cos(v)
        print(call(0.5) == math.cos(0.5))
        import yaml
        print(yaml.safe_load('a: [1, 2]') == {{'a': [1, 2]}})
        import numba.core.config as config
        os.chdir({str(tmp_path / "config")!r})
        config.reload_config()
        print(config.DEBUG_CACHE)
    """
    _run(code)  # fills both caches
    assert _run(code).split()[-5:] == ["False", "False", "True", "True", "1"]
