"""The ``Ops`` protocol: the closed set of primitives every interpreter implements.

Conventions shared by every primitive
-------------------------------------
* Tensor inputs are positional; static parameters are keyword-only. An
  interpreter method for primitive ``p`` is called as
  ``ops.p(*inputs, **params)``; :func:`tensorplay.interpreters.graph.evaluate` relies on it.
* Elementwise binary primitives broadcast like numpy and accept Python
  scalars on either side. Scalars are *weak*: ``f32 * 2.0`` stays float32,
  an int tensor with a float scalar gives float32, float32 with float64 gives
  float64. Nothing silently upcasts to float64.
* ``axes`` accept negative values; duplicate or out-of-range axes raise
  :class:`~tensorplay.errors.AxisError`.
* Spatial primitives (``conv``, pooling) take ``x[N, C, *spatial]`` with 1, 2
  or 3 spatial dims; the prefix-polymorphic versions in
  :mod:`tensorplay.derived` flatten any leading shape into ``N``.
* Zero-size dims are valid everywhere: the result has the shape the rule gives.
* Shape rules live in :mod:`tensorplay.spec`; invalid geometry raises
  :class:`~tensorplay.errors.ShapeError` naming the primitive and the shapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, TypeVarTuple, overload

from tensorplay.spec.table import PRIMITIVES

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from tensorplay.prefix import (
        A1, A2, E, K1, K2, K3, L1, L2, L3, O1, O2, O3, T, Hd, Hv, InC, IntOrTuple, OutC, Padding,
    )
    from tensorplay.tensor import Tensor

S = TypeVarTuple("S")
Scalar = bool | int | float

# Typing-only names for the shape-polymorphic signatures (checked by mypy, ignored at run time).
# Binary primitives are typed for the broadcasts model code uses (same shape, a scalar or 0-d
# tensor, a trailing vector such as a bias, a keepdim result); other broadcasts type-check
# with tensors of unknown shape (``Tensor[*tuple[Any, ...]]``) and are checked at run time.
Lead = TypeVarTuple("Lead")
Rest = TypeVarTuple("Rest")
A0 = TypeVar("A0")
D = TypeVar("D")
M = TypeVar("M")
K = TypeVar("K")
N = TypeVar("N")
Nk = TypeVar("Nk")
Dv = TypeVar("Dv")
In = TypeVar("In")
Out = TypeVar("Out")
One = Literal[1]


class Ops(Protocol):
    """An interpreter of tensor programs. See the module docstring for conventions."""

    name: str

    # ---- elementwise unary: x[*S] -> [*S] ---------------------------------------------------
    def neg(self, x: Tensor[*S]) -> Tensor[*S]:
        """``-x``; bool is refused."""
        ...

    def abs(self, x: Tensor[*S]) -> Tensor[*S]:
        """``|x|``; gradient at 0 is 0 (``sign(0) = 0``)."""
        ...

    def sign(self, x: Tensor[*S]) -> Tensor[*S]:
        """-1, 0 or 1 (NaN stays NaN); gradient is 0 everywhere."""
        ...

    def exp(self, x: Tensor[*S]) -> Tensor[*S]:
        """``e**x``; integer inputs give float32."""
        ...

    def log(self, x: Tensor[*S]) -> Tensor[*S]:
        """Natural log; ``log(0) = -inf``, negative gives NaN (no exception)."""
        ...

    def log1p(self, x: Tensor[*S]) -> Tensor[*S]:
        """``log(1 + x)``, accurate near 0."""
        ...

    def expm1(self, x: Tensor[*S]) -> Tensor[*S]:
        """``exp(x) - 1``, accurate near 0."""
        ...

    def sqrt(self, x: Tensor[*S]) -> Tensor[*S]:
        """Square root; the gradient at 0 is ``+inf`` (as PyTorch), masked to 0 where the cotangent is 0."""
        ...

    def rsqrt(self, x: Tensor[*S]) -> Tensor[*S]:
        """``1 / sqrt(x)``."""
        ...

    def sin(self, x: Tensor[*S]) -> Tensor[*S]:
        """Sine (radians)."""
        ...

    def cos(self, x: Tensor[*S]) -> Tensor[*S]:
        """Cosine (radians)."""
        ...

    def tan(self, x: Tensor[*S]) -> Tensor[*S]:
        """Tangent (radians); ``inf``-like values near odd multiples of pi/2, no exception."""
        ...

    def tanh(self, x: Tensor[*S]) -> Tensor[*S]:
        """Hyperbolic tangent."""
        ...

    def sigmoid(self, x: Tensor[*S]) -> Tensor[*S]:
        """``1 / (1 + exp(-x))``, computed without overflow for large ``|x|``."""
        ...

    def relu(self, x: Tensor[*S]) -> Tensor[*S]:
        """``max(x, 0)``; the gradient at exactly 0 is 0 (as PyTorch)."""
        ...

    def gelu(self, x: Tensor[*S], *, approximate: str = "none") -> Tensor[*S]:
        """GELU: ``x * Phi(x)`` (``approximate="none"``, erf form) or the tanh form (``"tanh"``)."""
        ...

    def erf(self, x: Tensor[*S]) -> Tensor[*S]:
        """The error function."""
        ...

    def floor(self, x: Tensor[*S]) -> Tensor[*S]:
        """Round down; gradient 0. Integer inputs are returned unchanged."""
        ...

    def ceil(self, x: Tensor[*S]) -> Tensor[*S]:
        """Round up; gradient 0. Integer inputs are returned unchanged."""
        ...

    def round(self, x: Tensor[*S]) -> Tensor[*S]:
        """Round to the nearest integer, halves to the even one (``round(2.5) == 2``, as PyTorch and
        numpy); gradient 0. Integer inputs are returned unchanged."""
        ...

    def logical_not(self, x: Tensor[*S]) -> Tensor[*S]:
        """Boolean not; any dtype, result bool (non-zero is true)."""
        ...

    def bitwise_not(self, x: Tensor[*S]) -> Tensor[*S]:
        """``~x``: bitwise not of an integer tensor (two's complement: ``~6 == -7``), logical not of a bool
        tensor; the dtype is kept and float tensors are refused (as PyTorch)."""
        ...

    # ---- elementwise binary, numpy broadcasting ----------------------------------------------
    @overload
    def add(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def add(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def add(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def add(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def add(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def add(self, x: Any, y: Any, /) -> Any:
        """``x + y``; bool + bool is logical or."""
        ...

    @overload
    def sub(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def sub(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def sub(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def sub(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def sub(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def sub(self, x: Any, y: Any, /) -> Any:
        """``x - y``; bool is refused."""
        ...

    @overload
    def mul(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def mul(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def mul(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def mul(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def mul(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def mul(self, x: Any, y: Any, /) -> Any:
        """``x * y``."""
        ...

    @overload
    def div(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def div(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def div(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def div(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def div(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def div(self, x: Any, y: Any, /) -> Any:
        """True division; integer inputs give float32. ``x / 0`` is ``inf`` or NaN, no exception."""
        ...

    @overload
    def pow(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def pow(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def pow(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def pow(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def pow(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def pow(self, x: Any, y: Any, /) -> Any:
        """``x ** y``. The gradient w.r.t. ``y`` uses ``log(x)`` and is 0 where ``x == 0`` and ``y > 0``."""
        ...

    @overload
    def maximum(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def maximum(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def maximum(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def maximum(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def maximum(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def maximum(self, x: Any, y: Any, /) -> Any:
        """Elementwise max; NaN propagates; ties split the gradient equally."""
        ...

    @overload
    def minimum(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def minimum(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def minimum(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def minimum(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def minimum(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def minimum(self, x: Any, y: Any, /) -> Any:
        """Elementwise min; NaN propagates; ties split the gradient equally."""
        ...

    def atan2(self, y: Tensor[*S], x: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]:
        """The angle of the point ``(x, y)``, in ``[-pi, pi]``, elementwise with numpy broadcasting; integer
        inputs give float32. The gradient at the origin is NaN (0/0), as in PyTorch."""
        ...

    # ---- comparisons and logic: result bool ---------------------------------------------------
    @overload
    def eq(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def eq(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def eq(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def eq(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def eq(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def eq(self, x: Any, y: Any, /) -> Any:
        """``x == y`` (bool)."""
        ...

    @overload
    def ne(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def ne(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def ne(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def ne(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def ne(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def ne(self, x: Any, y: Any, /) -> Any:
        """``x != y`` (bool)."""
        ...

    @overload
    def lt(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def lt(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def lt(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def lt(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def lt(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def lt(self, x: Any, y: Any, /) -> Any:
        """``x < y`` (bool)."""
        ...

    @overload
    def le(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def le(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def le(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def le(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def le(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def le(self, x: Any, y: Any, /) -> Any:
        """``x <= y`` (bool)."""
        ...

    @overload
    def gt(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def gt(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def gt(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def gt(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def gt(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def gt(self, x: Any, y: Any, /) -> Any:
        """``x > y`` (bool)."""
        ...

    @overload
    def ge(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def ge(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def ge(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def ge(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def ge(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def ge(self, x: Any, y: Any, /) -> Any:
        """``x >= y`` (bool)."""
        ...

    @overload
    def logical_and(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def logical_and(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def logical_and(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def logical_and(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def logical_and(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def logical_and(self, x: Any, y: Any, /) -> Any:
        """Boolean and (non-zero is true)."""
        ...

    @overload
    def logical_or(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def logical_or(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def logical_or(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def logical_or(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def logical_or(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def logical_or(self, x: Any, y: Any, /) -> Any:
        """Boolean or (non-zero is true)."""
        ...

    @overload
    def bitwise_and(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def bitwise_and(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def bitwise_and(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def bitwise_and(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def bitwise_and(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def bitwise_and(self, x: Any, y: Any, /) -> Any:
        """``x & y``: bitwise and of integers, logical and of bools; operands promote as in arithmetic
        (Python int and bool scalars are weak); a float operand is refused."""
        ...

    @overload
    def bitwise_or(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def bitwise_or(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def bitwise_or(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def bitwise_or(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def bitwise_or(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def bitwise_or(self, x: Any, y: Any, /) -> Any:
        """``x | y``: bitwise or of integers, logical or of bools (dtypes as ``bitwise_and``)."""
        ...

    @overload
    def bitwise_xor(self, x: Tensor[*S], y: Tensor[*S] | Tensor[()] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def bitwise_xor(self, x: Scalar | Tensor[()], y: Tensor[*S], /) -> Tensor[*S]: ...

    @overload
    def bitwise_xor(self, x: Tensor[*Lead, D], y: Tensor[D], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def bitwise_xor(self, x: Tensor[*Lead, D], y: Tensor[*Lead, One], /) -> Tensor[*Lead, D]: ...  # type: ignore[overload-cannot-match]

    @overload
    def bitwise_xor(self, x: Tensor[A0, *Rest], y: Tensor[One, *Rest], /) -> Tensor[A0, *Rest]: ...  # type: ignore[overload-cannot-match]

    def bitwise_xor(self, x: Any, y: Any, /) -> Any:
        """``x ^ y``: bitwise exclusive or of integers, logical xor of bools (dtypes as ``bitwise_and``)."""
        ...

    @overload
    def where(self, cond: Tensor[*S], x: Tensor[*S] | Scalar, y: Tensor[*S] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def where(self, cond: Tensor[*tuple[Any, ...]], x: Tensor[*S], y: Tensor[*S] | Scalar, /) -> Tensor[*S]: ...

    @overload
    def where(self, cond: Tensor[*tuple[Any, ...]], x: Scalar, y: Tensor[*S], /) -> Tensor[*S]: ...

    def where(self, cond: Any, x: Any, y: Any, /) -> Any:
        """``x`` where ``cond`` (bool) else ``y``; all three broadcast. Gradients flow only to the chosen side."""
        ...

    # ---- reductions ----------------------------------------------------------------------------
    def reduce_sum(self, x: Tensor[*tuple[Any, ...]], *, axes: tuple[int, ...],
                   keepdims: bool = False) -> Tensor[*tuple[Any, ...]]:
        """Sum over ``axes`` (empty tuple: no reduction). Bool and int32 sum to int64. Empty sums are 0."""
        ...

    def reduce_prod(self, x: Tensor[*tuple[Any, ...]], *, axes: tuple[int, ...],
                    keepdims: bool = False) -> Tensor[*tuple[Any, ...]]:
        """Product over ``axes`` (empty tuple: no reduction): ``x[*S]`` to ``S`` without the axes (size 1
        with ``keepdims``). bool, int32 and int64 give int64 (integers wrap around), floats keep their
        dtype. The product of no elements is 1; NaN propagates. The gradient is exact at zeros (no
        division by zero): at a position ``i`` it is the product of the other elements."""
        ...

    def reduce_max(self, x: Tensor[*tuple[Any, ...]], *, axes: tuple[int, ...],
                   keepdims: bool = False) -> Tensor[*tuple[Any, ...]]:
        """Max over ``axes``; NaN propagates; ties split the gradient equally; an empty axis is an error."""
        ...

    def reduce_min(self, x: Tensor[*tuple[Any, ...]], *, axes: tuple[int, ...],
                   keepdims: bool = False) -> Tensor[*tuple[Any, ...]]:
        """Min over ``axes``; NaN propagates; ties split the gradient equally; an empty axis is an error."""
        ...

    def argmax(self, x: Tensor[*tuple[Any, ...]], *, axis: int,
               keepdims: bool = False) -> Tensor[*tuple[Any, ...]]:
        """Index (int64) of the first maximum along ``axis``; NaN counts as the maximum."""
        ...

    def argmin(self, x: Tensor[*tuple[Any, ...]], *, axis: int,
               keepdims: bool = False) -> Tensor[*tuple[Any, ...]]:
        """Index (int64) of the first minimum along ``axis``; NaN counts as the minimum."""
        ...

    # ---- scans and orderings along one axis ------------------------------------------------------
    def cumsum(self, x: Tensor[*S], *, axis: int) -> Tensor[*S]:
        """Running sums along ``axis`` (rank >= 1): ``out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...]``.
        bool and integers accumulate in int64, floats keep their dtype. Linear: its vjp is the running
        sum from the other end."""
        ...

    def argsort(self, x: Tensor[*S], *, axis: int, descending: bool = False) -> Tensor[*S]:
        """The int64 positions that sort ``x`` along ``axis`` (rank >= 1), ascending or ``descending``.
        Stable: equal values keep their order. NaN counts as larger than every number (last ascending,
        first descending), as PyTorch's ``sort``. No derivative (sorted values are a gather of these
        positions, which differentiates)."""
        ...

    # ---- structure -----------------------------------------------------------------------------
    def reshape(self, x: Tensor[*tuple[Any, ...]], *, shape: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """Same elements in row-major order, new shape (no ``-1``: derived ops resolve it)."""
        ...

    def permute(self, x: Tensor[*tuple[Any, ...]], *, perm: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """Axes reordered: result axis ``i`` is input axis ``perm[i]``."""
        ...

    def broadcast_to(self, x: Tensor[*tuple[Any, ...]], *, shape: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """numpy broadcasting to ``shape`` (leading axes added, size-1 axes stretched)."""
        ...

    def slice(self, x: Tensor[*tuple[Any, ...]], *, starts: tuple[int, ...], stops: tuple[int, ...],
              steps: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """Basic slicing, one (start, stop, step) per axis, already normalised
        (``0 <= start``; a negative step walks backwards and ``stop`` may be -1).
        The result has ``len(range(start, stop, step))`` entries on each axis."""
        ...

    def pad(self, x: Tensor[*tuple[Any, ...]], *, pads: tuple[tuple[int, int], ...],
            value: float = 0.0) -> Tensor[*tuple[Any, ...]]:
        """Constant padding, one non-negative ``(before, after)`` pair per axis."""
        ...

    def concat(self, *xs: Tensor[*tuple[Any, ...]], axis: int) -> Tensor[*tuple[Any, ...]]:
        """Join along ``axis``; every other axis must agree; dtypes promote."""
        ...

    def gather(self, x: Tensor[*tuple[Any, ...]], indices: Tensor[*tuple[Any, ...]], *,
               axis: int) -> Tensor[*tuple[Any, ...]]:
        """``numpy.take(x, indices, axis)``: result shape
        ``x.shape[:axis] + indices.shape + x.shape[axis+1:]``. Indices are integers in
        ``[-n, n)``; out of range is an ``IndexError`` naming the offending index."""
        ...

    def scatter_add(self, base: Tensor[*tuple[Any, ...]], indices: Tensor[*tuple[Any, ...]],
                    updates: Tensor[*tuple[Any, ...]], *, axis: int) -> Tensor[*tuple[Any, ...]]:
        """The adjoint of ``gather``: a copy of ``base`` with ``updates`` added at ``indices``
        along ``axis`` (repeated indices accumulate). ``updates`` has the shape ``gather`` gives."""
        ...

    def cast(self, x: Tensor[*S], *, dtype: str) -> Tensor[*S]:
        """Convert to ``dtype`` (float to int truncates toward zero)."""
        ...

    def stop_gradient(self, x: Tensor[*S]) -> Tensor[*S]:
        """Identity whose derivative is zero."""
        ...

    def check_index(self, x: Tensor[*S], *, bound: int, what: str, allowed: tuple[int, ...] = ()) -> Tensor[*S]:
        """``x`` (int32 or int64) unchanged, after checking when it runs that every value lies in
        ``[0, bound)`` or is one of ``allowed``; otherwise an :class:`~tensorplay.errors.IndexRangeError`
        naming ``what`` (e.g. ``"embedding: index"``), the position and the value. Consumers read the
        output, so a recorded check runs whenever they do (eagerly, in a graph module, under every
        transform; under ``vmap`` the position includes the batch axis). No derivative."""
        ...

    # ---- creation ------------------------------------------------------------------------------
    def full(self, *, shape: tuple[int, ...], value: float, dtype: str) -> Tensor[*tuple[Any, ...]]:
        """A tensor of ``shape`` filled with ``value``."""
        ...

    def iota(self, *, length: int, dtype: str) -> Tensor[*tuple[Any, ...]]:
        """``[0, 1, ..., length - 1]``."""
        ...

    # ---- linear algebra ------------------------------------------------------------------------
    @overload
    def matmul(self, a: Tensor[M, K], b: Tensor[K, N], /) -> Tensor[M, N]: ...

    @overload
    def matmul(self, a: Tensor[*Lead, M, K], b: Tensor[K, N], /) -> Tensor[*Lead, M, N]: ...

    @overload
    def matmul(self, a: Tensor[*Lead, M, K], b: Tensor[*Lead, K, N], /) -> Tensor[*Lead, M, N]: ...

    def matmul(self, a: Any, b: Any, /) -> Any:
        """Batched matrix product: ``a[*B1, M, K] @ b[*B2, K, N] -> [*broadcast(B1, B2), M, N]``.
        Both inputs have rank >= 2, so a vector is refused (a :class:`~tensorplay.errors.ShapeError`) and
        these overloads have no vector form; ``tp.matmul`` / ``Tensor.matmul`` / ``@`` take one on either side
        (``Tensor[K] @ Tensor[*B, K, N] -> Tensor[*B, N]``, ``Tensor[*B, K] @ Tensor[K] -> Tensor[*B]``)."""
        ...

    # ---- convolution ---------------------------------------------------------------------------
    def conv_nd(self, x: Tensor[*tuple[Any, ...]], w: Tensor[*tuple[Any, ...]], *, stride: tuple[int, ...],
             padding: tuple[int, ...], dilation: tuple[int, ...], groups: int) -> Tensor[*tuple[Any, ...]]:
        """Cross-correlation ``x[N, C, *in] * w[O, C/groups, *k] -> [N, O, *out]`` with
        ``out = (in + 2p - d(k-1) - 1)//s + 1`` per spatial dim (zero padding). No bias."""
        ...

    def conv_transpose_nd(self, x: Tensor[*tuple[Any, ...]], w: Tensor[*tuple[Any, ...]], *,
                       stride: tuple[int, ...], padding: tuple[int, ...], output_padding: tuple[int, ...],
                       dilation: tuple[int, ...], groups: int) -> Tensor[*tuple[Any, ...]]:
        """Transposed convolution ``x[N, C, *in] , w[C, O/groups, *k] -> [N, O, *out]`` with
        ``out = (in-1)s - 2p + d(k-1) + output_padding + 1``; ``output_padding < max(s, d)``.
        It is the adjoint (w.r.t. the input) of ``conv`` with the same weight."""
        ...

    def conv_weight_grad_nd(self, x: Tensor[*tuple[Any, ...]], g: Tensor[*tuple[Any, ...]], *,
                         kernel_size: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                         dilation: tuple[int, ...], groups: int) -> Tensor[*tuple[Any, ...]]:
        """The adjoint of ``conv`` w.r.t. its weight: ``x[N, C, *in], g[N, O, *out] -> [O, C/groups, *k]``,
        ``sum_n,p g[n,o,p] * x[n, c, p*s + k*d - pad]``."""
        ...

    # ---- pooling (padding entries are at most k//2) -------------------------------------------
    def max_pool_nd(self, x: Tensor[*tuple[Any, ...]], *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """Window max over ``x[N, C, *in]``; padding is ``-inf``; ``out = (in + 2p - k)//s + 1``.
        The gradient goes to the first maximal position of each window (row-major)."""
        ...

    def max_pool_backward_nd(self, x: Tensor[*tuple[Any, ...]], g: Tensor[*tuple[Any, ...]], *,
                          kernel_size: tuple[int, ...], stride: tuple[int, ...],
                          padding: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """Routes ``g[N, C, *out]`` to the first argmax of each window of ``x``; result like ``x``."""
        ...

    def max_pool_select_nd(self, x: Tensor[*tuple[Any, ...]], h: Tensor[*tuple[Any, ...]], *,
                        kernel_size: tuple[int, ...], stride: tuple[int, ...],
                        padding: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """Reads ``h`` (shaped like ``x``) at the first argmax of each window of ``x``:
        the adjoint of ``max_pool_backward`` w.r.t. ``g``; result shaped like ``max_pool(x)``."""
        ...

    def avg_pool_nd(self, x: Tensor[*tuple[Any, ...]], *, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                 padding: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """Window mean; padded positions count as zeros (divisor is always ``prod(k)``)."""
        ...

    def avg_pool_backward_nd(self, g: Tensor[*tuple[Any, ...]], *, input_shape: tuple[int, ...],
                          kernel_size: tuple[int, ...], stride: tuple[int, ...],
                          padding: tuple[int, ...]) -> Tensor[*tuple[Any, ...]]:
        """The adjoint of ``avg_pool``: spreads ``g[N, C, *out]`` evenly over each window;
        result has spatial shape ``input_shape``."""
        ...

    def smooth_max_pool_nd(self, x: Tensor[*tuple[Any, ...]], *, kernel_size: tuple[int, ...],
                        stride: tuple[int, ...], padding: tuple[int, ...], beta: float) -> Tensor[*tuple[Any, ...]]:
        """Window log-sum-exp ``(1/beta) * log(sum(exp(beta * x)))`` (padding ``-inf``); tends to
        max-pool as ``beta`` grows. Computed stably (shifted by the window max)."""
        ...

    def smooth_max_pool_backward_nd(self, x: Tensor[*tuple[Any, ...]], g: Tensor[*tuple[Any, ...]], *,
                                 kernel_size: tuple[int, ...], stride: tuple[int, ...],
                                 padding: tuple[int, ...], beta: float) -> Tensor[*tuple[Any, ...]]:
        """Spreads ``g[N, C, *out]`` over each window with the window's softmax(beta * x) weights."""
        ...

    # ---- normalisation and attention -----------------------------------------------------------
    def layer_norm_last_axis(self, x: Tensor[*Lead, D], gamma: Tensor[D], beta: Tensor[D], /, *,
                   eps: float) -> Tensor[*Lead, D]:
        """Normalise the last axis of ``x[..., D]`` (biased variance), then ``* gamma[D] + beta[D]``."""
        ...

    def batch_norm(self, x: Tensor[*S], mean: Tensor[*tuple[Any, ...]], var: Tensor[*tuple[Any, ...]],
                   weight: Tensor[*tuple[Any, ...]], bias: Tensor[*tuple[Any, ...]], *,
                   eps: float) -> Tensor[*S]:
        """``(x - mean) / sqrt(var + eps) * weight + bias`` with all four of shape ``[C]`` applied
        along axis 1 of ``x[N, C, *rest]``. Training mode passes the batch statistics."""
        ...

    def softmax(self, x: Tensor[*S], *, axis: int) -> Tensor[*S]:
        """``exp(x - max) / sum(exp(x - max))`` along ``axis``; a row of ``-inf`` gives NaN."""
        ...

    def log_softmax(self, x: Tensor[*S], *, axis: int) -> Tensor[*S]:
        """``x - logsumexp(x)`` along ``axis``."""
        ...

    def dot_product_attention(self, q: Tensor[*Lead, N, D], k: Tensor[*Lead, Nk, D], v: Tensor[*Lead, Nk, Dv],
                  mask: Tensor[*tuple[Any, ...]] | None, /, *, scale: float) -> Tensor[*Lead, N, Dv]:
        """Scaled dot-product attention ``softmax(scale * q k^T + mask) v``:
        ``q[*B, n, d], k[*B, m, d], v[*B, m, dv] -> [*B, n, dv]``. ``mask`` is ``None`` or bool,
        broadcastable to ``[*B, n, m]``; ``True`` means *may attend*. A fully masked row gives 0."""
        ...

    # ---- layer operations (prefix-polymorphic: any leading shape is kept) --------------------
    # Typed with the overloads of the functions of tensorplay.prefix (tests/test_ops_surface.py keeps them equal).
    @overload
    def linear(self, w: Tensor[Out, In], b: Tensor[Out], x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]: ...

    @overload
    def linear(self, w: Tensor[Out, In], b: None, x: Tensor[*Lead, In]) -> Tensor[*Lead, Out]: ...

    def linear(self, *args: Any, **kwargs: Any) -> Any:
        """``x[*lead, in] @ w[out, in]^T + b[out] -> [*lead, out]`` (``b`` may be ``None``). See :func:`tensorplay.prefix.linear` for the parameters, shapes and conventions."""
        ...

    @overload
    def map(self, lead: Literal[0], x: Tensor[*S], f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[*T]: ...

    @overload
    def map(self, lead: Literal[1], x: Tensor[A0, *S], f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[A0, *T]: ...

    @overload
    def map(self, lead: Literal[2], x: Tensor[A0, A1, *S],
            f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[A0, A1, *T]: ...

    @overload
    def map(self, lead: Literal[3], x: Tensor[A0, A1, A2, *S],
            f: Callable[[Tensor[*S]], Tensor[*T]]) -> Tensor[A0, A1, A2, *T]: ...

    @overload
    def map(self, lead: int, x: Tensor[*tuple[Any, ...]],
            f: Callable[[Tensor[*tuple[Any, ...]]], Tensor[*tuple[Any, ...]]]) -> Tensor[*tuple[Any, ...]]: ...

    def map(self, *args: Any, **kwargs: Any) -> Any:
        """Apply the single-sample function ``f`` to every sample of ``x[*lead, *sample]``: ``[*lead, *f_out]``. See :func:`tensorplay.prefix.map` for the parameters, shapes and conventions."""
        ...

    @overload  # padding='same' keeps the input's spatial dims (more specific than the int-sized overloads below)
    def conv(self, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],  # type: ignore[overload-overlap]
             stride: Literal[1] = 1, *, padding: Literal["same"], dilation: IntOrTuple = 1,
             groups: Literal[1] = 1) -> Tensor[*Lead, OutC, L1, L2]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],  # type: ignore[overload-overlap]
             stride: Literal[1] = 1, *, padding: Literal["same"], dilation: IntOrTuple = 1,
             groups: Literal[1] = 1) -> Tensor[*Lead, OutC, L1]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None,  # type: ignore[overload-overlap]
             x: Tensor[*Lead, InC, L1, L2, L3],
             stride: Literal[1] = 1, *, padding: Literal["same"], dilation: IntOrTuple = 1,
             groups: Literal[1] = 1) -> Tensor[*Lead, OutC, L1, L2, L3]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
             out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, OutC, O1, O2]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
             out: tuple[type[O1]]) -> Tensor[*Lead, OutC, O1]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2, L3],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
             out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
             out: tuple[O1, O2]) -> Tensor[*Lead, OutC, O1, O2]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
             out: tuple[O1]) -> Tensor[*Lead, OutC, O1]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2, L3],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
             out: tuple[O1, O2, O3]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1,
             groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1,
             groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int]: ...

    @overload
    def conv(self, w: Tensor[OutC, InC, K1, K2, K3], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2, L3],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1,
             groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int, int]: ...

    @overload
    def conv(self, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None, x: Tensor[*tuple[Any, ...]],
             stride: IntOrTuple, padding: Padding, dilation: IntOrTuple, groups: int, *,
             out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...

    @overload
    def conv(self, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None, x: Tensor[*tuple[Any, ...]],
             stride: IntOrTuple = 1, padding: Padding = 0, dilation: IntOrTuple = 1, *, groups: int,
             out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...

    def conv(self, *args: Any, **kwargs: Any) -> Any:
        """N-d convolution of ``x[*lead, inC, *spatial]`` with ``w[outC, inC/groups, *k]`` plus ``b[outC]``. See :func:`tensorplay.prefix.conv` for the parameters, shapes and conventions."""
        ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
                       stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                       dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                       out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, OutC, O1, O2]: ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
                       stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                       dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                       out: tuple[type[O1]] | tuple[O1]) -> Tensor[*Lead, OutC, O1]: ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
                       stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                       dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                       out: tuple[O1, O2]) -> Tensor[*Lead, OutC, O1, O2]: ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1, K2, K3], b: Tensor[OutC] | None,
                       x: Tensor[*Lead, InC, L1, L2, L3], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                       output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                       out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1, K2, K3], b: Tensor[OutC] | None,
                       x: Tensor[*Lead, InC, L1, L2, L3], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                       output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, groups: Literal[1] = 1, *,
                       out: tuple[O1, O2, O3]) -> Tensor[*Lead, OutC, O1, O2, O3]: ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1, K2], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1, L2],
                       stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                       dilation: IntOrTuple = 1, groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int]: ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1], b: Tensor[OutC] | None, x: Tensor[*Lead, InC, L1],
                       stride: IntOrTuple = 1, padding: IntOrTuple = 0, output_padding: IntOrTuple = 0,
                       dilation: IntOrTuple = 1, groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int]: ...

    @overload
    def conv_transpose(self, w: Tensor[InC, OutC, K1, K2, K3], b: Tensor[OutC] | None,
                       x: Tensor[*Lead, InC, L1, L2, L3], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                       output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1,
                       groups: Literal[1] = 1) -> Tensor[*Lead, OutC, int, int, int]: ...

    @overload
    def conv_transpose(self, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None,
                       x: Tensor[*tuple[Any, ...]], stride: IntOrTuple, padding: IntOrTuple, output_padding: IntOrTuple,
                       dilation: IntOrTuple, groups: int, *, out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...

    @overload
    def conv_transpose(self, w: Tensor[*tuple[Any, ...]], b: Tensor[*tuple[Any, ...]] | None,
                       x: Tensor[*tuple[Any, ...]], stride: IntOrTuple = 1, padding: IntOrTuple = 0,
                       output_padding: IntOrTuple = 0, dilation: IntOrTuple = 1, *, groups: int,
                       out: Sequence[Any] | None = None) -> Tensor[*tuple[Any, ...]]: ...

    def conv_transpose(self, *args: Any, **kwargs: Any) -> Any:
        """Transposed convolution of ``x[*lead, inC, *spatial]`` with ``w[inC, outC/groups, *k]`` plus ``b[outC]``. See :func:`tensorplay.prefix.conv_transpose` for the parameters, shapes and conventions."""
        ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, O1, O2]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[type[O1]]) -> Tensor[*Lead, O1]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, O1, O2, O3]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[O1, O2]) -> Tensor[*Lead, O1, O2]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[O1]) -> Tensor[*Lead, O1]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[O1, O2, O3]) -> Tensor[*Lead, O1, O2, O3]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: int | tuple[int, int], stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*Lead, int, int]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1], kernel_size: tuple[int], stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*Lead, int]: ...

    @overload
    def max_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: tuple[int, int, int], stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*Lead, int, int, int]: ...

    @overload
    def max_pool(self, x: Tensor[*tuple[Any, ...]], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*tuple[Any, ...]]: ...

    def max_pool(self, *args: Any, **kwargs: Any) -> Any:
        """Window max over the trailing spatial axes of ``x[*lead, *spatial]``. See :func:`tensorplay.prefix.max_pool` for the parameters, shapes and conventions."""
        ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, O1, O2]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[type[O1]]) -> Tensor[*Lead, O1]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, O1, O2, O3]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[O1, O2]) -> Tensor[*Lead, O1, O2]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[O1]) -> Tensor[*Lead, O1]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0, *, out: tuple[O1, O2, O3]) -> Tensor[*Lead, O1, O2, O3]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: int | tuple[int, int], stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*Lead, int, int]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1], kernel_size: tuple[int], stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*Lead, int]: ...

    @overload
    def avg_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: tuple[int, int, int], stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*Lead, int, int, int]: ...

    @overload
    def avg_pool(self, x: Tensor[*tuple[Any, ...]], kernel_size: IntOrTuple, stride: IntOrTuple | None = None,
                 padding: IntOrTuple = 0) -> Tensor[*tuple[Any, ...]]: ...

    def avg_pool(self, *args: Any, **kwargs: Any) -> Any:
        """Window mean over the trailing spatial axes (padding counts as zeros). See :func:`tensorplay.prefix.avg_pool` for the parameters, shapes and conventions."""
        ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float, *, out: tuple[type[O1], type[O2]]) -> Tensor[*Lead, O1, O2]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float, *, out: tuple[type[O1]]) -> Tensor[*Lead, O1]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float, *, out: tuple[type[O1], type[O2], type[O3]]) -> Tensor[*Lead, O1, O2, O3]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float, *, out: tuple[O1, O2]) -> Tensor[*Lead, O1, O2]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float, *, out: tuple[O1]) -> Tensor[*Lead, O1]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float, *, out: tuple[O1, O2, O3]) -> Tensor[*Lead, O1, O2, O3]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1, L2], kernel_size: int | tuple[int, int], stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float) -> Tensor[*Lead, int, int]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1], kernel_size: tuple[int], stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float) -> Tensor[*Lead, int]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*Lead, L1, L2, L3], kernel_size: tuple[int, int, int], stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float) -> Tensor[*Lead, int, int, int]: ...

    @overload
    def smooth_max_pool(self, x: Tensor[*tuple[Any, ...]], kernel_size: IntOrTuple, stride: IntOrTuple | None,
                        padding: IntOrTuple, beta: float) -> Tensor[*tuple[Any, ...]]: ...

    def smooth_max_pool(self, *args: Any, **kwargs: Any) -> Any:
        """Window ``logsumexp(beta x) / beta`` (padded cells count as zeros; ``beta`` finite, non-zero). See :func:`tensorplay.prefix.smooth_max_pool` for the parameters, shapes and conventions."""
        ...

    def layer_norm(self, x: Tensor[*Lead, D], gamma: Tensor[D] | None = None, beta: Tensor[D] | None = None,
                   eps: float = 1e-5) -> Tensor[*Lead, D]:
        """See :func:`tensorplay.prefix.layer_norm`."""
        ...

    @overload
    def attention(self, wq: Tensor[D, Hd], wk: Tensor[D, Hd], wv: Tensor[D, Hv], wo: Tensor[Hv, E],
                  x: Tensor[*Lead, N, D], num_heads: int, mask: Tensor[*tuple[Any, ...]] | None = None,
                  output_bias: None = None) -> Tensor[*Lead, N, E]: ...

    @overload
    def attention(self, wq: Tensor[D, Hd], wk: Tensor[D, Hd], wv: Tensor[D, Hv], wo: Tensor[Hv, E],
                  x: Tensor[*Lead, N, D], num_heads: int, mask: Tensor[*tuple[Any, ...]] | None = None, *,
                  output_bias: Tensor[E]) -> Tensor[*Lead, N, E]: ...

    def attention(self, *args: Any, **kwargs: Any) -> Any:
        """Multi-head self-attention on ``x[*lead, n, d_model]`` with input-major weights (``q = x @ wq``). See :func:`tensorplay.prefix.attention` for the parameters, shapes and conventions."""
        ...

    def dropout(self, x: Tensor[*S], p: float = 0.5, training: bool = True, *,
                key: Tensor[*tuple[Any, ...]] | None = None) -> Tensor[*S]:
        """See :func:`tensorplay.prefix.dropout`."""
        ...

    # ---- randomness (counter based: the key is an input value) -------------------------------
    def random_key(self) -> Tensor[*tuple[Any, ...]]:
        """A fresh key (int64 ``[2]``: seed, counter) for the random primitives: the global generator's next
        key eagerly (``tp.manual_seed`` sets it), a key input of a recorded graph (drawn again at every
        run), one key per sample under ``vmap(randomness="different")``."""
        ...

    def random_uniform(self, key: Tensor[*tuple[Any, ...]], *, shape: tuple[int, ...],
                       dtype: str) -> Tensor[*tuple[Any, ...]]:
        """Uniform in ``[0, 1)`` from ``key`` (int64 ``[2]``: seed, counter) via Philox."""
        ...

    def random_normal(self, key: Tensor[*tuple[Any, ...]], *, shape: tuple[int, ...],
                      dtype: str) -> Tensor[*tuple[Any, ...]]:
        """Standard normal from ``key`` (int64 ``[2]``: seed, counter) via Philox."""
        ...

    def random_randint(self, key: Tensor[*tuple[Any, ...]], *, shape: tuple[int, ...], low: int, high: int,
                       dtype: str) -> Tensor[*tuple[Any, ...]]:
        """Integers uniform in ``[low, high)`` from ``key``."""
        ...


class Interpreter(Ops, Protocol):
    """An ``Ops`` plus the services a :class:`~tensorplay.tensor.Tensor` needs from its interpreter.

    ``level`` orders interpreters when tensors of several meet in one operation
    (the eager interpreter is 0; each graph recorder is above the interpreters
    alive when it was made): the highest level handles the operation.
    """

    level: int

    def concrete(self, x: Tensor[*tuple[Any, ...]]) -> Any:
        """The value of ``x`` as a numpy array; a symbolic recorder raises ``GraphCaptureError``."""
        ...

    def constant(self, value: Any) -> Tensor[*tuple[Any, ...]]:
        """Lift a numpy array (or a tensor of a lower-level interpreter) into this interpreter."""
        ...

    def apply(self, target: str, inputs: Sequence[Any], params: Mapping[str, Any] | None = None) -> Any:
        """Run primitive ``target`` on ``inputs`` with static ``params`` (``getattr(ops, target)(*inputs,
        **params)``)."""
        ...

    def format(self, x: Tensor[*tuple[Any, ...]]) -> str:
        """``repr(x)``."""
        ...

    def set_requires_grad(self, x: Tensor[*tuple[Any, ...]], flag: bool) -> None:
        """``x.requires_grad = flag`` (the eager interpreter validates and records it for the tape)."""
        ...

    def backward(self, x: Tensor[*tuple[Any, ...]], gradient: Any, retain_graph: bool, create_graph: bool) -> None:
        """``x.backward(gradient)``: the eager tape (a recorder refuses and points to ``tensorplay.func``)."""
        ...

    def detach(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """``x.detach()``: the same value without gradient history."""
        ...

    def contiguous(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """``x.contiguous()``: a row-major tensor with ``x``'s value."""
        ...

    def clone(self, x: Tensor[*tuple[Any, ...]]) -> Tensor[*tuple[Any, ...]]:
        """``x.clone()``: a copy that later in-place updates of either do not share."""
        ...

    def inplace(self, x: Tensor[*tuple[Any, ...]], op: str, other: Any) -> Tensor[*tuple[Any, ...]]:
        """``x op= other`` in place (``op``: a binary primitive name, ``"fill"`` or ``"copy"``); returns ``x``."""
        ...

    def setitem(self, x: Tensor[*tuple[Any, ...]], key: Any, value: Any) -> None:
        """``x[key] = value`` in place."""
        ...

    # the Tensor methods' entry points (:class:`tensorplay.interpreter.BaseInterpreter` composes primitives;
    # an interpreter may take shortcuts with the same results)
    def tensor_getitem(self, x: Any, key: Any) -> Any:
        """``x[key]``."""
        ...

    def tensor_reshape(self, x: Any, args: tuple[Any, ...]) -> Any:
        """``x.reshape(*args)``."""
        ...

    def tensor_permute(self, x: Any, dims: tuple[Any, ...] | None) -> Any:
        """``x.permute(*dims)``; ``None`` reverses every axis."""
        ...

    def tensor_unsqueeze(self, x: Any, dim: Any) -> Any:
        """``x.unsqueeze(dim)``."""
        ...

    def tensor_reduce(self, prim: str, x: Any, dim: Any, keepdim: bool) -> Any:
        """``x.sum``/``amax``/``amin`` over ``dim``."""
        ...

    def tensor_mean(self, x: Any, dim: Any, keepdim: bool) -> Any:
        """``x.mean(dim, keepdim)``."""
        ...

    def tensor_arg_reduce(self, prim: str, x: Any, dim: Any, keepdim: bool) -> Any:
        """``x.argmax``/``argmin`` along ``dim``."""
        ...

    def tensor_extremum(self, x: Any, dim: Any, keepdim: bool, largest: bool) -> tuple[Any, Any]:
        """``(values, indices)`` of ``x.max(dim)`` or ``x.min(dim)``."""
        ...

    def tensor_matmul(self, a: Any, b: Any) -> Any:
        """``a @ b``."""
        ...

    def run_binary(self, name: str, x: Any, y: Any) -> Any:
        """The binary primitive ``name`` (``add``, ``lt``, ...) of ``x`` and ``y``: ``getattr(self, name)(x, y)``
        (the Tensor operators' entry point)."""
        ...


PRIMITIVE_NAMES: tuple[str, ...] = tuple(PRIMITIVES)
"""Every primitive, in the order of the primitive table (:mod:`tensorplay.spec.table`)."""
