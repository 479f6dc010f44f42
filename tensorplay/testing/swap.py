"""``check_interpreters``: one program, every registered way of running it, compared with eager."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay import random_state
from tensorplay.pytree import tree_flatten, tree_unflatten
from tensorplay.tensor import Tensor
from tensorplay.testing.compare import NotCloseError, assert_close, default_tolerances, format_path
from tensorplay.testing.grads import argument_names
from tensorplay.testing.registry import NotApplicable, Runner, select, using_tolerances
from tensorplay.testing.trees import flatten_with_paths
from tensorplay.testing.ways import ModuleState, is_module

AnyTensor = Tensor[*tuple[Any, ...]]


def _name(program: Any) -> str:
    return str(getattr(program, "__name__", type(program).__name__))


def _signature_target(program: Any) -> Any:
    forward = getattr(program, "forward", None)
    return forward if is_module(program) and callable(forward) else getattr(program, "fn", program)


class GradientProgram:
    """``program``'s vector-Jacobian product at its arguments, as a program of the same arguments:
    calling it returns ``{name: gradient}`` for every float tensor argument and every parameter that
    requires grad (``tensorplay.func.vjp`` with fixed random cotangents of the float outputs), so
    each way of running can run it. :meth:`reference` computes the same with the eager tape."""

    def __init__(self, program: Any, args: Sequence[Any], expected: Any, seed: int = 0) -> None:
        self.program = program
        self.module = program if is_module(program) else None
        paths, leaves, _ = flatten_with_paths(tuple(args))
        self.positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tensor) and leaf.is_floating_point]
        self.params: dict[str, AnyTensor] = {}
        if self.module is not None:
            self.params = {n: p for n, p in self.module.named_parameters() if p.requires_grad}
        rng = np.random.default_rng(seed)
        outs = _float_leaves(expected)
        self.cotangents = [tp.tensor(rng.standard_normal(tuple(o.shape)), dtype=o.dtype) for o in outs]
        self.names = [f"gradient w.r.t. {n}" for n in argument_names(_signature_target(program),
                                                                     [paths[i] for i in self.positions])]
        self.names += [f"gradient w.r.t. parameter {n!r}" for n in self.params]
        self.__name__ = f"gradient of {_name(program)}"

    @property
    def empty(self) -> bool:
        """Nothing to differentiate (no float input or parameter, or no float output)."""
        return not self.cotangents or not (self.positions or self.params)

    def _call(self, args: Sequence[Any], params: dict[str, Any] | None, diff: Sequence[Any]) -> list[AnyTensor]:
        leaves, spec = tree_flatten(tuple(args))
        for i, x in zip(self.positions, diff):
            leaves[i] = x
        rebuilt = tree_unflatten(spec, leaves)
        if self.module is not None and params is not None:
            from tensorplay.func import functional_call
            return _float_leaves(functional_call(self.module, params, tuple(rebuilt)))
        return _float_leaves(self.program(*rebuilt))

    def __call__(self, *args: Any) -> dict[str, AnyTensor]:
        from tensorplay.func import vjp

        leaves, _ = tree_flatten(tuple(args))
        diff = [leaves[i] for i in self.positions]
        if self.params:
            _, vjp_fn = vjp(lambda p, *xs: self._call(args, p, xs), self.params, *diff)
            grad_params, *grad_args = vjp_fn(self.cotangents)
            grads = [*grad_args, *(grad_params[n] for n in self.params)]
        else:
            _, vjp_fn = vjp(lambda *xs: self._call(args, None, xs), *diff)
            grads = list(vjp_fn(self.cotangents))
        return dict(zip(self.names, grads))

    def reference(self, args: Sequence[Any]) -> dict[str, AnyTensor]:
        """The same gradients from the eager tape (``backward`` semantics)."""
        leaves, _ = tree_flatten(tuple(args))
        inputs = [leaves[i].detach().requires_grad_(True) for i in self.positions]
        with tp.enable_grad():
            outs = self._call(args, None, inputs)
            loss: Any = None
            for o, ct in zip(outs, self.cotangents):
                term = (o * ct).sum()
                loss = term if loss is None else loss + term
        wrt = [*inputs, *self.params.values()]
        if loss is None or not loss.requires_grad:
            grads: Sequence[Any] = [None] * len(wrt)
        else:
            grads = tp.autograd.grad(loss, wrt, allow_unused=True)
        return {n: tp.zeros_like(w.detach()) if g is None else g for n, w, g in zip(self.names, wrt, grads)}


def _float_leaves(tree: Any) -> list[AnyTensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, Tensor) and t.is_floating_point]


def _compare(got: Any, expected: Any, what: str, rtol: float | None, atol: float | None,
             check_tensors: bool) -> None:
    """``assert_close`` (NaN equal to NaN); with ``check_tensors``, every tensor leaf also belongs to
    eager's interpreter and has eager's ``requires_grad``."""
    __tracebackhide__ = True
    assert_close(got, expected, rtol=rtol, atol=atol, equal_nan=True, msg=what)
    if not check_tensors:
        return
    paths, got_leaves, _ = flatten_with_paths(got)
    for path, g, e in zip(paths, got_leaves, tree_flatten(expected)[0]):
        if not (isinstance(g, Tensor) and isinstance(e, Tensor)):
            continue
        where = format_path(path)
        at = f" at leaf {where}" if where else ""
        if g.interpreter is not e.interpreter:
            raise NotCloseError(f"{what}\nthe interpreter differs{at}: {g.interpreter!r}, eager gives "
                                f"{e.interpreter!r}", path=where, kind="interpreter")
        if g.requires_grad != e.requires_grad:
            raise NotCloseError(f"{what}\nrequires_grad differs{at}: {g.requires_grad}, eager gives "
                                f"{e.requires_grad}", path=where, kind="requires_grad")


def _run(runner: Runner, program: Any, args: Sequence[Any], what: str) -> Any:
    __tracebackhide__ = True
    try:
        return runner(program, *args)
    except NotApplicable:
        raise
    except Exception as error:
        if not isinstance(error, NotCloseError):
            error.add_note(f"(raised while running {what} with the way {runner.name!r}: {runner.description}; "
                           "tensorplay.testing.check_interpreters)")
        raise


def gradient_tolerances(*dtypes: Any) -> tuple[float, float]:
    """``(rtol, atol)`` for comparing gradients computed two ways (the eager tape's fused kernels and the
    transforms' rules round differently): float32 ``(1e-4, 1e-5)``, otherwise :func:`default_tolerances`."""
    rtol, atol = default_tolerances(*dtypes)
    if any(np.dtype(getattr(d, "numpy", d)) == np.float32 for d in dtypes):
        rtol = max(rtol, 1e-4)
    return rtol, atol


def check_interpreters(program: Callable[..., Any], *args: Any, interpreters: Iterable[str] | None = None,
                       exclude: Iterable[str] = (), rtol: float | None = None, atol: float | None = None,
                       grads: bool = True, grad_rtol: float | None = None,
                       grad_atol: float | None = None) -> list[str]:
    """Run ``program(*args)`` under every registered way of running it and compare with eager.

    ``program`` is a function, a ``@tp.program`` or an ``nn.Module``; ``args`` are its positional
    arguments (pytrees whose tensor leaves are the inputs). The ways (see
    :func:`~tensorplay.testing.interpreters`; ``interpreters`` selects some by name, ``exclude`` drops
    some) are by default: ``eager``; ``traced`` (symbolic trace, then ``evaluate``);
    ``traced_execute`` (execute-mode trace: recorded values vs the replay of its generated code);
    ``graph_module`` (the ``GraphModule``'s generated code); ``retraced`` (the graph re-recorded
    into a second graph); ``vmap`` (a batch of 3 rows vs a loop); then every way registered later
    (compile, export). Every recorded graph is type-checked.

    Each output must match eager's (:func:`assert_close` with ``rtol``/``atol``, NaN equal to NaN;
    tensors of the same interpreter with the same ``requires_grad``), and a module's buffers must end
    as eager leaves them (batch-norm statistics). The global random generator and the buffers are
    restored before each way, so dropout draws the same numbers. With ``grads`` (when ``program`` has
    float tensor arguments or parameters requiring grad, and float outputs), the gradient of the
    outputs against fixed random cotangents, w.r.t. each of them, is computed by
    ``tensorplay.func.vjp`` run under every way and compared with the eager tape's, to
    ``grad_rtol``/``grad_atol`` (default :func:`gradient_tolerances`: the tape and the rules round
    differently, so ``rtol=0`` for the outputs does not ask for bitwise gradients).

    A mismatch raises :class:`NotCloseError` naming the way, the output leaf (or gradient) and the
    :func:`assert_close` report; an exception raised by a way gets a note naming the way. A way that
    cannot run the program (:class:`~tensorplay.testing.NotApplicable`, e.g. vmap without tensor
    arguments) is skipped. Returns the names of the ways that ran. The module's buffers and the
    random generator end as after one eager call.

    >>> import tensorplay as tp
    >>> from tensorplay.testing import check_interpreters
    >>> ways = check_interpreters(lambda w, x: (x @ w.T).relu().sum(-1), tp.randn(4, 3), tp.randn(5, 3))
    >>> ways[:3]
    ['eager', 'traced', 'traced_execute']
    """
    __tracebackhide__ = True
    runners = select(interpreters, exclude)
    name = _name(program)
    state, seed = ModuleState(program), random_state.get_state()
    before = state.snapshot()
    expected = program(*args)
    after, seed_after = state.snapshot(), random_state.get_state()
    ran: list[str] = []

    def each_way(fn: Any, reference: Any, what: str, is_forward: bool, rtol: float | None,
                 atol: float | None) -> None:
        __tracebackhide__ = True
        for runner in runners:
            state.restore(before)
            random_state.set_state(seed)
            try:
                with using_tolerances(rtol, atol):
                    got = _run(runner, fn, args, what)
            except NotApplicable:
                continue
            _compare(got, reference, f"check_interpreters({name}): {what} run with the way {runner.name!r} "
                                     f"({runner.description}) differs from eager:", rtol, atol, is_forward)
            if is_forward:
                assert_close(state.snapshot(), after, rtol=rtol, atol=atol, equal_nan=True,
                             msg=f"check_interpreters({name}): the way {runner.name!r} leaves the module's buffers "
                                 "different from an eager call:")
            if runner.name not in ran:
                ran.append(runner.name)

    try:
        each_way(program, expected, name, True, rtol, atol)
        if grads:
            gradient = GradientProgram(program, args, expected)
            if not gradient.empty:
                state.restore(before)
                random_state.set_state(seed)
                reference = gradient.reference(args)
                default_rtol, default_atol = gradient_tolerances(*(g.dtype for g in reference.values()))
                each_way(gradient, reference, f"the gradient of {name} (tensorplay.func.vjp)", False,
                         default_rtol if grad_rtol is None else grad_rtol,
                         default_atol if grad_atol is None else grad_atol)
    finally:
        state.restore(after)
        random_state.set_state(seed_after)
    return ran


__all__ = ["GradientProgram", "check_interpreters", "gradient_tolerances"]
