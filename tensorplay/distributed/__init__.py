"""``tensorplay.distributed``: data-parallel training over MPI (``mpi4py``), the same script on one
process, two, or a cluster.

``init()`` joins the world (``mpiexec -n N python train.py``; a single process started without
``mpiexec`` is a world of one and everything below still works); ``rank()``, ``world_size()``,
``barrier()``; collectives on eager tensors and numpy arrays, checked across ranks before any data moves:
``all_reduce(x, op="sum"|"mean"|"max"|"min")`` and ``broadcast(x, src=0)`` in place, ``all_gather(x)``
(``[world_size, *x.shape]``); ``DistributedDataParallel(module)`` averages gradients after ``backward()``;
``DistributedSampler(dataset)`` gives each rank its share of the data. ``mpi4py`` is imported on the
first call, never by ``import tensorplay``. See docs/distributed.md.
"""

from __future__ import annotations

from tensorplay.distributed.collectives import all_gather, all_reduce, barrier, broadcast
from tensorplay.distributed.ddp import DistributedDataParallel
from tensorplay.distributed.sampler import DistributedSampler
from tensorplay.distributed.world import DistributedError, World, abort, init, is_initialized, rank, world_size

__all__ = [
    "DistributedDataParallel", "DistributedError", "DistributedSampler", "World", "abort", "all_gather",
    "all_reduce", "barrier", "broadcast", "init", "is_initialized", "rank", "world_size",
]
