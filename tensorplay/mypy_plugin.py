"""A mypy plugin that evaluates dim arithmetic: ``plugins = ["tensorplay.mypy_plugin"]``.

Plain mypy compares dims by name. This plugin also computes sizes where the dims are known
(``Literal[64]``, named dims with relations declared by ``tp.relate``) and reports what it can
prove wrong, each message naming both shapes and the rule:

* ``reshape``/``view``: the element counts must agree (``Model == Heads*HeadDim`` accepts
  ``[B, S, Model] -> [B, S, Heads, HeadDim]``); a ``-1`` entry is computed when it divides out;
* ``tp.cat``/``tp.stack``: the other dims must agree; the concatenated dim is the sum;
* slicing by constants: ``x[:, 1:]`` on ``Tensor[B, Seq]`` is ``Tensor[B, Seq - 1]``;
* ``prefix.conv``/``conv_transpose``/``max_pool``/``avg_pool``: the output spatial sizes from
  kernel, stride, padding and dilation (checked against ``out=`` names, or filled in);
* the computed dims are compared where they meet: elementwise operators, calls of typed
  functions (their dims and type variables), ``return`` and annotated assignments.

A computed dim that no name or ``Literal`` can express is typed ``Any`` (so plain mypy never sees a
mismatch that is not there) and carries its expression for the plugin. The comparison rule is
:func:`tensorplay.dimpoly.compare`: an unknown relation is never an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from mypy.checker import TypeChecker
from mypy.errorcodes import ErrorCode
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    AssignmentStmt, CallExpr, Context, EllipsisExpr, Expression, ExpressionStmt, FuncItem, IntExpr, ListExpr,
    MemberExpr, MypyFile, NameExpr, OpExpr, RefExpr, ReturnStmt, SliceExpr, Statement, StrExpr, TupleExpr,
    TypeInfo, UnaryExpr, Block, IfStmt, WithStmt, ForStmt, WhileStmt, TryStmt,
)
from mypy.plugin import CheckerPluginInterface, FunctionContext, MethodContext, Plugin
from mypy.types import (
    AnyType, CallableType, Instance, LiteralType, Overloaded, ProperType, TupleType, Type, TypeOfAny, TypeVarLikeType,
    TypeVarTupleType, TypeVarType, UnpackType, get_proper_type,
)

from tensorplay.dimpoly import Poly, compare, product, substitute

SHAPE = ErrorCode("shape", "Dim arithmetic proves a shape wrong (tensorplay)", "General")

_TENSOR = "tensorplay.tensor.Tensor"
_RELATE = "tensorplay.dimexpr.relate"
_DIM = "tensorplay.dimexpr.dim"
_PAYLOAD = "tensorplay-dim:"
_ELEMENTWISE = {"__add__", "__sub__", "__mul__", "__truediv__", "__pow__", "__lt__", "__le__", "__gt__", "__ge__",
                "__and__", "__or__", "__xor__", "__radd__", "__rsub__", "__rmul__", "__rtruediv__",
                "maximum", "minimum"}
_OP_TEXT = {"__add__": "+", "__sub__": "-", "__mul__": "*", "__truediv__": "/", "__pow__": "**", "__lt__": "<",
            "__le__": "<=", "__gt__": ">", "__ge__": ">=", "__and__": "&", "__or__": "|", "__xor__": "^"}

Dims = list[Type]


# ---- dims as polynomials --------------------------------------------------------------------------

def _encode(p: Poly) -> str:
    return _PAYLOAD + json.dumps([[list(m), c] for m, c in sorted(p.terms.items())])


def _decode(text: str) -> Poly | None:
    try:
        raw = json.loads(text[len(_PAYLOAD):])
        return Poly({tuple(str(a) for a in m): int(c) for m, c in raw})
    except (ValueError, TypeError):
        return None


def _is_dim_info(info: TypeInfo) -> bool:
    """A NewType of int, or an int subclass (not int or bool themselves)."""
    if info.fullname in ("builtins.int", "builtins.bool"):
        return False
    return info.is_newtype or any(b.type.fullname == "builtins.int" for b in info.bases)


class Dim:
    """What the plugin knows of one axis: its polynomial (``None``: unknown) and its display text."""

    __slots__ = ("poly", "text", "computed", "plain")

    def __init__(self, poly: Poly | None, text: str, computed: bool = False, plain: bool = False) -> None:
        self.poly = poly
        self.text = text
        self.computed = computed  # carried by an ``Any`` (plain mypy saw nothing)
        self.plain = plain        # a single named dim (compared by name, as mypy does)


class _Relations:
    """The relations declared by ``tp.relate`` that this mypy run has seen."""

    def __init__(self) -> None:
        self.defs: dict[str, Poly] = {}
        self.declared: set[str] = set()
        self.infos: dict[str, TypeInfo] = {}
        self.texts: dict[str, str] = {}
        self.atom_infos: dict[str, TypeInfo] = {}

    def add(self, subject: TypeInfo, poly: Poly, text: str = "") -> None:
        name = subject.fullname
        if name in self.defs or name in poly.atoms():
            return
        self.defs[name] = poly
        self.infos[name] = subject
        self.declared |= poly.atoms() | {name}
        self.texts[name] = f"{subject.name} == {text or poly.text(short=True)}"
        meta = subject.metadata.setdefault("tensorplay", {})
        meta["relation"] = _encode(poly)
        meta["text"] = self.texts[name]

    def note_info(self, info: TypeInfo) -> None:
        """A dim read from mypy's cache keeps its relation in its metadata."""
        if info.fullname in self.defs:
            return
        raw = info.metadata.get("tensorplay", {}).get("relation") if info.metadata else None
        if isinstance(raw, str):
            poly = _decode(raw)
            text = info.metadata["tensorplay"].get("text")
            if poly is not None:
                self.add(info, poly, text=text.split(" == ", 1)[-1] if isinstance(text, str) else "")

    def used(self, polys: Sequence[Poly]) -> list[str]:
        """The relation texts involved in ``polys`` (for messages)."""
        names: set[str] = set()
        todo = [a for p in polys for a in p.atoms()]
        while todo:
            a = todo.pop()
            if a in self.defs and a not in names:
                names.add(a)
                todo += list(self.defs[a].atoms())
        return [self.texts[n] for n in sorted(names)]


def _const_int(e: Expression) -> int | None:
    if isinstance(e, IntExpr):
        return e.value
    if isinstance(e, UnaryExpr) and e.op == "-" and isinstance(e.expr, IntExpr):
        return -e.expr.value
    return None


def _expr_poly(e: Expression, infos: dict[str, TypeInfo] | None = None) -> Poly | None:
    """The polynomial of a relation's expression (``tp.dim(Heads) * HeadDim``), read from the syntax tree."""
    n = _const_int(e)
    if n is not None:
        return Poly.const(n)
    if isinstance(e, RefExpr) and isinstance(e.node, TypeInfo) and _is_dim_info(e.node):
        if infos is not None:
            infos.setdefault(e.node.fullname, e.node)
        return Poly.atom(e.node.fullname)
    if isinstance(e, CallExpr) and isinstance(e.callee, RefExpr) and e.callee.fullname == _DIM and len(e.args) == 1:
        return _expr_poly(e.args[0], infos)
    if isinstance(e, OpExpr):
        left = _expr_poly(e.left, infos)
        if left is None:
            return None
        if e.op == "//":
            k = _const_int(e.right)
            return left.floordiv(k) if k is not None and k > 0 else None
        right = _expr_poly(e.right, infos)
        if right is None:
            return None
        if e.op == "+":
            return left + right
        if e.op == "-":
            return left - right
        if e.op == "*":
            return left * right
    return None


def _expr_text(e: Expression, outer: str = "") -> str:
    """The relation's expression as written (``Heads * HeadDim``), for messages."""
    n = _const_int(e)
    if n is not None:
        return str(n)
    if isinstance(e, (NameExpr, MemberExpr)):
        return str(e.name)
    if isinstance(e, CallExpr) and e.args:
        return _expr_text(e.args[0], outer)
    if isinstance(e, OpExpr):
        text = f"{_expr_text(e.left, e.op)} {e.op} {_expr_text(e.right, e.op + 'r')}"
        loose = e.op in "+-" and outer not in ("", "+") or outer.endswith("r") and outer[:-1] in ("-", "//")
        return f"({text})" if loose or (e.op in ("*", "//") and outer == "//r") else text
    return "?"


def _relate_call(e: Expression, infos: dict[str, TypeInfo]) -> tuple[TypeInfo, Poly] | None:
    if not (isinstance(e, CallExpr) and isinstance(e.callee, RefExpr) and e.callee.fullname == _RELATE
            and len(e.args) == 2):
        return None
    return _relation(e.args[0], e.args[1], infos)


def _relation(subject: Expression, value: Expression, infos: dict[str, TypeInfo]) -> tuple[TypeInfo, Poly] | None:
    if not (isinstance(subject, RefExpr) and isinstance(subject.node, TypeInfo) and _is_dim_info(subject.node)):
        return None
    poly = _expr_poly(value, infos)
    return (subject.node, poly) if poly is not None else None


Ctx = TypeVar("Ctx", FunctionContext, MethodContext)


def _safe(hook: Callable[[Ctx], Type]) -> Callable[[Ctx], Type]:
    """A hook that cannot stop mypy: on an unexpected failure the plugin says nothing about this call."""
    def run(ctx: Ctx) -> Type:
        try:
            return hook(ctx)
        except Exception:  # noqa: BLE001 - a plugin bug must not become a mypy crash or a false error
            if os.environ.get("TENSORPLAY_MYPY_PLUGIN_STRICT", "") not in ("", "0"):
                raise  # the test suite wants to see plugin bugs
            return ctx.default_return_type
    return run


# ---- the plugin -----------------------------------------------------------------------------------

class TensorplayPlugin(Plugin):
    """Evaluates dim arithmetic on ``Tensor[...]`` types (see the module docstring)."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.rel = _Relations()
        self._scanned: set[str] = set()
        self._module_count = -1
        self._tensor_fns: dict[str, bool] = {}
        self._targets: dict[int, dict[int, tuple[str, Type]]] = {}
        self._reported: set[tuple[str, int, int, str]] = set()
        self.atom_infos: dict[str, TypeInfo] = {}

    # -- hook registration ---------------------------------------------------------------------
    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        hook = self._function_hook(fullname)
        return _safe(hook) if hook is not None else None

    def _function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if fullname == _RELATE:
            return self._on_relate
        if fullname in ("tensorplay.creation.cat", "tensorplay.creation.stack"):
            return self._on_cat
        if fullname in ("tensorplay.prefix.conv", "tensorplay.prefix.conv_transpose", "tensorplay.prefix.max_pool",
                        "tensorplay.prefix.avg_pool"):
            return self._on_window
        if self._takes_tensors(fullname):
            return self._on_call
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        hook = self._method_hook(fullname)
        return _safe(hook) if hook is not None else None

    def _method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        cls, _, name = fullname.rpartition(".")
        if cls == "tensorplay.index.Index" and name == "__getitem__":
            return self._on_getitem
        if cls != _TENSOR:
            return None
        if name in ("reshape", "view"):
            return self._on_reshape
        if name == "__getitem__":
            return self._on_getitem
        if name in _ELEMENTWISE:
            op = _OP_TEXT.get(name.replace("__r", "__", 1), name.strip("_"))
            return lambda ctx: self._on_elementwise(ctx, op)
        if name == "__matmul__":
            return self._on_matmul
        return None

    def _takes_tensors(self, fullname: str) -> bool:
        known = self._tensor_fns.get(fullname)
        if known is None:
            known = False
            node = self.lookup_fully_qualified(fullname)
            typ = getattr(node.node, "type", None) if node is not None else None
            proper = get_proper_type(typ) if isinstance(typ, Type) else None
            if isinstance(proper, (CallableType, Overloaded)) and not fullname.startswith(("builtins.", "typing.")):
                items = proper.items if isinstance(proper, Overloaded) else [proper]
                known = any(_tensor_instance(t) is not None for item in items for t in item.arg_types)
            self._tensor_fns[fullname] = known
        return known

    # -- relations ------------------------------------------------------------------------------
    def _on_relate(self, ctx: FunctionContext) -> Type:
        if len(ctx.args) > 1 and ctx.args[0] and ctx.args[1]:
            found = _relation(ctx.args[0][0], ctx.args[1][0], self.rel.atom_infos)
            if found is not None:
                self.rel.add(*found, text=_expr_text(ctx.args[1][0]))
        return ctx.default_return_type

    def _scan(self, api: CheckerPluginInterface) -> None:
        """Read the ``tp.relate`` statements at the top of every module analysed so far (once each)."""
        modules: dict[str, MypyFile] = getattr(self, "_modules", None) or {}
        if len(modules) == self._module_count and isinstance(api, TypeChecker) and api.tree.fullname in self._scanned:
            return
        self._module_count = len(modules)
        for name, tree in list(modules.items()):
            if name in self._scanned or tree.is_stub:
                continue
            if not tree.defs and name != getattr(getattr(api, "tree", None), "fullname", None):
                continue  # read from the cache (or not analysed yet): its dims carry their relations
            self._scanned.add(name)
            self._scan_block(tree.defs)

    def _scan_block(self, stmts: Sequence[Statement]) -> None:
        for s in stmts:
            if isinstance(s, ExpressionStmt):
                found = _relate_call(s.expr, self.rel.atom_infos)
                if found is not None and isinstance(s.expr, CallExpr):
                    self.rel.add(*found, text=_expr_text(s.expr.args[1]))
            elif isinstance(s, IfStmt):
                for b in s.body:
                    self._scan_block(b.body)

    # -- reading types --------------------------------------------------------------------------
    def dim_of(self, t: Type) -> Dim:
        p = get_proper_type(t)
        if isinstance(p, Instance):
            if p.last_known_value is not None and isinstance(p.last_known_value.value, int) \
                    and not isinstance(p.last_known_value.value, bool):
                return Dim(Poly.const(p.last_known_value.value), str(p.last_known_value.value))
            if _is_dim_info(p.type):
                self.rel.note_info(p.type)
                self.atom_infos.setdefault(p.type.fullname, p.type)
                return Dim(Poly.atom(p.type.fullname), p.type.name, plain=True)
            return Dim(None, p.type.name)
        if isinstance(p, LiteralType) and isinstance(p.value, int) and not isinstance(p.value, bool):
            return Dim(Poly.const(p.value), str(p.value))
        if isinstance(p, AnyType):
            name = p.missing_import_name
            if name is not None and name.startswith(_PAYLOAD):
                poly = _decode(name)
                if poly is not None:
                    return Dim(poly, poly.text(short=True), computed=True)
            return Dim(None, "Any")
        if isinstance(p, TypeVarType):
            return Dim(Poly.atom("typevar:" + p.fullname), p.name, plain=True)
        return Dim(None, str(p))

    def dims_of(self, t: Type) -> list[Dim] | None:
        """The axes of a fully known ``Tensor[...]`` type (``None`` for other types and variadic shapes)."""
        inst = _tensor_instance(t)
        if inst is None:
            return None
        out: list[Dim] = []
        for a in inst.args:
            if isinstance(get_proper_type(a), UnpackType) or isinstance(a, UnpackType):
                return None
            out.append(self.dim_of(a))
        return out

    def same(self, a: Dim, b: Dim) -> bool | None:
        """Do two axes agree? (``None``: cannot tell.) Two plain named dims compare by name, as mypy does."""
        if a.poly is None or b.poly is None:
            return None
        if a.plain and b.plain:
            return a.poly == b.poly
        return compare(a.poly, b.poly, self.rel.defs, self.rel.declared)

    def rules(self, polys: Sequence[Poly | None]) -> str:
        texts = self.rel.used([p for p in polys if p is not None])
        return f" (using {'; '.join(texts)})" if texts else ""

    # -- making types ----------------------------------------------------------------------------
    def make_dim(self, poly: Poly | None, api: CheckerPluginInterface, candidates: Sequence[tuple[Dim, Type]] = ()
                 ) -> Type:
        """The type of a computed axis: an input's dim or a declared dim when equal, a ``Literal`` for a
        number, else ``Any`` carrying the expression."""
        if poly is None:
            return AnyType(TypeOfAny.special_form)
        value = poly.value()
        if value is not None and value >= 0:
            return LiteralType(value, api.named_generic_type("builtins.int", []))
        for d, t in candidates:
            if d.poly is not None and not d.computed and self._equal(d.poly, poly):
                return t
        for name, info in self.rel.infos.items():
            if self._equal(Poly.atom(name), poly):
                return Instance(info, [])
        atoms = poly.atoms()
        if len(atoms) == 1 and poly == Poly.atom(next(iter(atoms))):
            found = self.atom_infos.get(next(iter(atoms))) or self.rel.atom_infos.get(next(iter(atoms)))
            if found is not None:
                return Instance(found, [])
        return _carrier(poly)

    def refine(self, typed: Type, poly: Poly | None, api: CheckerPluginInterface,
               candidates: Sequence[tuple[Dim, Type]] = ()) -> Type:
        """The computed type for an axis mypy typed ``typed``: an ``Any`` axis takes any computed type, an
        ``int`` one only a ``Literal`` or a name (an ``Any`` there would hide mypy's own errors), a named
        one stays."""
        p = get_proper_type(typed)
        if isinstance(p, AnyType):
            return self.make_dim(poly, api, candidates)
        if isinstance(p, Instance) and p.type.fullname == "builtins.int" and p.last_known_value is None:
            made = self.make_dim(poly, api, candidates)
            return typed if isinstance(made, AnyType) else made
        return typed

    def _equal(self, a: Poly, b: Poly) -> bool:
        return a == b or compare(a, b, self.rel.defs, set()) is True

    def fail(self, api: CheckerPluginInterface, msg: str, context: Context) -> None:
        """Report a proven shape error once.

        mypy picks an overload by trying each item with its errors filtered and keeps the first
        that reports none, without checking it again; the hooks run last in a try, so an error
        found in a try that is still clean is reported past the filter (once per place)."""
        key = (getattr(api, "path", ""), context.line, context.column, msg)
        if key in self._reported:
            return
        errors = api.msg.errors if isinstance(api, TypeChecker) else None
        watchers = errors._watchers if errors is not None else []
        if watchers and any(w.has_new_errors() for w in watchers):
            return  # this try already failed: mypy will not use it
        self._reported.add(key)
        if errors is None or not watchers:
            api.fail(msg, context, code=SHAPE)
            return
        errors._watchers = []
        try:
            api.fail(msg, context, code=SHAPE)
        finally:
            errors._watchers = watchers

    def show(self, dims: Sequence[Dim]) -> str:
        return "[" + ", ".join(d.text for d in dims) + "]"

    # -- reshape / view --------------------------------------------------------------------------
    def _on_reshape(self, ctx: MethodContext) -> Type:
        self._scan(ctx.api)
        source = self.dims_of(ctx.type)
        if source is None:
            return ctx.default_return_type
        exprs = [e for group in ctx.args for e in group]
        types = [t for group in ctx.arg_types for t in group]
        if len(exprs) == 1 and isinstance(exprs[0], TupleExpr):
            tt = get_proper_type(types[0])
            exprs = list(exprs[0].items)
            types = list(tt.items) if isinstance(tt, TupleType) and len(tt.items) == len(exprs) else []
        if len(types) != len(exprs):
            return ctx.default_return_type
        target: list[Dim] = []
        for e, t in zip(exprs, types):
            n = _const_int(e)
            target.append(Dim(Poly.const(n), str(n)) if n is not None else self.dim_of(t))
        if any(d.poly is None and d.text != "-1" for d in target) or any(d.poly is None for d in source):
            return ctx.default_return_type
        total = product(d.poly for d in source if d.poly is not None)
        holes = [i for i, d in enumerate(target) if d.poly is not None and d.poly.value() == -1]
        known = [d.poly for i, d in enumerate(target) if i not in holes and d.poly is not None]
        where = f"{ctx.type.type.name if isinstance(ctx.type, Instance) else 'Tensor'}{self.show(source)}"
        if len(holes) == 1:
            return self._reshape_hole(ctx, source, target, holes[0], total, product(known))
        if holes:
            return ctx.default_return_type
        new = product(known)
        if self.same(Dim(total, ""), Dim(new, "")) is False:
            self.fail(ctx.api, f"reshape: cannot view {where} as {self.show(target)}: {_count(source)} elements "
                               f"against {_count(target)}{self.rules([total, new])}", ctx.context)
        return ctx.default_return_type

    def _reshape_hole(self, ctx: MethodContext, source: list[Dim], target: list[Dim], hole: int, total: Poly,
                      rest: Poly) -> Type:
        n, k = total.value(), rest.value()
        if n is not None and k is not None and k > 0 and n % k:
            name = ctx.type.type.name if isinstance(ctx.type, Instance) else "Tensor"
            self.fail(ctx.api, f"reshape: cannot view {name}{self.show(source)} as {self.show(target)}: {n} elements "
                               f"do not divide by {_count([d for i, d in enumerate(target) if i != hole])}", ctx.context)
            return ctx.default_return_type
        quotient = _divide_exact(_expand(total, self.rel.defs), _expand(rest, self.rel.defs))
        ret = _tensor_instance(ctx.default_return_type)
        if quotient is None or ret is None or len(ret.args) != len(target):
            return ctx.default_return_type
        args = list(ret.args)
        args[hole] = self.refine(args[hole], quotient, ctx.api, [(d, t) for d, t in zip(source, _args(ctx.type))])
        return ret.copy_modified(args=args)

    # -- slicing ---------------------------------------------------------------------------------
    def _on_getitem(self, ctx: MethodContext) -> Type:
        if not ctx.args or not ctx.args[0]:
            return ctx.default_return_type
        key = ctx.args[0][0]
        if _const_int(key) is not None:
            return ctx.default_return_type
        source = self.dims_of(ctx.type)
        inst = _tensor_instance(ctx.type)
        self_type = get_proper_type(ctx.type)
        if source is None or inst is None or not isinstance(self_type, Instance):
            return ctx.default_return_type
        is_index = self_type.type.fullname == "tensorplay.index.Index" and len(self_type.args) == len(source) + 1
        if inst is not self_type and not is_index:
            return ctx.default_return_type
        items = list(key.items) if isinstance(key, TupleExpr) else [key]
        if not all(isinstance(i, (SliceExpr, EllipsisExpr)) or _const_int(i) is not None
                   or (isinstance(i, NameExpr) and i.fullname == "builtins.None") for i in items):
            return ctx.default_return_type
        self._scan(ctx.api)
        ellipses = sum(isinstance(i, EllipsisExpr) for i in items)
        used = sum(not (isinstance(i, EllipsisExpr) or isinstance(i, NameExpr)) for i in items)
        if ellipses > 1 or used > len(source):
            return ctx.default_return_type
        if ellipses:
            at = next(j for j, i in enumerate(items) if isinstance(i, EllipsisExpr))
            items = items[:at] + [SliceExpr(None, None, None)] * (len(source) - used) + items[at + 1:]
        args_in = list(inst.args)
        out: list[Type] = []
        axis = 0
        changed = False
        for item in items:
            if isinstance(item, NameExpr):  # None: a new axis of size 1
                out.append(LiteralType(1, ctx.api.named_generic_type("builtins.int", [])))
                continue
            if not isinstance(item, SliceExpr):  # an int index drops the axis
                axis += 1
                continue
            d = source[axis]
            length = _slice_length(d.poly, item)
            if length is None:
                out.append(args_in[axis] if _is_full(item) else AnyType(TypeOfAny.special_form))
            else:
                out.append(self.make_dim(length, ctx.api, [(d, args_in[axis])]))
                changed = True
            axis += 1
        if not changed:
            return ctx.default_return_type
        out += args_in[axis:]
        result = (self_type.copy_modified(args=[self_type.args[0], *out]) if is_index  # Index[Bound, *dims]
                  else inst.copy_modified(args=out))
        self._check_target(ctx.api, ctx.context, result)
        return result

    # -- elementwise operators -------------------------------------------------------------------
    def _on_elementwise(self, ctx: MethodContext, op: str) -> Type:
        if not ctx.arg_types or not ctx.arg_types[0]:
            return ctx.default_return_type
        a = self.dims_of(ctx.type)
        b = self.dims_of(ctx.arg_types[0][0])
        if a is None or b is None or not any(d.computed for d in a + b):
            return ctx.default_return_type
        for i in range(1, min(len(a), len(b)) + 1):
            x, y = a[-i], b[-i]
            if (x.computed or y.computed) and not _is_one(x) and not _is_one(y) and self.same(x, y) is False:
                self.fail(ctx.api, f"{op}: the shapes {self.show(a)} and {self.show(b)} do not broadcast: axis "
                                   f"{len(a) - i} has {x.text} against {y.text}{self.rules([x.poly, y.poly])}",
                          ctx.context)
                break
        return ctx.default_return_type

    def _on_matmul(self, ctx: MethodContext) -> Type:
        if not ctx.arg_types or not ctx.arg_types[0]:
            return ctx.default_return_type
        a = self.dims_of(ctx.type)
        b = self.dims_of(ctx.arg_types[0][0])
        if a is None or b is None or not a or not b or not any(d.computed for d in a + b):
            return ctx.default_return_type
        x, y = a[-1], (b[-2] if len(b) >= 2 else b[-1])
        if (x.computed or y.computed) and self.same(x, y) is False:
            self.fail(ctx.api, f"@: the contracted dims differ: {self.show(a)} @ {self.show(b)} contracts {x.text} "
                               f"with {y.text}{self.rules([x.poly, y.poly])}", ctx.context)
        return ctx.default_return_type

    # -- cat / stack -----------------------------------------------------------------------------
    def _on_cat(self, ctx: FunctionContext) -> Type:
        if not ctx.args or len(ctx.args[0]) != 1 or not isinstance(ctx.args[0][0], (ListExpr, TupleExpr)):
            return ctx.default_return_type
        api = ctx.api
        if not isinstance(api, TypeChecker):
            return ctx.default_return_type
        self._scan(api)
        callee = getattr(ctx.context, "callee", None)
        stack = isinstance(callee, RefExpr) and callee.fullname == "tensorplay.creation.stack"
        fn = "stack" if stack else "cat"
        elements = ctx.args[0][0].items
        types = [api.lookup_type(e) if api.has_type(e) else None for e in elements]
        if not elements or any(t is None for t in types):
            return ctx.default_return_type
        shapes = [self.dims_of(t) for t in types if t is not None]
        insts = [_tensor_instance(t) for t in types if t is not None]
        if any(s is None for s in shapes) or any(i is None for i in insts):
            return ctx.default_return_type
        known = [s for s in shapes if s is not None]
        axis_expr = ctx.args[1][0] if len(ctx.args) > 1 and ctx.args[1] else None
        axis = 0 if axis_expr is None else _const_int(axis_expr)
        rank = len(known[0])
        for j, s in enumerate(known[1:], start=1):
            if len(s) != rank:
                self.fail(api, f"{fn}: tensor {j} has rank {len(s)}, tensor 0 has rank {rank}: "
                               f"{self.show(known[0])} and {self.show(s)}", ctx.context)
                return ctx.default_return_type
        if axis is None:
            return ctx.default_return_type
        out_rank = rank + 1 if stack else rank
        if not -out_rank <= axis < out_rank:
            return ctx.default_return_type
        axis %= out_rank
        for j, s in enumerate(known[1:], start=1):
            for i, (x, y) in enumerate(zip(known[0], s)):
                if i == axis and not stack:
                    continue
                if self.same(x, y) is False:
                    rule = ("stacked tensors must have one shape" if stack else
                            f"the dims off the concatenation axis {axis} must agree")
                    self.fail(api, f"{fn}: tensor {j} {self.show(s)} does not match tensor 0 {self.show(known[0])} "
                                   f"on axis {i} ({y.text} against {x.text}; {rule}){self.rules([x.poly, y.poly])}",
                              ctx.context)
                    return ctx.default_return_type
        first = insts[0]
        assert first is not None
        args = list(first.args)
        if self.dims_of(ctx.default_return_type) is not None:
            return ctx.default_return_type  # an overload typed it already (stack along 0 or -1)
        if stack:
            args.insert(axis, LiteralType(len(known), api.named_generic_type("builtins.int", [])))
        else:
            polys = [s[axis].poly for s in known]
            total: Poly | None = Poly.const(0)
            for p in polys:
                total = None if p is None or total is None else total + p
            args[axis] = self.make_dim(total, api, [(known[0][axis], first.args[axis])])
        result = _tensor_info_instance(ctx.default_return_type, first, args)
        self._check_target(api, ctx.context, result)
        return result

    # -- convolution and pooling -----------------------------------------------------------------
    def _on_window(self, ctx: FunctionContext) -> Type:
        callee = getattr(ctx.context, "callee", None)
        fn = callee.fullname.rsplit(".", 1)[-1] if isinstance(callee, RefExpr) else "conv"
        named = {n: i for i, n in enumerate(ctx.callee_arg_names) if n is not None}
        if "x" not in named or not ctx.arg_types[named["x"]]:
            return ctx.default_return_type
        self._scan(ctx.api)
        x = self.dims_of(ctx.arg_types[named["x"]][0])
        if x is None:
            return ctx.default_return_type

        def arg(name: str) -> Expression | None:
            i = named.get(name)
            return ctx.args[i][0] if i is not None and ctx.args[i] else None

        if fn in ("conv", "conv_transpose"):
            if "w" not in named or not ctx.arg_types[named["w"]]:
                return ctx.default_return_type
            w = self.dims_of(ctx.arg_types[named["w"]][0])
            if w is None or len(w) < 3:
                return ctx.default_return_type
            rank = len(w) - 2
            kernel: list[int | None] = [d.poly.value() if d.poly is not None else None for d in w[2:]]
        else:
            ks = _int_tuple(arg("kernel_size"), None)
            if ks is None:
                return ctx.default_return_type
            rank = len(ks) if isinstance(arg("kernel_size"), TupleExpr) else 2
            kernel = list(ks * rank if len(ks) == 1 else ks)
        if len(x) < rank or any(k is None for k in kernel) or len(kernel) != rank:
            return ctx.default_return_type
        pad_expr = arg("padding")
        if isinstance(pad_expr, StrExpr):
            if pad_expr.value != "valid":
                return ctx.default_return_type
            pad_expr = None
        stride = _int_tuple(arg("stride"), rank)
        if stride is None and arg("stride") is None and fn in ("max_pool", "avg_pool"):
            stride = [k for k in kernel if k is not None]
        stride = stride or ([1] * rank if arg("stride") is None else None)
        padding = _int_tuple(pad_expr, rank) or ([0] * rank if pad_expr is None else None)
        dilation = _int_tuple(arg("dilation"), rank) or ([1] * rank if arg("dilation") is None else None)
        out_pad = _int_tuple(arg("output_padding"), rank) or ([0] * rank if arg("output_padding") is None else None)
        if any(v is None for v in (stride, padding, dilation, out_pad)) or _has_true(arg("ceil_mode")):
            return ctx.default_return_type
        assert stride is not None and padding is not None and dilation is not None and out_pad is not None
        spatial = x[len(x) - rank:]
        outs: list[Poly | None] = []
        shown_outs: list[str] = []
        for i, d in enumerate(spatial):
            k = kernel[i]
            assert k is not None
            size = _window_size(fn, k, stride[i], padding[i], dilation[i], out_pad[i])
            if d.poly is None or stride[i] <= 0:
                outs.append(None)
                shown_outs.append("")
                continue
            expanded = size(substitute(d.poly, self.rel.defs))  # a // then divides what the relations allow
            raw = size(d.poly)
            outs.append(expanded)
            shown_outs.append((raw if not any(a.startswith("(") for a in raw.atoms()) else expanded).text(short=True))
        rule = {"conv": "out = (in + 2p - d(k-1) - 1)//s + 1", "conv_transpose":
                "out = (in-1)s - 2p + d(k-1) + output_padding + 1"}.get(fn, "out = (in + 2p - k)//s + 1")
        ret = _tensor_instance(ctx.default_return_type)
        if ret is None:
            return ctx.default_return_type
        ret_dims = self.dims_of(ret)
        if ret_dims is None or len(ret_dims) < rank:
            return ctx.default_return_type
        given = ret_dims[len(ret_dims) - rank:]
        args = list(ret.args)
        shown = self.show(x)
        for i, (g, o) in enumerate(zip(given, outs)):
            if o is None:
                continue
            if g.poly is not None:
                verdict = compare(g.poly, o, self.rel.defs, self.rel.declared)
                if verdict is False:
                    self.fail(ctx.api, f"{fn}: output spatial dim {i} is {shown_outs[i]} for input {shown} "
                                       f"(kernel {kernel[i]}, stride {stride[i]}, padding {padding[i]}, dilation "
                                       f"{dilation[i]}; {rule}), but it is named {g.text}"
                                       f"{self.rules([g.poly, o])}", ctx.context)
                    return ctx.default_return_type
            else:
                at = len(args) - rank + i
                args[at] = self.refine(args[at], o, ctx.api, [(d, t) for d, t in zip(x, _args(ctx.arg_types[named['x']][0]))])
        result = ret.copy_modified(args=args)
        self._check_target(ctx.api, ctx.context, result)
        return result

    # -- calls of typed functions ----------------------------------------------------------------
    def _on_call(self, ctx: FunctionContext) -> Type:
        if not any(self._has_computed(t) for group in ctx.arg_types for t in group):
            return ctx.default_return_type
        callee = getattr(ctx.context, "callee", None)
        if not isinstance(callee, RefExpr):
            return ctx.default_return_type
        node = self.lookup_fully_qualified(callee.fullname)
        found = get_proper_type(getattr(node.node, "type", None)) if node is not None else None
        items: list[CallableType] = (found.items if isinstance(found, Overloaded) else
                                     [found] if isinstance(found, CallableType) else [])
        typ = next((item for item in items if item.arg_names == ctx.callee_arg_names), None)
        if typ is None:
            return ctx.default_return_type
        bound: dict[str, tuple[Dim, str]] = {}
        for i, group in enumerate(ctx.arg_types):
            if i >= len(typ.arg_types) or len(group) != 1:
                continue
            formal = _tensor_instance(typ.arg_types[i])
            actual = self.dims_of(group[0])
            if formal is None or actual is None:
                continue
            where = f"argument {ctx.callee_arg_names[i] or i!r}"
            problem = self._match(formal, actual, bound, where)
            if problem:
                self.fail(ctx.api, f"{callee.fullname.rsplit('.', 1)[-1]}(): {where} has shape {self.show(actual)}; {problem}", ctx.context)
                break
        return ctx.default_return_type

    def _match(self, formal: Instance, actual: list[Dim], bound: dict[str, tuple[Dim, str]], where: str) -> str:
        """Compare an actual shape with a formal ``Tensor[...]``; a text describing a proven mismatch, or ''."""
        items = list(formal.args)
        star = next((j for j, a in enumerate(items) if isinstance(a, UnpackType)), None)
        if star is None:
            if len(items) != len(actual):
                return ""
            pairs = list(zip(items, actual))
        else:
            tail = len(items) - star - 1
            if len(actual) < star + tail:
                return ""
            pairs = list(zip(items[:star], actual[:star])) + list(zip(items[star + 1:], actual[len(actual) - tail:]))
            unpack = items[star]
            inner = get_proper_type(unpack.type) if isinstance(unpack, UnpackType) else None
            if isinstance(inner, TypeVarTupleType):
                run = actual[star:len(actual) - tail]
                for j, d in enumerate(run):
                    key = f"{inner.fullname}#{j}/{len(run)}"
                    problem = self._bind(key, d, bound, where, f"*{inner.name}")
                    if problem:
                        return problem
        for f, d in pairs:
            fp = get_proper_type(f)
            if isinstance(fp, TypeVarType):
                problem = self._bind(fp.fullname, d, bound, where, fp.name)
                if problem:
                    return problem
                continue
            want = self.dim_of(f)
            if d.computed and self.same(want, d) is False:
                return f"expected {_show_instance(formal, self)} ({d.text} against {want.text})" \
                       f"{self.rules([want.poly, d.poly])}"
        return ""

    def _bind(self, key: str, d: Dim, bound: dict[str, tuple[Dim, str]], where: str, label: str) -> str:
        seen = bound.get(key)
        if seen is None:
            bound[key] = (d, where)
            return ""
        if (seen[0].computed or d.computed) and self.same(seen[0], d) is False:
            return (f"its dim {label} is {d.text}, but {seen[1]} binds it to {seen[0].text}"
                    f"{self.rules([seen[0].poly, d.poly])}")
        return ""

    def _has_computed(self, t: Type) -> bool:
        inst = _tensor_instance(t)
        if inst is None:
            return False
        for a in inst.args:
            p = get_proper_type(a)
            if isinstance(p, AnyType) and p.missing_import_name and p.missing_import_name.startswith(_PAYLOAD):
                return True
        return False

    # -- return statements and annotated assignments ---------------------------------------------
    def _check_target(self, api: CheckerPluginInterface, context: Context, result: Type) -> None:
        """A computed result that is returned, or assigned to an annotated name, must fit the declared type."""
        if not isinstance(api, TypeChecker) or not self._has_computed(result):
            return
        fn = api.scope.current_function()
        if fn is None:
            return
        targets = self._targets.get(id(fn))
        if targets is None:
            targets = self._targets[id(fn)] = _collect_targets(fn)
        hit = targets.get(id(context))
        if hit is None:
            return
        what, declared = hit
        if what == "return value" and api.return_types:
            declared = api.return_types[-1]
        formal = _tensor_instance(declared)
        actual = self.dims_of(result)
        if formal is None or actual is None:
            return
        problem = self._match(formal, actual, {}, what)
        if problem:
            self.fail(api, f"{what}: shape {self.show(actual)} where {problem}", context)


# ---- helpers ---------------------------------------------------------------------------------------

def _carrier(poly: Poly) -> AnyType:
    """``Any`` carrying ``poly`` (in the import-name slot mypy keeps, and copies, for derived ``Any``s)."""
    source = AnyType(TypeOfAny.from_unimported_type, missing_import_name=_encode(poly))
    return AnyType(TypeOfAny.from_another_any, source_any=source)


def _tensor_instance(t: Type | None) -> Instance | None:
    """``t`` seen as a ``Tensor[...]`` (an ``Index`` or other subclass mapped to its Tensor part)."""
    if t is None:
        return None
    p = get_proper_type(t)
    if not isinstance(p, Instance):
        return None
    if p.type.fullname == _TENSOR:
        return p
    for base in p.type.mro[1:]:
        if base.fullname == _TENSOR:
            return map_instance_to_supertype(p, base)
    return None


def _tensor_info_instance(default: Type, first: Instance, args: list[Type]) -> Type:
    ret = _tensor_instance(default)
    base = ret if ret is not None else _tensor_instance(first)
    if base is None:
        return default
    return Instance(base.type, args)


def _args(t: Type) -> list[Type]:
    inst = _tensor_instance(t)
    return list(inst.args) if inst is not None else []


def _show_instance(inst: Instance, plugin: TensorplayPlugin) -> str:
    parts = []
    for a in inst.args:
        if isinstance(a, UnpackType):
            inner = get_proper_type(a.type)
            parts.append("*" + (inner.name if isinstance(inner, TypeVarLikeType) else str(inner)))
        else:
            parts.append(plugin.dim_of(a).text)
    return f"Tensor[{', '.join(parts)}]"


def _count(dims: Sequence[Dim]) -> str:
    """The element count of a shape, as a product of its dims."""
    return "*".join(d.text if d.text.isidentifier() or d.text.isdigit() else f"({d.text})" for d in dims) or "1"


def _is_one(d: Dim) -> bool:
    return d.poly is not None and d.poly.value() == 1


def _is_full(s: SliceExpr) -> bool:
    return s.begin_index is None and s.end_index is None and s.stride is None


def _slice_length(n: Poly | None, s: SliceExpr) -> Poly | None:
    """The length of ``axis[a:b:c]`` with constant bounds (assumed to lie within the axis when it is symbolic)."""
    a = 0 if s.begin_index is None else _const_int(s.begin_index)
    b = None if s.end_index is None else _const_int(s.end_index)
    c = 1 if s.stride is None else _const_int(s.stride)
    if a is None or c is None or c <= 0 or (s.end_index is not None and b is None) or n is None:
        return None
    size = n.value()
    if size is not None:
        return Poly.const(len(range(size)[a:b:c]))
    start = Poly.const(a) if a >= 0 else n + Poly.const(a)
    stop = n if b is None else (Poly.const(b) if b >= 0 else n + Poly.const(b))
    length = stop - start
    return length if c == 1 else (length + Poly.const(c - 1)).floordiv(c)


def _int_tuple(e: Expression | None, rank: int | None) -> list[int] | None:
    if e is None:
        return None
    n = _const_int(e)
    if n is not None:
        return [n] * (rank or 1)
    if isinstance(e, TupleExpr):
        vals = [_const_int(i) for i in e.items]
        if any(v is None for v in vals) or (rank is not None and len(vals) != rank):
            return None
        return [v for v in vals if v is not None]
    return None


def _window_size(fn: str, k: int, s: int, p: int, d: int, op: int) -> Callable[[Poly], Poly]:
    """The output size of one spatial axis of a conv, transposed conv or pool, as a function of the input's."""
    if fn == "conv_transpose":
        return lambda n: (n - Poly.const(1)) * Poly.const(s) + Poly.const(-2 * p + d * (k - 1) + op + 1)
    if fn == "conv":
        return lambda n: (n + Poly.const(2 * p - d * (k - 1) - 1)).floordiv(s) + Poly.const(1)
    return lambda n: (n + Poly.const(2 * p - k)).floordiv(s) + Poly.const(1)


def _has_true(e: Expression | None) -> bool:
    return isinstance(e, NameExpr) and e.fullname == "builtins.True"


def _expand(p: Poly, defs: dict[str, Poly]) -> Poly:
    return substitute(p, defs)


def _divide_exact(num: Poly, den: Poly) -> Poly | None:
    """``num / den`` when ``den`` is one monomial dividing every term of ``num``."""
    if len(den.terms) != 1:
        return None
    (mono, coef), = den.terms.items()
    if coef == 0:
        return None
    out: dict[tuple[str, ...], int] = {}
    for m, c in num.terms.items():
        rest = list(m)
        for a in mono:
            if a not in rest:
                return None
            rest.remove(a)
        if c % coef:
            return None
        out[tuple(rest)] = c // coef
    return Poly(out)


def _collect_targets(fn: FuncItem) -> dict[int, tuple[str, Type]]:
    """id(expression) -> (what, declared type) for ``return <expr>`` and ``name: T = <expr>`` in ``fn``
    (also ``y = <expr>`` when ``y`` is assigned once and then returned)."""
    out: dict[int, tuple[str, Type]] = {}
    sig = get_proper_type(fn.type) if fn.type is not None else None
    ret_type: Type = sig.ret_type if isinstance(sig, CallableType) else AnyType(TypeOfAny.special_form)
    assigned: dict[str, list[Expression]] = {}
    returned: set[str] = set()

    def walk(stmts: Sequence[Statement]) -> None:
        for s in stmts:
            if isinstance(s, ReturnStmt) and s.expr is not None:
                out[id(s.expr)] = ("return value", ret_type)
                if isinstance(s.expr, NameExpr):
                    returned.add(s.expr.name)
            elif isinstance(s, AssignmentStmt):
                if s.type is not None and len(s.lvalues) == 1 and isinstance(s.lvalues[0], NameExpr):
                    out[id(s.rvalue)] = (f"assignment to {s.lvalues[0].name!r}", s.type)
                for lv in s.lvalues:
                    if isinstance(lv, NameExpr):
                        assigned.setdefault(lv.name, []).append(s.rvalue)
            elif isinstance(s, Block):
                walk(s.body)
            elif isinstance(s, IfStmt):
                for b in s.body:
                    walk(b.body)
                if s.else_body is not None:
                    walk(s.else_body.body)
            elif isinstance(s, (WithStmt, ForStmt, WhileStmt)):
                walk(s.body.body)
            elif isinstance(s, TryStmt):
                walk(s.body.body)

    walk(fn.body.body)
    for name in returned:
        values = assigned.get(name, [])
        if len(values) == 1 and id(values[0]) not in out:
            out[id(values[0])] = ("return value", ret_type)
    return out


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: the plugin class (any mypy 1.x/2.x plugin API)."""
    return TensorplayPlugin


__all__ = ["SHAPE", "TensorplayPlugin", "plugin"]
