"""The examples in the docstrings of tensorplay.func run as doctests."""

from __future__ import annotations

import pytest

from tests.helpers import assert_doctests_pass

MODULES = [
    "tensorplay.func", "tensorplay.func.vjp", "tensorplay.func.jvp", "tensorplay.func.vmap", "tensorplay.func.jac",
    "tensorplay.func.module_utils", "tensorplay.func.functionalize", "tensorplay.func.rearrange",
    "tensorplay.pytree", "tensorplay.func.tracing",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    assert_doctests_pass(name)


def test_every_public_function_has_an_example() -> None:
    import tensorplay.func as F

    missing = [n for n in F.__all__ if callable(getattr(F, n)) and not isinstance(getattr(F, n), type)
               and ">>>" not in (getattr(F, n).__doc__ or "")]
    assert not missing, f"public functions without a doctest example: {missing}"
