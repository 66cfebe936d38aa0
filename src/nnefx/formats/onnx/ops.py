"""ONNX operation handlers: ``fn(reader, attrs, inputs) -> Value | list[Value]``.

Most handlers rename attributes and call the IR mapping of the equivalent IR layer
(``r.ir``); see :mod:`.reader` for why.  ``inputs`` holds None for omitted optional inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir.mapping import Value
from ..ir.opset import check_items
from .reader import OnnxReader, const

Handler = Callable[[OnnxReader, dict, list], Any]
HANDLERS: dict[str, Handler] = {}


def handles(*names: str) -> Callable[[Handler], Handler]:
    def deco(fn: Handler) -> Handler:
        for n in names:
            HANDLERS[n] = fn
        return fn
    return deco


def _need(r: OnnxReader, ins: list, i: int, what: str) -> Value:
    if i >= len(ins) or ins[i] is None:
        raise r.error(f"input {i} ({what}) is missing")
    return ins[i]


def _ints_of(r: OnnxReader, v: Value | None, what: str) -> list[int] | None:
    if v is None:
        return None
    if not v.is_const:
        raise r.error(f"{what} must be known when the model is loaded")
    return [int(x) for x in np.asarray(v.const).reshape(-1)]


def _rank(r: OnnxReader, v: Value) -> int:
    if v.shape is None:
        raise r.error("the input rank is not known")
    return len(v.shape)


# --- element-wise ---------------------------------------------------------------------------------

_BIN = {"Add": "Add", "Sub": "Subtract", "Mul": "Multiply", "Div": "Divide", "Pow": "Power", "Max": "Maximum",
        "Min": "Minimum", "Equal": "Equal", "Less": "Less", "Greater": "Greater", "LessOrEqual": "LessEqual",
        "GreaterOrEqual": "GreaterEqual", "And": "LogicalAnd", "Or": "LogicalOr", "Xor": "LogicalXor"}


@handles(*_BIN)
def _binary(r, attrs, ins):
    kind = _BIN[r.node.op_type]
    if attrs.get("broadcast", 0) and "axis" in attrs:
        raise r.error("legacy broadcast with an axis (opset < 7) is not supported")
    vals = [v for v in ins if v is not None]
    if kind in ("Maximum", "Minimum") and len(vals) == 1:
        return vals[0]
    if len(vals) < 2 or (len(vals) > 2 and kind not in ("Maximum", "Minimum")):
        raise r.error(f"expects 2 inputs, has {len(vals)}")
    data = {"auto_broadcast": "numpy"}
    if kind == "Divide":
        data["m_pythondiv"] = False  # ONNX integer division truncates
    acc = vals[0]
    for v in vals[1:]:
        if kind == "Power" and v.is_const and v.etype != acc.etype:
            v = const(np.asarray(v.const).astype(np.float32 if acc.etype == "f32" else v.const.dtype))
        acc = r.ir1(kind, data, [acc, v])
    return acc


@handles("Mod")
def _mod(r, attrs, ins):
    kind = "Mod" if attrs.get("fmod", 0) else "FloorMod"  # fmod=1: C fmod; 0: the divisor's sign
    return r.ir1(kind, {"auto_broadcast": "numpy"}, [_need(r, ins, 0, "A"), _need(r, ins, 1, "B")])


@handles("Sum", "Mean")
def _sum(r, attrs, ins):
    vals = [v for v in ins if v is not None]
    acc = vals[0]
    for v in vals[1:]:
        acc = r.ir1("Add", {"auto_broadcast": "numpy"}, [acc, v])
    if r.node.op_type == "Mean" and len(vals) > 1:
        acc = r.ir1("Divide", {"auto_broadcast": "numpy"}, [acc, const(np.float32(len(vals)))])
    return acc


_UN = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Exp": "Exp", "Log": "Log", "Sqrt": "Sqrt",
       "Abs": "Abs", "Neg": "Negative", "Floor": "Floor", "Ceil": "Ceiling", "Erf": "Erf", "Sin": "Sin",
       "Cos": "Cos", "Tan": "Tan", "Sign": "Sign", "Softplus": "SoftPlus", "Not": "LogicalNot",
       "HardSwish": "HSwish", "Mish": "Mish", "Softsign": "SoftSign", "Asin": "Asin", "Acos": "Acos",
       "Atan": "Atan", "Sinh": "Sinh", "Cosh": "Cosh"}


@handles(*_UN)
def _unary(r, attrs, ins):
    return r.ir1(_UN[r.node.op_type], {}, [_need(r, ins, 0, "X")])


@handles("Reciprocal")
def _reciprocal(r, attrs, ins):
    x = _need(r, ins, 0, "X")
    if x.etype not in ("f32", "f64", "f16"):
        raise r.error("Reciprocal of integer tensors is not supported")
    return r.ir1("Divide", {"auto_broadcast": "numpy"}, [const(np.ones((), x.const.dtype if x.is_const
                                                                         else np.float32)), x])


@handles("LeakyRelu")
def _leaky_relu(r, attrs, ins):
    x = _need(r, ins, 0, "X")
    c = r.ctx([x])
    return c.result(c.emit1("leaky_relu", {"x": c.tensor(0)}, {"alpha": float(attrs.get("alpha", 0.01))}))


@handles("PRelu")
def _prelu(r, attrs, ins):
    # max(0, x) + slope * min(0, x), with ONNX's (numpy) broadcasting of the slope
    x, slope = _need(r, ins, 0, "X"), _need(r, ins, 1, "slope")
    zero = const(np.zeros((), np.float32))
    pos = r.ir1("Maximum", {"auto_broadcast": "numpy"}, [x, zero])
    neg = r.ir1("Minimum", {"auto_broadcast": "numpy"}, [x, zero])
    return r.ir1("Add", {"auto_broadcast": "numpy"}, [pos, r.ir1("Multiply", {"auto_broadcast": "numpy"},
                                                                [neg, slope])])


@handles("Clip")
def _clip(r, attrs, ins):
    x = _need(r, ins, 0, "input")
    big = float(np.finfo(np.float32).max)
    lo, hi = attrs.get("min", -big), attrs.get("max", big)
    if len(ins) > 1 and ins[1] is not None:
        lo = float(np.asarray(_const(r, ins[1], "min")).reshape(-1)[0])
    if len(ins) > 2 and ins[2] is not None:
        hi = float(np.asarray(_const(r, ins[2], "max")).reshape(-1)[0])
    if x.is_const:
        return const(np.clip(x.const, lo, hi).astype(x.const.dtype))
    return r.ir1("Clamp", {"min": max(lo, -big), "max": min(hi, big)}, [x])


def _const(r, v: Value, what: str) -> np.ndarray:
    if not v.is_const:
        raise r.error(f"{what} must be known when the model is loaded")
    return v.const


@handles("Elu")
def _elu(r, attrs, ins):
    return r.ir1("Elu", {"alpha": float(attrs.get("alpha", 1.0))}, [_need(r, ins, 0, "X")])


@handles("Selu")
def _selu(r, attrs, ins):
    a = float(attrs.get("alpha", 1.67326319217681884765625))
    g = float(attrs.get("gamma", 1.05070102214813232421875))
    return r.ir1("Selu", {}, [_need(r, ins, 0, "X"), const(np.float32(a)), const(np.float32(g))])


@handles("HardSigmoid")
def _hard_sigmoid(r, attrs, ins):
    a, b = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    return r.ir1("HardSigmoid", {}, [_need(r, ins, 0, "X"), const(np.float32(a)), const(np.float32(b))])


@handles("Gelu")
def _gelu(r, attrs, ins):
    mode = {"none": "erf", "tanh": "tanh"}.get(attrs.get("approximate", "none"))
    if mode is None:
        raise r.error(f"unknown approximate='{attrs.get('approximate')}'")
    return r.ir1("Gelu", {"approximation_mode": mode}, [_need(r, ins, 0, "X")], version="opset7")


@handles("Where")
def _where(r, attrs, ins):
    vals = [_need(r, ins, i, "input") for i in range(3)]
    y = r.ir1("Select", {"auto_broadcast": "numpy"}, vals)
    if y.shape is None and all(v.shape is not None and None not in v.shape for v in vals):
        # the result shape is numpy's broadcast of the three (select's rule may not say)
        y.shape = tuple(np.broadcast_shapes(*[tuple(v.shape) for v in vals]))
        r.builder.graph.tensors[y.tensor].shape = y.shape
    return y


@handles("Identity", "Dropout")
def _identity(r, attrs, ins):
    x = _need(r, ins, 0, "input")
    if r.node.op_type == "Dropout" and len(r.node.output) > 1 and r.node.output[1]:
        return [x, Value(unsupported="the mask output of Dropout is not supported")]
    return x


@handles("Cast")
def _cast(r, attrs, ins):
    from .reader import _etype_code
    et = _etype_code(int(attrs["to"]), r.loc())
    return r.ir1("Convert", {"destination_type": et}, [_need(r, ins, 0, "input")])


# --- softmax & normalisation ------------------------------------------------------------------------

@handles("Softmax", "LogSoftmax")
def _softmax(r, attrs, ins):
    x = _need(r, ins, 0, "input")
    rank = _rank(r, x)
    kind = r.node.op_type
    if r.opset >= 13:
        return r.ir1(kind, {"axis": int(attrs.get("axis", -1))}, [x])
    axis = int(attrs.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    if axis == rank - 1:
        return r.ir1(kind, {"axis": axis}, [x])
    # opset < 13: the input is seen as a 2-D [prod(:axis), prod(axis:)] matrix
    shape = x.shape
    if any(d is None for d in shape):
        raise r.error("Softmax (opset < 13) needs a static input shape")
    flat = r.ir1("Reshape", {"special_zero": False}, [x, const(np.array(
        [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))], np.int64))])
    y = r.ir1(kind, {"axis": 1}, [flat])
    return r.ir1("Reshape", {"special_zero": False}, [y, const(np.array(shape, np.int64))])


@handles("BatchNormalization")
def _batch_norm(r, attrs, ins):
    if attrs.get("training_mode", 0):
        raise r.error("training_mode BatchNormalization is not supported")
    vals = [_need(r, ins, i, "input") for i in range(5)]
    out = r.ir1("BatchNormInference", {"epsilon": float(attrs.get("epsilon", 1e-5))}, vals, version="opset5")
    if len([o for o in r.node.output if o]) > 1:
        return [out] + [Value(unsupported="BatchNormalization training outputs are not supported")] * 4
    return out


@handles("LayerNormalization")
def _layer_norm(r, attrs, ins):
    x = _need(r, ins, 0, "X")
    rank = _rank(r, x)
    axis = int(attrs.get("axis", -1))
    axis = axis + rank if axis < 0 else axis
    if attrs.get("stash_type", 1) != 1:
        raise r.error("stash_type other than float is not supported")
    y = r.ir1("MVN", {"normalize_variance": True, "eps": float(attrs.get("epsilon", 1e-5)),
                      "eps_mode": "inside_sqrt"}, [x, const(np.arange(axis, rank, dtype=np.int64))],
              version="opset6")
    y = r.ir1("Multiply", {"auto_broadcast": "numpy"}, [y, _need(r, ins, 1, "Scale")])
    if len(ins) > 2 and ins[2] is not None:
        y = r.ir1("Add", {"auto_broadcast": "numpy"}, [y, ins[2]])
    extra = [Value(unsupported="LayerNormalization Mean/InvStdDev outputs are not supported")] * 2
    return [y] + extra


@handles("InstanceNormalization")
def _instance_norm(r, attrs, ins):
    x = _need(r, ins, 0, "input")
    rank = _rank(r, x)
    y = r.ir1("MVN", {"normalize_variance": True, "eps": float(attrs.get("epsilon", 1e-5)),
                      "eps_mode": "inside_sqrt"}, [x, const(np.arange(2, rank, dtype=np.int64))], version="opset6")
    axes = const(np.arange(1, rank - 1, dtype=np.int64))
    s = r.ir1("Unsqueeze", {}, [_need(r, ins, 1, "scale"), axes])
    b = r.ir1("Unsqueeze", {}, [_need(r, ins, 2, "B"), axes])
    y = r.ir1("Multiply", {"auto_broadcast": "numpy"}, [y, s])
    return r.ir1("Add", {"auto_broadcast": "numpy"}, [y, b])


@handles("LRN")
def _lrn(r, attrs, ins):
    data = {"alpha": float(attrs.get("alpha", 1e-4)), "beta": float(attrs.get("beta", 0.75)),
            "bias": float(attrs.get("bias", 1.0)), "size": int(attrs["size"])}
    return r.ir1("LRN", data, [_need(r, ins, 0, "X"), const(np.array([1], np.int64))])


# --- convolution, pooling, matmul ----------------------------------------------------------------------

def _conv_pads(r, attrs, spatial, kernel, strides, dil) -> list[tuple[int, int]]:
    n = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        p = list(attrs.get("pads", [0] * (2 * n)))
        if len(p) != 2 * n:
            raise r.error(f"pads {p} must have {2 * n} entries")
        return list(zip(p[:n], p[n:], strict=True))
    if auto == "VALID":
        return [(0, 0)] * n
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for x, k, s, d in zip(spatial, kernel, strides, dil, strict=True):
            if x is None:
                raise r.error("auto_pad SAME needs known spatial extents")
            out = -(-x // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - x)
            small = total // 2
            pads.append((small, total - small) if auto == "SAME_UPPER" else (total - small, small))
        return pads
    raise r.error(f"unknown auto_pad '{auto}'")


def _bias(r, c, ins, idx: int):
    if len(ins) <= idx or ins[idx] is None:
        return 0.0
    b = ins[idx]
    if b.is_const:
        return c.tensor_of(c.folded(np.asarray(b.const).reshape(1, -1)), f"{c.name}_bias")
    return c.emit1("unsqueeze", {"input": c.tensor_of(b)}, {"axes": [0]})


def _kernel(r, attrs, w: Value, n: int) -> list[int]:
    kernel = list(w.shape[2:])
    if len(kernel) != n or any(k is None for k in kernel):
        raise r.error(f"filter shape {list(w.shape)} does not fit a {n}-D convolution")
    if "kernel_shape" in attrs and list(attrs["kernel_shape"]) != kernel:
        raise r.error(f"kernel_shape {list(attrs['kernel_shape'])} disagrees with the filter shape {list(w.shape)}")
    for key in ("strides", "dilations", "output_padding"):
        if key in attrs and (len(attrs[key]) != n or any(int(v) < (0 if key == "output_padding" else 1)
                                                         for v in attrs[key])):
            raise r.error(f"attribute '{key}' = {list(attrs[key])} must have {n} entries "
                          f"{'>= 0' if key == 'output_padding' else '>= 1'}")
    return kernel


@handles("Conv")
def _conv(r, attrs, ins):
    x, w = _need(r, ins, 0, "X"), _need(r, ins, 1, "W")
    if x.shape is None or w.shape is None:
        raise r.error("Conv needs known input and filter ranks")
    n = len(x.shape) - 2
    kernel = _kernel(r, attrs, w, n)
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    pads = _conv_pads(r, attrs, x.shape[2:], kernel, strides, dil)
    c = r.ctx([x, w])
    bias = _bias(r, c, ins, 2)
    y = c.emit1("conv", {"input": c.tensor(0), "filter": c.tensor(1), "bias": bias},
                {"border": "constant", "padding": pads, "stride": strides, "dilation": dil,
                 "groups": int(attrs.get("group", 1))})
    return c.result(y)


@handles("ConvTranspose")
def _conv_transpose(r, attrs, ins):
    x, w = _need(r, ins, 0, "X"), _need(r, ins, 1, "W")
    if x.shape is None or w.shape is None:
        raise r.error("ConvTranspose needs known input and filter ranks")
    n = len(x.shape) - 2
    g = int(attrs.get("group", 1))
    kernel = _kernel(r, attrs, w, n)
    strides = list(attrs.get("strides", [1] * n))
    dil = list(attrs.get("dilations", [1] * n))
    outpad = list(attrs.get("output_padding", [0] * n))
    auto = attrs.get("auto_pad", "NOTSET")
    if "output_shape" in attrs or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = list(attrs["output_shape"])[-n:] if "output_shape" in attrs else \
            [None if d is None else d * s for d, s in zip(x.shape[2:], strides, strict=True)]
        pads = []
        for i in range(n):
            if x.shape[2 + i] is None or want[i] is None:
                raise r.error("ConvTranspose output_shape needs known spatial extents")
            total = strides[i] * (x.shape[2 + i] - 1) + outpad[i] + (kernel[i] - 1) * dil[i] + 1 - want[i]
            if auto == "SAME_UPPER":
                pads.append((total // 2, total - total // 2))
            else:
                pads.append((total - total // 2, total // 2))
        padding = pads
    else:
        if auto == "VALID":
            pads = [(0, 0)] * n
        else:
            p = list(attrs.get("pads", [0] * (2 * n)))
            pads = list(zip(p[:n], p[n:], strict=True))
        padding = [(a, b - op) for (a, b), op in zip(pads, outpad, strict=True)]
    c = r.ctx([x, w])
    bias = _bias(r, c, ins, 2)
    y = c.emit1("deconv", {"input": c.tensor(0), "filter": c.tensor(1), "bias": bias},
                {"border": "constant", "padding": padding, "stride": strides, "dilation": dil, "groups": g})
    return c.result(y)


_AUTO = {"NOTSET": "explicit", "": "explicit", "VALID": "valid", "SAME_UPPER": "same_upper",
         "SAME_LOWER": "same_lower"}


@handles("MaxPool", "AveragePool")
def _pool(r, attrs, ins):
    x = _need(r, ins, 0, "X")
    n = _rank(r, x) - 2
    kernel = list(attrs["kernel_shape"])
    p = list(attrs.get("pads", [0] * (2 * n)))
    data = {"kernel": kernel, "strides": list(attrs.get("strides", [1] * n)), "pads_begin": p[:n],
            "pads_end": p[n:], "rounding_type": "ceil_torch" if attrs.get("ceil_mode", 0) else "floor",
            "auto_pad": _AUTO.get(attrs.get("auto_pad", "NOTSET"), "?")}
    if r.node.op_type == "MaxPool":
        if attrs.get("storage_order", 0):
            raise r.error("storage_order=1 is not supported")
        data["dilations"] = list(attrs.get("dilations", [1] * n))
        n_out = len(r.node.output)
        return r.ir("MaxPool", data, [x], n_out=n_out)
    if any(d != 1 for d in attrs.get("dilations", [1] * n)):
        raise r.error("dilated AveragePool is not supported")
    include = bool(attrs.get("count_include_pad", 0))
    if include and data["rounding_type"] == "ceil_torch" and data["auto_pad"] == "explicit" and any(p):
        return _avg_pool_ceil_counting_pads(r, x, kernel, data["strides"], p)
    data["exclude-pad"] = not include
    return r.ir1("AvgPool", data, [x], version="opset1")


def _avg_pool_ceil_counting_pads(r, x: Value, kernel, strides, p) -> Value:
    """AveragePool(ceil_mode=1, count_include_pad=1): pads count as zeros, the ceil overhang
    beyond the padded input does not (onnxruntime's and torch's divisor).  Expressed as an
    explicit zero pad followed by a pool whose end overhang is ignored."""
    n = len(kernel)
    if x.shape is None or any(d is None for d in x.shape[2:]):
        raise r.error("AveragePool with ceil_mode needs known spatial extents")
    c = r.ctx([x])
    xp = c.emit1("pad", {"input": c.tensor(0)}, {"padding": [(0, 0), (0, 0)] + [(p[i], p[n + i]) for i in range(n)],
                                                 "border": "constant", "value": 0.0})
    tails = []
    for i in range(n):
        size = x.shape[2 + i] + p[i] + p[n + i]
        out = -(-(size - kernel[i]) // strides[i]) + 1
        if (out - 1) * strides[i] >= x.shape[2 + i] + p[i]:
            out -= 1  # onnxruntime (like torch): no window starts in the end padding
        tails.append(max(0, (out - 1) * strides[i] + kernel[i] - size))
    y = c.emit1("avg_pool", {"input": xp}, {"size": [1, 1] + list(kernel), "border": "ignore",
                                           "padding": [(0, 0), (0, 0)] + [(0, t) for t in tails],
                                           "stride": [1, 1] + list(strides)})
    return c.result(y)


@handles("CumSum")
def _cumsum(r, attrs, ins):
    return r.ir1("CumSum", {"exclusive": bool(attrs.get("exclusive", 0)), "reverse": bool(attrs.get("reverse", 0))},
                 [_need(r, ins, 0, "x"), _need(r, ins, 1, "axis")], version="opset3")


@handles("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(r, attrs, ins):
    x = _need(r, ins, 0, "X")
    kind = "ReduceMean" if r.node.op_type == "GlobalAveragePool" else "ReduceMax"
    return r.ir1(kind, {"keep_dims": True}, [x, const(np.arange(2, _rank(r, x), dtype=np.int64))])


@handles("MatMul")
def _matmul(r, attrs, ins):
    return r.ir1("MatMul", {}, [_need(r, ins, 0, "A"), _need(r, ins, 1, "B")])


@handles("Gemm")
def _gemm(r, attrs, ins):
    a, b = _need(r, ins, 0, "A"), _need(r, ins, 1, "B")
    y = r.ir1("MatMul", {"transpose_a": bool(attrs.get("transA", 0)), "transpose_b": bool(attrs.get("transB", 0))},
              [a, b])
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        y = r.ir1("Multiply", {"auto_broadcast": "numpy"}, [y, const(np.float32(alpha))])
    if len(ins) > 2 and ins[2] is not None and beta != 0.0:
        cv = ins[2]
        if beta != 1.0:
            cv = r.ir1("Multiply", {"auto_broadcast": "numpy"}, [cv, const(np.float32(beta))])
        y = r.ir1("Add", {"auto_broadcast": "numpy"}, [y, cv])
    return y


@handles("Einsum")
def _einsum(r, attrs, ins):
    return r.ir1("Einsum", {"equation": attrs["equation"]}, [v for v in ins if v is not None], version="opset7")


# --- shapes & data movement -------------------------------------------------------------------------------

@handles("Constant")
def _constant(r, attrs, ins):
    from .reader import _tensor_array
    if "value" in attrs:
        return const(_tensor_array(attrs["value"], r.file))
    for key, dt in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                    ("value_ints", np.int64)):
        if key in attrs:
            return const(np.asarray(attrs[key], dt))
    raise r.error("Constant without a supported value attribute")


@handles("Shape")
def _shape(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    if x.shape is None or any(d is None for d in x.shape):
        raise r.error("Shape of a tensor whose shape is not known when loading is not supported")
    dims = np.array(x.shape, np.int64)
    start, end = attrs.get("start", 0), attrs.get("end", None)
    return const(dims[start:end])


@handles("Size")
def _size(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    if x.shape is None or any(d is None for d in x.shape):
        raise r.error("Size of a tensor whose shape is not known when loading is not supported")
    return const(np.int64(np.prod(x.shape, dtype=np.int64)))


@handles("ConstantOfShape")
def _constant_of_shape(r, attrs, ins):
    from .reader import _tensor_array
    shape = _ints_of(r, _need(r, ins, 0, "input"), "the shape")
    c = r.ctx([])
    check_items(c, shape)
    value = _tensor_array(attrs["value"], r.file).reshape(-1)[0] if "value" in attrs else np.float32(0)
    return const(np.full(shape, value, dtype=np.asarray(value).dtype))


@handles("Range")
def _range(r, attrs, ins):
    vals = [_need(r, ins, i, "input") for i in range(3)]
    return r.ir1("Range", {"output_type": vals[0].etype}, vals, version="opset4")


@handles("Flatten")
def _flatten(r, attrs, ins):
    x = _need(r, ins, 0, "input")
    rank = _rank(r, x)
    axis = int(attrs.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    lead, rest = x.shape[:axis], x.shape[axis:]
    if all(d is not None for d in lead):
        target = [int(np.prod(lead, dtype=np.int64)), -1]
    elif all(d is not None for d in rest):  # e.g. an unknown batch: [-1, C*H*W]
        target = [-1, int(np.prod(rest, dtype=np.int64))]
    elif axis == 1:
        return r.ir1("Reshape", {"special_zero": True}, [x, const(np.array([0, -1], np.int64))])
    else:
        raise r.error("Flatten needs known leading or trailing extents")
    return r.ir1("Reshape", {"special_zero": False}, [x, const(np.array(target, np.int64))])


@handles("Reshape")
def _reshape(r, attrs, ins):
    if r.opset < 5:
        target = const(np.array(attrs["shape"], np.int64))
    else:
        target = _need(r, ins, 1, "shape")
    return r.ir1("Reshape", {"special_zero": not attrs.get("allowzero", 0)}, [_need(r, ins, 0, "data"), target])


@handles("Squeeze", "Unsqueeze")
def _squeeze(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    axes = ins[1] if len(ins) > 1 else None
    if axes is None and "axes" in attrs:
        axes = const(np.array(attrs["axes"], np.int64))
    kind = r.node.op_type
    if axes is None:
        if kind == "Unsqueeze":
            raise r.error("Unsqueeze needs axes")
        return r.ir1("Squeeze", {}, [x])
    return r.ir1(kind, {}, [x, axes])


@handles("Transpose")
def _transpose(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    perm = attrs.get("perm", list(range(_rank(r, x)))[::-1])
    return r.ir1("Transpose", {}, [x, const(np.array(perm, np.int64))])


@handles("Concat")
def _concat(r, attrs, ins):
    return r.ir1("Concat", {"axis": int(attrs["axis"])}, [v for v in ins if v is not None])


@handles("Split")
def _split(r, attrs, ins):
    x = _need(r, ins, 0, "input")
    rank = _rank(r, x)
    axis = int(attrs.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    k = len(r.node.output)
    lengths = _ints_of(r, ins[1], "split") if len(ins) > 1 and ins[1] is not None else attrs.get("split")
    if not lengths:  # absent, or an empty 'split' input: equal parts
        extent = x.shape[axis]
        if extent is None:
            raise r.error("Split needs a known extent on the split axis")
        k = int(attrs.get("num_outputs", k))
        chunk = -(-extent // k)
        lengths = [min(chunk, extent - i * chunk) for i in range(k)]
    return r.ir("VariadicSplit", {}, [x, const(np.int64(axis)), const(np.array(lengths, np.int64))],
                n_out=len(lengths), version="opset1")


@handles("Slice")
def _slice(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    if r.opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes = attrs.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
        vals = [x, const(np.array(starts, np.int64)), const(np.array(ends, np.int64)),
                const(np.array(steps, np.int64)), const(np.array(axes, np.int64))]
    else:
        starts, ends = _need(r, ins, 1, "starts"), _need(r, ins, 2, "ends")
        n = int(np.prod(starts.shape)) if starts.shape else 1
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else const(np.arange(n, dtype=np.int64))
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else const(np.ones(n, np.int64))
        vals = [x, starts, ends, steps, axes]
    return r.ir1("Slice", {}, vals)


@handles("Gather")
def _gather(r, attrs, ins):
    return r.ir1("Gather", {"batch_dims": 0}, [_need(r, ins, 0, "data"), _need(r, ins, 1, "indices"),
                                               const(np.int64(attrs.get("axis", 0)))])


@handles("GatherElements")
def _gather_elements(r, attrs, ins):
    return r.ir1("GatherElements", {"axis": int(attrs.get("axis", 0))},
                 [_need(r, ins, 0, "data"), _need(r, ins, 1, "indices")], version="opset6")


@handles("Pad")
def _pad(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    rank = _rank(r, x)
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        raise r.error(f"Pad mode '{mode}' is not supported")
    if r.opset < 11:
        pads, value = list(attrs.get("pads", attrs.get("paddings", []))), float(attrs.get("value", 0.0))
        axes = list(range(rank))
    else:
        pads = _ints_of(r, _need(r, ins, 1, "pads"), "pads")
        value = 0.0
        if len(ins) > 2 and ins[2] is not None:
            value = float(np.asarray(_const(r, ins[2], "constant_value")).reshape(-1)[0]) if \
                np.asarray(_const(r, ins[2], "constant_value")).size else 0.0
        axes = _ints_of(r, ins[3], "axes") if len(ins) > 3 and ins[3] is not None else list(range(rank))
    axes = [a + rank if a < 0 else a for a in axes]
    if len(pads) != 2 * len(axes):
        raise r.error(f"pads {pads} must have {2 * len(axes)} entries")
    pb, pe = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        pb[a], pe[a] = pads[i], pads[len(axes) + i]
    dt = x.const.dtype if x.is_const else (np.float32 if x.etype == "f32" else np.int64)
    return r.ir1("Pad", {"pad_mode": mode}, [x, const(np.array(pb, np.int64)), const(np.array(pe, np.int64)),
                                             const(np.asarray(value).astype(dt))], version="opset1")


@handles("Tile")
def _tile(r, attrs, ins):
    return r.ir1("Tile", {}, [_need(r, ins, 0, "input"), _need(r, ins, 1, "repeats")])


@handles("Expand")
def _expand(r, attrs, ins):
    return r.ir1("Broadcast", {"mode": "bidirectional"}, [_need(r, ins, 0, "input"), _need(r, ins, 1, "shape")],
                 version="opset3")


@handles("DepthToSpace", "SpaceToDepth")
def _depth_space(r, attrs, ins):
    mode = {"DCR": "blocks_first", "CRD": "depth_first"}[attrs.get("mode", "DCR")]
    return r.ir1(r.node.op_type, {"mode": mode, "block_size": int(attrs["blocksize"])}, [_need(r, ins, 0, "input")],
                 version="opset1")


@handles("Resize", "Upsample")
def _resize(r, attrs, ins):
    x = _need(r, ins, 0, "X")
    rank = _rank(r, x)
    if any(d is None for d in x.shape):
        raise r.error("Resize needs a known input shape")
    kind = r.node.op_type
    mode = attrs.get("mode", "nearest")
    if kind == "Upsample" or r.opset < 11:
        coord = "asymmetric"
        nearest = "floor"
        scales_v = ins[1] if len(ins) > 1 and ins[1] is not None else None
        scales = list(attrs["scales"]) if scales_v is None and "scales" in attrs else \
            [float(v) for v in np.asarray(_const(r, scales_v, "scales")).reshape(-1)]
        sizes = None
        if mode == "linear" and kind == "Resize":
            coord = "asymmetric"
    else:
        coord = attrs.get("coordinate_transformation_mode", "half_pixel")
        nearest = attrs.get("nearest_mode", "round_prefer_floor")
        if attrs.get("exclude_outside", 0):
            raise r.error("exclude_outside=1 is not supported")
        if attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            raise r.error("keep_aspect_ratio_policy other than stretch is not supported")
        if coord == "tf_crop_and_resize":
            raise r.error("coordinate_transformation_mode tf_crop_and_resize is not supported")
        scales = None
        sizes = None
        if len(ins) > 3 and ins[3] is not None and ins[3].shape not in ((0,),):
            sizes = _ints_of(r, ins[3], "sizes")
        if sizes is None and len(ins) > 2 and ins[2] is not None:
            scales = [float(v) for v in np.asarray(_const(r, ins[2], "scales")).reshape(-1)]
        if not sizes and not scales:
            raise r.error("Resize needs scales or sizes")
    axes = list(attrs.get("axes", range(rank)))
    axes = [a + rank if a < 0 else a for a in axes]
    if sizes:
        if len(sizes) != len(axes):
            raise r.error("sizes do not match the axes")
    else:
        if len(scales) != len(axes):
            raise r.error("scales do not match the axes")
    out = list(x.shape)
    for k, a in enumerate(axes):
        out[a] = sizes[k] if sizes else int(math.floor(x.shape[a] * scales[k]))
    imode = {"nearest": "nearest", "linear": "linear_onnx", "cubic": "cubic"}.get(mode)
    if imode is None:
        raise r.error(f"Resize mode '{mode}' is not supported")
    data = {"mode": imode, "coordinate_transformation_mode": coord, "nearest_mode": nearest,
            "cube_coeff": float(attrs.get("cubic_coeff_a", -0.75)),
            "shape_calculation_mode": "sizes" if sizes else "scales"}
    second = const(np.array(sizes, np.int64)) if sizes else const(np.array(scales, np.float32))
    return r.ir1("Interpolate", data, [x, second, const(np.array(axes, np.int64))], version="opset11",
                 out_dims=[tuple(out)])


_RED = {"ReduceMean": "ReduceMean", "ReduceSum": "ReduceSum", "ReduceMax": "ReduceMax", "ReduceMin": "ReduceMin",
        "ReduceL2": "ReduceL2", "ReduceL1": "ReduceL1", "ReduceProd": "ReduceProd"}


@handles(*_RED)
def _reduce(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    rank = _rank(r, x)
    kind = r.node.op_type
    axes_from_input = r.opset >= 18 or (kind == "ReduceSum" and r.opset >= 13)
    if axes_from_input:
        axes = _ints_of(r, ins[1], "axes") if len(ins) > 1 and ins[1] is not None else None
    else:
        axes = list(attrs["axes"]) if "axes" in attrs else None
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return x
        axes = list(range(rank))
    return r.ir1(_RED[kind], {"keep_dims": bool(attrs.get("keepdims", 1))}, [x, const(np.array(axes, np.int64))])


@handles("ArgMax", "ArgMin")
def _arg(r, attrs, ins):
    x = _need(r, ins, 0, "data")
    rank = _rank(r, x)
    if attrs.get("select_last_index", 0):
        raise r.error("select_last_index=1 is not supported")
    axis = int(attrs.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank:
        raise r.error(f"axis {attrs.get('axis')} is out of range for rank {rank}")
    if x.etype not in ("f32", "f64", "f16"):
        raise r.error("ArgMax/ArgMin of integer tensors is not supported")
    c = r.ctx([x])
    op = "argmax_reduce" if r.node.op_type == "ArgMax" else "argmin_reduce"
    y = c.emit1(op, {"input": c.tensor(0)}, {"axes": [axis]}, out_dtype="integer")
    if not attrs.get("keepdims", 1):
        y = c.emit1("squeeze", {"input": y}, {"axes": [axis]}, dtype="integer")
    return c.result(y, "i64")


@handles("Trilu")
def _trilu(r, attrs, ins):
    """Folded only: exporters use it on constants (causal attention masks)."""
    x = _need(r, ins, 0, "input")
    if not x.is_const:
        raise r.error("Trilu of a tensor computed at run time is not supported (only constant inputs)")
    k = 0
    if len(ins) > 1 and ins[1] is not None:
        k = int(np.asarray(_const(r, ins[1], "k")).reshape(-1)[0])
    a = np.asarray(x.const)
    if a.ndim < 2:
        raise r.error("Trilu needs a tensor of rank 2 or more")
    return const(np.triu(a, k) if attrs.get("upper", 1) else np.tril(a, k))


@handles("Round")
def _round(r, attrs, ins):
    x = _need(r, ins, 0, "X")
    if x.is_const:
        return const(np.round(x.const).astype(x.const.dtype))  # numpy rounds half to even, as ONNX
    return r.ir1("Round", {"mode": "half_to_even"}, [x], version="opset5")
