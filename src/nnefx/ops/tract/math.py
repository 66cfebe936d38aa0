"""tract's contractions, reductions and normalisations: einsum (``nnef/src/ops/core/einsum.rs``),
product / argmax / argmin reductions (``reduce.rs``), softmax and log-softmax (``softmax.rs``),
rms norm (``rms_norm.rs``, also registered by tract as ``tract_transformers_rms_norm``).

Reductions keep the reduced axes with extent 1, as tract's ``ops::nn::Reduce`` does.  Float
kernels accumulate in float64 (formal) or in the accumulation type tract names (fast: ``acc``
for einsum, float32 otherwise) and round once to the result's type.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ... import etypes
from .._common import attr_error, check_axes, guard_family, op_error
from ..registry import define
from ._util import DOMAIN, check_axis, parse_etype, wrap_int

FAMILY = "tract_math"

# --- einsum ---------------------------------------------------------------------------------------------

einsum = define("tract_core_einsum", FAMILY, """
fragment tract_core_einsum( inputs: tensor<scalar>[], expr: string, acc: string, output: string = '' )
    -> ( result: tensor<scalar> );
""", domain=DOMAIN, tract_header="fragment tract_core_einsum( inputs: tensor<scalar>[], expr: string, acc: string, "
                                 "output: string = \"\" ) -> ( output: tensor<scalar> );",
    doc="Einstein summation over the inputs (expr as 'ij,jk->ik'; a label repeated within an "
                        "input takes its diagonal; extents 1 broadcast), accumulated in the datum type acc, the "
        "result in output's datum type (the first input's when empty; ops::einsum::EinSum).  tract names "
        "the result 'output' like the parameter, which NNEF 1.0.5 forbids: here it is 'result' (callers "
        "never name results, so documents read the same).")

_EXPR = re.compile(r"^([A-Za-z]*)(,[A-Za-z]*)*->([A-Za-z]*)$")


def _parse_expr(expr, n: int):
    op = "tract_core_einsum"
    if not isinstance(expr, str) or not _EXPR.match(expr.replace(" ", "")):
        raise attr_error(op, "expr", expr, "is not an einsum expression such as 'ij,jk->ik'")
    ins, out = expr.replace(" ", "").split("->")
    specs = ins.split(",")
    if len(specs) != n:
        raise attr_error(op, "expr", expr, f"names {len(specs)} inputs, the operation has {n}")
    known = set("".join(specs))
    if any(c not in known for c in out) or len(set(out)) != len(out):
        raise attr_error(op, "expr", expr, "has output labels that are repeated or appear in no input")
    return specs, out


def _extents(specs, shapes) -> dict:
    sizes: dict[str, int | None] = {}
    for spec, shape in zip(specs, shapes, strict=True):
        if len(spec) != len(shape):
            raise op_error("tract_core_einsum", f"input of shape {list(shape)} does not fit '{spec}'")
        for lab, d in zip(spec, shape, strict=True):
            prev = sizes.get(lab, 1)
            if d is None or prev is None:
                sizes[lab] = None if d != 1 and prev != 1 else (d if prev == 1 else prev)
            elif prev != 1 and d != 1 and prev != d:
                raise op_error("tract_core_einsum", f"label '{lab}' has extents {prev} and {d}")
            else:
                sizes[lab] = max(prev, d)
    return sizes


@einsum.shape
def _einsum_shape(xs, expr, acc, output=""):
    specs, out = _parse_expr(expr, len(xs))
    _einsum_types(acc, output)
    sizes = _extents(specs, xs)
    return tuple(sizes[lab] for lab in out)


def _einsum_types(acc, output):
    a = parse_etype("tract_core_einsum", "acc", acc)
    o = parse_etype("tract_core_einsum", "output", output) if output else None
    return a, o


einsum.etypes(lambda xs, expr, acc, output="": _einsum_types(acc, output)[1] or xs[0])


def _einsum_args(xs, expr, acc, output):
    arrays = [np.asarray(x) for x in xs]
    specs, out = _parse_expr(expr, len(arrays))
    acc_et, out_et = _einsum_types(acc, output)
    sizes = _extents(specs, [a.shape for a in arrays])
    dt = etypes.numpy_dtype(out_et) if out_et else arrays[0].dtype
    return arrays, specs, out, acc_et, dt, sizes


@einsum.formal
def _einsum_formal(xs, expr, acc, output=""):
    arrays, specs, out, _, dt, sizes = _einsum_args(xs, expr, acc, output)
    labels = sorted(sizes)
    result = np.zeros(tuple(sizes[lab] for lab in out), dtype=np.float64 if arrays[0].dtype.kind in "fc"
                      else np.int64)
    for values in np.ndindex(*[sizes[lab] for lab in labels]):
        v = dict(zip(labels, values, strict=True))
        term = 1
        for spec, a in zip(specs, arrays, strict=True):  # extent-1 axes broadcast
            term = term * a[tuple(v[lab] if a.shape[k] != 1 else 0 for k, lab in enumerate(spec))].item()
        result[tuple(v[lab] for lab in out)] += term
    return result.astype(dt)


@einsum.fast
def _einsum_fast(xs, expr, acc, output=""):
    arrays, specs, out, acc_et, dt, sizes = _einsum_args(xs, expr, acc, output)
    # numpy's einsum does not broadcast extent-1 axes against a label's full extent: expand them
    full = [np.broadcast_to(a, tuple(sizes[lab] if a.shape[k] == 1 else a.shape[k] for k, lab in enumerate(spec)))
            for spec, a in zip(specs, arrays, strict=True)]
    acc_dt = etypes.compute_dtype(acc_et)
    res = np.einsum(",".join(specs) + "->" + out, *[a.astype(acc_dt) for a in full])
    return np.asarray(res).astype(dt)


# --- reductions ---------------------------------------------------------------------------------------------


def _reduced_shape(op: str, x, axes):
    axes = check_axes(op, list(axes), len(x))
    if any(a < 0 for a in axes):
        raise attr_error(op, "axes", list(axes), "must not be negative (tract reads them as unsigned)")
    return tuple(1 if k in axes else d for k, d in enumerate(x)), axes


product_reduce = define("tract_core_product_reduce", FAMILY, """
fragment tract_core_product_reduce( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="The product over axes, which stay with extent 1 (ops::nn::Reduce Prod); integers "
                        "wrap around in their type.")
product_reduce.shape(lambda x, axes: _reduced_shape("tract_core_product_reduce", x, axes)[0])


@product_reduce.formal
def _prod_formal(x, axes):
    x = np.asarray(x)
    shape, axes = _reduced_shape("tract_core_product_reduce", x.shape, axes)
    wide = x.dtype.kind in "fc"
    out = np.ones(shape, dtype=np.float64 if wide else object)
    for pos in np.ndindex(*x.shape):
        target = tuple(0 if k in axes else d for k, d in enumerate(pos))
        out[target] = out[target] * (float(x[pos]) if wide else int(x[pos]))
    if wide:
        return out.astype(x.dtype)
    return np.array([wrap_int(v, x.dtype) for v in out.reshape(-1)], dtype=x.dtype).reshape(shape)


@product_reduce.fast
def _prod_fast(x, axes):
    x = np.asarray(x)
    _, axes = _reduced_shape("tract_core_product_reduce", x.shape, axes)
    if x.dtype.kind == "f":   # as the formal kernel: the product in float64, rounded once
        return np.prod(x.astype(np.float64), axis=tuple(axes), keepdims=True).astype(x.dtype)
    with np.errstate(over="ignore"):
        return np.prod(x, axis=tuple(axes), keepdims=True, dtype=x.dtype)


def _register_arg(name: str, largest: bool) -> None:
    word = "largest" if largest else "smallest"
    op = define(name, FAMILY, f"""
fragment {name}( input: tensor<scalar>, axes: integer[] ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc=f"The position of the {word} value over axes (flattened, row-major), the last one on "
                        f"ties, as i64; the axes stay with extent 1 (ops::nn::Reduce Arg{'Max' if largest else 'Min'}"
                        f"(last)).")
    op.shape(lambda x, axes: _reduced_shape(name, x, axes)[0])
    op.etypes(lambda x, axes: "i64")

    @op.formal
    def formal(x, axes):
        x = np.asarray(x)
        shape, axes = _reduced_shape(name, x.shape, axes)
        out = np.zeros(shape, np.int64)
        best: dict = {}
        for pos in np.ndindex(*x.shape):  # row-major: a later equal value replaces the earlier one
            target = tuple(0 if k in axes else d for k, d in enumerate(pos))
            flat = 0
            for k in axes:
                flat = flat * x.shape[k] + pos[k]
            v = x[pos]
            if target not in best or (v >= best[target] if largest else v <= best[target]):
                best[target] = v
                out[target] = flat
        return out

    @op.fast
    def fast(x, axes):
        x = np.asarray(x)
        shape, axes = _reduced_shape(name, x.shape, axes)
        rest = [k for k in range(x.ndim) if k not in axes]
        moved = np.transpose(x, rest + sorted(axes)).reshape([x.shape[k] for k in rest] + [-1])
        flipped = moved[..., ::-1]  # argmax takes the first: search reversed to take the last
        idx = (np.argmax if largest else np.argmin)(flipped, axis=-1)
        return (moved.shape[-1] - 1 - idx).astype(np.int64).reshape(shape)


_register_arg("tract_core_argmax_reduce_last", True)
_register_arg("tract_core_argmin_reduce_last", False)


# --- softmax, log_softmax ----------------------------------------------------------------------------------------

def _softmax_axes(op: str, x_rank: int, axes) -> list[int]:
    axes = [int(a) for a in np.asarray(axes).reshape(-1)] if not isinstance(axes, (list, tuple)) else list(axes)
    if not axes or any(not 0 <= a < x_rank for a in axes) or len(set(axes)) != len(axes):
        raise attr_error(op, "axes", axes, f"must be distinct axes in 0..{x_rank - 1}")
    return axes


def _softmax_formal(x, axes, log: bool, op: str):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise op_error(op, f"needs a float tensor, got {x.dtype}")
    axes = _softmax_axes(op, x.ndim, axes)
    out = np.empty(x.shape, x.dtype)
    rest = [k for k in range(x.ndim) if k not in axes]
    for outer in np.ndindex(*[x.shape[k] for k in rest]):
        group = []
        for inner in np.ndindex(*[x.shape[k] for k in axes]):
            pos = [0] * x.ndim
            for k, v in zip(rest, outer, strict=True):
                pos[k] = v
            for k, v in zip(axes, inner, strict=True):
                pos[k] = v
            group.append(tuple(pos))
        m = max(float(x[p]) for p in group)
        total = math.fsum(math.exp(float(x[p]) - m) for p in group)
        for p in group:  # softmax_i = exp(x_i - m) / sum_j exp(x_j - m); log: x_i - m - log(sum)
            out[p] = float(x[p]) - m - math.log(total) if log else math.exp(float(x[p]) - m) / total
    return out


def _softmax_fast(x, axes, log: bool, op: str):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        raise op_error(op, f"needs a float tensor, got {x.dtype}")
    axes = tuple(_softmax_axes(op, x.ndim, axes))
    w = x.astype(etypes.compute_dtype(etypes.from_numpy(x.dtype)))
    z = w - np.max(w, axis=axes, keepdims=True)
    with np.errstate(divide="ignore"):
        s = np.sum(np.exp(z), axis=axes, keepdims=True)
        return (z - np.log(s) if log else np.exp(z) / s).astype(x.dtype)


softmax = define("tract_core_softmax", FAMILY, """
fragment tract_core_softmax( x: tensor<scalar>, axes: tensor<integer>, exp: string ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="exp(x - max) / sum(exp(x - max)) over axes (ops::nn::Softmax); exp is a legacy "
                        "selector tract reads and ignores.")
log_softmax = define("tract_core_log_softmax", FAMILY, """
fragment tract_core_log_softmax( x: tensor<scalar>, axes: tensor<integer> ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc="x - max - log(sum(exp(x - max))) over axes (ops::nn::Softmax, kind LogSoftmax).  "
                        "axes is an integer list in torch-to-nnef's files.")


def _softmax_shape(x, axes, exp=None):
    return tuple(x)  # axes is a tensor parameter: its values reach the kernels only


softmax.shape(_softmax_shape)
softmax.formal(lambda x, axes, exp="": _softmax_formal(x, axes, False, "tract_core_softmax"))
softmax.fast(lambda x, axes, exp="": _softmax_fast(x, axes, False, "tract_core_softmax"))
log_softmax.shape(lambda x, axes: tuple(x))
log_softmax.formal(lambda x, axes: _softmax_formal(x, axes, True, "tract_core_log_softmax"))
log_softmax.fast(lambda x, axes: _softmax_fast(x, axes, True, "tract_core_log_softmax"))


# --- rms norm --------------------------------------------------------------------------------------------------------

def _register_rms(name: str, doc: str) -> None:
    op = define(name, FAMILY, f"""
fragment {name}( input: tensor<scalar>, axis: integer, eps: scalar = 1e-6 ) -> ( output: tensor<scalar> );
""", domain=DOMAIN, doc=doc)

    @op.shape
    def shape(x, axis, eps=1e-6):
        check_axis(name, axis, len(x))
        return tuple(x)

    @op.formal
    def formal(x, axis, eps=1e-6):
        x = np.asarray(x)
        a = check_axis(name, axis, x.ndim)
        out = np.empty(x.shape, x.dtype)
        n = x.shape[a]
        for pos in np.ndindex(*x.shape):
            row = [float(x[pos[:a] + (j,) + pos[a + 1:]]) for j in range(n)]
            out[pos] = float(x[pos]) / math.sqrt(math.fsum(v * v for v in row) / n + float(eps))
        return out

    @op.fast
    def fast(x, axis, eps=1e-6):
        x = np.asarray(x)
        a = check_axis(name, axis, x.ndim)
        w = x.astype(etypes.compute_dtype(etypes.from_numpy(x.dtype)))
        ms = np.mean(w * w, axis=a, keepdims=True)
        return (w / np.sqrt(ms + w.dtype.type(eps))).astype(x.dtype)


_register_rms("tract_core_rms_norm", "x / sqrt(mean(x^2 over axis) + eps) (ops::nn::RmsNorm).")
_register_rms("tract_transformers_rms_norm", "Alias of tract_core_rms_norm kept by tract for older files.")

guard_family(FAMILY)
