"""Subgraphs the numba backend runs as one kernel call, where the eager interpreter runs one fused kernel.

* **Cross-entropy** (:func:`find_cross_entropies`). Recorded, ``cross_entropy(x[M, C], t[M])`` (class
  indices, mean over the rows whose target is not ``ignore_index``, no weight, no smoothing) is
  ``log_softmax``, the target check, the mask, a gather at ``arange(M) * C + t``, a masked sum and a count;
  a training step adds its reverse sweep (a scatter of ``-seed / count`` into zeros, then ``log_softmax``'s
  backward). The loss is one row kernel, ``dx`` another (:func:`.runtime.cross_entropy`). Where the seed is
  there before the loss (a literal or a graph input: a training step's), one call computes both
  (:func:`.runtime.cross_entropy_step`) and takes in the target's range check, the bias add that makes the
  logits and the bias's gradient (``dx`` summed over the rows) when nothing else reads what they replace.
  A reverse sweep whose loss nothing reads (``tp.compile(grad(f))``: the loss's own nodes are dead code and
  gone) is the same call where ``dx`` is, whatever computed the seed.
* **GELU's backward** (:func:`find_gelu_backwards`): ``g * (Phi(x) + x phi(x))`` as the erf form's rule
  records it, by the eager backward's one-pass kernel (:func:`.runtime.gelu_backward`).
* **Layer norm's backward** (:func:`find_layer_norm_backwards`): the rule's composite (statistics
  recomputed from ``x``, ``dx``, ``dgamma``) by the eager backward's row kernel
  (:func:`.runtime.layer_norm_backward`), reading the statistics the forward's call kept
  (:func:`.runtime.layer_norm_stats`) when the graph normalises the same ``x`` forward.
* **Sums of zero pads into disjoint windows** (:func:`find_pad_sums`): ``pad(a) + pad(b) + ...`` as the
  backward of slicing one array into pieces (a ``q, k, v`` projection's split) records it is the pieces
  copied into their windows of one array (:func:`.runtime.place`), each read through the reshape that
  fed its pad (no copy of a transposed piece first).
* **Attention's probabilities** (:func:`find_attention_probs`): the backward rule of an unmasked
  ``dot_product_attention`` recomputes ``softmax(scale * q k^T)``; the forward's call returns them
  alongside its output (:func:`.runtime.attention_probs`) and the recomputation is dropped.

A match requires the exact recorded structure (literals and constants checked by value, one float dtype)
and that nothing outside it reads an intermediate. Symbolic sizes (``tp.compile(dynamic=True)``) match as
static ones do: sizes are compared as expressions, and what a static graph holds as a folded constant
(a cross-entropy's row offsets ``arange(M) * C``, the zeros its reverse sweep scatters into) is matched as
the nodes computing it from the bound size; windows are disjoint only where that holds for every size.
The graph itself is not changed: every other backend, and this one on anything else, runs the nodes as
recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensorplay.interpreters.graph.ir import Graph, Literal, Node, Var
from tensorplay.symbolic import SymDim


@dataclass
class CrossEntropy:
    """One recognised cross-entropy: ``loss`` (the mean's ``div`` node) and, in a training graph, ``grad``
    (the ``sub`` node giving ``dx``) are computed from ``logits``, ``target`` (the checked indices) and
    ``seed`` (the loss's cotangent; ``None`` without a reverse sweep); ``covered`` holds the ids of every
    node the kernel call replaces (``loss`` and ``grad`` included)."""

    logits: Var
    target: Var
    ignore_index: int
    loss: Node | None
    """``None`` for a reverse sweep whose loss nothing reads (only ``dx`` is computed)."""
    grad: Node | None = None
    seed: Any = None
    covered: set[int] = field(default_factory=set)
    z: Var | None = None
    """In the one-call form (:attr:`one_call`), with the bias add taken in: ``logits = z + bias``."""
    bias: Var | None = None
    check: Node | None = None
    """In the one-call form, the target's recorded range check (``check_index``), taken in: its input is read."""
    bias_grad: Node | None = None
    """In the one-call form, ``dx``'s sum over the rows (the bias's gradient), taken in."""

    @property
    def one_call(self) -> bool:
        """Whether the loss and ``dx`` are computed by one call where the first of them is: a training
        graph whose seed is a literal or a graph input (there before the loss), or one without the loss."""
        seed = self.seed
        return self.grad is not None and (self.loss is None or type(seed) is Literal
                                          or type(seed) is Var and seed.producer is None)

    def results(self) -> list[Node]:
        """The nodes whose values the kernel calls give (the others it covers are only intermediates)."""
        return [n for n in (self.loss, self.grad, self.bias_grad) if n is not None]


def _same(a: Any, b: Any) -> bool:
    """Whether two sizes (or shapes) are the same: ints equal, symbolic sizes the same expression. An int
    never equals a symbolic size here (no capture is deciding one: the graph is already recorded)."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b) \
            and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is int and type(b) is int:
        return a == b
    return isinstance(a, SymDim) and isinstance(b, SymDim) and a == b


def _only_users(v: Var) -> list[Node]:
    return list(v.users)


def _literal(value: Any, expected: float) -> bool:
    return type(value) is Literal and isinstance(value.value, (int, float)) and not isinstance(value.value, bool) \
        and float(value.value) == expected


def _sole_user(v: Var, target: str) -> Node | None:
    users = _only_users(v)
    return users[0] if len(users) == 1 and users[0].target == target else None


def _constant(v: Any, expected: np.ndarray[Any, Any]) -> bool:
    """Whether ``v`` is a constant placeholder holding exactly ``expected``."""
    if type(v) is not Var or v.producer is not None or v.kind != "constant":
        return False
    source = v.source
    return isinstance(source, np.ndarray) and source.shape == expected.shape and source.dtype == expected.dtype \
        and bool(np.array_equal(source, expected))


def _other(node: Node, known: Any) -> Any:
    """The input of a binary ``node`` that is not ``known`` (``None`` when neither or both are)."""
    a, b = node.inputs
    if a is known and b is not known:
        return b
    if b is known and a is not known:
        return a
    return None


def _logits(log_softmax: Node) -> Var | None:
    """``log_softmax``'s input when it is float logits ``x[M, C]`` (``M`` nonzero or symbolic, ``C`` a nonzero
    int) normalised over the classes."""
    x = log_softmax.inputs[0]
    if type(x) is not Var or len(x.shape) != 2 or x.aval.dtype not in ("float32", "float64"):
        return None
    m, c = x.shape
    if not (type(m) is int and m or isinstance(m, SymDim)) or type(c) is not int or not c \
            or log_softmax.params.get("axis") not in (1, -1):
        return None
    return x


@dataclass
class _PickedIndex:
    """The flat index ``arange(M) * C + where(mask, target, 0)`` with ``mask = target != ignore_index``."""

    mask: Var
    target: Var
    ignore_index: int
    nodes: list[Node]


def _picked_index(index: Any, m: Any, c: int) -> _PickedIndex | None:
    """``index`` as the flat positions of the targets (see :class:`_PickedIndex`), else ``None``."""
    if type(index) is not Var or index.producer is None or index.producer.target != "add":
        return None
    add = index.producer
    safe = next((v for v in add.inputs if type(v) is Var and v.producer is not None
                 and v.producer.target == "where"), None)
    offsets = None if safe is None else _row_offsets(_other(add, safe), m, c, add)
    if safe is None or offsets is None:
        return None
    mask, target, zero = safe.producer.inputs  # type: ignore[union-attr]
    if type(mask) is not Var or mask.producer is None or mask.producer.target != "ne" or not _literal(zero, 0):
        return None
    ne = mask.producer
    if ne.inputs[0] is not target or type(ne.inputs[1]) is not Literal or type(ne.inputs[1].value) is not int:
        return None
    if type(target) is not Var or target.aval.dtype != "int64" or not _same(tuple(target.shape), (m,)):
        return None
    return _PickedIndex(mask, target, int(ne.inputs[1].value), [add, safe.producer, ne, *offsets])  # type: ignore[list-item]


def _counted(count: Any, mask: Var, dtype: str) -> Node | None:
    """The ``cast`` node when ``count`` is ``reduce_sum(cast(mask, dtype))`` over the rows, else ``None``."""
    if type(count) is not Var or count.producer is None or count.producer.target != "reduce_sum":
        return None
    total = count.producer
    if tuple(total.params["axes"]) not in ((0,), (-1,)) or total.params["keepdims"]:
        return None
    cast = total.inputs[0]
    if type(cast) is not Var or cast.producer is None or cast.producer.target != "cast" \
            or cast.producer.inputs[0] is not mask or cast.aval.dtype != dtype:
        return None
    return cast.producer


def _forward(log_softmax: Node) -> CrossEntropy | None:
    """The loss part, from ``log_softmax`` to the mean's ``div``."""
    x = _logits(log_softmax)
    if x is None:
        return None
    m, c = x.shape
    dtype = x.aval.dtype
    logp = log_softmax.outputs[0]
    flat = next((u for u in _only_users(logp) if u.target == "reshape"), None)
    if flat is None or not _same(tuple(flat.params["shape"]), (m * c,)):
        return None
    pick = _sole_user(flat.outputs[0], "gather")
    if pick is None or pick.params.get("axis") != 0 or pick.inputs[0] is not flat.outputs[0]:
        return None
    picked = _picked_index(pick.inputs[1], m, c)
    if picked is None:
        return None
    mask = picked.mask
    neg = _sole_user(pick.outputs[0], "neg")
    masked = None if neg is None else _sole_user(neg.outputs[0], "where")
    if neg is None or masked is None or masked.inputs[0] is not mask or masked.inputs[1] is not neg.outputs[0] \
            or not _literal(masked.inputs[2], 0.0):
        return None
    total = _sole_user(masked.outputs[0], "reduce_sum")
    loss = None if total is None else _sole_user(total.outputs[0], "div")
    if loss is None or loss.inputs[0] is not total.outputs[0]:  # type: ignore[union-attr]
        return None
    assert total is not None
    if tuple(total.params["axes"]) not in ((0,), (-1,)) or total.params["keepdims"]:
        return None
    count = loss.inputs[1]
    cast = _counted(count, mask, dtype)
    if cast is None or loss.outputs[0].aval.dtype != dtype:
        return None
    found = CrossEntropy(x, picked.target, picked.ignore_index, loss)
    found.covered = {id(n) for n in (log_softmax, flat, pick, neg, masked, total, loss, count.producer, cast,  # type: ignore[union-attr]
                                     *picked.nodes)}
    return found


def _backward_alone(log_softmax: Node) -> CrossEntropy | None:
    """A reverse sweep whose loss nothing reads (its forward nodes dead and gone: ``log_softmax`` is read
    only by its backward's ``exp``), found from the scatter back to the count; its seed may be computed."""
    x = _logits(log_softmax)
    users = _only_users(log_softmax.outputs[0])
    if x is None or len(users) != 1 or users[0].target != "exp":
        return None
    m, c = x.shape
    mul = _sole_user(users[0].outputs[0], "mul")
    sub = None if mul is None else _sole_user(mul.outputs[0], "sub")
    grid = None if sub is None or type(sub.inputs[0]) is not Var else sub.inputs[0].producer
    scatter = None if grid is None or grid.target != "reshape" or type(grid.inputs[0]) is not Var \
        else grid.inputs[0].producer
    if scatter is None or scatter.target != "scatter_add" or type(scatter.inputs[2]) is not Var:
        return None
    picked = _picked_index(scatter.inputs[1], m, c)
    neg = scatter.inputs[2].producer
    masked = None if neg is None or neg.target != "neg" or type(neg.inputs[0]) is not Var else neg.inputs[0].producer
    if picked is None or masked is None or masked.target != "where":
        return None
    spread = masked.inputs[1]
    row = spread.producer if type(spread) is Var and spread.producer is not None \
        and spread.producer.target == "broadcast_to" else None
    row_value = spread if row is None else row.inputs[0]
    scale = None if type(row_value) is not Var or row_value.producer is None \
        or row_value.producer.target != "reshape" or type(row_value.producer.inputs[0]) is not Var \
        else row_value.producer.inputs[0].producer
    if scale is None or scale.target != "div":
        return None
    cast = _counted(scale.inputs[1], picked.mask, x.aval.dtype)
    if cast is None:
        return None
    found = CrossEntropy(x, picked.target, picked.ignore_index, None)
    found.covered = {id(n) for n in (log_softmax, cast, scale.inputs[1].producer, *picked.nodes)}  # type: ignore[union-attr]
    return found if _backward(found, log_softmax, scale.inputs[1], picked.mask) else None


def _row_offsets(v: Any, m: Any, c: int, user: Node) -> list[Node] | None:
    """The nodes computing ``v`` when it is the row offsets ``arange(m) * c`` (int64) read by ``user`` only:
    none for a constant (a static ``m``, folded), ``[mul, iota]`` for a symbolic ``m`` (computed at run
    time from the bound size); ``None`` when ``v`` is anything else."""
    if type(m) is int:
        return [] if _constant(v, np.arange(m, dtype=np.int64) * c) else None
    mul = _made_by(v, "mul", user)
    if mul is None or v.aval.dtype != "int64":
        return None
    rows = next((a for a in mul.inputs if type(a) is Var), None)
    scale = _other(mul, rows)
    if rows is None or type(scale) is not Literal or type(scale.value) is not int or scale.value != c \
            or rows.aval.dtype != "int64":
        return None
    iota = _made_by(rows, "iota", mul)
    if iota is None or not _same(iota.params.get("length"), m) or iota.params.get("dtype") != "int64":
        return None
    return [mul, iota]


def _zeros(v: Any, size: Any, dtype: str, user: Node) -> list[Node] | None:
    """The nodes computing ``v`` when it is ``size`` zeros of ``dtype`` read by ``user`` only: none for a
    constant (a static size, folded), ``[full]`` for ``full((size,), +0.0)`` of a symbolic size; else
    ``None``."""
    if type(size) is int:
        return [] if _constant(v, np.zeros(size, dtype=dtype)) else None
    full = _made_by(v, "full", user)
    value = None if full is None else full.params.get("value")
    if full is None or not _same(tuple(full.params.get("shape", ())), (size,)) or full.params.get("dtype") != dtype \
            or not isinstance(value, (int, float)) or isinstance(value, bool) or value != 0 \
            or math.copysign(1.0, value) < 0 or v.aval.dtype != dtype:
        return None
    return [full]


def _backward(found: CrossEntropy, log_softmax: Node, count: Any, mask: Any) -> bool:
    """Extend ``found`` by the reverse sweep (``-seed / count`` scattered at the picked positions, then
    ``log_softmax``'s backward; ``count`` the number of rows counted, ``mask`` which); False when the
    graph's nodes are not exactly that."""
    x = found.logits
    m, c = x.shape
    scale = next((u for u in _only_users(count) if u is not found.loss), None)
    if scale is None or scale.target != "div" or scale.inputs[1] is not count:
        return False
    seed = scale.inputs[0]
    if not (type(seed) is Var and tuple(seed.shape) == () and seed.aval.dtype == x.aval.dtype) \
            and not (type(seed) is Literal and isinstance(seed.value, (int, float))):
        return False
    row = _sole_user(scale.outputs[0], "reshape")
    if row is None or tuple(row.params["shape"]) != (1,):
        return False
    spread = _sole_user(row.outputs[0], "broadcast_to")  # (gone when M is 1)
    if spread is not None and not _same(tuple(spread.params["shape"]), (m,)) or spread is None and not _same(m, 1):
        return False
    spread_value = (row if spread is None else spread).outputs[0]
    masked = _sole_user(spread_value, "where")
    if masked is None or masked.inputs[0] is not mask or masked.inputs[1] is not spread_value \
            or not _literal(masked.inputs[2], 0.0):
        return False
    neg = _sole_user(masked.outputs[0], "neg")
    scatter = None if neg is None else _sole_user(neg.outputs[0], "scatter_add")
    if scatter is None or scatter.params.get("axis") != 0 or scatter.inputs[2] is not neg.outputs[0]:  # type: ignore[union-attr]
        return False
    index = scatter.inputs[1]
    if type(index) is not Var or index.producer is None or id(index.producer) not in found.covered \
            or index.producer.target != "add":
        return False
    zeros = _zeros(scatter.inputs[0], m * c, x.aval.dtype, scatter)
    if zeros is None:
        return False
    grid = _sole_user(scatter.outputs[0], "reshape")
    if grid is None or not _same(tuple(grid.params["shape"]), (m, c)):
        return False
    g = grid.outputs[0]
    users = _only_users(g)
    if len(users) != 2:
        return False
    total = next((u for u in users if u.target == "reduce_sum"), None)
    sub = next((u for u in users if u.target == "sub"), None)
    if total is None or sub is None or tuple(total.params["axes"]) not in ((1,), (-1,)) \
            or not total.params["keepdims"] or sub.inputs[0] is not g:
        return False
    product = sub.inputs[1]
    if type(product) is not Var or product.producer is None or product.producer.target != "mul" \
            or _sole_user(product, "sub") is not sub:
        return False
    mul = product.producer
    exp_value = _other(mul, total.outputs[0])
    if type(exp_value) is not Var or exp_value.producer is None or exp_value.producer.target != "exp" \
            or exp_value.producer.inputs[0] is not log_softmax.outputs[0] or _sole_user(exp_value, "mul") is not mul \
            or _sole_user(total.outputs[0], "mul") is not mul:
        return False
    if sub.outputs[0].aval.dtype != x.aval.dtype or not _same(tuple(sub.outputs[0].shape), (m, c)):
        return False
    found.grad = sub
    found.seed = seed
    found.covered |= {id(n) for n in (scale, row, spread, masked, neg, scatter, grid, total, mul,
                                      exp_value.producer, sub, *zeros) if n is not None}
    return True


def _closed(found: CrossEntropy, graph_reads: set[int], nodes: dict[int, Node]) -> bool:
    """Whether nothing outside ``found`` reads a value computed inside it (but its results)."""
    results = {n.outputs[0].id for n in found.results()}
    for key in found.covered:
        out = nodes[key].outputs[0]
        if out.id in results:
            continue
        if out.id in graph_reads or any(id(u) not in found.covered for u in out.users):
            return False
    return True


def _covers(found: CrossEntropy, node: Node, graph_reads: set[int], nodes: dict[int, Node]) -> bool:
    """Add ``node`` to what ``found`` covers when nothing outside then reads an intermediate; else change
    nothing and return False."""
    found.covered.add(id(node))
    if _closed(found, graph_reads, nodes):
        return True
    found.covered.discard(id(node))
    return False


def _take_in_edges(found: CrossEntropy, graph_reads: set[int], nodes: dict[int, Node]) -> None:
    """Extend a one-call cross-entropy by what its call can do on the way: the target's range check (the
    call raises the same error), the bias add that makes the logits (``z[M, C] + bias[C]``) and the sum of
    ``dx`` over the rows (the bias's gradient). Each is taken in only when nothing else reads what it
    replaces."""
    x = found.logits
    m, c = x.shape
    dtype = x.aval.dtype
    check = found.target.producer
    if check is not None and check.target == "check_index" and check.params.get("bound") == c \
            and tuple(check.params.get("allowed", ())) == (found.ignore_index,) and type(check.inputs[0]) is Var \
            and check.inputs[0].aval.dtype == "int64" and _same(tuple(check.inputs[0].shape), (m,)) \
            and _covers(found, check, graph_reads, nodes):
        found.check = check
    add = x.producer
    operands = [v for v in add.inputs if type(v) is Var] if add is not None and add.target == "add" else []
    if add is not None and len(operands) == 2 == len(add.inputs):
        for z, bias in (operands, operands[::-1]):
            if _same(tuple(z.shape), (m, c)) and tuple(bias.shape) == (c,) and z.aval.dtype == dtype \
                    and bias.aval.dtype == dtype:
                if _covers(found, add, graph_reads, nodes):
                    found.z, found.bias = z, bias
                break
    assert found.grad is not None
    for user in _only_users(found.grad.outputs[0]):
        if user.target == "reduce_sum" and tuple(user.params["axes"]) in ((0,), (-2,)) \
                and not user.params["keepdims"] and user.outputs[0].aval.dtype == dtype:
            found.bias_grad = user
            found.covered.add(id(user))
            break


def find_cross_entropies(graph: Graph) -> list[CrossEntropy]:
    """Every cross-entropy of ``graph`` the numba backend computes by one kernel call (see the module
    docstring), with or without its reverse sweep."""
    graph_reads = {v.id for v in graph.outputs if type(v) is Var}
    graph_reads |= {v.id for _, v in graph.mutations if type(v) is Var}
    graph_reads |= {g.value.id for g in graph.guards}
    nodes = {id(n): n for n in graph.nodes}
    found: list[CrossEntropy] = []
    taken: set[int] = set()
    for node in graph.nodes:
        if node.target != "log_softmax":
            continue
        match = _forward(node)
        if match is None:
            match = _backward_alone(node)
            if match is None or not _closed(match, graph_reads, nodes):
                continue
            _take_in_edges(match, graph_reads, nodes)
        else:
            with_grad = CrossEntropy(match.logits, match.target, match.ignore_index, match.loss,
                                     covered=set(match.covered))
            assert match.loss is not None
            count = match.loss.inputs[1]  # reduce_sum(cast(mask)), as _forward checked
            mask = count.producer.inputs[0].producer.inputs[0]  # type: ignore[union-attr]
            if _backward(with_grad, node, count, mask) and _closed(with_grad, graph_reads, nodes):
                match = with_grad
                if match.one_call:
                    _take_in_edges(match, graph_reads, nodes)
            elif not _closed(match, graph_reads, nodes):
                continue
        if match.covered & taken:
            continue
        taken |= match.covered
        found.append(match)
    return found


@dataclass
class GeluBackward:
    """``g * gelu'(x)`` of the erf form as recorded by ``gelu``'s backward rule (``Phi(x) + x phi(x)``, with
    ``erf`` and ``exp``): ``result`` is its last ``mul``; ``covered`` the ids of the nodes it replaces."""

    x: Var
    g: Var
    result: Node
    covered: set[int] = field(default_factory=set)


_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _by_literal(node: Node | None, target: str, value: float) -> Var | None:
    """The var operand of ``node`` (a ``target`` of a var and the literal ``value``), else ``None``."""
    if node is None or node.target != target or len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if type(a) is Var and _literal(b, value):
        return a
    if type(b) is Var and _literal(a, value):
        return b
    return None


def _made_by(v: Any, target: str, user: Node) -> Node | None:
    """The producer of ``v`` when it is a ``target`` node read by ``user`` only."""
    if type(v) is not Var or v.producer is None or v.producer.target != target or list(v.users) != [user]:
        return None
    return v.producer


def _gelu_derivative(d: Var, user: Node) -> tuple[Var, set[int]] | None:
    """``(x, covered)`` when ``d`` is ``(erf(x / sqrt 2) + 1) / 2 + x * exp(-x^2 / 2) / sqrt(2 pi)`` as the
    rule records it, read by ``user`` only."""
    add = _made_by(d, "add", user)
    if add is None:
        return None
    for cdf_value, tail_value in (add.inputs, add.inputs[::-1]):
        half = _made_by(cdf_value, "mul", add)
        one = _made_by(_by_literal(half, "mul", 0.5), "add", half) if half is not None else None
        erf = _made_by(_by_literal(one, "add", 1.0), "erf", one) if one is not None else None
        scaled = _made_by(erf.inputs[0], "mul", erf) if erf is not None else None
        x = _by_literal(scaled, "mul", _SQRT_HALF)
        tail = _made_by(tail_value, "mul", add)
        if x is None or tail is None or len(tail.inputs) != 2:
            continue
        pdf_value = _other(tail, x)
        pdf = _made_by(pdf_value, "mul", tail)
        exp = _made_by(_by_literal(pdf, "mul", _INV_SQRT_2PI), "exp", pdf) if pdf is not None else None
        neg_half = _made_by(exp.inputs[0], "mul", exp) if exp is not None else None
        square = _made_by(_by_literal(neg_half, "mul", -0.5), "mul", neg_half) if neg_half is not None else None
        if square is None or square.inputs[0] is not x or square.inputs[1] is not x:
            continue
        nodes = (add, half, one, erf, scaled, tail, pdf, exp, neg_half, square)
        return x, {id(n) for n in nodes if n is not None}
    return None


def find_gelu_backwards(graph: Graph) -> list[GeluBackward]:
    """Every erf-form ``g * gelu'(x)`` of ``graph`` (one float dtype, ``g`` of ``x``'s shape, nothing else
    reading the intermediates), which :func:`tensorplay.interpreters.eager.kernels.backward.gelu_backward`
    computes in one pass as the eager backward does."""
    graph_reads = {v.id for v in graph.outputs if type(v) is Var}
    graph_reads |= {v.id for _, v in graph.mutations if type(v) is Var}
    graph_reads |= {g.value.id for g in graph.guards}
    found: list[GeluBackward] = []
    for node in graph.nodes:
        if node.target != "mul" or len(node.inputs) != 2:
            continue
        out = node.outputs[0]
        if out.aval.dtype not in ("float32", "float64"):
            continue
        for g, d in (node.inputs, node.inputs[::-1]):
            if type(g) is not Var or type(d) is not Var or d.id in graph_reads:
                continue
            match = _gelu_derivative(d, node)
            if match is None:
                continue
            x, covered = match
            if not all(v.aval.dtype == out.aval.dtype and tuple(v.shape) == tuple(out.shape) for v in (g, x)):
                continue
            nodes = {id(n): n for n in graph.nodes if id(n) in covered}
            if any(nodes[k].outputs[0].id in graph_reads for k in covered):
                continue
            found.append(GeluBackward(x, g, node, covered | {id(node)}))
            break
    return found


@dataclass
class LayerNormBackward:
    """``dx`` (and ``dgamma`` when recorded) of ``layer_norm_last_axis(x, gamma, beta)`` as its backward rule
    records them (the statistics recomputed from ``x``): ``dx`` and ``dgamma`` are their last nodes
    (``None`` when not recorded; ``gamma`` is only read for ``dx``); ``covered`` the ids of the nodes one call
    replaces."""

    x: Var
    gamma: Var | None
    g: Var
    eps: float
    dx: Node | None = None
    dgamma: Node | None = None
    covered: set[int] = field(default_factory=set)
    forward: Node | None = None
    """The ``layer_norm_last_axis`` node normalising the same ``x`` with the same ``eps`` (same dtype), whose
    call can keep the rows' statistics for this backward to read instead of recomputing them."""


def _forward_layer_norm(found: LayerNormBackward) -> Node | None:
    """The forward ``layer_norm_last_axis(found.x, gamma, beta)`` of ``found``'s ``eps`` (every operand a var
    of ``x``'s dtype), if the graph has one."""
    dtype = found.x.aval.dtype
    for user in found.x.users:
        eps = user.params.get("eps")
        if user.target == "layer_norm_last_axis" and user.inputs[0] is found.x and isinstance(eps, (int, float)) \
                and not isinstance(eps, bool) and float(eps) == found.eps and user.outputs[0].aval.dtype == dtype \
                and all(type(v) is Var and v.aval.dtype == dtype for v in user.inputs):
            return user
    return None


def _mean_keep(v: Any, axis: int, user: Node | None = None) -> tuple[Var, list[Node]] | None:
    """``(operand, nodes)`` when ``v`` is ``reduce_sum(operand, (axis,), keepdims) / size`` (read by ``user``
    only, when given)."""
    if type(v) is not Var or v.producer is None or v.producer.target != "div":
        return None
    div = v.producer
    if user is not None and list(v.users) != [user]:
        return None
    total, size = div.inputs
    if type(total) is not Var or total.producer is None or total.producer.target != "reduce_sum" \
            or list(total.users) != [div]:
        return None
    reduce = total.producer
    operand = reduce.inputs[0]
    if type(operand) is not Var or not reduce.params["keepdims"]:
        return None
    rank = len(operand.shape)
    n = operand.shape[axis] if 0 <= axis < rank else None
    if type(n) is not int or tuple(a % rank for a in reduce.params["axes"]) != (axis,) or not _literal(size, float(n)):
        return None  # (a symbolic size: the recorded division is by that size, left as recorded)
    return operand, [div, reduce]


def _statistics(rstd: Node) -> tuple[Var, Var, float, list[Node]] | None:
    """``(x, centred, eps, nodes)`` when ``rstd`` is ``rsqrt(mean((x - mean(x))^2) + eps)`` over the last axis."""
    plus = rstd.inputs[0]
    if type(plus) is not Var or plus.producer is None or plus.producer.target != "add" or list(plus.users) != [rstd]:
        return None
    add = plus.producer
    var = next((v for v in add.inputs if type(v) is Var), None)
    eps = _other(add, var)
    if var is None or type(eps) is not Literal or not isinstance(eps.value, float):
        return None
    square = _mean_keep(var, len(var.shape) - 1, add)
    if square is None:
        return None
    squared, nodes = square
    mul = _made_by(squared, "mul", nodes[1])
    if mul is None or mul.inputs[0] is not mul.inputs[1] or type(mul.inputs[0]) is not Var:
        return None
    centred = mul.inputs[0]
    if centred.producer is None or centred.producer.target != "sub":
        return None
    x, mean = centred.producer.inputs
    found_mean = _mean_keep(mean, len(centred.shape) - 1, centred.producer)
    if type(x) is not Var or found_mean is None or found_mean[0] is not x:
        return None
    return x, centred, float(eps.value), [add, *nodes, mul, centred.producer, *found_mean[1]]


def _layer_norm_dx(r: Var, xhat: Var, xhat_node: Node, x: Var) -> tuple[Node, Var, Var, list[Node]] | None:
    """``(dx node, g, gamma, nodes)`` when ``r``'s other user computes
    ``rstd * ((gh - mean(gh)) - xhat * mean(gh * xhat))`` with ``gh = g * gamma``."""
    axis = len(x.shape) - 1
    dx_node = next((u for u in r.users if u is not xhat_node and u.target == "mul"), None)
    if dx_node is None or set(r.users) != {xhat_node, dx_node}:
        return None
    sub2 = _made_by(_other(dx_node, r), "sub", dx_node)
    if sub2 is None:
        return None
    left, right = sub2.inputs
    sub1 = _made_by(left, "sub", sub2)
    t2 = _made_by(right, "mul", sub2)
    if sub1 is None or t2 is None:
        return None
    gh, m1 = sub1.inputs
    found_m1 = _mean_keep(m1, axis, sub1)
    found_m2 = _mean_keep(_other(t2, xhat), axis, t2)
    if type(gh) is not Var or gh.producer is None or gh.producer.target != "mul" or found_m1 is None \
            or found_m1[0] is not gh or found_m2 is None:
        return None
    ghx = found_m2[0].producer
    if ghx is None or ghx.target != "mul" or _other(ghx, xhat) is not gh:
        return None
    gh_node = gh.producer
    g = next((v for v in gh_node.inputs if type(v) is Var and tuple(v.shape) == tuple(x.shape)), None)
    gamma = _other(gh_node, g)
    if g is None or type(gamma) is not Var or tuple(gamma.shape) != (x.shape[-1],):
        return None
    return dx_node, g, gamma, [dx_node, sub2, sub1, t2, *found_m1[1], *found_m2[1], ghx, gh_node]


def _layer_norm_backward(rstd: Node) -> LayerNormBackward | None:
    stats = _statistics(rstd)
    if stats is None:
        return None
    x, centred, eps, nodes = stats
    dtype = x.aval.dtype
    axis = len(x.shape) - 1
    r = rstd.outputs[0]
    xhat_node = next((u for u in centred.users if u.target == "mul" and _other(u, centred) is r), None)
    if dtype not in ("float32", "float64") or not axis or xhat_node is None:
        return None
    xhat = xhat_node.outputs[0]
    nodes += [rstd, xhat_node]
    g: Var | None = None
    gamma: Var | None = None
    dx: Node | None = None
    if len(r.users) > 1:  # dx = rstd * ((gh - mean(gh)) - xhat * mean(gh * xhat)), gh = g * gamma
        found_dx = _layer_norm_dx(r, xhat, xhat_node, x)
        if found_dx is None:
            return None
        dx, g, gamma, more = found_dx
        nodes += more
    dgamma: Node | None = None
    rest = [u for u in xhat.users if id(u) not in {id(n) for n in nodes}]
    if rest:  # dgamma = the sum over the leading axes of g * xhat
        if len(rest) != 1 or rest[0].target != "mul":
            return None
        product = rest[0]
        other = _other(product, xhat)
        total = _sole_user(product.outputs[0], "reduce_sum")
        if type(other) is not Var or (g is not None and other is not g) or total is None \
                or total.params["keepdims"] or tuple(a % len(x.shape) for a in total.params["axes"]) != tuple(range(axis)):
            return None
        g, dgamma = other, total
        nodes += [product, total]
    if g is None or (dx is None and dgamma is None) or tuple(g.shape) != tuple(x.shape):
        return None
    results = [n.outputs[0] for n in (dx, dgamma) if n is not None]
    if any(v.aval.dtype != dtype for v in [g, *results] + ([gamma] if gamma is not None else [])):
        return None
    found = LayerNormBackward(x, gamma, g, eps, dx, dgamma)
    found.covered = {id(n) for n in nodes}
    return found


def find_layer_norm_backwards(graph: Graph) -> list[LayerNormBackward]:
    """Every ``layer_norm`` backward of ``graph`` recorded by its composite rule, which
    :func:`tensorplay.interpreters.eager.kernels.backward.layer_norm_backward` computes in one row pass as
    the eager backward does (nothing else may read the intermediates)."""
    graph_reads = {v.id for v in graph.outputs if type(v) is Var}
    graph_reads |= {v.id for _, v in graph.mutations if type(v) is Var}
    graph_reads |= {g.value.id for g in graph.guards}
    nodes = {id(n): n for n in graph.nodes}
    found: list[LayerNormBackward] = []
    for node in graph.nodes:
        if node.target != "rsqrt":
            continue
        match = _layer_norm_backward(node)
        if match is None:
            continue
        results = {n.outputs[0].id for n in (match.dx, match.dgamma) if n is not None}
        closed = all(nodes[k].outputs[0].id in results or (nodes[k].outputs[0].id not in graph_reads and
                     all(id(u) in match.covered for u in nodes[k].outputs[0].users)) for k in match.covered)
        if closed:
            match.forward = _forward_layer_norm(match)
            found.append(match)
    return found


@dataclass
class PadSum:
    """``root`` (the last ``add``) sums zero ``pad`` s of pieces into pairwise disjoint windows: ``parts`` holds,
    per piece, the value copied (the input of the reshape that fed the pad, or the pad's own input), the
    window's low corner and the pad input's shape (static or symbolic sizes: the generated code computes
    the symbolic ones from the bound sizes); ``covering`` whether the windows fill the result.
    ``covered``: the ids of the adds, pads and those reshapes."""

    root: Node
    parts: list[tuple[Var, tuple[int, ...], tuple[Any, ...]]]
    covering: bool
    covered: set[int] = field(default_factory=set)
    products: list[tuple[Node, tuple[int, ...]] | None] = field(default_factory=list)
    """Per piece, ``(matmul node, perm)`` when its value is ``permute(matmul(a, b), perm)`` of a batched
    product (``a`` and ``b`` of its rank, above 2) read by nothing else: the GEMMs may write straight into
    the windows."""


def _permuted_product(value: Var, user: Node, graph_reads: set[int]) -> tuple[Node, tuple[int, ...]] | None:
    """``(matmul, perm)`` when ``value`` is ``permute(matmul(a, b), perm)`` read by ``user`` only, the product
    read by that permute only, ``a`` and ``b`` vars of the product's rank (above 2)."""
    permute = _made_by(value, "permute", user)
    if permute is None or value.id in graph_reads:
        return None
    product = permute.inputs[0]
    mm = _made_by(product, "matmul", permute)
    if mm is None or product.id in graph_reads:  # type: ignore[union-attr]
        return None
    rank = len(product.shape)  # type: ignore[union-attr]
    if rank <= 2 or not all(type(v) is Var and len(v.shape) == rank for v in mm.inputs):
        return None
    return mm, tuple(int(a) for a in permute.params["perm"])


def _zero_pad(v: Any, user: Node, dtype: str) -> tuple[Node, tuple[int, ...]] | None:
    """``(pad node, low corner)`` when ``v`` is a zero pad by static non-negative amounts of a ``dtype``
    var (of any sizes, symbolic ones included), read by ``user`` only."""
    pad = _made_by(v, "pad", user)
    if pad is None or type(pad.inputs[0]) is not Var or pad.inputs[0].aval.dtype != dtype:
        return None
    value = pad.params.get("value", 0.0)
    pads = [tuple(p) for p in pad.params["pads"]]
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != 0 \
            or not all(type(a) is int and a >= 0 for p in pads for a in p):
        return None
    return pad, tuple(p[0] for p in pads)


def _at_most(a: Any, b: Any) -> bool:
    """Whether ``a <= b`` holds for every value of the symbols in them (sizes are ``>= 0``); False where that
    is not certain."""
    diff: Any = b - a
    if type(diff) is int:
        return diff >= 0
    if not isinstance(diff, SymDim):
        return False
    low, _ = diff.bounds({})
    return low >= 0


def _disjoint(a: tuple[tuple[int, ...], tuple[Any, ...]], b: tuple[tuple[int, ...], tuple[Any, ...]]) -> bool:
    """Whether two boxes ``(low corner, shape)`` share no element, whatever the symbolic sizes of their
    shapes are."""
    return any(_at_most(la + da, lb) or _at_most(lb + db, la) for la, da, lb, db in zip(a[0], a[1], b[0], b[1]))


def find_pad_sums(graph: Graph) -> list[PadSum]:
    """Every chain of ``add`` s (float, nothing else reading its partial sums) whose leaves are zero pads
    into pairwise disjoint windows of its result, at least two."""
    graph_reads = {v.id for v in graph.outputs if type(v) is Var}
    graph_reads |= {v.id for _, v in graph.mutations if type(v) is Var}
    graph_reads |= {g.value.id for g in graph.guards}
    found: list[PadSum] = []
    taken: set[int] = set()
    for root in reversed(graph.nodes):
        out = root.outputs[0]
        dtype = out.aval.dtype
        if root.target != "add" or id(root) in taken or dtype not in ("float32", "float64"):
            continue
        adds = [root]
        leaves: list[tuple[Any, Node]] = []
        stack = [root]
        while stack:
            node = stack.pop()
            for v in node.inputs:
                inner = _made_by(v, "add", node)
                partial = None if inner is None else inner.outputs[0]
                if inner is not None and partial is not None and partial.aval.dtype == dtype \
                        and partial.id not in graph_reads and _same(tuple(partial.shape), tuple(out.shape)):
                    adds.append(inner)
                    stack.append(inner)
                else:
                    leaves.append((v, node))
        parts: list[tuple[Var, tuple[int, ...], tuple[Any, ...]]] = []
        products: list[tuple[Node, tuple[int, ...]] | None] = []
        covered = {id(n) for n in adds}
        boxes: list[tuple[tuple[int, ...], tuple[Any, ...]]] = []
        for v, user in leaves:
            got = None if type(v) is not Var or v.id in graph_reads or not _same(tuple(v.shape), tuple(out.shape)) \
                else _zero_pad(v, user, dtype)
            if got is None:
                break
            pad, low = got
            piece = pad.inputs[0]
            assert type(piece) is Var
            covered.add(id(pad))
            source = piece
            reader = pad
            made = _made_by(piece, "reshape", pad)
            if made is not None and type(made.inputs[0]) is Var and made.inputs[0].aval.dtype == dtype \
                    and piece.id not in graph_reads:
                source = made.inputs[0]
                reader = made
                covered.add(id(made))
            box = (low, tuple(d if isinstance(d, SymDim) else int(d) for d in piece.shape))
            if not all(_disjoint(box, other) for other in boxes):
                break
            boxes.append(box)
            parts.append((source, box[0], box[1]))
            products.append(_permuted_product(source, reader, graph_reads))
        else:
            if len(parts) >= 2:
                total = sum(math.prod(box[1]) for box in boxes)  # disjoint boxes: covering when the volumes add up
                taken |= covered
                found.append(PadSum(root, parts, _same(total, math.prod(out.shape)), covered, products))
    return found


@dataclass
class AttentionProbs:
    """An unmasked ``dot_product_attention`` node whose probabilities ``softmax(mul(matmul(q, swap(k)),
    scale))`` the graph recomputes (``softmax``: that node); ``covered`` the ids of the recomputing nodes
    (the attention itself included, which returns them)."""

    attention: Node
    softmax: Node
    covered: set[int] = field(default_factory=set)


def _swapped(kt: Any, k: Var) -> Node | None:
    """The ``permute`` node giving ``kt`` when ``kt`` is ``k`` with its last two axes exchanged: a permute
    of ``k``, or of the value ``k`` itself permutes (the simplifier composes the two)."""
    if type(kt) is not Var or kt.producer is None or kt.producer.target != "permute":
        return None
    node = kt.producer
    perm = tuple(node.params["perm"])
    rank = len(perm)
    swap = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    source = node.inputs[0]
    if source is k:
        return node if perm == swap else None
    made = k.producer
    if made is None or made.target != "permute" or made.inputs[0] is not source:
        return None
    inner = tuple(made.params["perm"])
    return node if len(inner) == rank and perm == tuple(inner[i] for i in swap) else None


def find_attention_probs(graph: Graph) -> list[AttentionProbs]:
    """Every unmasked attention (``q``, ``k``, ``v`` and the output of one float dtype, a static float
    ``scale``) whose probabilities the graph recomputes as its backward rule records them, the recomputed
    scores read by nothing else."""
    graph_reads = {v.id for v in graph.outputs if type(v) is Var}
    graph_reads |= {v.id for _, v in graph.mutations if type(v) is Var}
    graph_reads |= {g.value.id for g in graph.guards}
    found: list[AttentionProbs] = []
    taken: set[int] = set()
    for node in graph.nodes:
        if node.target != "dot_product_attention" or len(node.inputs) != 4:
            continue
        q, k, v, mask = node.inputs
        scale = node.params.get("scale")
        dtype = node.outputs[0].aval.dtype
        if (mask is not None and not (type(mask) is Literal and mask.value is None)) \
                or not isinstance(scale, float) or dtype not in ("float32", "float64") \
                or not all(type(a) is Var and a.aval.dtype == dtype for a in (q, k, v)):
            continue
        assert type(q) is Var and type(k) is Var
        for mm in q.users:
            if mm.target != "matmul" or mm.inputs[0] is not q or id(mm) in taken:
                continue
            permute = _swapped(mm.inputs[1], k)
            mul = _sole_user(mm.outputs[0], "mul")
            scores = None if mul is None else _by_literal(mul, "mul", scale)
            soft = None if mul is None else _sole_user(mul.outputs[0], "softmax")
            if permute is None or scores is not mm.outputs[0] or soft is None:
                continue
            axis = soft.params.get("axis")
            if type(axis) is not int or axis not in (-1, len(q.shape) - 1) \
                    or soft.outputs[0].aval.dtype != dtype or mm.outputs[0].aval.dtype != dtype \
                    or any(w.id in graph_reads for w in (mm.outputs[0], mul.outputs[0])):  # type: ignore[union-attr]
                continue
            covered = {id(node), id(mm), id(mul), id(soft)}
            if list(permute.outputs[0].users) == [mm] and permute.outputs[0].id not in graph_reads:
                covered.add(id(permute))
            taken |= covered
            found.append(AttentionProbs(node, soft, covered))
            break
    return found


__all__ = ["AttentionProbs", "CrossEntropy", "GeluBackward", "LayerNormBackward", "find_attention_probs", "find_cross_entropies", "find_gelu_backwards",
           "find_layer_norm_backwards", "find_pad_sums", "PadSum"]
