"""The batched interpretation of a graph: every value carries a batch axis (or none), and each node runs
its primitive's batching rule (:mod:`tensorplay.rules.batching`).

This is what ``tensorplay.func.vmap`` and the layer operation ``ops.map(lead, x, f)`` share: a
per-sample function is traced once on one sample (symbolically), then its graph is walked with
:class:`BatchedWalker`, emitting one batched computation into the caller's interpreter. Values
that do not depend on the mapped inputs have batch axis ``None`` and are computed once.

Random primitives inside the function draw from per-sample keys (``randomness="different"``: the
caller's key is split, one key per sample, never the same for two samples even when ``vmap`` calls
nest) or share one key (``"same"``); ``"error"`` refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tensorplay import random_state
from tensorplay.derived import numel_of, unsqueeze
from tensorplay.errors import GraphCaptureError, MissingRuleError, ShapeError
from tensorplay.interpreters.graph.ir import Graph, Node, Var
from tensorplay.interpreters.graph.recorder import Recorder
from tensorplay.interpreters.graph.walk import Walker
from tensorplay.recording import creating_in
from tensorplay.spec.aval import Aval
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Dim = int | None
Batched = tuple[Any, Dim]

RANDOMNESS = ("error", "different", "same")
"""The policies for random primitives under a batched interpretation."""

_KEY_MIX = 0x2545F4914F6CDD1D  # odd multiplier applied to the caller's seed word before a sample's offset
_KEY_STRIDE = 0x5851F42D4C957F2D  # odd multiplier of the sample index


class BatchedWalker(Walker):
    """Walks a graph whose environment maps each value to ``(tensor, batch axis or None)``."""

    def step(self, node: Node, env: dict[Any, Any]) -> None:
        args: list[Any] = []
        dims: list[Dim] = []
        batched = False
        clean = True  # every batch axis a non-negative int (of a tensor): what the rules' wrapper makes them
        for v in node.inputs:
            if v.__class__ is Var:
                value, d = env[v]
                args.append(value)
                dims.append(d)
                if d is not None:
                    batched = True
                    if d.__class__ is not int or d < 0 or value.__class__ is not Tensor:
                        clean = False
            else:
                args.append(None if v is None else v.value)
                dims.append(None)
        params = node.params
        if node.has_sym:
            params = self.params(node)
            args = [a.subs(self.binding) if isinstance(a, SymDim) else a for a in args]
        if not batched:
            env[node.outputs[0]] = (self.method(node.target)(*args, **params), None)
            return
        rule = (_BATCH_RULES or _batch_rules()).get(node.target)
        if rule is None:
            raise MissingRuleError(f"vmap: no batching rule for primitive '{node.target}' (recorded at "
                                   f"{node.location})")
        if clean:  # the registered rule's own body: its wrapper would only re-check the batch axes
            rule = getattr(rule, "__wrapped__", rule)
        env[node.outputs[0]] = rule(self.ops, tuple(args), tuple(dims), **params)


def _batch_rules() -> dict[str, Any]:
    """The batching rules (imported on first use: the rules sit above this module)."""
    global _BATCH_RULES
    if _BATCH_RULES is None:
        from tensorplay.rules.batching import BATCH_RULES
        _BATCH_RULES = BATCH_RULES
    return _BATCH_RULES


_BATCH_RULES: dict[str, Any] | None = None


def placeholder_values(graph: Graph, ops: Any, inputs: list[Batched], keys: Mapping[Var, Batched]) -> dict[Any, Any]:
    """The batched environment of the graph's placeholders: ``inputs`` for the user inputs (in order),
    ``keys`` for random keys, unbatched constants and captured tensors for the rest."""
    env: dict[Any, Any] = {}
    it = iter(inputs)
    for p in graph.inputs:
        kind = p.kind
        if kind == "user_input":
            env[p] = next(it)
        elif kind == "random_key":
            env[p] = keys[p]
        elif kind == "constant":
            env[p] = (ops.constant(p.source), None)
        else:
            source = p.source
            if not isinstance(source, Tensor):
                raise GraphCaptureError(f"vmap: graph input {p.name!r} ({kind}) has no value")
            env[p] = (source, None)
    return env


def random_keys(graph: Graph, caller: Any, randomness: str, size: Any, where: str) -> dict[Var, Batched]:
    """Values for the graph's random-key inputs: one key shared by every sample (``"same"``) or one key per
    sample (``"different"``); ``"error"`` refuses random primitives.

    Per-sample keys are ``seed * MIX + (i + 1) * STRIDE`` (mod 2**64) on the seed word: the mix makes
    nested splits order-sensitive, so sample ``(a, b)`` of ``vmap(vmap(f))`` never shares its key with
    sample ``(b, a)``."""
    placeholders = [p for p in graph.inputs if p.kind == "random_key"]
    if not placeholders:
        return {}
    if randomness == "error":
        raise RuntimeError(f"{where}: called a random operation (dropout, random sampling, ...) while in "
                           "randomness='error' mode; pass randomness='different' (each sample draws its own "
                           "numbers) or randomness='same' (one draw shared by the batch), or draw the random "
                           "numbers outside vmap")
    out: dict[Var, Batched] = {}
    for p in placeholders:
        key = caller.random_key()
        if randomness == "same":
            out[p] = (key, None)
            continue
        if not isinstance(size, int):
            raise MissingRuleError(f"{where}: randomness='different' needs a concrete batch size, got {size}")
        out[p] = (split_key(caller, key, size), 0)
    return out


def split_key(ops: Any, key: AnyTensor, size: int) -> AnyTensor:
    """``size`` keys ``[size, 2]`` derived from ``key`` (``[2]``: seed word, counter word), one per sample."""
    offsets = np.zeros((size, 2), dtype=np.int64)
    strides = [((i + 1) * _KEY_STRIDE) & ((1 << 64) - 1) for i in range(size)]
    offsets[:, 0] = np.array(strides, dtype=np.uint64).view(np.int64)
    mix = np.array([_KEY_MIX, 1], dtype=np.uint64).view(np.int64)
    mixed = ops.mul(ops.reshape(key, shape=(1, 2)), ops.constant(mix))
    return ops.add(mixed, ops.constant(offsets))  # type: ignore[no-any-return]


def place(ops: Any, item: Batched, out_dim: Dim, size: Any, index: int, where: str) -> Any:
    """An output with its batch axis moved to ``out_dim`` (broadcast there when it has none)."""
    value, d = item
    if out_dim is None:
        if d is not None:
            raise ValueError(f"{where}: out_dims is None for output {index}, but that output depends on the "
                             "mapped inputs; out_dims=None is only allowed for outputs that are the same for every "
                             "sample")
        return value
    if not isinstance(value, Tensor):
        raise TypeError(f"{where}: output {index} is a {type(value).__name__}, expected a tensor")
    rank = value.ndim + (1 if d is None else 0)
    if not -rank <= out_dim < rank:
        raise ValueError(f"{where}: out_dims={out_dim} is out of range for output {index} of rank {rank} "
                         f"(with the batch axis); expected {-rank} <= out_dim < {rank}")
    target = out_dim % rank
    if d is None:
        expanded = unsqueeze(ops, value, target)
        shape = tuple(expanded.shape)
        return ops.broadcast_to(expanded, shape=shape[:target] + (size,) + shape[target + 1:])
    if d == target:
        return value
    perm = [a for a in range(rank) if a != d]
    perm.insert(target, d)
    return ops.permute(value, perm=tuple(perm))


def map_over_lead(ops: Any, lead: int, x: AnyTensor, f: Callable[[AnyTensor], AnyTensor]) -> AnyTensor:
    """``ops.map(lead, x, f)``: ``f`` is a function of one sample ``x[i_1, ..., i_lead]`` (shape
    ``x.shape[lead:]``), applied independently to every sample; the result is ``[*lead_shape, *f_out]``.

    One batched computation (``f`` traced once on a sample, then interpreted with the batching rules into
    ``ops``), not a Python loop. ``lead == 0`` calls ``f(x)``. Random draws inside ``f`` differ per sample."""
    if isinstance(lead, bool) or not isinstance(lead, int) or not 0 <= lead <= x.ndim:
        raise ShapeError(f"map: lead must be an int from 0 to the rank of x ({x.ndim}), got {lead!r} "
                         f"(x: {list(x.shape)})")
    if lead == 0:
        return f(x)
    shape = tuple(x.shape)
    lead_shape, sample = shape[:lead], shape[lead:]
    size = numel_of(lead_shape)
    flat = x if lead == 1 else ops.reshape(x, shape=(size,) + sample)
    recorder = Recorder()
    try:
        with creating_in(recorder):
            result = f(recorder.input("sample", Aval(sample, x.dtype.name), "user_input"))
        if not isinstance(result, Tensor):
            raise TypeError(f"map: f must return a tensor, got {type(result).__name__}")
        out_var = recorder.lift(result)
    finally:
        recorder.close()
    graph = recorder.graph
    graph.outputs = [out_var]
    keys = random_keys(graph, ops, "different", size, "map")
    env = placeholder_values(graph, ops, [(flat, 0)], keys)
    BatchedWalker(ops).run(graph.nodes, env)
    y: AnyTensor = place(ops, env[out_var], 0, size, 0, "map")
    return y if lead == 1 else ops.reshape(y, shape=lead_shape + tuple(y.shape[1:]))


__all__ = ["BatchedWalker", "RANDOMNESS", "map_over_lead", "place", "placeholder_values", "random_keys",
           "split_key"]
