"""``F.embedding_bag``/``nn.EmbeddingBag``, ``F.affine_grid``, ``F.grid_sample`` and ``F.gumbel_softmax``.

Values and gradients against PyTorch (CPU) in float32 and float64: every bag mode with offsets (empty bags,
``include_last_offset``), 2-d bags, ``padding_idx``, ``per_sample_weights``; every ``grid_sample`` mode,
padding mode and ``align_corners`` on grids reaching outside ``[-1, 1]``, 2-d and 3-d; Gumbel-softmax
statistics and fresh draws; ``tp.compile`` (twice), ``tp.func.grad`` and ``tp.func.vmap``; argument errors.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.errors import ArgumentError, DTypeError, IndexRangeError, ShapeError

TF = torch.nn.functional
DTYPES = ("float32", "float64")
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-10, atol=1e-10)}


def _np(t: Any) -> np.ndarray[Any, Any]:
    if isinstance(t, torch.Tensor):
        return t.detach().numpy()
    return np.asarray(t.detach().numpy())


def _close(ours: Any, theirs: Any, dtype: str) -> None:
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"])


def _pair(a: np.ndarray[Any, Any], grad: bool = True) -> tuple[Any, Any]:
    return tp.tensor(a, requires_grad=grad), torch.tensor(a, requires_grad=grad)


# ---- embedding_bag ---------------------------------------------------------------------------------------

IDS = np.array([1, 2, 4, 4, 3, 0, 5, 4, 2])
BAG_CASES = [  # (offsets, include_last_offset): empty bags at the start, middle and end
    ([0, 2, 2, 5], False), ([0, 0, 9, 9], False), ([0], False), ([0, 3, 3, 9], True), ([0, 9], True),
]


def _bag_compare(ids: np.ndarray[Any, Any], offsets: Any, mode: str, pad: int | None, psw: bool, ilo: bool,
                 dtype: str) -> None:
    rng = np.random.default_rng(0)
    w, tw = _pair(rng.standard_normal((6, 3)).astype(dtype))
    p = rng.standard_normal(ids.shape).astype(dtype) if psw else None
    op, tps = _pair(p) if p is not None else (None, None)
    tps_: Any = tps
    toff = None if offsets is None else torch.tensor(offsets)
    ooff = None if offsets is None else tp.tensor(np.array(offsets, dtype=np.int64))
    want: Any = TF.embedding_bag(torch.tensor(ids), tw, toff, mode=mode, per_sample_weights=tps,
                            include_last_offset=ilo, padding_idx=pad)
    got = F.embedding_bag(tp.tensor(ids), w, ooff, mode=mode, per_sample_weights=op, include_last_offset=ilo,
                          padding_idx=pad)
    assert got.dtype.name == dtype and tuple(got.shape) == tuple(want.shape)
    _close(got, want, dtype)
    cot = rng.standard_normal(tuple(want.shape)).astype(dtype)
    (want * torch.tensor(cot)).sum().backward()
    (got * tp.tensor(cot)).sum().backward()
    _close(w.grad, tw.grad, dtype)
    if op is not None:
        _close(op.grad, tps_.grad, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("pad", [None, 4])
def test_embedding_bag_with_offsets_matches_torch(dtype: str, mode: str, pad: int | None) -> None:
    for offsets, ilo in BAG_CASES:
        _bag_compare(IDS, offsets, mode, pad, False, ilo, dtype)
        if mode == "sum":
            _bag_compare(IDS, offsets, mode, pad, True, ilo, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_matches_torch(dtype: str, mode: str) -> None:
    ids = np.array([[1, 2, 4], [4, 4, 4], [0, 5, 2]])
    for pad in (None, 4, -2):
        _bag_compare(ids, None, mode, pad, False, False, dtype)
        if mode == "sum":
            _bag_compare(ids, None, mode, pad, True, False, dtype)
    # empty bags [2, 0] (torch's 2-d path refuses them): as the 1-d empty input with two empty bags
    weight = tp.tensor(np.ones((6, 3), dtype=dtype), requires_grad=True)
    got = F.embedding_bag(tp.tensor(np.zeros((2, 0), dtype=np.int64)), weight, mode=mode)
    _close(got, TF.embedding_bag(torch.zeros(0, dtype=torch.long), torch.ones(6, 3), torch.tensor([0, 0]),
                                 mode=mode), dtype)
    got.sum().backward()
    assert weight.grad is not None and not np.any(weight.grad.numpy())


def test_embedding_bag_empty_input_and_max_ties() -> None:
    _bag_compare(np.zeros((0,), dtype=np.int64), [0, 0], "max", None, False, False, "float64")
    _bag_compare(np.zeros((0,), dtype=np.int64), [0, 0], "mean", None, False, False, "float64")
    # the same row twice in a bag: its maximum's gradient reaches that row once, as PyTorch's
    _bag_compare(np.array([3, 3, 1]), [0, 2], "max", None, False, False, "float64")
    # equal values of different rows: the first one of the bag gets the gradient, as PyTorch's
    table = np.array([[1.0, 2.0], [1.0, 3.0], [0.0, 0.0]])
    for ids, offsets in ((np.array([[2, 0, 1]]), None), (np.array([2, 0, 1, 1]), np.array([0, 1]))):
        ours = tp.tensor(table, requires_grad=True)
        theirs = torch.tensor(table, requires_grad=True)
        want: Any = TF.embedding_bag(torch.tensor(ids), theirs, None if offsets is None else torch.tensor(offsets),
                                     mode="max")
        want.sum().backward()
        F.embedding_bag(tp.tensor(ids), ours, None if offsets is None else tp.tensor(offsets),
                        mode="max").sum().backward()
        _close(ours.grad, theirs.grad, "float64")


def test_include_last_offset_ignores_indices_after_the_last_offset() -> None:
    w = np.random.default_rng(1).standard_normal((6, 3))
    for mode in ("sum", "mean", "max"):
        got = F.embedding_bag(tp.tensor(IDS), tp.tensor(w), tp.tensor([0, 2, 5]), mode=mode, include_last_offset=True)
        want = TF.embedding_bag(torch.tensor(IDS[:5]), torch.tensor(w), torch.tensor([0, 2]), mode=mode)
        _close(got, want, "float64")


def test_embedding_bag_layer_and_from_pretrained() -> None:
    torch.manual_seed(0)
    ref = torch.nn.EmbeddingBag(7, 4, mode="max", padding_idx=2)
    layer = nn.EmbeddingBag(7, 4, mode="max", padding_idx=2)
    assert np.all(layer.weight.detach().numpy()[2] == 0)
    layer.load_state_dict({"weight": tp.tensor(ref.weight.detach().numpy())})
    ids, off = np.array([0, 2, 6, 5, 1]), np.array([0, 1, 1])
    _close(layer(tp.tensor(ids), tp.tensor(off)), ref(torch.tensor(ids), torch.tensor(off)), "float32")
    table = np.random.default_rng(2).standard_normal((5, 2)).astype(np.float32)
    frozen = nn.EmbeddingBag.from_pretrained(tp.tensor(table), mode="sum")
    assert not frozen.weight.requires_grad and tuple(frozen.weight.shape) == (5, 2)
    tref = torch.nn.EmbeddingBag.from_pretrained(torch.tensor(table), mode="sum")
    bags = np.array([[0, 4], [3, 3]])
    _close(frozen(tp.tensor(bags)), tref(torch.tensor(bags)), "float32")
    assert nn.EmbeddingBag.from_pretrained(tp.tensor(table), freeze=False).weight.requires_grad
    assert "mode='max'" in repr(layer)


def test_embedding_bag_errors() -> None:
    w, ids = tp.tensor(np.ones((5, 2))), tp.tensor([1, 2, 3])
    bad: list[tuple[Any, str, dict[str, Any]]] = [
        (IndexRangeError, r"offsets\[0\] must be 0", dict(offsets=tp.tensor([1, 2]))),
        (IndexRangeError, r"non-decreasing, got offsets\[1\] = 2 > offsets\[2\] = 1",
         dict(offsets=tp.tensor([0, 2, 1]))),
        (IndexRangeError, "at most the input's length 3, got offsets.-1. = 4", dict(offsets=tp.tensor([0, 4]))),
        (ArgumentError, "per_sample_weights is only supported for mode='sum', got mode='mean'",
         dict(offsets=tp.tensor([0]), per_sample_weights=tp.tensor(np.ones(3)))),
        (ShapeError, r"per_sample_weights must have the input's shape \[3\], got \[2\]",
         dict(offsets=tp.tensor([0]), mode="sum", per_sample_weights=tp.tensor(np.ones(2)))),
        (ArgumentError, "mode must be one of 'sum', 'mean' or 'max', got 'prod'", dict(offsets=tp.tensor([0]),
                                                                                    mode="prod")),
        (ArgumentError, "a 1-d input needs 1-d offsets", {}),
        (DTypeError, "offsets must be an integer tensor", dict(offsets=tp.tensor([0.0]))),
        (IndexRangeError, "embedding_bag: index", dict(offsets=tp.tensor([0]), padding_idx=None,
                                                       max_norm=None) | {"input": tp.tensor([1, 9])}),
        (ArgumentError, "max_norm and scale_grad_by_freq are not supported", dict(offsets=tp.tensor([0]),
                                                                                max_norm=1.0)),
    ]
    for error, message, kwargs in bad:
        with pytest.raises(error, match=message):
            F.embedding_bag(kwargs.pop("input", ids), w, **kwargs)
    with pytest.raises(ArgumentError, match="offsets must be None for a 2-d input"):
        F.embedding_bag(tp.tensor([[1, 2]]), w, tp.tensor([0]))
    with pytest.raises(ArgumentError, match="EmbeddingBag: mode must be one of"):
        nn.EmbeddingBag(3, 2, mode="median")


def test_embedding_bag_offsets_are_checked_when_a_compiled_graph_runs() -> None:
    w = tp.tensor(np.ones((5, 2)))
    bag: Any = tp.compile(lambda i, o: F.embedding_bag(i, w, o, mode="sum"))
    ids = tp.tensor([1, 2, 3])
    np.testing.assert_allclose(bag(ids, tp.tensor([0, 1])).numpy(), [[1, 1], [2, 2]])
    for offsets, message in (([1, 1], r"offsets\[0\]"), ([0, 2, 1], "non-decreasing"), ([0, 4], "non-decreasing")):
        with pytest.raises(IndexRangeError, match=message):
            bag(ids, tp.tensor(offsets[:2] if len(offsets) == 2 else offsets))


# ---- affine_grid and grid_sample -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_affine_grid_matches_torch(dtype: str) -> None:
    rng = np.random.default_rng(3)
    for size, align in itertools.product([(2, 3, 4, 5), (1, 2, 1, 3), (2, 1, 3, 2, 4)], [True, False]):
        d = len(size) - 2
        theta, ttheta = _pair(rng.standard_normal((size[0], d, d + 1)).astype(dtype))
        with pytest.warns(UserWarning) if align and 1 in size[2:] else _no_warning():
            want: Any = TF.affine_grid(ttheta, list(size), align_corners=align)
        got = F.affine_grid(theta, size, align_corners=align)
        _close(got, want, dtype)
        cot = rng.standard_normal(tuple(want.shape)).astype(dtype)
        (want * torch.tensor(cot)).sum().backward()
        (got * tp.tensor(cot)).sum().backward()
        _close(theta.grad, ttheta.grad, dtype)


class _no_warning:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: Any) -> None:
        return None


def _sample_compare(x: np.ndarray[Any, Any], g: np.ndarray[Any, Any], mode: str, padding: str, align: bool,
                    dtype: str) -> None:
    (ox, tx), (og, tg) = _pair(x.astype(dtype)), _pair(g.astype(dtype))
    want: Any = TF.grid_sample(tx, tg, mode=mode, padding_mode=padding, align_corners=align)
    got = F.grid_sample(ox, og, mode=mode, padding_mode=padding, align_corners=align)
    _close(got, want, dtype)
    cot = np.random.default_rng(4).standard_normal(tuple(want.shape)).astype(dtype)
    (want * torch.tensor(cot)).sum().backward()
    (got * tp.tensor(cot)).sum().backward()
    _close(ox.grad, tx.grad, dtype)
    if mode == "nearest":  # no gradient reaches the grid (PyTorch's is zeros)
        assert og.grad is None and not np.any(tg.grad.numpy())
    else:
        _close(og.grad, tg.grad, dtype)


GRID_MODES = list(itertools.product(["bilinear", "nearest"], ["zeros", "border", "reflection"], [True, False]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode,padding,align", GRID_MODES)
def test_grid_sample_2d_matches_torch(dtype: str, mode: str, padding: str, align: bool) -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 5))
    g = rng.uniform(-2.7, 2.7, (2, 6, 5, 2))  # far enough outside to reflect more than once
    g[0, 0, 0] = [-1.0, 1.0]  # the corners and borders themselves
    g[0, 0, 1] = [1.0, -1.0]
    g[1, 0, 0] = [-1.25, 1.25]  # the outer edge with align_corners=False
    _sample_compare(x, g, mode, padding, align, dtype)
    _sample_compare(x[:, :, :1, :], g, mode, padding, align, dtype)  # a one-pixel axis


@pytest.mark.parametrize("mode,padding,align", GRID_MODES)
def test_grid_sample_3d_matches_torch(mode: str, padding: str, align: bool) -> None:
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 2, 3, 4, 2))
    g = rng.uniform(-1.8, 1.8, (2, 2, 3, 2, 3))
    for dtype in DTYPES:
        _sample_compare(x, g, mode, padding, align, dtype)


def test_affine_grid_then_grid_sample_rotates_like_torch() -> None:
    a = 0.3
    th = np.array([[[np.cos(a), -np.sin(a), 0.1], [np.sin(a), np.cos(a), -0.2]]])
    x = np.random.default_rng(7).standard_normal((1, 2, 5, 6))
    grid = F.affine_grid(tp.tensor(th), (1, 2, 5, 6), align_corners=False)
    want = TF.grid_sample(torch.tensor(x), TF.affine_grid(torch.tensor(th), [1, 2, 5, 6], align_corners=False),
                          align_corners=False)
    _close(F.grid_sample(tp.tensor(x), grid, align_corners=False), want, "float64")


def test_grid_sample_and_affine_grid_errors() -> None:
    x = tp.tensor(np.ones((1, 2, 3, 3)))
    cases: list[tuple[Any, str, Any]] = [
        (ShapeError, r"grid must have shape \[1, \*, \*, 2\] for input of shape \[1, 2, 3, 3\], got \[1, 2, 2, 3\]",
         lambda: F.grid_sample(x, tp.tensor(np.zeros((1, 2, 2, 3))))),
        (ShapeError, r"grid must have shape", lambda: F.grid_sample(x, tp.tensor(np.zeros((2, 2, 2, 2))))),
        (ArgumentError, "mode must be 'bilinear' or 'nearest', got 'bicubic'",
         lambda: F.grid_sample(x, tp.tensor(np.zeros((1, 2, 2, 2))), mode="bicubic")),
        (ArgumentError, "padding_mode must be 'zeros', 'border' or 'reflection', got 'wrap'",
         lambda: F.grid_sample(x, tp.tensor(np.zeros((1, 2, 2, 2))), padding_mode="wrap")),
        (DTypeError, "grid must have the input's dtype float64, got float32",
         lambda: F.grid_sample(x, tp.tensor(np.zeros((1, 2, 2, 2), dtype=np.float32)))),
        (ShapeError, r"input must be 4-d", lambda: F.grid_sample(tp.tensor(np.ones((2, 3))), x)),
        (ShapeError, r"theta must have shape \[1, 2, 3\] for size \[1, 2, 3, 3\], got \[1, 3, 4\]",
         lambda: F.affine_grid(tp.tensor(np.zeros((1, 3, 4))), (1, 2, 3, 3))),
        (ShapeError, "size must have 4", lambda: F.affine_grid(tp.tensor(np.zeros((1, 2, 3))), (1, 2, 3))),
        (DTypeError, "theta must be a float tensor", lambda: F.affine_grid(tp.tensor(np.zeros((1, 2, 3), dtype=int)),
                                                                           (1, 1, 2, 2))),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()


# ---- gumbel_softmax ---------------------------------------------------------------------------------------

def test_gumbel_softmax_rows_and_frequencies() -> None:
    tp.manual_seed(0)
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4]))
    many = tp.tensor(np.tile(logits, (20000, 1)))
    soft = F.gumbel_softmax(many, tau=0.7).numpy()
    np.testing.assert_allclose(soft.sum(axis=-1), 1.0, rtol=1e-12)
    assert soft.min() >= 0
    hard = F.gumbel_softmax(many, hard=True).numpy()
    assert set(np.unique(hard)) == {0.0, 1.0} and np.all(hard.sum(axis=-1) == 1)
    freq = hard.mean(axis=0)  # the Gumbel-max trick: argmax frequencies are softmax(logits)
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.3, 0.4], atol=0.015)
    # the soft sample's argmax follows the same law, along another axis too
    cols = F.gumbel_softmax(tp.tensor(np.tile(logits[:, None], (1, 20000))), tau=0.5, dim=0).numpy()
    np.testing.assert_allclose(np.bincount(cols.argmax(axis=0), minlength=4) / 20000, freq, atol=0.02)


def test_gumbel_softmax_hard_is_straight_through() -> None:
    tp.manual_seed(1)
    x: Any = tp.tensor(np.random.default_rng(8).standard_normal((3, 5)), requires_grad=True)
    cot = tp.tensor(np.random.default_rng(9).standard_normal((3, 5)))
    tp.manual_seed(2)
    (F.gumbel_softmax(x, tau=0.5, hard=True) * cot).sum().backward()
    hard_grad = x.grad.numpy()
    x.grad = None
    tp.manual_seed(2)
    soft = F.gumbel_softmax(x, tau=0.5)
    (soft * cot).sum().backward()
    np.testing.assert_allclose(hard_grad, x.grad.numpy(), rtol=1e-12)
    # the soft sample's gradient is the softmax Jacobian over tau: s * (c - sum(s * c)) / tau
    y, c = soft.detach().numpy(), cot.numpy()
    expected = y * (c - (y * c).sum(axis=-1, keepdims=True)) / 0.5
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-9, atol=1e-12)
    hard = F.gumbel_softmax(x, hard=True).detach().numpy()
    assert np.all(hard.sum(axis=-1) == 1) and set(np.unique(hard)) == {0.0, 1.0}


def test_gumbel_softmax_fresh_draws_under_compile_and_vmap() -> None:
    x = tp.tensor(np.zeros((4, 6)))
    sample: Any = tp.compile(lambda t: F.gumbel_softmax(t, tau=1.0))
    first, second = sample(x).numpy(), sample(x).numpy()
    assert not np.allclose(first, second)
    np.testing.assert_allclose(first.sum(axis=-1), 1.0)
    hard: Any = tp.compile(lambda t: F.gumbel_softmax(t, hard=True))
    draws = np.stack([hard(x).numpy() for _ in range(3)])
    assert np.all(draws.sum(axis=-1) == 1) and len({d.tobytes() for d in draws}) > 1
    rows = tp.func.vmap(lambda t: F.gumbel_softmax(t), randomness="different")(x).numpy()
    assert len({r.tobytes() for r in rows}) == 4
    with pytest.raises(ArgumentError, match="tau must be a positive number, got 0"):
        F.gumbel_softmax(x, tau=0)
    with pytest.raises(DTypeError, match="logits must be a float tensor"):
        F.gumbel_softmax(tp.tensor([1, 2]))


# ---- compile, grad, vmap ------------------------------------------------------------------------------------

def _model(x: Any, theta: Any, w: Any, ids: Any, offsets: Any) -> Any:
    grid = F.affine_grid(theta, (2, 2, 4, 5), align_corners=False)
    sampled = F.grid_sample(x, grid, padding_mode="reflection", align_corners=False)
    bags = F.embedding_bag(ids, w, offsets, mode="mean", padding_idx=0)
    return sampled.sum(dim=(1, 2, 3))[:, None] * bags


def _torch_model(*args: Any) -> Any:
    x, theta, w, ids, offsets = args
    grid = TF.affine_grid(theta, [2, 2, 4, 5], align_corners=False)
    sampled = TF.grid_sample(x, grid, padding_mode="reflection", align_corners=False)
    bags = TF.embedding_bag(ids, w, offsets, mode="mean", padding_idx=0)
    return sampled.sum(dim=(1, 2, 3))[:, None] * bags


def test_compile_grad_and_vmap_match_torch() -> None:
    rng = np.random.default_rng(10)
    x, th, w = rng.standard_normal((2, 2, 4, 5)), rng.standard_normal((2, 2, 3)) * 1.5, rng.standard_normal((6, 3))
    ids, off = np.array([0, 3, 5, 2, 0]), np.array([0, 2])
    targs = [torch.tensor(a, requires_grad=True) for a in (x, th, w)]
    want = _torch_model(*targs, torch.tensor(ids), torch.tensor(off))
    compiled: Any = tp.compile(_model)
    for offsets in (off, np.array([0, 0])):  # new offsets, the same graph
        tw = _torch_model(*targs, torch.tensor(ids), torch.tensor(offsets))
        for _ in range(2):
            _close(compiled(tp.tensor(x), tp.tensor(th), tp.tensor(w), tp.tensor(ids), tp.tensor(offsets)), tw,
                   "float64")
    want.sum().backward()
    loss = lambda a, b, c: _model(a, b, c, tp.tensor(ids), tp.tensor(off)).sum()  # noqa: E731
    grads = tp.func.grad(loss, argnums=(0, 1, 2))(tp.tensor(x), tp.tensor(th), tp.tensor(w))
    for ours, theirs in zip(grads, targs):
        _close(ours, theirs.grad, "float64")
    compiled_grads = tp.compile(tp.func.grad(loss, argnums=(0, 1, 2)))(tp.tensor(x), tp.tensor(th), tp.tensor(w))
    for ours, theirs in zip(compiled_grads, targs):
        _close(ours, theirs.grad, "float64")
    # vmap over a batch of bag tables and of sampled images
    tables = rng.standard_normal((3, 6, 3))
    per_table = tp.func.vmap(lambda t: F.embedding_bag(tp.tensor(ids), t, tp.tensor(off), mode="max"))(
        tp.tensor(tables))
    for k in range(3):
        _close(per_table[k], TF.embedding_bag(torch.tensor(ids), torch.tensor(tables[k]), torch.tensor(off),
                                              mode="max"), "float64")
    grid = rng.uniform(-1.3, 1.3, (3, 2, 4, 5, 2))
    per_grid = tp.func.vmap(lambda g: F.grid_sample(tp.tensor(x), g, align_corners=True))(tp.tensor(grid))
    for k in range(3):
        _close(per_grid[k], TF.grid_sample(torch.tensor(x), torch.tensor(grid[k]), align_corners=True), "float64")
    nearest_grad = tp.func.grad(lambda g: F.grid_sample(tp.tensor(x), g, mode="nearest").sum())(tp.tensor(grid[0]))
    assert not np.any(nearest_grad.numpy())


def test_export_with_symbolic_sizes() -> None:
    from tensorplay.export import Dim, export

    rng = np.random.default_rng(11)
    w = tp.tensor(rng.standard_normal((6, 3)))
    bag = export(lambda i, o: F.embedding_bag(i, w, o, mode="mean"), (tp.tensor([1, 2, 3, 4]), tp.tensor([0, 2])),
                 dynamic_shapes={"i": {0: Dim("n")}})
    ids, off = np.array([5, 1, 0, 2, 2, 3, 4]), np.array([0, 3])
    want = TF.embedding_bag(torch.tensor(ids), torch.tensor(w.numpy()), torch.tensor(off), mode="mean")
    _close(bag.module()(tp.tensor(ids), tp.tensor(off)), want, "float64")
    b = Dim("b")
    sample = export(lambda x, g: F.grid_sample(x, g, padding_mode="reflection"),
                    (tp.tensor(rng.standard_normal((2, 3, 4, 5))), tp.tensor(rng.standard_normal((2, 3, 3, 2)))),
                    dynamic_shapes={"x": {0: b}, "g": {0: b}})
    x, g = rng.standard_normal((4, 3, 4, 5)), rng.uniform(-2, 2, (4, 3, 3, 2))
    _close(sample.module()(tp.tensor(x), tp.tensor(g)),
           TF.grid_sample(torch.tensor(x), torch.tensor(g), padding_mode="reflection", align_corners=False),
           "float64")
    gumbel = export(lambda t: F.gumbel_softmax(t), (tp.tensor(np.zeros((3, 4))),)).module()
    assert not np.allclose(gumbel(tp.tensor(np.zeros((3, 4)))).numpy(), gumbel(tp.tensor(np.zeros((3, 4)))).numpy())
