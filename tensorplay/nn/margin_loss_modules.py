"""Modules of the margin, embedding and likelihood losses (:mod:`tensorplay.nn.margin_losses`,
:mod:`tensorplay.nn.likelihood_losses`), with PyTorch's names and arguments (``reduction`` and the arguments
PyTorch places after its deprecated ``size_average``/``reduce`` are keyword-only; ``weight`` is a buffer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensorplay.nn import likelihood_losses as K
from tensorplay.nn import margin_losses as M
from tensorplay.nn.margin_losses import Distance
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


class CosineEmbeddingLoss(Module):
    """:func:`tensorplay.nn.functional.cosine_embedding_loss` as a module."""

    def __init__(self, margin: float = 0.0, *, reduction: str = "mean") -> None:
        super().__init__()
        self.margin = margin
        self.reduction = reduction

    def forward(self, input1: AnyTensor, input2: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of ``input1[N, D]`` and ``input2`` against +-1 ``target[N]`` (or ``[D]`` with a 0-d target)."""
        return M.cosine_embedding_loss(input1, input2, target, self.margin, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class HingeEmbeddingLoss(Module):
    """:func:`tensorplay.nn.functional.hinge_embedding_loss` as a module."""

    def __init__(self, margin: float = 1.0, *, reduction: str = "mean") -> None:
        super().__init__()
        self.margin = margin
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of distances ``input`` against +-1 ``target``."""
        return M.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class MarginRankingLoss(Module):
    """:func:`tensorplay.nn.functional.margin_ranking_loss` as a module."""

    def __init__(self, margin: float = 0.0, *, reduction: str = "mean") -> None:
        super().__init__()
        self.margin = margin
        self.reduction = reduction

    def forward(self, input1: AnyTensor, input2: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of ranking ``input1`` against ``input2`` as +-1 ``target`` says."""
        return M.margin_ranking_loss(input1, input2, target, self.margin, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class SoftMarginLoss(Module):
    """:func:`tensorplay.nn.functional.soft_margin_loss` as a module."""

    def __init__(self, *, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The logistic loss of ``input`` against +-1 ``target``."""
        return M.soft_margin_loss(input, target, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class MultiLabelSoftMarginLoss(Module):
    """:func:`tensorplay.nn.functional.multilabel_soft_margin_loss` as a module."""

    def __init__(self, weight: AnyTensor | None = None, *, reduction: str = "mean") -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of logits ``input[..., C]`` against 0/1 ``target``."""
        return M.multilabel_soft_margin_loss(input, target, self.weight, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class MultiMarginLoss(Module):
    """:func:`tensorplay.nn.functional.multi_margin_loss` as a module."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: AnyTensor | None = None, *,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.p = p
        self.margin = margin
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of scores ``input[N, C]`` at class indices ``target[N]``."""
        return M.multi_margin_loss(input, target, self.p, self.margin, self.weight, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class MultiLabelMarginLoss(Module):
    """:func:`tensorplay.nn.functional.multilabel_margin_loss` as a module."""

    def __init__(self, *, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of scores ``input[N, C]`` at class lists ``target[N, C]`` (ended by -1)."""
        return M.multilabel_margin_loss(input, target, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class TripletMarginLoss(Module):
    """:func:`tensorplay.nn.functional.triplet_margin_loss` as a module."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False, *,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap
        self.reduction = reduction

    def forward(self, anchor: AnyTensor, positive: AnyTensor, negative: AnyTensor) -> AnyTensor:
        """The loss of triplets ``[N, D]`` (or ``[D]``)."""
        return M.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps, self.swap,
                                     reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class TripletMarginWithDistanceLoss(Module):
    """:func:`tensorplay.nn.functional.triplet_margin_with_distance_loss` as a module."""

    def __init__(self, *, distance_function: Distance | None = None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.distance_function = distance_function
        self.margin = margin
        self.swap = swap
        self.reduction = reduction

    def forward(self, anchor: AnyTensor, positive: AnyTensor, negative: AnyTensor) -> AnyTensor:
        """The loss of triplets under ``distance_function``."""
        return M.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class PoissonNLLLoss(Module):
    """:func:`tensorplay.nn.functional.poisson_nll_loss` as a module."""

    def __init__(self, log_input: bool = True, full: bool = False, *, eps: float = 1e-8,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.log_input = log_input
        self.full = full
        self.eps = eps
        self.reduction = reduction

    def forward(self, log_input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of rates ``log_input`` (their logs unless ``log_input=False`` was given) at counts ``target``."""
        return K.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps, reduction=self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class GaussianNLLLoss(Module):
    """:func:`tensorplay.nn.functional.gaussian_nll_loss` as a module."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__()
        self.full = full
        self.eps = eps
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor, var: AnyTensor | float) -> AnyTensor:
        """The loss of means ``input`` at ``target`` with variances ``var``."""
        return K.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)

    if TYPE_CHECKING:
        __call__ = forward
