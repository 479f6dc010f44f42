"""``LayerNorm``, ``BatchNorm1d`` and ``BatchNorm2d``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar, TypeVarTuple, overload

import numpy as np

from tensorplay import dtypes as _dt
from tensorplay.errors import ShapeError
from tensorplay.nn import functional as F
from tensorplay.nn._util import is_eager, layer_size, numel, ops_for, shape_of
from tensorplay.nn.linear import add_affine, reset_affine
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

from tensorplay.interpreters.eager.interpreter import eager

S = TypeVarTuple("S")
Lead = TypeVarTuple("Lead")
D = TypeVar("D", bound=int)
AnyTensor = Tensor[*tuple[Any, ...]]


class LayerNorm(Module, Generic[D]):
    """Normalise the trailing ``normalized_shape`` axes of ``x[*lead, *normalized_shape]`` (biased
    variance), then scale by ``weight`` (ones) and shift by ``bias`` (zeros).

    Typed as ``LayerNorm[D]`` for one feature dim (``LayerNorm(Model(64))`` takes ``Tensor[*Lead, Model]``);
    a tuple ``normalized_shape`` gives a ``LayerNorm[Any]``."""

    @overload
    def __init__(self: LayerNorm[D], normalized_shape: D, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype: Any = None) -> None: ...

    @overload
    def __init__(self: LayerNorm[Any], normalized_shape: Sequence[int], eps: float = 1e-5,
                 elementwise_affine: bool = True, bias: bool = True, dtype: Any = None) -> None: ...

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, dtype: Any = None) -> None:
        super().__init__()
        dims = (normalized_shape,) if not isinstance(normalized_shape, (tuple, list)) else tuple(normalized_shape)
        shape = tuple(layer_size(d, "normalized_shape", "LayerNorm") for d in dims)
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        add_affine(self, shape, dtype, weight=elementwise_affine, bias=bias)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight ones, bias zeros."""
        reset_affine(self)

    def forward(self, x: Tensor[*Lead, D]) -> Tensor[*Lead, D]:
        """The normalised tensor, same shape as ``x``."""
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    if TYPE_CHECKING:
        __call__ = forward

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class _BatchNorm(Module):
    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        layer_size(num_features, "num_features", type(self).__name__)
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        add_affine(self, (num_features,), dtype, weight=affine, bias=bias)
        if track_running_stats:
            name = "float32" if dtype is None else _dt.to_dtype(dtype).name
            self.register_buffer("running_mean", eager.wrap(np.zeros(num_features, dtype=name)))
            self.register_buffer("running_var", eager.wrap(np.ones(num_features, dtype=name)))
            self.register_buffer("num_batches_tracked", eager.wrap(np.zeros((), dtype=np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean 0, running variance 1, no batches tracked."""
        if self.track_running_stats:
            for name, value in (("running_mean", 0.0), ("running_var", 1.0), ("num_batches_tracked", 0)):
                buffer = self._buffers[name]
                assert buffer is not None
                buffer._data[...] = value
                buffer._version = [(buffer._version or [0])[0] + 1]

    def reset_parameters(self) -> None:
        """Reset the running statistics; weight ones, bias zeros."""
        self.reset_running_stats()
        reset_affine(self)

    def _check_input(self, x: AnyTensor) -> None:
        raise NotImplementedError

    def _normalize(self, x: AnyTensor) -> AnyTensor:
        self._check_input(x)
        factor = 0.0 if self.momentum is None else self.momentum
        tracked = self.num_batches_tracked
        if self.training and self.track_running_stats and tracked is not None:
            ops = ops_for(type(self).__name__, x)
            if is_eager(ops):
                tracked._data += 1
                tracked._version = [(tracked._version or [0])[0] + 1]
                count = int(tracked._data)
            else:
                # the cumulative average (momentum None) needs the count as a number: a value read, which a
                # graph records as a guard (read before the update: the buffer may be this graph's value)
                count = int(np.asarray(ops.concrete(tracked))) + 1 if self.momentum is None else 0
                hook = getattr(ops, "buffer_update", None)
                if hook is not None:
                    hook(tracked, ops.add(tracked, 1))
            if self.momentum is None:
                factor = 1.0 / count
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep_stats = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if keep_stats else None, self.running_var if keep_stats else None,
                            self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of ``x[N, C]`` or ``x[N, C, L]`` over every axis but ``C``.

    Training uses the batch's mean and (biased) variance and updates the running statistics
    (``momentum``; the running variance is unbiased, as PyTorch); evaluation uses the running ones.
    """

    def _check_input(self, x: AnyTensor) -> None:
        if x.ndim not in (2, 3):
            raise ShapeError(f"BatchNorm1d: expected a 2-d [N, C] or 3-d [N, C, L] input, got shape {list(x.shape)}")

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """The normalised tensor, same shape as ``x``."""
        return self._normalize(x)

    if TYPE_CHECKING:
        __call__ = forward


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of ``x[*lead, C, H, W]`` over every axis but ``C`` (statistics over the
    leading axes and the spatial ones); an unbatched ``[C, H, W]`` input is a batch of one."""

    def _check_input(self, x: AnyTensor) -> None:
        if x.ndim < 3:
            raise ShapeError(f"BatchNorm2d: expected an input [*lead, C, H, W], got shape {list(x.shape)}")

    def forward(self, x: Tensor[*S]) -> Tensor[*S]:
        """The normalised tensor, same shape as ``x``."""
        if x.ndim == 4:
            return self._normalize(x)
        self._check_input(x)
        ops = ops_for("BatchNorm2d", x)
        shape = shape_of(x)
        flat = ops.reshape(x, shape=(numel(shape[:-3]),) + shape[-3:])
        return ops.reshape(self._normalize(flat), shape=shape)  # type: ignore[no-any-return]

    if TYPE_CHECKING:
        __call__ = forward
