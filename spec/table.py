"""The primitive table: every primitive of tensorplay, declared once.

A :class:`Primitive` says what the rest of the library needs to know about a
primitive without running it: its ``name`` (what graphs, saved programs and
error messages call it), its ``family`` (primitives of one family share their
generic handling: the eager dispatch path, the batching rule, the sample
shapes of the tests), its tensor ``inputs``, its static ``params`` (with types
and defaults), a ``version`` (bumped when the meaning of a saved node changes,
so a loader can refuse programs it does not understand), and flags.

Everything that used to be a list of primitive names elsewhere is derived from
this table; the pieces of one primitive are found by its name:

* shape rule and reference: ``<name>_rule`` / ``<name>_ref`` in the spec module
  of its family (:data:`FAMILY_MODULES` in :mod:`.registry`), or generated for
  the elementwise families from ``dtypes`` and the reference function tables;
* the protocol method: ``Ops.<name>`` (:mod:`tensorplay.ops`);
* the eager kernel, the vjp, jvp and batching rules: tables keyed by name
  (:mod:`tensorplay.primitives` finds them all and names what is missing).

``docs/adding_a_primitive.md`` walks through adding one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final


class _Required:
    """The default of a parameter that has none."""

    _instance: _Required | None = None

    def __new__(cls) -> _Required:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()
"""Marks a parameter without a default."""

PARAM_TYPES: Final = {
    "int": "a Python int",
    "float": "a Python float (an int is accepted)",
    "scalar": "a Python bool, int or float",
    "bool": "a Python bool",
    "str": "a string from the primitive's documented choices",
    "dtype": "a dtype name: float32, float64, int32, int64 or bool",
    "dim": "a size: an int >= 0 or a symbolic dim",
    "dims": "a tuple of sizes (ints >= 0 or symbolic dims)",
    "ints": "a tuple of ints",
    "int_pairs": "a tuple of (int, int) pairs",
}
"""The types a static parameter may have, with what each means (saved programs are checked against them)."""

FAMILIES: Final = {
    "unary": "elementwise, one tensor input, result shaped like it",
    "binary": "elementwise, two inputs (tensors or Python scalars) with numpy broadcasting",
    "select": "elementwise choice between two values by a bool condition",
    "reduce": "reduction over a set of axes",
    "arg_reduce": "index of an extremum along one axis",
    "view": "a reshaping of the elements (no arithmetic); eager returns a view",
    "structure": "moves, pads, joins, gathers or converts elements",
    "creation": "makes a tensor from its parameters alone",
    "linalg": "batched matrix product",
    "conv": "N-d convolution over x[N, C, *spatial] and its adjoints",
    "pool": "N-d pooling over x[N, C, *spatial] and its adjoints",
    "norm": "normalisation with learned scale and shift",
    "softmax": "softmax-like normalisation along one axis",
    "attention": "scaled dot-product attention",
    "random": "counter-based random draws from a key input",
    "scan": "a running reduction or an ordering along one axis (``axis``), result shaped like the input",
    "check": "returns its input unchanged after checking its values when it runs (a recorded assertion)",
}
"""The families of primitives, with what their members have in common."""

DTYPE_RULES: Final = {
    # unary
    "keep_numeric": "the input dtype; bool is refused",
    "to_float": "the input dtype for floats; int and bool give float32",
    "float_only": "the input dtype; only float inputs are accepted",
    "to_bool": "bool",
    "keep": "the input dtype",
    "int_or_bool": "the input dtype; only integer and bool inputs are accepted",
    # binary
    "promote": "the promoted dtype of both operands (Python scalars are weak)",
    "promote_no_bool": "the promoted dtype; bool operands are refused",
    "promote_not_bool": "the promoted dtype; a bool result is refused",
    "promote_to_float": "the promoted dtype; int and bool results give float32",
    "compare": "bool (the operands are compared in their promoted dtype)",
    "logical": "bool (non-zero is true)",
    "bitwise": "the promoted dtype; only integer and bool operands (and Python int and bool scalars) are accepted",
}
"""How an elementwise primitive's result dtype follows from its inputs (``Primitive.dtypes``)."""


@dataclass(frozen=True)
class Param:
    """A static parameter: its ``name``, its ``type`` (a key of :data:`PARAM_TYPES`) and its ``default``."""

    name: str
    type: str
    default: Any = REQUIRED

    @property
    def required(self) -> bool:
        """True when the caller must give it."""
        return self.default is REQUIRED


@dataclass(frozen=True)
class Primitive:
    """One primitive's declaration (see the module docstring).

    * ``inputs``: the names of the tensor inputs in order; ``"*xs"`` is variadic, a trailing ``"?"``
      marks an input that may be ``None``.
    * ``dtypes``: for the elementwise families, how the result dtype follows (:data:`DTYPE_RULES`).
    * ``has_derivative``: False when the derivative is zero wherever it exists (piecewise constant,
      bool or integer result, a gradient barrier, a creation or random primitive).
    * ``uses_output``: True when the vjp rule reads the primitive's output (its input values alone
      do not suffice); a graph executor must then keep the output alive until the backward pass.
    * ``random``: True when the first input is a key and the result is a random draw (never merged
      by common-subexpression elimination; batched under ``vmap`` by the randomness policy).
    * ``linearity``: ``"linear"`` when the primitive is linear in its one tensor input (its derivative
      is the primitive itself applied to the tangent), ``"bilinear"`` when it is linear in each of its
      two tensor inputs (``f(tx, y) + f(x, ty)``), ``""`` otherwise.
    * ``vjp_reads_inputs``: False when the vjp rule reads only the shapes and dtypes of the inputs,
      never their values (an in-place update of an input after the call cannot change the gradient).
    * ``commutative``: True for a binary primitive with ``f(x, y) == f(y, x)`` (compile's normalization
      puts a literal operand on the right).
    * ``transcendental``: True for an elementwise primitive computed by a library function (``exp``,
      ``tanh``, ``erf``, ``pow``, ...) rather than a few arithmetic instructions; compile leaves those to
      numpy's vectorised loops instead of fusing them into generated kernels.
    """

    name: str
    family: str
    inputs: tuple[str, ...]
    params: tuple[Param, ...] = ()
    version: int = 1
    dtypes: str = ""
    has_derivative: bool = True
    uses_output: bool = False
    random: bool = False
    linearity: str = ""
    vjp_reads_inputs: bool = True
    commutative: bool = False
    transcendental: bool = False
    param_names: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "param_names", tuple(p.name for p in self.params))

    @property
    def variadic(self) -> bool:
        """True when the primitive takes any number of tensor inputs (``concat``)."""
        return len(self.inputs) == 1 and self.inputs[0].startswith("*")

    @property
    def n_inputs(self) -> int | None:
        """The number of tensor inputs (``None`` when variadic)."""
        return None if self.variadic else len(self.inputs)

    @property
    def defaults(self) -> dict[str, Any]:
        """Parameter name -> default, for the parameters that have one."""
        return {p.name: p.default for p in self.params if not p.required}


def _p(name: str, type_: str, default: Any = REQUIRED) -> Param:
    return Param(name, type_, default)


_SPATIAL = (_p("kernel_size", "ints"), _p("stride", "ints"), _p("padding", "ints"))
_LINEAR: dict[str, Any] = {"linearity": "linear", "vjp_reads_inputs": False}
_CONST: dict[str, Any] = {"has_derivative": False, "vjp_reads_inputs": False}
_KEEPDIMS = _p("keepdims", "bool", False)
_TRANSCENDENTAL: dict[str, Any] = {"transcendental": True}
_COMMUTATIVE: dict[str, Any] = {"commutative": True}


def _unary(name: str, dtypes: str, *, has_derivative: bool = True, uses_output: bool = False,
           params: tuple[Param, ...] = (), **flags: Any) -> Primitive:
    return Primitive(name, "unary", ("x",), params, dtypes=dtypes, has_derivative=has_derivative,
                     uses_output=uses_output, **flags)


def _binary(name: str, dtypes: str, *, has_derivative: bool = True, uses_output: bool = False,
            **flags: Any) -> Primitive:
    return Primitive(name, "binary", ("x", "y"), dtypes=dtypes, has_derivative=has_derivative,
                     uses_output=uses_output, **flags)


def _random(name: str, *params: Param) -> Primitive:
    return Primitive(name, "random", ("key",), (_p("shape", "dims"), *params, _p("dtype", "dtype")),
                     has_derivative=False, random=True)


_DECLARATIONS: tuple[Primitive, ...] = (
    # ---- elementwise unary --------------------------------------------------------------------
    _unary("neg", "keep_numeric", **_LINEAR),
    _unary("abs", "keep_numeric"),
    _unary("sign", "keep", **_CONST),
    _unary("exp", "to_float", uses_output=True, **_TRANSCENDENTAL),
    _unary("log", "to_float", **_TRANSCENDENTAL),
    _unary("log1p", "to_float", **_TRANSCENDENTAL),
    _unary("expm1", "to_float", uses_output=True, **_TRANSCENDENTAL),
    _unary("sqrt", "to_float", uses_output=True),
    _unary("rsqrt", "to_float", uses_output=True),
    _unary("sin", "to_float", **_TRANSCENDENTAL),
    _unary("cos", "to_float", **_TRANSCENDENTAL),
    _unary("tan", "to_float", uses_output=True, **_TRANSCENDENTAL),
    _unary("tanh", "to_float", uses_output=True, **_TRANSCENDENTAL),
    _unary("sigmoid", "to_float", uses_output=True, **_TRANSCENDENTAL),
    _unary("relu", "keep_numeric", uses_output=True),
    _unary("gelu", "float_only", params=(_p("approximate", "str", "none"),), **_TRANSCENDENTAL),
    _unary("erf", "to_float", **_TRANSCENDENTAL),
    _unary("floor", "keep_numeric", **_CONST),
    _unary("ceil", "keep_numeric", **_CONST),
    _unary("round", "keep_numeric", **_CONST),
    _unary("logical_not", "to_bool", has_derivative=False),
    _unary("bitwise_not", "int_or_bool", has_derivative=False),
    # ---- elementwise binary -------------------------------------------------------------------
    _binary("add", "promote", vjp_reads_inputs=False, **_COMMUTATIVE),
    _binary("sub", "promote_no_bool", vjp_reads_inputs=False),
    _binary("mul", "promote", **_COMMUTATIVE),
    _binary("div", "promote_to_float"),
    _binary("pow", "promote_not_bool", uses_output=True, **_TRANSCENDENTAL),
    _binary("maximum", "promote", **_COMMUTATIVE),
    _binary("minimum", "promote", **_COMMUTATIVE),
    Primitive("atan2", "binary", ("y", "x"), dtypes="promote_to_float", transcendental=True),
    _binary("eq", "compare", has_derivative=False, **_COMMUTATIVE),
    _binary("ne", "compare", has_derivative=False, **_COMMUTATIVE),
    _binary("lt", "compare", has_derivative=False),
    _binary("le", "compare", has_derivative=False),
    _binary("gt", "compare", has_derivative=False),
    _binary("ge", "compare", has_derivative=False),
    _binary("logical_and", "logical", has_derivative=False, **_COMMUTATIVE),
    _binary("logical_or", "logical", has_derivative=False, **_COMMUTATIVE),
    _binary("bitwise_and", "bitwise", has_derivative=False, **_COMMUTATIVE),
    _binary("bitwise_or", "bitwise", has_derivative=False, **_COMMUTATIVE),
    _binary("bitwise_xor", "bitwise", has_derivative=False, **_COMMUTATIVE),
    Primitive("where", "select", ("cond", "x", "y")),
    # ---- reductions ---------------------------------------------------------------------------
    Primitive("reduce_sum", "reduce", ("x",), (_p("axes", "ints"), _KEEPDIMS), **_LINEAR),
    Primitive("reduce_max", "reduce", ("x",), (_p("axes", "ints"), _KEEPDIMS), uses_output=True),
    Primitive("reduce_min", "reduce", ("x",), (_p("axes", "ints"), _KEEPDIMS), uses_output=True),
    Primitive("reduce_prod", "reduce", ("x",), (_p("axes", "ints"), _KEEPDIMS)),
    Primitive("argmax", "arg_reduce", ("x",), (_p("axis", "int"), _KEEPDIMS), has_derivative=False),
    Primitive("argmin", "arg_reduce", ("x",), (_p("axis", "int"), _KEEPDIMS), has_derivative=False),
    # ---- scans and orderings along one axis ---------------------------------------------------
    Primitive("cumsum", "scan", ("x",), (_p("axis", "int"),), **_LINEAR),
    Primitive("argsort", "scan", ("x",), (_p("axis", "int"), _p("descending", "bool", False)), has_derivative=False),
    # ---- views and structure ------------------------------------------------------------------
    Primitive("reshape", "view", ("x",), (_p("shape", "dims"),), **_LINEAR),
    Primitive("permute", "view", ("x",), (_p("perm", "ints"),), **_LINEAR),
    Primitive("broadcast_to", "view", ("x",), (_p("shape", "dims"),), **_LINEAR),
    Primitive("slice", "view", ("x",), (_p("starts", "dims"), _p("stops", "dims"), _p("steps", "ints")),
              **_LINEAR),
    Primitive("pad", "structure", ("x",), (_p("pads", "int_pairs"), _p("value", "scalar", 0.0)),
              vjp_reads_inputs=False),
    Primitive("concat", "structure", ("*xs",), (_p("axis", "int"),), vjp_reads_inputs=False),
    Primitive("gather", "structure", ("x", "indices"), (_p("axis", "int"),)),
    Primitive("scatter_add", "structure", ("base", "indices", "updates"), (_p("axis", "int"),)),
    Primitive("cast", "structure", ("x",), (_p("dtype", "dtype"),), **_LINEAR),
    Primitive("stop_gradient", "structure", ("x",), **_CONST),
    # ---- creation -----------------------------------------------------------------------------
    Primitive("full", "creation", (), (_p("shape", "dims"), _p("value", "scalar"), _p("dtype", "dtype")),
              has_derivative=False),
    Primitive("iota", "creation", (), (_p("length", "dim"), _p("dtype", "dtype")), has_derivative=False),
    # ---- linear algebra -----------------------------------------------------------------------
    Primitive("matmul", "linalg", ("a", "b"), linearity="bilinear"),
    # ---- convolution (x[N, C, *spatial]) ------------------------------------------------------
    Primitive("conv_nd", "conv", ("x", "w"),
              (_p("stride", "ints"), _p("padding", "ints"), _p("dilation", "ints"), _p("groups", "int")),
              linearity="bilinear"),
    Primitive("conv_transpose_nd", "conv", ("x", "w"),
              (_p("stride", "ints"), _p("padding", "ints"), _p("output_padding", "ints"), _p("dilation", "ints"),
               _p("groups", "int")), linearity="bilinear"),
    Primitive("conv_weight_grad_nd", "conv", ("x", "g"),
              (_p("kernel_size", "ints"), _p("stride", "ints"), _p("padding", "ints"), _p("dilation", "ints"),
               _p("groups", "int")), linearity="bilinear"),
    # ---- pooling (x[N, C, *spatial]) ----------------------------------------------------------
    Primitive("max_pool_nd", "pool", ("x",), _SPATIAL),
    Primitive("max_pool_backward_nd", "pool", ("x", "g"), _SPATIAL),
    Primitive("max_pool_select_nd", "pool", ("x", "h"), _SPATIAL),
    Primitive("avg_pool_nd", "pool", ("x",), _SPATIAL, **_LINEAR),
    Primitive("avg_pool_backward_nd", "pool", ("g",), (_p("input_shape", "dims"), *_SPATIAL), **_LINEAR),
    Primitive("smooth_max_pool_nd", "pool", ("x",), (*_SPATIAL, _p("beta", "float"))),
    Primitive("smooth_max_pool_backward_nd", "pool", ("x", "g"), (*_SPATIAL, _p("beta", "float"))),
    # ---- normalisation, softmax, attention ----------------------------------------------------
    Primitive("layer_norm_last_axis", "norm", ("x", "gamma", "beta"), (_p("eps", "float"),)),
    Primitive("batch_norm", "norm", ("x", "mean", "var", "weight", "bias"), (_p("eps", "float"),)),
    Primitive("softmax", "softmax", ("x",), (_p("axis", "int"),), uses_output=True),
    Primitive("log_softmax", "softmax", ("x",), (_p("axis", "int"),), uses_output=True),
    Primitive("dot_product_attention", "attention", ("q", "k", "v", "mask?"), (_p("scale", "float"),)),
    # ---- checks (the output is the input; consumers use it, so the check is never dropped) -----
    Primitive("check_index", "check", ("x",), (_p("bound", "dim"), _p("what", "str"), _p("allowed", "ints", ())),
              has_derivative=False),
    # ---- randomness (counter based: the key is an input) --------------------------------------
    _random("random_uniform"),
    _random("random_normal"),
    _random("random_randint", _p("low", "int"), _p("high", "int")),
)

PRIMITIVES: Final[dict[str, Primitive]] = {p.name: p for p in _DECLARATIONS}
"""Every primitive, keyed by name, in declaration order."""


def primitive(name: str) -> Primitive:
    """The declaration of primitive ``name``; a ``KeyError`` naming close matches when there is none."""
    found = PRIMITIVES.get(name)
    if found is None:
        import difflib
        close = difflib.get_close_matches(name, PRIMITIVES, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise KeyError(f"no primitive named {name!r}{hint}")
    return found


def names(family: str | None = None, **flags: Any) -> tuple[str, ...]:
    """The names of the primitives of ``family`` (all when ``None``) whose attributes equal ``flags``
    (``names("unary", has_derivative=False)``), in declaration order."""
    if family is not None and family not in FAMILIES:
        raise KeyError(f"no primitive family {family!r}; the families are {', '.join(FAMILIES)}")
    return tuple(p.name for p in _matching(family, flags))


def _matching(family: str | None, flags: dict[str, Any]) -> Iterator[Primitive]:
    for p in _DECLARATIONS:
        if (family is None or p.family == family) and all(getattr(p, k) == v for k, v in flags.items()):
            yield p


def _check_table() -> None:
    """The declarations are well formed (run at import: a malformed table is a bug of this module)."""
    for p in _DECLARATIONS:
        assert p.family in FAMILIES, p
        assert not p.dtypes or p.dtypes in DTYPE_RULES, p
        assert all(q.type in PARAM_TYPES for q in p.params), p
        assert p.linearity in ("", "linear", "bilinear"), p
        assert len(set(p.param_names)) == len(p.param_names), p
        assert not p.commutative or p.family == "binary", p
        assert not p.transcendental or p.family in ("unary", "binary"), p
    assert len(PRIMITIVES) == len(_DECLARATIONS), "a primitive is declared twice"


_check_table()
