"""The ``"eager"`` backend: the graph's generated Python (``GraphModule.code``) run by the eager
interpreter, one primitive call per node. It is the reference the other backends are tested
against and the simplest example of the backend contract."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay.interpreters.eager.interpreter import eager
from tensorplay.interpreters.graph.codegen import compile_graph
from tensorplay.interpreters.graph.trace import GraphModule
from tensorplay.tensor import Tensor


def eager_backend(graph_module: GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Callable[..., Any]:
    """A callable running ``graph_module.graph`` eagerly on numpy arrays (see
    :mod:`tensorplay.compiler.backends`); ``kwargs`` are accepted and ignored."""
    graph = graph_module.graph
    forward, _ = compile_graph(graph)
    has_mutations = bool(graph.mutations)
    wrap = eager.wrap

    def run(*arrays: Any) -> list[Any]:
        result = forward(eager, *(wrap(a) for a in arrays))
        outs = list(result[0]) + list(result[1]) if has_mutations else list(result)
        return [np.asarray(o._data) if isinstance(o, Tensor) else o for o in outs]

    return run


__all__ = ["eager_backend"]
