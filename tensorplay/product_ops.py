"""Matrix and vector products of PyTorch's API, written once against :class:`~tensorplay.ops.Ops` from the
``matmul`` primitive and elementwise arithmetic: ``mm``, ``mv``, ``addmm``, ``addmv``, ``addr``, ``baddbmm``,
``addbmm``, ``inner``, ``vdot``, ``chain_matmul`` and ``matrix_power`` (``ger`` is ``outer``). Being
compositions, they run under every interpreter and transform, and their derivatives follow from those of
the primitives.

Operands are float or integer tensors of one dtype (bool is refused, as PyTorch's CPU kernels refuse it).
The ``add*`` forms compute ``beta * input + alpha * product``; with ``beta == 0`` the input is ignored (a NaN
in it does not propagate) and its gradient is 0, as PyTorch. Every function takes the interpreter first;
the tensor methods and ``tp.<name>`` forms pass it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tensorplay import derived as _d  # a module import: derived imports tensor, which imports this module
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from tensorplay.op_args import check_tensor as _check_tensor

if TYPE_CHECKING:
    from tensorplay.ops import Interpreter

AnyTensor = Any


# ---- argument checks ---------------------------------------------------------------------------------

def _operands(where: str, named: Sequence[tuple[str, Any, int]]) -> None:
    """Each ``(name, value, ndim)`` a tensor of that rank, all of one non-bool dtype."""
    first = None
    for name, value, ndim in named:
        _check_tensor(value, where, name)
        if value.ndim != ndim:
            raise ShapeError(f"{where}: expected {name} to be {ndim}-d, got shape {list(value.shape)}")
        if value.dtype.name == "bool":
            raise DTypeError(f"{where}: {name} must be a float or integer tensor, got bool; convert with .float()")
        if first is None:
            first = (name, value)
        elif value.dtype != first[1].dtype:
            raise DTypeError(f"{where}: expected {name} to have the dtype of {first[0]} ({first[1].dtype.name}), "
                             f"got {value.dtype.name}")


def _sizes_agree(where: str, what: str, m: Any, n: Any, shapes: Sequence[Any]) -> None:
    if isinstance(m, int) and isinstance(n, int) and m != n:
        raise ShapeError(f"{where}: the {what} differ ({m} and {n}): shapes " +
                         " and ".join(str(list(s)) for s in shapes))


def _scale(value: Any, where: str, name: str, integral: bool) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentTypeError(f"{where}: {name} must be a number, got {type(value).__name__} {value!r}")
    if integral and isinstance(value, float) and not value.is_integer():
        raise ArgumentError(f"{where}: for integer tensors {name} must be an integer, got {value!r}")
    return int(value) if integral else value


def _zero_link(ops: Interpreter, x: AnyTensor, value: Any) -> AnyTensor:
    """``value`` (broadcast with ``x``), reached by ``x``'s gradient as zeros: a selection that never picks
    ``x``, so a NaN in ``x`` stays out of the value and ``x`` still gets a (zero) gradient."""
    return ops.where(ops.full(shape=(), value=False, dtype="bool"), x, value)


def _add_scaled(ops: Interpreter, x: AnyTensor, product: AnyTensor, beta: Any, alpha: Any, where: str) -> AnyTensor:
    """``beta * x + alpha * product``; ``x`` broadcasts to ``product``'s shape (not beyond it)."""
    _check_tensor(x, where, "input")
    if x.dtype != product.dtype:
        raise DTypeError(f"{where}: expected input to have the operands' dtype {product.dtype.name}, got "
                         f"{x.dtype.name}")
    if x.ndim > product.ndim or any(
            isinstance(a, int) and isinstance(b, int) and a not in (1, b)
            for a, b in zip(tuple(x.shape)[::-1], tuple(product.shape)[::-1])):
        raise ShapeError(f"{where}: input of shape {list(x.shape)} does not broadcast to the product's shape "
                         f"{list(product.shape)}")
    integral = product.dtype.numpy.kind != "f"
    b: float = _scale(beta, where, "beta", integral)
    a: float = _scale(alpha, where, "alpha", integral)
    scaled: AnyTensor = product if a == 1 else ops.mul(product, a)
    if b == 0:
        out: AnyTensor = _zero_link(ops, x, scaled)
        if not _d.same_sizes(tuple(out.shape), tuple(product.shape)):
            out = ops.broadcast_to(out, shape=tuple(product.shape))
        return out
    term: AnyTensor = x if b == 1 else ops.mul(x, b)
    return ops.add(term, scaled)


# ---- products ---------------------------------------------------------------------------------------

def mm(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """``a[n, k] @ b[k, m] -> [n, m]``, as ``torch.mm``: 2-d only (no broadcasting), one dtype."""
    _operands("mm", (("input", a, 2), ("mat2", b, 2)))
    _sizes_agree("mm", "inner sizes", a.shape[1], b.shape[0], (a.shape, b.shape))
    return ops.matmul(a, b)


def mv(ops: Interpreter, a: AnyTensor, v: AnyTensor) -> AnyTensor:
    """``a[n, m] @ v[m] -> [n]``, as ``torch.mv``."""
    _operands("mv", (("input", a, 2), ("vec", v, 1)))
    _sizes_agree("mv", "inner sizes", a.shape[1], v.shape[0], (a.shape, v.shape))
    return _d.matmul(ops, a, v)


def bmm_checked(ops: Interpreter, a: AnyTensor, b: AnyTensor, where: str, names: tuple[str, str]) -> AnyTensor:
    """``a[B, n, k] @ b[B, k, m] -> [B, n, m]`` with ``where``'s checks."""
    _operands(where, ((names[0], a, 3), (names[1], b, 3)))
    _sizes_agree(where, "batch sizes", a.shape[0], b.shape[0], (a.shape, b.shape))
    _sizes_agree(where, "inner sizes", a.shape[2], b.shape[1], (a.shape, b.shape))
    return ops.matmul(a, b)


def addmm(ops: Interpreter, x: AnyTensor, m1: AnyTensor, m2: AnyTensor, beta: Any = 1, alpha: Any = 1) -> AnyTensor:
    """``beta * x + alpha * (m1[n, k] @ m2[k, m])``, ``x`` broadcasting to ``[n, m]``, as ``torch.addmm``."""
    _operands("addmm", (("mat1", m1, 2), ("mat2", m2, 2)))
    _sizes_agree("addmm", "inner sizes", m1.shape[1], m2.shape[0], (m1.shape, m2.shape))
    return _add_scaled(ops, x, ops.matmul(m1, m2), beta, alpha, "addmm")


def addmv(ops: Interpreter, x: AnyTensor, mat: AnyTensor, vec: AnyTensor, beta: Any = 1, alpha: Any = 1) -> AnyTensor:
    """``beta * x + alpha * (mat[n, m] @ vec[m])``, ``x`` broadcasting to ``[n]``, as ``torch.addmv``."""
    _operands("addmv", (("mat", mat, 2), ("vec", vec, 1)))
    _sizes_agree("addmv", "inner sizes", mat.shape[1], vec.shape[0], (mat.shape, vec.shape))
    return _add_scaled(ops, x, _d.matmul(ops, mat, vec), beta, alpha, "addmv")


def addr(ops: Interpreter, x: AnyTensor, vec1: AnyTensor, vec2: AnyTensor, beta: Any = 1, alpha: Any = 1) -> AnyTensor:
    """``beta * x + alpha * outer(vec1[n], vec2[m])``, ``x`` broadcasting to ``[n, m]``, as ``torch.addr``."""
    _operands("addr", (("vec1", vec1, 1), ("vec2", vec2, 1)))
    return _add_scaled(ops, x, _d.outer(ops, vec1, vec2), beta, alpha, "addr")


def baddbmm(ops: Interpreter, x: AnyTensor, b1: AnyTensor, b2: AnyTensor, beta: Any = 1, alpha: Any = 1) -> AnyTensor:
    """``beta * x + alpha * (b1[B, n, k] @ b2[B, k, m])``, ``x`` broadcasting to ``[B, n, m]``, as
    ``torch.baddbmm``."""
    return _add_scaled(ops, x, bmm_checked(ops, b1, b2, "baddbmm", ("batch1", "batch2")), beta, alpha, "baddbmm")


def addbmm(ops: Interpreter, x: AnyTensor, b1: AnyTensor, b2: AnyTensor, beta: Any = 1, alpha: Any = 1) -> AnyTensor:
    """``beta * x + alpha * sum_b (b1[b] @ b2[b])`` for ``b1[B, n, k]``, ``b2[B, k, m]``, ``x`` broadcasting to
    ``[n, m]``, as ``torch.addbmm``: one matrix product ``[n, B*k] @ [B*k, m]``."""
    _operands("addbmm", (("batch1", b1, 3), ("batch2", b2, 3)))
    _sizes_agree("addbmm", "batch sizes", b1.shape[0], b2.shape[0], (b1.shape, b2.shape))
    _sizes_agree("addbmm", "inner sizes", b1.shape[2], b2.shape[1], (b1.shape, b2.shape))
    batch, n, k = b1.shape
    left = _d.reshape(ops, _d.permute(ops, b1, (1, 0, 2)), (n, batch * k))
    right = _d.reshape(ops, b2, (batch * k, b2.shape[2]))
    return _add_scaled(ops, x, ops.matmul(left, right), beta, alpha, "addbmm")


def inner(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """Sums of products over the last dims, as ``torch.inner``: ``a[*A, k]``, ``b[*B, k]`` to ``[*A, *B]``; a
    0-d operand multiplies the other elementwise. One dtype."""
    _check_tensor(a, "inner", "input")
    _check_tensor(b, "inner", "other")
    if a.dtype != b.dtype:
        raise DTypeError(f"inner: expected both inputs to have the same dtype, got {a.dtype.name} and "
                         f"{b.dtype.name}")
    if a.ndim == 0 or b.ndim == 0:
        return ops.mul(a, b)
    _sizes_agree("inner", "last dims", a.shape[-1], b.shape[-1], (a.shape, b.shape))
    k = a.shape[-1]
    lead_a, lead_b = tuple(a.shape[:-1]), tuple(b.shape[:-1])
    product = ops.matmul(_d.reshape(ops, a, (_d.numel_of(lead_a), k)),
                         _d.permute(ops, _d.reshape(ops, b, (_d.numel_of(lead_b), k)), (1, 0)))
    return _d.reshape(ops, product, lead_a + lead_b)


def vdot(ops: Interpreter, a: AnyTensor, b: AnyTensor) -> AnyTensor:
    """``sum(conj(a[n]) * b[n])``, a 0-d tensor, as ``torch.vdot`` (tensorplay has real dtypes only, where it
    is ``dot``)."""
    _operands("vdot", (("input", a, 1), ("other", b, 1)))
    _sizes_agree("vdot", "lengths", a.shape[0], b.shape[0], (a.shape, b.shape))
    return _d.matmul(ops, a, b)


def _chain_order(dims: Sequence[int]) -> list[list[int]]:
    """The split points of the cheapest parenthesisation of matrices ``dims[i] x dims[i + 1]`` (the classic
    dynamic programme over multiply-add counts)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j], split[i][j] = min(
                (cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1], s) for s in range(i, j))
    return split


def chain_matmul(ops: Interpreter, matrices: Sequence[AnyTensor]) -> AnyTensor:
    """The product of 2-d matrices ``[d0, d1] @ [d1, d2] @ ...``, as ``torch.chain_matmul``, in the order of
    fewest multiplications (as PyTorch's ``multi_dot``); one matrix is returned as a copy."""
    if not matrices:
        raise ArgumentError("chain_matmul: expected one or more matrices, got none")
    _operands("chain_matmul", [(f"matrices[{i}]", m, 2) for i, m in enumerate(matrices)])
    for i in range(len(matrices) - 1):
        _sizes_agree("chain_matmul", f"inner sizes of matrices {i} and {i + 1}", matrices[i].shape[1],
                     matrices[i + 1].shape[0], (matrices[i].shape, matrices[i + 1].shape))
    if len(matrices) == 1:
        return ops.clone(matrices[0])
    dims = [m.shape[0] for m in matrices] + [matrices[-1].shape[1]]
    split = _chain_order(dims) if all(isinstance(d, int) for d in dims) else None

    def product(i: int, j: int) -> AnyTensor:
        if i == j:
            return matrices[i]
        s = split[i][j] if split is not None else j - 1
        return ops.matmul(product(i, s), product(s + 1, j))

    return product(0, len(matrices) - 1)


def matrix_power(ops: Interpreter, x: AnyTensor, n: int) -> AnyTensor:
    """``x[*B, m, m]`` multiplied by itself ``n`` times (``n >= 0``; ``n == 0`` is the identity, whose gradient
    is 0), as ``torch.matrix_power``, by repeated squaring. A negative ``n`` needs a matrix inverse, which
    tensorplay does not have: an :class:`ArgumentError`."""
    _check_tensor(x, "matrix_power", "input")
    if isinstance(n, bool) or not isinstance(n, int):
        raise ArgumentTypeError(f"matrix_power: n must be an int, got {type(n).__name__} {n!r}")
    if x.ndim < 2 or not _d.same_sizes([x.shape[-1]], [x.shape[-2]]):
        raise ShapeError(f"matrix_power: expected a square matrix or a batch of them [*B, m, m], got shape "
                         f"{list(x.shape)}")
    if x.dtype.name == "bool":
        raise DTypeError("matrix_power: input must be a float or integer tensor, got bool")
    if n < 0:
        raise ArgumentError(f"matrix_power: n = {n} is negative, which needs the matrix inverse; tensorplay has no "
                            "matrix inverse (tp.linalg is not available): use n >= 0")
    if n == 0:
        m = x.shape[-1]
        eye = ops.eq(ops.reshape(ops.iota(length=m, dtype="int64"), shape=(m, 1)),
                     ops.reshape(ops.iota(length=m, dtype="int64"), shape=(1, m)))
        identity = ops.cast(eye, dtype=x.dtype.name)
        return _zero_link(ops, x, ops.broadcast_to(identity, shape=tuple(x.shape)))
    result: AnyTensor = None
    base = x
    while True:
        if n & 1:
            result = base if result is None else ops.matmul(result, base)
        n >>= 1
        if not n:
            break
        base = ops.matmul(base, base)
    return result if result is not x else ops.clone(x)


__all__ = ["addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm_checked", "chain_matmul", "inner", "matrix_power",
           "mm", "mv", "vdot"]
