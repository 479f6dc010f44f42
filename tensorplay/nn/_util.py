"""Small helpers shared by the layers and ``tensorplay.nn.functional``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    possibly ``None``): the highest-level one, so a layer follows its input under any interpreter."""
    if not isinstance(x, Tensor):
        raise DTypeError(f"{where}: expected a tensorplay Tensor as input, got {type(x).__name__} "
                         "(convert with tp.tensor(...))")
    return highest_interpreter(others, x._ops)


def is_eager(ops: Any) -> bool:
    """Whether ``ops`` is the eager interpreter (whose payloads are concrete numpy arrays); a copy of
    it (made by ``copy.deepcopy`` of a tensor) counts too."""
    return ops is eager or isinstance(ops, _EAGER_TYPE)


def ntuple(value: IntOrTuple, rank: int, name: str, where: str) -> tuple[int, ...]:
    """``value`` as a tuple of ``rank`` ints (an int is repeated)."""
    if isinstance(value, int):
        return (int(value),) * rank
    out = tuple(int(v) for v in value)
    if len(out) != rank:
        raise ShapeError(f"{where}: {name} has {len(out)} entries {list(out)}, expected {rank}")
    return out


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
