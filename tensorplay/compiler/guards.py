"""Guards: what a compiled specialization assumes about a call, checked before it runs.

A call is described by :func:`describe`: the structure of its arguments; per tensor leaf its dtype,
shape, ``requires_grad``, layout and whether it has a ``.grad``; per other leaf its value (scalars,
strings, ``None``, tuples of them, numpy arrays by content) or its identity (any other object); and
the grad mode. A :class:`Specialization`'s :class:`Guards` compare a description with the one the
specialization was captured for (symbolic dims compare only their rank and the ties between them),
then the state the function reads from outside (tensors, Python values, containers, objects: see
:mod:`.sources`) and the decisions taken on symbolic sizes. Data-dependent branches are checked
on the values the compiled code computes (:mod:`.runtime`).

Every mismatch is a :class:`Reason` in the user's vocabulary: the argument and dim by name where
annotated (``x: Tensor[Batch, Feat]: Batch was 32, now 64``), the guard's kind, the source line of
the operation that created the guard, and what to do about it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorplay.compiler.capture import SizeGuard
from tensorplay.compiler.sources import MISSING, ContainerSource, ObjectSource, TensorSource, ValueSource
from tensorplay.compiler.state_check import StateCheck, state_check_function
from tensorplay.compiler.state_reader import StateReader
from tensorplay.compiler.values import describe_key, describe_static, static_key
from tensorplay.interpreters.eager.interpreter import dtype_name
from tensorplay.tensor import Tensor

KINDS = ("structure", "shape", "rank", "dtype", "requires_grad", "layout", "grad", "value", "identity",
         "grad_mode", "state", "size", "branch")
"""The kinds of guards a reason may name."""


@dataclass(frozen=True)
class Reason:
    """Why a call could not use a specialization: the guard ``kind``, a ``message``, where the guard came
    from (``location``, a source line) and what to do (``fix``)."""

    kind: str
    message: str
    location: str = ""
    fix: str = ""

    def __str__(self) -> str:
        text = f"[{self.kind}] {self.message}"
        if self.location:
            text += f" (at {self.location})"
        if self.fix:
            text += f"; {self.fix}"
        return text


# ---- describing a call ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class TensorMeta:
    """What a specialization assumes about one tensor."""

    dtype: str
    shape: tuple[int, ...]
    requires_grad: bool
    contiguous: bool
    has_grad: bool | None  # None: either (the function drops the incoming .grad unread)


def tensor_meta(t: Tensor[*tuple[Any, ...]], any_grad: bool = False) -> TensorMeta:
    """The :class:`TensorMeta` of an eager tensor (``any_grad``: whether it has a ``.grad`` does not matter)."""
    data = t._data
    return TensorMeta(dtype_name(data.dtype), tuple(data.shape), t._requires_grad, bool(data.flags.c_contiguous),
                      None if any_grad else t._grad is not None)


@dataclass
class CallDescription:
    """A call, as the guards see it (see the module docstring)."""

    spec: Any
    tensors: list[tuple[int, TensorMeta]]
    statics: list[tuple[int, Any]]
    grad_enabled: bool
    sizes: dict[int, tuple[Guards, dict[str, int] | None]] = field(default_factory=dict, compare=False, repr=False)
    """What :meth:`Guards.sizes_for` found for this call, by the guards' id (a description never changes)."""

    def exact_key(self) -> tuple[Any, ...]:
        """The key of a static specialization for this call."""
        return (self.spec, tuple(self.tensors), tuple(k for _, k in self.statics), self.grad_enabled)

    def masked_key(self, symbolic: frozenset[tuple[int, int]]) -> tuple[Any, ...]:
        """The key with the sizes of the ``symbolic`` (leaf, axis) dims replaced by ``-1``."""
        tensors = []
        for i, meta in self.tensors:
            shape = tuple(-1 if (i, a) in symbolic else d for a, d in enumerate(meta.shape))
            tensors.append((i, TensorMeta(meta.dtype, shape, meta.requires_grad, meta.contiguous, meta.has_grad)))
        return (self.spec, tuple(tensors), tuple(k for _, k in self.statics), self.grad_enabled)


def describe(leaves: Sequence[Any], spec: Any, grad_enabled: bool) -> CallDescription:
    """Describe a call whose flattened arguments are ``leaves`` (eager tensors and other values)."""
    tensors = []
    statics = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, Tensor):
            tensors.append((i, tensor_meta(leaf)))
        else:
            statics.append((i, static_key(leaf)))
    return CallDescription(spec, tensors, statics, grad_enabled)


# ---- the guards of a specialization --------------------------------------------------------------------

@dataclass
class Guards:
    """Everything a specialization checks before it runs (see the module docstring).

    ``symbols``: symbol name -> the (leaf, axis) dims it stands for (they must have equal sizes);
    ``names``: a name per argument leaf; ``dim_names``: (leaf, axis) -> annotated dim name.
    """

    description: CallDescription
    symbolic: frozenset[tuple[int, int]]
    symbols: dict[str, list[tuple[int, int]]]
    names: list[str]
    dim_names: dict[tuple[int, int], str]
    statics: dict[int, Any]
    tensors: list[TensorSource]
    tensor_metas: list[TensorMeta]
    values: list[ValueSource]
    objects: list[ObjectSource]
    size_guards: list[SizeGuard]
    containers: list[ContainerSource] = field(default_factory=list)
    keep_alive: list[Any] = field(default_factory=list)
    _reader: StateReader | None = field(default=None, init=False, repr=False, compare=False)
    _check: StateCheck | None = field(default=None, init=False, repr=False, compare=False)

    def read_state(self) -> tuple[list[Any], list[Any], list[Any]]:
        """What the tensor, value and object sources read now (each source's ``read()``, in order), read
        together (:class:`.state_reader.StateReader`: each step their paths share is read once)."""
        reader = self._reader
        if reader is None:
            reader = self._reader = StateReader([s.read for s in self.tensors] + [s.read for s in self.values]
                                                + [s.read for s in self.objects])
        read = reader()
        n, m = len(self.tensors), len(self.values)
        return read[:n], read[n:n + m], read[n + m:]

    @property
    def key(self) -> tuple[Any, ...]:
        """The dict key of this specialization (its description, symbolic dims masked)."""
        return self.description.masked_key(self.symbolic)

    def binding(self, call: CallDescription) -> dict[str, int] | None:
        """Sizes of the symbols in ``call`` (``None`` when dims tied to one symbol differ)."""
        shapes = dict(call.tensors)
        out: dict[str, int] = {}
        for name, sites in self.symbols.items():
            size = None
            for leaf, axis in sites:
                meta = shapes.get(leaf)
                if meta is None or axis >= len(meta.shape):
                    return None
                if size is None:
                    size = meta.shape[axis]
                elif meta.shape[axis] != size:
                    return None
            assert size is not None
            out[name] = size
        return out

    def sizes_for(self, call: CallDescription) -> dict[str, int] | None:
        """The symbols' sizes in ``call`` when the tied dims agree and every size guard holds, else ``None``.
        Computed once per call description: a call the wrapper's fast path recognises (the same tensors as
        the last call) pays a dict look-up, not a walk over the symbols and guards."""
        found = call.sizes.get(id(self))
        if found is not None and found[0] is self:
            return found[1]
        binding = self.binding(call)
        if binding is not None and self.size_guards and not all(g.holds(binding) for g in self.size_guards):
            binding = None
        call.sizes[id(self)] = (self, binding)
        return binding

    # ---- checks on the state read from outside ---------------------------------------------------------
    def state_reasons(self, reads: Sequence[Any]) -> list[Reason]:
        """Reasons why the current state (``reads``: one object per tensor source) breaks the guards."""
        reasons = []
        for src, meta, now in zip(self.tensors, self.tensor_metas, reads):
            if now is MISSING or not isinstance(now, Tensor):
                reasons.append(Reason("state", f"{src.name} was a tensor, now {'missing' if now is MISSING else type(now).__name__}",
                                      fix="the function reads a different object at that name: this recompiles"))
                continue
            reasons.extend(_meta_reasons(src.name, meta, tensor_meta(now), None))
        for value_source in self.values:
            now = value_source.read()
            if static_key(now) != static_key(value_source.value):
                was_text, now_text = describe_static(value_source.value), describe_static(now)
                if was_text == now_text and isinstance(now, np.ndarray):
                    was_text, now_text = f"{was_text} with other values", "changed"
                reasons.append(Reason("value", f"{value_source.name} was {was_text}, now {now_text}",
                                      fix="the compiled code used that value; keep it fixed between calls, or pass it "
                                          "as a tensor argument"))
        for obj in self.objects:
            if obj.read() is not obj.obj:
                reasons.append(Reason("identity", f"{obj.name} is a different object than when the function was "
                                                  "captured", fix="this recompiles for the new object"))
        for container in self.containers:
            for kind, message in container.reasons():
                reasons.append(Reason(kind, message, fix=_CONTAINER_FIX))
        return reasons

    def state_ok(self, reads: Sequence[Any], values: Sequence[Any] | None = None,
                 objects: Sequence[Any] | None = None) -> bool:
        """Fast check of :meth:`state_reasons` (no messages); ``values`` and ``objects`` are what the value and
        object sources read now (:meth:`read_state`; read here when not given). The checks are one generated
        function (:mod:`.state_check`)."""
        check = self._check
        if check is None:
            check = self._check = state_check_function(self.tensor_metas, [v.value for v in self.values],
                                                       [o.obj for o in self.objects], self.containers)
        if values is None:
            values = [value_source.read() for value_source in self.values]
        if objects is None:
            objects = [obj.read() for obj in self.objects]
        return check(reads, values, objects)

    def size_reasons(self, binding: dict[str, int]) -> list[Reason]:
        """Reasons why a decision taken on a symbolic size goes the other way with ``binding``."""
        out = []
        for g in self.size_guards:
            if not g.holds(binding):
                now = {s: binding.get(s) for s in sorted(g.expr.free_symbols)}
                out.append(Reason("size", f"{g.describe()} when captured; now {', '.join(f'{k} = {v}' for k, v in now.items())}",
                                  location=str(g.location) if g.location else "",
                                  fix="that Python decision made the compiled code valid for those sizes only; "
                                      "decide with tensor operations (tp.where) or keep the dim static"))
        return out

    # ---- reasons against a call ------------------------------------------------------------------------
    def call_reasons(self, call: CallDescription) -> list[Reason]:
        """Reasons why ``call``'s arguments break the guards (empty when they hold)."""
        mine = self.description
        if call.spec != mine.spec:
            return [Reason("structure", f"the arguments' structure was {mine.spec}, now {call.spec}",
                           fix="each structure of arguments compiles separately")]
        if call.grad_enabled != mine.grad_enabled:
            return [Reason("grad_mode", f"grad mode was {'enabled' if mine.grad_enabled else 'disabled'}, now "
                                        f"{'enabled' if call.grad_enabled else 'disabled'}",
                           fix="calls with and without tp.no_grad() compile separately")]
        reasons: list[Reason] = []
        theirs = dict(call.tensors)
        for i, meta in mine.tensors:
            now = theirs.get(i)
            name = self.names[i]
            if now is None:
                now_key = dict(call.statics).get(i)
                reasons.append(Reason("structure", f"{name} was a tensor, now {describe_key(now_key)}",
                                      fix="tensor and non-tensor arguments compile separately; pass a tensor"))
                continue
            symbolic = {a for (leaf, a) in self.symbolic if leaf == i}
            reasons.extend(_meta_reasons(name, meta, now, (symbolic, {a: self.dim_names.get((i, a)) for a in
                                                                      range(len(meta.shape))})))
        for i, key in mine.statics:
            now_key = dict(call.statics).get(i, MISSING)
            if now_key != key:
                now_text = "a tensor" if now_key is MISSING else describe_key(now_key)
                reasons.append(Reason("value", f"{self.names[i]} was {describe_static(self.statics.get(i))}, now "
                                               f"{now_text}",
                                      fix=_static_fix(self.statics.get(i))))
        if not reasons:
            binding = self.binding(call)
            if binding is None:
                reasons.append(Reason("shape", "dims that had equal sizes when captured now differ: "
                                      + "; ".join(f"{s}: " + ", ".join(f"{self.names[leaf]} axis {a}" for leaf, a in sites)
                                                  for s, sites in self.symbols.items() if len(sites) > 1),
                                      fix="they are compiled again as separate dims"))
            else:
                reasons.extend(self.size_reasons(binding))
        return reasons


_CONTAINER_FIX = ("the compiled code used what the function read from that container (its entries, its length, "
                  "its keys); keep it fixed between calls, or pass the values that change as arguments (a tensor "
                  "argument does not recompile)")


def _static_fix(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return ("compiled functions specialise on numpy arrays by value; pass tp.tensor(x) (or "
                "tp.from_numpy(x)) to make it an input")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "Python numbers are compiled in as constants; pass tp.tensor(value) to make it an input"
    return "each value compiles separately"


def _meta_reasons(name: str, was: TensorMeta, now: TensorMeta,
                  dims: tuple[set[int], dict[int, str | None]] | None) -> list[Reason]:
    out = []
    if was.dtype != now.dtype:
        out.append(Reason("dtype", f"{name}: dtype was {was.dtype}, now {now.dtype}",
                          fix="each dtype compiles separately"))
    if len(was.shape) != len(now.shape):
        out.append(Reason("rank", f"{name}: rank was {len(was.shape)} {list(was.shape)}, now {len(now.shape)} "
                                  f"{list(now.shape)}", fix="each rank compiles separately"))
    else:
        symbolic, labels = dims if dims is not None else (set(), {})
        for axis, (a, b) in enumerate(zip(was.shape, now.shape)):
            if axis in symbolic or a == b:
                continue
            label = labels.get(axis)
            annotated = f"{name}: {label} (axis {axis})" if label else f"{name}: axis {axis}"
            shown = f"{label} was {a}, now {b}" if label else f"size was {a}, now {b}"
            fix = (f"declare {label} dynamic (tp.compile(dynamic=True)), or let the default policy "
                   "recompile it once as a symbolic dim") if label else \
                "compile with dynamic=True, or let the default policy recompile it once as a symbolic dim"
            out.append(Reason("shape", f"{annotated}: {shown}" if not label else f"{name}: {shown} (axis {axis})",
                              fix=fix))
    if was.requires_grad != now.requires_grad:
        out.append(Reason("requires_grad", f"{name}: requires_grad was {was.requires_grad}, now {now.requires_grad}",
                          fix="tensors that require grad compile with a backward; others without"))
    if was.contiguous != now.contiguous:
        out.append(Reason("layout", f"{name}: layout was {'contiguous' if was.contiguous else 'strided'}, now "
                                    f"{'contiguous' if now.contiguous else 'strided'}",
                          fix="call .contiguous() on the argument to share one specialization"))
    if was.has_grad is not None and was.has_grad != now.has_grad:
        out.append(Reason("grad", f"{name}: .grad was {'set' if was.has_grad else 'None'}, now "
                                  f"{'set' if now.has_grad else 'None'}",
                          fix="zero_grad(set_to_none=True) before the call keeps one specialization"))
    return out


__all__ = ["CallDescription", "Guards", "KINDS", "Reason", "TensorMeta", "describe", "describe_key", "describe_static",
           "static_key", "tensor_meta"]
