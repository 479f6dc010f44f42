"""``tp.multinomial``: draw category indices from rows of non-negative weights, as ``torch.multinomial``.

With replacement, each draw inverts the running sum of the weights at a uniform number. Without
replacement, the categories race: category ``j`` finishes at ``E_j / w_j`` (``E_j`` exponential), and the
first ``num_samples`` to finish, in order, are the draws; this is the distribution of drawing one at a
time in proportion to the remaining weights. Both are composed from the primitives (uniform numbers,
cumulative sums, comparisons, a sort), so they run under every interpreter with a key of the
interpreter (a compiled function draws fresh numbers at every call) or of a :class:`tp.Generator`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay import recording
from tensorplay.errors import DTypeError, ShapeError
from tensorplay.generator import Generator
from tensorplay.tensor import Tensor, highest_interpreter

from tensorplay.interpreters.eager.interpreter import eager

AnyTensor = Tensor[*tuple[Any, ...]]


def _check_values(weights: np.ndarray[Any, Any], num_samples: int, replacement: bool) -> None:
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ShapeError("multinomial: the weights must be finite and non-negative (probability tensor contains "
                         "inf, nan or an element < 0)")
    positive = (weights > 0).sum(axis=-1)
    if np.any(positive == 0):
        raise ShapeError("multinomial: every row of weights must have a positive sum (a row is all zeros)")
    if not replacement and np.any(positive < num_samples):
        raise ShapeError(f"multinomial: cannot draw {num_samples} samples without replacement from a row with only "
                         f"{int(positive.min())} categories of positive weight")


def multinomial(input: AnyTensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> AnyTensor:
    """``input[K]`` or ``input[N, K]`` weights (not necessarily normalised) -> int64 ``[num_samples]`` or
    ``[N, num_samples]`` category indices. Without ``replacement`` the indices of a row are distinct
    (``num_samples`` at most the number of positive weights). ``generator`` (a :class:`tp.Generator`)
    makes the draws reproducible without touching the global generator. Eagerly the weights are
    checked (finite, non-negative, positive row sums); a recorded graph does not read them."""
    if not isinstance(input, Tensor):
        raise DTypeError(f"multinomial: expected a tensorplay Tensor of weights, got {type(input).__name__}")
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial: expected weights [K] or [N, K], got shape {list(input.shape)}")
    if input.dtype.name not in ("float32", "float64"):
        raise DTypeError(f"multinomial: expected float weights, got {input.dtype}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)) or num_samples <= 0:
        raise ShapeError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
    k = input.shape[-1]
    if not isinstance(k, (int, np.integer)):
        raise ShapeError(f"multinomial: the number of categories must be static, got the symbolic size {k}")
    if k == 0:
        raise ShapeError("multinomial: the weights have no categories (last axis of size 0)")
    if not replacement and num_samples > k:
        raise ShapeError(f"multinomial: cannot draw {num_samples} samples without replacement from {k} categories")
    ops: Any = highest_interpreter((input,), recording.creating_interpreter(eager))
    if ops is eager or type(ops) is type(eager):
        _check_values(input._data, int(num_samples), replacement)
    key = eager.wrap(generator.next_key("multinomial")) if generator is not None else ops.random_key()
    weights = ops.cast(ops.stop_gradient(input), dtype="float64")
    lead = tuple(input.shape[:-1])
    if replacement:
        return _with_replacement(ops, weights, key, lead, int(num_samples), int(k))
    u = ops.random_uniform(key, shape=lead + (int(k),), dtype="float64")
    finish = ops.div(ops.neg(ops.log1p(ops.neg(u))), weights)  # E / w: inf where the weight is 0
    order = ops.argsort(finish, axis=input.ndim - 1)
    return ops.slice(order, starts=(0,) * input.ndim, stops=lead + (int(num_samples),),  # type: ignore[no-any-return]
                     steps=(1,) * input.ndim)


def _with_replacement(ops: Any, weights: AnyTensor, key: AnyTensor, lead: tuple[Any, ...], n: int,
                      k: int) -> AnyTensor:
    rank = len(lead) + 1
    running = ops.cumsum(weights, axis=rank - 1)  # [*lead, K]
    total = ops.slice(running, starts=(0,) * len(lead) + (k - 1,), stops=lead + (k,), steps=(1,) * rank)
    u = ops.random_uniform(key, shape=lead + (n,), dtype="float64")
    target = ops.mul(u, total)  # [*lead, n] in [0, total)
    below = ops.le(ops.reshape(running, shape=lead + (1, k)), ops.reshape(target, shape=lead + (n, 1)))
    index = ops.reduce_sum(below, axes=(rank,), keepdims=False)  # categories passed: [*lead, n]
    # u * total can round up to total: fall back to the last category of positive weight
    positive = ops.gt(weights, 0.0)
    backwards = ops.slice(positive, starts=(0,) * len(lead) + (k - 1,), stops=lead + (-1,),
                          steps=(1,) * len(lead) + (-1,))
    last = ops.sub(k - 1, ops.argmax(backwards, axis=rank - 1, keepdims=True))  # [*lead, 1]
    return ops.cast(ops.minimum(index, last), dtype="int64")  # type: ignore[no-any-return]
