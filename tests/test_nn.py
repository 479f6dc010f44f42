"""tensorplay.nn against PyTorch: every layer's forward and gradients with identical weights,
state dicts, train/eval behaviour, prefix polymorphism and the graph recorder."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn

tnn = torch.nn
TF = torch.nn.functional


def rand(*shape: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def copy_weights(ours: nn.Module, theirs: Any) -> None:
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})


def assert_close(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def first(out: Any) -> Any:
    return out[0] if isinstance(out, tuple) else out


def check_parity(ours: nn.Module, theirs: Any, x_np: np.ndarray[Any, Any],
                 call_ours: Callable[[Any, Any], Any] | None = None,
                 call_theirs: Callable[[Any, Any], Any] | None = None,
                 rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Load PyTorch's weights into ``ours``, then compare outputs, the input gradient and every
    parameter gradient for a random cotangent."""
    copy_weights(ours, theirs)
    x_t = torch.tensor(x_np, requires_grad=True)
    x = tp.tensor(x_np, requires_grad=True)
    y_t = first(call_theirs(theirs, x_t) if call_theirs else theirs(x_t))
    y = first(call_ours(ours, x) if call_ours else ours(x))
    assert tuple(y.shape) == tuple(y_t.shape)
    assert_close(y, y_t, rtol, atol)
    cot = rand(*y_t.shape, seed=99)
    (y_t * torch.tensor(cot)).sum().backward()
    (y * tp.tensor(cot)).sum().backward()
    assert x.grad is not None
    assert_close(x.grad, x_t.grad, rtol, atol)
    torch_params = dict(theirs.named_parameters())
    names = [n for n, _ in ours.named_parameters()]
    assert names == list(torch_params), (names, list(torch_params))
    for name, p in ours.named_parameters():
        assert p.grad is not None, name
        assert_close(p.grad, torch_params[name].grad, rtol, atol * 10)


LAYERS: list[tuple[str, Callable[[], nn.Module], Callable[[], Any], tuple[int, ...]]] = [
    ("linear", lambda: nn.Linear(5, 7), lambda: tnn.Linear(5, 7), (3, 4, 5)),
    ("linear-nobias", lambda: nn.Linear(5, 7, bias=False), lambda: tnn.Linear(5, 7, bias=False), (4, 5)),
    ("conv1d", lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), lambda: tnn.Conv1d(3, 4, 3, stride=2, padding=1),
     (2, 3, 10)),
    ("conv2d", lambda: nn.Conv2d(3, 6, 3, padding=1), lambda: tnn.Conv2d(3, 6, 3, padding=1), (2, 3, 7, 7)),
    ("conv2d-groups-dilation", lambda: nn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2),
     lambda: tnn.Conv2d(4, 6, 3, stride=2, padding=2, dilation=2, groups=2), (2, 4, 9, 9)),
    ("conv2d-same", lambda: nn.Conv2d(2, 3, 3, padding="same", bias=False),
     lambda: tnn.Conv2d(2, 3, 3, padding="same", bias=False), (2, 2, 6, 5)),
    ("conv3d", lambda: nn.Conv3d(2, 3, 2), lambda: tnn.Conv3d(2, 3, 2), (2, 2, 4, 4, 4)),
    ("conv_transpose1d", lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
     lambda: tnn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), (2, 3, 6)),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1),
     lambda: tnn.ConvTranspose2d(4, 2, 3, stride=2, padding=1), (2, 4, 5, 5)),
    ("maxpool1d", lambda: nn.MaxPool1d(2), lambda: tnn.MaxPool1d(2), (2, 3, 8)),
    ("maxpool2d", lambda: nn.MaxPool2d(3, stride=2, padding=1), lambda: tnn.MaxPool2d(3, stride=2, padding=1),
     (2, 3, 7, 7)),
    ("avgpool1d", lambda: nn.AvgPool1d(3, stride=2, padding=1), lambda: tnn.AvgPool1d(3, stride=2, padding=1),
     (2, 3, 8)),
    ("avgpool2d", lambda: nn.AvgPool2d(2), lambda: tnn.AvgPool2d(2), (2, 3, 6, 6)),
    ("layernorm", lambda: nn.LayerNorm(6), lambda: tnn.LayerNorm(6), (2, 3, 6)),
    ("layernorm-2d", lambda: nn.LayerNorm((4, 6)), lambda: tnn.LayerNorm((4, 6)), (2, 4, 6)),
    ("layernorm-noaffine", lambda: nn.LayerNorm(6, elementwise_affine=False),
     lambda: tnn.LayerNorm(6, elementwise_affine=False), (3, 6)),
    ("batchnorm1d", lambda: nn.BatchNorm1d(4), lambda: tnn.BatchNorm1d(4), (8, 4)),
    ("batchnorm1d-3d", lambda: nn.BatchNorm1d(4), lambda: tnn.BatchNorm1d(4), (5, 4, 3)),
    ("batchnorm2d", lambda: nn.BatchNorm2d(3), lambda: tnn.BatchNorm2d(3), (4, 3, 5, 5)),
    ("relu", nn.ReLU, tnn.ReLU, (3, 5)),
    ("gelu", nn.GELU, tnn.GELU, (3, 5)),
    ("gelu-tanh", lambda: nn.GELU("tanh"), lambda: tnn.GELU("tanh"), (3, 5)),
    ("tanh", nn.Tanh, tnn.Tanh, (3, 5)),
    ("sigmoid", nn.Sigmoid, tnn.Sigmoid, (3, 5)),
    ("silu", nn.SiLU, tnn.SiLU, (3, 5)),
    ("leaky_relu", lambda: nn.LeakyReLU(0.2), lambda: tnn.LeakyReLU(0.2), (3, 5)),
    ("softmax", lambda: nn.Softmax(dim=-1), lambda: tnn.Softmax(dim=-1), (3, 5)),
    ("log_softmax", lambda: nn.LogSoftmax(dim=1), lambda: tnn.LogSoftmax(dim=1), (3, 5, 2)),
    ("flatten", nn.Flatten, tnn.Flatten, (2, 3, 4)),
    ("identity", nn.Identity, tnn.Identity, (2, 3)),
    ("sequential", lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)),
     lambda: tnn.Sequential(tnn.Linear(4, 8), tnn.Tanh(), tnn.Linear(8, 3)), (5, 4)),
]


@pytest.mark.parametrize("name,make_ours,make_theirs,shape", LAYERS, ids=[row[0] for row in LAYERS])
def test_layer_matches_pytorch(name: str, make_ours: Callable[[], nn.Module], make_theirs: Callable[[], Any],
                               shape: tuple[int, ...]) -> None:
    check_parity(make_ours(), make_theirs(), rand(*shape))


def _mha_call(**kw: Any) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
    def ours(m: Any, x: Any) -> Any:
        return m(x, **{k: tp.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})

    def theirs(m: Any, x: Any) -> Any:
        return m(x, x, x, **{k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    return ours, theirs


_CAUSAL = np.triu(np.ones((5, 5), dtype=bool), 1)
_PADDING = np.zeros((2, 5), dtype=bool)
_PADDING[0, 3:] = True
MHA_CASES = [
    ("no-weights", {"need_weights": False}),
    ("weights", {}),
    ("head-weights", {"average_attn_weights": False}),
    ("bool-mask", {"need_weights": False, "attn_mask": _CAUSAL}),
    ("float-mask", {"need_weights": False, "attn_mask": np.where(_CAUSAL, -1e9, 0.0).astype(np.float32)}),
    ("key-padding", {"need_weights": False, "key_padding_mask": _PADDING}),
]


@pytest.mark.parametrize("name,kw", MHA_CASES, ids=[c[0] for c in MHA_CASES])
def test_multihead_attention_matches_pytorch(name: str, kw: dict[str, Any]) -> None:
    call_ours, call_theirs = _mha_call(**kw)
    check_parity(nn.MultiheadAttention(16, 4), tnn.MultiheadAttention(16, 4, batch_first=True),
                 rand(2, 5, 16), call_ours, call_theirs)
    if kw.get("need_weights", True):  # the attention weights too
        ours, theirs = nn.MultiheadAttention(16, 4), tnn.MultiheadAttention(16, 4, batch_first=True)
        copy_weights(ours, theirs)
        x = rand(2, 5, 16)
        assert_close(call_ours(ours, tp.tensor(x))[1], call_theirs(theirs, torch.tensor(x))[1])


def test_multihead_attention_state_dict_names_and_cross_attention() -> None:
    theirs = tnn.MultiheadAttention(8, 2, batch_first=True)
    ours = nn.MultiheadAttention(8, 2)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]
    copy_weights(ours, theirs)
    q, kv = rand(2, 3, 8, seed=1), rand(2, 6, 8, seed=2)
    out, _ = ours(tp.tensor(q), tp.tensor(kv), tp.tensor(kv), need_weights=False)
    expected, _ = theirs(torch.tensor(q), torch.tensor(kv), torch.tensor(kv), need_weights=False)
    assert_close(out, expected)
    seq_first = nn.MultiheadAttention(8, 2, batch_first=False)
    copy_weights(seq_first, theirs)
    x = rand(3, 2, 8)
    assert_close(seq_first(tp.tensor(x), need_weights=False)[0],
                 tnn.MultiheadAttention.forward(theirs, *(torch.tensor(x.transpose(1, 0, 2)),) * 3,
                                                need_weights=False)[0].transpose(0, 1))


def test_embedding_matches_pytorch_and_padding_gets_no_gradient() -> None:
    theirs = tnn.Embedding(10, 4, padding_idx=0)
    ours = nn.Embedding(10, 4, padding_idx=0)
    assert np.all(ours.weight.detach().numpy()[0] == 0)
    copy_weights(ours, theirs)
    idx = np.array([[1, 0, 3], [9, 3, 0]])
    y, y_t = ours(tp.tensor(idx)), theirs(torch.tensor(idx))
    assert_close(y, y_t)
    cot = rand(2, 3, 4)
    (y * tp.tensor(cot)).sum().backward()
    (y_t * torch.tensor(cot)).sum().backward()
    assert ours.weight.grad is not None
    assert_close(ours.weight.grad, theirs.weight.grad)
    assert np.all(ours.weight.grad.numpy()[0] == 0)


def test_embedding_rejects_out_of_range_and_float_indices() -> None:
    emb = nn.Embedding(5, 2)
    with pytest.raises(IndexError, match=r"index 7 .*out of range; expected 0 <= index < 5"):
        emb(tp.tensor([1, 7]))
    with pytest.raises(IndexError, match="index -1"):
        emb(tp.tensor([-1]))
    with pytest.raises(tp.DTypeError, match="integer tensor"):
        emb(tp.tensor([1.0]))


# ---- functional --------------------------------------------------------------------------------

CE_CASES: list[tuple[str, dict[str, Any]]] = [
    ("mean", {}),
    ("sum", {"reduction": "sum"}),
    ("none", {"reduction": "none"}),
    ("weight", {"weight": np.array([0.5, 1.0, 2.0, 0.1, 1.5], dtype=np.float32)}),
    ("ignore", {"ignore_index": 2}),
    ("weight-ignore", {"weight": np.array([0.5, 1.0, 2.0, 0.1, 1.5], dtype=np.float32), "ignore_index": 1}),
    ("smoothing", {"label_smoothing": 0.1}),
    ("smoothing-weight-ignore", {"label_smoothing": 0.2, "ignore_index": 0,
                                 "weight": np.array([0.5, 1.0, 2.0, 0.1, 1.5], dtype=np.float32)}),
    ("smoothing-none", {"label_smoothing": 0.3, "reduction": "none", "ignore_index": 4}),
]


def _ce_both(logits: np.ndarray[Any, Any], target: np.ndarray[Any, Any], fn: str = "cross_entropy",
             **kw: Any) -> None:
    x = tp.tensor(logits, requires_grad=True)
    x_t = torch.tensor(logits, requires_grad=True)
    kw_ours = {k: tp.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    kw_theirs = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()}
    inp_ours: Any = x if fn == "cross_entropy" else F.log_softmax(x, dim=1)
    inp_theirs: Any = x_t if fn == "cross_entropy" else TF.log_softmax(x_t, dim=1)
    loss = getattr(F, fn)(inp_ours, tp.tensor(target), **kw_ours)
    loss_t = getattr(TF, fn)(inp_theirs, torch.tensor(target), **kw_theirs)
    assert_close(loss, loss_t)
    cot = rand(*loss_t.shape, seed=5) if loss_t.ndim else np.float32(1.0)
    (loss * tp.tensor(cot)).sum().backward()
    (loss_t * torch.tensor(cot)).sum().backward()
    assert_close(x.grad, x_t.grad)


@pytest.mark.parametrize("name,kw", CE_CASES, ids=[c[0] for c in CE_CASES])
def test_cross_entropy_matches_pytorch(name: str, kw: dict[str, Any]) -> None:
    target = np.array([0, 2, 4, 1, 2, 3])
    _ce_both(rand(6, 5), target, **kw)


def test_cross_entropy_spatial_probabilities_and_unbatched() -> None:
    _ce_both(rand(2, 5, 3, 4), np.random.default_rng(1).integers(0, 5, (2, 3, 4)), ignore_index=3)
    probs = np.random.default_rng(2).dirichlet(np.ones(5), size=6).astype(np.float32)
    _ce_both(rand(6, 5), probs)
    _ce_both(rand(6, 5), probs, label_smoothing=0.2, weight=np.arange(1, 6, dtype=np.float32))
    _ce_both(rand(5), np.array(3))
    _ce_both(rand(6, 5), np.array([0, 2, 4, 1, 2, 3]), fn="nll_loss", weight=np.arange(1, 6, dtype=np.float32))
    with pytest.raises(IndexError, match="target 5 .*out of range"):
        F.cross_entropy(tp.tensor(rand(2, 5)), tp.tensor([1, 5]))


def test_losses_and_functional_ops_match_pytorch() -> None:
    a, b = rand(4, 3), rand(4, 3, seed=1)
    for red in ("mean", "sum", "none"):
        assert_close(F.mse_loss(tp.tensor(a), tp.tensor(b), reduction=red),
                     TF.mse_loss(torch.tensor(a), torch.tensor(b), reduction=red))
        assert_close(F.l1_loss(tp.tensor(a), tp.tensor(b), reduction=red),
                     TF.l1_loss(torch.tensor(a), torch.tensor(b), reduction=red))
    w, bias = rand(6, 3), rand(6)
    assert_close(F.linear(tp.tensor(a), tp.tensor(w), tp.tensor(bias)),
                 TF.linear(torch.tensor(a), torch.tensor(w), torch.tensor(bias)))
    img, k = rand(2, 3, 6, 6), rand(4, 3, 3, 3)
    assert_close(F.conv2d(tp.tensor(img), tp.tensor(k), None, 1, 1),
                 TF.conv2d(torch.tensor(img), torch.tensor(k), None, 1, 1))
    assert_close(F.conv1d(tp.tensor(img[:, :, 0]), tp.tensor(k[:, :, 0]), stride=2),
                 TF.conv1d(torch.tensor(img[:, :, 0]), torch.tensor(k[:, :, 0]), stride=2))
    assert_close(F.max_pool2d(tp.tensor(img), 2), TF.max_pool2d(torch.tensor(img), 2))
    assert_close(F.avg_pool2d(tp.tensor(img), 3, 2, 1), TF.avg_pool2d(torch.tensor(img), 3, 2, 1))
    assert_close(F.layer_norm(tp.tensor(img), (6, 6)), TF.layer_norm(torch.tensor(img), (6, 6)))
    assert_close(F.softmax(tp.tensor(a), dim=0), TF.softmax(torch.tensor(a), dim=0))
    assert_close(F.gelu(tp.tensor(a)), TF.gelu(torch.tensor(a)))
    table, idx = rand(7, 3), np.array([[0, 6], [2, 2]])
    assert_close(F.embedding(tp.tensor(idx), tp.tensor(table)), TF.embedding(torch.tensor(idx), torch.tensor(table)))
    assert_close(F.one_hot(tp.tensor(np.array([0, 3, 1])), 4), TF.one_hot(torch.tensor([0, 3, 1]), 4))
    rm, rv = rand(3), np.abs(rand(3, seed=2)) + 0.5
    assert_close(F.batch_norm(tp.tensor(img), tp.tensor(rm), tp.tensor(rv)),
                 TF.batch_norm(torch.tensor(img), torch.tensor(rm), torch.tensor(rv)))


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
def test_scaled_dot_product_attention_matches_pytorch(kind: str) -> None:
    q, k, v = rand(2, 3, 4, 8), rand(2, 3, 6, 8, seed=1), rand(2, 3, 6, 5, seed=2)
    mask: Any = None
    if kind == "bool":
        mask = np.random.default_rng(3).random((4, 6)) > 0.3
        mask[:, 0] = True
    elif kind == "float":
        mask = rand(4, 6, seed=4)
    causal = kind == "causal"
    ours = F.scaled_dot_product_attention(tp.tensor(q), tp.tensor(k), tp.tensor(v),
                                          None if mask is None else tp.tensor(mask), is_causal=causal)
    theirs = TF.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                             None if mask is None else torch.tensor(mask), is_causal=causal)
    assert_close(ours, theirs)


# ---- Module: names, state dicts, modes -----------------------------------------------------------

class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                                      nn.MaxPool2d(2))
        self.blocks = nn.ModuleList([nn.Linear(16, 16), nn.Linear(16, 16)])
        self.heads = nn.ModuleDict({"cls": nn.Linear(16, 3)})
        self.norm = nn.LayerNorm(16)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: Any) -> Any:
        h = self.features(x).flatten(1)
        for block in self.blocks:
            h = block(h).relu()
        return self.heads["cls"](self.drop(self.norm(h)))


class TorchNet(tnn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = tnn.Sequential(tnn.Conv2d(1, 4, 3, padding=1), tnn.BatchNorm2d(4), tnn.ReLU(),
                                       tnn.MaxPool2d(2))
        self.blocks = tnn.ModuleList([tnn.Linear(16, 16), tnn.Linear(16, 16)])
        self.heads = tnn.ModuleDict({"cls": tnn.Linear(16, 3)})
        self.norm = tnn.LayerNorm(16)
        self.drop = tnn.Dropout(0.5)

    def forward(self, x: Any) -> Any:
        h = self.features(x).flatten(1)
        for block in self.blocks:
            h = block(h).relu()
        return self.heads["cls"](self.drop(self.norm(h)))


def test_names_shapes_and_repr_match_pytorch() -> None:
    ours, theirs = Net(), TorchNet()
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    assert [(n, tuple(b.shape)) for n, b in ours.named_buffers()] == \
        [(n, tuple(b.shape)) for n, b in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in theirs.children()]
    assert repr(ours).replace("Net", "X") == repr(theirs).replace("TorchNet", "X")
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))


def test_whole_model_matches_pytorch_in_train_and_eval() -> None:
    ours, theirs = Net(), TorchNet()
    ours.drop.p = theirs.drop.p = 0.0
    x = rand(5, 1, 4, 4)
    check_parity(ours, theirs, x)
    for _ in range(2):  # running statistics follow PyTorch's (unbiased running variance)
        ours(tp.tensor(rand(5, 1, 4, 4, seed=7)))
        theirs(torch.tensor(rand(5, 1, 4, 4, seed=7)))
    assert_close(ours.features[1].running_var, theirs.features[1].running_var)
    assert int(ours.features[1].num_batches_tracked.item()) == int(theirs.features[1].num_batches_tracked)
    ours.eval()
    theirs.eval()
    assert not any(m.training for m in ours.modules())
    assert_close(ours(tp.tensor(x)), theirs(torch.tensor(x)))
    ours.train()
    assert all(m.training for m in ours.modules())


def test_state_dict_round_trip_and_sharing() -> None:
    tp.manual_seed(1)
    a = Net()
    tp.manual_seed(2)
    b = Net()
    x = tp.tensor(rand(3, 1, 4, 4))
    a.eval(), b.eval()
    assert not np.allclose(a(x).detach().numpy(), b(x).detach().numpy())
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(a(x).detach().numpy(), b(x).detach().numpy())
    sd = a.state_dict()
    assert isinstance(sd, OrderedDict) and not sd["norm.weight"].requires_grad
    sd["norm.weight"].fill_(3.0)  # values share memory with the module, as PyTorch's
    assert float(a.norm.weight.detach().numpy()[0]) == 3.0
    np_sd = {k: v.numpy().copy() for k, v in b.state_dict().items()}
    a.load_state_dict(np_sd)  # numpy arrays load too
    np.testing.assert_array_equal(a.norm.weight.detach().numpy(), b.norm.weight.detach().numpy())
    a.load_state_dict(np_sd, assign=True)  # the parameter holds the given array itself
    np_sd["norm.bias"][0] = 42.0
    assert float(a.norm.bias.detach().numpy()[0]) == 42.0


def test_load_state_dict_errors_list_every_problem() -> None:
    net = Net()
    sd = dict(net.state_dict())
    del sd["norm.bias"]
    sd["extra.weight"] = np.zeros(3, dtype=np.float32)
    sd["heads.cls.weight"] = np.zeros((3, 15), dtype=np.float32)
    before = net.norm.weight.detach().numpy().copy()
    sd["norm.weight"] = np.full(16, 7.0, dtype=np.float32)
    with pytest.raises(nn.StateDictError) as info:
        net.load_state_dict(sd)
    message = str(info.value)
    assert 'Missing key(s) in state_dict: "norm.bias"' in message
    assert 'Unexpected key(s) in state_dict: "extra.weight"' in message
    assert "size mismatch for heads.cls.weight: copying a param with shape [3, 15] from checkpoint, " \
           "the shape in current model is [3, 16]" in message
    np.testing.assert_array_equal(net.norm.weight.detach().numpy(), before)  # nothing copied
    del sd["heads.cls.weight"]
    result = net.load_state_dict(sd, strict=False)
    assert result.missing_keys == ["heads.cls.weight", "norm.bias"]
    assert result.unexpected_keys == ["extra.weight"]
    assert float(net.norm.weight.detach().numpy()[0]) == 7.0
    sd["heads.cls.weight"] = np.zeros((3, 15), dtype=np.float32)
    with pytest.raises(nn.StateDictError, match="size mismatch"):
        net.load_state_dict(sd, strict=False)


def test_module_registration_and_bulk_operations() -> None:
    m = nn.Module()
    m.w = nn.Parameter(np.ones((2, 2), dtype=np.float32))
    m.child = nn.Linear(2, 2)
    m.register_buffer("stat", tp.zeros(2))
    m.register_buffer("scratch", tp.zeros(1), persistent=False)
    m.register_parameter("missing", None)
    assert [n for n, _ in m.named_parameters()] == ["w", "child.weight", "child.bias"]
    assert [n for n, _ in m.named_buffers()] == ["stat", "scratch"]
    assert list(m.state_dict()) == ["w", "stat", "child.weight", "child.bias"]
    assert m.missing is None
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'w'"):
        m.w = tp.zeros(2, 2)
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        _ = m.nope
    del m.child
    assert [n for n, _ in m.named_parameters()] == ["w"]
    shared = nn.Linear(2, 2)
    seq = nn.Sequential(shared, nn.ReLU(), shared)
    assert len(list(seq.parameters())) == 2  # a shared module counts once
    visited: list[str] = []
    seq.apply(lambda mod: visited.append(type(mod).__name__))
    assert visited == ["Linear", "ReLU", "Sequential"]
    out = seq(tp.randn(3, 2)).sum()
    out.backward()
    assert shared.weight.grad is not None
    seq.zero_grad(set_to_none=False)
    assert shared.weight.grad is not None and np.all(shared.weight.grad.numpy() == 0)
    seq.zero_grad()
    assert shared.weight.grad is None
    seq.to(tp.float64)
    assert shared.weight.dtype == tp.float64 and seq(tp.randn(3, 2).double()).dtype == tp.float64
    assert seq[0] is shared and len(seq) == 3 and isinstance(seq[1:], nn.Sequential)
    seq.requires_grad_(False)
    assert not shared.weight.requires_grad


def test_default_initialisation_follows_pytorch_bounds() -> None:
    tp.manual_seed(0)
    lin = nn.Linear(300, 200)
    w = lin.weight.detach().numpy()
    bound = 1 / np.sqrt(300)  # kaiming_uniform(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert abs(w.std() - bound / np.sqrt(3)) < 0.02 * bound
    assert np.abs(lin.bias.detach().numpy()).max() <= bound
    conv = nn.Conv2d(4, 8, 3)
    cb = 1 / np.sqrt(4 * 9)
    assert np.abs(conv.weight.detach().numpy()).max() <= cb
    emb = nn.Embedding(1000, 20)
    assert abs(float(emb.weight.detach().numpy().std()) - 1.0) < 0.05
    tp.manual_seed(0)
    again = nn.Linear(300, 200)
    np.testing.assert_array_equal(again.weight.detach().numpy(), w)  # seeded: reproducible
    assert nn.init.calculate_gain("relu") == pytest.approx(np.sqrt(2))
    t = nn.init.xavier_uniform_(nn.Parameter(np.zeros((50, 70), dtype=np.float32)))
    assert np.abs(t.detach().numpy()).max() <= np.sqrt(6 / 120)


# ---- train/eval behaviour ---------------------------------------------------------------------

def test_dropout_train_and_eval() -> None:
    drop = nn.Dropout(0.3)
    x = tp.ones(200, 100)
    tp.manual_seed(3)
    y = drop(x).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 0.02
    np.testing.assert_allclose(y[kept], 1 / 0.7, rtol=1e-6)
    y2 = drop(x).numpy()
    assert not np.array_equal(y2 != 0, kept)  # a fresh mask each call
    tp.manual_seed(3)
    np.testing.assert_array_equal(drop(x).numpy(), y)  # seeded: reproducible
    drop.eval()
    assert drop(x) is x
    g = tp.ones(4, 5, requires_grad=True)
    drop.train()
    out = drop(g)
    out.sum().backward()
    assert g.grad is not None
    np.testing.assert_allclose(g.grad.numpy(), out.detach().numpy())  # gradient uses the same mask


def test_batchnorm_modes_and_options() -> None:
    x = rand(6, 3, 4, 4)
    for kw in ({"momentum": None}, {"track_running_stats": False}, {"affine": False}, {"momentum": 0.3}):
        ours, theirs = nn.BatchNorm2d(3, **kw), tnn.BatchNorm2d(3, **kw)
        for seed in range(3):
            batch = rand(6, 3, 4, 4, seed=seed)
            assert_close(ours(tp.tensor(batch)), theirs(torch.tensor(batch)))
        ours.eval(), theirs.eval()
        assert_close(ours(tp.tensor(x)), theirs(torch.tensor(x)))
        if kw.get("track_running_stats", True):
            assert_close(ours.running_mean, theirs.running_mean)
            assert_close(ours.running_var, theirs.running_var)
    with pytest.raises(tp.ShapeError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(tp.tensor(rand(1, 3)))


# ---- prefix polymorphism ----------------------------------------------------------------------

POLY: list[tuple[str, Callable[[], nn.Module], tuple[int, ...]]] = [
    ("linear", lambda: nn.Linear(5, 3), (4, 2, 5)),
    ("conv2d", lambda: nn.Conv2d(2, 3, 3, padding=1), (4, 2, 5, 5)),
    ("conv1d", lambda: nn.Conv1d(2, 3, 2), (4, 2, 6)),
    ("conv_transpose2d", lambda: nn.ConvTranspose2d(2, 3, 2, stride=2), (4, 2, 3, 3)),
    ("maxpool2d", lambda: nn.MaxPool2d(2), (4, 2, 6, 6)),
    ("avgpool1d", lambda: nn.AvgPool1d(2), (4, 3, 6)),
    ("layernorm", lambda: nn.LayerNorm(5), (4, 3, 5)),
    ("batchnorm2d-eval", lambda: nn.BatchNorm2d(2).eval(), (4, 2, 3, 3)),
    ("mha", lambda: nn.MultiheadAttention(8, 2), (4, 3, 8)),
    ("sequential", lambda: nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2), nn.LayerNorm(2),
                                         nn.Linear(2, 3)), (4, 1, 6, 6)),
]


@pytest.mark.parametrize("name,make,shape", POLY, ids=[p[0] for p in POLY])
def test_prefix_polymorphism_batched_equals_stacked_samples(name: str, make: Callable[[], nn.Module],
                                                            shape: tuple[int, ...]) -> None:
    layer = make()
    x = rand(*shape)

    def call(t: Any) -> Any:
        return first(layer(t, need_weights=False) if name == "mha" else layer(t)).detach().numpy()

    batched = call(tp.tensor(x))
    stacked = np.stack([call(tp.tensor(x[i])) for i in range(shape[0])])  # unbatched samples
    # two leading axes behave like their flattening
    lead2 = call(tp.tensor(x.reshape((2, shape[0] // 2) + shape[1:])))
    np.testing.assert_allclose(lead2.reshape(batched.shape), batched, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(batched, stacked, rtol=1e-5, atol=1e-6)


def test_typed_out_sizes_are_checked() -> None:
    conv = nn.Conv2d(1, 2, 3)
    assert tuple(conv(tp.zeros(1, 1, 6, 6), out=(4, 4)).shape) == (1, 2, 4, 4)
    with pytest.raises(tp.ShapeError, match=r"out=\[5, 5\].*produced \[4, 4\]"):
        conv(tp.zeros(1, 1, 6, 6), out=(5, 5))
    with pytest.raises(tp.ShapeError):
        nn.Linear(3, 2)(tp.zeros(4, 5))


# ---- under the graph recorder ------------------------------------------------------------------

def test_modules_run_under_the_graph_recorder() -> None:
    from tensorplay.graph import trace
    tp.manual_seed(0)
    net = Net().eval()
    x = tp.tensor(rand(2, 1, 4, 4))
    gm = trace(net, x)
    np.testing.assert_allclose(gm(x).detach().numpy(), net(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    attn = nn.MultiheadAttention(8, 2)
    x2 = tp.tensor(rand(2, 3, 8))
    g2 = trace(lambda t: attn(t, need_weights=False)[0], x2)
    np.testing.assert_allclose(g2(x2).detach().numpy(), attn(x2, need_weights=False)[0].detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    loss = trace(lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1), tp.tensor(rand(4, 3)),
                 tp.tensor([0, 2, 1, 1]))
    expected = F.cross_entropy(tp.tensor(rand(4, 3)), tp.tensor([0, 2, 1, 1]), label_smoothing=0.1)
    np.testing.assert_allclose(loss(tp.tensor(rand(4, 3)), tp.tensor([0, 2, 1, 1])).numpy(), expected.numpy(),
                               rtol=1e-6)


def test_batchnorm_training_under_the_recorder_updates_running_stats() -> None:
    from tensorplay.graph import trace
    bn_a, bn_b = nn.BatchNorm2d(3), nn.BatchNorm2d(3)
    x = tp.tensor(rand(4, 3, 2, 2))
    gm = trace(bn_a, x)
    out = gm(x)
    np.testing.assert_allclose(out.detach().numpy(), bn_b(x).detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn_a.running_var.numpy(), bn_b.running_var.numpy(), rtol=1e-6)
    assert not np.allclose(bn_a.running_var.numpy(), 1.0)


def test_deepcopy_gives_an_independent_working_model() -> None:
    import copy
    net = Net()
    clone = copy.deepcopy(net)
    x = tp.tensor(rand(4, 1, 4, 4))
    clone.eval(), net.eval()
    np.testing.assert_array_equal(clone(x).detach().numpy(), net(x).detach().numpy())
    assert isinstance(clone.norm.weight, nn.Parameter) and clone.norm.weight is not net.norm.weight
    clone.train()
    clone(x)  # batch norm statistics update in the copy only
    assert not np.allclose(clone.features[1].running_mean.numpy(), net.features[1].running_mean.numpy())
