"""Helpers shared by several test modules."""

from __future__ import annotations

import doctest
import importlib
from collections.abc import Sequence
from typing import Any

import numpy as np


def is_float_array(value: Any) -> bool:
    """``value`` is a numpy array of a floating dtype."""
    return isinstance(value, np.ndarray) and value.dtype.kind == "f"


def as_float64(value: Any) -> Any:
    """A float array as float64 with the same layout (non-contiguous stays non-contiguous); anything
    else unchanged."""
    if is_float_array(value) and value.dtype != np.float64:
        out = np.empty_like(value, dtype=np.float64)  # keeps a non-contiguous layout
        out[...] = value
        return out
    return value


def placed(base: Sequence[Any], positions: Sequence[int], values: Sequence[Any]) -> list[Any]:
    """A copy of ``base`` with ``values`` at ``positions``."""
    out = list(base)
    for i, v in zip(positions, values):
        out[i] = v
    return out


def batch_dims_like(arrays: Sequence[Any], ref: Any) -> dict[int, dict[int, str]]:
    """A symbolic batch dim ``"B"`` on axis 0 of every array with ``ref``'s rank and leading size (the
    ``dynamic=`` argument of the graph recorder's ``trace``)."""
    return {j: {0: "B"} for j, a in enumerate(arrays) if a.ndim == ref.ndim and a.shape[0] == ref.shape[0]}


def assert_doctests_pass(module_name: str) -> None:
    """The ``>>>`` examples in the docstrings of ``module_name`` run and print what they show."""
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} doctest examples failed in {module_name}"


def torch_smooth_max_pool(x: Any, k: tuple[int, ...], s: tuple[int, ...], p: tuple[int, ...], beta: float) -> Any:
    """PyTorch reference of ``smooth_max_pool_nd`` on ``x[N, C, *spatial]`` (a torch tensor): the window
    ``logsumexp(beta x) / beta`` with padded cells taking part as zeros."""
    import torch
    import torch.nn.functional as F
    pads: list[int] = []
    for pi in reversed(p):
        pads += [pi, pi]
    xp = F.pad(x, pads, value=0.0)
    for i in range(len(k)):
        xp = xp.unfold(2 + i, k[i], s[i])
    return torch.logsumexp(beta * xp, dim=tuple(range(-len(k), 0))) / beta


def on_one_then_two_threads(run: Any) -> tuple[Any, Any]:
    """``(run() with one eager thread, run() with two)``; the thread count is restored afterwards."""
    from tensorplay.interpreters.eager.kernels import threads

    before = threads.num_threads()
    try:
        threads.set_num_threads(1)
        one = run()
        threads.set_num_threads(2)
        two = run()
    finally:
        threads.set_num_threads(before)
    return one, two


def count_blas_chunks(monkeypatch: Any, module: Any) -> list[int]:
    """The number of chunks of each ``module.run_blas_chunks`` call from now on (the calls still run),
    with chunks allowed from 1,024 multiply-adds so that small test shapes split."""
    from tensorplay.interpreters.eager.kernels import threads

    monkeypatch.setattr(threads, "BLAS_CHUNK_MIN_MACS", 1 << 10)
    seen: list[int] = []
    real = module.run_blas_chunks

    def counting(bounds: list[int], body: Any) -> None:
        seen.append(len(bounds) - 1)
        real(bounds, body)
    monkeypatch.setattr(module, "run_blas_chunks", counting)
    return seen


def count_calls(monkeypatch: Any, module: Any, names: dict[str, str]) -> dict[str, int]:
    """``{key: calls}`` of the functions ``module.<name>`` for ``names`` (name -> key) from now on (the
    calls still run and return what they return)."""
    seen = {key: 0 for key in names.values()}
    for name, key in names.items():
        real = getattr(module, name)

        def counting(*args: Any, _real: Any = real, _key: str = key) -> Any:
            seen[_key] += 1
            return _real(*args)
        monkeypatch.setattr(module, name, counting)
    return seen


def assert_close_to_scale(got: Any, want: Any, tol: float) -> None:
    """``got`` equals ``want`` within ``tol`` relative to each value and to the largest finite ``|want|``
    (at least 1); NaN where ``want`` has NaN."""
    got, want = np.asarray(got), np.asarray(want)
    scale = max(1.0, float(np.abs(want[np.isfinite(want)]).max(initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale, equal_nan=True)


def layer_matches_torch(tp_layer: Any, torch_layer: Any, arrays: tuple[Any, Any, Any], with_bias: bool,
                        cotangent: Any, close: Any) -> tuple[Any, tuple[Any, Any, Any]]:
    """Runs ``tp_layer(x, w, b or None)`` and ``torch_layer`` on tensors of ``arrays = (x, w, b)`` that
    require grad, checks with ``close(got, want)`` the outputs and, after a backward of the cotangent
    ``cotangent(shape)``, each gradient (``b``'s only ``with_bias``; otherwise none is made). Returns
    tensorplay's output and its three input tensors."""
    import tensorplay as tp
    import torch

    tx, tw, tb = (tp.tensor(a, requires_grad=True) for a in arrays)
    y = tp_layer(tx, tw, tb if with_bias else None)
    rx, rw, rb = (torch.tensor(a, requires_grad=True) for a in arrays)
    ry = torch_layer(rx, rw, rb if with_bias else None)
    close(y.detach().numpy(), ry.detach().numpy())
    g = cotangent(tuple(ry.shape))
    y.backward(tp.tensor(g))
    ry.backward(torch.tensor(g))
    for got, want in [(tx, rx), (tw, rw)] + ([(tb, rb)] if with_bias else []):
        assert got.grad is not None and want.grad is not None
        close(got.grad.numpy(), want.grad.numpy())
    assert with_bias or tb.grad is None
    return y, (tx, tw, tb)


def compiled_source(compiled: Any) -> str:
    """The generated source of every specialization of a ``tp.compile``d function (forward, then backward where
    it has one), to assert what the numba backend emitted."""
    parts = []
    for spec in compiled.specializations:
        for fn in (spec.program.forward, spec.program.backward):
            if fn is not None:
                parts.append(fn.source)
    return "\n".join(parts)


def run_in_threads(count: int, body: Any, rounds: int, timeout: float = 300.0) -> dict[tuple[int, int], Any]:
    """``body(k, r)`` for ``r`` in ``range(rounds)`` on each of ``count`` threads started together (a barrier);
    returns ``{(k, r): result}``. Fails when a thread is still running after ``timeout`` seconds (a deadlock)
    or any call raised."""
    import threading

    results: dict[tuple[int, int], Any] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(count)

    def work(k: int) -> None:
        try:
            barrier.wait()
            for r in range(rounds):
                results[(k, r)] = body(k, r)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), "deadlock"
    assert not errors, errors
    return results


def training_step(model: Any, opt: Any, loss_fn: Any) -> Any:
    """``step(x, y) -> loss``: zero the gradients, forward ``model``, ``loss_fn(out, y)``, backward, update."""
    def step(x: Any, y: Any) -> Any:
        opt.zero_grad()
        out = loss_fn(model(x), y)
        out.backward()
        opt.step()
        return out
    return step


def square_loss_step(model: Any, opt: Any) -> Any:
    """``step(x) -> loss``: zero the gradients, ``loss = mean(model(x) ** 2)``, backward, update."""
    def step(x: Any) -> Any:
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss
    return step


def assert_optimizer_states_match(params: Any, twin_params: Any, opt: Any, twin_opt: Any, where: str) -> None:
    """An optimizer's state equals its twin's, parameter by parameter (``params`` and ``twin_params`` in the
    same order): the same parameters have state, with the same entries, each equal to float32 rounding (rtol
    1e-4, atol 1e-6: a compiled step's fused kernels round differently from the eager ones in the last bits,
    which Adam-like divisions amplify). ``where`` names the step in the failure message."""
    for p, q in zip(params, twin_params):
        assert (p in opt.state) == (q in twin_opt.state), where
        if q not in twin_opt.state:
            continue
        assert set(opt.state[p]) == set(twin_opt.state[q]), where
        for key, value in twin_opt.state[q].items():
            np.testing.assert_allclose(np.asarray(opt.state[p][key]), np.asarray(value), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{where}: {key}")


def train_compiled_against_eager_twin(model: Any, twin: Any, opt: Any, twin_opt: Any, *, steps: int,
                                      shape: tuple[int, ...], seed: int, before: Any = None,
                                      after: Any = None) -> Any:
    """Run a training step (``zero_grad``, the squared mean of the model's output, ``backward``, ``opt.step()``)
    compiled with ``tp.compile`` on ``model``/``opt`` and eagerly on its twin, on the same ``steps`` float32
    inputs of ``shape`` (numpy's generator seeded with ``seed``). ``before(i)`` runs before step ``i`` (to
    change hyperparameters of both optimizers), ``after(i)`` after it. Every step's loss, and the parameters
    at the end, agree to float32 rounding (rtol 1e-4; parameters atol 1e-6). Returns the compiled step, for
    its ``compile_count`` and ``recompile_reasons``."""
    import tensorplay as tp

    compiled = tp.compile(square_loss_step(model, opt))
    gen = np.random.default_rng(seed)
    for i in range(steps):
        if before is not None:
            before(i)
        x = tp.tensor(gen.standard_normal(shape).astype(np.float32))
        twin_opt.zero_grad()
        expected = twin(x).square().mean()
        expected.backward()
        twin_opt.step()
        # fused kernels vs eager: float32 rounding differs in the last bits, which Adam-like divisions amplify
        np.testing.assert_allclose(compiled(x).item(), expected.item(), rtol=1e-4, err_msg=f"step {i}")
        if after is not None:
            after(i)
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)
    return compiled
