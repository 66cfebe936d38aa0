"""IR extension operations for opset (v10/11) layers with no exact NNEF counterpart.

Domain ``ir``, names ``ir_<snake_case>``.  Each one exists because the NNEF standard set
cannot say the same thing *exactly*:

* ``erf`` — NNEF has no error function (and its ``gelu`` is the sigmoid approximation,
  while OpenVINO's Gelu is the exact erf form), so Gelu/Erf layers need it.
* ``tensor_shape``, ``reshape_to``, ``broadcast_to``, ``arange`` — shapes computed *at run
  time* (dynamic batch or length): NNEF's reshape/tile take their targets as attributes.
  Used only when the shape cannot be folded while loading.
* ``integer_arith``, ``integer_compare`` — numpy-semantics arithmetic on *integer* tensors (NNEF
  arithmetic is ``scalar`` only), e.g. run-time shape arithmetic.
* ``convert_element_type`` — OpenVINO Convert to a given element type (f16 rounding, float→int
  truncation and wrap-around as the CPU plugin does), which NNEF ``cast`` does not model.
* ``gather_axis``, ``gather_elements``, ``gather_nd``, ``scatter``, ``one_hot`` —
  indexing with run-time (possibly negative) indices and batch dimensions.
* ``lstm_sequence``, ``gru_sequence``, ``rnn_sequence`` — recurrent sequences with
  per-batch lengths (steps past a sequence's length output zeros and keep the state).
* ``top_k``, ``cumulative_sum``, ``prod_reduce``, ``round_with_mode`` (ties to even / away from
  zero), ``einsum``, ``interpolate`` (nearest/linear/cubic with OpenVINO's coordinate
  transforms), ``non_max_suppression`` (NonMaxSuppression with a data-dependent output size).

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

#: Names these operations had in nnefx 0.1 documents (``extension nnefx_ir;``), named after
#: the format that first needed them: the front-end still reads them in documents that
#: declare ``nnefx_ir`` and emits the new names (:func:`nnefx.semantics.stdlib.visible_fragments`).
RENAMED: dict[str, str] = {
    "ir_erf": "erf",
    "ir_shape_of": "tensor_shape",
    "ir_reshape": "reshape_to",
    "ir_broadcast": "broadcast_to",
    "ir_range": "arange",
    "ir_arith": "integer_arith",
    "ir_compare": "integer_compare",
    "ir_convert": "convert_element_type",
    "ir_gather": "gather_axis",
    "ir_lstm_sequence": "lstm_sequence",
    "ir_gru_sequence": "gru_sequence",
    "ir_rnn_sequence": "rnn_sequence",
    "ir_top_k": "top_k",
    "ir_cumsum": "cumulative_sum",
    "ir_reduce_prod": "prod_reduce",
    "ir_round": "round_with_mode",
    "ir_einsum": "einsum",
    "ir_interpolate": "interpolate",
    "ir_gather_elements": "gather_elements",
    "ir_gather_nd": "gather_nd",
    "ir_scatter": "scatter",
    "ir_one_hot": "one_hot",
    "ir_nms": "non_max_suppression",
    "ir_adaptive_pool": "adaptive_pool",
}

__all__ = ["RENAMED", "COORD_MODES", "INTERP_MODES", "NEAREST_MODES", "arith", "broadcast_shape", "broadcast_to", "compare",
           "convert", "gather", "interpolation_taps", "reshape_target"]
