"""The ``"numba"`` backend (the default of ``tp.compile``).

:func:`numba_backend` lowers the graph to one generated Python function over numpy arrays
(:mod:`.lower`): views are numpy views, ``matmul`` is BLAS, convolution, pooling, layer norm, softmax
and attention call the eager interpreter's kernels, and every pointwise-fusion group (with its
reduction epilogue) is one generated numba kernel (:mod:`.kernels`), loaded through the on-disk kernel
cache (:mod:`.cache`). Kernels run serially on the calling thread (no second thread pool next to
OpenBLAS's) and release the GIL, so Python threads may call one compiled function at once.

``options`` (``tp.compile(options=...)``): ``"fastmath"`` (``True``/``False`` or a set of LLVM flags;
default ``{"contract", "nsz", "reassoc"}``: NaN and inf keep their meaning), ``"fusion"`` (default
``True``; ``False`` runs every node through numpy), ``"small_kernels"`` (default ``False``: a group on fewer
than :data:`~.lower.SMALL_GROUP` elements runs through numpy unless its kernel is needed anyway; ``True``
gives every group its kernel), ``"buffers"`` (default ``True``: the arrays GEMMs and kernels write inside
the function live in buffers allocated once and reused by later calls, :mod:`.buffers`; ``False``
allocates them per call). ``strict_native`` refuses nodes without a native
lowering. ``mode`` is accepted and ignored (every mode compiles the same code here).
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Sequence
from typing import Any

from tensorplay.compiler.backends import BackendError
from tensorplay.compiler.numba_backend import cache
from tensorplay.compiler.numba_backend.kernels import GroupPlan, accumulator_dtype, kernel_arguments
from tensorplay.compiler.numba_backend.lower import lower
from tensorplay.interpreters.graph.trace import GraphModule

_counter = itertools.count()
_OPTIONS = ("buffers", "fastmath", "fusion", "small_kernels")


def _arg_types(plan: GroupPlan) -> list[tuple[str, int]]:
    rank = len(plan.merged)
    types: list[tuple[str, int]] = [("int", 0)] * rank
    types += [(v.aval.dtype, max(rank, 1)) for v in plan.inputs]
    written, accumulators = kernel_arguments(plan)
    reduction_of = {r.outputs[0].id: k for k, r in enumerate(plan.reductions)}

    def kept(k: int) -> int:
        return max(sum(1 for g in plan.merged if not plan.reduced_axes[k][g[0]]), 1)

    for v in written:
        if v.id in plan.aliases:
            continue  # written into its input
        k = reduction_of.get(v.id)
        types.append((v.aval.dtype, max(rank, 1) if k is None else kept(k)))
    for r in accumulators:
        types.append((accumulator_dtype(r), kept(reduction_of[r.outputs[0].id])))
    return types


def _codegen_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = [k for k in options if k not in _OPTIONS]
    if unknown:
        raise BackendError(f"numba backend: unknown option(s) {', '.join(map(repr, unknown))}; the options are "
                           f"{', '.join(_OPTIONS)}")
    out: dict[str, Any] = {}
    if not isinstance(options.get("buffers", True), bool):
        raise BackendError(f"numba backend: option 'buffers' must be True or False, got {options['buffers']!r}")
    if "fastmath" in options:
        value = options["fastmath"]
        if isinstance(value, bool):
            out["fastmath"] = ("contract", "nsz", "reassoc", "afn", "arcp") if value else ()
        elif isinstance(value, (set, frozenset, tuple, list)) and all(isinstance(f, str) for f in value):
            out["fastmath"] = tuple(sorted(value))
        else:
            raise BackendError(f"numba backend: option 'fastmath' must be True, False or a set of LLVM fast-math "
                               f"flags, got {value!r}")
    return out


def numba_backend(graph_module: GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Callable[..., Any]:
    """Compile ``graph_module`` (see the module docstring and :mod:`tensorplay.compiler.backends`)."""
    options = dict(kwargs.get("options") or {})
    codegen = _codegen_options(options)
    lowered = lower(graph_module.graph, strict_native=bool(kwargs.get("strict_native")),
                    fuse=bool(options.get("fusion", True)), small_kernels=bool(options.get("small_kernels", False)),
                    plan_buffers=bool(options.get("buffers", True)))
    namespace = dict(lowered.namespace)
    for slot, plan in lowered.kernels:
        namespace[slot] = cache.load_kernel(plan.source, _arg_types(plan), codegen)
    filename = f"<tensorplay-compiled-{kwargs.get('name', 'fn')}-{next(_counter)}>"
    linecache.cache[filename] = (len(lowered.source), None, lowered.source.splitlines(True), filename)
    exec(compile(lowered.source, filename, "exec"), namespace)  # noqa: S102 - our own generated source
    run: Callable[..., Any] = namespace["run"]
    run.source = lowered.source  # type: ignore[attr-defined]
    run.kernels = [plan for _, plan in lowered.kernels]  # type: ignore[attr-defined]
    run.fallbacks = [node.target for node in lowered.fallbacks]  # type: ignore[attr-defined]
    run.arena = namespace.get("_arena")  # type: ignore[attr-defined]
    return run


def reset() -> None:
    """Forget the kernels loaded in this process."""
    cache.reset()


__all__ = ["numba_backend", "reset"]
