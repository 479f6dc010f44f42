"""jvp rules: every registry sample's forward-mode tangent against float64 central finite differences
along random directions, transposition consistency with the vjp rules (``<J v, u> == <v, J^T u>``),
the rules recorded by the graph recorder (also with a symbolic batch dim), and the rules
differentiated once more by the eager tape (forward-over-reverse)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.spec.errors import MissingRuleError
from tensorplay.ops import PRIMITIVE_NAMES
from tensorplay.spec.table import names
from tensorplay.rules.jvp import JVP_RULES, jvp_rule, missing_rules
from tensorplay.rules.vjp import VJP_RULES
from tensorplay.testing import assert_close, numerical_jvp
from tests.helpers import as_float64, batch_dims_like, is_float_array, placed
from tests.samples import GRAD_SAMPLES, SAMPLES, Sample, rand

ops = tp.eager
Array = np.ndarray[Any, Any]


def _tensor(value: Any) -> Any:
    return tp.from_numpy(value) if isinstance(value, np.ndarray) else value


def _call(sample: Sample, args: Sequence[Any]) -> Any:
    with np.errstate(all="ignore"):
        return getattr(ops, sample.prim)(*(_tensor(a) for a in args), **sample.params)


def _directions(args: Sequence[Any], seed: int) -> list[Array | None]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(a.shape).astype(a.dtype) if is_float_array(a) else None for a in args]


def _jvp(sample: Sample, args: Sequence[Any], tangents: Sequence[Array | None], ops_: Any = ops) -> Any:
    inputs = tuple(_tensor(a) for a in args)
    with np.errstate(all="ignore"):
        out = getattr(ops_, sample.prim)(*inputs, **sample.params)
        return JVP_RULES[sample.prim](ops_, inputs, tuple(None if t is None else tp.from_numpy(t) for t in tangents),
                                      out, **sample.params), out


# ---- completeness -----------------------------------------------------------------------------------

def test_every_primitive_has_a_jvp_rule() -> None:
    assert not missing_rules()
    assert set(PRIMITIVE_NAMES) <= set(JVP_RULES)
    assert len(PRIMITIVE_NAMES) >= 71


def test_missing_rule_is_named() -> None:
    with pytest.raises(MissingRuleError, match="jvp.*no_such_primitive"):
        jvp_rule("no_such_primitive")


def test_every_primitive_with_a_derivative_has_a_jvp_sample() -> None:
    covered = {s.prim for s in SAMPLES if s.differentiable and any(is_float_array(a) for a in s.args)}
    covered |= {"max_pool_backward_nd", "max_pool_select_nd", "abs", "relu"}  # tested by consistency and below
    no_derivative = set(names(has_derivative=False))
    assert set(PRIMITIVE_NAMES) - no_derivative <= covered


# ---- finite differences -------------------------------------------------------------------------------

def _check_fd(sample: Sample, args: list[Any], directions: list[Array | None], eps: float, rtol: float,
              atol: float) -> None:
    tangent, out = _jvp(sample, args, directions)
    expected = numerical_jvp(lambda *a: _call(sample, a), args, directions, eps=eps)
    if tangent is None:  # then the output must not move along the directions
        if expected is not None:
            assert_close(expected, np.zeros_like(expected), rtol=0.0, atol=atol, msg="no tangent, but the output moves")
        return
    assert tuple(tangent.shape) == tuple(out.shape)
    assert tangent.dtype == out.dtype
    assert_close(tangent, expected, rtol=rtol, atol=atol, check_dtype=False)


@pytest.mark.parametrize("sample", GRAD_SAMPLES, ids=[s.id for s in GRAD_SAMPLES])
def test_jvp_matches_finite_differences(sample: Sample) -> None:
    """Along a random direction of all float inputs together, and of each float input alone."""
    args = [as_float64(a) for a in sample.args]
    if sample.params.get("dtype") == "float32":  # a float32 result: finite differences need a larger step
        eps, rtol, atol = 1e-3, 1e-3, 1e-4
    else:
        eps, rtol, atol = 1e-6, 1e-6, 1e-7
    directions = _directions(args, 0)
    _check_fd(sample, args, directions, eps, rtol, atol)
    floats = [i for i, d in enumerate(directions) if d is not None]
    if len(floats) > 1:
        for i in floats:
            alone = [d if j == i else None for j, d in enumerate(directions)]
            _check_fd(sample, args, alone, eps, rtol, atol)


# ---- transposition: <J v, u> == <v, J^T u> -------------------------------------------------------------

_CONSISTENCY = [s for s in SAMPLES if any(is_float_array(a) for a in s.args)]


@pytest.mark.parametrize("sample", _CONSISTENCY, ids=[s.id for s in _CONSISTENCY])
def test_jvp_is_the_transpose_of_the_vjp(sample: Sample) -> None:
    """Also at kinks, ties and for mixed dtypes: the forward and reverse rules share their conventions."""
    args = list(sample.args)
    directions = _directions(args, 1)
    tangent, out = _jvp(sample, args, directions)
    if out.dtype.name not in ("float32", "float64"):
        assert tangent is None
        return
    if not np.all(np.isfinite(out.numpy())):
        pytest.skip("non-finite result: inner products are undefined")
    u = np.random.default_rng(2).standard_normal(tuple(out.shape)).astype(out.dtype.name)
    inputs = tuple(_tensor(a) for a in args)
    with np.errstate(all="ignore"):
        cts = VJP_RULES[sample.prim](ops, tp.from_numpy(u), inputs, out, **sample.params)
    lhs = 0.0 if tangent is None else float(np.sum(tangent.numpy().astype(np.float64) * u))
    rhs = sum(float(np.sum(ct.numpy().astype(np.float64) * d)) for ct, d in zip(cts, directions)
              if ct is not None and d is not None)
    low = any(isinstance(a, np.ndarray) and a.dtype == np.float32 for a in args) or out.dtype.name == "float32"
    np.testing.assert_allclose(lhs, rhs, rtol=1e-4 if low else 1e-10, atol=1e-4 if low else 1e-10)


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_no_tangent_in_gives_no_tangent_out(sample: Sample) -> None:
    tangent, out = _jvp(sample, sample.args, [None] * len(sample.args))
    assert tangent is None


@pytest.mark.parametrize("sample", [s for s in SAMPLES if s.args and any(is_float_array(a) for a in s.args)],
                         ids=lambda s: s.id)
def test_tangents_have_the_result_shape_and_dtype(sample: Sample) -> None:
    tangent, out = _jvp(sample, sample.args, _directions(sample.args, 3))
    if tangent is None:
        return
    assert out.dtype.name in ("float32", "float64")
    assert tuple(tangent.shape) == tuple(out.shape)
    assert tangent.dtype == out.dtype


# ---- conventions --------------------------------------------------------------------------------------

def test_non_differentiable_primitives_give_none() -> None:
    x = tp.tensor(np.array([0.5, -1.5, 2.0]))
    t = tp.tensor(np.ones(3))
    for name in ("sign", "floor", "ceil", "stop_gradient"):
        assert JVP_RULES[name](ops, (x,), (t,), getattr(ops, name)(x)) is None
    assert JVP_RULES["gt"](ops, (x, 0.0), (t, None), ops.gt(x, 0.0)) is None
    assert JVP_RULES["argmax"](ops, (x,), (t,), ops.argmax(x, axis=0), axis=0) is None


def test_ties_average_the_tangents_and_relu_abs_sqrt_at_zero() -> None:
    x = tp.tensor(np.array([1.0, 2.0, 3.0]))
    y = tp.tensor(np.array([1.0, 1.0, 4.0]))
    tx, ty = tp.tensor(np.array([2.0, 2.0, 2.0])), tp.tensor(np.array([4.0, 4.0, 4.0]))
    out = JVP_RULES["maximum"](ops, (x, y), (tx, ty), ops.maximum(x, y))
    np.testing.assert_array_equal(out.numpy(), [3.0, 2.0, 4.0])
    m = tp.tensor(np.array([[1.0, 3.0, 3.0]]))
    out = JVP_RULES["reduce_max"](ops, (m,), (tp.tensor(np.array([[1.0, 2.0, 6.0]])),),
                                  ops.reduce_max(m, axes=(1,)), axes=(1,))
    np.testing.assert_array_equal(out.numpy(), [4.0])
    z = tp.tensor(np.array([0.0, 4.0]))
    t = tp.tensor(np.array([0.0, 1.0]))
    np.testing.assert_array_equal(JVP_RULES["sqrt"](ops, (z,), (t,), ops.sqrt(z)).numpy(), [0.0, 0.25])
    t1 = tp.tensor(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(JVP_RULES["relu"](ops, (z,), (t1,), ops.relu(z)).numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(JVP_RULES["abs"](ops, (z,), (t1,), ops.abs(z)).numpy(), [0.0, 1.0])


def test_max_pool_tangent_is_read_at_the_first_maximum() -> None:
    x = tp.tensor(np.array([[[[1.0, 1.0], [0.0, 1.0]]]]))
    t = tp.tensor(np.array([[[[5.0, 7.0], [9.0, 11.0]]]]))
    params: dict[str, Any] = dict(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0))
    out = JVP_RULES["max_pool_nd"](ops, (x,), (t,), ops.max_pool_nd(x, **params), **params)
    np.testing.assert_array_equal(out.numpy(), [[[[5.0]]]])


def test_fully_masked_attention_row_has_zero_tangent() -> None:
    q, k, v = rand((1, 2, 3), "float64", 1), rand((1, 4, 3), "float64", 2), rand((1, 4, 5), "float64", 3)
    mask = np.ones((2, 4), bool)
    mask[0] = False
    inputs = (tp.tensor(q), tp.tensor(k), tp.tensor(v), tp.tensor(mask))
    ts = tuple(tp.tensor(np.ones_like(a)) for a in (q, k, v)) + (None,)
    out = JVP_RULES["dot_product_attention"](ops, inputs, ts, ops.dot_product_attention(*inputs, scale=0.5), scale=0.5)
    assert np.all(out.numpy()[0, 0] == 0.0)
    assert np.all(np.isfinite(out.numpy()))


def test_mixed_dtypes_give_the_result_dtype() -> None:
    x = tp.tensor(rand((2, 3), "float32", 1))
    y = tp.tensor(rand((3,), "float64", 2))
    out = JVP_RULES["mul"](ops, (x, y), (tp.ones_like(x), None), ops.mul(x, y))
    assert out.dtype.name == "float64" and tuple(out.shape) == (2, 3)
    out = JVP_RULES["add"](ops, (x, y), (None, tp.ones_like(y)), ops.add(x, y))
    assert tuple(out.shape) == (2, 3)  # a broadcast input's tangent reaches every position it reached


def test_a_wrong_rule_is_caught() -> None:
    """The finite-difference check can fail: a rule with a wrong sign is rejected."""
    sample = Sample("sin", (rand((3,), "float64", 1),))
    good = JVP_RULES["sin"]
    JVP_RULES["sin"] = lambda ops_, p, t, out: ops_.neg(good(ops_, p, t, out))
    try:
        with pytest.raises(AssertionError):
            _check_fd(sample, list(sample.args), _directions(sample.args, 0), 1e-6, 1e-6, 1e-7)
    finally:
        JVP_RULES["sin"] = good


# ---- the same rules under the graph recorder ----------------------------------------------------------

def _traced(sample: Sample, dynamic_batch: bool) -> None:
    from tensorplay.interpreters.graph.trace import trace

    args = list(sample.args)
    directions = _directions(args, 4)
    expected, _ = _jvp(sample, args, directions)
    positions = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    tangent_positions = [i for i, d in enumerate(directions) if d is not None]

    def rule_graph(*ts: Any) -> Any:
        rec = ts[0].interpreter
        full = placed(args, positions, ts)
        tangents = placed([None] * len(args), tangent_positions, ts[len(positions):])
        out = getattr(rec, sample.prim)(*full, **sample.params)
        return JVP_RULES[sample.prim](rec, tuple(full), tuple(tangents), out, **sample.params)

    arrays = [args[i] for i in positions] + [directions[i] for i in tangent_positions]
    dynamic = batch_dims_like(arrays, args[positions[0]]) if dynamic_batch else None
    got = trace(rule_graph, *arrays, dynamic=dynamic)(*arrays)
    np.testing.assert_allclose(np.asarray(got), expected.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("sample", GRAD_SAMPLES, ids=[s.id for s in GRAD_SAMPLES])
def test_rules_run_under_the_graph_recorder(sample: Sample) -> None:
    _traced(sample, dynamic_batch=False)


_BATCHED = [s for s in GRAD_SAMPLES if s.prim in (
    "add", "mul", "div", "pow", "exp", "tanh", "sqrt", "maximum", "where", "reduce_max", "matmul", "conv_nd",
    "conv_transpose_nd", "conv_weight_grad_nd", "max_pool_nd", "avg_pool_nd", "smooth_max_pool_nd", "smooth_max_pool_backward_nd",
    "avg_pool_backward_nd", "layer_norm_last_axis", "batch_norm", "softmax", "log_softmax", "dot_product_attention", "gelu", "concat",
    "gather", "scatter_add", "slice", "pad") and np.ndim(s.args[0]) > 1]


@pytest.mark.parametrize("sample", _BATCHED, ids=[s.id for s in _BATCHED])
def test_rules_with_a_symbolic_batch_dim(sample: Sample) -> None:
    """The rules do no arithmetic that needs a concrete size."""
    _traced(sample, dynamic_batch=True)


# ---- nested: the jvp rules differentiated by the eager tape ------------------------------------------

_NESTED = [s for s in GRAD_SAMPLES if s.params.get("dtype") != "float32"
           and s.prim not in ("reduce_max", "reduce_min", "maximum", "minimum")]


@pytest.mark.parametrize("sample", _NESTED, ids=[s.id for s in _NESTED])
def test_jvp_rules_differentiate_on_the_tape(sample: Sample) -> None:
    """``d/dx <jvp(x; v), u>`` by ``backward`` through the rule equals a finite difference along ``w``."""
    args = [as_float64(a) for a in sample.args]
    directions = _directions(args, 5)
    ws = _directions(args, 6)

    def inner(arrays: Sequence[Any], grad: bool) -> tuple[float, list[Any], Any]:
        inputs = [tp.tensor(a, requires_grad=grad) if is_float_array(a) else _tensor(a) for a in arrays]
        out = getattr(ops, sample.prim)(*inputs, **sample.params)
        tangent = JVP_RULES[sample.prim](ops, tuple(inputs), tuple(None if d is None else tp.tensor(d)
                                                                  for d in directions), out, **sample.params)
        u = tp.tensor(np.random.default_rng(7).standard_normal(tuple(out.shape)))
        return (tangent * u).sum(), inputs, tangent

    total, inputs, tangent = inner(args, True)
    if not total.requires_grad:
        return  # the tangent does not depend on the primal (a linear primitive)
    wrt = [t for t in inputs if isinstance(t, tp.Tensor) and t.requires_grad]
    grads = tp.autograd.grad(total, wrt, allow_unused=True)
    got = sum(float(np.sum(g.numpy() * w)) for g, w in zip(grads, [w for w in ws if w is not None])
              if g is not None)
    eps = 1e-5
    with tp.no_grad():
        plus = inner([np.asarray(a + eps * w) if w is not None else a for a, w in zip(args, ws)], False)[0].item()
        minus = inner([np.asarray(a - eps * w) if w is not None else a for a, w in zip(args, ws)], False)[0].item()
    np.testing.assert_allclose(got, (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-6)
