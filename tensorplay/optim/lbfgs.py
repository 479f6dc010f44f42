"""``LBFGS``: limited-memory BFGS over all parameters flattened into one vector, with an optional strong-Wolfe
line search (the algorithm and defaults of PyTorch's ``torch.optim.LBFGS``).

Every quantity is a flat vector ``[n]`` (``n`` the total number of parameter entries, in parameter order), kept
in the parameters' dtype; scalars (losses, step sizes, directional derivatives) are Python floats. The line
search is in :mod:`tensorplay.optim.line_search`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from tensorplay import compile_hooks, recording
from tensorplay.errors import GraphCaptureError
from tensorplay.optim.line_search import strong_wolfe
from tensorplay.optim.optimizer import AnyTensor, Array, Optimizer, OptimizerError, OptimizerTypeError, bump_version
from tensorplay.optim.optimizer import check_number

_CURVATURE_FLOOR = 1e-10
"""A step pair ``(s, y)`` enters the history only when ``y . s`` exceeds this (PyTorch's threshold)."""

_LINE_SEARCHES = (None, "strong_wolfe")


class LBFGS(Optimizer):
    """PyTorch's L-BFGS: ``step(closure)`` runs up to ``max_iter`` iterations (at most ``max_eval`` closure
    calls), each moving the parameters along ``d = -H g``, the two-loop recursion over the last
    ``history_size`` step pairs ``(s, y)`` scaled by ``H_diag = y.s / y.y``. The first iteration ever steps
    ``min(1, 1 / |g|_1) * lr`` along ``-g``, later ones ``lr`` (or what the strong-Wolfe line search finds,
    ``line_search_fn="strong_wolfe"``). It stops early when ``max |g| <= tolerance_grad``, when the directional
    derivative ``g . d > -tolerance_change``, when the step or the loss change is below ``tolerance_change``.

    ``closure()`` must clear the gradients, compute the loss, call ``backward()`` and return the loss; it is
    called with gradients enabled. The state (history, direction, step) lives in ``state[params[0]]`` and
    carries over between ``step`` calls. One parameter group only, all parameters of one float dtype.
    """

    def __init__(self, params: Iterable[AnyTensor] | Iterable[dict[str, Any]], lr: float = 1.0, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn: str | None = None) -> None:
        if max_eval is None and isinstance(max_iter, int) and not isinstance(max_iter, bool):
            max_eval = max_iter * 5 // 4
        super().__init__(params, {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                                  "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                                  "history_size": history_size, "line_search_fn": line_search_fn})
        if len(self.param_groups) != 1:
            raise OptimizerError("LBFGS doesn't support per-parameter options (parameter groups): give it one list "
                                 f"of parameters, got {len(self.param_groups)} groups")
        self._params: list[AnyTensor] = self.param_groups[0]["params"]
        dtypes = sorted({str(p._data.dtype) for p in self._params})
        if len(dtypes) > 1:
            raise OptimizerError(f"LBFGS: every parameter must have one dtype (they are flattened into one vector), "
                                 f"got {', '.join(dtypes)}")

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Refused after construction: L-BFGS keeps one flattened vector of every parameter."""
        if self.param_groups:
            raise OptimizerError("LBFGS doesn't support per-parameter options (parameter groups): add_param_group "
                                 "is not available")
        super().add_param_group(param_group)

    def _check_group(self, group: dict[str, Any]) -> None:
        check_number("LBFGS", "learning rate", group["lr"])
        for name in ("max_iter", "max_eval", "history_size"):
            value = group[name]
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise OptimizerError(f"LBFGS: {name} must be a positive int, got {value!r}")
        check_number("LBFGS", "tolerance_grad", group["tolerance_grad"])
        check_number("LBFGS", "tolerance_change", group["tolerance_change"])
        if group["line_search_fn"] not in _LINE_SEARCHES:
            raise OptimizerError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                                 f"{group['line_search_fn']!r}")

    # ---- the flat vector ------------------------------------------------------------------------
    def _flat_grad(self) -> Array:
        """Every parameter's gradient, flattened and joined ``[n]`` (zeros where there is none)."""
        parts = []
        for p in self._params:
            grad = p._grad
            if grad is None:
                parts.append(np.zeros(p._data.size, dtype=p._data.dtype))
            else:
                parts.append(np.asarray(grad._data, dtype=p._data.dtype).reshape(-1))
        return np.concatenate(parts) if parts else np.zeros(0)

    def _add_step(self, step: float, direction: Array) -> None:
        """``params += step * direction`` in place (each parameter its slice of ``direction``)."""
        offset = 0
        for p in self._params:
            data = p._data
            size = data.size
            data += (data.dtype.type(step) * direction[offset:offset + size]).reshape(data.shape)
            offset += size
            bump_version(p)

    def _copy_params(self) -> list[Array]:
        return [p._data.copy() for p in self._params]

    def _set_params(self, values: list[Array]) -> None:
        for p, value in zip(self._params, values):
            p._data[...] = value
            bump_version(p)

    # ---- the step -------------------------------------------------------------------------------
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Up to ``max_iter`` L-BFGS iterations; returns the loss ``closure()`` gave at the first evaluation."""
        if closure is None or not callable(closure):
            raise OptimizerTypeError("LBFGS.step requires a closure: a function that clears the gradients, computes "
                                     f"the loss, calls backward() and returns the loss; got {closure!r}")
        if compile_hooks.handler() is not None:
            raise GraphCaptureError(
                "LBFGS.step cannot run inside tp.compile: it calls the closure a data-dependent number of times "
                "(its stopping tests and line search read the loss). Call step() eagerly, and compile the "
                "closure's loss and backward instead if it is the slow part")
        if recording.active[0]:
            for p in self._params:
                recording.refuse_outside_write(p, "LBFGS.step()")
        from tensorplay.interpreters.eager import tape

        def evaluate() -> tuple[Any, float, Array]:
            with tape.enable_grad():
                result = closure()
            return result, float(result), self._flat_grad()

        with tape.no_grad():
            return self._iterate(evaluate)

    def _iterate(self, evaluate: Callable[[], tuple[Any, float, Array]]) -> Any:
        group = self.param_groups[0]
        lr = float(group["lr"])
        max_iter, max_eval = int(group["max_iter"]), int(group["max_eval"])
        tolerance_grad, tolerance_change = float(group["tolerance_grad"]), float(group["tolerance_change"])
        history_size, line_search = int(group["history_size"]), group["line_search_fn"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        first, loss, flat_grad = evaluate()
        evals = 1
        state["func_evals"] += 1
        if float(np.abs(flat_grad).max(initial=0.0)) <= tolerance_grad:
            return first

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1.0
            else:
                assert d is not None and t is not None and prev_flat_grad is not None
                assert old_dirs is not None and old_stps is not None and ro is not None and h_diag is not None
                y = flat_grad - prev_flat_grad
                s = d * d.dtype.type(t)
                ys = float(y @ s)
                if ys > _CURVATURE_FLOOR:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / float(y @ y)
                d = _two_loop(flat_grad, old_dirs, old_stps, ro, h_diag, state, history_size)
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(np.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(flat_grad @ d)
            if gtd > -tolerance_change:
                break
            ls_evals = 0
            converged = False
            if line_search is not None:
                start = self._copy_params()

                def directional(step: float, direction: Array) -> tuple[float, Array]:
                    self._add_step(step, direction)
                    _, value, grad = evaluate()
                    self._set_params(start)
                    return value, grad

                loss, flat_grad, t, ls_evals = strong_wolfe(directional, t, d, loss, flat_grad, gtd,
                                                            tolerance_change=tolerance_change)
                self._add_step(t, d)
                converged = float(np.abs(flat_grad).max(initial=0.0)) <= tolerance_grad
            else:
                self._add_step(t, d)
                if n_iter != max_iter:
                    _, loss, flat_grad = evaluate()
                    converged = float(np.abs(flat_grad).max(initial=0.0)) <= tolerance_grad
                    ls_evals = 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or converged:
                break
            if float(np.abs(d * d.dtype.type(t)).max(initial=0.0)) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break
        state.update({"d": d, "t": t, "old_dirs": old_dirs, "old_stps": old_stps, "ro": ro, "H_diag": h_diag,
                      "prev_flat_grad": prev_flat_grad, "prev_loss": prev_loss})
        return first

    def _update_group(self, group: dict[str, Any]) -> None:  # step() is overridden: never called
        raise AssertionError("LBFGS updates in step()")

    # ---- state dicts ----------------------------------------------------------------------------
    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """As :meth:`Optimizer.load_state_dict`; the flat vectors (``d``, ``prev_flat_grad``, the history) must
        have the total number of parameter entries, and are restored in the parameters' dtype."""
        saved = dict(state_dict)
        entries = dict(saved.get("state", {}))
        flat_state = entries.pop(0, None)
        saved["state"] = entries
        super().load_state_dict(saved)
        if flat_state is not None:
            self.state[self._params[0]] = self._restored_flat(flat_state)

    def _restored_flat(self, values: Mapping[str, Any]) -> dict[str, Any]:
        n = sum(p._data.size for p in self._params)
        dtype = self._params[0]._data.dtype

        def vector(value: Any, name: str) -> Any:
            if value is None:
                return None
            if hasattr(value, "detach") and hasattr(value, "numpy"):  # a PyTorch tensor
                value = value.detach().cpu().numpy()
            elif hasattr(value, "_data"):
                value = value.numpy()
            array = np.array(value, dtype=dtype, copy=True)
            if array.shape != (n,):
                raise OptimizerError(f"LBFGS.load_state_dict: state '{name}' has shape {list(array.shape)}, expected "
                                     f"[{n}] (every parameter entry)")
            return array

        def scalar(value: Any) -> Any:
            return float(value.item() if hasattr(value, "item") else value) if value is not None else None

        out: dict[str, Any] = {}
        for name, value in values.items():
            if name in ("d", "prev_flat_grad"):
                out[name] = vector(value, name)
            elif name in ("old_dirs", "old_stps"):
                out[name] = [vector(v, name) for v in value]
            elif name in ("t", "H_diag", "prev_loss"):
                out[name] = scalar(value)
            elif name == "ro":
                out[name] = [scalar(v) for v in value]
            elif name == "al":
                out[name] = [None if v is None else scalar(v) for v in value]
            else:
                out[name] = int(value) if name in ("func_evals", "n_iter") else value
        return out


def _two_loop(flat_grad: Array, old_dirs: list[Array], old_stps: list[Array], ro: list[float], h_diag: float,
              state: dict[str, Any], history_size: int) -> Array:
    """``-H g`` by the two-loop recursion over the history (newest pair last); the first loop's coefficients
    are kept in ``state["al"]`` as PyTorch keeps them."""
    al = state.get("al")
    if al is None or len(al) != history_size:
        al = state["al"] = [None] * history_size
    q: Array = -flat_grad
    for i in range(len(old_dirs) - 1, -1, -1):
        al[i] = float(old_stps[i] @ q) * ro[i]
        q = q - q.dtype.type(al[i]) * old_dirs[i]
    r: Array = q * q.dtype.type(h_diag)
    for i in range(len(old_dirs)):
        be_i = float(old_dirs[i] @ r) * ro[i]
        r = r + r.dtype.type(al[i] - be_i) * old_stps[i]
    return r


__all__ = ["LBFGS"]
