"""Errors do not depend on call order: the shape rules' results are cached (the eager interpreter's rule
cache, the recorder's memo, the convolution geometry), and a bad form of a parameter (``perm=(1.0, 0)``,
``axes=[1]``, ``kernel_size=(2.0, 2.0)``) must give the same outcome after a valid form ran as on fresh
caches: the same error type and message, or the same result."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import AxisError
from tensorplay.graph import Recorder
from tensorplay.interpreters.eager import interpreter as eager_module
from tensorplay.interpreters.eager.kernels import convolution
from tensorplay.interpreters.graph import recorder as recorder_module
from tests.samples import SAMPLES, Sample
from tests.test_graph_swap import sample_fn


def fresh_caches() -> None:
    """Every cache a shape rule's result or a parameter-derived plan is kept in, emptied."""
    eager_module._RULE_CACHE.clear()
    recorder_module._RULE_MEMO.clear()
    convolution._geometry.cache_clear()
    convolution._fused_gemm.cache_clear()


def _bad_forms(value: Any) -> Iterator[Any]:
    """Other spellings of ``value`` that compare equal to it (or nearly): a float or a bool for an int, an
    int for a bool, a numpy int, a list for a tuple; inside tuples (and nested tuples) too."""
    if isinstance(value, bool):
        yield int(value)
    elif isinstance(value, int):
        yield float(value)
        yield np.int64(value)
        if value in (0, 1):
            yield bool(value)
    elif isinstance(value, float) and value.is_integer():
        yield int(value)
    elif isinstance(value, tuple) and value:
        yield list(value)
        for i, item in enumerate(value):
            for bad in _bad_forms(item):
                yield value[:i] + (bad,) + value[i + 1:]
            if not isinstance(item, tuple):
                break  # the first scalar stands for the others


def _cases() -> Iterator[tuple[Sample, dict[str, Any]]]:
    for sample in SAMPLES:
        for name, value in sample.params.items():
            for bad in _bad_forms(value):
                yield sample, {**sample.params, name: bad}


CASES = list(_cases())


def _run(sample: Sample, params: dict[str, Any], way: str) -> tuple[str, Any]:
    """The outcome of calling the sample's primitive with ``params``: the error's type and message, or
    the result's dtype, shape and values."""
    bad = Sample(sample.prim, sample.args, params)
    fn, tensors = sample_fn(bad)
    try:
        if way == "eager":
            out = fn(*tensors)
        elif tensors:
            out = tp.graph.trace(fn, *tensors)(*tensors)
        else:
            out = getattr(Recorder(), sample.prim)(**params)
            return "recorded", (out.dtype.name, tuple(out.shape))
    except Exception as error:  # noqa: BLE001 - the outcome is what is compared
        return type(error).__name__, str(error)
    values = out.detach().numpy()
    return "ok", (values.dtype.name, values.shape, values.tobytes())


@pytest.mark.parametrize("way", ["eager", "recorded"])
@pytest.mark.parametrize("sample, params", CASES, ids=[f"{s.id}-{i}" for i, (s, _) in enumerate(CASES)])
def test_a_bad_parameter_gives_the_same_outcome_after_a_valid_call(sample: Sample, params: dict[str, Any],
                                                                   way: str) -> None:
    fresh_caches()
    first = _run(sample, params, way)
    fresh_caches()
    valid = _run(sample, sample.params, way)
    assert valid[0] in ("ok", "recorded"), valid
    after = _run(sample, params, way)
    assert after == first, f"{sample.prim} {params}: fresh caches gave {first[:2]}, after a valid call {after[:2]}"
    assert first[0] not in ("TypeError", "ValueError", "IndexError", "AttributeError", "RecursionError"), first


def test_permute_with_a_float_axis_is_an_axis_error_in_any_order() -> None:
    x = tp.ones(2, 3)
    ops = tp.ops_of(x)
    fresh_caches()
    with pytest.raises(AxisError, match=r"permute: axis must be an int, got (float )?1\.0"):
        ops.permute(x, perm=(1.0, 0))
    assert tuple(ops.permute(x, perm=(1, 0)).shape) == (3, 2)
    with pytest.raises(AxisError, match=r"permute: axis must be an int, got (float )?1\.0"):
        ops.permute(x, perm=(1.0, 0))
    with pytest.raises(AxisError, match=r"permute: axis must be an int, got (float )?1\.0"):
        x.permute(1.0, 0)
