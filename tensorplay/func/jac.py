"""Jacobians and Hessians: ``jacrev`` (vmap of vjp), ``jacfwd`` (vmap of jvp), ``hessian``.

Shapes: the Jacobian of an output ``o`` with respect to an input ``x`` has shape
``o.shape + x.shape``. For pytree outputs the result has the output's structure with,
at each output leaf, the Jacobians with respect to the differentiated arguments
(the argument's structure for an int ``argnums``, a tuple of them for a tuple).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay.derived import reshape, permute
from tensorplay.func.jvp import jvp_named
from tensorplay.pytree import tree_flatten, tree_unflatten
from tensorplay.func.tracing import highest
from tensorplay.func.vjp import ArgNums, diff_args, grad_results, vjp_named
from tensorplay.func.cache import CHUNKED, transformed
from tensorplay.func.vmap import vmap_uncached as vmap
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


def _numel(shape: Sequence[Any]) -> Any:
    """The number of elements (an int, or a symbolic size under a trace with symbolic dims)."""
    n: Any = 1
    for d in shape:
        n = n * d
    return n


def _basis_blocks(ops: Any, likes: Sequence[AnyTensor]) -> tuple[list[AnyTensor], list[Any]]:
    """For tensors ``likes`` with ``n_i`` elements (``N`` in all), the standard basis of the flattened
    concatenation as one tensor ``[N, *like_i.shape]`` per tensor, and the offsets of each block.
    Concrete sizes give constants; symbolic sizes build the basis with ``iota`` and ``eq``."""
    sizes = [_numel(t.shape) for t in likes]
    total: Any = 0
    for n in sizes:
        total = total + n
    blocks: list[AnyTensor] = []
    offsets: list[Any] = []
    start: Any = 0
    symbolic = not isinstance(total, int)
    rows = ops.reshape(ops.iota(length=total, dtype="int64"), shape=(total, 1)) if symbolic else None
    for t, n in zip(likes, sizes):
        shape = (total,) + tuple(t.shape)
        if symbolic:
            cols = ops.reshape(ops.add(ops.iota(length=n, dtype="int64"), start), shape=(1, n))
            block = ops.cast(ops.eq(rows, cols), dtype=t.dtype.name)
            blocks.append(ops.reshape(block, shape=shape))
        else:
            array = np.zeros((total, n), dtype=t.dtype.numpy)
            array[start:start + n] = np.eye(n, dtype=t.dtype.numpy)
            blocks.append(ops.constant(array.reshape(shape)))
        offsets.append(start)
        start = start + n
    return blocks, offsets


def _rows(x: AnyTensor, start: Any, stop: Any) -> AnyTensor:
    """Rows ``start:stop`` of ``x`` along axis 0 (``x`` itself when that is all of it)."""
    shape = tuple(x.shape)
    if isinstance(start, int) and start == 0 and stop == shape[0]:  # structural equality for symbolic sizes
        return x
    return x._ops.slice(x, starts=(start,) + (0,) * (len(shape) - 1), stops=(stop,) + shape[1:],
                        steps=(1,) * len(shape))


def _partial(func: Callable[..., Any], leaves: list[Any], spec: Any, wrt: list[int],
             kwargs: dict[str, Any]) -> Callable[..., Any]:
    """``func`` as a function of the differentiated leaves only."""
    def flat(*xs: Any) -> Any:
        new = list(leaves)
        for i, x in zip(wrt, xs):
            new[i] = x
        return func(*tree_unflatten(spec, new), **kwargs)
    return flat


def jacrev(func: Callable[..., Any], argnums: ArgNums = 0, *, has_aux: bool = False,
           chunk_size: int | None = None) -> Callable[..., Any]:
    """The Jacobian of ``func`` by reverse mode: one forward pass, then ``vmap`` of the vjp over the
    standard basis of the output (``chunk_size`` basis vectors at a time when given).

    The Jacobian of output ``o`` with respect to input ``x`` has shape ``o.shape + x.shape``.
    ``argnums`` is an int or a tuple of ints; with ``has_aux=True`` the result is ``(jacobian, aux)``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import jacrev
    >>> jacrev(lambda x: x ** 2)(tp.tensor([1.0, 2.0]))
    tensor([[2., 0.],
            [0., 4.]])
    """
    return transformed("jacrev", func, {"argnums": argnums, "has_aux": has_aux, "chunk_size": chunk_size},
                       jacrev_uncached(func, argnums, has_aux=has_aux, chunk_size=chunk_size),
                       None if chunk_size is None else CHUNKED)


def jacrev_uncached(func: Callable[..., Any], argnums: ArgNums = 0, *, has_aux: bool = False,
                    chunk_size: int | None = None) -> Callable[..., Any]:
    """:func:`jacrev` without the cache of :mod:`tensorplay.func.cache` (traces at every call)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        leaves, spec, wrt = diff_args(args, argnums, "jacrev")
        xs = [leaves[i] for i in wrt]
        releases: list[Callable[[], None]] = []
        result = vjp_named(_partial(func, leaves, spec, wrt, kwargs), tuple(xs), has_aux, "jacrev", releases)
        output, vjp_fn = result[0], result[1]
        out_leaves, out_spec = tree_flatten(output)
        ops = highest(out_leaves)
        basis, offsets = _basis_blocks(ops, out_leaves)

        def pull(*cts: Any) -> Any:
            return vjp_fn(tree_unflatten(out_spec, list(cts)))

        sizes = [_numel(o.shape) for o in out_leaves]
        if all(isinstance(n, int) for n in sizes) and sum(sizes) == 1:
            # one output element (a scalar loss: the Hessian's inner Jacobian): its one basis vector is
            # pulled back directly, and each cotangent gets the basis axis of size 1 that vmap would add
            one = [reshape(b._ops, b, tuple(o.shape)) for b, o in zip(basis, out_leaves)]
            flat_cts = [reshape(ct._ops, ct, (1,) + tuple(x.shape)) for ct, x in zip(pull(*one), xs)]
        else:
            flat_cts = list(vmap(pull, chunk_size=chunk_size)(*basis))
        for release in releases:  # the vjp_fn is not called again
            release()
        per_output = []
        for o, start in zip(out_leaves, offsets):
            n = _numel(o.shape)
            jacs = [reshape(x._ops, _rows(ct, start, start + n), tuple(o.shape) + tuple(x.shape))
                    for ct, x in zip(flat_cts, xs)]
            per_output.append(grad_results(args, argnums, jacs))
        jac = tree_unflatten(out_spec, per_output)
        return (jac, result[2]) if has_aux else jac

    return wrapper


def jacfwd(func: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False, *,
           randomness: str = "error") -> Callable[..., Any]:
    """The Jacobian of ``func`` by forward mode: ``vmap`` of the jvp over the standard basis of the
    inputs. Same shapes and structure as :func:`jacrev`; ``randomness`` is passed to ``vmap``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import jacfwd
    >>> jacfwd(lambda x: x.sin().sum())(tp.tensor([0.0, 1.0]))
    tensor([1.0000, 0.5403])
    """
    return transformed("jacfwd", func, {"argnums": argnums, "has_aux": has_aux, "randomness": randomness},
                       jacfwd_uncached(func, argnums, has_aux, randomness=randomness))


def jacfwd_uncached(func: Callable[..., Any], argnums: ArgNums = 0, has_aux: bool = False, *,
                    randomness: str = "error") -> Callable[..., Any]:
    """:func:`jacfwd` without the cache of :mod:`tensorplay.func.cache` (traces at every call)."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        leaves, spec, wrt = diff_args(args, argnums, "jacfwd")
        xs = [leaves[i] for i in wrt]
        flat = _partial(func, leaves, spec, wrt, kwargs)
        ops = highest(xs)
        basis, offsets = _basis_blocks(ops, xs)
        out_spec_box: list[Any] = []

        def push(*ts: Any) -> Any:
            result = jvp_named(flat, tuple(xs), tuple(ts), False, has_aux, "jacfwd")
            t_leaves, t_spec = tree_flatten(result[1])
            out_spec_box.append(t_spec)
            return (t_leaves, result[2]) if has_aux else t_leaves

        results = vmap(push, randomness=randomness)(*basis)
        t_flat = results[0] if has_aux else results
        out_spec = out_spec_box[0]
        per_output = []
        for t in t_flat:
            o_shape = tuple(t.shape[1:])
            jacs = []
            for x, start in zip(xs, offsets):
                n = _numel(x.shape)
                block = reshape(t._ops, _rows(t, start, start + n), tuple(x.shape) + o_shape)
                k, m = len(x.shape), len(o_shape)
                perm = tuple(range(k, k + m)) + tuple(range(k))
                jacs.append(permute(block._ops, block, perm) if k and m else block)
            per_output.append(grad_results(args, argnums, jacs))
        jac = tree_unflatten(out_spec, per_output)
        if has_aux:
            aux_leaves, aux_spec = tree_flatten(results[1])
            aux = tree_unflatten(aux_spec, [a[0] if isinstance(a, Tensor) else a for a in aux_leaves])
            return jac, aux
        return jac

    return wrapper


def hessian(func: Callable[..., Any], argnums: ArgNums = 0) -> Callable[..., Any]:
    """The Hessian of a scalar function, ``jacrev(jacrev(func, argnums), argnums)``: shape
    ``x.shape + x.shape`` for one input ``x``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(tp.tensor([1.0, 2.0]))
    tensor([[6., 0.],
            [0., 12.]])
    """
    return transformed("hessian", func, {"argnums": argnums},
                       jacrev_uncached(jacrev_uncached(func, argnums), argnums))


__all__ = ["hessian", "jacfwd", "jacfwd_uncached", "jacrev", "jacrev_uncached"]
