"""``Module``: the base class of layers and models, with PyTorch's interface.

Parameters, buffers and submodules assigned as attributes are registered in
``_parameters``, ``_buffers`` and ``_modules`` (read back through
``__getattr__``), so names, ``state_dict`` keys and the ``repr`` match
PyTorch's. A module is called as ``module(x)``, which runs ``forward``.
Modules only use the operations of their inputs' interpreter, so the same
module runs eagerly, under the graph recorder and inside transforms.
``functional_call`` and ``trace(module)`` replace parameters and buffers for one
thread only (:mod:`tensorplay.swaps`): attribute reads and ``named_parameters()``
see the replacements in that thread, the module's own tensors everywhere else.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

import numpy as np

from tensorplay import devices as _device
from tensorplay import dtypes as _dt
from tensorplay import recording as _recording
from tensorplay import swaps as _swaps
from tensorplay.errors import ArgumentError, DTypeError, KeyLookupError, TensorplayError
from tensorplay.interpreters.eager.tape import reset_grads
from tensorplay.nn.parameter import Parameter
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
M = TypeVar("M", bound="Module")
_SWAPS_ACTIVE = _swaps.active


class StateDictError(TensorplayError, RuntimeError):
    """``load_state_dict`` found missing or unexpected keys, or a shape that does not fit."""


class ModuleAttributeError(TensorplayError, AttributeError):
    """A module has no such attribute, submodule or parameter, or registers one before ``__init__``; an
    AttributeError, so ``hasattr`` and ``getattr(module, name, default)`` keep working."""


class ModuleTypeError(TensorplayError, TypeError):
    """A value of the wrong type was assigned or registered as a parameter, buffer or submodule, or passed
    where a module needs a mapping; a TypeError, as in PyTorch."""


class ModuleKeyError(KeyLookupError):
    """A parameter, buffer or submodule name is not allowed (empty, dotted, or an existing attribute); a
    KeyError, as in PyTorch, whose ``str()`` is the plain message."""


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` did not match."""

    missing_keys: list[str]
    unexpected_keys: list[str]


def as_array(value: Any, where: str) -> np.ndarray[Any, Any]:
    """A numpy array from a tensorplay tensor, a numpy array, a PyTorch tensor or nested lists."""
    if isinstance(value, Tensor):
        return np.asarray(value._ops.concrete(value))
    if isinstance(value, np.ndarray):
        return _dt.plain_array(value, where)
    detach = getattr(value, "detach", None)
    if callable(detach):  # a PyTorch (or similar) tensor
        value = detach()
        cpu = getattr(value, "cpu", None)
        if callable(cpu):
            value = cpu()
        to_numpy = getattr(value, "numpy", None)
        if callable(to_numpy):
            return np.asarray(to_numpy())
    try:
        return np.asarray(value)
    except Exception as error:  # pragma: no cover - exotic inputs
        raise DTypeError(f"{where}: cannot convert a {type(value).__name__} to an array") from error


def bump_version(t: AnyTensor) -> None:
    """Record that ``t``'s payload was modified in place (saved-for-backward checks see it)."""
    box = t._version
    if box is None:
        t._version = [1]
    else:
        box[0] += 1


def write_payload(t: AnyTensor, value: np.ndarray[Any, Any]) -> None:
    """Copy ``value`` into eager tensor ``t``'s payload in place (cast to its dtype) and bump its version."""
    t._data[...] = value
    bump_version(t)


call_observers: list[Callable[[Module, tuple[Any, ...], dict[str, Any]], Any]] = []
"""While not empty, ``module(*args, **kwargs)`` calls ``call_observers[-1](module, args, kwargs)``, which runs
``module.forward`` itself (export notes each submodule call this way, to rebuild the hierarchy later)."""


def _indent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


class Module:
    """Base class of every layer and model. Subclasses call ``super().__init__()`` first, assign
    parameters (:class:`Parameter`), buffers (:meth:`register_buffer`) and submodules as
    attributes, and define ``forward``."""

    training: bool
    _parameters: dict[str, Parameter[*tuple[Any, ...]] | None]
    _buffers: dict[str, AnyTensor | None]
    _non_persistent: set[str]
    _modules: dict[str, Module | None]

    def __init__(self) -> None:
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_buffers", {})
        object.__setattr__(self, "_non_persistent", set())
        object.__setattr__(self, "_modules", {})

    # ---- calling ---------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; every subclass defines it."""
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if call_observers:
            return call_observers[-1](self, args, kwargs)
        return self.forward(*args, **kwargs)

    # ---- attribute registration ----------------------------------------------------------------------
    def _registries(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        d = self.__dict__
        if "_parameters" not in d:
            raise ModuleAttributeError(f"cannot assign parameters, buffers or modules to {type(self).__name__} "
                                       "before Module.__init__() was called (call super().__init__() first)")
        return d["_parameters"], d["_buffers"], d["_modules"]

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            params, buffers, modules = self._registries()
            d.pop(name, None)
            buffers.pop(name, None)
            modules.pop(name, None)
            self._non_persistent.discard(name)
            params[name] = value
        elif isinstance(value, Module):
            params, buffers, modules = self._registries()
            d.pop(name, None)
            params.pop(name, None)
            buffers.pop(name, None)
            self._non_persistent.discard(name)
            modules[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise ModuleTypeError(f"{type(self).__name__}.{name}: cannot assign '{type(value).__name__}' as "
                                      f"parameter '{name}' (tp.nn.Parameter or None expected)")
            params[name] = None
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise ModuleTypeError(f"{type(self).__name__}.{name}: cannot assign '{type(value).__name__}' as "
                                      f"child module '{name}' (tp.nn.Module or None expected)")
            d["_modules"][name] = None
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise ModuleTypeError(f"{type(self).__name__}.{name}: cannot assign '{type(value).__name__}' as "
                                      f"buffer '{name}' (tp.Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        if _SWAPS_ACTIVE[0]:
            replaced = _swaps.replacements(self)
            if replaced is not None and name in replaced:
                return replaced[name]
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            table = d.get(registry)
            if table is not None and name in table:
                return table[name]
        raise ModuleAttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in (self._parameters, self._buffers, self._modules):
            if name in registry:
                del registry[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def register_parameter(self, name: str, param: Parameter[*tuple[Any, ...]] | None) -> None:
        """Register ``param`` (or a ``None`` placeholder, as for an absent bias) under ``name``."""
        self._check_name(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise ModuleTypeError(f"register_parameter: cannot assign '{type(param).__name__}' object to parameter "
                                  f"'{name}' (tp.nn.Parameter or None required)")
        self.__dict__.pop(name, None)
        self._buffers.pop(name, None)
        self._modules.pop(name, None)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: AnyTensor | None, persistent: bool = True) -> None:
        """Register a non-parameter tensor (e.g. running statistics); ``persistent=False`` keeps it out
        of ``state_dict``."""
        self._check_name(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise ModuleTypeError(f"register_buffer: cannot assign '{type(tensor).__name__}' object to buffer "
                                  f"'{name}' (tp.Tensor or None required)")
        self.__dict__.pop(name, None)
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def register_module(self, name: str, module: Module | None) -> None:
        """Register a child module under ``name``."""
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise ModuleTypeError(f"register_module: {type(module).__name__} is not a Module subclass (module "
                                  f"'{name}' must be a tp.nn.Module or None)")
        self.__dict__.pop(name, None)
        self._parameters.pop(name, None)
        self._buffers.pop(name, None)
        self._modules[name] = module

    add_module = register_module

    def _check_name(self, name: str, kind: str) -> None:
        self._registries()
        if not isinstance(name, str):
            raise ModuleTypeError(f"register_{kind}: {kind} name should be a string, got {type(name).__name__} "
                                  f"{name!r}")
        if name == "" or "." in name:
            raise ModuleKeyError(f"register_{kind}: {kind} name can't be empty or contain '.', got {name!r}")
        registries = (self._parameters, self._buffers, self._modules)
        if hasattr(self, name) and not any(name in r for r in registries):
            raise ModuleKeyError(f"register_{kind}: attribute '{name}' already exists on {type(self).__name__} "
                                 f"(as a {type(getattr(self, name)).__name__}); pick another {kind} name")

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is ``self``)."""
        module: Module = self
        if target == "":
            return module
        for item in target.split("."):
            child = module._modules.get(item)
            if child is None:
                raise ModuleAttributeError(f"get_submodule: {module._get_name()} has no submodule `{item}` (looking up "
                                           f"'{target}'; its submodules are {sorted(module._modules)})")
            module = child
        return module

    def get_parameter(self, target: str) -> Parameter[*tuple[Any, ...]]:
        """The parameter at dotted path ``target``."""
        path, _, name = target.rpartition(".")
        module = self.get_submodule(path)
        param = module._parameters.get(name)
        if param is None:
            raise ModuleAttributeError(f"get_parameter: {module._get_name()} has no parameter `{name}` (looking up "
                                       f"'{target}'; its parameters are {sorted(module._parameters)})")
        return param

    # ---- iteration -----------------------------------------------------------------------------------
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """``(dotted name, module)`` for this module and every descendant, depth first."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is None:
                continue
            yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        """This module and every descendant."""
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        """``(name, module)`` for the direct children."""
        seen: set[int] = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        """The direct children."""
        for _, child in self.named_children():
            yield child

    def _named_members(self, registry: str, prefix: str, recurse: bool,
                       remove_duplicate: bool) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else iter([(prefix, self)])
        for module_prefix, module in modules:
            table: dict[str, Any] = module.__dict__[registry]
            replaced = _swaps.replacements(module)
            for name, value in table.items():
                if replaced is not None:
                    value = replaced.get(name, value)
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter[*tuple[Any, ...]]]]:
        """``(dotted name, parameter)`` pairs (a shared parameter is listed once)."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter[*tuple[Any, ...]]]:
        """Every parameter (what an optimizer takes)."""
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, AnyTensor]]:
        """``(dotted name, buffer)`` pairs."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[AnyTensor]:
        """Every buffer."""
        for _, buffer in self.named_buffers(recurse=recurse):
            yield buffer

    # ---- modes and bulk operations -----------------------------------------------------------------
    def train(self: M, mode: bool = True) -> M:
        """Set training mode (dropout active, batch norm uses batch statistics) on every module."""
        if not isinstance(mode, bool):
            raise ArgumentError(f"{type(self).__name__}.train(mode): training mode is expected to be boolean, got "
                                f"{type(mode).__name__} {mode!r}")
        for module in self.modules():
            object.__setattr__(module, "training", mode)
        return self

    def eval(self: M) -> M:
        """Set evaluation mode (``train(False)``)."""
        return self.train(False)

    def requires_grad_(self: M, requires_grad: bool = True) -> M:
        """Set ``requires_grad`` on every parameter."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def apply(self: M, fn: Callable[[Module], Any]) -> M:
        """Call ``fn`` on every descendant (children first) and then on ``self``; returns ``self``."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of every parameter (to ``None`` by default, else to zeros in place)."""
        reset_grads(self.parameters(), set_to_none)

    def cpu(self: M) -> M:
        """This module (its tensors live on the CPU)."""
        return self

    def cuda(self: M, device: Any = None) -> M:
        """Always a :class:`~tensorplay.errors.DeviceError`: tensorplay runs on the CPU only."""
        _device.check_device("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device,
                             f"{type(self).__name__}.cuda")
        return self

    def to(self: M, *args: Any, **kwargs: Any) -> M:
        """``to(dtype)``: convert every float parameter and buffer (and gradient) to ``dtype``, in place
        (the same parameter objects, so an optimizer made earlier still sees them). A device (``"cpu"``,
        ``tp.device("cpu")``, ``device=``) is accepted and ignored; any other device is a
        :class:`~tensorplay.errors.DeviceError`."""
        target = _device.to_arguments(args, dict(kwargs), f"{type(self).__name__}.to")
        if target is None:
            return self
        dtype = _dt.to_dtype(target)
        if not dtype.is_floating_point:
            raise DTypeError(f"to(): only floating point dtypes are accepted for modules, got {dtype}")
        for module in self.modules():
            for table in (module._parameters, module._buffers):
                for t in table.values():
                    if t is None or t._data.dtype.kind != "f" or t._data.dtype == dtype.numpy:
                        continue
                    t._data = t._data.astype(dtype.numpy)
                    bump_version(t)
                    if t._grad is not None:
                        t._grad = t._grad.detach().astype(dtype)
        return self

    def float(self: M) -> M:
        """Convert float parameters and buffers to float32."""
        return self.to(_dt.float32)

    def double(self: M) -> M:
        """Convert float parameters and buffers to float64."""
        return self.to(_dt.float64)

    # ---- state dict --------------------------------------------------------------------------------
    def state_dict(self, destination: dict[str, Any] | None = None, prefix: str = "",
                   keep_vars: bool = False) -> OrderedDict[str, AnyTensor]:
        """Parameters and persistent buffers by dotted name (values share memory with the module;
        detached unless ``keep_vars``). A submodule reachable under several names is listed under each
        of them, as PyTorch does (so a PyTorch state dict of the same model loads strictly)."""
        out: OrderedDict[str, AnyTensor] = OrderedDict() if destination is None else destination  # type: ignore[assignment]
        for module_prefix, module in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            dotted = f"{module_prefix}." if module_prefix else ""
            for name, param in module._parameters.items():
                if param is not None:
                    out[dotted + name] = param if keep_vars else param.detach()
            for name, buffer in module._buffers.items():
                if buffer is not None and name not in module._non_persistent:
                    out[dotted + name] = buffer if keep_vars else buffer.detach()
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Copy values (tensorplay tensors, numpy arrays or PyTorch tensors) into the parameters and
        persistent buffers, converting to their dtype.

        With ``strict`` (the default) a missing or unexpected key is an error; a shape mismatch always
        is. Every problem is listed in one :class:`StateDictError` and nothing is copied when there is
        one. ``assign=True`` makes each parameter hold the given array itself (when it has the right
        dtype and is contiguous) instead of copying into the existing payload.
        """
        if not isinstance(state_dict, Mapping):
            raise ModuleTypeError(f"{type(self).__name__}.load_state_dict: expected a mapping of names to tensors, "
                                  f"got {type(state_dict).__name__}")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        problems: list[str] = []
        updates: list[tuple[AnyTensor, np.ndarray[Any, Any]]] = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = as_array(state_dict[key], f"load_state_dict ({key})")
            if value.dtype.kind not in "fiub":  # a string, an object: not a value to copy (nor a shape to compare)
                problems.append(f"While copying the parameter named \"{key}\", expected a tensor or array from "
                                f"checkpoint but received {type(state_dict[key]).__name__} ({value.dtype} values).")
                continue
            if tuple(value.shape) != tuple(target._data.shape):
                problems.append(f"size mismatch for {key}: copying a param with shape {list(value.shape)} from "
                                f"checkpoint, the shape in current model is {list(target._data.shape)}.")
                continue
            if value.dtype.kind not in "fiub" or (target._data.dtype.kind in "iub" and value.dtype.kind == "f"):
                problems.append(f"dtype mismatch for {key}: cannot load a {value.dtype} value into a "
                                f"{target._data.dtype} tensor.")
                continue
            updates.append((target, value))
        if strict:
            if unexpected:
                problems.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
            if missing:
                problems.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        if problems:
            raise StateDictError(f"Error(s) in loading state_dict for {self._get_name()}:\n\t" + "\n\t".join(problems))
        for target, value in updates:
            _recording.refuse_outside_write(target, "load_state_dict")
            if assign:  # hold the given array itself when it can be a payload as is
                usable = value.dtype == target._data.dtype and value.flags.writeable and (
                    value.flags.c_contiguous or value.flags.f_contiguous)
                target._data = value if usable else np.array(value, dtype=target._data.dtype, order="K")
                bump_version(target)
            else:
                write_payload(target, value)
        return IncompatibleKeys(missing, unexpected)

    # ---- printing ----------------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The part of the ``repr`` inside the parentheses (layers describe their configuration)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): {_indent(repr(child), 2)}" for name, child in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if len(extra_lines) == 1 and not child_lines:
            body = extra_lines[0]
        elif lines:
            body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


__all__ = ["Module", "StateDictError", "IncompatibleKeys", "as_array", "bump_version", "write_payload"]
