"""``tensorplay.export``: programs traced with dynamic shapes, checked, run anywhere, saved safely.

    import tensorplay as tp
    from tensorplay.export import Dim, export

    batch = Dim("batch", min=1, max=1024)
    ep = export(model, (x,), dynamic_shapes={"x": {0: batch}})
    ep.module()(tp.randn(7, 1, 8, 8))         # any batch size in [1, 1024]
    tp.export.save(ep, "model.tpx")
    ep2 = tp.export.load("model.tpx")          # JSON program + safetensors tensors: no pickle

* :func:`export` and :class:`ExportedProgram` (:mod:`.exporting`, :mod:`.program`); :func:`export_joint` exports
  a loss with its gradients;
* declaring dims: :class:`Dim` (``Dim.AUTO``, ``Dim.STATIC``, ``Dim.DYNAMIC``, derived ``2*d + 1``), :func:`dims`,
  :class:`ShapesCollection`, :class:`AdditionalInputs`, :class:`FromAnnotations`, :class:`Constraint`,
  :class:`EqualityConstraint`; :func:`apply_fixes` applies the fixes of a :class:`ConstraintViolationError`;
* the calling convention: :class:`ExportGraphSignature`, :class:`GraphSignature`, :class:`InputKind`,
  :class:`OutputKind`, :class:`WeightType`;
* :class:`CustomDecompTable`, :func:`default_decompositions` (``ep.run_decompositions``);
* :func:`unflatten`, :class:`UnflattenedModule`, :class:`FlatArgsAdapter`;
* files: :func:`save`, :func:`load`, :func:`serialize`, :func:`deserialize`; ``tp.save``/``tp.load`` for tensors;
* ONNX (optional extra ``tensorplay[onnx]``): :func:`to_onnx` (``ep.to_onnx(path)``), :func:`from_onnx`.

Submodules load on first use: ``import tensorplay`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_NAMES = {
    "export": "exporting", "export_joint": "exporting", "ExportedProgram": "program", "RangeConstraints": "program", "ValueRange": "program",
    "Dim": "dim", "DerivedDim": "dim", "DimHint": "dim", "dims": "dim", "Constraint": "dim",
    "EqualityConstraint": "dim",
    "ShapesCollection": "dynamic", "AdditionalInputs": "dynamic", "FromAnnotations": "dynamic",
    "SuggestedFix": "dynamic", "apply_fixes": "dynamic",
    "ConstraintViolationError": "errors", "FileFormatError": "errors", "InputConstraintError": "errors",
    "ExportGraphSignature": "signature", "GraphSignature": "signature", "InputKind": "signature",
    "OutputKind": "signature", "InputSpec": "signature", "OutputSpec": "signature", "TensorArgument": "signature",
    "ConstantArgument": "signature", "WeightType": "signature", "ExportBackwardSignature": "signature",
    "ExportedModule": "unlifted",
    "unflatten": "hierarchy", "UnflattenedModule": "hierarchy", "InterpreterModule": "hierarchy",
    "FlatArgsAdapter": "hierarchy", "CustomDecompTable": "decomp", "default_decompositions": "decomp",
    "to_onnx": "onnx", "from_onnx": "onnx", "ONNXExportError": "onnx", "ONNXImportError": "onnx",
    "save": "files", "load": "files", "serialize": "files", "deserialize": "files", "SerializedArtifact": "files",
}

if TYPE_CHECKING:
    from tensorplay.export.dim import Constraint, DerivedDim, Dim, DimHint, EqualityConstraint, dims
    from tensorplay.export.dynamic import AdditionalInputs, FromAnnotations, ShapesCollection, SuggestedFix, apply_fixes
    from tensorplay.export.errors import ConstraintViolationError, FileFormatError, InputConstraintError
    from tensorplay.export.decomp import CustomDecompTable, default_decompositions
    from tensorplay.export.exporting import export, export_joint
    from tensorplay.export.hierarchy import FlatArgsAdapter, InterpreterModule, UnflattenedModule, unflatten
    from tensorplay.export.files import SerializedArtifact, deserialize, load, save, serialize
    from tensorplay.export.program import ExportedProgram, RangeConstraints, ValueRange
    from tensorplay.export.signature import (
        ConstantArgument, ExportBackwardSignature, ExportGraphSignature, GraphSignature, InputKind, InputSpec,
        OutputKind, OutputSpec, TensorArgument, WeightType,
    )
    from tensorplay.export.onnx import ONNXExportError, ONNXImportError, from_onnx, to_onnx
    from tensorplay.export.unlifted import ExportedModule


def __getattr__(name: str) -> object:
    """The public names load their module on first use."""
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'tensorplay.export' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tensorplay.export.{module}"), name)


__all__ = [
    "AdditionalInputs", "ConstantArgument", "Constraint", "ConstraintViolationError", "CustomDecompTable",
    "DerivedDim", "Dim", "DimHint", "EqualityConstraint", "ExportBackwardSignature", "ExportGraphSignature",
    "ExportedModule", "ExportedProgram", "FileFormatError", "FlatArgsAdapter", "FromAnnotations", "GraphSignature",
    "InputConstraintError", "InputKind", "ONNXExportError", "ONNXImportError", "InputSpec", "InterpreterModule", "OutputKind", "OutputSpec",
    "RangeConstraints", "SerializedArtifact", "ShapesCollection", "SuggestedFix", "TensorArgument",
    "UnflattenedModule", "ValueRange", "WeightType", "apply_fixes", "default_decompositions", "deserialize",
    "dims", "export", "export_joint", "from_onnx", "load", "save", "serialize", "to_onnx", "unflatten",
]
