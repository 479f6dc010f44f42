"""The graph recorder ``tp.compile`` captures with: the execute-mode :class:`Recorder` plus what a
compiled function may do that a plain trace refuses.

* ``requires_grad`` flows through recorded operations (as on the eager tape), and operations
  recorded under ``tp.no_grad()`` are cut from differentiation (a ``stop_gradient`` node), so the
  gradients computed from the graph are the ones eager autograd would compute.
* ``loss.backward()`` inside the function records the reverse sweep (the vjp rules emitting into
  this recorder) and accumulates into the leaves' ``.grad`` as recorder tensors (:meth:`backward`).
* The reverse sweep compares shapes structurally: a symbolic size is not equal to an int there (the
  rules' general code, e.g. a sum over a broadcast axis, is right for every size, 1 included), so
  ``backward()`` adds no guard on a batch size of 1.
* With symbolic dims, a shape rule that rejects its inputs only because a symbolic size is not
  known to equal another raises :class:`Respecialize`: the capture is retried with those dims
  static (a user's genuine shape error then surfaces from the static capture).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager import hooks as tensor_hooks
from tensorplay.interpreters.graph.ir import Var
from tensorplay.interpreters.graph.recorder import Recorder, user_location
from tensorplay.spec.errors import AutogradError, GraphCaptureError, TensorplayError
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


class Respecialize(Exception):
    """Capture must be retried with ``symbols`` static (raised through the user's code)."""

    def __init__(self, symbols: frozenset[str], reason: str) -> None:
        super().__init__(reason)
        self.symbols = symbols
        self.reason = reason


def _symbols_of(value: Any) -> set[str]:
    if isinstance(value, SymDim):
        return set(value.free_symbols)
    if isinstance(value, (tuple, list)):
        out: set[str] = set()
        for v in value:
            out |= _symbols_of(v)
        return out
    if isinstance(value, dict):
        return _symbols_of(tuple(value.values()))
    return set()


class _Values(dict[Any, Any]):
    """Var -> a tensor of the recorder holding it (made on first use): the environment the reverse sweep
    reads the forward values from."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __missing__(self, var: Var) -> AnyTensor:
        tensor = self.recorder.wrap(var)
        self[var] = tensor
        return tensor


class CaptureRecorder(Recorder):
    """The recorder of ``tp.compile``'s capture (see the module docstring).

    ``grad_leaf`` maps a placeholder ``Var`` to the tensor object whose ``.grad`` a ``backward()``
    inside the function accumulates into (module parameters, arguments that require grad).
    ``on_grad_write(tensor)`` is called before a leaf's ``.grad`` is first replaced, so the capture
    can restore it afterwards. ``backward_started`` is the number of nodes recorded when the first
    ``backward()`` ran (``None`` when the function calls none).
    """

    if TYPE_CHECKING:
        # primitives are attached to Recorder from the primitive table; tell mypy they exist
        def __getattr__(self, name: str) -> Callable[..., Any]: ...

    def __init__(self, *, binding: dict[str, Any] | None = None, symbolic: bool = False) -> None:
        super().__init__(execute=True, binding=binding)
        self.symbolic = symbolic
        self.grad_leaf: dict[Var, AnyTensor] = {}
        self.on_grad_write: Callable[[AnyTensor], None] = lambda t: None
        self.backward_started: int | None = None
        self.internal = 0
        self.structural = 0  # > 0 while the reverse sweep of a backward() inside the function is recorded

    def record(self, target: str, inputs: tuple[Any, ...], params: dict[str, Any]) -> AnyTensor:
        """Record as the plain recorder does, tracking ``requires_grad`` and ``no_grad`` (see the module
        docstring)."""
        self.internal += 1
        try:
            out = super().record(target, inputs, params)
        except (TensorplayError, ValueError, TypeError, IndexError) as error:
            if self.symbolic and not isinstance(error, GraphCaptureError):
                symbols = self._symbols_in(inputs, params)
                if symbols:
                    raise Respecialize(frozenset(symbols), f"{target} needs {', '.join(sorted(symbols))} "
                                                           "static") from error
            raise
        finally:
            self.internal -= 1
        if out._ops is not self:  # handed to a newer interpreter
            return out
        if not tape.grad_enabled():
            if any(isinstance(x, Tensor) and x._requires_grad for x in inputs):
                self.internal += 1
                try:
                    out = super().record("stop_gradient", (out,), {})
                finally:
                    self.internal -= 1
            return out
        if out._data.dtype.kind == "f":
            for x in inputs:
                if isinstance(x, Tensor) and x._requires_grad:
                    out._requires_grad = True
                    break
        return out

    def _symbols_in(self, inputs: tuple[Any, ...], params: dict[str, Any]) -> set[str]:
        symbols = _symbols_of(params)
        for x in inputs:
            if isinstance(x, Tensor):
                data = x._data
                symbols |= _symbols_of(tuple(data.shape))
            else:
                symbols |= _symbols_of(x)
        return symbols

    def lift(self, x: AnyTensor) -> Var:
        """As the plain recorder; an eager tensor that requires grad (a leaf met while capturing, e.g. a
        parameter reached in a way discovery did not follow) becomes a leaf ``backward()`` differentiates."""
        known = self._captures.get(id(x))
        var = super().lift(x)
        if (known is None or known[0] is not x) and x._ops is not self and x._requires_grad \
                and var.dtype.kind == "f" and var not in self.grad_leaf:
            self.grad_leaf[var] = x
        return var

    def set_requires_grad(self, x: AnyTensor, flag: bool) -> None:
        """As eagerly: only float tensors can require gradients."""
        if flag and x._data.dtype.kind != "f":
            raise AutogradError(f"requires_grad: only float tensors can require gradients, got {x.dtype}")
        x._requires_grad = bool(flag)

    def detach(self, x: AnyTensor) -> AnyTensor:
        """Recorded as ``stop_gradient``; the result does not require grad."""
        out = super().detach(x)
        out._requires_grad = False
        return out

    # ---- backward inside the compiled function ---------------------------------------------------------
    def backward(self, x: AnyTensor, gradient: Any, retain_graph: bool, create_graph: bool) -> None:
        """``x.backward()`` inside a compiled function: the reverse sweep is recorded into this graph and
        the cotangents of the leaves (parameters and arguments that require grad) are accumulated into
        their ``.grad`` (recorder tensors; the compiled call writes them back)."""
        from tensorplay.func.tracing import Traced, backward as reverse_sweep
        from tensorplay.pytree import tree_flatten
        where = user_location(2)
        at = f" (at {where})" if where is not None else ""
        if create_graph:
            raise GraphCaptureError(f"backward(create_graph=True) inside a compiled function is not supported{at}; "
                                    "compute higher derivatives with tensorplay.func.grad inside the function")
        if not x._requires_grad:
            raise AutogradError(f"backward: the tensor does not require grad and has no grad_fn{at}; set "
                                "requires_grad=True on the leaves you differentiate with respect to")
        var = self.lift(x)
        if gradient is None:
            if int(np.prod([int(d) for d in var.shape])) != 1:
                raise AutogradError(f"backward: grad can be implicitly created only for scalar outputs, got "
                                    f"shape {list(var.shape)}{at}; pass gradient= (a tensor of that shape)")
            seed = self.full(shape=tuple(var.shape), value=1.0, dtype=var.aval.dtype)
        else:
            seed = gradient if isinstance(gradient, Tensor) else self.constant(
                np.asarray(gradient, dtype=var.dtype))
            if tuple(seed.shape) != tuple(var.shape):
                raise AutogradError(f"backward: gradient has shape {list(seed.shape)}, expected the output's "
                                    f"shape {list(var.shape)}{at}")
        if self.backward_started is None:
            self.backward_started = len(self.graph.nodes)
        leaves = [(v, t) for v, t in self.grad_leaf.items() if t._requires_grad]
        if any(tape.has_grad_ready_hooks(t) or tensor_hooks.has_hooks(t) for _, t in leaves):
            raise GraphCaptureError(
                f"backward() inside a compiled function{at} reaches parameters with gradient-ready hooks (e.g. "
                "tensorplay.distributed.DistributedDataParallel's gradient averaging, or "
                "register_post_accumulate_grad_hook) or tensor hooks (register_hook), which cannot run inside "
                "the compiled code; compile the forward and the loss only and call loss.backward() and "
                "optimizer.step() outside the compiled function")
        wanted = [v for v, _ in leaves]
        zero: Any = 0
        traced = Traced(self.graph, self, wanted, [var], tree_flatten(zero)[1], None)
        env = _Values(self)
        self.structural += 1  # the vjp rules' shape comparisons are structural, as in any trace (no 0/1 guard)
        try:
            cts = reverse_sweep(traced, env, self, [(var, seed)], wanted, "backward")
        finally:
            self.structural -= 1
        for (leaf_var, tensor), ct in zip(leaves, cts):
            if ct is None:
                continue
            self.on_grad_write(tensor)
            previous = tensor._grad
            tensor._grad = ct if previous is None else self.add(previous, ct)
            tensor._grad._requires_grad = False


__all__ = ["CaptureRecorder", "Respecialize"]
