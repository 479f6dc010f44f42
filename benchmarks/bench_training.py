"""One training step (zero grads, forward, loss, backward, optimizer step): tensorplay eager,
PyTorch eager and JAX ``jit`` on the same architectures and the same initial weights.

(a) MLP 784-256-256-10 (ReLU), batch 128, cross-entropy, SGD with momentum 0.9;
(b) CNN conv 16 3x3, relu, maxpool 2, conv 32 3x3, relu, maxpool 2, linear 10 on 1x28x28, batch 64,
    cross-entropy, SGD with momentum 0.9;
(c) pre-norm transformer block (d_model 64, 4 heads, seq 32, batch 16: layer_norm + self-attention
    + GELU MLP, residuals), MSE loss, Adam.

Each library runs in its own fresh process (``python -m benchmarks training``; see
:mod:`benchmarks.isolated`). Weights come from a seeded numpy generator with PyTorch's default
scales, so every process starts from the same parameters. JAX's step is the whole update under
``jax.jit`` with the parameters and optimizer state donated, which is how a JAX user writes it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.cases import Case, block_until_ready, normal, rng

GROUPING = "case"

Arrays = dict[str, np.ndarray[Any, Any]]


# ---- shared data -------------------------------------------------------------------------------------

def _init(shapes: dict[str, tuple[int, ...]], seed: int) -> Arrays:
    """Initial parameters by name, PyTorch's default scales: weights and biases uniform in
    ``+-1/sqrt(fan_in)``; layer-norm weights 1 and biases 0 (names starting with ``ln``)."""
    gen = rng(seed)
    out: Arrays = {}
    fan_in = 1
    for name, shape in shapes.items():
        if name.startswith("ln"):
            out[name] = (np.ones if name.endswith("weight") else np.zeros)(shape, np.float32)
            continue
        if len(shape) >= 2:
            fan_in = math.prod(shape[1:])
        bound = 1.0 / math.sqrt(fan_in)
        out[name] = gen.uniform(-bound, bound, shape).astype(np.float32)
    return out


MLP_SHAPES = {"0.weight": (256, 784), "0.bias": (256,), "2.weight": (256, 256), "2.bias": (256,),
              "4.weight": (10, 256), "4.bias": (10,)}
CNN_SHAPES = {"0.weight": (16, 1, 3, 3), "0.bias": (16,), "3.weight": (32, 16, 3, 3), "3.bias": (32,),
              "7.weight": (10, 32 * 5 * 5), "7.bias": (10,)}
D, HEADS, SEQ, BATCH = 64, 4, 32, 16
BLOCK_SHAPES = {"ln1.weight": (D,), "ln1.bias": (D,), "attn.in_proj_weight": (3 * D, D),
                "attn.in_proj_bias": (3 * D,), "attn.out_proj.weight": (D, D), "attn.out_proj.bias": (D,),
                "ln2.weight": (D,), "ln2.bias": (D,), "fc1.weight": (4 * D, D), "fc1.bias": (4 * D,),
                "fc2.weight": (D, 4 * D), "fc2.bias": (D,)}


def _mlp_data() -> tuple[Arrays, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    return _init(MLP_SHAPES, 10), normal(11, 128, 784), rng(12).integers(0, 10, 128)


def _cnn_data() -> tuple[Arrays, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    return _init(CNN_SHAPES, 20), normal(21, 64, 1, 28, 28), rng(22).integers(0, 10, 64)


def _block_data() -> tuple[Arrays, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    return _init(BLOCK_SHAPES, 30), normal(31, BATCH, SEQ, D), normal(32, BATCH, SEQ, D)


def _step(model: Any, opt: Any, x: Any, y: Any, loss_fn: Callable[[Any, Any], Any]) -> Callable[[], Any]:
    """One training step on ``(x, y)`` for a PyTorch-style model and optimizer. The returned step also
    carries ``step.on(xb, yb)``, the same step on a batch given as arguments, and ``step.batch``, ``(x, y)``
    (for compiling with a dynamic batch dim)."""
    def on(xb: Any, yb: Any) -> Any:
        opt.zero_grad()
        out = loss_fn(model(xb), yb)
        out.backward()
        opt.step()
        return out

    def step() -> Any:
        return on(x, y)

    step.on = on  # type: ignore[attr-defined]
    step.batch = (x, y)  # type: ignore[attr-defined]
    return step


# ---- tensorplay --------------------------------------------------------------------------------------

def _block_classes(tp: Any, torch: Any) -> tuple[Any, Any]:
    """The pre-norm block as a tensorplay module class and (when ``torch`` is given) a PyTorch one."""
    from tensorplay import nn

    class Block(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x), need_weights=False)[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    return Block, (None if torch is None else _torch_block_class(torch))


def _tp_step(model: Any, params: Arrays, make_opt: Callable[[Any], Any], x: Any, y: Any,
             loss: str) -> Callable[[], Any]:
    import tensorplay as tp
    import tensorplay.nn.functional as F

    model.load_state_dict(params)
    return _step(model, make_opt(model.parameters()), tp.tensor(x), tp.tensor(y),
                 F.cross_entropy if loss == "ce" else F.mse_loss)


def tp_mlp() -> Callable[[], Any]:
    from tensorplay import nn, optim

    params, x, y = _mlp_data()
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return _tp_step(model, params, lambda p: optim.SGD(p, lr=0.01, momentum=0.9), x, y, "ce")


def tp_cnn() -> Callable[[], Any]:
    from tensorplay import nn, optim

    params, x, y = _cnn_data()
    model = nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(32 * 5 * 5, 10))
    return _tp_step(model, params, lambda p: optim.SGD(p, lr=0.01, momentum=0.9), x, y, "ce")


def tp_block() -> Callable[[], Any]:
    import tensorplay as tp
    from tensorplay import optim

    params, x, y = _block_data()
    block, _ = _block_classes(tp, None)
    return _tp_step(block(D, HEADS), params, lambda p: optim.Adam(p, lr=1e-3), x, y, "mse")


# ---- PyTorch -----------------------------------------------------------------------------------------

def _torch_block_class(torch: Any) -> Any:
    tnn = torch.nn

    class TorchBlock(tnn.Module):  # type: ignore[misc,name-defined]
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.ln1 = tnn.LayerNorm(d)
            self.attn = tnn.MultiheadAttention(d, heads, batch_first=True)
            self.ln2 = tnn.LayerNorm(d)
            self.fc1 = tnn.Linear(d, 4 * d)
            self.act = tnn.GELU()
            self.fc2 = tnn.Linear(4 * d, d)

        def forward(self, x: Any) -> Any:
            h = self.ln1(x)
            x = x + self.attn(h, h, h, need_weights=False)[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))

    return TorchBlock


def _torch_step(model: Any, params: Arrays, make_opt: Callable[[Any], Any], x: Any, y: Any,
                loss: str) -> Callable[[], Any]:
    import torch

    model.load_state_dict({k: torch.from_numpy(v) for k, v in params.items()})
    F = torch.nn.functional
    return _step(model, make_opt(model.parameters()), torch.from_numpy(x), torch.from_numpy(y),
                 F.cross_entropy if loss == "ce" else F.mse_loss)


def torch_mlp() -> Callable[[], Any]:
    import torch

    tnn = torch.nn
    params, x, y = _mlp_data()
    model = tnn.Sequential(tnn.Linear(784, 256), tnn.ReLU(), tnn.Linear(256, 256), tnn.ReLU(), tnn.Linear(256, 10))
    return _torch_step(model, params, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), x, y, "ce")


def torch_cnn() -> Callable[[], Any]:
    import torch

    tnn = torch.nn
    params, x, y = _cnn_data()
    model = tnn.Sequential(tnn.Conv2d(1, 16, 3), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Conv2d(16, 32, 3), tnn.ReLU(),
                           tnn.MaxPool2d(2), tnn.Flatten(), tnn.Linear(32 * 5 * 5, 10))
    return _torch_step(model, params, lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9), x, y, "ce")


def torch_block() -> Callable[[], Any]:
    import torch

    params, x, y = _block_data()
    return _torch_step(_torch_block_class(torch)(D, HEADS), params, lambda p: torch.optim.Adam(p, lr=1e-3), x, y,
                       "mse")


# ---- JAX ---------------------------------------------------------------------------------------------

def _jax_linear(p: Any, name: str, x: Any) -> Any:
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def _jax_cross_entropy(logits: Any, labels: Any) -> Any:
    import jax
    import jax.numpy as jnp

    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def _jax_sgd(lr: float, momentum: float) -> tuple[Callable[[Any], Any], Callable[[Any, Any, Any], Any]]:
    """PyTorch's SGD with momentum: ``buf = momentum * buf + g`` (``buf = g`` on the first step)."""
    import jax
    import jax.numpy as jnp

    def init(params: Any) -> Any:
        return {"buf": jax.tree.map(jnp.zeros_like, params), "started": jnp.zeros((), jnp.bool_)}

    def update(params: Any, grads: Any, state: Any) -> Any:
        buf = jax.tree.map(lambda b, g: jnp.where(state["started"], momentum * b + g, g), state["buf"], grads)
        new = jax.tree.map(lambda p, b: p - lr * b, params, buf)
        return new, {"buf": buf, "started": jnp.ones((), jnp.bool_)}

    return init, update


def _jax_adam(lr: float, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
              ) -> tuple[Callable[[Any], Any], Callable[[Any, Any, Any], Any]]:
    """PyTorch's Adam (bias-corrected moments, no weight decay)."""
    import jax
    import jax.numpy as jnp

    def init(params: Any) -> Any:
        zeros = jax.tree.map(jnp.zeros_like, params)
        return {"m": zeros, "v": jax.tree.map(jnp.zeros_like, params), "t": jnp.zeros((), jnp.float32)}

    def update(params: Any, grads: Any, state: Any) -> Any:
        t = state["t"] + 1
        m = jax.tree.map(lambda m_, g: b1 * m_ + (1 - b1) * g, state["m"], grads)
        v = jax.tree.map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, state["v"], grads)
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        new = jax.tree.map(lambda p, m_, v_: p - lr * (m_ / c1) / (jnp.sqrt(v_ / c2) + eps), params, m, v)
        return new, {"m": m, "v": v, "t": t}

    return init, update


def _jax_step(loss: Callable[[Any, Any, Any], Any], params: Arrays, opt: Any, x: Any, y: Any) -> Callable[[], Any]:
    import jax
    import jax.numpy as jnp

    init, update = opt

    def step(p: Any, s: Any, xb: Any, yb: Any) -> Any:
        value, grads = jax.value_and_grad(loss)(p, xb, yb)
        p, s = update(p, grads, s)
        return p, s, value

    jitted = jax.jit(step, donate_argnums=(0, 1))
    state = {"p": {k: jnp.asarray(v) for k, v in params.items()}, "s": None}
    state["s"] = init(state["p"])
    xj, yj = jnp.asarray(x), jnp.asarray(y)

    def run() -> Any:
        state["p"], state["s"], value = jitted(state["p"], state["s"], xj, yj)
        return block_until_ready(value)

    return run


def jax_mlp() -> Callable[[], Any]:
    import jax

    def loss(p: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(_jax_linear(p, "0", x))
        h = jax.nn.relu(_jax_linear(p, "2", h))
        return _jax_cross_entropy(_jax_linear(p, "4", h), y)

    params, x, y = _mlp_data()
    return _jax_step(loss, params, _jax_sgd(0.01, 0.9), x, y)


def jax_cnn() -> Callable[[], Any]:
    import jax
    from jax import lax

    def conv(p: Any, name: str, x: Any) -> Any:
        y = lax.conv_general_dilated(x, p[name + ".weight"], (1, 1), "VALID",
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return y + p[name + ".bias"][None, :, None, None]

    def pool(x: Any) -> Any:
        return lax.reduce_window(x, -float("inf"), lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    def loss(p: Any, x: Any, y: Any) -> Any:
        h = pool(jax.nn.relu(conv(p, "0", x)))
        h = pool(jax.nn.relu(conv(p, "3", h)))
        return _jax_cross_entropy(_jax_linear(p, "7", h.reshape(h.shape[0], -1)), y)

    params, x, y = _cnn_data()
    return _jax_step(loss, params, _jax_sgd(0.01, 0.9), x, y)


def jax_block() -> Callable[[], Any]:
    import jax
    import jax.numpy as jnp

    def layer_norm(p: Any, name: str, x: Any) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def attention(p: Any, x: Any) -> Any:
        b, s, d = x.shape
        qkv = x @ p["attn.in_proj_weight"].T + p["attn.in_proj_bias"]
        q, k, v = (t.reshape(b, s, HEADS, d // HEADS).transpose(0, 2, 1, 3) for t in jnp.split(qkv, 3, axis=-1))
        probs = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // HEADS), axis=-1)
        out = (probs @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
        return _jax_linear(p, "attn.out_proj", out)

    def loss(p: Any, x: Any, y: Any) -> Any:
        x = x + attention(p, layer_norm(p, "ln1", x))
        h = jax.nn.gelu(_jax_linear(p, "fc1", layer_norm(p, "ln2", x)), approximate=False)
        out = x + _jax_linear(p, "fc2", h)
        return jnp.mean((out - y) ** 2)

    params, x, y = _block_data()
    return _jax_step(loss, params, _jax_adam(1e-3), x, y)


def cases() -> list[Case]:
    """The three training steps, each for tensorplay, PyTorch and JAX."""
    return [
        Case("train step: MLP 784-256-256-10 b128, SGD momentum",
             {"tensorplay": tp_mlp, "torch": torch_mlp, "jax": jax_mlp}),
        Case("train step: CNN c16-pool-c32-pool-fc 1x28x28 b64, SGD",
             {"tensorplay": tp_cnn, "torch": torch_cnn, "jax": jax_cnn}),
        Case("train step: transformer block d64 h4 s32 b16, Adam",
             {"tensorplay": tp_block, "torch": torch_block, "jax": jax_block}),
    ]
