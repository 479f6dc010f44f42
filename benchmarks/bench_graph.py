"""The graph interpreter's costs: recording overhead per op, and running a recorded graph
eagerly versus running the same code eagerly (both with the same kernels).

``python -m benchmarks graph`` or ``python benchmarks/bench_graph.py``.
Rows: ``(name, {implementation: seconds per call})``; the MLP rows name their
evaluate/eager ratio (the target is <= 1.2x).
"""

from __future__ import annotations

import os
import sys
from typing import Any

if __package__ in (None, ""):  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.timing import interleaved, table  # noqa: E402

N_OPS = 200


def _time(fns: dict[str, Any]) -> dict[str, float]:
    """:func:`benchmarks.timing.interleaved` with 15 rounds after one warm-up call."""
    return interleaved(fns, rounds=15, warmup=1)


def _chain(x: Any) -> Any:
    """200 elementwise ops (50 rounds of add, mul, relu, sub)."""
    for _ in range(N_OPS // 4):
        x = x + 1.0
        x = x * 0.5
        x = x.relu()
        x = x - 0.25
    return x


def _mlp_module(sizes: tuple[int, ...]) -> Any:
    """``nn.Sequential`` of Linear/ReLU (inference: no grad), or a plain closure when nn is missing."""
    import tensorplay as tp

    tp.manual_seed(0)
    try:
        from tensorplay import nn
    except ImportError:
        params = [(tp.randn(o, i) * (1.0 / i ** 0.5), tp.zeros(o)) for i, o in zip(sizes[:-1], sizes[1:])]

        def mlp(x: Any) -> Any:
            for k, (w, b) in enumerate(params):
                x = x @ w.T + b
                x = x.relu() if k < len(params) - 1 else x
            return x
        return mlp
    layers: list[Any] = []
    for i, o in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(i, o), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    model.requires_grad_(False)
    return model


def run() -> list[tuple[str, dict[str, float]]]:
    """Rows of (benchmark, {implementation: seconds per call}); per-op rows are seconds per op."""
    import tensorplay as tp
    from tensorplay.graph import evaluate, trace

    rows: list[tuple[str, dict[str, float]]] = []
    x = tp.randn(8, 8)
    times = _time({
        "eager run": lambda: _chain(x),
        "record symbolic": lambda: trace(_chain, x),
        "record dynamic B": lambda: trace(_chain, x, dynamic={0: {0: "B"}}),
        "record execute": lambda: trace(_chain, x, execute=True),
    })
    rows.append((f"record a {N_OPS}-op graph, per op (8x8 f32)", {k: v / N_OPS for k, v in times.items()}))
    gm = trace(_chain, x)
    times = _time({
        "eager run": lambda: _chain(x),
        "evaluate(graph, eager)": lambda: evaluate(gm.graph, tp.eager, x),
        "GraphModule": lambda: gm(x),
    })
    rows.append((f"run a {N_OPS}-op graph, per op (8x8 f32)", {k: v / N_OPS for k, v in times.items()}))

    sizes = (784, 256, 256, 10)
    model = _mlp_module(sizes)
    for batch in (128, 1):
        inp = tp.randn(batch, sizes[0])
        gm_mlp = trace(model, inp)
        times = _time({
            "eager": lambda: model(inp),
            "evaluate(graph, eager)": lambda: evaluate(gm_mlp.graph, tp.eager, inp),
            "GraphModule": lambda: gm_mlp(inp),
        })
        t_eager, t_eval, t_module = times["eager"], times["evaluate(graph, eager)"], times["GraphModule"]
        rows.append((f"MLP 784-256-256-10 b{batch} fwd (eval/eager {t_eval / t_eager:.2f}x)", {
            "eager": t_eager, "evaluate(graph, eager)": t_eval, "GraphModule": t_module,
        }))
    return rows


def main() -> None:
    """Print the rows with ratios against the eager run."""
    rows = run()
    print(table(rows, "eager run") if rows else "")
    for name, times in rows:
        if "eager" in times:
            base = times["eager"]
            print(f"{name}: " + ", ".join(f"{k} {v / base:.2f}x" for k, v in times.items() if k != "eager"))


if __name__ == "__main__":
    main()
