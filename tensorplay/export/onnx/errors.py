"""The errors of ONNX interchange (part of the :mod:`tensorplay.errors` hierarchy)."""

from __future__ import annotations

from tensorplay.errors import GraphCaptureError, TensorplayError


class ONNXExportError(GraphCaptureError):
    """``to_onnx`` cannot express part of a program in ONNX: a random draw, a gradient primitive, state that
    the program mutates, an operator missing from the chosen opset. The message names the primitive and the
    user's source line."""


class ONNXImportError(TensorplayError, ValueError):
    """``from_onnx`` refuses a model: an operator it does not map (named with its op type and node name), a
    custom domain, an unsupported element type or an attribute it cannot read."""


__all__ = ["ONNXExportError", "ONNXImportError"]
