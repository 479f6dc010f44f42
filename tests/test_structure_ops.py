"""PyTorch's shape and index-structure functions (:mod:`tensorplay.structure_ops`): select, unbind, t, ravel,
view_as/reshape_as/type_as, the stacks, atleast_*d, the splits, rot90, fliplr/flipud, take,
broadcast_tensors/broadcast_shapes, index_add/index_copy/index_fill, scatter_reduce, select/slice/diagonal
scatters, diag_embed, diagflat, Tensor.unfold and sum_to_size. Each case runs the same code with ``tp`` and
with ``torch`` (float32/float64/int64, contiguous and transposed-view inputs, negative dims, zero-size axes),
then gradients against torch autograd, ``tp.compile`` (called twice), ``tp.func.grad`` and ``tp.func.vmap``
against torch, and the errors."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as TF
from tensorplay.errors import ArgumentError, AxisError, DTypeError, IndexRangeError, ShapeError
from tests.torch_cases import Case, assert_case_matches_torch, case_params, param_ids
from tests.torch_cases import as_tensor as _as, assert_same as _same, case_arrays as _arrays
from tests.torch_cases import i as _i, p as _p, value_slots as _slots, x as _x

Fn = Callable[..., Any]
RNG = np.random.default_rng(0)


def _tuple(m: Any, xs: Any) -> Any:
    return m.cat([x.reshape(-1) for x in xs]) if len(xs) else m.zeros(0)


CASES = [
    Case("select", lambda m, x: m.select(x, -1, -2), (_x(3, 4),)),
    Case("select_method", lambda m, x: x.select(0, 2), (_x(3, 4, 2),)),
    Case("unbind", lambda m, x: m.stack(m.unbind(x, -1)) * 1, (_x(3, 4),)),
    Case("unbind_empty", lambda m, x: m.stack(x.unbind(1)) * 1, (_x(0, 2),)),
    Case("t", lambda m, x: m.t(x), (_x(3, 4),)),
    Case("t_1d", lambda m, x: x.t() * 1, (_x(4),)),
    Case("ravel", lambda m, x: m.ravel(x), (_x(3, 4),)),
    Case("view_as", lambda m, x, y: x.reshape_as(y) + x.contiguous().view_as(y), (_x(3, 4), _x(2, 6))),
    Case("type_as", lambda m, x: x.type_as(m.zeros(1, dtype=m.float64)) * 1, (_x(3, 2),)),
    Case("hstack", lambda m, a, b: m.hstack([a, b]), (_x(3, 2), _x(3, 4))),
    Case("hstack_1d", lambda m, a, b: m.hstack((a, b)), (_x(2), _x(0))),
    Case("vstack", lambda m, a, b: m.vstack([a, b]), (_x(4), _x(2, 4))),
    Case("row_stack", lambda m, a, b: m.row_stack([a, b]), (_x(3, 4), _x(1, 4))),
    Case("dstack", lambda m, a, b, c: m.dstack([a, b, c]), (_x(3), _x(1, 3), _x(1, 3, 2))),
    Case("column_stack", lambda m, a, b: m.column_stack([a, b]), (_x(3), _x(3, 2))),
    Case("atleast", lambda m, a, b: _tuple(m, [m.atleast_1d(a), *m.atleast_2d(a, b), *m.atleast_3d([a, b]),
                                               m.atleast_3d(b), m.atleast_2d(b.reshape(2, 3))]), (_x(), _x(6))),
    Case("tensor_split_int", lambda m, x: _tuple(m, m.tensor_split(x, 3, -1)), (_x(2, 7),)),
    Case("tensor_split_list", lambda m, x: _tuple(m, x.tensor_split([-3, 7, 2, 20], 0)), (_x(10, 2),)),
    Case("tensor_split_empty", lambda m, x: _tuple(m, m.tensor_split(x, 4, 0)), (_x(0, 3),)),
    Case("hsplit", lambda m, x: _tuple(m, m.hsplit(x, 2)), (_x(3, 4),)),
    Case("hsplit_1d", lambda m, x: _tuple(m, x.hsplit([1, 3])), (_x(5),)),
    Case("vsplit", lambda m, x: _tuple(m, m.vsplit(x, [1])), (_x(3, 4),)),
    Case("dsplit", lambda m, x: _tuple(m, x.dsplit(2)), (_x(2, 3, 4),)),
    Case("split_with_sizes", lambda m, x: _tuple(m, m.split_with_sizes(x, [1, 0, 3], -1)), (_x(2, 4),)),
    Case("rot90", lambda m, x: m.rot90(x), (_x(3, 4),)),
    Case("rot90_k", lambda m, x: m.stack([m.rot90(x, k, (-1, 0)) for k in (2, 3, -1, 4, 5)]), (_x(3, 2, 3),)),
    Case("fliplr", lambda m, x: m.fliplr(x), (_x(3, 4, 2),)),
    Case("flipud", lambda m, x: x.flipud(), (_x(3, 4),)),
    Case("take", lambda m, x, i: m.take(x, i - 6), (_x(3, 4), _i(18, 2, 5))),
    Case("broadcast_tensors", lambda m, a, b, c: m.stack(m.broadcast_tensors(a, b, c)), (_x(3, 1), _x(4), _x(1, 1))),
    Case("index_add", lambda m, x, s, i: m.index_add(x, -1, i, s, alpha=2), (_x(3, 4), _x(3, 6), _i(4, 6))),
    Case("index_add_method", lambda m, x, s, i: x.index_add(0, i, s), (_x(4, 2), _x(3, 2), _i(4, 3))),
    Case("index_copy", lambda m, x, s, i: m.index_copy(x, 1, i, s), (_x(3, 5), _x(3, 3), _p(5, 3))),
    Case("index_copy_dim0", lambda m, x, s, i: x.index_copy(0, i, s), (_x(4, 2), _x(4, 2), _p(4, 4))),
    Case("index_fill", lambda m, x, i: m.index_fill(x, -1, i, -1.5 if x.dtype.is_floating_point else 7),
         (_x(3, 5), _i(5, 3))),
    Case("index_fill_tensor", lambda m, x, v, i: x.index_fill(0, i, v.sum()), (_x(4, 2), _x(3), _i(4, 5))),
    Case("select_scatter", lambda m, x, s: m.select_scatter(x, s, -1, -2), (_x(3, 4), _x(3))),
    Case("slice_scatter", lambda m, x, s: m.slice_scatter(x, s, 1, 1, None, 2), (_x(3, 6), _x(3, 3))),
    Case("slice_scatter_default", lambda m, x, s: x.slice_scatter(s, 0, -2), (_x(4, 2), _x(2, 2))),
    Case("diagonal_scatter", lambda m, x, s: m.diagonal_scatter(x, s), (_x(3, 4), _x(3))),
    Case("diagonal_scatter_offset", lambda m, x, s: x.diagonal_scatter(s, -1, 2, 0), (_x(4, 2, 3), _x(2, 2))),
    Case("diag_embed", lambda m, x: m.diag_embed(x), (_x(2, 3),)),
    Case("diag_embed_offset", lambda m, x: x.diag_embed(1, 0, 2), (_x(2, 3),)),
    Case("diagflat", lambda m, x: m.diagflat(x, -1), (_x(2, 2),)),
    Case("unfold", lambda m, x: x.unfold(-1, 3, 2), (_x(2, 8),)),
    Case("unfold_dim0", lambda m, x: x.unfold(0, 2, 1), (_x(4, 3),)),
    Case("sum_to_size", lambda m, x: x.sum_to_size(3, 1), (_x(2, 3, 4),)),
    Case("sum_to_size_tuple", lambda m, x: x.sum_to_size((1, 4)), (_x(3, 4),)),
]
for _reduce in ("sum", "prod", "mean", "amax", "amin"):
    for _self in (True, False):
        CASES.append(Case(f"scatter_reduce_{_reduce}_{_self}",
                          (lambda r, s: lambda m, x, src, i: m.scatter_reduce(x, 0, i, src, r, include_self=s))(
                              _reduce, _self), (_x(4, 3), _x(5, 2), _i(4, 5, 2))))

PARAMS = case_params(CASES)


@pytest.mark.parametrize("case,dtype,transposed", PARAMS, ids=param_ids(PARAMS))
def test_matches_torch(case: Case, dtype: str, transposed: bool) -> None:
    assert_case_matches_torch(tp, torch, case, dtype, transposed)


GRAD_CASES = [c for c in CASES if c.grad]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_gradients_match_torch_autograd(case: Case) -> None:
    arrays = _arrays(case, "float64", seed=1)
    if case.name.startswith("scatter_reduce_am"):  # ties: the gradient is split between equal entries
        arrays[1][::2] = np.round(arrays[1][::2])
        if case.name.endswith("True"):
            arrays[0][1, :2] = arrays[1][0]
    floats = _slots(case)
    ours = [_as(tp, a, True, k in floats) for k, a in enumerate(arrays)]
    theirs = [_as(torch, a, True, k in floats) for k, a in enumerate(arrays)]
    out_t = case.fn(torch, *theirs)
    cot = np.random.default_rng(2).standard_normal(tuple(out_t.shape))
    (out_t * torch.tensor(cot)).sum().backward()
    (case.fn(tp, *ours) * tp.tensor(cot)).sum().backward()
    for k in floats:
        want = theirs[k].grad
        got = ours[k].grad
        if want is None:
            assert got is None or not np.any(got.numpy()), case.name
            continue
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10, atol=1e-12)


def test_scatter_reduce_max_ties_split_the_gradient_as_torch() -> None:
    """Ties, among them ``x``'s own entry when included. (Without ``include_self``, torch still counts an
    equal ``x`` entry when sharing the gradient out, so the shares do not add up to 1; ours do, and
    the case is left out here.)"""
    src = np.array([1.0, 2.0, 2.0, 3.0, 3.0])
    idx = np.array([0, 0, 0, 1, 1])
    for reduce in ("amax", "amin"):
        for include_self in (True, False):
            x = np.array([2.0, 0.0, 5.0]) if include_self else np.array([7.0, 0.0, 5.0])
            a: Any = tp.tensor(x, requires_grad=True)
            s: Any = tp.tensor(src, requires_grad=True)
            a.scatter_reduce(0, tp.tensor(idx), s, reduce, include_self=include_self).sum().backward()
            b: Any = torch.tensor(x, requires_grad=True)
            u: Any = torch.tensor(src, requires_grad=True)
            b.scatter_reduce(0, torch.tensor(idx), u, reduce, include_self=include_self).sum().backward()
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12)
            np.testing.assert_allclose(s.grad.numpy(), u.grad.numpy(), rtol=1e-12)


def test_scatter_reduce_prod_gradient_at_zeros_and_int_mean() -> None:
    x, src = np.array([2.0, 3.0, 0.5]), np.array([0.0, 4.0, 0.0, -2.0, 0.0])
    idx = np.array([0, 0, 1, 1, 2])
    a: Any = tp.tensor(x, requires_grad=True)
    s: Any = tp.tensor(src, requires_grad=True)
    a.scatter_reduce(0, tp.tensor(idx), s, "prod").sum().backward()
    b: Any = torch.tensor(x, requires_grad=True)
    u: Any = torch.tensor(src, requires_grad=True)
    b.scatter_reduce(0, torch.tensor(idx), u, "prod").sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
    np.testing.assert_allclose(s.grad.numpy(), u.grad.numpy())
    xi, si = np.full(3, -7), np.array([1, 2, 3, 4, 5])
    for include_self in (True, False):
        got = tp.scatter_reduce(tp.tensor(xi), 0, tp.tensor(np.array([0, 0, 1, 1, 1])), tp.tensor(-si), "mean",
                                include_self=include_self)
        want = torch.tensor(xi).scatter_reduce(0, torch.tensor([0, 0, 1, 1, 1]), torch.tensor(-si), "mean",
                                               include_self=include_self)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_take_negative_indices_and_zero_size() -> None:
    x = RNG.standard_normal((2, 3))
    idx = np.array([[-1, -6], [5, 0]])
    _same(tp.take(tp.tensor(x), tp.tensor(idx)), torch.take(torch.tensor(x), torch.tensor(idx)), "float64")
    _same(tp.take(tp.tensor(x), tp.tensor(np.zeros((0, 2), np.int64))),
          torch.take(torch.tensor(x), torch.zeros((0, 2), dtype=torch.long)), "float64")


def test_broadcast_shapes_matches_torch() -> None:
    for shapes in (((2, 1), (3,)), ((1,), 4), ((0, 1), (1, 5)), ((),), ((5, 1, 3), (4, 1), ())):
        bs: Any = tp.broadcast_shapes
        tbs: Any = torch.broadcast_shapes
        assert bs(*shapes) == tuple(tbs(*shapes))


def test_numel_clone_narrow_top_level() -> None:
    x = RNG.standard_normal((3, 4))
    assert tp.numel(tp.tensor(x)) == torch.numel(torch.tensor(x)) == 12
    c = tp.clone(tp.tensor(x))
    np.testing.assert_array_equal(c.numpy(), x)
    _same(tp.narrow(tp.tensor(x), -1, 1, 2), torch.narrow(torch.tensor(x), -1, 1, 2), "float64")


COMPILED = ["select", "unbind", "hstack", "dstack", "tensor_split_list", "rot90_k", "take", "index_add",
            "index_copy", "index_fill", "slice_scatter", "diagonal_scatter_offset", "diag_embed_offset", "unfold",
            "sum_to_size", "scatter_reduce_amax_True", "scatter_reduce_prod_False", "scatter_reduce_mean_True",
            "broadcast_tensors", "atleast"]


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_matches_torch(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    compiled: Any = tp.compile(lambda *ts: case.fn(tp, *ts))
    for seed in (0, 3):
        arrays = _arrays(case, "float32", seed)
        _same(compiled(*(tp.tensor(a) for a in arrays)), case.fn(torch, *(torch.tensor(a) for a in arrays)),
              "float32")


VMAPPED = ["select", "t", "hstack", "vstack", "tensor_split_int", "rot90", "take", "index_add", "index_copy",
           "index_fill", "select_scatter", "slice_scatter", "diagonal_scatter", "diag_embed", "diagflat", "unfold",
           "sum_to_size", "scatter_reduce_sum_False", "scatter_reduce_amin_True", "scatter_reduce_prod_True"]


@pytest.mark.parametrize("name", VMAPPED)
def test_vmap_matches_torch(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    per_sample = [_arrays(case, "float64", seed) for seed in range(3)]
    stacked = [np.stack([s[k] for s in per_sample]) for k in range(len(case.inputs))]
    got = TF.vmap(lambda *ts: case.fn(tp, *ts))(*(tp.tensor(a) for a in stacked))
    want = torch.stack([case.fn(torch, *(torch.tensor(a) for a in sample)) for sample in per_sample])
    _same(got, want, "float64")


GRADDED = ["rot90_k", "index_copy", "index_fill_tensor", "diagonal_scatter", "unfold", "scatter_reduce_amax_True",
           "scatter_reduce_prod_True", "take", "tensor_split_int"]


@pytest.mark.parametrize("name", GRADDED)
def test_func_grad_matches_torch_func(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    arrays = _arrays(case, "float64", seed=5)
    rest = arrays[1:]

    def f(m: Any, x: Any) -> Any:
        out = case.fn(m, x, *(m.tensor(a) for a in rest))
        return (out * out).sum()

    got = TF.grad(lambda x: f(tp, x))(tp.tensor(arrays[0]))
    want = torch.func.grad(lambda x: f(torch, x))(torch.tensor(arrays[0]))
    _same(got, want, "float64")


def test_dynamic_compile_matches_torch() -> None:
    def fn(m: Any, x: Any) -> Any:
        return m.hstack([m.rot90(x, 2), x.unfold(1, 2, 2).sum(-1)]) + m.select(x, 1, -1).unsqueeze(1)

    compiled: Any = tp.compile(lambda x: fn(tp, x), dynamic=True)
    for rows in (3, 5, 1):
        a = RNG.standard_normal((rows, 4)).astype(np.float32)
        _same(compiled(tp.tensor(a)), fn(torch, torch.tensor(a)), "float32")


X = tp.zeros(3, 4)
I1 = tp.tensor(np.array([0, 2]))

ERRORS: list[tuple[Fn, type[Exception], str]] = [
    (lambda: X.select(2, 0), AxisError, "select: axis 2 is out of range"),
    (lambda: X.select(1, 4), IndexRangeError, "select: index 4 is out of range for dim 1 of size 4"),
    (lambda: tp.zeros(()).select(0, 0), ShapeError, "select: cannot be applied to a 0-d tensor"),
    (lambda: tp.zeros(2, 3, 4).t(), ShapeError, "t: expects a tensor with at most 2 dims, got shape [2, 3, 4]"),
    (lambda: X.view_as(tp.zeros(5)), ShapeError, "view_as: shape [5] (of other) is invalid for input of shape"),
    (lambda: X.type_as(3),  # type: ignore[arg-type]
     TypeError, "type_as: other must be a tensor, got int"),
    (lambda: tp.hstack([X, tp.zeros(2, 4)]), ShapeError, "hstack: sizes must match except along dim 1"),
    (lambda: tp.vstack([]), TypeError, "vstack: expects at least one tensor"),
    (lambda: X.tensor_split(0), ArgumentError, "tensor_split: number of sections must be larger than 0, got 0"),
    (lambda: X.tensor_split(1.5), TypeError, "tensor_split: indices_or_sections must be an int"),
    (lambda: X.hsplit(3), ShapeError, "hsplit: attempted to split along dimension 1, but the size of the dimension 4 "
                                      "is not divisible by the split_size 3"),
    (lambda: tp.zeros(3).vsplit(1), ShapeError, "vsplit: requires a tensor with at least 2 dimension"),
    (lambda: X.dsplit(1), ShapeError, "dsplit: requires a tensor with at least 3 dimension"),
    (lambda: X.split_with_sizes([1, 2], -1), ShapeError, "split: the section sizes [1, 2] add up to 3, but axis 1 has size 4"),
    (lambda: X.rot90(1, (0, 0)), AxisError, "rot90: dims must name two different axes"),
    (lambda: tp.zeros(3).rot90(), ShapeError, "rot90: expected a tensor of at least 2 dims"),
    (lambda: tp.zeros(3).fliplr(), ShapeError, "fliplr: input must be at least 2-d"),
    (lambda: X.take(tp.tensor(np.array([12]))), IndexRangeError, "out of range for a tensor of 12 elements"),
    (lambda: X.take(tp.tensor(np.array([-13]))), IndexRangeError, "expected -12 <= index < 12"),
    (lambda: X.take(tp.tensor(np.array([1], np.int32))), DTypeError, "take: index must be an int64 tensor"),
    (lambda: tp.broadcast_tensors(X, tp.zeros(3)), ShapeError, "broadcast_tensors: shapes [[3, 4], [3]] do not broadcast"),
    (lambda: tp.broadcast_shapes((2,), (3,)), ShapeError, "broadcast_shapes: shapes [[2], [3]]"),
    (lambda: X.index_add(1, I1, tp.zeros(3, 3)), ShapeError, "index_add: source must have shape [3, 2]"),
    (lambda: X.index_add(1, tp.tensor(np.array([4, 0])), tp.zeros(3, 2)), IndexRangeError, "index_add: index"),
    (lambda: X.index_copy(0, tp.tensor(np.zeros((1, 1), np.int64)), X), ShapeError,
     "index_copy: index must be a 0-d or 1-d tensor"),
    (lambda: X.index_copy(0, tp.tensor([0.0]), X), DTypeError, "index_copy: index must be an int64"),
    (lambda: X.index_fill(5, I1, 1.0), AxisError, "index_fill: axis 5 is out of range"),
    (lambda: X.index_fill(0, I1, tp.zeros(2)),  # type: ignore[call-arg]
     ShapeError, "index_fill: value must be a number or a 0-d tensor"),
    (lambda: X.scatter_reduce(0, tp.zeros(1, 4, dtype=tp.int64), X, "max"), ArgumentError,
     "scatter_reduce: reduce must be one of"),
    (lambda: X.scatter_reduce(0, tp.zeros(4, dtype=tp.int64), X, "sum"), ShapeError,
     "scatter_reduce: index must have the rank of the input"),
    (lambda: X.select_scatter(tp.zeros(3), 0, 1), ShapeError, "select_scatter: src must have shape [4]"),
    (lambda: X.slice_scatter(tp.zeros(3, 2), 1, 0, 4, 0), ArgumentError, "slice_scatter: step must be positive"),
    (lambda: X.diagonal_scatter(tp.zeros((3,), dtype=tp.float64)), DTypeError, "diagonal_scatter: src must have the "
                                                                           "input's dtype float32"),
    (lambda: tp.zeros((3,)).diag_embed(0, 0, -2), AxisError, "diag_embed: diagonal dimensions cannot be identical"),
    (lambda: X.unfold(1, 5, 1), ShapeError, "unfold: maximum size for tensor at dimension 1 is 4 but size is 5"),
    (lambda: X.unfold(1, 2, 0), ArgumentError, "unfold: step must be positive"),
    (lambda: X.sum_to_size(2, 4), ShapeError, "sum_to_size: size [2, 4] is not expandable to the tensor's size"),
]


@pytest.mark.parametrize("fn,error,words", ERRORS, ids=[w[:40] for _, _, w in ERRORS])
def test_errors_name_function_and_values(fn: Fn, error: type[Exception], words: str) -> None:
    with pytest.raises(error, match=re.escape(words)):
        fn()


def test_imports_and_methods_exist_where_torch_has_them() -> None:
    names = ["select", "unbind", "t", "ravel", "tensor_split", "hsplit", "vsplit", "dsplit", "split_with_sizes",
             "rot90", "fliplr", "flipud", "take", "index_add", "index_copy", "index_fill", "scatter_reduce",
             "select_scatter", "slice_scatter", "diagonal_scatter", "diag_embed", "diagflat", "clone", "numel",
             "narrow"]
    for n in names:
        assert hasattr(tp, n) and n in tp.__all__, n
        assert hasattr(tp.Tensor, n), n
    for n in ["hstack", "vstack", "row_stack", "dstack", "column_stack", "atleast_1d", "atleast_2d", "atleast_3d",
              "broadcast_tensors", "broadcast_shapes"]:
        assert hasattr(tp, n) and n in tp.__all__, n
    for n in ["view_as", "reshape_as", "type_as", "unfold", "sum_to_size"]:
        assert hasattr(tp.Tensor, n), n


JVP_FNS: list[tuple[str, Fn]] = [
    ("amax", lambda m, a: a.scatter_reduce(0, m.tensor(np.array([[0, 1, 2], [3, 0, 0], [0, 2, 1]])), a[:3] * 2, "amax")),
    ("unfold", lambda m, a: a.unfold(0, 2, 1)),
    ("index_copy", lambda m, a: a.index_copy(1, m.tensor(np.array([2, 0])), a[:, :2] * 3)),
    ("rot90", lambda m, a: m.rot90(a, 3)),
    ("diag_embed", lambda m, a: m.diag_embed(a, -1)),
]


@pytest.mark.parametrize("fn", [f for _, f in JVP_FNS], ids=[n for n, _ in JVP_FNS])
def test_jvp_matches_torch_func(fn: Fn) -> None:
    x, t = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    out, dout = TF.jvp(lambda a: fn(tp, a), (tp.tensor(x),), (tp.tensor(t),))
    theirs: Any = torch.func.jvp(lambda a: fn(torch, a), (torch.tensor(x),), (torch.tensor(t),))
    w_out, w_dout = theirs[0], theirs[1]
    _same(out, w_out, "float64")
    _same(dout, w_dout, "float64")


def test_scatter_reduce_prod_jvp_matches_finite_differences() -> None:
    """``torch.func.jvp`` gives a zero tangent for ``scatter_reduce(..., "prod")``; the central difference is
    the reference here."""
    idx = np.array([[0, 1, 2], [3, 0, 0], [0, 2, 1]])

    def f(m: Any, a: Any) -> Any:
        return a.scatter_reduce(0, m.tensor(idx), a[:3], "prod", include_self=False)

    x, t = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    _, dout = TF.jvp(lambda a: f(tp, a), (tp.tensor(x),), (tp.tensor(t),))
    eps = 1e-6
    central = (f(torch, torch.tensor(x + eps * t)) - f(torch, torch.tensor(x - eps * t))) / (2 * eps)
    np.testing.assert_allclose(dout.numpy(), central.numpy(), rtol=1e-6, atol=1e-8)
