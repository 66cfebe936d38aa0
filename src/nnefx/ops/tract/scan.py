"""tract's scan (``nnef/src/ops/core/scan.rs``; meaning in ``core/src/ops/scan/``): a body fragment of
the document run once per step of a sequence, with state carried between steps.  torch-to-nnef's
LSTM, GRU and RNN fragments (``op/fragment/lstm.nnef``, ``gru.nnef``, ...) are built on it.

Arguments (tract's names):

* ``body`` — the name of a fragment defined in the document;
* ``scan`` — ``(parameter, tensor, axis, chunk)``: step i passes the chunk ``i`` of ``|chunk|``
  items along ``axis`` (counted from the end, and reversed, when chunk < 0; the last chunk is
  padded when the extent is not a multiple);
* ``full`` — ``(parameter, tensor)``: passed whole at every step;
* ``state`` — ``(parameter, initial tensor, result)``: the parameter starts as the initial tensor
  and then takes the body's named result of the previous step;
* ``output`` — ``(result, 'full' | 'last', axis, chunk)``: 'full' concatenates the result of every
  step along axis (from the end when chunk < 0), 'last' is its value at the last step; the
  operation's results come in this order.

The number of steps is ``ceil(extent / |chunk|)`` of the scanned inputs.  ``skip``,
``reset_every_turn`` and ``external_state`` serve tract's streaming (pulse) mode; only their
defaults (0) have a meaning for a whole-sequence run.

In the graph, the operation has the form below (NNEF 1.0.5 keeps tensors out of tuples,
§2.3): the tensors of ``scan``, ``full`` and ``state`` are its three ``tensor[]`` inputs, in
order, and those attributes keep the rest of each entry.  The front-end reads tract's own form
(``extra["tract_header"]``) and lowers it (:mod:`nnefx.semantics.tract_scan`), expanding the
body fragment into ``Graph.subgraphs[body]``.  The shape rule asks that body for its result
shapes (hook ``body_shapes``), the kernels run it once per step (hook ``call(body, inputs) ->
results``, both dicts by name, on the same backend); a kernel called without the hook is a
located error.
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, op_error
from ..registry import define
from ._util import DOMAIN, int_value

OP = "tract_core_scan"

TRACT_HEADER = """
fragment tract_core_scan( body: string, scan: (string, tensor<scalar>, integer, integer)[],
                          full: (string, tensor<scalar>)[], state: (string, tensor<scalar>, string)[],
                          output: (string, string, integer, integer)[], skip: integer = 0,
                          reset_every_turn: integer = 0, external_state: integer = 0 )
    -> ( outputs: tensor<scalar>[] );
"""

scan = define(OP, "tract_scan", """
fragment tract_core_scan( scan_inputs: tensor<scalar>[], full_inputs: tensor<scalar>[],
                          state_inputs: tensor<scalar>[], body: string, scan: (string, integer, integer)[],
                          full: string[], state: (string, string)[], output: (string, string, integer, integer)[],
                          skip: integer = 0, reset_every_turn: integer = 0, external_state: integer = 0 )
    -> ( outputs: tensor<scalar>[] );
""", domain=DOMAIN, runtime_keywords=("call", "body_shapes"), tract_header=TRACT_HEADER, surface=True,
    doc="Run the body fragment over a sequence with carried state (ops::scan::Scan); see the module text.")


def steps_of(extents: list, chunks: list) -> object:
    """The number of steps: ceil(extent / |chunk|), the same for every scanned input."""
    steps = {-(-d // abs(c)) for d, c in zip(extents, chunks, strict=True)}
    if len(steps) != 1:
        raise op_error(OP, f"the scanned inputs give different numbers of steps ({sorted(map(str, steps))})")
    return steps.pop()


@scan.shape
def _scan_shape(scan_inputs, full_inputs, state_inputs, body="", scan=(), full=(), state=(), output=(), skip=0,
                reset_every_turn=0, external_state=0, body_shapes=None):
    _check_spec(body, scan, full, state, output, skip, external_state, scan_inputs, full_inputs, state_inputs)
    if body_shapes is None or any(s is None or None in s for s in (*scan_inputs, *full_inputs, *state_inputs)):
        return [None] * len(output)
    params = {name: tuple(d if k != axis % len(s) else abs(chunk) for k, d in enumerate(s))
              for (name, axis, chunk), s in zip(scan, scan_inputs, strict=True)}
    params.update({name: tuple(s) for name, s in zip(full, full_inputs, strict=True)})
    params.update({name: tuple(s) for (name, _), s in zip(state, state_inputs, strict=True)})
    results = body_shapes(body, params)
    n = steps_of([s[axis % len(s)] for (_, axis, _), s in zip(scan, scan_inputs, strict=True)],
                 [chunk for _, _, chunk in scan])
    out = []
    for result, kind, axis, _chunk in (_entry(e) for e in output):
        shape = results.get(result)
        if shape is None:
            return [None] * len(output)
        if kind == "full":
            shape = tuple(d * n if k == axis % len(shape) else d for k, d in enumerate(shape))
        out.append(tuple(shape))
    return out


def _entry(e) -> tuple:
    return tuple(e) if len(e) == 4 else (*e, 1)  # tract's older three-item form: chunk 1


def _check_spec(body, scan, full, state, output, skip, external_state, scan_inputs, full_inputs,
                state_inputs) -> None:
    if not isinstance(body, str) or not body:
        raise attr_error(OP, "body", body, "must name a fragment of the document")
    for entry in output:
        if len(entry) not in (3, 4) or _entry(entry)[1] not in ("full", "last"):
            raise attr_error(OP, "output", list(entry), "must be (result, 'full' or 'last', axis, chunk)")
    for entry in scan:
        if len(entry) != 3 or int_value(OP, "scan chunk", entry[2]) == 0:
            raise attr_error(OP, "scan", list(entry), "must be (parameter, axis, non-zero chunk)")
    if not scan:
        raise attr_error(OP, "scan", list(scan), "must scan at least one input")
    for what, names, tensors in (("scan", scan, scan_inputs), ("full", full, full_inputs),
                                 ("state", state, state_inputs)):
        if len(names) != len(tensors):
            raise op_error(OP, f"'{what}' describes {len(names)} inputs but {len(tensors)} tensors are given")
    if int_value(OP, "skip", skip) != 0:
        raise attr_error(OP, "skip", skip, "is not supported: it serves tract's streaming (pulse) mode")
    if int_value(OP, "external_state", external_state) != 0:
        raise attr_error(OP, "external_state", external_state, "is not supported: it serves tract's streaming mode")


def slice_chunk(x: np.ndarray, axis: int, i: int, chunk: int) -> np.ndarray:
    """Chunk ``i`` of ``|chunk|`` items along ``axis`` (from the end, reversed, when chunk < 0;
    a last partial chunk is padded with zeros)."""
    n, size = x.shape[axis], abs(chunk)
    shape = list(x.shape)
    shape[axis] = size
    out = np.zeros(shape, x.dtype)
    for k in range(size):
        j = i * size + k
        if j >= n:
            break
        src = j if chunk > 0 else n - 1 - j
        dst = k if chunk > 0 else size - 1 - k
        out[(slice(None),) * axis + (dst,)] = x[(slice(None),) * axis + (src,)]
    return out


def _scan(scan_inputs, full_inputs, state_inputs, body, scan, full, state, output, call, skip=0,
          external_state=0):
    if call is None:
        raise op_error(OP, f"runs the document's fragment '{body}': it needs the session (call it from a "
                           "model, not on its own)")
    scan_inputs = [np.asarray(x) for x in scan_inputs]
    _check_spec(body, scan, full, state, output, skip, external_state, scan_inputs, full_inputs, state_inputs)
    output = [_entry(e) for e in output]
    scans = [(name, x, int(axis) % x.ndim, int(chunk)) for (name, axis, chunk), x in zip(scan, scan_inputs,
                                                                                         strict=True)]
    n = steps_of([x.shape[axis] for _, x, axis, _ in scans], [chunk for *_, chunk in scans])
    fixed = {name: np.asarray(x) for name, x in zip(full, full_inputs, strict=True)}
    carried = {name: np.asarray(x) for (name, _), x in zip(state, state_inputs, strict=True)}
    pieces: dict[int, list] = {k: [] for k in range(len(output))}
    last: dict[int, np.ndarray] = {}
    for i in range(n):
        inputs = {name: slice_chunk(x, axis, i, chunk) for name, x, axis, chunk in scans}
        inputs.update(fixed)
        inputs.update(carried)
        results = call(body, inputs)
        for name, result in state:
            if result not in results:
                raise op_error(OP, f"state '{name}' reads result '{result}', which '{body}' does not have")
            carried[name] = results[result]
        for k, (result, kind, _, _) in enumerate(output):
            if result not in results:
                raise op_error(OP, f"output names result '{result}', which '{body}' does not have")
            if kind == "full":
                pieces[k].append(np.asarray(results[result]))
            elif i == n - 1:
                last[k] = np.asarray(results[result])
    outs = []
    for k, (_, kind, axis, chunk) in enumerate(output):
        if kind == "last":
            outs.append(last[k])
            continue
        parts = pieces[k] if chunk > 0 else pieces[k][::-1]  # backward: step 0 fills the end
        outs.append(np.concatenate(parts, axis=int(axis)))
    return outs


@scan.formal
def _scan_formal(scan_inputs, full_inputs, state_inputs, body="", scan=(), full=(), state=(), output=(), skip=0,
                 reset_every_turn=0, external_state=0, call=None):
    return _scan(scan_inputs, full_inputs, state_inputs, body, scan, full, state, output, call, skip,
                 external_state)


# the body runs on the caller's backend: the fast kernel is the same loop
scan.fast(_scan_formal)
