"""A vector on the left of a matrix product through every spelling a PyTorch user writes: ``tp.matmul(v, w)``
and ``v.matmul(w)`` type as ``v @ w`` does (``Tensor[K] @ Tensor[K, N] -> Tensor[N]``, and with batch dims on
the right ``Tensor[*B, K, N] -> Tensor[*B, N]``). ``Ops.matmul`` is the rank >= 2 primitive: a vector is
refused there at run time (``main`` checks it), so its signature has no vector form."""

from __future__ import annotations

from typing import Any, assert_type

import numpy as np

import tensorplay as tp
from tensorplay import Ops, Tensor
from tensorplay.dims import Batch, Feat, Hidden, Seq
from tensorplay.errors import ShapeError


def function_form(v: Tensor[Feat], w: Tensor[Feat, Hidden], ws: Tensor[Batch, Feat, Hidden],
                  wss: Tensor[Seq, Batch, Feat, Hidden]) -> Tensor[Hidden]:
    assert_type(tp.matmul(v, ws), Tensor[Batch, Hidden])
    assert_type(tp.matmul(v, wss), Tensor[Seq, Batch, Hidden])
    return tp.matmul(v, w)


def method_form(v: Tensor[Feat], w: Tensor[Feat, Hidden], ws: Tensor[Batch, Feat, Hidden]) -> Tensor[Batch, Hidden]:
    assert_type(v.matmul(w), Tensor[Hidden])
    assert_type(v @ w, Tensor[Hidden])
    return v.matmul(ws)


def matrix_forms_still_type(m: Tensor[Seq, Feat], w: Tensor[Feat, Hidden], v: Tensor[Feat]) -> Tensor[Seq]:
    assert_type(tp.matmul(m, w), Tensor[Seq, Hidden])
    return tp.matmul(m, v)


def primitive_takes_matrices(ops: Ops, a: Tensor[Batch, Seq, Feat], w: Tensor[Feat, Hidden]) -> Tensor[Batch, Seq, Hidden]:
    return ops.matmul(a, w)


def main() -> None:
    b, s, f, h = Batch(2), Seq(3), Feat(4), Hidden(5)
    v, w, ws, wss = tp.randn(f), tp.randn(f, h), tp.randn(b, f, h), tp.randn(s, b, f, h)
    got = function_form(v, w, ws, wss)
    np.testing.assert_allclose(got.numpy(), np.matmul(v.numpy(), w.numpy()), rtol=1e-5, atol=1e-6)
    assert tuple(tp.matmul(v, wss).shape) == np.matmul(v.numpy(), wss.numpy()).shape == (3, 2, 5)
    got2 = method_form(v, w, ws)
    np.testing.assert_allclose(got2.numpy(), np.matmul(v.numpy(), ws.numpy()), rtol=1e-5, atol=1e-6)
    m = tp.randn(s, f)
    assert tuple(matrix_forms_still_type(m, w, v).shape) == (3,)
    ops = tp.ops_of(v)
    assert tuple(primitive_takes_matrices(ops, tp.randn(b, s, f), w).shape) == (2, 3, 5)
    untyped: Any = ops
    try:
        untyped.matmul(v, w)
    except ShapeError:
        pass
    else:
        raise AssertionError("Ops.matmul took a vector; its signature should say so")
