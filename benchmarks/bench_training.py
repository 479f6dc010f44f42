"""One training step (forward + backward + optimizer) in tensorplay eager vs PyTorch eager.

The same architectures with identical initial weights, side by side in one
process; each row is the median seconds per step after warm-up.

(a) MLP 784-256-256-10 (ReLU), batch 128, SGD with momentum;
(b) small CNN (conv 8 3x3, relu, maxpool 2, conv 16 3x3, relu, maxpool 2, linear 10) on 1x28x28, batch 64,
    SGD with momentum;
(c) pre-norm transformer block (d_model 64, 4 heads, seq 32, batch 16: layer_norm + attention + GELU MLP),
    Adam, MSE loss.

``python benchmarks/bench_training.py`` (or ``python -m benchmarks training``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import environment, median_time, table  # noqa: E402

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

    class TorchBlock(tnn.Module):  # type: ignore[misc]
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


def _step_tp(tp: Any, model: Any, opt: Any, x_np: Any, y_np: Any, loss: str) -> Callable[[], Any]:
    import tensorplay.nn.functional as F
    x, y = tp.tensor(x_np), tp.tensor(y_np)
    loss_fn = F.cross_entropy if loss == "ce" else F.mse_loss

    def step() -> Any:
        opt.zero_grad()
        out = loss_fn(model(x), y)
        out.backward()
        opt.step()
        return out
    return step


def _step_torch(torch: Any, model: Any, opt: Any, x_np: Any, y_np: Any, loss: str) -> Callable[[], Any]:
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    loss_fn = torch.nn.functional.cross_entropy if loss == "ce" else torch.nn.functional.mse_loss

    def step() -> Any:
        opt.zero_grad()
        out = loss_fn(model(x), y)
        out.backward()
        opt.step()
        return out
    return step


CASES: dict[str, Callable[[Any, Any], tuple[Callable[[], Any], Callable[[], Any]]]] = {
    "train step: MLP 784-256-256-10, b128, SGD": _mlp,
    "train step: CNN 8c3-16c3 28x28, b64, SGD": _cnn,
    "train step: transformer block d64 h4 s32 b16, Adam": _transformer,
}


def run(repeat: int = 9) -> list[Row]:
    """Rows of (benchmark, {implementation: seconds per step})."""
    import torch

    import tensorplay as tp

    tp.manual_seed(0)
    torch.manual_seed(0)
    rows: list[Row] = []
    for name, make in CASES.items():
        ours, theirs = make(tp, torch)
        rows.append((name, {
            "torch": median_time(theirs, repeat=repeat, min_time=0.1, warmup=5),
            "tensorplay": median_time(ours, repeat=repeat, min_time=0.1, warmup=5),
        }))
    return rows


def main() -> None:
    """Print the environment and the table with ratios against PyTorch."""
    import torch
    print(environment())
    print(f"torch threads: {torch.get_num_threads()}")
    print(table(run(), "torch"))


if __name__ == "__main__":
    main()
