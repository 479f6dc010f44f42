"""Small places where tensorplay followed its own rule instead of PyTorch's, each checked against torch:
eagerly and, where the operation is traceable, recorded by the graph recorder, under ``tp.compile`` and
under ``vmap`` (over a batch of the same input, against torch's per-example results stacked). Where torch
refuses, tensorplay raises its own error class naming the operation.

- ``flatten(start_dim, end_dim)`` of a 0-d tensor takes only the dims ``0`` and ``-1`` (``AxisError``).
- ``squeeze`` takes a tuple of dims, and of a 0-d tensor ``0``/``-1`` alone or in a tuple.
- ``argmax``, ``argmin`` and ``topk`` of a bool tensor are refused (``DTypeError``); ``max``/``min`` (with
  and without ``dim``), ``amax``/``amin``, ``sort`` and ``argsort`` of one are not.
- ``F.mse_loss`` of two integer tensors is refused whatever the reduction, ``F.l1_loss`` with
  ``reduction="mean"`` (``DTypeError``); ``l1_loss`` sums integers to an integer.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.errors import AxisError, DTypeError, TensorplayError

Array = np.ndarray[Any, Any]


def _torch(g: Callable[..., Any], args: tuple[Array, ...]) -> Any:
    """torch's result for the arrays ``args``, or the exception it raises."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return g(*(torch.tensor(a) for a in args))
    except (RuntimeError, NotImplementedError, TypeError, IndexError, ValueError) as e:
        return e


def _parts(r: Any) -> list[Any]:
    return list(r) if isinstance(r, tuple) else [r]


def _same(got: Any, want: Any, what: str) -> None:
    """Same dtype, shape and values (``(values, indices)`` pairs part by part)."""
    got_parts, want_parts = _parts(got), _parts(want)
    assert len(got_parts) == len(want_parts), what
    for g, w in zip(got_parts, want_parts):
        assert g.dtype.name == str(w.dtype).removeprefix("torch."), f"{what}: {g.dtype} vs torch {w.dtype}"
        assert tuple(g.shape) == tuple(w.shape), f"{what}: shape {tuple(g.shape)} vs torch {tuple(w.shape)}"
        np.testing.assert_allclose(g.numpy().astype(np.float64), w.numpy().astype(np.float64), rtol=1e-6,
                                   err_msg=what)


def _stack(results: list[Any]) -> Any:
    """torch's per-example results stacked on a new leading axis (part by part for pairs)."""
    if isinstance(results[0], tuple):
        return tuple(torch.stack([r[i] for r in results]) for i in range(len(results[0])))
    return torch.stack(results)


def check(f: Callable[..., Any], g: Callable[..., Any], a: Array | tuple[Array, ...],
          error: type[TensorplayError], what: str, *, transforms: bool = True) -> None:
    """``f`` (tensorplay) against ``g`` (torch) on ``a`` (one array, or a tuple of the arguments): eagerly
    and, with ``transforms``, traced, compiled and mapped over a batch of two copies of ``a``. Where torch
    raises, tensorplay must raise ``error``."""
    args = a if isinstance(a, tuple) else (a,)
    want = _torch(g, args)

    def ts(batched: bool = False) -> list[Any]:
        return [tp.tensor(np.stack([x, x]) if batched else x) for x in args]

    runs: dict[str, Callable[[], Any]] = {"eager": lambda: f(*ts())}
    if transforms:
        runs["trace"] = lambda: tp.graph.trace(f, *ts())(*ts())
        runs["compile"] = lambda: tp.compile(f)(*ts())
        runs["vmap"] = lambda: tp.func.vmap(f)(*ts(batched=True))
    for how, run in runs.items():
        if isinstance(want, Exception):
            with pytest.raises(error) as info:
                run()
            assert isinstance(info.value, TensorplayError)
            check_message(str(info.value), what, how)
        elif how == "vmap":
            _same(run(), _stack([want, want]), f"{what} ({how})")
        else:
            _same(run(), want, f"{what} ({how})")


def check_message(message: str, what: str, how: str) -> None:
    """The error names the operation (the part of ``what`` before the first ``(`` or space)."""
    name = what.split("(")[0].split(" ")[0].removeprefix("x.").removeprefix("tp.")
    assert name in message, f"{what} ({how}): {message}"


# ---- flatten of a 0-d tensor -------------------------------------------------------------------

FLATTEN_DIMS = [(), (0,), (-1,), (1,), (-2,), (0, -1), (0, 0), (-1, -1), (1, 1), (0, 1), (-2, -1), (2, 0)]


@pytest.mark.parametrize("dims", FLATTEN_DIMS, ids=str)
@pytest.mark.parametrize("spelling", ["method", "function"])
def test_flatten_of_a_0d_tensor(dims: tuple[int, ...], spelling: str) -> None:
    a = np.array(2.5, dtype=np.float32)
    f = (lambda x: x.flatten(*dims)) if spelling == "method" else (lambda x: tp.flatten(x, *dims))
    check(f, lambda x: x.flatten(*dims), a, AxisError, f"flatten{dims}")


def test_flatten_of_a_0d_tensor_names_the_dim_and_rank() -> None:
    with pytest.raises(AxisError) as info:
        tp.tensor(np.float32(1.0)).flatten(1)
    message = str(info.value)
    assert "flatten" in message and "1" in message and "0-d" in message, message
    with pytest.raises(AxisError, match="end_dim"):
        tp.tensor(np.float32(1.0)).flatten(0, 2)


# ---- squeeze with a tuple of dims, and of a 0-d tensor ----------------------------------------

SQUEEZE_CASES: list[tuple[tuple[int, ...], Any]] = [
    ((), 0), ((), -1), ((), (0,)), ((), (-1,)), ((), ()), ((), [0]), ((), 1), ((), (1,)), ((), (0, -1)),
    ((1, 3, 1), (0, 2)), ((1, 3, 1), (2, 0)), ((1, 3, 1), (0, 1)), ((1, 3, 1), (1,)), ((1, 3, 1), (-1, 0)),
    ((1, 3, 1), ()), ((1, 3, 1), [0, 2]), ((1, 3, 1), (0, -3)), ((1, 3, 1), (3,)), ((1, 3, 1), (0, 0)),
    ((2, 1, 1, 4), (1, 2)), ((2, 1, 1, 4), (-2, -3, 0)), ((2, 1, 1, 4), None), ((2, 1, 1, 4), 2),
]


@pytest.mark.parametrize("shape,dim", SQUEEZE_CASES, ids=str)
@pytest.mark.parametrize("spelling", ["method", "function"])
def test_squeeze_matches_torch(shape: tuple[int, ...], dim: Any, spelling: str) -> None:
    a = np.arange(1.0, 1.0 + int(np.prod(shape)), dtype=np.float32).reshape(shape)
    if dim is None:
        f = (lambda x: x.squeeze()) if spelling == "method" else (lambda x: tp.squeeze(x))
        g: Callable[[Any], Any] = lambda x: x.squeeze()
    else:
        f = (lambda x: x.squeeze(dim)) if spelling == "method" else (lambda x: tp.squeeze(x, dim))
        g = lambda x: x.squeeze(dim)
    check(f, g, a, AxisError, f"squeeze({dim})")


def test_squeeze_with_a_tuple_is_differentiable() -> None:
    a = np.arange(3.0, dtype=np.float32).reshape(1, 3, 1)
    t = torch.tensor(a, requires_grad=True)
    (want,) = torch.autograd.grad((t.squeeze((0, 2)) * torch.arange(3.0)).sum(), t)
    got = tp.func.grad(lambda x: (x.squeeze((0, 2)) * tp.arange(3.0)).sum())(tp.tensor(a))
    _same(got, want, "grad of squeeze((0, 2))")


# ---- orderings of bool tensors -----------------------------------------------------------------

ORDERINGS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "argmax()": (lambda x: x.argmax(), lambda x: x.argmax()),
    "argmax(1)": (lambda x: x.argmax(1), lambda x: x.argmax(1)),
    "tp.argmax(x, 0, keepdim)": (lambda x: tp.argmax(x, 0, keepdim=True), lambda x: torch.argmax(x, 0, keepdim=True)),
    "argmin()": (lambda x: x.argmin(), lambda x: x.argmin()),
    "argmin(-1)": (lambda x: x.argmin(-1), lambda x: x.argmin(-1)),
    "tp.argmin(x, 1)": (lambda x: tp.argmin(x, 1), lambda x: torch.argmin(x, 1)),
    "topk(2)": (lambda x: tuple(x.topk(2)), lambda x: tuple(x.topk(2))),
    "tp.topk(x, 1, 0, largest=False)": (lambda x: tuple(tp.topk(x, 1, 0, largest=False)),
                                        lambda x: tuple(torch.topk(x, 1, 0, largest=False))),
    "max()": (lambda x: x.max(), lambda x: x.max()),
    "min()": (lambda x: x.min(), lambda x: x.min()),
    "max(1)": (lambda x: tuple(x.max(1)), lambda x: tuple(x.max(1))),
    "min(0)": (lambda x: tuple(x.min(0)), lambda x: tuple(x.min(0))),
    "tp.max(x, 1, keepdim)": (lambda x: tuple(tp.max(x, 1, keepdim=True)),
                              lambda x: tuple(torch.max(x, 1, keepdim=True))),
    "amax(1)": (lambda x: x.amax(1), lambda x: x.amax(1)),
    "amin(0)": (lambda x: x.amin(0), lambda x: x.amin(0)),
    "sort(1)": (lambda x: tuple(x.sort(1)), lambda x: tuple(x.sort(dim=1, stable=True))),
    "sort(0, descending)": (lambda x: tuple(x.sort(0, descending=True)),
                            lambda x: tuple(x.sort(dim=0, descending=True, stable=True))),
    "argsort(1)": (lambda x: x.argsort(1), lambda x: x.argsort(dim=1, stable=True)),
}


@pytest.mark.parametrize("dtype", ["bool", "int32", "float32"])
@pytest.mark.parametrize("name", ORDERINGS)
def test_orderings_of_bool_match_torch(name: str, dtype: str) -> None:
    f, g = ORDERINGS[name]
    a = np.array([[True, False, True, False], [False, False, True, True], [True, True, True, True]]).astype(dtype)
    if "topk" in name and dtype != "bool":  # torch leaves the order of tied values unspecified
        a = np.array([[3, 0, 7, 1], [5, 2, 9, 4], [8, 6, 10, 11]]).astype(dtype)
    check(f, g, a, DTypeError, f"{name} of {dtype}")


@pytest.mark.parametrize("name", ["argmax", "argmin", "topk"])
def test_refused_bool_ordering_names_the_dtype(name: str) -> None:
    x = tp.tensor(np.array([True, False]))
    with pytest.raises(DTypeError, match=rf"{name}: .*got bool \(input: bool\[2\]\)"):
        x.topk(1) if name == "topk" else getattr(x, name)()


# ---- regression losses of integer tensors ------------------------------------------------------

LOSS_DTYPES = [("int64", "int64"), ("int32", "int32"), ("int32", "int64"), ("int64", "float32"),
               ("float32", "int32"), ("float32", "float32"), ("float32", "float64")]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtypes", LOSS_DTYPES, ids=str)
@pytest.mark.parametrize("loss", ["mse_loss", "l1_loss"])
def test_regression_loss_of_integers_matches_torch(loss: str, dtypes: tuple[str, str], reduction: str) -> None:
    a = np.array([[1, -2, 4], [0, 3, 5]]).astype(dtypes[0])
    b = np.array([[2, 2, -1], [0, 1, 7]]).astype(dtypes[1])
    mine, theirs = getattr(F, loss), getattr(TF, loss)
    check(lambda x, y: mine(x, y, reduction=reduction), lambda x, y: theirs(x, y, reduction=reduction),
          (a, b), DTypeError, f"{loss} of {dtypes[0]} and {dtypes[1]}")


@pytest.mark.parametrize("module,loss", [(tp.nn.MSELoss, "mse_loss"), (tp.nn.L1Loss, "l1_loss")])
def test_regression_loss_refusal_names_the_loss_and_arguments(module: Any, loss: str) -> None:
    x, y = tp.tensor(np.array([1, 2])), tp.tensor(np.array([3, 4], dtype=np.int32))
    calls: list[Callable[[], Any]] = [lambda: getattr(F, loss)(x, y), lambda: module()(x, y)]
    for call in calls:
        with pytest.raises(DTypeError, match=rf"{loss}: input or target must be a float tensor .*"
                                             r"got input int64\[2\] and target int32\[2\]"):
            call()


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("dtype", ["int32", "int64", "bool"])
def test_var_and_std_of_non_floats_are_refused_under_their_own_name(name: str, dtype: str) -> None:
    """torch refuses var/std of integer and bool tensors; tensorplay's DTypeError names the operation itself
    (it named ``mean``, which var and std are built on), the dtype and the shape; floats still match torch."""
    values = np.array([1, 0, 3, 2]).astype(dtype)
    assert isinstance(_torch(getattr(torch, name), (values,)), RuntimeError)
    for call in (lambda t: getattr(t, name)(), lambda t: getattr(tp, name)(t), lambda t: getattr(t, name)(0)):
        with pytest.raises(DTypeError, match=rf"^{name}: expected a float tensor, got tensorplay\.{dtype} of shape \(4,\)"):
            call(tp.tensor(values))
    floats = values.astype(np.float64)
    np.testing.assert_allclose(getattr(tp.tensor(floats), name)().numpy(), getattr(torch.tensor(floats), name)().numpy())


_NAN_BOUNDS = [("tensor min", {"min": np.array([np.nan, .5, 0, 0], np.float32)}),
               ("tensor max", {"max": np.array([5, np.nan, 1, 1], np.float32)}),
               ("scalar min", {"min": float("nan")}), ("scalar max", {"max": float("nan")}),
               ("both", {"min": float("nan"), "max": 1.0}), ("finite", {"min": 0.0, "max": 1.5})]


@pytest.mark.parametrize("case", _NAN_BOUNDS, ids=[c[0] for c in _NAN_BOUNDS])
def test_clamp_with_a_nan_bound_gives_nan_as_torch(case: tuple[str, dict[str, Any]]) -> None:
    """``tp.clamp`` ignored a NaN bound (a comparison with NaN is false): ``clamp(x, min=nan)`` returned ``x``,
    torch NaN everywhere; a tensor bound holding NaN gives NaN at that element. Eagerly, compiled and under
    vmap, values and gradients against torch."""
    _, bounds = case
    x = np.array([1., 2., np.nan, -3.], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want_t = torch.tensor(x, requires_grad=True)
        torch.clamp(want_t, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in bounds.items()}).sum().backward()
    ours = {k: tp.tensor(v) if isinstance(v, np.ndarray) else v for k, v in bounds.items()}
    want = torch.clamp(torch.tensor(x), **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                            for k, v in bounds.items()}).numpy()
    xt = tp.tensor(x, requires_grad=True)
    got = tp.clamp(xt, **ours)
    got.sum().backward()
    assert xt.grad is not None
    np.testing.assert_array_equal(got.detach().numpy(), want)
    assert want_t.grad is not None
    own = ~np.isnan(x)  # at a NaN input tensorplay passes the gradient through (documented); torch gives 0
    np.testing.assert_array_equal(xt.grad.numpy()[own], want_t.grad.numpy()[own])
    np.testing.assert_array_equal(tp.compile(lambda t: tp.clamp(t, **ours))(tp.tensor(x)).numpy(), want)
    rows = tp.func.vmap(lambda t: tp.clamp(t, **ours))(tp.tensor(np.stack([x, x])))
    np.testing.assert_array_equal(rows.numpy(), np.stack([want, want]))
