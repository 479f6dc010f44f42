"""Modules as functions: ``functional_call``, ``stack_module_state`` and batch-norm replacement."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from tensorplay.creation import stack
from tensorplay.errors import ArgumentError, ArgumentTypeError
from tensorplay.nn.module import Module
from tensorplay.nn.normalization import _BatchNorm
from tensorplay.swaps import replaced
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
_MISSING = object()


def _merge(dicts: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    if isinstance(dicts, Mapping):
        return dict(dicts)
    if not isinstance(dicts, (tuple, list)):
        raise ArgumentTypeError(f"functional_call: parameter_and_buffer_dicts must be a dict or a tuple of dicts of "
                                f"tensors, got {type(dicts).__name__}")
    merged: dict[str, Any] = {}
    source: dict[str, int] = {}
    for i, d in enumerate(dicts):
        if not isinstance(d, Mapping):
            raise ArgumentTypeError(f"functional_call: entry {i} of parameter_and_buffer_dicts is a "
                                    f"{type(d).__name__}, expected a dict")
        for key, value in d.items():
            if key in merged:
                raise ArgumentError(f"functional_call: parameter_and_buffer_dicts gives {key!r} in entries "
                                    f"{source[key]} and {i}: each name must appear in one dict only ({key!r} appeared "
                                    "in multiple dictionaries; the call would be ambiguous)")
            merged[key] = value
            source[key] = i
    return merged


def _tied_groups(module: Module) -> list[list[str]]:
    """Names that refer to one tensor object (tied weights), for groups of two or more names."""
    by_id: dict[int, list[str]] = {}
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for registry in ("_parameters", "_buffers"):
            for name, value in sub.__dict__[registry].items():
                if value is not None:
                    by_id.setdefault(id(value), []).append(f"{prefix}.{name}" if prefix else name)
    return [sorted(set(names)) for names in by_id.values() if len(set(names)) > 1]


def _all_names(module: Module) -> set[str]:
    names: set[str] = set()
    for prefix, sub in module.named_modules(remove_duplicate=False):
        for registry in ("_parameters", "_buffers"):
            for name, value in sub.__dict__[registry].items():
                if value is not None:
                    names.add(f"{prefix}.{name}" if prefix else name)
    return names


@contextmanager
def _swapped(module: Module, values: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, ``module``'s parameters and buffers named in ``values`` are replaced, for the
    calling thread only (other threads using the module meanwhile see its own tensors). A name that is
    a plain attribute of its module (neither a parameter nor a buffer) is set on the module itself."""
    local: list[tuple[Module, str, Any]] = []
    plain: list[tuple[Module, str, Any, Any]] = []  # owner, name, new value, old value
    for key, value in values.items():
        path, _, name = key.rpartition(".")
        try:
            owner = module.get_submodule(path)
        except AttributeError as error:
            raise AttributeError(f"functional_call: no submodule for key {key!r}: {error}") from None
        d = owner.__dict__
        if name in d or hasattr(type(owner), name):  # a plain attribute: reads never reach __getattr__
            plain.append((owner, name, value, d.get(name, _MISSING)))
        else:
            local.append((owner, name, value))
    try:
        with replaced(local):
            for owner, name, value, _ in plain:
                object.__setattr__(owner, name, value)
            yield
    finally:
        for owner, name, _, old in reversed(plain):
            if old is _MISSING:
                owner.__dict__.pop(name, None)
            else:
                object.__setattr__(owner, name, old)


def functional_call(module: Module, parameter_and_buffer_dicts: Mapping[str, Any] | Sequence[Mapping[str, Any]],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the given tensors.

    ``parameter_and_buffer_dicts`` maps dotted names (as in ``named_parameters()``) to tensors; a
    tuple of dicts is merged (a key in two dicts is an error). Names not given keep the module's
    own tensors. ``args`` is one argument or a tuple of them. With ``tie_weights`` (default), a
    value given for one name of tied weights (one tensor registered under several names) is used
    for all of them; different values for tied names are an error. ``strict=True`` requires
    exactly the module's parameter and buffer names. The module's own state is restored
    afterwards, even if the call raises. This is how modules go through transforms::

        grad(lambda p, x: functional_call(model, p, (x,)).sum())(params, x)

    >>> import tensorplay as tp
    >>> from tensorplay.func import functional_call
    >>> lin = tp.nn.Linear(2, 1)
    >>> params = {"weight": tp.tensor([[1.0, 2.0]]), "bias": tp.tensor([0.5])}
    >>> functional_call(lin, params, (tp.tensor([[3.0, 4.0]]),))
    tensor([[11.5000]])
    """
    values = _merge(parameter_and_buffer_dicts)
    for key, value in values.items():
        if not isinstance(key, str):
            raise ArgumentTypeError(f"functional_call: keys must be dotted names (str), got {key!r}")
        if value is not None and not isinstance(value, Tensor):
            raise ArgumentTypeError(f"functional_call: the value for {key!r} is a {type(value).__name__}, expected a "
                                    "tensor")
    if strict:
        names = _all_names(module)
        missing = sorted(names - set(values))
        unexpected = sorted(set(values) - names)
        if missing or unexpected:
            parts = []
            if unexpected:
                parts.append(f"Unexpected key(s): {', '.join(repr(k) for k in unexpected)}.")
            if missing:
                parts.append(f"Missing key(s): {', '.join(repr(k) for k in missing)}.")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(parts))
    if tie_weights:
        for group in _tied_groups(module):
            given = [name for name in group if name in values]
            if not given:
                continue
            first = values[given[0]]
            if any(values[name] is not first for name in given[1:]):
                raise ArgumentError(f"functional_call: parameter_and_buffer_dicts gives different tensors for the "
                                    f"names {given}, which are tied (one tensor in the module); expected one tensor "
                                    "for all of them, or pass tie_weights=False to replace each on its own")
            for name in group:
                values.setdefault(name, first)
    call_args = args if isinstance(args, tuple) else (() if args is None else (args,))
    with _swapped(module, values):
        return module(*call_args, **(kwargs or {}))


def stack_module_state(models: Sequence[Module]) -> tuple[dict[str, AnyTensor], dict[str, AnyTensor]]:
    """``(params, buffers)``: each parameter and buffer of ``models`` stacked on a new leading axis.

    The models must share their class and training mode. Stacked parameters are new leaves that
    require grad when the originals do. Use them with :func:`functional_call` under
    :func:`~tensorplay.func.vmap` to run an ensemble as one batched model::

        params, buffers = stack_module_state(models)
        vmap(lambda p, b, x: functional_call(models[0], (p, b), (x,)), in_dims=(0, 0, None))(params, buffers, x)

    >>> import tensorplay as tp
    >>> from tensorplay.func import stack_module_state
    >>> params, buffers = stack_module_state([tp.nn.Linear(3, 2) for _ in range(4)])
    >>> params["weight"].shape, params["bias"].shape
    (tp.Size([4, 2, 3]), tp.Size([4, 2]))
    """
    models = list(models)
    if not models:
        raise ArgumentError("stack_module_state: models must hold at least one model, got an empty sequence")
    first = models[0]
    for i, m in enumerate(models):
        if type(m) is not type(first):
            raise ArgumentError(f"stack_module_state: expected all models to be of the same class; model 0 is a "
                             f"{type(first).__name__}, model {i} a {type(m).__name__}")
        if m.training != first.training:
            raise ArgumentError(f"stack_module_state: expected all models to have the same training/eval mode; model 0 "
                             f"has training={first.training}, model {i} training={m.training}")

    def stacked(named: list[dict[str, AnyTensor]], grad: bool) -> dict[str, AnyTensor]:
        out: dict[str, AnyTensor] = {}
        for name in named[0]:
            parts = [n[name] for n in named]
            result = stack([p.detach() for p in parts])
            if grad and any(p.requires_grad for p in parts):
                result.requires_grad_(True)
            out[name] = result
        return out

    params = stacked([dict(m.named_parameters()) for m in models], True)
    buffers = stacked([dict(m.named_buffers()) for m in models], False)
    return params, buffers


def batch_norm_without_running_stats(module: Module) -> Module:
    """Make one batch-norm module use batch statistics always and stop tracking running statistics
    (its running buffers become ``None``); any other module is left alone. Returns ``module``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import batch_norm_without_running_stats
    >>> bn = batch_norm_without_running_stats(tp.nn.BatchNorm2d(4))
    >>> bn.running_var is None, bn.track_running_stats
    (True, False)
    """
    if isinstance(module, _BatchNorm) and module.track_running_stats:
        module.running_mean = None
        module.running_var = None
        module.num_batches_tracked = None
        module.track_running_stats = False
    return module


def replace_all_batch_norm_modules_(root: Module) -> Module:
    """In place, make every batch-norm module in ``root`` use batch statistics and stop updating running
    statistics (what ``vmap`` over a model with batch norm needs). Returns ``root``.

    >>> import tensorplay as tp
    >>> from tensorplay.func import replace_all_batch_norm_modules_
    >>> net = tp.nn.Sequential(tp.nn.Linear(3, 3), tp.nn.BatchNorm1d(3))
    >>> _ = replace_all_batch_norm_modules_(net)
    >>> net[1].running_mean is None, net[1].track_running_stats
    (True, False)
    """
    for module in root.modules():
        batch_norm_without_running_stats(module)
    return root


__all__ = ["batch_norm_without_running_stats", "functional_call", "replace_all_batch_norm_modules_",
           "stack_module_state"]
