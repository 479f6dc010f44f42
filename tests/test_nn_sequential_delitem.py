"""``del seq[i]`` / ``del seq[a:b:c]`` renames the children left ``"0"``, ``"1"``, ... as PyTorch does,
named (OrderedDict) children included; out-of-range indices raise IndexError. Names, state-dict keys and
the forward pass are compared with torch's."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn

NAMES = ["stem", "act", "mid", "out", "tail"]


def build(named: bool) -> tuple[nn.Sequential, torch.nn.Sequential]:
    torch.manual_seed(0)
    layers_t = [torch.nn.Linear(4, 4) if i % 2 == 0 else torch.nn.Tanh() for i in range(5)]
    layers = [nn.Linear(4, 4) if i % 2 == 0 else nn.Tanh() for i in range(5)]
    if named:
        ours = nn.Sequential(OrderedDict(zip(NAMES, layers)))
        theirs = torch.nn.Sequential(OrderedDict(zip(NAMES, layers_t)))
    else:
        ours, theirs = nn.Sequential(*layers), torch.nn.Sequential(*layers_t)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


INDICES: list[Any] = [0, 2, -1, -5, 4, slice(1, 3), slice(None, None, 2), slice(-2, None), slice(3, 1),
                      slice(None, None, -2), slice(None)]


@pytest.mark.parametrize("named", [False, True], ids=["numbered", "named"])
@pytest.mark.parametrize("index", INDICES, ids=[repr(i) for i in INDICES])
def test_delitem_renumbers_as_pytorch(named: bool, index: Any) -> None:
    ours, theirs = build(named)
    del ours[index]
    del theirs[index]
    assert [k for k, _ in ours.named_children()] == [k for k, _ in theirs.named_children()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [type(m).__name__ for m in ours] == [type(m).__name__ for m in theirs]
    assert len(ours) == len(theirs)
    if len(theirs) and all(isinstance(m, torch.nn.Linear | torch.nn.Tanh) for m in theirs):
        x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
        np.testing.assert_allclose(ours(tp.tensor(x)).detach().numpy(), theirs(torch.tensor(x)).detach().numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_repeated_deletes_and_append_keep_pytorch_names() -> None:
    ours, theirs = build(named=True)
    for seq in (ours, theirs):
        del seq[1]
        del seq[-1]
    ours.append(nn.ReLU())
    theirs.append(torch.nn.ReLU())
    del ours[0]
    del theirs[0]
    assert [k for k, _ in ours.named_children()] == [k for k, _ in theirs.named_children()] == ["0", "1", "2"]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert type(ours[-1]).__name__ == type(theirs[-1]).__name__ == "ReLU"


@pytest.mark.parametrize("index", [5, -6, 100])
def test_delitem_out_of_range_raises_index_error_as_pytorch(index: int) -> None:
    ours, theirs = build(named=False)
    with pytest.raises(IndexError):
        del theirs[index]
    with pytest.raises(IndexError, match=f"index {index} is out of range"):
        del ours[index]
    assert len(ours) == len(theirs) == 5
