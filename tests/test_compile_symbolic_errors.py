"""A call that fails while ``tp.compile`` captures it with symbolic dims (a second call at other sizes, or
``dynamic=True``) raises the error eager raises, naming the call's sizes, not the capture's symbols; the
compiled function keeps working for good calls afterwards. (The capture's message may add the user's line it
was recording.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
from tensorplay.errors import TensorplayError


def _matmul(a: Any, b: Any) -> Any:
    return (a @ b).tanh()


CASES: dict[str, tuple[Callable[[], Callable[..., Any]], tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]] = {
    "linear feature size": (lambda: nn.Linear(3, 2), ((4, 3),), ((4, 5),)),
    "matmul inner size": (lambda: _matmul, ((4, 3), (3, 2)), ((5, 3), (4, 2))),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dynamic", [None, True])
def test_the_error_names_the_calls_sizes(name: str, dynamic: Any) -> None:
    make, good, bad = CASES[name]
    tp.manual_seed(0)
    fn = make()
    compiled = tp.compile(fn, dynamic=dynamic)
    good_args = [tp.randn(*s) for s in good]
    np.testing.assert_allclose(compiled(*good_args).detach().numpy(), fn(*good_args).detach().numpy(), rtol=1e-6)
    bad_args = [tp.randn(*s) for s in bad]
    with pytest.raises(TensorplayError) as eager:
        fn(*bad_args)
    with pytest.raises(TensorplayError) as got:
        compiled(*bad_args)
    assert type(got.value) is type(eager.value)
    assert str(got.value).startswith(str(eager.value))  # (the capture adds where it was recording)
    np.testing.assert_allclose(compiled(*good_args).detach().numpy(), fn(*good_args).detach().numpy(), rtol=1e-6)
