"""``InstanceNorm1d`` / ``InstanceNorm2d`` and ``F.instance_norm``, composed from the primitives.

Instance normalisation of ``x[N, C, *spatial]`` normalises each ``(n, c)`` slice over its spatial axes
(mean and biased variance): a group normalisation with one channel per group. With running statistics
and ``use_input_stats`` they are updated as PyTorch does: with the batch mean of the per-instance means
and of the per-instance unbiased variances. Without ``use_input_stats`` the running statistics
normalise (evaluation of a layer that tracks them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tensorplay.errors import ShapeError
from tensorplay.nn._util import numel, ops_for, shape_of
from tensorplay.nn.norms import group_norm
from tensorplay.nn.normalization import _BatchNorm
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]


def instance_norm(input: AnyTensor, running_mean: AnyTensor | None = None, running_var: AnyTensor | None = None,
                  weight: AnyTensor | None = None, bias: AnyTensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5, where: str = "instance_norm") -> AnyTensor:
    """Instance normalisation of ``input[N, C, *spatial]`` (at least one spatial axis), then
    ``weight[C]`` scales and ``bias[C]`` shifts each channel. ``use_input_stats`` (the default) uses each
    instance's statistics and updates ``running_mean[C]`` / ``running_var[C]`` in place when given;
    otherwise the running statistics normalise."""
    from tensorplay.nn.functional import update_running_stat  # functional imports this module

    ops = ops_for(where, input, running_mean, running_var, weight, bias)
    shape = shape_of(input)
    if input.ndim < 3:
        raise ShapeError(f"{where}: expected an input [N, C, *spatial] with at least 3 axes, got shape "
                         f"{list(shape)}")
    if input.dtype.name not in ("float32", "float64"):
        raise ShapeError(f"{where}: expected a float tensor, got {input.dtype}")
    c = shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise ShapeError(f"{where}: {name} must have shape [{c}] for an input of shape {list(shape)}, got "
                             f"{list(t.shape)}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ShapeError(f"{where}: use_input_stats=False needs running_mean and running_var")
        if weight is None or bias is None:
            weight = ops.full(shape=(c,), value=1.0, dtype=input.dtype.name) if weight is None else weight
            bias = ops.full(shape=(c,), value=0.0, dtype=input.dtype.name) if bias is None else bias
        return ops.batch_norm(input, running_mean, running_var, weight, bias, eps=eps)  # type: ignore[no-any-return]
    count = numel(shape[2:])
    if isinstance(count, int) and count <= 1:
        raise ShapeError(f"{where}: expected more than 1 spatial element when using input statistics, got input "
                         f"of shape {list(shape)}")
    if running_mean is not None or running_var is not None:
        axes = tuple(range(2, input.ndim))
        mean = ops.div(ops.reduce_sum(input, axes=axes, keepdims=True), count)
        if running_mean is not None:
            batch_mean = ops.div(ops.reduce_sum(ops.reshape(mean, shape=tuple(shape[:2])), axes=(0,),
                                                keepdims=False), shape[0])
            update_running_stat(ops, running_mean, batch_mean, momentum)
        if running_var is not None:
            centred = ops.sub(input, mean)
            var = ops.div(ops.reduce_sum(ops.mul(centred, centred), axes=axes, keepdims=False), count - 1)
            update_running_stat(ops, running_var, ops.div(ops.reduce_sum(var, axes=(0,), keepdims=False),
                                                          shape[0]), momentum)
    return group_norm(input, c, weight, bias, eps)


class _InstanceNorm(_BatchNorm):
    """Instance normalisation over ``rank`` spatial axes; an input without the batch axis
    (``[C, *spatial]``) is normalised as a batch of one, as PyTorch."""

    rank = 1

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, dtype: Any = None) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype)

    def forward(self, x: AnyTensor) -> AnyTensor:
        """The normalised tensor, same shape as ``x``."""
        where = type(self).__name__
        ops = ops_for(where, x)
        shape = shape_of(x)
        if x.ndim not in (self.rank + 1, self.rank + 2):
            raise ShapeError(f"{where}: expected a {self.rank + 1}-d [C, *spatial] or {self.rank + 2}-d "
                             f"[N, C, *spatial] input, got shape {list(shape)}")
        batched = x if x.ndim == self.rank + 2 else ops.reshape(x, shape=(1,) + shape)
        c = shape_of(batched)[1]
        if c != self.num_features and (self.affine or self.track_running_stats):
            raise ShapeError(f"{where}: expected {self.num_features} channels (num_features), got input of shape "
                             f"{list(shape)}")
        out = instance_norm(batched, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            0.0 if self.momentum is None else self.momentum, self.eps, where)
        return out if out.ndim == x.ndim else ops.reshape(out, shape=shape)

    if TYPE_CHECKING:
        __call__ = forward


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of ``[N, C, L]`` (or ``[C, L]``) over ``L``; ``affine=False`` and
    ``track_running_stats=False`` by default, as PyTorch."""

    rank = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of ``[N, C, H, W]`` (or ``[C, H, W]``) over ``H, W``; ``affine=False`` and
    ``track_running_stats=False`` by default, as PyTorch."""

    rank = 2
