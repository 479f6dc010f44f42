"""``//`` and ``%`` (``tp.floor_divide``, ``tp.remainder``) against PyTorch: int and float dtypes, negative
operands, numbers on either side, zero divisors, large int64, gradients, compile, export and vmap."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay.errors import DTypeError, IndexRangeError
from tensorplay.export import Dim

RNG = np.random.default_rng(0)
OPS: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "floordiv": (lambda a, b: a // b, lambda a, b: a // b),
    "mod": (lambda a, b: a % b, lambda a, b: a % b),
    "floor_divide": (tp.floor_divide, torch.floor_divide),
    "remainder": (tp.remainder, torch.remainder),
    "method": (lambda a, b: a.remainder(b) if isinstance(a, tp.Tensor) else tp.remainder(a, b),
               lambda a, b: a.remainder(b) if isinstance(a, torch.Tensor) else torch.remainder(a, b)),
}


def _both(value: Any) -> tuple[Any, Any]:
    if isinstance(value, np.ndarray):
        return tp.tensor(value), torch.from_numpy(value.copy())
    return value, value


def _check(op: str, a: Any, b: Any) -> None:
    ours, theirs = OPS[op]
    (ta, qa), (tb, qb) = _both(a), _both(b)
    got, want = ours(ta, tb), theirs(qa, qb)
    want_np = want.numpy()
    assert got.dtype.name == str(want_np.dtype), (got.dtype, want_np.dtype)
    np.testing.assert_array_equal(got.numpy(), want_np)


INT_A = np.array([7, -7, 7, -7, 0, -9, 9, 1, -1, 13], dtype=np.int64)
INT_B = np.array([2, 2, -2, -2, 3, 4, -4, 5, 5, -13], dtype=np.int64)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integers_match_torch(op: str, dtype: Any) -> None:
    a, b = INT_A.astype(dtype), INT_B.astype(dtype)
    _check(op, a, b)
    _check(op, a, 3)
    _check(op, a, -3)
    _check(op, 17, b)
    _check(op, -17, b)
    _check(op, a, 2.5)  # an int tensor and a float number: float32
    _check(op, a.reshape(2, 5), b[:5])  # broadcasting
    _check(op, a[::2], b[1::2])  # non-contiguous
    _check(op, a[:0], b[:0])  # empty
    _check(op, a.astype(np.int32), b.astype(np.int64))  # int32 with int64 promotes


@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_large_int64_is_exact(op: str) -> None:
    a = np.array([2**62 + 12345, -(2**62) - 7, 2**63 - 1, -(2**63), 2**53 + 1, -(2**53) - 3, 10**18],
                 dtype=np.int64)
    b = np.array([3, 7, 1000003, 3, 2, -5, -(10**9) - 7], dtype=np.int64)
    _check(op, a, b)
    _check(op, np.concatenate([a, -a[:2]]), np.int64(97).item())
    big = RNG.integers(-(2**62), 2**62, size=2000, dtype=np.int64)
    div = RNG.integers(1, 2**31, size=2000, dtype=np.int64) * RNG.choice([-1, 1], size=2000)
    _check(op, big, div)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floats_match_torch(op: str, dtype: Any) -> None:
    a = np.array([1.0, -1.0, 5.5, -5.5, 0.0, -0.0, 7.25, -7.25, 3.0], dtype=dtype)
    b = np.array([0.1, 0.1, 2.0, 2.0, -3.0, 3.0, -0.5, 0.5, 1.5], dtype=dtype)
    _check(op, a, b)
    _check(op, a, 2.0)
    _check(op, a, -0.75)
    _check(op, 4.5, b)  # 4.5 // 0.1 is 44 (floor(4.5 / 0.1) rounds onto 45)
    _check(op, np.array([4.5, -4.5, 0.3, -0.7], dtype=dtype), np.array([0.1, 0.1, -0.1, 0.1], dtype=dtype))


@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_random_float64_matches_torch_exactly(op: str) -> None:
    _check(op, RNG.standard_normal(20000) * 100, RNG.standard_normal(20000))
    _check(op, np.round(RNG.standard_normal(20000) * 100, 1), np.round(RNG.standard_normal(20000), 1) + 0.05)


@pytest.mark.parametrize("op", ["floordiv", "mod"])
def test_random_float32_matches_torch_exactly(op: str) -> None:
    a = (RNG.standard_normal(20000) * 100).astype(np.float32)
    b = RNG.standard_normal(20000).astype(np.float32)
    _check(op, a, b)


@pytest.mark.parametrize("op", ["floordiv", "mod"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_zero_float_divisor_is_inf_or_nan_as_torch(op: str, dtype: Any) -> None:
    a = np.array([1.0, -1.0, 0.0, np.inf, np.nan], dtype=dtype)
    _check(op, a, np.zeros(5, dtype=dtype))
    _check(op, a, 0.0)
    _check(op, a, np.array([2.0, -2.0, 3.0, 2.0, 1.0], dtype=dtype))  # inf or nan dividends give nan


@pytest.mark.parametrize("op", ["floordiv", "mod"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_infinite_float_divisor_gives_pythons_quotient_and_remainder(op: str, dtype: Any) -> None:
    """-1 // inf == -1 and -1 % inf == inf, 1 // inf == 0 and 1 % inf == 1 (Python's and torch's), signed zeros
    included; an infinite or nan dividend still gives nan."""
    inf, nan = np.inf, np.nan
    a = np.array([0.0, -0.0, 1.0, -1.0, 5.5, -5.5, inf, nan], dtype=dtype)
    for divisor in (inf, -inf):
        _check(op, a, divisor)
        _check(op, a, np.full(8, divisor, dtype=dtype))
    _check(op, a, np.array([inf, -inf, -inf, inf, 2.0, -inf, inf, 0.0], dtype=dtype))  # mixed divisors
    compiled = tp.compile(lambda x, y: (x // y, x % y))
    y = np.array([inf, -inf, inf, -inf, 2.0, 0.5, 1.0, 3.0], dtype=dtype)
    for _ in range(2):
        q, r = compiled(tp.tensor(a), tp.tensor(y))
        np.testing.assert_array_equal(q.numpy(), (torch.from_numpy(a) // torch.from_numpy(y)).numpy())
        np.testing.assert_array_equal(r.numpy(), (torch.from_numpy(a) % torch.from_numpy(y)).numpy())


@pytest.mark.parametrize("op", ["floordiv", "mod", "floor_divide", "remainder"])
def test_an_integer_division_by_zero_is_a_clear_error(op: str) -> None:
    ours, theirs = OPS[op]
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        theirs(torch.tensor([4, 5]), torch.tensor([1, 0]))
    with pytest.raises(ZeroDivisionError, match=r"integer division by zero \(the divisor is 0 at index \(1,\)\)"):
        ours(tp.tensor([4, 5]), tp.tensor([1, 0]))
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        ours(tp.tensor([4, 5]), 0)
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        ours(3, tp.tensor([0, 2], dtype=tp.int32))


def test_bool_operands_and_other_objects_are_refused() -> None:
    with pytest.raises(DTypeError, match="floor_divide: bool operands"):
        tp.tensor([True]) // tp.tensor([True])
    with pytest.raises(DTypeError, match="remainder: expected tensors or Python numbers, got str"):
        tp.tensor([1]) % "2"  # type: ignore[operator]


def test_remainder_gradients_match_torch() -> None:
    a = RNG.standard_normal((3, 4)) * 5
    b = RNG.uniform(0.5, 2.0, (3, 4)) * RNG.choice([-1, 1], (3, 4))
    ta, tb = tp.tensor(a, requires_grad=True), tp.tensor(b, requires_grad=True)
    qa, qb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    (tp.remainder(ta, tb) * tp.tensor(np.arange(12.0).reshape(3, 4))).sum().backward()
    (torch.remainder(qa, qb) * torch.arange(12.0, dtype=torch.float64).reshape(3, 4)).sum().backward()
    np.testing.assert_allclose(ta.grad.numpy(), qa.grad.numpy())
    np.testing.assert_allclose(tb.grad.numpy(), qb.grad.numpy())
    ta.grad = None
    (ta // 1.5).sum().backward()
    np.testing.assert_array_equal(ta.grad.numpy(), np.zeros((3, 4)))  # a step function: zero almost everywhere


def test_under_compile_export_and_vmap() -> None:
    def f(x: Any, y: Any) -> Any:
        return x // y + x % 3 - (x.shape[0] // 2)

    def want(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        return (tx // ty + tx % 3 - x.shape[0] // 2).numpy()

    compiled = tp.compile(f, dynamic=True)
    ep = tp.export.export(f, (tp.tensor(INT_A), tp.tensor(INT_B)), dynamic_shapes={"x": {0: Dim("n", min=1)}, "y": {0: Dim("n", min=1)}})
    for n in (1, 4, 10):
        x, y = INT_A[:n] * 3 - 1, INT_B[:n]
        np.testing.assert_array_equal(compiled(tp.tensor(x), tp.tensor(y)).numpy(), want(x, y))
        np.testing.assert_array_equal(ep.module()(tp.tensor(x), tp.tensor(y)).numpy(), want(x, y))
    with pytest.raises(IndexRangeError, match=r"floor_divide: integer division by zero \(divisor == 0\), zero flag 1 "
                                              r"at position \[4\]"):
        compiled(tp.tensor(INT_A), tp.tensor(np.where(INT_B == 3, 0, INT_B)))
    with pytest.raises(IndexRangeError, match="integer division by zero"):
        ep.module()(tp.tensor(INT_A), tp.tensor(np.where(INT_B == 3, 0, INT_B)))
    x = RNG.standard_normal((3, 5)).astype(np.float32) * 10
    got = tp.func.vmap(lambda r: r // 1.5 + r % 0.7)(tp.tensor(x))
    np.testing.assert_array_equal(got.numpy(), (torch.from_numpy(x) // 1.5 + torch.from_numpy(x) % 0.7).numpy())


def test_a_symbolic_size_operand_stays_symbolic() -> None:
    def f(x: Any) -> Any:
        return x // x.shape[0], x % x.shape[0], x.float() // x.shape[0], x.shape[0] // (x.abs() + 1)

    def want(x: np.ndarray) -> list[np.ndarray]:
        t, n = torch.from_numpy(x), x.shape[0]
        return [(t // n).numpy(), (t % n).numpy(), (t.float() // n).numpy(), (n // (t.abs() + 1)).numpy()]

    ep = tp.export.export(f, (tp.tensor(INT_A),), dynamic_shapes={"x": {0: Dim("n", min=1, max=100)}})
    compiled = tp.compile(f, dynamic=True)
    for n in (1, 5, 12):
        x = np.arange(-n, n, dtype=np.int64) * 3
        for got in (ep.module()(tp.tensor(x)), compiled(tp.tensor(x))):
            for g, w in zip(got, want(x)):
                np.testing.assert_array_equal(g.numpy(), w)
    assert str(ep.range_constraints) == "{n: [1, 100]}"
    assert len(compiled.specializations) == 1  # one program for every size
