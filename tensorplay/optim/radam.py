"""``RAdam``: Adam whose adaptive step is rectified by the variance of its running second moment."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import AnyTensor, Optimizer, check_adam_like, check_flag


class RAdam(Optimizer):
    """PyTorch's RAdam, per parameter of shape ``S`` (state arrays of shape ``S`` in its layout): at update ``t``
    (from 1), weight decay ``g += weight_decay * p`` (``g = -g`` first with ``maximize``), or with
    ``decoupled_weight_decay`` ``p *= 1 - lr weight_decay``; ``exp_avg = b1 exp_avg + (1 - b1) g``,
    ``exp_avg_sq = b2 exp_avg_sq + (1 - b2) g^2``; with ``rho_inf = 2 / (1 - b2) - 1`` and ``rho_t = rho_inf -
    2 t b2^t / (1 - b2^t)``: when ``rho_t > 5``, ``p -= lr exp_avg / (1 - b1^t) * sqrt(1 - b2^t) / (sqrt(exp_avg_sq)
    + eps) * r_t`` with ``r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))``, else
    ``p -= lr exp_avg / (1 - b1^t)``.

    State per parameter, created at its first update as PyTorch's: ``"step"``, ``"exp_avg"`` and ``"exp_avg_sq"``
    (zeros). ``lr``, ``eps`` and ``weight_decay`` must be >= 0 and the betas in ``[0, 1)``; ``foreach``,
    ``capturable`` and ``differentiable`` are accepted with their default values only (an :class:`OptimizerError`
    otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas) if isinstance(betas, list) else betas, "eps": eps,
                                  "weight_decay": weight_decay, "maximize": maximize, "foreach": foreach,
                                  "capturable": capturable, "decoupled_weight_decay": decoupled_weight_decay,
                                  "differentiable": differentiable})

    def _check_group(self, group: dict[str, Any]) -> None:
        check_adam_like("RAdam", group)
        check_flag("RAdam", "decoupled_weight_decay", group["decoupled_weight_decay"])

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        b1, b2 = group["betas"]
        decoupled, maximize = bool(group["decoupled_weight_decay"]), bool(group["maximize"])
        for data, g, state in self._stepped(group, ("exp_avg", "exp_avg_sq")):
            bias_correction1, bias_correction2_sqrt, rect = radam_scalars(b1, b2, state["step"])
            scalar = data.dtype.type
            run_update(kernels().radam_update, data, g, (state["exp_avg"], state["exp_avg_sq"]), scalar(1 - b1),
                       scalar(b2), scalar(1 - b2), scalar(eps), scalar(weight_decay), scalar(1 - lr * weight_decay),
                       scalar(bias_correction1), scalar(lr), scalar(bias_correction2_sqrt), scalar(rect or 0.0),
                       rect is not None, decoupled, maximize)


def radam_scalars(beta1: float, beta2: float, step: int | float) -> tuple[float, float, float | None]:
    """Update ``step``'s ``1 - b1^t``, ``sqrt(1 - b2^t)`` and rectification ``r_t`` (``None`` while ``rho_t <= 5``:
    the unrectified step), in float64 as PyTorch computes them. The eager and the compiled step share it."""
    beta1, beta2 = float(beta1), float(beta2)
    bias_correction1 = 1 - beta1 ** step
    bias_correction2 = 1 - beta2 ** step
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
    if not rho_t > 5.0:
        return bias_correction1, bias_correction2 ** 0.5, None
    rect: float = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
    return bias_correction1, bias_correction2 ** 0.5, rect


__all__ = ["RAdam"]
