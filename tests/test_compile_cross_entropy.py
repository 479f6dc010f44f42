"""``nn.functional.cross_entropy`` of class indices in a compiled function (with its reverse sweep in a
compiled training step, or alone) is one row-kernel call where the recorded form is a dozen numpy calls:
loss and gradients agree with eager and PyTorch in float32 and float64, with ignored targets, every target
ignored, NaN and inf logits, strided logits, and an out-of-range target is still named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.errors import TensorplayError
from tests.helpers import compiled_source


def _tol(dtype: str) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-13}


def _case(m: int, c: int, dtype: str, kind: str, ignore: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(m * 100 + c)
    x = (rng.standard_normal((m, c)) * 3).astype(dtype)
    t = rng.integers(0, c, m).astype(np.int64)
    if kind in ("ignored", "special"):
        t[::3] = ignore
    if kind == "all-ignored":
        t[:] = ignore
    if kind == "special" and m >= 5 and c >= 3:
        x[1, 2] = np.nan   # a counted row (target not ignored: 1 % 3 != 0)
        x[2, 0] = np.inf
        x[3, :] = -np.inf  # an ignored row (3 % 3 == 0): no loss, but NaN in its gradient as recorded
        x[4, 1] = -np.inf
    return x, t


KINDS = ["plain", "ignored", "all-ignored", "special"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,c", [(7, 13), (1, 1), (33, 5)])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("strided", [False, True])
def test_a_compiled_training_step_matches_eager_and_pytorch(dtype: str, m: int, c: int, kind: str,
                                                             strided: bool) -> None:
    ignore = -100 if kind != "ignored" else 2 % c
    x_np, t_np = _case(m, c, dtype, kind, ignore)
    if kind == "ignored" and ignore >= 0:
        t_np[::3] = ignore
    data = np.ascontiguousarray(x_np.T) if strided else x_np

    def loss_of(x: Any, t: Any) -> Any:
        return F.cross_entropy(x.T if strided else x, t, ignore_index=ignore)

    w = tp.tensor(data, requires_grad=True)

    def step(t: Any) -> Any:
        w.grad = None
        loss = loss_of(w, t)
        loss.backward()
        return loss

    compiled = tp.compile(step)
    got = compiled(tp.tensor(t_np))
    assert "_rt.cross_entropy_step(" in compiled_source(compiled) and "log_softmax" not in compiled_source(compiled)
    assert w.grad is not None
    got_grad = w.grad.numpy().copy()

    e = tp.tensor(data, requires_grad=True)
    expected = loss_of(e, tp.tensor(t_np))
    expected.backward()
    tx = torch.tensor(data, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(tx.T if strided else tx, torch.tensor(t_np), ignore_index=ignore)
    tloss.backward()
    assert e.grad is not None and tx.grad is not None
    np.testing.assert_allclose(got.item(), tloss.item(), **_tol(dtype))
    np.testing.assert_allclose(expected.item(), tloss.item(), **_tol(dtype))
    if kind != "special":  # PyTorch's ignored rows get exact zeros even for -inf logits; ours follow the recorded form
        np.testing.assert_allclose(got_grad, tx.grad.numpy(), **_tol(dtype))
    np.testing.assert_allclose(got_grad, e.grad.numpy(), **_tol(dtype))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_loss_alone_is_one_call(dtype: str) -> None:
    x_np, t_np = _case(9, 4, dtype, "ignored", -100)
    compiled = tp.compile(lambda x, t: F.cross_entropy(x, t))
    got = compiled(tp.tensor(x_np), tp.tensor(t_np))
    assert "_rt.cross_entropy(" in compiled_source(compiled) and "log_softmax" not in compiled_source(compiled)
    expected = torch.nn.functional.cross_entropy(torch.tensor(x_np), torch.tensor(t_np))
    np.testing.assert_allclose(got.item(), expected.item(), **_tol(dtype))


def test_an_out_of_range_target_is_still_named() -> None:
    x_np, t_np = _case(5, 4, "float32", "plain", -100)
    compiled = tp.compile(lambda x, t: F.cross_entropy(x, t))
    compiled(tp.tensor(x_np), tp.tensor(t_np))
    t_np[3] = 4
    with pytest.raises(TensorplayError, match="cross_entropy: target"):
        compiled(tp.tensor(x_np), tp.tensor(t_np))


def test_other_losses_built_from_the_same_primitives_are_left_alone() -> None:
    """The matcher checks the offsets and the mask: a weighted loss and a sum are recorded differently and run
    as recorded (and stay right)."""
    x_np, t_np = _case(6, 3, "float64", "ignored", -100)
    weight = np.array([0.5, 2.0, 1.0])
    for kwargs in ({"weight": weight}, {"reduction": "sum"}, {"label_smoothing": 0.1}):
        def fn(x: Any, t: Any, kwargs: dict[str, Any] = kwargs) -> Any:
            extra = {k: tp.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
            return F.cross_entropy(x, t, **extra)

        compiled = tp.compile(fn)
        got = compiled(tp.tensor(x_np), tp.tensor(t_np))
        assert "_rt.cross_entropy(" not in compiled_source(compiled), kwargs
        textra = {k: torch.tensor(v) if k == "weight" else v for k, v in kwargs.items()}
        expected = torch.nn.functional.cross_entropy(torch.tensor(x_np), torch.tensor(t_np), **textra)
        np.testing.assert_allclose(got.item(), expected.item(), rtol=1e-12, err_msg=str(kwargs))


# ---- the one-call form: the bias add, the range check and the bias's gradient taken in ----------------------

def _linear_case(m: int, c: int, k: int, dtype: str, kind: str, ignore: int) -> tuple[Any, ...]:
    rng = np.random.default_rng(m * 1000 + c * 10 + k)
    x = rng.standard_normal((m, k)).astype(dtype)
    w = (rng.standard_normal((c, k)) / np.sqrt(k)).astype(dtype)
    b = rng.standard_normal(c).astype(dtype)
    _, t = _case(m, c, dtype, kind, ignore)
    if kind == "special" and m >= 5 and c >= 3:
        x[1, 0] = np.nan  # NaN and inf reach the logits through the product
        x[2, 0] = np.inf
    return x, w, b, t


def _linear_step(w: Any, b: Any, squared: bool = False) -> Any:
    """A training step of ``cross_entropy(linear(x, w, b), t)`` (of its square with ``squared``)."""
    def step(x: Any, t: Any) -> Any:
        w.grad = None
        b.grad = None
        loss = F.cross_entropy(F.linear(x, w, b), t)
        (loss * loss if squared else loss).backward()
        return loss
    return step


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,c,k", [(7, 13, 5), (1, 1, 3), (33, 5, 17)])
@pytest.mark.parametrize("kind", KINDS)
def test_a_linear_layer_with_cross_entropy_is_one_call_with_its_bias_and_bias_gradient(
        dtype: str, m: int, c: int, k: int, kind: str) -> None:
    """``F.linear`` into ``cross_entropy``: one call takes the bias add, the target's range check, the loss,
    ``dx`` and the bias's gradient; the weight's and bias's gradients agree with eager and PyTorch."""
    x_np, w_np, b_np, t_np = _linear_case(m, c, k, dtype, kind, -100)
    w, b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    compiled = tp.compile(_linear_step(w, b))
    got = compiled(tp.tensor(x_np), tp.tensor(t_np))
    source = compiled_source(compiled)
    call = next(line for line in source.splitlines() if "_rt.cross_entropy_step(" in line)
    assert ", None, " not in call and call.rstrip().endswith("True)"), call  # a bias read, its gradient given
    assert "what=" not in source and "sum_leading" not in source and source.count("_rt.cross_entropy") == 1
    assert w.grad is not None and b.grad is not None

    e_w, e_b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    want = _linear_step(e_w, e_b)(tp.tensor(x_np), tp.tensor(t_np))
    assert e_w.grad is not None and e_b.grad is not None
    tw, tb = torch.tensor(w_np, requires_grad=True), torch.tensor(b_np, requires_grad=True)
    tloss = torch.nn.functional.cross_entropy(torch.nn.functional.linear(torch.tensor(x_np), tw, tb),
                                              torch.tensor(t_np))
    tloss.backward()
    assert tw.grad is not None and tb.grad is not None
    np.testing.assert_allclose(got.item(), want.item(), **_tol(dtype))
    np.testing.assert_allclose(got.item(), tloss.item(), **_tol(dtype))
    np.testing.assert_allclose(w.grad.numpy(), e_w.grad.numpy(), **_tol(dtype))
    np.testing.assert_allclose(b.grad.numpy(), e_b.grad.numpy(), **_tol(dtype))
    if kind != "special":  # PyTorch's ignored rows get exact zeros even where the recorded form has NaN
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), **_tol(dtype))
        np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), **_tol(dtype))


def test_a_seed_computed_after_the_loss_keeps_two_calls() -> None:
    """``(loss * loss).backward()``: the loss's cotangent is computed from the loss, so ``dx`` is its own
    call where the gradient is (and the bias add and the check run as recorded); results as eager's."""
    x_np, w_np, b_np, t_np = _linear_case(9, 4, 3, "float64", "ignored", -100)
    w, b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    compiled = tp.compile(_linear_step(w, b, squared=True))
    got = compiled(tp.tensor(x_np), tp.tensor(t_np))
    source = compiled_source(compiled)
    assert "_rt.cross_entropy(" in source and "_rt.cross_entropy_grad(" in source
    assert "_rt.cross_entropy_step(" not in source
    e_w, e_b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    want = _linear_step(e_w, e_b, squared=True)(tp.tensor(x_np), tp.tensor(t_np))
    assert w.grad is not None and b.grad is not None and e_w.grad is not None and e_b.grad is not None
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), e_w.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(b.grad.numpy(), e_b.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_logits_read_elsewhere_keep_their_bias_add() -> None:
    """The step also returns the logits: the add that makes them is not taken in (they are computed as
    recorded and the call reads them); every result still agrees with eager."""
    x_np, w_np, b_np, t_np = _linear_case(6, 5, 4, "float64", "plain", -100)

    def make(w: Any, b: Any) -> Any:
        def step(x: Any, t: Any) -> Any:
            w.grad = None
            b.grad = None
            logits = F.linear(x, w, b)
            loss = F.cross_entropy(logits, t)
            loss.backward()
            return loss, logits.detach()
        return step

    w, b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    compiled = tp.compile(make(w, b))
    got_loss, got_logits = compiled(tp.tensor(x_np), tp.tensor(t_np))
    call = next(line for line in compiled_source(compiled).splitlines() if "_rt.cross_entropy_step(" in line)
    assert ", None, " in call, call  # no bias: the logits themselves are read
    e_w, e_b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    want_loss, want_logits = make(e_w, e_b)(tp.tensor(x_np), tp.tensor(t_np))
    assert b.grad is not None and e_b.grad is not None and w.grad is not None and e_w.grad is not None
    np.testing.assert_allclose(got_loss.item(), want_loss.item(), rtol=1e-12)
    np.testing.assert_allclose(got_logits.numpy(), want_logits.numpy(), rtol=1e-14)
    np.testing.assert_allclose(b.grad.numpy(), e_b.grad.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(w.grad.numpy(), e_w.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("bad", [5, -1, -7])
def test_the_taken_in_range_check_raises_what_the_recorded_one_raised(bad: int) -> None:
    """An out-of-range target in a compiled training step raises eager's error, word for word, and nothing
    is written back (the weights' gradients stay as the last good step left them)."""
    x_np, w_np, b_np, t_np = _linear_case(8, 5, 3, "float32", "ignored", -100)
    w, b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    compiled = tp.compile(_linear_step(w, b))
    compiled(tp.tensor(x_np), tp.tensor(t_np))
    assert "what=" not in compiled_source(compiled)
    assert b.grad is not None
    kept = b.grad.numpy().copy()
    t_bad = t_np.copy()
    t_bad[4] = bad
    e_w, e_b = tp.tensor(w_np, requires_grad=True), tp.tensor(b_np, requires_grad=True)
    with pytest.raises(TensorplayError) as eager_error:
        _linear_step(e_w, e_b)(tp.tensor(x_np), tp.tensor(t_bad))
    with pytest.raises(TensorplayError) as compiled_error:
        compiled(tp.tensor(x_np), tp.tensor(t_bad))
    assert type(compiled_error.value) is type(eager_error.value)
    assert str(compiled_error.value) == str(eager_error.value)
    assert f"target {bad} at position [4]" in str(compiled_error.value)
    np.testing.assert_array_equal(b.grad.numpy(), kept)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n,c", [(0, 3), (1, 1), (5, 4), (40, 7)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_the_step_call_against_a_numpy_reference(dtype: str, n: int, c: int, with_bias: bool) -> None:
    """:func:`runtime.cross_entropy_step` on strided inputs, with ignored rows, against the mean negative
    log-likelihood, its gradient and the gradient's row sums written out in float64 numpy; no input changes."""
    from tensorplay.compiler.numba_backend import runtime

    rng = np.random.default_rng(n * 10 + c)
    z = np.asfortranarray(rng.standard_normal((n, c)) * 2).astype(dtype)  # a column-major operand
    bias = rng.standard_normal(2 * c).astype(dtype)[::2] if with_bias else None  # a strided one
    t = rng.integers(0, c, n).astype(np.int64)
    t[::4] = -100
    inputs = [a.copy() for a in (z, t) + ((bias,) if bias is not None else ())]
    with np.errstate(all="ignore"):  # as the generated code runs it (no rows counted: 0 / 0)
        loss, dx, db = runtime.cross_entropy_step(z, bias, t, -100, np.asarray(2.0, dtype), None, True)
    logits = z.astype(np.float64) + (0.0 if bias is None else bias.astype(np.float64))
    shifted = logits - logits.max(axis=1, keepdims=True) if n else logits
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    kept = t != -100
    count = int(kept.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        want_loss = -logp[kept, t[kept]].sum() / count
        onehot = np.zeros((n, c))
        onehot[np.nonzero(kept)[0], t[kept]] = 1.0
        probs = np.exp(logp)  # counted rows: seed / count * (softmax - onehot); ignored ones: zeros
        want_dx = np.where(kept[:, None], np.float64(2.0) / count * (probs - onehot), 0.0 - probs * 0.0)
    tol = _tol(dtype)
    assert loss.dtype == dx.dtype == np.dtype(dtype) and db is not None and db.dtype == np.dtype(dtype)
    np.testing.assert_allclose(loss, want_loss, **tol)
    np.testing.assert_allclose(dx, want_dx, **tol)
    np.testing.assert_allclose(db, want_dx.sum(axis=0), **tol)
    for before, after in zip(inputs, [z, t] + ([bias] if bias is not None else [])):
        np.testing.assert_array_equal(before, after)


def test_compiled_transforms_of_a_linear_cross_entropy_match_eager() -> None:
    """``tp.compile`` of ``grad_and_value`` (the one-call form), of ``grad`` and of ``vmap(grad(...))``
    (per-sample gradients, every sample's own values) of a linear layer's cross-entropy, with ignored rows,
    against the same transforms run eagerly."""
    import tensorplay.func as T

    x_np, w_np, b_np, t_np = _linear_case(12, 5, 4, "float64", "ignored", -100)
    x, t = tp.tensor(x_np), tp.tensor(t_np)

    def loss(w: Any, b: Any, xb: Any, tb: Any) -> Any:
        return F.cross_entropy(F.linear(xb, w, b), tb)

    with_value = T.grad_and_value(loss, argnums=(0, 1))
    compiled = tp.compile(with_value)
    (got_w, got_b), got_loss = compiled(tp.tensor(w_np), tp.tensor(b_np), x, t)
    assert "_rt.cross_entropy_step(" in compiled_source(compiled)
    (want_w, want_b), want_loss = with_value(tp.tensor(w_np), tp.tensor(b_np), x, t)
    for g, e in ((got_w, want_w), (got_b, want_b), (got_loss, want_loss)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-14)
    grad = tp.compile(T.grad(loss, argnums=(0, 1)))  # without the loss value: still the one call
    for g, e in zip(grad(tp.tensor(w_np), tp.tensor(b_np), x, t), (want_w, want_b)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-14)
    assert "_rt.cross_entropy_step(" in compiled_source(grad)

    def one(w: Any, b: Any, xs: Any, ts: Any) -> Any:
        return loss(w, b, xs[None], ts[None])

    per_sample = T.vmap(T.grad(one, argnums=(0, 1)), in_dims=(None, None, 0, 0))
    got_ps = tp.compile(per_sample)(tp.tensor(w_np), tp.tensor(b_np), x, t)
    want_ps = per_sample(tp.tensor(w_np), tp.tensor(b_np), x, t)
    for g, e in zip(got_ps, want_ps):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-14)
    rows = got_ps[1].numpy()
    assert not np.allclose(rows[1], rows[2])  # samples differ
    np.testing.assert_array_equal(rows[t_np == -100], 0.0)  # an ignored sample has no gradient


# ---- a reverse sweep whose loss nothing reads: ``tp.compile(grad(f))`` ------------------------------------

def _grad_source_and_values(loss: Any, *args: Any, dynamic: bool = False) -> tuple[str, list[Any], list[Any]]:
    """``tp.compile(grad(loss))`` and eager ``grad(loss)`` of ``args`` (the gradients of every argument but
    the last two, the data): the generated source and both results as numpy arrays."""
    import tensorplay.func as T

    argnums = tuple(range(len(args) - 2))
    compiled = tp.compile(T.grad(loss, argnums=argnums), dynamic=dynamic)
    got = [g.numpy() for g in compiled(*args)]
    want = [g.numpy() for g in T.grad(loss, argnums=argnums)(*args)]
    return compiled_source(compiled), got, want


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,c,k", [(7, 13, 5), (1, 1, 3), (33, 5, 17)])
@pytest.mark.parametrize("kind", KINDS)
def test_a_compiled_gradient_without_the_loss_is_one_call(dtype: str, m: int, c: int, k: int, kind: str) -> None:
    """``tp.compile(grad(f))`` of a linear layer's cross-entropy: the loss itself is dead code, and the reverse
    sweep left is the one call (with the bias add, the range check and the bias's gradient); the gradients
    agree with eager ``grad`` and with PyTorch."""
    x_np, w_np, b_np, t_np = _linear_case(m, c, k, dtype, kind, -100)

    def loss(w: Any, b: Any, x: Any, t: Any) -> Any:
        return F.cross_entropy(F.linear(x, w, b), t)

    source, got, want = _grad_source_and_values(loss, *(tp.tensor(a) for a in (w_np, b_np, x_np, t_np)))
    call = next(line for line in source.splitlines() if "_rt.cross_entropy_step(" in line)
    assert call.lstrip().startswith("_, ") and call.rstrip().endswith("True)"), call  # no loss; dbias given
    assert "what=" not in source and "sum_leading" not in source and "np.where" not in source
    tw, tb = torch.tensor(w_np, requires_grad=True), torch.tensor(b_np, requires_grad=True)
    torch.nn.functional.cross_entropy(torch.nn.functional.linear(torch.tensor(x_np), tw, tb),
                                      torch.tensor(t_np)).backward()
    assert tw.grad is not None and tb.grad is not None
    for g, e, t in zip(got, want, (tw.grad.numpy(), tb.grad.numpy())):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_allclose(g, e, **_tol(dtype))
        if kind != "special":  # PyTorch's ignored rows get exact zeros even where the recorded form has NaN
            np.testing.assert_allclose(g, t, **_tol(dtype))


def test_a_computed_seed_without_the_loss_is_one_call() -> None:
    """``grad`` of ``scale * cross_entropy(...) + (w * w).sum()`` (``scale`` an argument): the loss's cotangent
    is computed in the graph, and without the loss the call still goes where ``dx`` is; every gradient agrees
    with eager's, the scale's included (it reads the loss, which then stays two calls)."""
    x_np, w_np, b_np, t_np = _linear_case(10, 4, 6, "float64", "ignored", -100)

    def loss(w: Any, b: Any, scale: Any, x: Any, t: Any) -> Any:
        return scale * F.cross_entropy(F.linear(x, w, b), t) + (w * w).sum()

    args = [tp.tensor(a) for a in (w_np, b_np, np.array(2.5), x_np, t_np)]
    import tensorplay.func as T

    compiled = tp.compile(T.grad(loss, argnums=(0, 1)))
    got = compiled(*args)
    assert "_rt.cross_entropy_step(" in compiled_source(compiled)
    for g, e in zip(got, T.grad(loss, argnums=(0, 1))(*args)):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-12, atol=1e-14)
    source, every, want = _grad_source_and_values(loss, *args)  # the scale's gradient is the loss itself
    assert "_rt.cross_entropy(" in source and "_rt.cross_entropy_step(" not in source
    for g, e in zip(every, want):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)


def test_a_dynamic_batch_gradient_without_the_loss_is_one_call() -> None:
    """``tp.compile(grad(f))`` called at a second batch size compiles once more with the batch symbolic: the
    row offsets and the zeros are then computed from the bound size and still match; three batch sizes (one
    with every row ignored) agree with eager."""
    import tensorplay.func as T

    def loss(w: Any, b: Any, x: Any, t: Any) -> Any:
        return F.cross_entropy(F.linear(x, w, b), t)

    grad = T.grad(loss, argnums=(0, 1))
    compiled = tp.compile(grad)
    for m, kind in ((9, "ignored"), (4, "all-ignored"), (17, "plain")):
        x_np, w_np, b_np, t_np = _linear_case(m, 3, 5, "float32", kind, -100)
        args = [tp.tensor(a) for a in (w_np, b_np, x_np, t_np)]
        for g, e in zip(compiled(*args), grad(*args)):
            np.testing.assert_allclose(g.numpy(), e.numpy(), **_tol("float32"))
    assert compiled.compile_count == 2, compiled.recompile_reasons  # static, then with the batch symbolic
    source = compiled_source(compiled)
    assert "_rt.cross_entropy_step(" in source and "_s_x_0" in source, source
