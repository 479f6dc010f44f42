"""Data-parallel costs over MPI: ``mpiexec -n 2 python -m benchmarks.bench_distributed [--quick]``.

Not part of ``python -m benchmarks`` (it needs ``mpiexec``). Rank 0 prints three tables:

1. **all-reduce time against buffer size** (float32, 1k to 10M elements): mpi4py's ``Allreduce`` on a raw
   numpy array (the floor), ``tensorplay.distributed.all_reduce`` on the same numpy array and on an eager
   tensor (both add the header exchange that checks shapes and dtypes across ranks). Each figure is the
   median over rounds of the slowest rank's mean time per call (the implementations alternate by round).
2. **a training step** (MLP 784-256-256-10, batch 128 per rank, cross-entropy, SGD with momentum 0.9)
   wrapped in ``DistributedDataParallel`` with a few bucket sizes: step time, the time the averaging
   added that the backward did not hide (``ddp.comm_seconds``) as a share of the step, and the time of one
   blocking all-reduce of all the gradients for comparison.
3. with ``-n 1``, the same step without any wrapper: run the script once with ``-n 1`` and once with
   ``-n 2`` to compare step times (the 2-process step trains on twice the images).

The thread setting is printed (``TP_NUM_THREADS``, else tensorplay's policy: ranks sharing CPUs split them).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import tensorplay as tp
import tensorplay.distributed as dist
import tensorplay.nn.functional as F
from tensorplay import nn, optim

SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)


def _slowest(seconds: float) -> float:
    """The largest of every rank's ``seconds`` (a collective takes as long as its slowest rank)."""
    return float(dist.all_reduce(np.array([seconds]), op="max")[0])


def _time_calls(fn: Callable[[], Any], calls: int) -> float:
    dist.barrier()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return _slowest((time.perf_counter() - start) / calls)


def allreduce_table(rounds: int, budget: float) -> list[tuple[int, dict[str, float]]]:
    """Median seconds per call of each implementation at each size (see the module docstring)."""
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rows = []
    for size in SIZES:
        raw = np.ones(size, dtype=np.float32)
        arr = np.ones(size, dtype=np.float32)
        ten = tp.ones(size)
        impls: dict[str, Callable[[], Any]] = {
            "mpi4py numpy": lambda: comm.Allreduce(MPI.IN_PLACE, raw, op=MPI.SUM),
            "tp numpy": lambda: dist.all_reduce(arr),
            "tp tensor": lambda: dist.all_reduce(ten),
        }
        for fn in impls.values():  # warm up (and size the batch from the first call)
            fn()
        probe = _time_calls(impls["mpi4py numpy"], 3)
        calls = max(3, min(2000, int(budget / max(probe, 1e-7))))
        times: dict[str, list[float]] = {name: [] for name in impls}
        names = list(impls)
        for r in range(rounds):
            for name in names if r % 2 == 0 else reversed(names):
                times[name].append(_time_calls(impls[name], calls))
        rows.append((size, {name: statistics.median(t) for name, t in times.items()}))
    return rows


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x: Any) -> Any:
        return self.fc3(self.fc2(self.fc1(x).relu()).relu())


def step_table(steps: int, caps: list[float | None]) -> list[tuple[str, dict[str, float]]]:
    """Per bucket cap (``None``: no wrapper): median step seconds and the exposed communication share."""
    rng = np.random.default_rng(dist.rank())
    x = tp.tensor(rng.standard_normal((128, 784)).astype(np.float32))
    y = tp.tensor(rng.integers(0, 10, 128))
    rows = []
    for cap in caps:
        tp.manual_seed(0)
        model = MLP()
        net: Any = model if cap is None else dist.DistributedDataParallel(model, bucket_cap_mb=cap)
        opt = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

        def step() -> None:
            opt.zero_grad()
            F.cross_entropy(net(x), y).backward()
            opt.step()
        for _ in range(5):
            step()
        times, shares = [], []
        for _ in range(steps):
            before = 0.0 if cap is None else net.comm_seconds
            dist.barrier()
            start = time.perf_counter()
            step()
            took = time.perf_counter() - start
            times.append(_slowest(took))
            shares.append(0.0 if cap is None else (net.comm_seconds - before) / took)
        label = "no wrapper" if cap is None else f"DDP, bucket_cap_mb={cap:g} ({len(net.bucket_sizes)} buckets)"
        rows.append((label, {"step ms": 1e3 * statistics.median(times),
                             "averaging share": statistics.median(shares)}))
    grads = np.ones(sum(int(p.numel()) for p in MLP().parameters()), dtype=np.float32)
    if dist.world_size() > 1:
        from mpi4py import MPI
        whole = _time_calls(lambda: MPI.COMM_WORLD.Allreduce(MPI.IN_PLACE, grads, op=MPI.SUM), 50)
        rows.append((f"one blocking Allreduce of all {grads.size} gradients", {"step ms": 1e3 * whole,
                                                                               "averaging share": float("nan")}))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="mpiexec -n 2 python -m benchmarks.bench_distributed")
    parser.add_argument("--quick", action="store_true", help="fewer rounds and steps (about a minute)")
    args = parser.parse_args()
    world = dist.init()
    from tensorplay.interpreters.eager.kernels import threads
    rounds, budget, steps = (3, 0.05, 30) if args.quick else (7, 0.2, 100)
    lines = [f"{world.size} process(es); threads per process: {threads.num_threads()} "
             f"(TP_NUM_THREADS={os.environ.get('TP_NUM_THREADS', 'unset')}); CPUs {len(os.sched_getaffinity(0))}"]
    if world.size > 1:
        table = allreduce_table(rounds, budget)
        lines.append("\nall-reduce, float32, sum (median of the slowest rank's time per call)")
        lines.append(f"{'elements':>10} {'MB':>7} {'mpi4py numpy':>14} {'tp numpy':>12} {'tp tensor':>12} "
                     f"{'tp/mpi4py':>10}")
        for size, row in table:
            lines.append(f"{size:>10} {size * 4 / 1e6:>7.3f} {_us(row['mpi4py numpy']):>14} {_us(row['tp numpy']):>12} "
                         f"{_us(row['tp tensor']):>12} {row['tp tensor'] / row['mpi4py numpy']:>10.2f}")
    caps: list[float | None] = [None] if world.size == 1 else [25.0, 1.0, 0.1, 0.005]
    lines.append(f"\ntraining step, MLP 784-256-256-10, batch 128 per process, SGD momentum ({steps} steps)")
    for label, row in step_table(steps, caps):
        share = row["averaging share"]
        lines.append(f"{label:<58} {row['step ms']:8.3f} ms" + ("" if share != share else f"   averaging "
                                                                                          f"{100 * share:5.1f}%"))
    if world.rank == 0:
        print("\n".join(lines), flush=True)


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


if __name__ == "__main__":
    main()
