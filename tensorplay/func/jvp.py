"""Forward mode: ``jvp`` and ``linearize``.

``jvp`` traces the function, computes the primal values in the caller's interpreter
and pushes tangents forward with the jvp rules of :mod:`tensorplay.rules.jvp`.
``linearize`` does the same once, but records the tangent computation into its own
graph: everything that depends only on the primals (``cos(x)`` for ``sin``, the
forward pass itself) is computed at linearization time, and ``jvp_fn`` evaluates
only the recorded tangent graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError
from tensorplay.interpreters.graph.evaluate import evaluate
from tensorplay.interpreters.graph.recorder import Recorder
from tensorplay.pytree import TreeSpec, check_leaves_like, tensor_leaves, tree_flatten, tree_unflatten
from tensorplay.func.tracing import (
    Dispatch, aux_output, caller_of, forward, graph_sources, highest, read, sweep_ops, tangent_sweep, trace_for_transform,
    zeros_like,
)
from tensorplay.func.cache import transformed
from tensorplay.func import versions
from tensorplay.func.staged import StagedFunction, record_pullback, run_staged, seed_inputs
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


def check_tangents(where: str, primal_leaves: Sequence[AnyTensor], primal_spec: TreeSpec,
                   tangents: Any) -> list[AnyTensor]:
    """The tangent leaves, checked against the primals: same structure, shapes and dtypes."""
    leaves, spec = tree_flatten(tangents)
    if spec != primal_spec:
        raise ArgumentError(f"{where}: tangents must have the structure of the primals {primal_spec}, got {spec}")
    check_leaves_like(where, leaves, primal_leaves, "tangent", "primal")
    return leaves


def _float_primals(where: str, leaves: Sequence[AnyTensor]) -> None:
    for i, p in enumerate(leaves):
        if p.dtype.name not in ("float32", "float64"):
            raise DTypeError(f"{where}: primal {i} has dtype {p.dtype.name}; forward-mode derivatives need float "
                             "tensors")


def jvp(func: Callable[..., Any], primals: Any, tangents: Any, *, strict: bool = False,
        has_aux: bool = False) -> Any:
    """``(output, jvp_out)`` (or ``(output, jvp_out, aux)``): ``func(*primals)`` and its
    Jacobian-vector product with ``tangents``, in one forward pass.

    ``primals`` is a tuple of arguments (tensors or pytrees of tensors); ``tangents`` must match
    it in structure, shapes and dtypes. ``jvp_out`` has the structure of ``output``. With
    ``strict=True``, an output that does not depend on the primals is an error (otherwise its
    tangent is zeros). With ``has_aux=True``, ``func`` returns ``(output, aux)``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import jvp
    >>> x = tp.tensor([0.0, 1.0])
    >>> out, tangent = jvp(lambda x: x.exp(), (x,), (tp.ones(2),))
    >>> tangent
    tensor([1.0000, 2.7183])
    """
    def uncached(primals: Any, tangents: Any) -> Any:
        return jvp_named(func, primals, tangents, strict, has_aux, "jvp")
    return transformed("jvp", func, {"strict": strict, "has_aux": has_aux}, uncached)(primals, tangents)


def jvp_named(func: Callable[..., Any], primals: Any, tangents: Any, strict: bool, has_aux: bool,
              transform: str) -> Any:
    """:func:`jvp`, naming ``transform`` in its errors (``jacfwd`` is built on it)."""
    if not isinstance(primals, tuple):
        raise ArgumentTypeError(f"jvp: expected primals to be a tuple (so that func(*primals) is valid), got "
                                f"{type(primals).__name__}")
    if not isinstance(tangents, tuple):
        raise ArgumentTypeError(f"jvp: expected tangents to be a tuple like the primals, got "
                                f"{type(tangents).__name__}")
    leaves, spec = tensor_leaves(primals, "jvp: primals")
    _float_primals(transform, leaves)
    t_leaves = check_tangents(transform, leaves, spec, tangents)
    traced = trace_for_transform(func, leaves, spec, range(len(leaves)), transform, has_aux=has_aux)
    caller = caller_of(traced, leaves)
    env = forward(traced, caller, leaves)
    ops = sweep_ops(caller, t_leaves)
    tan = tangent_sweep(traced, env, ops, dict(zip(traced.in_vars, t_leaves)), transform)
    outs = [read(env, v) for v in traced.out_vars]
    out_tangents = []
    for i, (v, o) in enumerate(zip(traced.out_vars, outs)):
        t = tan.get(v)
        if t is None:
            if strict:
                raise RuntimeError(f"jvp(strict=True): output {i} does not depend on the primals (its tangent is "
                                   "identically zero)")
            t = zeros_like(ops, o)
        out_tangents.append(t)
    output = tree_unflatten(traced.out_spec, outs)
    jvp_out = tree_unflatten(traced.out_spec, out_tangents)
    aux = aux_output(traced, env) if has_aux else None
    traced.graph.release()
    if has_aux:
        return output, jvp_out, aux
    return output, jvp_out


def linearize(func: Callable[..., Any], *primals: Any) -> tuple[Any, Callable[..., Any]]:
    """``(output, jvp_fn)``: ``func(*primals)`` computed once, and ``jvp_fn(*tangents)`` giving the
    Jacobian-vector product at ``primals`` for tangents shaped like ``primals``.

    ``jvp_fn`` runs only the recorded tangent graph: the primal computation and every quantity
    that depends only on the primals are done once, here. It can be called many times (and under
    other transforms). At top level the forward and ``jvp_fn`` are cached (:mod:`tensorplay.func.staged`);
    ``jvp_fn`` uses the values of its own forward call.

    >>> import tensorplay as tp
    >>> from tensorplay.func import linearize
    >>> out, jvp_fn = linearize(lambda x: x.sin(), tp.tensor([0.0, 1.0]))
    >>> jvp_fn(tp.tensor([1.0, 1.0]))
    tensor([1.0000, 0.5403])
    """
    staged = run_staged("linearize", func, {}, _linearize_stage(func), primals)
    leaves, spec = tree_flatten(primals)
    if staged is None:
        return _linearize_uncached(func, primals)
    output, residuals, pullback = staged
    out_spec = tree_flatten(output)[1]

    jvp_fn = StagedFunction(
        pullback, residuals, lambda *tangents: check_tangents("linearize: jvp_fn", leaves, spec, tangents),
        lambda flat: tree_unflatten(out_spec, flat),
        "The Jacobian-vector product for ``tangents`` (one per primal, same structures and shapes).")
    return output, jvp_fn


def _linearized(func: Callable[..., Any], primals: tuple[Any, ...], fill: bool) -> Any:
    """``func`` traced at ``primals``, its forward run in the caller's interpreter and its tangent map recorded:
    ``(output, outs, out_tangents, recorder, env_inputs)``, the recorder open with one user input per primal leaf.
    ``out_tangents`` has ``None`` for an output that does not depend on the primals, or zeros with ``fill``."""
    leaves, spec = tensor_leaves(primals, "linearize: primals")
    _float_primals("linearize", leaves)
    traced = trace_for_transform(func, leaves, spec, range(len(leaves)), "linearize")
    caller = caller_of(traced, leaves)
    env = forward(traced, caller, leaves)
    outs = [read(env, v) for v in traced.out_vars]
    recorder = Recorder()
    seeds = seed_inputs(recorder, leaves, "t")
    ops = Dispatch(caller, recorder)
    tan = tangent_sweep(traced, env, ops, dict(zip(traced.in_vars, seeds)), "linearize")
    out_tangents = [tan.get(v) for v in traced.out_vars]
    if fill:
        out_tangents = [zeros_like(ops, o) if t is None else t for t, o in zip(out_tangents, outs)]
    output = tree_unflatten(traced.out_spec, outs)
    return output, outs, out_tangents, recorder, [env[p] for p in traced.graph.inputs]


def _linearize_stage(func: Callable[..., Any]) -> Callable[..., Any]:
    """The forward of a cached :func:`linearize` (see :mod:`tensorplay.func.staged`): ``stage(*primals)`` is
    ``(output, residuals, pullback)``, the pullback being the recorded tangent map."""
    def stage(*primals: Any) -> Any:
        output, outs, out_tangents, recorder, inputs = _linearized(func, primals, True)
        pullback, residuals = record_pullback(recorder, out_tangents, inputs, outs, "jvp_fn")
        return output, residuals, pullback
    stage.__name__ = getattr(func, "__name__", "f")
    return stage


def _linearize_uncached(func: Callable[..., Any], primals: tuple[Any, ...]) -> tuple[Any, Callable[..., Any]]:
    """:func:`linearize` without the cache (traces at every call)."""
    output, outs, out_tangents, recorder, _ = _linearized(func, primals, False)
    leaves, spec = tree_flatten(primals)
    out_spec = tree_flatten(output)[1]
    graph = recorder.graph
    graph.outputs = [recorder.lift(t) for t in out_tangents if t is not None]
    recorder.close()
    watched = versions.watch(leaves, outs)

    def jvp_fn(*tangents: Any) -> Any:
        """The Jacobian-vector product for ``tangents`` (one per primal, same structures and shapes)."""
        restore = versions.check_unchanged(watched, "linearize: jvp_fn")
        try:
            t_leaves = check_tangents("linearize: jvp_fn", leaves, spec, tangents)
            ops = highest(graph_sources(graph), highest(t_leaves))
            flat = iter(evaluate(graph, ops, *t_leaves))
            results = [next(flat) if t is not None else zeros_like(ops, o) for t, o in zip(out_tangents, outs)]
        finally:
            restore()
        return tree_unflatten(out_spec, results)

    return output, jvp_fn


__all__ = ["check_tangents", "jvp", "jvp_named", "linearize"]
