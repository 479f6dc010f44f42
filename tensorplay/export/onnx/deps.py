"""The optional dependencies of ONNX interchange: ``onnx`` (always) and ``onnxruntime`` (for the default opset).

Both are imported on first use, never by ``import tensorplay``; a missing one is an ``ImportError`` that says
how to install it (``pip install tensorplay[onnx]``).
"""

from __future__ import annotations

import functools
from typing import Any

INSTALL_HINT = 'pip install "tensorplay[onnx]"'
"""How a user gets the optional dependencies."""

OLDEST_OPSET = 17
"""The oldest ONNX opset the exporter writes (``LayerNormalization`` appeared in 17)."""


def require_onnx() -> Any:
    """The ``onnx`` module; an ``ImportError`` naming the extra to install when it is missing."""
    try:
        import onnx
    except ImportError as error:
        raise ImportError(f"ONNX interchange needs the onnx package, which is not installed: {INSTALL_HINT} "
                          f"(or pip install onnx onnxruntime)") from error
    return onnx


def onnxruntime_or_none() -> Any:
    """The ``onnxruntime`` module, or ``None`` when it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    return onnxruntime


@functools.cache
def newest_opset() -> int:
    """The newest opset of the default ONNX domain that the installed ONNX Runtime loads a model of (probed
    once with a one-node model); without ONNX Runtime, the newest opset the ``onnx`` package knows."""
    onnx = require_onnx()
    newest = int(onnx.defs.onnx_opset_version())
    ort = onnxruntime_or_none()
    if ort is None:
        return newest
    from onnx import TensorProto, helper
    for opset in range(newest, OLDEST_OPSET - 1, -1):
        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:  # this runtime refuses the opset: try an older one
            continue
        return opset
    return OLDEST_OPSET


__all__ = ["INSTALL_HINT", "OLDEST_OPSET", "newest_opset", "onnxruntime_or_none", "require_onnx"]
