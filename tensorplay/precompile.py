"""``python -m tensorplay.precompile``: compile the eager kernels of common training steps once, ahead of their
first use, into the on-disk caches.

The eager interpreter's kernels are numba functions compiled on their first call (with ``cache=True``: numba
keeps them on disk beside their source, in its per-user cache directory where that is not writable, or in
``NUMBA_CACHE_DIR``); ``tp.compile``'s generated kernels go to its own cache (``TP_COMPILE_CACHE_DIR``, else the
per-user one). A fresh install has none of them: the first training step of a small CNN then compiles about
thirty kernel signatures, which takes seconds (the convolution's forward and backward most of it), while a
later process loads each in milliseconds. Running this once after installing moves that wait here.

Each workload runs one or a few steps of a small model, in float32 (``--float64`` adds the same in float64),
in its own process (``--jobs`` of them at a time, so the kernels compile on several cores), and reports how
many kernel signatures it compiled:

* ``demo``: the demo's CNN (:class:`tensorplay.demo.model.DigitsCNN`: padded 3x3 convolutions, relu, 2x2
  max-pooling, dropout, linear layers), cross-entropy and AdamW, eagerly and under ``tp.compile``, and its
  evaluation forward;
* ``cnn``: unpadded convolutions on 28x28 images, SGD with momentum;
* ``mlp``: linear layers with relu, cross-entropy, SGD with momentum and Adam;
* ``block``: a pre-norm transformer block (layer norm, multi-head self-attention, GELU), MSE and Adam.

Precompiling changes no result: a kernel loaded from the cache is the one its first call would have compiled.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

WORKLOADS: dict[str, Callable[[np.dtype[Any]], None]] = {}
"""The workloads by name, each run for one float dtype (see the module docstring)."""


def _workload(fn: Callable[[np.dtype[Any]], None]) -> Callable[[np.dtype[Any]], None]:
    WORKLOADS[fn.__name__.removeprefix("_")] = fn
    return fn


def _train(model: Any, opt: Any, x: Any, y: Any, loss: Callable[[Any, Any], Any], steps: int = 3) -> None:
    """``steps`` eager training steps (three: relu builds its ufunc from its ninth call)."""
    for _ in range(steps):
        opt.zero_grad()
        loss(model(x), y).backward()
        opt.step()


def _data(dtype: np.dtype[Any], x_shape: tuple[int, ...], classes: int) -> tuple[Any, Any]:
    import tensorplay as tp

    gen = np.random.default_rng(0)
    x = tp.tensor(gen.standard_normal(x_shape).astype(dtype))
    return x, tp.tensor(gen.integers(0, classes, x_shape[0]))


@_workload
def _demo(dtype: np.dtype[Any]) -> None:
    import tensorplay as tp
    import tensorplay.nn.functional as F
    from tensorplay.demo.compiled import training_step
    from tensorplay.demo.train import TrainConfig, make_model, make_optimizer, sample_batch

    config = TrainConfig()

    def fresh() -> tuple[Any, Any]:
        model = make_model(config).to(dtype.name)
        return model, make_optimizer(model, config)

    x, y = (tp.tensor(a) for a in sample_batch(config, dtype))
    model, opt = fresh()
    _train(model, opt, x, y, F.cross_entropy)
    model.eval()
    with tp.no_grad():
        model(_data(dtype, (512, 1, 8, 8), 10)[0])
    model, opt = fresh()
    compiled = tp.compile(training_step(model, opt))
    for _ in range(2):
        compiled(x, y)


@_workload
def _cnn(dtype: np.dtype[Any]) -> None:
    import tensorplay as tp
    import tensorplay.nn.functional as F
    from tensorplay import nn, optim

    model = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 5 * 5, 10)).to(dtype.name)
    x, y = _data(dtype, (64, 1, 28, 28), 10)
    _train(model, optim.SGD(model.parameters(), lr=0.01, momentum=0.9), x, y, F.cross_entropy)


@_workload
def _mlp(dtype: np.dtype[Any]) -> None:
    import tensorplay as tp
    import tensorplay.nn.functional as F
    from tensorplay import nn, optim

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10)).to(dtype.name)
    x, y = _data(dtype, (128, 784), 10)
    _train(model, optim.SGD(model.parameters(), lr=0.01, momentum=0.9), x, y, F.cross_entropy)
    _train(model, optim.Adam(model.parameters(), lr=1e-3), x, y, F.cross_entropy, steps=1)


@_workload
def _block(dtype: np.dtype[Any]) -> None:
    import tensorplay as tp
    import tensorplay.nn.functional as F
    from tensorplay import nn, optim

    d = 64

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
            self.fc1, self.fc2, self.act = nn.Linear(d, 4 * d), nn.Linear(4 * d, d), nn.GELU()

        def forward(self, x: Any) -> Any:
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    model = Block().to(dtype.name)
    gen = np.random.default_rng(0)
    x = tp.tensor(gen.standard_normal((16, 32, d)).astype(dtype))
    y = tp.tensor(gen.standard_normal((16, 32, d)).astype(dtype))
    _train(model, optim.Adam(model.parameters(), lr=1e-3), x, y, F.mse_loss)


def run_workload(name: str, dtype: np.dtype[Any]) -> int:
    """Run the workload ``name`` for ``dtype`` in this process; returns how many kernel signatures it compiled
    (loads from the caches do not count)."""
    from tensorplay.interpreters.eager.kernels import _numba_start  # noqa: F401  (numba started as the kernels do)
    from numba.core import event

    compiled = 0

    class Count(event.Listener):
        def on_start(self, ev: Any) -> None:
            nonlocal compiled
            compiled += 1

        def on_end(self, ev: Any) -> None:
            pass

    with event.install_listener("numba:compile", Count()):
        WORKLOADS[name](dtype)
    return compiled


def _one(name: str, dtype: str) -> tuple[str, str, float, str]:
    """Run one workload in a fresh process: ``(name, dtype, seconds, what it printed or its error)``."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tensorplay.precompile", "--only", name, "--dtype", dtype,
                           "--in-process"], capture_output=True, text=True, env=dict(os.environ))
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        return name, dtype, seconds, "failed: " + (done.stderr.strip().splitlines() or ["(no output)"])[-1]
    return name, dtype, seconds, done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m tensorplay.precompile",
                                     description="Compile the eager kernels of common training steps into the "
                                                 "on-disk caches, so that a program's first step loads them.")
    parser.add_argument("--only", action="append", choices=sorted(WORKLOADS), help="run only this workload "
                        "(repeatable; default: all)")
    parser.add_argument("--float64", action="store_true", help="also compile the float64 kernels")
    parser.add_argument("--jobs", type=int, default=max(1, min(len(WORKLOADS), os.cpu_count() or 1)),
                        help="workloads run at a time, each in its own process (default: one per core)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"], help=argparse.SUPPRESS)
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    names = args.only or sorted(WORKLOADS)
    if args.in_process:
        for name in names:
            print(f"{run_workload(name, np.dtype(args.dtype))} kernel signatures compiled")
        return 0
    dtypes = ["float32", "float64"] if args.float64 else ["float32"]
    jobs = [(name, dtype) for dtype in dtypes for name in names]
    start = time.perf_counter()
    failed = False
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for name, dtype, seconds, said in pool.map(lambda job: _one(*job), jobs):
            failed |= said.startswith("failed")
            print(f"{name:6s} {dtype}: {said} ({seconds:.1f} s)", flush=True)
    print(f"precompiled {len(jobs)} workloads in {time.perf_counter() - start:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
