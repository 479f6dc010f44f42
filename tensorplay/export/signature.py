"""The calling convention of an exported graph: which inputs and outputs play which role.

An exported graph's placeholders are, in order: parameters, buffers, constant tensors, user inputs, random
keys; its flat outputs are: the new values of mutated state (buffers, parameters, user inputs), then the
user outputs. :class:`ExportGraphSignature` lists one :class:`InputSpec` per placeholder and one
:class:`OutputSpec` per flat output, each with its kind, the graph value (``arg``) and, for state, the
state-dict name (``target``). :class:`GraphSignature` is a compact form (names only) for callers that build
signatures by hand; :class:`WeightType` names the role a packaged weight plays.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any


class InputKind(Enum):
    """The role of a graph input."""

    USER_INPUT = "user_input"
    PARAMETER = "parameter"
    BUFFER = "buffer"
    CONSTANT_TENSOR = "constant_tensor"
    RANDOM_KEY = "random_key"


class OutputKind(Enum):
    """The role of a flat graph output."""

    USER_OUTPUT = "user_output"
    LOSS_OUTPUT = "loss_output"
    BUFFER_MUTATION = "buffer_mutation"
    PARAMETER_MUTATION = "parameter_mutation"
    USER_INPUT_MUTATION = "user_input_mutation"
    GRADIENT_TO_PARAMETER = "gradient_to_parameter"
    GRADIENT_TO_USER_INPUT = "gradient_to_user_input"


class WeightType(IntEnum):
    """The role a packaged weight plays. ``OPTIONAL_STATE``: state packaged with the program that is not part
    of its state dict (non-persistent buffers, lifted constant tensors)."""

    PARAMETER = 1
    BUFFER = 2
    OPTIONAL_STATE = 3
    USER_INPUT = 4
    USER_OUTPUT = 5
    PARAMETER_MUTATION = 6
    BUFFER_MUTATION = 7
    USER_INPUT_MUTATION = 8
    GRADIENT_TO_PARAMETER = 9
    GRADIENT_TO_USER_INPUT = 10


_INPUT_WEIGHTS = {InputKind.PARAMETER: WeightType.PARAMETER, InputKind.BUFFER: WeightType.BUFFER,
                  InputKind.CONSTANT_TENSOR: WeightType.OPTIONAL_STATE, InputKind.USER_INPUT: WeightType.USER_INPUT,
                  InputKind.RANDOM_KEY: WeightType.USER_INPUT}
_OUTPUT_WEIGHTS = {OutputKind.USER_OUTPUT: WeightType.USER_OUTPUT, OutputKind.LOSS_OUTPUT: WeightType.USER_OUTPUT,
                   OutputKind.BUFFER_MUTATION: WeightType.BUFFER_MUTATION,
                   OutputKind.PARAMETER_MUTATION: WeightType.PARAMETER_MUTATION,
                   OutputKind.USER_INPUT_MUTATION: WeightType.USER_INPUT_MUTATION,
                   OutputKind.GRADIENT_TO_PARAMETER: WeightType.GRADIENT_TO_PARAMETER,
                   OutputKind.GRADIENT_TO_USER_INPUT: WeightType.GRADIENT_TO_USER_INPUT}


_TARGETS_ARE_VALUES = (OutputKind.USER_INPUT_MUTATION, OutputKind.GRADIENT_TO_USER_INPUT)
"""The output kinds whose ``target`` is a graph value (a user input), not a state-dict name."""


@dataclass
class TensorArgument:
    """A graph value, by name."""

    name: str


@dataclass
class ConstantArgument:
    """A Python constant in place of a value (an output that is not a tensor)."""

    name: str
    value: int | float | bool | str | None


Argument = TensorArgument | ConstantArgument


@dataclass
class InputSpec:
    """One graph input: its ``kind``, the placeholder (``arg``), the state-dict name for state (``target``) and,
    for buffers, whether it is ``persistent`` (in the state dict)."""

    kind: InputKind
    arg: Argument
    target: str | None = None
    persistent: bool | None = None

    def __post_init__(self) -> None:
        if self.kind is InputKind.BUFFER and self.persistent is None:
            raise ValueError(f"InputSpec for buffer {self.target!r}: persistent must be True or False")
        if self.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR) and not self.target:
            raise ValueError(f"InputSpec of kind {self.kind.value}: needs a target (the state name)")

    def __str__(self) -> str:
        target = f" -> {self.target}" if self.target else ""
        return f"{self.arg.name}: {self.kind.value}{target}"


@dataclass
class OutputSpec:
    """One flat output: its ``kind``, the graph value (``arg``) and, for mutations and gradients, the state or
    input it belongs to (``target``)."""

    kind: OutputKind
    arg: Argument
    target: str | None = None

    def __post_init__(self) -> None:
        needs_target = self.kind not in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)
        if needs_target and not self.target:
            raise ValueError(f"OutputSpec of kind {self.kind.value}: needs a target")

    def __str__(self) -> str:
        target = f" -> {self.target}" if self.target else ""
        return f"{self.arg.name}: {self.kind.value}{target}"


@dataclass
class ExportBackwardSignature:
    """For a program that computes gradients: parameter/input gradient outputs and the loss output."""

    gradients_to_parameters: dict[str, str]
    gradients_to_user_inputs: dict[str, str]
    loss_output: str


@dataclass
class ExportGraphSignature:
    """The roles of an exported graph's inputs and flat outputs (see the module docstring)."""

    input_specs: list[InputSpec]
    output_specs: list[OutputSpec]

    # ---- inputs ----------------------------------------------------------------------------------------------
    def _targets(self, kind: InputKind) -> list[str]:
        return [str(s.target) for s in self.input_specs if s.kind is kind]

    @property
    def parameters(self) -> list[str]:
        """State-dict names of the parameter inputs, in order."""
        return self._targets(InputKind.PARAMETER)

    @property
    def buffers(self) -> list[str]:
        """State-dict names of the buffer inputs, in order."""
        return self._targets(InputKind.BUFFER)

    @property
    def non_persistent_buffers(self) -> list[str]:
        """The buffers not saved in the state dict."""
        return [str(s.target) for s in self.input_specs if s.kind is InputKind.BUFFER and not s.persistent]

    @property
    def lifted_tensor_constants(self) -> list[str]:
        """Names of the constant tensors (closures, globals, arrays baked into the program)."""
        return self._targets(InputKind.CONSTANT_TENSOR)

    @property
    def random_keys(self) -> list[str]:
        """Names of the random-key inputs (one fresh key per call unless given)."""
        return [s.arg.name for s in self.input_specs if s.kind is InputKind.RANDOM_KEY]

    @property
    def user_inputs(self) -> list[str]:
        """Names of the user inputs, in order."""
        return [s.arg.name for s in self.input_specs if s.kind is InputKind.USER_INPUT]

    def _input_map(self, kind: InputKind) -> dict[str, str]:
        return {s.arg.name: str(s.target) for s in self.input_specs if s.kind is kind}

    @property
    def inputs_to_parameters(self) -> dict[str, str]:
        """Input name -> parameter name."""
        return self._input_map(InputKind.PARAMETER)

    @property
    def inputs_to_buffers(self) -> dict[str, str]:
        """Input name -> buffer name."""
        return self._input_map(InputKind.BUFFER)

    @property
    def inputs_to_lifted_tensor_constants(self) -> dict[str, str]:
        """Input name -> constant name."""
        return self._input_map(InputKind.CONSTANT_TENSOR)

    def is_param(self, name: str) -> bool:
        """Whether ``name``, a graph value, is a parameter input. An exported program names each state input
        like its state (``"fc1.weight"``); after :meth:`replace_all_uses` renames it, the new name is the
        parameter and the old one is not (the state-dict names are :attr:`parameters`)."""
        return any(s.kind is InputKind.PARAMETER and s.arg.name == name for s in self.input_specs)

    def is_buffer(self, name: str) -> bool:
        """Whether ``name``, a graph value, is a buffer input (see :meth:`is_param`; the state-dict names are
        :attr:`buffers`)."""
        return any(s.kind is InputKind.BUFFER and s.arg.name == name for s in self.input_specs)

    def get_param_to_buffer(self) -> dict[str, str]:
        """Input name -> state-dict name for every parameter and buffer input: the lifted state a packager turns
        into weights, in input order."""
        return {s.arg.name: str(s.target) for s in self.input_specs
                if s.kind in (InputKind.PARAMETER, InputKind.BUFFER)}

    # ---- outputs ---------------------------------------------------------------------------------------------
    @property
    def user_outputs(self) -> list[str]:
        """Names of the user outputs (and the loss output), in order."""
        return [s.arg.name for s in self.output_specs
                if s.kind in (OutputKind.USER_OUTPUT, OutputKind.LOSS_OUTPUT)]

    def _output_map(self, kind: OutputKind) -> dict[str, str]:
        return {s.arg.name: str(s.target) for s in self.output_specs if s.kind is kind}

    @property
    def buffers_to_mutate(self) -> dict[str, str]:
        """Output name -> the buffer it becomes."""
        return self._output_map(OutputKind.BUFFER_MUTATION)

    @property
    def parameters_to_mutate(self) -> dict[str, str]:
        """Output name -> the parameter it becomes."""
        return self._output_map(OutputKind.PARAMETER_MUTATION)

    @property
    def user_inputs_to_mutate(self) -> dict[str, str]:
        """Output name -> the user input it becomes."""
        return self._output_map(OutputKind.USER_INPUT_MUTATION)

    @property
    def backward_signature(self) -> ExportBackwardSignature | None:
        """The gradient outputs and the loss output, for a program that computes gradients; else ``None``."""
        loss = [s.arg.name for s in self.output_specs if s.kind is OutputKind.LOSS_OUTPUT]
        if not loss:
            return None
        return ExportBackwardSignature(self._output_map(OutputKind.GRADIENT_TO_PARAMETER),
                                       self._output_map(OutputKind.GRADIENT_TO_USER_INPUT), loss[0])

    @property
    def assertion_dep_token(self) -> dict[int, str] | None:
        """Output index -> name of the token that orders run-time assertions; ``None``: the program's checks
        run before the graph (on the inputs), so it has no such token."""
        return None

    @property
    def input_tokens(self) -> list[str]:
        """Names of effect-token inputs: none (random draws take keys, an ordinary input)."""
        return []

    @property
    def output_tokens(self) -> list[str]:
        """Names of effect-token outputs: none."""
        return []

    def weight_types(self) -> dict[str, WeightType]:
        """Value name -> the role it plays, for every input and flat output."""
        out = {s.arg.name: _INPUT_WEIGHTS[s.kind] for s in self.input_specs}
        if any(s.kind is InputKind.BUFFER and not s.persistent for s in self.input_specs):
            out.update({s.arg.name: WeightType.OPTIONAL_STATE for s in self.input_specs
                        if s.kind is InputKind.BUFFER and not s.persistent})
        out.update({s.arg.name: _OUTPUT_WEIGHTS[s.kind] for s in self.output_specs})
        return out

    # ---- editing ---------------------------------------------------------------------------------------------
    def replace_all_uses(self, old: str, new: str) -> None:
        """Rename graph value ``old`` to ``new`` in every input and output spec (after a graph value was renamed
        or replaced): every ``arg``, and the ``target`` of every output that names an input value (a user
        input's mutation or gradient). State targets (the state-dict names of parameters, buffers and
        constants, and of their mutations and gradients) are names of the state, not of graph values: they
        stay, so the program still finds its tensors."""
        for spec in self.input_specs:
            if isinstance(spec.arg, TensorArgument) and spec.arg.name == old:
                spec.arg = TensorArgument(new)
        for out in self.output_specs:
            if isinstance(out.arg, TensorArgument) and out.arg.name == old:
                out.arg = TensorArgument(new)
            if out.kind in _TARGETS_ARE_VALUES and out.target == old:
                out.target = new

    def get_replace_hook(self, replace_inputs: bool = False) -> Callable[[str, str, Any], None]:
        """A function ``hook(old, new, user)`` for graph rewriters: when a value used by the outputs (``user`` is
        ``"output"``), or by anything when ``replace_inputs``, is replaced, the signature follows."""
        def hook(old: str, new: str, user: Any) -> None:
            if replace_inputs or user == "output":
                self.replace_all_uses(old, new)
        return hook

    def clone(self) -> ExportGraphSignature:
        """A deep copy (editing it leaves this one unchanged)."""
        return copy.deepcopy(self)

    def compact(self) -> GraphSignature:
        """The compact form (names only)."""
        return GraphSignature(self.parameters, self.buffers, self.non_persistent_buffers, self.user_inputs,
                              self.user_outputs, self.buffers_to_mutate, self.parameters_to_mutate)

    def __str__(self) -> str:
        lines = ["# inputs"] + [f"  {s}" for s in self.input_specs] + ["# outputs"] + \
            [f"  {s}" for s in self.output_specs]
        return "\n".join(lines)


@dataclass
class GraphSignature:
    """A compact signature: state-dict names of the ``parameters`` and ``buffers`` (the graph's first inputs,
    named like the state), which buffers are not persistent, the user inputs and outputs by name, and which
    outputs become which buffers or parameters. :meth:`to_export_graph_signature` gives the full one."""

    parameters: list[str]
    buffers: list[str]
    non_persistent_buffers: list[str] = field(default_factory=list)
    user_inputs: list[str] = field(default_factory=list)
    user_outputs: list[str] = field(default_factory=list)
    buffers_to_mutate: dict[str, str] = field(default_factory=dict)
    parameters_to_mutate: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        stray = [b for b in self.non_persistent_buffers if b not in self.buffers]
        if stray:
            raise ValueError(f"GraphSignature: non-persistent buffers {stray} are not among the buffers")

    def to_export_graph_signature(self) -> ExportGraphSignature:
        """The full signature: parameters, buffers, user inputs; mutations, then user outputs."""
        inputs = [InputSpec(InputKind.PARAMETER, TensorArgument(p), p) for p in self.parameters]
        inputs += [InputSpec(InputKind.BUFFER, TensorArgument(b), b, b not in self.non_persistent_buffers)
                   for b in self.buffers]
        inputs += [InputSpec(InputKind.USER_INPUT, TensorArgument(u)) for u in self.user_inputs]
        outputs = [OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(o), t)
                   for o, t in self.buffers_to_mutate.items()]
        outputs += [OutputSpec(OutputKind.PARAMETER_MUTATION, TensorArgument(o), t)
                    for o, t in self.parameters_to_mutate.items()]
        outputs += [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(u)) for u in self.user_outputs]
        return ExportGraphSignature(inputs, outputs)


__all__ = ["Argument", "ConstantArgument", "ExportBackwardSignature", "ExportGraphSignature", "GraphSignature",
           "InputKind", "InputSpec", "OutputKind", "OutputSpec", "TensorArgument", "WeightType"]
