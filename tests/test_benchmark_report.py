"""The benchmark table's arithmetic: medians per library, the ratio of the medians and the range of each
round's own ratio (``benchmarks.isolated``; nothing here is timed)."""

from __future__ import annotations

import pytest

from benchmarks.isolated import Measurements, format_table, geometric_mean_ratio, round_ratios


def _measurements(tp: list[float], torch: list[float]) -> Measurements:
    m = Measurements("kernels", "1")
    for a, b in zip(tp, torch):  # round by round, as measure_module adds them
        m.add("case", "tensorplay", a)
        m.add("case", "torch", b)
    return m


def test_round_ratios_pair_the_rounds() -> None:
    m = _measurements([2.0, 3.0, 9.0], [1.0, 3.0, 3.0])
    assert round_ratios(m.times["case"], "torch") == [2.0, 1.0, 3.0]


def test_round_ratios_need_one_time_per_round_each() -> None:
    m = _measurements([2.0, 3.0], [1.0, 3.0])
    m.add("case", "tensorplay", 5.0)  # a round whose other worker failed: no pairing
    assert round_ratios(m.times["case"], "torch") == []
    assert round_ratios(m.times["case"], "jax") == []


def test_table_shows_the_ratio_of_medians_and_the_rounds_range() -> None:
    # medians 3 ms and 2 ms: 1.50x; the rounds' own ratios 4.00, 0.50 and 0.75
    m = _measurements([4e-3, 3e-3, 1.5e-3], [1e-3, 6e-3, 2e-3])
    table = format_table(m, ["tensorplay", "torch"])
    row = table.splitlines()[-1]
    assert "3.000 ms" in row and "2.000 ms" in row
    assert row.rstrip().endswith("1.50x  0.50-4.00")
    assert "tp/torch (rounds)" in table.splitlines()[0]
    assert geometric_mean_ratio(m, "torch") == 1.5


def test_one_round_shows_no_range() -> None:
    row = format_table(_measurements([3e-6], [2e-6]), ["tensorplay", "torch"]).splitlines()[-1]
    assert row.rstrip().endswith("1.50x")


def test_one_thread_workers_are_pinned_to_one_cpu() -> None:
    """``--threads 1`` means one core for every library: the worker restricts its own affinity before
    importing any library (XLA ignores its thread flags); ``default`` leaves the affinity alone."""
    import os
    import subprocess
    import sys

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    code = ("import os; from benchmarks.worker import pin_cores; before = len(os.sched_getaffinity(0)); "
            "got = pin_cores({!r}); print(before, len(os.sched_getaffinity(0)), got is None)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    one = subprocess.run([sys.executable, "-c", code.format("1")], cwd=root, capture_output=True, text=True, check=True)
    before, after, none = one.stdout.split()
    assert (int(after), none) == (1, "False")
    default = subprocess.run([sys.executable, "-c", code.format("default")], cwd=root, capture_output=True, text=True,
                             check=True)
    before, after, none = default.stdout.split()
    assert (int(after), none) == (int(before), "True")
