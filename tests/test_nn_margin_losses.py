"""The margin, embedding and likelihood losses (``cosine_embedding_loss`` ... ``gaussian_nll_loss``, the
functional forms and their modules) against PyTorch: values and the gradient of every differentiable input in
float32 and float64, each reduction, batched and unbatched; kinks and ties (margin 0, hinges exactly at 0, the
swap's tie), zero vectors, targets of 0, variances below ``eps``; the argument errors; and a few under
``tp.compile`` (called twice), ``tp.func.grad`` and ``tp.func.vmap``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.errors import ArgumentError, DTypeError, IndexRangeError, ShapeError

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DTYPES = ["float32", "float64"]
REDUCTIONS = ["mean", "sum", "none"]
TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-11, atol=1e-12)}
RNG = np.random.default_rng(20240611)

# An input is (array, requires_grad); a case gives the inputs and the two calls, each taking the tensors
# and the reduction.
Inputs = list[tuple[np.ndarray[Any, Any], bool]]
Case = tuple[Inputs, Callable[..., Any], Callable[..., Any]]


def _normal(shape: tuple[int, ...], dtype: str, scale: float = 1.0) -> np.ndarray[Any, Any]:
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def _signs(shape: tuple[int, ...], dtype: str, zeros: bool = False) -> np.ndarray[Any, Any]:
    return RNG.choice([1.0, -1.0, 0.0] if zeros else [1.0, -1.0], size=shape).astype(dtype)


def _labels(n: int | None, c: int) -> np.ndarray[Any, Any]:
    """Per-sample class lists ended by -1 (some full, some empty, a repeat), [n, c] or [c]."""
    rows = []
    for i in range(n or 1):
        k = int(RNG.integers(0, c + 1))
        row = list(RNG.permutation(c)[:k]) + [-1] * (c - k)
        if i == 1 and k >= 2:
            row[1] = row[0]  # a class listed twice counts twice
        rows.append(row)
    return np.array(rows if n else rows[0], dtype=np.int64)


def _cases(dtype: str, batched: bool) -> dict[str, Case]:
    n, d = 5, 4
    lead = (n,) if batched else ()
    vec = lead + (d,)
    idx = RNG.integers(0, d, size=lead).astype(np.int64)
    w = RNG.uniform(0.2, 2.0, size=d).astype(dtype)

    def cos_distance(ours: bool) -> Callable[[Any, Any], Any]:
        f = F.cosine_similarity if ours else TF.cosine_similarity
        return lambda a, b: 1.0 - f(a, b, dim=-1)

    return {
        "cosine_embedding": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True), (_signs(lead, dtype, zeros=True), False)],
            lambda a, b, t, r: F.cosine_embedding_loss(a, b, t, 0.2, reduction=r),
            lambda a, b, t, r: TF.cosine_embedding_loss(a, b, t, 0.2, reduction=r)),
        "hinge_embedding": (
            [(_normal(vec, dtype, 2.0), True), (_signs(vec, dtype, zeros=True), False)],
            lambda x, t, r: F.hinge_embedding_loss(x, t, 0.7, reduction=r),
            lambda x, t, r: TF.hinge_embedding_loss(x, t, 0.7, reduction=r)),
        "margin_ranking": (
            [(_normal(lead, dtype), True), (_normal(lead, dtype), True), (_signs(lead, dtype), True)],
            lambda a, b, t, r: F.margin_ranking_loss(a, b, t, 0.3, reduction=r),
            lambda a, b, t, r: TF.margin_ranking_loss(a, b, t, 0.3, reduction=r)),
        "soft_margin": (
            [(_normal(vec, dtype, 3.0), True), (_signs(vec, dtype) * 0.8, False)],  # torch: no target gradient
            lambda x, t, r: F.soft_margin_loss(x, t, reduction=r),
            lambda x, t, r: TF.soft_margin_loss(x, t, reduction=r)),
        "multilabel_soft_margin": (
            [(_normal(vec, dtype, 3.0), True), (RNG.uniform(size=vec).astype(dtype), True), (w, True)],
            lambda x, t, w, r: F.multilabel_soft_margin_loss(x, t, w, reduction=r),
            lambda x, t, w, r: TF.multilabel_soft_margin_loss(x, t, w, reduction=r)),
        "multi_margin_p1": (
            [(_normal(vec, dtype), True), (idx, False)],
            lambda x, t, r: F.multi_margin_loss(x, t, reduction=r),
            lambda x, t, r: TF.multi_margin_loss(x, t, reduction=r)),
        "multi_margin_p2_weight": (
            [(_normal(vec, dtype), True), (idx, False), (w, False)],
            lambda x, t, w, r: F.multi_margin_loss(x, t, 2, 0.6, w, reduction=r),
            lambda x, t, w, r: TF.multi_margin_loss(x, t, 2, 0.6, w, reduction=r)),
        "multilabel_margin": (
            [(_normal(vec, dtype), True), (_labels(n if batched else None, d), False)],
            lambda x, t, r: F.multilabel_margin_loss(x, t, reduction=r),
            lambda x, t, r: TF.multilabel_margin_loss(x, t, reduction=r)),
        "triplet_p2": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True), (_normal(vec, dtype), True)],
            lambda a, p, q, r: F.triplet_margin_loss(a, p, q, 1.5, reduction=r),
            lambda a, p, q, r: TF.triplet_margin_loss(a, p, q, 1.5, reduction=r)),
        "triplet_p1_swap": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True), (_normal(vec, dtype), True)],
            lambda a, p, q, r: F.triplet_margin_loss(a, p, q, 2.0, 1.0, 1e-3, True, reduction=r),
            lambda a, p, q, r: TF.triplet_margin_loss(a, p, q, 2.0, 1.0, 1e-3, True, reduction=r)),
        "triplet_distance_default": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True), (_normal(vec, dtype), True)],
            lambda a, p, q, r: F.triplet_margin_with_distance_loss(a, p, q, margin=2.0, reduction=r),
            lambda a, p, q, r: TF.triplet_margin_with_distance_loss(a, p, q, margin=2.0, reduction=r)),
        "triplet_distance_cosine_swap": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True), (_normal(vec, dtype), True)],
            lambda a, p, q, r: F.triplet_margin_with_distance_loss(
                a, p, q, distance_function=cos_distance(True), margin=0.8, swap=True, reduction=r),
            lambda a, p, q, r: TF.triplet_margin_with_distance_loss(
                a, p, q, distance_function=cos_distance(False), margin=0.8, swap=True, reduction=r)),
        "poisson_log_input": (
            [(_normal(vec, dtype), True), (RNG.integers(0, 5, size=vec).astype(dtype), True)],
            lambda x, t, r: F.poisson_nll_loss(x, t, reduction=r),
            lambda x, t, r: TF.poisson_nll_loss(x, t, reduction=r)),
        "poisson_rate_full": (
            [(RNG.uniform(0.1, 4.0, size=vec).astype(dtype), True),
             (RNG.choice([0.5, 1.0, 2.0, 3.5, 7.0], size=vec).astype(dtype), True)],  # 0: the special test
            lambda x, t, r: F.poisson_nll_loss(x, t, False, True, eps=1e-4, reduction=r),
            lambda x, t, r: TF.poisson_nll_loss(x, t, False, True, eps=1e-4, reduction=r)),
        "gaussian_same_shape_full": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True),
             (RNG.uniform(0.1, 2.0, size=vec).astype(dtype), True)],
            lambda x, t, v, r: F.gaussian_nll_loss(x, t, v, True, reduction=r),
            lambda x, t, v, r: TF.gaussian_nll_loss(x, t, v, True, reduction=r)),
        "gaussian_one_per_row": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True),
             (RNG.uniform(0.1, 2.0, size=lead).astype(dtype), True)],
            lambda x, t, v, r: F.gaussian_nll_loss(x, t, v, reduction=r),
            lambda x, t, v, r: TF.gaussian_nll_loss(x, t, v, reduction=r)),
        "gaussian_unit_dim": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True),
             (RNG.uniform(0.1, 2.0, size=lead + (1,)).astype(dtype), True)],
            lambda x, t, v, r: F.gaussian_nll_loss(x, t, v, eps=0.05, reduction=r),
            lambda x, t, v, r: TF.gaussian_nll_loss(x, t, v, eps=0.05, reduction=r)),
        "gaussian_number_var": (
            [(_normal(vec, dtype), True), (_normal(vec, dtype), True)],
            lambda x, t, r: F.gaussian_nll_loss(x, t, 0.7, reduction=r),
            lambda x, t, r: TF.gaussian_nll_loss(x, t, 0.7, reduction=r)),
    }


CASE_NAMES = list(_cases("float64", True))


def _close(got: Any, want: Any, dtype: str, what: str, scale: float = 1.0) -> None:
    g = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    w = want.detach().numpy()
    assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    tol = TOL[dtype]
    np.testing.assert_allclose(g, w, rtol=tol["rtol"] * scale, atol=tol["atol"] * scale, equal_nan=True, err_msg=what)


def _check(inputs: Inputs, ours: Callable[..., Any], theirs: Callable[..., Any], dtype: str, what: str,
           *args: Any, scale: float = 1.0) -> None:
    """The value and the gradient (of a random cotangent) of every differentiable input, ours vs torch."""
    # np.asarray: tp.tensor of a numpy float64 scalar (not a 0-d array) gives float32, torch.tensor float64
    mine = [tp.tensor(np.asarray(a), requires_grad=g) for a, g in inputs]
    ref = [torch.tensor(np.asarray(a), requires_grad=g) for a, g in inputs]
    got, want = ours(*mine, *args), theirs(*ref, *args)
    _close(got, want, dtype, what + " value", scale)
    if not any(g for _, g in inputs):
        return
    co = RNG.standard_normal(tuple(want.shape)).astype(dtype)
    (got * tp.tensor(co)).sum().backward()
    (want * torch.tensor(co)).sum().backward()
    for i, ((_, g), m, r) in enumerate(zip(inputs, mine, ref)):
        if g:
            _close(m.grad, r.grad, dtype, f"{what} gradient of input {i}", scale)


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CASE_NAMES)
def test_values_and_gradients_match_torch(name: str, dtype: str, reduction: str, batched: bool) -> None:
    inputs, ours, theirs = _cases(dtype, batched)[name]
    _check(inputs, ours, theirs, dtype, f"{name} {dtype} {reduction}", reduction)


# ---- kinks, ties and special values ------------------------------------------------------------------------

def _edge(inputs: Inputs, ours: Callable[..., Any], theirs: Callable[..., Any], what: str,
          scale: float = 1.0) -> None:
    for dtype in DTYPES:
        cast = [(a.astype(dtype) if a.dtype.kind == "f" else a, g) for a, g in inputs]
        for reduction in REDUCTIONS:
            _check(cast, ours, theirs, dtype, f"{what} {dtype} {reduction}", reduction, scale=scale)


def test_cosine_embedding_zero_vectors_targets_of_zero_and_margin_zero() -> None:
    a = np.array([[0.0, 0.0, 0.0], [1.0, 2.0, -1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 1.0, 0.0]])
    b = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    for margin in (0.0, -0.5, 0.5):
        for t in ([1.0, -1.0, 1.0, -1.0, 0.0], [-1.0, 1.0, -1.0, 0.0, -1.0]):
            _edge([(a, True), (b, True), (np.array(t), False)],
                  lambda x, y, t, r, m=margin: F.cosine_embedding_loss(x, y, t, m, reduction=r),
                  lambda x, y, t, r, m=margin: TF.cosine_embedding_loss(x, y, t, m, reduction=r),
                  f"cosine_embedding margin={margin} target={t}", scale=1e4)  # gradients of 1e4 at a zero vector
    # an integer target and a broadcast input2 row
    _edge([(a, True), (b[1:2] + 1.0, True), (np.array([1, -1, 0, 1, -1]), False)],
          lambda x, y, t, r: F.cosine_embedding_loss(x, y, t, reduction=r),
          lambda x, y, t, r: TF.cosine_embedding_loss(x, y, t, reduction=r), "cosine_embedding broadcast", scale=1e4)


def test_hinges_exactly_at_zero_take_torchs_side() -> None:
    # clamp_min losses: gradient 1 at the kink
    x = np.array([0.5, 1.0, 1.5, 0.0, -1.0])
    _edge([(x, True), (np.array([-1.0, -1.0, 1.0, 0.0, -1.0]), False)],
          lambda x, t, r: F.hinge_embedding_loss(x, t, 1.0, reduction=r),
          lambda x, t, r: TF.hinge_embedding_loss(x, t, 1.0, reduction=r), "hinge_embedding at the margin")
    _edge([(x, True), (x.copy(), True), (np.array([1.0, -1.0, 0.0, 1.0, -1.0]), True)],
          lambda a, b, t, r: F.margin_ranking_loss(a, b, t, reduction=r),
          lambda a, b, t, r: TF.margin_ranking_loss(a, b, t, reduction=r), "margin_ranking ties, margin 0")
    _edge([(x, True), (x - 0.5, True), (np.array([1.0, -1.0, 0.0, 1.0, -1.0]), True)],
          lambda a, b, t, r: F.margin_ranking_loss(a, b, t, 0.5, reduction=r),
          lambda a, b, t, r: TF.margin_ranking_loss(a, b, t, 0.5, reduction=r), "margin_ranking at the margin")
    # the class-wise hinges: gradient 0 at the kink (z > 0)
    s = np.array([[1.0, 0.5, 1.5, 1.0], [0.0, 0.0, 0.0, 0.0], [2.0, -1.0, 2.0, 0.5]])
    y = np.array([0, 2, 1])
    for p, margin in ((1, 0.5), (2, 0.5), (1, 0.0), (2, 0.0)):
        _edge([(s, True), (y, False)],
              lambda x, t, r, p=p, m=margin: F.multi_margin_loss(x, t, p, m, reduction=r),
              lambda x, t, r, p=p, m=margin: TF.multi_margin_loss(x, t, p, m, reduction=r),
              f"multi_margin ties p={p} margin={margin}")
    labels = np.array([[0, -1, 3, 3], [3, 2, 1, 0], [-1, 0, 1, 2]])  # empty, all listed, a -1 first
    _edge([(np.array([[1.0, 0.0, 2.0, 1.0], [0.0, 1.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]]), True), (labels, False)],
          lambda x, t, r: F.multilabel_margin_loss(x, t, reduction=r),
          lambda x, t, r: TF.multilabel_margin_loss(x, t, reduction=r), "multilabel_margin ties")


def test_triplet_swap_tie_and_degenerate_triplets() -> None:
    a = np.array([[0.0, 1.0], [1.0, 1.0], [2.0, -1.0]])
    # positive == anchor: d(a, n) == d(p, n), the swap's minimum is a tie; negative == anchor: the hinge
    for pos, neg in ((a.copy(), a[::-1].copy()), (a[::-1].copy(), a.copy())):
        for swap in (False, True):
            _edge([(a, True), (pos, True), (neg, True)],
                  lambda x, p, n, r, s=swap: F.triplet_margin_loss(x, p, n, swap=s, reduction=r),
                  lambda x, p, n, r, s=swap: TF.triplet_margin_loss(x, p, n, swap=s, reduction=r),
                  f"triplet swap={swap}")
            _edge([(a, True), (pos, True), (neg, True)],
                  lambda x, p, n, r, s=swap: F.triplet_margin_with_distance_loss(x, p, n, swap=s, reduction=r),
                  lambda x, p, n, r, s=swap: TF.triplet_margin_with_distance_loss(x, p, n, swap=s, reduction=r),
                  f"triplet_with_distance swap={swap}")


def test_likelihood_special_values() -> None:
    # zero and sub-one counts (Stirling's term dropped), a rate of 0 (log(eps)), a log-rate of 0
    t = np.array([0.0, 1.0, 0.25, 1.0001, 30.0, 0.0])
    x = np.array([0.0, 1.0, 0.0, 2.0, 30.0, 3e-3])
    for log_input in (True, False):
        for full in (True, False):
            _edge([(x, True), (t, not full)],
                  lambda a, b, r, li=log_input, f=full: F.poisson_nll_loss(a, b, li, f, reduction=r),
                  lambda a, b, r, li=log_input, f=full: TF.poisson_nll_loss(a, b, li, f, reduction=r),
                  f"poisson log_input={log_input} full={full}")
    # with full, Stirling's term is dropped at t <= 1 and so is its gradient: 0 at t == 0, where torch's
    # masked_fill leaves 0 * log(0) = NaN
    tt = torch.tensor(t, requires_grad=True)
    TF.poisson_nll_loss(torch.tensor(x), tt, full=True, reduction="sum").backward()
    mine = tp.tensor(t, requires_grad=True)
    F.poisson_nll_loss(tp.tensor(x), mine, full=True, reduction="sum").backward()
    assert mine.grad is not None and tt.grad is not None
    g, want = mine.grad.numpy(), tt.grad.numpy()
    assert np.isnan(want[t == 0]).all() and (g[t == 0] == -x[t == 0]).all()
    np.testing.assert_allclose(g[t != 0], want[t != 0], rtol=1e-12)
    # variances at 0 and below eps are clamped to eps, the gradient passing straight through
    v = np.array([0.0, 1e-8, 1e-6, 0.5, 2.0, 0.0])
    _edge([(x, True), (t, True), (v, True)],
          lambda a, b, c, r: F.gaussian_nll_loss(a, b, c, reduction=r),
          lambda a, b, c, r: TF.gaussian_nll_loss(a, b, c, reduction=r), "gaussian var below eps")
    _edge([(x, True), (t, True)], lambda a, b, r: F.gaussian_nll_loss(a, b, 0.0, True, reduction=r),
          lambda a, b, r: TF.gaussian_nll_loss(a, b, 0.0, True, reduction=r), "gaussian var 0.0")


def test_result_dtypes_follow_torch() -> None:
    f32, f64 = np.float32, np.float64
    x, y = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    i = np.ones((3, 4), dtype=np.int64)
    calls: list[tuple[str, Callable[..., Any], Callable[..., Any], list[np.ndarray[Any, Any]]]] = [
        ("cosine int inputs", F.cosine_embedding_loss, TF.cosine_embedding_loss, [i, i * 2, np.ones(3, np.int64)]),
        ("cosine f64/f32", F.cosine_embedding_loss, TF.cosine_embedding_loss,
         [x.astype(f64), y.astype(f32), np.ones(3, f32)]),
        ("hinge f32 input, f64 target", F.hinge_embedding_loss, TF.hinge_embedding_loss, [x.astype(f32), i * 1.0]),
        ("margin_ranking f32/f64 target", F.margin_ranking_loss, TF.margin_ranking_loss,
         [x[0].astype(f32), y[0].astype(f32), np.ones(4, f64)]),
        ("margin_ranking ints", F.margin_ranking_loss, TF.margin_ranking_loss, [i[0], i[0] * 2, -i[0]]),
        ("soft_margin f32 input, f64 target", F.soft_margin_loss, TF.soft_margin_loss, [x.astype(f32), i * 1.0]),
        ("soft_margin f64 input, int target", F.soft_margin_loss, TF.soft_margin_loss, [x, i]),
        ("multilabel_soft_margin f32, int target", F.multilabel_soft_margin_loss, TF.multilabel_soft_margin_loss,
         [x.astype(f32), i]),
        ("multilabel_soft_margin f32, f64 target", F.multilabel_soft_margin_loss, TF.multilabel_soft_margin_loss,
         [x.astype(f32), i * 1.0]),
        ("triplet ints", F.triplet_margin_loss, TF.triplet_margin_loss, [i, i * 2, i * 3]),
        ("triplet f64/f32", F.triplet_margin_loss, TF.triplet_margin_loss, [x, y.astype(f32), y.astype(f32)]),
        ("poisson int target", F.poisson_nll_loss, TF.poisson_nll_loss, [x.astype(f32), i]),
        ("poisson int input", F.poisson_nll_loss, TF.poisson_nll_loss, [i, y.astype(f32)]),
        ("poisson f32/f64", F.poisson_nll_loss, TF.poisson_nll_loss, [x.astype(f32), i * 1.0]),
        ("gaussian int target", F.gaussian_nll_loss, TF.gaussian_nll_loss,
         [x.astype(f32), i, np.ones((3, 4), f32)]),
        ("gaussian f64 var", F.gaussian_nll_loss, TF.gaussian_nll_loss, [x.astype(f32), y.astype(f32), i * 1.0]),
    ]
    for what, ours, theirs, arrays in calls:
        got = ours(*[tp.tensor(a) for a in arrays])
        want = theirs(*[torch.tensor(a) for a in arrays])
        # a float32 operand rounds in float32 somewhere, whatever the result's dtype
        _close(got, want, "float32" if any(a.dtype == f32 for a in arrays) else "float64", what)


# ---- modules -----------------------------------------------------------------------------------------------

def test_modules_match_torch_modules() -> None:
    x, y, z = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    w = RNG.uniform(0.5, 1.5, size=3)
    s = np.sign(RNG.standard_normal(4))
    idx = np.array([0, 2, 1, 2])
    dist = (lambda a, b: F.pairwise_distance(a, b, 1.0), lambda a, b: TF.pairwise_distance(a, b, 1.0))
    pairs: list[tuple[Any, Any, list[np.ndarray[Any, Any]]]] = [
        (nn.CosineEmbeddingLoss(0.1, reduction="sum"), torch.nn.CosineEmbeddingLoss(0.1, reduction="sum"), [x, y, s]),
        (nn.HingeEmbeddingLoss(0.5), torch.nn.HingeEmbeddingLoss(0.5), [x, np.sign(y)]),
        (nn.MarginRankingLoss(0.2, reduction="none"), torch.nn.MarginRankingLoss(0.2, reduction="none"),
         [x[:, 0], y[:, 0], s]),
        (nn.SoftMarginLoss(), torch.nn.SoftMarginLoss(), [x, np.sign(y)]),
        (nn.MultiLabelSoftMarginLoss(tp.tensor(w)), torch.nn.MultiLabelSoftMarginLoss(torch.tensor(w)),
         [x, (y > 0) * 1.0]),
        (nn.MultiMarginLoss(2, 0.5, tp.tensor(w)), torch.nn.MultiMarginLoss(2, 0.5, torch.tensor(w)), [x, idx]),
        (nn.MultiLabelMarginLoss(), torch.nn.MultiLabelMarginLoss(), [x, np.array([[0, -1, 1]] * 4)]),
        (nn.TripletMarginLoss(0.5, 1.0, swap=True), torch.nn.TripletMarginLoss(0.5, 1.0, swap=True), [x, y, z]),
        (nn.TripletMarginWithDistanceLoss(distance_function=dist[0], margin=0.5),
         torch.nn.TripletMarginWithDistanceLoss(distance_function=dist[1], margin=0.5), [x, y, z]),
        (nn.PoissonNLLLoss(False, True), torch.nn.PoissonNLLLoss(False, True), [np.abs(x), np.abs(y) * 3]),
        (nn.GaussianNLLLoss(full=True), torch.nn.GaussianNLLLoss(full=True), [x, y, np.abs(z)]),
    ]
    for ours, theirs, arrays in pairs:
        _close(ours(*[tp.tensor(a) for a in arrays]), theirs(*[torch.tensor(a) for a in arrays]), "float64",
               repr(ours))
    assert "weight" in dict(nn.MultiMarginLoss(weight=tp.tensor(w)).named_buffers())
    assert "weight" in dict(nn.MultiLabelSoftMarginLoss(tp.tensor(w)).named_buffers())


# ---- errors ------------------------------------------------------------------------------------------------

def _t(a: Any) -> Any:
    return tp.tensor(np.asarray(a))


X = _t(np.zeros((3, 4)))
V = _t(np.zeros(4))
S3 = _t(np.ones(3))
I3 = _t(np.array([0, 1, 2]))
ALL_LOSSES: dict[str, Callable[..., Any]] = {
    "cosine_embedding_loss": lambda r: F.cosine_embedding_loss(X, X, S3, reduction=r),
    "hinge_embedding_loss": lambda r: F.hinge_embedding_loss(X, X, reduction=r),
    "margin_ranking_loss": lambda r: F.margin_ranking_loss(S3, S3, S3, reduction=r),
    "soft_margin_loss": lambda r: F.soft_margin_loss(X, X, reduction=r),
    "multilabel_soft_margin_loss": lambda r: F.multilabel_soft_margin_loss(X, X, reduction=r),
    "multi_margin_loss": lambda r: F.multi_margin_loss(X, I3, reduction=r),
    "multilabel_margin_loss": lambda r: F.multilabel_margin_loss(X, _t(-np.ones((3, 4), np.int64)), reduction=r),
    "triplet_margin_loss": lambda r: F.triplet_margin_loss(X, X, X, reduction=r),
    "triplet_margin_with_distance_loss": lambda r: F.triplet_margin_with_distance_loss(X, X, X, reduction=r),
    "poisson_nll_loss": lambda r: F.poisson_nll_loss(X, X, reduction=r),
    "gaussian_nll_loss": lambda r: F.gaussian_nll_loss(X, X, X, reduction=r),
}


@pytest.mark.parametrize("name", list(ALL_LOSSES))
def test_a_bad_reduction_names_the_loss(name: str) -> None:
    ALL_LOSSES[name]("mean")  # the call itself is fine
    with pytest.raises(ArgumentError, match=f"{name}: reduction must be one of .*got 'avg'"):
        ALL_LOSSES[name]("avg")


ERRORS: list[tuple[Callable[[], Any], type[Exception], str]] = [
    (lambda: F.cosine_embedding_loss(X, X, _t(np.ones((3, 1)))), ShapeError,
     r"cosine_embedding_loss: expected a 0-d or 1-d target .*got target \[3, 1\]"),
    (lambda: F.cosine_embedding_loss(X, V, S3), ShapeError,
     r"cosine_embedding_loss: a 1-d target expects 2-d inputs, got input1 \[3, 4\] and input2 \[4\]"),
    (lambda: F.cosine_embedding_loss(X, _t(np.zeros((2, 4))), S3), ShapeError,
     r"cosine_embedding_loss: expected shapes that broadcast together, got input1 \[3, 4\], input2 \[2, 4\]"),
    (lambda: F.cosine_embedding_loss(X, X, _t(np.ones(2))), ShapeError,
     r"cosine_embedding_loss: .*the cosines \[3\], target \[2\]"),
    (lambda: F.cosine_embedding_loss(X, X, [1, 1, 1]), DTypeError,  # type: ignore[arg-type]
     "cosine_embedding_loss: expected a tensorplay Tensor as target, got list"),
    (lambda: F.cosine_embedding_loss(X, np.zeros((3, 4)), S3), DTypeError,  # type: ignore[arg-type]
     "cosine_embedding_loss: input2 must be a tensorplay Tensor, got ndarray"),
    (lambda: F.hinge_embedding_loss(I3, S3), DTypeError,
     r"hinge_embedding_loss: input must be a float tensor, got int64\[3\]"),
    (lambda: F.hinge_embedding_loss(X, S3), ShapeError,
     r"hinge_embedding_loss: expected shapes that broadcast together, got input \[3, 4\], target \[3\]"),
    (lambda: F.margin_ranking_loss(X, S3, S3), ShapeError,
     r"margin_ranking_loss: expected tensors with the same number of dimensions, got input1 2-d \[3, 4\]"),
    (lambda: F.margin_ranking_loss(S3, S3, _t(np.ones(3, bool))), DTypeError,
     r"margin_ranking_loss: target must be a numeric tensor, got bool\[3\]"),
    (lambda: F.soft_margin_loss(I3, S3), DTypeError, r"soft_margin_loss: input must be a float tensor, got int64\[3\]"),
    (lambda: F.multilabel_soft_margin_loss(_t(np.float64(1.0)), _t(np.float64(1.0))), ShapeError,
     "multilabel_soft_margin_loss: expected input .* with a class dim, got a 0-d tensor"),
    (lambda: F.multi_margin_loss(X, I3, p=3), ArgumentError, "multi_margin_loss: p must be 1 or 2, got 3"),
    (lambda: F.multi_margin_loss(X, _t(np.array([0, 1, 4]))), IndexRangeError, "multi_margin_loss: target"),
    (lambda: F.multi_margin_loss(X, _t(np.array([0, -1, 1]))), IndexRangeError, "multi_margin_loss: target"),
    (lambda: F.multi_margin_loss(X, S3), DTypeError, "multi_margin_loss: target must be an integer tensor"),
    (lambda: F.multi_margin_loss(X, _t(np.array([0, 1]))), ShapeError,
     r"multi_margin_loss: expected a target of 3 class indices \(1-d \[3\]\), got target \[2\] for input \[3, 4\]"),
    (lambda: F.multi_margin_loss(X, I3, weight=_t(np.ones(3))), ShapeError,
     r"multi_margin_loss: weight must be 1-d with one entry per class \[4\], got weight \[3\]"),
    (lambda: F.multi_margin_loss(X, I3, weight=_t(np.ones((1, 4)))), ShapeError,
     r"multi_margin_loss: weight must be 1-d .*got weight \[1, 4\]"),
    (lambda: F.multi_margin_loss(X, I3, weight=_t(np.ones(4, np.float32))), DTypeError,
     r"multi_margin_loss: weight must have the input's dtype float64, got float32\[4\]"),
    (lambda: F.multi_margin_loss(_t(np.zeros((1, 3, 4))), I3), ShapeError,
     r"multi_margin_loss: expected a non-empty input \[C\] or \[N, C\] .*got input \[1, 3, 4\]"),
    (lambda: F.multi_margin_loss(_t(np.zeros((0,))), _t(np.zeros(0, np.int64))), ShapeError,
     r"multi_margin_loss: expected a non-empty input .*got input \[0\]"),
    (lambda: F.multilabel_margin_loss(X, _t(np.zeros((1, 4), np.int64))), ShapeError,
     r"multilabel_margin_loss: target must have the input's shape \[3, 4\], got target \[1, 4\]"),
    (lambda: F.multilabel_margin_loss(X, _t(np.array([[0, -2, 1, 1]] * 3))), IndexRangeError,
     "multilabel_margin_loss: target"),
    (lambda: F.multilabel_margin_loss(X, _t(np.array([[0, -1, 4, 1]] * 3))), IndexRangeError,
     "multilabel_margin_loss: target"),
    (lambda: F.triplet_margin_loss(X, X, X, margin=0.0), ArgumentError,
     "triplet_margin_loss: margin must be greater than 0, got 0.0"),
    (lambda: F.triplet_margin_loss(X, V, X), ShapeError,
     r"triplet_margin_loss: expected tensors with the same number of dimensions, got anchor 2-d \[3, 4\], "
     r"positive 1-d \[4\], negative 2-d \[3, 4\]"),
    (lambda: F.triplet_margin_with_distance_loss(X, X, X, margin=-1.0), ArgumentError,
     "triplet_margin_with_distance_loss: margin must be greater than 0, got -1.0"),
    (lambda: F.triplet_margin_with_distance_loss(X, X, X, distance_function=3),  # type: ignore[arg-type]
     ArgumentError,
     "triplet_margin_with_distance_loss: distance_function must be callable or None, got int"),
    (lambda: F.poisson_nll_loss(_t(np.ones(3, bool)), S3), DTypeError,
     r"poisson_nll_loss: input must be a numeric tensor, got bool\[3\]"),
    (lambda: F.poisson_nll_loss(X, S3), ShapeError, "poisson_nll_loss: expected shapes that broadcast together"),
    (lambda: F.gaussian_nll_loss(X, X, _t(-np.ones((3, 4)))), ArgumentError,
     "gaussian_nll_loss: var must be non-negative, got a negative entry -1.0"),
    (lambda: F.gaussian_nll_loss(X, X, -0.5), ArgumentError, "gaussian_nll_loss: var must be non-negative, got -0.5"),
    (lambda: F.gaussian_nll_loss(X, X, V), ShapeError,
     r"gaussian_nll_loss: var of shape \[4\] does not fit the input \[3, 4\]"),
    (lambda: F.gaussian_nll_loss(X, X, _t(np.ones((1, 1)))), ShapeError,
     r"gaussian_nll_loss: var of shape \[1, 1\] does not fit the input \[3, 4\]"),
    (lambda: F.gaussian_nll_loss(X, X, "1"), DTypeError,  # type: ignore[arg-type]
     "gaussian_nll_loss: var must be a tensorplay Tensor or a number, got str"),
]


@pytest.mark.parametrize("call,error,message", ERRORS,
                         ids=[m.split(":")[0] + f"-{i}" for i, (_, _, m) in enumerate(ERRORS)])
def test_argument_errors(call: Callable[[], Any], error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_torch_refuses_the_same_calls() -> None:
    """The refusals above that PyTorch shares (so they are not stricter than PyTorch)."""
    x, v, s = torch.zeros(3, 4), torch.zeros(4), torch.ones(3)
    calls: list[Callable[[], Any]] = [
        lambda: TF.cosine_embedding_loss(x, x, torch.ones(3, 1)), lambda: TF.cosine_embedding_loss(x, v, s),
        lambda: TF.margin_ranking_loss(x, s, s), lambda: TF.multi_margin_loss(x, torch.tensor([0, 1, 4])),
        lambda: TF.multi_margin_loss(x, torch.tensor([0, 1, 2]), p=3),
        lambda: TF.multi_margin_loss(x, torch.tensor([0, 1, 2]), weight=torch.ones(3)),
        lambda: TF.multilabel_margin_loss(x, torch.tensor([[0, -2, 1, 1]] * 3)),
        lambda: TF.triplet_margin_loss(x, x, x, margin=0.0), lambda: TF.triplet_margin_loss(x, v, x),
        lambda: TF.gaussian_nll_loss(x, x, -torch.ones(3, 4)), lambda: TF.gaussian_nll_loss(x, x, v),
        lambda: TF.gaussian_nll_loss(x, x, torch.ones(1, 1)), lambda: TF.hinge_embedding_loss(x, s)]
    for call in calls:
        with pytest.raises((RuntimeError, ValueError)):
            call()


# ---- compile, grad, vmap -----------------------------------------------------------------------------------

def _total(ours: bool, x: Any, y: Any, z: Any, s: Any, idx: Any, labels: Any, var: Any) -> Any:
    f = F if ours else TF
    return (f.cosine_embedding_loss(x, y, s, 0.1) + f.multi_margin_loss(x, idx, 2)
            + f.multilabel_margin_loss(y, labels, reduction="sum") + f.triplet_margin_loss(x, y, z, swap=True)
            + f.gaussian_nll_loss(x, z, var) + f.poisson_nll_loss(y, z.abs()) + f.soft_margin_loss(x, s[:, None])
            + f.margin_ranking_loss(x[:, 0], y[:, 0], s, 0.2) + f.hinge_embedding_loss(z, s[:, None]))


def _data(n: int) -> list[np.ndarray[Any, Any]]:
    return [RNG.standard_normal((n, 4)), RNG.standard_normal((n, 4)), RNG.standard_normal((n, 4)),
            np.sign(RNG.standard_normal(n)), RNG.integers(0, 4, size=n), _labels(n, 4), RNG.uniform(0.1, 2, size=n)]


def test_compile_called_twice_and_grad_match_torch() -> None:
    compiled: Callable[..., Any] = tp.compile(lambda *a: _total(True, *a))
    grad = tp.func.grad(lambda *a: _total(True, *a), argnums=(0, 1, 2, 6))
    for n in (5, 5, 3):  # a second call of the same shapes (cached), then new shapes
        arrays = _data(n)
        ref = [torch.tensor(a, requires_grad=i in (0, 1, 2, 6)) for i, a in enumerate(arrays)]
        want = _total(False, *ref)
        want.backward()
        _close(compiled(*[tp.tensor(a) for a in arrays]), want, "float64", f"compiled n={n}")
        got = grad(*[tp.tensor(a) for a in arrays])
        for g, i in zip(got, (0, 1, 2, 6)):
            _close(g, ref[i].grad, "float64", f"tp.func.grad input {i} n={n}")
    # the target's range is checked when the compiled graph runs, on new data too
    bad = _data(5)
    bad[4][2] = 4
    with pytest.raises(IndexRangeError, match="multi_margin_loss: target"):
        compiled(*[tp.tensor(a) for a in bad])


def test_vmap_of_unbatched_losses_matches_torch_per_sample() -> None:
    x, y, z, s, idx, labels, var = _data(4)

    def per_sample(ours: bool, x: Any, y: Any, z: Any, s: Any, idx: Any, labels: Any, var: Any) -> Any:
        f = F if ours else TF
        return (f.cosine_embedding_loss(x, y, s) + f.multi_margin_loss(x, idx) + f.multilabel_margin_loss(y, labels)
                + f.triplet_margin_loss(x, y, z, p=1.0) + f.gaussian_nll_loss(x, z, var)
                + f.multilabel_soft_margin_loss(x, (y > 0) * 1.0) + f.margin_ranking_loss(x[0], y[0], s))

    got = tp.func.vmap(lambda *a: per_sample(True, *a))(*[tp.tensor(a) for a in (x, y, z, s, idx, labels, var)])
    want = torch.stack([per_sample(False, *[torch.tensor(a[i]) for a in (x, y, z, s, idx, labels, var)])
                        for i in range(4)])
    _close(got, want, "float64", "vmap per sample")
    grads = tp.func.vmap(tp.func.grad(lambda *a: per_sample(True, *a)))(
        *[tp.tensor(a) for a in (x, y, z, s, idx, labels, var)])
    for i in range(4):
        tx = torch.tensor(x[i], requires_grad=True)
        per_sample(False, tx, *[torch.tensor(a[i]) for a in (y, z, s, idx, labels, var)]).backward()
        _close(grads[i], tx.grad, "float64", f"vmap(grad) sample {i}")
