"""Each operator's import (and export) per family, mirroring ``nnefx/ops/``.

One module per operator family holds, per operator, how it is read from the IR opsets and
from ONNX (a "Reading" section: readers registered in :mod:`nnefx.formats.reading.registry`)
and how it is written (a "Writing" section).  Format packages (``formats/ir``,
``formats/onnx``) keep only their container and spelling and find the readers through the
registry, so no format package imports another's.
"""

from . import (  # noqa: F401 - imported for their registrations
    detection,
    elementwise,
    matmul,
    normalization,
    quantization,
    recurrent,
    reduce,
    resize,
    shape,
    slicing,
    sliding,
)
