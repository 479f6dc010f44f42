"""nn.init.trunc_normal_ samples N(mean, std^2) truncated to [a, b] by the inverse CDF, as torch does,
for intervals near the mean and far in either tail: the sample moments match the truncated normal's
closed-form mean and variance (math.erf/erfc), and, where torch's own float64 sampler is accurate, the
samples match torch's in distribution (two-sample Kolmogorov-Smirnov). The inverse normal CDF is checked
against torch.special.ndtri."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import init

N = 100_000


def phi(x: float) -> float:
    return 0.0 if math.isinf(x) else math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def closed_form(mean: float, std: float, a: float, b: float) -> tuple[float, float]:
    """The truncated normal's mean and variance (mirrored so the tail mass is taken from erfc)."""
    alpha, beta = (a - mean) / std, (b - mean) / std
    if alpha + beta > 0:
        m, v = closed_form(-mean, std, -b, -a)
        return -m, v
    mass = 0.5 * (math.erfc(-beta / math.sqrt(2)) - math.erfc(-alpha / math.sqrt(2)))
    ratio = (phi(alpha) - phi(beta)) / mass
    x_phi = (0.0 if math.isinf(alpha) else alpha * phi(alpha)) - (0.0 if math.isinf(beta) else beta * phi(beta))
    return mean + std * ratio, std * std * (1.0 + x_phi / mass - ratio * ratio)


def ours(mean: float, std: float, a: float, b: float, dtype: Any = np.float64, n: int = N) -> np.ndarray[Any, Any]:
    t = nn.Parameter(np.zeros(n, dtype))
    init.trunc_normal_(t, mean, std, a, b)
    return np.asarray(t.detach().numpy(), np.float64)


CASES = [
    (0.0, 1.0, -2.0, 2.0), (0.0, 0.02, -0.04, 0.04), (0.0, 1.0, -0.1, 0.1), (1.0, 2.0, -1.0, 1.0),
    (0.0, 1.0, 5.0, 6.0), (0.0, 1.0, -6.0, -5.0), (0.0, 1.0, 10.0, 10.01), (0.0, 1.0, -30.0, -29.0),
    (2.0, 0.5, 14.0, math.inf), (3.0, 0.5, -100.0, 3.2), (0.0, 1.0, -math.inf, math.inf), (0.0, 1.0, 0.3, 25.0),
    (-5.0, 3.0, 60.0, 61.0),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mean,std,a,b", CASES)
def test_moments_match_the_truncated_normal(mean: float, std: float, a: float, b: float, dtype: Any) -> None:
    tp.manual_seed(0)
    x = ours(mean, std, a, b, dtype)
    m, v = closed_form(mean, std, a, b)
    assert x.min() >= np.asarray(a, dtype) and x.max() <= np.asarray(b, dtype)
    resolution = float(np.finfo(dtype).eps) * max(abs(a) if math.isfinite(a) else 0.0, abs(b) if math.isfinite(b)
                                                 else 0.0, abs(mean), std)
    assert abs(x.mean() - m) < 5 * math.sqrt(v / N) + 4 * resolution, (x.mean(), m)
    if v > (100 * resolution) ** 2:  # float32 cannot resolve [10, 10.01] finely enough for its variance
        assert x.var() / v == pytest.approx(1.0, abs=0.03)
    # the old sampler clipped what 100 redraws left outside, so a far interval was all bounds
    assert np.mean((x == np.asarray(a, dtype)) | (x == np.asarray(b, dtype))) < 0.01


@pytest.mark.parametrize("mean,std,a,b", [(0.0, 1.0, -2.0, 2.0), (1.0, 2.0, -1.0, 1.0), (0.0, 1.0, 3.0, 4.0),
                                          (0.0, 1.0, -0.1, 0.1), (0.0, 0.02, -1.0, 0.01)])
def test_samples_match_pytorch_in_distribution(mean: float, std: float, a: float, b: float) -> None:
    tp.manual_seed(1)
    torch.manual_seed(1)
    x = np.sort(ours(mean, std, a, b))
    y = np.sort(torch.nn.init.trunc_normal_(torch.empty(N, dtype=torch.float64), mean, std, a, b).numpy())
    grid = np.concatenate([x, y])
    ks = np.max(np.abs(np.searchsorted(x, grid, "right") - np.searchsorted(y, grid, "right"))) / N
    assert ks < 1.95 * math.sqrt(2 / N) * 1.5  # well inside the 0.1% two-sample critical value


def test_a_far_interval_is_not_piled_on_its_bounds() -> None:
    tp.manual_seed(2)
    x = ours(0.0, 1.0, 8.0, 9.0, np.float32, 20_000)
    assert np.mean(x == np.float32(8.0)) < 0.01 and np.mean(x == np.float32(9.0)) < 0.01
    # beyond 8 the density falls as exp(-8 (x - 8)): the median is near 8 + ln 2 / 8
    assert np.median(x) == pytest.approx(8.0 + math.log(2) / 8.0, abs=0.01)


def test_inverse_normal_cdf_matches_torch_ndtri() -> None:
    p = np.concatenate([np.geomspace(1e-300, 0.02, 3000), np.linspace(0.02, 0.98, 3000),
                        1.0 - np.geomspace(1e-12, 0.02, 1000)])
    got = init._normal_icdf_log(np.log(p))
    want = torch.special.ndtri(torch.tensor(p, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-9, atol=1e-12)


def test_bad_arguments_raise() -> None:
    with pytest.raises(RuntimeError):
        torch.nn.init.trunc_normal_(torch.empty(3), a=3.0, b=1.0)
    with pytest.raises(ValueError, match="a <= b"):
        init.trunc_normal_(nn.Parameter(np.zeros(3, np.float32)), a=3.0, b=1.0)
    with pytest.raises(ZeroDivisionError):
        torch.nn.init.trunc_normal_(torch.empty(3), std=0.0)
    with pytest.raises(ValueError, match="std"):
        init.trunc_normal_(nn.Parameter(np.zeros(3, np.float32)), std=0.0)


def test_equal_bounds_and_negative_std_as_pytorch() -> None:
    np.testing.assert_array_equal(ours(0.0, 1.0, 1.0, 1.0, n=10),
                                  torch.nn.init.trunc_normal_(torch.empty(10, dtype=torch.float64), 0.0, 1.0, 1.0,
                                                              1.0).numpy())
    x = ours(0.0, -1.0, -2.0, 2.0)
    torch.manual_seed(3)
    y = torch.nn.init.trunc_normal_(torch.empty(N, dtype=torch.float64), 0.0, -1.0, -2.0, 2.0).numpy()
    assert x.std() == pytest.approx(y.std(), rel=0.02) and abs(x.mean() - y.mean()) < 0.02
