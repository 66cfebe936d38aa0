"""Legacy IR layers with weights or windows: Convolution, Deconvolution, BinaryConvolution,
Pooling, FullyConnected, BatchNormalization, GRN, MVN, Norm, Normalize and the recurrent
cells (LSTMCell, GRUCell, RNNCell), mapped onto NNEF operations."""

from __future__ import annotations

import numpy as np

from ..reading.values import Value
from .legacy import (
    activation,
    binary,
    channel_param,
    check,
    const_tensor,
    fnum,
    legacy_layer,
    reshape,
    shape_of,
    unary,
    x_of,
)
from .mapping import LayerContext, binary_filter
from .weights import unpack_binary_filter

# ---------------------------------------------------------------------------------------------
# window geometry
# ---------------------------------------------------------------------------------------------


def spatial_attr(ctx: LayerContext, key: str, k: int, default: int | None, old: str | None = None) -> list[int]:
    """A per-spatial-axis attribute: the list form (``strides="2,2"``) or the oldest legacy
    per-axis form (``stride-x``/``stride-y``, x = last axis)."""
    if ctx.has(key):
        v = ctx.ints(key)
    elif old and ctx.has(f"{old}-x"):
        xs = [ctx.int(f"{old}-{a}", default if default is not None else 0) for a in ("z", "y", "x")]
        v = xs[-k:] if k <= 3 else xs
    elif default is not None:
        v = [default] * k
    else:
        raise ctx.error(f"missing attribute '{key}'")
    check(ctx, len(v) == k, key, v, f"needs {k} items (one per spatial axis)")
    return v


def explicit_padding(ctx: LayerContext, in_spatial: list[int], kernel: list[int], strides: list[int],
                     dilations: list[int], *, ceil: bool = False, transposed: bool = False) -> list[tuple[int, int]]:
    """pads_begin/pads_end resolved against auto_pad (same_upper, same_lower, valid)."""
    k = len(in_spatial)
    auto = ctx.str("auto_pad", "").lower()
    check(ctx, auto in ("", "explicit", "notset", "same_upper", "same_lower", "valid"), "auto_pad", auto,
          "is not one of explicit, same_upper, same_lower, valid")
    if auto == "valid":
        return [(0, 0)] * k
    if auto in ("same_upper", "same_lower"):
        pads = []
        for X, f, s, d in zip(in_spatial, kernel, strides, dilations, strict=True):
            fd = (f - 1) * d + 1
            if transposed:
                total = max(fd - s, 0)
            else:
                out = -(-X // s)
                total = max((out - 1) * s + fd - X, 0)
            small, large = total // 2, total - total // 2
            pads.append((small, large) if auto == "same_upper" else (large, small))
        return pads
    pb = spatial_attr(ctx, "pads_begin", k, 0, "pad")
    pe = spatial_attr(ctx, "pads_end", k, None, None) if ctx.has("pads_end") else list(pb)
    check(ctx, all(p >= 0 for p in pb), "pads_begin", pb, "must be >= 0")
    check(ctx, all(p >= 0 for p in pe), "pads_end", pe, "must be >= 0")
    return list(zip(pb, pe, strict=True))


def conv_common(ctx: LayerContext, transposed: bool = False):
    shape = shape_of(ctx, 0)
    k = len(shape) - 2
    if k < 1:
        raise ctx.error(f"input must have rank >= 3, has {len(shape)}")
    kernel = spatial_attr(ctx, "kernel", k, None, "kernel")
    strides = spatial_attr(ctx, "strides", k, 1, "stride")
    dil = spatial_attr(ctx, "dilations", k, 1, "dilation")
    check(ctx, all(v >= 1 for v in kernel), "kernel", kernel, "must be >= 1")
    check(ctx, all(v >= 1 for v in strides), "strides", strides, "must be >= 1")
    check(ctx, all(v >= 1 for v in dil), "dilations", dil, "must be >= 1")
    group = ctx.int("group", 1)
    check(ctx, group >= 1, "group", group, "must be >= 1")
    out_c = ctx.int("output")
    check(ctx, out_c >= 1, "output", out_c, "must be >= 1")
    c = shape[1]
    check(ctx, c % group == 0 and out_c % group == 0, "group", group,
          f"must divide the input ({c}) and output ({out_c}) channels")
    pads = explicit_padding(ctx, list(shape[2:]), kernel, strides, dil, transposed=transposed)
    return shape, kernel, strides, dil, group, out_c, pads


def weights_and_bias(ctx: LayerContext, filter_shape: list[int], out_c: int) -> tuple[str, str | float]:
    """Filter and bias tensors from the <weights>/<biases> blobs or from inputs 1 and 2."""
    if ctx.n_inputs >= 2:
        w = ctx.tensor(1)
        wshape = ctx.in_shape(1)
        if wshape is not None and int(np.prod(wshape)) != int(np.prod(filter_shape)):
            raise ctx.error(f"input 1 (weights) of shape {tuple(wshape)} does not fit {filter_shape}")
        if tuple(wshape or ()) != tuple(filter_shape):
            w = reshape(ctx, w, filter_shape)
        b: str | float = 0.0
        if ctx.n_inputs >= 3:
            b = reshape(ctx, ctx.tensor(2), [1, out_c])
        return w, b
    wb = ctx.blob("weights")
    if wb.size != int(np.prod(filter_shape)):
        raise ctx.error(f"<weights> holds {wb.size} values; layout GOIYX needs {int(np.prod(filter_shape))}")
    w = const_tensor(ctx, np.asarray(wb, dtype=np.float32).reshape(filter_shape), "weights")
    bb = ctx.blob("biases", required=False)
    b = 0.0
    if bb is not None:
        if bb.size != out_c:
            raise ctx.error(f"<biases> holds {bb.size} values; expected {out_c}")
        b = const_tensor(ctx, np.asarray(bb, dtype=np.float32).reshape(1, out_c), "biases")
    return w, b


@legacy_layer("Convolution")
def _convolution(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2, 3)
    shape, kernel, strides, dil, group, out_c, pads = conv_common(ctx)
    # GOIYX == NNEF's [O, I/G, Y, X] with the groups outermost along O.
    w, b = weights_and_bias(ctx, [out_c, shape[1] // group] + kernel, out_c)
    y = ctx.emit1("conv", {"input": x_of(ctx), "filter": w, "bias": b},
                  {"border": "constant", "padding": pads, "stride": strides, "dilation": dil, "groups": group})
    return ctx.result(y)


@legacy_layer("Deconvolution")
def _deconvolution(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2, 3)
    shape, kernel, strides, dil, group, out_c, pads = conv_common(ctx, transposed=True)
    # Weights [C_in, C_out/G, Y, X] (input channels outermost, groups along them) — NNEF's
    # deconv filter layout.  S_o = stride (S_i - 1) + S_f - pads (the catalog's formula).
    w, b = weights_and_bias(ctx, [shape[1], out_c // group] + kernel, out_c)
    attrs = {"border": "constant", "padding": pads, "stride": strides, "dilation": dil, "groups": group}
    out = [(x - 1) * s + (f - 1) * d + 1 - p - q
           for x, s, f, d, (p, q) in zip(shape[2:], strides, kernel, dil, pads, strict=True)]
    if any(o <= 0 for o in out):
        raise ctx.error(f"the output extents {out} are not positive")
    attrs["output_shape"] = [shape[0], out_c] + out
    y = ctx.emit1("deconv", {"input": x_of(ctx), "filter": w, "bias": b}, attrs)
    return ctx.result(y)


@legacy_layer("BinaryConvolution")
def _binary_convolution(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2)
    shape, kernel, strides, dil, group, out_c, pads = conv_common(ctx)
    mode = ctx.str("mode", "xnor-popcount")
    check(ctx, mode == "xnor-popcount", "mode", mode, "must be xnor-popcount")
    pad_value = fnum(ctx, "pad_value", 0.0)
    fshape = [out_c, shape[1] // group] + kernel
    if ctx.n_inputs == 2:
        v = ctx.input(1)
        w = const_tensor(ctx, binary_filter(ctx, v), "weights") if v.is_const else ctx.tensor(1)
    else:
        blob = ctx.layer.blobs.get("weights")
        if blob is None:
            raise ctx.error("missing <weights> blob")
        count = int(np.prod(fshape))
        if blob.size * 8 < count:
            raise ctx.error(f"<weights> holds {blob.size * 8} bits; the filter needs {count}")
        # Packed least significant bit first, as the Model Optimizer wrote it and the plugins
        # read it (weights.unpack_binary_filter cites the sources); the size is checked first.
        ctx.blob("weights", shape=(count,), etype="u1")
        raw = ctx.builder.weights.raw(blob.offset, blob.size, ctx.location)
        bits = unpack_binary_filter(raw, count)
        w = const_tensor(ctx, np.asarray(bits, dtype=np.float32).reshape(fshape), "weights")
    y = ctx.emit1("ir_binary_convolution", {"input": x_of(ctx), "filter": w},
                  {"padding": pads, "stride": strides, "dilation": dil, "groups": group, "pad_value": pad_value})
    return ctx.result(y)


# ---------------------------------------------------------------------------------------------
# Pooling
# ---------------------------------------------------------------------------------------------


@legacy_layer("Pooling")
def _pooling(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    k = len(shape) - 2
    kernel = spatial_attr(ctx, "kernel", k, None, "kernel")
    strides = spatial_attr(ctx, "strides", k, 1, "stride")
    check(ctx, all(v >= 1 for v in kernel), "kernel", kernel, "must be >= 1")
    check(ctx, all(v >= 1 for v in strides), "strides", strides, "must be >= 1")
    method = ctx.choice("pool-method", ("max", "avg"), "max")
    exclude = ctx.bool("exclude-pad", False)
    rounding = ctx.choice("rounding_type", ("floor", "ceil"), "floor")
    pads = explicit_padding(ctx, list(shape[2:]), kernel, strides, [1] * k)
    plain, clipped = [], []
    for X, f, s, (p, q) in zip(shape[2:], kernel, strides, pads, strict=True):
        span = X + p + q - f
        if span < 0:
            raise ctx.error(f"kernel {kernel} is larger than the padded input {list(shape[2:])}")
        out = (-(-span // s) if rounding == "ceil" else span // s) + 1
        plain.append(out)
        # Caffe's variant of ceil rounding drops a last window that would start past
        # input + pads_begin; the Inference Engine's does not.
        clipped.append(out - 1 if rounding == "ceil" and (out - 1) * s >= X + p else out)
    declared = ctx.out_dims(0) if ctx.layer.outputs else None
    outs = plain
    if declared is not None and len(declared) == len(shape) and list(declared[2:]) == clipped:
        outs = clipped                       # the file was written with Caffe's extents
    extra = [max(0, (o - 1) * s + f - (X + p + q))
             for o, X, f, s, (p, q) in zip(outs, shape[2:], kernel, strides, pads, strict=True)]
    size = [1, 1] + kernel
    stride = [1, 1] + strides
    x = x_of(ctx)
    if method == "max":
        # padded positions never win a maximum: NNEF's 'ignore' border
        padding = [(0, 0), (0, 0)] + [(p, q + e) for (p, q), e in zip(pads, extra, strict=True)]
        y = ctx.emit1("max_pool", {"input": x}, {"size": size, "stride": stride, "padding": padding,
                                                 "border": "ignore"})
    elif exclude:
        padding = [(0, 0), (0, 0)] + [(p, q + e) for (p, q), e in zip(pads, extra, strict=True)]
        y = ctx.emit1("avg_pool", {"input": x}, {"size": size, "stride": stride, "padding": padding,
                                                 "border": "ignore"})
    else:
        # Explicit pads count in the divisor, the window overhang that ceil rounding adds does
        # not: zero-pad explicitly, then average over in-range positions.
        if any(p or q for p, q in pads):
            x = ctx.emit1("pad", {"input": x}, {"padding": [(0, 0), (0, 0)] + pads, "border": "constant",
                                                "value": 0.0})
        padding = [(0, 0), (0, 0)] + [(0, e) for e in extra]
        y = ctx.emit1("avg_pool", {"input": x}, {"size": size, "stride": stride, "padding": padding,
                                                 "border": "ignore" if any(extra) else "constant"})
    if method == "max" or exclude:
        y = _empty_windows(ctx, y, shape, outs, kernel, strides, pads, method)
    return ctx.result(y)


def _empty_windows(ctx: LayerContext, y: str, shape, outs, kernel, strides, pads, method) -> str:
    """Windows holding no input element at all (possible with ceil rounding: a last window
    starting in pads_end) get the layer's values for an empty reduction: the lowest float for
    max, 0/0 = NaN for an average that excludes padding."""
    empty = []
    for o, X, f, s, (p, _) in zip(outs, shape[2:], kernel, strides, pads, strict=True):
        start = np.arange(o) * s - p
        empty.append((start >= X) | (start + f <= 0))
    if not any(e.any() for e in empty):
        return y
    mask = np.zeros([1, 1] + list(outs), dtype=bool)
    for d, e in enumerate(empty):
        view = [1, 1] + [1] * len(outs)
        view[2 + d] = len(e)
        mask |= e.reshape(view)
    fill = float(np.finfo(np.float32).min) if method == "max" else float("nan")
    m = const_tensor(ctx, mask, "empty_windows")
    return ctx.emit1("select", {"condition": m, "true_value": fill, "false_value": y}, dtype="scalar")


# ---------------------------------------------------------------------------------------------
# FullyConnected, BatchNormalization
# ---------------------------------------------------------------------------------------------


@legacy_layer(("FullyConnected", "InnerProduct"))
def _fully_connected(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1, 2, 3)
    shape = shape_of(ctx, 0)
    out = ctx.int("out-size") if ctx.has("out-size") else ctx.int("out_size")
    check(ctx, out >= 1, "out-size", out, "must be >= 1")
    n, inner = shape[0], int(np.prod(shape[1:]))
    x = x_of(ctx)
    if len(shape) != 2:
        x = reshape(ctx, x, [n, inner])
    w, b = weights_and_bias(ctx, [out, inner], out)     # layout OI: input index fastest
    return ctx.result(ctx.emit1("linear", {"input": x, "filter": w, "bias": b}))


@legacy_layer("BatchNormalization")
def _batch_norm(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    c = shape[1]
    eps = fnum(ctx, "epsilon", 1e-5)
    check(ctx, eps >= 0, "epsilon", eps, "must be >= 0")
    # Blob roles as the Inference Engine stored them: <weights> = variance, <biases> = mean
    # (explicitly named <mean>/<variance>/<gamma>/<beta> blobs are accepted too).
    blobs = ctx.layer.blobs
    mean = ctx.blob("mean" if "mean" in blobs else "biases")
    var = ctx.blob("variance" if "variance" in blobs else "weights")
    if np.any(np.asarray(var) + eps <= 0):
        raise ctx.error("variance + epsilon must be positive")
    gamma = ctx.blob("gamma") if "gamma" in blobs else np.ones(1, np.float32)
    beta = ctx.blob("beta") if "beta" in blobs else np.zeros(1, np.float32)
    params = {name: channel_param(ctx, arr, c, name, len(shape))
              for name, arr in (("mean", mean), ("variance", var), ("offset", beta), ("scale", gamma))}
    y = ctx.emit1("batch_normalization", {"input": x_of(ctx), **params}, {"epsilon": eps})
    return ctx.result(y)


# ---------------------------------------------------------------------------------------------
# normalizations
# ---------------------------------------------------------------------------------------------


@legacy_layer("GRN")
def _grn(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    bias = fnum(ctx, "bias")
    check(ctx, bias >= 0, "bias", bias, "must be >= 0")
    x = x_of(ctx)
    # The catalog sums input_i under the root; "L2 norm" is the evident intent: squares.
    s = ctx.emit1("sum_reduce", {"input": binary(ctx, "mul", x, x)}, {"axes": [1]})
    norm = unary(ctx, "sqrt", binary(ctx, "add", s, bias))
    return ctx.result(binary(ctx, "div", x, norm))


@legacy_layer("MVN")
def _mvn(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    across = ctx.bool("across_channels", False)
    normalize = ctx.bool("normalize_variance", False)
    eps = fnum(ctx, "eps", 1e-9)
    check(ctx, eps >= 0, "eps", eps, "must be >= 0")
    axes = list(range(1 if across else 2, len(shape)))
    if not axes:
        raise ctx.error("input has no axes to normalise over")
    x = x_of(ctx)
    d = binary(ctx, "sub", x, ctx.emit1("mean_reduce", {"input": x}, {"axes": axes}))
    if not normalize:
        return ctx.result(d)
    # The catalog's "o_i / (sum sqrt(o_k^2) + eps)" is garbled; its intent is a division by
    # the standard deviation, and the layer's documentation ("eps is added to the variance")
    # and reference implementation put eps under the root: o / sqrt(mean(o^2) + eps).
    var = ctx.emit1("mean_reduce", {"input": binary(ctx, "mul", d, d)}, {"axes": axes})
    return ctx.result(binary(ctx, "div", d, unary(ctx, "sqrt", binary(ctx, "add", var, eps))))


@legacy_layer(("Norm", "LRN"))
def _norm(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    alpha, beta = fnum(ctx, "alpha"), fnum(ctx, "beta")
    n = ctx.int("local-size") if ctx.has("local-size") else ctx.int("local_size")
    check(ctx, n >= 1, "local-size", n, "must be >= 1")
    region = ctx.choice("region", ("across", "same"), "across")
    k = fnum(ctx, "k", 1.0)
    if region == "across":
        size = [1, n] + [1] * (len(shape) - 2)
    else:
        size = [1, 1] + [n] * (len(shape) - 2)
    # o = x / (k + alpha/n * sum x^2)^beta, sum over the n-window (n^2 for 'same'); NNEF's
    # local_response_normalization averages the window (divides by its volume) — the same.
    # (The catalog's formula drops the leading "x_i /" and the k; both are evidently meant.)
    y = ctx.emit1("local_response_normalization", {"input": x_of(ctx)},
                  {"size": size, "alpha": alpha, "beta": beta, "bias": k})
    return ctx.result(y)


@legacy_layer("Normalize")
def _normalize(ctx: LayerContext) -> Value:
    ctx.expect_inputs(1)
    shape = shape_of(ctx, 0)
    across = ctx.bool("across_spatial", True)
    shared = ctx.bool("channel_shared", True)
    eps = fnum(ctx, "eps")
    check(ctx, eps >= 0, "eps", eps, "must be >= 0")
    scale = np.asarray(ctx.blob("weights"), dtype=np.float32).reshape(-1)
    if shared and scale.size != 1:
        raise ctx.error(f"channel_shared = 1 needs one scale, <weights> holds {scale.size}")
    # The catalog's formula is garbled ("(n*C*H*W) * scale / sqrt(sum (n*C*H*W)^2)"); its intent
    # is an L2 normalisation over C (or C, H, W with across_spatial) times a per-channel scale,
    # eps added under the root.
    axes = list(range(1, len(shape))) if across else [1]
    x = x_of(ctx)
    s = ctx.emit1("sum_reduce", {"input": binary(ctx, "mul", x, x)}, {"axes": axes})
    y = binary(ctx, "div", x, unary(ctx, "sqrt", binary(ctx, "add", s, eps)))
    return ctx.result(binary(ctx, "mul", y, channel_param(ctx, scale, shape[1], "weights", len(shape))))


# ---------------------------------------------------------------------------------------------
# recurrent cells
# ---------------------------------------------------------------------------------------------

_CELL_DEFAULTS = {"LSTMCell": ["sigmoid", "tanh", "tanh"], "GRUCell": ["sigmoid", "tanh"], "RNNCell": ["tanh"]}
_CELL_GATES = {"LSTMCell": 4, "GRUCell": 3, "RNNCell": 1}


def _cell_act(ctx: LayerContext, name: str, x: str) -> str:
    if name not in ("sigmoid", "tanh", "relu"):
        raise ctx.error(f"attribute 'activations' names '{name}'; supported: sigmoid, tanh, relu")
    return activation(ctx, name, x)


def _clip(ctx: LayerContext, x: str, clip: float) -> str:
    return x if clip == 0.0 else ctx.emit1("clamp", {"x": x, "a": -clip, "b": clip})


@legacy_layer(("LSTMCell", "GRUCell", "RNNCell"))
def _cell(ctx: LayerContext) -> list[Value] | Value:
    kind = ctx.type
    ctx.expect_inputs(3 if kind == "LSTMCell" else 2)
    xs, hs = shape_of(ctx, 0), shape_of(ctx, 1)
    if len(xs) != 2 or len(hs) != 2 or xs[0] != hs[0]:
        raise ctx.error(f"expects X [N, I] and H [N, S], got {xs} and {hs}")
    size = ctx.int("hidden_size", hs[1])
    check(ctx, size == hs[1], "hidden_size", size, f"differs from the state size {hs[1]}")
    acts = [a.lower() for a in ctx.str("activations", ",".join(_CELL_DEFAULTS[kind])).split(",") if a]
    check(ctx, len(acts) == len(_CELL_DEFAULTS[kind]), "activations", acts,
          f"needs {len(_CELL_DEFAULTS[kind])} names")
    clip = fnum(ctx, "clip", 0.0)
    check(ctx, clip >= 0, "clip", clip, "must be >= 0")
    if ctx.has("activation_alpha") or ctx.has("activation_beta"):
        raise ctx.error("activation_alpha / activation_beta are not supported")
    G = _CELL_GATES[kind]
    lbr = ctx.bool("linear_before_reset", False) if kind == "GRUCell" else False
    I, S = xs[1], hs[1]
    # Weights [G*S, I+S]: each gate's row holds W (for X) then R (for H) — "X*W^T + H*R^T".
    w = np.asarray(ctx.blob("weights"), dtype=np.float32)
    if w.size != G * S * (I + S):
        raise ctx.error(f"<weights> holds {w.size} values; [{G}*{S}, {I}+{S}] needs {G * S * (I + S)}")
    w = w.reshape(G * S, I + S)
    nb = (G + 1) * S if lbr else G * S
    b = ctx.blob("biases", required=False)
    b = np.zeros(nb, np.float32) if b is None else np.asarray(b, dtype=np.float32).reshape(-1)
    if b.size != nb:
        raise ctx.error(f"<biases> holds {b.size} values; expected {nb}")
    x, h = ctx.tensor(0), ctx.tensor(1)
    xh = ctx.emit1("concat", {"values": [x, h]}, {"axis": 1}, dtype="scalar", result_name="value")

    def lin(rows: slice, inp: str = xh, cols: slice = slice(None), bias=None) -> str:
        wt = const_tensor(ctx, w[rows, cols], "weights")
        bb = b[rows] if bias is None else bias
        return ctx.emit1("linear", {"input": inp, "filter": wt, "bias": const_tensor(ctx, bb.reshape(1, -1), "biases")})

    if kind == "RNNCell":
        ho = _cell_act(ctx, acts[0], _clip(ctx, lin(slice(0, S)), clip))
        return ctx.result(ho)
    if kind == "LSTMCell":
        c = ctx.tensor(2)
        # gate order f, i, c, o (the catalog's formula order)
        f, i, g, o = (lin(slice(k * S, (k + 1) * S)) for k in range(4))
        f, i, o = (_cell_act(ctx, acts[0], _clip(ctx, t, clip)) for t in (f, i, o))
        g = _cell_act(ctx, acts[1], _clip(ctx, g, clip))
        co = binary(ctx, "add", binary(ctx, "mul", f, c), binary(ctx, "mul", i, g))
        ho = binary(ctx, "mul", o, _cell_act(ctx, acts[2], co))
        return [ctx.result(ho, port=0), ctx.result(co, port=1)]
    # GRU, gate order z, r, h:  z, r = f(W[X,H] + b);  h~ = g(Wh X + Rh (r . H) + bh)  or, with
    # linear_before_reset, g(Wh X + bwh + r . (Rh H + brh));  Ho = (1 - z) . h~ + z . H
    z = _cell_act(ctx, acts[0], _clip(ctx, lin(slice(0, S)), clip))
    r = _cell_act(ctx, acts[0], _clip(ctx, lin(slice(S, 2 * S)), clip))
    hrows = slice(2 * S, 3 * S)
    if lbr:
        wx = lin(hrows, x, slice(0, I), b[2 * S:3 * S])
        rh = lin(hrows, h, slice(I, I + S), b[3 * S:4 * S])
        pre = binary(ctx, "add", wx, binary(ctx, "mul", r, rh))
    else:
        rhh = ctx.emit1("concat", {"values": [x, binary(ctx, "mul", r, h)]}, {"axis": 1}, dtype="scalar",
                        result_name="value")
        pre = lin(hrows, rhh)
    hh = _cell_act(ctx, acts[1], _clip(ctx, pre, clip))
    one_minus_z = binary(ctx, "sub", 1.0, z)
    ho = binary(ctx, "add", binary(ctx, "mul", one_minus_z, hh), binary(ctx, "mul", z, h))
    return ctx.result(ho)


