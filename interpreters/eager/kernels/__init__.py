"""Compute kernels of the eager interpreter: pure functions on numpy arrays.

Each function has the name and calling convention of the primitive it implements
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
from .threads import apply_environment, num_threads, set_num_threads
from .sdpa import attention
from .convolution import conv, conv_transpose, conv_weight_grad
from .indexing import gather, scatter_add
from .outer import outer_matmul
from .pool import (avg_pool, avg_pool_backward, max_pool, max_pool_backward, max_pool_select,
                   smooth_max_pool, smooth_max_pool_backward)
from .randomness import random_normal, random_randint, random_uniform
from .rows import gelu, layer_norm, log_softmax, softmax

apply_environment()
allocator.tune()

__all__ = [
    "attention",
    "avg_pool",
    "avg_pool_backward",
    "conv",
    "conv_transpose",
    "conv_weight_grad",
    "gather",
    "gelu",
    "layer_norm",
    "log_softmax",
    "max_pool",
    "max_pool_backward",
    "max_pool_select",
    "num_threads",
    "outer_matmul",
    "random_normal",
    "random_randint",
    "random_uniform",
    "scatter_add",
    "set_num_threads",
    "smooth_max_pool",
    "smooth_max_pool_backward",
    "softmax",
]
