"""The process world of data-parallel training: MPI through ``mpi4py``, or a world of one.

:func:`init` reads the MPI world (``MPI.COMM_WORLD``, or a communicator you pass). ``mpi4py`` is imported
here, on the first :func:`init` (every other function of :mod:`tensorplay.distributed` calls it), never by
``import tensorplay``. Without ``mpi4py`` a process started without ``mpiexec`` is a world of one
(rank 0 of 1) and every collective is the identity; started by a launcher with several processes
(``PMI_SIZE``, ``OMPI_COMM_WORLD_SIZE``, ... above 1) it is an error, as each process would otherwise
train alone believing it is the whole world.

In a world of more than one, an exception that escapes a rank's program calls ``MPI.COMM_WORLD.Abort``
(after printing the traceback), so ``mpiexec`` stops every rank with an error instead of leaving the
others waiting in a collective forever.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from tensorplay.spec.errors import TensorplayError


class DistributedError(TensorplayError, RuntimeError):
    """A distributed setup or collective that cannot go on (the message says what each rank gave)."""


_LAUNCHER_SIZE_VARS = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")
"""Environment variables through which MPI launchers (MPICH's hydra, Open MPI, PMIx, MVAPICH) tell a process
how many processes they started."""


@dataclass(frozen=True)
class World:
    """The communicator (an ``mpi4py`` ``Comm``, or ``None`` in a world of one without MPI), this process's
    rank and the number of processes."""

    comm: Any
    rank: int
    size: int


_WORLD: World | None = None
_LOCK = threading.Lock()


def _launcher_size() -> int:
    """The number of processes an MPI launcher says it started (1 when none did)."""
    for name in _LAUNCHER_SIZE_VARS:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1:
            return int(value)
    return 1


def _import_mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI


def init(comm: Any = None) -> World:
    """Join the MPI world (idempotent: later calls return the same :class:`World`).

    ``comm``: an ``mpi4py`` communicator to use instead of ``MPI.COMM_WORLD`` (only on the first call).
    Without ``mpi4py`` and without a launcher, the world is this one process (``comm`` is ``None``).
    """
    global _WORLD
    with _LOCK:
        if _WORLD is not None:
            if comm is not None and comm is not _WORLD.comm:
                raise DistributedError("distributed.init: the world is already initialised with another "
                                       "communicator; pass comm= on the first call only")
            return _WORLD
        if comm is None:
            mpi = _import_mpi()
            if mpi is None:
                launched = _launcher_size()
                if launched > 1:
                    raise DistributedError(
                        f"distributed.init: this process was started by an MPI launcher with {launched} processes, "
                        "but mpi4py cannot be imported; install it (pip install 'tensorplay[mpi]', which brings "
                        "mpi4py and the MPICH runtime) or run a single process without mpiexec")
                _WORLD = World(None, 0, 1)
                return _WORLD
            comm = mpi.COMM_WORLD
        _WORLD = World(comm, int(comm.Get_rank()), int(comm.Get_size()))
        if _WORLD.size > 1:
            _install_abort_hook(comm)
            _share_cores(comm)
        return _WORLD


def _share_cores(comm: Any) -> None:
    """The thread policy of a world of several processes: unless ``TP_NUM_THREADS`` says otherwise, the
    ranks of one machine that may run on the same CPUs (the same affinity: not bound by the launcher, or
    bound to the same socket) split those CPUs between them, so that their kernel and BLAS threads do
    not oversubscribe the cores. A rank bound to its own cores keeps them all."""
    from tensorplay.interpreters.eager.kernels import threads
    if os.environ.get(threads.ENV_VAR, "").strip():
        return
    import numpy as np
    from mpi4py import MPI
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = list(range(os.cpu_count() or 1))
    mask = np.zeros(max(1024, max(cpus) + 1), dtype=bool)
    mask[cpus] = True
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        width = np.array([mask.size], dtype=np.int64)
        node.Allreduce(MPI.IN_PLACE, width, op=MPI.MAX)
        mine = np.zeros(int(width[0]), dtype=bool)
        mine[:mask.size] = mask
        rows = np.empty((node.Get_size(), mine.size), dtype=bool)
        node.Allgather(mine, rows)
    finally:
        node.Free()
    sharing = int((rows == mine).all(axis=1).sum())
    share = max(1, min(len(cpus), threads.MAX_THREADS) // sharing)
    if share < threads.num_threads():
        threads.set_num_threads(share)


def world() -> World:
    """The world, initialised on first use (see :func:`init`)."""
    w = _WORLD
    return w if w is not None else init()


def rank() -> int:
    """This process's rank, ``0 <= rank() < world_size()``."""
    return world().rank


def world_size() -> int:
    """The number of processes training together (1 without ``mpiexec``)."""
    return world().size


def is_initialized() -> bool:
    """Whether :func:`init` has run in this process."""
    return _WORLD is not None


def abort(code: int = 1) -> None:
    """Stop every rank now (``MPI_Abort``); in a world of one, exit this process with ``code``."""
    w = world()
    sys.stdout.flush()
    sys.stderr.flush()
    if w.comm is not None and w.size > 1:
        w.comm.Abort(code)
    raise SystemExit(code)


def _install_abort_hook(comm: Any) -> None:
    """Make an uncaught exception on any rank abort the whole job (see the module docstring)."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        previous(kind, value, tb)
        sys.stderr.write(f"tensorplay.distributed: rank {comm.Get_rank()} of {comm.Get_size()} raised "
                         f"{kind.__name__}; aborting every rank (MPI_Abort)\n")
        sys.stdout.flush()
        sys.stderr.flush()
        comm.Abort(1)

    sys.excepthook = hook


__all__ = ["DistributedError", "World", "abort", "init", "is_initialized", "rank", "world", "world_size"]
