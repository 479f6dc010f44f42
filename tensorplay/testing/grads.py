"""``check_grads``: reverse and forward mode (and their compositions) against finite differences."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay.pytree import tree_unflatten
from tensorplay.tensor import Tensor
from tensorplay.testing.compare import NotCloseError, as_array, assert_close, format_path
from tensorplay.testing.finite_differences import DEFAULT_EPS, is_float_leaf, numerical_jvp
from tensorplay.testing.trees import flatten_with_paths

AnyTensor = Tensor[*tuple[Any, ...]]
Flat = Callable[..., list[AnyTensor]]

MODES = ("rev", "fwd")
_MODE_WORDS = {"rev": ("reverse", "vjp"), "fwd": ("forward", "jvp")}
DEFAULT_RTOL = 1e-5
DEFAULT_ATOL = 1e-6


def argument_names(f: Callable[..., Any], paths: Sequence[tuple[Any, ...]]) -> list[str]:
    """A readable name per leaf path of ``f``'s positional arguments: ``argument 0 ('w')``,
    ``argument 1 ('params')['fc.weight']`` (the parameter name when ``f``'s signature has one)."""
    try:
        params = [p for p in inspect.signature(f).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = [p.name for p in params]
    except (TypeError, ValueError):
        names = []
    out = []
    for path in paths:
        index = path[0]
        label = f"argument {index}" + (f" ({names[index]!r})" if index < len(names) else "")
        out.append(label + format_path(path[1:]))
    return out


class _Problem:
    """A function of float64 tensors returning a list of float tensors, with names for both sides."""

    def __init__(self, fn: Flat, inputs: list[AnyTensor], input_names: list[str], output_names: list[str],
                 chain: tuple[str, ...]) -> None:
        self.fn = fn
        self.inputs = inputs
        self.input_names = input_names
        self.output_names = output_names
        self.chain = chain


def _float_outputs(out: Any) -> tuple[list[AnyTensor], list[str]]:
    paths, leaves, _ = flatten_with_paths(out)
    kept = [(p, t) for p, t in zip(paths, leaves) if isinstance(t, Tensor) and t.is_floating_point]
    return [t for _, t in kept], ["output" + format_path(p) for p, _ in kept]


def _root_problem(f: Callable[..., Any], args: Sequence[Any]) -> _Problem:
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"check_grads: args must be a tuple of positional arguments, got {type(args).__name__}")
    paths, leaves, spec = flatten_with_paths(tuple(args), none_is_leaf=True)
    positions = [i for i, leaf in enumerate(leaves) if is_float_leaf(leaf)]
    if not positions:
        raise ValueError("check_grads: no float tensor or array among the arguments: nothing to differentiate")
    inputs = [tp.tensor(np.array(as_array(leaves[i]), dtype=np.float64), dtype=tp.float64) for i in positions]
    fixed = [tp.tensor(leaf) if isinstance(leaf, np.ndarray) else leaf for leaf in leaves]

    def call(xs: Sequence[AnyTensor]) -> Any:
        return f(*tree_unflatten(spec, _substituted(fixed, positions, list(xs))))

    def flat(*xs: AnyTensor) -> list[AnyTensor]:
        return _float_outputs(call(xs))[0]

    _, output_names = _float_outputs(call(inputs))
    if not output_names:
        raise ValueError("check_grads: f returned no float tensor: nothing to differentiate")
    return _Problem(flat, inputs, argument_names(f, [paths[i] for i in positions]), output_names, ())


def _substituted(leaves: list[Any], positions: list[int], values: list[Any]) -> list[Any]:
    out = list(leaves)
    for i, v in zip(positions, values):
        out[i] = v
    return out


def _label(mode: str, chain: tuple[str, ...]) -> str:
    modes = (mode, *reversed(chain))
    words = "-over-".join(_MODE_WORDS[m][0] for m in modes)
    calls = " of ".join(_MODE_WORDS[m][1] for m in modes)
    return f"{words} mode ({calls} of f)"


def _tensor(array: np.ndarray[Any, Any], like: AnyTensor) -> AnyTensor:
    return tp.tensor(array, dtype=like.dtype)


def _check_first_order(problem: _Problem, modes: Sequence[str], eps: float, rtol: float, atol: float,
                       rng: np.random.Generator) -> None:
    __tracebackhide__ = True
    from tensorplay.func import jvp, vjp

    xs = problem.inputs
    outs = problem.fn(*xs)
    cotangents = [_tensor(rng.standard_normal(tuple(o.shape)), o) for o in outs]
    pulled: tuple[Any, ...] = ()
    if "rev" in modes:
        _, vjp_fn = vjp(problem.fn, *xs)
        pulled = vjp_fn(cotangents)
    for i, (x, name) in enumerate(zip(xs, problem.input_names)):
        direction = rng.standard_normal(tuple(x.shape))
        fd = numerical_jvp(problem.fn, xs, [direction if j == i else None for j in range(len(xs))], eps=eps)
        for mode in modes:
            if mode == "rev":
                _check_projection(problem, i, name, pulled[i], direction, cotangents, fd, eps, rtol, atol)
                continue
            tangents = tuple(_tensor(direction, x) if j == i else tp.zeros_like(t) for j, t in enumerate(xs))
            _, pushed = jvp(problem.fn, tuple(xs), tangents)
            for out_name, got, expected in zip(problem.output_names, pushed, fd):
                assert_close(got, expected, rtol=rtol, atol=atol, check_dtype=False,
                             msg=f"check_grads: {_label('fwd', problem.chain)} disagrees with central finite "
                                 f"differences (eps={eps:g}) for {name}, at {out_name}, along a random direction:")


def _check_projection(problem: _Problem, i: int, name: str, pulled: AnyTensor, direction: np.ndarray[Any, Any],
                      cotangents: list[AnyTensor], fd: list[np.ndarray[Any, Any]], eps: float, rtol: float,
                      atol: float) -> None:
    """``<J^T u, v>`` from reverse mode equals ``<u, J v>`` from finite differences."""
    __tracebackhide__ = True
    label = _label("rev", problem.chain)
    got = as_array(pulled)
    if got.shape != direction.shape:
        raise NotCloseError(f"check_grads: {label} gives a cotangent of shape {list(got.shape)} for {name}, "
                            f"expected {list(direction.shape)}", path=name, kind="shape")
    us = [as_array(u).astype(np.float64) for u in cotangents]
    lhs = float(np.sum(got.astype(np.float64) * direction))
    rhs = float(sum(np.sum(u * d) for u, d in zip(us, fd)))
    allowed = atol * float(sum(np.sum(np.abs(u)) for u in us)) + rtol * float(
        sum(np.sum(np.abs(u * d)) for u, d in zip(us, fd)))
    if not abs(lhs - rhs) <= allowed:
        raise NotCloseError(
            f"check_grads: {label} disagrees with central finite differences (eps={eps:g}) for {name}:\n"
            f"  <vjp(u), v> = {lhs:.10g} but <u, (f(x + eps v) - f(x - eps v)) / (2 eps)> = {rhs:.10g}\n"
            f"  difference {abs(lhs - rhs):.3g}, allowed {allowed:.3g} (atol={atol:g} * sum|u| + rtol={rtol:g} * "
            f"sum|u * jvp|)\n"
            f"  v: one random direction for {name} (shape {list(direction.shape)}); u: random cotangents of "
            f"{', '.join(problem.output_names)}", path=name, kind="projection", mismatched=1, total=1,
            max_abs_diff=abs(lhs - rhs))


def _derivative(problem: _Problem, mode: str, rng: np.random.Generator) -> _Problem:
    """The problem whose function is ``problem``'s derivative in ``mode`` along fixed random vectors:
    ``x -> jvp(f, x, v)`` or ``x -> vjp(f, x)(u)``."""
    from tensorplay.func import jvp, vjp

    fn, xs = problem.fn, problem.inputs
    if mode == "fwd":
        tangents = tuple(_tensor(rng.standard_normal(tuple(x.shape)), x) for x in xs)

        def forward(*inputs: AnyTensor) -> list[AnyTensor]:
            return list(jvp(fn, tuple(inputs), tangents)[1])

        names = [f"tangent of {n}" for n in problem.output_names]
        return _Problem(forward, xs, problem.input_names, names, problem.chain + (mode,))
    cotangents = [_tensor(rng.standard_normal(tuple(o.shape)), o) for o in fn(*xs)]

    def reverse(*inputs: AnyTensor) -> list[AnyTensor]:
        return list(vjp(fn, *inputs)[1](cotangents))

    names = [f"cotangent of {n}" for n in problem.input_names]
    return _Problem(reverse, xs, problem.input_names, names, problem.chain + (mode,))


def _check(problem: _Problem, order: int, modes: Sequence[str], eps: float, rtol: float, atol: float,
           seed: int) -> None:
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    _check_first_order(problem, modes, eps, rtol, atol, rng)
    if order > 1:
        for mode in modes:
            _check(_derivative(problem, mode, rng), order - 1, modes, eps, rtol, atol, seed + 1)


def check_grads(f: Callable[..., Any], args: Sequence[Any], *, order: int = 1, modes: Sequence[str] = MODES,
                eps: float | None = None, rtol: float | None = None, atol: float | None = None,
                seed: int = 0) -> None:
    """Check the derivatives of ``f`` at ``args`` against central finite differences, in float64.

    ``args`` is the tuple of positional arguments (pytrees allowed). Every float leaf (tensor or
    array, float32 or float64) is a variable, given to ``f`` as a float64 tensor (so ``f`` must
    compute in the precision of its inputs); other leaves are held fixed. Every float leaf of the
    output is checked; integer and boolean outputs have no derivative.

    For each variable ``x`` and one random direction ``v`` (of ``x``'s shape; one per check, so large
    inputs cost two evaluations of ``f``), with ``fd = (f(x + eps v) - f(x - eps v)) / (2 eps)``:

    * ``"fwd"``: :func:`tensorplay.func.jvp` along ``v`` equals ``fd`` elementwise
      (:func:`assert_close` with ``rtol``/``atol``);
    * ``"rev"``: for random output cotangents ``u``, :func:`tensorplay.func.vjp` gives ``J^T u`` whose
      projection ``<J^T u, v>`` equals ``<u, fd>`` within ``atol * sum|u| + rtol * sum|u * fd|``;
    * ``order=2`` then checks, in every mode, the derivative functions ``x -> jvp(f, x, v)`` and
      ``x -> vjp(f, x)(u)`` themselves (forward-over-reverse, reverse-over-reverse, ...); ``order=n``
      recurses ``n - 1`` times.

    Defaults: ``eps=1e-6``, ``rtol=1e-5``, ``atol=1e-6``; ``seed`` fixes the random vectors. A failure
    raises :class:`NotCloseError` naming the mode (e.g. ``forward-over-reverse mode (jvp of vjp of f)``),
    the argument (``argument 1 ('x')``, with the pytree path) and, in forward mode, the output leaf.

    >>> import tensorplay as tp
    >>> from tensorplay.testing import check_grads
    >>> check_grads(lambda w, x: (x @ w.T).tanh().sum(), (tp.randn(4, 3), tp.randn(5, 3)), order=2)
    """
    __tracebackhide__ = True
    if isinstance(order, bool) or not isinstance(order, int) or order < 1:
        raise ValueError(f"check_grads: order must be a positive int, got {order!r}")
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes or isinstance(modes, str):
        raise ValueError(f"check_grads: modes must be a non-empty sequence of 'rev' and 'fwd', got {modes!r}")
    _check(_root_problem(f, args), order, tuple(modes), DEFAULT_EPS if eps is None else eps,
           DEFAULT_RTOL if rtol is None else rtol, DEFAULT_ATOL if atol is None else atol, seed)


__all__ = ["argument_names", "check_grads"]
