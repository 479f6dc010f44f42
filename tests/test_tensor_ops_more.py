"""PyTorch's flip, roll, tile/repeat, repeat_interleave, movedim/swapaxes, unflatten, diagonal, diag, trace,
reciprocal, log2, log10, sinh, cosh, atan2, logical_*, index_select, gather, bmm and dot
(:mod:`tensorplay.shape_ops`, :mod:`tensorplay.math_ops`): each case runs the same code with ``tp`` and with
``torch`` (float32/float64 and int64 where torch takes it, contiguous and transposed-view inputs, negative
dims, zero-size axes), then gradients against torch autograd, ``tp.compile`` (static and dynamic sizes),
``vmap`` against a loop, ``jvp`` against ``torch.func.jvp``, the errors, and one ONNX export."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as TF
from tests.torch_cases import Case, assert_case_matches_torch, case_params, param_ids
from tests.torch_cases import as_tensor as _as, assert_same as _same, case_arrays as _arrays
from tests.torch_cases import i as _i, tolerance as _tolerance, x as _x

Fn = Callable[..., Any]
RNG = np.random.default_rng(0)


CASES = [
    Case("flip", lambda m, x: m.flip(x, (0, -1)), (_x(3, 4, 2),)),
    Case("flip_method", lambda m, x: x.flip(1), (_x(3, 4),)),
    Case("flip_empty", lambda m, x: m.flip(x, (0,)), (_x(0, 3),)),
    Case("roll", lambda m, x: m.roll(x, (1, -5), (0, -1)), (_x(3, 4),)),
    Case("roll_flat", lambda m, x: m.roll(x, 7), (_x(3, 4),)),
    Case("roll_same_axis", lambda m, x: x.roll((2, 3), (1, 1)), (_x(2, 4),)),
    Case("roll_empty", lambda m, x: m.roll(x, 2, 0), (_x(0, 3),)),
    Case("tile", lambda m, x: m.tile(x, (2,)), (_x(3, 2),)),
    Case("tile_longer", lambda m, x: x.tile(2, 1, 3), (_x(3, 2),)),
    Case("repeat", lambda m, x: x.repeat(2, 3, 1), (_x(2, 3),)),
    Case("repeat_zero", lambda m, x: x.repeat(0, 2), (_x(2, 3),)),
    Case("repeat_interleave", lambda m, x: m.repeat_interleave(x, 3, -1), (_x(2, 3),)),
    Case("repeat_interleave_flat", lambda m, x: x.repeat_interleave(2), (_x(2, 3),)),
    Case("movedim", lambda m, x: m.movedim(x, (0, -1), (2, 0)), (_x(2, 3, 4, 5),)),
    Case("moveaxis", lambda m, x: x.moveaxis(-1, 0), (_x(2, 3, 4),)),
    Case("swapaxes", lambda m, x: m.swapaxes(x, 0, -1), (_x(2, 3, 4),)),
    Case("swapdims", lambda m, x: x.swapdims(1, 2), (_x(2, 3, 4),)),
    Case("unflatten", lambda m, x: m.unflatten(x, -1, (2, -1)), (_x(3, 6),)),
    Case("unflatten_zero", lambda m, x: x.unflatten(0, (0, 4)), (_x(0, 2),)),
    Case("diagonal", lambda m, x: m.diagonal(x), (_x(3, 4),)),
    Case("diagonal_offset", lambda m, x: m.diagonal(x, 1, -1, 0), (_x(2, 3, 4),)),
    Case("diagonal_below", lambda m, x: x.diagonal(-2, 0, 2), (_x(4, 2, 3),)),
    Case("diagonal_empty", lambda m, x: x.diagonal(5), (_x(3, 4),)),
    Case("diag_vector", lambda m, x: m.diag(x), (_x(3),)),
    Case("diag_vector_offset", lambda m, x: m.diag(x, -2), (_x(3),)),
    Case("diag_vector_above", lambda m, x: x.diag(1), (_x(4),)),
    Case("diag_matrix", lambda m, x: m.diag(x, 1), (_x(3, 4),)),
    Case("trace", lambda m, x: m.trace(x), (_x(3, 4),)),
    Case("reciprocal", lambda m, x: m.reciprocal(x * x + 0.5), (_x(3, 4),), ints=False),
    Case("reciprocal_int", lambda m, x: x.reciprocal(), (_x(5,),), ints=True, grad=False),
    Case("log2", lambda m, x: m.log2(x.abs() + 0.25), (_x(3, 4),), ints=False),
    Case("log10", lambda m, x: x.abs().add(0.25).log10() if m is torch else (x.abs() + 0.25).log10(), (_x(3, 4),),
         ints=False),
    Case("log2_int", lambda m, x: m.log2(x.abs()), (_x(6),), grad=False),
    Case("sinh", lambda m, x: m.sinh(x), (_x(3, 4),), ints=False),
    Case("cosh", lambda m, x: x.cosh(), (_x(3, 4),), ints=False),
    Case("sinh_small", lambda m, x: m.sinh(x * 1e-9), (_x(5),), ints=False),
    Case("atan2", lambda m, y, x: m.atan2(y, x), (_x(3, 4), _x(4)), ints=False),
    Case("arctan2", lambda m, y, x: y.arctan2(x), (_x(3, 4), _x(3, 4)), ints=False),
    Case("logical", lambda m, a, b: m.stack([m.logical_and(a, b), m.logical_or(a, b), m.logical_xor(a, b),
                                           m.logical_not(a), a.logical_xor(b)]), (_x(3, 4), _x(4)), grad=False),
    Case("index_select", lambda m, x, i: m.index_select(x, -1, i), (_x(3, 5), _i(5, 7))),
    Case("index_select_dim0", lambda m, x, i: x.index_select(0, i), (_x(3, 5), _i(3, 4))),
    Case("index_select_empty", lambda m, x, i: x.index_select(1, i), (_x(3, 5), _i(5, 0))),
    Case("gather", lambda m, x, i: m.gather(x, 1, i), (_x(3, 5), _i(5, 3, 7))),
    Case("gather_smaller", lambda m, x, i: x.gather(-3, i), (_x(4, 3, 5), _i(4, 2, 2, 3))),
    Case("gather_empty", lambda m, x, i: x.gather(0, i), (_x(3, 5), _i(3, 0, 5))),
    Case("bmm", lambda m, a, b: m.bmm(a, b), (_x(2, 3, 4), _x(2, 4, 5))),
    Case("dot", lambda m, a, b: m.dot(a, b), (_x(5), _x(5))),
    Case("dot_method", lambda m, a, b: a.dot(b), (_x(0), _x(0))),
]

PARAMS = case_params(CASES)


@pytest.mark.parametrize("case,dtype,transposed", PARAMS, ids=param_ids(PARAMS))
def test_matches_torch(case: Case, dtype: str, transposed: bool) -> None:
    assert_case_matches_torch(tp, torch, case, dtype, transposed)


GRAD_CASES = [c for c in CASES if c.grad]


@pytest.mark.parametrize("case", GRAD_CASES, ids=[c.name for c in GRAD_CASES])
def test_gradients_match_torch_autograd(case: Case) -> None:
    arrays = _arrays(case, "float64", seed=1)
    float_slots = [k for k, spec in enumerate(case.inputs) if spec[0] == "x"]
    ours = [_as(tp, a, True, k in float_slots) for k, a in enumerate(arrays)]
    theirs = [_as(torch, a, True, k in float_slots) for k, a in enumerate(arrays)]
    out_t = case.fn(torch, *theirs)
    cot = np.random.default_rng(2).standard_normal(tuple(out_t.shape))
    (out_t * torch.tensor(cot)).sum().backward()
    (case.fn(tp, *ours) * tp.tensor(cot)).sum().backward()
    for k in float_slots:
        np.testing.assert_allclose(ours[k].grad.numpy(), theirs[k].grad.numpy(), rtol=1e-10, atol=1e-12)


COMPILED = [c for c in CASES if c.name in ("flip", "roll", "roll_flat", "tile_longer", "repeat_interleave",
                                          "movedim", "diagonal_offset", "diag_vector_offset", "trace", "gather_smaller",
                                          "index_select", "bmm", "sinh", "logical")]


@pytest.mark.parametrize("case", COMPILED, ids=[c.name for c in COMPILED])
def test_compiled_matches_torch(case: Case) -> None:
    compiled: Any = tp.compile(lambda *ts: case.fn(tp, *ts))
    for seed in (0, 3):
        arrays = _arrays(case, "float32", seed)
        _same(compiled(*(tp.tensor(a) for a in arrays)), case.fn(torch, *(torch.tensor(a) for a in arrays)),
              "float32")


DYNAMIC: list[tuple[str, Fn]] = [
    ("flip", lambda m, x: m.flip(x, (0, 1))),
    ("roll", lambda m, x: m.roll(x, (2, -1), (0, 1))),
    ("roll_flat", lambda m, x: m.roll(x, 3)),
    ("tile", lambda m, x: m.tile(x, (2, 1, 3))),
    ("repeat_interleave", lambda m, x: m.repeat_interleave(x, 2, 0)),
    ("gather", lambda m, x: m.gather(x, 1, m.zeros(x.shape[0], 2, dtype=m.int64) + 1)),
]


@pytest.mark.parametrize("fn", [f for _, f in DYNAMIC], ids=[n for n, _ in DYNAMIC])
def test_dynamic_compile_matches_torch(fn: Fn) -> None:
    """Under ``dynamic=True`` the leading size becomes symbolic: sizes 3, 5, 8, 2, 1 and 0 match torch (a
    roll by more than the size still wraps; a flip of an empty axis is empty)."""
    compiled: Any = tp.compile(lambda x: fn(tp, x), dynamic=True)
    for rows in (3, 5, 8, 2, 1, 0):
        a = RNG.standard_normal((rows, 4)).astype(np.float32)
        _same(compiled(tp.tensor(a)), fn(torch, torch.tensor(a)), "float32")


VMAPPED = [c for c in CASES if c.name in ("flip", "roll", "tile", "repeat", "repeat_interleave", "movedim",
                                         "unflatten", "diagonal_offset", "diag_vector", "diag_matrix", "trace",
                                         "index_select", "gather", "bmm", "dot", "atan2", "log10", "logical")]


@pytest.mark.parametrize("case", VMAPPED, ids=[c.name for c in VMAPPED])
def test_vmap_matches_a_loop(case: Case) -> None:
    batch = 3
    per_sample = [_arrays(case, "float64", seed) for seed in range(batch)]
    stacked = [np.stack([s[k] for s in per_sample]) for k in range(len(case.inputs))]
    got = TF.vmap(lambda *ts: case.fn(tp, *ts))(*(tp.tensor(a) for a in stacked))
    want = torch.stack([case.fn(torch, *(torch.tensor(a) for a in sample)) for sample in per_sample])
    _same(got, want, "float64")


@pytest.mark.parametrize("name", ["roll", "gather", "diag_vector_offset", "sinh", "repeat_interleave"])
def test_jvp_matches_torch_func(name: str) -> None:
    case = next(c for c in CASES if c.name == name)
    arrays = _arrays(case, "float64", seed=4)
    tangent = RNG.standard_normal(arrays[0].shape)
    rest = arrays[1:]
    out, dout = TF.jvp(lambda x: case.fn(tp, x, *(tp.tensor(a) for a in rest)), (tp.tensor(arrays[0]),),
                       (tp.tensor(tangent),))
    theirs = torch.func.jvp(lambda x: case.fn(torch, x, *(torch.tensor(a) for a in rest)),
                            (torch.tensor(arrays[0]),), (torch.tensor(tangent),))
    w_out, w_dout = theirs[0], theirs[1]
    _same(out, w_out, "float64")
    _same(dout, w_dout, "float64")


def test_grad_transform_matches_torch_func() -> None:
    def f(m: Any, x: Any) -> Any:
        return (m.diag(m.flip(x, (0,)), 1) * m.tile(x, (7,))[:25].unflatten(0, (5, 5))).sum() + m.trace(x.repeat(4, 1)[:4])

    a = RNG.standard_normal(4)
    got = TF.grad(lambda x: f(tp, x))(tp.tensor(a))
    want = torch.func.grad(lambda x: f(torch, x))(torch.tensor(a))
    _same(got, want, "float64")


ERRORS: list[tuple[str, Fn, type[Exception], tuple[str, ...]]] = [
    ("flip_dim", lambda x: x.flip(2), tp.AxisError, ("flip", "2")),
    ("flip_twice", lambda x: x.flip(0, -2), tp.AxisError, ("flip", "twice")),
    ("roll_lengths", lambda x: x.roll((1, 2), 0), tp.ShapeError, ("roll", "shifts", "dims")),
    ("roll_dim", lambda x: x.roll(1, 3), tp.AxisError, ("roll", "3")),
    ("repeat_short", lambda x: x.repeat(2), tp.ShapeError, ("repeat", "2")),
    ("repeat_negative", lambda x: x.repeat(2, -1), tp.ShapeError, ("repeat", "-1")),
    ("repeat_interleave_tensor", lambda x: x.repeat_interleave(tp.tensor([1, 2])), tp.ArgumentTypeError,
     ("repeat_interleave", "repeats")),
    ("movedim_lengths", lambda x: x.movedim((0, 1), 0), tp.ShapeError, ("movedim", "source", "destination")),
    ("movedim_twice", lambda x: x.movedim((0, 0), (0, 1)), tp.AxisError, ("movedim",)),
    ("unflatten", lambda x: x.unflatten(1, (2, 3)), tp.ShapeError, ("unflatten", "[2, 3]", "4")),
    ("diagonal_same", lambda x: x.diagonal(0, 1, -1), tp.AxisError, ("diagonal",)),
    ("diag_rank", lambda x: x[None].diag(), tp.ShapeError, ("diag", "[1, 3, 4]")),
    ("trace_rank", lambda x: x[0].trace(), tp.ShapeError, ("trace", "[4]")),
    ("index_select_dtype", lambda x: x.index_select(0, tp.tensor([0.0])), tp.DTypeError,
     ("index_select", "index", "float32")),
    ("index_select_rank", lambda x: x.index_select(0, tp.tensor([[0]])), tp.ShapeError, ("index_select", "1-d")),
    ("index_select_range", lambda x: x.index_select(1, tp.tensor([0, 4])), IndexError, ("index_select", "4")),
    ("index_select_negative", lambda x: x.index_select(1, tp.tensor([-1])), IndexError, ("index_select", "-1")),
    ("index_select_dim", lambda x: x.index_select(2, tp.tensor([0])), tp.AxisError, ("index_select", "2")),
    ("gather_rank", lambda x: x.gather(0, tp.tensor([0])), tp.ShapeError, ("gather", "rank", "[1]")),
    ("gather_dtype", lambda x: x.gather(0, tp.tensor([[True]])), tp.DTypeError, ("gather", "bool")),
    ("gather_size", lambda x: x.gather(0, tp.zeros(1, 5, dtype=tp.int64)), tp.ShapeError, ("gather", "5", "4")),
    ("gather_range", lambda x: x.gather(0, tp.tensor([[3]])), IndexError, ("gather", "3")),
    ("bmm_rank", lambda x: x.bmm(x), tp.ShapeError, ("bmm", "3-d")),
    ("bmm_inner", lambda x: x[None].bmm(x[None]), tp.ShapeError, ("bmm", "4", "3")),
    ("dot_dtype", lambda x: x[0].dot(x[0].double()), tp.DTypeError, ("dot", "float32", "float64")),
    ("dot_length", lambda x: x[0].dot(x[:, 0]), tp.ShapeError, ("dot", "[4]", "[3]")),
]


@pytest.mark.parametrize("fn,error,words", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_function_and_values(fn: Fn, error: type[Exception], words: tuple[str, ...]) -> None:
    x = tp.tensor(RNG.standard_normal((3, 4)).astype(np.float32))
    with pytest.raises(error) as info:
        fn(x)
    assert isinstance(info.value, tp.TensorplayError), type(info.value)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_index_range_is_checked_when_a_compiled_graph_runs() -> None:
    compiled: Any = tp.compile(lambda x, i: x.index_select(0, i) + x.gather(1, i[:, None].expand(-1, 2)).sum())
    x = tp.tensor(RNG.standard_normal((3, 3)).astype(np.float32))
    compiled(x, tp.tensor([0, 2, 1]))
    with pytest.raises(tp.IndexRangeError, match="index_select"):
        compiled(x, tp.tensor([0, 3, 1]))


def test_onnx_export_runs_in_onnxruntime() -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from tensorplay.export import Dim, export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_ort

    def f(m: Any, x: Any, i: Any) -> Any:
        picked = m.index_select(x, 1, i) + m.gather(x, 1, i[None].expand(x.shape[0], -1))
        return m.repeat_interleave(m.roll(m.flip(picked, (0,)), 1, 1), 2, 0)

    x = RNG.standard_normal((4, 5)).astype(np.float32)
    i = np.array([4, 0, 2], np.int64)
    model = to_onnx(export(lambda a, b: f(tp, a, b), (tp.tensor(x), tp.tensor(i)), dynamic_shapes=[{0: Dim("rows")},
                                                                                                   None]))
    check_written(model)
    for rows in (4, 6, 1, 0):
        xs = RNG.standard_normal((rows, 5)).astype(np.float32)
        want = f(torch, torch.tensor(xs), torch.tensor(i)).numpy()
        got = run_ort(model, {model.graph.input[0].name: xs, model.graph.input[1].name: i})
        assert_matches(got[0], want, "ONNX Runtime")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_log2_log10_within_one_ulp_of_torch(dtype: str) -> None:
    """At powers of two and ten, and over a wide range, ``log2``/``log10`` are at most 1 ulp from torch's."""
    values = np.concatenate([2.0 ** np.arange(-60, 60), 10.0 ** np.arange(-30, 30),
                             RNG.uniform(1e-3, 1e6, 2000)]).astype(dtype)
    for name in ("log2", "log10"):
        got = getattr(tp, name)(tp.tensor(values)).numpy()
        want = getattr(torch, name)(torch.tensor(values)).numpy()
        np.testing.assert_array_max_ulp(got, want, maxulp=1)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sinh_cosh_stay_finite_up_to_their_own_overflow(dtype: str) -> None:
    """``sinh``/``cosh`` are finite wherever the true value is: built from ``exp(x)``, they overflowed in the
    band where ``exp(x)`` does but ``exp(x) / 2`` does not (float32 ``sinh(89)`` gave inf, torch 2.2448e38).
    Against numpy's (finite there, within 2 ulp elsewhere), eager and compiled, with infinities, NaN and
    signs; the gradients (``cosh``, ``sinh``) stay finite in that band and match numpy's to float rounding."""
    edge = 88.9 if dtype == "float32" else 709.9
    values = np.concatenate([[0.0, -0.0, 1e-9, -0.5, 0.9999, 1.0, -1.0, 1.0001, 3.0, -30.0, np.inf, -np.inf, np.nan],
                             np.linspace(edge - 0.5, edge + 0.4, 9), -np.linspace(edge - 0.5, edge + 0.4, 9)]).astype(dtype)
    for name in ("sinh", "cosh"):
        want = getattr(np, name)(values)
        for got in (getattr(tp, name)(tp.tensor(values)).numpy(), tp.compile(getattr(tp, name))(tp.tensor(values)).numpy()):
            assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want)), name
            finite = np.isfinite(want)
            assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]), name
            np.testing.assert_array_max_ulp(got[finite], want[finite], maxulp=2)
    inside = np.linspace(edge - 0.5, edge, 5).astype(dtype)
    for name, derivative in (("sinh", np.cosh), ("cosh", np.sinh)):
        x = tp.tensor(inside, requires_grad=True)
        getattr(tp, name)(x).sum().backward()
        assert x.grad is not None
        np.testing.assert_allclose(x.grad.numpy(), derivative(inside), rtol=1e-5 if dtype == "float32" else 1e-12)
