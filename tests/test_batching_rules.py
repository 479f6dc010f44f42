"""Batching rules: every registry sample, batched three ways over perturbed copies of its inputs
(batch axis first, second, last; some inputs unbatched), against a Python loop calling the primitive
once per sample; the same rules recorded by the graph recorder with a symbolic batch size."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.spec.errors import MissingRuleError
from tensorplay.ops import PRIMITIVE_NAMES
from tensorplay.rules.batching import BATCH_RULES, batch_rule, missing_rules
from tensorplay.rules.util import move_axis, move_to_front
from tests.samples import SAMPLES, Sample, rand

ops = tp.eager
Array = np.ndarray[Any, Any]
BATCH = 3


# ---- completeness -----------------------------------------------------------------------------------

def test_every_primitive_has_a_batching_rule() -> None:
    assert not missing_rules()
    assert set(PRIMITIVE_NAMES) <= set(BATCH_RULES)
    assert len(PRIMITIVE_NAMES) >= 71


def test_every_primitive_has_a_batching_sample() -> None:
    assert set(PRIMITIVE_NAMES) <= {s.prim for s in SAMPLES}


def test_missing_rule_is_named() -> None:
    with pytest.raises(MissingRuleError, match="no_such_primitive"):
        batch_rule("no_such_primitive")


def test_a_batch_axis_out_of_range_is_an_error() -> None:
    from tensorplay.spec.errors import AxisError

    x = tp.from_numpy(rand((2, 3), "float64", 1))
    with pytest.raises(AxisError, match="batch axis 2 of input 0 of 'exp'"):
        BATCH_RULES["exp"](ops, (x,), (2,))


# ---- batches of perturbed copies ----------------------------------------------------------------------

def _copy(value: Any, b: int, salt: int) -> Any:
    """Sample ``b`` of a batch: floats moved by a little noise (values stay in their domain), integer
    and bool arrays rolled (indices stay in range, keys change), scalars and ``None`` as they are."""
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype.kind == "f":
        rng = np.random.default_rng(1000 * salt + b)
        noise = rng.uniform(0.0, 0.05, size=value.shape) * (np.abs(value) + 1.0)
        with np.errstate(invalid="ignore"):
            out = np.where(np.isfinite(value), value + noise, value)
        return out.astype(value.dtype)
    if value.ndim == 0 or value.size < 2:
        return value.copy()
    return np.roll(value.ravel(), b).reshape(value.shape)


def _configs(sample: Sample) -> list[tuple[str, tuple[int | None, ...]]]:
    """(name, one batch position or ``None`` per argument) for the sample's tensor arguments."""
    tensors = [i for i, a in enumerate(sample.args) if isinstance(a, np.ndarray)]
    n = len(sample.args)

    def make(pick: Any) -> tuple[int | None, ...]:
        return tuple(pick(i, sample.args[i]) if i in tensors else None for i in range(n))

    configs = [("front", make(lambda i, a: 0)),
               ("second", make(lambda i, a: 1 if a.ndim >= 1 else 0)),
               ("last", make(lambda i, a: -1))]
    if len(tensors) > 1:
        first = tensors[0]
        configs.append(("first-only", make(lambda i, a: 0 if i == first else None)))
        configs.append(("rest-only", make(lambda i, a: None if i == first else -1)))
        configs.append(("mixed", make(lambda i, a: (1 if a.ndim else 0) if i % 2 else None)))
    configs.append(("none", make(lambda i, a: None)))
    return [(name, dims) for name, dims in configs if name == "none" or any(d is not None for d in dims)]


def _stacked(sample: Sample, dims: tuple[int | None, ...]) -> tuple[list[Any], list[list[Any]]]:
    """The batched arguments and, per batch entry, the unbatched arguments of that entry."""
    per_sample = [[_copy(a, b, i) if d is not None else a for i, (a, d) in enumerate(zip(sample.args, dims))]
                  for b in range(BATCH)]
    batched: list[Any] = []
    for i, (a, d) in enumerate(zip(sample.args, dims)):
        if d is None:
            batched.append(a)
        else:
            batched.append(np.stack([per_sample[b][i] for b in range(BATCH)], axis=d))
    return batched, per_sample


def _tensor(value: Any) -> Any:
    return tp.from_numpy(value) if isinstance(value, np.ndarray) else value


def _loop(sample: Sample, per_sample: list[list[Any]]) -> Array:
    with np.errstate(all="ignore"):
        outs = [getattr(ops, sample.prim)(*(_tensor(a) for a in args), **sample.params).numpy()
                for args in per_sample]
    return np.stack(outs)


def _tolerance(dtype: np.dtype[Any]) -> dict[str, float]:
    if dtype == np.float32:
        return {"rtol": 2e-5, "atol": 2e-6}
    if dtype == np.float64:
        return {"rtol": 1e-11, "atol": 1e-12}
    return {"rtol": 0, "atol": 0}


def _check(sample: Sample, dims: tuple[int | None, ...]) -> None:
    batched, per_sample = _stacked(sample, dims)
    expected = _loop(sample, per_sample)
    with np.errstate(all="ignore"):
        out, out_dim = BATCH_RULES[sample.prim](ops, tuple(_tensor(a) for a in batched), dims, **sample.params)
    got = out.numpy()
    if all(d is None for d in dims):
        assert out_dim is None
    if out_dim is None:
        got = np.broadcast_to(got, (BATCH,) + got.shape)
    else:
        assert isinstance(out_dim, int) and 0 <= out_dim < got.ndim
        got = np.moveaxis(got, out_dim, 0)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, **_tolerance(expected.dtype))


_CASES = [(s, name, dims) for s in SAMPLES for name, dims in _configs(s)]


@pytest.mark.parametrize("sample,config,dims", _CASES, ids=[f"{s.id}-{name}" for s, name, _ in _CASES])
def test_batching_rule_matches_a_loop(sample: Sample, config: str, dims: tuple[int | None, ...]) -> None:
    _check(sample, dims)


def test_the_copies_differ() -> None:
    """The check can fail: batch entries are distinct, so a rule that mixed samples up would be caught."""
    x = rand((2, 3), "float64", 1)
    assert not np.allclose(_copy(x, 0, 0), _copy(x, 1, 0))
    idx = np.array([3, 0, 1], np.int64)
    assert not np.array_equal(_copy(idx, 0, 0), _copy(idx, 1, 0))


def test_a_wrong_rule_is_caught() -> None:
    """A rule that reduces over the wrong axis, or reports the wrong batch position, fails the check."""
    sample = Sample("reduce_sum", (rand((3, 4), "float64", 1),), {"axes": (0,), "keepdims": False})
    good = BATCH_RULES["reduce_sum"]

    def wrong_axis(ops_: Any, inputs: Any, dims: Any, **params: Any) -> Any:
        (x,) = inputs
        return ops_.reduce_sum(move_to_front(ops_, x, dims[0]), axes=(0,), keepdims=False), None

    def wrong_dim(ops_: Any, inputs: Any, dims: Any, **params: Any) -> Any:
        out, _ = good(ops_, inputs, dims, **params)
        return out, 1

    for bad in (wrong_axis, wrong_dim):
        BATCH_RULES["reduce_sum"] = bad
        try:
            with pytest.raises(AssertionError):
                _check(sample, (0,))
        finally:
            BATCH_RULES["reduce_sum"] = good


# ---- specific cases ---------------------------------------------------------------------------------

def test_gather_with_batched_indices_wraps_negative_ones_per_sample() -> None:
    x = np.arange(2 * 4 * 3, dtype=np.float64).reshape(2, 4, 3)  # batch of 2 at axis 0
    idx = np.array([[-1, 0], [1, -4]], np.int64)
    out, d = BATCH_RULES["gather"](ops, (tp.from_numpy(x), tp.from_numpy(idx)), (0, 0), axis=0)
    got = np.moveaxis(out.numpy(), d, 0)
    np.testing.assert_array_equal(got, np.stack([np.take(x[b], idx[b], axis=0) for b in range(2)]))
    for bad in (4, -5):  # out of range for one sample: an error, not a row of the other sample
        idx_bad = idx.copy()
        idx_bad[0, 1] = bad
        with pytest.raises(tp.IndexRangeError, match=r"vmap\(gather\): index .* at position \[0, 1\]"):
            BATCH_RULES["gather"](ops, (tp.from_numpy(x), tp.from_numpy(idx_bad)), (0, 0), axis=0)


def test_scatter_add_with_batched_indices_accumulates_within_each_sample() -> None:
    base = np.zeros((2, 3, 4))
    idx = np.array([[0, 0, 2], [3, 3, 3]], np.int64)
    upd = np.ones((2, 3, 3))
    out, d = BATCH_RULES["scatter_add"](ops, (tp.from_numpy(base), tp.from_numpy(idx), tp.from_numpy(upd)),
                                         (0, 0, 0), axis=-1)
    got = np.moveaxis(out.numpy(), d, 0)
    expected = np.zeros((2, 3, 4))
    expected[0, :, 0] = 2
    expected[0, :, 2] = 1
    expected[1, :, 3] = 3
    np.testing.assert_array_equal(got, expected)
    bad = idx.copy()
    bad[1, 2] = 4  # in range of the flattened rows (sample 0's), out of range for sample 1
    with pytest.raises(tp.IndexRangeError, match=r"vmap\(scatter_add\): index 4 at position \[1, 2\]"):
        BATCH_RULES["scatter_add"](ops, (tp.from_numpy(base), tp.from_numpy(bad), tp.from_numpy(upd)),
                                   (0, 0, 0), axis=-1)


def test_vmapped_gather_refuses_a_sample_index_out_of_range() -> None:
    """Through tp.func.vmap and its cached path: a bad index of one sample raises, naming vmap."""
    import tensorplay.func as T
    x = tp.from_numpy(np.arange(12.0).reshape(3, 4))
    f = T.vmap(lambda row, i: row[i])
    good = tp.from_numpy(np.array([3, -4, 0]))
    for _ in range(3):  # uncached, traced into the cache, cached
        np.testing.assert_array_equal(f(x, good).numpy(), [3.0, 4.0, 8.0])
        with pytest.raises(IndexError):
            f(x, tp.from_numpy(np.array([0, 4, 0])))


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("dims", [(0, None), (None, 0), (1, 2), (None, -1), (-1, None)])
def test_conv_family_with_groups(groups: int, dims: tuple[int | None, int | None]) -> None:
    """conv, conv_transpose and conv_weight_grad with the batch in either operand or both, grouped."""
    x = rand((2, 4, 6, 5), "float64", 1)
    w = rand((6, 4 // groups, 3, 2), "float64", 2)
    conv = dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=groups)
    y = ops.conv_nd(tp.from_numpy(x), tp.from_numpy(w), **conv).numpy()
    wt = rand((4, 6 // groups, 3, 2), "float64", 3)
    cases = [
        Sample("conv_nd", (x, w), conv),
        Sample("conv_transpose_nd", (x, wt), dict(stride=(1, 2), padding=(0, 1), output_padding=(0, 1),
                                               dilation=(2, 1), groups=groups)),
        Sample("conv_weight_grad_nd", (x, y), dict(conv, kernel_size=(3, 2))),
    ]
    for sample in cases:
        _check(sample, dims)


def test_attention_with_only_the_mask_batched() -> None:
    q, k, v = rand((2, 3, 4), "float64", 1), rand((2, 5, 4), "float64", 2), rand((2, 5, 6), "float64", 3)
    mask = rand((3, 5), "float64", 4) > 0
    _check(Sample("dot_product_attention", (q, k, v, mask), {"scale": 0.5}), (None, None, None, 0))
    _check(Sample("dot_product_attention", (q, k, v, mask), {"scale": 0.5}), (None, 0, None, 1))


def test_layer_norm_and_batch_norm_with_batched_parameters() -> None:
    x = rand((2, 3, 8), "float64", 1)
    g, b = rand((8,), "float64", 2), rand((8,), "float64", 3)
    for dims in [(None, 0, None), (None, None, 0), (0, 0, None), (2, None, 0), (None, 0, 0)]:
        _check(Sample("layer_norm_last_axis", (x, g, b), {"eps": 1e-5}), dims)
    args = (rand((4, 3, 5), "float64", 1), rand((3,), "float64", 2), rand((3,), "float64", 3, 0.5, 2.0),
            rand((3,), "float64", 4), rand((3,), "float64", 5))
    for dims in [(None, 0, None, None, None), (None, None, 0, 0, None), (1, None, None, None, 0),
                 (0, 0, 0, 0, 0)]:
        _check(Sample("batch_norm", args, {"eps": 1e-5}), dims)


def test_random_with_a_batched_key_draws_per_key_and_unbatched_key_draws_once() -> None:
    keys = np.array([[1, 2], [1, 3], [5, 2]], np.int64)
    out, d = BATCH_RULES["random_normal"](ops, (tp.from_numpy(keys),), (0,), shape=(2, 3), dtype="float64")
    assert d == 0
    rows = out.numpy()
    for b in range(3):
        np.testing.assert_array_equal(rows[b], ops.random_normal(tp.from_numpy(keys[b]), shape=(2, 3),
                                                                 dtype="float64").numpy())
    assert not np.allclose(rows[0], rows[1])
    out, d = BATCH_RULES["random_uniform"](ops, (tp.from_numpy(keys[0]),), (None,), shape=(2,), dtype="float32")
    assert d is None and tuple(out.shape) == (2,)


def test_move_axis_helpers() -> None:
    x = tp.from_numpy(np.arange(24.0).reshape(2, 3, 4))
    np.testing.assert_array_equal(move_axis(ops, x, 2, 0).numpy(), np.moveaxis(x.numpy(), 2, 0))
    np.testing.assert_array_equal(move_axis(ops, x, 0, -1).numpy(), np.moveaxis(x.numpy(), 0, -1))
    assert move_to_front(ops, x, None) is x


# ---- the same rules under the graph recorder, with a symbolic batch size -------------------------------

def _record_batched(sample: Sample, dims: tuple[int | None, ...], symbolic: bool) -> tuple[Array, Array]:
    from tensorplay.interpreters.graph.trace import trace

    batched, per_sample = _stacked(sample, dims)
    expected = _loop(sample, per_sample)
    positions = [i for i, a in enumerate(batched) if isinstance(a, np.ndarray)]
    arrays = [batched[i] for i in positions]

    def fn(*ts: Any) -> Any:
        rec = ts[0].interpreter
        full = list(batched)
        for i, t in zip(positions, ts):
            full[i] = t
        out, out_dim = BATCH_RULES[sample.prim](rec, tuple(full), dims, **sample.params)
        return move_to_front(rec, out, out_dim)

    dynamic = None
    if symbolic:
        dynamic = {j: {dims[i] % arrays[j].ndim: "B"} for j, i in enumerate(positions) if dims[i] is not None}
    with np.errstate(all="ignore"):
        got = np.asarray(trace(fn, *arrays, dynamic=dynamic)(*arrays))
    return got, expected


_SYMBOLIC_CASES = [s for s in SAMPLES if s.prim not in ("full", "iota", "random_uniform", "random_normal",
                                                        "random_randint")]


@pytest.mark.parametrize("sample", _SYMBOLIC_CASES, ids=[s.id for s in _SYMBOLIC_CASES])
def test_batching_rules_with_a_symbolic_batch_size(sample: Sample) -> None:
    """Rules never read the batch size as a number: recorded with a symbolic ``B`` they replay to the loop."""
    configs = dict(_configs(sample))
    chosen = [configs["front"], configs.get("mixed", configs["last"])]
    if sample.prim in ("conv_nd", "conv_transpose_nd", "conv_weight_grad_nd"):  # both batched needs a concrete size
        chosen = [configs["first-only"], configs["rest-only"]]
    for dims in chosen:
        got, expected = _record_batched(sample, dims, symbolic=True)
        assert got.shape == expected.shape
        np.testing.assert_allclose(got, expected, **_tolerance(expected.dtype))


@pytest.mark.parametrize("prim", ["conv_nd", "conv_weight_grad_nd", "random_normal"])
def test_rules_needing_a_concrete_batch_size_say_so(prim: str) -> None:
    sample = next(s for s in SAMPLES if s.prim == prim)
    dims = tuple(0 if isinstance(a, np.ndarray) else None for a in sample.args)
    with pytest.raises(MissingRuleError, match=f"{prim}.*concrete batch size"):
        _record_batched(sample, dims, symbolic=True)
    got, expected = _record_batched(sample, dims, symbolic=False)  # a concrete size under the recorder works
    np.testing.assert_allclose(got, expected, **_tolerance(expected.dtype))
