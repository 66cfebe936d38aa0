"""Format code grouped by operator family, mirroring :mod:`nnefx.ops`."""

from ..ir import export_ops as _ir_export_ops  # noqa: F401
from ..onnx import export_ops as _onnx_export_ops  # noqa: F401
from ..onnx import export_roi as _onnx_export_roi  # noqa: F401
from . import elementwise  # noqa: F401
