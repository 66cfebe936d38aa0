"""Compatibility layers that let code written for other NNEF tools run on nnefx.

:mod:`nnefx.compat.nnef` mirrors the Python API of the official Khronos ``nnef`` package
(``parse_string``, ``load_graph``, ``infer_shapes``, ``Graph``/``Tensor``/``Operation``, ...)
in pure Python, so ``import nnefx.compat.nnef as nnef`` is enough to move such code over.
"""
