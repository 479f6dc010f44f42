"""``DistributedDataParallel``: the same model on every rank, gradients averaged after ``backward()``.

At construction the parameters and buffers are copied from rank 0 to every rank (and the ranks' models
are checked to have the same parameters, shapes and dtypes). The parameters that require grad are then
laid out, in reverse registration order (the order a backward pass usually finishes them in), in
**buckets**: flat buffers of one dtype holding up to ``bucket_cap_mb`` MiB of gradients each. A
gradient-ready hook on each parameter (:func:`tensorplay.interpreters.eager.tape.register_grad_ready_hook`)
copies its ``.grad`` into its bucket as soon as the reverse sweep has finished it; a complete bucket
starts a non-blocking ``Iallreduce`` (buckets are started in index order, the same on every rank, as MPI
requires), which runs while the sweep goes on through the earlier layers. When the sweep ends, the
remaining buckets start, every request is waited for, and each ``.grad`` receives its bucket's sum divided
by the world size. Every rank then holds the same bits, so the same optimizer step keeps the replicas
identical.

A parameter that this backward did not reach counts with its current ``.grad`` (zeros if it has none), so
the ranks still agree. In a world of one nothing is copied or sent.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from tensorplay.distributed.collectives import broadcast, _dtype_code
from tensorplay.distributed.world import World, world
from tensorplay.interpreters.eager import tape
from tensorplay.nn.module import Module, bump_version
from tensorplay.spec.errors import AutogradError, ShapeError
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Array = np.ndarray[Any, Any]


class _Bucket:
    """One flat gradient buffer: ``params[i]`` occupies ``flat[offsets[i]:offsets[i] + sizes[i]]``."""

    __slots__ = ("params", "offsets", "sizes", "flat", "filled", "pending", "request")

    def __init__(self, params: list[AnyTensor], dtype: np.dtype[Any]) -> None:
        self.params = params
        self.sizes = [int(p._data.size) for p in params]
        self.offsets = [int(o) for o in np.cumsum([0] + self.sizes[:-1])]
        self.flat: Array = np.zeros(sum(self.sizes), dtype=dtype)
        self.filled = [False] * len(params)
        self.pending = len(params)
        self.request: Any = None

    def reset(self) -> None:
        self.filled = [False] * len(self.params)
        self.pending = len(self.params)
        self.request = None


def _plan_buckets(params: list[AnyTensor], cap_bytes: int) -> list[_Bucket]:
    """Consecutive ``params`` of one dtype grouped into buckets of at most ``cap_bytes`` (at least one
    parameter each)."""
    buckets: list[_Bucket] = []
    group: list[AnyTensor] = []
    size = 0
    for p in params:
        nbytes = int(p._data.nbytes)
        if group and (p._data.dtype != group[0]._data.dtype or size + nbytes > cap_bytes):
            buckets.append(_Bucket(group, group[0]._data.dtype))
            group, size = [], 0
        group.append(p)
        size += nbytes
    if group:
        buckets.append(_Bucket(group, group[0]._data.dtype))
    return buckets


class DistributedDataParallel(Module):
    """Wrap ``module`` for data-parallel training over the MPI world (see the module docstring).

    ``ddp(*args)`` calls ``module(*args)``; ``ddp.module`` is the wrapped model (the optimizer may take
    ``ddp.parameters()`` or ``module.parameters()``: the same tensors). After every ``backward()`` that
    reaches the parameters, their ``.grad`` is the mean over the ranks of each rank's gradient; inside
    :meth:`no_sync` gradients only accumulate locally (the next backward outside averages the sum).

    ``bucket_cap_mb``: the most gradient memory (MiB) one ``Iallreduce`` carries. Smaller buckets start
    communicating earlier in the backward (more overlap) but pay the per-message latency more often.
    ``broadcast_buffers``: copy rank 0's buffers (e.g. batch-norm running statistics) to every rank before
    each eager forward in training mode (:meth:`sync_buffers`); at construction they are always copied.

    Works with ``tp.compile``: compile the forward and loss (a training region, joined to the tape as one
    node): ``loss.backward()`` outside the compiled function runs the compiled backward and then the
    averaging, and the optimizer steps afterwards. A compiled function that calls ``backward()`` itself is
    refused (the averaging cannot run inside the compiled code).
    """

    def __init__(self, module: Module, *, bucket_cap_mb: float = 25.0, broadcast_buffers: bool = True) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected a tp.nn.Module, got {type(module).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be > 0, got {bucket_cap_mb!r}")
        self.module = module
        w = world()
        state = _DDPState(w, [p for p in module.parameters() if p._requires_grad], int(bucket_cap_mb * 2 ** 20))
        object.__setattr__(self, "_ddp", state)
        object.__setattr__(self, "broadcast_buffers", bool(broadcast_buffers))
        if w.size > 1:
            _check_same_model(module, w)
            with tape.no_grad():
                for _, p in module.named_parameters():
                    broadcast(p, src=0)
            self.sync_buffers()
            state.install_hooks()

    # ---- the public face ---------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """``module(*args, **kwargs)`` (rank 0's buffers first, see ``broadcast_buffers``)."""
        if self.broadcast_buffers and self.training and self._ddp.world.size > 1 and _eager_buffers(self.module):
            self.sync_buffers()
        return self.module(*args, **kwargs)

    def sync_buffers(self) -> None:
        """Copy rank 0's buffers into every rank's (in place)."""
        if self._ddp.world.size == 1:
            return
        with tape.no_grad():
            for _, b in self.module.named_buffers():
                broadcast(b, src=0)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside the block, ``backward()`` accumulates gradients locally without communicating (gradient
        accumulation); the first backward after it averages the accumulated gradients."""
        state = self._ddp
        previous = state.sync
        state.sync = False
        try:
            yield
        finally:
            state.sync = previous

    @property
    def bucket_sizes(self) -> list[int]:
        """Elements per bucket, in the order they are reduced (empty in a world of one)."""
        return [int(b.flat.size) for b in self._ddp.buckets] if self._ddp.world.size > 1 else []

    @property
    def comm_seconds(self) -> float:
        """Seconds spent so far inside the gradient averaging that the backward did not hide: starting the
        reductions, copying into and out of the buckets, and waiting for them at the end of ``backward()``."""
        seconds: float = self._ddp.seconds
        return seconds

    def remove_hooks(self) -> None:
        """Stop averaging gradients (the model keeps working as a plain local module)."""
        self._ddp.remove_hooks()


def _eager_buffers(module: Module) -> bool:
    return any(type(b._data) is np.ndarray for _, b in module.named_buffers())


def _check_same_model(module: Module, w: World) -> None:
    """Every rank's ``module`` has the same parameters and buffers (names, shapes, dtypes), else an error
    on every rank."""
    entries = [(name, tuple(t._data.shape), str(t._data.dtype)) for name, t in module.named_parameters()]
    entries += [(name, tuple(t._data.shape), str(t._data.dtype)) for name, t in module.named_buffers()]
    digest = zlib.crc32(repr(entries).encode())
    elems = sum(int(np.prod(shape)) for _, shape, _ in entries)
    mine = np.array([len(entries), elems, digest], dtype=np.int64)
    rows = np.empty((w.size, 3), dtype=np.int64)
    w.comm.Allgather(mine, rows)
    if (rows == rows[0]).all():
        return
    told = "; ".join(f"rank {r}: {int(n)} tensors, {int(e)} elements" for r, (n, e, _) in enumerate(rows))
    raise ShapeError("DistributedDataParallel: the ranks' models differ in their parameters or buffers (names, "
                     f"shapes or dtypes) ({told}); build the same model on every rank")


class _DDPState:
    """The buckets and the state of the averaging during one backward (kept off the module's attributes)."""

    def __init__(self, w: World, params: list[AnyTensor], cap_bytes: int) -> None:
        for p in params:
            _dtype_code(p._data.dtype, "DistributedDataParallel")
        self.world = w
        self.params = params
        self.buckets = _plan_buckets(list(reversed(params)), cap_bytes)
        self.where = {id(p): (b, i) for b, bucket in enumerate(self.buckets) for i, p in enumerate(bucket.params)}
        self.sync = True
        self.active = False  # a backward is averaging (the end-of-backward callback is queued)
        self.token: object | None = None  # tape.backward_token() of that backward
        self.next_bucket = 0
        self.seconds = 0.0
        self.handles: list[tape.HookHandle] = []

    def install_hooks(self) -> None:
        self.handles = [tape.register_grad_ready_hook(p, self.grad_ready) for p in self.params]

    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    # ---- during backward ------------------------------------------------------------------------------
    def grad_ready(self, p: AnyTensor) -> None:
        """``p.grad`` is final for this backward: into its bucket; start the buckets that are complete."""
        if not self.sync:
            return
        start = time.perf_counter()
        token = tape.backward_token()
        if token is not self.token:  # the first parameter of this backward
            if self.active:  # an earlier backward failed before its end: let its reductions finish
                self._abandon()
            self.token = token
            self.active = True
            tape.queue_callback(self.finish)
        b, i = self.where[id(p)]
        bucket = self.buckets[b]
        if bucket.filled[i]:
            return
        self._fill(bucket, i)
        if bucket.pending == 0 and b == self.next_bucket:
            self._start_ready()
        elif self.next_bucket:
            self._progress()
        self.seconds += time.perf_counter() - start

    def _progress(self) -> None:
        """Let MPI move the started reductions along (without an asynchronous progress thread, an MPI
        library advances non-blocking collectives only inside MPI calls)."""
        from mpi4py import MPI
        MPI.Request.Testall([b.request for b in self.buckets[:self.next_bucket]])

    def _fill(self, bucket: _Bucket, i: int) -> None:
        p = bucket.params[i]
        o, n = bucket.offsets[i], bucket.sizes[i]
        g = p._grad
        if g is None:
            bucket.flat[o:o + n] = 0
        else:
            if g._node is not None:
                raise AutogradError("DistributedDataParallel: gradients with history (backward(create_graph=True)) "
                                    "cannot be averaged across ranks; differentiate without create_graph")
            np.copyto(bucket.flat[o:o + n].reshape(g._data.shape), g._data)  # one pass, any layout
        bucket.filled[i] = True
        bucket.pending -= 1

    def _start_ready(self) -> None:
        """Start every complete bucket from ``next_bucket`` on, in order."""
        from mpi4py import MPI
        buckets = self.buckets
        while self.next_bucket < len(buckets) and buckets[self.next_bucket].pending == 0:
            bucket = buckets[self.next_bucket]
            bucket.request = self.world.comm.Iallreduce(MPI.IN_PLACE, bucket.flat, op=MPI.SUM)
            self.next_bucket += 1

    def _abandon(self) -> None:
        from mpi4py import MPI
        MPI.Request.Waitall([b.request for b in self.buckets if b.request is not None])
        self._reset()

    def _reset(self) -> None:
        self.active = False
        self.token = None
        for bucket in self.buckets:
            bucket.reset()
        self.next_bucket = 0

    def finish(self) -> None:
        """End of backward: start what is left (unreached parameters count with their current ``.grad``),
        wait, and write the averages into every ``.grad`` (in place when it is C-contiguous, else as a new
        C-contiguous array: a strided write would cost more than the copy)."""
        from mpi4py import MPI
        start = time.perf_counter()
        try:
            for bucket in self.buckets[self.next_bucket:]:
                for i, filled in enumerate(bucket.filled):
                    if not filled:
                        self._fill(bucket, i)
            self._start_ready()
            requests = [b.request for b in self.buckets]
            size = self.world.size
            from tensorplay.interpreters.eager.interpreter import eager
            for _ in self.buckets:  # each bucket as soon as its reduction is done
                bucket = self.buckets[MPI.Request.Waitany(requests)]
                np.divide(bucket.flat, size, out=bucket.flat)
                for p, o, n in zip(bucket.params, bucket.offsets, bucket.sizes):
                    mean = bucket.flat[o:o + n].reshape(p._data.shape)
                    g = p._grad
                    if g is not None and g._data.flags.writeable and g._data.flags.c_contiguous:
                        g._data[...] = mean
                        bump_version(g)
                    else:
                        p._grad = Tensor(eager, mean.copy())
        finally:
            self._reset()
            self.seconds += time.perf_counter() - start


__all__ = ["DistributedDataParallel"]
