"""Side-by-side benchmarks; run all with ``python -m benchmarks``."""
