"""Programs the MPI tests run under ``mpiexec -n 2`` (``python tests/mpi/worker.py SCENARIO``).

Each scenario asserts on every rank and prints one ``RESULT {json}`` line from rank 0; a failed
assertion aborts every rank (tensorplay.distributed's excepthook), which the test sees as a non-zero exit.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import numpy as np

import tensorplay as tp
import tensorplay.distributed as dist
import tensorplay.nn.functional as F
from tensorplay import nn, optim


def _raises(fn: Any, kind: type[BaseException]) -> str:
    try:
        fn()
    except kind as error:
        return str(error)
    raise AssertionError(f"{fn} did not raise {kind.__name__}")


def collectives() -> dict[str, Any]:
    """all_reduce / broadcast / all_gather on tensors and arrays, dtypes kept; mismatches raise on every rank."""
    dist.init()
    r, n = dist.rank(), dist.world_size()
    assert n == 2
    out: dict[str, Any] = {}
    # sum and mean of float32 tensors, in place, against numpy's sum of every rank's values
    values = [np.random.default_rng(k).standard_normal((3, 5)).astype(np.float32) for k in range(n)]
    t = tp.tensor(values[r].copy())
    same = dist.all_reduce(t)
    assert same is t and t.dtype == tp.float32
    assert np.array_equal(t.numpy(), values[0] + values[1])
    t = tp.tensor(values[r].copy())
    dist.all_reduce(t, op="mean")
    assert np.array_equal(t.numpy(), (values[0] + values[1]) / np.float32(2))
    # float64 numpy, non-contiguous: written back through the view
    a = np.arange(12, dtype=np.float64).reshape(3, 4) * (r + 1)
    view = a.T
    dist.all_reduce(view, op="max")
    assert np.array_equal(a, np.arange(12, dtype=np.float64).reshape(3, 4) * n)
    # int64 sum, empty arrays
    i = np.full(4, r + 1, dtype=np.int64)
    dist.all_reduce(i)
    assert i.dtype == np.int64 and np.array_equal(i, np.full(4, 3))
    dist.all_reduce(np.zeros((0, 3), np.float32))
    # broadcast from rank 1 on a float64 tensor and a bool array
    b = tp.tensor(np.full((2, 2), float(r), dtype=np.float64))
    dist.broadcast(b, src=1)
    assert b.dtype == tp.float64 and np.array_equal(b.numpy(), np.ones((2, 2)))
    flags = np.array([r == 0, True, r == 1])
    dist.broadcast(flags, src=0)
    assert np.array_equal(flags, [True, True, False])
    # all_gather: stacked, dtype kept, input untouched
    g = dist.all_gather(tp.tensor(np.array([r, 10 + r], dtype=np.int32)))
    assert isinstance(g, tp.Tensor) and g.dtype == tp.int32 and np.array_equal(g.numpy(), [[0, 10], [1, 11]])
    h = dist.all_gather(np.float32([r * 0.5]))
    assert isinstance(h, np.ndarray) and h.dtype == np.float32 and h.shape == (2, 1)
    dist.barrier()
    # mismatches: the same clear error on every rank, and the world still works afterwards
    out["shape"] = _raises(lambda: dist.all_reduce(np.zeros(3 + r, np.float32)), tp.ShapeError)
    out["dtype"] = _raises(lambda: dist.all_reduce(np.zeros(3, np.float32 if r == 0 else np.float64)),
                           tp.DTypeError)
    out["op"] = _raises(lambda: dist.all_reduce(np.zeros(3), op="sum" if r == 0 else "max"), tp.ShapeError)
    out["src"] = _raises(lambda: dist.broadcast(np.zeros(3), src=r), tp.ShapeError)
    out["collective"] = _raises(lambda: dist.barrier() if r == 0 else dist.all_gather(np.zeros(1)),
                                tp.ShapeError)
    gathered = dist.all_gather(np.array([len(v) for _, v in sorted(out.items())], dtype=np.int64))
    assert np.array_equal(gathered[0], gathered[1])  # every rank raised an error of the same length
    t = tp.tensor(np.ones(2, np.float32))
    dist.all_reduce(t)
    assert np.array_equal(t.numpy(), [2.0, 2.0])
    import os
    from tensorplay.interpreters.eager.kernels import threads
    out["threads"], out["cpus"] = threads.num_threads(), len(os.sched_getaffinity(0))
    return out


# ---- DDP: 2 ranks with batch 64 against 1 process with batch 128 ----------------------------------------

STEPS = 20
BATCH = 128


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.norm = nn.LayerNorm(64)
        self.fc2 = nn.Linear(64, 32)
        self.fc3 = nn.Linear(32, 5)

    def forward(self, x: Any) -> Any:
        return self.fc3(self.fc2(self.norm(self.fc1(x).tanh())).relu())


def _data() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((STEPS * BATCH, 20)).astype(np.float32)
    y = rng.integers(0, 5, STEPS * BATCH)
    return x, y


def _params(model: nn.Module) -> list[np.ndarray[Any, Any]]:
    return [p.detach().numpy().copy() for p in model.parameters()]


def _reference() -> list[np.ndarray[Any, Any]]:
    """One process, batch 128, the sampler's order with one replica (rank 0's initial weights)."""
    x, y = _data()
    tp.manual_seed(0)
    model = Net()
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    order = dist.DistributedSampler(len(y), num_replicas=1, rank=0, seed=3).indices()
    for k in range(STEPS):
        idx = order[k * BATCH:(k + 1) * BATCH]
        opt.zero_grad()
        F.cross_entropy(model(tp.tensor(x[idx])), tp.tensor(y[idx])).backward()
        opt.step()
    return _params(model)


def _identical_across_ranks(model: nn.Module) -> None:
    for p in model.parameters():
        rows = dist.all_gather(p.detach().numpy())
        assert rows[0].tobytes() == rows[1].tobytes(), "the ranks' parameters differ"


def _ddp_run(mode: str) -> list[np.ndarray[Any, Any]]:
    x, y = _data()
    tp.manual_seed(100 + dist.rank())  # different initial weights: the wrapper must copy rank 0's
    model = Net()
    if dist.rank() == 0:
        tp.manual_seed(0)
        model = Net()
    ddp = dist.DistributedDataParallel(model, bucket_cap_mb=4096 / 2 ** 20)  # 4 KiB: several buckets
    assert len(ddp.bucket_sizes) > 2
    opt = optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    sampler = dist.DistributedSampler(len(y), seed=3)
    mine = sampler.indices()
    half = BATCH // 2
    loss_of = tp.compile(lambda xb, yb: F.cross_entropy(ddp(xb), yb)) if mode == "compiled" else \
        (lambda xb, yb: F.cross_entropy(ddp(xb), yb))
    for k in range(STEPS):
        idx = mine[k * half:(k + 1) * half]
        opt.zero_grad()
        if mode == "no_sync":  # two micro-batches of 32: the first accumulates locally, the second averages
            with ddp.no_sync():
                (loss_of(tp.tensor(x[idx[:32]]), tp.tensor(y[idx[:32]])) * 0.5).backward()
            before = [p.grad.numpy().copy() for p in ddp.parameters()]
            rows = dist.all_gather(before[-1])
            assert not np.array_equal(rows[0], rows[1]), "no_sync communicated"
            (loss_of(tp.tensor(x[idx[32:]]), tp.tensor(y[idx[32:]])) * 0.5).backward()
        else:
            loss_of(tp.tensor(x[idx]), tp.tensor(y[idx])).backward()
        opt.step()
        _identical_across_ranks(model)
    return _params(model)


def ddp() -> dict[str, Any]:
    dist.init()
    reference = _reference()
    tp.manual_seed(0)
    initial = _params(Net())
    out: dict[str, Any] = {}
    for mode in ("eager", "compiled", "no_sync"):
        params = _ddp_run(mode)
        worst = max(float(np.abs(p - q).max() / np.abs(q).max()) for p, q in zip(params, reference))
        moved = min(float(np.abs(p - q).max()) for p, q in zip(params, initial))
        out[mode] = {"max_relative_difference": worst, "moved": moved}
        assert worst <= 1e-6, (mode, worst)
    # a parameter one rank does not reach: it counts as zeros there, and both ranks get the same mean
    tp.manual_seed(1)
    a, b = nn.Linear(4, 3), nn.Linear(4, 3)
    both = nn.ModuleList([a, b])
    wrapped = dist.DistributedDataParallel(both, bucket_cap_mb=64 / 2 ** 20)
    xb = tp.tensor(np.random.default_rng(dist.rank()).standard_normal((6, 4)).astype(np.float32))
    loss = a(xb).square().sum() + (b(xb).sum() if dist.rank() == 0 else 0)
    params = list(wrapped.parameters())
    local = tp.autograd.grad(loss, params, retain_graph=True, allow_unused=True)  # runs no hook
    local_arrays = [np.zeros(p.shape, np.float32) if g is None else g.numpy() for p, g in zip(params, local)]
    loss.backward()
    for p, g in zip(params, local_arrays):
        rows = dist.all_gather(g)
        np.testing.assert_allclose(p.grad.numpy(), (rows[0] + rows[1]) / 2, rtol=1e-6, atol=1e-7)
        seen = dist.all_gather(p.grad.numpy())
        assert seen[0].tobytes() == seen[1].tobytes()
    out["unused_parameter"] = True
    # different models on the ranks: an error on every rank at construction, nothing broadcast
    out["different_models"] = _raises(lambda: dist.DistributedDataParallel(nn.Linear(4, 2 + dist.rank())),
                                      tp.ShapeError)
    # a compiled function that calls backward() itself is refused (its averaging could not run)
    model = dist.DistributedDataParallel(Net())
    x, y = _data()

    def step(xb: Any, yb: Any) -> Any:
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        return loss
    out["compiled_backward"] = _raises(lambda: tp.compile(step)(tp.tensor(x[:8]), tp.tensor(y[:8])),
                                       tp.GraphCaptureError)
    return out


def raising() -> dict[str, Any]:
    """Rank 1 raises before a collective that rank 0 waits in: the job must end, not hang. With
    ``TP_TEST_STDERR_DIR`` set, each rank's stderr goes to ``rank<r>.err`` there: written by the rank itself,
    it survives the abort (mpiexec may drop what it had not yet relayed when the job is killed)."""
    dist.init()
    where = os.environ.get("TP_TEST_STDERR_DIR")
    if where:
        sys.stderr.flush()
        fd = os.open(os.path.join(where, f"rank{dist.rank()}.err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    if dist.rank() == 1:
        raise RuntimeError("rank 1 fails on purpose")
    dist.barrier()
    return {}


if __name__ == "__main__":
    result = {"collectives": collectives, "ddp": ddp, "raise": raising}[sys.argv[1]]()
    if dist.rank() == 0:
        print("RESULT " + json.dumps(result), flush=True)
