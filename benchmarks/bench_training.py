"""One training step (forward + backward + optimizer) in tensorplay eager vs PyTorch eager.

The same architectures with identical initial weights, side by side in one
process; each row is the median seconds per step after warm-up.

(a) MLP 784-256-256-10 (ReLU), batch 128, SGD with momentum;
(b) small CNN (conv 8 3x3, relu, maxpool 2, conv 16 3x3, relu, maxpool 2, linear 10) on 1x28x28, batch 64,
    SGD with momentum;
(c) pre-norm transformer block (d_model 64, 4 heads, seq 32, batch 16: layer_norm + attention + GELU MLP),
    Adam, MSE loss.

``python benchmarks/bench_training.py [--threads N]`` (or ``python -m benchmarks training``).
The two implementations are timed in alternating rounds; each row is the median.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import environment, interleaved, table  # noqa: E402

Row = tuple[str, dict[str, float]]


def _copy_weights(ours: Any, theirs: Any) -> None:
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def _mlp(tp: Any, torch: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    from tensorplay import nn, optim
    tnn = torch.nn
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((128, 784)).astype(np.float32)
    y_np = rng.integers(0, 10, 128)
    theirs = tnn.Sequential(tnn.Linear(784, 256), tnn.ReLU(), tnn.Linear(256, 256), tnn.ReLU(), tnn.Linear(256, 10))
    ours = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    _copy_weights(ours, theirs)
    return (_step_tp(tp, ours, optim.SGD(ours.parameters(), lr=0.01, momentum=0.9), x_np, y_np, "ce"),
            _step_torch(torch, theirs, torch.optim.SGD(theirs.parameters(), lr=0.01, momentum=0.9), x_np, y_np,
                        "ce"))


def _cnn(tp: Any, torch: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    from tensorplay import nn, optim
    tnn = torch.nn
    rng = np.random.default_rng(1)
    x_np = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    y_np = rng.integers(0, 10, 64)
    theirs = tnn.Sequential(tnn.Conv2d(1, 8, 3), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(8, 16, 3), tnn.ReLU(),
                            tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(16 * 5 * 5, 10))
    ours = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 5 * 5, 10))
    _copy_weights(ours, theirs)
    return (_step_tp(tp, ours, optim.SGD(ours.parameters(), lr=0.01, momentum=0.9), x_np, y_np, "ce"),
            _step_torch(torch, theirs, torch.optim.SGD(theirs.parameters(), lr=0.01, momentum=0.9), x_np, y_np,
                        "ce"))


def _block_classes(tp: Any, torch: Any) -> tuple[Any, Any]:
    from tensorplay import nn
    tnn = torch.nn

    class Block(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x), need_weights=False)[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    class TorchBlock(tnn.Module):  # type: ignore[name-defined, misc]
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.ln1 = tnn.LayerNorm(d)
            self.attn = tnn.MultiheadAttention(d, heads, batch_first=True)
            self.ln2 = tnn.LayerNorm(d)
            self.fc1 = tnn.Linear(d, 4 * d)
            self.act = tnn.GELU()
            self.fc2 = tnn.Linear(4 * d, d)

        def forward(self, x: Any) -> Any:
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    return Block, TorchBlock


def _transformer(tp: Any, torch: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
    from tensorplay import optim
    rng = np.random.default_rng(2)
    x_np = rng.standard_normal((16, 32, 64)).astype(np.float32)
    y_np = rng.standard_normal((16, 32, 64)).astype(np.float32)
    block, torch_block = _block_classes(tp, torch)
    theirs = torch_block(64, 4)
    ours = block(64, 4)
    _copy_weights(ours, theirs)
    return (_step_tp(tp, ours, optim.Adam(ours.parameters(), lr=1e-3), x_np, y_np, "mse"),
            _step_torch(torch, theirs, torch.optim.Adam(theirs.parameters(), lr=1e-3), x_np, y_np, "mse"))


def _step(model: Any, opt: Any, x: Any, y: Any, loss_fn: Callable[[Any, Any], Any]) -> Callable[[], Any]:
    """One training step on ``(x, y)``: zero the gradients, forward, loss, backward, optimizer step."""
    def step() -> Any:
        opt.zero_grad()
        out = loss_fn(model(x), y)
        out.backward()
        opt.step()
        return out
    return step


def _step_tp(tp: Any, model: Any, opt: Any, x_np: Any, y_np: Any, loss: str) -> Callable[[], Any]:
    import tensorplay.nn.functional as F
    return _step(model, opt, tp.tensor(x_np), tp.tensor(y_np), F.cross_entropy if loss == "ce" else F.mse_loss)


def _step_torch(torch: Any, model: Any, opt: Any, x_np: Any, y_np: Any, loss: str) -> Callable[[], Any]:
    F = torch.nn.functional
    return _step(model, opt, torch.from_numpy(x_np), torch.from_numpy(y_np),
                 F.cross_entropy if loss == "ce" else F.mse_loss)


CASES: dict[str, Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]] = {
    "train step: MLP 784-256-256-10, b128, SGD": _mlp,
    "train step: CNN 8c3-16c3 28x28, b64, SGD": _cnn,
    "train step: transformer block d64 h4 s32 b16, Adam": _transformer,
}


def run(repeat: int = 15, threads: int | None = None) -> list[Row]:
    """Rows of (benchmark, {implementation: seconds per step}); ``threads`` limits PyTorch's and the
    BLAS/OpenMP pools of both (default: leave them as they are)."""
    import torch

    import tensorplay as tp

    limiter: Any = contextlib.nullcontext()
    previous = torch.get_num_threads()
    if threads is not None:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
        limiter = threadpool_limits(limits=threads)
        torch.set_num_threads(threads)
    rows: list[Row] = []
    try:
        with limiter:
            tp.manual_seed(0)
            torch.manual_seed(0)
            suffix = "" if threads is None else f" [{threads} thread{'s' if threads > 1 else ''}]"
            for name, make in CASES.items():
                ours, theirs = make(tp, torch)
                rows.append((name + suffix, interleaved({"torch": theirs, "tensorplay": ours}, repeat, min_time=0.05, warmup=5)))
    finally:
        torch.set_num_threads(previous)
    return rows


def main(argv: list[str]) -> None:
    """Print the environment and the table with ratios against PyTorch (``--threads N`` to limit
    both libraries' thread pools)."""
    import torch
    threads = int(argv[argv.index("--threads") + 1]) if "--threads" in argv else None
    print(environment())
    print(f"torch threads: {threads or torch.get_num_threads()}")
    print(table(run(threads=threads), "torch"))


if __name__ == "__main__":
    main(sys.argv[1:])
