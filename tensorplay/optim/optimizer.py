"""The ``Optimizer`` base class: parameter groups, per-parameter state, ``zero_grad``, state dicts.

Updates run on the parameters' numpy payloads in place (no tape recording) and
bump each parameter's version counter, so a graph saved before the update
refuses to run backward through the modified values.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from typing import Any

import numpy as np

from tensorplay import compile_hooks, recording
from tensorplay.errors import KeyLookupError, TensorplayError
from tensorplay.interpreters.eager.tape import reset_grads
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
Array = np.ndarray[Any, Any]


class OptimizerError(TensorplayError, ValueError):
    """An optimizer was configured or loaded inconsistently."""


class OptimizerTypeError(TensorplayError, TypeError):
    """An optimizer got an argument of the wrong type (a Tensor or a non-iterable as ``params``, a
    parameter group that is not a dict, a parameter that is not a tensor); a TypeError, as in PyTorch."""


class OptimizerKeyError(KeyLookupError):
    """A lookup in an optimizer found nothing (a parameter group without ``"params"``, ``state.pop`` of a
    parameter without state); a KeyError, as in PyTorch, whose ``str()`` is the plain message."""


class ParamState(MutableMapping[AnyTensor, dict[str, Any]]):
    """Per-parameter state keyed by the parameter object itself (by identity). As PyTorch's
    ``defaultdict(dict)``: reading the state of a parameter that has none gives a new empty dict, kept as its
    entry (``p in state`` is False before the read and True after it; ``state_dict()`` lists it as ``{}``)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[AnyTensor, dict[str, Any]]] = {}

    def __getitem__(self, param: AnyTensor) -> dict[str, Any]:
        entry = self._items.get(id(param))
        if entry is None:
            entry = self._items[id(param)] = (param, {})
        return entry[1]

    def __setitem__(self, param: AnyTensor, value: dict[str, Any]) -> None:
        self._items[id(param)] = (param, value)

    def __delitem__(self, param: AnyTensor) -> None:
        del self._items[id(param)]

    def __iter__(self) -> Iterator[AnyTensor]:
        return iter(p for p, _ in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, param: object) -> bool:
        return id(param) in self._items

    def get(self, param: AnyTensor, default: Any = None) -> Any:
        """``param``'s state, or ``default`` when it has none (nothing is created, as ``defaultdict.get``)."""
        entry = self._items.get(id(param))
        return default if entry is None else entry[1]

    _MISSING: Any = object()

    def pop(self, param: AnyTensor, default: Any = _MISSING) -> Any:
        """Remove ``param``'s state and return it; ``default`` when it has none (a KeyError without one)."""
        entry = self._items.pop(id(param), None)
        if entry is not None:
            return entry[1]
        if default is ParamState._MISSING:
            raise OptimizerKeyError("optimizer.state.pop(param): no optimizer state for this parameter")
        return default

    def setdefault(self, param: AnyTensor, default: dict[str, Any] | None = None) -> dict[str, Any]:
        """``param``'s state, set to ``default`` (a new empty dict when None) when it has none."""
        entry = self._items.get(id(param))
        if entry is None:
            entry = self._items[id(param)] = (param, {} if default is None else default)
        return entry[1]

    def get_state(self, param: AnyTensor) -> dict[str, Any]:
        """The state of ``param``, created empty on first use (the same as ``state[param]``)."""
        return self[param]


def _short_repr(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters (a message names the value without dumping it)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_number(where: str, name: str, value: Any, low: float = 0.0, high: float | None = None,
                 high_open: bool = False) -> None:
    """A hyperparameter must be a real, finite number in ``[low, high]`` (``[low, high)`` with
    ``high_open``); otherwise an :class:`OptimizerError` naming it, the range and the value given."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise OptimizerError(f"{where}: {name} must be a number, got {type(value).__name__} {value!r}")
    if not np.isfinite(value):
        raise OptimizerError(f"{where}: {name} must be finite, got {value}")
    too_high = high is not None and (value >= high if high_open else value > high)
    if value < low or too_high:
        bounds = f"[{low}, {high}{')' if high_open else ']'}" if high is not None else f">= {low}"
        raise OptimizerError(f"{where}: invalid {name} {value!r} (expected {bounds})")


def check_flag(where: str, name: str, value: Any) -> None:
    """A hyperparameter that must be a bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise OptimizerError(f"{where}: {name} must be True or False, got {type(value).__name__} {value!r}")


def check_betas(where: str, betas: Any) -> None:
    """``betas`` must be a pair ``(beta1, beta2)`` of numbers in ``[0, 1)`` (an :class:`OptimizerError` naming
    the bad entry otherwise)."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise OptimizerError(f"{where}: betas must be a pair (beta1, beta2), got {betas!r}")
    check_number(where, "beta parameter at index 0", betas[0], high=1.0, high_open=True)
    check_number(where, "beta parameter at index 1", betas[1], high=1.0, high_open=True)


def check_adam_like(where: str, group: dict[str, Any]) -> None:
    """The hyperparameters Adam's relatives share, checked in PyTorch's order: ``lr``, ``eps``, ``betas``,
    ``weight_decay`` (numbers >= 0, betas in ``[0, 1)``), ``maximize`` (a bool) and the implementation options
    (:func:`check_implementation_options`)."""
    check_number(where, "learning rate", group["lr"])
    check_number(where, "epsilon value", group["eps"])
    check_betas(where, group["betas"])
    check_number(where, "weight_decay value", group["weight_decay"])
    check_flag(where, "maximize", group["maximize"])
    check_implementation_options(where, group)


# PyTorch options that select another implementation of the same update; only their defaults are accepted
# (``foreach=False`` and ``fused=False`` name the single-tensor loop, which is the one run here)
_IMPLEMENTATION_OPTIONS: dict[str, tuple[Any, ...]] = {"foreach": (None, False), "capturable": (False,),
                                                       "differentiable": (False,), "fused": (None, False)}


def check_implementation_options(where: str, group: dict[str, Any]) -> None:
    """``foreach``, ``capturable``, ``differentiable`` and ``fused`` (where ``group`` has them) must keep PyTorch's
    default values: an :class:`OptimizerError` naming the option as unsupported otherwise."""
    for option, accepted in _IMPLEMENTATION_OPTIONS.items():
        if option in group and not any(group[option] is value for value in accepted):
            raise OptimizerError(f"{where}: {option}={group[option]!r} is not supported (accepted: "
                                 f"{' or '.join(f'{option}={value!r}' for value in accepted)})")


def bump_version(p: AnyTensor) -> None:
    """Record an in-place update of ``p``'s payload."""
    box = p._version
    if box is None:
        p._version = [1]
    else:
        box[0] += 1


class Optimizer:
    """Base class: ``Optimizer(params, defaults)`` where ``params`` is an iterable of tensors or of
    dicts (parameter groups, each with a ``"params"`` list and optional hyperparameter overrides)."""

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], defaults: dict[str, Any]) -> None:
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        self.state = ParamState()
        where = f"{type(self).__name__}(params)"
        if isinstance(params, Tensor):
            raise OptimizerTypeError(f"{where}: params argument given to the optimizer should be an iterable of "
                                     f"Tensors or dicts, but got a Tensor of shape {list(params.shape)} (wrap it "
                                     "in a list)")
        try:
            items: list[Any] = list(params)
        except TypeError:
            raise OptimizerTypeError(f"{where}: params argument given to the optimizer should be an iterable of "
                                     f"Tensors or dicts, but got {type(params).__name__} {params!r}") from None
        if not items:
            raise OptimizerError("optimizer got an empty parameter list")
        groups: list[dict[str, Any]] = [{"params": items}] if not isinstance(items[0], dict) else items
        for group in groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(k for k in group if k != "params"):
                lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own hyperparameters (defaults fill the rest)."""
        if not isinstance(param_group, dict):
            raise OptimizerTypeError(f"add_param_group: param_group must be a dict, got "
                                     f"{type(param_group).__name__} {param_group!r}")
        if "params" not in param_group:
            raise OptimizerKeyError(f"add_param_group: param_group must have a 'params' entry (the tensors it "
                                    f"holds), got a dict with keys {sorted(map(str, param_group))}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        else:
            try:
                params = list(params)
            except TypeError:
                raise OptimizerTypeError(f"add_param_group: param_group['params'] must be a Tensor or an iterable "
                                         f"of Tensors, got {type(params).__name__} {params!r}") from None
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise OptimizerTypeError(f"add_param_group: optimizer can only optimize Tensors, but param {i} of "
                                         f"the group is {type(p).__name__} {_short_repr(p)}")
            if p._node is not None:
                raise OptimizerError("can't optimize a non-leaf Tensor (one produced by an operation); "
                                     "optimize the leaf it was computed from")
            if p._data.dtype.kind != "f":
                raise OptimizerError(f"can only optimize float tensors, got {p.dtype}")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if len({id(p) for p in params}) != len(params):
            raise OptimizerError("optimizer parameter group contains the same parameter more than once")
        if any(id(p) in seen for p in params):
            raise OptimizerError("some parameters appear in more than one parameter group")
        group = dict(param_group)
        group["params"] = params
        for key, value in self.defaults.items():
            group.setdefault(key, value)
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group: dict[str, Any]) -> None:
        """Validate hyperparameters (subclasses)."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to ``None`` (default) or to zeros in place."""
        reset_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; ``closure`` (re-evaluating the loss)
        is called first when given, and its result returned."""
        handler = compile_hooks.handler()
        if handler is not None:  # inside tensorplay.compile's capture: the update becomes part of the graph
            return handler.optimizer_step(self, closure)
        loss = None
        if closure is not None:
            from tensorplay.interpreters.eager import tape
            with tape.enable_grad():
                loss = closure()
        if recording.active[0]:  # inside tp.graph.trace the update would run once, at trace time
            for group in self.param_groups:
                for p in group["params"]:
                    recording.refuse_outside_write(p, f"{type(self).__name__}.step()")
        for group in self.param_groups:
            self._update_group(group)
        return loss

    def _update_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    def _stepped(self, group: dict[str, Any], zeros: tuple[str, ...] = (),
                 **initial: Any) -> Iterator[tuple[Array, Array, dict[str, Any]]]:
        """The parameters of ``group`` that have a gradient, as ``(data, grad, state)``, with the step counted:
        the loop's body updates ``data`` in place, and the parameter's version is bumped after it. A parameter
        without state gets ``step`` 0, the ``initial`` entries and, for each name in ``zeros``, an array of
        zeros like its data (in that order, as PyTorch's state dicts list them); then ``step`` goes up by one,
        before the update, as in PyTorch."""
        for p in group["params"]:
            g = self._grad_array(p)
            if g is None:
                continue
            data = p._data
            state = self.state.get_state(p)
            if not state:
                state["step"] = 0
                state.update(initial)
                for name in zeros:
                    state[name] = np.zeros_like(data)
            state["step"] += 1
            yield data, g, state
            bump_version(p)

    @staticmethod
    def _grad_array(p: AnyTensor) -> Array | None:
        grad = p._grad
        if grad is None:
            return None
        data: Array = grad._data
        if data.dtype != p._data.dtype:
            data = data.astype(p._data.dtype)
        return data

    # ---- state dicts ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}`` with
        parameters numbered in group order (as PyTorch); arrays are copies."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: copy.deepcopy(v) for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state: dict[int, dict[str, Any]] = {}
        for p in self.state:
            if id(p) in index:
                state[index[id(p)]] = {k: (np.array(v, copy=True) if isinstance(v, np.ndarray) else copy.deepcopy(v))
                                       for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restore hyperparameters and per-parameter state saved by :meth:`state_dict` (the groups must
        have the same sizes). Everything is checked first -- group sizes, hyperparameters (as the
        constructor checks them), state shapes -- and the optimizer changes only when all of it is valid."""
        where = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, Mapping) or "param_groups" not in state_dict or "state" not in state_dict:
            raise OptimizerError(f"{where}: expected a mapping with 'state' and 'param_groups' (from state_dict()), "
                                 f"got {type(state_dict).__name__}")
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise OptimizerError(f"loaded state dict has {len(groups)} parameter groups, the optimizer has "
                                 f"{len(self.param_groups)}")
        for i, (saved, own) in enumerate(zip(groups, self.param_groups)):
            if len(saved["params"]) != len(own["params"]):
                raise OptimizerError(f"loaded state dict contains a parameter group {i} of {len(saved['params'])} "
                                     f"parameters that doesn't match the size of optimizer's group "
                                     f"({len(own['params'])})")
        new_groups = []
        for i, (saved, own) in enumerate(zip(groups, self.param_groups)):
            merged = dict(own)
            merged.update({key: copy.deepcopy(value) for key, value in saved.items() if key != "params"})
            try:
                self._check_group(merged)
            except OptimizerError as error:
                raise OptimizerError(f"{where}: parameter group {i}: {error}") from None
            new_groups.append(merged)
        by_index: dict[Any, AnyTensor] = {}
        for saved, own in zip(groups, self.param_groups):
            for key, p in zip(saved["params"], own["params"]):
                by_index[key] = p
        new_state = ParamState()
        for key, values in state_dict["state"].items():
            p = by_index.get(key)
            if p is None:
                continue
            new_state[p] = {name: _restored(value, p, f"{where}: state '{name}' of parameter {key}")
                            for name, value in values.items()}
        self.state = new_state
        for own, merged in zip(self.param_groups, new_groups):
            own.update(merged)


def _restored(value: Any, p: AnyTensor, where: str) -> Any:
    """One saved state entry as the optimizer keeps it: an array in ``p``'s memory order and dtype, or a copy."""
    if isinstance(value, Tensor):
        value = np.asarray(value._ops.concrete(value))
    elif hasattr(value, "detach") and hasattr(value, "numpy"):  # a PyTorch tensor
        value = np.asarray(value.detach().cpu().numpy())
        if value.ndim == 0:
            return value.item()
    if isinstance(value, np.ndarray) and value.ndim > 0:
        if value.shape != p._data.shape:
            raise OptimizerError(f"{where} has shape {list(value.shape)}, the parameter has {list(p._data.shape)}")
        array = np.empty_like(p._data)  # the parameter's memory order, for the fused updates
        array[...] = value
        return array
    return copy.deepcopy(value)
