"""Loss modules: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``, ``L1Loss``, ``BCEWithLogitsLoss``, ``BCELoss``,
``SmoothL1Loss``, ``HuberLoss`` and ``KLDivLoss``, and the distances ``CosineSimilarity`` and
``PairwiseDistance``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, overload

from tensorplay.nn import functional as F
from tensorplay.nn import loss_functions as L
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

if TYPE_CHECKING:
    from tensorplay.index import Index

AnyTensor = Tensor[*tuple[Any, ...]]
N = TypeVar("N")
C = TypeVar("C")
Lead = TypeVarTuple("Lead")


class CrossEntropyLoss(Module):
    """:func:`tensorplay.nn.functional.cross_entropy` as a module (``weight`` is a buffer)."""

    def __init__(self, weight: AnyTensor | None = None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    @overload
    def forward(self, input: Tensor[N, C, *Lead], target: Index[C, N, *Lead]) -> AnyTensor: ...

    @overload
    def forward(self, input: Tensor[C], target: Index[C]) -> AnyTensor: ...

    @overload
    def forward(self, input: Tensor[N, C, *Lead], target: Tensor[N, C, *Lead]) -> AnyTensor: ...

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of logits ``input[N, C, *d]`` against class indices ``Index[C, N, *d]`` (typed; plain
        integer tensors are accepted at run time) or class probabilities shaped like ``input``."""
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing)

    if TYPE_CHECKING:
        __call__ = forward


class NLLLoss(Module):
    """:func:`tensorplay.nn.functional.nll_loss` as a module."""

    def __init__(self, weight: AnyTensor | None = None, ignore_index: int = -100, reduction: str = "mean") -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss."""
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class MSELoss(Module):
    """Mean squared error."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss."""
        return F.mse_loss(input, target, self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class L1Loss(Module):
    """Mean absolute error."""

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss."""
        return F.l1_loss(input, target, self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class BCEWithLogitsLoss(Module):
    """:func:`tensorplay.nn.functional.binary_cross_entropy_with_logits` as a module (``weight`` and
    ``pos_weight`` are buffers)."""

    def __init__(self, weight: AnyTensor | None = None, reduction: str = "mean",
                 pos_weight: AnyTensor | None = None) -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of logits ``input`` against probabilities ``target`` of the same shape."""
        return L.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction, self.pos_weight)

    if TYPE_CHECKING:
        __call__ = forward


class BCELoss(Module):
    """:func:`tensorplay.nn.functional.binary_cross_entropy` as a module (``weight`` is a buffer)."""

    def __init__(self, weight: AnyTensor | None = None, reduction: str = "mean") -> None:
        super().__init__()
        self.register_buffer("weight", weight)
        self.reduction = reduction

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss of probabilities ``input`` against ``target`` of the same shape."""
        return L.binary_cross_entropy(input, target, self.weight, self.reduction)

    if TYPE_CHECKING:
        __call__ = forward


class SmoothL1Loss(Module):
    """:func:`tensorplay.nn.functional.smooth_l1_loss` as a module."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__()
        self.reduction = reduction
        self.beta = beta

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss."""
        return L.smooth_l1_loss(input, target, self.reduction, self.beta)

    if TYPE_CHECKING:
        __call__ = forward


class HuberLoss(Module):
    """:func:`tensorplay.nn.functional.huber_loss` as a module."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__()
        self.reduction = reduction
        self.delta = delta

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The loss."""
        return L.huber_loss(input, target, self.reduction, self.delta)

    if TYPE_CHECKING:
        __call__ = forward


class KLDivLoss(Module):
    """:func:`tensorplay.nn.functional.kl_div` as a module."""

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__()
        self.reduction = reduction
        self.log_target = log_target

    def forward(self, input: AnyTensor, target: AnyTensor) -> AnyTensor:
        """The divergence of log-probabilities ``input`` from ``target``."""
        return L.kl_div(input, target, self.reduction, self.log_target)

    if TYPE_CHECKING:
        __call__ = forward


class CosineSimilarity(Module):
    """:func:`tensorplay.nn.functional.cosine_similarity` along ``dim`` as a module."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: AnyTensor, x2: AnyTensor) -> AnyTensor:
        """The cosine similarity (``dim`` removed)."""
        return L.cosine_similarity(x1, x2, self.dim, self.eps)

    if TYPE_CHECKING:
        __call__ = forward


class PairwiseDistance(Module):
    """:func:`tensorplay.nn.functional.pairwise_distance` over the last dim as a module."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: AnyTensor, x2: AnyTensor) -> AnyTensor:
        """The distance (the last dim removed unless ``keepdim``)."""
        return L.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

    if TYPE_CHECKING:
        __call__ = forward
