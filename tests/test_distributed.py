"""tensorplay.distributed in one process: the world of one, argument checks, the sampler, and the tape's
gradient-ready hooks that DistributedDataParallel hangs its all-reduce on. (Several processes:
tests/test_distributed_mpi.py.)"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.distributed as dist
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.distributed import world as world_module
from tensorplay.interpreters.eager import tape

ROOT = Path(__file__).resolve().parents[1]

_NO_MPI4PY = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "mpi4py" or name.startswith("mpi4py."):
            raise ImportError("mpi4py is blocked in this test")
        return None
sys.meta_path.insert(0, Block())
"""


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "OMPI_", "PMIX_", "MPI_"))}
    environ.update(env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=environ, capture_output=True, text=True,
                          timeout=240)


@pytest.fixture
def one() -> Iterator[None]:
    """A world of one in this process (no MPI initialised here)."""
    saved = world_module._WORLD
    world_module._WORLD = world_module.World(None, 0, 1)
    try:
        yield
    finally:
        world_module._WORLD = saved


def test_import_does_not_load_mpi4py() -> None:
    done = _run("import sys, tensorplay, tensorplay.distributed; print('mpi4py' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_world_of_one_without_mpi4py() -> None:
    code = _NO_MPI4PY + """
import numpy as np, tensorplay as tp, tensorplay.distributed as dist
import tensorplay.nn.functional as F
w = dist.init()
assert (w.comm, dist.rank(), dist.world_size()) == (None, 0, 1)
t = tp.tensor(np.arange(4, dtype=np.float64))
assert dist.all_reduce(t, op="mean") is t and t.dtype == tp.float64 and t.tolist() == [0, 1, 2, 3]
a = np.ones(3, np.int32)
assert dist.broadcast(a) is a
g = dist.all_gather(a)
assert g.shape == (1, 3) and g.dtype == np.int32
dist.barrier()
tp.manual_seed(0)
model = tp.nn.Linear(3, 2)
ddp = dist.DistributedDataParallel(model)
x = tp.randn(5, 3)
F.mse_loss(ddp(x), tp.zeros(5, 2)).backward()
want = [p.grad.numpy().copy() for p in model.parameters()]
for p in model.parameters():
    p.grad = None
F.mse_loss(model(x), tp.zeros(5, 2)).backward()
assert all(np.array_equal(p.grad.numpy(), w) for p, w in zip(model.parameters(), want))
print("ok", "mpi4py" in sys.modules)
"""
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok", "False"]


def test_launched_with_several_processes_but_no_mpi4py_is_an_error() -> None:
    done = _run(_NO_MPI4PY + "import tensorplay.distributed as d; d.init()", PMI_SIZE="4", PMI_RANK="1")
    assert done.returncode != 0
    assert "started by an MPI launcher with 4 processes, but mpi4py cannot be imported" in done.stderr


def test_the_docs_script_runs_as_one_process() -> None:
    from tests.markdown import python_blocks
    (block,) = python_blocks(ROOT / "docs" / "distributed.md")
    done = _run(block)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1 process(es), final loss")


# ---- argument checks (raised before anything is exchanged) ----------------------------------------------

def test_collective_argument_errors(one: None) -> None:
    with pytest.raises(TypeError, match="expected an eager tensor .* or a numpy array, got list"):
        dist.all_reduce([1.0, 2.0])
    with pytest.raises(ValueError, match="op must be one of 'sum', 'mean', 'max', 'min', got 'avg'"):
        dist.all_reduce(np.zeros(2), op="avg")
    with pytest.raises(tp.DTypeError, match="op='mean' needs a float tensor, got int64"):
        dist.all_reduce(np.zeros(2, np.int64), op="mean")
    with pytest.raises(tp.DTypeError, match="cannot reduce dtype bool"):
        dist.all_reduce(np.zeros(2, bool))
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dist.broadcast(frozen)
    with pytest.raises(ValueError, match=r"src must be a rank in \[0, 1\), got 1"):
        dist.broadcast(np.zeros(2), src=1)
    w = tp.randn(3, requires_grad=True)
    with pytest.raises(TypeError, match="requires grad and would be modified in place"):
        dist.all_reduce(w)
    with tp.no_grad():
        assert dist.all_reduce(w) is w
    with pytest.raises(TypeError, match="call collectives outside compiled or traced functions"):
        tp.graph.trace(lambda x: dist.all_reduce(x), tp.randn(2))


def test_world_of_one_keeps_values_and_versions(one: None) -> None:
    x = tp.tensor(np.array([[1.5, -2.0]], dtype=np.float32))
    y = x * 2
    assert dist.all_reduce(x, op="max") is x and x.dtype == tp.float32 and x.tolist() == [[1.5, -2.0]]
    g = dist.all_gather(x)
    assert isinstance(g, tp.Tensor) and tuple(g.shape) == (1, 1, 2) and g.dtype == tp.float32
    assert not g.requires_grad and y.tolist() == [[3.0, -4.0]]
    empty = np.zeros((0, 4), np.float64)
    assert dist.all_gather(empty).shape == (1, 0, 4)


def test_ddp_argument_errors(one: None) -> None:
    with pytest.raises(TypeError, match="expected a tp.nn.Module, got function"):
        dist.DistributedDataParallel(lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="bucket_cap_mb must be > 0, got 0"):
        dist.DistributedDataParallel(nn.Linear(2, 2), bucket_cap_mb=0)


# ---- DistributedSampler -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n, replicas, drop_last", [(10, 3, False), (10, 3, True), (12, 4, False), (2, 3, False),
                                                     (0, 2, False), (7, 1, True)])
def test_sampler_in_order_matches_pytorch(n: int, replicas: int, drop_last: bool) -> None:
    from torch.utils.data import DistributedSampler as TorchSampler
    for r in range(replicas):
        ours = dist.DistributedSampler(n, num_replicas=replicas, rank=r, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(range(n), num_replicas=replicas, rank=r, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_shuffles_disjoint_slices_that_cover(drop_last: bool) -> None:
    n, replicas = 103, 4
    def parts(epoch: int, seed: int = 5) -> list[list[int]]:
        out = []
        for r in range(replicas):
            s = dist.DistributedSampler(list(range(n)), num_replicas=replicas, rank=r, seed=seed,
                                        drop_last=drop_last)
            s.set_epoch(epoch)
            out.append(list(s))
        return out
    first = parts(0)
    assert all(len(p) == (n // replicas if drop_last else -(-n // replicas)) for p in first)
    seen = [i for p in first for i in p]
    if drop_last:
        assert len(set(seen)) == len(seen) == replicas * (n // replicas)  # disjoint, n % replicas dropped
    else:
        assert set(seen) == set(range(n)) and len(seen) - len(set(seen)) == (-n) % replicas  # padded cover
    assert parts(0) == first  # the same seed and epoch: the same order on every rank
    assert parts(1) != first and sorted(map(sorted, parts(1))) != first  # reshuffled by epoch
    assert parts(0, seed=6) != first
    assert seen[:replicas * 5] != sorted(seen[:replicas * 5])


def test_sampler_errors() -> None:
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\), got 2"):
        dist.DistributedSampler(10, num_replicas=2, rank=2)
    with pytest.raises(TypeError, match="dataset must have a length"):
        dist.DistributedSampler(object(), num_replicas=1, rank=0)  # type: ignore[arg-type]
    s = dist.DistributedSampler(10, num_replicas=1, rank=0)
    with pytest.raises(ValueError, match="set_epoch: expected an int >= 0, got -1"):
        s.set_epoch(-1)


# ---- the tape's gradient-ready hooks -----------------------------------------------------------------------

def _mlp() -> tuple[Any, Any, Any]:
    tp.manual_seed(0)
    w1, w2 = tp.randn(3, 4, requires_grad=True), tp.randn(4, 2, requires_grad=True)
    return w1, w2, tp.randn(5, 3)


def test_grad_ready_hooks_fire_as_soon_as_each_gradient_is_final() -> None:
    w1, w2, x = _mlp()
    log: list[Any] = []

    def hook(leaf: Any) -> None:
        name = "w1" if leaf is w1 else "w2"
        log.append((name, leaf.grad.numpy().copy(), w1.grad is None))
        if len(log) == 1:
            tape.queue_callback(lambda: log.append(("end", w1.grad is not None and w2.grad is not None)))
    handles = [tape.register_grad_ready_hook(w, hook) for w in (w1, w2)]
    ((x @ w1).tanh() @ w2).sum().backward()
    # w2's gradient is final before the sweep reaches the first layer (w1 has no .grad yet then)
    assert [entry[0] for entry in log] == ["w2", "w1", "end"]
    assert log[0][2] is True and log[2][1] is True
    # the hooks saw the final gradients: those of torch
    import torch
    t1, t2 = (torch.tensor(w.detach().numpy(), requires_grad=True) for w in (w1, w2))
    (torch.tensor(x.numpy()) @ t1).tanh().matmul(t2).sum().backward()
    np.testing.assert_allclose(log[0][1], t2.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(log[1][1], t1.grad.numpy(), rtol=1e-5)
    # a second backward: the hook sees the accumulated .grad; autograd.grad calls no hook
    log.clear()
    ((x @ w1).tanh() @ w2).sum().backward()
    np.testing.assert_allclose(log[0][1], 2 * t2.grad.numpy(), rtol=1e-5)
    log.clear()
    tp.autograd.grad(((x @ w1) @ w2).sum(), [w1, w2])
    assert log == []
    for h in handles:
        h.remove()
        h.remove()
    ((x @ w1) @ w2).sum().backward()
    assert log == [] and not tape.has_grad_ready_hooks(w1)


def test_grad_ready_hook_errors_and_lifetime() -> None:
    w1, w2, x = _mlp()
    with pytest.raises(tp.AutogradError, match="not a leaf"):
        tape.register_grad_ready_hook(x @ w1, lambda t: None)
    with pytest.raises(tp.AutogradError, match="no backward\\(\\) is running"):
        tape.queue_callback(lambda: None)
    calls: list[int] = []
    tape.register_grad_ready_hook(w1, lambda t: calls.append(1))
    key = id(w1)
    del w1
    gc.collect()
    assert key not in tape._READY_HOOKS
    # a failing sweep drops the queued callbacks (here the hook ran before the sweep failed)
    w3, u = tp.randn(2, requires_grad=True), tp.randn(2, requires_grad=True)

    def queue(t: Any) -> None:
        calls.append(1)
        tape.queue_callback(lambda: calls.append(2))
    tape.register_grad_ready_hook(w3, queue)
    (w3 * 3).backward(tp.ones(2))
    assert calls == [1, 2]
    y = u.exp()
    chain = y * 1 * 1 * 1 * 1
    y.add_(1)  # exp's saved result is modified: its backward fails, after w3's gradient is final
    with pytest.raises(tp.AutogradError, match="modified in place"):
        (w3 * 2 + chain).sum().backward()
    assert calls == [1, 2, 1] and tape._HOOK_STATE.queued is None
