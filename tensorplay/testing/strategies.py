"""Hypothesis strategies for tensorplay: tensors, shapes, and named dims that agree across tensors.

A named dim (``Batch``, ``Feat``, any ``NewType`` dim, a ``TypeVar``, a class) draws its size once
per example: every strategy of this module that uses ``Batch`` in one example gets the same size,
so separately drawn arguments fit together the way a typed function's annotations say::

    @given(w=tensors(shape=(Hidden, Feat)), x=tensors(shape=(Batch, Feat)))
    def test_layer(w, x): ...                     # x.shape[1] == w.shape[1]

    @given(arguments(layer))                      # the same, read from layer's annotations
    def test_layer(args): ...

A shape is written as a tuple of axes -- an ``int`` (fixed), a named dim, ``Literal[3]`` (fixed),
``int`` or ``Any`` (a free size), ``*Lead`` (``Unpack`` of a ``TypeVarTuple``: a run of 0-2 axes,
shared like a dim) -- or as the annotation itself (``Tensor[Batch, Feat]``, ``Index[Vocab, Seq]``).
Sizes are drawn in ``[min_side, max_side]`` (default 1..4). Needs ``hypothesis`` (a test extra).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.extra import numpy as hnp

import tensorplay as tp
from tensorplay.dtypes import DType, to_dtype
from tensorplay.index import Index
from tensorplay.shapecheck import _dim, _tensor_class, _unpacked  # the one reading of annotation dims
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Shape = tuple[int, ...]

MIN_SIDE, MAX_SIDE = 1, 4
MAX_RUN = 2
"""A ``*Lead`` run of axes has 0..MAX_RUN axes."""


def _key(dim: Any) -> str:
    module = getattr(dim, "__module__", "")
    return f"tensorplay.testing.dim:{module}.{getattr(dim, '__qualname__', None) or getattr(dim, '__name__', dim)}"


def _checked(label: str, low: int, high: int) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        sizes = value if isinstance(value, tuple) else (value,)
        if any(not low <= s <= high for s in sizes):
            raise InvalidArgument(f"the dim {label} has size {value} in this example (drawn by another strategy), "
                                  f"outside this strategy's range [{low}, {high}]: give every strategy that draws "
                                  f"{label} the same min_side and max_side")
        return value
    return check


def dim_size(dim: Any, *, min_side: int = MIN_SIDE, max_side: int = MAX_SIDE) -> st.SearchStrategy[int]:
    """The size of the named dim ``dim`` (``Batch``, a ``TypeVar``, ...) in the current example, in
    ``[min_side, max_side]``: one draw per example, shared by every strategy of this module."""
    label = getattr(dim, "__name__", repr(dim))
    base = st.shared(st.integers(min_side, max_side), key=_key(dim))
    return base.map(_checked(label, min_side, max_side))


def _axis(axis: Any, min_side: int, max_side: int) -> st.SearchStrategy[Shape]:
    """The sizes one written axis stands for: one size, or a run of them for ``*Lead``."""
    inner = _unpacked(axis)
    if inner is not None:
        if isinstance(inner, typing.TypeVarTuple):
            run = st.lists(st.integers(min_side, max_side), max_size=MAX_RUN).map(tuple)
            return st.shared(run, key=_key(inner)).map(_checked("*" + inner.__name__, min_side, max_side))
        args = typing.get_args(inner)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(st.integers(min_side, max_side), max_size=MAX_RUN).map(tuple)
        return st.tuples(*(_axis(a, min_side, max_side) for a in args)).map(lambda parts: sum(parts, ()))
    if isinstance(axis, int) and not isinstance(axis, bool):
        if axis < 0:
            raise InvalidArgument(f"a fixed size must be >= 0, got {axis}")
        return st.just((axis,))
    dim = _dim(axis)
    if dim.kind == "lit":
        return st.sampled_from([(s,) for s in dim.sizes])
    if dim.kind == "name":
        return dim_size(dim.key, min_side=min_side, max_side=max_side).map(lambda s: (s,))
    return st.integers(min_side, max_side).map(lambda s: (s,))


def _written_axes(spec: Any) -> tuple[list[Any], Any]:
    """``(axes, bound)`` of a shape spec: a tuple of axes, or a ``Tensor[...]``/``Index[...]`` annotation
    (``bound``: the dim of an ``Index`` bound, else ``None``)."""
    cls = _tensor_class(spec)
    if cls is None:
        if isinstance(spec, (tuple, list)):
            return list(spec), None
        raise InvalidArgument(f"a shape must be a tuple of axes or a Tensor[...] annotation, got {spec!r}")
    args = list(typing.get_args(spec))
    bound = args.pop(0) if issubclass(cls, Index) and args else None
    return args, bound


def shapes(spec: Any = None, *, min_dims: int = 0, max_dims: int = 3, min_side: int = MIN_SIDE,
           max_side: int = MAX_SIDE) -> st.SearchStrategy[Shape]:
    """Shapes: any shape of ``min_dims..max_dims`` axes (sizes ``min_side..max_side``) when ``spec`` is
    ``None``; else the shapes ``spec`` describes (a tuple of axes or a ``Tensor[...]`` annotation; see
    the module docstring), its named dims sized consistently across the example.

    >>> from tensorplay.dims import Batch, Feat
    >>> from tensorplay.testing.strategies import shapes
    >>> shape = shapes((Batch, 3, Feat)).example()
    >>> len(shape), shape[1]
    (3, 3)
    """
    if spec is None:
        return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)
    axes, _ = _written_axes(spec)
    return st.tuples(*(_axis(a, min_side, max_side) for a in axes)).map(lambda parts: sum(parts, ()))


def default_elements(dtype: Any) -> st.SearchStrategy[Any]:
    """Finite values in ``[-10, 10]`` (no subnormals) for floats, ``[-10, 10]`` for integers, booleans."""
    kind = to_dtype(dtype)
    if kind.is_floating_point:
        return st.floats(-10.0, 10.0, allow_nan=False, allow_infinity=False, allow_subnormal=False,
                         width=32 if kind.itemsize == 4 else 64)
    if kind.name == "bool":
        return st.booleans()
    return st.integers(-10, 10)


def tensors(dtype: DType | str | type = tp.float32, shape: Any = None, elements: st.SearchStrategy[Any] | None = None,
            *, min_dims: int = 0, max_dims: int = 3, min_side: int = MIN_SIDE,
            max_side: int = MAX_SIDE) -> st.SearchStrategy[AnyTensor]:
    """Eager tensors of ``dtype`` (float32 by default). ``shape`` is a shape (a tuple of ints), a spec
    with named dims (see :func:`shapes`), a strategy of shapes, or ``None`` (any shape). ``elements``
    draws the values (default :func:`default_elements`).

    >>> import tensorplay as tp
    >>> from tensorplay.dims import Batch
    >>> from tensorplay.testing.strategies import tensors
    >>> t = tensors(tp.float64, shape=(Batch, 2)).example()
    >>> t.dtype, t.shape[1]
    (tensorplay.float64, 2)
    """
    kind = to_dtype(dtype)
    shape_strategy = shape if isinstance(shape, st.SearchStrategy) else shapes(
        shape, min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)
    values = default_elements(kind) if elements is None else elements
    return shape_strategy.flatmap(lambda s: hnp.arrays(kind.numpy, s, elements=values)).map(tp.tensor)


def _index_tensors(spec: Any, bound_dim: Any, min_side: int, max_side: int) -> st.SearchStrategy[AnyTensor]:
    axes, _ = _written_axes(spec)
    if isinstance(bound_dim, int):
        bound_sizes = st.just(bound_dim)
    else:
        bound_sizes = _axis(bound_dim, max(min_side, 1), max_side).map(lambda s: s[0])
    shape_strategy = st.tuples(*(_axis(a, min_side, max_side) for a in axes)).map(lambda parts: sum(parts, ()))

    def draw(pair: tuple[int, Shape]) -> st.SearchStrategy[AnyTensor]:
        bound, shape = pair
        return hnp.arrays(np.int64, shape, elements=st.integers(0, max(bound - 1, 0))).map(
            lambda a: tp.index(a, bound))

    return st.tuples(bound_sizes, shape_strategy).flatmap(draw)


def _parameter(param: inspect.Parameter, ann: Any, dtype: DType, elements: st.SearchStrategy[Any] | None,
               min_side: int, max_side: int, where: str) -> st.SearchStrategy[Any]:
    cls = _tensor_class(ann)
    if cls is not None and issubclass(cls, Index):
        _, bound = _written_axes(ann)
        return _index_tensors(ann, bound, min_side, max_side)
    if cls is not None:
        return tensors(dtype, ann, elements, min_side=min_side, max_side=max_side)
    if isinstance(ann, (typing.NewType, typing.TypeVar)):  # n: Hidden -- an int size of a named dim
        return dim_size(ann, min_side=min_side, max_side=max_side)
    raise InvalidArgument(f"{where}: cannot draw parameter {param.name!r} annotated {ann!r}: only Tensor[...], "
                          f"Index[...] and int dims (n: Hidden) are drawn; give it a default or pass it in fixed=")


def arguments(fn: Callable[..., Any], *, dtype: DType | str | type = tp.float32,
              elements: st.SearchStrategy[Any] | None = None, fixed: Mapping[str, Any] | None = None,
              min_side: int = MIN_SIDE, max_side: int = MAX_SIDE) -> st.SearchStrategy[tuple[Any, ...]]:
    """The positional arguments of ``fn`` (a function, a ``@tp.shapecheck`` function or a module's
    ``forward``) drawn from its annotations: a tensor of ``dtype`` for each ``Tensor[...]``, bounded
    int64 ids for each ``Index[Bound, ...]``, the dim's size for an ``int`` annotated with a dim
    (``n: Hidden``); named dims agree across all of them. Parameters with a default are left out;
    ``fixed`` gives values for others by name.

    >>> import tensorplay as tp
    >>> from tensorplay import Tensor
    >>> from tensorplay.dims import Batch, Feat, Hidden
    >>> from tensorplay.testing.strategies import arguments
    >>> def layer(w: Tensor[Hidden, Feat], x: Tensor[Batch, Feat]) -> Tensor[Batch, Hidden]:
    ...     return x @ w.T
    >>> w, x = arguments(layer).example()
    >>> w.shape[1] == x.shape[1]
    True
    """
    forward = getattr(fn, "forward", None)
    target = inspect.unwrap(forward if callable(getattr(fn, "named_parameters", None)) and forward else fn)
    where = f"arguments({getattr(target, '__qualname__', target)!r})"
    hints = typing.get_type_hints(target, include_extras=True)
    given = dict(fixed or {})
    parts: list[st.SearchStrategy[Any]] = []
    for param in inspect.signature(target).parameters.values():
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            continue
        if param.name in given:
            parts.append(st.just(given.pop(param.name)))
        elif param.default is param.empty:
            parts.append(_parameter(param, hints.get(param.name, Any), to_dtype(dtype), elements, min_side,
                                    max_side, where))
    if given:
        raise InvalidArgument(f"{where}: fixed names no positional parameter: {', '.join(sorted(given))}")
    return st.tuples(*parts)


__all__ = ["arguments", "default_elements", "dim_size", "shapes", "tensors"]
