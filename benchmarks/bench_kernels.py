"""The eager interpreter's compute kernels side by side with PyTorch (CPU) and composed numpy.

``python -m benchmarks kernels`` or ``python benchmarks/bench_kernels.py``; on a shared
machine, ``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 TP_NUM_THREADS=1`` compares one thread
per library (multi-threaded OpenBLAS and oneDNN degrade badly when the cores are busy).
``run()`` returns rows of ``(name, {implementation: seconds per call})``; the
implementation called ``tensorplay`` is the kernel from
:mod:`tensorplay.interpreters.eager.kernels`. Every function is warmed up (numba compiles
or loads its cache on the first call), then all implementations of a row are
timed in alternating batches and the median batch is reported, so load changes
on a shared machine hit them alike.
"""

from __future__ import annotations

import os
import sys
from typing import Any

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks.timing import environment, interleaved, table  # noqa: E402

Row = tuple[str, dict[str, float]]


def _numpy_layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> Any:
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


def _numpy_softmax(x: np.ndarray) -> Any:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def run() -> list[Row]:
    """Rows of (benchmark, {implementation: seconds per call})."""
    import torch as torch_module

    from tensorplay.interpreters.eager import kernels as K

    torch: Any = torch_module
    F: Any = torch.nn.functional
    rng = np.random.default_rng(0)
    rows: list[Row] = []

    x = rng.standard_normal((4096, 1024)).astype(np.float32)
    g = rng.standard_normal(1024).astype(np.float32)
    b = rng.standard_normal(1024).astype(np.float32)
    tx, tg, tb = torch.from_numpy(x), torch.from_numpy(g), torch.from_numpy(b)
    rows.append(("layer_norm (4096, 1024) f32", interleaved({
        "tensorplay": lambda: K.layer_norm_last_axis(x, g, b, eps=1e-5),
        "torch": lambda: F.layer_norm(tx, (1024,), tg, tb, 1e-5),
        "numpy": lambda: _numpy_layer_norm(x, g, b, 1e-5),
    })))
    rows.append(("softmax (4096, 1024) f32, last axis", interleaved({
        "tensorplay": lambda: K.softmax(x, axis=-1),
        "torch": lambda: torch.softmax(tx, -1),
        "numpy": lambda: _numpy_softmax(x),
    })))
    rows.append(("log_softmax (4096, 1024) f32, last axis", interleaved({
        "tensorplay": lambda: K.log_softmax(x, axis=-1),
        "torch": lambda: torch.log_softmax(tx, -1),
    })))
    rows.append(("gelu erf (4096, 1024) f32", interleaved({
        "tensorplay": lambda: K.gelu(x, approximate="none"),
        "torch": lambda: F.gelu(tx),
    })))

    xc = rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
    wc = rng.standard_normal((32, 3, 3, 3)).astype(np.float32)
    txc, twc = torch.from_numpy(xc), torch.from_numpy(wc)
    conv_params: dict[str, Any] = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), groups=1)
    rows.append(("conv2d b32 3->32 32x32 3x3 pad 1", interleaved({
        "tensorplay": lambda: K.conv_nd(xc, wc, **conv_params),
        "torch": lambda: F.conv2d(txc, twc, None, 1, 1),
    })))
    y = K.conv_nd(xc, wc, **conv_params)
    ty = torch.from_numpy(y)
    rows.append(("  its weight grad (conv_weight_grad)", interleaved({
        "tensorplay": lambda: K.conv_weight_grad_nd(xc, y, kernel_size=(3, 3), **conv_params),
        "torch": lambda: torch.nn.grad.conv2d_weight(txc, twc.shape, ty, 1, 1),
    })))
    rows.append(("  its input grad (conv_transpose)", interleaved({
        "tensorplay": lambda: K.conv_transpose_nd(y, wc, stride=(1, 1), padding=(1, 1), output_padding=(0, 0),
                                               dilation=(1, 1), groups=1),
        "torch": lambda: F.conv_transpose2d(ty, twc, None, 1, 1),
    })))
    xm = rng.standard_normal((32, 64, 16, 16)).astype(np.float32)
    wm = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    txm, twm = torch.from_numpy(xm), torch.from_numpy(wm)
    rows.append(("conv2d b32 64->64 16x16 3x3 pad 1", interleaved({
        "tensorplay": lambda: K.conv_nd(xm, wm, **conv_params),
        "torch": lambda: F.conv2d(txm, twm, None, 1, 1),
    })))

    pool: dict[str, Any] = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    rows.append(("max_pool 2x2 on the conv output (32,32,32,32)", interleaved({
        "tensorplay": lambda: K.max_pool_nd(y, **pool),
        "torch": lambda: F.max_pool2d(ty, 2, 2),
    })))
    gp = rng.standard_normal((32, 32, 16, 16)).astype(np.float32)
    tgp = torch.from_numpy(gp)
    tyr = ty.clone().requires_grad_()

    def torch_pool_fwd_bwd() -> None:
        F.max_pool2d(tyr, 2, 2).backward(tgp)

    rows.append(("  max_pool forward + backward", interleaved({
        "tensorplay": lambda: (K.max_pool_nd(y, **pool), K.max_pool_backward_nd(y, gp, **pool)),
        "torch": torch_pool_fwd_bwd,
    })))

    q = rng.standard_normal((8, 4, 128, 64)).astype(np.float32)
    kk = rng.standard_normal((8, 4, 128, 64)).astype(np.float32)
    v = rng.standard_normal((8, 4, 128, 64)).astype(np.float32)
    causal = np.tril(np.ones((128, 128), bool))
    tq, tk, tv, tm = (torch.from_numpy(a) for a in (q, kk, v, causal))
    rows.append(("attention (8,4,128,64) f32, causal mask", interleaved({
        "tensorplay": lambda: K.dot_product_attention(q, kk, v, causal, scale=0.125),
        "torch": lambda: F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm),
    })))

    m = rng.standard_normal((1024, 1024)).astype(np.float32)
    n = rng.standard_normal((1024, 1024)).astype(np.float32)
    tm1, tn1 = torch.from_numpy(m), torch.from_numpy(n)
    rows.append(("matmul 1024x1024 f32 (eager path: np.matmul)", interleaved({
        "numpy": lambda: m @ n,
        "torch": lambda: tm1 @ tn1,
    }, rounds=7)))
    return rows


def settings() -> str:
    """Thread pools, malloc variables and kernel threads this benchmark runs under."""
    import torch

    from tensorplay.interpreters.eager import kernels as K

    threads_env = {k: v for k, v in os.environ.items() if k in ("OMP_NUM_THREADS", "TP_NUM_THREADS")}
    return (f"{environment()}\n"
            f"tensorplay kernel threads: {K.num_threads()}; torch threads: {torch.get_num_threads()}; "
            f"thread env: {threads_env or 'unset'}; "
            f"MALLOC_* = {({k: v for k, v in os.environ.items() if k.startswith('MALLOC_')} or 'glibc defaults')}")


if __name__ == "__main__":
    print(settings())
    print(table(run(), "torch"))
