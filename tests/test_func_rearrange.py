"""rearrange against einops (the semantics oracle), under transforms, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.func import RearrangeError, grad, rearrange, vmap

einops = pytest.importorskip("einops")

CASES: list[tuple[tuple[int, ...], str, dict[str, int]]] = [
    ((2, 3, 4, 5), "b c h w -> b h w c", {}),
    ((2, 3, 4, 5), "b c h w -> b (c h w)", {}),
    ((2, 3, 4, 5), "b c h w -> (b h) (w c)", {}),
    ((2, 12), "b (h w) -> b h w", {"h": 3}),
    ((2, 12), "b (h w) -> b w h", {"w": 6}),
    ((2, 12, 5), "b (h w c) d -> b h (d c) w", {"h": 2, "c": 3}),
    ((2, 3, 4, 5), "b ... -> ... b", {}),
    ((2, 3, 4, 5), "b c ... -> b (c ...)", {}),
    ((2, 3, 4, 5), "... w -> w ...", {}),
    ((2, 3), "b c -> b 1 c 1", {}),
    ((2, 1, 3), "b 1 c -> c b", {}),
    ((2, 1, 3), "b () c -> (c b)", {}),
    ((2, 3), "b c -> b () c", {}),
    ((6,), "(a b) -> b a", {"a": 2}),
    ((2, 3, 4), "a b c -> a b c", {}),
    ((), " -> ", {}),
    ((4, 3), "... -> ...", {}),
    ((2, 3, 4), "a ... c -> c ... a", {}),
    ((2, 12, 3), "b (h1 h2) c -> b h1 h2 c", {"h1": 3, "h2": 4}),
]


@pytest.mark.parametrize("shape,pattern,lengths", CASES, ids=[c[1] for c in CASES])
def test_matches_einops(shape: tuple[int, ...], pattern: str, lengths: dict[str, int]) -> None:
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    ours = rearrange(tp.tensor(x), pattern, **lengths)
    theirs = einops.rearrange(x, pattern, **lengths)
    assert tuple(ours.shape) == theirs.shape
    np.testing.assert_array_equal(ours.numpy(), theirs)


def test_a_sequence_is_stacked_on_a_new_leading_axis() -> None:
    xs = [np.full((2, 3), i, dtype=np.float32) for i in range(4)]
    for pattern in ("n h w -> h (n w)", "n h w -> w h n"):
        ours = rearrange([tp.tensor(x) for x in xs], pattern)
        np.testing.assert_array_equal(ours.numpy(), einops.rearrange(xs, pattern))
    ours = rearrange(tuple(tp.tensor(x) for x in xs), "n h w -> (n h) w")
    assert ours.shape == (8, 3)


def test_under_transforms() -> None:
    x = tp.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    per = vmap(lambda s: rearrange(s, "h w -> (w h)"))(x)
    np.testing.assert_array_equal(per.numpy(), einops.rearrange(x.numpy(), "b h w -> b (w h)"))
    weights = tp.tensor(np.arange(12, dtype=np.float32))
    g = grad(lambda x: (rearrange(x, "b h w -> b (w h)") * weights).sum())(x)
    expected = np.broadcast_to(np.arange(12, dtype=np.float32).reshape(4, 3).T, (2, 3, 4))
    np.testing.assert_array_equal(g.numpy(), expected)


@pytest.mark.parametrize("shape,pattern,lengths,message", [
    ((2, 3), "b c -> b", {}, "only on one side"),
    ((2, 3), "b c", {}, "exactly one '->'"),
    ((2, 3), "b b -> b", {}, "more than once"),
    ((2, 3), "b c d -> b c d", {}, "the tensor has 2"),
    ((2, 12), "b (h w) -> b h w", {}, "cannot infer"),
    ((2, 12), "b (h w) -> b h w", {"h": 5}, "cannot be split"),
    ((2, 12), "b (h w) -> b h w", {"h": 3, "w": 5}, "shape mismatch"),
    ((2, 3), "b c -> b c", {"q": 2}, "not in the pattern"),
    ((2, 3), "b c -> b (c", {}, "unmatched"),
    ((2, 3), "b (c (d)) -> b c d", {}, "nested"),
    ((2, 3), "b c -> b 2 c", {}, "only 1"),
    ((2, 3), "... c -> c", {}, "ellipsis"),
    ((2, 3), "b c- -> b c", {}, "invalid axis name"),
    ((2, 3), "b 1 -> b", {}, "length 3 is matched by an axis of length 1"),
])
def test_errors(shape: tuple[int, ...], pattern: str, lengths: dict[str, int], message: str) -> None:
    with pytest.raises(RearrangeError, match=message):
        rearrange(tp.zeros(*shape), pattern, **lengths)


def test_error_is_a_shape_error() -> None:
    with pytest.raises(tp.ShapeError):
        rearrange(tp.zeros(2, 3), "a b -> a")
