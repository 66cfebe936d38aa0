"""The format-neutral import layer every model reader stands on (IR, ONNX, and the next).

* :mod:`.values` — :class:`~.values.Value` (what flows along an edge while importing: a graph
  tensor, a constant known while loading, or a partially known integer vector) and
  :class:`~.values.Dim` (a symbolic extent), element types;
* :mod:`.graph` — :class:`~.graph.ImportGraph`, the graph under construction (unique names,
  constants written into the graph once, on first use);
* :mod:`.shapes` — each emitted operation's registry shape rule run at once;
* :mod:`.context` — :class:`~.context.NodeContext`, what an operator reader sees of a node
  (typed or textual attributes, inputs, declared outputs, ``emit``, ``fold``, ``apply``);
* :mod:`.conventions` — the numpy-style conventions (right-aligned broadcasting, negative
  axes, slice/gather index rules, interpolation coordinate modes) as typed functions;
* :mod:`.registry` — the tables the family modules (``nnefx/formats/families/``) fill with
  per-operator readers, and the format packages read.

Nothing here knows XML or protobuf; format packages know nothing of one another.
"""
