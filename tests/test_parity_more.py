"""More small places where tensorplay differed from PyTorch, or answered bad input with a bare Python error,
each checked against torch:

- ``optimizer.state[p]`` of a parameter without state reads as ``{}`` and creates the entry (torch's state is a
  ``defaultdict(dict)``), which then shows in ``state_dict()`` as an empty state.
- SGD, Adam, AdamW, RMSprop and Adagrad take torch's implementation options (``foreach``, ``capturable``,
  ``differentiable``, ``fused``, each where torch's has it) at their default values, positionally or by keyword
  as torch's signatures do, and their parameter groups have torch's keys in torch's order; Adam takes
  ``decoupled_weight_decay`` (AdamW's update).
- The transforms of ``tensorplay.func`` refuse bad arguments (a non-scalar output of ``grad``, ``remove=`` of
  ``functionalize``, tangents or cotangents of another structure, duplicate or tied keys of ``functional_call``,
  models ``stack_module_state`` cannot stack, bad ``argnums``, bad ``vmap`` options) with tensorplay errors that
  are ValueErrors (torch raises a RuntimeError or a ValueError) naming the transform and the argument; an
  argument of the wrong type or dtype is an ``ArgumentTypeError`` or ``DTypeError`` (TypeErrors, as before).
- A dropout probability that is not a number (``F.dropout``, ``dropout1d/2d/3d`` and the ``Dropout`` modules)
  is an ``ArgumentTypeError`` naming the function and ``p`` (a TypeError, as torch's from its comparison); a
  numpy number is taken as torch takes it.
- ``del ModuleList[i]`` out of range is an ``IndexRangeError`` naming the index and the length (an IndexError, as
  torch's); ``ModuleList.insert`` past the end appends, as torch's does (its length and iteration), and an index
  that is not an integer is an ``ArgumentTypeError`` (a TypeError, as torch's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.func as tpf
from tensorplay import nn, optim
from tensorplay.errors import (ArgumentError, ArgumentTypeError, DTypeError, IndexRangeError, ShapeError,
                               TensorplayError)
from tensorplay.optim import OptimizerError


def _pair(values: Any) -> tuple[Any, Any]:
    """A tensorplay parameter and a torch parameter holding the same float32 values."""
    array = np.asarray(values, dtype=np.float32)
    return nn.Parameter(array.copy()), torch.nn.Parameter(torch.tensor(array))


# ---- 1. optimizer.state is a defaultdict -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["SGD", "Adam"])
def test_state_of_a_parameter_without_state_reads_as_empty(name: str) -> None:
    p, pt = _pair([1.0, 2.0])
    opt, opt_t = getattr(optim, name)([p], lr=0.1), getattr(torch.optim, name)([pt], lr=0.1)
    for o, q in ((opt, p), (opt_t, pt)):
        assert (q in o.state, len(o.state)) == (False, 0)
    assert opt.state[p] == opt_t.state[pt] == {}
    assert (p in opt.state, len(opt.state)) == (pt in opt_t.state, len(opt_t.state)) == (True, 1)
    assert opt.state_dict()["state"] == opt_t.state_dict()["state"] == {0: {}}
    opt.state[p]["note"] = 1  # the entry returned is the one kept
    assert opt.state[p] == {"note": 1}


def test_get_pop_and_setdefault_create_nothing_as_in_torch() -> None:
    p, pt = _pair([1.0])
    opt, opt_t = optim.SGD([p], lr=0.1), torch.optim.SGD([pt], lr=0.1)
    assert opt.state.get(p) is None and opt_t.state.get(pt) is None
    assert opt.state.get(p, 7) == opt_t.state.get(pt, 7) == 7
    assert len(opt.state) == len(opt_t.state) == 0
    assert opt.state.pop(p, 5) == opt_t.state.pop(pt, 5) == 5
    with pytest.raises(KeyError):
        opt_t.state.pop(pt)
    with pytest.raises(KeyError):
        opt.state.pop(p)
    assert opt.state.setdefault(p, {"a": 1}) == opt_t.state.setdefault(pt, {"a": 1}) == {"a": 1}
    assert opt.state.pop(p) == opt_t.state.pop(pt) == {"a": 1}
    assert len(opt.state) == len(opt_t.state) == 0


def test_an_empty_state_entry_starts_its_moments_at_the_first_step() -> None:
    """An entry created by reading it is empty, so the first update still fills it (as torch's)."""
    p, pt = _pair([1.0, -2.0, 0.5])
    opt, opt_t = optim.Adam([p], lr=0.1), torch.optim.Adam([pt], lr=0.1)
    assert opt.state[p] == opt_t.state[pt] == {}
    for _ in range(3):
        for q, o in ((p, opt), (pt, opt_t)):
            o.zero_grad()
            (q * q).sum().backward()
            o.step()
    np.testing.assert_allclose(p.detach().numpy(), pt.detach().numpy(), rtol=1e-6)
    assert float(opt.state[p]["step"]) == float(opt_t.state[pt]["step"]) == 3.0
    fresh, fresh_t = optim.Adam([nn.Parameter(np.ones(3, np.float32))], lr=0.1), \
        torch.optim.Adam([torch.nn.Parameter(torch.ones(3))], lr=0.1)
    fresh.load_state_dict(opt.state_dict())
    fresh_t.load_state_dict(opt_t.state_dict())
    assert sorted(fresh.state_dict()["state"][0]) == sorted(fresh_t.state_dict()["state"][0])


def test_a_compiled_step_after_reading_an_empty_state_matches_eager() -> None:
    p: Any = nn.Parameter(np.array([1.0, -2.0], np.float32))
    p2: Any = nn.Parameter(np.array([1.0, -2.0], np.float32))
    opt, opt2 = optim.Adam([p], lr=0.1), optim.Adam([p2], lr=0.1)
    assert opt.state[p] == {}

    def step(q: Any, o: Any) -> None:
        o.zero_grad()
        (q * q).sum().backward()
        o.step()

    compiled: Any = tp.compile(lambda: step(p, opt))
    for _ in range(3):
        compiled()
        step(p2, opt2)
    np.testing.assert_allclose(p.detach().numpy(), p2.detach().numpy(), rtol=1e-6)


# ---- 2. implementation options of the older optimizers ------------------------------------------------------
OLDER = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"]


def _options(name: str) -> list[str]:
    """The implementation options torch's optimizer ``name`` takes."""
    import inspect
    names = inspect.signature(getattr(torch.optim, name).__init__).parameters
    return [o for o in ("foreach", "capturable", "differentiable", "fused") if o in names]


@pytest.mark.parametrize("name", OLDER)
def test_signature_and_group_keys_match_torch(name: str) -> None:
    import inspect
    ours, theirs = (inspect.signature(getattr(m, name).__init__).parameters for m in (optim, torch.optim))
    assert [(n, p.kind, p.default) for n, p in ours.items()] == [(n, p.kind, p.default) for n, p in theirs.items()]
    p, pt = _pair([1.0, 2.0])
    opt, opt_t = getattr(optim, name)([p]), getattr(torch.optim, name)([pt])
    assert list(opt.param_groups[0].items())[1:] == list(opt_t.param_groups[0].items())[1:]


@pytest.mark.parametrize("name", OLDER)
def test_implementation_options_at_their_defaults_are_accepted(name: str) -> None:
    defaults = {"foreach": False, "capturable": False, "differentiable": False, "fused": False}
    kwargs = {o: defaults[o] for o in _options(name)}
    p, pt = _pair([1.0, -2.0])
    opt, opt_t = getattr(optim, name)([p], lr=0.1, **kwargs), getattr(torch.optim, name)([pt], lr=0.1, **kwargs)
    assert opt.param_groups[0] == {**opt_t.param_groups[0], "params": [p]}
    for _ in range(2):
        for q, o in ((p, opt), (pt, opt_t)):
            o.zero_grad()
            (q * q * q).sum().backward()
            o.step()
    np.testing.assert_allclose(p.detach().numpy(), pt.detach().numpy(), rtol=1e-6, atol=1e-6)
    for option in _options(name):  # another implementation is refused by name
        with pytest.raises(OptimizerError, match=rf"{name}: {option}=True is not supported"):
            getattr(optim, name)([p], **{option: True})
    unknown = next(o for o in ("fused", "capturable") if o not in _options(name)) if len(_options(name)) < 4 else None
    if unknown is not None:  # an option torch's lacks stays a TypeError there and here
        with pytest.raises(TypeError):
            getattr(torch.optim, name)([pt], **{unknown: False})
        with pytest.raises(TypeError):
            getattr(optim, name)([p], **{unknown: False})


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_decoupled_weight_decay_is_adamw(weight_decay: float) -> None:
    p, pt = _pair([1.0, -2.0, 0.5])
    p2: Any = nn.Parameter(np.array([1.0, -2.0, 0.5], np.float32))
    kwargs: dict[str, Any] = {"lr": 0.1, "weight_decay": weight_decay}
    opts = [optim.Adam([p], decoupled_weight_decay=True, **kwargs), optim.AdamW([p2], **kwargs)]
    opt_t = torch.optim.Adam([pt], decoupled_weight_decay=True, **kwargs)
    assert opts[0].param_groups[0]["decoupled_weight_decay"] is opts[1].param_groups[0]["decoupled_weight_decay"]
    compiled: Any = tp.compile(lambda: _cubic_step(p, opts[0]))
    for _ in range(3):
        compiled()
        _cubic_step(p2, opts[1])
        _cubic_step(pt, opt_t)
    np.testing.assert_allclose(p.detach().numpy(), pt.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(p2.detach().numpy(), pt.detach().numpy(), rtol=1e-5)
    with pytest.raises(OptimizerError, match="Adam: decoupled_weight_decay must be True or False"):
        bad: dict[str, Any] = {"decoupled_weight_decay": 1}
        optim.Adam([p], **bad)


def _cubic_step(q: Any, o: Any) -> None:
    """One update of ``o`` on the loss ``sum(q^3)``."""
    o.zero_grad()
    (q * q * q).sum().backward()
    o.step()


# ---- 3. errors of the function transforms ------------------------------------------------------------------
def _tied(lib: Any) -> Any:
    """A module whose two linear layers share one weight."""
    m = lib.nn.Sequential(lib.nn.Linear(2, 2, bias=False), lib.nn.Linear(2, 2, bias=False))
    m[1].weight = m[0].weight
    return m


def _func_cases(lib: Any, func: Any) -> dict[str, Any]:
    """name -> a call of ``func`` (torch.func or tensorplay.func) with a bad argument."""
    x, w = lib.ones(3), lib.ones(2, 2)
    lin = lib.nn.Linear(2, 2)
    return {
        "grad-non-scalar": lambda: func.grad(lambda x: x * 2)(x),
        "grad-tuple-output": lambda: func.grad(lambda x: (x.sum(), x.sum()))(x),
        "functionalize-remove": lambda: func.functionalize(lambda x: x, remove="views")(x),
        "jvp-tangents": lambda: func.jvp(lambda x: x, (x,), (x, x)),
        "vjp_fn-cotangents": lambda: func.vjp(lambda x: x * 2, x)[1]((x, x)),
        "functional_call-duplicate": lambda: func.functional_call(lin, ({"weight": w}, {"weight": w}), (lib.ones(2),)),
        "functional_call-tied": lambda: func.functional_call(_tied(lib), {"0.weight": w, "1.weight": w * 2},
                                                             (lib.ones(2),)),
        "stack_module_state-empty": lambda: func.stack_module_state([]),
        "stack_module_state-class": lambda: func.stack_module_state([lin, lib.nn.Tanh()]),
        "stack_module_state-mode": lambda: func.stack_module_state([lin, lib.nn.Linear(2, 2).eval()]),
        "argnums-empty": lambda: func.grad(lambda x: x.sum(), argnums=())(x),
        "argnums-range": lambda: func.grad(lambda x: x.sum(), argnums=3)(x),
        "argnums-duplicate": lambda: func.grad(lambda x, y: x.sum(), argnums=(0, 0))(x, x),
        "vmap-randomness": lambda: func.vmap(lambda x: x, randomness="bad")(x),
        "vmap-chunk_size": lambda: func.vmap(lambda x: x, chunk_size=0)(x),
        "vmap-in_dims-length": lambda: func.vmap(lambda x: x, in_dims=(0, 0))(x),
        "vmap-in_dims-type": lambda: func.vmap(lambda x: x, in_dims="a")(x),
        "vmap-in_dims-float": lambda: func.vmap(lambda x: x, in_dims=(1.5,))(x),
        "vmap-in_dim-non-tensor": lambda: func.vmap(lambda x, y: x, in_dims=(0, 0))(x, 3.0),
        "vmap-in_dim-range": lambda: func.vmap(lambda x: x, in_dims=1)(x),
        "vmap-sizes": lambda: func.vmap(lambda x, y: x)(x, lib.ones(4)),
        "vmap-nothing-mapped": lambda: func.vmap(lambda x: x, in_dims=None)(x),
    }


FUNC_ERRORS: dict[str, tuple[type[Exception], list[str]]] = {
    "grad-non-scalar": (ShapeError, ["grad(<lambda>)", "scalar", "shape [3]"]),
    "grad-tuple-output": (ArgumentError, ["grad(<lambda>)", "scalar tensor", "structure"]),
    "functionalize-remove": (ArgumentError, ["functionalize", "remove", "'mutations'", "'views'"]),
    "jvp-tangents": (ArgumentError, ["jvp", "tangents", "structure of the primals"]),
    "vjp_fn-cotangents": (ArgumentError, ["vjp_fn", "cotangents", "structure of the output"]),
    "functional_call-duplicate": (ArgumentError, ["functional_call", "parameter_and_buffer_dicts", "'weight'",
                                                  "entries 0 and 1"]),
    "functional_call-tied": (ArgumentError, ["functional_call", "parameter_and_buffer_dicts", "'0.weight'",
                                             "'1.weight'", "which are tied", "tie_weights=False"]),
    "stack_module_state-empty": (ArgumentError, ["stack_module_state", "models", "at least one model"]),
    "stack_module_state-class": (ArgumentError, ["stack_module_state", "models", "same class", "Linear", "Tanh"]),
    "stack_module_state-mode": (ArgumentError, ["stack_module_state", "models", "training/eval mode"]),
    "argnums-empty": (ArgumentError, ["grad", "argnums", "non-empty", "got ()"]),
    "argnums-range": (ArgumentError, ["grad", "argnums", "3", "1 positional argument", "-1 <= argnum < 1"]),
    "argnums-duplicate": (ArgumentError, ["grad", "argnums", "(0, 0)", "duplicates"]),
    "vmap-randomness": (ArgumentError, ["vmap", "randomness", "'same'", "'bad'"]),
    "vmap-chunk_size": (ArgumentError, ["vmap", "chunk_size", "positive int", "0"]),
    "vmap-in_dims-length": (ArgumentError, ["vmap", "in_dims", "one in_dim per positional argument", "2 in_dims"]),
    "vmap-in_dims-type": (ArgumentError, ["vmap", "in_dims", "'a'"]),
    "vmap-in_dims-float": (ArgumentError, ["vmap", "in_dims", "1.5"]),
    "vmap-in_dim-non-tensor": (ArgumentError, ["vmap", "in_dim=0", "input 1", "float"]),
    "vmap-in_dim-range": (ArgumentError, ["vmap", "in_dim=1", "rank 1", "-1 <= in_dim < 1"]),
    "vmap-sizes": (ArgumentError, ["vmap", "same size in the mapped dimension", "[3, 4]"]),
    "vmap-nothing-mapped": (ArgumentError, ["vmap", "at least one input must be mapped"]),
}


@pytest.mark.parametrize("case", list(FUNC_ERRORS))
def test_transform_argument_errors_are_tensorplay_value_errors(case: str) -> None:
    with pytest.raises((RuntimeError, ValueError)):
        _func_cases(torch, torch.func)[case]()
    cls, parts = FUNC_ERRORS[case]
    with pytest.raises(ValueError) as info:
        _func_cases(tp, tpf)[case]()
    assert type(info.value) is cls and isinstance(info.value, TensorplayError), type(info.value).__mro__
    for part in parts:
        assert part in str(info.value), (part, str(info.value))


def _func_type_cases(lib: Any, func: Any) -> dict[str, Any]:
    """name -> a call of ``func`` with an argument of the wrong type or dtype."""
    x, xi, lin = lib.ones(3), lib.ones(3, dtype=lib.int64), lib.nn.Linear(2, 2)
    return {
        "jvp-primals-not-tuple": lambda: func.jvp(lambda x: x, x, (x,)),
        "jvp-tangents-not-tuple": lambda: func.jvp(lambda x: x, (x,), x),
        "jvp-int-primal": lambda: func.jvp(lambda x: x, (xi,), (xi,)),
        "functional_call-not-dict": lambda: func.functional_call(lin, 5, (lib.ones(2),)),
        "has_aux-not-pair": lambda: func.grad(lambda x: x.sum(), has_aux=True)(x),
        "output-not-tensor": lambda: func.vjp(lambda x: 3.0, x),
        "vjp-int-primal": lambda: func.vjp(lambda x: x, xi),
        "vjp_fn-two-arguments": lambda: func.vjp(lambda x: x * 2, x)[1](x, x),
        "argnums-float": lambda: func.grad(lambda x: x.sum(), argnums=0.5)(x),
        "grad-int-argument": lambda: func.grad(lambda x: x.sum())(xi),
        "grad-non-tensor-argument": lambda: func.grad(lambda x: x)(3.0),
    }


FUNC_TYPE_ERRORS: dict[str, tuple[type[Exception], list[str]]] = {
    "jvp-primals-not-tuple": (ArgumentTypeError, ["jvp", "primals", "tuple", "Tensor"]),
    "jvp-tangents-not-tuple": (ArgumentTypeError, ["jvp", "tangents", "tuple", "Tensor"]),
    "jvp-int-primal": (DTypeError, ["jvp", "primal 0", "int64", "float"]),
    "functional_call-not-dict": (ArgumentTypeError, ["functional_call", "parameter_and_buffer_dicts", "int"]),
    "has_aux-not-pair": (ArgumentTypeError, ["has_aux=True", "pair (output, aux)", "Tensor"]),
    "output-not-tensor": (ArgumentTypeError, ["vjp", "must return tensors", "float"]),
    "vjp-int-primal": (DTypeError, ["vjp", "primal 0", "int64"]),
    "vjp_fn-two-arguments": (ArgumentTypeError, ["vjp_fn", "one argument", "got 2"]),
    "argnums-float": (ArgumentTypeError, ["grad", "argnums", "0.5"]),
    "grad-int-argument": (DTypeError, ["grad", "float tensors", "int64"]),
    "grad-non-tensor-argument": (ArgumentTypeError, ["grad", "argument 0", "float"]),
}


@pytest.mark.parametrize("case", list(FUNC_TYPE_ERRORS))
def test_transform_argument_type_errors_are_tensorplay_type_errors(case: str) -> None:
    with pytest.raises((RuntimeError, ValueError, TypeError)):
        _func_type_cases(torch, torch.func)[case]()
    cls, parts = FUNC_TYPE_ERRORS[case]
    with pytest.raises(TypeError) as info:
        _func_type_cases(tp, tpf)[case]()
    assert type(info.value) is cls and isinstance(info.value, TensorplayError), type(info.value).__mro__
    for part in parts:
        assert part in str(info.value), (part, str(info.value))


# ---- 4. the dropout probability ----------------------------------------------------------------------------
def _dropouts(lib: Any) -> dict[str, Any]:
    """name -> a call ``p -> output`` of each dropout function and module, on an input of a rank it takes."""
    F_, x4, x5 = lib.nn.functional, lib.ones(2, 3, 4, 5), lib.ones(2, 3, 4, 5, 6)
    return {"dropout": lambda p: F_.dropout(x4, p), "dropout1d": lambda p: F_.dropout1d(x4[0], p),
            "dropout2d": lambda p: F_.dropout2d(x4, p), "dropout3d": lambda p: F_.dropout3d(x5, p),
            "Dropout": lambda p: lib.nn.Dropout(p)(x4), "Dropout1d": lambda p: lib.nn.Dropout1d(p)(x4[0]),
            "Dropout2d": lambda p: lib.nn.Dropout2d(p)(x4), "Dropout3d": lambda p: lib.nn.Dropout3d(p)(x5)}


@pytest.mark.parametrize("name", list(_dropouts(torch)))
@pytest.mark.parametrize("p", ["a", None, [0.5]], ids=["str", "None", "list"])
def test_a_dropout_probability_that_is_not_a_number_is_an_argument_type_error(name: str, p: Any) -> None:
    with pytest.raises(TypeError):
        _dropouts(torch)[name](p)
    with pytest.raises(ArgumentTypeError) as info:
        _dropouts(tp)[name](p)
    assert isinstance(info.value, TypeError)
    for part in (f"{name}:", "dropout probability p", type(p).__name__, repr(p)):
        assert part in str(info.value), (part, str(info.value))


@pytest.mark.parametrize("name", list(_dropouts(torch)))
def test_a_numpy_dropout_probability_is_taken_as_torch_takes_it(name: str) -> None:
    for p in (np.float32(1.0), np.float64(0.0), np.int64(1)):
        ours, theirs = _dropouts(tp)[name](p), _dropouts(torch)[name](p)
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.detach().numpy())
    kept = _dropouts(tp)[name](np.float32(0.5)).detach().numpy()  # the kept entries are scaled by 1 / (1 - p)
    assert set(np.unique(kept)) <= {0.0, 2.0} and 0 < (kept == 2.0).sum() < kept.size


# ---- 5. ModuleList positions -------------------------------------------------------------------------------
def _linears(lib: Any, n: int = 3) -> Any:
    """A ModuleList of ``n`` linear layers told apart by their output sizes 1 .. n."""
    return lib.nn.ModuleList([lib.nn.Linear(1, i + 1) for i in range(n)])


def _sizes(m: Any) -> list[int]:
    """The output sizes of a ModuleList's layers, in iteration order."""
    return [layer.out_features for layer in m]


@pytest.mark.parametrize("index", [99, 3, -4, -99])
def test_deleting_a_module_list_entry_out_of_range_is_an_index_range_error(index: int) -> None:
    with pytest.raises(IndexError):
        del _linears(torch)[index]
    m = _linears(tp)
    with pytest.raises(IndexRangeError) as info:
        del m[index]
    assert isinstance(info.value, IndexError)
    for part in ("ModuleList", f"index {index}", "3 modules"):
        assert part in str(info.value), (part, str(info.value))
    assert _sizes(m) == [1, 2, 3]


@pytest.mark.parametrize("index", [0, -1, 2, -3, slice(1, 99), slice(None, None, 2)], ids=str)
def test_deleting_module_list_entries_in_range_matches_torch(index: Any) -> None:
    ours, theirs = _linears(tp), _linears(torch)
    del ours[index]
    del theirs[index]
    assert _sizes(ours) == _sizes(theirs) and list(ours._modules) == list(theirs._modules)


@pytest.mark.parametrize("index", [0, 1, 3, 4, 99])
def test_inserting_into_a_module_list_matches_torch_length_and_order(index: int) -> None:
    ours, theirs = _linears(tp), _linears(torch)
    ours.insert(index, tp.nn.Linear(1, 7))
    theirs.insert(index, torch.nn.Linear(1, 7))
    assert len(ours) == len(theirs) == 4 and _sizes(ours) == _sizes(theirs)
    position = min(index, 3)  # past the end appends
    assert ours[position].out_features == 7 and ours[-1 if index >= 3 else position].out_features == 7
    assert list(ours._modules) == ["0", "1", "2", "3"]  # renumbered (torch keeps the key '99' past the end)


@pytest.mark.parametrize("index", [-1, -3, -99])
def test_inserting_at_a_negative_index_follows_list_insert(index: int) -> None:
    """torch's ModuleList.insert fails on a negative index (a KeyError, after shifting the modules); here it
    counts from the end as ``list.insert`` does."""
    m, expected = _linears(tp), [1, 2, 3]
    m.insert(index, tp.nn.Linear(1, 7))
    expected.insert(index, 7)
    assert _sizes(m) == expected and list(m._modules) == ["0", "1", "2", "3"]


@pytest.mark.parametrize("call", ["getitem", "delitem", "insert", "setitem"])
def test_a_module_list_index_that_is_not_an_integer_is_an_argument_type_error(call: str) -> None:
    def run(lib: Any) -> None:
        m = _linears(lib)
        if call == "getitem":
            m["a"]
        elif call == "delitem":
            del m["a"]
        elif call == "insert":
            m.insert("a", lib.nn.Tanh())
        else:
            m["a"] = lib.nn.Tanh()

    with pytest.raises(TypeError):
        run(torch)
    with pytest.raises(ArgumentTypeError) as info:
        run(tp)
    for part in ("ModuleList", "index", "an integer", "str 'a'"):
        assert part in str(info.value), (part, str(info.value))
