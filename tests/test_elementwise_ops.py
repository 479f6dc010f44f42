"""The elementwise functions of :mod:`tensorplay.elementwise_ops` (PyTorch's ``add``/``sub`` with ``alpha``,
``div`` with ``rounding_mode``, the named comparisons, ``asin`` ... ``atanh``, ``trunc``, ``frac``, ``signbit``,
``copysign``, ``hypot``, ``fmax``/``fmin``, ``fmod``, ``heaviside``, ``float_power``, ``sinc``, ``ldexp``,
``exp2``, ``erfc``, ``isin``, ...) against PyTorch: values at edge points (0, -0, +-1, infinities, NaN) in
float32 and float64, integer and bool inputs, Python numbers, broadcasting, 0-d and empty tensors, gradients
(at the domain edges too), errors, and a few under ``tp.compile``, ``tp.func.grad``, ``vmap`` and a trace."""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, TensorplayError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy warns at the NaN and inf edge values

INF, NAN = float("inf"), float("nan")
EDGE = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, -2.5, 3.0, 1.0 - 1e-7, 1e4, -1e4, INF, -INF, NAN]
TOL = {"float32": dict(rtol=4e-6, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-13)}
RNG = np.random.default_rng(11)


def _np(t: Any) -> Any:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _close(got: Any, want: Any, what: str, rtol: float | None = None, atol: float | None = None) -> None:
    g, w = _np(got), _np(want)
    assert g.dtype == w.dtype, (what, g.dtype, w.dtype)
    assert g.shape == w.shape, (what, g.shape, w.shape)
    tol = TOL.get(str(w.dtype), dict(rtol=0, atol=0))
    np.testing.assert_allclose(g, w, rtol=tol["rtol"] if rtol is None else rtol,
                               atol=tol["atol"] if atol is None else atol, equal_nan=True, err_msg=what)


def _tp(a: Any) -> Any:
    return tp.tensor(a) if isinstance(a, np.ndarray) else a


def _th(a: Any) -> Any:
    return torch.tensor(a) if isinstance(a, np.ndarray) else a


# ---- unary functions: (tensorplay, torch, extra relative tolerance) ----------------------------------------
UNARY: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "tan": (tp.tan, torch.tan), "asin": (tp.asin, torch.asin), "arcsin": (lambda x: x.arcsin(), torch.arcsin),
    "acos": (tp.acos, torch.acos), "arccos": (tp.arccos, torch.arccos), "atan": (tp.atan, torch.atan),
    "arctan": (lambda x: x.arctan(), torch.arctan), "asinh": (tp.asinh, torch.asinh),
    "arcsinh": (tp.arcsinh, torch.arcsinh), "acosh": (tp.acosh, torch.acosh),
    "arccosh": (lambda x: x.arccosh(), torch.arccosh), "atanh": (tp.atanh, torch.atanh),
    "arctanh": (tp.arctanh, torch.arctanh), "trunc": (tp.trunc, torch.trunc), "fix": (lambda x: x.fix(), torch.fix),
    "frac": (tp.frac, torch.frac), "sgn": (tp.sgn, torch.sgn), "signbit": (tp.signbit, torch.signbit),
    "exp2": (tp.exp2, torch.exp2), "erfc": (tp.erfc, torch.erfc), "deg2rad": (tp.deg2rad, torch.deg2rad),
    "rad2deg": (lambda x: x.rad2deg(), torch.rad2deg), "sinc": (tp.sinc, torch.sinc),
    "isposinf": (tp.isposinf, torch.isposinf), "isneginf": (lambda x: x.isneginf(), torch.isneginf),
    "isreal": (tp.isreal, torch.isreal), "negative": (tp.negative, torch.negative),
    "positive": (lambda x: x.positive(), torch.positive), "absolute": (tp.absolute, torch.absolute),
}
SCALE = {"tan": {"float32": 3.0, "float64": 1.0}}
FLOAT_ONLY = {"frac"}
NO_BOOL = {"trunc", "fix", "frac", "negative", "positive", "absolute"}
SMOOTH = {"tan", "asin", "arcsin", "acos", "arccos", "atan", "arctan", "asinh", "arcsinh", "acosh", "arccosh",
          "atanh", "arctanh", "frac", "exp2", "erfc", "deg2rad", "rad2deg", "sinc", "negative", "positive",
          "absolute", "trunc"}


def _edge(dtype: str) -> np.ndarray[Any, Any]:
    wide = EDGE + [1e-30, 2.0, 1.5, 1e10, 1e30 if dtype == "float64" else 1e20, 5.0, 12.0, 30.0, -3.5, 0.7]
    return np.array(wide, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_values_and_gradients_match_torch(name: str, dtype: str) -> None:
    ours, theirs = UNARY[name]
    a = _edge(dtype)
    scale = SCALE.get(name, {}).get(dtype, 1.0)
    x = tp.tensor(a, requires_grad=name in SMOOTH)
    tx = torch.tensor(a, requires_grad=name in SMOOTH)
    out, want = ours(x), theirs(tx)
    keep = ~np.isnan(a) if name in ("sgn", "absolute") else np.ones(a.shape, bool)
    _close(_np(out)[keep], _np(want)[keep], f"{name}({dtype})", rtol=TOL[dtype]["rtol"] * scale)
    if name in SMOOTH:
        out.sum().backward()
        want.sum().backward()
        if name in ("acosh", "arccosh"):  # below 1 the value is NaN; torch's 1 / sqrt(x^2 - 1) is not
            keep &= a >= 1
        # float64 near +-1: torch's 1 / sqrt(1 - x*x) (and 1 / (1 - x*x)) loses ~1e-11 to the cancellation
        rtol = builtins.max(TOL[dtype]["rtol"] * scale * 4, 1e-10 if dtype == "float64" else 0.0)
        _close(_np(x.grad)[keep], _np(tx.grad)[keep], f"d{name}({dtype})", rtol=rtol)


def test_sign_and_abs_of_nan_differ_from_torch_as_the_primitives_do() -> None:
    """torch.sgn(nan) and torch.abs's gradient at NaN are 0; tensorplay's ``sign`` primitive gives NaN (the
    comparison above leaves NaN out; this pins the difference so a change of the primitive is noticed)."""
    x = tp.tensor([NAN], requires_grad=True)
    tp.absolute(x).sum().backward()
    assert x.grad is not None
    assert np.isnan(tp.sgn(tp.tensor([NAN])).numpy()[0]) and np.isnan(x.grad.numpy()[0])


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_integer_bool_0d_and_empty_inputs_match_torch(name: str) -> None:
    ours, theirs = UNARY[name]
    cases = [np.array([-3, -1, 0, 1, 2, 7], "int64"), np.array([1, -2], "int32"), np.array([True, False]),
             np.array(0.5, "float32"), np.zeros((0, 3), "float64")]
    for a in cases:
        try:
            want = theirs(torch.tensor(a))
        except (RuntimeError, NotImplementedError):
            with pytest.raises(TensorplayError):
                ours(tp.tensor(a))
            assert (a.dtype.kind == "b" and name in NO_BOOL) or (a.dtype.kind in "biu" and name in FLOAT_ONLY)
            continue
        _close(ours(tp.tensor(a)), want, f"{name}({a.dtype}{list(a.shape)})", rtol=1e-6, atol=1e-7)


def test_signbit_sees_negative_zero_and_negative_infinity() -> None:
    a = np.array([-0.0, 0.0, -INF, INF, -1e-45, 1e-45], "float32")
    np.testing.assert_array_equal(tp.signbit(tp.tensor(a)).numpy(), torch.signbit(torch.tensor(a)).numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_erfc_keeps_its_relative_accuracy_in_the_tail(dtype: str) -> None:
    a = np.concatenate([np.linspace(-3.0, 10.0, 400), np.linspace(10.0, 26.5, 50)]).astype(dtype)
    if dtype == "float32":
        a = a[a < 9.0]  # erfc(9.2) underflows float32
    x, tx = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    out, want = tp.erfc(x), torch.erfc(tx)
    _close(out, want, f"erfc({dtype})", rtol=5e-7 if dtype == "float32" else 1e-12, atol=0.0)  # 4 ulp in float32
    out.sum().backward()
    want.sum().backward()
    _close(x.grad, tx.grad, f"derfc({dtype})", rtol=5e-6 if dtype == "float32" else 1e-11, atol=0.0)


def test_inverse_functions_are_accurate_near_zero_and_finite_for_huge_inputs() -> None:
    for dtype, huge in (("float32", 3e38), ("float64", 1e300)):
        a = np.array([1e-20, -1e-20, 1e-8, huge, -huge], dtype)
        for ours, theirs in ((tp.asinh, torch.asinh), (tp.atanh, torch.atanh), (tp.asin, torch.asin),
                             (tp.atan, torch.atan)):
            _close(ours(tp.tensor(a)), theirs(torch.tensor(a)), f"{theirs.__name__}({dtype})")
        b = np.array([1.0 + 1e-6, huge], dtype)
        _close(tp.acosh(tp.tensor(b)), torch.acosh(torch.tensor(b)), f"acosh({dtype})", rtol=1e-5)


# ---- binary functions --------------------------------------------------------------------------------------
BINARY: dict[str, tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]] = {
    "add": (tp.add, torch.add), "add(alpha=2)": (lambda a, b: tp.add(a, b, alpha=2), lambda a, b: torch.add(a, b, alpha=2)),
    "sub": (tp.sub, torch.sub), "subtract(alpha=3)": (lambda a, b: a.subtract(b, alpha=3),
                                                      lambda a, b: torch.subtract(a, b, alpha=3)),
    "mul": (tp.mul, torch.mul), "multiply": (lambda a, b: a.multiply(b), torch.multiply),
    "div": (tp.div, torch.div), "divide": (tp.divide, torch.divide), "true_divide": (tp.true_divide, torch.true_divide),
    "div(trunc)": (lambda a, b: tp.div(a, b, rounding_mode="trunc"), lambda a, b: torch.div(a, b, rounding_mode="trunc")),
    "div(floor)": (lambda a, b: a.div(b, rounding_mode="floor"), lambda a, b: torch.div(a, b, rounding_mode="floor")),
    "eq": (tp.eq, torch.eq), "ne": (tp.ne, torch.ne), "not_equal": (tp.not_equal, torch.not_equal),
    "lt": (tp.lt, torch.lt), "less": (lambda a, b: a.less(b), torch.less), "le": (tp.le, torch.le),
    "less_equal": (tp.less_equal, torch.less_equal), "gt": (tp.gt, torch.gt), "greater": (tp.greater, torch.greater),
    "ge": (lambda a, b: a.ge(b), torch.ge), "greater_equal": (tp.greater_equal, torch.greater_equal),
    "hypot": (tp.hypot, torch.hypot), "copysign": (tp.copysign, torch.copysign), "fmax": (tp.fmax, torch.fmax),
    "fmin": (lambda a, b: a.fmin(b), torch.fmin), "fmod": (tp.fmod, torch.fmod),
    "float_power": (tp.float_power, torch.float_power), "ldexp": (tp.ldexp, torch.ldexp),
    "heaviside": (tp.heaviside, torch.heaviside),
    "isin": (tp.isin, torch.isin), "isin(invert)": (lambda a, b: a.isin(b, invert=True),
                                                    lambda a, b: torch.isin(a, b, invert=True)),
}
DIFFERENTIABLE = {"add", "add(alpha=2)", "sub", "subtract(alpha=3)", "mul", "multiply", "div", "divide", "true_divide",
                  "hypot", "copysign", "fmax", "fmin", "fmod", "float_power", "ldexp"}


def _differs(name: str, a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> Any:
    """Pairs whose gradient differs from PyTorch's on purpose (or where PyTorch's is not finite-consistent)."""
    if name == "hypot":  # at the origin torch's x / hypot is 0/0 = NaN, ours 0; inf entries: torch inf/inf = NaN
        return ((a == 0) & (b == 0)) | np.isinf(a) | np.isinf(b) | np.isnan(a) | np.isnan(b)
    if name == "fmod":  # torch's d/dy = -trunc(x/y) also where the value is NaN (y == 0, x = inf) or y infinite
        return (b == 0) | np.isinf(a) | np.isinf(b) | np.isnan(a) | np.isnan(b)
    if name in ("mul", "multiply", "div", "divide", "true_divide", "float_power", "ldexp"):
        return np.isinf(a) | np.isinf(b) | np.isnan(a) | np.isnan(b) | (b == 0)  # 0 * inf conventions
    if name == "copysign":  # the sign of a NaN; at x = +-inf torch's result / x is inf / inf = NaN
        return np.isnan(a) | np.isnan(b) | np.isinf(a)
    return np.zeros(a.shape, bool)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_values_and_gradients_at_edges_match_torch(name: str, dtype: str) -> None:
    ours, theirs = BINARY[name]
    a, b = (np.array(v, dtype) for v in zip(*itertools.product(EDGE, EDGE)))
    if name.startswith("isin"):
        a, b = np.array(EDGE + [7.0, 2.0], dtype), np.array([0.0, 3.0, INF, NAN, 2.0], dtype)
    if name == "copysign":  # our NaN is positive, which torch's NaN from inf - inf need not be
        b = np.where(np.isnan(b), 1.0, b).astype(dtype)
    grad = name in DIFFERENTIABLE
    x, y = tp.tensor(a, requires_grad=grad), tp.tensor(b, requires_grad=grad)
    tx, ty = torch.tensor(a, requires_grad=grad), torch.tensor(b, requires_grad=grad)
    out, want = ours(x, y), theirs(tx, ty)
    keep = np.ones(a.shape, bool)
    if name == "div(floor)":  # tp.floor_divide(x, +-inf) is NaN for finite x; torch gives 0 or -1
        keep = ~(np.isinf(b) & np.isfinite(a))
    _close(_np(out)[keep], _np(want)[keep], f"{name}({dtype})")
    if grad:
        out.sum().backward()
        want.sum().backward()
        keep = ~_differs(name, a, b)
        for g, w, which in ((x.grad, tx.grad, "x"), (y.grad, ty.grad, "y")):
            if g is None:  # copysign's y reaches the result only through a comparison: no gradient (torch: zeros)
                assert name == "copysign" and not w.any(), (name, which)
                continue
            np.testing.assert_allclose(_np(g)[keep], _np(w)[keep], rtol=TOL[dtype]["rtol"] * 4,
                                       atol=TOL[dtype]["atol"], equal_nan=True, err_msg=f"d{name}/d{which}")


INT_CASES = [(np.array([7, -7, 6, -6, 0, 5], "int64"), np.array([2, 2, -4, -4, 3, -5], "int64")),
             (np.array([[7], [-9]], "int32"), np.array([2, -4, 5], "int32")),
             (np.array([7, -7], "int32"), np.array([2, -3], "int64")),
             (np.array([True, False, True]), np.array([True, True, False])),
             (np.array([3, -4], "int64"), np.array([2.5, -1.5], "float32")),
             (np.array([1.5, -2.5], "float32"), np.array([2.0, 3.0], "float64")),
             (np.array(4, "int64"), np.array([1, 2, -3], "int64")),
             (np.zeros((0, 2), "float32"), np.array([1.0, 2.0], "float32"))]
SCALARS = [3, -2, 2.5, True, -0.0]


def _extension(name: str, a: Any, b: Any) -> bool:
    """Inputs that torch refuses and tensorplay takes on purpose: bool operands of ``isin``, a bool exponent
    of ``ldexp`` (torch takes a bool tensor but not a bool number there), a number ``values`` of ``heaviside``."""
    kinds = {np.asarray(v).dtype.kind for v in (a, b)}
    return ((name.startswith("isin") and "b" in kinds) or (name == "ldexp" and isinstance(b, bool))
            or (name == "heaviside" and not isinstance(b, np.ndarray)))  # a number values takes x's dtype


def _torch_or_error(f: Callable[[], Any]) -> Any:
    try:
        return f()
    except (RuntimeError, NotImplementedError, TypeError) as error:
        return error


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_dtype_promotion_broadcasting_and_numbers_match_torch(name: str) -> None:
    ours, theirs = BINARY[name]
    cases: list[tuple[Any, Any]] = list(INT_CASES)
    cases += [(a, s) for a, _ in INT_CASES[:6] for s in SCALARS]
    if name in ("add", "sub", "mul", "div", "true_divide", "float_power", "isin"):
        cases += [(s, b) for s in (3, 2.5) for _, b in INT_CASES[:4]]  # torch.add(2, x): a number first
    for a, b in cases:
        want = _torch_or_error(lambda: theirs(_th(a), _th(b)))
        if isinstance(want, TypeError):  # torch takes no number there; ours does, as torch takes a 0-d tensor
            want = _torch_or_error(lambda: theirs(torch.tensor(a), torch.tensor(b)))
        what = f"{name}({a!r}, {b!r})"
        if isinstance(want, Exception) and _extension(name, a, b):
            continue
        if isinstance(want, Exception):
            with pytest.raises((TensorplayError, ZeroDivisionError)):
                ours(_tp(a), _tp(b))
            continue
        _close(ours(_tp(a), _tp(b)), want, what, rtol=2e-7, atol=1e-7)


def test_integer_division_by_zero_is_refused_like_torch() -> None:
    x = tp.tensor([4, 5])
    calls: list[Callable[[], Any]] = [lambda: tp.div(x, 0, rounding_mode="trunc"),
                                      lambda: tp.fmod(x, tp.tensor([1, 0]))]
    for call in calls:
        with pytest.raises(ZeroDivisionError):
            call()


def test_fmod_keeps_the_sign_of_x_and_keeps_x_for_infinite_y() -> None:
    """Quotients up to 2**40 (beyond, fmod inherits tp.remainder's rounding: fmod(1e20, 3) is 4096, not 1)."""
    a = np.array([2.0**40 + 1, -(2.0**40) - 3, 5.5, -5.5, 3.0, -3.0, -1e-30], "float64")
    b = np.array([3.0, 7.0, -2.0, 2.0, INF, -INF, 1.0], "float64")
    _close(tp.fmod(tp.tensor(a), tp.tensor(b)), torch.fmod(torch.tensor(a), torch.tensor(b)), "fmod huge")
    _close(tp.tensor(a).fmod(INF), torch.fmod(torch.tensor(a), INF), "fmod(x, inf)")


def test_hypot_does_not_overflow_or_underflow() -> None:
    a = np.array([3e38, 1e-40, 0.0, INF, NAN], "float32")
    b = np.array([3e38, 1e-40, 0.0, NAN, 1.0], "float32")
    _close(tp.hypot(tp.tensor(a), tp.tensor(b)), torch.hypot(torch.tensor(a), torch.tensor(b)), "hypot")


def test_equal_compares_shapes_and_values() -> None:
    x = np.array([[1.0, 2.0], [3.0, NAN]], "float32")
    pairs = [(x[:, 0], x[:, 0]), (x[:1, :], x[:1, :].astype("float64")), (x[0], x[:1]), (x, x),
             (np.array(2, "int64"), np.array(2.0, "float32")), (np.zeros((0,)), np.zeros((0,))),
             (np.array([1, 2]), np.array([1, 3]))]
    for a, b in pairs:
        assert tp.equal(tp.tensor(a), tp.tensor(b)) is torch.equal(torch.tensor(a), torch.tensor(b)), (a, b)
        assert tp.tensor(a).equal(tp.tensor(b)) is torch.equal(torch.tensor(a), torch.tensor(b))


def test_bitwise_functions_match_torch() -> None:
    a, b = np.array([5, -3, 0, 12], "int64"), np.array([3, 6, -1, 10], "int32")
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        _close(getattr(tp, name)(tp.tensor(a), tp.tensor(b)), getattr(torch, name)(torch.tensor(a), torch.tensor(b)),
               name)
        _close(getattr(tp.tensor(a), name)(3), getattr(torch, name)(torch.tensor(a), 3), f"{name} scalar")
    _close(tp.bitwise_not(tp.tensor(a)), torch.bitwise_not(torch.tensor(a)), "bitwise_not")
    _close(tp.tensor([True, False]).bitwise_not(), torch.bitwise_not(torch.tensor([True, False])), "bitwise_not bool")
    with pytest.raises(TensorplayError):
        tp.bitwise_and(tp.tensor([1.0]), tp.tensor([2.0]))


def test_errors_name_the_function_and_the_allowed_values() -> None:
    x, i = tp.tensor([1.0, 2.0]), tp.tensor([1, 2])
    cases: list[tuple[type[Exception], str, Callable[[], Any]]] = [
        (ArgumentError, r"div: expected rounding_mode to be one of None, 'trunc' or 'floor', got 'round'",
         lambda: tp.div(x, 2, rounding_mode="round")),
        (ArgumentError, r"add: alpha must be an int for integer operands .*alpha=1.5",
         lambda: tp.add(i, i, alpha=1.5)),
        (ArgumentError, r"sub: a bool alpha is only supported for bool operands", lambda: x.sub(x, alpha=True)),
        (DTypeError, r"sub: subtraction with a bool operand is not supported \(got int64 and weak_bool\)",
         lambda: tp.sub(i, True)),
        (DTypeError, r"frac: expected a float tensor, got int64\[2\]", lambda: tp.frac(i)),
        (DTypeError, r"trunc: expected an int or float tensor, got bool", lambda: tp.tensor([True]).trunc()),
        (DTypeError, r"hypot: expected a float operand, got int64 and weak_int", lambda: tp.hypot(i, 2)),
        (DTypeError, r"heaviside: expected values to have the input's dtype float32, got int64",
         lambda: tp.heaviside(x, i)),
        (DTypeError, r"fmod: bool operands", lambda: tp.fmod(tp.tensor([True]), True)),
        (ArgumentTypeError, r"add: expected a tensor operand, got int, float", lambda: tp.add(1, 2.0)),
        (ArgumentTypeError, r"mul: other must be a tensor or a number, got str", lambda: tp.mul(x, "2")),  # type: ignore[arg-type]
        (ArgumentTypeError, r"isin: invert must be a bool", lambda: tp.isin(x, x, invert=1)),  # type: ignore[arg-type]
        (ArgumentTypeError, r"equal: other must be a tensor, got list", lambda: tp.equal(x, [1.0, 2.0])),  # type: ignore[arg-type]
        (ArgumentTypeError, r"copysign: input must be a tensor, got float", lambda: tp.copysign(1.0, x)),
    ]
    for kind, message, call in cases:
        with pytest.raises(kind, match=message):
            call()


# ---- transforms ------------------------------------------------------------------------------------------
def _composite(x: Any, y: Any) -> Any:
    u = (x * 0.4).tanh()
    out = tp.asin(u) + u.acos() * 0.5 + tp.atanh(u * 0.9) + tp.asinh(x) + (x.abs() + 1.0).acosh() + tp.atan(y)
    out = out + tp.hypot(x, y) + tp.fmax(x, y) + tp.fmod(x, y.abs() + 0.5) + tp.copysign(x, y) + tp.sinc(x)
    out = out + tp.erfc(y) + tp.exp2(x * 0.3) + tp.ldexp(x, tp.tensor(2)) + tp.frac(x * 3.0) + x.deg2rad()
    return out + tp.add(x, y, alpha=2) + tp.sub(x, y, alpha=0.5) + tp.div(x, y.abs() + 1.0) + tp.tan(u)


def _composite_torch(x: Any, y: Any) -> Any:
    u = (x * 0.4).tanh()
    out = torch.asin(u) + u.acos() * 0.5 + torch.atanh(u * 0.9) + torch.asinh(x) + (x.abs() + 1.0).acosh() + torch.atan(y)
    out = out + torch.hypot(x, y) + torch.fmax(x, y) + torch.fmod(x, y.abs() + 0.5) + torch.copysign(x, y) + torch.sinc(x)
    out = out + torch.erfc(y) + torch.exp2(x * 0.3) + torch.ldexp(x, torch.tensor(2)) + torch.frac(x * 3.0) + x.deg2rad()
    return (out + torch.add(x, y, alpha=2) + torch.sub(x, y, alpha=0.5) + torch.div(x, y.abs() + 1.0)
            + torch.tan(u))


def test_compile_grad_vmap_and_trace_match_eager_and_torch() -> None:
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    eager = _composite(tp.tensor(a), tp.tensor(b))
    _close(eager, _composite_torch(torch.tensor(a), torch.tensor(b)), "composite", rtol=1e-6, atol=1e-6)
    compiled = tp.compile(_composite)
    for _ in range(2):
        np.testing.assert_allclose(compiled(tp.tensor(a), tp.tensor(b)).numpy(), eager.numpy(), rtol=1e-12, atol=1e-12)

    def loss(x: Any, y: Any) -> Any:
        return _composite(x, y).sum()

    g = tp.func.grad(loss, argnums=(0, 1))(tp.tensor(a), tp.tensor(b))
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    _composite_torch(ta, tb).sum().backward()
    _close(g[0], ta.grad, "grad x", rtol=1e-6, atol=1e-6)
    _close(g[1], tb.grad, "grad y", rtol=1e-6, atol=1e-6)
    gc = tp.compile(tp.func.grad(loss, argnums=(0, 1)))
    for _ in range(2):
        np.testing.assert_allclose(gc(tp.tensor(a), tp.tensor(b))[0].numpy(), g[0].numpy(), rtol=1e-10, atol=1e-12)

    def row(x: Any, y: Any) -> Any:
        return (_composite(x, y) + tp.isin(x, y).float() + tp.signbit(x).float() + tp.div(x, y, rounding_mode="trunc")
                + tp.heaviside(x, y) + tp.float_power(x, 2).float() + tp.trunc(y) + tp.eq(x, y).float())

    got = tp.func.vmap(row)(tp.tensor(a), tp.tensor(b))
    loop = np.stack([row(tp.tensor(r), tp.tensor(s)).numpy() for r, s in zip(a, b)])
    np.testing.assert_allclose(got.numpy(), loop, rtol=1e-12, atol=1e-12)

    module = tp.graph.trace(row, tp.tensor(a[0]), tp.tensor(b[0]))
    np.testing.assert_allclose(module(tp.tensor(a[1]), tp.tensor(b[1])).numpy(), loop[1], rtol=1e-12, atol=1e-12)
    traced = tp.graph.evaluate(module.graph, tp.eager, tp.tensor(a[2]), tp.tensor(b[2]))
    np.testing.assert_allclose(_np(traced[0] if isinstance(traced, (list, tuple)) else traced), loop[2], rtol=1e-12,
                               atol=1e-12)
