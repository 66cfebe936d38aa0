"""Model files: tensor ``.dat`` files (:mod:`.binary`), model folders / archives / lone
documents (:mod:`.container`) and the Python graph builder (:mod:`.builder`).

The most used names are re-exported here: ``read_tensor``, ``write_tensor``,
``GraphBuilder``.
"""

from .binary import dequantize, read_tensor, write_tensor
from .builder import GraphBuilder

__all__ = ["GraphBuilder", "dequantize", "read_tensor", "write_tensor"]
