"""Fused primitives that ONNX writes as compositions, rewritten into other primitives before lowering.

These are decomposition builders (``builder(graph, node) -> value``, as in :mod:`tensorplay.export.decomp`),
so the composed graph is an ordinary tensorplay graph: it runs under any interpreter, and the tests compare
it with the fused primitive before it ever becomes ONNX.

* ``dot_product_attention``: ``softmax(q @ k^T * scale) @ v``; with a mask, the library's masked
  decomposition (a fully masked row gives zeros).
* ``smooth_max_pool_nd``: ``log(sum(exp(beta x))) / beta`` per window, the windows gathered by one strided
  ``slice`` per kernel offset (exact, and correct for infinities), the sum shifted by each window's max.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from tensorplay.export.decomp import Builder, default_decompositions
from tensorplay.interpreters.graph.ir import Graph, Node, Value, Var


def _emitter(graph: Graph, node: Node) -> Callable[..., Var]:
    def emit(target: str, *inputs: Any, **params: Any) -> Var:
        return graph.emit(target, *inputs, location=node.location, **params)
    return emit


def attention(graph: Graph, node: Node) -> Value:
    """``dot_product_attention`` as ``matmul``, ``softmax`` and ``matmul`` (masked: the default
    decomposition)."""
    q, k, v, mask = node.inputs
    if mask is not None:
        return default_decompositions()["dot_product_attention"](graph, node)
    assert isinstance(k, Var)
    e = _emitter(graph, node)
    perm = (*range(k.ndim - 2), k.ndim - 1, k.ndim - 2)
    scores = e("mul", e("matmul", q, e("permute", k, perm=perm)), node.params["scale"])
    return e("matmul", e("softmax", scores, axis=-1), v)


def smooth_max_pool(graph: Graph, node: Node) -> Value:
    """``smooth_max_pool_nd`` from ``pad``, strided ``slice``s, ``concat`` and a shifted log-sum-exp (see the
    module docstring); padded cells count as zeros, as in the primitive."""
    (x,) = node.inputs
    assert isinstance(x, Var)
    e = _emitter(graph, node)
    kernel, stride, padding, beta = (node.params[k] for k in ("kernel_size", "stride", "padding", "beta"))
    n, c = x.shape[:2]
    out = tuple(node.aval.shape[2:])
    if any(padding):
        x = e("pad", x, pads=((0, 0), (0, 0), *((p, p) for p in padding)), value=0.0)
    z = e("mul", x, beta)
    windows = []
    for offset in itertools.product(*(range(k) for k in kernel)):
        stops = tuple(o + (size - 1) * s + 1 for o, size, s in zip(offset, out, stride))
        piece = e("slice", z, starts=(0, 0, *offset), stops=(n, c, *stops), steps=(1, 1, *stride))
        windows.append(e("reshape", piece, shape=(n, c, 1, *out)))
    stacked = windows[0] if len(windows) == 1 else e("concat", *windows, axis=2)
    top = e("reduce_max", stacked, axes=(2,), keepdims=True)
    total = e("reduce_sum", e("exp", e("sub", stacked, top)), axes=(2,), keepdims=True)
    lse = e("add", top, e("log", total))
    finite = e("eq", e("sub", top, top), 0.0)  # inf - inf and NaN are not 0
    result = e("div", e("where", finite, lse, top), beta)
    return e("reshape", result, shape=tuple(node.aval.shape))


COMPOSITIONS: dict[str, Builder] = {"dot_product_attention": attention, "smooth_max_pool_nd": smooth_max_pool}
"""Primitive name -> the builder that rewrites it before lowering."""


__all__ = ["COMPOSITIONS", "attention", "smooth_max_pool"]
