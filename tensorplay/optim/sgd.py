"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import (AnyTensor, Optimizer, OptimizerError, bump_version, check_flag,
                                        check_implementation_options, check_number)


class SGD(Optimizer):
    """PyTorch's SGD: ``g += weight_decay * p``; with momentum ``buf = momentum * buf + (1 - dampening) * g``
    (the first step sets ``buf = g``) and ``g = buf`` (or ``g + momentum * buf`` with Nesterov);
    then ``p -= lr * g`` (``+=`` with ``maximize``). ``foreach``, ``differentiable`` and ``fused`` are accepted
    with their default values only (an :class:`OptimizerError` otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                 nesterov: bool = False, *, maximize: bool = False, foreach: bool | None = None,
                 differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize,
                                  "foreach": foreach, "differentiable": differentiable, "fused": fused})

    def _check_group(self, group: dict[str, Any]) -> None:
        check_number("SGD", "learning rate", group["lr"])
        check_number("SGD", "momentum", group["momentum"])
        check_number("SGD", "dampening", group["dampening"], low=-np.inf)
        check_number("SGD", "weight_decay", group["weight_decay"])
        check_flag("SGD", "nesterov", group["nesterov"])
        check_flag("SGD", "maximize", group["maximize"])
        check_implementation_options("SGD", group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise OptimizerError("SGD: Nesterov momentum requires a momentum and zero dampening")

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        for p in group["params"]:
            g = self._grad_array(p)
            if g is None:
                continue
            data = p._data
            state = self.state.get_state(p) if momentum != 0 else {}
            buf = state.get("momentum_buffer")
            first = buf is None
            if momentum != 0 and buf is None:
                buf = state["momentum_buffer"] = np.empty_like(data)  # the kernel sets it to the first step's d
            scalar = data.dtype.type
            run_update(kernels().sgd_update, data, g, (data if buf is None else buf,), scalar(lr), scalar(momentum),
                       scalar(1 - dampening), scalar(weight_decay), bool(nesterov), bool(maximize), first,
                       momentum != 0)
            bump_version(p)
