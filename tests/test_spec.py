"""The spec (shape rules + numpy references) against PyTorch, numpy and hand-computed values."""

from __future__ import annotations

import inspect
import math
import subprocess
from pathlib import Path
import sys
from typing import Any

import numpy as np

from tests.helpers import torch_smooth_max_pool
import pytest
import torch
import torch.nn.functional as F

from tensorplay.spec import SPECS, Aval
from tensorplay.spec.table import PRIMITIVES, names
from tensorplay.spec.dtypes import DTYPES, result_type
from tensorplay.spec.errors import AxisError, DTypeError, ShapeError
from tensorplay.ops import PRIMITIVE_NAMES, Ops

RNG = np.random.default_rng(1234)
FLOAT_DTYPES = ("float32", "float64")
TOL = {"float32": {"rtol": 2e-5, "atol": 2e-5}, "float64": {"rtol": 1e-10, "atol": 1e-10}}


def rand(*shape: int, dtype: str = "float64") -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def tt(a: Any) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


def assert_matches(ours: np.ndarray, theirs: Any, dtype: str | None = None) -> None:
    expected = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    assert ours.shape == expected.shape
    assert isinstance(ours, np.ndarray)
    if dtype is not None:
        assert ours.dtype == np.dtype(dtype)
    tol = TOL.get(str(ours.dtype), {"rtol": 0, "atol": 0})
    np.testing.assert_allclose(ours, expected, equal_nan=True, **tol)


def ref(name: str, *args: Any, **params: Any) -> np.ndarray:
    return SPECS[name].reference(*args, **params)


def rule(name: str, *args: Any, **params: Any) -> Aval:
    return SPECS[name].rule(*args, **params)


def av(shape: tuple[Any, ...], dtype: str = "float32") -> Aval:
    return Aval(tuple(shape), dtype)


# ---- registry ---------------------------------------------------------------------------------

def test_every_primitive_has_a_spec_matching_the_protocol() -> None:
    assert set(SPECS) == set(PRIMITIVE_NAMES)
    for name in PRIMITIVE_NAMES:
        sig = inspect.signature(getattr(Ops, name))
        params = [p for p in sig.parameters.values() if p.name != "self"]
        keyword = tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)
        positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY,
                                                      inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        spec = SPECS[name]
        assert spec.name == name
        assert spec.params == keyword, name
        assert spec.n_inputs == (None if variadic else len(positional)), name
        rule_kw = {p.name for p in inspect.signature(spec.rule).parameters.values()
                   if p.kind is inspect.Parameter.KEYWORD_ONLY}
        assert rule_kw == set(keyword), name


def test_spec_imports_only_numpy_and_stdlib() -> None:
    code = ("import sys, spec, spec.registry; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('tensorplay', 'interpreters', 'numba', 'torch', 'scipy')); print(bad)")
    # spec/ is imported on its own, as a top-level package of the repository (installed, it is tensorplay.spec)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"


# One sample call per primitive: the reference's result has exactly the rule's aval.
def _samples() -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
    x = rand(2, 3, 5, dtype="float32")
    img = rand(2, 4, 6, 5, dtype="float32")
    pool = {"kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 1)}
    pooled = ref("max_pool_nd", img, **pool)
    s: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    for name in (*names("unary"), "stop_gradient"):
        s[name] = ((x,), {})
    s["gelu"] = ((x,), {"approximate": "tanh"})
    for name in names("binary"):
        s[name] = ((x, 2), {})
    ints = (x * 10).astype("int64")
    for name in (*names("unary", dtypes="int_or_bool"), *names("binary", dtypes="bitwise")):
        s[name] = ((ints,) if PRIMITIVES[name].family == "unary" else (ints, 3), {})
    s["where"] = ((x > 0, x, 1.5), {})
    for name in names("reduce"):
        s[name] = ((x,), {"axes": (0, -1), "keepdims": True})
    s["argmax"] = s["argmin"] = ((x,), {"axis": 1})
    s["cumsum"] = ((x,), {"axis": 1})
    s["argsort"] = ((x,), {"axis": -1, "descending": True})
    s["reshape"] = ((x,), {"shape": (6, 5)})
    s["permute"] = ((x,), {"perm": (2, 0, 1)})
    s["broadcast_to"] = ((x,), {"shape": (4, 2, 3, 5)})
    s["slice"] = ((x,), {"starts": (1, 0, 4), "stops": (2, 3, -1), "steps": (1, 2, -2)})
    s["pad"] = ((x,), {"pads": ((0, 1), (2, 0), (1, 1)), "value": -1.0})
    s["concat"] = ((x, x.astype("float64")), {"axis": 1})
    s["gather"] = ((x, np.array([[0, -1], [2, 1]])), {"axis": 1})
    s["scatter_add"] = ((x, np.array([0, 0, 2]), rand(2, 3, 5, dtype="float32")), {"axis": 1})
    s["cast"] = ((x,), {"dtype": "int32"})
    s["full"] = ((), {"shape": (2, 3), "value": 1.5, "dtype": "float64"})
    s["iota"] = ((), {"length": 4, "dtype": "int32"})
    s["check_index"] = ((np.array([[0, 2], [1, 1]]),), {"bound": 3, "what": "index", "allowed": (-1,)})
    s["matmul"] = ((x, rand(5, 2, dtype="float32")), {})
    s["conv_nd"] = ((img, rand(6, 2, 3, 3, dtype="float32")),
                 {"stride": (1, 2), "padding": (1, 0), "dilation": (1, 1), "groups": 2})
    s["conv_transpose_nd"] = ((img, rand(4, 3, 2, 2, dtype="float32")),
                           {"stride": (2, 2), "padding": (0, 1), "output_padding": (1, 0), "dilation": (1, 1),
                            "groups": 2})
    s["conv_weight_grad_nd"] = ((img, rand(2, 6, 4, 3, dtype="float32")),
                             {"kernel_size": (3, 3), "stride": (1, 1), "padding": (0, 0), "dilation": (1, 1),
                              "groups": 2})
    s["max_pool_nd"] = s["avg_pool_nd"] = ((img,), pool)
    s["max_pool_backward_nd"] = ((img, pooled), pool)
    s["max_pool_select_nd"] = ((img, img * 2), pool)
    s["avg_pool_backward_nd"] = ((pooled,), {"input_shape": (6, 5), **pool})
    s["smooth_max_pool_nd"] = ((img,), {**pool, "beta": 3.0})
    s["smooth_max_pool_backward_nd"] = ((img, pooled), {**pool, "beta": 3.0})
    s["layer_norm_last_axis"] = ((x, rand(5, dtype="float32"), rand(5, dtype="float32")), {"eps": 1e-5})
    stats = [rand(4, dtype="float32") for _ in range(4)]
    stats[1] = np.abs(stats[1])
    s["batch_norm"] = ((img, *stats), {"eps": 1e-5})
    s["softmax"] = s["log_softmax"] = ((x,), {"axis": 1})
    s["dot_product_attention"] = ((rand(2, 3, 4, dtype="float32"), rand(2, 5, 4, dtype="float32"),
                       rand(2, 5, 6, dtype="float32"), RNG.random((3, 5)) > 0.3), {"scale": 0.5})
    key = np.array([7, 3], dtype=np.int64)
    s["random_uniform"] = s["random_normal"] = ((key,), {"shape": (3, 4), "dtype": "float32"})
    s["random_randint"] = ((key,), {"shape": (3, 4), "low": -2, "high": 5, "dtype": "int32"})
    return s


SAMPLES = _samples()


def _aval(v: Any) -> Aval | None:
    if v is None:
        return None
    if isinstance(v, (bool, int, float)):
        return Aval((), {bool: "weak_bool", int: "weak_int", float: "weak_float"}[type(v)])
    return Aval(v.shape, str(v.dtype))


@pytest.mark.parametrize("name", PRIMITIVE_NAMES)
def test_reference_result_has_the_rule_aval(name: str) -> None:
    args, params = SAMPLES[name]
    expected = SPECS[name].rule(*(_aval(a) for a in args), **params)
    out = SPECS[name].reference(*args, **params)
    assert isinstance(out, np.ndarray)
    assert out.shape == expected.shape and str(out.dtype) == expected.dtype


# ---- elementwise ------------------------------------------------------------------------------

UNARY_TORCH = {
    "neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp, "log": torch.log,
    "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin,
    "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu, "erf": torch.erf,
    "floor": torch.floor, "ceil": torch.ceil, "logical_not": torch.logical_not, "gelu": F.gelu,
}


def _torch_dtype_or_error(fn: Any, *args: Any) -> str | None:
    try:
        return str(fn(*args).dtype).removeprefix("torch.")
    except (RuntimeError, TypeError):
        return None


def _dtype_or_error(name: str, *avals: Aval) -> str | None:
    try:
        return rule(name, *avals).dtype
    except DTypeError:
        return None


def _example(dtype: str) -> torch.Tensor:
    return tt(np.array([-2, 0, 3]).astype(dtype))


@pytest.mark.parametrize("name", sorted(UNARY_TORCH))
def test_unary_dtypes_follow_torch(name: str) -> None:
    for dtype in DTYPES:
        theirs = _torch_dtype_or_error(UNARY_TORCH[name], _example(dtype))
        assert _dtype_or_error(name, av((3,), dtype)) == theirs, (name, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY_TORCH))
def test_unary_values_follow_torch(name: str, dtype: str) -> None:
    x = np.concatenate([rand(50) * 3, [0.0, -0.0, 1e-8, -1e-8, 40.0, -40.0, np.inf, -np.inf, np.nan]])
    if name in ("log", "sqrt", "rsqrt", "log1p"):
        x = np.abs(x)
    if name == "sign":  # ops.py: NaN stays NaN (PyTorch gives 0); checked below
        x = x[~np.isnan(x)]
    if name == "gelu":  # PyTorch's erf form gives NaN at +inf; the formula gives inf (checked below)
        x = x[np.isfinite(x)]
    x = x.astype(dtype)
    assert_matches(ref(name, x), UNARY_TORCH[name](tt(x)), "bool" if name == "logical_not" else dtype)


def test_unary_special_values() -> None:
    assert np.isnan(ref("sign", np.array([np.nan, 1.0]))[0])
    np.testing.assert_array_equal(ref("sign", np.array([-0.0, 0.0, -3.0])), [0.0, 0.0, -1.0])
    for form in ("none", "tanh"):
        out = ref("gelu", np.array([np.inf, -np.inf, np.nan]), approximate=form)
        assert out[0] == np.inf and np.isnan(out[1]) and np.isnan(out[2])
    np.testing.assert_array_equal(ref("log", np.array([0.0, -1.0]))[0], -np.inf)
    assert np.isnan(ref("log", np.array([-1.0]))[0]) and np.isnan(ref("sqrt", np.array([-1.0]))[0])


def test_unary_int_inputs() -> None:
    x = np.array([-3, 0, 4], dtype=np.int32)
    assert_matches(ref("exp", x), torch.exp(tt(x)), "float32")
    assert_matches(ref("floor", x), x, "int32")
    assert_matches(ref("neg", x), -x, "int32")
    assert_matches(ref("relu", x), [0, 0, 4], "int32")
    assert_matches(ref("logical_not", x), [False, True, False], "bool")
    assert_matches(ref("sign", np.array([True, False])), [True, False], "bool")


def test_sigmoid_is_stable_and_gelu_forms() -> None:
    x = np.array([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=np.float32)
    with np.errstate(all="raise"):  # no overflow inside the reference
        out = ref("sigmoid", x)
    np.testing.assert_array_equal(out[[0, 2, 4]], [0.0, 0.5, 1.0])
    y = rand(40, dtype="float64") * 4
    for form in ("none", "tanh"):
        assert_matches(ref("gelu", y, approximate=form), F.gelu(tt(y), approximate=form))
    # the two forms really differ
    assert np.abs(ref("gelu", y, approximate="none") - ref("gelu", y, approximate="tanh")).max() > 1e-5
    # erf form by its definition, with values of Phi from the standard normal table
    np.testing.assert_allclose(ref("gelu", np.array([1.0, -1.0])), [0.8413447460685429, -0.15865525393145707])
    with pytest.raises(ValueError, match="gelu"):
        rule("gelu", av((2,)), approximate="fast")


BINARY_TORCH = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
    "le": torch.le, "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
}
SCALAR_OK = ("add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge")
WEAK_VALUES = {"weak_bool": True, "weak_int": 2, "weak_float": 2.5}
_ARITH = ("add", "sub", "mul", "div", "pow")


@pytest.mark.parametrize("name", sorted(BINARY_TORCH))
def test_binary_promotion_table_follows_torch(name: str) -> None:
    fn = BINARY_TORCH[name]
    for a in DTYPES:
        for b in DTYPES:
            theirs = _torch_dtype_or_error(fn, _example(a), _example(b))
            assert _dtype_or_error(name, av((3,), a), av((3,), b)) == theirs, (name, a, b)
        if name in SCALAR_OK:
            for kind, value in WEAK_VALUES.items():
                if name == "pow" and a == "bool" and kind == "weak_bool":
                    continue  # PyTorch accepts bool_tensor ** True but not True ** bool_tensor; spec refuses both
                theirs = _torch_dtype_or_error(fn, _example(a), value)
                assert _dtype_or_error(name, av((3,), a), av((), kind)) == theirs, (name, a, kind)


@pytest.mark.parametrize(("dtypes", "expected"), [
    (("float32", "weak_float"), "float32"),
    (("int32", "weak_float"), "float32"),
    (("int32", "int64"), "int64"),
    (("int64", "float32"), "float32"),
    (("float32", "float64"), "float64"),
    (("bool", "weak_int"), "int64"),
    (("int32", "weak_int"), "int32"),
    (("float64", "weak_float"), "float64"),
    (("weak_int", "weak_float"), "float32"),
    (("weak_bool", "weak_bool"), "bool"),
    (("bool", "bool"), "bool"),
])
def test_promotion_cases(dtypes: tuple[str, str], expected: str) -> None:
    assert result_type(dtypes) == expected
    assert rule("mul", av((2,), dtypes[0]), av((), dtypes[1])).dtype == expected


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(BINARY_TORCH))
def test_binary_values_follow_torch_with_broadcasting(name: str, dtype: str) -> None:
    x = rand(3, 1, 4, dtype=dtype)
    y = rand(2, 4, dtype=dtype)
    y[0, 0] = x[0, 0, 0]  # a tie for the comparisons
    if name == "pow":
        x = np.abs(x)
    assert_matches(ref(name, x, y), BINARY_TORCH[name](tt(x), tt(y)))
    if name in SCALAR_OK:
        assert_matches(ref(name, x, 2.0), BINARY_TORCH[name](tt(x), 2.0), dtype if name in _ARITH else "bool")
        assert_matches(ref(name, 3, x), BINARY_TORCH[name](torch.tensor(3), tt(x)).to(
            getattr(torch, dtype) if name in _ARITH else torch.bool))


def test_binary_numerics_conventions() -> None:
    assert_matches(ref("div", np.array([1, 0, -1], np.int64), np.array(0)), [np.inf, np.nan, -np.inf], "float32")
    assert_matches(ref("div", np.array([7], np.int32), 2), [3.5], "float32")
    assert_matches(ref("maximum", np.array([1.0, np.nan]), np.array([np.nan, 0.0])), [np.nan, np.nan])
    assert_matches(ref("add", np.array([True, False]), np.array([True, False])), [True, False], "bool")
    assert_matches(ref("pow", np.array([2, 3], np.int32), 2), [4, 9], "int32")
    assert_matches(ref("add", 2, 3.5), np.array(5.5), "float32")
    assert ref("add", 2, 3).shape == () and ref("add", 2, 3).dtype == np.int64


def test_where() -> None:
    cond = RNG.random((3, 1)) > 0.5
    x = rand(3, 4, dtype="float32")
    assert_matches(ref("where", cond, x, 0.0), torch.where(tt(cond), tt(x), 0.0), "float32")
    y = rand(4, dtype="float64")
    assert_matches(ref("where", cond, x, y), torch.where(tt(cond), tt(x), tt(y)), "float64")
    with pytest.raises(DTypeError, match=r"where: cond must be bool, got float32 \(cond: float32\[3, 4\]"):
        rule("where", av((3, 4)), av((3, 4)), av((3, 4)))


# ---- reductions -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ("bool", "int32", "int64", "float32", "float64"))
def test_reduce_sum_dtypes_and_values(dtype: str) -> None:
    x = (rand(3, 4, 5) * 3).astype(dtype)
    for axes in ((), (0,), (-1, 0), (0, 1, 2)):
        for keepdims in (False, True):
            out = ref("reduce_sum", x, axes=axes, keepdims=keepdims)
            theirs = torch.sum(tt(x), dim=axes, keepdim=keepdims) if axes else tt(x)
            if axes:
                assert str(out.dtype) == str(theirs.dtype).removeprefix("torch.")
                assert_matches(out, theirs)
            else:
                assert_matches(out, x.astype(out.dtype))
    assert rule("reduce_sum", av((2,), dtype), axes=(0,)).dtype == ("int64" if dtype != "float32" and
                                                                    dtype != "float64" else dtype)


def test_reduce_max_min_and_args() -> None:
    x = np.array([[1.0, 3.0, 3.0, 0.0], [np.nan, 2.0, np.nan, 5.0], [-1.0, -4.0, -4.0, -1.0]], np.float32)
    assert_matches(ref("reduce_max", x, axes=(1,)), [3.0, np.nan, -1.0], "float32")
    assert_matches(ref("reduce_min", x, axes=(-1,), keepdims=True), [[0.0], [np.nan], [-4.0]], "float32")
    assert_matches(ref("argmax", x, axis=1), [1, 0, 0], "int64")  # first max; first NaN
    assert_matches(ref("argmin", x, axis=1), [3, 0, 1], "int64")
    assert_matches(ref("argmax", x, axis=0, keepdims=True), [[1, 0, 1, 1]], "int64")
    y = rand(4, 5, 6)
    assert_matches(ref("argmax", y, axis=-2), torch.argmax(tt(y), dim=-2))
    assert_matches(ref("reduce_max", y, axes=(0, 2)), torch.amax(tt(y), dim=(0, 2)))


# ---- structure --------------------------------------------------------------------------------

def test_reshape_permute_broadcast() -> None:
    x = rand(2, 3, 4)
    assert_matches(ref("reshape", x, shape=(4, 6)), tt(x).reshape(4, 6))
    assert_matches(ref("permute", x, perm=(2, 0, 1)), tt(x).permute(2, 0, 1))
    y = rand(3, 1)
    assert_matches(ref("broadcast_to", y, shape=(2, 3, 5)), tt(y).expand(2, 3, 5))


@pytest.mark.parametrize(("n", "start", "stop", "step"), [
    (7, 0, 7, 1), (7, 1, 6, 2), (7, 6, -1, -1), (7, 5, 0, -2), (7, 3, 3, 1), (7, 6, -1, -3), (0, 0, 0, 1),
    (5, 4, 10 - 10, -4),
])
def test_slice_matches_range(n: int, start: int, stop: int, step: int) -> None:
    x = np.arange(n, dtype=np.int64) * 10
    expected = [x[i] for i in range(start, stop, step)]
    out = ref("slice", x, starts=(start,), stops=(stop,), steps=(step,))
    assert out.tolist() == expected
    assert rule("slice", av((n,)), starts=(start,), stops=(stop,), steps=(step,)).shape == (len(expected),)


def test_pad_concat_cast_full_iota() -> None:
    x = rand(2, 3, dtype="float32")
    assert_matches(ref("pad", x, pads=((1, 0), (2, 3)), value=-2.0), F.pad(tt(x), (2, 3, 1, 0), value=-2.0))
    y = np.arange(4, dtype=np.int32).reshape(2, 2)
    out = ref("concat", x, y, x.astype("float64"), axis=-1)
    assert_matches(out, torch.cat([tt(x), tt(y), tt(x.astype("float64"))], dim=-1), "float64")
    assert_matches(ref("concat", y, y, axis=0), np.concatenate([y, y]), "int32")
    z = np.array([-2.7, -0.5, 0.5, 2.7, 0.0], np.float32)
    assert_matches(ref("cast", z, dtype="int32"), tt(z).to(torch.int32))
    assert_matches(ref("cast", z, dtype="bool"), tt(z).to(torch.bool))
    assert_matches(ref("full", shape=(2, 0, 3), value=3.0, dtype="int64"), np.full((2, 0, 3), 3), "int64")
    assert_matches(ref("full", shape=(), value=1.5, dtype="float32"), np.array(1.5), "float32")
    assert_matches(ref("iota", length=5, dtype="float32"), torch.arange(5, dtype=torch.float32))
    assert ref("stop_gradient", x) is not x


def test_gather_and_scatter_add() -> None:
    x = rand(3, 5, 2)
    idx = np.array([4, 0, -1, 2, 4])
    assert_matches(ref("gather", x, idx, axis=1), torch.index_select(tt(x), 1, tt(idx % 5)))
    idx2 = np.array([[0, 1], [2, 2]], np.int32)
    out = ref("gather", x, idx2, axis=0)
    assert out.shape == (2, 2, 5, 2)
    for i in range(2):
        for j in range(2):
            np.testing.assert_array_equal(out[i, j], x[idx2[i, j]])
    base = rand(3, 5, 2)
    upd = rand(3, 5, 2)
    theirs = tt(base).index_add(1, tt(idx % 5), tt(upd))  # repeated index 4 accumulates
    assert_matches(ref("scatter_add", base, idx, upd, axis=1), theirs)
    upd2 = rand(2, 2, 5, 2)
    expected = base.copy()
    for i in range(2):
        for j in range(2):
            expected[idx2[i, j]] += upd2[i, j]
    assert_matches(ref("scatter_add", base, idx2, upd2, axis=0), expected)
    with pytest.raises(IndexError, match="gather: index 5 is out of range for axis 1 of size 5"):
        ref("gather", x, np.array([0, 5]), axis=1)
    with pytest.raises(IndexError, match="scatter_add: index -4"):
        ref("scatter_add", base, np.array([-4]), rand(1, 5, 2), axis=0)


# ---- matmul -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_matmul_batched_broadcasting(dtype: str) -> None:
    a = rand(2, 1, 3, 4, dtype=dtype)
    b = rand(5, 4, 6, dtype=dtype)
    assert_matches(ref("matmul", a, b), torch.matmul(tt(a), tt(b)), dtype)
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert_matches(ref("matmul", ai, ai.T.copy()), ai @ ai.T, "int32")


# ---- convolution ------------------------------------------------------------------------------

CONV_CASES = [
    # (x shape, w shape, stride, padding, dilation, groups)
    ((2, 3, 9), (4, 3, 3), (1,), (0,), (1,), 1),
    ((1, 4, 10), (6, 2, 3), (2,), (1,), (2,), 2),
    ((2, 3, 7, 6), (5, 3, 3, 2), (1, 1), (1, 0), (1, 1), 1),
    ((2, 4, 8, 7), (6, 2, 3, 3), (2, 3), (1, 2), (2, 1), 2),
    ((1, 6, 6, 6), (6, 1, 3, 3), (1, 2), (1, 1), (1, 1), 6),  # depthwise
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), (1, 2, 1), (0, 1, 1), (2, 1, 1), 1),
    ((2, 4, 4, 5, 3), (4, 2, 3, 2, 1), (2, 1, 1), (1, 0, 0), (1, 2, 1), 2),
]
CONV_FN = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
CONVT_FN = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_matches_torch(case: Any, dtype: str) -> None:
    xs, ws, s, p, d, g = case
    x, w = rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)
    theirs = CONV_FN[len(xs) - 2](tt(x), tt(w), stride=s, padding=p, dilation=d, groups=g)
    out = ref("conv_nd", x, w, stride=s, padding=p, dilation=d, groups=g)
    assert_matches(out, theirs, dtype)
    assert rule("conv_nd", av(xs, dtype), av(ws, dtype), stride=s, padding=p, dilation=d, groups=g).shape == \
        tuple(theirs.shape)


CONVT_CASES = [
    # (x shape, w shape [C, O/groups, *k], stride, padding, output_padding, dilation, groups)
    ((2, 3, 5), (3, 4, 3), (2,), (1,), (1,), (1,), 1),
    ((1, 4, 6), (4, 1, 2), (3,), (0,), (2,), (2,), 2),
    ((2, 2, 4, 3), (2, 3, 3, 2), (2, 1), (1, 0), (1, 0), (1, 1), 1),
    ((1, 4, 3, 4), (4, 2, 2, 3), (2, 2), (0, 1), (0, 1), (2, 1), 2),
    ((1, 2, 3, 2, 3), (2, 2, 2, 2, 3), (1, 2, 2), (0, 0, 1), (0, 1, 1), (1, 1, 1), 1),
    ((1, 6, 2, 3, 2), (6, 1, 2, 2, 2), (2, 1, 1), (1, 0, 0), (1, 1, 0), (1, 2, 1), 3),
]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", CONVT_CASES)
def test_conv_transpose_matches_torch(case: Any, dtype: str) -> None:
    xs, ws, s, p, op, d, g = case
    x, w = rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)
    theirs = CONVT_FN[len(xs) - 2](tt(x), tt(w), stride=s, padding=p, output_padding=op, groups=g, dilation=d)
    params = {"stride": s, "padding": p, "output_padding": op, "dilation": d, "groups": g}
    assert_matches(ref("conv_transpose_nd", x, w, **params), theirs, dtype)
    assert rule("conv_transpose_nd", av(xs, dtype), av(ws, dtype), **params).shape == tuple(theirs.shape)


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_transpose_is_the_adjoint_of_conv(case: Any) -> None:
    xs, ws, s, p, d, g = case
    x, w = rand(*xs), rand(*ws)
    y_shape = rule("conv_nd", av(xs), av(ws), stride=s, padding=p, dilation=d, groups=g).shape
    y = rand(*y_shape)
    # output_padding recovers the input sizes the floor division dropped
    op = tuple((n + 2 * pi - di * (k - 1) - 1) % si for n, k, si, pi, di in zip(xs[2:], ws[2:], s, p, d))
    # the same weight: conv's [O, C/groups, *k] is conv_transpose's [C_in, C_out/groups, *k]
    back = ref("conv_transpose_nd", y, w, stride=s, padding=p, output_padding=op, dilation=d, groups=g)
    assert back.shape == x.shape
    lhs = np.sum(ref("conv_nd", x, w, stride=s, padding=p, dilation=d, groups=g) * y)
    np.testing.assert_allclose(lhs, np.sum(x * back), rtol=1e-10)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_weight_grad_matches_torch_autograd(case: Any, dtype: str) -> None:
    xs, ws, s, p, d, g = case
    x, w = rand(*xs, dtype=dtype), rand(*ws, dtype=dtype)
    wt = tt(w).requires_grad_()
    y = CONV_FN[len(xs) - 2](tt(x), wt, stride=s, padding=p, dilation=d, groups=g)
    gy = rand(*y.shape, dtype=dtype)
    (theirs,) = torch.autograd.grad(y, wt, tt(gy))
    out = ref("conv_weight_grad_nd", x, gy, kernel_size=ws[2:], stride=s, padding=p, dilation=d, groups=g)
    assert_matches(out, theirs, dtype)


# ---- pooling ----------------------------------------------------------------------------------

POOL_CASES = [
    ((2, 3, 9), (3,), (2,), (1,)),
    ((1, 2, 8), (2,), (1,), (1,)),
    ((2, 2, 7, 6), (3, 2), (2, 1), (1, 1)),
    ((1, 3, 5, 5), (2, 2), (2, 2), (0, 0)),
    ((1, 2, 4, 5, 6), (2, 3, 2), (1, 2, 2), (1, 1, 0)),
]
MAXPOOL_FN = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
AVGPOOL_FN = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("case", POOL_CASES)
def test_pools_and_their_gradients_match_torch(case: Any, dtype: str) -> None:
    xs, k, s, p = case
    n = len(xs) - 2
    x = rand(*xs, dtype=dtype)
    xt = tt(x).requires_grad_()
    params = {"kernel_size": k, "stride": s, "padding": p}
    y = MAXPOOL_FN[n](xt, k, s, p)
    assert_matches(ref("max_pool_nd", x, **params), y, dtype)
    g = rand(*y.shape, dtype=dtype)
    (gx,) = torch.autograd.grad(y, xt, tt(g))
    assert_matches(ref("max_pool_backward_nd", x, g, **params), gx, dtype)
    ya = AVGPOOL_FN[n](xt, k, s, p, count_include_pad=True)
    assert_matches(ref("avg_pool_nd", x, **params), ya, dtype)
    (ga,) = torch.autograd.grad(ya, xt, tt(g))
    assert_matches(ref("avg_pool_backward_nd", g, input_shape=xs[2:], **params), ga, dtype)
    assert_matches(ref("avg_pool_backward_nd", g, input_shape=xs, **params), ga, dtype)
    # max_pool_select is the adjoint of max_pool_backward w.r.t. g
    h = rand(*xs, dtype=dtype)
    lhs = np.sum(ref("max_pool_backward_nd", x, g, **params).astype(np.float64) * h)
    rhs = np.sum(ref("max_pool_select_nd", x, h, **params).astype(np.float64) * g)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-5)


def test_max_pool_ties_go_to_the_first_position() -> None:
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]])
    params = {"kernel_size": (2, 2), "stride": (1, 1), "padding": (0, 0)}
    g = np.ones((1, 1, 2, 2))
    # window (0,0) -> (0,0); (0,1) -> (0,1); (1,0) -> (1,0); (1,1) -> (1,1)
    expected = np.array([[[[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]]])
    np.testing.assert_array_equal(ref("max_pool_backward_nd", x, g, **params), expected)
    x2 = np.full((1, 1, 1, 4), 2.0)
    params1 = {"kernel_size": (1, 3), "stride": (1, 1), "padding": (0, 1)}
    np.testing.assert_array_equal(ref("max_pool_backward_nd", x2, np.ones((1, 1, 1, 4)), **params1),
                                  [[[[2.0, 1.0, 1.0, 0.0]]]])
    h = np.arange(4.0).reshape(1, 1, 1, 4)
    np.testing.assert_array_equal(ref("max_pool_select_nd", x2, h, **params1), [[[[0.0, 0.0, 1.0, 2.0]]]])
    # padding is -inf: an all-negative row is not beaten by padding
    neg = -np.ones((1, 1, 3))
    np.testing.assert_array_equal(ref("max_pool_nd", neg, kernel_size=(3,), stride=(1,), padding=(1,)),
                                  [[[-1.0, -1.0, -1.0]]])
    np.testing.assert_array_equal(ref("avg_pool_nd", neg, kernel_size=(3,), stride=(1,), padding=(1,)),
                                  [[[-2 / 3, -1.0, -2 / 3]]])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_smooth_max_pool_matches_torch_logsumexp(dtype: str) -> None:
    x = rand(2, 3, 7, 6, dtype=dtype)
    k, s, p, beta = (3, 2), (2, 1), (1, 1), 2.5
    xt = tt(x).requires_grad_()
    y = torch_smooth_max_pool(xt, k, s, p, beta)
    params = {"kernel_size": k, "stride": s, "padding": p, "beta": beta}
    assert_matches(ref("smooth_max_pool_nd", x, **params), y, dtype)
    g = rand(*y.shape, dtype=dtype)
    (gx,) = torch.autograd.grad(y, xt, tt(g))
    assert_matches(ref("smooth_max_pool_backward_nd", x, g, **params), gx, dtype)
    x64 = x.astype(np.float64)
    big = ref("smooth_max_pool_nd", x64, kernel_size=k, stride=s, padding=p, beta=1e4)
    zero_padded = np.pad(x64, ((0, 0), (0, 0), (1, 1), (1, 1)))
    np.testing.assert_allclose(big, ref("max_pool_nd", zero_padded, kernel_size=k, stride=s, padding=(0, 0)),
                               atol=1e-3)
    # a negative beta is a smooth minimum: smooth_max(x, -b) = -smooth_max(-x, b)
    low = ref("smooth_max_pool_nd", x64, kernel_size=k, stride=s, padding=p, beta=-2.5)
    np.testing.assert_allclose(low, -ref("smooth_max_pool_nd", -x64, kernel_size=k, stride=s, padding=p, beta=2.5),
                               rtol=1e-12)
    yt = torch_smooth_max_pool(tt(x64), k, s, p, -2.5)
    assert_matches(low, yt, "float64")
    huge = np.full((1, 1, 3), 1e30)
    assert np.isfinite(ref("smooth_max_pool_nd", huge, kernel_size=(2,), stride=(1,), padding=(0,), beta=1.0)).all()


# ---- normalisation, softmax, attention --------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_layer_norm_and_batch_norm_match_torch(dtype: str) -> None:
    x = rand(2, 3, 6, dtype=dtype) * 3 + 1
    gamma, beta = rand(6, dtype=dtype), rand(6, dtype=dtype)
    assert_matches(ref("layer_norm_last_axis", x, gamma, beta, eps=1e-5),
                   F.layer_norm(tt(x), (6,), tt(gamma), tt(beta), eps=1e-5), dtype)
    img = rand(4, 3, 5, 2, dtype=dtype)
    mean, var = rand(3, dtype=dtype), np.abs(rand(3, dtype=dtype)) + 0.1
    w, b = rand(3, dtype=dtype), rand(3, dtype=dtype)
    theirs = F.batch_norm(tt(img), tt(mean), tt(var), tt(w), tt(b), training=False, eps=1e-3)
    assert_matches(ref("batch_norm", img, mean, var, w, b, eps=1e-3), theirs, dtype)
    flat = rand(4, 3, dtype=dtype)
    theirs2 = F.batch_norm(tt(flat), tt(mean), tt(var), tt(w), tt(b), training=False, eps=1e-3)
    assert_matches(ref("batch_norm", flat, mean, var, w, b, eps=1e-3), theirs2, dtype)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_softmax_and_log_softmax_match_torch(dtype: str) -> None:
    x = rand(3, 4, 5, dtype=dtype) * 10
    x[0, 0, :] = -np.inf  # a fully -inf row (axis -1) gives NaN
    x[1, 1, 2] = -np.inf
    for axis in (-1, 0, 1):
        assert_matches(ref("softmax", x, axis=axis), torch.softmax(tt(x), dim=axis), dtype)
        assert_matches(ref("log_softmax", x, axis=axis), torch.log_softmax(tt(x), dim=axis), dtype)
    assert np.isnan(ref("softmax", x, axis=-1)[0, 0]).all()
    big = np.array([1000.0, 0.0], dtype=dtype)
    np.testing.assert_allclose(ref("softmax", big, axis=0), [1.0, 0.0])


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_attention_matches_torch_sdpa(dtype: str) -> None:
    q, k, v = rand(2, 3, 4, 8, dtype=dtype), rand(2, 3, 6, 8, dtype=dtype), rand(2, 3, 6, 5, dtype=dtype)
    mask = RNG.random((4, 6)) > 0.4
    mask[1, :] = False  # fully masked row -> 0
    for m in (None, mask, mask[None, None]):
        theirs = F.scaled_dot_product_attention(tt(q), tt(k), tt(v), attn_mask=None if m is None else tt(m),
                                                scale=0.3)
        out = ref("dot_product_attention", q, k, v, m, scale=0.3)
        assert_matches(out, theirs, dtype)
    np.testing.assert_array_equal(ref("dot_product_attention", q, k, v, mask, scale=0.3)[:, :, 1], 0.0)
    assert rule("dot_product_attention", av(q.shape, dtype), av(k.shape, dtype), av(v.shape), None, scale=1.0).shape == \
        (2, 3, 4, 5)


# ---- randomness -------------------------------------------------------------------------------

def test_random_primitives_follow_the_documented_key_mapping() -> None:
    key = np.array([42, 7], dtype=np.int64)
    gen = np.random.Generator(np.random.Philox(key=np.array([42, 7], dtype=np.uint64)))
    np.testing.assert_array_equal(ref("random_uniform", key, shape=(5,), dtype="float64"), gen.random(5))
    gen = np.random.Generator(np.random.Philox(key=np.array([42, 7], dtype=np.uint64)))
    np.testing.assert_array_equal(ref("random_uniform", key, shape=(5,), dtype="float32"),
                                  gen.random(5, dtype=np.float32))
    gen = np.random.Generator(np.random.Philox(key=np.array([42, 7], dtype=np.uint64)))
    np.testing.assert_array_equal(ref("random_normal", key, shape=(2, 3), dtype="float32"),
                                  gen.standard_normal((2, 3)).astype(np.float32))
    gen = np.random.Generator(np.random.Philox(key=np.array([42, 7], dtype=np.uint64)))
    np.testing.assert_array_equal(ref("random_randint", key, shape=(9,), low=-3, high=3, dtype="int32"),
                                  gen.integers(-3, 3, size=9, dtype=np.int64).astype(np.int32))
    negative = np.array([-1, -2], dtype=np.int64)
    gen = np.random.Generator(np.random.Philox(key=np.array([2 ** 64 - 1, 2 ** 64 - 2], dtype=np.uint64)))
    np.testing.assert_array_equal(ref("random_uniform", negative, shape=(3,), dtype="float64"), gen.random(3))


def test_random_streams() -> None:
    a = ref("random_uniform", np.array([1, 0]), shape=(1000,), dtype="float32")
    again = ref("random_uniform", np.array([1, 0]), shape=(1000,), dtype="float32")
    b = ref("random_uniform", np.array([1, 1]), shape=(1000,), dtype="float32")
    np.testing.assert_array_equal(a, again)
    assert a.dtype == np.float32 and (a >= 0).all() and (a < 1).all()
    # consecutive counters are independent streams, not shifted copies of each other
    assert not np.intersect1d(a, b).size > 5
    z = ref("random_normal", np.array([3, 9]), shape=(20000,), dtype="float64")
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05
    r = ref("random_randint", np.array([3, 9]), shape=(5000,), low=2, high=6, dtype="int64")
    assert set(np.unique(r)) == {2, 3, 4, 5}
    assert ref("random_normal", np.array([3, 9]), shape=(0, 2), dtype="float32").shape == (0, 2)


# ---- errors -----------------------------------------------------------------------------------

f32 = "float32"
CONV_P = {"stride": (1, 1), "padding": (0, 0), "dilation": (1, 1), "groups": 1}
POOL_P = {"kernel_size": (2, 2), "stride": (2, 2), "padding": (0, 0)}
ERROR_CASES: list[tuple[str, tuple[Any, ...], dict[str, Any], type[Exception], tuple[str, ...]]] = [
    ("conv_nd", (av((1, 3, 3, 3)), av((4, 3, 5, 5))), CONV_P, ShapeError,
     ("conv_nd: kernel size 5 on spatial axis 0 is larger than the padded input 3 "
      "(x: [1, 3, 3, 3], w: [4, 3, 5, 5], padding (0, 0))",)),
    ("conv_nd", (av((1, 3, 8, 8)), av((4, 3, 3, 3))), {**CONV_P, "dilation": (4, 1)}, ShapeError,
     ("conv_nd", "dilated by 4", "[1, 3, 8, 8]", "[4, 3, 3, 3]")),
    ("conv_nd", (av((1, 6, 8, 8)), av((4, 2, 3, 3))), {**CONV_P, "groups": 4}, ShapeError,
     ("conv_nd", "input channels", "6", "groups 4", "[1, 6, 8, 8]", "[4, 2, 3, 3]")),
    ("conv_nd", (av((1, 6, 8, 8)), av((4, 3, 3, 3))), {**CONV_P, "groups": 3}, ShapeError,
     ("conv_nd", "output channels", "4", "groups 3", "[1, 6, 8, 8]")),
    ("conv_nd", (av((1, 6, 8, 8)), av((4, 3, 3, 3))), {**CONV_P, "groups": 1}, ShapeError,
     ("conv_nd: w.shape[1] must be C/groups = 6/1 = 6, got 3", "[1, 6, 8, 8]", "[4, 3, 3, 3]")),
    ("conv_nd", (av((1, 3, 8, 8)), av((4, 3, 3, 3))), {**CONV_P, "stride": (0, 1)}, ShapeError,
     ("conv_nd: stride must be positive, got 0", "[1, 3, 8, 8]")),
    ("conv_nd", (av((1, 3, 8, 8)), av((4, 3, 3, 3))), {**CONV_P, "padding": (1, -1)}, ShapeError,
     ("conv_nd: padding must be non-negative, got -1", "[1, 3, 8, 8]")),
    ("conv_nd", (av((1, 3, 8, 8)), av((4, 3, 3, 3))), {**CONV_P, "padding": (1,)}, ShapeError,
     ("conv_nd: padding has 1 entries but there are 2 spatial axes", "[1, 3, 8, 8]")),
    ("conv_nd", (av((3, 8)), av((4, 3, 3))), {**CONV_P}, ShapeError, ("conv_nd: x must have rank 3, 4 or 5", "[3, 8]")),
    ("conv_nd", (av((1, 3, 8, 8)), av((4, 3, 3))), CONV_P, ShapeError,
     ("conv_nd: w must have rank 4 like x", "[4, 3, 3]")),
    ("conv_nd", (av((1, 3, 8, 8), "int64"), av((4, 3, 3, 3))), CONV_P, DTypeError,
     ("conv_nd: x must be a float tensor, got int64", "[1, 3, 8, 8]")),
    ("conv_transpose_nd", (av((1, 3, 4)), av((3, 2, 3))),
     {"stride": (2,), "padding": (0,), "output_padding": (2,), "dilation": (1,), "groups": 1}, ShapeError,
     ("conv_transpose_nd: output_padding 2", "max(stride, dilation) = 2", "[1, 3, 4]", "[3, 2, 3]")),
    ("conv_transpose_nd", (av((1, 3, 4)), av((2, 2, 3))),
     {"stride": (1,), "padding": (0,), "output_padding": (0,), "dilation": (1,), "groups": 1}, ShapeError,
     ("conv_transpose_nd: w.shape[0] must equal the input channels C = 3", "[1, 3, 4]", "[2, 2, 3]")),
    ("conv_transpose_nd", (av((1, 3, 1)), av((3, 2, 1))),
     {"stride": (1,), "padding": (2,), "output_padding": (0,), "dilation": (1,), "groups": 1}, ShapeError,
     ("conv_transpose_nd: output size -3", "[1, 3, 1]")),
    ("conv_weight_grad_nd", (av((1, 3, 8, 8)), av((1, 4, 5, 6))),
     {"kernel_size": (3, 3), **{k: v for k, v in CONV_P.items()}}, ShapeError,
     ("conv_weight_grad_nd: g must have the conv_nd output shape [1, 4, 6, 6], got [1, 4, 5, 6]",)),
    ("max_pool_nd", (av((1, 2, 6, 6)),), {**POOL_P, "padding": (2, 0)}, ShapeError,
     ("max_pool_nd: padding 2 on spatial axis 0 is more than half the kernel size 2", "[1, 2, 6, 6]")),
    ("avg_pool_nd", (av((1, 2, 2, 6)),), {**POOL_P, "kernel_size": (3, 2), "padding": (0, 0)}, ShapeError,
     ("avg_pool_nd: kernel size 3 on spatial axis 0 is larger than the padded input 2", "[1, 2, 2, 6]")),
    ("max_pool_nd", (av((1, 2, 6, 6)),), {**POOL_P, "stride": (2, 0)}, ShapeError,
     ("max_pool_nd: stride must be positive, got 0", "[1, 2, 6, 6]")),
    ("avg_pool_nd", (av((1, 2, 6, 6)),), {**POOL_P, "kernel_size": (2, 2, 2)}, ShapeError,
     ("avg_pool_nd: kernel_size has 3 entries but there are 2 spatial axes", "[1, 2, 6, 6]")),
    ("max_pool_backward_nd", (av((1, 2, 6, 6)), av((1, 2, 3, 2))), POOL_P, ShapeError,
     ("max_pool_backward_nd: g must have the max_pool_nd output shape [1, 2, 3, 3], got [1, 2, 3, 2]",)),
    ("avg_pool_backward_nd", (av((1, 2, 3, 2)),), {**POOL_P, "input_shape": (6, 6)}, ShapeError,
     ("avg_pool_backward_nd: g must have the avg_pool_nd output shape [1, 2, 3, 3], got [1, 2, 3, 2]",)),
    ("smooth_max_pool_nd", (av((1, 2, 6, 6)),), {**POOL_P, "beta": 0.0}, ValueError,
     ("smooth_max_pool_nd: beta must be a finite non-zero number, got 0.0", "[1, 2, 6, 6]")),
    ("matmul", (av((2, 3, 4)), av((5, 6))), {}, ShapeError,
     ("matmul: inner dimensions differ: a has 4 columns", "b has 5 rows", "[2, 3, 4]", "[5, 6]")),
    ("matmul", (av((2, 3, 4)), av((3, 4, 6))), {}, ShapeError,
     ("matmul: cannot broadcast a batch [2] with b batch [3]",)),
    ("matmul", (av((4,)), av((4, 6))), {}, ShapeError, ("matmul: a must have rank >= 2", "[4]")),
    ("add", (av((2, 3)), av((4, 3))), {}, ShapeError,
     ("add: cannot broadcast x [2, 3] with y [4, 3]: sizes 2 and 4 on axis -2",)),
    ("where", (av((3,), "bool"), av((2, 3)), av((2, 2))), {}, ShapeError,
     ("where: cannot broadcast cond [3] with y [2, 2]: sizes 3 and 2 on axis -1",)),
    ("sub", (av((2,), "bool"), av((2,), "bool")), {}, DTypeError, ("sub: bool", "bool[2]")),
    ("sub", (av((2,), "float32"), av((), "weak_bool")), {}, DTypeError, ("sub: bool",)),
    ("neg", (av((2, 2), "bool"),), {}, DTypeError, ("neg: x", "got bool", "[2, 2]")),
    ("gelu", (av((2,), "int64"),), {}, DTypeError, ("gelu: x must be a float tensor, got int64",)),
    ("softmax", (av((2,), "int32"),), {"axis": 0}, DTypeError, ("softmax: x must be a float tensor",)),
    ("where", (av((2,), "float32"), av((2,)), av((2,))), {}, DTypeError, ("where: cond must be bool",)),
    ("reduce_sum", (av((2, 3)),), {"axes": (2,)}, AxisError,
     ("reduce_sum: axis 2 is out of range for x of rank 2", "[2, 3]")),
    ("reduce_max", (av((2, 3)),), {"axes": (0, -2)}, AxisError, ("reduce_max: duplicate axes (0, -2)", "[2, 3]")),
    ("reduce_max", (av((2, 0)),), {"axes": (1,)}, ShapeError, ("reduce_max: cannot reduce over axis 1 of size 0",
                                                               "[2, 0]")),
    ("argmin", (av((0, 3)),), {"axis": 0}, ShapeError, ("argmin", "size 0", "[0, 3]")),
    ("softmax", (av((2, 3)),), {"axis": -3}, AxisError, ("softmax: axis -3", "[2, 3]")),
    ("reshape", (av((2, 3)),), {"shape": (4, 2)}, ShapeError,
     ("reshape: cannot reshape x [2, 3] (6 elements) to [4, 2] (8 elements)",)),
    ("reshape", (av((2, 3)),), {"shape": (-1, 6)}, ShapeError, ("reshape: shape must hold non-negative sizes",)),
    ("permute", (av((2, 3, 4)),), {"perm": (0, 0, 1)}, AxisError,
     ("permute: perm (0, 0, 1) is not a permutation", "[2, 3, 4]")),
    ("permute", (av((2, 3, 4)),), {"perm": (0, 1)}, AxisError, ("permute", "[2, 3, 4]")),
    ("broadcast_to", (av((2, 3)),), {"shape": (4, 3, 3)}, ShapeError,
     ("broadcast_to: cannot broadcast x [2, 3] to [4, 3, 3]: axis 1 has size 2",)),
    ("slice", (av((5,)),), {"starts": (0,), "stops": (7,), "steps": (1,)}, ShapeError,
     ("slice: index 6 is outside [0, 5)", "[5]")),
    ("slice", (av((5,)),), {"starts": (0,), "stops": (5,), "steps": (0,)}, ShapeError, ("slice: step",)),
    ("slice", (av((5,)),), {"starts": (0,), "stops": (-1,), "steps": (1,)}, ShapeError,
     ("slice: bounds must be normalised", "[5]")),
    ("pad", (av((2, 3)),), {"pads": ((0, 1),)}, ShapeError, ("pad: pads must have one", "[2, 3]")),
    ("pad", (av((2, 3)),), {"pads": ((0, 1), (-1, 0))}, ShapeError, ("pad: pads[1]", "[2, 3]")),
    ("concat", (av((2, 3)), av((2, 4))), {"axis": 0}, ShapeError,
     ("concat: xs[1] differs from xs[0] on axis 1 (4 vs 3)", "[2, 3]", "[2, 4]")),
    ("concat", (av((2, 3)), av((2, 3, 1))), {"axis": 0}, ShapeError, ("concat: xs[1] has rank 3",)),
    ("gather", (av((4, 3)), av((2,), "float32")), {"axis": 0}, DTypeError,
     ("gather: indices must be int32 or int64, got float32", "x: float32[4, 3]", "indices: float32[2]")),
    ("gather", (av((4, 3)), av((2,), "int64")), {"axis": 2}, AxisError, ("gather: axis 2", "[4, 3]")),
    ("scatter_add", (av((4, 3)), av((2,), "int64"), av((2, 4))), {"axis": 0}, ShapeError,
     ("scatter_add: updates must have the shape gather gives, [2, 3], got [2, 4]",)),
    ("scatter_add", (av((4, 3)), av((2,), "int64"), av((2, 3), "float64")), {"axis": 0}, DTypeError,
     ("scatter_add: updates must have base's dtype float32, got float64",)),
    ("cast", (av((2,)),), {"dtype": "float16"}, DTypeError, ("cast: dtype must be one of",)),
    ("layer_norm_last_axis", (av((2, 5)), av((4,)), av((5,))), {"eps": 1e-5}, ShapeError,
     ("layer_norm_last_axis: gamma must have shape [5]", "got [4]", "x: [2, 5]")),
    ("layer_norm_last_axis", (av((2, 5)), av((5,)), av((1, 5))), {"eps": 1e-5}, ShapeError,
     ("layer_norm_last_axis: beta must have shape [5]", "got [1, 5]")),
    ("batch_norm", (av((2, 3, 4)), av((3,)), av((4,)), av((3,)), av((3,))), {"eps": 1e-5}, ShapeError,
     ("batch_norm: var must have shape [3]", "got [4]", "x: [2, 3, 4]")),
    ("batch_norm", (av((3,)), av((3,)), av((3,)), av((3,)), av((3,))), {"eps": 1e-5}, ShapeError,
     ("batch_norm: x must have rank >= 2",)),
    ("dot_product_attention", (av((2, 4, 8)), av((2, 6, 7)), av((2, 6, 5)), None), {"scale": 1.0}, ShapeError,
     ("dot_product_attention: q and k must have the same feature size d, got 8 and 7", "q: [2, 4, 8]", "k: [2, 6, 7]")),
    ("dot_product_attention", (av((2, 4, 8)), av((2, 6, 8)), av((2, 5, 5)), None), {"scale": 1.0}, ShapeError,
     ("dot_product_attention: k and v must have the same length m, got 6 and 5", "v: [2, 5, 5]")),
    ("dot_product_attention", (av((2, 4, 8)), av((3, 6, 8)), av((3, 6, 5)), None), {"scale": 1.0}, ShapeError,
     ("dot_product_attention: k must have q's batch shape [2], got [3]",)),
    ("dot_product_attention", (av((2, 4, 8)), av((2, 6, 8)), av((2, 6, 5)), av((4, 5), "bool")), {"scale": 1.0}, ShapeError,
     ("dot_product_attention: mask must broadcast to [*B, n, m] = [2, 4, 6], got [4, 5]",)),
    ("dot_product_attention", (av((2, 4, 8)), av((2, 6, 8)), av((2, 6, 5)), av((4, 6))), {"scale": 1.0}, DTypeError,
     ("dot_product_attention: mask must be bool",)),
    ("random_uniform", (av((3,), "int64"),), {"shape": (2,), "dtype": "float32"}, ShapeError,
     ("random_uniform: key must have shape [2]",)),
    ("random_normal", (av((2,), "int64"),), {"shape": (2,), "dtype": "int32"}, DTypeError,
     ("random_normal: dtype must be float32 or float64",)),
    ("random_randint", (av((2,), "int64"),), {"shape": (2,), "low": 3, "high": 3, "dtype": "int32"}, ValueError,
     ("random_randint: needs integers low < high",)),
    ("full", (), {"shape": (2, -1), "value": 0.0, "dtype": "float32"}, ShapeError, ("full: shape",)),
    ("iota", (), {"length": -1, "dtype": "int64"}, ShapeError, ("iota: length",)),
]


@pytest.mark.parametrize(("name", "args", "params", "error", "fragments"), ERROR_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ERROR_CASES)])
def test_rule_errors(name: str, args: tuple[Any, ...], params: dict[str, Any], error: type[Exception],
                     fragments: tuple[str, ...]) -> None:
    with pytest.raises(error) as info:
        SPECS[name].rule(*args, **params)
    message = str(info.value)
    assert message.startswith(name + ":") or message.startswith(name + " "), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_error_classes_are_the_shared_hierarchy() -> None:
    assert issubclass(AxisError, ShapeError) and issubclass(ShapeError, ValueError)
    assert issubclass(DTypeError, TypeError)


def test_references_raise_the_rule_errors() -> None:
    with pytest.raises(ShapeError, match=r"conv_nd: kernel size 5"):
        ref("conv_nd", rand(1, 3, 3, 3), rand(4, 3, 5, 5), **CONV_P)
    with pytest.raises(DTypeError, match="sub: bool"):
        ref("sub", np.array([True]), np.array([False]))
    with pytest.raises(DTypeError, match="float16"):
        ref("exp", np.ones(2, np.float16))


# ---- zero-size dims ---------------------------------------------------------------------------

def test_zero_size_dims() -> None:
    e = np.zeros((0, 3), np.float32)
    assert ref("add", e, np.ones(3, np.float32)).shape == (0, 3)
    assert_matches(ref("reduce_sum", e, axes=(0,)), np.zeros(3), "float32")
    assert ref("reduce_max", e, axes=(1,)).shape == (0,)
    assert_matches(ref("matmul", np.ones((2, 0)), np.ones((0, 3))), np.zeros((2, 3)))
    assert ref("softmax", e, axis=1).shape == (0, 3)
    assert ref("softmax", e.T.copy(), axis=1).shape == (3, 0)
    assert ref("log_softmax", e.T.copy(), axis=1).shape == (3, 0)
    assert ref("layer_norm_last_axis", np.zeros((0, 4)), np.ones(4), np.zeros(4), eps=1e-5).shape == (0, 4)
    assert ref("concat", e, np.ones((2, 3), np.float32), axis=0).shape == (2, 3)
    assert ref("gather", np.ones((4, 3)), np.zeros((0,), np.int64), axis=0).shape == (0, 3)
    assert ref("conv_nd", np.ones((0, 3, 5, 5)), np.ones((2, 3, 3, 3)), **CONV_P).shape == (0, 2, 3, 3)
    assert ref("conv_nd", np.ones((1, 3, 5)), np.ones((0, 3, 2)), stride=(1,), padding=(0,), dilation=(1,),
               groups=1).shape == (1, 0, 4)
    assert ref("conv_transpose_nd", np.ones((0, 3, 5)), np.ones((3, 2, 2)), stride=(2,), padding=(0,),
               output_padding=(0,), dilation=(1,), groups=1).shape == (0, 2, 10)
    assert ref("max_pool_nd", np.ones((0, 2, 4, 4)), **POOL_P).shape == (0, 2, 2, 2)
    assert ref("avg_pool_nd", np.ones((2, 0, 4, 4)), **POOL_P).shape == (2, 0, 2, 2)
    out = ref("dot_product_attention", np.ones((2, 3, 4)), np.ones((2, 0, 4)), np.ones((2, 0, 5)), None, scale=1.0)
    assert_matches(out, np.zeros((2, 3, 5)))
    assert ref("slice", np.ones((0, 2)), starts=(0, 0), stops=(0, 2), steps=(1, 1)).shape == (0, 2)
    assert ref("pad", np.ones((0, 2)), pads=((1, 1), (0, 0))).shape == (2, 2)


# ---- symbolic dims ----------------------------------------------------------------------------

class Sym:
    """A minimal symbolic dim: an expression string supporting + - * // with ints, and ==."""

    def __init__(self, expr: str) -> None:
        self.expr = expr

    def _op(self, op: str, other: Any, swap: bool = False) -> Sym:
        a, b = (str(other), self.expr) if swap else (self.expr, str(other))
        return Sym(f"({a} {op} {b})")

    def __add__(self, o: Any) -> Sym: return self._op("+", o)
    def __radd__(self, o: Any) -> Sym: return self._op("+", o, True)
    def __sub__(self, o: Any) -> Sym: return self._op("-", o)
    def __rsub__(self, o: Any) -> Sym: return self._op("-", o, True)
    def __mul__(self, o: Any) -> Sym: return self._op("*", o)
    def __rmul__(self, o: Any) -> Sym: return self._op("*", o, True)
    def __floordiv__(self, o: Any) -> Sym: return self._op("//", o)
    def __eq__(self, o: object) -> bool: return isinstance(o, Sym) and o.expr == self.expr
    def __hash__(self) -> int: return hash(self.expr)
    def __str__(self) -> str: return self.expr

    def value(self, env: dict[str, int]) -> int:
        return int(eval(self.expr, {}, env))  # test-only evaluator of the expression


def test_rules_accept_symbolic_dims() -> None:
    n, h = Sym("n"), Sym("h")
    out = rule("conv_nd", av((n, 3, h, 9)), av((4, 3, 3, 3)), stride=(2, 1), padding=(1, 0), dilation=(1, 2),
               groups=1)
    assert out.shape[0] is n and out.shape[1] == 4 and out.shape[3] == 5
    for hv in (5, 6, 11):
        assert out.shape[2].value({"h": hv}) == F.conv2d(torch.ones(1, 3, hv, 9), torch.ones(4, 3, 3, 3),
                                                         stride=(2, 1), padding=(1, 0), dilation=(1, 2)).shape[2]
    pooled = rule("max_pool_nd", av((n, 3, h, 8)), kernel_size=(3, 2), stride=(2, 2), padding=(1, 0))
    assert pooled.shape[2].value({"h": 7}) == 4 and pooled.shape[3] == 4
    ct = rule("conv_transpose_nd", av((n, 3, h)), av((3, 2, 3)), stride=(2,), padding=(1,), output_padding=(1,),
              dilation=(1,), groups=1)
    assert ct.shape[2].value({"h": 4}) == 8
    assert rule("add", av((n, 1)), av((1, h))).shape == (n, h)
    assert rule("add", av((n, 3)), av((n, 3))).shape == (n, 3)
    assert rule("matmul", av((n, 3, 4)), av((4, h))).shape == (n, 3, h)
    assert rule("reshape", av((n, 3, 4)), shape=(n, 12)).shape == (n, 12)
    assert rule("reduce_sum", av((n, 3)), axes=(1,)).shape == (n,)
    assert rule("concat", av((n, 3)), av((h, 3)), axis=0).shape[0] == n + h
    assert rule("layer_norm_last_axis", av((n, h, 6)), av((6,)), av((6,)), eps=1e-5).shape == (n, h, 6)
    assert rule("dot_product_attention", av((n, 4, 8)), av((n, h, 8)), av((n, h, 5)), None, scale=1.0).shape == (n, 4, 5)
    sl = rule("slice", av((h,)), starts=(1,), stops=(h,), steps=(1,))
    assert sl.shape[0].value({"h": 9}) == 8
    # a mismatch between known sizes is still caught next to symbolic ones
    with pytest.raises(ShapeError, match="conv_nd: w.shape"):
        rule("conv_nd", av((n, 6, h, h)), av((4, 4, 3, 3)), **CONV_P)
