"""``einsum``, written once against :class:`~tensorplay.ops.Ops` (PyTorch's semantics).

The equation names each axis of each operand by a letter (``"bij,bjk->bik"``); ``...`` stands for
the axes not named, aligned from the right and broadcast across operands. Without ``->`` the output
is the ellipsis axes, then the letters that appear exactly once, in alphabetical order (upper case
first). A letter repeated within one operand takes the diagonal; a letter absent from the output
is summed over.

The contraction never materialises a broadcast product of its operands: each operand first sums
the axes no one else needs, then operands are combined left to right, two at a time, with one
batched ``matmul`` over the axes they share and nobody needs later (axes both keep become batch
axes; when they share none, the product is the result itself). Size-1 axes broadcast, as in
PyTorch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensorplay.tensor import Tensor
from tensorplay.derived import numel_of, permute, reshape
from tensorplay.errors import ShapeError

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any
Label = int
"""An axis label: a letter's code point, or a negative number for the ellipsis axes (``-1`` the last)."""


def _parse_term(term: str, where: str) -> tuple[list[Label], bool]:
    """The letters of one term (``"b...ij"``) and whether it has an ellipsis."""
    has_ellipsis = "..." in term
    if term.count("...") > 1:
        raise ShapeError(f"{where}: more than one ellipsis ('...') in the subscripts {term!r}")
    letters = term.replace("...", "")
    for c in letters:
        if not ("a" <= c <= "z" or "A" <= c <= "Z"):
            raise ShapeError(f"{where}: invalid subscript {c!r} in {term!r}; subscripts are letters a-z, A-Z "
                             "and '...'")
    head, _, tail = term.partition("...")
    return [ord(c) for c in head] + ([0] if has_ellipsis else []) + [ord(c) for c in tail], has_ellipsis


def _expand(labels: list[Label], has_ellipsis: bool, ndim: int, index: int, term: str) -> list[Label]:
    """``labels`` with the ellipsis marker (``0``) replaced by the labels of the operand's unnamed axes."""
    named = len(labels) - (1 if has_ellipsis else 0)
    if (named > ndim) if has_ellipsis else (named != ndim):
        raise ShapeError(f"einsum: operand {index} has {ndim} dimension(s) but the subscripts {term!r} name {named}"
                         f"{' (plus an ellipsis)' if has_ellipsis else ''}")
    if not has_ellipsis:
        return labels
    at = labels.index(0)
    return labels[:at] + list(range(-(ndim - named), 0)) + labels[at + 1:]


def _letter(label: Label) -> str:
    return chr(label) if label > 0 else f"...[{label}]"


def parse(equation: str, shapes: Sequence[tuple[Any, ...]]) -> tuple[list[list[Label]], list[Label]]:
    """The labels of every operand's axes and of the output's, for operands of ``shapes``."""
    where = "einsum"
    text = equation.replace(" ", "")
    inputs, arrow, output = text.partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise ShapeError(f"{where}: the equation {equation!r} has {len(terms)} operand term(s), got "
                         f"{len(shapes)} operand(s)")
    labels = [_expand(*_parse_term(t, where), len(s), i, t) for i, (t, s) in enumerate(zip(terms, shapes))]
    _check_sizes(labels, shapes)
    n_ellipsis = max((-min(ls, default=0) for ls in labels), default=0)
    ellipsis = list(range(-n_ellipsis, 0))
    if arrow:
        out, has_ellipsis = _parse_term(output, where)
        if has_ellipsis:
            at = out.index(0)
            out = out[:at] + ellipsis + out[at + 1:]
        seen = {label for ls in labels for label in ls}
        for label in out:
            if out.count(label) > 1:
                raise ShapeError(f"{where}: output subscript {_letter(label)} appears more than once in {equation!r}")
            if label > 0 and label not in seen:
                raise ShapeError(f"{where}: output subscript {_letter(label)} does not appear in any operand of "
                                 f"{equation!r}")
    else:
        counts: dict[Label, int] = {}
        for ls in labels:
            for label in ls:
                counts[label] = counts.get(label, 0) + 1
        out = ellipsis + sorted(label for label, n in counts.items() if label > 0 and n == 1)
    return labels, out


def _check_sizes(labels: list[list[Label]], shapes: Sequence[tuple[Any, ...]]) -> None:
    """Axes with one label have one size across operands (or size 1, which broadcasts); a label repeated
    within an operand (a diagonal) is checked where the diagonal is taken."""
    seen: dict[Label, tuple[Any, int]] = {}
    for i, (ls, shape) in enumerate(zip(labels, shapes)):
        for label, size in zip(ls, shape):
            if label not in seen or _is_one(seen[label][0]):
                seen[label] = (size, i)
                continue
            first, j = seen[label]
            if isinstance(size, int) and isinstance(first, int) and size not in (1, first):
                raise ShapeError(f"einsum: subscript {_letter(label)} has size {first} in operand {j} and {size} in "
                                 f"operand {i} (sizes must agree or be 1)")


def _is_one(size: Any) -> bool:
    return isinstance(size, int) and size == 1


def _diagonal(ops: Interpreter, x: AnyTensor, labels: list[Label]) -> tuple[AnyTensor, list[Label]]:
    """Take the diagonal over every label repeated in ``labels`` (``"ii->i"``)."""
    while True:
        repeated = next((label for label in labels if labels.count(label) > 1), None)
        if repeated is None:
            return x, labels
        first = labels.index(repeated)
        second = labels.index(repeated, first + 1)
        shape = tuple(x.shape)
        n: Any = shape[first]
        if shape[second] != n:
            raise ShapeError(f"einsum: subscript {_letter(repeated)} is repeated for axes of sizes {n} and "
                             f"{shape[second]} of one operand; a diagonal needs equal sizes")
        rest = [i for i in range(len(shape)) if i not in (first, second)]
        moved = permute(ops, x, rest + [first, second])
        flat = reshape(ops, moved, tuple(shape[i] for i in rest) + (n * n,))
        if isinstance(n, int):  # every (n+1)-th element of the flattened pair: a strided view
            starts = (0,) * len(rest) + (0,)
            stops = tuple(shape[i] for i in rest) + (n * n,)
            x = ops.slice(flat, starts=starts, stops=stops, steps=(1,) * len(rest) + (n + 1,))
        else:  # a symbolic size cannot be a step: gather the diagonal's positions
            picks = ops.mul(ops.iota(length=n, dtype="int64"), n + 1)
            x = ops.gather(flat, picks, axis=len(rest))
        labels = [labels[i] for i in rest] + [repeated]


def _sum_out(ops: Interpreter, x: AnyTensor, labels: list[Label], keep: set[Label]) -> tuple[AnyTensor, list[Label]]:
    """Sum the axes whose labels are not in ``keep``."""
    axes = tuple(i for i, label in enumerate(labels) if label not in keep)
    if not axes:
        return x, labels
    return ops.reduce_sum(x, axes=axes, keepdims=False), [label for label in labels if label in keep]


def _drop_axis(ops: Interpreter, x: AnyTensor, labels: list[Label], label: Label) -> tuple[AnyTensor, list[Label]]:
    """Remove the size-1 axis ``label``."""
    i = labels.index(label)
    shape = tuple(x.shape)
    return reshape(ops, x, shape[:i] + shape[i + 1:]), labels[:i] + labels[i + 1:]


def _combine(ops: Interpreter, a: AnyTensor, la: list[Label], b: AnyTensor, lb: list[Label],
             keep: set[Label]) -> tuple[AnyTensor, list[Label]]:
    """The product of two operands, summed over the labels they share that are not in ``keep``."""
    a, la = _sum_out(ops, a, la, keep | set(lb))
    b, lb = _sum_out(ops, b, lb, keep | set(la))
    size_a = dict(zip(la, a.shape))
    size_b = dict(zip(lb, b.shape))
    for label in [label for label in la if label in size_b and label not in keep]:
        if _is_one(size_a[label]) and not _is_one(size_b[label]):  # a broadcasts: sum b first
            a, la = _drop_axis(ops, a, la, label)
            b, lb = _sum_out(ops, b, lb, set(lb) - {label})
        elif _is_one(size_b[label]) and not _is_one(size_a[label]):
            b, lb = _drop_axis(ops, b, lb, label)
            a, la = _sum_out(ops, a, la, set(la) - {label})
    batch = [label for label in la if label in lb and label in keep]
    contracted = [label for label in la if label in lb and label not in keep]
    a_only = [label for label in la if label not in lb]
    b_only = [label for label in lb if label not in la]
    size_a, size_b = dict(zip(la, a.shape)), dict(zip(lb, b.shape))
    batch_a = tuple(size_a[label] for label in batch)
    batch_b = tuple(size_b[label] for label in batch)
    rows = tuple(size_a[label] for label in a_only)
    cols = tuple(size_b[label] for label in b_only)
    out_labels = batch + a_only + b_only
    if not contracted:  # an outer product over the unshared axes: the product is the result
        a2 = reshape(ops, permute(ops, a, [la.index(label) for label in batch + a_only]),
                     batch_a + rows + (1,) * len(b_only))
        b2 = reshape(ops, permute(ops, b, [lb.index(label) for label in batch + b_only]),
                     batch_b + (1,) * len(a_only) + cols)
        return ops.mul(a2, b2), out_labels
    inner = numel_of([size_a[label] for label in contracted])
    a2 = reshape(ops, permute(ops, a, [la.index(label) for label in batch + a_only + contracted]),
                 batch_a + (numel_of(rows), inner))
    b2 = reshape(ops, permute(ops, b, [lb.index(label) for label in batch + contracted + b_only]),
                 batch_b + (inner, numel_of(cols)))
    product = ops.matmul(a2, b2)
    batch_out = tuple(product.shape[:len(batch)])
    return reshape(ops, product, batch_out + rows + cols), out_labels


def einsum(ops: Interpreter, equation: str, operands: Sequence[AnyTensor]) -> AnyTensor:
    """``einsum(equation, *operands)`` (see the module docstring)."""
    if not isinstance(equation, str):
        raise ShapeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    if not operands:
        raise ShapeError("einsum: at least one operand is needed")
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise ShapeError(f"einsum: operand {i} must be a Tensor, got {type(x).__name__}")
    labels, out = parse(equation, [tuple(x.shape) for x in operands])
    terms = [_diagonal(ops, x, ls) for x, ls in zip(operands, labels)]
    needed_by = [set(out)] * len(terms)
    for i in range(len(terms) - 2, -1, -1):
        needed_by[i] = needed_by[i + 1] | set(terms[i + 1][1])
    x, lx = _sum_out(ops, *terms[0], needed_by[0])
    for i in range(1, len(terms)):
        x, lx = _combine(ops, x, lx, *terms[i], needed_by[i])
    x, lx = _sum_out(ops, x, lx, set(out))
    return permute(ops, x, [lx.index(label) for label in out]) if lx != out else x


__all__ = ["einsum", "parse"]
