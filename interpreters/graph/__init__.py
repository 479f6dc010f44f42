"""The graph interpreter: shape-indexed SSA capture (:mod:`.recorder`), the IR (:mod:`.ir`),
evaluation with any interpreter (:mod:`.evaluate`), the IR type checker, printer, code
generator, Graphviz view and ``trace``. The public face is :mod:`tensorplay.graph`."""

from tensorplay.interpreters.graph.evaluate import evaluate
from tensorplay.interpreters.graph.ir import INPUT_KINDS, Graph, Guard, Literal, Location, Node, Var
from tensorplay.interpreters.graph.recorder import Recorder
from tensorplay.interpreters.graph.trace import GraphModule, GuardError, trace
from tensorplay.interpreters.graph.typecheck import GraphTypeError, typecheck

__all__ = [
    "INPUT_KINDS", "Graph", "GraphModule", "GraphTypeError", "Guard", "GuardError", "Literal", "Location",
    "Node", "Recorder", "Var", "evaluate", "trace", "typecheck",
]
