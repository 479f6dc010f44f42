"""Bad arguments to optimizers, modules, ``nn.init``, ``nn.functional``, ``norm``, slicing and
``manual_seed`` raise a tensorplay error class that is also the builtin PyTorch raises (so
``except TypeError:`` and friends keep working), with a message naming the function or argument and
what was given. Where PyTorch has the same API it is run on the same input, to check that it raises
the same builtin family."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
from tensorplay import nn
from tensorplay.nn import functional as F

TF = torch.nn.functional


def _u(f: Any) -> Any:
    """``f`` with its static type erased, to call it with wrong types on purpose."""
    return f


def _tp_linear() -> Any:
    m = nn.Linear(2, 3)
    m.register_buffer("bf", tp.zeros(1))
    return m


def _torch_linear() -> Any:
    m = torch.nn.Linear(2, 3)
    m.register_buffer("bf", torch.zeros(1))
    return m


def _tp_param() -> Any:
    return nn.Parameter(tp.zeros(2))


def _torch_param() -> torch.Tensor:
    return torch.zeros(2, requires_grad=True)


def _tp_assign(name: str, value: Any) -> Callable[[], None]:
    return lambda: setattr(_tp_linear(), name, value)


def _torch_assign(name: str, value: Any) -> Callable[[], None]:
    return lambda: setattr(_torch_linear(), name, value)


class _TpEarly(nn.Module):
    def __init__(self) -> None:  # no super().__init__()
        self.w = nn.Parameter(tp.zeros(1))


class _TorchEarly(torch.nn.Module):
    def __init__(self) -> None:
        self.w = torch.nn.Parameter(torch.zeros(1))


def _tp_seq_child() -> None:
    setattr(nn.Sequential(nn.Linear(1, 1)), "0", 3)


def _torch_seq_child() -> None:
    setattr(torch.nn.Sequential(torch.nn.Linear(1, 1)), "0", 3)


def _setitem(x: Any, key: Any) -> None:
    x[key] = 1.0


def _setitem_copy(x: Any) -> Any:
    y = x * 1.0
    y[:, ::0] = 0.0
    return y


X = np.ones((2, 3), dtype=np.float32)
LABELS = np.array([0, 1])

# (id, tensorplay call, torch call or None, builtin, tensorplay class, parts the message must contain)
CASES: list[tuple[str, Callable[[], Any], Callable[[], Any] | None, type[Exception], type[Exception], list[str]]] = [
    # ---- optimizers ---------------------------------------------------------------------------------
    ("optim-params-tensor", lambda: tp.optim.SGD(_tp_param(), lr=0.1),
     lambda: torch.optim.SGD(_torch_param(), lr=0.1), TypeError, tp.optim.OptimizerTypeError,
     ["SGD(params)", "iterable of Tensors or dicts", "Tensor of shape [2]"]),
    ("optim-params-int", lambda: _u(tp.optim.SGD)(5, lr=0.1),
     lambda: _u(torch.optim.SGD)(5, lr=0.1), TypeError, tp.optim.OptimizerTypeError,
     ["SGD(params)", "iterable of Tensors or dicts", "int 5"]),
    ("optim-param-not-tensor", lambda: _u(tp.optim.Adam)([1.5], lr=0.1),
     lambda: _u(torch.optim.Adam)([1.5], lr=0.1), TypeError, tp.optim.OptimizerTypeError,
     ["add_param_group", "only optimize Tensors", "param 0", "float 1.5"]),
    ("optim-group-not-dict", lambda: _u(tp.optim.SGD([_tp_param()], lr=0.1)).add_param_group([1]),
     lambda: _u(torch.optim.SGD([_torch_param()], lr=0.1)).add_param_group([1]), TypeError,
     tp.optim.OptimizerTypeError, ["add_param_group", "param_group must be a dict", "list [1]"]),
    ("optim-group-no-params", lambda: tp.optim.SGD([_tp_param()], lr=0.1).add_param_group({"lr": 0.1}),
     lambda: torch.optim.SGD([_torch_param()], lr=0.1).add_param_group({"lr": 0.1}), KeyError,
     tp.optim.OptimizerKeyError, ["add_param_group", "'params'", "keys ['lr']"]),
    ("optim-group-params-int", lambda: tp.optim.SGD([_tp_param()], lr=0.1).add_param_group({"params": 5}),
     lambda: torch.optim.SGD([_torch_param()], lr=0.1).add_param_group({"params": 5}), TypeError,
     tp.optim.OptimizerTypeError, ["add_param_group", "param_group['params']", "int 5"]),
    # ---- modules ------------------------------------------------------------------------------------
    ("module-assign-parameter", _tp_assign("weight", tp.zeros(3)), _torch_assign("weight", torch.zeros(3)),
     TypeError, nn.ModuleTypeError, ["Linear.weight", "'Tensor'", "parameter 'weight'", "Parameter or None"]),
    ("module-assign-child", _tp_seq_child, _torch_seq_child, TypeError, nn.ModuleTypeError,
     ["Sequential.0", "'int'", "child module '0'"]),
    ("module-assign-buffer", _tp_assign("bf", 3), _torch_assign("bf", 3), TypeError, nn.ModuleTypeError,
     ["Linear.bf", "'int'", "buffer 'bf'"]),
    ("register-parameter-type", lambda: _tp_linear().register_parameter("q", tp.zeros(1)),
     lambda: _u(_torch_linear()).register_parameter("q", torch.zeros(1)), TypeError, nn.ModuleTypeError,
     ["register_parameter", "'Tensor'", "parameter 'q'"]),
    ("register-buffer-type", lambda: _tp_linear().register_buffer("q", 3),
     lambda: _torch_linear().register_buffer("q", 3), TypeError, nn.ModuleTypeError,
     ["register_buffer", "'int'", "buffer 'q'"]),
    ("register-module-type", lambda: _tp_linear().register_module("q", 3),
     lambda: _torch_linear().register_module("q", 3), TypeError, nn.ModuleTypeError,
     ["register_module", "int is not a Module", "'q'"]),
    ("register-name-not-str", lambda: _tp_linear().register_buffer(1, None),
     lambda: _torch_linear().register_buffer(1, None), TypeError, nn.ModuleTypeError,
     ["register_buffer", "name should be a string", "int 1"]),
    ("register-name-dot", lambda: _tp_linear().register_buffer("a.b", None),
     lambda: _torch_linear().register_buffer("a.b", None), KeyError, nn.ModuleKeyError,
     ["register_buffer", "contain '.'", "'a.b'"]),
    ("register-name-empty", lambda: _tp_linear().register_parameter("", None),
     lambda: _torch_linear().register_parameter("", None), KeyError, nn.ModuleKeyError,
     ["register_parameter", "empty", "''"]),
    ("register-name-exists", lambda: _tp_linear().register_module("forward", None),
     lambda: _torch_linear().register_module("forward", None), KeyError, nn.ModuleKeyError,
     ["register_module", "'forward' already exists", "Linear"]),
    ("get-submodule", lambda: _tp_linear().get_submodule("nope.x"),
     lambda: _torch_linear().get_submodule("nope.x"), AttributeError, nn.ModuleAttributeError,
     ["get_submodule", "Linear", "`nope`", "'nope.x'"]),
    ("get-parameter", lambda: _tp_linear().get_parameter("nope"),
     lambda: _torch_linear().get_parameter("nope"), AttributeError, nn.ModuleAttributeError,
     ["get_parameter", "Linear", "`nope`", "['bias', 'weight']"]),
    ("getattr-missing", lambda: _tp_linear().missing, lambda: _torch_linear().missing, AttributeError,
     nn.ModuleAttributeError, ["'Linear'", "'missing'"]),
    ("assign-before-init", _TpEarly, _TorchEarly, AttributeError, nn.ModuleAttributeError,
     ["_TpEarly", "Module.__init__()"]),
    ("train-mode", lambda: _tp_linear().train(1),
     lambda: _torch_linear().train(1), ValueError, tp.ArgumentError, ["Linear.train(mode)", "boolean", "int 1"]),
    ("load-state-dict-type", lambda: _tp_linear().load_state_dict([1]),
     lambda: _torch_linear().load_state_dict([1]), TypeError, nn.ModuleTypeError,
     ["Linear.load_state_dict", "mapping", "list"]),
    # ---- nn.init ------------------------------------------------------------------------------------
    ("init-gain-name", lambda: _u(nn.init.calculate_gain)("foo"), lambda: _u(torch.nn.init.calculate_gain)("foo"),
     ValueError, tp.ArgumentError, ["calculate_gain", "'foo'", "leaky_relu"]),
    ("init-gain-slope", lambda: _u(nn.init.calculate_gain)("leaky_relu", "x"),
     lambda: _u(torch.nn.init.calculate_gain)("leaky_relu", "x"), ValueError, tp.ArgumentError,
     ["calculate_gain", "negative_slope", "'x'", "str"]),
    ("init-kaiming-normal-mode", lambda: _u(nn.init.kaiming_normal_)(nn.Parameter(tp.zeros(2, 2)), mode="q"),
     lambda: _u(torch.nn.init.kaiming_normal_)(torch.zeros(2, 2), mode="q"), ValueError, tp.ArgumentError,
     ["kaiming_normal_", "mode", "'q'"]),
    ("init-kaiming-uniform-mode", lambda: _u(nn.init.kaiming_uniform_)(nn.Parameter(tp.zeros(2, 2)), mode="q"),
     lambda: _u(torch.nn.init.kaiming_uniform_)(torch.zeros(2, 2), mode="q"), ValueError, tp.ArgumentError,
     ["kaiming_uniform_", "mode", "'q'"]),
    # PyTorch: AttributeError / NotImplementedError / RuntimeError / ZeroDivisionError for these four
    ("init-not-a-tensor", lambda: _u(nn.init.constant_)([1.0], 0.0), None, TypeError,
     tp.DTypeError, ["init", "eager tensor", "list"]),
    ("init-int-tensor", lambda: nn.init.uniform_(tp.zeros(2, dtype=tp.int64)), None, TypeError, tp.DTypeError,
     ["uniform_", "float tensor", "int64"]),
    ("init-trunc-bounds", lambda: nn.init.trunc_normal_(nn.Parameter(tp.zeros(2)), a=2.0, b=1.0), None,
     ValueError, tp.ArgumentError, ["trunc_normal_", "a <= b", "a=2.0, b=1.0"]),
    ("init-trunc-std", lambda: nn.init.trunc_normal_(nn.Parameter(tp.zeros(2)), std=0.0), None, ValueError,
     tp.ArgumentError, ["trunc_normal_", "std", "std=0.0"]),
    # ---- nn.functional ------------------------------------------------------------------------------
    ("dropout-p", lambda: F.dropout(tp.tensor(X), p=1.5), lambda: TF.dropout(torch.tensor(X), p=1.5),
     ValueError, tp.ArgumentError, ["dropout:", "probability p", "1.5"]),
    ("dropout-p-negative", lambda: F.dropout(tp.tensor(X), p=-0.1), lambda: TF.dropout(torch.tensor(X), p=-0.1),
     ValueError, tp.ArgumentError, ["dropout:", "probability p", "-0.1"]),
    ("dropout1d-p", lambda: F.dropout1d(tp.tensor(X), p=1.5), lambda: TF.dropout1d(torch.tensor(X), p=1.5),
     ValueError, tp.ArgumentError, ["dropout1d", "probability p", "1.5"]),
    ("dropout2d-p", lambda: F.dropout2d(tp.tensor(X), p=1.5), lambda: TF.dropout2d(torch.tensor(X), p=1.5),
     ValueError, tp.ArgumentError, ["dropout2d", "probability p", "1.5"]),
    ("dropout3d-p", lambda: F.dropout3d(tp.tensor(X), p=1.5), lambda: TF.dropout3d(torch.tensor(X), p=1.5),
     ValueError, tp.ArgumentError, ["dropout3d", "probability p", "1.5"]),
    ("Dropout-p", lambda: nn.Dropout(p=1.5), lambda: torch.nn.Dropout(p=1.5), ValueError, tp.ArgumentError,
     ["Dropout:", "probability p", "1.5"]),
    ("Dropout2d-p", lambda: nn.Dropout2d(p=-1.0), lambda: torch.nn.Dropout2d(p=-1.0), ValueError, tp.ArgumentError,
     ["Dropout2d:", "probability p", "-1.0"]),
    ("mse-reduction", lambda: F.mse_loss(tp.tensor(X), tp.tensor(X), reduction="avg"),
     lambda: TF.mse_loss(torch.tensor(X), torch.tensor(X), reduction="avg"), ValueError, tp.ArgumentError,
     ["mse_loss", "reduction", "'avg'"]),
    ("l1-reduction", lambda: F.l1_loss(tp.tensor(X), tp.tensor(X), reduction="avg"),
     lambda: TF.l1_loss(torch.tensor(X), torch.tensor(X), reduction="avg"), ValueError, tp.ArgumentError,
     ["l1_loss", "reduction", "'avg'"]),
    ("cross-entropy-reduction", lambda: _u(F.cross_entropy)(tp.tensor(X), tp.tensor(LABELS), reduction="avg"),
     lambda: _u(TF.cross_entropy)(torch.tensor(X), torch.tensor(LABELS), reduction="avg"), ValueError,
     tp.ArgumentError, ["cross_entropy", "reduction", "'avg'"]),
    ("nll-reduction", lambda: F.nll_loss(tp.tensor(X), tp.tensor(LABELS), reduction="avg"),
     lambda: TF.nll_loss(torch.tensor(X), torch.tensor(LABELS), reduction="avg"), ValueError,
     tp.ArgumentError, ["nll_loss", "reduction", "'avg'"]),
    # PyTorch raises RuntimeError for these two, and picks an implicit dim (with a warning) for softmax
    ("gelu-approximate", lambda: F.gelu(tp.tensor(X), approximate="x"), None, ValueError, tp.ArgumentError,
     ["gelu", "approximate", "'x'"]),
    ("cross-entropy-label-smoothing",
     lambda: _u(F.cross_entropy)(tp.tensor(X), tp.tensor(LABELS), label_smoothing=2.0), None, ValueError,
     tp.ArgumentError, ["cross_entropy", "label_smoothing", "2.0"]),
    ("softmax-dim-none", lambda: F.softmax(tp.tensor(X)), None, ValueError, tp.ArgumentError,
     ["softmax", "dim=None", "[2, 3]"]),
    ("log-softmax-dim-none", lambda: F.log_softmax(tp.tensor(X)), None, ValueError, tp.ArgumentError,
     ["log_softmax", "dim=None", "[2, 3]"]),
    # ---- norm, slicing, manual_seed -------------------------------------------------------------------
    ("norm-p-type", lambda: _u(tp.tensor(X)).norm(p=[1]),
     lambda: _u(torch.tensor(X)).norm(p=[1]), TypeError, tp.ArgumentTypeError, ["norm", "p must be", "list [1]"]),
    # PyTorch: RuntimeError (an unknown matrix norm order)
    ("norm-p-string", lambda: tp.tensor(X).norm(p="nuc"), None, ValueError, tp.ArgumentError,
     ["norm", "p must be", "'nuc'"]),
    ("slice-step-zero", lambda: tp.tensor(X)[::0], lambda: torch.tensor(X)[::0], ValueError, tp.ArgumentError,
     ["indexing", "axis 0", "slice(None, None, 0)", "step cannot be zero"]),
    ("slice-step-zero-axis1", lambda: tp.tensor(X)[1:, ::0], lambda: torch.tensor(X)[1:, ::0], ValueError,
     tp.ArgumentError, ["indexing", "axis 1", "slice(None, None, 0)"]),
    ("slice-step-zero-compiled", lambda: tp.compile(lambda t: t[:, 1::0])(tp.tensor(X)),
     lambda: torch.tensor(X)[:, 1::0], ValueError, tp.ArgumentError, ["indexing", "axis 1", "slice(1, None, 0)"]),
    ("setitem-step-zero", lambda: _setitem(tp.tensor(X), (1, slice(None, None, 0))),
     lambda: _setitem(torch.tensor(X), (1, slice(None, None, 0))), ValueError, tp.ArgumentError,
     ["setitem", "key item 1", "slice(None, None, 0)", "step cannot be zero"]),
    ("setitem-step-zero-grad", lambda: _setitem(nn.Parameter(tp.tensor(X)) * 1.0, slice(2, None, 0)),
     lambda: _setitem(torch.tensor(X, requires_grad=True) * 1.0, slice(2, None, 0)), ValueError,
     tp.ArgumentError, ["setitem", "key item 0", "slice(2, None, 0)"]),
    ("setitem-step-zero-compiled", lambda: tp.compile(_setitem_copy)(tp.tensor(X)), None, ValueError,
     tp.ArgumentError, ["setitem", "key item 1", "slice(None, None, 0)"]),
    ("manual-seed-none", lambda: _u(tp.manual_seed)(None), lambda: _u(torch.manual_seed)(None),
     TypeError, tp.ArgumentTypeError, ["manual_seed", "int seed", "NoneType None"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_error_is_a_tensorplay_error_and_the_builtin(
        case: tuple[str, Callable[[], Any], Callable[[], Any] | None, type[Exception], type[Exception], list[str]],
) -> None:
    _, ours, theirs, builtin, cls, parts = case
    if theirs is not None:
        with pytest.raises(builtin):
            theirs()
    with pytest.raises(builtin) as info:
        ours()
    error = info.value
    assert isinstance(error, tp.TensorplayError), type(error).__mro__
    assert type(error) is cls, (type(error), cls)
    message = str(error)
    for part in parts:
        assert part in message, (part, message)


def test_key_errors_print_the_plain_message() -> None:
    """``str(KeyError('m'))`` is ``"'m'"``: the tensorplay KeyErrors print the message itself."""
    with pytest.raises(KeyError) as info:
        nn.Linear(2, 3).register_buffer("a.b", None)
    assert str(info.value).startswith("register_buffer:"), str(info.value)
    with pytest.raises(KeyError) as info:
        tp.optim.SGD([_tp_param()], lr=0.1).state.pop(tp.zeros(1))
    assert str(info.value).startswith("optimizer.state.pop(param):"), str(info.value)


def test_missing_attributes_keep_hasattr_and_getattr_default() -> None:
    for m, t in ((nn.Linear(2, 3), torch.nn.Linear(2, 3)), (nn.Sequential(nn.ReLU()), torch.nn.Sequential())):
        assert hasattr(m, "missing") is hasattr(t, "missing") is False
        assert getattr(m, "missing", 5) == getattr(t, "missing", 5) == 5
        assert hasattr(m, "weight") is hasattr(t, "weight")


def test_optimizer_state_get_and_contains_still_work() -> None:
    """``state.get`` (which catches the KeyError) and ``in`` keep their mapping behaviour."""
    p = _tp_param()
    opt = tp.optim.SGD([p], lr=0.1, momentum=0.9)
    assert opt.state.get(p) is None and p not in opt.state
    p.grad = tp.ones(2)
    opt.step()
    assert opt.state.get(p) is not None and p in opt.state
