"""Run every benchmark module and print one table of times and ratios.

``python -m benchmarks`` (all) or ``python -m benchmarks dispatch kernels`` (some).
Each module exposes ``run()`` returning rows of ``(name, {implementation: seconds})``;
ratios are against PyTorch where it was measured, else numpy.
"""

from __future__ import annotations

import importlib
import sys

from benchmarks.timing import environment, table

MODULES = ("dispatch", "kernels", "training", "graph", "func", "shapecheck")


def main(argv: list[str]) -> int:
    """Run the selected benchmark modules (all by default)."""
    selected = argv or list(MODULES)
    print(environment())
    for name in selected:
        try:
            module = importlib.import_module(f"benchmarks.bench_{name}")
        except ModuleNotFoundError as error:
            print(f"\n== {name}: not available ({error})")
            continue
        print(f"\n== {name}")
        rows = module.run()
        baseline = "torch" if any("torch" in times for _, times in rows) else "numpy"
        print(table(rows, baseline))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
