"""Loss modules: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss`` and ``L1Loss``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple, overload

from tensorplay.nn import functional as F
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
