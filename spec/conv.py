"""Convolution: ``conv`` (cross-correlation), ``conv_transpose`` (its adjoint w.r.t. the
input) and ``conv_weight_grad`` (its adjoint w.r.t. the weight).

Layout: ``x[N, C, *spatial]`` with 1 to 3 spatial axes; ``conv`` weights are
``w[O, C/groups, *k]``, ``conv_transpose`` weights ``w[C, O/groups, *k]``.
Per spatial axis, with stride ``s``, zero padding ``p`` and dilation ``d``:

* conv: ``out = (in + 2p - d(k-1) - 1)//s + 1``; the dilated kernel
  ``d(k-1) + 1`` must fit in the padded input ``in + 2p``;
* conv_transpose: ``out = (in-1)s - 2p + d(k-1) + output_padding + 1`` with
  ``0 <= output_padding < max(s, d)`` and ``out >= 0``.

The references sum over kernel offsets in float64 (one strided window of the
padded input per offset) and round to the result dtype at the end.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from .aval import Aval
from .errors import ShapeError
from .shapes import (
    Array, aval_of, conv_out_size, conv_transpose_out_size, finish, float_result, fmt_shape, fmt_tuple,
    int_tuple, is_known, known, positive_int, spatial_rank,
)


def _check_rank_like(prim: str, name: str, a: Aval, x: Aval, layout: str, context: str) -> None:
    if len(a.shape) != len(x.shape):
        raise ShapeError(
            f"{prim}: {name} must have rank {len(x.shape)} like x ({layout}), got rank {len(a.shape)} ({context})")


def _check_divisible(prim: str, what: str, size: Any, groups: int, context: str) -> None:
    if is_known(size) and size % groups != 0:
        raise ShapeError(f"{prim}: {what} {size} is not divisible by groups {groups} ({context})")


def _conv_spatial(prim: str, x: Aval, kernel: tuple[Any, ...], s: tuple[int, ...], p: tuple[int, ...],
                  d: tuple[int, ...], context: str) -> tuple[Any, ...]:
    """Conv output sizes, checking that each dilated kernel fits in the padded input."""
    out = []
    for i, (size, k) in enumerate(zip(x.shape[2:], kernel)):
        if is_known(k) and k < 1:
            raise ShapeError(f"{prim}: kernel size must be positive, got {k} on spatial axis {i} ({context})")
        extent = d[i] * (k - 1) + 1
        padded = size + 2 * p[i]
        if known(extent, padded) and extent > padded:
            dilated = f" dilated by {d[i]} (extent {extent})" if d[i] != 1 else ""
            raise ShapeError(
                f"{prim}: kernel size {k}{dilated} on spatial axis {i} is larger than the padded input "
                f"{padded} ({context}, padding {fmt_tuple(p)})")
        out.append(conv_out_size(size, k, s[i], p[i], d[i]))
    return tuple(out)


def conv_nd_rule(x: Aval, w: Aval, *, stride: tuple[int, ...], padding: tuple[int, ...],
              dilation: tuple[int, ...], groups: int) -> Aval:
    """``x[N, C, *in], w[O, C/groups, *k] -> [N, O, *out]``, ``out = (in + 2p - d(k-1) - 1)//s + 1``.

    Checks: ranks, one stride/padding/dilation entry per spatial axis, ``s >= 1``,
    ``d >= 1``, ``p >= 0``, ``groups >= 1`` dividing ``C`` and ``O``,
    ``w.shape[1] * groups == C``, the dilated kernel fitting the padded input; float dtypes.
    """
    context = f"x: {fmt_shape(x.shape)}, w: {fmt_shape(w.shape)}"
    n = spatial_rank("conv_nd", "x", tuple(x.shape), context)
    _check_rank_like("conv_nd", "w", w, x, "[O, C/groups, *kernel]", context)
    s = int_tuple("conv_nd", "stride", stride, n, context, minimum=1)
    p = int_tuple("conv_nd", "padding", padding, n, context, minimum=0)
    d = int_tuple("conv_nd", "dilation", dilation, n, context, minimum=1)
    g = positive_int("conv_nd", "groups", groups, context)
    dtype = float_result("conv_nd", [("x", x), ("w", w)], context)
    channels, out_channels, per_group = x.shape[1], w.shape[0], w.shape[1]
    _check_divisible("conv_nd", "input channels C =", channels, g, context)
    _check_divisible("conv_nd", "output channels O = w.shape[0] =", out_channels, g, context)
    if known(channels, per_group) and per_group * g != channels:
        raise ShapeError(
            f"conv_nd: w.shape[1] must be C/groups = {channels}/{g} = {channels // g}, got {per_group} "
            f"({context}, groups {g})")
    out = _conv_spatial("conv_nd", x, tuple(w.shape[2:]), s, p, d, context)
    return Aval((x.shape[0], out_channels) + out, dtype)


def _window(padded: Array, offset: tuple[int, ...], s: tuple[int, ...], d: tuple[int, ...],
            out: tuple[int, ...]) -> Array:
    """``padded[:, :, o*s + offset*d]`` for every output position ``o``: shape ``[N, C, *out]``."""
    index = tuple(slice(k * di, k * di + si * (o - 1) + 1, si) for k, si, di, o in zip(offset, s, d, out))
    view: Array = padded[(slice(None), slice(None)) + index]
    return view


def _zero_pad(x: Array, p: tuple[int, ...]) -> Array:
    padded: Array = np.pad(x, [(0, 0), (0, 0)] + [(pi, pi) for pi in p])
    return padded


def conv_nd_ref(x: object, w: object, *, stride: tuple[int, ...], padding: tuple[int, ...],
             dilation: tuple[int, ...], groups: int) -> Array:
    """``out[n, o, q] = sum_{c in group(o), j} x_pad[n, c, q*s + j*d] * w[o, c, j]``."""
    out = conv_nd_rule(aval_of("conv_nd", "x", x), aval_of("conv_nd", "w", w), stride=stride, padding=padding,
                    dilation=dilation, groups=groups)
    xa, wa = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    cg, og = xa.shape[1] // groups, wa.shape[0] // groups
    out_sp = tuple(out.shape[2:])
    xp = _zero_pad(xa, tuple(padding))
    result = np.zeros(out.shape, dtype=np.float64)
    for offset in itertools.product(*(range(k) for k in wa.shape[2:])):
        win = _window(xp, offset, tuple(stride), tuple(dilation), out_sp)
        for grp in range(groups):
            xs = win[:, grp * cg:(grp + 1) * cg]
            ws = wa[(slice(grp * og, (grp + 1) * og), slice(None)) + offset]
            result[:, grp * og:(grp + 1) * og] += np.einsum("nc...,oc->no...", xs, ws)
    return finish(result, out)


def conv_transpose_nd_rule(x: Aval, w: Aval, *, stride: tuple[int, ...], padding: tuple[int, ...],
                        output_padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Aval:
    """``x[N, C, *in], w[C, O/groups, *k] -> [N, O, *out]``,
    ``out = (in-1)s - 2p + d(k-1) + output_padding + 1``.

    Checks as ``conv``, plus ``w.shape[0] == C`` and ``0 <= output_padding < max(s, d)``
    and a non-negative output size.
    """
    context = f"x: {fmt_shape(x.shape)}, w: {fmt_shape(w.shape)}"
    n = spatial_rank("conv_transpose_nd", "x", tuple(x.shape), context)
    _check_rank_like("conv_transpose_nd", "w", w, x, "[C, O/groups, *kernel]", context)
    s = int_tuple("conv_transpose_nd", "stride", stride, n, context, minimum=1)
    p = int_tuple("conv_transpose_nd", "padding", padding, n, context, minimum=0)
    op = int_tuple("conv_transpose_nd", "output_padding", output_padding, n, context, minimum=0)
    d = int_tuple("conv_transpose_nd", "dilation", dilation, n, context, minimum=1)
    g = positive_int("conv_transpose_nd", "groups", groups, context)
    dtype = float_result("conv_transpose_nd", [("x", x), ("w", w)], context)
    channels = x.shape[1]
    if known(channels, w.shape[0]) and channels != w.shape[0]:
        raise ShapeError(
            f"conv_transpose_nd: w.shape[0] must equal the input channels C = {channels} "
            f"(w is [C, O/groups, *kernel]), got {w.shape[0]} ({context})")
    _check_divisible("conv_transpose_nd", "input channels C =", channels, g, context)
    out = []
    for i, (size, k) in enumerate(zip(x.shape[2:], w.shape[2:])):
        if is_known(k) and k < 1:
            raise ShapeError(f"conv_transpose_nd: kernel size must be positive, got {k} on spatial axis {i} ({context})")
        if op[i] >= max(s[i], d[i]):
            raise ShapeError(
                f"conv_transpose_nd: output_padding {op[i]} on spatial axis {i} must be smaller than "
                f"max(stride, dilation) = {max(s[i], d[i])} ({context}, stride {fmt_tuple(s)}, "
                f"dilation {fmt_tuple(d)}, output_padding {fmt_tuple(op)})")
        size_out = conv_transpose_out_size(size, k, s[i], p[i], op[i], d[i])
        if is_known(size_out) and size_out < 0:
            raise ShapeError(
                f"conv_transpose_nd: output size {size_out} on spatial axis {i} is negative "
                f"({context}, padding {fmt_tuple(p)})")
        out.append(size_out)
    return Aval((x.shape[0], w.shape[1] * g) + tuple(out), dtype)


def conv_transpose_nd_ref(x: object, w: object, *, stride: tuple[int, ...], padding: tuple[int, ...],
                       output_padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Array:
    """Scatter form: ``x[n, c, i] * w[c, o, j]`` lands on output ``i*s + j*d - p`` (dropped when
    outside); ``output_padding`` only extends the output at the end."""
    out = conv_transpose_nd_rule(aval_of("conv_transpose_nd", "x", x), aval_of("conv_transpose_nd", "w", w),
                              stride=stride, padding=padding, output_padding=output_padding,
                              dilation=dilation, groups=groups)
    xa, wa = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    in_sp, out_sp, kernel = xa.shape[2:], tuple(out.shape[2:]), wa.shape[2:]
    cg, og = xa.shape[1] // groups, wa.shape[1]
    if 0 in in_sp:
        return finish(np.zeros(out.shape), out)
    full = tuple(max((n - 1) * si + di * (k - 1) + 1, pi + o)
                 for n, si, di, k, pi, o in zip(in_sp, stride, dilation, kernel, padding, out_sp))
    buf = np.zeros(tuple(out.shape[:2]) + full, dtype=np.float64)
    for offset in itertools.product(*(range(k) for k in kernel)):
        target = tuple(slice(j * di, j * di + (n - 1) * si + 1, si)
                       for j, si, di, n in zip(offset, stride, dilation, in_sp))
        for grp in range(groups):
            xs = xa[:, grp * cg:(grp + 1) * cg]
            ws = wa[(slice(grp * cg, (grp + 1) * cg), slice(None)) + offset]
            buf[(slice(None), slice(grp * og, (grp + 1) * og)) + target] += np.einsum("nc...,co->no...", xs, ws)
    crop = tuple(slice(pi, pi + o) for pi, o in zip(padding, out_sp))
    return finish(buf[(slice(None), slice(None)) + crop], out)


def conv_weight_grad_nd_rule(x: Aval, g: Aval, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                          padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Aval:
    """``x[N, C, *in], g[N, O, *out] -> [O, C/groups, *kernel_size]`` where ``g`` has exactly the
    shape ``conv`` gives for ``x`` with a ``[O, C/groups, *kernel_size]`` weight."""
    context = f"x: {fmt_shape(x.shape)}, g: {fmt_shape(g.shape)}"
    n = spatial_rank("conv_weight_grad_nd", "x", tuple(x.shape), context)
    _check_rank_like("conv_weight_grad_nd", "g", g, x, "[N, O, *out]", context)
    k = int_tuple("conv_weight_grad_nd", "kernel_size", kernel_size, n, context, minimum=1)
    s = int_tuple("conv_weight_grad_nd", "stride", stride, n, context, minimum=1)
    p = int_tuple("conv_weight_grad_nd", "padding", padding, n, context, minimum=0)
    d = int_tuple("conv_weight_grad_nd", "dilation", dilation, n, context, minimum=1)
    grp = positive_int("conv_weight_grad_nd", "groups", groups, context)
    dtype = float_result("conv_weight_grad_nd", [("x", x), ("g", g)], context)
    channels, out_channels = x.shape[1], g.shape[1]
    _check_divisible("conv_weight_grad_nd", "input channels C =", channels, grp, context)
    _check_divisible("conv_weight_grad_nd", "output channels O = g.shape[1] =", out_channels, grp, context)
    out = _conv_spatial("conv_weight_grad_nd", x, k, s, p, d, context)
    expected = (x.shape[0], out_channels) + out
    if any(known(a, b) and a != b for a, b in zip(expected, g.shape)):
        raise ShapeError(
            f"conv_weight_grad_nd: g must have the conv_nd output shape {fmt_shape(expected)}, "
            f"got {fmt_shape(g.shape)} ({context}, kernel_size {fmt_tuple(k)}, stride {fmt_tuple(s)}, "
            f"padding {fmt_tuple(p)}, dilation {fmt_tuple(d)})")
    return Aval((out_channels, channels // grp) + k, dtype)


def conv_weight_grad_nd_ref(x: object, g: object, *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                         padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Array:
    """``dw[o, c, j] = sum_{n, q} g[n, o, q] * x_pad[n, group(o)*C/groups + c, q*s + j*d]``."""
    out = conv_weight_grad_nd_rule(aval_of("conv_weight_grad_nd", "x", x), aval_of("conv_weight_grad_nd", "g", g),
                                kernel_size=kernel_size, stride=stride, padding=padding,
                                dilation=dilation, groups=groups)
    xa, ga = np.asarray(x, dtype=np.float64), np.asarray(g, dtype=np.float64)
    cg, og = xa.shape[1] // groups, ga.shape[1] // groups
    out_sp = tuple(ga.shape[2:])
    xp = _zero_pad(xa, tuple(padding))
    result = np.zeros(out.shape, dtype=np.float64)
    for offset in itertools.product(*(range(k) for k in kernel_size)):
        win = _window(xp, offset, tuple(stride), tuple(dilation), out_sp)
        positions = math.prod(out_sp)  # not -1: that is ambiguous for an empty batch
        for grp in range(groups):
            gs = ga[:, grp * og:(grp + 1) * og].reshape(ga.shape[0], og, positions)
            xs = win[:, grp * cg:(grp + 1) * cg].reshape(ga.shape[0], cg, positions)
            result[(slice(grp * og, (grp + 1) * og), slice(None)) + offset] = np.einsum("nop,ncp->oc", gs, xs)
    return finish(result, out)
