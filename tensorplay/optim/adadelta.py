"""``Adadelta``: steps scaled by the ratio of running root-mean-square updates to gradients."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import (AnyTensor, Optimizer, check_flag, check_implementation_options,
                                        check_number)


class Adadelta(Optimizer):
    """PyTorch's Adadelta, per parameter of shape ``S`` (state arrays of shape ``S`` in its layout):
    ``g += weight_decay * p`` (``g = -g`` first with ``maximize``); ``square_avg = rho square_avg + (1 - rho) g^2``;
    ``delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g``; ``acc_delta = rho acc_delta + (1 - rho)
    delta^2``; ``p -= lr * delta``.

    State per parameter, created at its first update as PyTorch's: ``"step"``, ``"square_avg"`` and
    ``"acc_delta"`` (zeros). ``lr``, ``eps`` and ``weight_decay`` must be >= 0 and ``rho`` in ``[0, 1]``;
    ``foreach``, ``capturable`` and ``differentiable`` are accepted with their default values only (an
    :class:`OptimizerError` otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1.0, rho: float = 0.9,
                 eps: float = 1e-6, weight_decay: float = 0.0, foreach: bool | None = None, *,
                 capturable: bool = False, maximize: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay, "maximize": maximize,
                                  "capturable": capturable, "foreach": foreach, "differentiable": differentiable})

    def _check_group(self, group: dict[str, Any]) -> None:
        check_number("Adadelta", "learning rate", group["lr"])
        check_number("Adadelta", "rho value", group["rho"], high=1.0)
        check_number("Adadelta", "epsilon value", group["eps"])
        check_number("Adadelta", "weight_decay value", group["weight_decay"])
        check_flag("Adadelta", "maximize", group["maximize"])
        check_implementation_options("Adadelta", group)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        weight_decay, maximize = group["weight_decay"], bool(group["maximize"])
        for data, g, state in self._stepped(group, ("square_avg", "acc_delta")):
            scalar = data.dtype.type
            run_update(kernels().adadelta_update, data, g, (state["square_avg"], state["acc_delta"]), scalar(lr),
                       scalar(rho), scalar(1 - rho), scalar(eps), scalar(weight_decay), maximize)


__all__ = ["Adadelta"]
