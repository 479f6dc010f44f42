"""Per-call overhead of ``@tp.shapecheck``: the same function plain, checked, and with checks switched off."""

from __future__ import annotations

from typing import TypeVar, TypeVarTuple

from benchmarks.timing import median_time, table

Lead = TypeVarTuple("Lead")
In = TypeVar("In")
Out = TypeVar("Out")


def run() -> list[tuple[str, dict[str, float]]]:
    """Rows of (benchmark, {variant: seconds per call})."""
    import tensorplay as tp
    from tensorplay import Tensor
    from tensorplay.dims import Batch, Feat, Hidden

    y2 = tp.randn(2, 5)
    y3 = tp.randn(7, 2, 5)

    def named(w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
        return y2  # type: ignore[return-value]  # a result made once: the rows time the checks

    def variadic(w: Tensor[Out, In], x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]:
        return y3  # type: ignore[return-value]  # (as above)

    w, x2, x3 = tp.randn(5, 3), tp.randn(2, 3), tp.randn(7, 2, 3)
    rows: list[tuple[str, dict[str, float]]] = []
    for name, fn, args in (("2 args + return, named dims", named, (w, x2)),
                           ("2 args + return, *Lead and TypeVars", variadic, (w, x3))):
        checked = tp.shapecheck(fn)
        plain_t = median_time(lambda: fn(*args))
        checked_t = median_time(lambda: checked(*args))
        with tp.shapecheck.disabled():
            off_t = median_time(lambda: checked(*args))
        rows.append((name, {"plain": plain_t, "shapecheck": checked_t, "switched off": off_t}))
    import tensorplay.nn as nn
    layer = nn.Linear(3, 5)
    forward = layer.forward
    checked_forward = tp.shapecheck(type(layer).forward)
    rows.append(("nn.Linear forward [2, 3] (for scale)", {
        "plain": median_time(lambda: forward(x2)),
        "shapecheck": median_time(lambda: checked_forward(layer, x2)),
    }))
    return rows


if __name__ == "__main__":
    print(table(run(), "plain"))
