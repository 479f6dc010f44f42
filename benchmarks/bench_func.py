"""Function transforms: ``tensorplay.func`` vs ``torch.func`` on the same models.

Rows: per-sample gradients (``vmap(grad(loss, argnums=(0, 1)))``) of tanh MLPs with a cross-entropy
loss (32-64-10 at batch 128, 784-256-10 at batch 64), ``jacrev`` and ``jacfwd`` of a 64 -> 64 tanh layer,
``hessian`` of a scalar function of 32 inputs, ``jvp`` of the 32-64-10 MLP, and the first call (a new
function, traced and transformed) of two of them. ``TP_FUNC_CACHE=0`` in the environment measures
tensorplay without its transform cache (the workers inherit it). Run as ``python -m benchmarks func`` (each library alone in its own process,
see :mod:`benchmarks.isolated`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.cases import Case, rng

GROUPING = "module"

MLPS = ((32, 64, 10, 128), (784, 256, 10, 64))
ROWS = tuple(f"per-sample grads MLP {i}-{h}-{o} b{b}" for i, h, o, b in MLPS) + (
    "jacrev 64->64 tanh layer", "jacfwd 64->64 tanh layer", "hessian, 32 inputs", "jvp MLP 32-64-10 b128",
    "first call: per-sample grads MLP 32-64-10 b128", "first call: hessian, 32 inputs")
"""The rows. A ``first call`` row transforms a new function at every call (tensorplay traces and transforms
it: the cost of a cache miss); the other rows call one transformed function again and again (tensorplay's
cached path)."""


def _mlp(gen: np.random.Generator, n_in: int, hidden: int, n_out: int) -> list[np.ndarray[Any, Any]]:
    return [(gen.standard_normal((hidden, n_in)) / np.sqrt(n_in)).astype(np.float32),
            (0.1 * gen.standard_normal(hidden)).astype(np.float32),
            (gen.standard_normal((n_out, hidden)) / np.sqrt(hidden)).astype(np.float32),
            (0.1 * gen.standard_normal(n_out)).astype(np.float32)]


def _data() -> dict[str, Any]:
    gen = rng(0)
    out: dict[str, Any] = {}
    for k, (i, h, o, b) in enumerate(MLPS):
        out[f"mlp{k}"] = _mlp(gen, i, h, o)
        out[f"x{k}"] = gen.standard_normal((b, i)).astype(np.float32)
        out[f"y{k}"] = gen.integers(0, o, b)
    out["t0"] = gen.standard_normal((MLPS[0][3], MLPS[0][0])).astype(np.float32)
    out["layer"] = _mlp(gen, 64, 64, 1)[:2]
    out["v"] = gen.standard_normal(64).astype(np.float32)
    out["a"] = (gen.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32)
    out["z"] = gen.standard_normal(32).astype(np.float32)
    return out


def _rows(lib: Any, F: Any, T: Any, tanh: Callable[[Any], Any]) -> list[Callable[[], Any]]:
    """The timed calls for one library: ``lib`` (``tensorplay`` or ``torch``), its transforms ``T`` and
    functional ``F`` (tanh MLPs with a cross-entropy loss)."""
    d = _data()
    mlps = [[lib.tensor(a) for a in d[f"mlp{k}"]] for k in range(len(MLPS))]
    xs = [lib.tensor(d[f"x{k}"]) for k in range(len(MLPS))]
    ys = [lib.tensor(d[f"y{k}"]) for k in range(len(MLPS))]
    t0 = lib.tensor(d["t0"])
    lw, lb = (lib.tensor(a) for a in d["layer"])
    v, a, z = (lib.tensor(d[k]) for k in ("v", "a", "z"))

    def forward(l1: Any, l2: Any, x: Any) -> Any:
        return F.linear(tanh(F.linear(x, l1[0], l1[1])), l2[0], l2[1])

    def make_loss() -> Callable[..., Any]:
        def loss(l1: Any, l2: Any, x: Any, y: Any) -> Any:
            return F.cross_entropy(forward(l1, l2, x[None]), y[None])
        return loss

    def make_scalar() -> Callable[[Any], Any]:
        def scalar(xv: Any) -> Any:
            return (tanh(a @ xv) * xv).sum() + (xv * xv).sum() * 0.5
        return scalar

    def layer(xv: Any) -> Any:
        return tanh(F.linear(xv, lw, lb))

    def per_sample(loss: Callable[..., Any]) -> Callable[..., Any]:
        transformed: Callable[..., Any] = T.vmap(T.grad(loss, argnums=(0, 1)), in_dims=(None, None, 0, 0))
        return transformed

    psgs = [per_sample(make_loss()) for _ in MLPS]
    jr, jf, hs = T.jacrev(layer), T.jacfwd(layer), T.hessian(make_scalar())
    p0 = mlps[0]

    def mlp0(x: Any) -> Any:
        return forward((p0[0], p0[1]), (p0[2], p0[3]), x)

    rows: list[Callable[[], Any]] = [
        (lambda k=k: psgs[k]((mlps[k][0], mlps[k][1]), (mlps[k][2], mlps[k][3]), xs[k], ys[k]))  # type: ignore[misc]
        for k in range(len(MLPS))]
    rows += [lambda: jr(v), lambda: jf(v), lambda: hs(z), lambda: T.jvp(mlp0, (xs[0],), (t0,)),
             lambda: per_sample(make_loss())((p0[0], p0[1]), (p0[2], p0[3]), xs[0], ys[0]),
             lambda: T.hessian(make_scalar())(z)]
    return rows


def _tp_row(i: int) -> Callable[[], Callable[[], Any]]:
    def build() -> Callable[[], Any]:
        import tensorplay as tp
        import tensorplay.func as T
        import tensorplay.nn.functional as F

        return _rows(tp, F, T, lambda t: t.tanh())[i]
    return build


def _torch_row(i: int) -> Callable[[], Callable[[], Any]]:
    def build() -> Callable[[], Any]:
        import torch
        import torch.func as T

        F = torch.nn.functional
        return _rows(torch, F, T, torch.tanh)[i]
    return build


def cases() -> list[Case]:
    """The transform rows, for tensorplay and PyTorch."""
    return [Case(name, {"tensorplay": _tp_row(i), "torch": _torch_row(i)}) for i, name in enumerate(ROWS)]
