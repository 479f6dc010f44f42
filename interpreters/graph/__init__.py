"""The graph interpreter: shape-indexed SSA capture (:mod:`.recorder`), the IR (:mod:`.ir`),
evaluation with any interpreter (:mod:`.evaluate`), the IR type checker, printer, code
generator, Graphviz view and ``trace``. The public face is :mod:`tensorplay.graph`."""

from interpreters.graph.evaluate import evaluate
from interpreters.graph.ir import INPUT_KINDS, Graph, Guard, Literal, Location, Node, Var
from interpreters.graph.recorder import Recorder
from interpreters.graph.trace import GraphModule, GuardError, trace
from interpreters.graph.typecheck import GraphTypeError, typecheck

__all__ = [
    "INPUT_KINDS", "Graph", "GraphModule", "GraphTypeError", "Guard", "GuardError", "Literal", "Location",
    "Node", "Recorder", "Var", "evaluate", "trace", "typecheck",
]
