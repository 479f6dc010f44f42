"""``Unflatten``, the padding modules, ``PixelShuffle`` / ``PixelUnshuffle``, ``Upsample`` / ``F.interpolate``
(nearest, linear, bilinear, trilinear), ``ParameterList`` / ``ParameterDict`` and ``InstanceNorm1d/2d`` /
``F.instance_norm`` against PyTorch: values, shapes and gradients in float32 and float64, state-dict keys,
running statistics, reprs, argument errors, and a few under ``tp.compile``, ``vmap`` and ONNX Runtime."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import nn
from tensorplay.errors import ArgumentError, IndexRangeError, KeyLookupError, ShapeError, TensorplayError

torch = pytest.importorskip("torch")
TF = torch.nn.functional
TNN = torch.nn

DTYPES = ["float32", "float64"]
TOL = {"float32": 2e-6, "float64": 1e-12}
RNG = np.random.default_rng(7)


def _close(got: Any, want: Any, dtype: str, what: str, scale: float = 1.0) -> None:
    g = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    w = want.detach().numpy()
    assert g.dtype == w.dtype and g.shape == w.shape, (what, g.dtype, w.dtype, g.shape, w.shape)
    np.testing.assert_allclose(g, w, rtol=TOL[dtype] * scale, atol=TOL[dtype] * scale, err_msg=what)


def _check(f: Callable[[Any], Any], g: Callable[[Any], Any], shape: tuple[int, ...], dtype: str, what: str) -> None:
    """``f`` (tensorplay) and ``g`` (torch) on the same data: values, shapes, and the input gradient against a
    non-constant cotangent."""
    a = RNG.standard_normal(shape).astype(dtype)
    x, tx = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = f(x), g(tx)
    _close(y, ty, dtype, f"{what} values")
    w = RNG.uniform(0.5, 1.5, tuple(ty.shape)).astype(dtype)
    (y * tp.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    _close(x.grad, tx.grad, dtype, f"{what} gradient")


# ---- Unflatten, PixelShuffle, PixelUnshuffle ---------------------------------------------------------------

RESHAPING: list[tuple[str, Callable[[], Any], Callable[[], Any], tuple[int, ...]]] = [
    ("Unflatten(1,(3,4))", lambda: nn.Unflatten(1, (3, 4)), lambda: TNN.Unflatten(1, (3, 4)), (2, 12, 5)),
    ("Unflatten(-1,(2,-1))", lambda: nn.Unflatten(-1, (2, -1)), lambda: TNN.Unflatten(-1, (2, -1)), (2, 3, 6)),
    ("Unflatten(0,[1,2,1])", lambda: nn.Unflatten(0, [1, 2, 1]), lambda: TNN.Unflatten(0, [1, 2, 1]), (2, 3)),
    ("PixelShuffle(2)", lambda: nn.PixelShuffle(2), lambda: TNN.PixelShuffle(2), (2, 12, 3, 5)),
    ("PixelShuffle(3) 3-d", lambda: nn.PixelShuffle(3), lambda: TNN.PixelShuffle(3), (9, 2, 4)),
    ("PixelShuffle(2) 5-d", lambda: nn.PixelShuffle(2), lambda: TNN.PixelShuffle(2), (2, 3, 8, 2, 3)),
    ("PixelUnshuffle(2)", lambda: nn.PixelUnshuffle(2), lambda: TNN.PixelUnshuffle(2), (2, 3, 4, 6)),
    ("PixelUnshuffle(3) 3-d", lambda: nn.PixelUnshuffle(3), lambda: TNN.PixelUnshuffle(3), (2, 6, 3)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", RESHAPING, ids=[c[0] for c in RESHAPING])
def test_reshaping_layers_match_torch(case: Any, dtype: str) -> None:
    name, ours, theirs, shape = case
    m, tm = ours(), theirs()
    _check(m, tm, shape, dtype, name)
    assert repr(m) == repr(tm)


def test_pixel_shuffle_functions_invert_each_other_and_match_torch() -> None:
    a = RNG.standard_normal((2, 8, 3, 4))
    _close(F.pixel_shuffle(tp.tensor(a), 2), TF.pixel_shuffle(torch.tensor(a), 2), "float64", "pixel_shuffle")
    back = F.pixel_unshuffle(F.pixel_shuffle(tp.tensor(a), 2), 2)
    np.testing.assert_array_equal(back.numpy(), a)


def test_reshaping_errors_name_the_layer_and_sizes() -> None:
    with pytest.raises(ShapeError, match=r"PixelShuffle: the 10 channels .* divisible by upscale_factor \*\* 2 = 4"):
        nn.PixelShuffle(2)(tp.randn(1, 10, 2, 2))
    with pytest.raises(ShapeError, match=r"PixelUnshuffle: the spatial sizes 4 x 5 .* downscale_factor = 2"):
        nn.PixelUnshuffle(2)(tp.randn(1, 1, 4, 5))
    with pytest.raises(ShapeError, match=r"PixelShuffle: upscale_factor must be a positive int, got int 0"):
        nn.PixelShuffle(0)
    with pytest.raises(ShapeError, match=r"PixelShuffle: expected an input \[\*lead, C, H, W\]"):
        nn.PixelShuffle(2)(tp.randn(4, 2))
    with pytest.raises(ShapeError, match=r"Unflatten: unflattened_size \[3, 5\] has product 15, but axis 1 .* size 12"):
        nn.Unflatten(1, (3, 5))(tp.randn(2, 12))
    with pytest.raises(ShapeError, match=r"Unflatten: cannot split axis 1 of size 12 .* into \[5, -1\]"):
        nn.Unflatten(1, (5, -1))(tp.randn(2, 12))
    with pytest.raises(ShapeError, match=r"Unflatten: unflattened_size may hold one -1"):
        nn.Unflatten(1, (-1, -1))
    with pytest.raises(ShapeError, match=r"Unflatten: unflattened_size must be a non-empty tuple of ints"):
        nn.Unflatten(1, 12)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"Unflatten: dim 2 is out of range for an input of shape \[2, 12\]"):
        nn.Unflatten(2, (3, 4))(tp.randn(2, 12))


# ---- padding modules ---------------------------------------------------------------------------------------

PADS: list[tuple[str, Callable[[], Any], Callable[[], Any], tuple[int, ...]]] = [
    ("ZeroPad1d(2)", lambda: nn.ZeroPad1d(2), lambda: TNN.ZeroPad1d(2), (2, 3, 4)),
    ("ZeroPad2d((1,0,2,3))", lambda: nn.ZeroPad2d((1, 0, 2, 3)), lambda: TNN.ZeroPad2d((1, 0, 2, 3)), (2, 3, 4, 5)),
    ("ZeroPad2d((-1,2,0,1))", lambda: nn.ZeroPad2d((-1, 2, 0, 1)), lambda: TNN.ZeroPad2d((-1, 2, 0, 1)), (3, 4, 5)),
    ("ZeroPad3d(1)", lambda: nn.ZeroPad3d(1), lambda: TNN.ZeroPad3d(1), (1, 2, 2, 3, 2)),
    ("ConstantPad1d((2,1),3.5)", lambda: nn.ConstantPad1d((2, 1), 3.5), lambda: TNN.ConstantPad1d((2, 1), 3.5),
     (3, 4)),
    ("ConstantPad2d(1,-2)", lambda: nn.ConstantPad2d(1, -2.0), lambda: TNN.ConstantPad2d(1, -2.0), (2, 3, 4)),
    ("ConstantPad3d((1,0,0,1,2,0),1)", lambda: nn.ConstantPad3d((1, 0, 0, 1, 2, 0), 1.0),
     lambda: TNN.ConstantPad3d((1, 0, 0, 1, 2, 0), 1.0), (2, 2, 3, 2)),
    ("ReflectionPad1d((3,1))", lambda: nn.ReflectionPad1d((3, 1)), lambda: TNN.ReflectionPad1d((3, 1)), (2, 3, 5)),
    ("ReflectionPad2d(2)", lambda: nn.ReflectionPad2d(2), lambda: TNN.ReflectionPad2d(2), (2, 3, 4, 5)),
    ("ReflectionPad2d((1,2,0,3)) 3-d", lambda: nn.ReflectionPad2d((1, 2, 0, 3)),
     lambda: TNN.ReflectionPad2d((1, 2, 0, 3)), (3, 4, 5)),
    ("ReplicationPad1d((0,4))", lambda: nn.ReplicationPad1d((0, 4)), lambda: TNN.ReplicationPad1d((0, 4)), (3, 2)),
    ("ReplicationPad2d((2,1,3,0))", lambda: nn.ReplicationPad2d((2, 1, 3, 0)),
     lambda: TNN.ReplicationPad2d((2, 1, 3, 0)), (2, 3, 3, 4)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", PADS, ids=[c[0] for c in PADS])
def test_padding_modules_match_torch(case: Any, dtype: str) -> None:
    name, ours, theirs, shape = case
    m, tm = ours(), theirs()
    _check(m, tm, shape, dtype, name)
    assert repr(m) == repr(tm)


def test_padding_module_errors_name_the_layer() -> None:
    with pytest.raises(ShapeError, match=r"ZeroPad2d: padding must be an int or a tuple of 4 ints, got \(1, 2\)"):
        nn.ZeroPad2d((1, 2))
    with pytest.raises(ShapeError, match=r"ConstantPad1d: value must be a number, got 'a'"):
        nn.ConstantPad1d(1, "a")  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"ReflectionPad2d: expected a 3-d \[C, \*spatial\] or 4-d"):
        nn.ReflectionPad2d(1)(tp.randn(4, 5))
    with pytest.raises(ShapeError, match=r"reflect padding of axis 2 \(size 3\).*below the size, got \(3, 0\)"):
        nn.ReflectionPad1d((3, 0))(tp.randn(1, 2, 3))


# ---- Upsample / interpolate --------------------------------------------------------------------------------

INTERP: list[tuple[tuple[int, ...], dict[str, Any]]] = [
    ((2, 3, 5), dict(scale_factor=2)),
    ((2, 3, 5), dict(scale_factor=1.7)),
    ((2, 3, 7), dict(size=3)),
    ((2, 3, 4), dict(size=11)),
    ((1, 2, 4, 5), dict(scale_factor=2)),
    ((1, 2, 4, 5), dict(scale_factor=(0.5, 2.3))),
    ((2, 1, 5, 3), dict(size=(7, 2))),
    ((1, 2, 5, 4), dict(scale_factor=1.5, recompute_scale_factor=True)),
    ((1, 2, 3, 4, 2), dict(scale_factor=(2, 1.5, 3))),
    ((1, 1, 4, 3, 5), dict(size=(2, 5, 3))),
    ((1, 2, 10, 3), dict(scale_factor=(1.05, 2))),  # sizes kept by a scale != 1: a copy
    ((1, 1, 10, 7), dict(scale_factor=(1.05, 1.1))),
    ((1, 2, 10), dict(scale_factor=1.05, recompute_scale_factor=True)),
    ((1, 1, 34), dict(scale_factor=1.3)),
]
LINEAR = {3: "linear", 4: "bilinear", 5: "trilinear"}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("align", ["nearest", False, True])
@pytest.mark.parametrize("case", INTERP, ids=[f"{s}-{k}" for s, k in INTERP])
def test_interpolate_matches_torch(case: Any, align: Any, dtype: str) -> None:
    shape, kwargs = case
    mode = "nearest" if align == "nearest" else LINEAR[len(shape)]
    corners = None if align == "nearest" else align
    _check(lambda x: F.interpolate(x, mode=mode, align_corners=corners, **kwargs),
           lambda x: TF.interpolate(x, mode=mode, align_corners=corners, **kwargs), shape, dtype,
           f"interpolate {mode} align_corners={corners} {kwargs}")


@pytest.mark.parametrize("n, kwargs", [(16, dict(size=82)), (33, dict(scale_factor=2.7)), (35, dict(scale_factor=2.7))])
def test_float64_nearest_reads_what_torch_reads(n: int, kwargs: Any) -> None:
    # torch's float64 nearest forward floors the float64 coordinate rounded to float32; its backward computes
    # the coordinate in float32 and adds some cotangents into a neighbour of the entry read. Our values are
    # torch's, and our gradient adds each cotangent into the entry its output read (found from torch's forward
    # of arange(n)).
    a = RNG.standard_normal((1, 1, n))
    x = tp.tensor(a, requires_grad=True)
    y = F.interpolate(x, **kwargs)
    _close(y, TF.interpolate(torch.tensor(a), **kwargs), "float64", "values")
    read = TF.interpolate(torch.arange(n, dtype=torch.float64).reshape(1, 1, n), **kwargs).numpy().astype(int)
    w = RNG.standard_normal(tuple(y.shape))
    (y * tp.tensor(w)).sum().backward()
    want = np.zeros(n)
    np.add.at(want, read[0, 0], w[0, 0])
    assert x.grad is not None
    np.testing.assert_allclose(x.grad.numpy()[0, 0], want, rtol=1e-12, atol=1e-12)


def test_nearest_copies_an_axis_whose_size_a_scale_keeps() -> None:
    # torch's 1-d nearest forward reads [0, 0, 1, ..., 8] for scale_factor=1.05 on 10 entries, but its gradient
    # (and its 2-d forward) is the copy's; ours is the copy in both
    a = RNG.standard_normal((1, 2, 10))
    x, tx = tp.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y = F.interpolate(x, scale_factor=1.05)
    np.testing.assert_array_equal(y.detach().numpy(), a)
    np.testing.assert_array_equal(y.detach().numpy(),
                                  TF.interpolate(torch.tensor(a)[:, :, None], scale_factor=(1, 1.05))[:, :, 0].numpy())
    w = RNG.standard_normal((1, 2, 10))
    (y * tp.tensor(w)).sum().backward()
    (TF.interpolate(tx, scale_factor=1.05) * torch.tensor(w)).sum().backward()
    _close(x.grad, tx.grad, "float64", "gradient")


def test_upsample_module_matches_torch_and_its_repr() -> None:
    for kwargs in (dict(scale_factor=2), dict(size=(3, 7)), dict(scale_factor=(2, 3), mode="bilinear"),
                   dict(scale_factor=1.5, mode="bilinear", align_corners=True)):
        m, tm = nn.Upsample(**kwargs), TNN.Upsample(**kwargs)
        assert repr(m) == repr(tm)
        _check(m, tm, (2, 3, 4, 5), "float32", repr(m))


def test_interpolate_errors() -> None:
    x = tp.randn(1, 2, 4, 4)
    with pytest.raises(ArgumentError, match=r"interpolate: give exactly one of size and scale_factor"):
        F.interpolate(x)
    with pytest.raises(ArgumentError, match=r"interpolate: give exactly one of size and scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ShapeError, match=r"interpolate: mode 'linear' needs a 3-d input, got shape \[1, 2, 4, 4\]"):
        F.interpolate(x, scale_factor=2, mode="linear")
    with pytest.raises(ArgumentError, match=r"interpolate: align_corners can only be set .* mode 'nearest'"):
        F.interpolate(x, scale_factor=2, align_corners=True)
    with pytest.raises(ArgumentError, match=r"interpolate: mode must be 'nearest', .* got 'bicubic'"):
        F.interpolate(x, scale_factor=2, mode="bicubic")
    with pytest.raises(ShapeError, match=r"interpolate: size must be a positive int or 2 of them .* got \(3, 4, 5\)"):
        F.interpolate(x, size=(3, 4, 5))
    with pytest.raises(ShapeError, match=r"interpolate: expected an input \[N, C, \*spatial\] with 1 to 3"):
        F.interpolate(tp.randn(3, 4), scale_factor=2)
    with pytest.raises(ShapeError, match=r"Upsample: scale_factor 0.1 gives the empty output size"):
        nn.Upsample(scale_factor=0.1)(x)
    with pytest.raises(ArgumentError, match=r"Upsample: give exactly one of size and scale_factor"):
        nn.Upsample()


# ---- ParameterList / ParameterDict -------------------------------------------------------------------------

class _Holder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.plist = nn.ParameterList([tp.randn(3), nn.Parameter(tp.randn(2, 2))])
        self.pdict = nn.ParameterDict({"scale": tp.randn(4), "shift": tp.randn(1)})
        self.lin = nn.Linear(2, 2)


def _torch_holder() -> Any:
    holder = TNN.Module()
    holder.plist = TNN.ParameterList([torch.randn(3), TNN.Parameter(torch.randn(2, 2))])
    holder.pdict = TNN.ParameterDict({"scale": torch.randn(4), "shift": torch.randn(1)})
    holder.lin = TNN.Linear(2, 2)
    return holder


def test_parameter_containers_register_like_torch() -> None:
    m, tm = _Holder(), _torch_holder()
    assert list(m.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in tm.named_parameters()]
    m.plist.append(tp.randn(5))
    tm.plist.append(torch.randn(5))
    m.plist.extend([tp.randn(1)])
    tm.plist.extend([torch.randn(1)])
    m.pdict["extra"] = tp.randn(2)
    tm.pdict["extra"] = torch.randn(2)
    m.pdict.update({"more": tp.randn(2)})
    tm.pdict.update({"more": torch.randn(2)})
    assert list(m.state_dict()) == list(tm.state_dict())
    assert len(m.plist) == len(tm.plist) == 4 and len(m.pdict) == len(tm.pdict) == 4
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.plist)
    assert list(m.pdict) == list(tm.pdict) and list(m.pdict.keys()) == list(tm.pdict.keys())
    # a torch state dict loads into ours
    state = {k: tp.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()}
    m.load_state_dict(state)
    np.testing.assert_array_equal(m.plist[-1].detach().numpy(), tm.plist[-1].detach().numpy())
    np.testing.assert_array_equal(m.pdict["scale"].detach().numpy(), tm.pdict["scale"].detach().numpy())


def test_parameter_list_indexing_and_gradients() -> None:
    a, b = tp.randn(3), tp.randn(3)
    plist = nn.ParameterList([a, b])
    assert plist[-1] is plist[1] and isinstance(plist[0], nn.Parameter)
    np.testing.assert_array_equal(plist[0].detach().numpy(), a.numpy())
    new = nn.Parameter(tp.randn(3))
    plist[0] = new
    assert plist[0] is new and list(plist) == [new, plist[1]]
    assert [p for p in plist[1:]] == [plist[1]]
    plist += [tp.randn(3)]
    assert [n for n, _ in plist.named_parameters()] == ["0", "1", "2"]
    (plist[0] * plist[1] + plist[2]).sum().backward()
    g0, g2 = plist[0].grad, plist[2].grad
    assert g0 is not None and g2 is not None
    np.testing.assert_allclose(g0.numpy(), plist[1].detach().numpy())
    np.testing.assert_allclose(g2.numpy(), np.ones(3, np.float32))
    pdict = nn.ParameterDict([("w", tp.randn(2))])
    assert "w" in pdict and pdict.get("z") is None
    assert pdict.pop("w").shape == (2,) and len(pdict) == 0


def test_parameter_container_errors() -> None:
    plist = nn.ParameterList([tp.randn(2)])
    with pytest.raises(IndexRangeError, match=r"ParameterList\[...\]: index 3 is out of range for 1 parameters"):
        plist[3]
    with pytest.raises(TensorplayError, match=r"ParameterList.append: expected a tp.nn.Parameter or a tensor, got str"):
        plist.append("w")
    with pytest.raises(TensorplayError, match=r"ParameterList.extend: item 1: expected .* got int"):
        plist.extend([tp.randn(1), 3])
    assert len(plist) == 1
    pdict = nn.ParameterDict()
    with pytest.raises(KeyLookupError, match=r"ParameterDict: no parameter 'w'; its keys are \[\]"):
        pdict["w"]
    with pytest.raises(TensorplayError, match=r"can't be empty or contain '\.'"):
        pdict["a.b"] = tp.randn(1)


# ---- InstanceNorm ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", [
    ("1d", {}, (3, 4, 7)), ("1d", dict(affine=True), (3, 4, 7)), ("1d", {}, (4, 6)),
    ("2d", {}, (2, 4, 3, 5)), ("2d", dict(affine=True, eps=1e-3), (2, 4, 3, 5)), ("2d", dict(affine=True), (4, 3, 2)),
    ("2d", dict(track_running_stats=True, affine=True, momentum=0.3), (3, 4, 2, 5)),
])
def test_instance_norm_matches_torch(config: Any, dtype: str) -> None:
    kind, kwargs, shape = config
    m = (nn.InstanceNorm1d if kind == "1d" else nn.InstanceNorm2d)(4, dtype=dtype, **kwargs)
    tm = (TNN.InstanceNorm1d if kind == "1d" else TNN.InstanceNorm2d)(4, dtype=getattr(torch, dtype), **kwargs)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict())
    if m.weight is not None:
        w, b = RNG.uniform(0.5, 2, 4).astype(dtype), RNG.standard_normal(4).astype(dtype)
        m.load_state_dict({**{k: v for k, v in m.state_dict().items()}, "weight": tp.tensor(w), "bias": tp.tensor(b)})
        with torch.no_grad():
            tm.weight.copy_(torch.tensor(w))
            tm.bias.copy_(torch.tensor(b))
    for _ in range(2):
        _check(m, tm, shape, dtype, f"InstanceNorm{kind} {kwargs}")
    if m.weight is not None:
        # sums over two calls, the batch and the spatial axes (float32 rounding grows with them)
        _close(m.weight.grad, tm.weight.grad, dtype, "weight gradient", 20.0)
        _close(m.bias.grad, tm.bias.grad, dtype, "bias gradient", 20.0)
    if m.running_mean is not None:
        _close(m.running_mean, tm.running_mean, dtype, "running_mean")
        _close(m.running_var, tm.running_var, dtype, "running_var")
        m.eval()
        tm.eval()
        _check(m, tm, shape, dtype, "eval with running statistics")


def test_functional_instance_norm_and_errors() -> None:
    a = RNG.standard_normal((2, 3, 4, 4))
    rm, rv = np.zeros(3), np.ones(3)
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    got = F.instance_norm(tp.tensor(a), tp.tensor(rm), tp.tensor(rv), momentum=0.5)
    want = TF.instance_norm(torch.tensor(a), trm, trv, momentum=0.5)
    _close(got, want, "float64", "instance_norm")
    with pytest.raises(ShapeError, match=r"instance_norm: expected more than 1 spatial element .* \[2, 3, 1\]"):
        F.instance_norm(tp.randn(2, 3, 1))
    with pytest.raises(ShapeError, match=r"instance_norm: weight must have shape \[3\] .* got \[2\]"):
        F.instance_norm(tp.randn(2, 3, 4), weight=tp.randn(2))
    with pytest.raises(ShapeError, match=r"InstanceNorm2d: expected a 3-d \[C, \*spatial\] or 4-d"):
        nn.InstanceNorm2d(3)(tp.randn(2, 3))
    with pytest.raises(ShapeError, match=r"InstanceNorm1d: expected 3 channels \(num_features\), got input"):
        nn.InstanceNorm1d(3, affine=True)(tp.randn(2, 4, 5))


# ---- compile, vmap, ONNX -----------------------------------------------------------------------------------

def _model(x: Any) -> Any:
    y = F.pixel_shuffle(F.pad(x, (1, 0, 0, 1), mode="reflect"), 2)
    y = F.interpolate(y, scale_factor=(1.5, 2), mode="bilinear") + F.interpolate(y, size=(12, 24))
    return F.instance_norm(F.pixel_unshuffle(y[..., :8, :], 2))


def _model_torch(x: Any) -> Any:
    y = TF.pixel_shuffle(TF.pad(x, (1, 0, 0, 1), mode="reflect"), 2)
    y = TF.interpolate(y, scale_factor=(1.5, 2), mode="bilinear") + TF.interpolate(y, size=(12, 24))
    return TF.instance_norm(TF.pixel_unshuffle(y[..., :8, :], 2))


def test_compile_grad_and_vmap_match_eager_and_torch() -> None:
    a = RNG.standard_normal((2, 8, 3, 5))
    eager = _model(tp.tensor(a))
    _close(eager, _model_torch(torch.tensor(a)), "float64", "eager")
    np.testing.assert_allclose(tp.compile(_model)(tp.tensor(a)).numpy(), eager.numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tp.func.vmap(lambda x: _model(x[None])[0])(tp.tensor(a)).numpy(), eager.numpy(),
                               rtol=1e-12, atol=1e-12)
    w = RNG.standard_normal(tuple(eager.shape))
    tx = torch.tensor(a, requires_grad=True)
    (_model_torch(tx) * torch.tensor(w)).sum().backward()

    def loss(x: Any) -> Any:
        return (_model(x) * tp.tensor(w)).sum()

    _close(tp.func.grad(loss)(tp.tensor(a)), tx.grad, "float64", "grad")
    np.testing.assert_allclose(tp.compile(tp.func.grad(loss))(tp.tensor(a)).numpy(), tx.grad.numpy(), rtol=1e-10,
                               atol=1e-12)
    net = nn.Sequential(nn.ZeroPad2d(1), nn.Unflatten(1, (2, 3)))
    compiled = tp.compile(net)
    b = RNG.standard_normal((2, 6, 3, 3))
    np.testing.assert_array_equal(compiled(tp.tensor(b)).numpy(), net(tp.tensor(b)).numpy())


def test_onnx_export_runs_in_onnx_runtime() -> None:
    pytest.importorskip("onnxruntime")
    from tensorplay.export import export
    from tensorplay.export.onnx import to_onnx
    from tests.onnx_helpers import assert_matches, check_written, run_ort

    model = nn.Sequential(nn.Linear(6, 48), nn.Unflatten(1, (12, 2, 2)), nn.ZeroPad2d((1, 0, 0, 1)),
                          nn.PixelShuffle(2), nn.Upsample(scale_factor=2), nn.InstanceNorm2d(3))
    x = tp.randn(5, 6)
    written = to_onnx(export(model, (x,)))
    check_written(written)
    (name,) = [i.name for i in written.graph.input if i.name not in {t.name for t in written.graph.initializer}]
    got = run_ort(written, {name: x.numpy()})[0]
    assert got.shape == (5, 3, 12, 12)
    assert_matches(got, model(x).detach().numpy(), "onnx model")


class _Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ws = nn.ParameterList([tp.randn(4, 4) for _ in range(2)])
        self.extra = nn.ParameterDict({"b": tp.randn(4)})

    def forward(self, x: Any) -> Any:
        for w in self.ws:
            x = (x @ w).tanh()
        return x + self.extra["b"]


def test_parameter_containers_under_compile_and_backward() -> None:
    m = _Stack()
    compiled = tp.compile(m)
    x = tp.randn(3, 4)
    np.testing.assert_allclose(compiled(x).detach().numpy(), m(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    compiled(x).sum().backward()
    got = [p.grad.numpy().copy() for p in m.parameters() if p.grad is not None]
    m.zero_grad()
    # the same model in torch, with our values
    tws = [torch.tensor(w.detach().numpy(), requires_grad=True) for w in m.ws]
    tb = torch.tensor(m.extra["b"].detach().numpy(), requires_grad=True)
    y = torch.tensor(x.numpy())
    for w in tws:
        y = (y @ w).tanh()
    (y + tb).sum().backward()
    assert len(got) == 3
    for g, t in zip(got, [*tws, tb]):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-5, atol=1e-6)
