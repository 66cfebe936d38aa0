"""Each operator's import (and export) per family, mirroring ``nnefx/ops/``.

One module per operator family holds, per operator, how it is read from the IR opsets and
from ONNX (a "Reading" section: readers registered in :mod:`nnefx.formats.reading.registry`)
and how it is written (a "Writing" section).  Format packages (``formats/ir``,
``formats/onnx``) keep only their container and spelling and find the readers through the
registry, so no format package imports another's.

The rules every writer follows:

* **Exact or refused.**  Where NNEF and the format differ (border modes, broadcasting,
  padding, rounding, window shapes), the writer reproduces NNEF's result exactly (extra
  nodes/layers where needed) or raises ``ctx.fallback`` (a compound is then written through
  its NNEF definition) / ``ctx.fail`` — never an approximation.
* **NNEF broadcasting.**  NNEF aligns shapes from dimension 0 while both formats align from
  the right, so lower-rank operands get trailing unit dims (``lowering.aligned``).
* **Shapes.**  IR ports carry static dims; ONNX values may keep unknown dims as long as an
  operation does not need them (``lowering.static`` refuses where it does).
* **One reading of NNEF.**  What an operation's attributes mean comes from
  :mod:`nnefx.formats.export.attrs`, so both formats compute the same thing.

The IR traps that matter when mapping back (legacy/modern): Gather takes (data, indices, axis);
Slice-8 takes (data, start, stop, step, axes) and is not the legacy ``Slice`` (a split);
BatchNormInference-5 takes (data, gamma, beta, mean, variance) — version 1 put data third;
PriorBox-8 takes 1-D ``[H, W]`` sizes; float constants may sit behind ``Convert`` (f16).

The ONNX traps that matter (all checked by ``tests/test_onnx_export*.py`` against nnefx):
NNEF ``round`` is floor(x + 0.5) while ONNX Round goes half to even; NNEF ``cast`` of
scalars to integers floors while ONNX Cast truncates; ONNX reductions drop the reduced
axes unless ``keepdims=1``; ``Pad`` has no 'symmetric' (NNEF 'reflect-even') mode and its
'reflect' needs the padding below the extent; pooling 'constant' borders pad with zeros
that take part in a maximum, while ONNX MaxPool never reads its padding.
"""

from . import (  # noqa: F401 - imported for their registrations
    activation,
    control,
    detection,
    elementwise,
    image,
    layout,
    losses,
    matmul,
    ml,
    normalization,
    quantization,
    recurrent,
    reduce,
    resize,
    sampling,
    shape,
    signal,
    slicing,
    sliding_conv,
    sliding_pool,
    strings,
    training,
)
