"""The ``tp.<name>`` forms of Tensor methods (``tp.sum``, ``tp.clip``, ...): a first argument that is not a
tensor is an ArgumentTypeError naming the function (torch raises a TypeError), and tensors go through
unchanged, under eager and tp.compile."""

from __future__ import annotations

import types

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.functions as functions

torch = pytest.importorskip("torch")

METHOD_FORMS = sorted(name for name in tp.__all__ if isinstance(getattr(functions, name, None), types.FunctionType)
                      and getattr(getattr(functions, name), "__wrapped__", None) is not None
                      and getattr(tp.Tensor, getattr(functions, name).__wrapped__.__name__, None)
                      is getattr(functions, name).__wrapped__)


def test_the_method_forms_are_many_and_exported() -> None:
    assert len(METHOD_FORMS) > 150
    assert {"sum", "clip", "nonzero", "tan", "mm"} <= set(METHOD_FORMS)
    assert all(getattr(tp, name) is getattr(functions, name) for name in METHOD_FORMS)


@pytest.mark.parametrize("name", METHOD_FORMS)
@pytest.mark.parametrize("bad", [[1.0, 2.0], 2.0, np.ones(2, np.float32)])
def test_a_non_tensor_first_argument_is_an_argument_type_error(name: str, bad: object) -> None:
    if name == "pow" and isinstance(bad, float):
        pytest.skip("tp.pow(2.0, x) is a number raised to a tensor's powers")
    with pytest.raises(tp.ArgumentTypeError, match=rf"tp\.{name}\(\): argument 'input' \(position 1\) must be a "
                                                     rf"Tensor, got {type(bad).__name__}"):
        getattr(tp, name)(bad)
    with pytest.raises(TypeError):  # as torch: a TypeError
        getattr(tp, name)(bad)


def test_method_forms_compute_what_the_methods_do() -> None:
    x = tp.tensor([[1.0, -2.0], [3.0, 0.5]])
    assert tp.sum(x, 1).tolist() == x.sum(1).tolist()
    assert tp.clip(x, -1.0, 1.0).tolist() == x.clamp(-1.0, 1.0).tolist()
    assert tp.sum.__name__ == "sum" and tp.clip.__name__ == "clip" and tp.sum.__doc__ == tp.Tensor.sum.__doc__
    np.testing.assert_allclose(tp.pow(2, x).numpy(), torch.pow(2, torch.tensor(x.numpy())).numpy())
    compiled = tp.compile(lambda t: tp.sum(tp.tanh(t), 0))
    for _ in range(2):
        np.testing.assert_allclose(compiled(x).numpy(), np.tanh(x.numpy()).sum(0), rtol=1e-6)
