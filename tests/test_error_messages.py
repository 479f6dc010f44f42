"""Messages are part of the API: each says what was expected, what was given and where. One test per
family of bad input found by the bad-input hunt (issue 11); PyTorch is the oracle where it accepts
the input (empty batches, zero-size heads, ``t == None``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.errors import AxisError, DTypeError, ShapeError
from tensorplay.graph import GuardError, trace

X = tp.randn(2, 3, 4, 4)
W = tp.randn(5, 3, 3, 3)

MESSAGES: dict[str, tuple[Callable[[], Any], type, str]] = {
    "conv2d float stride": (lambda: F.conv2d(X, W, stride=1.5), ShapeError,
                            r"conv2d: stride must be an int or a tuple of 2 ints, got 1.5"),
    "conv2d float padding entry": (lambda: F.conv2d(X, W, padding=(1, 0.5)), ShapeError,
                                   r"padding must be an int or a tuple of 2 ints, got \(1, 0.5\)"),
    "Conv2d float kernel": (lambda: tp.nn.Conv2d(3, 4, 2.5), ShapeError, "Conv2d: kernel_size must be an int"),
    "max_pool2d names the user's input": (lambda: F.max_pool2d(X, 5), ShapeError,
                                          r"x: \[2, 3, 4, 4\] \(as \[6, 1, 4, 4\]: leading axes flattened\)"),
    "conv2d unbatched names the user's input": (lambda: F.conv2d(tp.randn(3, 4, 4), tp.randn(5, 3, 7, 7)),
                                                ShapeError, r"x: \[3, 4, 4\] \(as \[1, 3, 4, 4\]"),
    "add_ of a larger operand": (lambda: tp.ones(3).add_(tp.ones(2, 3)), ShapeError,
                                 r"add_: the other operand has shape \[2, 3\], which does not broadcast to the "
                                 r"tensor's shape \[3\]"),
    "copy_ of another shape": (lambda: tp.ones(3).copy_(tp.ones(2)), ShapeError,
                               r"copy_: the source has shape \[2\], which does not broadcast to the tensor's "
                               r"shape \[3\]"),
    "setitem with a float slice step": (lambda: tp.zeros(4).__setitem__(slice(None, None, 2.0), 0.0), DTypeError,
                                        r"setitem: key item 0 is a slice whose step is float 2.0; expected an int"),
    "setitem with a float index": (lambda: tp.zeros(4).__setitem__((0, 1.5), 0.0), DTypeError,
                                   r"setitem: key item 1 is float 1.5; expected an int, a slice"),
    "setitem of another shape": (lambda: tp.zeros(3).__setitem__(slice(0, 2), tp.ones(3)), ShapeError,
                                 r"setitem: the value has shape \[3\], which does not broadcast to the shape \[2\]"),
    "bool of many elements": (lambda: bool(tp.ones(2)), ValueError,
                              r"bool\(\): the truth value of a tensor with 2 elements \(shape \[2\]\) is ambiguous"),
    "Linear float size": (lambda: tp.nn.Linear(2.5, 3), ShapeError, "Linear: in_features must be an int, got float 2.5"),
    "Embedding float size": (lambda: tp.nn.Embedding(4, 2.0), ShapeError, "embedding_dim must be an int"),
    "BatchNorm negative size": (lambda: tp.nn.BatchNorm1d(-1), ShapeError, "num_features must be non-negative"),
    "LayerNorm float shape": (lambda: tp.nn.LayerNorm((4, 2.5)), ShapeError, "normalized_shape must be an int"),
    "MultiheadAttention zero heads": (lambda: tp.nn.MultiheadAttention(4, 0), ShapeError,
                                      "num_heads must be positive"),
    "one_hot negative classes": (lambda: F.one_hot(tp.tensor([0, 1]), -5), ShapeError,
                                 r"num_classes must be -1 \(one more than the largest index\) or a non-negative int, "
                                 r"got -5"),
    "embedding padding_idx past the table": (lambda: F.embedding(tp.tensor([0, 1]), tp.randn(5, 3), padding_idx=10),
                                             ShapeError, r"embedding: padding_idx 10 must be within \[-5, 5\)"),
    "reshape float size": (lambda: tp.ones(6).reshape(2.0, 3), ShapeError,
                           r"reshape: size 0 must be an int, got float 2.0 in shape \[2.0, 3\]"),
    "expand float size": (lambda: tp.ones(3).expand(2.0, 3), ShapeError, "expand: size 0 must be an int"),
    "squeeze on a 0-d tensor": (lambda: tp.ones(()).squeeze(3), AxisError,
                                r"squeeze: axis 3 is out of range for a 0-d tensor \(expected -1 or 0"),
    "sum over a float dim": (lambda: tp.ones(2, 3).sum(dim=1.0), AxisError, "sum: axis must be an int, got float 1.0"),
    "mean over a float dim": (lambda: tp.ones(2, 3).mean(dim=1.0), AxisError, "axis must be an int, got float 1.0"),
    "slice with a float step": (lambda: tp.ones(2, 3)[:, ::2.0], DTypeError,
                                r"indexing: axis 1 got a slice step of type float \(2.0\); expected an int or None"),
    "slice with a str stop": (lambda: tp.ones(2, 3)[:"1"], DTypeError, "axis 0 got a slice stop of type str"),
    "linspace float steps": (lambda: tp.linspace(0, 1, 2.0), DTypeError, "linspace: steps must be an int, got float"),
    "arange to a str": (lambda: tp.arange("3"), DTypeError, "arange: end must be a number, got str"),
    "arange to inf": (lambda: tp.arange(0, float("inf")), ShapeError, "arange: end must be finite, got inf"),
}


@pytest.mark.parametrize("call, error, message", MESSAGES.values(), ids=list(MESSAGES))
def test_messages_say_what_was_expected_given_and_where(call: Callable[[], Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def test_the_eager_rule_cache_tells_floats_from_ints() -> None:
    x = tp.randn(1, 1, 4, 4)
    for _ in range(2):  # a valid call first must not let the float one through from the cache
        assert tp.eager.max_pool_nd(x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0)).shape == (1, 1, 2, 2)
        with pytest.raises(ShapeError, match=r"kernel_size must be a tuple of 2 ints .* got \(2.0, 2.0\)"):
            tp.eager.max_pool_nd(x, kernel_size=(2.0, 2.0), stride=(2, 2), padding=(0, 0))
        with pytest.raises(ShapeError, match=r"kernel_size must be a tuple of 2 ints .* got \(True, 2\)"):
            trace(lambda v: v.interpreter.max_pool_nd(v, kernel_size=(True, 2), stride=(2, 2), padding=(0, 0)), x)
        trace(lambda v: v.interpreter.max_pool_nd(v, kernel_size=(1, 2), stride=(2, 2), padding=(0, 0)), x)


def test_guard_error_says_how_to_trace_again() -> None:
    def f(x: Any) -> Any:
        return x if x.sum() > 0 else -x

    gm = trace(f, tp.ones(2), execute=True)
    with pytest.raises(GuardError, match=r"Trace again with these inputs \(tp.graph.trace\(fn, \*inputs, "
                                         r"execute=True\)\)") as info:
        gm(-tp.ones(2))
    assert "tensorplay.compile" not in str(info.value)


# ---- where PyTorch returns a value, so do we -------------------------------------------------------

def test_attention_with_a_zero_size_head_averages_the_values() -> None:
    q, k, v = tp.zeros(2, 3, 0), tp.zeros(2, 4, 0), tp.randn(2, 4, 5)
    expected = torch.nn.functional.scaled_dot_product_attention(torch.zeros(2, 3, 0), torch.zeros(2, 4, 0),
                                                                torch.tensor(v.numpy()))
    np.testing.assert_allclose(F.scaled_dot_product_attention(q, k, v).numpy(), expected.numpy(), atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_losses_of_an_empty_batch_match_pytorch(loss: str, reduction: str) -> None:
    logits, target = tp.zeros(0, 3), tp.zeros(0, dtype=tp.int64)
    got = getattr(F, loss)(logits, target, reduction=reduction).numpy()
    expected = getattr(torch.nn.functional, loss)(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long),
                                                  reduction=reduction).numpy()
    np.testing.assert_array_equal(got, expected)


def test_comparing_a_tensor_with_none_is_a_python_bool() -> None:
    t = tp.ones(2)
    assert (t == None) is False  # noqa: E711 - the comparison under test
    assert (t != None) is True  # noqa: E711
    assert (torch.ones(2) == None) is False  # noqa: E711 - PyTorch agrees
    assert t not in [None]
