"""Small helpers shared by the layers and ``tensorplay.nn.functional``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.interpreters.eager.interpreter import eager
from tensorplay import random_state
from tensorplay.errors import DTypeError, ShapeError
from tensorplay.tensor import Tensor, highest_interpreter

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Tensor[*tuple[Any, ...]]
_EAGER_TYPE = type(eager)
IntOrTuple = int | Sequence[int]


def ops_for(where: str, x: Any, *others: Any) -> Any:
    """The interpreter that runs an operation on input ``x`` and the tensors ``others`` (parameters,
    possibly ``None``): the highest-level one, so a layer follows its input under any interpreter.
    Anything else (a numpy array, a list) is a :class:`DTypeError` naming ``where`` and its position."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"{where}: expected a tensorplay Tensor as input, got {type(x).__name__} "
                         "(convert with tp.tensor(...))")
    for i, other in enumerate(others):
        if other is not None and not isinstance(other, Tensor):
            raise DTypeError(f"{where}: expected a tensorplay Tensor (or None where optional) as tensor argument "
                             f"{i + 2}, got {type(other).__name__} (convert with tp.tensor(...))")
    return highest_interpreter(others, x._ops)


def is_eager(ops: Any) -> bool:
    """Whether ``ops`` is the eager interpreter (whose payloads are concrete numpy arrays); a copy of
    it (made by ``copy.deepcopy`` of a tensor) counts too."""
    return ops is eager or isinstance(ops, _EAGER_TYPE)


def layer_size(value: Any, name: str, where: str, positive: bool = False) -> int:
    """A layer's size argument (``in_features``, ``num_features``, ...) as an int; a float (``Linear(2.5, 3)``),
    a bool or a negative size (zero too, with ``positive``) is a :class:`ShapeError` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ShapeError(f"{where}: {name} must be an int, got {type(value).__name__} {value!r}")
    if value < 0 or (positive and value == 0):
        raise ShapeError(f"{where}: {name} must be {'positive' if positive else 'non-negative'}, got {value}")
    return int(value)


def check_window(values: tuple[int, ...], given: Any, name: str, where: str, minimum: int) -> None:
    """A layer's per-axis ``kernel_size`` / ``stride`` / ``dilation`` (``minimum`` 1) or ``padding``
    (``minimum`` 0), checked when the layer is built: a value below ``minimum`` on any spatial axis is a
    :class:`ShapeError` (a ValueError) naming the layer, the argument and the value given. PyTorch takes
    such a layer and fails on its first call."""
    if any(v < minimum for v in values):
        need = "positive" if minimum == 1 else "non-negative"
        raise ShapeError(f"{where}: {name} must be {need} on every spatial axis, got {name}={given!r}")


def check_padding_idx(padding_idx: Any, num_embeddings: int, where: str) -> int:
    """``padding_idx`` checked to lie in ``[-num_embeddings, num_embeddings)``, as a non-negative row."""
    if isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer)):
        raise ShapeError(f"{where}: padding_idx must be an int, got {type(padding_idx).__name__} {padding_idx!r}")
    if not -num_embeddings <= padding_idx < num_embeddings:
        raise ShapeError(f"{where}: padding_idx {padding_idx} must be within [-{num_embeddings}, {num_embeddings}) "
                         f"(the table has {num_embeddings} rows)")
    return int(padding_idx) % num_embeddings


def random_key(ops: Any) -> AnyTensor:
    """A fresh random key for a random primitive run by ``ops``.

    An interpreter that manages its own keys (a compiled or exported graph receives its key as an
    input) provides ``ops.random_key()``; otherwise the key comes from the global generator
    (``tp.manual_seed``) as an eager tensor, which a graph recorder lifts into an input.
    """
    source = getattr(ops, "random_key", None)
    if source is not None:
        return source()  # type: ignore[no-any-return]
    return eager.wrap(random_state.next_key())


def shape_of(x: Any) -> tuple[Any, ...]:
    """The shape of a tensor as a plain tuple (ints, or symbolic dims under export tracing)."""
    return tuple(x.shape)


def numel(shape: Sequence[Any]) -> Any:
    """The product of a shape's entries."""
    n: Any = 1
    for d in shape:
        n = n * d
    return n


def masked_softmax(ops: Any, scores: AnyTensor) -> AnyTensor:
    """Softmax over the last axis where a row whose scores are all ``-inf`` (every key masked) gives
    zeros, as the fused attention does (PyTorch too), instead of NaN; its gradient is zero."""
    axis = scores.ndim - 1
    if isinstance(scores.shape[axis], int) and scores.shape[axis] == 0:  # no keys (a symbolic length is not 0)
        return ops.softmax(scores, axis=axis)  # type: ignore[no-any-return]
    open_row = ops.gt(ops.reduce_max(scores, axes=(axis,), keepdims=True), float("-inf"))
    safe = ops.where(open_row, scores, 0.0)  # a finite row: no NaN to mask, in the value or the gradient
    return ops.where(open_row, ops.softmax(safe, axis=axis), 0.0)  # type: ignore[no-any-return]
