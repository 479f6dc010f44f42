"""A character-level transformer language model, written as in PyTorch with ``torch`` -> ``tp``.

Stages (each prints one line, and :func:`main` returns what each measured):

1. train eagerly on windows of a small built-in text (``DataLoader`` over a ``TensorDataset``, AdamW,
   ``clip_grad_norm_``, ``F.cross_entropy``) and check that the loss drops;
2. the same training step under ``tp.compile`` from the same initial weights and batches: the losses match
   the eager ones;
3. ``tp.export.export`` of the model with a dynamic batch and sequence dim, ``tp.export.save`` and
   ``tp.export.load``; the loaded program's predictions match eager ones at several batch and seq sizes
   (seq 1 and the maximum included);
4. greedy and sampled (``tp.multinomial``) generation from the trained model.

Run ``python examples/char_lm.py`` (``--steps N`` for the number of training steps).
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from typing import Any

import numpy as np

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.nn.functional as F
from tensorplay.export import Dim
from tensorplay.utils.data import DataLoader, TensorDataset

TEXT = (
    "To be, or not to be, that is the question:\n"
    "Whether 'tis nobler in the mind to suffer\n"
    "The slings and arrows of outrageous fortune,\n"
    "Or to take arms against a sea of troubles\n"
    "And by opposing end them. To die: to sleep;\n"
    "No more; and by a sleep to say we end\n"
    "The heart-ache and the thousand natural shocks\n"
    "That flesh is heir to, 'tis a consummation\n"
    "Devoutly to be wish'd. To die, to sleep;\n"
    "To sleep: perchance to dream: ay, there's the rub;\n"
)

BLOCK = 32  # the longest context the model sees (the positional table's size)


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention then an MLP, each with a residual."""

    def __init__(self, d_model: int, n_head: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: tp.Tensor[Any, Any, Any]) -> tp.Tensor[Any, Any, Any]:
        T = x.shape[1]
        mask = tp.triu(tp.ones(T, T, dtype=tp.bool, device=x.device), 1)
        h = self.ln1(x)
        a, _ = self.attn(h, h, h, attn_mask=mask, need_weights=False)
        x = x + a
        out: tp.Tensor[Any, Any, Any] = x + self.mlp(self.ln2(x))  # Sequential's output is untyped
        return out


class CharLM(nn.Module):
    """Token and positional embeddings, two blocks, a final LayerNorm and a linear head.

    ``idx``: ``(B, T)`` int64 token ids with ``T <= BLOCK``; returns ``(B, T, vocab)`` logits."""

    def __init__(self, vocab: int, d_model: int = 32, n_head: int = 4, n_layer: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(BLOCK, d_model)
        self.blocks = nn.Sequential(*[Block(d_model, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx: tp.Tensor[Any, Any]) -> tp.Tensor[Any, Any, Any]:
        B, T = idx.shape
        ids = tp.index(idx, bound=self.tok.num_embeddings)  # typed token ids, checked in [0, vocab)
        x = self.tok(ids) + self.pos(tp.index(tp.arange(T, device=idx.device), bound=BLOCK))
        x = self.blocks(x)
        return self.head(self.ln_f(x))


def make_data(block: int) -> tuple[TensorDataset, list[str]]:
    """Every window of ``block + 1`` characters of :data:`TEXT` as (input, next-character target) pairs."""
    chars = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(chars)}
    data = tp.tensor([stoi[c] for c in TEXT], dtype=tp.int64)
    n = len(data) - block
    xs = tp.stack([data[i:i + block] for i in range(n)])
    ys = tp.stack([data[i + 1:i + block + 1] for i in range(n)])
    return TensorDataset(xs, ys), chars


def loss_fn(model: nn.Module, x: tp.Tensor[Any, Any], y: tp.Tensor[Any, Any]) -> tp.Tensor[()]:
    logits = model(x)
    V = logits.shape[-1]
    return F.cross_entropy(logits.view(-1, V), tp.index(y.view(-1), bound=V))


def train(model: nn.Module, loader: DataLoader[Any], steps: int, step_fn: Any = None) -> list[float]:
    """``steps`` AdamW steps over ``loader`` (cycled); the losses, one per step."""
    opt = tp.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def step(m: nn.Module, x: tp.Tensor[Any, Any], y: tp.Tensor[Any, Any]) -> tp.Tensor[()]:
        opt.zero_grad()
        loss = loss_fn(m, x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss

    run = step if step_fn is None else step_fn(step)
    losses: list[float] = []
    while len(losses) < steps:
        for x, y in loader:
            losses.append(float(run(model, x, y).item()))
            if len(losses) == steps:
                break
    return losses


@tp.no_grad()
def generate(model: Any, idx: tp.Tensor[Any, Any], new: int, greedy: bool,
             generator: tp.Generator | None = None) -> tp.Tensor[Any, Any]:
    """``new`` more tokens after ``idx`` (``(B, T)``), greedily or sampled with ``tp.multinomial``."""
    for _ in range(new):
        logits = model(idx[:, -BLOCK:])[:, -1, :]
        if greedy:
            nxt = logits.argmax(dim=-1, keepdim=True)
        else:
            probs = F.softmax(logits, dim=-1)
            nxt = tp.multinomial(probs, 1, generator=generator)
        idx = tp.cat([idx, nxt], dim=1)
    return idx


def main(steps: int = 300, seed: int = 0, verbose: bool = True) -> dict[str, Any]:
    """Run every stage; the measurements of each (see the module docstring)."""
    out: dict[str, Any] = {}
    say = print if verbose else (lambda *a: None)
    dataset, chars = make_data(BLOCK)
    V = len(chars)

    # 1. eager training
    tp.manual_seed(seed)
    model = CharLM(V)
    init = copy.deepcopy(model.state_dict())
    loader = DataLoader(dataset, batch_size=16, shuffle=True, drop_last=True,
                        generator=tp.Generator().manual_seed(seed))
    t0 = time.perf_counter()
    losses = train(model, loader, steps)
    out["eager_losses"] = losses
    out["eager_seconds"] = time.perf_counter() - t0
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    say(f"eager: {steps} steps in {out['eager_seconds']:.1f}s, loss {first:.3f} -> {last:.3f} (ln V = {np.log(V):.3f})")
    if steps >= 30:
        assert last < 0.85 * first, f"the loss did not drop: {first:.3f} -> {last:.3f}"

    # 2. the same steps compiled, from the same weights and batches
    n_cmp = min(steps, 50)
    model_c = CharLM(V)
    model_c.load_state_dict(init)
    loader_c = DataLoader(dataset, batch_size=16, shuffle=True, drop_last=True,
                          generator=tp.Generator().manual_seed(seed))
    t0 = time.perf_counter()
    out["compiled_losses"] = train(model_c, loader_c, n_cmp, step_fn=tp.compile)
    out["compiled_seconds"] = time.perf_counter() - t0
    diff = float(np.max(np.abs(np.array(out["compiled_losses"]) - np.array(losses[:n_cmp]))))
    out["compiled_max_diff"] = diff
    say(f"compiled: {n_cmp} steps in {out['compiled_seconds']:.1f}s, max |loss - eager loss| = {diff:.2e}")
    assert diff < 1e-4, f"compiled losses differ from eager ones by {diff}"

    # 3. export with dynamic batch and seq, save, load, compare with eager
    model.eval()
    batch, seq = Dim("batch", min=1, max=64), Dim("seq", min=1, max=BLOCK)
    example = dataset[0][0][None]
    ep = tp.export.export(model, (example,), dynamic_shapes={"idx": {0: batch, 1: seq}})
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "char_lm.tpexport")
        tp.export.save(ep, path)
        loaded = tp.export.load(path)
    gen = tp.Generator().manual_seed(seed + 1)
    diffs: dict[tuple[int, int], float] = {}
    for b, t in [(1, 1), (3, 1), (2, 7), (5, 16), (1, BLOCK), (4, BLOCK)]:
        idx = tp.randint(0, V, (b, t), generator=gen)
        with tp.no_grad():
            want = model(idx)
        got = loaded.module()(idx)
        assert tuple(got.shape) == (b, t, V), (got.shape, b, t, V)
        diffs[(b, t)] = float((got - want).abs().max().item())
        assert diffs[(b, t)] < 1e-5, f"loaded program differs from eager at batch {b}, seq {t}: {diffs[(b, t)]}"
        assert bool((got.argmax(-1) == want.argmax(-1)).all()), f"different predictions at batch {b}, seq {t}"
    out["export_diffs"] = diffs
    out["export_dims"] = {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()}
    say(f"export: saved and loaded; max |loaded - eager| per (batch, seq): "
        + ", ".join(f"{k}: {v:.1e}" for k, v in diffs.items()))

    # 4. generation
    stoi = {c: i for i, c in enumerate(chars)}
    prompt = tp.tensor([[stoi[c] for c in "To be"]], dtype=tp.int64)
    greedy = generate(model, prompt, 40, greedy=True)
    sampled = generate(model, prompt, 40, greedy=False, generator=tp.Generator().manual_seed(seed))
    out["greedy"] = "".join(chars[i] for i in greedy[0].tolist())
    # the loaded program (dynamic seq: one program for every context length) generates the same text
    out["greedy_loaded"] = "".join(chars[i] for i in generate(loaded.module(), prompt, 40, greedy=True)[0].tolist())
    assert out["greedy_loaded"] == out["greedy"], (out["greedy_loaded"], out["greedy"])
    out["sampled"] = "".join(chars[i] for i in sampled[0].tolist())
    say(f"greedy:  {out['greedy']!r} (the loaded program's: the same)")
    say(f"sampled: {out['sampled']!r}")
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="eager training steps (default 300)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(args.steps, args.seed)
