"""The ``exported`` way of running a program, for ``tensorplay.testing.check_interpreters``: export it with every
tensor axis ``Dim.AUTO`` (dynamic wherever the program allows), save it, load it, call the loaded program.

Importing this module registers the way (the package metadata names it in the ``tensorplay.testing.interpreters``
entry-point group, so the registry imports it when first read). State the program changes (batch-norm
statistics, parameters updated in place) is written back into the module that was exported, as an eager call
would leave it.
"""

from __future__ import annotations

import io
from typing import Any

from tensorplay.export.dim import Dim
from tensorplay.export.exporting import export
from tensorplay.export.files import load, save
from tensorplay.export.signature import OutputKind
from tensorplay.export.errors import CapturedStateWriteError
from tensorplay.testing.registry import NotApplicable, register_interpreter
from tensorplay.tensor import Tensor


def run_exported(fn: Any, *args: Any) -> Any:
    """Export (every tensor axis ``Dim.AUTO``), save, load, then call the loaded program's ``module()``.

    A function (not a module) that updates state it closes over (a gradient of a training batch norm,
    which writes the module's running statistics) has no exported form: export refuses it, and the way
    does not apply (:class:`NotApplicable`)."""
    try:
        ep = export(fn, tuple(args), dynamic_shapes=[Dim.AUTO] * _n_arguments(fn, args))
    except CapturedStateWriteError as error:
        raise NotApplicable(f"export refuses the program: {error}") from error
    buffer = io.BytesIO()
    save(ep, buffer)
    buffer.seek(0)
    module = load(buffer).module()
    result = module(*args)
    _write_back(fn, module, ep)
    return result


def _n_arguments(fn: Any, args: tuple[Any, ...]) -> int:
    from tensorplay.export.dynamic import combine
    return len(combine(fn, args, None).names)


def _write_back(fn: Any, module: Any, ep: Any) -> None:
    """Copy the new values of mutated buffers and parameters into ``fn``'s own tensors."""
    if not callable(getattr(fn, "named_parameters", None)):
        return
    own = {**dict(fn.named_parameters()), **dict(fn.named_buffers())}
    new = {**dict(module.named_parameters()), **dict(module.named_buffers())}
    for spec in ep.graph_signature.output_specs:
        if spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION):
            target: Tensor[*tuple[Any, ...]] = own[str(spec.target)]
            target._data[...] = new[str(spec.target)]._data
            box = target._version
            if box is None:
                target._version = [1]
            else:
                box[0] += 1


register_interpreter("exported", run_exported, description="tp.export.export (every axis Dim.AUTO), save, load, "
                                                            "then the loaded program's module()")

__all__ = ["run_exported"]
