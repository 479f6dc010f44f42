"""Sizes used as values stay symbolic under a dynamic dim, as in ``torch.export``: factories of a symbolic
size (``arange``, ``zeros``, ``ones``, ``full``, ``empty``, ``eye``, ``tril``/``triu`` of them), slicing a
static axis by a symbolic size (``weight[:T]``), ``view``/``reshape`` with symbolic sizes and causal
attention record once and run at every size: each is exported with a dynamic dim (saved and loaded) and
compiled with ``dynamic=True`` (one specialization), and compared with eager at several sizes, 1 included.
What cannot stay symbolic says which call needs the value, at the user's line, and never leaks a
``TypeError``."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.export import Dim, export
from tensorplay.export.errors import ConstraintViolationError
from benchmarks.bench_training import _block_classes
from tests.export_helpers import as_array, round_trip

AnyTensor = tp.Tensor[*tuple[Any, ...]]
MAX = 32
SEQ = Dim("seq", min=1, max=MAX)
BATCH = Dim("batch", min=1, max=4)
SIZES = (6, 1, 7, MAX)  # the first is the example's; 1 is an ordinary size
RNG = np.random.default_rng(0)
WEIGHT = tp.tensor(RNG.standard_normal((MAX, 4)).astype(np.float32))
tp.manual_seed(0)
MHA = nn.MultiheadAttention(8, 2, batch_first=True).eval()


class _PositionParameter(nn.Module):
    """GPT-style learned positions: a ``[1, MAX, 8]`` parameter sliced to the input's length."""

    def __init__(self) -> None:
        super().__init__()
        self.pe = nn.Parameter(tp.tensor(RNG.standard_normal((1, MAX, 8)).astype(np.float32)))

    def forward(self, x: AnyTensor) -> AnyTensor:
        return x + self.pe[:, :x.shape[1]]


def _heads(x: AnyTensor) -> AnyTensor:
    b, t, _ = x.shape
    return x.view(b, t, 2, 4).transpose(1, 2)


def _sinusoidal(x: AnyTensor) -> AnyTensor:
    """Positional encodings computed in the forward for the input's length (written into a zeros tensor)."""
    t, d = x.shape
    pe = tp.zeros(t, d)
    position = tp.arange(t, dtype=tp.float32)[:, None]
    freq = tp.exp(tp.arange(0, d, 2, dtype=tp.float32) * (-math.log(10000.0) / d))
    pe[:, 0::2] = tp.sin(position * freq)
    pe[:, 1::2] = tp.cos(position * freq)
    return x + pe


def _writes(x: AnyTensor) -> AnyTensor:
    y = x.clone()
    y[:, :2] = 0.0
    y[0] = 1.0
    y[-1] = x[0] * 2
    y[1:, 5] = x[:-1, 6]
    y[..., 3] = -1.0
    return y


# name -> (function, shape of the input at size n, the input's dynamic axes)
Case = tuple[Callable[[AnyTensor], AnyTensor], Callable[[int], tuple[int, ...]], dict[int, Dim]]
SQUARE: dict[int, Dim] = {0: SEQ, 1: SEQ}
CASES: dict[str, Case] = {
    "arange": (lambda x: x + tp.arange(x.shape[1]), lambda n: (3, n), {1: SEQ}),
    "arange_start_float_dtype": (lambda x: x * tp.arange(1, x.shape[1] + 1, dtype=tp.float32),
                                 lambda n: (3, n), {1: SEQ}),
    "arange_negative_step": (lambda x: x + tp.arange(2 * x.shape[1], 0, -2), lambda n: (3, n), {1: SEQ}),
    "arange_step": (lambda x: x[:, ::2] * tp.arange(0, x.shape[1], 2), lambda n: (3, n), {1: SEQ}),
    "arange_from_negative_size": (lambda x: x + tp.arange(-x.shape[1], 0), lambda n: (3, n), {1: SEQ}),
    "zeros": (lambda x: x + tp.zeros(x.shape[1]), lambda n: (3, n), {1: SEQ}),
    "zeros_tuple": (lambda x: x + tp.zeros((x.shape[0], x.shape[1])), lambda n: (3, n), {1: SEQ}),
    "ones": (lambda x: x @ tp.ones(x.shape[1], x.shape[1]), lambda n: (n, n), SQUARE),
    "ones_list_float64": (lambda x: x + tp.ones([x.shape[0], x.shape[1]], dtype=tp.float64),
                          lambda n: (3, n), {1: SEQ}),
    "full": (lambda x: x + tp.full((x.shape[1],), 2.5), lambda n: (3, n), {1: SEQ}),
    "full_of_the_size": (lambda x: x * tp.full((1,), x.shape[1]), lambda n: (3, n), {1: SEQ}),
    "empty": (lambda x: x + tp.empty(x.shape[1]).zero_(), lambda n: (3, n), {1: SEQ}),
    "eye": (lambda x: x @ tp.eye(x.shape[1]) + tp.eye(x.shape[0], 2 * x.shape[1])[:, ::2],
            lambda n: (n, n), SQUARE),
    "triu_bool_mask": (lambda x: x.masked_fill(tp.triu(tp.ones(x.shape[1], x.shape[1], dtype=tp.bool), 1), 0.0),
                       lambda n: (n, n), SQUARE),
    "tril": (lambda x: x * tp.tril(tp.ones(x.shape[1], x.shape[1])), lambda n: (n, n), SQUARE),
    "triu_of_full_inf": (lambda x: (x + tp.triu(tp.full((x.shape[1], x.shape[1]), float("-inf")), 1)).softmax(-1),
                         lambda n: (n, n), SQUARE),
    "slice_static_axis": (lambda x: x[:, :4] + WEIGHT[:x.shape[0]], lambda n: (n, 5), {0: SEQ}),
    "slice_from_symbolic": (lambda x: x + WEIGHT[MAX - x.shape[0]:], lambda n: (n, 4), {0: SEQ}),
    "slice_negative_symbolic": (lambda x: x + WEIGHT[-x.shape[0]:], lambda n: (n, 4), {0: SEQ}),
    "slice_parameter": (_PositionParameter(), lambda n: (2, n, 8), {1: SEQ}),
    "view": (lambda x: x.view(x.shape[0] * x.shape[1]), lambda n: (3, n), {1: SEQ}),
    "view_minus_one": (lambda x: x.reshape(-1).view(x.shape[1], 3), lambda n: (3, n), {1: SEQ}),
    "reshape": (lambda x: x.reshape(x.shape[1], x.shape[0]), lambda n: (3, n), {1: SEQ}),
    "view_heads": (lambda x: _heads(x).reshape(x.shape[0], 2, -1), lambda n: (2, n, 8), {1: SEQ}),
    "view_minus_one_inexact_symbolic": (lambda x: x.view(x.shape[0], -1, 2), lambda n: (n, 4), {0: SEQ}),
    "expand": (lambda x: x[:1].expand(x.shape[0], -1) + x, lambda n: (n, 4), {0: SEQ}),
    "flatten": (lambda x: x[None].expand(2, -1, -1).flatten(0, 1), lambda n: (n, 4), {0: SEQ}),
    "split_whole_axis_and_sections": (lambda x: x.split(x.shape[0], 0)[0] * x.split([1, x.shape[0] - 1])[0],
                                      lambda n: (n, 4), {0: SEQ}),
    "setitem_sinusoidal_positions": (_sinusoidal, lambda n: (n, 8), {0: SEQ}),
    "setitem_rows_columns_and_ellipsis": (_writes, lambda n: (n, 8), {0: SEQ}),
    "sdpa_causal": (lambda x: F.scaled_dot_product_attention(x[None], x[None], x[None], is_causal=True),
                    lambda n: (n, 8), {0: SEQ}),
    "sdpa_causal_heads": (lambda x: F.scaled_dot_product_attention(_heads(x), _heads(x), _heads(x), is_causal=True),
                          lambda n: (2, n, 8), {0: BATCH, 1: SEQ}),
    "mha_is_causal": (lambda x: MHA(x, x, x, is_causal=True, need_weights=False)[0], lambda n: (2, n, 8),
                      {0: BATCH, 1: SEQ}),
    "mha_is_causal_with_weights": (lambda x: MHA(x, is_causal=True)[1], lambda n: (2, n, 8), {0: BATCH, 1: SEQ}),
    "mha_triu_mask": (lambda x: MHA(x, x, x, attn_mask=tp.triu(tp.ones(x.shape[1], x.shape[1], dtype=tp.bool), 1),
                                    need_weights=False)[0], lambda n: (2, n, 8), {0: BATCH, 1: SEQ}),
    "mha_float_mask": (lambda x: MHA(x, attn_mask=tp.triu(tp.full((x.shape[1], x.shape[1]), float("-inf")), 1))[0],
                       lambda n: (2, n, 8), {0: BATCH, 1: SEQ}),
}


def _input(shape: tuple[int, ...], seed: int) -> AnyTensor:
    return tp.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _check_sizes(run: Callable[[AnyTensor], AnyTensor], fn: Callable[[AnyTensor], AnyTensor],
                 shape: Callable[[int], tuple[int, ...]], what: str) -> None:
    for n in SIZES:
        x = _input(shape(n), n)
        got, expected = as_array(run(x)), as_array(fn(x))
        assert got.shape == expected.shape and got.dtype == expected.dtype, (what, n, got.shape, expected.shape)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=f"{what} at size {n}")


@pytest.mark.parametrize("name", list(CASES))
def test_exported_with_a_dynamic_dim_matches_eager_at_every_size(name: str) -> None:
    fn, shape, dims = CASES[name]
    ep = export(fn, (_input(shape(SIZES[0]), 0),), dynamic_shapes=[dims])
    assert f"seq: [1, {MAX}]" in str(ep.range_constraints)  # seq stayed dynamic
    _check_sizes(round_trip(ep).module(), fn, shape, name)


@pytest.mark.parametrize("backend", ["eager", "numba"])
@pytest.mark.parametrize("name", list(CASES))
def test_compiled_with_dynamic_shapes_matches_eager_at_every_size_without_recompiling(name: str, backend: str) -> None:
    fn, shape, _ = CASES[name]
    compiled = tp.compile(fn, dynamic=True, backend=backend)
    _check_sizes(compiled, fn, shape, name)
    assert compiled.compile_count == 1, f"{name}: a size was specialised"


def test_slicing_past_a_static_axis_becomes_a_bound_on_the_dim() -> None:
    """``WEIGHT[:T]`` with ``T`` declared up to 64 but ``WEIGHT`` of 32 rows: the program needs ``T <= 32``,
    which export reports with the fix (as ``torch.export`` does), not a specialisation."""
    def fn(x: AnyTensor) -> AnyTensor:
        return x + WEIGHT[:x.shape[0]]

    with pytest.raises(ConstraintViolationError, match=r"the program requires seq <= 32") as info:
        export(fn, (_input((5, 4), 0),), dynamic_shapes=[{0: Dim("seq", min=1, max=64)}])
    assert '"kind": "set_max", "dim": "seq", "value": 32' in str(info.value)


def test_an_index_input_slices_a_parameter_by_its_length() -> None:
    """``emb(idx) + pos.weight[:idx.shape[1]]`` with ``idx`` a bounded ``Index`` input of dynamic shape."""
    emb, pos = nn.Embedding(10, 4), nn.Embedding(16, 4)

    def fn(idx: AnyTensor) -> AnyTensor:
        return emb(idx) + pos.weight[:idx.shape[1]]  # type: ignore[no-any-return]

    def ids(b: int, t: int) -> AnyTensor:
        return tp.index(np.random.default_rng(t).integers(0, 10, (b, t)), 10)

    ep = round_trip(export(fn, (ids(2, 5),), dynamic_shapes=[{0: Dim("b", min=1, max=4),
                                                                1: Dim("seq", min=1, max=16)}]))
    compiled = tp.compile(fn, dynamic=True)
    for b, t in ((2, 5), (1, 1), (3, 7), (4, 16)):
        expected = as_array(fn(ids(b, t)))
        np.testing.assert_allclose(as_array(ep.module()(ids(b, t))), expected, rtol=1e-6)
        np.testing.assert_allclose(as_array(compiled(ids(b, t))), expected, rtol=1e-6)
    assert compiled.compile_count == 1


def test_a_write_between_symbolic_bounds_needs_the_sizes_it_implies() -> None:
    def fn(x: AnyTensor) -> AnyTensor:
        y = x * 1
        y[::3, 1::2] = 7.0
        y[2:x.shape[0] - 1, 0] = tp.arange(x.shape[0] - 3, dtype=tp.float32)
        return y

    with pytest.raises(ConstraintViolationError, match=r"the program requires seq >= 3"):
        export(fn, (_input((6, 8), 0),), dynamic_shapes=[{0: SEQ}])
    ep = round_trip(export(fn, (_input((6, 8), 0),), dynamic_shapes=[{0: Dim("seq", min=3, max=MAX)}]))
    compiled = tp.compile(fn, dynamic=True)
    for n in (6, 3, 7, MAX):
        x = _input((n, 8), n)
        np.testing.assert_allclose(as_array(ep.module()(x)), as_array(fn(x)), err_msg=f"size {n}")
        np.testing.assert_allclose(as_array(compiled(x)), as_array(fn(x)), err_msg=f"size {n}")
    assert compiled.compile_count == 1


def test_gradients_of_a_symbolic_write_match_pytorch() -> None:
    compiled = tp.compile(lambda x, v: (_writes(x) * v).sum(), dynamic=True)
    for n in (6, 1, 7):
        x = _input((n, 8), n).requires_grad_(True)
        v = _input((n, 8), 100 + n)
        compiled(x, v).backward()
        tx = torch.tensor(as_array(x), requires_grad=True)
        y = tx.clone()
        y[:, :2] = 0.0
        y[0] = 1.0
        y[-1] = tx[0] * 2
        y[1:, 5] = tx[:-1, 6]
        y[..., 3] = -1.0
        (y * torch.from_numpy(as_array(v))).sum().backward()
        assert x.grad is not None and tx.grad is not None
        np.testing.assert_allclose(as_array(x.grad), tx.grad.numpy(), rtol=1e-6, err_msg=f"size {n}")
    assert compiled.compile_count == 1


def test_an_exported_gradient_through_a_symbolic_slice_saves_loads_and_matches_pytorch() -> None:
    import tensorplay.func as TF

    def grad_of_weight(x: AnyTensor, w: AnyTensor) -> AnyTensor:
        return TF.grad(lambda w: ((x + w[:x.shape[0]]) ** 2).sum())(w)  # type: ignore[no-any-return]

    ep = round_trip(export(grad_of_weight, (_input((5, 4), 0), WEIGHT), dynamic_shapes=[{0: SEQ}, None]))
    for n in (1, 7, MAX):
        x = _input((n, 4), n)
        w = torch.tensor(as_array(WEIGHT), requires_grad=True)
        ((torch.from_numpy(as_array(x)) + w[:n]) ** 2).sum().backward()
        assert w.grad is not None
        np.testing.assert_allclose(as_array(ep.module()(x, WEIGHT)), w.grad.numpy(), rtol=1e-6, err_msg=f"{n}")


def test_gradients_through_a_symbolic_slice_and_positions_match_pytorch() -> None:
    """``pe[:, :T]`` and ``emb(tp.arange(T))`` under a dynamic compile: the backward of the slice pads by
    the symbolic ``MAX - T``; compared with PyTorch at every size."""
    model = _PositionParameter()
    emb = nn.Embedding(MAX, 8)

    def loss(x: AnyTensor) -> AnyTensor:
        t = x.shape[1]
        return ((model(x) + emb(tp.arange(t))) ** 2).sum()

    compiled = tp.compile(loss, dynamic=True)
    for n in SIZES:
        x = _input((2, n, 8), n)
        model.zero_grad()
        emb.zero_grad()
        compiled(x).backward()
        pe = torch.tensor(as_array(model.pe), requires_grad=True)
        table = torch.tensor(as_array(emb.weight), requires_grad=True)
        ((torch.from_numpy(as_array(x)) + pe[:, :n] + table[torch.arange(n)]) ** 2).sum().backward()
        assert model.pe.grad is not None and emb.weight.grad is not None
        assert pe.grad is not None and table.grad is not None
        np.testing.assert_allclose(as_array(model.pe.grad), pe.grad.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(as_array(emb.weight.grad), table.grad.numpy(), rtol=1e-5, atol=1e-5)
    assert compiled.compile_count == 1


# ---- models ---------------------------------------------------------------------------------------------

V, D, HEADS, T_MAX = 17, 16, 2, 24


class _CausalBlock(nn.Module):
    """A pre-norm block whose attention takes a mask."""

    def __init__(self) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.ln2 = nn.LayerNorm(D)
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)

    def forward(self, x: AnyTensor, mask: AnyTensor) -> AnyTensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class CharLM(nn.Module):
    """A character-level LM written the PyTorch way: token and positional embeddings (positions made with
    ``tp.arange(T)``), a ``tp.triu`` causal mask, two blocks, a final LayerNorm and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(T_MAX, D)
        self.blocks = nn.ModuleList([_CausalBlock(), _CausalBlock()])
        self.ln = nn.LayerNorm(D)
        self.head = nn.Linear(D, V)

    def forward(self, idx: AnyTensor) -> AnyTensor:
        _, t = idx.shape
        x = self.tok(idx) + self.pos(tp.arange(t))
        mask = tp.triu(tp.ones(t, t, dtype=tp.bool), 1)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))  # type: ignore[no-any-return]


def _ids(b: int, t: int, seed: int) -> AnyTensor:
    return tp.tensor(np.random.default_rng(seed).integers(0, V, (b, t)))


LM_SHAPES = ((2, 8), (1, 1), (3, 7), (4, T_MAX), (2, 5))


def _lm() -> CharLM:
    tp.manual_seed(4)
    return CharLM().eval()


def test_char_lm_exports_with_dynamic_batch_and_seq_and_matches_eager_after_save_and_load() -> None:
    model = _lm()
    ep = export(model, (_ids(2, 8, 0),), dynamic_shapes={
        "idx": {0: Dim("batch", min=1, max=4), 1: Dim("seq", min=1, max=T_MAX)}})
    loaded = round_trip(ep)
    for b, t in LM_SHAPES:
        x = _ids(b, t, t)
        np.testing.assert_allclose(as_array(loaded.module()(x)), as_array(model(x)), rtol=1e-5, atol=1e-6,
                                   err_msg=f"batch {b}, seq {t}")


def test_char_lm_compiles_once_with_dynamic_shapes_and_its_gradients_match_eager() -> None:
    eager_model, compiled_model = _lm(), _lm()

    def loss(model: CharLM, x: AnyTensor, y: AnyTensor) -> AnyTensor:
        return F.cross_entropy(model(x).view(-1, V), y.view(-1))

    step = tp.compile(lambda x, y: loss(compiled_model, x, y), dynamic=True)
    for b, t in LM_SHAPES[:1] + LM_SHAPES[2:]:  # (1, 1) would tie batch and seq: a recompile by design
        x, y = _ids(b, t, t), _ids(b, t, 100 + t)
        for m in (eager_model, compiled_model):
            m.zero_grad()
        expected = loss(eager_model, x, y)
        expected.backward()
        got = step(x, y)
        got.backward()
        np.testing.assert_allclose(as_array(got), as_array(expected), rtol=1e-5)
        for (name, p), q in zip(compiled_model.named_parameters(), eager_model.parameters()):
            assert p.grad is not None and q.grad is not None, name
            np.testing.assert_allclose(as_array(p.grad), as_array(q.grad), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{name} at batch {b}, seq {t}")
    assert step.compile_count == 1


def _causal_benchmark_block() -> nn.Module:
    """The training benchmark's pre-norm block, its attention made causal."""
    block_class = _block_classes(tp, None)[0]

    class Causal(block_class):  # type: ignore[misc, valid-type]
        def forward(self, x: AnyTensor) -> AnyTensor:
            x = x + self.attn(self.ln1(x), need_weights=False, is_causal=True)[0]
            return x + self.fc2(self.act(self.fc1(self.ln2(x))))  # type: ignore[no-any-return]

    tp.manual_seed(3)
    return Causal(16, 4).eval()  # type: ignore[no-any-return]


@pytest.mark.parametrize("causal", [False, True])
def test_benchmark_block_exports_and_compiles_with_dynamic_batch_and_seq(causal: bool) -> None:
    if causal:
        block = _causal_benchmark_block()
    else:
        tp.manual_seed(3)
        block = _block_classes(tp, None)[0](16, 4).eval()
    seq_max = 64
    ep = export(block, (_input((3, 5, 16), 0),), dynamic_shapes={
        "x": {0: Dim("batch", min=1, max=16), 1: Dim("seq", min=1, max=seq_max)}})
    loaded = round_trip(ep).module()
    compiled = tp.compile(block, dynamic=True)
    for b, t in ((3, 5), (2, 1), (2, 7), (16, seq_max)):
        x = _input((b, t, 16), t)
        expected = as_array(block(x))
        np.testing.assert_allclose(as_array(loaded(x)), expected, rtol=1e-5, atol=1e-6, err_msg=f"seq {t}")
        np.testing.assert_allclose(as_array(compiled(x)), expected, rtol=1e-5, atol=1e-5, err_msg=f"seq {t}")
    assert compiled.compile_count == 1


# ---- what cannot stay symbolic --------------------------------------------------------------------------

NEEDS_VALUE: dict[str, tuple[Callable[[AnyTensor], AnyTensor], str]] = {
    "arange_float_step": (lambda x: x + tp.arange(0, x.shape[1], 0.5)[:1],
                          r"arange\(0, seq, 0\.5\) with a non-integer start, end or step"),
    "linspace": (lambda x: x + tp.linspace(0, 1, x.shape[1]), r"linspace's number of steps"),
    "tensor_of_a_size": (lambda x: x + tp.tensor([x.shape[1]]), r"tp\.tensor of a symbolic size"),
    "split_into_pieces_of_a_size": (lambda x: x.split(2, dim=1)[0], r"split of an axis of symbolic size seq"),
    "chunk": (lambda x: x.chunk(2, dim=1)[0], r"chunk of an axis of symbolic size seq"),
    "true_division_of_a_size": (lambda x: x * (x.shape[1] / 2), r"seq / 2 \(a Python float computed from a symbolic"),
    "float_power_of_a_size": (lambda x: x * x.shape[1] ** 0.5, r"seq \*\* 0\.5 \(a Python float"),
}


@pytest.mark.parametrize("name", list(NEEDS_VALUE))
def test_a_size_that_cannot_stay_symbolic_names_the_call_and_the_line(name: str) -> None:
    fn, message = NEEDS_VALUE[name]
    with pytest.raises(ConstraintViolationError, match=message) as info:
        export(fn, (_input((3, 6), 0),), dynamic_shapes=[{1: SEQ}])
    assert "specialises seq to 6" in str(info.value)
    assert f"{__file__}:" in str(info.value)  # the user's line, not numpy's or the library's
    assert "TypeError" not in str(info.value)
    compiled = tp.compile(fn, dynamic=True)  # compile specialises on the size instead, and stays right
    for n in (6, 1, 9):
        x = _input((3, n), n)
        np.testing.assert_allclose(as_array(compiled(x)), as_array(fn(x)), rtol=1e-6)


@pytest.mark.parametrize("name", ["size_divides_a_tensor", "integer_power_of_a_size"])
def test_sizes_in_tensor_arithmetic_stay_symbolic(name: str) -> None:
    fn = {"size_divides_a_tensor": lambda x: x * x.shape[1] / 2 + x / x.shape[1],
          "integer_power_of_a_size": lambda x: x.reshape(x.shape[0], x.shape[1] ** 1) * x.shape[1] ** 2}[name]
    _check_sizes(round_trip(export(fn, (_input((3, 6), 0),), dynamic_shapes=[{1: SEQ}])).module(), fn,
                 lambda n: (3, n), name)
    compiled = tp.compile(fn, dynamic=True)
    _check_sizes(compiled, fn, lambda n: (3, n), name)
    assert compiled.compile_count == 1


def test_a_size_read_by_numpy_is_blamed_on_the_users_line_not_numpys() -> None:
    def fn(x: AnyTensor) -> AnyTensor:
        return x + tp.from_numpy(np.ones(x.shape[1], np.float32))

    with pytest.raises(ConstraintViolationError, match="specialises seq to 6") as info:
        export(fn, (_input((3, 6), 0),), dynamic_shapes=[{1: SEQ}])
    text = str(info.value)
    assert f"{__file__}:" in text and "numeric.py" not in text, text


def test_a_symbolic_size_outside_a_recording_is_a_clear_error() -> None:
    from tensorplay.symbolic import sym

    with pytest.raises(tp.ShapeError, match=r"ones: size T is a symbolic dim, but no graph recording"):
        tp.ones(sym("T"), 2)
    with pytest.raises(tp.ShapeError, match=r"arange: size T is a symbolic dim"):
        tp.arange(sym("T"))
