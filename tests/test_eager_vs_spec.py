"""Every registry sample: the eager interpreter agrees with the plain-numpy reference in spec/."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.spec import SPECS
from tensorplay.ops import PRIMITIVE_NAMES
from tests.samples import SAMPLES, Sample


def to_tensor(value: Any) -> Any:
    """numpy arrays become eager tensors (sharing memory); scalars and None pass through."""
    return tp.from_numpy(value) if isinstance(value, np.ndarray) else value


def assert_same(actual: np.ndarray[Any, Any], expected: np.ndarray[Any, Any], dtype: str) -> None:
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if actual.dtype.kind == "f":
        tol = 2e-5 if actual.dtype == np.float32 else 1e-11
        np.testing.assert_allclose(actual, expected, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.id)
def test_eager_matches_spec(sample: Sample) -> None:
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in sample.args]
    expected = SPECS[sample.prim].reference(*sample.args, **sample.params)
    out = getattr(tp.eager, sample.prim)(*(to_tensor(a) for a in sample.args), **sample.params)
    assert isinstance(out, tp.Tensor)
    assert_same(out.numpy(), expected, sample.prim)
    for before, after in zip(copies, sample.args):  # inputs are never mutated
        if isinstance(before, np.ndarray):
            np.testing.assert_array_equal(before, after)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: s.id)
def test_rule_predicts_eager_aval(sample: Sample) -> None:
    from tensorplay.interpreters.eager.interpreter import aval_of
    avals = [None if a is None else aval_of(to_tensor(a)) for a in sample.args]
    aval = SPECS[sample.prim].rule(*avals, **sample.params)
    out = getattr(tp.eager, sample.prim)(*(to_tensor(a) for a in sample.args), **sample.params)
    assert tuple(aval.shape) == tuple(out.shape)
    assert aval.dtype == out.dtype.name


def test_registry_is_complete() -> None:
    """Every primitive has a shape rule, a reference, an eager implementation and samples."""
    sampled = {s.prim for s in SAMPLES}
    missing = {
        "spec": [p for p in PRIMITIVE_NAMES if p not in SPECS],
        "eager": [p for p in PRIMITIVE_NAMES if not callable(getattr(tp.eager, p, None))],
        "samples": [p for p in PRIMITIVE_NAMES if p not in sampled],
    }
    assert missing == {"spec": [], "eager": [], "samples": []}
    assert not set(SPECS) - set(PRIMITIVE_NAMES), "spec has entries that are not primitives"
