"""``NAdam``: Adam with Nesterov momentum and a decaying momentum schedule."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import AnyTensor, Optimizer, check_adam_like, check_flag, check_number


class NAdam(Optimizer):
    """PyTorch's NAdam, per parameter of shape ``S`` (state arrays of shape ``S`` in its layout): at update ``t``
    (from 1), ``mu_t = b1 (1 - 0.96^(t momentum_decay) / 2)``, ``mu_product *= mu_t``; weight decay ``g +=
    weight_decay * p`` (``g = -g`` first with ``maximize``), or with ``decoupled_weight_decay`` ``p *= 1 - lr
    weight_decay``; ``exp_avg = b1 exp_avg + (1 - b1) g``, ``exp_avg_sq = b2 exp_avg_sq + (1 - b2) g^2``,
    ``denom = sqrt(exp_avg_sq / (1 - b2^t)) + eps`` and ``p -= lr (1 - mu_t) / (1 - mu_product) g / denom +
    lr mu_{t+1} / (1 - mu_product mu_{t+1}) exp_avg / denom``.

    State per parameter, created at its first update as PyTorch's: ``"step"``, ``"mu_product"`` (1.0, a float
    kept in float32 precision as PyTorch's 0-d float32 tensor), ``"exp_avg"`` and ``"exp_avg_sq"`` (zeros).
    ``lr``, ``eps``, ``weight_decay`` and ``momentum_decay`` must be >= 0 and the betas in ``[0, 1)``;
    ``foreach``, ``capturable`` and ``differentiable`` are accepted with their default values only (an
    :class:`OptimizerError` otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 2e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum_decay: float = 4e-3, decoupled_weight_decay: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas) if isinstance(betas, list) else betas, "eps": eps,
                                  "weight_decay": weight_decay, "momentum_decay": momentum_decay,
                                  "decoupled_weight_decay": decoupled_weight_decay, "maximize": maximize,
                                  "foreach": foreach, "capturable": capturable, "differentiable": differentiable})

    def _check_group(self, group: dict[str, Any]) -> None:
        check_adam_like("NAdam", group)
        check_number("NAdam", "momentum_decay value", group["momentum_decay"])
        check_flag("NAdam", "decoupled_weight_decay", group["decoupled_weight_decay"])

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        b1, b2 = group["betas"]
        decoupled, maximize = bool(group["decoupled_weight_decay"]), bool(group["maximize"])
        for data, g, state in self._stepped(group, ("exp_avg", "exp_avg_sq"), mu_product=1.0):
            mu_product, grad_coef, avg_coef = nadam_scalars(group, state["step"], state["mu_product"])
            state["mu_product"] = mu_product
            scalar = data.dtype.type
            run_update(kernels().nadam_update, data, g, (state["exp_avg"], state["exp_avg_sq"]), scalar(1 - b1),
                       scalar(b2), scalar(1 - b2), scalar(eps), scalar(weight_decay), scalar(1 - lr * weight_decay),
                       scalar(1 - b2 ** state["step"]), scalar(grad_coef), scalar(avg_coef), decoupled, maximize)


def _momentum(beta1: float, momentum_decay: float, step: int | float) -> float:
    return beta1 * (1.0 - 0.5 * float(0.96 ** (step * momentum_decay)))


def nadam_scalars(group: dict[str, Any], step: int | float, mu_product: float) -> tuple[float, float, float]:
    """For update ``step`` of a parameter of ``group`` whose momentum product before it is ``mu_product``: the new
    product (``mu_product * mu_step``, in float32 arithmetic as PyTorch's float32 state) and the coefficients of
    the gradient and of the first moment, ``-lr (1 - mu_t) / (1 - product)`` and ``-lr mu_{t+1} / (1 - product
    mu_{t+1})`` (float64). The eager and the compiled step share it."""
    lr, beta1, momentum_decay = float(group["lr"]), float(group["betas"][0]), float(group["momentum_decay"])
    mu = _momentum(beta1, momentum_decay, step)
    mu_next = _momentum(beta1, momentum_decay, step + 1)
    product = float(np.float32(mu_product) * np.float32(mu))
    return product, -lr * (1.0 - mu) / (1.0 - product), (-lr * mu_next) / (1.0 - product * mu_next)


def next_mu_product(group: dict[str, Any], state: dict[str, Any]) -> None:
    """``state``'s momentum product advanced by its (already counted) step ``state["step"]`` (a compiled step's
    effect after each call; starts from 1.0 when the state has none)."""
    state["mu_product"] = nadam_scalars(group, state["step"], state.get("mu_product", 1.0))[0]


__all__ = ["NAdam"]
