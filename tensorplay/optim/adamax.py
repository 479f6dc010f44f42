"""``Adamax``: Adam with the second moment replaced by an exponentially weighted infinity norm."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import AnyTensor, Optimizer, check_adam_like


class Adamax(Optimizer):
    """PyTorch's Adamax, per parameter of shape ``S`` (state arrays of shape ``S`` in its layout): at update
    ``t`` (from 1), ``g += weight_decay * p`` (``g = -g`` first with ``maximize``), ``exp_avg = b1 exp_avg +
    (1 - b1) g``, ``exp_inf = max(b2 exp_inf, |g| + eps)`` and ``p -= lr / (1 - b1^t) * exp_avg / exp_inf``.

    State per parameter, created at its first update as PyTorch's: ``"step"``, ``"exp_avg"`` and ``"exp_inf"``
    (zeros). ``lr``, ``eps`` and ``weight_decay`` must be >= 0 and the betas in ``[0, 1)``; ``foreach``,
    ``differentiable`` and ``capturable`` are accepted with their default values only (an
    :class:`OptimizerError` otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 foreach: bool | None = None, *, maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas) if isinstance(betas, list) else betas, "eps": eps,
                                  "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                                  "differentiable": differentiable, "capturable": capturable})

    def _check_group(self, group: dict[str, Any]) -> None:
        check_adam_like("Adamax", group)

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, eps, weight_decay, maximize = group["lr"], group["eps"], group["weight_decay"], bool(group["maximize"])
        b1, b2 = group["betas"]
        for data, g, state in self._stepped(group, ("exp_avg", "exp_inf")):
            scalar = data.dtype.type
            run_update(kernels().adamax_update, data, g, (state["exp_avg"], state["exp_inf"]), scalar(1 - b1),
                       scalar(b2), scalar(eps), scalar(weight_decay), scalar(adamax_step_size(lr, b1, state["step"])),
                       maximize)


def adamax_step_size(lr: float, beta1: float, step: int | float) -> float:
    """Update ``step``'s rate ``lr / (1 - beta1^step)``, in float64 (the eager and the compiled step share it)."""
    return float(lr) / (1 - float(beta1) ** step)


__all__ = ["Adamax"]
