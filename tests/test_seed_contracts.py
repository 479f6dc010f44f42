"""The documented contracts of compile and export that code written for other libraries relies on: the
error a bad backend raises, ``call_exported`` on user arguments, the decomposition table as a ``dict`` and
the graph signature's renaming and copying."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import tensorplay as tp


# ---- 9. a backend returning no callable is a TypeError -------------------------------------------------------

@pytest.mark.parametrize("returned", [42, None, "compiled", [lambda *a: a]])
def test_a_backend_returning_no_callable_raises_type_error(returned: Any) -> None:
    def backend(gm: Any, examples: Any, **kwargs: Any) -> Any:
        return returned

    compiled = tp.compile(lambda x: x * 2.0, backend=backend)
    with pytest.raises(TypeError, match=rf"returned a {type(returned).__name__}, not a callable"):
        compiled(tp.randn(3))


def test_backend_error_is_still_a_value_error_for_unknown_names() -> None:
    from tensorplay.compiler import BackendError
    assert issubclass(BackendError, TypeError) and issubclass(BackendError, ValueError)
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        tp.compile(lambda x: x, backend="nope")(tp.randn(2))
