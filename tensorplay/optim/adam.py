"""``Adam`` and ``AdamW`` (decoupled weight decay), with optional AMSGrad."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from tensorplay.optim._kernels import kernels, run_update
from tensorplay.optim.optimizer import AnyTensor, Optimizer, check_adam_like, check_flag


class Adam(Optimizer):
    """PyTorch's Adam: ``m = b1 m + (1-b1) g``, ``v = b2 v + (1-b2) g^2``,
    ``p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)``; ``weight_decay`` adds
    ``weight_decay * p`` to the gradient (L2), or with ``decoupled_weight_decay`` multiplies ``p`` by
    ``1 - lr * weight_decay`` before the step (AdamW); ``amsgrad`` uses the running maximum of ``v``.
    ``foreach``, ``capturable``, ``differentiable`` and ``fused`` are accepted with their default values only
    (an :class:`OptimizerError` otherwise)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
                 amsgrad: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False, fused: bool | None = None,
                 decoupled_weight_decay: bool = False) -> None:
        super().__init__(params, {"lr": lr, "betas": tuple(betas) if isinstance(betas, (tuple, list)) else betas,
                                  "eps": eps, "weight_decay": weight_decay, "amsgrad": amsgrad,
                                  "maximize": maximize, "foreach": foreach, "capturable": capturable,
                                  "differentiable": differentiable, "fused": fused,
                                  "decoupled_weight_decay": decoupled_weight_decay})

    def _check_group(self, group: dict[str, Any]) -> None:
        name = type(self).__name__
        check_adam_like(name, group)
        check_flag(name, "amsgrad", group["amsgrad"])
        check_flag(name, "decoupled_weight_decay", group["decoupled_weight_decay"])

    def _update_group(self, group: dict[str, Any]) -> None:
        lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
        b1, b2 = group["betas"]
        amsgrad, maximize = group["amsgrad"], group["maximize"]
        moments = ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if amsgrad else ())
        for data, g, state in self._stepped(group, moments):
            step = state["step"]
            step_size = lr / (1 - b1 ** step)
            bias_correction2_sqrt = math.sqrt(1 - b2 ** step)
            m, v = state["exp_avg"], state["exp_avg_sq"]
            vmax = state.setdefault("max_exp_avg_sq", np.zeros_like(data)) if amsgrad else m
            scalar = data.dtype.type
            run_update(kernels().adam_update, data, g, (m, v, vmax), scalar(1 - b1), scalar(b2), scalar(1 - b2),
                       scalar(eps), scalar(weight_decay), scalar(1 - lr * weight_decay), scalar(step_size),
                       scalar(bias_correction2_sqrt), bool(group["decoupled_weight_decay"]), bool(amsgrad),
                       bool(maximize))


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the Adam step): the groups'
    ``decoupled_weight_decay`` is True; ``weight_decay`` defaults to 0.01 as in PyTorch."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
                 amsgrad: bool = False, *, maximize: bool = False, foreach: bool | None = None,
                 capturable: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
