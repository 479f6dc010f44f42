"""``tp.autograd``: ``grad`` and ``backward`` over the eager tape, and the grad-mode context managers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.inference import inference_mode, is_inference_mode_enabled
from tensorplay.tensor import Tensor


def backward(tensors: Tensor[*tuple[Any, ...]] | Sequence[Tensor[*tuple[Any, ...]]],
             grad_tensors: Any = None, retain_graph: bool = False, create_graph: bool = False) -> None:
    """Accumulate the gradients of ``tensors`` into the leaves' ``.grad``."""
    outs = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    grads = None if grad_tensors is None else (
        [grad_tensors] if isinstance(grad_tensors, Tensor) else list(grad_tensors))
    tape.backward(outs, grads, retain_graph, create_graph)


def grad(outputs: Any, inputs: Any, grad_outputs: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, allow_unused: bool = False) -> tuple[Any, ...]:
    """The gradients of ``outputs`` w.r.t. ``inputs`` as a tuple (``.grad`` is not touched).

    ``grad_outputs`` is required for non-scalar outputs; ``create_graph=True`` records the
    backward pass so the result can be differentiated again; ``allow_unused`` gives ``None``
    for inputs the outputs do not depend on (an error otherwise).
    """
    return tape.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused)


no_grad = tape.no_grad
enable_grad = tape.enable_grad

__all__ = ["backward", "enable_grad", "grad", "inference_mode", "is_inference_mode_enabled", "no_grad"]
