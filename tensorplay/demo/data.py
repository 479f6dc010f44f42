"""scikit-learn's digits (1797 images of 8x8 pixels, 10 classes), split and standardised."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]


@dataclass(frozen=True)
class Digits:
    """Train and test images ``[N, 1, 8, 8]`` (float32, standardised with the training statistics)
    and labels ``[N]`` (int64)."""

    x_train: Array
    y_train: Array
    x_test: Array
    y_test: Array

    @property
    def num_classes(self) -> int:
        """10."""
        return 10


def load_digits_data(seed: int = 0, test_fraction: float = 0.2, limit: int | None = None) -> Digits:
    """Load the digits, shuffle them with ``seed`` and split off ``test_fraction`` for testing.
    ``limit`` keeps only the first ``limit`` shuffled images (for quick runs)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images = np.asarray(bunch.images, dtype=np.float32).reshape(-1, 1, 8, 8)
    labels = np.asarray(bunch.target, dtype=np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    if limit is not None:
        order = order[:limit]
    images, labels = images[order], labels[order]
    n_test = max(1, int(round(len(labels) * test_fraction)))
    x_train, x_test = images[n_test:], images[:n_test]
    mean, std = float(x_train.mean()), float(x_train.std())
    return Digits(x_train=(x_train - mean) / std, y_train=labels[n_test:],
                  x_test=(x_test - mean) / std, y_test=labels[:n_test])


def batches(x: Array, y: Array, batch_size: int, rng: np.random.Generator | None = None) -> Iterator[tuple[Array, Array]]:
    """Mini-batches of ``(x, y)``, in a random order when ``rng`` is given."""
    order = rng.permutation(len(y)) if rng is not None else np.arange(len(y))
    for start in range(0, len(y), batch_size):
        index = order[start:start + batch_size]
        yield np.ascontiguousarray(x[index]), y[index]
