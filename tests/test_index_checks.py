"""Range checks of integer indices hold under every interpreter: ``cross_entropy``, ``nll_loss``,
``embedding`` and ``one_hot`` refuse an out-of-range or negative target/index eagerly, under ``grad``,
``jvp``, ``vmap``, ``jacrev`` and in a graph module called with new inputs (a recorded ``check_index``
whose output the lookup reads), naming the function, the position and the value; writes into an
``Index`` tensor are checked against its bound."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as F
import tensorplay.nn.functional as NF
from tensorplay.testing import check_interpreters

AnyTensor = tp.Tensor[*tuple[Any, ...]]
LOGITS = tp.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
TABLE = tp.tensor(np.random.default_rng(1).standard_normal((5, 2)).astype(np.float32))
GOOD_TARGET = tp.tensor([1, 3, 0])


def _cross_entropy(logits: AnyTensor, target: AnyTensor) -> AnyTensor:
    return NF.cross_entropy(logits, target)


def _nll(logits: AnyTensor, target: AnyTensor) -> AnyTensor:
    return NF.nll_loss(logits.log_softmax(-1), target)


def _embedding(table: AnyTensor, ids: AnyTensor) -> AnyTensor:
    return NF.embedding(ids, table).sum()


def _one_hot(logits: AnyTensor, ids: AnyTensor) -> AnyTensor:
    return (NF.one_hot(ids, 4).float() * logits).sum()


# function, its float argument, the message's "function: what", the size of the valid range
CASES: dict[str, tuple[Callable[[AnyTensor, AnyTensor], AnyTensor], AnyTensor, str, int]] = {
    "cross_entropy": (_cross_entropy, LOGITS, "cross_entropy: target", 4),
    "nll_loss": (_nll, LOGITS, "nll_loss: target", 4),
    "embedding": (_embedding, TABLE, "embedding: index", 5),
    "one_hot": (_one_hot, LOGITS, "one_hot: class index", 4),
}


def _ways(fn: Callable[[AnyTensor, AnyTensor], AnyTensor], w: AnyTensor,
          target: AnyTensor) -> dict[str, Callable[[], object]]:
    gm = tp.graph.trace(fn, w, GOOD_TARGET)  # traced with valid targets, called with others
    return {
        "eager": lambda: fn(w, target),
        "grad": lambda: F.grad(fn)(w, target),
        "jvp": lambda: F.jvp(lambda v: fn(v, target), (w,), (tp.ones_like(w),)),
        "vmap": lambda: F.vmap(fn, in_dims=(None, 0))(w, tp.stack([GOOD_TARGET, target])),
        "jacrev": lambda: F.jacrev(fn)(w, target),
        "vmap_of_grad": lambda: F.vmap(F.grad(fn), in_dims=(None, 0))(w, tp.stack([target, GOOD_TARGET])),
        "graph_module": lambda: gm(w, target),
        "traced_symbolically": lambda: tp.graph.evaluate(gm.graph, tp.eager, w, target),
    }


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("bad, position", [(4, 1), (7, 1), (-1, 1), (-5, 2)])
def test_out_of_range_is_refused_under_every_interpreter(case: str, bad: int, position: int) -> None:
    fn, w, what, size = CASES[case]
    if 0 <= bad < size:
        pytest.skip(f"{bad} is in range for {case}")
    target = GOOD_TARGET.clone()
    target[position] = bad
    for way, run in _ways(fn, w, target).items():
        with pytest.raises(tp.IndexRangeError, match=rf"{what} {bad} at position \[.*{position}\] is out of range; "
                                                      rf"expected 0 <= \w+ < {size}") as info:
            run()
        assert isinstance(info.value, IndexError), way


@pytest.mark.parametrize("case", CASES)
def test_valid_targets_agree_under_every_interpreter(case: str) -> None:
    fn, w, _, _ = CASES[case]
    check_interpreters(fn, w, GOOD_TARGET)


def test_ignore_index_is_allowed_and_other_negatives_are_not() -> None:
    target = tp.tensor([1, -100, 0])
    expected = torch.nn.functional.cross_entropy(torch.tensor(LOGITS.numpy()), torch.tensor(target.numpy()))
    for way, run in {"eager": lambda: _cross_entropy(LOGITS, target),
                     "graph": lambda: tp.graph.trace(_cross_entropy, LOGITS, GOOD_TARGET)(LOGITS, target),
                     "vmap": lambda: F.vmap(_cross_entropy, in_dims=(None, 0))(LOGITS, target[None])[0]}.items():
        assert float(run()) == pytest.approx(float(expected), rel=1e-5), way  # type: ignore[arg-type]
    grad = F.grad(_cross_entropy)(LOGITS, target)
    assert np.all(grad.numpy()[1] == 0)
    with pytest.raises(tp.IndexRangeError, match=r"target -3 at position \[2\].*or target == -100"):
        F.grad(_cross_entropy)(LOGITS, tp.tensor([1, -100, -3]))


def test_the_lookup_reads_the_checked_value() -> None:
    """The recorded gather consumes the check's output, so no pass can drop the check."""
    gm = tp.graph.trace(_embedding, TABLE, GOOD_TARGET)
    producers = {node.outputs[0]: node.target for node in gm.graph.nodes}
    gathers = [node for node in gm.graph.nodes if node.target == "gather"]
    assert gathers and all(producers.get(node.inputs[1]) == "check_index" for node in gathers)


def test_index_writes_are_checked_against_the_bound() -> None:
    t = tp.index([0, 1], bound=3)
    with pytest.raises(tp.IndexRangeError, match=r"value 3 at position \[0\] is out of range; expected 0 <= value < 3"):
        t[0] = 3
    assert t.tolist() == [0, 1] and isinstance(t, tp.Index)  # unchanged
    t[0] = 2
    assert t.tolist() == [2, 1] and isinstance(t, tp.Index) and t.bound == 3
    for write in (lambda: t.add_(1), lambda: t.fill_(-1), lambda: t.copy_(tp.tensor([0, 5])),
                  lambda: t.sub_(tp.tensor([0, 2]))):
        with pytest.raises(tp.IndexRangeError):
            write()
        assert t.tolist() == [2, 1]
    t += tp.tensor([0, 1])
    t.clamp_(0, 1)
    assert t.tolist() == [1, 1] and isinstance(t, tp.Index)
    with pytest.raises(tp.DTypeError):
        t.div_(2)


def test_index_of_a_recorded_value_is_checked_when_the_graph_runs() -> None:
    def f(x: AnyTensor) -> AnyTensor:
        ids = tp.index(x, bound=3)
        ids[1] = x[0] + 1
        return ids * 1

    gm = tp.graph.trace(f, tp.tensor([0, 1]))
    assert gm(tp.tensor([1, 0])).tolist() == [1, 2]
    with pytest.raises(tp.IndexRangeError, match=r"index: value 5 at position \[0\]"):
        gm(tp.tensor([5, 1]))
    with pytest.raises(tp.IndexRangeError, match=r"ids\[key\] = value on an Index tensor: value 3 at position \[1\]"):
        gm(tp.tensor([2, 0]))
    with pytest.raises(tp.IndexRangeError, match=r"index: value 4 at position \[1, 0\]"):
        F.vmap(f)(tp.tensor([[0, 1], [4, 0]]))
