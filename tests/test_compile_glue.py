"""The generated glue of a compiled specialization (:mod:`tensorplay.compiler.glue`): the gather function
reads every kind of placeholder where its plan says, in order; the write-back copies each new value into
its array (unless written there already) and counts the owner's version; the effects function applies each
kind of effect in order. Checked on hand-made plans against the objects themselves."""

from __future__ import annotations

from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay import optim
from tensorplay.compiler.capture import Effect, InputPlan
from tensorplay.compiler.glue import effects_function, gather_function, write_back_function


def _tensors() -> tuple[list[Any], list[Any]]:
    rng = np.random.default_rng(0)
    leaves = [tp.tensor(rng.standard_normal(3)), 7, tp.tensor(rng.standard_normal((2, 2)))]
    leaves[2].grad = tp.tensor(np.full((2, 2), 5.0))
    reads = [tp.tensor(rng.standard_normal(4)), tp.tensor(rng.standard_normal(4))]
    reads[1].grad = tp.tensor(np.arange(4.0))
    return leaves, reads


def test_gather_reads_each_kind_of_placeholder_in_order() -> None:
    leaves, reads = _tensors()
    captured = tp.tensor(np.ones(2))
    p = tp.tensor(np.zeros(5), requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9)
    const = np.array([1.0, 2.0])
    lr = [0.25]
    plans = [InputPlan("arg", 2), InputPlan("state", 1), InputPlan("const", ref=const), InputPlan("tensor", ref=captured),
             InputPlan("state_grad", 1), InputPlan("state_grad", 0), InputPlan("arg_grad", 2),
             InputPlan("opt_state", ref=(opt, p), key="momentum_buffer"), InputPlan("opt_scalar", ref=lambda: lr[0], key="float32"),
             InputPlan("key"), InputPlan("arg", 0)]
    gather = gather_function(plans)
    got = gather(leaves, reads)
    assert len(got) == len(plans)
    assert got[0] is leaves[2]._data and got[1] is reads[1]._data and got[2] is const and got[3] is captured._data
    assert got[4] is reads[1].grad._data and got[5] is reads[0]._data  # no .grad: the state's own data
    assert got[6] is leaves[2].grad._data and got[10] is leaves[0]._data
    buffer = opt.state.get_state(p)["momentum_buffer"]  # created as zeros by the first call, then kept
    assert got[7] is buffer and not buffer.any() and buffer.shape == (5,)
    assert got[8].dtype == np.float32 and got[8].shape == () and float(got[8]) == 0.25
    lr[0] = 0.5  # read again at every call
    again = gather(leaves, reads)
    assert float(again[8]) == 0.5 and again[7] is buffer
    assert not np.array_equal(got[9], again[9])  # a fresh random key per call


def test_write_back_copies_what_was_not_written_in_place_and_counts_versions() -> None:
    leaves, reads = _tensors()
    p = tp.tensor(np.zeros(3))
    plans = [InputPlan("state", 0), InputPlan("arg", 0), InputPlan("tensor", ref=p), InputPlan("const", ref=np.zeros(1))]
    arrays = [reads[0]._data, leaves[0]._data, p._data, plans[3].ref]
    versions = [t._version[0] if t._version else 0 for t in (reads[0], leaves[0], p)]
    new_state = np.full(4, 2.0)
    result = ["output", new_state, arrays[1], np.full(3, 9.0)]  # the argument's new value written in place
    before = arrays[1].copy()
    write_back_function(plans, [0, 1, 2], 1)(arrays, result, leaves, reads)
    np.testing.assert_array_equal(reads[0]._data, new_state)
    assert reads[0]._data is arrays[0]  # copied into the state's own array
    np.testing.assert_array_equal(leaves[0]._data, before)
    np.testing.assert_array_equal(p._data, np.full(3, 9.0))
    now = [t._version[0] for t in (reads[0], leaves[0], p)]
    assert now == [v + 1 for v in versions]


def test_effects_apply_in_order() -> None:
    leaves, reads = _tensors()
    extra = tp.tensor(np.zeros(2))
    p = tp.tensor(np.zeros(3), requires_grad=True)
    opt = optim.Adam([p])
    effects = [Effect("copy_arg", ("arg", 0)), Effect("set_grad", ("state", 0)), Effect("set_grad", ("arg", 2), has_value=False),
               Effect("set_grad", ("tensor", 0)), Effect("opt_state", ("param", 0), key="exp_avg", optimizer=(opt, p)),
               Effect("opt_step", ("param", 0), has_value=False, optimizer=(opt, p)),
               Effect("opt_step", ("param", 0), has_value=False, optimizer=(opt, p))]
    held = np.full(4, 3.0)
    moment = np.full(3, 0.5)
    result = ["out", np.full(3, 1.5), held, np.ones(2), moment]
    apply = effects_function(effects, 1, [extra])
    seen = {id(held)}  # memory another value of the call holds: the .grad gets a copy
    apply(result, leaves, reads, seen)
    np.testing.assert_array_equal(leaves[0]._data, np.full(3, 1.5))
    assert reads[0].grad is not None and reads[0].grad._data is not held
    np.testing.assert_array_equal(reads[0].grad._data, held)
    assert leaves[2].grad is None
    assert extra.grad is not None and extra.grad._data is result[3]
    state = opt.state.get_state(p)
    assert state["exp_avg"] is not moment and np.array_equal(state["exp_avg"], moment) and state["step"] == 2
