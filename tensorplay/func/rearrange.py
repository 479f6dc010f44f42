"""``rearrange``: reshape and transpose by a readable pattern (einops semantics).

A pattern is ``"left -> right"``. Each side lists axes: names (identifiers),
parenthesised groups (one axis that is the row-major composition of the names in
it), ``1`` or ``()`` (an axis of length 1) and at most one ``...`` (any number of
axes). Every name appears once on each side. Lengths needed to split a group on the
left are given as keyword arguments; one name per group may be left out and is
inferred. The operation is a reshape to the elementary axes, a permutation and a
reshape to the right-hand groups, all as ordinary operations of the tensor's
interpreter (so it works under every transform).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorplay.derived import reshape
from tensorplay.creation import stack
from tensorplay.errors import ArgumentTypeError, ShapeError
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
_ELLIPSIS = "..."
Group = list[str]


class RearrangeError(ShapeError):
    """A ``rearrange`` pattern is malformed or does not fit the tensor."""


def _tokenize(side: str, where: str) -> list[str]:
    tokens: list[str] = []
    i = 0
    while i < len(side):
        ch = side[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            tokens.append(ch)
            i += 1
        elif side.startswith("...", i):
            tokens.append(_ELLIPSIS)
            i += 3
        else:
            j = i
            while j < len(side) and not side[j].isspace() and side[j] not in "()" and not side.startswith("...", j):
                j += 1
            tokens.append(side[i:j])
            i = j
    for t in tokens:
        if t in ("(", ")", _ELLIPSIS):
            continue
        if t.isdigit():
            if t != "1":
                raise RearrangeError(f"rearrange: {where} has the number {t}; only 1 (an axis of length 1) is "
                                     "allowed as an anonymous axis")
        elif not t.isidentifier():
            raise RearrangeError(f"rearrange: {where} has an invalid axis name {t!r} (names are identifiers)")
    return tokens


def _parse(side: str, where: str) -> list[Group | str]:
    """A side as a list of entries: a name, ``"..."``, ``"1"``, or a group (list of names/``...``/``1``)."""
    out: list[Group | str] = []
    group: Group | None = None
    for t in _tokenize(side, where):
        if t == "(":
            if group is not None:
                raise RearrangeError(f"rearrange: {where} has nested parentheses")
            group = []
        elif t == ")":
            if group is None:
                raise RearrangeError(f"rearrange: {where} has an unmatched ')'")
            out.append(group)
            group = None
        elif group is not None:
            group.append(t)
        else:
            out.append(t)
    if group is not None:
        raise RearrangeError(f"rearrange: {where} has an unmatched '('")
    return out


def _names(entries: list[Group | str]) -> list[str]:
    names: list[str] = []
    for e in entries:
        for t in (e if isinstance(e, list) else [e]):
            if t != "1":
                names.append(t)
    return names


def _check_side(entries: list[Group | str], where: str) -> None:
    names = _names(entries)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        what = "the ellipsis '...'" if dup == [_ELLIPSIS] else f"axis name(s) {', '.join(dup)}"
        raise RearrangeError(f"rearrange: {where} uses {what} more than once")


def rearrange(tensor: AnyTensor | Sequence[AnyTensor], pattern: str, **axes_lengths: int) -> AnyTensor:
    """Rearrange the axes of ``tensor`` by ``pattern`` (einops semantics; see the module docstring).

    ``tensor`` may be a list or tuple of tensors of one shape: they are stacked on a new leading
    axis first. Shapes: ``"b c h w -> b (c h w)"`` takes ``[B, C, H, W]`` to ``[B, C*H*W]``;
    ``"b (h w) -> b h w"`` needs ``h=`` or ``w=``; ``"... c -> c ..."`` moves the last axis first.

    >>> import tensorplay as tp
    >>> from tensorplay.func import rearrange
    >>> x = tp.arange(24).reshape(2, 3, 4)
    >>> rearrange(x, "b h w -> b (h w)").shape
    tp.Size([2, 12])
    >>> rearrange(x, "b (h2 k) w -> b h2 (k w)", k=1).shape
    tp.Size([2, 3, 4])
    >>> rearrange(x, "b ... -> ... b").shape
    tp.Size([3, 4, 2])
    >>> rearrange([tp.zeros(3), tp.ones(3)], "n c -> c n").shape
    tp.Size([3, 2])
    """
    if isinstance(tensor, (list, tuple)):
        items = list(tensor)
        if not items:
            raise RearrangeError("rearrange: got an empty sequence of tensors")
        tensor = stack(items)
    if not isinstance(tensor, Tensor):
        raise ArgumentTypeError(f"rearrange: expected a tensor or a sequence of tensors, got {type(tensor).__name__}")
    if pattern.count("->") != 1:
        raise RearrangeError(f"rearrange: pattern {pattern!r} must have exactly one '->'")
    left_text, right_text = pattern.split("->")
    left = _parse(left_text, f"the left side of {pattern!r}")
    right = _parse(right_text, f"the right side of {pattern!r}")
    _check_side(left, f"the left side of {pattern!r}")
    _check_side(right, f"the right side of {pattern!r}")
    if any(isinstance(e, list) and _ELLIPSIS in e for e in left):
        raise RearrangeError(f"rearrange: the ellipsis '...' cannot be inside parentheses on the left side of "
                             f"{pattern!r}")
    left_names, right_names = set(_names(left)), set(_names(right))
    if left_names != right_names:
        only = sorted((left_names ^ right_names) - {_ELLIPSIS})
        if only:
            raise RearrangeError(f"rearrange: identifiers only on one side of {pattern!r} (they must be on both): "
                                 f"{', '.join(only)}")
        raise RearrangeError(f"rearrange: the ellipsis '...' must be on both sides of {pattern!r} or on neither")
    for name in axes_lengths:
        if name not in left_names:
            raise RearrangeError(f"rearrange: axis {name!r} is given a length but is not in the pattern {pattern!r}")

    x = tensor
    shape = tuple(x.shape)
    has_ellipsis = _ELLIPSIS in left_names
    n_fixed = len(left) - (1 if has_ellipsis else 0)
    if (not has_ellipsis and len(shape) != n_fixed) or (has_ellipsis and len(shape) < n_fixed):
        expected = f"at least {n_fixed}" if has_ellipsis else str(n_fixed)
        raise RearrangeError(f"rearrange: the left side of {pattern!r} has {expected} axes, the tensor has "
                             f"{len(shape)} (shape {list(shape)})")
    n_ell = len(shape) - n_fixed
    ell_names = [f"...{i}" for i in range(n_ell)]

    def expand(entries: list[Group | str]) -> list[Group]:
        groups: list[Group] = []
        for e in entries:
            if e == _ELLIPSIS:
                groups.extend([[n] for n in ell_names])
            elif isinstance(e, list):
                inner: Group = []
                for t in e:
                    inner.extend(ell_names if t == _ELLIPSIS else [t])
                groups.append(inner)
            else:
                groups.append([e])
        return groups

    left_groups, right_groups = expand(left), expand(right)
    sizes: dict[str, Any] = {k: v for k, v in axes_lengths.items()}
    for group, dim in zip(left_groups, shape):
        names = [n for n in group if n != "1"]
        unknown = [n for n in names if n not in sizes]
        if len(unknown) > 1:
            raise RearrangeError(f"rearrange: cannot infer the lengths of {', '.join(unknown)} in {pattern!r}; give "
                                 f"all but one of them as keyword arguments")
        known = 1
        for n in names:
            if n in sizes:
                known = known * sizes[n]
        if unknown:
            if isinstance(dim, int) and isinstance(known, int) and (known == 0 or dim % known):
                raise RearrangeError(f"rearrange: an axis of length {dim} cannot be split into ({' '.join(group)}) "
                                     f"with the given lengths ({known} from the known names) in {pattern!r}")
            sizes[unknown[0]] = dim // known
        elif not names and dim != 1:
            raise RearrangeError(f"rearrange: an axis of length {dim} is matched by an axis of length 1 in {pattern!r}")
        elif names and isinstance(dim, int) and isinstance(known, int) and known != dim:
            raise RearrangeError(f"rearrange: shape mismatch in {pattern!r}: ({' '.join(group)}) has length {known}, "
                                 f"the tensor's axis has length {dim}")
    elementary = [n for group in left_groups for n in group if n != "1"]
    order = [n for group in right_groups for n in group if n != "1"]
    x = reshape(x._ops, x, tuple(sizes[n] for n in elementary))
    perm = tuple(elementary.index(n) for n in order)
    if perm != tuple(range(len(perm))):
        x = x._ops.permute(x, perm=perm)
    final = []
    for group in right_groups:
        size: Any = 1
        for n in group:
            if n != "1":
                size = size * sizes[n]
        final.append(size)
    return reshape(x._ops, x, tuple(final))  # type: ignore[no-any-return]


__all__ = ["RearrangeError", "rearrange"]
