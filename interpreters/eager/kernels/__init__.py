"""Compute kernels of the eager interpreter: pure functions on numpy arrays.

Each exported function has the name and calling convention of the primitive it implements
(:class:`tensorplay.ops.Ops`): tensor inputs positional as numpy arrays, parameters
keyword-only. Every one returns a new array and never mutates its inputs; any
layout (non-contiguous, transposed) is accepted, float32 and float64 are computed
in their own precision (integer inputs of float primitives compute in float32),
and zero-size results return without running a kernel.

Importing this package does not import numba: the jitted kernels live in
``_numba_kernels`` and are imported, and compiled (or loaded from numba's cache),
on first use. How many threads kernels and BLAS use is decided in one place,
:mod:`.threads` (``TP_NUM_THREADS``); :mod:`.allocator` keeps glibc from returning
the large temporaries of every step to the kernel (``TP_MALLOC_TUNING=0`` disables it).
"""

from __future__ import annotations

from . import allocator
from .threads import apply_environment, claim_blas_buffers, matmul, num_threads, set_num_threads
from .sdpa import attention as dot_product_attention
from .convolution import conv as conv_nd
from .convolution import conv_backward as conv_backward_nd
from .convolution import conv_bias as conv_bias_nd
from .convolution import conv_transpose as conv_transpose_nd
from .convolution import conv_weight_grad as conv_weight_grad_nd
from .indexing import check_index, gather, scatter_add
from .backward import max_pool_backward as max_pool_backward_nd  # the 2x2 stride-2 kernel, else the general one
from .outer import outer_matmul
from .pool import avg_pool as avg_pool_nd
from .pool import avg_pool_backward as avg_pool_backward_nd
from .pool import max_pool as max_pool_nd
from .pool import max_pool_select as max_pool_select_nd
from .smooth import smooth_max_pool_backward_nd, smooth_max_pool_nd
from .randomness import random_normal, random_randint, random_uniform
from .scan import argsort, cumsum
from .rows import exp, gelu, log_softmax, relu, sigmoid, softmax, tanh
from .rows import layer_norm as layer_norm_last_axis

apply_environment()
allocator.tune()
claim_blas_buffers()

__all__ = [
    "argsort",
    "check_index",
    "cumsum",
    "dot_product_attention",
    "exp",
    "avg_pool_nd",
    "avg_pool_backward_nd",
    "conv_backward_nd",
    "conv_bias_nd",
    "conv_nd",
    "conv_transpose_nd",
    "conv_weight_grad_nd",
    "gather",
    "gelu",
    "relu",
    "sigmoid",
    "tanh",
    "layer_norm_last_axis",
    "log_softmax",
    "matmul",
    "max_pool_nd",
    "max_pool_backward_nd",
    "max_pool_select_nd",
    "num_threads",
    "outer_matmul",
    "random_normal",
    "random_randint",
    "random_uniform",
    "scatter_add",
    "set_num_threads",
    "smooth_max_pool_nd",
    "smooth_max_pool_backward_nd",
    "softmax",
]
