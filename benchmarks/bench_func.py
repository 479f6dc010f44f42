"""Function transforms: ``tensorplay.func`` vs ``torch.func`` on the same models.

Rows: per-sample gradients of an MLP loss (``vmap(grad(loss))``, batch 128), ``grad`` of the MLP
loss over the whole batch, ``jacrev`` and ``jacfwd`` of a 64 -> 64 MLP, and ``hessian`` of a scalar
function of 32 inputs. Run as ``python -m benchmarks func`` (each library alone in its own process,
see :mod:`benchmarks.isolated`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.cases import Case, rng

GROUPING = "module"

BATCH = 128
MLP_SIZES = (64, 128, 128, 10)
ROWS = (f"per-sample grads MLP {'-'.join(map(str, MLP_SIZES))} b{BATCH}", f"grad MLP loss b{BATCH}",
        "jacrev MLP 64-64-64", "jacfwd MLP 64-64-64", "hessian, 32 inputs")


def _mlp_params(gen: np.random.Generator, sizes: tuple[int, ...]) -> dict[str, np.ndarray[Any, Any]]:
    params = {}
    for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"w{i}"] = (gen.standard_normal((n_out, n_in)) / np.sqrt(n_in)).astype(np.float32)
        params[f"b{i}"] = (0.1 * gen.standard_normal(n_out)).astype(np.float32)
    return params


def _data() -> dict[str, Any]:
    gen = rng(0)
    return {
        "p": _mlp_params(gen, MLP_SIZES),
        "x": gen.standard_normal((BATCH, MLP_SIZES[0])).astype(np.float32),
        "y": gen.integers(0, MLP_SIZES[-1], BATCH),
        "q": _mlp_params(gen, (64, 64, 64)),
        "v": gen.standard_normal(64).astype(np.float32),
        "a": (gen.standard_normal((32, 32)) / np.sqrt(32)).astype(np.float32),
        "z": gen.standard_normal(32).astype(np.float32),
    }


def _rows(lib: Any, F: Any, T: Any, linear: Callable[..., Any], tanh: Callable[[Any], Any]) -> list[Callable[[], Any]]:
    """The five timed calls for one library: ``lib`` (``tensorplay`` or ``torch``), its transforms
    ``T`` and functional ``F``."""
    d = _data()
    p = {k: lib.tensor(v) for k, v in d["p"].items()}
    q = {k: lib.tensor(v) for k, v in d["q"].items()}
    x, y, v, a, z = (lib.tensor(d[k]) for k in ("x", "y", "v", "a", "z"))
    layers = len(MLP_SIZES) - 1

    def loss(params: Any, xb: Any, yb: Any) -> Any:
        h = xb
        for i in range(layers):
            h = linear(h, params[f"w{i}"], params[f"b{i}"])
            if i < layers - 1:
                h = h.relu()
        return F.cross_entropy(h, yb)

    def sample(params: Any, xs: Any, ys: Any) -> Any:
        return loss(params, xs[None], ys[None])

    def net(xv: Any) -> Any:
        return linear(tanh(linear(xv, q["w0"], q["b0"])), q["w1"], q["b1"])

    def scalar(xv: Any) -> Any:
        return (tanh(a @ xv) * xv).sum() + (xv * xv).sum() * 0.5

    psg = T.vmap(T.grad(sample), in_dims=(None, 0, 0))
    g, jr, jf, hs = T.grad(loss), T.jacrev(net), T.jacfwd(net), T.hessian(scalar)
    return [lambda: psg(p, x, y), lambda: g(p, x, y), lambda: jr(v), lambda: jf(v), lambda: hs(z)]


def _tp_row(i: int) -> Callable[[], Callable[[], Any]]:
    def build() -> Callable[[], Any]:
        import tensorplay as tp
        import tensorplay.func as T
        import tensorplay.nn.functional as F

        return _rows(tp, F, T, F.linear, lambda t: t.tanh())[i]
    return build


def _torch_row(i: int) -> Callable[[], Callable[[], Any]]:
    def build() -> Callable[[], Any]:
        import torch
        import torch.func as T

        F = torch.nn.functional
        return _rows(torch, F, T, F.linear, torch.tanh)[i]
    return build


def cases() -> list[Case]:
    """The five transform rows, for tensorplay and PyTorch."""
    return [Case(name, {"tensorplay": _tp_row(i), "torch": _torch_row(i)}) for i, name in enumerate(ROWS)]
