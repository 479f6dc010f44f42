"""``DistributedSampler``: each rank's share of a data set's indices, reshuffled every epoch."""

from __future__ import annotations

from collections.abc import Iterator, Sized

import numpy as np

from tensorplay.distributed.world import world


class DistributedSampler:
    """The indices of ``dataset`` (anything with ``len``, or an int: the number of samples) that this rank
    trains on in the current epoch.

    Every rank draws the same permutation of ``range(len(dataset))`` (from ``seed`` and the epoch set with
    :meth:`set_epoch`; in order with ``shuffle=False``) and takes every ``num_replicas``-th index starting at
    its rank, so the ranks' slices are disjoint and each has ``len(self)`` indices:

    * ``drop_last=False`` (default): together they cover the data set; when ``len(dataset)`` is not a
      multiple of ``num_replicas`` the order is padded by repeating its first indices, so that many
      samples are seen twice in the epoch (as in PyTorch);
    * ``drop_last=True``: the last ``len(dataset) % num_replicas`` indices of the order are dropped (a
      different few each epoch when shuffling) and no sample is repeated.

    ``num_replicas`` and ``rank`` default to :func:`~tensorplay.distributed.world_size` and
    :func:`~tensorplay.distributed.rank`. Call ``set_epoch(epoch)`` before each epoch: with the same epoch
    the order is the same.
    """

    def __init__(self, dataset: Sized | int, *, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        n = dataset if isinstance(dataset, int) and not isinstance(dataset, bool) else None
        if n is None:
            if not hasattr(dataset, "__len__"):
                raise TypeError(f"DistributedSampler: dataset must have a length (or be the number of samples), "
                                f"got {type(dataset).__name__}")
            n = len(dataset)
        if n < 0:
            raise ValueError(f"DistributedSampler: the number of samples must be >= 0, got {n}")
        if num_replicas is None or rank is None:
            w = world()
            num_replicas = w.size if num_replicas is None else num_replicas
            rank = w.rank if rank is None else rank
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be >= 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank must be in [0, {num_replicas}), got {rank}")
        self.num_samples_total = int(n)
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        per_rank = n // num_replicas if drop_last else -(-n // num_replicas)
        self.num_samples = int(per_rank)
        """Indices per rank per epoch (``len(self)``)."""
        self.total_size = self.num_samples * self.num_replicas

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s order from the next iteration on (the same on every rank)."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"DistributedSampler.set_epoch: expected an int >= 0, got {epoch!r}")
        self.epoch = int(epoch)

    def order(self) -> np.ndarray[tuple[int], np.dtype[np.int64]]:
        """This epoch's order of all the indices, before it is split among the ranks (padded or cut)."""
        n = self.num_samples_total
        if self.shuffle:
            base = np.random.default_rng([self.seed, self.epoch]).permutation(n).astype(np.int64)
        else:
            base = np.arange(n, dtype=np.int64)
        if self.total_size <= n:
            return base[:self.total_size]
        if n == 0:
            return base
        reps = -(-self.total_size // n)
        return np.tile(base, reps)[:self.total_size]

    def indices(self) -> np.ndarray[tuple[int], np.dtype[np.int64]]:
        """This rank's indices for the current epoch (an int64 array of ``len(self)`` entries)."""
        return self.order()[self.rank::self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.num_samples


__all__ = ["DistributedSampler"]
