"""``tp.utils.data``: ``Dataset``, ``TensorDataset``, ``Subset``, ``random_split``, the samplers and the
``DataLoader``, with PyTorch's names and semantics, so a training loop reads as in PyTorch::

    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, generator=tp.Generator().manual_seed(0))
    for xb, yb in loader: ...

Batches are made in the calling process (``num_workers=0``; other worker counts are refused).
``default_collate`` stacks tensors, numpy arrays and numbers into tensors (Python floats as float64, ints
as int64, as PyTorch) and recurses into tuples, lists, named tuples and dicts. A shuffle is a fresh
permutation every epoch: from ``generator`` when given (reproducible, the global stream untouched),
otherwise from the global generator (``tp.manual_seed``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import numpy as np

from tensorplay import random_state
from tensorplay.creation import stack, tensor
from tensorplay.errors import ShapeError
from tensorplay.generator import Generator
from tensorplay.spec.random import generator as _philox
from tensorplay.tensor import Tensor

T_co = TypeVar("T_co", covariant=True)
AnyTensor = Tensor[*tuple[Any, ...]]


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses define ``__getitem__(index)`` (and ``__len__`` for samplers)."""

    def __getitem__(self, index: int) -> T_co:
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __add__(self, other: Dataset[Any]) -> ConcatDataset[Any]:
        return ConcatDataset([self, other])


class TensorDataset(Dataset[tuple[AnyTensor, ...]]):
    """Samples ``(t[i] for t in tensors)``: every tensor must have the same size on axis 0."""

    def __init__(self, *tensors: AnyTensor) -> None:
        if not tensors:
            raise ShapeError("TensorDataset: expected at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: argument {i} must be a tensorplay Tensor, got {type(t).__name__}")
            if t.ndim == 0:
                raise ShapeError(f"TensorDataset: argument {i} is 0-d; every tensor needs an axis 0 to index")
        sizes = [t.shape[0] for t in tensors]
        if any(s != sizes[0] for s in sizes):
            raise ShapeError(f"TensorDataset: size mismatch between tensors: axis 0 sizes {sizes}")
        self.tensors = tensors

    def __getitem__(self, index: int) -> tuple[AnyTensor, ...]:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return int(self.tensors[0].shape[0])


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = list(indices)

    def __getitem__(self, index: int) -> T_co:
        return self.dataset[self.indices[index]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """The samples of each dataset in turn."""

    def __init__(self, datasets: Iterable[Dataset[T_co]]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ShapeError("ConcatDataset: expected at least one dataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))  # type: ignore[arg-type]

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, index: int) -> T_co:
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"ConcatDataset: index {index} is out of range for {n} samples")
        which = int(np.searchsorted(self.cumulative_sizes, index, side="right"))
        start = 0 if which == 0 else int(self.cumulative_sizes[which - 1])
        return self.datasets[which][index - start]


def _permutation(n: int, generator: Generator | None, where: str) -> list[int]:
    """A random permutation of ``range(n)`` from ``generator`` (or one key of the global generator)."""
    rng = generator.numpy_generator(where) if generator is not None else _philox(random_state.next_key())
    return [int(i) for i in rng.permutation(n)]


def random_split(dataset: Dataset[T_co], lengths: Sequence[int | float],
                 generator: Generator | None = None) -> list[Subset[T_co]]:
    """Split ``dataset`` into non-overlapping random subsets of the given ``lengths`` (ints summing to
    ``len(dataset)``, or fractions summing to 1: the remainder goes round-robin to the first ones)."""
    n = len(dataset)  # type: ignore[arg-type]
    sizes = list(lengths)
    if sizes and all(isinstance(s, float) for s in sizes) and math.isclose(sum(sizes), 1.0):
        counts = [int(math.floor(n * f)) for f in sizes]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
    else:
        counts = [int(s) for s in sizes]
        if sum(counts) != n or any(c != s for c, s in zip(counts, sizes)):
            raise ShapeError(f"random_split: the lengths {list(lengths)} must be ints summing to the dataset's "
                             f"length {n}, or fractions summing to 1")
    if any(c < 0 for c in counts):
        raise ShapeError(f"random_split: lengths must be non-negative, got {list(lengths)}")
    order = _permutation(n, generator, "random_split")
    out, start = [], 0
    for c in counts:
        out.append(Subset(dataset, order[start:start + c]))
        start += c
    return out


class Sampler(Generic[T_co]):
    """Yields dataset indices (or, for a batch sampler, lists of them)."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """A fresh random permutation of the indices at every pass (``replacement=False``), or
    ``num_samples`` indices drawn uniformly with replacement."""

    def __init__(self, data_source: Any, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, int)
                                        or num_samples <= 0):
            raise ShapeError(f"RandomSampler: num_samples should be a positive integer, got {num_samples!r}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if self.replacement:
            gen = self.generator
            rng = gen.numpy_generator("RandomSampler") if gen is not None else _philox(random_state.next_key())
            return iter(int(i) for i in rng.integers(0, n, size=self.num_samples))
        order: list[int] = []
        while len(order) < self.num_samples:
            order += _permutation(n, self.generator, "RandomSampler")
        return iter(order[:self.num_samples])

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ShapeError(f"BatchSampler: batch_size should be a positive integer, got {batch_size!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def default_collate(batch: Sequence[Any]) -> Any:
    """Samples -> a batch: tensors and numpy arrays stacked on a new axis 0; Python floats -> float64, ints
    -> int64, bools -> bool tensors; numpy scalars keep their dtype; strings stay a list; tuples and
    lists collate position by position (a list of the results; a named tuple stays one); dicts key by key."""
    if not batch:
        raise ShapeError("default_collate: expected a non-empty batch")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return tensor(np.stack([np.asarray(b) for b in batch]))
    if isinstance(elem, np.generic):
        return tensor(np.array(batch, dtype=elem.dtype))
    if isinstance(elem, bool):
        return tensor(np.array(batch, dtype=bool))
    if isinstance(elem, int):
        return tensor(np.array(batch, dtype=np.int64))
    if isinstance(elem, float):
        return tensor(np.array(batch, dtype=np.float64))
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        return {key: default_collate([b[key] for b in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise ShapeError(f"default_collate: each element in the batch should be of equal size, got sizes "
                             f"{sorted({len(b) for b in batch})}")
        return [default_collate(list(s)) for s in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, strings, dicts or "
                    f"sequences; found {type(elem).__name__}")


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches of ``batch_size`` (``None``: one sample at a time, not
    collated), in order or ``shuffle``d (a new permutation every epoch, from ``generator`` when given),
    dropping a short last batch with ``drop_last``; ``collate_fn`` (default :func:`default_collate`)
    makes each batch. ``sampler`` / ``batch_sampler`` replace the default ones as in PyTorch. Batches are
    made in this process: ``num_workers`` must be 0."""

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Iterable[int] | None = None, batch_sampler: Iterable[list[int]] | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list[Any]], Any] | None = None,
                 pin_memory: bool = False, drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable[[int], None] | None = None, generator: Generator | None = None,
                 *, prefetch_factor: int | None = None, persistent_workers: bool = False) -> None:
        if num_workers != 0:
            raise ShapeError(f"DataLoader: num_workers={num_workers} is not supported; batches are made in the "
                             "calling process (num_workers=0)")
        if sampler is not None and shuffle:
            raise ShapeError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ShapeError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                             "sampler, and drop_last")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size <= 0):
            raise ShapeError(f"DataLoader: batch_size should be a positive integer or None, got {batch_size!r}")
        if generator is not None and not isinstance(generator, Generator):
            raise TypeError(f"DataLoader: generator must be a tp.Generator, got {type(generator).__name__}")
        self.dataset = dataset
        self.batch_size = batch_size if batch_sampler is None else None
        self.drop_last = drop_last
        self.num_workers = 0
        self.generator = generator
        if sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        self.sampler = sampler
        if batch_sampler is None and batch_size is not None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_sampler = batch_sampler
        self.collate_fn: Callable[[list[Any]], Any] = (
            collate_fn if collate_fn is not None else default_collate if batch_sampler is not None else _no_collate)

    def __iter__(self) -> Iterator[Any]:
        if self.batch_sampler is None:
            for index in self.sampler:
                yield self.collate_fn(self.dataset[index])  # type: ignore[arg-type]
            return
        fast = type(self.dataset) is TensorDataset and self.collate_fn is default_collate
        for indices in self.batch_sampler:
            if fast:  # one gather per tensor: what stacking the samples gives
                rows = tensor(np.asarray(indices, dtype=np.int64))
                yield [t[rows] for t in self.dataset.tensors]  # type: ignore[attr-defined]
            else:
                yield self.collate_fn([self.dataset[i] for i in indices])

    def __len__(self) -> int:
        source = self.batch_sampler if self.batch_sampler is not None else self.sampler
        return len(source)  # type: ignore[arg-type]


def _no_collate(sample: Any) -> Any:
    """``batch_size=None``: samples pass through (numpy arrays and numbers become tensors, as PyTorch)."""
    if isinstance(sample, np.ndarray):
        return tensor(sample)
    return sample


__all__ = ["BatchSampler", "ConcatDataset", "DataLoader", "Dataset", "RandomSampler", "Sampler", "SequentialSampler",
           "Subset", "TensorDataset", "default_collate", "random_split"]
