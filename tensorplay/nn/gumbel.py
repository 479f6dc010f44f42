"""``F.gumbel_softmax``: samples of the Gumbel-softmax (concrete) distribution, soft or straight-through hard."""

from __future__ import annotations

from typing import Any, TypeVarTuple

from tensorplay.errors import ArgumentError, DTypeError
from tensorplay.nn._util import ops_for, random_key, shape_of
from tensorplay.tensor import Tensor

S = TypeVarTuple("S")


def gumbel_softmax(logits: Tensor[*S], tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1) -> Tensor[*S]:
    """``softmax((logits + g) / tau, dim)`` with ``g`` standard Gumbel noise (``-log(E)``, ``E = -log(u)``
    exponential, ``u`` uniform), as ``torch.nn.functional.gumbel_softmax``: ``[*S] -> [*S]``.

    With ``hard=True`` the result is the one-hot vector of each row's largest entry (first on ties) in the
    forward pass and the soft sample's gradient in the backward pass (``y_hard - stop_gradient(y_soft) +
    y_soft``, the straight-through estimator). The noise comes from a fresh key of the interpreter, as
    dropout's: the global generator eagerly, a key input under ``tp.compile`` (new noise every call), one
    key per sample under ``vmap(randomness="different")``. ``eps`` is accepted for PyTorch compatibility
    and unused (as PyTorch's).
    """
    where = "gumbel_softmax"
    ops = ops_for(where, logits)
    if not logits.dtype.is_floating_point:
        raise DTypeError(f"{where}: logits must be a float tensor, got {logits.dtype.name}")
    if isinstance(tau, bool) or not isinstance(tau, (int, float)) or not tau > 0:
        raise ArgumentError(f"{where}: tau must be a positive number, got {tau!r}")
    from tensorplay import derived
    shape = shape_of(logits)
    axis = derived.normalize_axis(dim, max(logits.ndim, 1), where) if logits.ndim else 0
    u = ops.random_uniform(random_key(ops), shape=shape, dtype=logits.dtype.name)
    gumbels = ops.neg(ops.log(ops.neg(ops.log(u))))
    soft = derived.softmax(ops, "softmax", ops.div(ops.add(logits, gumbels), float(tau)), axis)
    if not hard:
        return soft  # type: ignore[no-any-return]
    if logits.ndim == 0:
        one_hot: Any = ops.full(shape=(), value=1.0, dtype=logits.dtype.name)
    else:
        best = ops.argmax(soft, axis=axis, keepdims=True)
        positions = ops.reshape(ops.iota(length=shape[axis], dtype="int64"),
                                shape=tuple(n if i == axis else 1 for i, n in enumerate(shape)))
        one_hot = ops.cast(ops.eq(positions, best), dtype=logits.dtype.name)
    return ops.add(ops.sub(one_hot, ops.stop_gradient(soft)), soft)  # type: ignore[no-any-return]


__all__ = ["gumbel_softmax"]
