"""Matrix products: how each operator is read from IR and ONNX (and written, below).

MatMul, Einsum, ScaledDotProductAttention; ONNX MatMul, Gemm, Einsum.

Specifications: OpenVINO opset docs: MatMul-1, Einsum-7, ScaledDotProductAttention-13; ONNX operator docs: MatMul, Gemm, Einsum.
"""

from __future__ import annotations

import math
import re
import string
from typing import Any

import numpy as np

from ...diagnostics import NNEFXError
from ...graph import Operation
from ..export.lowering import (
    aligned as lowering_aligned,
)
from ..export.lowering import (
    binop,
    is_zero,
    out,
    without_leading_units,
)
from ..export.registry import to_ir, to_onnx
from ..ir.spelling import out_shape
from ..ir.writer import ExportContext as IRContext
from ..onnx.writer import ExportContext as OnnxContext
from ..reading.context import NodeContext
from ..reading.conventions import aligned, binary, const_value
from ..reading.registry import ANY, onnx_node, operator
from ..reading.values import Value, const, dtype_of
from ._common import onnx_carried, onnx_emit, onnx_kept_etypes, onnx_need, onnx_rank, onnx_write

# ================================================================================================
# Reading
# ================================================================================================

# --- IR v10/11 layers and the numpy-style operator set ----------------------------------------

@operator("Einsum", ANY)
def _einsum(ctx: NodeContext):
    eq = ctx.str("equation").replace(" ", "")
    if "->" not in eq or "." in eq:
        raise ctx.error(f"Einsum equation '{eq}' is not supported (needs '->' and no ellipsis)")
    xs = [ctx.tensor(i) for i in range(ctx.n_inputs)]
    return ctx.result(ctx.emit1("einsum", {"inputs": xs}, {"equation": eq}))

# --- MatMul ----------------------------------------------------------------------------------------


@operator("MatMul", ANY)
def _matmul(ctx: NodeContext):
    ta, tb = ctx.bool("transpose_a", False), ctx.bool("transpose_b", False)
    ra, rb = ctx.in_rank(0), ctx.in_rank(1)
    a, b = ctx.input(0), ctx.input(1)
    if dtype_of(a) != "scalar" or dtype_of(b) != "scalar":
        raise ctx.error("MatMul of integer tensors is not supported")

    def prep(i: int, v: Value, r: int, vector_axis: int) -> tuple[str, int]:
        if r == 1:
            if v.is_const:
                shape = (1, -1) if vector_axis == 0 else (-1, 1)
                return const_value(ctx, np.asarray(v.const).reshape(shape), v.etype), 2
            return ctx.emit1("unsqueeze", {"input": ctx.tensor(i)}, {"axes": [vector_axis]}), 2
        return ctx.tensor(i), r

    xa, ra2 = prep(0, a, ra, 0)
    xb, rb2 = prep(1, b, rb, 1)
    if ra == 1:
        ta = False
    if rb == 1:
        tb = False
    r = max(ra2, rb2)
    if ra2 < r:
        if a.is_const and ra > 1:
            xa = const_value(ctx, np.asarray(a.const).reshape((1,) * (r - ra2) + a.const.shape), a.etype)
        else:
            xa = ctx.emit1("unsqueeze", {"input": xa}, {"axes": list(range(r - ra2))})
    if rb2 < r:
        if b.is_const and rb > 1:
            xb = const_value(ctx, np.asarray(b.const).reshape((1,) * (r - rb2) + b.const.shape), b.etype)
        else:
            xb = ctx.emit1("unsqueeze", {"input": xb}, {"axes": list(range(r - rb2))})
    y = ctx.emit1("matmul", {"A": xa, "B": xb}, {"transposeA": ta, "transposeB": tb})
    squeeze = []
    if ra == 1:
        squeeze.append(r - 2)
    if rb == 1:
        squeeze.append(r - 1)
    if squeeze:
        y = ctx.emit1("squeeze", {"input": y}, {"axes": squeeze})
    return ctx.result(y)


# --- attention --------------------------------------------------------------------------------------

NEG_INF = float(np.finfo(np.float32).min)


@operator("ScaledDotProductAttention", ANY)
def _sdpa(ctx: NodeContext):
    q, k = ctx.input(0), ctx.input(1)
    qs, ks = q.shape, k.shape
    if qs is None or ks is None:
        raise ctx.error("query and key ranks must be known")
    r = max(len(qs), len(ks), ctx.in_rank(2))
    qt, kt, vt = aligned(ctx, [0, 1, 2])
    if ctx.n_inputs > 4:
        sv = ctx.input(4)
        scale: object = float(np.asarray(sv.const).reshape(-1)[0]) if sv.is_const else ctx.tensor(4)
    else:
        e = qs[-1]
        if e is None:
            raise ctx.error("the embedding size of the query must be known")
        scale = 1.0 / math.sqrt(e)
    s = ctx.emit1("matmul", {"A": qt, "B": kt}, {"transposeA": False, "transposeB": True})
    s = binary(ctx, "mul", s, scale)
    if ctx.bool("causal", False):
        lq, lk = qs[-2], ks[-2]
        if lq is None or lk is None:
            raise ctx.error("causal attention needs known sequence lengths")
        m = np.where(np.triu(np.ones((lq, lk), bool), 1), NEG_INF, 0.0).astype(np.float32)
        s = binary(ctx, "add", s, const_value(ctx, m.reshape((1,) * (r - 2) + m.shape), "f32"))
    elif ctx.n_inputs > 3:
        mv = ctx.input(3)
        mr = len(mv.shape or ())
        if mv.etype == "boolean":
            if mv.is_const:
                arr = np.where(mv.const, 0.0, NEG_INF).astype(np.float32)
                mt = const_value(ctx, arr.reshape((1,) * (r - arr.ndim) + arr.shape), "f32")
            else:
                sel = ctx.emit1("select", {"condition": ctx.tensor(3), "true_value": 0.0, "false_value": NEG_INF},
                                dtype="scalar")
                mt = sel if mr == r else ctx.emit1("unsqueeze", {"input": sel}, {"axes": list(range(r - mr))})
        elif mv.is_const:
            arr = np.asarray(mv.const)
            mt = const_value(ctx, arr.reshape((1,) * (r - arr.ndim) + arr.shape), mv.etype)
        else:
            mt = ctx.tensor(3)
            if mr < r:
                mt = ctx.emit1("unsqueeze", {"input": mt}, {"axes": list(range(r - mr))})
        s = binary(ctx, "add", s, mt)
    p = ctx.emit1("softmax", {"x": s}, {"axes": [r - 1]})
    return ctx.result(ctx.emit1("matmul", {"A": p, "B": vt}, {"transposeA": False, "transposeB": False}))


# --- ONNX nodes -----------------------------------------------------------------------------------

@onnx_node("MatMul")
def _onnx_matmul(r, attrs, ins):
    return r.apply1("MatMul", {}, [onnx_need(r, ins, 0, "A"), onnx_need(r, ins, 1, "B")])


@onnx_node("Gemm")
def _onnx_gemm(r, attrs, ins):
    a, b = onnx_need(r, ins, 0, "A"), onnx_need(r, ins, 1, "B")
    y = r.apply1("MatMul", {"transpose_a": bool(attrs.get("transA", 0)), "transpose_b": bool(attrs.get("transB", 0))},
              [a, b])
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = r.apply1("Multiply", {"auto_broadcast": "numpy"}, [y, const(np.float32(alpha))])
    if len(ins) > 2 and ins[2] is not None and beta != 0.0:
        cv = ins[2]
        if beta != 1.0:
            cv = r.apply1("Multiply", {"auto_broadcast": "numpy"}, [cv, const(np.float32(beta))])
        y = r.apply1("Add", {"auto_broadcast": "numpy"}, [y, cv])
    return y


@onnx_node("Einsum")
def _onnx_einsum(r, attrs, ins):
    xs = [v for v in ins if v is not None]
    equation = _explicit_einsum(r, attrs["equation"], [onnx_rank(r, v) for v in xs])
    return r.apply1("Einsum", {"equation": equation}, xs, version="opset7")


def _explicit_einsum(r, equation: str, ranks: list[int]) -> str:
    """``equation`` with its ellipses spelled as letters (right-aligned, numpy's broadcasting) and
    its output explicit: in implicit mode (no ``->``), the ellipsis axes then the labels that
    occur once, alphabetically (ONNX Einsum)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    specs = lhs.split(",")
    if len(specs) != len(ranks) or not re.fullmatch(r"[A-Za-z.,]*(->[A-Za-z.]*)?", eq):
        raise r.error(f"Einsum equation '{equation}' does not fit {len(ranks)} inputs of letters and ellipses")
    free = iter(c for c in string.ascii_letters if c not in eq)
    widths = []
    for spec, rank in zip(specs, ranks, strict=True):
        named = len(spec.replace("...", ""))
        if spec.count("...") > 1 or "." in spec.replace("...", "") or ("..." not in spec and named != rank) \
                or named > rank:
            raise r.error(f"Einsum term '{spec}' does not fit an input of rank {rank}")
        widths.append(rank - named if "..." in spec else 0)
    ellipsis = "".join(next(free) for _ in range(max(widths, default=0)))
    specs = [spec.replace("...", ellipsis[len(ellipsis) - w:]) for spec, w in zip(specs, widths, strict=True)]
    if arrow:
        if rhs.count("...") > 1 or "." in rhs.replace("...", ""):
            raise r.error(f"Einsum output '{rhs}' is not letters and one ellipsis")
        out = rhs.replace("...", ellipsis)
    else:
        labels = "".join(specs)
        out = ellipsis + "".join(sorted(c for c in set(labels) if labels.count(c) == 1 and c not in ellipsis))
    return ",".join(specs) + "->" + out


# --- ONNX operators of the onnx domain (ops/onnx/attention.py, ops/onnx/arith.py) ----------------

_ATTENTION_ATTRS = {"scale": float, "is_causal": bool, "q_num_heads": int, "kv_num_heads": int, "softcap": float,
                    "softmax_precision": int, "qk_matmul_output_mode": int, "left_window_size": int,
                    "right_window_size": int}


#: Attention's type constraints (ONNX operator docs): T1 (Q, K, past_key) and T2 (V,
#: past_value) floats; U (attn_mask) a float, bool or integer type.
_ATTENTION_FLOATS = ("bf16", "f16", "f32", "f64")
_ATTENTION_MASKS = _ATTENTION_FLOATS + ("boolean", "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


@onnx_node("Attention")
def _onnx_attention(r, attrs, ins):
    q = onnx_need(r, ins, 0, "Q")
    cached = [(what, ins[i]) for i, what in enumerate(("Q", "K", "V", "attn_mask", "past_key", "past_value"))
              if i < len(ins) and ins[i] is not None]
    for what, v in cached:
        if v.etype not in (_ATTENTION_MASKS if what == "attn_mask" else _ATTENTION_FLOATS):
            raise r.error(f"{what} has element type {v.etype}, which Attention does not take")
    floats = {v.etype for what, v in cached if what != "attn_mask"}
    if len(floats) > 1:
        # the function body multiplies the probabilities (Q's type) by V: one type for all
        raise r.error(f"Q, K, V and the cache have element types {', '.join(sorted(floats))}; "
                      "Attention's function body is typed for one")
    # the kernels take bfloat16 as stored and round where the function body does (ops/onnx/attention.py)
    onnx_kept_etypes(r, ins, widened=(6,), narrow=True)
    names = ("q", "k", "v", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")
    given = {name: (ins[i] if i < len(ins) else None) for i, name in enumerate(names)}
    given["k"], given["v"] = onnx_need(r, ins, 1, "K"), onnx_need(r, ins, 2, "V")
    data = {k: conv(attrs[k]) for k, conv in _ATTENTION_ATTRS.items() if k in attrs}
    return onnx_emit(r, "onnx_attention", given, data, results=[q.etype] * 4)


@onnx_node("FlexAttention", domain="ai.onnx.preview")
def _onnx_flex_attention(r, attrs, ins):
    """FlexAttention-1 (``ops/onnx/flex_attention.py``): the modifier graphs are read as bodies,
    their scores input fixed to ``[B, Hq, L, S]`` where Q's and K's shapes give it (so a body
    that builds masks from its input's shape folds them at load)."""
    from ...ops.onnx.flex_attention import softmax_etype
    from .control import _align, _outputs_of

    q, k, v = onnx_need(r, ins, 0, "Q"), onnx_need(r, ins, 1, "K"), onnx_need(r, ins, 2, "V")
    onnx_kept_etypes(r, ins)
    if len({q.etype, k.etype, v.etype}) != 1:
        raise r.error(f"Q, K and V must have one element type, got {q.etype}, {k.etype}, {v.etype}")
    precision = int(attrs.get("softmax_precision", 0))
    try:
        soft = softmax_etype(precision, q.etype)
    except NNEFXError as exc:
        raise r.error(exc.message) from None
    scores = None
    if q.shape is not None and k.shape is not None and len(q.shape) == 4 and len(k.shape) == 4:
        scores = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    bodies, readers = {}, []
    for attr in ("score_mod", "prob_mod"):
        if attr not in attrs:
            continue
        proto = attrs[attr]
        if len(proto.input) != 1 or len(proto.output) != 1:
            raise r.error(f"{attr} must take one tensor and return one, it has {len(proto.input)} inputs and "
                          f"{len(proto.output)} outputs")
        fixed = {proto.input[0].name: scores} if scores is not None and None not in scores else None
        child = r.subgraph(proto, attr, [Value(etype=soft, shape=scores)], input_shapes=fixed)
        (kind, etype, _), = _outputs_of(child)
        if kind != "tensor" or etype != soft:
            raise r.error(f"{attr} must return a {soft} tensor (the softmax type), it returns a {kind} of {etype}")
        graph = child.builder.graph
        body_in = graph.tensors[graph.inputs[0]]
        if (body_in.etype or {"scalar": "f32"}.get(body_in.dtype)) != soft:
            raise r.error(f"{attr} must take a {soft} tensor (the softmax type), it takes {body_in.etype}")
        bodies[attr] = child
        readers.append(child)
    captured = _align(readers) if readers else []
    names = {attr: r.file_subgraph(child, attr) for attr, child in bodies.items()}
    data: dict[str, Any] = {"scale": float(attrs.get("scale", 0.0)), "softmax_precision": precision, **names}
    c = r.ctx([q, k, v])
    y = c.emit1("onnx_flex_attention", {"q": c.tensor(0), "k": c.tensor(1), "v": c.tensor(2), "captured": captured},
                data)
    return c.result(y, q.etype)


@onnx_node("RotaryEmbedding")
def _onnx_rotary_embedding(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_kept_etypes(r, ins, widened=(3,))
    given = {"input": x, "cos_cache": onnx_need(r, ins, 1, "cos_cache"), "sin_cache": onnx_need(r, ins, 2, "sin_cache"),
             "position_ids": ins[3] if len(ins) > 3 else None}
    data = {"interleaved": bool(attrs.get("interleaved", 0)),
            "rotary_embedding_dim": int(attrs.get("rotary_embedding_dim", 0)), "num_heads": int(attrs.get("num_heads", 0))}
    return onnx_emit(r, "onnx_rotary_embedding", given, data, results=[x.etype])[0]


@onnx_node("Det")
def _onnx_det(r, attrs, ins):
    x = onnx_need(r, ins, 0, "X")
    onnx_kept_etypes(r, ins)
    return onnx_emit(r, "onnx_det", {"input": x}, {}, results=[x.etype])[0]


# --- ONNX LinearAttention (opset 27) --------------------------------------------------------------

@onnx_node("LinearAttention")
def _onnx_linear_attention(r, attrs, ins):
    q, k, v = onnx_need(r, ins, 0, "query"), onnx_need(r, ins, 1, "key"), onnx_need(r, ins, 2, "value")
    optional = [ins[i] if len(ins) > i and ins[i] is not None else None for i in (3, 4, 5)]
    onnx_carried(r, q, k, v, *optional)
    for key in ("q_num_heads", "kv_num_heads"):
        if key not in attrs:
            raise r.error(f"attribute '{key}' is required")
    c = r.ctx([q, k, v] + [o for o in optional if o is not None])
    tensors = {"query": c.tensor(0), "key": c.tensor(1), "value": c.tensor(2)}
    for name, o in zip(("past_state", "decay", "beta"), optional, strict=True):
        tensors[name] = c.tensor_of(o) if o is not None else 0.0
    y, state = c.emit("onnx_linear_attention", tensors,
                      {"q_num_heads": int(attrs["q_num_heads"]), "kv_num_heads": int(attrs["kv_num_heads"]),
                       "scale": float(attrs.get("scale", 0.0)), "update_rule": attrs.get("update_rule", "gated_delta")},
                      outputs=2)
    return [c.result(y, q.etype), c.result(state, q.etype, port=1)]


# ================================================================================================
# Writing
# ================================================================================================

# --- ONNX helpers ----------------------------------------------------------------------------

def _transposed(ctx: OnnxContext, value: Any) -> str:
    ref = ctx.ref(value)
    dims = ctx.dims(ref)
    r = len(dims)
    perm = list(range(r - 2)) + [r - 1, r - 2]
    return ctx.node("Transpose", [ref], tuple(dims[p] for p in perm), perm=perm)


# --- writers --------------------------------------------------------------------------------------

@to_ir("matmul")
def matmul_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("MatMul", [op.inputs["A"], op.inputs["B"]], out_shape(ctx, op),
                                attrs={"transpose_a": bool(op.attribs.get("transposeA", False)),
                                       "transpose_b": bool(op.attribs.get("transposeB", False))}))


@to_onnx("matmul")
def matmul_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    a, b = op.inputs["A"], op.inputs["B"]
    a, b = _matrix_data(ctx, a, b), _matrix_data(ctx, b, a)
    if op.attribs.get("transposeA", False):
        a = _transposed(ctx, a)
    if op.attribs.get("transposeB", False):
        b = _transposed(ctx, b)
    ctx.bind(out(op), ctx.node("MatMul", [a, b], ctx.dims(out(op)), dtype=ctx.dtype(a)))


def _matrix_data(ctx: OnnxContext, value: Any, other: Any) -> Any:
    """Load-time operand ``value`` of a MatMul without leading unit batch dims where the
    other operand is a run-time value of at least its rank (MatMul broadcasts batch dims as
    numpy.matmul, so they add nothing): a ``[1, K, N]`` weight read as the ``[K, N]``
    matrix that onnxruntime's MatMul + Add -> Gemm fusion matches."""
    data = ctx.live_data(value)
    if data is None or np.ndim(data) <= 2 or ctx.live_data(other) is not None or \
            len(ctx.dims(other)) < np.ndim(data):
        return value
    arr = without_leading_units(np.asarray(data), 2)
    return value if arr.ndim == np.ndim(data) else ctx.data_ref(value, arr, None, True)


@to_ir("linear")
def linear_to_ir(ctx: IRContext, op: Operation) -> None:
    shape = out_shape(ctx, op)
    y = ctx.layer("MatMul", [op.inputs["input"], op.inputs["filter"]], shape,
                  attrs={"transpose_a": False, "transpose_b": True})
    bias = op.inputs.get("bias", 0.0)
    data = ctx.data(bias)
    if data is None or np.any(np.asarray(data) != 0):
        y = binop(ctx, "add", y, lowering_aligned(ctx, bias, len(shape), ctx.etype(y)))
    ctx.bind(out(op), y)


@to_onnx("linear")
def linear_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    # matmul(input, filter, transposeB = true) + bias
    x, w = op.inputs["input"], op.inputs["filter"]
    bias = op.inputs.get("bias", 0.0)
    shape = ctx.dims(out(op))
    if ctx.rank(x) != 2 or ctx.rank(w) != 2:
        raise ctx.fallback("Gemm takes matrices only")
    if is_zero(ctx, bias):
        ctx.bind(out(op), ctx.node("Gemm", [x, w], shape, dtype=ctx.dtype(x), transB=1))
        return
    bdims = ctx.dims(bias) if isinstance(bias, str) else ()
    if len(bdims) <= 2 and all(d == 1 or d == s for d, s in zip(bdims[::-1], shape[::-1], strict=False)):
        # a bias that broadcasts towards [N, M] (NNEF's [1, M], a scalar) is Gemm's C
        ctx.bind(out(op), ctx.node("Gemm", [x, w, lowering_aligned(ctx, bias, 2, ctx.dtype(x))], shape,
                                   dtype=ctx.dtype(x), transB=1))
        return
    y = ctx.node("Gemm", [x, w], shape, dtype=ctx.dtype(x), transB=1)
    ctx.bind(out(op), binop(ctx, "add", y, lowering_aligned(ctx, bias, len(shape), ctx.dtype(x))))


@to_ir("einsum")
def ir_einsum_to_ir(ctx: IRContext, op: Operation) -> None:
    ctx.bind(out(op), ctx.layer("Einsum", list(op.inputs["inputs"]), out_shape(ctx, op), version="opset7",
                                attrs={"equation": str(op.attribs["equation"])}))


@to_onnx("einsum")
def ir_einsum_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    refs = [ctx.ref(v) for v in op.inputs["inputs"]]
    ctx.bind(out(op), ctx.node("Einsum", refs, ctx.dims(out(op)), dtype=ctx.dtype(refs[0]),
                               equation=str(op.attribs["equation"])))


# --- onnx-domain operations, written back as the ONNX nodes they stand for ----------------------

@to_onnx("onnx_attention")
def attention_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    names = ("q", "k", "v", "attn_mask", "past_key", "past_value", "nonpad_kv_seqlen")
    seqlen = isinstance(op.inputs.get("nonpad_kv_seqlen"), str)
    windows = any(int(op.attribs.get(k, -1)) != -1 for k in ("left_window_size", "right_window_size"))
    attrs = {k: op.attribs[k] for k in _ATTENTION_ATTRS if k in op.attribs}
    attrs = {k: (int(v) if isinstance(v, bool) else v) for k, v in attrs.items()}
    # Attention-24 added nonpad_kv_seqlen, -25 the sliding-window sizes
    onnx_write(ctx, op, "Attention", [op.inputs.get(n) for n in names], 25 if windows else 24 if seqlen else 23,
               **attrs)


@to_onnx("onnx_flex_attention")
def flex_attention_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    from ..onnx.writer import body_graph

    captured = [ctx.ref(n) for n in op.inputs.get("captured", [])]
    bodies = {k: body_graph(ctx, op.attribs[k], captured) for k in ("score_mod", "prob_mod") if op.attribs.get(k)}
    scale, precision = float(op.attribs.get("scale", 0.0)), int(op.attribs.get("softmax_precision", 0))
    onnx_write(ctx, op, "FlexAttention", [op.inputs[k] for k in ("q", "k", "v")], 1, domain="ai.onnx.preview",
               scale=scale or None, softmax_precision=precision or None, **bodies)
    ctx.e.need_opset(26)  # the preview domain's operators come with opset 26


@to_onnx("onnx_rotary_embedding")
def rotary_embedding_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "RotaryEmbedding", [op.inputs.get(n) for n in ("input", "cos_cache", "sin_cache", "position_ids")],
               23, interleaved=int(bool(op.attribs.get("interleaved", False))),
               rotary_embedding_dim=int(op.attribs.get("rotary_embedding_dim", 0)),
               num_heads=int(op.attribs.get("num_heads", 0)) or None)


@to_onnx("onnx_det")
def det_to_onnx(ctx: OnnxContext, op: Operation) -> None:
    onnx_write(ctx, op, "Det", [op.inputs["input"]], 11)
