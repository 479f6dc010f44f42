"""Special functions numpy lacks (erf), compiled with numba on first use."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensorplay.interpreters.eager.kernels import backward as _kernels


def erf(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """The error function, elementwise (float32 or float64; NaN propagates).

    One vectorised pass (:func:`tensorplay.interpreters.eager.kernels.backward.erf`: a Taylor polynomial
    near 0, ``1 - erfc`` with a fitted ``erfc`` elsewhere), within a few ulp of the correctly
    rounded value in either precision."""
    return _kernels.erf(x)
