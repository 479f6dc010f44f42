"""The examples in the docstrings of tensorplay.testing run as doctests, and every public function has one."""

from __future__ import annotations

import pytest

import tensorplay.testing as T
from tests.helpers import assert_doctests_pass

MODULES = ["tensorplay.testing.compare", "tensorplay.testing.finite_differences", "tensorplay.testing.grads",
           "tensorplay.testing.swap", "tensorplay.testing.strategies"]


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")  # .example() in doctests
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    assert_doctests_pass(name)


def test_every_public_function_has_a_docstring_and_the_main_ones_an_example() -> None:
    from tensorplay.testing import strategies

    public = [getattr(T, n) for n in T.__all__] + [getattr(strategies, n) for n in strategies.__all__]
    assert all((obj.__doc__ or "").strip() for obj in public)
    for fn in (T.assert_close, T.check_grads, T.check_interpreters, T.numerical_jvp, T.numerical_vjp,
               strategies.tensors, strategies.shapes, strategies.arguments):
        assert ">>>" in (fn.__doc__ or ""), fn.__name__
