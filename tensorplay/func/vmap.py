"""``vmap`` and ``chunk_vmap``: vectorising a per-sample function over a batch axis.

The function is traced symbolically on one sample (the batch axis removed from the
mapped inputs), then the graph is evaluated with the batching rules of
:mod:`tensorplay.rules.batching` in the caller's interpreter, tracking where each
value's batch axis is (``None`` for values that do not depend on the mapped inputs:
they are computed once, unbatched).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from tensorplay.interpreters.graph.batched import (
    RANDOMNESS, BatchedWalker, place, placeholder_values, random_keys,
)
from tensorplay.errors import ArgumentError
from tensorplay.interpreters.graph.evaluate import apply_mutations
from tensorplay.interpreters.graph.ir import Var
from tensorplay.spec.aval import Aval
from tensorplay.spec.table import names
from tensorplay.pytree import broadcast_prefix, tree_flatten, tree_unflatten
from tensorplay.func.tracing import Traced, graph_sources, highest, trace_for_transform
from tensorplay.func.cache import CHUNKED, transformed
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Dim = int | None


def _check_options(in_dims: Any, out_dims: Any, randomness: str, chunk_size: int | None, where: str) -> None:
    if randomness not in RANDOMNESS:
        raise ArgumentError(f"{where}: randomness must be 'error', 'different' or 'same', got {randomness!r}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool)
                                   or chunk_size < 1):
        raise ArgumentError(f"{where}: chunk_size must be None or a positive int, got {chunk_size!r}")
    for what, dims in (("in_dims", in_dims), ("out_dims", out_dims)):
        leaves, _ = tree_flatten(dims)
        for d in leaves:
            if not isinstance(d, int) or isinstance(d, bool):
                raise ArgumentError(f"{where}: {what} must be an int, None, or a (nested) tuple/list/dict of them; "
                                    f"got {d!r} in {what}={dims!r}")


def _in_dims(func_name: str, in_dims: Any, args: tuple[Any, ...]) -> tuple[list[Any], Any, list[Dim], Any]:
    """``(leaves, spec, dims, batch_size)`` for a call: one normalised batch axis (or ``None``) per leaf."""
    where = f"vmap({func_name}, in_dims={in_dims!r})"
    if isinstance(in_dims, (tuple, list)) and not isinstance(in_dims, tuple):
        in_dims = tuple(in_dims)
    if isinstance(in_dims, tuple) and len(in_dims) != len(args):
        raise ArgumentError(f"{where}: expected one in_dim per positional argument, got {len(in_dims)} in_dims for "
                            f"{len(args)} argument(s)")
    if not isinstance(in_dims, (int, tuple)) and in_dims is not None:
        raise ArgumentError(f"{where}: in_dims must be an int, None or a tuple with one entry per argument, got "
                            f"{type(in_dims).__name__}")
    leaves, spec = tree_flatten(args)
    dims = broadcast_prefix(in_dims, args, f"{where}: in_dims")
    size: Any = None
    out: list[Dim] = []
    for i, (leaf, d) in enumerate(zip(leaves, dims)):
        if d is None:
            out.append(None)
            continue
        if not isinstance(leaf, Tensor):
            raise ArgumentError(f"{where}: got in_dim={d} for input {i}, which is a {type(leaf).__name__}; vmap can "
                                "only map over tensors, use None as the in_dim of other arguments")
        n = leaf.ndim
        if not -n <= d < n:
            raise ArgumentError(f"{where}: got in_dim={d} for input {i} of rank {n} (shape {list(leaf.shape)}); "
                                f"expected {-n} <= in_dim < {n}" if n else f"{where}: input {i} is 0-d and has no axis to map "
                                f"over (in_dim={d}); use None for it")
        d %= n
        s = leaf.shape[d]
        if size is None:
            size = s
        elif s != size:
            sizes = [leaves[j].shape[dd] for j, dd in enumerate(dims[:i + 1]) if dd is not None]
            raise ArgumentError(f"{where}: expected all mapped inputs to have the same size in the mapped dimension, "
                                f"got sizes {[int(x) if isinstance(x, int) else x for x in sizes]}")
        out.append(d)
    if size is None:
        raise ArgumentError(f"{where}: at least one input must be mapped (every in_dim is None or no argument is a "
                            "tensor)")
    return leaves, spec, out, size


def vmap(func: Callable[..., Any], in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
         chunk_size: int | None = None) -> Callable[..., Any]:
    """Vectorise ``func`` over a batch axis: ``vmap(f)(xs)[i] == f(xs[i])``.

    * ``in_dims``: which axis of each input is mapped; an int (every input), or a tuple with one entry
      per positional argument, nested like the arguments (a prefix: an entry applies to every tensor
      below it). ``None`` marks an unmapped argument (passed whole to every sample). Negative axes
      count from the end. Keyword arguments are never mapped.
    * ``out_dims``: where the batch axis goes in each output (same prefix rules). An output that does
      not depend on the mapped inputs is broadcast along the batch axis; ``None`` returns such an
      output as it is (and is an error for an output that depends on the mapped inputs).
    * ``randomness``: random operations inside ``func`` (dropout, ...) raise with ``"error"``; with
      ``"different"`` every sample draws its own numbers, with ``"same"`` they share one draw.
    * ``chunk_size``: evaluate at most this many samples at a time (bounds peak memory; the results
      are concatenated).

    Composes with every transform: ``vmap(grad(f))`` gives per-sample gradients, ``vmap(vmap(f))``
    maps two axes, ``jacrev`` is ``vmap`` of a ``vjp``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import vmap
    >>> x = tp.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> vmap(lambda row: row.sum())(x)
    tensor([3., 7., 11.])
    >>> vmap(lambda col, w: (col * w).sum(), in_dims=(1, None))(x, tp.tensor([1.0, 0.0, 1.0]))
    tensor([6., 8.])
    >>> vmap(vmap(lambda a, b: a * b), in_dims=(0, None))(tp.ones(2, 3), tp.arange(3.0)).shape
    tp.Size([2, 3])
    """
    _check_options(in_dims, out_dims, randomness, chunk_size, "vmap")
    options = {"in_dims": in_dims, "out_dims": out_dims, "randomness": randomness, "chunk_size": chunk_size}
    return transformed("vmap", func, options, _vmap_checked(func, in_dims, out_dims, randomness, chunk_size),
                       None if chunk_size is None else CHUNKED)


def vmap_uncached(func: Callable[..., Any], in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error", *,
                  chunk_size: int | None = None) -> Callable[..., Any]:
    """:func:`vmap` without the cache of :mod:`tensorplay.func.cache` (traces at every call)."""
    _check_options(in_dims, out_dims, randomness, chunk_size, "vmap")
    return _vmap_checked(func, in_dims, out_dims, randomness, chunk_size)


def _vmap_checked(func: Callable[..., Any], in_dims: Any, out_dims: Any, randomness: str,
                  chunk_size: int | None) -> Callable[..., Any]:
    """:func:`vmap_uncached` of options already checked."""
    name = getattr(func, "__name__", "f")

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, spec, dims, size = _in_dims(name, in_dims, args)
        return _vmap_call(func, name, leaves, spec, dims, size, kwargs, out_dims, randomness, chunk_size)

    return wrapped


def chunk_vmap(func: Callable[..., Any], in_dims: Any = 0, out_dims: Any = 0, randomness: str = "error",
               chunks: int = 2) -> Callable[..., Any]:
    """:func:`vmap` evaluated in ``chunks`` pieces of (nearly) equal size along the batch axis, to bound
    peak memory; ``chunks=1`` is plain ``vmap``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import chunk_vmap
    >>> chunk_vmap(lambda x: x * 2, chunks=3)(tp.arange(5.0))
    tensor([0., 2., 4., 6., 8.])
    """
    if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks < 1:
        raise ArgumentError(f"chunk_vmap: chunks must be a positive int, got {chunks!r}")
    _check_options(in_dims, out_dims, randomness, None, "chunk_vmap")
    name = getattr(func, "__name__", "f")
    options = {"in_dims": in_dims, "out_dims": out_dims, "randomness": randomness, "chunks": chunks}

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        leaves, spec, dims, size = _in_dims(name, in_dims, args)
        chunk = None
        if chunks > 1 and isinstance(size, int) and size > 0:
            chunk = max(1, math.ceil(size / chunks))
        return _vmap_call(func, name, leaves, spec, dims, size, kwargs, out_dims, randomness, chunk)

    return transformed("chunk_vmap", func, options, wrapped, None if chunks == 1 else CHUNKED)


# ---- the batched interpretation ------------------------------------------------------------------

def _vmap_call(func: Callable[..., Any], name: str, leaves: list[Any], spec: Any, dims: list[Dim], size: Any,
               kwargs: dict[str, Any], out_dims: Any, randomness: str, chunk_size: int | None) -> Any:
    wrt = [i for i, d in enumerate(dims) if d is not None]
    avals = []
    for i in wrt:
        x, d = leaves[i], dims[i]
        assert d is not None
        shape = tuple(x.shape)
        avals.append(Aval(shape[:d] + shape[d + 1:], x.dtype.name))
    traced = trace_for_transform(func, leaves, spec, wrt, "vmap", kwargs=kwargs, avals=avals, symbolic=True)
    inputs = [(leaves[i], dims[i]) for i in wrt]
    caller = highest(graph_sources(traced.graph), highest([x for x, _ in inputs]))
    keys = random_keys(traced.graph, caller, randomness, size, f"vmap({name})")
    od = [out_dims] * len(traced.out_vars) if out_dims is None or isinstance(out_dims, int) else broadcast_prefix(
        out_dims, tree_unflatten(traced.out_spec, traced.out_vars), f"vmap({name}, out_dims={out_dims!r}): out_dims")
    if chunk_size is None or not isinstance(size, int) or chunk_size >= size:
        env = _run_batched(traced, caller, inputs, keys)
        outs = [place(caller, env[v], o, size, i, f"vmap({name})")
                for i, (v, o) in enumerate(zip(traced.out_vars, od))]
        traced.graph.release()
        return tree_unflatten(traced.out_spec, outs)
    pieces: list[list[Any]] = [[] for _ in traced.out_vars]
    for start in range(0, size, chunk_size):
        stop = min(start + chunk_size, size)
        chunk_inputs = [(_take(caller, x, d, start, stop) if d is not None else x, d) for x, d in inputs]
        chunk_keys = {p: (_take(caller, k, d, start, stop) if d is not None else k, d) for p, (k, d) in keys.items()}
        env = _run_batched(traced, caller, chunk_inputs, chunk_keys)
        for i, (v, o) in enumerate(zip(traced.out_vars, od)):
            pieces[i].append(place(caller, env[v], o, stop - start, i, f"vmap({name})"))
    outs = []
    for parts, o in zip(pieces, od):
        if o is None:
            outs.append(parts[0])
        else:
            axis = o % parts[0].ndim
            outs.append(parts[0] if len(parts) == 1 else caller.concat(*parts, axis=axis))
    traced.graph.release()
    return tree_unflatten(traced.out_spec, outs)


def _run_batched(traced: Traced, ops: Any, inputs: Sequence[tuple[AnyTensor, Dim]],
                 keys: dict[Var, tuple[AnyTensor, Dim]]) -> dict[Any, tuple[Any, Dim]]:
    """Evaluate the traced graph with the batching rules; every value is ``(tensor, batch axis or None)``."""
    graph = traced.graph
    values = placeholder_values(graph, ops, list(inputs), keys)
    # only what the outputs need: a transform traced inside (``vmap(grad(f))``) leaves values nothing reads
    # (the loss itself), and batching them would cost rule steps and operations for nothing
    env = BatchedWalker(ops).run(graph.live_nodes(_is_check), dict(values))
    if graph.mutations:
        _write_state(graph, ops, values, env)
    return env


_CHECKS = frozenset(names("check"))


def _is_check(node: Any) -> bool:
    """A recorded check of values (``check_index``): kept even when nothing reads its value, so a bad index
    raises; any other unread value is skipped, as the cached graph (dead-code eliminated) skips it."""
    return node.target in _CHECKS


def _write_state(graph: Any, ops: Any, values: dict[Any, tuple[Any, Dim]], env: dict[Any, tuple[Any, Dim]]) -> None:
    """State the function updates (batch-norm running statistics) is written back when the new value is
    the same for every sample; a value that depends on the mapped inputs is refused, as in PyTorch."""
    news = []
    for placeholder, value in graph.mutations:
        new, dim = env[value] if isinstance(value, Var) else (value.value, None)
        if dim is not None:
            raise ArgumentError(
                f"vmap: the function updates {placeholder.name!r}, state from outside it (a module buffer such as "
                "batch-norm running statistics), with a value that depends on the mapped inputs: there would be "
                "one update per sample. Put the module in eval mode, replace its batch norms with "
                "tensorplay.func.replace_all_batch_norm_modules_, or update the state outside vmap")
        news.append(new)
    apply_mutations(graph, ops, [values[p][0] for p in graph.inputs], news)


def _take(ops: Any, x: AnyTensor, d: int, start: int, stop: int) -> AnyTensor:
    """Samples ``start:stop`` of ``x`` along its batch axis ``d``."""
    shape = tuple(x.shape)
    starts = tuple(start if a == d else 0 for a in range(len(shape)))
    stops = tuple(stop if a == d else s for a, s in enumerate(shape))
    return ops.slice(x, starts=starts, stops=stops, steps=(1,) * len(shape))  # type: ignore[no-any-return]



__all__ = ["vmap_uncached", "chunk_vmap", "vmap"]
