"""Single-node ONNX graphs (built with onnx.helper) vs onnxruntime, one per supported case."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import nnefx  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
RNG = np.random.default_rng(7)


def x(*shape):
    """A runtime float input of this shape."""
    return ("in", shape)


def u(*shape):
    """A runtime float input with values in (0.1, 0.9) (domains of log, asin, ...)."""
    return ("unit", shape)


def c(arr, dtype=None):
    """A constant input (initializer)."""
    return np.asarray(arr, dtype=dtype)


def make(op, inputs, attrs=None, opset=17, n_out=1, out_type=F):
    inits, vis, names, feeds = [], [], [], {}
    for k, spec in enumerate(inputs):
        name = f"i{k}"
        if spec is None:
            names.append("")
            continue
        names.append(name)
        if isinstance(spec, tuple):
            shape = spec[1]
            vis.append(helper.make_tensor_value_info(name, F, list(shape)))
            if spec[0] == "unit":
                feeds[name] = RNG.uniform(0.1, 0.9, shape).astype(np.float32)
            else:
                feeds[name] = RNG.standard_normal(shape).astype(np.float32)
        else:
            inits.append(numpy_helper.from_array(spec, name))
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, name="the_node", **(attrs or {}))
    out_types = out_type if isinstance(out_type, list) else [out_type] * n_out
    graph = helper.make_graph([node], "g", vis, [helper.make_tensor_value_info(o, t, None)
                                                 for o, t in zip(outs, out_types, strict=True)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, feeds


CASES = [
    ("Add", [x(2, 3, 4), x(4)], {}),
    ("Sub", [x(3, 1), x(2, 1, 5)], {}),
    ("Mul", [x(2, 3), c(RNG.standard_normal((2, 1)), np.float32)], {}),
    ("Div", [x(2, 3), c([1.5, -2.0, 4.0], np.float32)], {}),
    ("Pow", [c(np.abs(RNG.standard_normal((2, 3))) + 0.5, np.float32), x(3)], {}),
    ("Max", [x(2, 3), x(3), x(1, 3)], {}),
    ("Min", [x(4, 1), x(1, 5)], {}),
    ("Relu", [x(2, 5)], {}),
    ("LeakyRelu", [x(2, 5)], {"alpha": 0.2}),
    ("Sigmoid", [x(2, 5)], {}),
    ("Tanh", [x(2, 5)], {}),
    ("Clip", [x(3, 4), c(-0.5, np.float32), c(0.7, np.float32)], {}),
    ("Clip", [x(3, 4), None, c(0.1, np.float32)], {}),
    ("Elu", [x(3, 4)], {"alpha": 0.7}),
    ("Selu", [x(3, 4)], {}),
    ("Erf", [x(3, 4)], {}),
    ("Exp", [x(3, 4)], {}),
    ("Abs", [x(3, 4)], {}),
    ("Neg", [x(3, 4)], {}),
    ("Floor", [x(3, 4)], {}),
    ("Ceil", [x(3, 4)], {}),
    ("Reciprocal", [x(3, 4)], {}),
    ("Softmax", [x(2, 3, 4)], {"axis": 1}),
    ("LogSoftmax", [x(2, 3, 4)], {"axis": -1}),
    ("Conv", [x(1, 4, 7, 7), c(RNG.standard_normal((6, 2, 3, 3)), np.float32), c(RNG.standard_normal(6), np.float32)],
     {"group": 2, "pads": [1, 0, 2, 1], "strides": [2, 1], "dilations": [1, 2]}),
    ("Conv", [x(1, 3, 7, 6), c(RNG.standard_normal((4, 3, 3, 2)), np.float32)], {"auto_pad": "SAME_UPPER",
                                                                                "strides": [2, 2]}),
    ("Conv", [x(1, 3, 7, 6), c(RNG.standard_normal((4, 3, 2, 2)), np.float32)], {"auto_pad": "SAME_LOWER"}),
    ("ConvTranspose", [x(1, 4, 5, 5), c(RNG.standard_normal((4, 3, 3, 3)), np.float32),
                       c(RNG.standard_normal(3), np.float32)], {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                                               "output_padding": [1, 1]}),
    ("ConvTranspose", [x(1, 4, 5, 5), c(RNG.standard_normal((4, 1, 3, 3)), np.float32)], {"group": 2,
                                                                                          "strides": [2, 2]}),
    ("Gemm", [x(3, 4), x(5, 4), x(5)], {"transB": 1, "alpha": 0.5, "beta": 2.0}),
    ("Gemm", [x(4, 3), x(4, 5)], {"transA": 1}),
    ("MatMul", [x(2, 3, 4), x(4, 5)], {}),
    ("MatMul", [x(4), x(2, 4, 3)], {}),
    ("MaxPool", [x(1, 2, 7, 7)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", [x(1, 2, 6, 6)], {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("AveragePool", [x(1, 2, 7, 7)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                      "count_include_pad": 1}),
    ("AveragePool", [x(1, 2, 7, 7)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", [x(1, 2, 8, 8)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                      "ceil_mode": 1, "count_include_pad": 1}),
    ("AveragePool", [x(1, 2, 7, 6)], {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 0, 1, 2],
                                      "ceil_mode": 1, "count_include_pad": 1}),
    ("AveragePool", [x(1, 1, 5, 9)], {"kernel_shape": [3, 2], "strides": [3, 3], "pads": [1, 1, 0, 1],
                                      "ceil_mode": 1, "count_include_pad": 1}),
    ("AveragePool", [x(1, 2, 8, 8)], {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                      "ceil_mode": 1}),
    ("MaxPool", [x(1, 2, 7, 6)], {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 0, 1, 2],
                                  "ceil_mode": 1}),
    ("AveragePool", [x(1, 2, 7, 6)], {"kernel_shape": [2, 3], "strides": [2, 2], "pads": [1, 0, 1, 2],
                                      "ceil_mode": 1}),
    ("Round", [c([0.5, 1.5, 2.5, -0.5, -1.7, 3.2], np.float32)], {}),
    ("Round", [x(3, 4)], {}),
    ("Trilu", [c(RNG.standard_normal((2, 4, 5)), np.float32), c(1, np.int64)], {}),
    ("Trilu", [c(RNG.standard_normal((4, 5)), np.float32)], {"upper": 0}),
    ("CumSum", [x(3, 4), c(1, np.int64)], {"exclusive": 1}),
    ("CumSum", [x(3, 4), c(-2, np.int64)], {"reverse": 1}),
    ("GlobalAveragePool", [x(2, 3, 4, 5)], {}),
    ("GlobalMaxPool", [x(2, 3, 4, 5)], {}),
    ("BatchNormalization", [x(2, 3, 4), c([1.0, 2.0, 0.5], np.float32), c([0.1, 0.2, 0.3], np.float32),
                            c([0.0, 0.5, -0.5], np.float32), c([1.0, 2.0, 0.5], np.float32)], {"epsilon": 1e-3}),
    ("LayerNormalization", [x(2, 3, 4), c(RNG.standard_normal(4), np.float32), c(RNG.standard_normal(4),
                                                                                 np.float32)], {}),
    ("InstanceNormalization", [x(2, 3, 4, 4), c([1.0, 2.0, 0.5], np.float32), c([0.1, 0.2, 0.3], np.float32)], {}),
    ("LRN", [x(1, 5, 3, 3)], {"size": 3, "alpha": 0.01, "beta": 0.75, "bias": 1.5}),
    ("Flatten", [x(2, 3, 4)], {"axis": 2}),
    ("Reshape", [x(2, 3, 4), c([0, -1], np.int64)], {}),
    ("Squeeze", [x(2, 1, 4, 1), c([1, -1], np.int64)], {}),
    ("Unsqueeze", [x(2, 4), c([0, -1], np.int64)], {}),
    ("Transpose", [x(2, 3, 4)], {"perm": [1, 2, 0]}),
    ("Concat", [x(2, 3), x(2, 2)], {"axis": -1}),
    ("Slice", [x(5, 6), c([1, -1], np.int64), c([100, -5], np.int64), c([0, 1], np.int64), c([2, -2], np.int64)],
     {}),
    ("Slice", [x(5, 6), c([0, 4], np.int64), c([2**63 - 1, -2**63], np.int64), c([0, 1], np.int64),
               c([2, -1], np.int64)], {}),
    ("Slice", [x(4, 7), c([-1], np.int64), c([0], np.int64), c([1], np.int64), c([-3], np.int64)], {}),
    ("Gather", [x(5, 4), c([[0, -1], [2, 3]], np.int64)], {"axis": 0}),
    ("Gather", [x(5, 4), c(-2, np.int64)], {"axis": 1}),
    ("Pad", [x(2, 3), c([1, 0, 0, 2], np.int64), c(1.5, np.float32)], {"mode": "constant"}),
    ("Pad", [x(2, 4), c([0, 2, 0, 1], np.int64)], {"mode": "reflect"}),
    ("Pad", [x(2, 4), c([1, 1, 1, 1], np.int64)], {"mode": "edge"}),
    ("Tile", [x(2, 3), c([2, 1], np.int64)], {}),
    ("Expand", [x(3, 1), c([2, 3, 4], np.int64)], {}),
    ("ReduceMean", [x(2, 3, 4)], {"axes": [1], "keepdims": 0}, 13),
    ("ReduceMean", [x(2, 3, 4), c([-1], np.int64)], {}, 18),
    ("ReduceSum", [x(2, 3, 4), c([0, 2], np.int64)], {}),
    ("ReduceMax", [x(2, 3, 4)], {"axes": [2]}),
    ("ReduceMin", [x(2, 3, 4)], {"keepdims": 0}),
    ("ReduceL2", [x(2, 3, 4)], {"axes": [1]}),
    ("Where", [c([[True, False, True]]), x(2, 3), x(3)], {}),
    ("Einsum", [x(2, 3, 4), x(2, 4, 5)], {"equation": "bij,bjk->bik"}),
    ("Resize", [x(1, 2, 3, 4), None, c([1, 1, 2, 2], np.float32)], {"mode": "nearest"}),
    ("Resize", [x(1, 2, 3, 4), None, c([1, 1, 2, 1.5], np.float32)],
     {"mode": "linear", "coordinate_transformation_mode": "half_pixel"}),
    ("Resize", [x(1, 2, 3, 4), None, None, c([1, 2, 5, 7], np.int64)],
     {"mode": "linear", "coordinate_transformation_mode": "align_corners"}),
    ("Resize", [x(1, 2, 3, 4), None, c([1, 1, 2, 2], np.float32)],
     {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}),
    ("Identity", [x(2, 3)], {}),
    ("Dropout", [x(2, 3)], {}),
    ("Sqrt", [c(np.abs(RNG.standard_normal((2, 3))), np.float32)], {}),
    ("Sqrt", [u(2, 3)], {}),
    ("Log", [u(2, 3)], {}),
    ("Asin", [u(2, 3)], {}),
    ("Acos", [u(2, 3)], {}),
    ("Atan", [x(2, 3)], {}),
    ("Sin", [x(2, 3)], {}),
    ("Cos", [x(2, 3)], {}),
    ("Tan", [u(2, 3)], {}),
    ("Sinh", [x(2, 3)], {}),
    ("Cosh", [x(2, 3)], {}),
    ("Sign", [x(2, 3)], {}),
    ("Softplus", [x(2, 3)], {}),
    ("Softsign", [x(2, 3)], {}),
    ("Mish", [x(2, 3)], {}, 18),
    ("HardSwish", [x(2, 3)], {}),
    ("GatherElements", [x(3, 4), c([[0, 2, 1, 0], [2, 2, 0, 1]], np.int64)], {"axis": 0}),
    ("SpaceToDepth", [x(1, 2, 4, 6)], {"blocksize": 2}),
    ("ReduceL1", [x(2, 3, 4)], {"axes": [0, 2]}),
    ("ReduceProd", [u(2, 3, 4)], {"axes": [1], "keepdims": 0}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)])
def test_node_agrees_with_onnxruntime(tmp_path, case):
    op, inputs, attrs = case[:3]
    opset = case[3] if len(case) > 3 else 17
    model, feeds = make(op, inputs, attrs, opset)
    path = tmp_path / "n.onnx"
    onnx.save(model, str(path))
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    loaded = nnefx.load(str(path))
    for backend in ("fast", "formal"):
        got = Session(loaded, backend=backend).run(feeds)
        for w, g in zip(want, got.values(), strict=True):
            assert np.asarray(g).shape == w.shape
            np.testing.assert_allclose(np.asarray(g, dtype=np.float64), w, rtol=1e-4, atol=1e-5)


def test_unused_output_only_graph_outputs_named(tmp_path):
    model, feeds = make("Relu", [x(2, 3)])
    path = tmp_path / "r.onnx"
    onnx.save(model, str(path))
    m = nnefx.load(str(path))
    assert m.graph.inputs == ["i0"] and m.graph.outputs == ["y0"] and m.format == "onnx"


MORE = [
    # (op, inputs, attrs, opset, out_types)
    ("Softmax", [x(2, 3, 4)], {"axis": 1}, 11, F),           # opset < 13: 2-D coercion
    ("LogSoftmax", [x(2, 3, 4)], {}, 11, F),
    ("Softmax", [x(2, 3, 4)], {}, 11, F),
    ("Equal", [c([[1, 2, 3]], np.int64), c([1, 5, 3], np.int64)], {}, 17, B),
    ("Less", [x(2, 3), x(3)], {}, 17, B),
    ("Greater", [x(2, 3), c(0.0, np.float32)], {}, 17, B),
    ("Not", [c([True, False])], {}, 17, B),
    ("And", [c([True, False, True]), c([True, True, False])], {}, 17, B),
    ("Or", [c([True, False, False]), c([False, False, True])], {}, 17, B),
    ("Xor", [c([True, False, True]), c([[True], [False]])], {}, 17, B),
    ("Size", [x(2, 3, 4)], {}, 17, I64),
    ("ArgMax", [x(2, 3, 4)], {"axis": 1}, 17, I64),
    ("ArgMax", [x(2, 3, 4)], {"axis": 1}, 11, I64),
    ("ArgMin", [x(2, 3, 4)], {"axis": -1, "keepdims": 0}, 17, I64),
    ("Cast", [x(2, 3)], {"to": I64}, 17, I64),
    ("Upsample", [x(1, 2, 3, 4), c([1, 1, 2, 3], np.float32)], {"mode": "nearest"}, 9, F),
    ("Slice", [x(5, 6)], {"starts": [1, 0], "ends": [4, 100], "axes": [0, 1]}, 9, F),
    ("Squeeze", [x(2, 1, 4)], {"axes": [1]}, 11, F),
    ("Unsqueeze", [x(2, 4)], {"axes": [1]}, 11, F),
    ("ReduceSum", [x(2, 3, 4)], {"axes": [1, 2], "keepdims": 1}, 11, F),
    ("Mod", [c([[5, -7, 9]], np.int64), c([3, 3, -4], np.int64)], {}, 17, I64),
    ("HardSigmoid", [x(3, 4)], {"alpha": 0.3, "beta": 0.4}, 17, F),
    ("PRelu", [x(2, 3, 4, 4), c(RNG.standard_normal((3, 1, 1)), np.float32)], {}, 17, F),
    ("Sum", [x(2, 3), x(3), x(2, 1)], {}, 17, F),
    ("Mean", [x(2, 3), x(3)], {}, 17, F),
    ("Pad", [x(2, 3, 4), c([1, 2], np.int64), None, c([-1], np.int64)], {}, 18, F),
    ("Reshape", [x(2, 3, 4), c([4, -1], np.int64)], {"allowzero": 1}, 17, F),
    ("Split", [x(2, 7), c([3, 4], np.int64)], {"axis": 1}, 17, [F, F]),
    ("Split", [x(6, 3)], {"split": [2, 4]}, 11, [F, F]),
    ("Split", [x(7, 3)], {"num_outputs": 3}, 18, [F, F, F]),
    ("Split", [x(3, 6)], {"axis": -1}, 13, [F, F, F]),
    ("Gelu", [x(3, 4)], {}, 20, F),
    ("Gelu", [x(3, 4)], {"approximate": "tanh"}, 20, F),
    ("DepthToSpace", [x(1, 8, 2, 3)], {"blocksize": 2, "mode": "CRD"}, 17, F),
    ("ReduceMax", [x(2, 3, 4), c([0, -1], np.int64)], {"keepdims": 0}, 18, F),
]


@pytest.mark.parametrize("case", MORE, ids=[f"{i}-{c[0]}-{c[3]}" for i, c in enumerate(MORE)])
def test_more_nodes_agree_with_onnxruntime(tmp_path, case):
    op, inputs, attrs, opset, out_type = case
    n_out = len(out_type) if isinstance(out_type, list) else 1
    model, feeds = make(op, inputs, attrs, opset, n_out=n_out, out_type=out_type)
    path = tmp_path / "n.onnx"
    onnx.save(model, str(path))
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    loaded = nnefx.load(str(path))
    for backend in ("fast", "formal"):
        got = Session(loaded, backend=backend).run(feeds)
        for w, g in zip(want, got.values(), strict=True):
            g = np.asarray(g)
            assert g.shape == w.shape
            if w.dtype.kind in "biu":
                np.testing.assert_array_equal(g, w)
            else:
                np.testing.assert_allclose(g.astype(np.float64), w, rtol=1e-4, atol=1e-5)


def _shape_chain(tmp_path):
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape; ConstantOfShape; Range: all folded."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0, np.int64))),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Shape", ["flat"], ["fs"]),
        helper.make_node("ConstantOfShape", ["fs"], ["ones"], value=numpy_helper.from_array(np.array([2.0],
                                                                                                    np.float32))),
        helper.make_node("Range", ["r0", "r1", "r2"], ["rng"]),
        helper.make_node("Cast", ["rng"], ["rngf"], to=F),
        helper.make_node("Mul", ["flat", "ones"], ["m"]),
        helper.make_node("Add", ["m", "rngf"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             numpy_helper.from_array(np.array(0, np.int64), "r0"),
             numpy_helper.from_array(np.array(12, np.int64), "r1"),
             numpy_helper.from_array(np.array(1, np.int64), "r2")]
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", F, [2, 3, 4])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "chain.onnx"
    onnx.save(m, str(p))
    return p


def test_shape_subgraphs_fold_to_constants(tmp_path):
    p = _shape_chain(tmp_path)
    feeds = {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)}
    want = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    m = nnefx.load(str(p))
    ops = {op.op for op in m.graph.operations}
    assert "tensor_shape" not in ops and "arange" not in ops
    np.testing.assert_allclose(Session(m).run(feeds)["y"], want, rtol=1e-6)


def test_where_then_argmax_uses_inferred_shapes(tmp_path):
    """A result whose shape no registry rule gives is filled from ONNX's shape inference."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["g"]),
             helper.make_node("Mul", ["x", "tenth"], ["m"]),
             helper.make_node("Where", ["g", "x", "m"], ["w"]),
             helper.make_node("ArgMax", ["w"], ["y"], axis=-1)]
    inits = [numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
             numpy_helper.from_array(np.array(0.1, np.float32), "tenth")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [2, 5])],
                          [helper.make_tensor_value_info("y", I64, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "w.onnx"
    onnx.save(m, str(p))
    feeds = {"x": RNG.standard_normal((2, 5)).astype(np.float32)}
    want = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_array_equal(Session(nnefx.load(str(p))).run(feeds)["y"], want)
