"""``Adagrad``: each entry's step is scaled by the root of its summed squared gradients, with a decaying rate."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import AnyTensor, Optimizer, check_flag, check_implementation_options, check_number


class Adagrad(Optimizer):
    """PyTorch's Adagrad, per parameter of shape ``S`` (state of shape ``S`` in its layout): at update ``t``
    (from 1), ``g += weight_decay * p`` (``g = -g`` first with ``maximize``), ``sum += g^2`` and
    ``p -= lr / (1 + (t - 1) * lr_decay) * g / (sqrt(sum) + eps)``.

    As in PyTorch, every parameter gets its state at construction: ``"step"`` 0 and ``"sum"`` filled with the
    constructor's ``initial_accumulator_value`` (a parameter group's own ``initial_accumulator_value`` is kept in
    the group but not used; a group added later starts its sums at the constructor's value too). Every
    hyperparameter must be >= 0, and ``foreach``, ``differentiable`` and ``fused`` keep their default values (an
    :class:`OptimizerError` otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1e-2,
                 lr_decay: float = 0.0, weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable, "fused": fused})
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p: AnyTensor) -> dict[str, Any]:
        """``p``'s state, created (step 0, sums at the constructor's initial value) when it has none."""
        state = self.state.get_state(p)
        if not state:
            state["step"] = 0
            state["sum"] = np.full_like(p._data, self.defaults["initial_accumulator_value"])
        return state

    def _check_group(self, group: dict[str, Any]) -> None:
        check_number("Adagrad", "learning rate", group["lr"])
        check_number("Adagrad", "lr_decay value", group["lr_decay"])
        check_number("Adagrad", "weight_decay value", group["weight_decay"])
        check_number("Adagrad", "initial_accumulator_value value", group["initial_accumulator_value"])
        check_number("Adagrad", "epsilon value", group["eps"])
        check_flag("Adagrad", "maximize", group["maximize"])
        check_implementation_options("Adagrad", group)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        weight_decay, maximize = group["weight_decay"], bool(group["maximize"])
        for p in group["params"]:  # a group added after construction gets its state now
            if p._grad is not None:
                self._init_state(p)
        for data, g, state in self._stepped(group):
            clr = lr / (1 + (state["step"] - 1) * lr_decay)
            scalar = data.dtype.type
            run_update(kernels().adagrad_update, data, g, (state["sum"],), scalar(clr), scalar(eps),
                       scalar(weight_decay), maximize)


__all__ = ["Adagrad"]
