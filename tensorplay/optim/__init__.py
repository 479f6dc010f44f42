"""``tensorplay.optim``: optimizers (``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adamax``, ``NAdam``,
``RAdam``, ``Adadelta``, ``LBFGS``) and
learning-rate schedulers (all of PyTorch's), with PyTorch's update rules and interface (parameter groups, ``zero_grad``, state dicts)."""

from tensorplay.optim import lr_scheduler
from tensorplay.optim.adadelta import Adadelta
from tensorplay.optim.adagrad import Adagrad
from tensorplay.optim.adam import Adam, AdamW
from tensorplay.optim.adamax import Adamax
from tensorplay.optim.lr_scheduler import (
    ChainedScheduler,
    ConstantLR,
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    ExponentialLR,
    LambdaLR,
    LinearLR,
    LRScheduler,
    MultiplicativeLR,
    MultiStepLR,
    OneCycleLR,
    PolynomialLR,
    ReduceLROnPlateau,
    SchedulerTypeError,
    SequentialLR,
    StepLR,
)
from tensorplay.optim.nadam import NAdam
from tensorplay.optim.optimizer import Optimizer, OptimizerError, OptimizerKeyError, OptimizerTypeError
from tensorplay.optim.radam import RAdam
from tensorplay.optim.rmsprop import RMSprop
from tensorplay.optim.sgd import SGD

__all__ = ["Optimizer", "OptimizerError", "OptimizerKeyError", "OptimizerTypeError", "SGD", "Adam", "AdamW",
           "lr_scheduler", "LRScheduler", "StepLR", "CosineAnnealingLR", "MultiStepLR", "ExponentialLR", "LambdaLR",
           "MultiplicativeLR", "LinearLR", "ConstantLR", "OneCycleLR", "ReduceLROnPlateau", "SchedulerTypeError"]
__all__ += ["PolynomialLR", "CosineAnnealingWarmRestarts", "CyclicLR", "SequentialLR", "ChainedScheduler"]
__all__ += ["RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "Adadelta"]

from tensorplay.optim.lbfgs import LBFGS  # noqa: E402

__all__ += ["LBFGS"]
