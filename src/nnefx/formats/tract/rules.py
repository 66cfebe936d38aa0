"""One rewrite per operation tract lacks, into standard NNEF or ``tract_core_*`` operations.

Each rule states why its form computes the same values; the forms follow tract's
declarations (``nnef/src/ops/core/*.rs``) as mirrored by the ``tract`` domain of the registry.
Arguments a rule needs as numbers (a broadcast's target shape, one-hot's values) must be
input-independent: the rewrite folds them first; otherwise the rule refuses, located.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import Operation
from ...ops.sliding import _deconv_groups
from .rewrite import Rewriter, rule


def _refuse(op: Operation, why: str) -> NNEFXError:
    return NNEFXError(f"cannot write operation '{op.op}' for tract: {why}", op.location)


def _out(op: Operation) -> str:
    return op.output_names()[0]


def _folded(rw: Rewriter, op: Operation, param: str) -> np.ndarray:
    v = rw.value(op.inputs[param])
    if v is None:
        raise _refuse(op, f"its '{param}' depends on the model's inputs (tract takes it as a number)")
    return v


def _rank_to(rw: Rewriter, op: Operation, x: Any, rank: int) -> Any:
    """``x`` with leading unit axes up to ``rank`` (numpy's right alignment made explicit;
    NNEF's own broadcasting aligns ranks from the left)."""
    if not isinstance(x, str):
        return x
    r = len(rw.shape(x, op))
    if r >= rank:
        return x
    t = rw.tensor(x)
    return rw.temp("unsqueeze", {"input": x}, {"axes": list(range(rank - r))}, like=op, dtype=t.dtype,
                   shape=(1,) * (rank - r) + rw.shape(x, op), etype=t.etype)


def _axis(rw: Rewriter, op: Operation, axis: int, of: str) -> int:
    """``axis`` counted from the front (tract's attributes take no negative axes)."""
    return axis if axis >= 0 else axis % len(rw.shape(of, op))


@rule("erf")
def _erf(rw: Rewriter, op: Operation) -> None:
    # OpenVINO Erf and tract_core_erf are both the error function, element-wise
    rw.emit("tract_core_erf", {"x": op.inputs["x"]}, {}, _out(op), like=op)


@rule("mish")
def _mish(rw: Rewriter, op: Operation) -> None:
    # mish(x) = x * tanh(log(1 + exp(x))), its definition in standard operations (tract has no
    # single operation for it); exp overflowing to inf still gives x * tanh(inf) = x
    x = op.inputs["x"]
    t = rw.tensor(x)
    shape = rw.shape(x, op)

    def step(name: str, inputs: dict) -> str:
        return rw.temp(name, inputs, {}, like=op, dtype=t.dtype, shape=shape, etype=t.etype)

    softplus = step("log", {"x": step("add", {"x": step("exp", {"x": x}), "y": 1.0})})
    rw.emit("mul", {"x": x, "y": step("tanh", {"x": softplus})}, {}, _out(op), like=op)


@rule("reshape_to")
def _reshape(rw: Rewriter, op: Operation) -> None:
    # the target is folded, so the result's static shape is the whole meaning
    from ...ops.ext.shape import reshape_target

    out, x = _out(op), op.inputs["input"]
    target = reshape_target(rw.shape(x, op), [int(d) for d in _folded(rw, op, "shape").reshape(-1)],
                            bool(op.attribs.get("special_zero", True)))
    rw.emit("reshape", {"input": x}, {"shape": list(target), "axis_start": 0, "axis_count": -1}, out,
            like=op, dtype=op.dtype)


@rule("reshape")
def _reshape_std(rw: Rewriter, op: Operation) -> None:
    # tract builds a reshape's target by concatenating its extents, and has none for rank 0
    # (shape = []): the same result is the squeeze of every (unit) axis
    if list(op.attribs.get("shape", [None])) != [] or op.attribs.get("axis_count", -1) != -1 \
            or op.attribs.get("axis_start", 0) != 0:
        rw.keep(op)
        return
    x = op.inputs["input"]
    rank = len(rw.shape(x, op))
    rw.emit("squeeze" if rank else "copy", {"input" if rank else "x": x}, {"axes": list(range(rank))} if rank else {},
            _out(op), like=op, dtype=op.dtype)


@rule("slice")
def _slice(rw: Rewriter, op: Operation) -> None:
    # a negative stride running past the front (end before index 0, as ONNX's reversal writes it)
    # panics in tract (its extents must not be negative)
    shape = rw.tensor(op.inputs["input"]).shape or ()
    axes, ends, strides = op.attribs.get("axes", []), op.attribs.get("end", []), op.attribs.get("stride", [])
    for k, axis in enumerate(axes):
        stride = strides[k] if k < len(strides) else 1
        end = ends[k] if k < len(ends) else 0
        extent = shape[axis] if 0 <= axis < len(shape) else None
        if stride < 0 and end < 0 and (not isinstance(extent, int) or end + extent < 0):
            raise _refuse(op, f"a negative stride running past the front of axis {axis} (end {end}): tract's "
                              "slice takes no end before index 0")
    rw.keep(op)


@rule("broadcast_to")
def _broadcast(rw: Rewriter, op: Operation) -> None:
    # numpy / bidirectional: right-aligned, then tract_core_broadcast to the (static) result
    # shape; explicit: the input's axes placed at axes_mapping by a reshape, then broadcast
    target = tuple(int(d) for d in _folded(rw, op, "shape").reshape(-1))
    x, out = op.inputs["input"], _out(op)
    t = rw.tensor(x)
    mode = op.attribs.get("mode", "numpy")
    if mode == "bidirectional":
        target = tuple(np.broadcast_shapes(rw.shape(x, op), target))
    if mode == "explicit":
        mapping = list(op.attribs.get("axes_mapping", []))
        shape = [1] * len(target)
        for d, ax in zip(rw.shape(x, op), mapping, strict=True):
            shape[ax] = d
        x = rw.temp("reshape", {"input": x}, {"shape": shape, "axis_start": 0, "axis_count": -1}, like=op,
                    dtype=t.dtype, shape=tuple(shape), etype=t.etype)
    else:
        x = _rank_to(rw, op, x, len(target))
    rw.emit("tract_core_broadcast", {"input": x}, {"shape": list(target)}, out, like=op)


#: convert_element_type's destination names -> tract datum types
_DATUM = {"f64": "f64", "f32": "f32", "f16": "f16", "i64": "i64", "i32": "i32", "i16": "i16", "i8": "i8",
          "u64": "u64", "u32": "u32", "u16": "u16", "u8": "u8", "boolean": "bool", "bool": "bool"}


@rule("convert_element_type")
def _convert(rw: Rewriter, op: Operation) -> None:
    # tract_core_cast is Rust's `as`: float -> float rounds, int -> int keeps the low bits,
    # int -> float rounds, x -> bool is x != 0 — each what OpenVINO Convert does.  float -> int
    # differs out of range (`as` saturates, OpenVINO gives the 32/64-bit minimum and keeps the
    # low bits): written as cast to i64 (truncation toward zero), the out-of-range and NaN
    # elements replaced by the minimum with select, then cast to the target width.
    x, out = op.inputs["input"], _out(op)
    dest = op.attribs.get("destination_type")
    if dest not in _DATUM:
        raise _refuse(op, f"destination type '{dest}' has no tract datum type")
    src = rw.tensor(x)
    from ... import etypes

    src_et = etypes.of(src)
    to = _DATUM[dest]
    if not (etypes.is_float(src_et) and to not in ("f64", "f32", "f16", "bool")):
        rw.emit("tract_core_cast", {"input": x}, {"to": to}, out, like=op)
        return
    wide = "i64" if to in ("i64", "u64") else "i32"
    lo, hi = (-2.0 ** 63, 2.0 ** 63) if wide == "i64" else (-2.0 ** 31, 2.0 ** 31 - 1)
    shape = rw.shape(x, op)
    f = src.dtype
    x64 = rw.temp("tract_core_cast", {"input": x}, {"to": "f64"}, like=op, dtype=f, shape=shape, etype="f64")
    t = rw.temp("tract_core_cast", {"input": x64}, {"to": "i64"}, like=op, dtype="integer", shape=shape,
                etype="i64")
    trunc = rw.temp("tract_core_cast", {"input": t}, {"to": "f64"}, like=op, dtype=f, shape=shape, etype="f64")
    finite_t = rw.temp("sub", {"x": x64, "y": x64}, {}, like=op, dtype=f, shape=shape, etype="f64")
    nan = rw.temp("ne", {"x": finite_t, "y": finite_t}, {}, like=op, dtype="logical", shape=shape, etype="bool")
    under = rw.temp("lt", {"x": trunc, "y": lo}, {}, like=op, dtype="logical", shape=shape, etype="bool")
    # comparing x itself (not its i64 cast, which saturates) against the top of the range
    x_trunc_hi = rw.temp("gt", {"x": x64, "y": hi if wide == "i32" else hi - 1024.0}, {}, like=op,
                         dtype="logical", shape=shape, etype="bool")
    bad1 = rw.temp("or", {"x": nan, "y": under}, {}, like=op, dtype="logical", shape=shape, etype="bool")
    bad = rw.temp("or", {"x": bad1, "y": x_trunc_hi}, {}, like=op, dtype="logical", shape=shape, etype="bool")
    low = rw.constant(out, np.array(int(lo), np.int64), op, fresh=True)
    picked = rw.temp("select", {"condition": bad, "true_value": low, "false_value": t}, {}, like=op,
                     dtype="integer", shape=shape, etype="i64")
    if wide == "i32":
        picked = rw.temp("tract_core_cast", {"input": picked}, {"to": "i32"}, like=op, dtype="integer",
                         shape=shape, etype="i32")
    rw.emit("tract_core_cast", {"input": picked}, {"to": to}, out, like=op)


@rule("gather_axis")
def _gather(rw: Rewriter, op: Operation) -> None:
    # Gather-8 with batch_dims 0: tract_core_gather (negative indices count from the end in both)
    if op.attribs.get("batch_dims", 0) != 0:
        raise _refuse(op, "batch_dims other than 0 has no tract_core_gather form")
    axis = _axis(rw, op, op.attribs["axis"], op.inputs["input"])
    rw.emit("tract_core_gather", {"input": op.inputs["input"], "indices": op.inputs["indices"]},
            {"axis": axis}, _out(op), like=op)


@rule("gather_elements")
def _gather_elements(rw: Rewriter, op: Operation) -> None:
    axis = _axis(rw, op, op.attribs["axis"], op.inputs["input"])
    rw.emit("tract_core_gather_elements", {"input": op.inputs["input"], "indices": op.inputs["indices"]},
            {"axis": axis}, _out(op), like=op)


@rule("gather_nd")
def _gather_nd(rw: Rewriter, op: Operation) -> None:
    rw.emit("tract_core_gather_nd", {"input": op.inputs["input"], "indices": op.inputs["indices"]},
            {"batch_dims": op.attribs.get("batch_dims", 0)}, _out(op), like=op)


@rule("top_k")
def _top_k(rw: Rewriter, op: Operation) -> None:
    # TopK sorted by value: tract_core_topk (largest for 'max'); other sort orders have no form
    if op.attribs.get("sort", "value") != "value":
        raise _refuse(op, f"sort '{op.attribs.get('sort')}' (tract_core_topk sorts by value)")
    x = op.inputs["input"]
    axis = _axis(rw, op, op.attribs["axis"], x)
    values, indices = op.output_names()
    rw.emit("tract_core_topk", {"input": x, "k": int(op.attribs["k"])},
            {"axis": axis, "largest": op.attribs.get("mode", "max") == "max"}, values, like=op,
            extra={"values": values, "indices": indices})


@rule("prod_reduce")
def _reduce_prod(rw: Rewriter, op: Operation) -> None:
    rank = len(rw.shape(op.inputs["input"], op))
    rw.emit("tract_core_product_reduce", {"input": op.inputs["input"]},
            {"axes": sorted(a % rank for a in op.attribs["axes"])}, _out(op), like=op)


@rule("round_with_mode")
def _round(rw: Rewriter, op: Operation) -> None:
    if op.attribs.get("mode", "half_to_even") != "half_to_even":
        raise _refuse(op, f"mode '{op.attribs.get('mode')}' (tract_core_round_even rounds half to even)")
    rw.emit("tract_core_round_even", {"x": op.inputs["x"]}, {}, _out(op), like=op)


@rule("einsum")
def _einsum(rw: Rewriter, op: Operation) -> None:
    eq = op.attribs["equation"]
    if "." in eq:
        raise _refuse(op, "an ellipsis in the equation (tract_core_einsum names every axis)")
    # accumulated in f64 for f64 operands (nnefx's einsum sums in f64; f32 would round every term)
    from ... import etypes

    acc = "f64" if etypes.of(rw.tensor(_out(op))) == "f64" else "f32"
    rw.emit("tract_core_einsum", {"inputs": op.inputs["inputs"]}, {"expr": eq, "acc": acc, "output": ""},
            _out(op), like=op, extra={"result": _out(op)})


_ARITH = {"add": "add", "subtract": "sub", "multiply": "mul", "maximum": "max", "minimum": "min"}
_FLOAT_ARITH = {"divide": "div", "power": "pow"}
_COMPARE = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le", "greater": "gt",
            "greater_equal": "ge"}


def _binary(rw: Rewriter, op: Operation, name: str) -> None:
    x, y, out = op.inputs["x"], op.inputs["y"], _out(op)
    rank = len(rw.shape(out, op))
    rw.emit(name, {"x": _rank_to(rw, op, x, rank), "y": _rank_to(rw, op, y, rank)}, {}, out, like=op)


@rule("integer_arith")
def _arith(rw: Rewriter, op: Operation) -> None:
    # numpy-broadcast arithmetic: the NNEF binary operation on right-aligned ranks; division
    # and power only on floats (integer division rounds differently in OpenVINO and tract)
    from ... import etypes

    kind = op.attribs.get("op")
    floats = etypes.is_float(etypes.of(rw.tensor(_out(op))))
    name = _ARITH.get(kind) or (_FLOAT_ARITH.get(kind) if floats else None)
    if name is None:
        raise _refuse(op, f"'{kind}' on {'float' if floats else 'integer'} tensors has no exact tract form")
    # tract computes a binary operation in its operands' common type, and has none for a float
    # with an integer (ONNX Pow's float base and int64 exponent)
    found = sorted({etypes.of(rw.tensor(v)) for v in (op.inputs["x"], op.inputs["y"]) if isinstance(v, str)})
    if len(found) > 1:
        raise _refuse(op, f"'{kind}' of {' and '.join(found)} operands (tract computes both in one type)")
    _binary(rw, op, name)


@rule("integer_compare")
def _compare(rw: Rewriter, op: Operation) -> None:
    kind = op.attribs.get("op")
    if kind not in _COMPARE:
        raise _refuse(op, f"comparison '{kind}'")
    _binary(rw, op, _COMPARE[kind])


@rule("one_hot")
def _one_hot(rw: Rewriter, op: Operation) -> None:
    on = _folded(rw, op, "on_value")
    off = _folded(rw, op, "off_value")
    if on.size != 1 or off.size != 1:
        raise _refuse(op, "on/off values that are not single numbers")
    out = _out(op)
    axis = op.attribs.get("axis", -1) % len(rw.shape(out, op))
    rw.emit("tract_core_one_hot", {"input": op.inputs["indices"]},
            {"axis": axis, "dim": int(op.attribs["depth"]), "value_off": off.reshape(()).item(),
             "value_on": on.reshape(()).item()}, out, like=op)


def _tract_filter(rw: Rewriter, op: Operation, f: str, shape: tuple, g: int) -> str:
    """NNEF deconv's filter [C_in, C_out / g, ...] (the transpose of the matching conv's) in the
    layout tract's deconv reads, [C_out, C_in / g, ...] (tract ``nnef/src/ops/nnef/deser.rs``: its
    kernel's second axis times the groups must equal the input's channels): regrouped as
    [g, C_in/g, C_out/g, ...] swapped in the middle, a reshape/transpose/reshape tract folds for
    variable filters."""
    c_in, c_out_g, k = shape[0], shape[1], list(shape[2:])
    t = rw.tensor(f)
    grouped = rw.temp("reshape", {"input": f}, {"shape": [g, c_in // g, c_out_g, *k], "axis_start": 0,
                                                "axis_count": -1},
                      like=op, dtype=t.dtype, shape=(g, c_in // g, c_out_g, *k))
    swapped = rw.temp("transpose", {"input": grouped}, {"axes": [0, 2, 1, *range(3, 3 + len(k))]}, like=op,
                      dtype=t.dtype, shape=(g, c_out_g, c_in // g, *k))
    return rw.temp("reshape", {"input": swapped}, {"shape": [g * c_out_g, c_in // g, *k],
                                                   "axis_start": 0, "axis_count": -1},
                   like=op, dtype=t.dtype, shape=(g * c_out_g, c_in // g, *k))


def _tract_deconv_attribs(op: Operation, g: int) -> dict:
    """``groups`` written out (tract reads groups = 0 as the filter's first extent, C_out there,
    not NNEF's rule) and ``output_shape`` as the spatial extents (a full-rank one tract ignores)."""
    attribs = {k: v for k, v in op.attribs.items() if k not in ("groups", "output_shape")}
    attribs["groups"] = g
    if list(op.attribs.get("output_shape") or []):
        attribs["output_shape"] = list(op.attribs["output_shape"])[2:]
    return attribs


def _groups(rw: Rewriter, op: Operation, filter_shape: tuple, input_channels: Any) -> int:
    """``deconv``'s groups, with 0 resolved by NNEF's rule (§4.3: output_shape[1] if given, else
    the input's channels; ``input_channels`` a number or a callable giving it)."""
    groups, output_shape = int(op.attribs.get("groups", 1)), list(op.attribs.get("output_shape") or [])
    if groups or output_shape:
        return groups or int(_deconv_groups(groups, filter_shape, output_shape, None))
    return int(input_channels() if callable(input_channels) else input_channels)


@rule("deconv")
def _deconv(rw: Rewriter, op: Operation) -> None:
    f = op.inputs["filter"]
    shape = rw.shape(f, op)
    g = _groups(rw, op, shape, lambda: rw.shape(op.inputs["input"], op)[1])
    inputs = {**op.inputs, "filter": _tract_filter(rw, op, f, shape, g)}
    rw.emit("deconv", inputs, _tract_deconv_attribs(op, g), _out(op), like=op, extra=dict(op.outputs))


@rule("separable_deconv")
def _separable_deconv(rw: Rewriter, op: Operation) -> None:
    # tract's separable_deconv is its standard fragment (two deconvs, nnef/stdlib.nnef) whose
    # filters it reads in its own deconv layout: written as those two deconvs, each regrouped (the
    # 1x1 one with explicit zero padding: tract's '[]' is SameUpper, which it refuses for 1x1)
    x, plane, point = op.inputs["input"], op.inputs["plane_filter"], op.inputs["point_filter"]
    xs, ps, qs = rw.shape(x, op), rw.shape(plane, op), rw.shape(point, op)
    g1 = int(op.attribs.get("groups", 1)) or xs[1]
    mid_c = qs[1] * g1
    mid = rw.temp("deconv", {"input": x, "filter": _tract_filter(rw, op, point, qs, g1), "bias": 0.0},
                  {"groups": g1, "padding": [(0, 0)] * (len(xs) - 2)}, like=op, dtype="scalar", shape=(xs[0], mid_c, *xs[2:]))
    output_shape = list(op.attribs.get("output_shape") or [])
    g2 = output_shape[1] if output_shape else mid_c
    attribs = _tract_deconv_attribs(op, g2)
    rw.emit("deconv", {"input": mid, "filter": _tract_filter(rw, op, plane, ps, g2), "bias": op.inputs.get("bias", 0.0)},
            attribs, _out(op), like=op, extra=dict(op.outputs))


# --- element types ------------------------------------------------------------------------------
# tract computes every operation in its inputs' datum type (data/src/datum.rs): a graph input of
# another type than its NNEF type's default is declared with it, and the rest follows.


def typed_external(rw: Rewriter, op: Operation) -> None:
    """``external``: kept where its element type is its NNEF type's default, else
    tract_core_external (nnef/src/ops/core/source.rs) declaring it (the CVM rules' ``external``
    rule ends here for inputs that are not CVM int32)."""
    from ... import etypes

    out = _out(op)
    et = etypes.of(rw.tensor(out))
    if et == etypes.DEFAULTS.get(rw.tensor(out).dtype):
        rw.keep(op)
        return
    if et not in _DATUM:
        raise _refuse(op, f"input '{out}' is {et} data, which has no tract datum type nnefx writes "
                          f"({', '.join(sorted(set(_DATUM.values())))})")
    rw.emit("tract_core_external", {}, {"shape": list(op.attribs.get("shape", [])), "datum_type": _DATUM[et]},
            out, like=op, dtype=rw.tensor(out).dtype)


@rule("onnx_cast", "onnx_cast_like")
def _onnx_cast(rw: Rewriter, op: Operation) -> None:
    # ONNX Cast (ops/onnx/tensors.cast) as tract_core_cast, Rust's `as`: between floats and from
    # integers or booleans it is the same conversion (round to nearest even, the low bits, 0/1);
    # to bool it is x != 0.  Float -> integer differs (`as` saturates, ONNX as nnefx computes it
    # truncates toward zero and wraps in the target width, non-finite values giving 0): written
    # as that arithmetic in f64 — t = trunc(x) (|x| >= 2^52 is already whole), m = t mod 2^bits
    # (exact: a multiple of a power of two subtracted), for 64 bits t itself below 2^63 and
    # m - 2^64 above — then cast to i64 (exact) and to the target (its low bits).
    from ... import etypes

    x, out = op.inputs["input"], _out(op)
    to = str(op.attribs.get("to")) if op.op == "onnx_cast" else etypes.of(rw.tensor(op.inputs["like"]))
    if to not in _DATUM:
        raise _refuse(op, f"target type {to} has no tract datum type nnefx writes")
    src_et = etypes.of(rw.tensor(x))
    if src_et not in _DATUM:
        raise _refuse(op, f"source type {src_et} has no tract datum type nnefx writes")
    if not (etypes.is_float(src_et) and etypes.abstract(to) == "integer"):
        rw.emit("tract_core_cast", {"input": x}, {"to": _DATUM[to]}, out, like=op)
        return
    bits = etypes.BITS[to]
    shape = rw.shape(x, op)

    def f64(name: str, inputs: dict, attribs: dict | None = None) -> str:
        return rw.temp(name, inputs, attribs or {}, like=op, dtype="scalar", shape=shape, etype="f64")

    def logical(name: str, inputs: dict) -> str:
        return rw.temp(name, inputs, {}, like=op, dtype="logical", shape=shape, etype="bool")

    zero = rw.constant(out, np.array(0.0, np.float64), op, fresh=True)
    xf = x if src_et == "f64" else f64("tract_core_cast", {"input": x}, {"to": "f64"})
    mag = f64("abs", {"x": xf})
    finite = logical("lt", {"x": mag, "y": rw.constant(out, np.array(np.inf), op, fresh=True)})
    safe = f64("select", {"condition": finite, "true_value": xf, "false_value": zero})
    small = logical("lt", {"x": mag, "y": rw.constant(out, np.array(2.0 ** 52), op, fresh=True)})
    whole = rw.temp("tract_core_cast", {"input": safe}, {"to": "i64"}, like=op, dtype="integer", shape=shape,
                    etype="i64")
    t = f64("select", {"condition": small, "true_value": f64("tract_core_cast", {"input": whole}, {"to": "f64"}),
                       "false_value": safe})
    quotient = f64("floor", {"x": f64("mul", {"x": t, "y": rw.constant(out, np.array(2.0 ** -bits), op,
                                                                          fresh=True)})})
    m = f64("sub", {"x": t, "y": f64("mul", {"x": quotient, "y": rw.constant(out, np.array(2.0 ** bits), op,
                                                                               fresh=True)})})
    if bits == 64:   # (t + 2^64 is not exact for small negative t: those are cast as they are)
        top = rw.constant(out, np.array(2.0 ** 63), op, fresh=True)
        m = f64("select", {"condition": logical("ge", {"x": m, "y": top}),
                           "true_value": f64("sub", {"x": m, "y": rw.constant(out, np.array(2.0 ** 64), op,
                                                                                fresh=True)}),
                           "false_value": m})
        m = f64("select", {"condition": logical("lt", {"x": f64("abs", {"x": t}), "y": top}), "true_value": t,
                           "false_value": m})
    ints = rw.temp("tract_core_cast", {"input": m}, {"to": "i64"}, like=op, dtype="integer", shape=shape,
                   etype="i64")
    rw.emit("tract_core_cast", {"input": ints}, {"to": _DATUM[to]}, out, like=op)
