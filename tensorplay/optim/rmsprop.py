"""``RMSprop``: a running average of squared gradients scales each step, with optional centering and momentum."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import AnyTensor, Optimizer, check_flag, check_implementation_options, check_number


class RMSprop(Optimizer):
    """PyTorch's RMSprop, per parameter of shape ``S`` (state arrays of shape ``S`` in its layout):
    ``g += weight_decay * p`` (``g = -g`` first with ``maximize``); ``square_avg = alpha * square_avg +
    (1 - alpha) * g^2``; centered: ``grad_avg = alpha * grad_avg + (1 - alpha) * g`` and
    ``avg = sqrt(square_avg - grad_avg^2) + eps``, else ``avg = sqrt(square_avg) + eps``; with momentum
    ``buf = momentum * buf + g / avg`` and ``p -= lr * buf``, else ``p -= lr * g / avg``.

    State per parameter, created at its first update as PyTorch's: ``"step"`` (the number of updates),
    ``"square_avg"`` (zeros), ``"momentum_buffer"`` (zeros, when ``momentum > 0``) and ``"grad_avg"`` (zeros,
    when ``centered``). Every hyperparameter must be >= 0, and ``capturable``, ``foreach`` and ``differentiable``
    keep their default values (an :class:`OptimizerError` otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1e-2,
                 alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
                 centered: bool = False, capturable: bool = False, foreach: bool | None = None,
                 maximize: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
                                  "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
                                  "maximize": maximize, "differentiable": differentiable})

    def _check_group(self, group: dict[str, Any]) -> None:
        check_number("RMSprop", "learning rate", group["lr"])
        check_number("RMSprop", "epsilon value", group["eps"])
        check_number("RMSprop", "momentum value", group["momentum"])
        check_number("RMSprop", "weight_decay value", group["weight_decay"])
        check_number("RMSprop", "alpha value", group["alpha"])
        check_flag("RMSprop", "centered", group["centered"])
        check_flag("RMSprop", "maximize", group["maximize"])
        check_implementation_options("RMSprop", group)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        weight_decay, centered, maximize = group["weight_decay"], bool(group["centered"]), bool(group["maximize"])
        use_momentum = momentum > 0
        zeros = ("square_avg",) + (("momentum_buffer",) if use_momentum else ()) + (("grad_avg",) if centered else ())
        for data, g, state in self._stepped(group, zeros):
            square_avg = state["square_avg"]
            # a flag switched on after the first step starts its state then (PyTorch would fail on the lookup)
            buf = state.setdefault("momentum_buffer", np.zeros_like(data)) if use_momentum else square_avg
            grad_avg = state.setdefault("grad_avg", np.zeros_like(data)) if centered else square_avg
            scalar = data.dtype.type
            run_update(kernels().rmsprop_update, data, g, (square_avg, grad_avg, buf), scalar(lr), scalar(alpha),
                       scalar(1 - alpha), scalar(eps), scalar(weight_decay), scalar(momentum), centered,
                       use_momentum, maximize)


__all__ = ["RMSprop"]
