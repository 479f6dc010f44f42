"""``Sequential.pop``, ``insert`` and ``extend`` against torch.nn.Sequential doing the same edits: child
names, state-dict keys and the forward result of a model of Linear layers with copied weights; out-of-range
indices raise an IndexError naming the index and the length; non-modules are refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.errors import IndexRangeError, TensorplayError

SIZES = [3, 4, 5, 6, 7, 8]  # layer i maps SIZES[i] features to SIZES[i + 1]


def linear_pair(i: int, o: int, seed: int) -> tuple[nn.Linear[Any, Any], torch.nn.Linear]:
    torch.manual_seed(seed)
    theirs = torch.nn.Linear(i, o)
    ours = nn.Linear(i, o)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def build(n: int = 4) -> tuple[nn.Sequential, torch.nn.Sequential]:
    pairs = [linear_pair(SIZES[i], SIZES[i + 1], i) for i in range(n)]
    return nn.Sequential(*(p[0] for p in pairs)), torch.nn.Sequential(*(p[1] for p in pairs))


def assert_same(ours: nn.Sequential, theirs: torch.nn.Sequential, features: int) -> None:
    assert [k for k, _ in ours.named_children()] == [k for k, _ in theirs.named_children()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert len(ours) == len(theirs)
    x = np.random.default_rng(0).standard_normal((2, features)).astype(np.float32)
    np.testing.assert_allclose(ours(tp.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


Maker = Callable[[int, int, int], Any]  # (in features, out features, seed) -> a Linear of one library

# Each edit is applied to both models; afterwards the chain of Linear layers must still compose from 3
# features, so layers are removed from the end or inserted with matching sizes.
EDITS: list[tuple[str, Callable[[Any, Maker], Any]]] = [
    ("pop-last", lambda s, mk: s.pop(3)),
    ("pop-minus-1", lambda s, mk: s.pop(-1)),
    ("pop-twice", lambda s, mk: (s.pop(-1), s.pop(2))),
    ("insert-front", lambda s, mk: s.insert(0, mk(3, 3, 10))),
    ("insert-middle", lambda s, mk: s.insert(2, mk(5, 5, 11))),
    ("insert-end", lambda s, mk: s.insert(4, mk(7, 7, 12))),
    ("insert-minus-1", lambda s, mk: s.insert(-1, mk(6, 6, 13))),
    ("insert-minus-n", lambda s, mk: s.insert(-4, mk(3, 3, 14))),
    ("extend-list", lambda s, mk: s.extend([mk(7, 2, 15), mk(2, 9, 16)])),
    ("extend-sequential", lambda s, mk: s.extend(type(s)(mk(7, 5, 17)))),
    ("extend-empty", lambda s, mk: s.extend([])),
    ("insert-pop-insert", lambda s, mk: (s.insert(1, mk(4, 4, 18)), s.pop(1), s.insert(-2, mk(5, 5, 19)))),
    ("insert-after-pop-extend", lambda s, mk: (s.pop(3), s.extend([mk(6, 6, 20)]), s.insert(0, mk(3, 3, 21)))),
]


def makers() -> tuple[Maker, Maker]:
    """Two makers building the same Linear (torch's initial weights copied) for tensorplay and torch."""
    def make(which: int) -> Maker:
        return lambda i, o, seed: linear_pair(i, o, seed)[which]
    return make(0), make(1)


@pytest.mark.parametrize("name,edit", EDITS, ids=[e[0] for e in EDITS])
def test_edits_match_pytorch(name: str, edit: Callable[[Any, Maker], Any]) -> None:
    ours, theirs = build()
    mk, mk_t = makers()
    result, result_t = edit(ours, mk), edit(theirs, mk_t)
    last, last_t = (result[-1], result_t[-1]) if isinstance(result, tuple) else (result, result_t)
    if name.startswith("pop"):  # pop returns the layer it removed
        assert isinstance(last, nn.Linear)
        np.testing.assert_array_equal(last.weight.detach().numpy(), last_t.weight.detach().numpy())
    else:  # insert and extend return the Sequential itself
        assert last is ours and last_t is theirs
    assert_same(ours, theirs, 3)


def test_pop_of_a_slice_returns_a_sequential_as_pytorch() -> None:
    ours, theirs = build()
    taken, taken_t = ours.pop(slice(2, None)), theirs.pop(slice(2, None))
    assert isinstance(taken, nn.Sequential) and isinstance(taken_t, torch.nn.Sequential)
    assert [k for k, _ in taken.named_children()] == [k for k, _ in taken_t.named_children()]
    assert_same(ours, theirs, 3)


def test_edited_model_trains_all_its_parameters() -> None:
    ours, _ = build(2)
    ours.insert(1, nn.Linear(4, 4))
    ours.extend([nn.Linear(5, 2)])
    assert len(list(ours.parameters())) == 8
    ours(tp.randn(2, 3)).sum().backward()
    assert all(p.grad is not None for p in ours.parameters())


@pytest.mark.parametrize("edit,index,length", [
    (lambda s, lib: s.pop(4), 4, 4),
    (lambda s, lib: s.pop(-5), -5, 4),
    (lambda s, lib: s.insert(5, lib.ReLU()), 5, 4),
    (lambda s, lib: s.insert(-5, lib.ReLU()), -5, 4),
    (lambda s, lib: s[7], 7, 4),
    (lambda s, lib: s.__setitem__(-9, lib.ReLU()), -9, 4),
])
def test_out_of_range_indices_name_the_index_and_length(edit: Callable[[Any, Any], Any], index: int,
                                                        length: int) -> None:
    ours, theirs = build()
    with pytest.raises(IndexError):
        edit(theirs, torch.nn)
    with pytest.raises(IndexRangeError, match=rf"index {index} is out of range for {length} modules"):
        edit(ours, nn)
    assert [k for k, _ in ours.named_children()] == ["0", "1", "2", "3"]  # unchanged


def test_pop_of_an_empty_sequential() -> None:
    with pytest.raises(IndexError):
        torch.nn.Sequential().pop(0)
    with pytest.raises(IndexRangeError, match=r"Sequential.pop: index 0 is out of range for 0 modules"):
        nn.Sequential().pop(0)
    seq = nn.Sequential().insert(0, nn.ReLU())
    assert [k for k, _ in seq.named_children()] == ["0"]


def bad(value: Any) -> Any:
    """A deliberately wrong argument (typed ``Any`` so that the type checker lets the test pass it)."""
    return value


@pytest.mark.parametrize("edit,where,given", [
    (lambda s, lib: s.insert(1, bad(lib.Linear)), "Sequential.insert", "type"),
    (lambda s, lib: s.insert(0, bad(3)), "Sequential.insert", "int"),
    (lambda s, lib: s.extend([lib.ReLU(), bad("relu")]), r"Sequential.extend: item 1", "str"),
])
def test_non_modules_are_refused_as_pytorch_does(edit: Callable[[Any, Any], Any], where: str, given: str) -> None:
    ours, theirs = build()
    with pytest.raises((TypeError, AssertionError, AttributeError)):
        edit(theirs, torch.nn)
    with pytest.raises(TypeError, match=rf"{where}: expected a Module, got {given}") as info:
        edit(ours, nn)
    assert isinstance(info.value, TensorplayError)
    assert [k for k, _ in ours.named_children()] == ["0", "1", "2", "3"]  # nothing was added


def test_append_of_none_is_refused() -> None:
    """torch appends a None child (and its forward then calls None); here it is refused up front."""
    ours, _ = build()
    with pytest.raises(TypeError, match=r"Sequential.append: expected a Module, got NoneType"):
        ours.append(bad(None))
    assert len(ours) == 4


def test_module_list_insert_refuses_a_non_module() -> None:
    with pytest.raises(TypeError, match=r"ModuleList.insert: expected a Module, got float") as info:
        nn.ModuleList([nn.ReLU()]).insert(0, bad(1.5))
    assert isinstance(info.value, TensorplayError)
