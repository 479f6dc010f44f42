"""The strong-Wolfe line search of :class:`~tensorplay.optim.lbfgs.LBFGS` (PyTorch's bracketing and zoom
phases with safeguarded cubic interpolation; Nocedal and Wright, Algorithms 3.5 and 3.6).

Along a direction ``d[n]`` from the point the objective was last evaluated at (``f``, gradient ``g[n]``,
directional derivative ``gtd = g . d < 0``), a step ``t`` is accepted when it decreases enough,
``f(t) <= f + c1 t gtd``, and flattens the slope enough, ``|g(t) . d| <= -c2 gtd``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
Objective = Callable[[float, Array], tuple[float, Array]]
"""``objective(t, d) -> (f, g)``: the loss and flat gradient at the start point plus ``t * d``."""


def cubic_minimum(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                  bounds: tuple[float, float] | None = None) -> float:
    """The minimiser of the cubic through ``(x1, f1)`` and ``(x2, f2)`` with slopes ``g1``, ``g2``, clamped
    to ``bounds`` (default: between ``x1`` and ``x2``); the middle of the bounds when the cubic has none."""
    low, high = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square >= 0:
        d2 = math.sqrt(d2_square)
        if x1 <= x2:
            at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(at, low), high)
    return (low + high) / 2.0


class _Bracket:
    """The interval of step sizes the zoom phase narrows: two ends, each with its loss, gradient and slope."""

    def __init__(self, steps: list[float], losses: list[float], grads: list[Array], slopes: list[float]) -> None:
        self.steps, self.losses, self.grads, self.slopes = steps, losses, grads, slopes

    def ends(self) -> tuple[int, int]:
        """``(low, high)``: the index of the end with the lower loss first."""
        return (0, 1) if self.losses[0] <= self.losses[-1] else (1, 0)

    def put(self, i: int, step: float, loss: float, grad: Array, slope: float) -> None:
        self.steps[i], self.losses[i], self.grads[i], self.slopes[i] = step, loss, grad, slope


def strong_wolfe(objective: Objective, t: float, d: Array, f: float, g: Array, gtd: float, c1: float = 1e-4,
                 c2: float = 0.9, tolerance_change: float = 1e-9,
                 max_ls: int = 25) -> tuple[float, Array, float, int]:
    """``(f_new, g_new, t, evaluations)``: a step ``t`` along ``d`` (starting from the trial ``t``) meeting the
    strong Wolfe conditions, or the best one found within ``max_ls`` further evaluations."""
    d_norm = float(np.abs(d).max(initial=0.0))
    f_new, g_new = objective(t, d)
    evaluations = 1
    gtd_new = float(g_new @ d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    bracket: _Bracket | None = None
    done = False
    ls_iter = 0
    while ls_iter < max_ls:  # bracketing: grow the step until an interval holds an acceptable one
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket = _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new])
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket = _Bracket([t], [f_new], [g_new], [gtd_new])
            done = True
            break
        if gtd_new >= 0:
            bracket = _Bracket([t_prev, t], [f_prev, f_new], [g_prev, g_new], [gtd_prev, gtd_new])
            break
        # a longer step, from the cubic through the last two trials (at least 1% further, at most 10x)
        trial = cubic_minimum(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = trial
        f_new, g_new = objective(t, d)
        evaluations += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
    if ls_iter == max_ls or bracket is None:
        bracket = _Bracket([0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new])
    low_i, high_i = bracket.ends()
    insufficient = False
    while not done and ls_iter < max_ls:  # zoom: shrink the interval around an acceptable step
        steps = bracket.steps
        if abs(steps[1] - steps[0]) * d_norm < tolerance_change:
            break
        t = cubic_minimum(steps[0], bracket.losses[0], bracket.slopes[0], steps[1], bracket.losses[1],
                          bracket.slopes[1])
        top, bottom = max(steps), min(steps)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # too close to an end: move away, unless the last move did not help
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = objective(t, d)
        evaluations += 1
        gtd_new = float(g_new @ d)
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket.losses[low_i]:
            bracket.put(high_i, t, f_new, g_new, gtd_new)
            low_i, high_i = bracket.ends()
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (steps[high_i] - steps[low_i]) >= 0:
                bracket.put(high_i, steps[low_i], bracket.losses[low_i], bracket.grads[low_i], bracket.slopes[low_i])
            bracket.put(low_i, t, f_new, g_new, gtd_new)
    return bracket.losses[low_i], bracket.grads[low_i], bracket.steps[low_i], evaluations


__all__ = ["cubic_minimum", "strong_wolfe"]
