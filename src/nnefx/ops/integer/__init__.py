"""The deterministic integer operator set (the CVM runtime's "Operator Math Formalization" of the CVM runtime's operators).

Each runtime operator ``op`` is registered as ``cvm_<op>`` in domain ``"cvm"`` with an NNEF
declaration over ``tensor<integer>``, a shape rule that also validates attributes, a formal
kernel written like the seed's formula and a fast vectorised kernel that agrees bit for bit.
Arithmetic conventions (int32 wrap-around, division, rounding shifts) live in :mod:`._int`.
Where the real runtime departs from the seed, the kernels follow the runtime and say so
beside the code.  ``extra["precision"]`` holds each operation's output-precision rule and
``extra["cost"]`` its per-element "ops" base (used by :mod:`nnefx.formats.cvm`).
"""
