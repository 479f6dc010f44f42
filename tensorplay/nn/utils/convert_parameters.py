"""``parameters_to_vector`` and ``vector_to_parameters``: all parameters as one flat vector and back."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tensorplay.errors import ShapeError
from tensorplay.nn._util import is_eager, numel, ops_for
from tensorplay.nn.module import bump_version
from tensorplay.tensor import Tensor, highest_interpreter

AnyTensor = Tensor[*tuple[Any, ...]]


def _list(parameters: Iterable[AnyTensor], where: str) -> list[AnyTensor]:
    if isinstance(parameters, Tensor):
        raise TypeError(f"{where}: expected an iterable of tensors (e.g. model.parameters()), got one Tensor")
    items = list(parameters)
    for i, p in enumerate(items):
        if not isinstance(p, Tensor):
            raise TypeError(f"{where}: expected tensors, got {type(p).__name__} at position {i}")
    return items


def parameters_to_vector(parameters: Iterable[AnyTensor]) -> AnyTensor:
    """The parameters flattened (row-major) and joined into one 1-d tensor ``[sum of numels]``, in order;
    differentiable (the gradient flows back to each parameter). Dtypes promote as in ``cat``."""
    items = _list(parameters, "parameters_to_vector")
    if not items:
        raise ShapeError("parameters_to_vector: expected at least one parameter, got none")
    ops: Any = highest_interpreter(items, items[0]._ops)
    return ops.concat(*(ops.reshape(p, shape=(numel(tuple(p.shape)),)) for p in items), axis=0)  # type: ignore[no-any-return]


def vector_to_parameters(vec: AnyTensor, parameters: Iterable[AnyTensor]) -> None:
    """Copy consecutive slices of the 1-d ``vec`` into the parameters, in order, in place (no gradient;
    each parameter keeps its identity, dtype and shape). ``vec`` must have exactly as many entries as
    the parameters together."""
    items = _list(parameters, "vector_to_parameters")
    ops = ops_for("vector_to_parameters", vec)
    if vec.ndim != 1:
        raise ShapeError(f"vector_to_parameters: expected a 1-d vector, got shape {list(vec.shape)}")
    total = sum(int(numel(tuple(p.shape))) for p in items)
    if vec.shape[0] != total:
        raise ShapeError(f"vector_to_parameters: the vector has {vec.shape[0]} entries, the parameters "
                         f"{total} (shapes {[list(p.shape) for p in items]})")
    if not is_eager(ops) or any(not is_eager(p._ops) for p in items):
        raise ShapeError("vector_to_parameters: writes the parameters' values in place, which needs eager "
                         "tensors (call it outside tp.compile and transforms)")
    data = vec._data
    offset = 0
    for p in items:
        n = int(numel(tuple(p.shape)))
        p._data[...] = data[offset:offset + n].reshape(p._data.shape)
        bump_version(p)
        offset += n
