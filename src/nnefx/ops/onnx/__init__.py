"""Operations of the default ONNX domain that NNEF cannot say exactly (domain ``onnx``,
names ``onnx_<snake_case>``, the NNEF extension ``nnefx_onnx``).

Each kernel follows the ONNX operator documentation of the installed opset (the "Operator
Schemas" page, and the function body where ONNX defines the operator as a function); formal
kernels spell that definition out step by step in float64, fast kernels vectorise it in the
input's own width (float32 for narrower floats).  Both keep the element types the ONNX
operator states: an ``f16`` input gives an ``f16`` result, an ``i8`` shift wraps at 8 bits.

Conventions shared with the ONNX text rather than NNEF's: negative axes count from the end,
and broadcasting is numpy's (right-aligned), since these operations are only ever emitted for
ONNX nodes.  Parameters ONNX passes as tensors but that decide result shapes (``DFT``'s
``axis`` and ``dft_length``, ``STFT``'s ``frame_step``) are attributes here; the reader binds
them from the model's constants.

Families: ``normalization`` (LayerNormalization, RMSNormalization, GroupNormalization),
``tensors`` (Trilu, BitShift, CastLike), ``losses`` (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss), ``signal`` (DFT, STFT), ``quantization`` (blocked
QuantizeLinear/DequantizeLinear), ``qlinear`` (MatMulInteger, ConvInteger, QLinearMatMul,
QLinearConv), ``sampling`` (GridSample).
"""
