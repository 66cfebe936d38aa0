"""The tract dialect's operations (domain ``tract``): what torch-to-nnef writes in tract mode.

tract (Sonos' NNEF runtime) extends NNEF with registries of primitives, enabled in a document
by ``extension tract_registry tract_core;`` (and ``tract_transformers``, ...).  Each operation
here carries:

* ``declaration`` — the fragment header as tract's registry declares it (``nnef/src/ops/core.rs``
  and ``nnef/src/ops/core/*.rs``, ``transformers/src/ops/*.rs``: the same names, parameter
  names, types and defaults).  Where a tract header breaks a rule of NNEF 1.0.5 §2.3 that the
  checker enforces (a tensor parameter after an attribute, a tuple mixing tensor and
  non-tensor items, ``tensor<complex>``, a generic result without a generic marker) the
  declaration is the nearest conforming header and ``extra["tract_header"]`` keeps tract's
  own text; the operation's ``doc`` says what differs.
* a shape rule (``None`` for an extent only known at run time: a range's length, the
  values of ``shape_of``), formal and fast kernels, and an element-type rule where the
  result's element type is not the input's.

tract is loose about NNEF's abstract types: its headers say ``tensor<scalar>`` for index
tensors, booleans and integers alike, and its binary operations broadcast numpy-style
(right-aligned).  The kernels here follow tract's behaviour, not the abstract type.

Families: :mod:`.elementwise` (unary, binary, bitwise), :mod:`.indexing` (gather, scatter,
one-hot, top-k, trilu), :mod:`.shape` (cast, shape_of, range, broadcast, slicing, external),
:mod:`.math` (einsum, reductions, softmax, rms norm), :mod:`.signal` (fft, stft, complex),
:mod:`.transformers` (``tract_transformers_*``).
"""
