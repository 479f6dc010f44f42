"""A compiled training region on the eager tape: one node whose backward runs the compiled backward.

When a compiled call's outputs must be differentiable (grad mode on and a parameter or argument that
requires grad reaches them), the forward was compiled together with its backward (see
:mod:`.pipeline`). :func:`attach` joins the call to the tape as **one** node
(``grad_fn`` prints ``<CompiledBackward>``) whose edges are the leaves that require grad: the tape's
reverse sweep hands it the outputs' cotangents and it runs the compiled backward on the values the
forward saved. With several float outputs, each output gets a small ``<CompiledOutputBackward>``
node that forwards its cotangent to the region node, where they are gathered into one backward run.

Higher derivatives through a compiled region are refused (``create_graph=True`` raises), never
silently wrong: the compiled backward is not itself differentiable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay.interpreters.eager import tape
from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.spec.errors import AutogradError
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]

REGION = "Compiled"
OUTPUT = "CompiledOutput"


class Cotangents:
    """Cotangents of some of a region's outputs (``parts``: output index -> array), summed with ``+``
    (the tape accumulates cotangents that way)."""

    __slots__ = ("parts",)

    def __init__(self, parts: dict[int, Any]) -> None:
        self.parts = parts

    def __add__(self, other: Cotangents) -> Cotangents:
        merged = dict(self.parts)
        for k, v in other.parts.items():
            merged[k] = v if k not in merged else merged[k] + v
        return Cotangents(merged)


class Region:
    """What the backward needs: the compiled ``backward(*saved, *cotangents)`` and the saved values."""

    __slots__ = ("backward", "saved", "output_avals", "name", "grad_slots")

    def __init__(self, backward: Callable[..., Sequence[Any]], saved: list[Any], output_avals: list[tuple[Any, Any]],
                 name: str, grad_slots: list[int | None]) -> None:
        self.backward = backward
        self.saved = saved
        self.output_avals = output_avals
        self.name = name
        self.grad_slots = grad_slots

    def run(self, parts: dict[int, Any]) -> list[Any]:
        """Cotangents of the region's inputs (arrays or ``None``) for output cotangents ``parts``."""
        cts = []
        for k, (shape, dtype) in enumerate(self.output_avals):
            g = parts.get(k)
            if g is None:
                cts.append(np.zeros(shape, dtype=dtype))
            else:
                array = g._data if isinstance(g, Tensor) else g
                cts.append(np.asarray(array, dtype=dtype))
        grads = self.backward(*self.saved, *cts)
        return [None if slot is None else grads[slot] for slot in self.grad_slots]


def _region_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, region: Region) -> tuple[Any, ...]:
    if tape.grad_enabled():
        raise AutogradError(f"backward(create_graph=True) through the compiled function {region.name!r} is not "
                            "supported: its compiled backward is not differentiable. Compute higher derivatives "
                            "eagerly (or with tensorplay.func) instead of through tp.compile")
    parts = g.parts if isinstance(g, Cotangents) else {0: g}
    grads = region.run(parts)
    return tuple(None if a is None else Tensor(eager, a) for a in grads)


def _output_vjp(ops: Any, g: Any, inputs: tuple[Any, ...], output: Any, *, index: int) -> tuple[Any, ...]:
    return (Cotangents({index: g}),)


tape.EXTRA_VJP[REGION] = _region_vjp
tape.EXTRA_VJP[OUTPUT] = _output_vjp


def attach(outputs: list[AnyTensor], differentiable: list[int], inputs: list[AnyTensor], region: Region) -> None:
    """Join a compiled call to the tape: ``outputs[i]`` for ``i`` in ``differentiable`` get the region
    as their ``grad_fn`` (see the module docstring); ``inputs`` are the leaves that require grad."""
    if not differentiable:
        return
    inputs_t = tuple(inputs)
    if len(differentiable) == 1:
        out = outputs[differentiable[0]]
        out._node = tape.Node(REGION, inputs_t, {"region": region}, out)
        out._requires_grad = True
        return
    hub: AnyTensor = Tensor(eager, np.zeros((0,), dtype=np.float32))
    hub._node = tape.Node(REGION, inputs_t, {"region": region}, hub)
    hub._requires_grad = True
    for k, i in enumerate(differentiable):
        out = outputs[i]
        out._node = tape.Node(OUTPUT, (hub,), {"index": k}, out)
        out._requires_grad = True


__all__ = ["Cotangents", "Region", "attach"]
