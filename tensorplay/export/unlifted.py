"""``ep.module()``: an exported program as a module taking only the user's arguments.

The program's parameters and buffers are registered at their dotted paths (``fc1.weight`` is parameter
``weight`` of an empty submodule ``fc1``), so ``state_dict()`` has the original keys and
``load_state_dict`` works; each call reads the module's current state, checks the inputs, runs the graph,
writes buffer and parameter mutations back into the module's tensors and draws the random keys from the
global generator (``tp.manual_seed`` before a call replays it exactly).
"""

from __future__ import annotations

from typing import Any

from tensorplay.export.signature import InputKind
from tensorplay.nn.module import Module
from tensorplay.nn.parameter import Parameter
from tensorplay.tensor import highest_interpreter
from tensorplay.interpreters.eager.interpreter import eager


def place(root: Module, path: str, value: Any, kind: str, persistent: bool = True) -> None:
    """Register ``value`` at dotted ``path`` under ``root`` (creating empty submodules on the way) as a
    parameter (``kind == "parameter"``) or a buffer."""
    *parents, leaf = path.split(".")
    module = root
    for name in parents:
        child = module._modules.get(name)
        if child is None:
            child = Module()
            module.register_module(name, child)
        module = child
    if kind == "parameter":
        module.register_parameter(leaf, value if isinstance(value, Parameter) else Parameter(value))
    else:
        module.register_buffer(leaf, value, persistent=persistent)


def place_state(root: Module, program: Any) -> None:
    """Register ``program``'s parameters and buffers on ``root`` at their dotted paths."""
    for spec in program.graph_signature.input_specs:
        target = str(spec.target)
        if spec.kind is InputKind.PARAMETER:
            place(root, target, program.state_dict[target], "parameter")
        elif spec.kind is InputKind.BUFFER:
            value = program.state_dict[target] if spec.persistent else program.constants[target]
            place(root, target, value, "buffer", bool(spec.persistent))


def state_of(root: Module, program: Any) -> dict[str, Any]:
    """Every state tensor the program reads, by name: its constants, then ``root``'s parameters and buffers
    (what the module holds now: ``load_state_dict`` on it changes what the program computes)."""
    state: dict[str, Any] = dict(program.constants)
    state.update(root.named_parameters())
    state.update(root.named_buffers())
    return state


class ExportedModule(Module):
    """An exported program with its state folded back in (see the module docstring)."""

    program: Any

    def __init__(self, program: Any) -> None:
        super().__init__()
        object.__setattr__(self, "program", program)
        place_state(self, program)

    def _get_name(self) -> str:
        return f"ExportedModule[{self.program.name}]"

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the program on the user's arguments (structure as exported)."""
        program = self.program
        leaves = program.user_leaves(args, kwargs)
        binding = program.check_inputs(leaves)
        ops = highest_interpreter(leaves, eager)
        values = program.placeholder_values(leaves, state_of(self, program), ops=ops)
        flat = program.run_flat(values, binding)
        n_mutations = len(program.graph.mutations)
        program.apply_state_mutations(values, flat[:n_mutations])
        return program.results(flat[n_mutations:], binding)

    def extra_repr(self) -> str:
        return f"{len(self.program.graph.nodes)} nodes; range constraints {self.program.range_constraints}"


__all__ = ["ExportedModule", "place", "place_state", "state_of"]
