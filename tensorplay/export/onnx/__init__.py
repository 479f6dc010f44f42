"""ONNX interchange (optional extra: ``pip install "tensorplay[onnx]"``).

* :func:`to_onnx` (also ``ExportedProgram.to_onnx``): an exported program as an ``onnx.ModelProto``, its
  inputs named after the forward's parameters, dynamic axes after the user's dims, weights as initializers;
  every primitive of the inference op set lowers to standard ONNX operators (:mod:`.lowering`), attention
  and smooth max-pool as compositions (:mod:`.compositions`).
* :func:`from_onnx`: an ONNX model of the same operator set as an :class:`~tensorplay.export.ExportedProgram`
  (dynamic axes become dims, initializers parameters), which runs evaluated, compiled, transformed and
  fine-tuned (:mod:`.importer`).

``onnx`` is imported when one of them is first called, never by ``import tensorplay``.
"""

from __future__ import annotations

from typing import Any

from tensorplay.export.onnx.errors import ONNXExportError, ONNXImportError


def to_onnx(ep: Any, path: Any = None, *, opset: int | None = None) -> Any:
    """See :func:`tensorplay.export.onnx.writer.to_onnx`."""
    from tensorplay.export.onnx.writer import to_onnx as write
    return write(ep, path, opset=opset)


def from_onnx(model: Any) -> Any:
    """See :func:`tensorplay.export.onnx.importer.from_onnx`."""
    from tensorplay.export.onnx.importer import from_onnx as read
    return read(model)


__all__ = ["ONNXExportError", "ONNXImportError", "from_onnx", "to_onnx"]
