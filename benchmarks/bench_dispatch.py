"""Per-op dispatch cost and matmul: tensorplay eager vs numpy and PyTorch eager, side by side."""

from __future__ import annotations

import numpy as np

from benchmarks.timing import median_time, table


def run() -> list[tuple[str, dict[str, float]]]:
    """Rows of (benchmark, {implementation: seconds per call})."""
    import torch

    import tensorplay as tp

    rows: list[tuple[str, dict[str, float]]] = []
    a_np = np.random.default_rng(0).standard_normal(8).astype(np.float32)
    b_np = np.random.default_rng(1).standard_normal(8).astype(np.float32)
    a_tp, b_tp = tp.tensor(a_np), tp.tensor(b_np)
    a_t, b_t = torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())
    rows.append(("a + b, 8 x f32", {
        "torch": median_time(lambda: a_t + b_t),
        "numpy": median_time(lambda: a_np + b_np),
        "tensorplay": median_time(lambda: a_tp + b_tp),
    }))
    a_g, b_g = tp.tensor(a_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    a_tg, b_tg = a_t.clone().requires_grad_(), b_t.clone().requires_grad_()
    rows.append(("a + b, 8 x f32, recording autograd", {
        "torch": median_time(lambda: a_tg + b_tg),
        "tensorplay": median_time(lambda: a_g + b_g),
    }))
    rows.append(("a * 2.0 (python scalar), 8 x f32", {
        "torch": median_time(lambda: a_t * 2.0),
        "numpy": median_time(lambda: a_np * 2.0),
        "tensorplay": median_time(lambda: a_tp * 2.0),
    }))
    m_np = np.random.default_rng(2).standard_normal((1024, 1024)).astype(np.float32)
    n_np = np.random.default_rng(3).standard_normal((1024, 1024)).astype(np.float32)
    m_tp, n_tp = tp.tensor(m_np), tp.tensor(n_np)
    m_t, n_t = torch.from_numpy(m_np), torch.from_numpy(n_np)
    rows.append(("matmul 1024x1024 f32", {
        "numpy": median_time(lambda: m_np @ n_np, repeat=5),
        "tensorplay": median_time(lambda: m_tp @ n_tp, repeat=5),
        "torch": median_time(lambda: m_t @ n_t, repeat=5),
    }))
    return rows


if __name__ == "__main__":
    result = run()
    print(table(result, "torch"))
