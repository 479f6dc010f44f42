"""Reverse mode: ``vjp``, ``grad`` and ``grad_and_value``.

The function is traced once (:func:`~tensorplay.func.tracing.trace_for_transform`); the forward
values are computed in the caller's interpreter and the reverse sweep runs the vjp
rules of :mod:`tensorplay.rules.vjp` there, so the results are ordinary tensors of
the caller (eager tensors at top level, an outer transform's values when nested).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from tensorplay.pytree import TreeSpec, check_leaves_like, tensor_leaves, tree_flatten, tree_map, tree_unflatten
from tensorplay.func.tracing import (
    Dispatch, InlineTrace, aux_output, backward, caller_of, forward, ones_like, read, sweep_ops, trace_for_transform,
    trace_inline, zeros_like,
)
from tensorplay.func.cache import transformed
from tensorplay.func import versions
from tensorplay.func.staged import StagedFunction, record_pullback, run_staged, seed_inputs
from tensorplay.interpreters.graph.recorder import Recorder
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
ArgNums = int | tuple[int, ...]


def _is_float(x: AnyTensor) -> bool:
    return x.dtype.name in ("float32", "float64")


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """``(output, vjp_fn)`` (or ``(output, vjp_fn, aux)``): the output of ``func(*primals)`` and a
    function computing vector-Jacobian products at ``primals``.

    ``primals`` are tensors or pytrees (tuples, lists, dicts) of tensors. ``vjp_fn(cotangents)``
    takes cotangents with the structure, shapes and dtypes of ``output`` and returns a tuple with
    one cotangent per primal (each with that primal's structure). It can be called many times
    (the forward pass is not repeated) and under other transforms (``vmap(vjp_fn)`` is how
    :func:`~tensorplay.func.jacrev` works). With ``has_aux=True``, ``func`` returns
    ``(output, aux)`` and ``aux`` is returned as computed, without derivatives.

    At top level the forward and ``vjp_fn`` are cached (:mod:`tensorplay.func.staged`): ``vjp_fn`` uses the
    values of its own forward call (its random draws, and the inputs as they were), whatever ran since.

    >>> import tensorplay as tp
    >>> from tensorplay.func import vjp
    >>> x = tp.tensor([1.0, 2.0, 3.0])
    >>> out, vjp_fn = vjp(lambda x: x * x, x)
    >>> vjp_fn(tp.ones(3))
    (tensor([2., 4., 6.]),)
    """
    staged = run_staged("vjp", func, {"has_aux": has_aux}, _vjp_stage(func, has_aux), primals)
    if staged is None:
        return vjp_named(func, primals, has_aux, "vjp")
    result, residuals, pullback = staged
    output, aux = result if has_aux else (result, None)
    outs, out_spec = tree_flatten(output)
    _, spec = tree_flatten(primals)

    vjp_fn = StagedFunction(
        pullback, residuals, lambda cotangents, *more: _cotangent_leaves(cotangents, more, out_spec, outs),
        lambda flat: tree_unflatten(spec, flat),
        "Cotangents of the primals (a tuple, one entry per primal) for ``cotangents`` of the output.")
    if has_aux:
        return output, vjp_fn, aux
    return output, vjp_fn


def _vjp_stage(func: Callable[..., Any], has_aux: bool) -> Callable[..., Any]:
    """The forward of a cached :func:`vjp` (see :mod:`tensorplay.func.staged`): ``stage(*primals)`` is
    ``(output or (output, aux), residuals, pullback)``, the pullback recorded once from the reverse sweep."""
    def stage(*primals: Any) -> Any:
        leaves, spec, traced, env = _traced_forward(func, primals, has_aux, "vjp")
        outs = [read(env, v) for v in traced.out_vars]
        recorder = Recorder()
        seeds = seed_inputs(recorder, outs, "ct")
        ops = Dispatch(caller_of(traced, leaves), recorder)
        cts = backward(traced, env, ops, list(zip(traced.out_vars, seeds)), traced.in_vars, "vjp")
        pullback, residuals = record_pullback(recorder, _fill(ops, cts, leaves),
                                              [env[p] for p in traced.graph.inputs], outs, "vjp_fn")
        output = tree_unflatten(traced.out_spec, outs)
        return (output, aux_output(traced, env)) if has_aux else output, residuals, pullback
    stage.__name__ = getattr(func, "__name__", "f")
    return stage


def _traced_forward(func: Callable[..., Any], primals: tuple[Any, ...], has_aux: bool,
                    transform: str) -> tuple[list[AnyTensor], TreeSpec, Any, dict[Any, Any]]:
    """``func`` traced at ``primals`` (float tensor leaves) and its forward run in the caller's interpreter:
    ``(leaves, spec, traced, env)``."""
    leaves, spec = tensor_leaves(primals, f"{transform}: primals")
    for i, leaf in enumerate(leaves):
        if not _is_float(leaf):
            raise DTypeError(f"{transform}: primal {i} has dtype {leaf.dtype.name}; only float tensors can be "
                             "differentiated (close over integer inputs instead of passing them as primals)")
    traced = trace_for_transform(func, leaves, spec, range(len(leaves)), transform, has_aux=has_aux)
    return leaves, spec, traced, forward(traced, caller_of(traced, leaves), leaves)


def _cotangent_leaves(cotangents: Any, more: tuple[Any, ...], out_spec: TreeSpec, outs: Sequence[Any]) -> list[Any]:
    """The leaves of a ``vjp_fn`` argument, checked against the output (structure, shapes, dtypes)."""
    if more:
        raise ArgumentTypeError(f"vjp_fn takes the output's cotangents as one argument (a pytree like the output), "
                                f"got {1 + len(more)} arguments")
    ct_leaves, ct_spec = tree_flatten(cotangents)
    if ct_spec != out_spec:
        raise ArgumentError(f"vjp_fn: cotangents must have the structure of the output {out_spec}, got {ct_spec}")
    check_leaves_like("vjp_fn", ct_leaves, outs, "cotangent", "output")
    return ct_leaves


def vjp_named(func: Callable[..., Any], primals: tuple[Any, ...], has_aux: bool, transform: str,
              releases: list[Callable[[], None]] | None = None) -> Any:
    """:func:`vjp`, naming ``transform`` in its errors (``jacrev`` is built on it). A caller that knows when it
    is done with ``vjp_fn`` passes ``releases``: it gets the function that frees the trace at once
    (:meth:`~tensorplay.interpreters.graph.ir.Graph.release`)."""
    leaves, spec, traced, env = _traced_forward(func, primals, has_aux, transform)
    if releases is not None:
        releases.append(traced.graph.release)
    caller = caller_of(traced, leaves)
    outs = [read(env, v) for v in traced.out_vars]
    output = tree_unflatten(traced.out_spec, outs)
    watched = versions.watch(leaves, outs)

    def vjp_fn(cotangents: Any, *more: Any) -> tuple[Any, ...]:
        """Cotangents of the primals (a tuple, one entry per primal) for ``cotangents`` of the output."""
        restore = versions.check_unchanged(watched, f"{transform}: vjp_fn")
        try:
            ct_leaves = _cotangent_leaves(cotangents, more, traced.out_spec, outs)
            ops = sweep_ops(caller, ct_leaves)
            cts = backward(traced, env, ops, list(zip(traced.out_vars, ct_leaves)), traced.in_vars, transform)
            grads: tuple[Any, ...] = tree_unflatten(spec, _fill(ops, cts, leaves))
        finally:
            restore()
        return grads

    if has_aux:
        return output, vjp_fn, aux_output(traced, env)
    return output, vjp_fn


def _fill(ops: Any, cts: Sequence[Any], like: Sequence[AnyTensor]) -> list[AnyTensor]:
    """Cotangents with zeros where none reached an input (``ops`` may be a dispatcher)."""
    return [zeros_like(ops, x) if g is None else g for g, x in zip(cts, like)]


def _argnums(argnums: ArgNums, n_args: int, where: str) -> tuple[int, ...]:
    """``argnums`` normalised to a tuple of positions in ``range(n_args)``."""
    single = isinstance(argnums, int)
    items = tuple(argnums) if isinstance(argnums, (tuple, list)) else (argnums,)  # a single int (or a bad value)
    if not items:
        raise ArgumentError(f"{where}: argnums must be non-empty (an int or a tuple of ints), got {argnums!r}")
    out = []
    for a in items:
        if not isinstance(a, int) or isinstance(a, bool):
            raise ArgumentTypeError(f"{where}: argnums must be an int or a tuple of ints, got {argnums!r}")
        if not -n_args <= a < n_args:
            raise ArgumentError(f"{where}: argnums {a} is out of range for a function called with {n_args} "
                                f"positional argument(s) (expected {-n_args} <= argnum < {n_args})")
        out.append(a % n_args)
    if len(set(out)) != len(out):
        raise ArgumentError(f"{where}: argnums {argnums!r} has duplicates (expected distinct positions)")
    del single
    return tuple(out)


def diff_args(args: tuple[Any, ...], argnums: ArgNums, where: str) -> tuple[list[Any], TreeSpec, list[int]]:
    """Flatten ``args`` and pick the leaves of the arguments in ``argnums``: ``(leaves, spec, positions)``,
    the positions in the order ``argnums`` names the arguments (``argnums=(1, 0)``: the leaves of argument 1
    first, as :func:`grad_results` packs them). Those leaves must be float tensors."""
    positions = _argnums(argnums, len(args), where)
    leaves: list[Any] = []
    first: list[int] = []
    for arg in args:
        first.append(len(leaves))
        leaves.extend(tree_flatten(arg)[0])
    first.append(len(leaves))
    wrt: list[int] = []
    for i in positions:
        for j, leaf in enumerate(leaves[first[i]:first[i + 1]]):
            if not isinstance(leaf, Tensor):
                raise ArgumentTypeError(f"{where}: argument {i} (in argnums) must be a tensor or a pytree of tensors; "
                                        f"leaf {j} is a {type(leaf).__name__}")
            if not _is_float(leaf):
                raise DTypeError(f"{where}: can only differentiate with respect to float tensors; argument "
                                 f"{i}, leaf {j} has dtype {leaf.dtype.name}")
            wrt.append(first[i] + j)
    _, spec = tree_flatten(args)
    return leaves, spec, wrt


def grad_results(args: tuple[Any, ...], argnums: ArgNums, grads_flat: list[Any]) -> Any:
    """Pack flat gradients into the structure of the differentiated arguments (a tuple for tuple argnums)."""
    positions = _argnums(argnums, len(args), "grad")
    it = iter(grads_flat)
    packed = []
    for i in positions:
        sub, sub_spec = tree_flatten(args[i])
        packed.append(tree_unflatten(sub_spec, [next(it) for _ in sub]))
    return packed[0] if isinstance(argnums, int) else tuple(packed)


def grad_and_value(func: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """A function returning ``(gradient, value)`` of ``func`` from one forward pass.

    ``func`` must return a scalar (0-d float tensor); ``argnums`` selects the arguments to
    differentiate (an int: the gradient has that argument's structure; a tuple: a tuple of such).
    With ``has_aux=True``, ``func`` returns ``(value, aux)`` and the result is
    ``(gradient, (value, aux))``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import grad_and_value
    >>> g, v = grad_and_value(lambda x: (x ** 2).sum())(tp.tensor([1.0, 2.0]))
    >>> g, v
    (tensor([2., 4.]), tensor(5.))
    """
    return transformed("grad_and_value", func, {"argnums": argnums, "has_aux": has_aux},
                       grad_and_value_uncached(func, argnums, has_aux))


def grad_and_value_uncached(func: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """:func:`grad_and_value` without the cache of :mod:`tensorplay.func.cache` (traces at every call)."""
    name = getattr(func, "__name__", "f")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        leaves, spec, wrt = diff_args(args, argnums, "grad")
        # inside a symbolic transform's trace (vmap(grad(f))), f is recorded straight into it
        inline = trace_inline(func, leaves, spec, wrt, "grad", kwargs=kwargs, has_aux=has_aux)
        traced = inline.traced if inline is not None else trace_for_transform(
            func, leaves, spec, wrt, "grad", kwargs=kwargs, has_aux=has_aux)
        try:
            return _grad_and_value(traced, inline, args, [leaves[i] for i in wrt])
        finally:
            if inline is not None:
                inline.close()

    def _grad_and_value(traced: Any, inline: InlineTrace | None, args: tuple[Any, ...], inputs: list[Any]) -> Any:
        if len(traced.out_vars) != 1 or traced.out_spec.num_nodes != 1:
            raise ArgumentError(f"grad({name}): expected the function to return a scalar tensor, got an output with "
                                f"structure {traced.out_spec}; use vjp or jacrev for functions with several outputs")
        out_var = traced.out_vars[0]
        if tuple(out_var.shape) != ():
            raise ShapeError(f"grad({name}): expected the function to return a scalar (a 0-d tensor), got shape "
                             f"{list(out_var.shape)}; use vjp or jacrev for non-scalar outputs")
        if out_var.dtype.kind != "f":
            raise DTypeError(f"grad({name}): expected a float scalar output, got dtype {out_var.dtype}")
        if inline is not None:  # the values are those of the recording the function was recorded into
            caller: Any = inline.recorder
            env: dict[Any, Any] = inline.values
        else:
            caller = caller_of(traced, inputs)
            env = forward(traced, caller, inputs)
        value = read(env, out_var)
        cts = backward(traced, env, caller, [(out_var, ones_like(caller, value))], traced.in_vars, "grad")
        flat = _fill(caller, cts, inputs)
        aux = aux_output(traced, env) if has_aux else None
        if inline is not None:
            inline.close()
            flat = [inline.result(g) for g in flat]
            value = inline.result(value)
            aux = tree_map(inline.result, aux) if has_aux else None
        else:
            traced.graph.release()
        grads = grad_results(args, argnums, flat)
        if has_aux:
            return grads, (value, aux)
        return grads, value

    return wrapper


def grad(func: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar function: ``grad(f)(*args)`` has the structure of ``args[argnums]``.

    ``argnums`` is an int or a tuple of ints (then a tuple of gradients is returned). With
    ``has_aux=True``, ``f`` returns ``(value, aux)`` and the result is ``(gradient, aux)``.
    Composes with every transform: ``grad(grad(f))``, ``vmap(grad(f))`` (per-sample gradients),
    ``jacrev(grad(f))``. A non-scalar output is an error (use :func:`vjp` or
    :func:`~tensorplay.func.jacrev`).

    >>> import tensorplay as tp
    >>> from tensorplay.func import grad
    >>> x = tp.tensor(0.5)
    >>> grad(lambda x: x.sin())(x)
    tensor(0.8776)
    >>> grad(grad(lambda x: x.sin()))(x)
    tensor(-0.4794)
    >>> grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(tp.tensor([1.0, 2.0]), tp.tensor([3.0, 4.0]))
    (tensor([3., 4.]), tensor([1., 2.]))
    """
    return transformed("grad", func, {"argnums": argnums, "has_aux": has_aux}, grad_uncached(func, argnums, has_aux))


def grad_uncached(func: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """:func:`grad` without the cache of :mod:`tensorplay.func.cache` (traces at every call)."""
    inner = grad_and_value_uncached(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        grads, value = inner(*args, **kwargs)
        if has_aux:
            return grads, value[1]
        return grads

    return wrapper


__all__ = ["diff_args", "grad", "grad_and_value", "grad_and_value_uncached", "grad_results", "grad_uncached", "vjp",
           "vjp_named"]
