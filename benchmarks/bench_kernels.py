"""Compute kernels through each library's public functional API: tensorplay eager, PyTorch eager and
JAX ``jit``, forward alone (no autograd recording) and forward + backward (autograd with a fixed
cotangent; JAX: the jitted ``vjp``).

Rows: ``layer_norm``, ``softmax``, ``log_softmax`` and ``gelu`` on (4096, 1024) float32; conv2d at
the CNN's two layers (1 -> 16 channels on 28x28, 16 -> 32 on 13x13, batch 64, 3x3, with bias; the
first layer's input needs no gradient, as in training) and at a ResNet-like size (64 -> 64 channels,
56x56, 3x3, padding 1, batch 8); max_pool 2x2 stride 2 on the CNN's first activation and 3x3
stride 2 padding 1 on a ResNet stem activation (8, 64, 112, 112); causal attention on
(8, 4, 128, 64); and a 1024 float32 matmul for scale.

Run with ``python -m benchmarks kernels`` (each library alone in its own process, see
:mod:`benchmarks.isolated`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks.cases import Case, block_until_ready, normal

GROUPING = "module"

Arrays = list[np.ndarray[Any, Any]]
OpFn = Callable[..., Any]


def _eager_builder(library: str, make: Callable[[], Arrays], grads: Sequence[bool], op: Callable[[Any], OpFn],
                   backward: bool) -> Callable[[], Callable[[], Any]]:
    """For ``tensorplay`` or ``torch`` (the same spelling): the forward under ``no_grad``, or the
    forward and ``backward`` with a fixed cotangent (the leaves' ``.grad`` reset each call)."""
    def build() -> Callable[[], Any]:
        import importlib

        lib = importlib.import_module(library)
        f = op(importlib.import_module(f"{library}.nn.functional"))
        args = [lib.tensor(a, requires_grad=backward and g) for a, g in zip(make(), grads)]
        if not backward:
            def fwd() -> Any:
                with lib.no_grad():
                    return f(*args)
            return fwd
        cot = lib.tensor(normal(99, *f(*args).shape))
        leaves = [a for a, g in zip(args, grads) if g]

        def fwd_bwd() -> Any:
            for a in leaves:
                a.grad = None
            f(*args).backward(cot)
        return fwd_bwd
    return build


def _jax_builder(make: Callable[[], Arrays], grads: Sequence[bool], op: Callable[[Any], OpFn],
                 backward: bool) -> Callable[[], Callable[[], Any]]:
    def build() -> Callable[[], Any]:
        import jax
        import jax.numpy as jnp

        f = op(jax)
        args = [jnp.asarray(a) for a in make()]
        if not backward:
            jitted = jax.jit(f)
            return lambda: block_until_ready(jitted(*args))
        cot = jnp.asarray(normal(99, *f(*args).shape))
        wanted = [i for i, g in enumerate(grads) if g]

        def vjp(*xs: Any) -> Any:
            def partial(*diff: Any) -> Any:
                full = list(xs)
                for i, d in zip(wanted, diff):
                    full[i] = d
                return f(*full)
            _, pullback = jax.vjp(partial, *(xs[i] for i in wanted))
            return pullback(cot)

        jitted_vjp = jax.jit(vjp)
        return lambda: block_until_ready(jitted_vjp(*args))
    return build


def _cases(name: str, make: Callable[[], Arrays], grads: Sequence[bool], tp_op: Callable[[Any], OpFn],
           torch_op: Callable[[Any], OpFn], jax_op: Callable[[Any], OpFn] | None) -> list[Case]:
    """The forward row and the forward + backward row of one operation."""
    out = []
    for backward in (False, True):
        builders = {"tensorplay": _eager_builder("tensorplay", make, grads, tp_op, backward),
                    "torch": _eager_builder("torch", make, grads, torch_op, backward)}
        if jax_op is not None:
            builders["jax"] = _jax_builder(make, grads, jax_op, backward)
        out.append(Case(f"{name} {'fwd+bwd' if backward else 'fwd'}", builders))
    return out


# ---- the operations, each spelled in the three libraries ---------------------------------------------

ROWS = (4096, 1024)


def _rows_input() -> Arrays:
    return [normal(1, *ROWS)]


def _ln_inputs() -> Arrays:
    return [normal(1, *ROWS), normal(2, ROWS[1]), normal(3, ROWS[1])]


def _jax_layer_norm(jax: Any) -> OpFn:
    def f(x: Any, w: Any, b: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * w + b
    return f


def _conv_inputs(n: int, c: int, o: int, hw: int) -> Callable[[], Arrays]:
    def make() -> Arrays:
        return [normal(4, n, c, hw, hw), normal(5, o, c, 3, 3, scale=(c * 9) ** -0.5), normal(6, o)]
    return make


def _conv2d(padding: int) -> Callable[[Any], OpFn]:
    """``F -> conv2d(x, w, b)`` at stride 1 and ``padding``, for a library's functional module ``F``."""
    def op(F: Any) -> OpFn:
        def f(x: Any, w: Any, b: Any) -> Any:
            return F.conv2d(x, w, b, 1, padding)
        return f
    return op


def _jax_conv(padding: int) -> Callable[[Any], OpFn]:
    def op(jax: Any) -> OpFn:
        def f(x: Any, w: Any, b: Any) -> Any:
            y = jax.lax.conv_general_dilated(x, w, (1, 1), [(padding, padding)] * 2,
                                             dimension_numbers=("NCHW", "OIHW", "NCHW"))
            return y + b[None, :, None, None]
        return f
    return op


def _jax_max_pool(k: int, s: int, p: int) -> Callable[[Any], OpFn]:
    def op(jax: Any) -> OpFn:
        def f(x: Any) -> Any:
            return jax.lax.reduce_window(x, -float("inf"), jax.lax.max, (1, 1, k, k), (1, 1, s, s),
                                         ((0, 0), (0, 0), (p, p), (p, p)))
        return f
    return op


def _attention_inputs() -> Arrays:
    return [normal(7 + i, 8, 4, 128, 64) for i in range(3)]


def _jax_causal_attention(jax: Any) -> OpFn:
    import jax.numpy as jnp

    def f(q: Any, k: Any, v: Any) -> Any:
        scores = q @ jnp.swapaxes(k, -1, -2) / 8.0
        causal = jnp.tril(jnp.ones((q.shape[-2], k.shape[-2]), bool))
        probs = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
        return probs @ v
    return f


def cases() -> list[Case]:
    """Forward and forward + backward rows for every kernel, then the matmul reference."""
    out: list[Case] = []
    out += _cases("layer_norm (4096, 1024)", _ln_inputs, (True, True, True),
                  lambda F: lambda x, w, b: F.layer_norm(x, (1024,), w, b, 1e-5),
                  lambda F: lambda x, w, b: F.layer_norm(x, (1024,), w, b, 1e-5), _jax_layer_norm)
    out += _cases("softmax (4096, 1024) last axis", _rows_input, (True,),
                  lambda F: lambda x: F.softmax(x, dim=-1), lambda F: lambda x: F.softmax(x, dim=-1),
                  lambda jax: lambda x: jax.nn.softmax(x, axis=-1))
    out += _cases("log_softmax (4096, 1024) last axis", _rows_input, (True,),
                  lambda F: lambda x: F.log_softmax(x, dim=-1), lambda F: lambda x: F.log_softmax(x, dim=-1),
                  lambda jax: lambda x: jax.nn.log_softmax(x, axis=-1))
    out += _cases("gelu erf (4096, 1024)", _rows_input, (True,),
                  lambda F: F.gelu, lambda F: F.gelu, lambda jax: lambda x: jax.nn.gelu(x, approximate=False))
    for label, n, c, o, hw, pad, grads in (
            ("conv2d CNN layer 1: b64 1->16 28x28 3x3", 64, 1, 16, 28, 0, (False, True, True)),
            ("conv2d CNN layer 2: b64 16->32 13x13 3x3", 64, 16, 32, 13, 0, (True, True, True)),
            ("conv2d ResNet: b8 64->64 56x56 3x3 pad 1", 8, 64, 64, 56, 1, (True, True, True))):
        out += _cases(label, _conv_inputs(n, c, o, hw), grads,
                      _conv2d(pad), _conv2d(pad), _jax_conv(pad))
    out += _cases("max_pool 2x2 s2 on (64, 16, 26, 26)", lambda: [normal(8, 64, 16, 26, 26)], (True,),
                  lambda F: lambda x: F.max_pool2d(x, 2, 2), lambda F: lambda x: F.max_pool2d(x, 2, 2),
                  _jax_max_pool(2, 2, 0))
    out += _cases("max_pool 3x3 s2 p1 on (8, 64, 112, 112)", lambda: [normal(9, 8, 64, 112, 112)], (True,),
                  lambda F: lambda x: F.max_pool2d(x, 3, 2, 1), lambda F: lambda x: F.max_pool2d(x, 3, 2, 1),
                  _jax_max_pool(3, 2, 1))
    out += _cases("attention (8, 4, 128, 64) causal", _attention_inputs, (True, True, True),
                  lambda F: lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                  lambda F: lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                  _jax_causal_attention)
    out += _cases("matmul 1024x1024 @ 1024x1024", lambda: [normal(10, 1024, 1024), normal(11, 1024, 1024)],
                  (True, True), lambda F: lambda a, b: a @ b, lambda F: lambda a, b: a @ b,
                  lambda jax: lambda a, b: a @ b)[:1]
    return out
