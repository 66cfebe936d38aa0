"""Legacy IR layers with weights and windows, end to end against torch/numpy references."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnefx.diagnostics import NNEFXError
from test_ir_legacy import one, rand, t, unary_net
from test_ir_legacy_util import LegacyNet

RNG = np.random.default_rng(1)


def same_pads(X, k, s, d, upper):
    fd = (k - 1) * d + 1
    out = -(-X // s)
    total = max((out - 1) * s + fd - X, 0)
    return (total // 2, total - total // 2) if upper else (total - total // 2, total // 2)


@pytest.mark.parametrize("auto_pad", ["", "valid", "same_upper", "same_lower"])
@pytest.mark.parametrize("group,dil,stride", [(1, 1, 1), (2, 2, 2), (4, 1, 2)])
def test_convolution(tmp_path, auto_pad, group, dil, stride):
    x = rand(2, 4, 9, 8)
    out_c, k = 8, (3, 2)
    w = rand(out_c, 4 // group, *k)            # GOIYX flat == [O, I/G, Y, X]
    b = rand(out_c)
    data = {"kernel": "3,2", "strides": f"{stride},{stride}", "dilations": f"{dil},{dil}", "group": str(group),
            "output": str(out_c), "pads_begin": "2,0", "pads_end": "1,1"}
    if auto_pad:
        data["auto_pad"] = auto_pad
    if auto_pad == "valid":
        pads = [(0, 0), (0, 0)]
    elif auto_pad.startswith("same"):
        pads = [same_pads(X, kk, stride, dil, auto_pad == "same_upper") for X, kk in zip((9, 8), k, strict=True)]
    else:
        pads = [(2, 1), (0, 1)]
    xp = F.pad(t(x), (pads[1][0], pads[1][1], pads[0][0], pads[0][1]))
    ref = F.conv2d(xp, t(w), t(b), stride=stride, dilation=dil, groups=group).numpy()
    net = unary_net("Convolution", x.shape, data, out_shape=list(ref.shape), blobs={"weights": w, "biases": b})
    one(net, tmp_path, {"data": x}, ref, 1e-4)


def test_convolution_old_style_attributes(tmp_path):
    x = rand(1, 2, 6, 7)
    w = rand(3, 2, 3, 3)
    data = {"kernel-x": "3", "kernel-y": "3", "stride-x": "2", "stride-y": "1", "pad-x": "1", "pad-y": "0",
            "output": "3", "group": "1"}
    ref = F.conv2d(F.pad(t(x), (1, 1, 0, 0)), t(w), stride=(1, 2)).numpy()
    one(unary_net("Convolution", x.shape, data, out_shape=list(ref.shape), blobs={"weights": w}), tmp_path,
        {"data": x}, ref, 1e-4)


def test_convolution_bad_group(tmp_path):
    net = unary_net("Convolution", [1, 3, 4, 4], {"kernel": "1,1", "output": "4", "group": "2"}, [1, 4, 4, 4],
                    blobs={"weights": rand(8)})
    with pytest.raises(NNEFXError, match=r"layer 1 'out' \(Convolution\).*attribute 'group' = 2"):
        net.run(tmp_path, {})


def test_convolution_3d(tmp_path):
    x = rand(1, 2, 4, 5, 6)
    w = rand(3, 2, 2, 2, 2)
    data = {"kernel": "2,2,2", "strides": "1,2,1", "output": "3", "pads_begin": "0,1,0", "pads_end": "0,0,1"}
    ref = F.conv3d(F.pad(t(x), (0, 1, 1, 0, 0, 0)), t(w), stride=(1, 2, 1)).numpy()
    one(unary_net("Convolution", x.shape, data, out_shape=list(ref.shape), blobs={"weights": w}), tmp_path,
        {"data": x}, ref, 1e-4)


@pytest.mark.parametrize("group,stride,pad", [(1, 2, 0), (2, 2, 1), (1, 3, 1)])
def test_deconvolution(tmp_path, group, stride, pad):
    x = rand(1, 4, 3, 4)
    out_c = 6
    w = rand(4, out_c // group, 3, 3)
    b = rand(out_c)
    data = {"kernel": "3,3", "strides": f"{stride},{stride}", "output": str(out_c), "group": str(group),
            "pads_begin": f"{pad},{pad}", "pads_end": f"{pad},{pad}"}
    ref = F.conv_transpose2d(t(x), t(w), t(b), stride=stride, padding=pad, groups=group).numpy()
    one(unary_net("Deconvolution", x.shape, data, list(ref.shape), blobs={"weights": w, "biases": b}), tmp_path,
        {"data": x}, ref, 1e-4)


def test_binary_convolution(tmp_path):
    x = RNG.integers(0, 2, (1, 3, 5, 5)).astype("f4")
    w = RNG.integers(0, 2, (4, 3, 3, 3)).astype("f4")
    data = {"kernel": "3,3", "strides": "1,1", "pads_begin": "1,1", "pads_end": "1,1", "output": "4",
            "mode": "xnor-popcount", "pad_value": "-1.0"}
    ref = F.conv2d(F.pad(t(2 * x - 1), (1, 1, 1, 1), value=-1.0), t(2 * w - 1)).numpy()
    net = unary_net("BinaryConvolution", x.shape, data, list(ref.shape), blobs={"weights": (w, "BIN")})
    one(net, tmp_path, {"data": x}, ref)


@pytest.mark.parametrize("method", ["max", "avg"])
@pytest.mark.parametrize("exclude", [True, False])
@pytest.mark.parametrize("rounding", ["floor", "ceil"])
def test_pooling(tmp_path, method, exclude, rounding):
    x = rand(1, 2, 7, 8)
    data = {"kernel": "3,2", "strides": "2,3", "pads_begin": "1,0", "pads_end": "1,1", "pool-method": method,
            "exclude-pad": str(exclude).lower(), "rounding_type": rounding}
    tx = t(x)
    if method == "max":
        xp = F.pad(tx, (0, 1, 1, 1), value=-np.inf)
        ref = F.max_pool2d(xp, (3, 2), (2, 3), ceil_mode=rounding == "ceil")
    else:
        # torch's avg_pool2d pads symmetrically only; compute the reference window by window
        ref = ref_avg_pool(x, (3, 2), (2, 3), (1, 0), (1, 1), exclude, rounding == "ceil")
    one(unary_net("Pooling", x.shape, data, list(ref.shape)), tmp_path, {"data": x}, np.asarray(ref), 1e-5)


def ref_avg_pool(x, k, s, pb, pe, exclude, ceil):
    N, C, H, W = x.shape
    outs = []
    for X, kk, ss, p, q in zip((H, W), k, s, pb, pe, strict=True):
        span = X + p + q - kk
        o = (-(-span // ss) if ceil else span // ss) + 1
        if ceil and (o - 1) * ss >= X + p:
            o -= 1
        outs.append(o)
    out = np.zeros((N, C, *outs), "f4")
    for i in range(outs[0]):
        for j in range(outs[1]):
            h0, w0 = i * s[0] - pb[0], j * s[1] - pb[1]
            h1, w1 = min(h0 + k[0], H + pe[0]), min(w0 + k[1], W + pe[1])
            hs, ws, he, we = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
            total = x[:, :, hs:he, ws:we].sum(axis=(2, 3))
            count = (he - hs) * (we - ws) if exclude else (h1 - h0) * (w1 - w0)
            out[:, :, i, j] = total / count
    return out


def test_pooling_same_upper(tmp_path):
    x = rand(1, 1, 5, 5)
    data = {"kernel": "2,2", "strides": "2,2", "auto_pad": "same_upper", "pool-method": "max"}
    ref = F.max_pool2d(F.pad(t(x), (0, 1, 0, 1), value=-np.inf), 2, 2).numpy()
    one(unary_net("Pooling", x.shape, data, list(ref.shape)), tmp_path, {"data": x}, ref)


def test_fully_connected(tmp_path):
    x = rand(2, 3, 2, 2)
    w, b = rand(5, 12), rand(5)
    one(unary_net("FullyConnected", x.shape, {"out-size": "5"}, [2, 5], blobs={"weights": w, "biases": b}),
        tmp_path, {"data": x}, x.reshape(2, 12) @ w.T + b, 1e-5)


def test_batch_normalization(tmp_path):
    x = rand(2, 3, 4, 4)
    mean, var = rand(3), rand(3, lo=0.1, hi=2)
    ref = (x - mean.reshape(3, 1, 1)) / np.sqrt(var.reshape(3, 1, 1) + 1e-5)
    net = unary_net("BatchNormalization", x.shape, {"epsilon": "1e-5"}, blobs={"weights": var, "biases": mean})
    one(net, tmp_path, {"data": x}, ref, 1e-5)


def test_grn(tmp_path):
    x = rand(2, 3, 4, 5)
    ref = x / np.sqrt((x ** 2).sum(axis=1, keepdims=True) + 1.0)
    one(unary_net("GRN", x.shape, {"bias": "1.0"}), tmp_path, {"data": x}, ref)


@pytest.mark.parametrize("across", [0, 1])
@pytest.mark.parametrize("normalize", [0, 1])
def test_mvn(tmp_path, across, normalize):
    x = rand(2, 3, 4, 5)
    axes = (1, 2, 3) if across else (2, 3)
    d = x - x.mean(axis=axes, keepdims=True)
    ref = d / np.sqrt((d ** 2).mean(axis=axes, keepdims=True) + 0.25) if normalize else d
    net = unary_net("MVN", x.shape, {"across_channels": str(across), "normalize_variance": str(normalize),
                                     "eps": "0.25"})
    one(net, tmp_path, {"data": x}, ref, 1e-4)


def test_norm_across_matches_torch_lrn(tmp_path):
    x = rand(1, 7, 3, 3)
    ref = F.local_response_norm(t(x), 5, alpha=1e-2, beta=0.75, k=1.0).numpy()
    net = unary_net("Norm", x.shape, {"alpha": "1e-2", "beta": "0.75", "local-size": "5", "region": "across"})
    one(net, tmp_path, {"data": x}, ref, 1e-5)


def test_norm_same_region(tmp_path):
    x = rand(1, 2, 5, 5)
    n, alpha, beta = 3, 0.3, 0.75
    sq = np.pad(x ** 2, [(0, 0), (0, 0), (1, 1), (1, 1)])
    s = sum(sq[:, :, i:i + 5, j:j + 5] for i in range(n) for j in range(n))
    ref = x / (1 + alpha / (n * n) * s) ** beta
    net = unary_net("Norm", x.shape, {"alpha": str(alpha), "beta": str(beta), "local-size": "3", "region": "same"})
    one(net, tmp_path, {"data": x}, ref, 1e-5)


@pytest.mark.parametrize("across,shared", [(0, 0), (1, 1), (0, 1)])
def test_normalize(tmp_path, across, shared):
    x = rand(2, 3, 4, 4)
    scale = np.array([1.5], "f4") if shared else rand(3)
    axes = (1, 2, 3) if across else (1,)
    ref = x / np.sqrt((x ** 2).sum(axis=axes, keepdims=True) + 1e-6) * scale.reshape(-1, 1, 1)
    net = unary_net("Normalize", x.shape, {"across_spatial": str(across), "channel_shared": str(shared),
                                           "eps": "1e-6"}, blobs={"weights": scale})
    one(net, tmp_path, {"data": x}, ref, 1e-5)


def sig(v):
    return 1 / (1 + np.exp(-v))


def test_lstm_cell(tmp_path):
    N, I, S = 2, 3, 4
    X, H, C = rand(N, I), rand(N, S), rand(N, S)
    W, B = rand(4 * S, I + S), rand(4 * S)
    net = LegacyNet("lstm")
    x, h, c = net.input("x", [N, I]), net.input("h", [N, S]), net.input("c", [N, S])
    net.add("LSTMCell", [x, h, c], [[N, S], [N, S]], {"hidden_size": str(S)}, blobs={"weights": W, "biases": B},
            name="cell")
    g = np.concatenate([X, H], 1) @ W.T + B
    f, i, cc, o = (g[:, k * S:(k + 1) * S] for k in range(4))      # gate order f, i, c, o
    co = sig(f) * C + sig(i) * np.tanh(cc)
    ho = sig(o) * np.tanh(co)
    one(net, tmp_path, {"x": X, "h": H, "c": C}, {"cell": ho, "cell.4": co}, 1e-5)


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_cell(tmp_path, lbr):
    N, I, S = 2, 3, 4
    X, H = rand(N, I), rand(N, S)
    W, B = rand(3 * S, I + S), rand((4 if lbr else 3) * S)
    net = LegacyNet("gru")
    x, h = net.input("x", [N, I]), net.input("h", [N, S])
    net.add("GRUCell", [x, h], [[N, S]], {"hidden_size": str(S), "linear_before_reset": str(lbr)},
            blobs={"weights": W, "biases": B}, name="cell")
    Wx, Rh = W[:, :I], W[:, I:]
    z = sig(X @ Wx[:S].T + H @ Rh[:S].T + B[:S])
    r = sig(X @ Wx[S:2 * S].T + H @ Rh[S:2 * S].T + B[S:2 * S])
    if lbr:
        hh = np.tanh(X @ Wx[2 * S:].T + B[2 * S:3 * S] + r * (H @ Rh[2 * S:].T + B[3 * S:]))
    else:
        hh = np.tanh(X @ Wx[2 * S:].T + (r * H) @ Rh[2 * S:].T + B[2 * S:])
    one(net, tmp_path, {"x": X, "h": H}, (1 - z) * hh + z * H, 1e-5)


def test_rnn_cell_with_clip(tmp_path):
    N, I, S = 2, 3, 4
    X, H = rand(N, I, lo=-3, hi=3), rand(N, S)
    W, B = rand(S, I + S), rand(S)
    net = LegacyNet("rnn")
    x, h = net.input("x", [N, I]), net.input("h", [N, S])
    net.add("RNNCell", [x, h], [[N, S]], {"hidden_size": str(S), "clip": "0.5", "activations": "relu"},
            blobs={"weights": W, "biases": B}, name="cell")
    ref = np.maximum(np.clip(np.concatenate([X, H], 1) @ W.T + B, -0.5, 0.5), 0)
    one(net, tmp_path, {"x": X, "h": H}, ref, 1e-5)


def test_cell_rejects_wrong_weight_count(tmp_path):
    net = LegacyNet("rnn")
    x, h = net.input("x", [1, 3]), net.input("h", [1, 2])
    net.add("RNNCell", [x, h], [[1, 2]], {"hidden_size": "2"}, blobs={"weights": rand(7)}, name="cell")
    with pytest.raises(NNEFXError, match="<weights> holds 7 values"):
        net.run(tmp_path, {})


def test_convolution_weights_as_const_inputs(tmp_path):
    x = rand(1, 2, 5, 5)
    w, b = rand(3, 2, 3, 3), rand(3)
    net = LegacyNet("conv_in")
    i = net.input("data", x.shape)
    wi, bi = net.const("w", w), net.const("b", b)
    net.add("Convolution", [i, wi, bi], [[1, 3, 5, 5]], {"kernel": "3,3", "output": "3", "pads_begin": "1,1",
                                                         "pads_end": "1,1"}, name="out")
    one(net, tmp_path, {"data": x}, F.conv2d(t(x), t(w), t(b), padding=1).numpy(), 1e-4)


def test_deconvolution_same_upper(tmp_path):
    x = rand(1, 2, 3, 4)
    w = rand(2, 3, 3, 3)
    data = {"kernel": "3,3", "strides": "2,2", "output": "3", "auto_pad": "same_upper"}
    # output = input * stride; total padding = kernel - stride = 1, put at the end (upper)
    full = F.conv_transpose2d(t(x), t(w), stride=2).numpy()          # (1, 3, 7, 9)
    ref = full[:, :, 0:6, 0:8]
    one(unary_net("Deconvolution", x.shape, data, [1, 3, 6, 8], blobs={"weights": w}), tmp_path, {"data": x}, ref,
        1e-4)


def test_fp16_blobs(tmp_path):
    x = rand(1, 2, 4, 4)
    w, b = rand(3, 2, 1, 1).astype(np.float16), rand(3).astype(np.float16)
    net = unary_net("Convolution", x.shape, {"kernel": "1,1", "output": "3"}, [1, 3, 4, 4],
                    blobs={"weights": (w, "FP16"), "biases": (b, "FP16")})
    ref = F.conv2d(t(x), t(w.astype(np.float32)), t(b.astype(np.float32))).numpy()
    one(net, tmp_path, {"data": x}, ref, 1e-5)


def test_small_cnn_end_to_end_against_torch(tmp_path):
    """A LeNet-like legacy net (Convolution, ReLU, Pooling, Norm, FullyConnected, SoftMax)
    with torch's random weights, against the same torch model."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 6, 3, padding=1)
    fc = torch.nn.Linear(6 * 4 * 4, 5)
    x = rand(2, 3, 8, 8)
    with torch.no_grad():
        h = F.max_pool2d(F.relu(conv(t(x))), 2)
        h = F.local_response_norm(h, 3, alpha=1e-3, beta=0.75, k=1.0)
        ref = torch.softmax(fc(h.reshape(2, -1)), dim=1).numpy()
    net = LegacyNet("lenet")
    i = net.input("data", x.shape)
    (c,) = net.add("Convolution", [i], [[2, 6, 8, 8]], {"kernel": "3,3", "output": "6", "pads_begin": "1,1",
                                                        "pads_end": "1,1", "strides": "1,1"},
                   blobs={"weights": conv.weight.detach().numpy(), "biases": conv.bias.detach().numpy()})
    (r,) = net.add("ReLU", [c], [[2, 6, 8, 8]])
    (p,) = net.add("Pooling", [r], [[2, 6, 4, 4]], {"kernel": "2,2", "strides": "2,2", "pool-method": "max"})
    (n,) = net.add("Norm", [p], [[2, 6, 4, 4]], {"alpha": "0.001", "beta": "0.75", "local-size": "3",
                                                 "region": "across"})
    (f,) = net.add("FullyConnected", [n], [[2, 5]], {"out-size": "5"},
                   blobs={"weights": fc.weight.detach().numpy(), "biases": fc.bias.detach().numpy()})
    net.add("SoftMax", [f], [[2, 5]], {"axis": "1"}, name="prob")
    one(net, tmp_path, {"data": x}, ref, 1e-5)
