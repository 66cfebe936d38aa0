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

The kernels need the document: the session passes ``call(body, inputs) -> results`` (both
dicts by name), which evaluates the body fragment on the same backend.  Without it (a kernel
called on its own) the operation is a located error.  tract's header mixes tensors and
non-tensors inside tuples, which NNEF 1.0.5 does not allow; the checker reports that until the
tract dialect's reader accepts it.
"""

from __future__ import annotations

import numpy as np

from .._common import attr_error, op_error
from ..registry import define
from ._util import DOMAIN, int_value

OP = "tract_core_scan"

scan = define(OP, "tract_scan", """
fragment tract_core_scan( body: string, scan: (string, tensor<scalar>, integer, integer)[],
                          full: (string, tensor<scalar>)[], state: (string, tensor<scalar>, string)[],
                          output: (string, string, integer, integer)[], skip: integer = 0,
                          reset_every_turn: integer = 0, external_state: integer = 0 )
    -> ( outputs: tensor<scalar>[] );
""", domain=DOMAIN, runtime_keywords=("call",),
    doc="Run the body fragment over a sequence with carried state (ops::scan::Scan); see the module text.")


@scan.shape
def _scan_shape(body="", scan=(), full=(), state=(), output=(), skip=0, reset_every_turn=0, external_state=0):
    _check_spec(body, scan, full, state, output, skip, external_state)
    return [None] * len(output)  # the body's shapes decide: known once it has run


def _check_spec(body, scan, full, state, output, skip, external_state) -> None:
    if not isinstance(body, str) or not body:
        raise attr_error(OP, "body", body, "must name a fragment of the document")
    for entry in output:
        if len(entry) == 3:  # tract's older three-item form: (result, kind, axis) with chunk 1
            entry = (*entry, 1)
        if len(entry) != 4 or entry[1] not in ("full", "last"):
            raise attr_error(OP, "output", list(entry), "must be (result, 'full' or 'last', axis, chunk)")
    for entry in scan:
        if len(entry) != 4 or int_value(OP, "scan chunk", entry[3]) == 0:
            raise attr_error(OP, "scan", list(entry), "must be (parameter, tensor, axis, non-zero chunk)")
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


def _scan(body, scan, full, state, output, call, skip=0, reset_every_turn=0, external_state=0):
    if call is None:
        raise op_error(OP, f"runs the document's fragment '{body}': it needs the session (call it from a "
                           "model, not on its own)")
    _check_spec(body, scan, full, state, output, skip, external_state)
    output = [tuple(e) if len(e) == 4 else (*e, 1) for e in output]
    scans = [(name, np.asarray(x), int(axis), int(chunk)) for name, x, axis, chunk in scan]
    if not scans:
        raise attr_error(OP, "scan", list(scan), "must scan at least one input")
    steps = {-(-x.shape[axis] // abs(chunk)) for _, x, axis, chunk in scans}
    if len(steps) != 1:
        raise op_error(OP, f"the scanned inputs give different numbers of steps ({sorted(steps)})")
    n = steps.pop()
    carried = {name: np.asarray(init) for name, init, _ in state}
    pieces: dict[int, list] = {k: [] for k in range(len(output))}
    last: dict[int, np.ndarray] = {}
    for i in range(n):
        inputs = {name: slice_chunk(x, axis, i, chunk) for name, x, axis, chunk in scans}
        inputs.update({name: np.asarray(x) for name, x in full})
        inputs.update(carried)
        results = call(body, inputs)
        for name, _, result in state:
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
def _scan_formal(body="", scan=(), full=(), state=(), output=(), skip=0, reset_every_turn=0, external_state=0,
                 call=None):
    return _scan(body, scan, full, state, output, call, skip, reset_every_turn, external_state)


# the body runs on the caller's backend: the fast kernel is the same loop
scan.fast(_scan_formal)
