"""IR extension operations for opset (v10/11) layers with no exact NNEF counterpart.

Domain ``ir``, names ``ir_<snake_case>``.  Each one exists because the NNEF standard set
cannot say the same thing *exactly*:

* ``ir_erf`` — NNEF has no error function (and its ``gelu`` is the sigmoid approximation,
  while OpenVINO's Gelu is the exact erf form), so Gelu/Erf layers need it.
* ``ir_shape_of``, ``ir_reshape``, ``ir_broadcast``, ``ir_range`` — shapes computed *at run
  time* (dynamic batch or length): NNEF's reshape/tile take their targets as attributes.
  Used only when the shape cannot be folded while loading.
* ``ir_arith``, ``ir_compare`` — numpy-semantics arithmetic on *integer* tensors (NNEF
  arithmetic is ``scalar`` only), e.g. run-time shape arithmetic.
* ``ir_convert`` — OpenVINO Convert to a given element type (f16 rounding, float→int
  truncation and wrap-around as the CPU plugin does), which NNEF ``cast`` does not model.
* ``ir_gather``, ``ir_gather_elements``, ``ir_gather_nd``, ``ir_scatter``, ``ir_one_hot`` —
  indexing with run-time (possibly negative) indices and batch dimensions.
* ``ir_lstm_sequence``, ``ir_gru_sequence``, ``ir_rnn_sequence`` — recurrent sequences with
  per-batch lengths (steps past a sequence's length output zeros and keep the state).
* ``ir_top_k``, ``ir_cumsum``, ``ir_reduce_prod``, ``ir_round`` (ties to even / away from
  zero), ``ir_einsum``, ``ir_interpolate`` (nearest/linear/cubic with OpenVINO's coordinate
  transforms), ``ir_nms`` (NonMaxSuppression with a data-dependent output size).

Kernels follow OpenVINO's specification; where its CPU plugin differs from the text the
docstring says which one is followed (Convert follows the plugin; integer Divide the text).

Modules, by family: :mod:`.elementwise`, :mod:`.shape`, :mod:`.indexing`, :mod:`.recurrent`,
:mod:`.reduce`, :mod:`.resize`.  The helpers importers share with the kernels (numpy-style
broadcasting of run-time shapes, reshape targets, integer arithmetic, conversion,
interpolation taps) are re-exported here.
"""

from __future__ import annotations

from .elementwise import arith, compare, convert
from .indexing import gather
from .resize import COORD_MODES, INTERP_MODES, NEAREST_MODES, interpolation_taps
from .shape import broadcast_shape, broadcast_to, reshape_target

__all__ = ["COORD_MODES", "INTERP_MODES", "NEAREST_MODES", "arith", "broadcast_shape", "broadcast_to", "compare",
           "convert", "gather", "interpolation_taps", "reshape_target"]
