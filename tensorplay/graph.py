"""``tensorplay.graph``: capture programs as shape-indexed SSA graphs and run them anywhere.

    >>> import tensorplay as tp
    >>> from tensorplay.graph import trace, sym
    >>> gm = trace(lambda x: (x * 2.0).relu().sum(), tp.randn(8, 3), dynamic={0: {0: "B"}})
    >>> print(gm)                      # jaxpr-style listing
    >>> gm(tp.randn(5, 3))            # runs eagerly (B = 5)
    >>> print(gm.code)                # the generated Python forward

* :func:`trace` records a function or module into a :class:`GraphModule`
  (symbolic by default; ``execute=True`` keeps values and records guards).
* :class:`Graph` is the IR (``graph.nodes``, ``graph.placeholders``,
  ``node.target``, ``node.meta["val"]``); :func:`evaluate` runs one with any
  interpreter (eagerly, or re-recording it into another graph);
  :func:`typecheck` re-runs every shape rule and checks single assignment.
* :class:`SymDim` / :func:`sym` build symbolic dims (``2*sym("B") + 1``).
"""

from tensorplay.interpreters.graph.codegen import python_code
from tensorplay.interpreters.graph.dot import to_dot
from tensorplay.interpreters.graph.evaluate import evaluate
from tensorplay.interpreters.graph.ir import INPUT_KINDS, Graph, Guard, Literal, Location, Node, Var
from tensorplay.interpreters.graph.printer import format_graph
from tensorplay.interpreters.graph.recorder import Recorder
from tensorplay.interpreters.graph.trace import GraphModule, GuardError, trace
from tensorplay.interpreters.graph.typecheck import GraphTypeError, typecheck
from tensorplay.errors import GraphCaptureError
from tensorplay.symbolic import Dim, SymDim, parse_dim, sym, symbols

__all__ = [
    "Dim", "Graph", "GraphCaptureError", "GraphModule", "GraphTypeError", "Guard", "GuardError", "INPUT_KINDS", "Literal",
    "Location", "Node", "Recorder", "SymDim", "Var", "evaluate", "format_graph", "parse_dim", "python_code",
    "sym", "symbols", "to_dot", "trace", "typecheck",
]
