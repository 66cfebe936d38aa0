"""The tools users reach for around a model: its picture (``draw``), its compute cost
(``cost``), comparisons of two models or backends (``compare``), per-tensor statistics
(``stats``) and progress bars on long work (``progress``).

Each module is the logic of one ``nnefx`` subcommand or option; ``nnefx.cli`` only wires
the arguments to it.
"""
