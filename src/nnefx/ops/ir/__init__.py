"""IR-only extension operations (domain ``ir``, names ``ir_<snake_case>``).

These are the legacy IR layers (OpenVINO's "Intermediate Representation Notation Reference Catalog") whose semantics no NNEF standard operation (or short
composition of them) reproduces exactly: detection post-processing, RoI pooling variants,
sequence decoding, binary convolution, fake quantization, ...  Each module is one family;
every operation carries its NNEF declaration (an nnefx extension in NNEF documents), a shape
rule, a FORMAL kernel written after the layer's definition and a FAST vectorised kernel.
"""
