"""``optimizer.step()`` inside a compiled function: the update recorded as part of the graph.

The eager optimizers update numpy payloads in place; under capture the parameters are graph
values, so :func:`record_step` records the same update rule with graph operations instead:
SGD (momentum, dampening, Nesterov, weight decay, maximize), Adam/AdamW (AMSGrad, maximize), RMSprop
(momentum, centered, weight decay, maximize), Adagrad (learning-rate decay, weight decay, maximize), Adamax,
NAdam and RAdam (weight decay, decoupled for NAdam and RAdam, maximize) and Adadelta (weight decay, maximize).

What changes between calls is read at every call, never baked in: the learning rate and every
other float hyperparameter are scalar inputs read from ``param_groups`` (a scheduler needs no
recompilation), Adam's bias corrections are computed in Python from the step count at each call
(as the eager optimizer does, in float64), and so are Adagrad's decayed learning rate, Adamax's step size,
NAdam's coefficients and RAdam's rectification (whether ``rho_t > 5`` is a boolean input, so the step that
crosses it recompiles nothing); NAdam's momentum product is advanced in Python after each call. State
arrays (momentum buffers, moments) are state inputs whose new values are written back in place. What decides
the graph's structure is guarded by value: the boolean flags, whether a hyperparameter is zero and whether a parameter has a
gradient. State the eager optimizer starts at zeros (Adam's moments; SGD's momentum buffer when there
is no dampening, since ``momentum * 0 + g`` is the first step's ``g``) is an input the first call
creates as zeros, so the first step and the later ones share one specialization; with dampening, the
first step (buffer ``g``) compiles separately, guarded on the buffer's existence. RMSprop's state starts at
zeros too; Adagrad's sums exist from the optimizer's construction (a parameter group added later gets them at
its first step, guarded); the state of Adamax, NAdam, RAdam and Adadelta starts at zeros.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from tensorplay.compiler.sources import ValueSource
from tensorplay.spec.aval import Aval
from tensorplay.spec.errors import GraphCaptureError
from tensorplay.tensor import Tensor

if TYPE_CHECKING:
    from tensorplay.compiler.capture import CaptureHandler

AnyTensor = Tensor[*tuple[Any, ...]]


def _state_of(optimizer: Any, param: Any) -> dict[str, Any]:
    entry = optimizer.state._items.get(id(param))
    return {} if entry is None else entry[1]


class _Step:
    """Records one optimizer's update (shared plumbing of the update rules)."""

    def __init__(self, handler: CaptureHandler, optimizer: Any) -> None:
        self.handler = handler
        self.recorder: Any = handler.recorder
        self.optimizer = optimizer
        self.label = type(optimizer).__name__
        self.shared: dict[tuple[int, str, str], AnyTensor] = {}

    def guard(self, name: str, read: Callable[[], Any]) -> Any:
        """The current value of ``read()``; compiled calls are valid only while it stays the same."""
        value = read()
        self.handler.value_guards.append(ValueSource(f"{self.label} {name}", read, value))
        return value

    def scalar(self, name: str, read: Callable[[], float], dtype: str, group: dict[str, Any] | None = None
               ) -> AnyTensor:
        """A 0-d input of ``dtype`` read from ``read()`` at every call. With ``group`` (``read`` then depends on
        that parameter group's hyperparameters only), one input serves every parameter of the group: a step
        over many parameters reads each hyperparameter once per call, not once per parameter."""
        from tensorplay.compiler.capture import InputPlan
        key = (id(group), name, dtype)
        if group is not None and key in self.shared:
            return self.shared[key]
        value = np.asarray(read(), dtype=dtype)
        t: AnyTensor = self.recorder.input(f"{self.label}_{name}", Aval((), dtype), "captured", value)
        self.handler.opt_inputs[t._data.id] = InputPlan("opt_scalar", ref=read, key=dtype)
        if group is not None:
            self.shared[key] = t
        return t

    def param(self, p: Any, where: str) -> AnyTensor:
        """The recorder's view of parameter ``p`` (registered as state when the function does not read it)."""
        if p._ops is self.recorder:
            return p  # type: ignore[no-any-return]
        if isinstance(p._data, np.ndarray):
            var = self.recorder.register_state(f"{self.label}.param{where}", p, "parameter")
            from tensorplay.compiler.capture import InputPlan
            self.handler.opt_inputs[var.id] = InputPlan("tensor", ref=p)
            view: AnyTensor = self.recorder.wrap(var)
            return view
        raise GraphCaptureError(f"{self.label}.step(): a parameter is a value of another recording")

    def state(self, p: Any, key: str, like: AnyTensor, zeros: bool = False) -> AnyTensor | None:
        """The recorder's view of state entry ``key`` of ``p``. A missing entry is ``None`` (guarded), or with
        ``zeros`` an input that the first call creates as zeros (no guard: the update from zeros is the
        first step's, so the first and later steps share one specialization)."""
        from tensorplay.compiler.capture import InputPlan
        optimizer = self.optimizer
        if zeros:
            existing = _state_of(optimizer, p).get(key)
            array = np.zeros(tuple(int(d) for d in like.shape), like.dtype.name) if existing is None else existing
        else:
            present = self.guard(f"state {key} exists for parameter {tuple(like.shape)}",
                                 lambda: key in _state_of(optimizer, p))
            if not present:
                return None
            array = _state_of(optimizer, p)[key]
        t: AnyTensor = self.recorder.input(f"{self.label}_{key}", Aval(tuple(array.shape), array.dtype.name),
                                           "buffer", array)
        self.handler.opt_inputs[t._data.id] = InputPlan("opt_state", ref=(optimizer, p), key=key)
        return t

    def write_state(self, p: Any, key: str, old: AnyTensor | None, new: AnyTensor) -> None:
        """``p``'s state entry ``key`` becomes ``new`` (in place when it existed, created otherwise)."""
        from tensorplay.compiler.capture import Effect
        if old is not None:
            self.recorder.graph.mutations.append((old._data, self.recorder.lift(new)))
            return
        self.handler.optimizer_effects.append(
            (self.recorder.lift(new), Effect("opt_state", ("param", 0), key=key, optimizer=(self.optimizer, p))))

    def write_param(self, p: AnyTensor, new: AnyTensor) -> None:
        """The parameter ``p`` holds ``new`` after the call (written in place)."""
        var = self.recorder.lift(new)
        placeholder = self.recorder._state.get(id(p))
        target = placeholder[1] if placeholder is not None else p._data
        mutations = self.recorder.graph.mutations
        self.recorder.graph.mutations = [(t, v) for t, v in mutations if t is not target]
        if var.dtype != target.dtype:
            var = self.recorder.cast(new, dtype=target.aval.dtype)._data
        self.recorder.graph.mutations.append((target, var))
        if p._ops is not self.recorder:  # an eager tensor (not swapped in as state): put back after the capture
            self.handler.rebound.append((p, p._ops, p._data))
            p._ops = self.recorder
        p._data = var  # later reads in the function see the updated parameter

    def stepped(self, group: dict[str, Any], maximize: bool) -> Iterator[tuple[Any, AnyTensor, AnyTensor, str]]:
        """The parameters of ``group`` that have a gradient, as ``(p, value, direction, dtype)``: the parameter's
        value in the graph (:meth:`param`), its gradient (negated with ``maximize``) and its dtype's name."""
        for index, p in enumerate(group["params"]):
            g = self.grad(p)
            if g is None:
                continue
            value = self.param(p, str(index))
            yield p, value, self.recorder.neg(g) if maximize else g, p.dtype.name

    @staticmethod
    def grad(p: Any) -> AnyTensor | None:
        """``p``'s gradient as the function sees it (decided by the capture itself: the guards on the
        ``.grad`` attributes before the call and on the rest of the capture decide it)."""
        return p._grad  # type: ignore[no-any-return]


def _sgd(step: _Step, group: dict[str, Any]) -> None:
    r = step.recorder
    guard = step.guard
    momentum_on = guard("momentum != 0", lambda: group["momentum"] != 0)
    decay_on = guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    nesterov = guard("nesterov", lambda: bool(group["nesterov"]))
    maximize = guard("maximize", lambda: bool(group["maximize"]))
    undamped = momentum_on and guard("dampening == 0", lambda: group["dampening"] == 0)
    for p, pv, d, dtype in step.stepped(group, maximize):
        lr = step.scalar("lr", lambda: float(group["lr"]), dtype, group)
        if decay_on:
            d = r.add(d, r.mul(step.scalar("weight_decay", lambda: float(group["weight_decay"]), dtype, group), pv))
        if momentum_on:
            momentum = step.scalar("momentum", lambda: float(group["momentum"]), dtype, group)
            # without dampening, momentum * 0 + 1 * d is exactly the first step's buffer d
            buf = step.state(p, "momentum_buffer", pv, zeros=undamped)
            if buf is None:
                new_buf = d
            else:
                keep = step.scalar("one_minus_dampening", lambda: 1.0 - float(group["dampening"]), dtype,
                                   group)
                new_buf = r.add(r.mul(momentum, buf), r.mul(keep, d))
            step.write_state(p, "momentum_buffer", buf, new_buf if buf is not None else r.mul(d, 1.0))
            d = r.add(d, r.mul(momentum, new_buf)) if nesterov else new_buf
        step.write_param(p, r.sub(pv, r.mul(lr, d)))


def _decayed(step: _Step, group: dict[str, Any], pv: AnyTensor, d: AnyTensor, dtype: str, decoupled: bool
             ) -> tuple[AnyTensor, AnyTensor]:
    """The parameter and gradient after weight decay: ``p * (1 - lr weight_decay)`` when ``decoupled``, else
    ``d + weight_decay p`` (the caller guards ``weight_decay != 0``)."""
    r = step.recorder
    if decoupled:
        decay = step.scalar("decay", lambda: 1.0 - float(group["lr"]) * float(group["weight_decay"]), dtype, group)
        return r.mul(pv, decay), d
    return pv, r.add(d, r.mul(step.scalar("weight_decay", lambda: float(group["weight_decay"]), dtype, group), pv))


def _moments(step: _Step, group: dict[str, Any], p: Any, pv: AnyTensor, d: AnyTensor, dtype: str
             ) -> tuple[AnyTensor, AnyTensor]:
    """Adam's first and second moments of ``p`` updated with ``d`` (state ``exp_avg`` and ``exp_avg_sq``, inputs
    the first call creates as zeros, as the eager optimizers start them) and written back; returns the new ones."""
    r = step.recorder
    c1 = step.scalar("one_minus_beta1", lambda: 1.0 - float(group["betas"][0]), dtype, group)
    c2 = step.scalar("one_minus_beta2", lambda: 1.0 - float(group["betas"][1]), dtype, group)
    beta2 = step.scalar("beta2", lambda: float(group["betas"][1]), dtype, group)
    m = step.state(p, "exp_avg", pv, zeros=True)
    v = step.state(p, "exp_avg_sq", pv, zeros=True)
    m_new = r.mul(d, c1) if m is None else r.add(m, r.mul(r.sub(d, m), c1))
    gg = r.mul(r.mul(c2, d), d)
    v_new = gg if v is None else r.add(r.mul(beta2, v), gg)
    step.write_state(p, "exp_avg", m, m_new)
    step.write_state(p, "exp_avg_sq", v, v_new)
    return m_new, v_new


def _counted(step: _Step, group: dict[str, Any], same: Callable[[list[Any]], bool] | None = None
             ) -> tuple[Callable[[Any], Any], dict[str, Any] | None]:
    """Whose step count each parameter's step-dependent scalars read, and the group to share them by: one step
    count for the group (the usual case: every parameter stepped as often), guarded, makes them one input each
    for the group instead of one per parameter. ``same`` (default: equal step counts) decides it."""
    optimizer = step.optimizer
    updated = [p for p in group["params"] if step.grad(p) is not None]
    check = same or (lambda ps: _equal_steps(optimizer, ps))
    shared = len(updated) > 1 and step.guard("parameters' step counts are equal", lambda: check(updated))
    return (lambda p: updated[0] if shared else p), (group if shared else None)


def _next_step(optimizer: Any, p: Any) -> int:
    """The number of the step about to be taken for ``p`` (from 1)."""
    return int(_state_of(optimizer, p).get("step", 0)) + 1


def _adam(step: _Step, group: dict[str, Any]) -> None:
    r = step.recorder
    guard = step.guard
    optimizer = step.optimizer
    decay_on = guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    amsgrad = guard("amsgrad", lambda: bool(group["amsgrad"]))
    maximize = guard("maximize", lambda: bool(group["maximize"]))
    decoupled = decay_on and guard("decoupled_weight_decay", lambda: bool(group["decoupled_weight_decay"]))
    counted_of, per_group = _counted(step, group)
    for p, pv, d, dtype in step.stepped(group, maximize):
        counted = counted_of(p)

        def step_size(p: Any = counted) -> float:
            return float(group["lr"]) / (1.0 - float(group["betas"][0]) ** _next_step(optimizer, p))

        def bias2(p: Any = counted) -> float:
            return math.sqrt(1.0 - float(group["betas"][1]) ** _next_step(optimizer, p))

        if decay_on:
            pv, d = _decayed(step, group, pv, d, dtype, decoupled)
        m_new, v_new = _moments(step, group, p, pv, d, dtype)
        denom_base = v_new
        if amsgrad:
            vmax = step.state(p, "max_exp_avg_sq", pv, zeros=True)
            vmax_new = v_new if vmax is None else r.maximum(vmax, v_new)
            step.write_state(p, "max_exp_avg_sq", vmax, vmax_new if vmax is not None else r.mul(v_new, 1.0))
            denom_base = vmax_new
        denom = r.add(r.div(r.sqrt(denom_base), step.scalar("bias_correction2_sqrt", bias2, dtype, per_group)),
                      step.scalar("eps", lambda: float(group["eps"]), dtype, group))
        update = r.div(r.mul(step.scalar("step_size", step_size, dtype, per_group), m_new), denom)  # addcdiv's order
        step.write_param(p, r.sub(pv, update))
        step.handler.optimizer_effects.append((None, _step_effect(optimizer, p)))


def _rmsprop(step: _Step, group: dict[str, Any]) -> None:
    r = step.recorder
    guard = step.guard
    decay_on = guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    momentum_on = guard("momentum > 0", lambda: group["momentum"] > 0)
    centered = guard("centered", lambda: bool(group["centered"]))
    maximize = guard("maximize", lambda: bool(group["maximize"]))
    for p, pv, d, dtype in step.stepped(group, maximize):
        if decay_on:
            d = r.add(d, r.mul(step.scalar("weight_decay", lambda: float(group["weight_decay"]), dtype, group), pv))
        alpha = step.scalar("alpha", lambda: float(group["alpha"]), dtype, group)
        c = step.scalar("one_minus_alpha", lambda: 1.0 - float(group["alpha"]), dtype, group)
        # every state entry starts at zeros in the eager optimizer: the first step is the later steps' graph
        square_avg = step.state(p, "square_avg", pv, zeros=True)
        assert square_avg is not None
        square_avg_new = r.add(r.mul(alpha, square_avg), r.mul(r.mul(c, d), d))  # addcmul's order
        step.write_state(p, "square_avg", square_avg, square_avg_new)
        if centered:
            grad_avg = step.state(p, "grad_avg", pv, zeros=True)
            assert grad_avg is not None
            grad_avg_new = r.add(grad_avg, r.mul(r.sub(d, grad_avg), c))  # lerp
            step.write_state(p, "grad_avg", grad_avg, grad_avg_new)
            variance = r.sub(square_avg_new, r.mul(grad_avg_new, grad_avg_new))
        else:
            variance = square_avg_new
        avg = r.add(r.sqrt(variance), step.scalar("eps", lambda: float(group["eps"]), dtype, group))
        lr = step.scalar("lr", lambda: float(group["lr"]), dtype, group)
        if momentum_on:
            buf = step.state(p, "momentum_buffer", pv, zeros=True)
            assert buf is not None
            momentum = step.scalar("momentum", lambda: float(group["momentum"]), dtype, group)
            buf_new = r.add(r.mul(buf, momentum), r.div(d, avg))
            step.write_state(p, "momentum_buffer", buf, buf_new)
            new_p = r.sub(pv, r.mul(lr, buf_new))
        else:
            new_p = r.sub(pv, r.div(r.mul(lr, d), avg))  # addcdiv's order
        step.write_param(p, new_p)
        step.handler.optimizer_effects.append((None, _step_effect(step.optimizer, p)))


def _adagrad(step: _Step, group: dict[str, Any]) -> None:
    r = step.recorder
    guard = step.guard
    optimizer = step.optimizer
    decay_on = guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    maximize = guard("maximize", lambda: bool(group["maximize"]))
    updated = [p for p in group["params"] if step.grad(p) is not None]
    # one step count for the group (guarded), so that the decayed learning rate is one input for the group
    shared = len(updated) > 1 and guard("parameters' step counts are equal", lambda: _equal_steps(optimizer, updated))
    for p, pv, d, dtype in step.stepped(group, maximize):
        counted = updated[0] if shared else p

        def clr(p: Any = counted) -> float:
            done = int(_state_of(optimizer, p).get("step", 0))  # the step about to be taken is done + 1
            return float(group["lr"]) / (1.0 + done * float(group["lr_decay"]))

        if decay_on:
            d = r.add(d, r.mul(step.scalar("weight_decay", lambda: float(group["weight_decay"]), dtype, group), pv))
        total = step.state(p, "sum", pv)  # created with the optimizer: guarded, not created as zeros
        square = r.mul(d, d)
        if total is None:  # a parameter group added after construction: its sums start at the initial value
            initial = step.scalar("initial_accumulator_value",
                                  lambda: float(optimizer.defaults["initial_accumulator_value"]), dtype, group)
            total_new = r.add(square, initial)
        else:
            total_new = r.add(total, square)
        step.write_state(p, "sum", total, total_new)
        std = r.add(r.sqrt(total_new), step.scalar("eps", lambda: float(group["eps"]), dtype, group))
        rate = step.scalar("clr", clr, dtype, group if shared else None)
        step.write_param(p, r.sub(pv, r.div(r.mul(rate, d), std)))  # addcdiv's order
        step.handler.optimizer_effects.append((None, _step_effect(optimizer, p)))


def _adamax(step: _Step, group: dict[str, Any]) -> None:
    from tensorplay.optim.adamax import adamax_step_size
    r = step.recorder
    optimizer = step.optimizer
    decay_on = step.guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    maximize = step.guard("maximize", lambda: bool(group["maximize"]))
    counted_of, per_group = _counted(step, group)
    for p, pv, d, dtype in step.stepped(group, maximize):
        if decay_on:
            pv, d = _decayed(step, group, pv, d, dtype, False)
        c1 = step.scalar("one_minus_beta1", lambda: 1.0 - float(group["betas"][0]), dtype, group)
        beta2 = step.scalar("beta2", lambda: float(group["betas"][1]), dtype, group)
        eps = step.scalar("eps", lambda: float(group["eps"]), dtype, group)
        m = step.state(p, "exp_avg", pv, zeros=True)
        u = step.state(p, "exp_inf", pv, zeros=True)
        assert m is not None and u is not None
        m_new = r.add(m, r.mul(r.sub(d, m), c1))
        u_new = r.maximum(r.mul(u, beta2), r.add(r.abs(d), eps))
        step.write_state(p, "exp_avg", m, m_new)
        step.write_state(p, "exp_inf", u, u_new)

        def rate(p: Any = counted_of(p)) -> float:
            return adamax_step_size(group["lr"], group["betas"][0], _next_step(optimizer, p))

        step.write_param(p, r.sub(pv, r.div(r.mul(step.scalar("step_size", rate, dtype, per_group), m_new), u_new)))
        step.handler.optimizer_effects.append((None, _step_effect(optimizer, p)))


def _nadam(step: _Step, group: dict[str, Any]) -> None:
    from tensorplay.optim.nadam import nadam_scalars, next_mu_product
    r = step.recorder
    optimizer = step.optimizer
    decay_on = step.guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    decoupled = decay_on and step.guard("decoupled_weight_decay", lambda: bool(group["decoupled_weight_decay"]))
    maximize = step.guard("maximize", lambda: bool(group["maximize"]))

    def history(p: Any) -> tuple[int, float]:
        state = _state_of(optimizer, p)
        return int(state.get("step", 0)), float(state.get("mu_product", 1.0))

    # the coefficients depend on the momentum product too: shared when the steps and products are all equal
    counted_of, per_group = _counted(step, group, lambda ps: len({history(p) for p in ps}) <= 1)
    for p, pv, d, dtype in step.stepped(group, maximize):
        if decay_on:
            pv, d = _decayed(step, group, pv, d, dtype, decoupled)
        m_new, v_new = _moments(step, group, p, pv, d, dtype)
        counted = counted_of(p)

        def coefficient(which: int, p: Any = counted) -> Callable[[], float]:
            def read() -> float:
                done, product = history(p)
                return nadam_scalars(group, done + 1, product)[which]
            return read

        def bias2(p: Any = counted) -> float:
            return 1.0 - float(group["betas"][1]) ** _next_step(optimizer, p)

        denom = r.add(r.sqrt(r.div(v_new, step.scalar("bias_correction2", bias2, dtype, per_group))),
                      step.scalar("eps", lambda: float(group["eps"]), dtype, group))
        new_p = r.add(pv, r.div(r.mul(step.scalar("grad_coef", coefficient(1), dtype, per_group), d), denom))
        new_p = r.add(new_p, r.div(r.mul(step.scalar("avg_coef", coefficient(2), dtype, per_group), m_new), denom))
        step.write_param(p, new_p)
        step.handler.optimizer_effects.append((None, _step_effect(optimizer, p)))
        # after the step is counted: the momentum product advanced in Python, as the eager step does
        def advance(p: Any = p) -> None:
            next_mu_product(group, optimizer.state.get_state(p))

        step.handler.optimizer_effects.append((None, _call_effect(advance, "mu_product")))


def _radam(step: _Step, group: dict[str, Any]) -> None:
    from tensorplay.optim.radam import radam_scalars
    r = step.recorder
    optimizer = step.optimizer
    decay_on = step.guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    decoupled = decay_on and step.guard("decoupled_weight_decay", lambda: bool(group["decoupled_weight_decay"]))
    maximize = step.guard("maximize", lambda: bool(group["maximize"]))
    counted_of, per_group = _counted(step, group)
    for p, pv, d, dtype in step.stepped(group, maximize):
        if decay_on:
            pv, d = _decayed(step, group, pv, d, dtype, decoupled)
        m_new, v_new = _moments(step, group, p, pv, d, dtype)
        counted = counted_of(p)

        def term(which: int, p: Any = counted) -> Callable[[], float]:
            """Input ``which`` of the step's (bias_correction1, bias_correction2_sqrt, rect, rectified)."""
            def read() -> float:
                terms = radam_scalars(group["betas"][0], group["betas"][1], _next_step(optimizer, p))
                return float(terms[2] is not None) if which == 3 else terms[which] or 0.0
            return read

        # whether rho_t > 5 is an input, not a guard: the step that crosses it needs no recompilation
        rectified = step.scalar("rectified", term(3), "bool", per_group)
        plain = r.mul(r.div(m_new, step.scalar("bias_correction1", term(0), dtype, per_group)),
                      step.scalar("lr", lambda: float(group["lr"]), dtype, group))
        eps = step.scalar("eps", lambda: float(group["eps"]), dtype, group)
        adaptive = r.mul(r.div(1.0, r.add(r.sqrt(v_new), eps)),  # torch's reciprocal, then the product
                         step.scalar("bias_correction2_sqrt", term(1), dtype, per_group))
        rectified_update = r.mul(r.mul(plain, adaptive), step.scalar("rect", term(2), dtype, per_group))
        step.write_param(p, r.sub(pv, r.where(rectified, rectified_update, plain)))
        step.handler.optimizer_effects.append((None, _step_effect(optimizer, p)))


def _adadelta(step: _Step, group: dict[str, Any]) -> None:
    r = step.recorder
    decay_on = step.guard("weight_decay != 0", lambda: group["weight_decay"] != 0)
    maximize = step.guard("maximize", lambda: bool(group["maximize"]))
    for p, pv, d, dtype in step.stepped(group, maximize):
        if decay_on:
            pv, d = _decayed(step, group, pv, d, dtype, False)
        rho = step.scalar("rho", lambda: float(group["rho"]), dtype, group)
        c = step.scalar("one_minus_rho", lambda: 1.0 - float(group["rho"]), dtype, group)
        eps = step.scalar("eps", lambda: float(group["eps"]), dtype, group)
        square_avg = step.state(p, "square_avg", pv, zeros=True)  # both start at zeros in the eager optimizer
        acc_delta = step.state(p, "acc_delta", pv, zeros=True)
        assert square_avg is not None and acc_delta is not None
        square_avg_new = r.add(r.mul(square_avg, rho), r.mul(r.mul(c, d), d))  # addcmul's order
        delta = r.mul(r.div(r.sqrt(r.add(acc_delta, eps)), r.sqrt(r.add(square_avg_new, eps))), d)
        step.write_state(p, "square_avg", square_avg, square_avg_new)
        step.write_state(p, "acc_delta", acc_delta, r.add(r.mul(acc_delta, rho), r.mul(r.mul(c, delta), delta)))
        step.write_param(p, r.sub(pv, r.mul(step.scalar("lr", lambda: float(group["lr"]), dtype, group), delta)))
        step.handler.optimizer_effects.append((None, _step_effect(step.optimizer, p)))


def _equal_steps(optimizer: Any, params: list[Any]) -> bool:
    """Whether every parameter of ``params`` has taken as many steps of ``optimizer`` (none yet counts 0)."""
    return len({int(_state_of(optimizer, p).get("step", 0)) for p in params}) <= 1


def _step_effect(optimizer: Any, p: Any) -> Any:
    from tensorplay.compiler.capture import Effect
    return Effect("opt_step", ("param", 0), has_value=False, key="step", optimizer=(optimizer, p))


def _call_effect(call: Callable[[], None], key: str) -> Any:
    """An effect that runs ``call()`` after each call (state computed in Python, such as NAdam's momentum product)."""
    from tensorplay.compiler.capture import Effect
    return Effect("opt_call", ("param", 0), has_value=False, key=key, optimizer=call)


def record_step(handler: CaptureHandler, optimizer: Any) -> None:
    """Record ``optimizer.step()`` into the capture (see the module docstring)."""
    from tensorplay.optim.adadelta import Adadelta
    from tensorplay.optim.adagrad import Adagrad
    from tensorplay.optim.adam import Adam
    from tensorplay.optim.adamax import Adamax
    from tensorplay.optim.nadam import NAdam
    from tensorplay.optim.radam import RAdam
    from tensorplay.optim.rmsprop import RMSprop
    from tensorplay.optim.sgd import SGD
    step = _Step(handler, optimizer)
    rules: list[tuple[type, Callable[[_Step, dict[str, Any]], None]]] = [
        (Adam, _adam), (SGD, _sgd), (RMSprop, _rmsprop), (Adagrad, _adagrad), (Adamax, _adamax), (NAdam, _nadam),
        (RAdam, _radam), (Adadelta, _adadelta)]
    rule = next((rule for kind, rule in rules if isinstance(optimizer, kind)), None)
    if rule is None:
        from tensorplay.interpreters.graph.recorder import user_location
        where = user_location(3)
        raise GraphCaptureError(
            f"{type(optimizer).__name__}.step() inside a compiled function is not supported"
            f"{f' (at {where})' if where else ''}: tp.compile records SGD, Adam, AdamW, RMSprop, Adagrad, Adamax, "
            "NAdam, RAdam and Adadelta updates. Call "
            "step() outside the compiled function (compile the forward and backward only)")
    handler.value_guards.append(ValueSource(f"{step.label} parameter groups",
                                            lambda: tuple(len(g["params"]) for g in optimizer.param_groups),
                                            tuple(len(g["params"]) for g in optimizer.param_groups)))
    for group in optimizer.param_groups:
        rule(step, group)


__all__ = ["record_step"]
