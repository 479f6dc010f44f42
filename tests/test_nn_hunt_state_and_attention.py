"""Hunted against PyTorch: a state dict of a model reusing one submodule under two names, and
cross-attention with ``batch_first=False``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tensorplay as tp


def _shared_pair() -> tuple[tp.nn.Sequential, torch.nn.Sequential]:
    lin, tlin = tp.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    return tp.nn.Sequential(lin, tp.nn.ReLU(), lin), torch.nn.Sequential(tlin, torch.nn.ReLU(), tlin)


def test_state_dict_lists_a_shared_submodule_under_each_name() -> None:
    model, tmodel = _shared_pair()
    assert list(model.state_dict()) == list(tmodel.state_dict())
    assert model.state_dict()["2.weight"] is not None


def test_pytorch_state_dict_of_a_shared_submodule_loads_strictly() -> None:
    model, tmodel = _shared_pair()
    result = model.load_state_dict(tmodel.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(model(tp.tensor(x)).detach().numpy(), tmodel(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    # and the round trip back into PyTorch
    tmodel2 = torch.nn.Sequential(*(lambda l: (l, torch.nn.ReLU(), l))(torch.nn.Linear(3, 3)))
    tmodel2.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})


def test_named_parameters_still_list_a_shared_parameter_once() -> None:
    model, tmodel = _shared_pair()
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in tmodel.named_parameters()]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("same_kv", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_multihead_attention_cross_attention_sequence_first(dtype: type, same_kv: bool, masked: bool) -> None:
    rng = np.random.default_rng(1)
    d, heads, b, n, m = 6, 2, 3, 4, 5
    tdtype = torch.float64 if dtype is np.float64 else torch.float32
    tm = torch.nn.MultiheadAttention(d, heads, batch_first=False).to(tdtype)
    pm = tp.nn.MultiheadAttention(d, heads, batch_first=False, dtype=tp.float64 if dtype is np.float64 else tp.float32)
    pm.load_state_dict(tm.state_dict())
    q = rng.standard_normal((n, b, d)).astype(dtype)
    k = rng.standard_normal((m, b, d)).astype(dtype)
    v = k if same_kv else rng.standard_normal((m, b, d)).astype(dtype)
    kpm = rng.random((b, m)) < 0.3
    kpm[:, 0] = False
    tq, pq = torch.tensor(q, requires_grad=True), tp.tensor(q, requires_grad=True)
    tk, pk = torch.tensor(k), tp.tensor(k)
    tv, pv = (tk, pk) if same_kv else (torch.tensor(v), tp.tensor(v))
    tkw = {"key_padding_mask": torch.tensor(kpm)} if masked else {}
    pkw = {"key_padding_mask": tp.tensor(kpm)} if masked else {}
    tout, tw = tm(tq, tk, tv, **tkw)
    pout, pw = pm(pq, pk, pv, **pkw)
    tol = 1e-5 if dtype is np.float32 else 1e-10
    assert tuple(pout.shape) == tuple(tout.shape)
    np.testing.assert_allclose(pout.detach().numpy(), tout.detach().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(pw.detach().numpy(), tw.detach().numpy(), rtol=tol, atol=tol)
    tout.sum().backward()
    pout.sum().backward()
    np.testing.assert_allclose(pq.grad.numpy(), tq.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.parametrize("bad", ["abc", object()], ids=["str", "object"])
def test_load_state_dict_of_a_non_array_value_names_what_it_received(bad: object) -> None:
    tlin = torch.nn.Linear(2, 2)
    with pytest.raises(RuntimeError, match="expected torch.Tensor"):  # PyTorch names the type it received
        tlin.load_state_dict({"weight": bad, "bias": torch.ones(2)})
    lin = tp.nn.Linear(2, 2)
    with pytest.raises(tp.nn.StateDictError) as info:
        lin.load_state_dict({"weight": bad, "bias": np.ones(2)})
    message = str(info.value)
    assert '"weight"' in message and type(bad).__name__ in message
    assert "size mismatch" not in message  # before: 'copying a param with shape [] from checkpoint'
