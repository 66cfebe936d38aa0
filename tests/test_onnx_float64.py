"""ONNX double tensors compute in float64 on both backends (no silent float32 precision).

Each case is one ONNX node with ``double`` inputs, run by ``nnefx.load`` + ``Session`` on the
fast and formal backends and compared with ``onnx.reference`` (which computes these
operators in float64) at 1e-12 relative.  The inputs carry low bits float32 cannot hold, so a
kernel that narrows anywhere misses the tolerance by orders of magnitude (float32 rounding
is ~6e-8 relative).  ``Erf`` is compared with ``math.erf``: ``onnx.reference``'s Erf
evaluates through a float32 ``np.vectorize`` (``otypes=["f"]``) and would not be a float64
reference.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import nnefx  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

_rng = np.random.default_rng(2064)


def _data(shape, lo=-2.0, hi=2.0):
    return _rng.uniform(lo, hi, size=shape) * (1.0 + 2.0 ** -40 * _rng.uniform(1.0, 2.0, size=shape))


@pytest.fixture(autouse=True)
def _seeded(request):
    """The same data for a case however the tests are distributed (pytest-xdist)."""
    global _rng
    _rng = np.random.default_rng(zlib.crc32(request.node.name.encode()))


POS = dict(lo=0.1, hi=3.0)
X = (2, 3, 4, 5)
#: (operator, input shapes (with data ranges), attributes, opset)
CASES = [(op, [((3, 4), {})], {}, 21) for op in (
    "Exp", "Sigmoid", "Tanh", "Sin", "Cos", "Atan", "Sinh", "Cosh", "Asinh", "Softplus", "Softsign", "Neg",
    "Abs", "Relu", "Elu", "Selu", "HardSigmoid", "HardSwish", "Mish", "Round", "Floor", "Ceil", "Sign")]
CASES += [(op, [((3, 4), POS)], {}, 21) for op in ("Log", "Sqrt", "Reciprocal")]
CASES += [(op, [((3, 4), dict(lo=-0.9, hi=0.9))], {}, 21) for op in ("Asin", "Acos", "Atanh")]
CASES += [(op, [((2, 3, 4), {}), ((3, 4), {})], {}, 21) for op in ("Add", "Sub", "Mul", "Div", "Max", "Min")]
CASES += [(op, [((2, 3, 4), {}), ((3, 4), {}), ((4,), {})], {}, 21) for op in ("Sum", "Mean")]
CASES += [
    ("Pow", [((3, 4), POS), ((3, 4), {})], {}, 21),
    ("LeakyRelu", [((3, 4), {})], dict(alpha=0.1), 21),
    ("Gelu", [((3, 4), {})], {}, 21),
    ("Gelu", [((3, 4), {})], dict(approximate="tanh"), 21),
    ("Clip", [((3, 4), {})], {}, 21),
    ("PRelu", [((2, 3, 4), {}), ((4,), {})], {}, 21),
    ("Softmax", [((2, 3, 4), {})], dict(axis=1), 21),
    ("LogSoftmax", [((2, 3, 4), {})], dict(axis=-1), 21),
    ("MatMul", [((2, 3, 4), {}), ((4, 5), {})], {}, 21),
    ("Gemm", [((3, 4), {}), ((5, 4), {}), ((5,), {})], dict(transB=1, alpha=0.7, beta=1.3), 21),
    ("Conv", [(X, {}), ((6, 3, 3, 2), {}), ((6,), {})], dict(pads=[1, 0, 1, 1], strides=[1, 2]), 21),
    ("Conv", [(X, {}), ((3, 1, 3, 3), {})], dict(group=3, pads=[1, 1, 1, 1]), 21),
    ("ConvTranspose", [((2, 3, 3, 4), {}), ((3, 2, 3, 3), {}), ((2,), {})], dict(strides=[2, 2]), 21),
    ("AveragePool", [(X, {})], dict(kernel_shape=[2, 3], pads=[1, 1, 0, 1], count_include_pad=0), 21),
    ("AveragePool", [(X, {})], dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1), 21),
    ("MaxPool", [(X, {})], dict(kernel_shape=[2, 2], strides=[2, 2]), 21),
    ("LpPool", [(X, {})], dict(kernel_shape=[2, 2], p=2), 21),
    ("GlobalAveragePool", [(X, {})], {}, 21),
    ("GlobalMaxPool", [(X, {})], {}, 21),
    ("BatchNormalization", [(X, {}), ((3,), {}), ((3,), {}), ((3,), {}), ((3,), POS)], dict(epsilon=1e-3), 21),
    ("InstanceNormalization", [(X, {}), ((3,), {}), ((3,), {})], {}, 21),
    ("LayerNormalization", [(X, {}), ((5,), {}), ((5,), {})], dict(axis=-1), 21),
    ("LpNormalization", [(X, {})], dict(axis=1, p=2), 21),
    ("LpNormalization", [(X, {})], dict(axis=-1, p=1), 21),
    ("LRN", [(X, {})], dict(size=3, alpha=0.2, beta=0.75, bias=2.0), 21),
    ("MeanVarianceNormalization", [(X, {})], {}, 21),
    ("CumSum", [((3, 4), {}), ((), "axis")], {}, 21),
    ("Einsum", [((2, 3, 4), {}), ((2, 4, 5), {})], dict(equation="bij,bjk->bik"), 21),
    ("Erf", [((3, 4), {})], {}, 21),
    # operators of the onnx domain (ops/onnx/)
    ("RMSNormalization", [(X, {}), ((5,), {})], dict(axis=-1), 23),
    ("Attention", [((2, 3, 4, 8), {}), ((2, 3, 5, 8), {}), ((2, 3, 5, 8), {})], {}, 23),
    ("Celu", [((3, 4), {})], dict(alpha=1.5), 21),
    ("Det", [((2, 3, 3), {})], {}, 21),
    ("Shrink", [((3, 4), {})], dict(lambd=0.5, bias=0.3), 21),
    ("ThresholdedRelu", [((3, 4), {})], dict(alpha=0.3), 21),
    ("Hardmax", [((3, 4), {})], {}, 21),
    ("Tan", [((3, 4), dict(lo=-1.0, hi=1.0))], {}, 21),
    ("Acosh", [((3, 4), dict(lo=1.1, hi=3.0))], {}, 21),
]
for _op in ("ReduceSum", "ReduceMean", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceLogSum",
            "ReduceSumSquare", "ReduceMax", "ReduceMin"):
    CASES.append((_op, [(X, POS if _op == "ReduceLogSum" else {})], dict(keepdims=0), 18))
for _mode, _extra in (("linear", {}), ("cubic", {}), ("nearest", {}), ("linear", dict(antialias=1)),
                      ("cubic", dict(antialias=1))):
    CASES.append(("Resize", [(X, {}), ((0,), "empty"), ((4,), "scales")], dict(mode=_mode, **_extra), 19))


def _erf(x):
    return np.vectorize(math.erf)(x)


def _lrn(x, size, alpha, beta, bias):
    alpha, beta, bias = (float(np.float32(v)) for v in (alpha, beta, bias))  # ONNX float attributes
    sq = np.pad(np.square(x), [(0, 0), ((size - 1) // 2, size // 2), (0, 0), (0, 0)])
    window = sum(sq[:, k:k + x.shape[1]] for k in range(size))
    return x / (bias + alpha / size * window) ** beta


def _mvn(x, axes=(0, 2, 3)):
    d = x - np.mean(x, axis=axes, keepdims=True)
    return d / (np.sqrt(np.mean(d * d, axis=axes, keepdims=True)) + 1e-9)


#: float64 definitions where ``onnx.reference`` does not compute in float64: its Erf (and the
#: Gelu built on it) evaluates through a float32 ``np.vectorize``, its HardSwish multiplies by
#: the float32 attribute value of 1/6 (the operator's definition: x * max(0, min(1, x/6 + 1/2))),
#: its LRN and MeanVarianceNormalization add a float32 constant to float64 data (a type error
#: in the reference), and its LpNormalization with p = 1 does not divide by the L1 norm.
_FORMULAS = {
    "Erf": lambda x: _erf(x),
    "Gelu": lambda x, approximate="none": 0.5 * x * (1.0 + (
        _erf(x / math.sqrt(2.0)) if approximate == "none"
        else np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))),
    "HardSwish": lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    "LRN": _lrn,
    "MeanVarianceNormalization": _mvn,
    "LpNormalization": lambda x, axis, p: x / np.linalg.norm(x, ord=p, axis=axis, keepdims=True),
}


def _model(op, specs, attrs, opset):
    inputs, names, feeds, inits = [], [], {}, []
    for k, (shape, how) in enumerate(specs):
        name = f"x{k}"
        names.append(name if how != "empty" else "")
        if how == "axis":
            inits.append(helper.make_tensor(name, TensorProto.INT64, (), [1]))
        elif how == "scales":
            # cubic at scales 1.5 / 0.6 differs from onnx.reference by ~1e-6 in float32 as well
            # (the coefficients of a fractional ratio): not a float64 matter, so kept out here
            cubic = attrs.get("mode") == "cubic"
            inits.append(helper.make_tensor(name, TensorProto.FLOAT, (4,), [1.0, 1.0, 2.0 if cubic else 1.5,
                                                                            0.5 if cubic else 0.6]))
        elif how == "empty":
            continue
        else:
            inputs.append(helper.make_tensor_value_info(name, TensorProto.DOUBLE, shape))
            feeds[name] = _data(shape, **how)
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), feeds


def _ids(case):
    op, _, attrs, _ = case
    return op + "".join(f"-{k}={v}" for k, v in attrs.items() if k in ("mode", "approximate", "group", "p",
                                                                      "count_include_pad", "antialias"))


@pytest.mark.parametrize("backend", ["fast", "formal"])
@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_double_computes_in_float64(case, backend, tmp_path):
    model, feeds = _model(*case)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    if case[0] in _FORMULAS:
        expected = _FORMULAS[case[0]](feeds["x0"], **case[2])
    else:
        expected = ReferenceEvaluator(model).run(None, feeds)[0]
    got = Session(nnefx.load(path), backend).run(feeds)["y"]
    assert got.dtype == np.float64
    # atol: normalisations subtract a mean (LayerNormalization's body as E[x^2] - E[x]^2), so
    # outputs near 0 carry float64 cancellation of ~1e-12; a float32 step would give ~1e-8
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-11)


@pytest.mark.parametrize("backend", ["fast", "formal"])
@pytest.mark.parametrize("op, gates", [("LSTM", 4), ("GRU", 3), ("RNN", 1)])
def test_double_recurrent_sequences_compute_in_float64(op, gates, backend, tmp_path):
    steps, batch, size, hidden = 4, 2, 3, 5
    shapes = {"X": (steps, batch, size), "W": (1, gates * hidden, size), "R": (1, gates * hidden, hidden),
              "B": (1, 2 * gates * hidden)}
    inputs = [helper.make_tensor_value_info(k, TensorProto.DOUBLE, v) for k, v in shapes.items()]
    outputs = [helper.make_tensor_value_info(k, TensorProto.DOUBLE, None) for k in ("Y", "Y_h")]
    node = helper.make_node(op, list(shapes), ["Y", "Y_h"], hidden_size=hidden)
    model = helper.make_model(helper.make_graph([node], "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 21)])
    onnx.save(model, tmp_path / "m.onnx")
    feeds = {k: _data(v, lo=-1.0, hi=1.0) for k, v in shapes.items()}
    expected = ReferenceEvaluator(model).run(None, feeds)
    got = Session(nnefx.load(tmp_path / "m.onnx"), backend).run(feeds)
    for name, want in zip(("Y", "Y_h"), expected, strict=True):
        assert got[name].dtype == np.float64
        np.testing.assert_allclose(got[name], want, rtol=1e-12, atol=1e-14)
