"""From a ``dynamic_shapes`` spec to the symbolic shape of every input, and back (suggested fixes).

:func:`resolve` matches a spec against the example arguments and gives a :class:`ShapeSpec`: for each
tensor input (named as ``tensorplay.graph.trace`` names them: ``x``, ``xs_0``, ``batch_key``) a shape of
ints and symbolic dims, and for each root dim a :class:`DimInfo` (name, declared domain, how it was
declared and where, the example's size). The spec may be:

* ``None`` (every dim static); a dict keyed by argument name, or a tuple/list with one entry per argument
  (in the order of the model's signature, keyword arguments included), each matching the argument's
  structure (tuples, lists, dicts) down to one entry per tensor: ``None``, a marker for every axis, a dict
  ``{axis: entry}`` or one entry per axis; an entry is a :class:`~tensorplay.export.dim.Dim`, a derived dim,
  a marker, an int (a static size, checked against the example) or ``None``;
* a :class:`ShapesCollection` (entries attached to tensor objects), an :class:`AdditionalInputs` (inferred
  from more example inputs), a :class:`FromAnnotations` (read from the model's ``Tensor[Batch, Seq, ...]``
  annotations), or a list of :class:`~tensorplay.export.dim.Constraint` /
  :class:`~tensorplay.export.dim.EqualityConstraint`.

A contradiction found at export comes with :class:`SuggestedFix` entries; :func:`apply_fixes` rewrites a spec
with them.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tensorplay.export.dim import Constraint, DerivedDim, Dim, DimHint, EqualityConstraint
from tensorplay.pytree import leaf_names, split_static
from tensorplay.symbolic import SymDim
from tensorplay.tensor import Tensor

DECLARED, DYNAMIC, AUTO = "declared", "dynamic", "auto"


@dataclass
class DimInfo:
    """A root dim of an export: its ``name``, domain ``[min, max]`` (``max`` ``None``: unbounded), ``kind``
    (``"declared"``: a user's ``Dim``, contradictions are errors; ``"dynamic"``: ``Dim.DYNAMIC``, the range
    is inferred; ``"auto"``: ``Dim.AUTO`` or an annotation, dynamic where possible), ``declared_at`` (where
    and how), the example's size ``hint``, and ``note``: why the range differs from the declaration."""

    name: str
    min: int
    max: int | None
    kind: str
    declared_at: str
    hint: int
    note: str = ""

    def range_text(self) -> str:
        """``[2, 4096]`` (``inf`` for no max)."""
        return f"[{self.min}, {'inf' if self.max is None else self.max}]"

    def contains(self, size: int) -> bool:
        """Whether ``size`` is in the domain."""
        return self.min <= size and (self.max is None or size <= self.max)


@dataclass
class ShapeSpec:
    """The resolved spec: ``shapes`` (tensor input name -> shape of ints and ``SymDim``), ``dims`` (root name ->
    :class:`DimInfo`) and ``hints`` (root name -> the example's size)."""

    shapes: dict[str, tuple[Any, ...]]
    dims: dict[str, DimInfo]

    @property
    def hints(self) -> dict[str, int]:
        """Root name -> the example's size."""
        return {name: info.hint for name, info in self.dims.items()}

    @property
    def ranges(self) -> dict[str, tuple[int, int | None]]:
        """Root name -> ``(min, max)``."""
        return {name: (info.min, info.max) for name, info in self.dims.items()}

    def for_trace(self) -> dict[str, dict[int, SymDim]]:
        """The ``dynamic=`` argument of ``tensorplay.graph.trace``: input name -> {axis: symbolic size}."""
        return {leaf: {a: d for a, d in enumerate(shape) if isinstance(d, SymDim)}
                for leaf, shape in self.shapes.items() if any(isinstance(d, SymDim) for d in shape)}

    def constraints(self) -> list[Constraint | EqualityConstraint]:
        """One :class:`Constraint` per dynamic input axis, then one :class:`EqualityConstraint` per dim that
        several axes share."""
        out: list[Constraint | EqualityConstraint] = []
        sites: dict[str, list[tuple[str, int]]] = {}
        for leaf, shape in self.shapes.items():
            for axis, d in enumerate(shape):
                if not isinstance(d, SymDim):
                    continue
                root, scale, offset = linear_parts(d)
                info = self.dims[root]
                low = scale * info.min + offset
                high = None if info.max is None else scale * info.max + offset
                derived = not (scale == 1 and offset == 0)
                out.append(Constraint(leaf, axis, str(d), low, high, root if derived else None, scale, offset))
                if not derived:
                    sites.setdefault(root, []).append((leaf, axis))
        out.extend(EqualityConstraint(tuple(s), name) for name, s in sites.items() if len(s) > 1)
        return out


def linear_parts(d: SymDim) -> tuple[str, int, int]:
    """``(root, scale, offset)`` of an input dim ``scale*root + offset``."""
    lin = d.linear_in()
    if lin is None:  # pragma: no cover - input dims are built linear
        raise ValueError(f"input dim {d} is not of the form scale*name + offset")
    return lin


# ---- the model's arguments -----------------------------------------------------------------------------

def signature_of(model: Any) -> inspect.Signature | None:
    """The signature of ``model.forward`` (a module), of a ``@tp.program`` without its ``ops``, or of ``model``
    (a function); ``None`` when there is none."""
    from tensorplay.dispatch import Program
    target = model.forward if callable(getattr(model, "named_parameters", None)) else model
    try:
        if isinstance(model, Program):
            sig = inspect.signature(model.fn)
            return sig.replace(parameters=list(sig.parameters.values())[1:])
        return inspect.signature(target)
    except (TypeError, ValueError):
        return None


@dataclass
class Arguments:
    """The example arguments matched to the model's signature: ``names`` and ``values`` in signature order,
    ``keyword`` the names passed by keyword (keyword-only parameters), ``defaults`` the parameters' defaults."""

    names: list[str]
    values: list[Any]
    keyword: set[str] = field(default_factory=set)
    defaults: dict[str, Any] = field(default_factory=dict)

    def call(self, fn: Callable[..., Any], values: Sequence[Any]) -> Any:
        """``fn`` called with ``values`` (one per name) positionally, keyword-only ones by keyword."""
        positional = [v for n, v in zip(self.names, values) if n not in self.keyword]
        keywords = {n: v for n, v in zip(self.names, values) if n in self.keyword}
        return fn(*positional, **keywords)


def combine(names_or_model: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None,
            keyword: set[str] | None = None, defaults: Mapping[str, Any] | None = None) -> Arguments:
    """Match ``args`` and ``kwargs`` to the parameters of ``names_or_model`` (a model, or a list of names
    with the ``keyword`` subset and their ``defaults``): one value per parameter, in order."""
    kwargs = dict(kwargs or {})
    if isinstance(names_or_model, list):
        names = names_or_model
        positional = [n for n in names if n not in (keyword or set())]
        if len(args) > len(positional):
            raise TypeError(f"expected at most {len(positional)} positional argument(s) "
                            f"({', '.join(positional)}), got {len(args)}")
        values: dict[str, Any] = dict(zip(positional, args))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"unexpected or repeated keyword argument {key!r}; the arguments are "
                                f"{', '.join(names)}")
            values[key] = value
        for key, value in (defaults or {}).items():
            values.setdefault(key, value)
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"missing argument(s) {', '.join(missing)}")
        return Arguments(names, [values[n] for n in names], set(keyword or set()), dict(defaults or {}))
    sig = signature_of(names_or_model)
    if sig is None:
        if kwargs:
            raise TypeError("keyword arguments need a model with an inspectable signature")
        return Arguments([f"arg{i}" for i in range(len(args))], list(args))
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as error:
        raise TypeError(f"export: the example arguments do not fit the signature {sig}: {error}") from None
    bound.apply_defaults()
    out = Arguments([], [])
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if sig.parameters[name].default is not inspect.Parameter.empty:
            out.defaults[name] = sig.parameters[name].default
        if kind is inspect.Parameter.VAR_POSITIONAL:
            for i, v in enumerate(value):
                out.names.append(f"{name}_{i}")
                out.values.append(v)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            for key, v in value.items():
                out.names.append(key)
                out.values.append(v)
                out.keyword.add(key)
        else:
            out.names.append(name)
            out.values.append(value)
            if kind is inspect.Parameter.KEYWORD_ONLY:
                out.keyword.add(name)
    return out


# ---- resolving a spec --------------------------------------------------------------------------------------

def _identifier(text: str) -> str:
    name = re.sub(r"\W", "_", text)
    return name if name and not name[0].isdigit() else f"d_{name}"


class _Resolver:
    def __init__(self) -> None:
        self.shapes: dict[str, tuple[Any, ...]] = {}
        self.dims: dict[str, DimInfo] = {}
        self.declared: dict[str, Dim] = {}

    def root(self, name: str, low: int, high: int | None, kind: str, declared_at: str, hint: int,
             where: str, dim: Dim | None = None) -> None:
        info = self.dims.get(name)
        if info is None:
            if not (low <= hint and (high is None or hint <= high)):
                raise ValueError(
                    f"dynamic_shapes: {where} has size {hint} in the example, outside the declared range of "
                    f"{name} [{low}, {'inf' if high is None else high}] (declared at {declared_at})")
            self.dims[name] = DimInfo(name, low, high, kind, declared_at, hint)
            if dim is not None:
                self.declared[name] = dim
            return
        if dim is not None and name in self.declared and (dim.min, dim.max) != (info.min, info.max):
            raise ValueError(f"dynamic_shapes: two different declarations of dim {name!r}: {self.declared[name]!r} "
                             f"(at {self.declared[name].declared_at}) and {dim!r} (at {dim.declared_at})")
        if info.hint != hint:
            raise ValueError(f"dynamic_shapes: {where} is dim {name} with size {hint} in the example, but an earlier "
                             f"input gives {name} = {info.hint}: sizes that share a dim must be equal")

    def axis(self, leaf: str, axis: int, size: int, entry: Any) -> Any:
        where = f"input {leaf!r} axis {axis}"
        if entry is None or (isinstance(entry, DimHint) and entry.kind == "static"):
            return size
        if isinstance(entry, bool):
            raise TypeError(f"dynamic_shapes: {where}: expected a Dim, a marker, an int or None, got {entry!r}")
        if isinstance(entry, int):
            if entry != size:
                raise ValueError(f"dynamic_shapes: {where} is declared static with size {entry}, but the example "
                                 f"has size {size}")
            return size
        if isinstance(entry, Dim):
            self.root(entry.name, entry.min, entry.max, DECLARED, entry.declared_at, size, where, entry)
            return entry.expr
        if isinstance(entry, DerivedDim):
            root = entry.root
            value, remainder = divmod(size - entry.offset, entry.scale)
            if remainder or value < 0:
                raise ValueError(f"dynamic_shapes: {where} has size {size} in the example, which is not of the form "
                                 f"{entry.name}")
            if entry.scale * root.min + entry.offset < 0:
                raise ValueError(f"dynamic_shapes: {where} is {entry.name}, which is negative for {root.name} = "
                                 f"{root.min}; declare {root.name} with min >= "
                                 f"{-(-(-entry.offset) // entry.scale)}")
            self.root(root.name, root.min, root.max, DECLARED, root.declared_at, value, where, root)
            return entry.expr
        if isinstance(entry, NamedHint):
            self.root(entry.name, entry.min, entry.max, entry.kind, entry.declared_at, size, where)
            return SymDim(entry.name)
        if isinstance(entry, DimHint):
            name = _identifier(f"{leaf}_{axis}")
            while name in self.dims:
                name += "_"
            self.root(name, entry.min, entry.max, entry.kind, f"Dim.{entry.kind.upper()} for {where}", size, where)
            return SymDim(name)
        raise TypeError(f"dynamic_shapes: {where}: expected a Dim, a derived dim, Dim.AUTO/STATIC/DYNAMIC, an int "
                        f"or None, got {entry!r}")

    def tensor(self, leaf: str, shape: tuple[int, ...], spec: Any) -> None:
        rank = len(shape)
        entries: dict[int, Any]
        if spec is None or isinstance(spec, DimHint):
            entries = {a: spec for a in range(rank)}
        elif isinstance(spec, Mapping):
            entries = {}
            for axis, entry in spec.items():
                if isinstance(axis, bool) or not isinstance(axis, int) or not -rank <= axis < rank:
                    raise ValueError(f"dynamic_shapes: input {leaf!r} has rank {rank}; {axis!r} is not one of its axes")
                entries[axis % rank] = entry
        elif isinstance(spec, (tuple, list)):
            if len(spec) != rank:
                raise ValueError(f"dynamic_shapes: input {leaf!r} has rank {rank} (shape {list(shape)}), but its spec "
                                 f"{list(spec)} has {len(spec)} entries")
            entries = dict(enumerate(spec))
        else:
            raise TypeError(f"dynamic_shapes: input {leaf!r}: expected None, a marker, a dict {{axis: dim}} or one "
                            f"entry per axis, got {spec!r}")
        self.shapes[leaf] = tuple(self.axis(leaf, a, int(d), entries.get(a)) for a, d in enumerate(shape))


def _walk(value: Any, spec: Any, path: str, out: list[tuple[str, Any, Any]]) -> None:
    """Pair each tensor leaf of ``value`` (named like ``tensorplay.graph.trace``) with its part of ``spec``."""
    if isinstance(value, (Tensor, np.ndarray)):
        out.append((path, value, spec))
        return
    if isinstance(value, (tuple, list)):
        if spec is None or isinstance(spec, DimHint):
            for i, item in enumerate(value):
                _walk(item, spec, f"{path}_{i}", out)
            return
        if not isinstance(spec, (tuple, list)) or len(spec) != len(value):
            raise ValueError(f"dynamic_shapes: {path!r} is a {type(value).__name__} of {len(value)} items; its spec "
                             f"must be None or a tuple/list of {len(value)} entries, got {spec!r}")
        for i, (item, sub) in enumerate(zip(value, spec)):
            _walk(item, sub, f"{path}_{i}", out)
        return
    if isinstance(value, dict):
        if spec is not None and not isinstance(spec, DimHint):
            if not isinstance(spec, Mapping) or set(spec) - set(value):
                raise ValueError(f"dynamic_shapes: {path!r} is a dict with keys {sorted(map(str, value))}; its spec "
                                 f"must be None or a dict with some of those keys, got {spec!r}")
        for key, item in value.items():
            sub = spec if spec is None or isinstance(spec, DimHint) else spec.get(key)
            _walk(item, sub, f"{path}_{key}", out)
        return
    if spec is not None and not isinstance(spec, DimHint):
        raise ValueError(f"dynamic_shapes: {path!r} is not a tensor ({type(value).__name__}); its spec must be None, "
                         f"got {spec!r}")


def tensor_leaves(arguments: Arguments) -> dict[str, Any]:
    """Tensor input name -> the tensor (or array), as ``tensorplay.graph.trace`` names the leaves."""
    out: dict[str, Any] = {}
    for name, value in zip(arguments.names, arguments.values):
        leaves, structure = split_static(value)
        out.update(zip(leaf_names(structure, name), leaves))
    return out


def resolve(model: Any, arguments: Arguments, dynamic_shapes: Any) -> ShapeSpec:
    """The :class:`ShapeSpec` of ``dynamic_shapes`` for the example ``arguments`` (see the module docstring)."""
    if hasattr(dynamic_shapes, "dynamic_shapes") and not isinstance(dynamic_shapes, (Mapping, tuple, list)):
        dynamic_shapes = dynamic_shapes.dynamic_shapes(model, arguments)
    resolver = _Resolver()
    leaves = tensor_leaves(arguments)
    if isinstance(dynamic_shapes, list) and dynamic_shapes and all(
            isinstance(c, (Constraint, EqualityConstraint)) for c in dynamic_shapes):
        dynamic_shapes = _from_constraints(dynamic_shapes, leaves)
    pairs: list[tuple[str, Any, Any]] = []
    if isinstance(dynamic_shapes, LeafSpecs):
        unknown = [k for k in dynamic_shapes if k not in leaves]
        if unknown:
            raise ValueError(f"dynamic_shapes: no tensor input named {', '.join(map(repr, unknown))}; the tensor "
                             f"inputs are {', '.join(leaves)}")
        for leaf, value in leaves.items():
            resolver.tensor(leaf, _shape(value), dynamic_shapes.get(leaf))
        return ShapeSpec(resolver.shapes, resolver.dims)
    if dynamic_shapes is None:
        specs: list[Any] = [None] * len(arguments.names)
    elif isinstance(dynamic_shapes, Mapping):
        unknown = [k for k in dynamic_shapes if k not in arguments.names]
        if unknown:
            raise ValueError(f"dynamic_shapes: no argument named {', '.join(map(repr, unknown))}; the arguments are "
                             f"{', '.join(arguments.names)}")
        specs = [dynamic_shapes.get(n) for n in arguments.names]
    elif isinstance(dynamic_shapes, (tuple, list)):
        if len(dynamic_shapes) != len(arguments.names):
            raise ValueError(f"dynamic_shapes: {len(dynamic_shapes)} entries for {len(arguments.names)} arguments "
                             f"({', '.join(arguments.names)})")
        specs = list(dynamic_shapes)
    else:
        raise TypeError(f"dynamic_shapes: expected None, a dict by argument name, a tuple/list per argument, a "
                        f"ShapesCollection, AdditionalInputs or FromAnnotations, got {dynamic_shapes!r}")
    for name, value, spec in zip(arguments.names, arguments.values, specs):
        _walk(value, spec, name, pairs)
    for leaf, value, spec in pairs:
        resolver.tensor(leaf, _shape(value), spec)
    return ShapeSpec(resolver.shapes, resolver.dims)


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in np.shape(value._data if isinstance(value, Tensor) else value))


def _from_constraints(constraints: Sequence[Constraint | EqualityConstraint],
                      leaves: Mapping[str, Any]) -> LeafSpecs:
    """A per-input spec from a list of constraints (ties become shared dims)."""
    dims: dict[str, Dim] = {}
    per_leaf: dict[str, dict[int, Any]] = {}
    for c in constraints:
        if isinstance(c, EqualityConstraint):
            continue
        if c.source not in leaves:
            raise ValueError(f"Constraint on {c.source!r}: no such input; the inputs are {', '.join(leaves)}")
        if c.is_static:
            per_leaf.setdefault(c.source, {})[c.dim] = c.min
            continue
        if c.root is not None:
            root = dims.setdefault(c.root, Dim(c.root))
            per_leaf.setdefault(c.source, {})[c.dim] = c.scale * root + c.offset
            continue
        assert c.name is not None
        dims[c.name] = dims.get(c.name) or Dim(c.name, min=c.min, max=c.max)
        per_leaf.setdefault(c.source, {})[c.dim] = dims[c.name]
    for c in constraints:
        if not isinstance(c, EqualityConstraint):
            continue
        shared = next((per_leaf.get(s, {}).get(a) for s, a in c.sites
                       if isinstance(per_leaf.get(s, {}).get(a), Dim)), None)
        if shared is None:
            shared = Dim(c.name or _identifier(f"{c.sites[0][0]}_{c.sites[0][1]}"))
        for source, axis in c.sites:
            per_leaf.setdefault(source, {})[axis] = shared
    return LeafSpecs(per_leaf)


# ---- builders: ShapesCollection, AdditionalInputs, FromAnnotations ----------------------------------------

class ShapesCollection:
    """Specs attached to tensor objects, for nested inputs: ``shapes[x] = {0: batch}``; export finds each
    tensor among the inputs by identity (a tensor that is not among them is an error)."""

    def __init__(self) -> None:
        self._specs: dict[int, tuple[Any, Any]] = {}

    def __setitem__(self, tensor: Any, spec: Any) -> None:
        if not isinstance(tensor, (Tensor, np.ndarray)):
            raise TypeError(f"ShapesCollection: keys are tensors, got a {type(tensor).__name__}")
        self._specs[id(tensor)] = (tensor, spec)

    def __getitem__(self, tensor: Any) -> Any:
        entry = self._specs.get(id(tensor))
        if entry is None:
            self._specs[id(tensor)] = (tensor, {})
            entry = self._specs[id(tensor)]
        return entry[1]

    def __len__(self) -> int:
        return len(self._specs)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """``(tensor, spec)`` pairs."""
        return iter(self._specs.values())

    def dynamic_shapes(self, model: Any, arguments: Arguments | tuple[Any, ...],
                       kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The per-argument spec these entries make for the example arguments."""
        if not isinstance(arguments, Arguments):
            arguments = combine(model, arguments, kwargs)
        found: set[int] = set()

        def spec_of(value: Any) -> Any:
            if isinstance(value, (Tensor, np.ndarray)):
                entry = self._specs.get(id(value))
                if entry is not None and entry[0] is value:
                    found.add(id(value))
                    return entry[1]
                return None
            if isinstance(value, (tuple, list)):
                return type(value)(spec_of(v) for v in value) if not hasattr(value, "_fields") else \
                    [spec_of(v) for v in value]
            if isinstance(value, dict):
                return {k: spec_of(v) for k, v in value.items()}
            return None

        out = {name: spec_of(value) for name, value in zip(arguments.names, arguments.values)}
        missing = [t for key, (t, _) in self._specs.items() if key not in found]
        if missing:
            shapes = ", ".join(f"shape {list(np.shape(t._data if isinstance(t, Tensor) else t))}" for t in missing)
            raise ValueError(f"ShapesCollection: {len(missing)} tensor(s) with a spec are not among the inputs ({shapes}); "
                             "was a tensor copied before it was passed?")
        return out


class AdditionalInputs:
    """More example inputs, from which export infers the spec: an axis whose size varies across the sets is
    dynamic, and axes whose sizes are equal in every set share one dim (tied). :meth:`verify` runs an exported
    program on every set."""

    def __init__(self) -> None:
        self._examples: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def add(self, args: tuple[Any, ...], kwargs: Mapping[str, Any] | None = None) -> None:
        """Another set of example arguments."""
        if not isinstance(args, tuple):
            raise TypeError(f"AdditionalInputs.add: args must be a tuple, got {type(args).__name__}")
        self._examples.append((args, dict(kwargs or {})))

    @property
    def examples(self) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        """The added sets."""
        return list(self._examples)

    def dynamic_shapes(self, model: Any, arguments: Arguments | tuple[Any, ...],
                       kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The inferred per-argument spec (see the class docstring)."""
        if not isinstance(arguments, Arguments):
            arguments = combine(model, arguments, kwargs)
        sets = [tensor_leaves(arguments)]
        for args, kw in self._examples:
            other = combine(model, args, kw)
            leaves = tensor_leaves(other)
            if list(leaves) != list(sets[0]):
                raise ValueError(f"AdditionalInputs: an input set has tensors {list(leaves)}, the example has "
                                 f"{list(sets[0])}")
            sets.append(leaves)
        sizes: dict[tuple[str, int], tuple[int, ...]] = {}
        for leaf in sets[0]:
            shapes = [tuple(np.shape(s[leaf]._data if isinstance(s[leaf], Tensor) else s[leaf])) for s in sets]
            if len({len(s) for s in shapes}) != 1:
                raise ValueError(f"AdditionalInputs: input {leaf!r} has different ranks across the sets: {shapes}")
            for axis in range(len(shapes[0])):
                sizes[(leaf, axis)] = tuple(s[axis] for s in shapes)
        groups: dict[tuple[int, ...], NamedHint] = {}
        per_leaf = LeafSpecs()
        for (leaf, axis), seen in sizes.items():
            if len(set(seen)) == 1:
                continue
            hint = groups.get(seen)
            if hint is None:
                hint = groups[seen] = NamedHint(DYNAMIC, _identifier(f"{leaf}_{axis}"),
                                                f"inferred from {len(sets)} input sets (sizes {list(seen)})")
            per_leaf.setdefault(leaf, {})[axis] = hint
        return per_leaf

    def verify(self, ep: Any) -> None:
        """Run ``ep.module()`` on every added set (the call-time checks included); raises on the first failure."""
        module = ep.module()
        for args, kwargs in self._examples:
            module(*args, **kwargs)


class FromAnnotations:
    """The spec the model's annotations give: each axis annotated with a named dim (``Tensor[Batch, Seq,
    Feat]``, a ``NewType`` or a ``TypeVar``) gets a dim of that name, shared by name across inputs; a
    ``Literal`` size is static; a ``*Lead`` run gets ``Lead_0``, ``Lead_1``, ... . Annotated dims are dynamic
    where the program allows and static where it fixes them (``Dim.AUTO``), unless ``ranges`` declares them:
    ``FromAnnotations(ranges={"Seq": (2, 4096)})`` makes ``Seq`` a declared ``Dim("Seq", min=2, max=4096)``."""

    def __init__(self, ranges: Mapping[str, tuple[int, int | None]] | None = None) -> None:
        self.ranges = dict(ranges or {})

    def dynamic_shapes(self, model: Any, arguments: Arguments | tuple[Any, ...],
                       kwargs: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The per-argument spec (tensor arguments only; containers are left static)."""
        if not isinstance(arguments, Arguments):
            arguments = combine(model, arguments, kwargs)
        target = model.forward if callable(getattr(model, "named_parameters", None)) else model
        target = getattr(target, "__wrapped__", target)
        try:
            hints = typing.get_type_hints(target)
        except Exception as error:
            raise TypeError(f"FromAnnotations: cannot read the annotations of {target!r}: {error}") from error
        where = _def_site(target)
        dims: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for name, value in zip(arguments.names, arguments.values):
            ann = hints.get(name)
            if ann is None or not isinstance(value, (Tensor, np.ndarray)):
                continue
            rank = len(np.shape(value._data if isinstance(value, Tensor) else value))
            labels = _axis_labels(ann, rank)
            if labels is None:
                continue
            entries: dict[int, Any] = {}
            for axis, label in enumerate(labels):
                if label is None:
                    continue
                if label not in dims:
                    if label in self.ranges:
                        low, high = self.ranges[label]
                        dim = Dim(label, min=low, max=high)
                        dim.declared_at = f"{where} (annotation of {name!r}; range from FromAnnotations)"
                        dims[label] = dim
                    else:
                        dims[label] = NamedHint(AUTO, label, f"{where} (annotation of {name!r})")
                entries[axis] = dims[label]
            out[name] = entries
        unknown = sorted(set(self.ranges) - set(dims))
        if unknown:
            raise ValueError(f"FromAnnotations: ranges for {', '.join(unknown)}, which no annotation of the inputs "
                             f"names (annotated dims: {', '.join(dims) or 'none'})")
        return out


class NamedHint(DimHint):
    """A marker (``"auto"`` or ``"dynamic"``) with the name its dim gets and where it comes from (an
    annotation, a set of example inputs)."""

    def __init__(self, kind: str, name: str, declared_at: str) -> None:
        super().__init__(kind)
        if not name.isidentifier():
            raise ValueError(f"a dim name must be a Python identifier, got {name!r}")
        self.name = name
        self.declared_at = declared_at

    def __repr__(self) -> str:
        return f"Dim.{self.kind.upper()} named {self.name!r}"


class LeafSpecs(dict[str, Any]):
    """A spec keyed by tensor input name (``x``, ``xs_0``) rather than by argument."""


def _def_site(fn: Any) -> str:
    code = getattr(fn, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", repr(fn))
    return f"{fn.__qualname__} at {code.co_filename}:{code.co_firstlineno}"


def _axis_labels(ann: Any, rank: int) -> list[str | None] | None:
    """One label per axis of a ``Tensor[...]`` annotation: a dim name, or ``None`` for a static/any axis."""
    origin = typing.get_origin(ann)
    if not (isinstance(origin, type) and issubclass(origin, Tensor)):
        return None
    prefix: list[str | None] = []
    suffix: list[str | None] = []
    variadic: str | None = None
    seen_variadic = False
    for arg in typing.get_args(ann):
        inner = typing.get_args(arg)[0] if typing.get_origin(arg) is typing.Unpack else (
            arg if getattr(arg, "__unpacked__", False) else None)
        if inner is not None:
            seen_variadic = True
            variadic = getattr(inner, "__name__", None) if isinstance(inner, typing.TypeVarTuple) else None
            continue
        label = None
        if typing.get_origin(arg) is not typing.Literal and arg is not typing.Any and arg is not int:
            label = getattr(arg, "__name__", None)
        (suffix if seen_variadic else prefix).append(label)
    if not seen_variadic:
        return prefix if len(prefix) == rank else None
    n_lead = rank - len(prefix) - len(suffix)
    if n_lead < 0:
        return None
    lead: list[str | None] = [f"{variadic}_{i}" if variadic else None for i in range(n_lead)]
    return prefix + lead + suffix


# ---- suggested fixes -------------------------------------------------------------------------------------------

FIX_KINDS = ("set_min", "set_max", "specialize", "tie")


@dataclass(frozen=True)
class SuggestedFix:
    """A machine-readable change to a ``dynamic_shapes`` spec: ``set_min``/``set_max`` (the dim's bound becomes
    ``value``), ``specialize`` (the dim becomes the static size ``value``), ``tie`` (the dim is replaced by the
    dim named ``to``)."""

    kind: str
    dim: str
    value: int | None = None
    to: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in FIX_KINDS:
            raise ValueError(f"unknown fix kind {self.kind!r}; expected one of {', '.join(FIX_KINDS)}")

    def to_json(self) -> dict[str, Any]:
        """``{"kind": "set_min", "dim": "Seq", "value": 3}``."""
        out: dict[str, Any] = {"kind": self.kind, "dim": self.dim}
        if self.value is not None:
            out["value"] = self.value
        if self.to is not None:
            out["to"] = self.to
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> SuggestedFix:
        """The inverse of :meth:`to_json`."""
        return SuggestedFix(str(data["kind"]), str(data["dim"]), data.get("value"), data.get("to"))

    def __str__(self) -> str:
        return json.dumps(self.to_json())


def _fixes_of(fixes: Any) -> list[SuggestedFix]:
    if hasattr(fixes, "fixes") and not isinstance(fixes, (list, tuple)):
        fixes = fixes.fixes
    if isinstance(fixes, str):
        found = re.findall(r"suggested fix: (\{[^\n]*\})", fixes)
        return [SuggestedFix.from_json(json.loads(f)) for f in found]
    return [f if isinstance(f, SuggestedFix) else SuggestedFix.from_json(f) for f in fixes]


def apply_fixes(dynamic_shapes: Any, fixes: Any) -> Any:
    """``dynamic_shapes`` with ``fixes`` applied: a list of :class:`SuggestedFix` (or their JSON), a
    :class:`~tensorplay.export.errors.ConstraintViolationError`, or its message. Every ``Dim`` named by a fix
    is replaced (a derived dim follows its root); the rest of the spec is kept. The next export with the
    result no longer meets the contradictions the fixes describe."""
    plan = _fixes_of(fixes)
    if not plan:
        return dynamic_shapes
    by_dim: dict[str, list[SuggestedFix]] = {}
    for fix in plan:
        by_dim.setdefault(fix.dim, []).append(fix)
    found: dict[str, Dim] = {}
    _collect_dims(dynamic_shapes, found)
    replaced: dict[str, Any] = {}

    def new_root(dim: Dim) -> Any:
        if dim.name in replaced:
            return replaced[dim.name]
        result: Any = dim
        for fix in by_dim.get(dim.name, []):
            if fix.kind == "specialize":
                result = fix.value
            elif fix.kind == "tie":
                target = found.get(str(fix.to))
                result = target if target is not None else Dim(str(fix.to))
            elif isinstance(result, Dim):
                result = result.refined(min=fix.value) if fix.kind == "set_min" else result.refined(max=fix.value)
        replaced[dim.name] = result
        return result

    def entry(value: Any) -> Any:
        if isinstance(value, Dim):
            return new_root(value)
        if isinstance(value, DerivedDim):
            root = new_root(value.root)
            if isinstance(root, int):
                return value.scale * root + value.offset
            return DerivedDim(root, value.scale, value.offset)
        if isinstance(value, ShapesCollection):
            out = ShapesCollection()
            for tensor, spec in value.items():
                out[tensor] = entry(spec)
            return out
        if isinstance(value, Mapping):
            return {k: entry(v) for k, v in value.items()}
        if isinstance(value, (tuple, list)):
            return type(value)(entry(v) for v in value)
        return value

    return entry(dynamic_shapes)


def _collect_dims(spec: Any, found: dict[str, Dim]) -> None:
    if isinstance(spec, Dim):
        found.setdefault(spec.name, spec)
    elif isinstance(spec, DerivedDim):
        found.setdefault(spec.root.name, spec.root)
    elif isinstance(spec, ShapesCollection):
        for _, sub in spec.items():
            _collect_dims(sub, found)
    elif isinstance(spec, Mapping):
        for sub in spec.values():
            _collect_dims(sub, found)
    elif isinstance(spec, (tuple, list)):
        for sub in spec:
            _collect_dims(sub, found)


def refined(spec: ShapeSpec, changes: Mapping[str, Any]) -> ShapeSpec:
    """``spec`` with root dims changed: ``changes[name]`` is an int (the dim becomes static), another root's
    name (the dim is tied to it), or a ``(min, max, note)`` triple (a narrower range)."""
    dims = {n: replace(i) for n, i in spec.dims.items()}
    binding: dict[str, Any] = {}
    for name, change in changes.items():
        if isinstance(change, int):
            binding[name] = change
            dims.pop(name, None)
        elif isinstance(change, str):
            binding[name] = SymDim(change)
            dims.pop(name, None)
        else:
            low, high, note = change
            dims[name] = replace(dims[name], min=low, max=high, note=note)
    shapes = {leaf: tuple(d.subs(binding) if isinstance(d, SymDim) else d for d in shape)
              for leaf, shape in spec.shapes.items()}
    return ShapeSpec(shapes, dims)


__all__ = ["AUTO", "AdditionalInputs", "Arguments", "DECLARED", "DYNAMIC", "DimInfo", "FIX_KINDS", "FromAnnotations",
           "LeafSpecs", "NamedHint", "ShapeSpec", "ShapesCollection", "SuggestedFix", "apply_fixes", "combine", "linear_parts", "refined",
           "resolve", "signature_of", "tensor_leaves"]
