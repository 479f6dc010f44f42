"""The fast check of a specialization's state guards, as one generated function per specialization.

:meth:`.guards.Guards.state_ok` checks, at every call of a compiled function, what its sources read now:
each tensor against its :class:`.guards.TensorMeta` (an eager tensor of that shape and dtype, with the same
``requires_grad`` and, where it matters, a ``.grad`` or none), each value (the same object, or one of equal
:func:`.values.static_key`; a numpy array: the same bytes, dtype and shape, compared directly), each object (the very same one) and each container (:meth:`holds`). Looping
over those lists costs a few attribute reads and a call per entry: a training step's 8 tensors and 20 values
took about 12 us warm. :func:`state_check_function` writes the same checks as straight-line code, the
expected shapes, dtypes, values and objects bound as constants, so the answer is the loop's for every input:
a dtype is first compared by identity with numpy's own, then, if that fails, by name as the loop does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensorplay.compiler.values import static_key
from tensorplay.interpreters.eager.interpreter import dtype_name
from tensorplay.tensor import Tensor

StateCheck = Callable[[Sequence[Any], Sequence[Any], Sequence[Any]], bool]
"""``check(reads, values, objects)``: whether the tensor, value and object sources' readings pass."""


def state_check_function(metas: Sequence[Any], values: Sequence[Any], objects: Sequence[Any],
                         containers: Sequence[Any]) -> StateCheck:
    """The generated check of readings against ``metas`` (one :class:`.guards.TensorMeta` per tensor source),
    the recorded ``values`` and ``objects`` (what each value and object source held when captured) and the
    ``containers`` (each with ``holds()``)."""
    namespace: dict[str, Any] = {"_Tensor": Tensor, "_dtype_name": dtype_name, "_static_key": static_key,
                                 "_ndarray": np.ndarray}
    lines = ["def state_ok(reads, values, objects):"]

    def constant(value: Any) -> str:
        name = f"_k{len(namespace)}"
        namespace[name] = value
        return name

    for i, meta in enumerate(metas):
        numpy_dtype = _numpy_dtype(meta.dtype)
        dtype_test = f"_dtype_name(d.dtype) != {meta.dtype!r}" if numpy_dtype is None else \
            f"(d.dtype is not {constant(numpy_dtype)} and _dtype_name(d.dtype) != {meta.dtype!r})"
        grad_test = "" if meta.has_grad is None else f" or (t._grad is not None) != {bool(meta.has_grad)}"
        lines += [f"    t = reads[{i}]",
                  "    if not isinstance(t, _Tensor):",
                  "        return False",
                  "    d = t._data",
                  f"    if d.shape != {constant(tuple(meta.shape))} or {dtype_test} "
                  f"or t._requires_grad != {bool(meta.requires_grad)}{grad_test}:",
                  "        return False"]
    for j, value in enumerate(values):
        recorded = constant(value)
        if isinstance(value, np.ndarray):  # the same bytes, dtype and shape (what its static key compares)
            lines += [f"    v = values[{j}]",
                      f"    if v is not {recorded} and not (isinstance(v, _ndarray) and v.dtype == {constant(value.dtype)}"
                      f" and v.shape == {constant(value.shape)} and v.tobytes() == {constant(value.tobytes())}):",
                      "        return False"]
            continue
        lines += [f"    v = values[{j}]",
                  f"    if v is not {recorded} and _static_key(v) != _static_key({recorded}):",
                  "        return False"]
    for k, obj in enumerate(objects):
        lines += [f"    if objects[{k}] is not {constant(obj)}:", "        return False"]
    for container in containers:
        lines += [f"    if not {constant(container)}.holds():", "        return False"]
    lines.append("    return True")
    source = "\n".join(lines) + "\n"
    code: dict[str, Any] = {}
    exec(compile(source, "<tensorplay-state-check>", "exec"), namespace, code)
    check: StateCheck = code["state_ok"]
    check.__doc__ = source
    return check


def _numpy_dtype(name: str) -> np.dtype[Any] | None:
    """numpy's dtype object named ``name``, when :func:`dtype_name` gives that name for it (``None`` else: the
    check then compares names only)."""
    try:
        found = np.dtype(name)
    except TypeError:
        return None
    return found if dtype_name(found) == name else None


__all__ = ["StateCheck", "state_check_function"]
