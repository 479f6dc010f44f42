"""Function transforms: tensorplay.func vs torch.func on the same models, side by side.

Rows: per-sample gradients of an MLP loss (``vmap(grad(loss))``, batch 128), ``jacrev`` and
``jacfwd`` of a 64 -> 64 MLP, ``hessian`` of a scalar function of 32 inputs, and ``grad``
of the MLP loss over the whole batch. Run as ``python -m benchmarks func`` or
``python benchmarks/bench_func.py [--threads N]`` (N = 0: leave the thread pools as they are; the
default is one thread for both libraries).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import median_time, table  # noqa: E402

BATCH = 128
MLP_SIZES = (64, 128, 128, 10)


def _mlp_params(rng: np.random.Generator, sizes: tuple[int, ...]) -> dict[str, np.ndarray[Any, Any]]:
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = (rng.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
        params[f"b{i}"] = (0.1 * rng.standard_normal(n_out)).astype(np.float32)
    return params


def run(threads: int | None = 1) -> list[tuple[str, dict[str, float]]]:
    """Rows of (benchmark, {implementation: seconds per call}). ``threads`` limits both libraries' thread
    pools (PyTorch's and the BLAS under numpy); 1 by default, since two pools spinning on two shared
    cores make PyTorch's multi-threaded times erratic. ``None`` leaves them as they are."""
    import torch

    previous = torch.get_num_threads()
    limiter = None
    if threads is not None:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
        limiter = threadpool_limits(limits=threads)
        torch.set_num_threads(threads)
    try:
        rows = _rows()
    finally:
        torch.set_num_threads(previous)
        if limiter is not None:
            limiter.restore_original_limits()
    suffix = "" if threads is None else f" [{threads} thread{'s' if threads > 1 else ''}]"
    return [(name + suffix, times) for name, times in rows]


def _rows() -> list[tuple[str, dict[str, float]]]:
    import torch
    import torch.func as tf

    import tensorplay as tp
    import tensorplay.func as F
    from tensorplay.nn import functional as TPF

    rng = np.random.default_rng(0)
    rows: list[tuple[str, dict[str, float]]] = []

    # ---- per-sample gradients of an MLP loss ---------------------------------------------------------
    layers = len(MLP_SIZES) - 1
    p_np = _mlp_params(rng, MLP_SIZES)
    x_np = rng.standard_normal((BATCH, MLP_SIZES[0])).astype(np.float32)
    y_np = rng.integers(0, MLP_SIZES[-1], BATCH)
    p_tp = {k: tp.tensor(v) for k, v in p_np.items()}
    p_t = {k: torch.tensor(v) for k, v in p_np.items()}
    x_tp, y_tp = tp.tensor(x_np), tp.tensor(y_np)
    x_t, y_t = torch.tensor(x_np), torch.tensor(y_np)

    def loss_tp(p: Any, x: Any, y: Any) -> Any:
        h = x
        for i in range(layers):
            h = TPF.linear(h, p[f"w{i}"], p[f"b{i}"])
            if i < layers - 1:
                h = h.relu()
        return TPF.cross_entropy(h, y)

    def loss_t(p: Any, x: Any, y: Any) -> Any:
        h = x
        for i in range(layers):
            h = torch.nn.functional.linear(h, p[f"w{i}"], p[f"b{i}"])
            if i < layers - 1:
                h = h.relu()
        return torch.nn.functional.cross_entropy(h, y)

    def sample_tp(p: Any, x: Any, y: Any) -> Any:
        return loss_tp(p, x[None], y[None])

    def sample_t(p: Any, x: Any, y: Any) -> Any:
        return loss_t(p, x[None], y[None])

    psg_tp = F.vmap(F.grad(sample_tp), in_dims=(None, 0, 0))
    psg_t = tf.vmap(tf.grad(sample_t), in_dims=(None, 0, 0))
    rows.append((f"per-sample grads MLP {'-'.join(map(str, MLP_SIZES))} b{BATCH}", {
        "torch": median_time(lambda: psg_t(p_t, x_t, y_t)),
        "tensorplay": median_time(lambda: psg_tp(p_tp, x_tp, y_tp)),
    }))
    g_tp, g_t = F.grad(loss_tp), tf.grad(loss_t)
    rows.append((f"grad MLP loss b{BATCH}", {
        "torch": median_time(lambda: g_t(p_t, x_t, y_t)),
        "tensorplay": median_time(lambda: g_tp(p_tp, x_tp, y_tp)),
    }))

    # ---- Jacobians of a 64 -> 64 MLP -------------------------------------------------------------------
    q_np = _mlp_params(rng, (64, 64, 64))
    q_tp = {k: tp.tensor(v) for k, v in q_np.items()}
    q_t = {k: torch.tensor(v) for k, v in q_np.items()}
    v_np = rng.standard_normal(64).astype(np.float32)
    v_tp, v_t = tp.tensor(v_np), torch.tensor(v_np)

    def net_tp(x: Any) -> Any:
        return TPF.linear(TPF.linear(x, q_tp["w0"], q_tp["b0"]).tanh(), q_tp["w1"], q_tp["b1"])

    def net_t(x: Any) -> Any:
        return torch.nn.functional.linear(torch.tanh(torch.nn.functional.linear(x, q_t["w0"], q_t["b0"])),
                                          q_t["w1"], q_t["b1"])

    jr_tp, jr_t = F.jacrev(net_tp), tf.jacrev(net_t)
    rows.append(("jacrev MLP 64-64-64", {
        "torch": median_time(lambda: jr_t(v_t)),
        "tensorplay": median_time(lambda: jr_tp(v_tp)),
    }))
    jf_tp, jf_t = F.jacfwd(net_tp), tf.jacfwd(net_t)
    rows.append(("jacfwd MLP 64-64-64", {
        "torch": median_time(lambda: jf_t(v_t)),
        "tensorplay": median_time(lambda: jf_tp(v_tp)),
    }))

    # ---- Hessian of a scalar function of 32 inputs --------------------------------------------------------
    a_np = (rng.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32)
    z_np = rng.standard_normal(32).astype(np.float32)
    a_tp, a_t = tp.tensor(a_np), torch.tensor(a_np)
    z_tp, z_t = tp.tensor(z_np), torch.tensor(z_np)

    def scalar_tp(x: Any) -> Any:
        return ((a_tp @ x).tanh() * x).sum() + (x * x).sum() * 0.5

    def scalar_t(x: Any) -> Any:
        return (torch.tanh(a_t @ x) * x).sum() + (x * x).sum() * 0.5

    h_tp, h_t = F.hessian(scalar_tp), tf.hessian(scalar_t)
    rows.append(("hessian, 32 inputs", {
        "torch": median_time(lambda: h_t(z_t)),
        "tensorplay": median_time(lambda: h_tp(z_tp)),
    }))
    return rows


if __name__ == "__main__":
    from benchmarks.timing import environment

    print(environment())
    n = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 1
    print(table(run(threads=n if n > 0 else None), "torch"))
