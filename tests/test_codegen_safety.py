"""Generated code never runs user text: names become generated identifiers, strings appear only as
escaped literals, comments are escaped. Each test tries an injection through one user-controlled
string that reaches code generation, then checks that nothing ran and the values are right."""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.errors import GraphCaptureError
from tensorplay.graph import trace
from tensorplay.interpreters.graph.codegen import python_code
from tensorplay.symbolic import SymDim

FLAG = "_tensorplay_injected"
# a newline ends a comment; the statement then runs in the generated function's body
STATEMENT = f"setattr(__import__('builtins'), '{FLAG}', 1)"  # no '.': also valid as a parameter name
PAYLOAD = f"a\n    {STATEMENT}\n    #"
LINE_BREAKS = ["\n", "\r", "\r\n"]


@pytest.fixture(autouse=True)
def no_flag() -> Iterator[None]:
    builtins.__dict__.pop(FLAG, None)
    yield
    assert FLAG not in builtins.__dict__, "user text was executed by generated code"


def payloads() -> list[str]:
    return [PAYLOAD.replace("\n", brk) for brk in LINE_BREAKS] + [
        f"x'); {STATEMENT}; ('",
        'b"\n    ' + STATEMENT.replace("'", '"') + '\n    #',
    ]


def _assert_dot_strings_closed(dot: str) -> None:
    """Every line of the dot source is one statement whose quoted strings all close on it."""
    for line in dot.splitlines():
        assert not line.lstrip().startswith(("setattr", "#")), line
        inside, escaped = False, False
        for ch in line:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = not inside
        assert not inside, line


def _run_and_read_code(gm: Any, *args: Any) -> Any:
    out = gm(*args)
    out = gm(*args)  # the generated function is compiled once and then reused
    assert isinstance(gm.code, str)
    compile(gm.code, "<check>", "exec")  # still valid Python
    return out


@pytest.mark.parametrize("key", payloads())
def test_pytree_dict_keys(key: str) -> None:
    x = tp.tensor([1.0, 2.0])
    gm = trace(lambda d: d[key] * 2, {key: x})
    np.testing.assert_allclose(_run_and_read_code(gm, {key: x}).numpy(), [2.0, 4.0])


@pytest.mark.parametrize("name", payloads())
def test_parameter_and_buffer_names(name: str) -> None:
    class M(tp.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_parameter(name, tp.nn.Parameter(tp.tensor([3.0])))
            self.register_buffer(name + "_buf", tp.tensor([4.0]))

        def forward(self, x: Any) -> Any:
            return x * getattr(self, name) + getattr(self, name + "_buf")

    m = M()
    gm = trace(m, tp.tensor([1.0, 2.0]))
    np.testing.assert_allclose(_run_and_read_code(gm, tp.tensor([1.0, 2.0])).detach().numpy(), [7.0, 10.0])
    _assert_dot_strings_closed(gm.to_dot())
    np.testing.assert_allclose(gm(tp.tensor([1.0, 2.0]), state={name: tp.tensor([1.0])}).detach().numpy(),
                               [5.0, 6.0])


def test_file_names_of_user_code() -> None:
    # the user's source location (file name) is written into each node's comment
    namespace: dict[str, Any] = {}
    source = "def f(x):\n    return x * 3\n"
    exec(compile(source, "evil" + PAYLOAD, "exec"), namespace)
    gm = trace(namespace["f"], tp.tensor([1.0, 2.0]))
    np.testing.assert_allclose(_run_and_read_code(gm, tp.tensor([1.0, 2.0])).numpy(), [3.0, 6.0])
    assert gm.code.count("\n") == len(gm.code.splitlines())  # the comment stayed on its line


def test_string_params_are_plain_literals() -> None:
    class Evil(str):
        def __repr__(self) -> str:
            return f"'float64'); {STATEMENT}; ('"

    gm = trace(lambda x: x.double(), tp.tensor([1.0]))
    node = next(n for n in gm.graph.nodes if n.target == "cast")
    node.params["dtype"] = Evil("float64")
    gm.recompile()
    out = _run_and_read_code(gm, tp.tensor([1.0]))
    assert out.dtype == tp.float64


def test_scalar_subclasses_render_as_numbers() -> None:
    class EvilFloat(float):
        def __repr__(self) -> str:
            return f"0); {STATEMENT}; (0"

    class EvilInt(int):
        def __repr__(self) -> str:
            return f"0); {STATEMENT}; (0"

    gm = trace(lambda x: x * EvilFloat(2.0) + EvilInt(1), tp.ones(2))
    np.testing.assert_allclose(_run_and_read_code(gm, tp.ones(2)).numpy(), [3.0, 3.0])


def test_node_targets_and_param_names_must_be_identifiers() -> None:
    gm = trace(lambda x: x.exp(), tp.tensor([1.0]))
    node = gm.graph.nodes[0]
    node.target = f"exp(x); {STATEMENT}; ops.exp"
    gm.recompile()
    with pytest.raises(GraphCaptureError, match="ASCII Python identifier"):
        gm(tp.tensor([1.0]))
    node.target = "exp"
    node.params["a=1, **{}); import os; ops.exp(b"] = 1
    gm.recompile()
    with pytest.raises(GraphCaptureError, match="param name of exp"):
        gm(tp.tensor([1.0]))
    with pytest.raises(GraphCaptureError, match="function name"):
        python_code(trace(lambda x: x, tp.ones(1)).graph, name="f(): pass\nimport os\ndef g")


def test_names_that_normalise_to_one_identifier_stay_distinct() -> None:
    # Python NFKC-normalises identifiers: the ligature "\ufb01" and "fi" would name one variable
    d = {"\ufb01": tp.ones(2), "fi": tp.zeros(2)}
    gm = trace(lambda t: t["\ufb01"] - t["fi"], d)
    np.testing.assert_allclose(gm(d).numpy(), [1.0, 1.0])
    x = tp.ones(2, 3)
    gm2 = trace(lambda a, b: a.sum(0) * b.shape[0], x, tp.ones(5),
                dynamic=[{0: SymDim("\ufb01")}, {0: SymDim("fi")}])
    np.testing.assert_allclose(gm2(tp.ones(4, 3), tp.ones(7)).numpy(), [28.0, 28.0, 28.0])
    assert gm.code.isascii() and gm2.code.isascii()
