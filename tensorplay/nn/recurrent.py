"""Recurrent layers with PyTorch's API, parameter names, shapes, gate order and initialisation:
``RNN`` (tanh or relu), ``LSTM``, ``GRU`` and the one-step cells ``RNNCell``, ``LSTMCell``, ``GRUCell``.

A layer ``k`` (direction suffix ``_reverse`` for the backward one of a bidirectional layer) holds
``weight_ih_l{k}[G*H, I_k]``, ``weight_hh_l{k}[G*H, H]``, ``bias_ih_l{k}[G*H]``, ``bias_hh_l{k}[G*H]``,
where ``G`` is 1 (RNN), 4 (LSTM, gates ``i, f, g, o``) or 3 (GRU, gates ``r, z, n``), ``H`` the hidden
size and ``I_k`` the input size (``I`` for layer 0, ``H * directions`` above it); a cell holds the same
four without the suffix. Every parameter starts as ``U(-1/sqrt(H), 1/sqrt(H))``, as PyTorch. A
PyTorch state dict therefore loads as is.

The step equations (``x W^T + b`` written ``W x + b``; ``*`` elementwise)::

    RNN:  h' = act(W_ih x + b_ih + W_hh h + b_hh)
    LSTM: i, f, g, o = split(W_ih x + b_ih + W_hh h + b_hh);  c' = sigmoid(f) * c + sigmoid(i) * tanh(g)
          h' = sigmoid(o) * tanh(c')
    GRU:  r = sigmoid(W_ir x + b_ir + W_hr h + b_hr);  z = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
          n = tanh(W_in x + b_in + r * (W_hn h + b_hn));  h' = (1 - z) * n + z * h

Everything is composed from existing operations (``linear``, ``sigmoid``, ``tanh``, indexing, ``stack``,
``cat``) in a Python loop over the time axis, so the layers run eagerly, under ``tp.compile``, export and
the transforms of ``tensorplay.func`` with no rules of their own; the sequence length is unrolled (a
recorded graph is specialised to it). The input projections ``W_ih x + b_ih`` of all time steps are one
matmul per layer and direction, computed before the loop.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import TYPE_CHECKING, Any

from tensorplay.creation import cat, stack
from tensorplay.errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from tensorplay.nn import functional as F
from tensorplay.nn import init
from tensorplay.nn._util import layer_size, ops_for
from tensorplay.nn.linear import empty_parameter
from tensorplay.nn.module import Module
from tensorplay.tensor import Tensor

AnyTensor = Tensor[*tuple[Any, ...]]
State = tuple[AnyTensor, AnyTensor | None]  # (h, c); c is None except for the LSTM

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---- the step equations --------------------------------------------------------------------------

def _gate(t: AnyTensor, k: int, hidden: int) -> AnyTensor:
    """Gate ``k`` (``hidden`` columns) of the stacked pre-activations ``t[..., G*hidden]``."""
    return t[..., k * hidden:(k + 1) * hidden]


def _step(mode: str, gi: AnyTensor, h: AnyTensor, c: AnyTensor | None, w_hh: AnyTensor,
          b_hh: AnyTensor | None) -> State:
    """One time step from the input projection ``gi[*B, G*H] = W_ih x + b_ih`` and the state ``h[*B, H]``
    (``c[*B, H]`` too for the LSTM): the new ``(h, c)`` (``c`` None except for the LSTM)."""
    gh = F.linear(h, w_hh, b_hh)
    hidden = h.shape[-1]
    if mode == "RNN_TANH":
        return F.tanh(gi + gh), None
    if mode == "RNN_RELU":
        return F.relu(gi + gh), None
    if mode == "LSTM":
        assert c is not None
        gates = gi + gh
        i = F.sigmoid(_gate(gates, 0, hidden))
        f = F.sigmoid(_gate(gates, 1, hidden))
        g = F.tanh(_gate(gates, 2, hidden))
        o = F.sigmoid(_gate(gates, 3, hidden))
        c_new = f * c + i * g
        return o * F.tanh(c_new), c_new
    r = F.sigmoid(_gate(gi, 0, hidden) + _gate(gh, 0, hidden))
    z = F.sigmoid(_gate(gi, 1, hidden) + _gate(gh, 1, hidden))
    n = F.tanh(_gate(gi, 2, hidden) + r * _gate(gh, 2, hidden))
    return (1.0 - z) * n + z * h, None


# ---- argument checks -----------------------------------------------------------------------------

def _check_float(where: str, name: str, t: Any, dtype: Any) -> None:
    """``t`` must be a tensor of the parameters' float dtype ``dtype``."""
    if not isinstance(t, Tensor):
        raise DTypeError(f"{where}: expected a tensorplay Tensor as {name}, got {type(t).__name__} "
                         "(convert with tp.tensor(...))")
    if t.dtype != dtype:
        raise DTypeError(f"{where}: {name} must have the parameters' dtype {dtype.name}, got {t.dtype.name} "
                         f"({name}: {t.dtype.name}{list(t.shape)})")


def _check_shape(where: str, name: str, t: AnyTensor, expected: tuple[Any, ...]) -> None:
    if tuple(t.shape) != tuple(expected):
        raise ShapeError(f"{where}: expected {name} of shape {list(expected)}, got {list(t.shape)}")


def _check_dropout(where: str, dropout: Any, num_layers: int) -> float:
    """``dropout`` as a float in ``[0, 1]`` (an :class:`ArgumentError` otherwise); a warning when it has no
    layer to act between, as PyTorch."""
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0 <= float(dropout) <= 1:
        raise ArgumentError(f"{where}: dropout should be a number in range [0, 1] representing the probability of "
                            f"an element being zeroed, got {dropout!r}")
    if float(dropout) > 0 and num_layers == 1:
        warnings.warn(f"{where}: dropout={dropout} acts between layers (after every layer but the last), so it does "
                      f"nothing with num_layers=1", UserWarning, stacklevel=4)
    return float(dropout)


def _check_mode(where: str, nonlinearity: Any) -> str:
    if nonlinearity == "tanh":
        return "RNN_TANH"
    if nonlinearity == "relu":
        return "RNN_RELU"
    raise ArgumentError(f"{where}: unknown nonlinearity {nonlinearity!r} (expected 'tanh' or 'relu')")


def _reset_uniform(module: Module, hidden_size: int) -> None:
    """Every parameter of ``module`` from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))`` (PyTorch's init)."""
    bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for p in module.parameters():
        init.uniform_(p, -bound, bound)


# ---- multi-layer recurrent layers ----------------------------------------------------------------

class _RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: construction, parameters, checks and the layer loop."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, dtype: Any = None) -> None:
        super().__init__()
        where = type(self).__name__
        self.mode = mode
        self.input_size = layer_size(input_size, "input_size", where)
        self.hidden_size = layer_size(hidden_size, "hidden_size", where, positive=True)
        self.num_layers = layer_size(num_layers, "num_layers", where, positive=True)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = _check_dropout(where, dropout, self.num_layers)
        self.bidirectional = bool(bidirectional)
        if proj_size != 0:
            raise ArgumentError(f"{where}: proj_size={proj_size!r} is not supported (only proj_size=0, no "
                                f"projection of the hidden state)")
        self.proj_size = 0
        gates = _GATES[mode] * self.hidden_size
        directions = 2 if self.bidirectional else 1
        self._flat_weights_names: list[str] = []
        for layer in range(self.num_layers):
            layer_in = self.input_size if layer == 0 else self.hidden_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes: list[tuple[str, tuple[int, ...]]] = [("weight_ih", (gates, layer_in)),
                                                             ("weight_hh", (gates, self.hidden_size))]
                if self.bias:
                    shapes += [("bias_ih", (gates,)), ("bias_hh", (gates,))]
                for stem, shape in shapes:
                    self.register_parameter(stem + suffix, empty_parameter(shape, dtype))
                    self._flat_weights_names.append(stem + suffix)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: every parameter ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        _reset_uniform(self, self.hidden_size)

    @property
    def all_weights(self) -> list[list[AnyTensor]]:
        """The parameters per layer and direction, ``[w_ih, w_hh(, b_ih, b_hh)]`` each, as PyTorch."""
        per = 4 if self.bias else 2
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _weights(self, layer: int, direction: int) -> tuple[AnyTensor, AnyTensor, AnyTensor | None, AnyTensor | None]:
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = self._parameters.get
        return (get("weight_ih" + suffix), get("weight_hh" + suffix),  # type: ignore[return-value]
                get("bias_ih" + suffix), get("bias_hh" + suffix))

    def _states(self, hx: Any, batch: Any, batched: bool, dtype: Any, ops: Any) -> tuple[AnyTensor, AnyTensor | None]:
        """The initial ``(h_0, c_0)`` as ``[layers*directions, B, H]`` (zeros when ``hx`` is None), checked."""
        where = type(self).__name__
        states = self.num_layers * (2 if self.bidirectional else 1)
        expected = (states, batch, self.hidden_size) if batched else (states, self.hidden_size)
        lstm = self.mode == "LSTM"
        if hx is None:
            zeros = ops.full(shape=(states, batch, self.hidden_size), value=0.0, dtype=dtype.name)
            return zeros, (zeros if lstm else None)
        given: list[tuple[str, Any]]
        if lstm:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise ArgumentTypeError(f"{where}: hx must be a tuple (h_0, c_0) of two tensors, got "
                                        f"{type(hx).__name__}")
            given = [("h_0 (hx[0])", hx[0]), ("c_0 (hx[1])", hx[1])]
        else:
            given = [("hx", hx)]
        out: list[AnyTensor] = []
        for name, t in given:
            _check_float(where, name, t, dtype)
            _check_shape(where, name, t, expected)
            out.append(t if batched else t.unsqueeze(1))
        return out[0], (out[1] if lstm else None)

    def _direction(self, x: AnyTensor, h: AnyTensor, c: AnyTensor | None, layer: int,
                   direction: int) -> tuple[AnyTensor, AnyTensor, AnyTensor | None]:
        """One layer in one direction over ``x[T, B, I_k]`` from ``(h, c)``: ``(out[T, B, H], h_T, c_T)``."""
        w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
        projected = F.linear(x, w_ih, b_ih)  # every time step's input projection in one matmul
        steps = x.shape[0]
        outs: list[AnyTensor] = [h] * steps
        for t in (range(steps - 1, -1, -1) if direction else range(steps)):
            h, c = _step(self.mode, projected[t], h, c, w_hh, b_hh)
            outs[t] = h
        return stack(outs, 0), h, c

    def _run(self, input: Any, hx: Any) -> tuple[AnyTensor, AnyTensor, AnyTensor | None]:
        """``(output, h_n, c_n)`` in the caller's layout (``c_n`` None except for the LSTM)."""
        where = type(self).__name__
        w0 = self._parameters["weight_ih_l0"]
        assert w0 is not None
        ops = ops_for(where, input)
        _check_float(where, "input", input, w0.dtype)
        if input.ndim not in (2, 3):
            raise ShapeError(f"{where}: expected input to be 2-d (unbatched [L, {self.input_size}]) or 3-d "
                             f"({'[B, L, ' if self.batch_first else '[L, B, '}{self.input_size}]), got "
                             f"{input.ndim}-d of shape {list(input.shape)}")
        batched = input.ndim == 3
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{where}: input.size(-1) must be equal to input_size; expected input of shape "
                             f"[..., {self.input_size}], got {list(input.shape)}")
        x: AnyTensor = (input.transpose(0, 1) if self.batch_first else input) if batched else input.unsqueeze(1)
        if isinstance(x.shape[0], int) and x.shape[0] == 0:
            raise ShapeError(f"{where}: expected a sequence length larger than 0, got input of shape "
                             f"{list(input.shape)}")
        h0, c0 = self._states(hx, x.shape[1], batched, w0.dtype, ops)
        directions = 2 if self.bidirectional else 1
        hs: list[AnyTensor] = []
        cs: list[AnyTensor] = []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0:
                x = F.dropout(x, self.dropout, self.training)
            outs = []
            for direction in range(directions):
                k = layer * directions + direction
                out, h, c = self._direction(x, h0[k], None if c0 is None else c0[k], layer, direction)
                outs.append(out)
                hs.append(h)
                if c is not None:
                    cs.append(c)
            x = outs[0] if directions == 1 else cat(outs, -1)
        h_n, c_n = stack(hs, 0), (stack(cs, 0) if cs else None)
        if not batched:
            return x.squeeze(1), h_n.squeeze(1), (None if c_n is None else c_n.squeeze(1))
        return (x.transpose(0, 1) if self.batch_first else x), h_n, c_n

    def extra_repr(self) -> str:
        """PyTorch's (which leaves out ``nonlinearity``)."""
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    """Elman RNN, ``h_t = act(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` with ``act`` tanh or relu.

    ``forward(input, hx=None) -> (output, h_n)``. ``input`` is ``[L, B, I]`` (``[B, L, I]`` with
    ``batch_first``) or unbatched ``[L, I]``; ``hx``/``h_n`` are ``[layers*directions, B, H]`` (``[.., H]``
    unbatched; never batch-first), zeros when omitted; ``output`` is ``[L, B, directions*H]`` (batch-first
    as the input). With ``dropout > 0`` each layer's output but the last's goes through dropout in training.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 dtype: Any = None) -> None:
        super().__init__(_check_mode("RNN", nonlinearity), input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: AnyTensor, hx: AnyTensor | None = None) -> tuple[AnyTensor, AnyTensor]:
        """``(output, h_n)``; see the class docstring for the shapes."""
        out, h_n, _ = self._run(input, hx)
        return out, h_n

    if TYPE_CHECKING:
        __call__ = forward


class LSTM(_RNNBase):
    """Long short-term memory, gates ``i, f, g, o`` (see the module docstring).

    ``forward(input, hx=None) -> (output, (h_n, c_n))`` with ``hx = (h_0, c_0)``, each
    ``[layers*directions, B, H]`` (unbatched ``[layers*directions, H]``), zeros when omitted; ``input`` and
    ``output`` as :class:`RNN`. ``proj_size`` other than 0 is refused (not supported)."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, dtype)

    def forward(self, input: AnyTensor, hx: tuple[AnyTensor, AnyTensor] | None = None
                ) -> tuple[AnyTensor, tuple[AnyTensor, AnyTensor]]:
        """``(output, (h_n, c_n))``; see the class docstring for the shapes."""
        out, h_n, c_n = self._run(input, hx)
        assert c_n is not None
        return out, (h_n, c_n)

    if TYPE_CHECKING:
        __call__ = forward


class GRU(_RNNBase):
    """Gated recurrent unit, gates ``r, z, n`` with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``.

    ``forward(input, hx=None) -> (output, h_n)`` with the shapes of :class:`RNN`."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         dtype=dtype)

    def forward(self, input: AnyTensor, hx: AnyTensor | None = None) -> tuple[AnyTensor, AnyTensor]:
        """``(output, h_n)``; see the class docstring for the shapes."""
        out, h_n, _ = self._run(input, hx)
        return out, h_n

    if TYPE_CHECKING:
        __call__ = forward


# ---- cells ---------------------------------------------------------------------------------------

class _CellBase(Module):
    """What the cells share: ``weight_ih[G*H, I]``, ``weight_hh[G*H, H]``, ``bias_ih[G*H]``, ``bias_hh[G*H]``,
    the checks and one step."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool, dtype: Any) -> None:
        super().__init__()
        where = type(self).__name__
        self.mode = mode
        self.input_size = layer_size(input_size, "input_size", where)
        self.hidden_size = layer_size(hidden_size, "hidden_size", where, positive=True)
        self.bias = bool(bias)
        gates = _GATES[mode] * self.hidden_size
        self.weight_ih = empty_parameter((gates, self.input_size), dtype)
        self.weight_hh = empty_parameter((gates, self.hidden_size), dtype)
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(name, empty_parameter((gates,), dtype) if self.bias else None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation: every parameter ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``."""
        _reset_uniform(self, self.hidden_size)

    def _cell(self, input: Any, hx: Any) -> State:
        """The new ``(h, c)`` in the caller's layout (``c`` None except for the LSTM cell)."""
        where = type(self).__name__
        w_ih: AnyTensor = self.weight_ih
        ops = ops_for(where, input)
        _check_float(where, "input", input, w_ih.dtype)
        if input.ndim not in (1, 2):
            raise ShapeError(f"{where}: expected input to be 1-d (unbatched [{self.input_size}]) or 2-d "
                             f"([B, {self.input_size}]), got {input.ndim}-d of shape {list(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise ShapeError(f"{where}: expected input of shape [..., {self.input_size}] (input_size), got "
                             f"{list(input.shape)}")
        batched = input.ndim == 2
        x: AnyTensor = input if batched else input.unsqueeze(0)
        expected = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        lstm = self.mode == "LSTM"
        if hx is None:
            zeros = ops.full(shape=(x.shape[0], self.hidden_size), value=0.0, dtype=w_ih.dtype.name)
            h, c = zeros, (zeros if lstm else None)
        else:
            if lstm and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
                raise ArgumentTypeError(f"{where}: hx must be a tuple (h_0, c_0) of two tensors, got "
                                        f"{type(hx).__name__}")
            given = [("h_0 (hx[0])", hx[0]), ("c_0 (hx[1])", hx[1])] if lstm else [("hx", hx)]
            states = []
            for name, t in given:
                _check_float(where, name, t, w_ih.dtype)
                _check_shape(where, name, t, expected)
                states.append(t if batched else t.unsqueeze(0))
            h, c = states[0], (states[1] if lstm else None)
        h, c = _step(self.mode, F.linear(x, w_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        if not batched:
            return h.squeeze(0), (None if c is None else c.squeeze(0))
        return h, c

    def extra_repr(self) -> str:
        """PyTorch's (``nonlinearity=relu`` unquoted)."""
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity=relu"
        return s


class RNNCell(_CellBase):
    """One Elman RNN step, ``h' = act(W_ih x + b_ih + W_hh h + b_hh)``, ``act`` tanh or relu.

    ``forward(input[B, I] or [I], hx[B, H] or [H] = zeros) -> h'`` of ``hx``'s shape."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 dtype: Any = None) -> None:
        super().__init__(_check_mode("RNNCell", nonlinearity), input_size, hidden_size, bias, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: AnyTensor, hx: AnyTensor | None = None) -> AnyTensor:
        """The next hidden state ``[B, H]`` (``[H]`` unbatched)."""
        return self._cell(input, hx)[0]

    if TYPE_CHECKING:
        __call__ = forward


class LSTMCell(_CellBase):
    """One LSTM step (gates ``i, f, g, o``).

    ``forward(input[B, I] or [I], hx=(h[B, H], c[B, H]) or zeros) -> (h', c')`` of ``h``'s shape."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, dtype)

    def forward(self, input: AnyTensor, hx: tuple[AnyTensor, AnyTensor] | None = None
                ) -> tuple[AnyTensor, AnyTensor]:
        """The next ``(h, c)``, each ``[B, H]`` (``[H]`` unbatched)."""
        h, c = self._cell(input, hx)
        assert c is not None
        return h, c

    if TYPE_CHECKING:
        __call__ = forward


class GRUCell(_CellBase):
    """One GRU step (gates ``r, z, n``; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``).

    ``forward(input[B, I] or [I], hx[B, H] or [H] = zeros) -> h'`` of ``hx``'s shape."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, dtype)

    def forward(self, input: AnyTensor, hx: AnyTensor | None = None) -> AnyTensor:
        """The next hidden state ``[B, H]`` (``[H]`` unbatched)."""
        return self._cell(input, hx)[0]

    if TYPE_CHECKING:
        __call__ = forward
