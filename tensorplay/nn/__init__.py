"""``tensorplay.nn``: modules, parameters, layers, losses, ``functional`` and ``init``.

Same names, parameter names, shapes and initialisations as PyTorch, so a PyTorch
state dict loads and a model trains like its PyTorch twin. Every layer keeps any
leading shape of its input (prefix polymorphism) and runs under the interpreter
of its input (eager, graph recorder, transforms).
"""

from tensorplay.nn import functional, init, utils
from tensorplay.nn.activation import GELU, LeakyReLU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from tensorplay.nn.attention import MultiheadAttention
from tensorplay.nn.container import ModuleDict, ModuleList, Sequential
from tensorplay.nn.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d
from tensorplay.nn.adaptive import AdaptiveAvgPool1d, AdaptiveAvgPool2d
from tensorplay.nn.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from tensorplay.nn.linear import Flatten, Identity, Linear
from tensorplay.nn.loss import CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from tensorplay.nn.module import (
    IncompatibleKeys, Module, ModuleAttributeError, ModuleKeyError, ModuleTypeError, StateDictError,
)
from tensorplay.nn.norms import GroupNorm, RMSNorm
from tensorplay.nn.normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from tensorplay.nn.parameter import Parameter
from tensorplay.nn.pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d
from tensorplay.nn.sparse import Embedding
from tensorplay.nn.transformer import (
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)

__all__ = [
    "functional", "init", "utils", "Module", "Parameter", "StateDictError", "IncompatibleKeys",
    "ModuleAttributeError", "ModuleKeyError", "ModuleTypeError",
    "Linear", "Identity", "Flatten", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "LayerNorm", "BatchNorm1d", "BatchNorm2d", "Embedding",
    "Dropout", "MultiheadAttention", "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU", "LeakyReLU", "Softmax",
    "LogSoftmax", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "Dropout1d", "Dropout2d", "Dropout3d", "GroupNorm",
    "RMSNorm", "TransformerEncoderLayer", "TransformerEncoder", "TransformerDecoderLayer", "TransformerDecoder", "Transformer", "Sequential", "ModuleList", "ModuleDict", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss",
]

from tensorplay.nn.activation import (  # noqa: E402
    CELU, ELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LogSigmoid, Mish, PReLU, ReLU6, Softplus,
    Softshrink, Softsign, Tanhshrink, Threshold,
)
from tensorplay.nn.loss import (  # noqa: E402
    BCELoss, BCEWithLogitsLoss, CosineSimilarity, HuberLoss, KLDivLoss, PairwiseDistance, SmoothL1Loss,
)

__all__ += [
    "Softplus", "ELU", "SELU", "CELU", "ReLU6", "Hardtanh", "Hardsigmoid", "Hardswish", "Mish", "LogSigmoid",
    "Softsign", "GLU", "Tanhshrink", "Softshrink", "Hardshrink", "Threshold", "PReLU",
    "BCEWithLogitsLoss", "BCELoss", "SmoothL1Loss", "HuberLoss", "KLDivLoss", "CosineSimilarity", "PairwiseDistance",
]

from tensorplay.nn.instance_norm import InstanceNorm1d, InstanceNorm2d  # noqa: E402
from tensorplay.nn.padding_layers import (  # noqa: E402
    ConstantPad1d, ConstantPad2d, ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
    ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d,
)
from tensorplay.nn.parameter_containers import ParameterDict, ParameterList  # noqa: E402
from tensorplay.nn.reshaping import PixelShuffle, PixelUnshuffle, Unflatten  # noqa: E402
from tensorplay.nn.upsampling import Upsample  # noqa: E402

__all__ += [
    "Unflatten", "PixelShuffle", "PixelUnshuffle", "Upsample", "ParameterList", "ParameterDict", "InstanceNorm1d",
    "InstanceNorm2d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
]

from tensorplay.nn.recurrent import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell  # noqa: E402

__all__ += ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

from tensorplay.nn.adaptive_max import AdaptiveMaxPool1d, AdaptiveMaxPool2d  # noqa: E402
from tensorplay.nn.bilinear import Bilinear  # noqa: E402
from tensorplay.nn.unfold import Fold, Unfold  # noqa: E402

__all__ += ["Unfold", "Fold", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "Bilinear"]

from tensorplay.nn.layers_3d import (  # noqa: E402
    AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, BatchNorm3d, ConvTranspose3d, InstanceNorm3d, MaxPool3d,
)
from tensorplay.nn.layers_misc import (  # noqa: E402
    ChannelShuffle, CircularPad1d, CircularPad2d, CircularPad3d, LocalResponseNorm, LPPool1d, LPPool2d, LPPool3d,
    Softmax2d, Softmin, UpsamplingBilinear2d, UpsamplingNearest2d,
)
from tensorplay.nn.random_layers import AlphaDropout, FeatureAlphaDropout, RReLU  # noqa: E402

__all__ += [
    "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d", "BatchNorm3d", "InstanceNorm3d",
    "ConvTranspose3d", "Softmin", "Softmax2d", "LPPool1d", "LPPool2d", "LPPool3d", "LocalResponseNorm",
    "ChannelShuffle", "CircularPad1d", "CircularPad2d", "CircularPad3d", "UpsamplingNearest2d",
    "UpsamplingBilinear2d", "RReLU", "AlphaDropout", "FeatureAlphaDropout",
]

from tensorplay.nn.embedding_bag import EmbeddingBag  # noqa: E402

__all__ += ["EmbeddingBag"]

from tensorplay.nn.margin_loss_modules import (  # noqa: E402
    CosineEmbeddingLoss, GaussianNLLLoss, HingeEmbeddingLoss, MarginRankingLoss, MultiLabelMarginLoss,
    MultiLabelSoftMarginLoss, MultiMarginLoss, PoissonNLLLoss, SoftMarginLoss, TripletMarginLoss,
    TripletMarginWithDistanceLoss,
)

__all__ += [
    "CosineEmbeddingLoss", "HingeEmbeddingLoss", "MarginRankingLoss", "MultiMarginLoss", "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss", "SoftMarginLoss", "TripletMarginLoss", "TripletMarginWithDistanceLoss",
    "PoissonNLLLoss", "GaussianNLLLoss",
]
