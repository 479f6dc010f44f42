"""Views and copies of an ``Index`` keep its bound at run time (as its types say), under every way of
running a model that reshapes its targets the PyTorch way."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import Index, nn
from tensorplay.errors import IndexRangeError
from tensorplay.nn import functional as F
from tensorplay.testing import check_interpreters

RAW = np.array([[1, 2, 3], [0, 4, 2]])

VIEWS: list[tuple[str, Any, Any]] = [
    ("reshape(-1)", lambda t: t.reshape(-1), lambda a: a.reshape(-1)),
    ("view(3, 2)", lambda t: t.view(3, 2), lambda a: a.reshape(3, 2)),
    ("unsqueeze(0)", lambda t: t.unsqueeze(0), lambda a: a[None]),
    ("unsqueeze(-1)", lambda t: t.unsqueeze(-1), lambda a: a[..., None]),
    ("squeeze", lambda t: t.unsqueeze(1).squeeze(1), lambda a: a),
    ("flatten", lambda t: t.flatten(), lambda a: a.reshape(-1)),
    ("T", lambda t: t.T, lambda a: a.T),
    ("mT", lambda t: t.mT, lambda a: a.T),
    ("permute", lambda t: t.permute(1, 0), lambda a: a.T),
    ("transpose", lambda t: t.transpose(0, 1), lambda a: a.T),
    ("expand", lambda t: t.expand(2, 2, 3), lambda a: np.broadcast_to(a, (2, 2, 3))),
    ("narrow", lambda t: t.narrow(1, 1, 2), lambda a: a[:, 1:3]),
    ("contiguous", lambda t: t.contiguous(), lambda a: a),
    ("clone", lambda t: t.clone(), lambda a: a),
    ("detach", lambda t: t.detach(), lambda a: a),
    ("long", lambda t: t.long(), lambda a: a),
]


@pytest.mark.parametrize("name, view, expected", VIEWS, ids=[v[0] for v in VIEWS])
def test_views_of_an_index_keep_the_bound(name: str, view: Any, expected: Any) -> None:
    ids = tp.index(RAW, bound=5)
    out = view(ids)
    assert isinstance(out, Index) and out.bound == 5, name
    np.testing.assert_array_equal(out.numpy(), expected(RAW))
    assert not out.requires_grad


def test_arithmetic_and_float_casts_give_plain_tensors() -> None:
    ids = tp.index(RAW, bound=5)
    assert not isinstance(ids.reshape(-1) + 1, Index)
    assert not isinstance(ids.float(), Index)


def test_a_checked_write_through_a_reshaped_index() -> None:
    flat = tp.index(RAW, bound=5).reshape(-1)
    with pytest.raises(IndexRangeError):
        flat[0] = 9


class _LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5, 4)

    def forward(self, ids: Any) -> Any:
        logits = self.emb(ids) @ self.emb.weight.T
        return F.cross_entropy(logits.view(-1, 5), ids.view(-1)) + self.emb(ids[0].unsqueeze(0)).sum()


def test_a_model_reshaping_index_targets_runs_under_every_way() -> None:
    ways = check_interpreters(_LM(), tp.index(RAW, bound=5))
    assert sorted(ways) == sorted(["eager", "traced", "traced_execute", "graph_module", "retraced", "vmap", "compiled",
                                   "exported"])  # the plugged-in ways are listed in the order they were loaded
