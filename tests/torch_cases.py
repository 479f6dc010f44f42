"""Table-driven comparisons with PyTorch, shared by the operation test files: a :class:`Case` runs the same
code with ``tp`` and with ``torch`` on inputs drawn from its input specs, as contiguous tensors or as
transposed (non-contiguous) views, and the results are compared at a tolerance set by the dtype."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Fn = Callable[..., Any]
Array = np.ndarray[Any, Any]

DTYPES = ["float32", "float64", "int64"]
"""The dtypes a case runs in (int64 only for cases with ``ints``)."""


@dataclass(frozen=True)
class Case:
    """``fn(m, *inputs)`` runs with ``m`` = ``tp`` or ``torch``; ``inputs`` are specs: ``("x", shape)``
    values of the tested dtype, ``("i", shape, high)`` int64 indices in ``[0, high)``, ``("p", n, k)``
    ``k`` distinct int64 values of ``[0, n)``; ``ints``: int64 values are valid; ``grad``: differentiable.
    The result may be a tensor or a tuple of tensors."""

    name: str
    fn: Fn
    inputs: tuple[tuple[Any, ...], ...]
    ints: bool = True
    grad: bool = True


def x(*shape: int) -> tuple[Any, ...]:
    """A value input of the tested dtype."""
    return ("x", shape)


def i(high: int, *shape: int) -> tuple[Any, ...]:
    """An int64 index input in ``[0, high)``."""
    return ("i", shape, high)


def p(n: int, k: int) -> tuple[Any, ...]:
    """``k`` distinct int64 indices of ``[0, n)`` (a permutation's prefix)."""
    return ("p", n, k)


def case_arrays(case: Case, dtype: str, seed: int = 0) -> list[Array]:
    """The numpy inputs of ``case`` in ``dtype`` (values in ``[-3, 4)`` for int64), drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    for spec in case.inputs:
        if spec[0] == "i":
            out.append(rng.integers(0, spec[2], spec[1]).astype(np.int64))
        elif spec[0] == "p":
            out.append(rng.permutation(spec[1])[:spec[2]].astype(np.int64))
        elif dtype == "int64":
            out.append(rng.integers(-3, 4, spec[1]).astype(np.int64))
        else:
            out.append(rng.standard_normal(spec[1]).astype(dtype))
    return out


def value_slots(case: Case) -> list[int]:
    """The positions of ``case``'s value (``"x"``) inputs: the differentiable ones."""
    return [k for k, spec in enumerate(case.inputs) if spec[0] == "x"]


def as_tensor(module: Any, a: Array, transposed: bool, requires_grad: bool = False) -> Any:
    """``a`` as a tensor of ``module`` (``tp`` or ``torch``); ``transposed``: a non-contiguous view (the last two
    axes swapped back); ``requires_grad``: a leaf that records its gradient."""
    if transposed and a.ndim >= 2:
        t = module.tensor(np.ascontiguousarray(a.swapaxes(-1, -2))).transpose(-1, -2)
    else:
        t = module.tensor(a)
    if requires_grad:
        t = t.detach().requires_grad_(True) if module.__name__ == "torch" else t.requires_grad_(True)
    return t


def tolerance(dtype: str) -> tuple[float, float]:
    """``(rtol, atol)`` for float results of ``dtype``."""
    return (1e-5, 1e-6) if dtype == "float32" else (1e-12, 1e-12)


def assert_same(got: Any, want: Any, dtype: str) -> None:
    """``got`` (a tensorplay tensor) equals ``want`` (torch's) in shape and dtype, and in value: exactly for
    integer and bool results, at :func:`tolerance` of the result's dtype for floats (``dtype`` is the inputs')."""
    g, w = np.asarray(got.numpy()), want.detach().numpy()
    assert g.shape == w.shape, (g.shape, w.shape)
    assert g.dtype == w.dtype, (g.dtype, w.dtype)
    if w.dtype.kind == "f":
        rtol, atol = tolerance(str(w.dtype) if dtype == "int64" else dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(g, w)


def as_numpy(t: Any) -> Any:
    """A tensor of either library (detached) or an array-like, as numpy."""
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def assert_close(got: Any, want: Any, tol: dict[str, float], what: str) -> None:
    """``got`` and ``want`` (tensors of either library) agree in dtype, shape and values at ``tol``
    (``{"rtol": .., "atol": ..}``; NaN matches NaN); ``what`` names the comparison in a failure."""
    g, w = as_numpy(got), as_numpy(want)
    assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype, g.shape, w.shape)
    np.testing.assert_allclose(g, w, rtol=tol["rtol"], atol=tol["atol"], equal_nan=True, err_msg=what)


def assert_values_and_grads_match(tp: Any, torch: Any, f_tp: Fn, f_torch: Fn, arrays: list[Array], dtype: str,
                                  close: Callable[[Any, Any, str], None],
                                  rng: np.random.Generator) -> tuple[list[Any], list[Any]]:
    """``f_tp(*xs)`` against ``f_torch(*ts)`` on ``arrays`` in ``dtype``, then the gradients of ``sum(f(*xs) * w)``
    (``w`` drawn from ``rng``) in every input, each pair compared with ``close(ours, theirs, dtype)``; returns
    the inputs ``(xs, ts)`` (their functions' parameters hold gradients too)."""
    xs = [tp.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    ts = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    y, ty = f_tp(*xs), f_torch(*ts)
    close(y, ty, dtype)
    w = rng.standard_normal(tuple(ty.shape)).astype(dtype)
    (y * tp.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    for x, t in zip(xs, ts):
        close(x.grad, t.grad, dtype)
    return xs, ts


def case_params(cases: list[Case]) -> list[tuple[Case, str, bool]]:
    """``(case, dtype, transposed)`` for every case, dtype it takes (:data:`DTYPES`) and layout."""
    return [(c, d, t) for c in cases for d in DTYPES if d != "int64" or c.ints for t in (False, True)]


def param_ids(params: list[tuple[Case, str, bool]]) -> list[str]:
    """Test ids of :func:`case_params`: ``name-dtype-view`` or ``name-dtype-contig``."""
    return [f"{c.name}-{d}-{'view' if t else 'contig'}" for c, d, t in params]


def assert_case_matches_torch(tp: Any, torch: Any, case: Case, dtype: str, transposed: bool) -> None:
    """``case`` run with ``tp`` and with ``torch`` on the same inputs gives the same result (:func:`assert_same`)."""
    arrays = case_arrays(case, dtype)
    got = case.fn(tp, *(as_tensor(tp, a, transposed) for a in arrays))
    want = case.fn(torch, *(as_tensor(torch, a, transposed) for a in arrays))
    assert_same(got, want, dtype)
