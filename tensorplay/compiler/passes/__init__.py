"""The pass pipeline: each pass rewrites a :class:`~tensorplay.interpreters.graph.ir.Graph` in place
(graph -> graph) through the IR's rewrite API and leaves it well typed (``typecheck`` holds after each
one; the tests check it).

In order (:data:`PIPELINE`):

1. :mod:`.normalize` -- operator normalization: identities removed (``stop_gradient`` in a forward
   graph, casts to the same dtype, reshapes and broadcasts to the same shape, identity permutations
   and slices), chains of reshapes and permutations composed, literals of commutative operators moved
   to the right;
2. :mod:`.fold` -- constant folding: nodes whose inputs are all constants are computed once, at
   compile time, and become constant inputs;
3. :mod:`.decompose` -- decomposition: primitives the backend handles better as simpler ones
   (a decomposition table, ``target -> builder(graph, node) -> value``);
4. :mod:`.cse` -- common-subexpression elimination (random primitives are never merged);
5. :mod:`.dce` -- dead-code elimination;
6. :mod:`.fusion` -- pointwise-fusion grouping: annotates ``node.meta["fusion_group"]``;
7. :mod:`.shapes` -- shape propagation (advisory): annotates ``node.meta["static_shape"]`` and
   ``node.meta["numel"]`` where the sizes are known.
"""

from __future__ import annotations

from collections.abc import Callable

from tensorplay.interpreters.graph.ir import Graph
from tensorplay.interpreters.graph.typecheck import typecheck

from tensorplay.compiler.passes.cse import eliminate_common_subexpressions
from tensorplay.compiler.passes.dce import eliminate_dead_code
from tensorplay.compiler.passes.decompose import DEFAULT_DECOMPOSITIONS, decompose
from tensorplay.compiler.passes.fold import fold_constants
from tensorplay.compiler.passes.fusion import group_pointwise
from tensorplay.compiler.passes.normalize import normalize
from tensorplay.compiler.passes.shapes import propagate_shapes

Pass = Callable[[Graph], object]

PIPELINE: tuple[tuple[str, Pass], ...] = (
    ("normalize", normalize),
    ("fold", fold_constants),
    ("decompose", decompose),
    ("cse", eliminate_common_subexpressions),
    ("dce", eliminate_dead_code),
    ("fusion", group_pointwise),
    ("shapes", propagate_shapes),
)
"""The passes, in the order :func:`optimize` runs them."""


def optimize(graph: Graph, *, check: bool = False) -> Graph:
    """Run :data:`PIPELINE` on ``graph`` in place (``check``: typecheck after every pass); returns it."""
    for _, run in PIPELINE:
        run(graph)
        if check:
            typecheck(graph)
    return graph


__all__ = ["DEFAULT_DECOMPOSITIONS", "PIPELINE", "decompose", "eliminate_common_subexpressions",
           "eliminate_dead_code", "fold_constants", "group_pointwise", "normalize", "optimize", "propagate_shapes"]
