"""``tp.utils.data`` (datasets, samplers, ``DataLoader``, ``default_collate``) against PyTorch's, and
``tp.multinomial`` / ``tp.Generator`` against the exact distributions."""

from __future__ import annotations

import collections
from typing import Any

import numpy as np
import pytest
import torch
import torch.utils.data as tdata

import tensorplay as tp
from tensorplay.errors import DTypeError, GraphCaptureError, ShapeError
from tensorplay.utils.data import (
    BatchSampler, DataLoader, Dataset, RandomSampler, Subset, TensorDataset, default_collate, random_split,
)

RNG = np.random.default_rng(0)


def _np(tree: Any) -> Any:
    """A batch (ours or PyTorch's) with every tensor as a numpy array, lists and tuples as lists."""
    if isinstance(tree, (tp.Tensor, torch.Tensor)):
        return tree.detach().numpy()
    if isinstance(tree, dict):
        return {k: _np(v) for k, v in tree.items()}
    if isinstance(tree, (list, tuple)):
        return [_np(v) for v in tree]
    return tree


def _assert_same(ours: Any, theirs: Any) -> None:
    a, b = _np(ours), _np(theirs)
    if isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and a.dtype == b.dtype, (a, b)
        np.testing.assert_array_equal(a, b)
    elif isinstance(b, dict):
        assert a.keys() == b.keys()
        for k in b:
            _assert_same(ours[k], theirs[k])
    elif isinstance(b, list):
        assert type(ours) is type(theirs) or isinstance(ours, list) and isinstance(theirs, list), (ours, theirs)
        assert len(a) == len(b)
        for x, y in zip(ours, theirs):
            _assert_same(x, y)
    else:
        assert a == b


@pytest.mark.parametrize("batch_size, drop_last", [(1, False), (3, False), (3, True), (10, False), (12, True)])
def test_loader_in_order_matches_pytorch(batch_size: int, drop_last: bool) -> None:
    x = RNG.standard_normal((10, 3)).astype(np.float32)
    y = RNG.integers(0, 5, 10)
    ours = DataLoader(TensorDataset(tp.tensor(x), tp.tensor(y)), batch_size=batch_size, drop_last=drop_last)
    theirs = tdata.DataLoader(tdata.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=batch_size,
                              drop_last=drop_last)
    assert len(ours) == len(theirs)
    got, expected = list(ours), list(theirs)
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        _assert_same(a, b)


class Pairs(Dataset[Any]):
    """A map-style dataset of mixed samples (a dict, a tuple, numbers, arrays, strings)."""

    def __len__(self) -> int:
        return 7

    def __getitem__(self, i: int) -> Any:
        return {"x": np.full(2, i, dtype=np.float32), "pair": (i, float(i) / 2), "name": f"s{i}", "flag": i % 2 == 0}


def test_collate_of_mixed_samples_matches_pytorch() -> None:
    got = list(DataLoader(Pairs(), batch_size=3))
    expected = list(tdata.DataLoader(_TorchPairs(), batch_size=3))
    for a, b in zip(got, expected):
        _assert_same(a, b)
    Point = collections.namedtuple("Point", "x y")
    samples = [Point(1, np.float32(2)), Point(3, np.float32(4))]
    batch = default_collate(samples)
    assert isinstance(batch, Point)
    _assert_same(list(batch), list(tdata.default_collate(samples)))
    _assert_same(default_collate([tp.tensor([1.0, 2.0]), tp.tensor([3.0, 4.0])]),
                 tdata.default_collate([torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])]))
    with pytest.raises(ShapeError, match="equal size"):
        default_collate([(1, 2), (3,)])


class _TorchPairs(tdata.Dataset[Any]):
    def __len__(self) -> int:
        return 7

    def __getitem__(self, i: int) -> Any:
        return Pairs()[i]


def test_shuffle_with_a_generator_is_a_reproducible_fresh_permutation_each_epoch() -> None:
    data = TensorDataset(tp.arange(20))

    def epochs(seed: int) -> list[list[int]]:
        loader = DataLoader(data, batch_size=6, shuffle=True, generator=tp.Generator().manual_seed(seed))
        return [[int(v) for batch in loader for v in batch[0].numpy()] for _ in range(3)]

    from tensorplay import random_state
    before = random_state.get_state()
    a, b, c = epochs(0), epochs(0), epochs(1)
    assert random_state.get_state() == before  # a generator leaves the global generator alone
    assert a == b and a != c
    for order in a + c:
        assert sorted(order) == list(range(20))  # every sample once
    assert a[0] != a[1]  # a new permutation every epoch


def test_shuffle_without_a_generator_follows_manual_seed() -> None:
    loader = DataLoader(TensorDataset(tp.arange(30)), batch_size=30, shuffle=True)
    tp.manual_seed(3)
    first = next(iter(loader))[0].numpy().tolist()
    tp.manual_seed(3)
    assert next(iter(loader))[0].numpy().tolist() == first
    assert sorted(first) == list(range(30)) and first != list(range(30))


def test_shuffle_with_drop_last_drops_the_short_batch() -> None:
    loader = DataLoader(TensorDataset(tp.arange(10)), batch_size=4, shuffle=True, drop_last=True,
                        generator=tp.Generator().manual_seed(0))
    sizes = [len(b[0].numpy()) for b in loader]
    assert sizes == [4, 4] and len(loader) == 2


def test_batch_size_none_samplers_and_splits() -> None:
    samples = list(DataLoader(TensorDataset(tp.arange(3)), batch_size=None))
    assert [int(s[0].item()) for s in samples] == [0, 1, 2]
    batches = list(BatchSampler(range(7), 3, drop_last=False))
    assert batches == list(tdata.BatchSampler(range(7), 3, drop_last=False))
    draws = list(RandomSampler(range(5), replacement=True, num_samples=50, generator=tp.Generator().manual_seed(0)))
    assert len(draws) == 50 and set(draws) <= set(range(5))
    parts = random_split(TensorDataset(tp.arange(10)), [0.7, 0.3], generator=tp.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in tdata.random_split(range(10), [0.7, 0.3])]
    seen = sorted(int(p[i][0].item()) for p in parts for i in range(len(p)))
    assert seen == list(range(10)) and isinstance(parts[0], Subset)


def test_loader_and_dataset_errors() -> None:
    with pytest.raises(ShapeError, match="size mismatch"):
        TensorDataset(tp.zeros(3), tp.zeros(4))
    with pytest.raises(ShapeError, match="num_workers"):
        DataLoader(TensorDataset(tp.zeros(3)), num_workers=2)
    with pytest.raises(ShapeError, match="batch_size"):
        DataLoader(TensorDataset(tp.zeros(3)), batch_size=0)
    with pytest.raises(ShapeError, match="mutually exclusive"):
        DataLoader(TensorDataset(tp.zeros(3)), sampler=range(3), shuffle=True)
    with pytest.raises(ShapeError, match="lengths"):
        random_split(TensorDataset(tp.zeros(3)), [2, 2])


def test_a_training_loop_reads_as_in_pytorch() -> None:
    from tensorplay import nn
    tp.manual_seed(0)
    x = tp.randn(64, 4)
    y = (x.sum(-1, keepdim=True) > 0).float()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = tp.optim.Adam(model.parameters(), lr=0.05)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True, generator=tp.Generator().manual_seed(0))
    losses = []
    for _ in range(15):
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert np.mean(losses[-4:]) < 0.5 * np.mean(losses[:4])


# ---- multinomial ----------------------------------------------------------------------------------------

def test_multinomial_with_replacement_follows_the_weights() -> None:
    weights = np.array([0.1, 0.0, 0.5, 0.4, 0.0])
    n = 40000
    draws = tp.multinomial(tp.tensor(weights * 3), n, replacement=True, generator=tp.Generator().manual_seed(0))
    assert draws.dtype == tp.int64 and draws.shape == (n,)
    freq = np.bincount(draws.numpy(), minlength=5) / n
    np.testing.assert_allclose(freq, weights, atol=4 * np.sqrt(0.25 / n))
    assert freq[1] == 0 and freq[4] == 0  # never a category of zero weight


def test_multinomial_without_replacement_is_sequential_drawing() -> None:
    w = np.array([1.0, 2.0, 3.0, 4.0])
    n = 30000
    draws = tp.multinomial(tp.tensor(np.tile(w, (n, 1))), 2, generator=tp.Generator().manual_seed(1)).numpy()
    assert draws.shape == (n, 2) and np.all(draws[:, 0] != draws[:, 1])
    pairs = np.zeros((4, 4))
    np.add.at(pairs, (draws[:, 0], draws[:, 1]), 1)
    exact = np.array([[0.0 if i == j else w[i] / w.sum() * w[j] / (w.sum() - w[i]) for j in range(4)]
                      for i in range(4)])
    np.testing.assert_allclose(pairs / n, exact, atol=4 * np.sqrt(0.25 / n))
    full = tp.multinomial(tp.tensor([[1.0, 0.0, 2.0, 5.0]]), 3).numpy()
    assert sorted(full[0].tolist()) == [0, 2, 3]  # all categories of positive weight, each once


def test_multinomial_generators_are_reproducible_and_independent() -> None:
    from tensorplay import random_state
    p = tp.tensor([0.2, 0.3, 0.5])
    before = random_state.get_state()
    a = tp.multinomial(p, 20, True, generator=tp.Generator().manual_seed(5)).numpy()
    b = tp.multinomial(p, 20, True, generator=tp.Generator().manual_seed(5)).numpy()
    assert random_state.get_state() == before
    np.testing.assert_array_equal(a, b)
    tp.manual_seed(0)
    c = tp.multinomial(p, 20, True).numpy()
    tp.manual_seed(0)
    np.testing.assert_array_equal(tp.multinomial(p, 20, True).numpy(), c)


def test_multinomial_under_every_way_of_running() -> None:
    from tensorplay.testing import check_interpreters
    w = tp.tensor(np.abs(RNG.standard_normal((4, 6))).astype(np.float32))
    for replacement in (False, True):
        assert "exported" in check_interpreters(lambda p: tp.multinomial(p, 3, replacement), w)
    compiled = tp.compile(lambda p: tp.multinomial(p, 6))
    first, second = compiled(w).numpy(), compiled(w).numpy()
    assert not np.array_equal(first, second)  # fresh numbers at every call
    assert np.all(np.sort(first, axis=1) == np.arange(6))


def test_a_generator_inside_a_compiled_function_is_refused() -> None:
    g = tp.Generator().manual_seed(0)
    with pytest.raises(GraphCaptureError, match="baked into the graph"):
        tp.compile(lambda p: tp.multinomial(p, 2, generator=g))(tp.ones(2, 3))


@pytest.mark.parametrize("weights, n, replacement, error, message", [
    ([1.0, -1.0], 1, True, ShapeError, "non-negative"),
    ([1.0, float("nan")], 1, True, ShapeError, "finite"),
    ([0.0, 0.0], 1, True, ShapeError, "all zeros"),
    ([1.0, 0.0, 1.0], 3, False, ShapeError, "only 2 categories"),
    ([1.0, 1.0], 3, False, ShapeError, "from 2 categories"),
    ([1.0, 1.0], 0, True, ShapeError, "positive int"),
    ([1, 2], 1, True, DTypeError, "float weights"),
])
def test_multinomial_errors(weights: list[Any], n: int, replacement: bool, error: type[Exception],
                            message: str) -> None:
    with pytest.raises(error, match=message):
        tp.multinomial(tp.tensor(weights), n, replacement)


def test_other_devices_for_a_generator_are_refused() -> None:
    with pytest.raises(tp.DeviceError):
        tp.Generator("cuda")
