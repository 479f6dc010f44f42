"""PyTorch habits: the top-level function forms (``tp.sum``, ``tp.max``, ``tp.einsum``, ...) and the Tensor
methods PyTorch users reach for (``sort``, ``topk``, ``cumsum``, ``norm``, ``std``, ``split``, ...), each
against PyTorch (values, dtypes, ties, NaN, gradients at the awkward points), under every interpreter and
transform, with gradients, jvp and batching checked against finite differences."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as F
from tensorplay import Tensor
from tensorplay.testing import assert_close, check_grads, check_interpreters

AnyTensor = Tensor[*tuple[Any, ...]]
RNG = np.random.default_rng(0)
X64 = RNG.standard_normal((3, 4))
TIES = np.array([[3.0, np.nan, 1.0, 3.0, np.nan, 2.0], [0.0, 5.0, 5.0, 1.0, -1.0, 5.0], [2.0, 2.0, 2.0, 2.0, 2.0, 2.0]])


def _np(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(_np(v) for v in x)
    if isinstance(x, Tensor):
        return x.detach().numpy()
    if isinstance(x, torch.Tensor):
        return x.detach().numpy()
    return x


def same(ours: Any, theirs: Any, **tol: Any) -> None:
    """Equal values (NaN equal to NaN) and equal dtypes, elementwise over tuples."""
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs), (ours, theirs)
        for a, b in zip(ours, theirs):
            same(a, b, **tol)
        return
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, Tensor), type(ours)
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), (ours.dtype, theirs.dtype)
        assert tuple(ours.shape) == tuple(theirs.shape), (ours.shape, theirs.shape)
    np.testing.assert_allclose(_np(ours), _np(theirs), equal_nan=True, **(tol or {"rtol": 1e-6, "atol": 1e-12}))


# ---- the namespace ---------------------------------------------------------------------------------

FUNCTION_FORMS = ("sin", "exp", "log", "abs", "sqrt", "tanh", "sigmoid", "matmul", "einsum", "softmax", "maximum",
                  "minimum", "clamp", "sum", "mean", "max", "min", "argmax", "flatten", "reshape", "transpose",
                  "permute", "squeeze", "unsqueeze", "broadcast_to", "allclose", "isnan", "isfinite", "tril", "triu",
                  "outer", "chunk", "split", "cumsum", "sort", "topk")
METHODS = ("all", "any", "sort", "topk", "cumsum", "norm", "std", "chunk", "split", "masked_fill", "int", "isfinite",
           "nan_to_num", "round", "allclose")


def test_every_function_form_is_public_and_is_the_method() -> None:
    for name in FUNCTION_FORMS:
        assert name in tp.__all__, name
        if name != "einsum":  # the method itself, behind a check that its first argument is a tensor
            assert getattr(tp, name).__wrapped__ is getattr(Tensor, name), name
    for name in METHODS:
        assert callable(getattr(Tensor, name, None)), name
    from tensorplay import functions
    forms = [n for n, v in vars(functions).items() if v is functions.einsum or (
        not n.startswith("_") and any(getattr(v, "__wrapped__", None) is m for m in vars(Tensor).values()))]
    assert len(forms) > 60 and not set(forms) - set(tp.__all__), set(forms) - set(tp.__all__)
    assert tp.nn.functional.one_hot(tp.tensor([0, 2]), 3).tolist() == [[1, 0, 0], [0, 0, 1]]


@pytest.mark.parametrize("name", ["sin", "exp", "log", "abs", "sqrt", "tanh", "sigmoid", "isnan", "isfinite", "isinf",
                                  "round", "floor", "ceil", "neg", "sign", "square", "cos", "rsqrt", "log1p", "expm1"])
def test_elementwise_function_forms_match_pytorch(name: str) -> None:
    x = np.array([[0.5, -1.5, 2.5, 0.0], [np.nan, np.inf, -np.inf, 3.25]])
    if name == "sign":  # sign(NaN) is NaN here (numpy's convention, documented on the primitive), 0 in PyTorch
        x = np.nan_to_num(x)
    with np.errstate(all="ignore"):
        same(getattr(tp, name)(tp.tensor(x)), getattr(torch, name)(torch.tensor(x)))


def test_round_is_half_to_even_with_decimals() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 1.25, 1.35, 1234.5, 15.0, 25.0])
    for decimals in (0, 1, -1):
        same(tp.tensor(x).round(decimals=decimals), torch.tensor(x).round(decimals=decimals))
    same(tp.round(tp.tensor([3, -2])), torch.round(torch.tensor([3, -2])))  # integers unchanged
    assert tp.round(tp.tensor([1.0, 2.0], requires_grad=True)).grad_fn is not None
    w = tp.tensor([0.3, 1.7], requires_grad=True)
    w.round().sum().backward()
    assert w.grad is not None and w.grad.tolist() == [0.0, 0.0]  # PyTorch's zero gradient


# ---- max, min and their three forms -----------------------------------------------------------------

def test_max_and_min_have_pytorch_three_forms() -> None:
    x = np.array([[1.0, 5.0, 5.0], [3.0, np.nan, 0.0], [-1.0, -1.0, -2.0]])
    for name in ("max", "min"):
        same(getattr(tp, name)(tp.tensor(x)), getattr(torch, name)(torch.tensor(x)))
        for dim in (0, 1, -1):
            for keepdim in (False, True):
                ours = getattr(tp, name)(tp.tensor(x), dim, keepdim=keepdim)
                theirs = getattr(torch, name)(torch.tensor(x), dim, keepdim=keepdim)
                assert isinstance(ours, tp.ValuesIndices) and ours._fields == ("values", "indices")
                same(tuple(ours), tuple(theirs))
                same(ours.values, theirs.values)
        y = RNG.standard_normal(3)
        same(getattr(tp, name)(tp.tensor(x), tp.tensor(y)), getattr(torch, name)(torch.tensor(x), torch.tensor(y)))
        same(getattr(tp.tensor(x), name)(1), tuple(getattr(torch.tensor(x), name)(1)))
    same(tp.max(tp.tensor(3.0), 0), tuple(torch.max(torch.tensor(3.0), 0)))
    same(tp.max(tp.tensor([[1, 7], [9, 2]]), 1), tuple(torch.max(torch.tensor([[1, 7], [9, 2]]), 1)))
    same(tp.amax(tp.tensor(x), (0, 1)), torch.amax(torch.tensor(x), (0, 1)))
    with pytest.raises(tp.AxisError, match=r"max\(\): dim must be one int.*amax"):
        tp.tensor(x).max((0, 1))


def test_max_gradients_follow_pytorch() -> None:
    """``max()`` shares the gradient among tied maxima, ``max(dim)`` gives it to the first one."""
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]])
    for fn in (lambda t: t.max(), lambda t: t.max(1).values.sum(), lambda t: t.min(0)[0].sum(),
               lambda t: t.amax(1).sum(), lambda t: (t.max(1).values * t.max(0, keepdim=True).values.sum()).sum()):
        ours, theirs = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        fn(ours).backward()
        fn(theirs).backward()
        same(ours.grad, theirs.grad)
        assert_close(F.grad(fn)(tp.tensor(x)), tp.tensor(theirs.grad.numpy()))


# ---- sort and topk ----------------------------------------------------------------------------------

@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("dim", [1, 0, -1])
def test_sort_matches_pytorch_stable_sort_with_ties_and_nan(descending: bool, dim: int) -> None:
    ours = tp.sort(tp.tensor(TIES), dim, descending=descending)
    theirs = torch.sort(torch.tensor(TIES), dim=dim, descending=descending, stable=True)
    same(tuple(ours), tuple(theirs))
    unstable = tp.tensor(TIES).sort(dim, descending)  # always stable: the same answer
    same(tuple(unstable), tuple(theirs))
    same(tp.tensor(TIES).argsort(dim, descending), torch.argsort(torch.tensor(TIES), dim=dim, descending=descending,
                                                                 stable=True))
    same(tuple(tp.sort(tp.tensor(np.array([True, False, True])))),
         tuple(torch.sort(torch.tensor([True, False, True]), stable=True)))


@pytest.mark.parametrize("largest", [True, False])
def test_topk_values_match_pytorch_and_indices_point_at_them(largest: bool) -> None:
    x = tp.tensor(TIES)
    for k in (0, 1, 3, 6):
        ours = tp.topk(x, k, largest=largest)
        theirs = torch.topk(torch.tensor(TIES), k, largest=largest)
        same(ours.values, theirs.values)
        assert ours.indices.dtype == tp.int64
        np.testing.assert_array_equal(np.take_along_axis(TIES, ours.indices.numpy(), 1), ours.values.numpy())
        # ties: the first positions (PyTorch leaves their order unspecified; a stable sort's prefix here)
        expected = torch.sort(torch.tensor(TIES), dim=1, descending=largest, stable=True).indices[:, :k]
        same(ours.indices, expected)
    same(tuple(tp.tensor(X64).topk(2, dim=0)), tuple(torch.tensor(X64).topk(2, dim=0)))
    with pytest.raises(tp.ShapeError, match=r"topk: k must be an int in \[0, 6\]"):
        x.topk(7)


def test_sort_and_topk_gradients_reach_the_selected_values() -> None:
    x = RNG.standard_normal((3, 5))
    x[0, 1] = x[0, 3]  # a tie
    g = RNG.standard_normal((3, 5))
    for fn in (lambda t: (t.sort(1, descending=True).values * g_of(t, g)).sum(),
               lambda t: (t.topk(3).values * g_of(t, g)[:, :3]).sum(),
               lambda t: (t.sort(0).values * g_of(t, g)).sum()):
        ours, theirs = tp.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        fn(ours).backward()
        fn(theirs).backward()
        same(ours.grad, theirs.grad)


def g_of(t: Any, g: np.ndarray[Any, Any]) -> Any:
    return tp.tensor(g) if isinstance(t, Tensor) else torch.tensor(g)


# ---- reductions -------------------------------------------------------------------------------------

def test_all_and_any_match_pytorch() -> None:
    for values in (np.array([[1.0, 0.0, np.nan], [2.0, 3.0, -1.0]]), np.array([[True, False], [True, True]]),
                   np.array([[0, 2], [0, 0]]), np.zeros((0, 3))):
        for name in ("all", "any"):
            same(getattr(tp.tensor(values), name)(), getattr(torch.tensor(values), name)())
            for dim in (0, 1, (0, 1)):
                for keepdim in (False, True):
                    same(getattr(tp, name)(tp.tensor(values), dim, keepdim),
                         getattr(torch, name)(torch.tensor(values), dim, keepdim))


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_std_matches_pytorch_with_its_gradient_at_a_constant(correction: int) -> None:
    x = RNG.standard_normal((4, 5))
    for dim in (None, 0, -1, (0, 1)):
        same(tp.tensor(x).std(dim, correction=correction), torch.tensor(x).std(dim, correction=correction))
    constant = np.ones((2, 3))
    ours, theirs = tp.tensor(constant, requires_grad=True), torch.tensor(constant, requires_grad=True)
    ours.std(1).sum().backward()
    theirs.std(1).sum().backward()
    same(ours.grad, theirs.grad)  # 0, not NaN
    assert_close(F.grad(lambda t: t.std(1).sum())(tp.tensor(constant)), tp.zeros(2, 3, dtype=tp.float64))


NORMS: list[Any] = [2, 1, float("inf"), float("-inf"), 0, 3, 0.5, "fro", -1.5]


@pytest.mark.parametrize("p", NORMS)
def test_norm_matches_pytorch_with_gradient_zero_at_the_zero_vector(p: Any) -> None:
    x = RNG.standard_normal((3, 4))
    x[1, 2] = 0.0
    dims: list[Any] = [None, 1, -2] + ([(0, 1)] if p != "fro" else [(0, 1)])
    for dim in dims:
        for keepdim in (False, True):
            same(tp.tensor(x).norm(p, dim, keepdim), torch.norm(torch.tensor(x), p, dim, keepdim), rtol=1e-6)
    same(tp.norm(tp.tensor(x), p), torch.norm(torch.tensor(x), p), rtol=1e-6)
    if p in (-1.5, float("-inf"), 0):
        return  # negative orders: no gradient convention to match at 0; p=0 counts non-zeros (no derivative)
    zero = np.zeros((2, 3))
    zero[1] = [1.0, -2.0, 0.5]  # row 0 is the zero vector, row 1 is not
    ours, theirs = tp.tensor(zero, requires_grad=True), torch.tensor(zero, requires_grad=True)
    ours.norm(p, 1).sum().backward()
    torch.norm(theirs, p, 1).sum().backward()
    same(ours.grad, theirs.grad, rtol=1e-6)
    assert not np.isnan(ours.grad.numpy()).any()  # type: ignore[union-attr]
    assert_close(F.grad(lambda t: t.norm(p, 1).sum())(tp.tensor(zero)), ours.grad)


def test_norm_refuses_what_pytorch_refuses() -> None:
    with pytest.raises(tp.DTypeError, match="norm: expected a float tensor"):
        tp.tensor([1, 2]).norm()
    with pytest.raises(tp.AxisError, match="at most 2 dims"):
        tp.ones(2, 2, 2).norm("fro", (0, 1, 2))
    with pytest.raises(ValueError, match="nuclear"):
        tp.ones(2, 2).norm("nuc")


def test_cumsum_matches_pytorch_with_dtypes_and_gradient() -> None:
    for values in (X64, X64.astype(np.float32), np.array([[True, False], [True, True]]),
                   np.arange(6, dtype=np.int32).reshape(2, 3), np.zeros((2, 0))):
        for dim in (0, -1):
            same(tp.cumsum(tp.tensor(values), dim), torch.cumsum(torch.tensor(values), dim))
    same(tp.tensor(2.5).cumsum(0), torch.tensor(2.5).cumsum(0))
    g = RNG.standard_normal((3, 4))
    ours, theirs = tp.tensor(X64, requires_grad=True), torch.tensor(X64, requires_grad=True)
    (ours.cumsum(1) * tp.tensor(g)).sum().backward()
    (theirs.cumsum(1) * torch.tensor(g)).sum().backward()
    same(ours.grad, theirs.grad)


# ---- elementwise --------------------------------------------------------------------------------------

def test_clamp_with_tensor_bounds_matches_pytorch() -> None:
    x = RNG.standard_normal((3, 4))
    lo, hi = RNG.standard_normal(4) - 0.5, RNG.standard_normal((3, 1)) + 0.5
    ours = [tp.tensor(v, requires_grad=True) for v in (x, lo, hi)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (x, lo, hi)]
    out, ref = tp.clamp(ours[0], ours[1], ours[2]), torch.clamp(theirs[0], theirs[1], theirs[2])
    same(out, ref)
    g = RNG.standard_normal((3, 4))
    (out * tp.tensor(g)).sum().backward()
    (ref * torch.tensor(g)).sum().backward()
    for a, b in zip(ours, theirs):
        same(a.grad, b.grad)
    same(tp.clip(tp.tensor(x), max=0.0), torch.clip(torch.tensor(x), max=0.0))


def test_masked_fill_nan_to_num_isclose_allclose_match_pytorch() -> None:
    x = np.array([[1.0, np.nan, np.inf], [-np.inf, 0.0, 2.5]])
    mask = np.array([True, False, True])
    same(tp.tensor(x).masked_fill(tp.tensor(mask), -7.0), torch.tensor(x).masked_fill(torch.tensor(mask), -7.0))
    same(tp.tensor([1, 2]).masked_fill(tp.tensor([True, False]), 1.7),
         torch.tensor([1, 2]).masked_fill(torch.tensor([True, False]), 1.7))
    with pytest.raises(tp.DTypeError, match="mask must be a bool tensor"):
        tp.tensor(x).masked_fill(tp.tensor([1, 0, 1]), 0.0)
    with pytest.raises(tp.ShapeError, match="does not broadcast"):
        tp.tensor(x).masked_fill(tp.tensor(np.ones((3, 2, 3), bool)), 0.0)
    for kwargs in ({}, {"nan": 1.0, "posinf": 9.0}, {"neginf": -3.0}):
        same(tp.tensor(x).nan_to_num(**kwargs), torch.tensor(x).nan_to_num(**kwargs))
        same(tp.tensor(x.astype(np.float32)).nan_to_num(**kwargs), torch.tensor(x.astype(np.float32)).nan_to_num(**kwargs))
    a = np.array([1.0, np.nan, np.inf, 1.0, -np.inf, 100.0])
    b = np.array([1.0 + 1e-9, np.nan, np.inf, 1.1, np.inf, 100.0005])
    for kwargs in ({}, {"equal_nan": True}, {"rtol": 1e-2}, {"atol": 0.2, "rtol": 0.0}):
        same(tp.isclose(tp.tensor(a), tp.tensor(b), **kwargs), torch.isclose(torch.tensor(a), torch.tensor(b), **kwargs))
        assert tp.allclose(tp.tensor(a[[0, 3]]), tp.tensor(b[[0, 3]]), **kwargs) == torch.allclose(
            torch.tensor(a[[0, 3]]), torch.tensor(b[[0, 3]]), **kwargs)
    assert tp.tensor([1, 2]).allclose(tp.tensor([1, 2])) and not tp.tensor([1, 2]).allclose(tp.tensor([1, 3]))
    for other in (1.0, float("nan"), float("inf")):  # a Python number on the right
        for kwargs in ({}, {"equal_nan": True}):
            same(tp.tensor(a).isclose(other, **kwargs), torch.tensor(a).isclose(torch.tensor(other, dtype=torch.float64),
                                                                            **kwargs))
    with pytest.raises(tp.DTypeError, match="same dtype"):
        tp.isclose(tp.ones(2), tp.ones(2, dtype=tp.float64))


def test_int_isfinite_and_friends() -> None:
    x = np.array([1.7, -1.7, 3.0])
    same(tp.tensor(x).int(), torch.tensor(x).int())
    same(tp.tensor([1, 2]).isfinite(), torch.tensor([1, 2]).isfinite())
    same(tp.tensor([True]).isinf(), torch.tensor([True]).isinf())


# ---- structure -------------------------------------------------------------------------------------

@pytest.mark.parametrize("diagonal", [0, 1, -1, 5, -5])
def test_tril_triu_match_pytorch(diagonal: int) -> None:
    x = RNG.standard_normal((2, 3, 4))
    for name in ("tril", "triu"):
        same(getattr(tp, name)(tp.tensor(x), diagonal), getattr(torch, name)(torch.tensor(x), diagonal))
        same(getattr(tp.tensor(x > 0), name)(diagonal), getattr(torch.tensor(x > 0), name)(diagonal))


def test_outer_chunk_split_match_pytorch() -> None:
    a, b = RNG.standard_normal(3), RNG.standard_normal(4)
    same(tp.outer(tp.tensor(a), tp.tensor(b)), torch.outer(torch.tensor(a), torch.tensor(b)))
    same(tp.outer(tp.tensor([1, 2]), tp.tensor([0.5])), torch.outer(torch.tensor([1, 2]), torch.tensor([0.5])))
    x = np.arange(30.0).reshape(5, 6)
    for chunks in (1, 2, 3, 4, 6, 7):
        for dim in (0, 1):
            same(tp.chunk(tp.tensor(x), chunks, dim), torch.chunk(torch.tensor(x), chunks, dim))
    same(tp.tensor(np.zeros((0, 2))).chunk(3), torch.zeros(0, 2, dtype=torch.float64).chunk(3))
    for sizes in (1, 2, 4, 6, 9, [1, 5], [0, 6, 0], (2, 2, 2)):
        same(tp.split(tp.tensor(x), sizes, 1), torch.split(torch.tensor(x), sizes, 1))
    same(tp.tensor(np.zeros(0)).split(2), torch.zeros(0, dtype=torch.float64).split(2))
    with pytest.raises(tp.ShapeError, match=r"split: the section sizes \[2, 2\] add up to 4, but axis 1 has size 6"):
        tp.split(tp.tensor(x), [2, 2], 1)
    with pytest.raises(tp.ShapeError, match="chunks must be a positive int"):
        tp.tensor(x).chunk(0)
    pieces = tp.tensor(x).split(4, 1)
    assert pieces[0]._data.base is not None  # views, as PyTorch


@pytest.mark.parametrize("name, args", [
    ("flatten", (1,)), ("reshape", ((2, 6),)), ("transpose", (0, 1)), ("permute", ((1, 0),)), ("squeeze", ()),
    ("unsqueeze", (1,)), ("broadcast_to", ((2, 3, 4),)), ("softmax", (1,)), ("log_softmax", (0,)),
    ("sum", (1,)), ("mean", (0,)), ("argmax", (1,)), ("argmin", (0,)),
])
def test_structure_and_reduction_function_forms_match_pytorch(name: str, args: tuple[Any, ...]) -> None:
    same(getattr(tp, name)(tp.tensor(X64), *args), getattr(torch, name)(torch.tensor(X64), *args))


def test_matmul_and_the_binary_forms() -> None:
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 5))
    same(tp.matmul(tp.tensor(a), tp.tensor(b)), torch.matmul(torch.tensor(a), torch.tensor(b)))
    same(tp.maximum(tp.tensor(a), 0.0), torch.clamp(torch.tensor(a), min=0.0))
    same(tp.minimum(tp.tensor(a), tp.tensor(a[0])), torch.minimum(torch.tensor(a), torch.tensor(a[0])))


# ---- einsum ----------------------------------------------------------------------------------------

EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bij,bjk", [(2, 3, 4), (2, 4, 5)]),
    ("ii", [(3, 3)]), ("ii->i", [(4, 4)]), ("iij->ji", [(3, 3, 2)]), ("iii->i", [(3, 3, 3)]),
    ("...ij,...jk->...ik", [(5, 1, 2, 3), (4, 3, 2)]), ("...ij->ij", [(2, 3, 4)]), ("...i,...i", [(2, 3), (3,)]),
    ("i,i->i", [(1,), (3,)]), ("bI,Ba", [(2, 3), (4, 5)]), ("i,j", [(2,), (3,)]), ("ij,kl->lkji", [(2, 3), (4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("abc,cd,bd->a", [(2, 3, 4), (4, 5), (3, 5)]), ("ij->", [(3, 4)]),
    ("ij,ij->ij", [(2, 3), (2, 3)]), (",i->i", [(), (3,)]), ("ab,ab->", [(3, 1), (1, 4)]), ("ji", [(2, 3)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("i,i,i->", [(3,), (3,), (3,)]), ("ab,bc,ca->", [(2, 3), (3, 4), (4, 2)]),
    ("ij,jk->ik", [(0, 3), (3, 4)]), ("i j , j k -> i k", [(2, 3), (3, 4)]), ("ab,cb->ac", [(2, 1), (3, 5)]),
]


@pytest.mark.parametrize("equation, shapes", EINSUMS, ids=[e for e, _ in EINSUMS])
def test_einsum_matches_pytorch(equation: str, shapes: list[tuple[int, ...]]) -> None:
    arrays = [RNG.standard_normal(s) for s in shapes]
    same(tp.einsum(equation, *[tp.tensor(a) for a in arrays]), torch.einsum(equation, *[torch.tensor(a) for a in arrays]),
         rtol=1e-10)
    same(tp.einsum(equation, [tp.tensor(a) for a in arrays]), torch.einsum(equation, [torch.tensor(a) for a in arrays]),
         rtol=1e-10)


def test_einsum_contracts_through_matmul_without_a_broadcast_product() -> None:
    a, b, c = tp.randn(20, 30), tp.randn(30, 40), tp.randn(40, 10)
    gm = tp.graph.trace(lambda x, y, z: tp.einsum("ij,jk,kl->il", x, y, z), a, b, c)
    targets = [n.target for n in gm.graph.nodes]
    assert targets.count("matmul") == 2 and "mul" not in targets
    largest = max(int(np.prod(n.outputs[0].shape)) for n in gm.graph.nodes)
    assert largest <= 30 * 40  # never the 20*30*40 broadcast product
    batched = tp.graph.trace(lambda q, k: tp.einsum("bhqd,bhkd->bhqk", q, k), tp.randn(2, 3, 4, 5), tp.randn(2, 3, 6, 5))
    assert [n.target for n in batched.graph.nodes].count("matmul") == 1


def test_einsum_errors_name_the_problem() -> None:
    x = tp.ones(2, 3)
    for equation, operands, message in [
        ("ij,jk->ik", [x], "2 operand term"), ("ijk->i", [x], "operand 0 has 2 dimension"),
        ("ij->ii", [x], "output subscript i appears more than once"), ("ij->k", [x], "output subscript k does not"),
        ("i1->i", [x], "invalid subscript '1'"), ("ii->i", [x], "subscript i has size 2 in operand 0 and 3 in operand 0"),
        ("......->", [x], "more than one ellipsis"), ("ij,jk->ik", [x, tp.ones(4, 2)], "subscript j has size 3 in operand 0 and 4 in operand 1"),
    ]:
        with pytest.raises(tp.ShapeError, match=message):
            tp.einsum(equation, *operands)


# ---- every interpreter and transform -------------------------------------------------------------------

def _reductions(x: AnyTensor) -> dict[str, Any]:
    return {"max": x.max(), "max1": x.max(1), "min0": tp.min(x, 0, keepdim=True), "amax": x.amax(-1),
            "std": x.std(0), "norm2": x.norm(dim=1), "norm1": tp.norm(x, 1), "norminf": x.norm(float("inf"), 0),
            "norm3": x.norm(3, -1), "all": (x > -5).all(), "any": tp.any(x > 1, 1), "cumsum": tp.cumsum(x, 1)}


def _orderings(x: AnyTensor) -> dict[str, Any]:
    return {"sort": tp.sort(x, 1), "desc": x.sort(0, descending=True), "topk": tp.topk(x, 2),
            "smallest": x.topk(1, dim=0, largest=False), "argsort": x.argsort(-1)}


def _elementwise(x: AnyTensor, m: AnyTensor) -> dict[str, Any]:
    return {"masked": x.masked_fill(m, 0.5), "nan": (x / (x - x)).nan_to_num(1.0, 2.0, -2.0), "round": x.round(1),
            "finite": tp.isfinite(x / 0.0), "close": tp.isclose(x, x + 1e-9), "clamp": tp.clamp(x, -0.5, x[0]),
            "int": x.int(), "tril": tp.tril(x, 1), "triu": x.triu(-1), "outer": tp.outer(x[0], x[1])}


def _structure(x: AnyTensor, a: AnyTensor, b: AnyTensor) -> dict[str, Any]:
    return {"split": tp.split(x, [1, 3], 1), "chunk": x.chunk(2, 1), "einsum": tp.einsum("ij,jk->ik", x, b),
            "ellipsis": tp.einsum("...j,...j->...", x, a), "diag": tp.einsum("ii->i", x[:, :3]),
            "matmul": tp.matmul(x, b), "flat": tp.flatten(x), "t": tp.transpose(x, 0, 1)}


def test_every_interpreter_runs_the_new_forms() -> None:
    x = tp.tensor(X64)
    ways = check_interpreters(_reductions, x)
    assert "vmap" in ways
    check_interpreters(_orderings, tp.tensor(TIES[1:]))
    check_interpreters(_elementwise, x, x > 0)
    check_interpreters(_structure, x, tp.tensor(RNG.standard_normal(4)), tp.tensor(RNG.standard_normal((4, 2))))


def _smooth(x: AnyTensor, b: AnyTensor) -> AnyTensor:
    """The differentiable forms, away from ties and kinks, for finite differences."""
    values = x.sort(1).values.sum(0) + x.topk(2, dim=0).values.sum(0) + x.max(1).values.sum()
    norms = x.norm() + x.norm(3, 1).sum() + x.std(0).sum() + x.norm(1.5)
    shaped = tp.cumsum(x, 1) * tp.tril(x) + x.masked_fill(x > 0.3, 0.25) + tp.split(x, [3, 1], 1)[1]
    return (values.sum() + norms + shaped.sum()) * 0.1 + (tp.einsum("ij,jk->ik", x, b) ** 2).sum()


def test_gradients_jvp_and_their_compositions_against_finite_differences() -> None:
    x = X64 + np.arange(12).reshape(3, 4) * 0.37  # no ties
    check_grads(_smooth, (tp.tensor(x), tp.tensor(RNG.standard_normal((4, 2)))), order=2)


def test_nested_transforms_agree_with_a_loop() -> None:
    xs = tp.tensor(RNG.standard_normal((3, 2, 4)) + np.arange(8).reshape(2, 4) * 0.41)

    def f(x: AnyTensor) -> AnyTensor:
        return x.norm(dim=1).sum() + x.sort(1, descending=True).values[:, 0].sum() + x.cumsum(0).std()

    batched = F.vmap(F.grad(f))(xs)
    for i in range(3):
        assert_close(batched[i], F.grad(f)(xs[i]))
    jac = F.jacrev(lambda x: x.topk(2).values)(xs[0])
    for i in range(2):
        for j in range(2):
            row = np.zeros((2, 4))
            row[i, int(xs[0].topk(2).indices[i, j].item())] = 1.0
            assert_close(jac[i, j], tp.tensor(row))
    _, tangent = F.jvp(lambda x: tp.einsum("ij,ij->i", x, x), (xs[0],), (tp.ones(2, 4, dtype=tp.float64),))
    assert_close(tangent, 2 * xs[0].sum(1))
    hess = F.hessian(lambda v: v.norm() ** 2)(tp.tensor([1.0, -2.0, 0.5]))
    assert_close(hess, 2 * tp.eye(3))


def test_symbolic_dims_under_trace() -> None:
    """Batch sizes stay symbolic through the new forms (a graph traced once runs on another size)."""
    def f(x: AnyTensor) -> AnyTensor:
        return (tp.cumsum(x, 0) + x.sort(0).values).norm(dim=1) + tp.einsum("bi,bi->b", x, x) + x.amax(1)

    gm = tp.graph.trace(f, tp.randn(3, 4, dtype=tp.float64), dynamic={0: {0: "B"}})
    other = tp.tensor(RNG.standard_normal((5, 4)))
    assert_close(gm(other), f(other))


def test_masked_fill_in_place_matches_pytorch_with_gradients_and_runs_under_every_way() -> None:
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    m = rng.random((3, 4)) > 0.5
    x = tp.tensor(a, requires_grad=True)
    y = x * 2
    assert y.masked_fill_(tp.tensor(m), 5.0) is y
    (y * y).sum().backward()
    tx = torch.tensor(a, requires_grad=True)
    ty = tx * 2
    ty.masked_fill_(torch.tensor(m), 5.0)
    (ty * ty).sum().backward()
    np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)

    def fill(t: Any) -> Any:
        u = t * 1.0
        u.masked_fill_(t > 0, 0.0)
        return u

    assert "compiled" in check_interpreters(fill, tp.tensor(a))
    with pytest.raises(OverflowError, match="does not fit int32"):
        tp.zeros(2, dtype=tp.int32).masked_fill_(tp.tensor([True, False]), 2**40)
