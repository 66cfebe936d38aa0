"""Reading tract-dialect documents whose inputs are typed (``tract_core_external(datum_type =
'f16' | 'i8' | 'u8' | 'i32' ...)``) and whose variables are stored in their own item types:
nnefx computes every tensor in the datum type tract gives it, and tract itself (its Python
bindings) must return the same values in the same type, bit for bit, on both backends.

Where the two differ, nnefx keeps its stated contract (a narrow float operation computed wide
and rounded once) and the test says what tract does instead: f16 division is x * f16(1/y) in
tract (two roundings), its f16 softmax is off by up to a few ulp, and ``mul(x, x)`` of
integers saturates (tract rewrites it to a square) where ``mul`` of two tensors wraps."""

from __future__ import annotations

import numpy as np
import pytest

import nnefx
from nnefx.diagnostics import NNEFXError

tract = pytest.importorskip("tract")

RNG = np.random.default_rng(0)
F16 = (RNG.standard_normal((4, 8)) * 3).astype(np.float16)
G16 = (RNG.standard_normal((4, 8)) * 3).astype(np.float16)
I8 = RNG.integers(-128, 128, (4, 8)).astype(np.int8)
J8 = RNG.integers(-128, 128, (4, 8)).astype(np.int8)
J8[J8 == 0] = 3
U8 = RNG.integers(0, 256, (4, 8)).astype(np.uint8)
V8 = RNG.integers(0, 256, (4, 8)).astype(np.uint8)
I32 = RNG.integers(-2 ** 31, 2 ** 31, (4, 8)).astype(np.int32)
IDX = np.array([[1, 0], [2, 1]], np.int64)
DATUM = {"float16": "f16", "float32": "f32", "float64": "f64", "int8": "i8", "uint8": "u8", "int32": "i32",
         "int64": "i64"}


def _folder(tmp_path, body: str, inputs: list) -> str:
    lines = [f"    x{k} = tract_core_external(shape = {list(a.shape)}, datum_type = '{DATUM[a.dtype.name]}');"
             for k, a in enumerate(inputs)]
    names = ", ".join(f"x{k}" for k in range(len(inputs)))
    (tmp_path / "graph.nnef").write_text(f"version 1.0;\nextension tract_registry tract_core;\n\ngraph g( {names} ) "
                                         f"-> ( y )\n{{\n" + "\n".join(lines) + f"\n    {body}\n}}\n")
    return str(tmp_path)


def _both(tmp_path, body, inputs):
    folder = _folder(tmp_path, body, inputs)
    want = tract.nnef().load(folder).into_runnable().run(list(inputs))[0].to_numpy()
    model = nnefx.load(folder)
    feeds = {f"x{k}": a for k, a in enumerate(inputs)}
    got = [nnefx.Session(model, backend=b).run(feeds)["y"] for b in ("formal", "fast")]
    return want, got


CASES = [
    ("y = add(x0, x1);", [F16, G16]), ("y = mul(x0, 0.1);", [F16]), ("y = exp(x0);", [F16]),
    ("y = tanh(x0);", [F16]), ("y = sigmoid(x0);", [F16]), ("y = sqrt(abs(x0));", [F16]),
    ("y = sum_reduce(x0, axes = [1]);", [F16]), ("y = mean_reduce(x0, axes = [1]);", [F16]),
    ("y = matmul(x0, x1, transposeB = true);", [F16, G16]), ("y = select(lt(x0, x1), x0, x1);", [F16, G16]),
    ("y = add(x0, x1);", [F16, G16.astype(np.float32)]),           # f16 with f32: tract's common type f32
    ("y = tract_core_gather(x1, x0, axis = 0);", [IDX, F16]),
    ("y = transpose(x0, axes = [1, 0]);", [I8]), ("y = reshape(x0, shape = [8, 4]);", [U8]),
    ("y = concat([x0, x0], axis = 0);", [I32]), ("y = slice(x0, axes = [1], begin = [2], end = [5]);", [I8]),
    ("y = tile(x0, repeats = [1, 2]);", [U8]), ("y = tract_core_gather(x1, x0, axis = 0);", [IDX, I8]),
    ("y = tract_core_cast(x0, to = 'f32');", [I8]), ("y = transpose(tract_core_cast(x0, to = 'i32'), axes = [1, 0]);", [U8]),
    ("y = add(x0, x1);", [I8, J8]), ("y = sub(x0, x1);", [U8, V8]), ("y = mul(x0, x1);", [I8, J8]),
    ("y = mul(x0, x1);", [I32, I32[::-1].copy()]), ("y = div(x0, x1);", [I8, J8]), ("y = min(x0, x1);", [I8, J8]),
    ("y = max(x0, x1);", [U8, V8]), ("y = lt(x0, x1);", [I8, J8]), ("y = ne(x0, 5);", [I8]),
    ("y = add(x0, 1.5);", [I8]), ("y = select(gt(x0, x1), x0, x1);", [I8, J8]), ("y = add(x0, x1);", [I8, I32]),
]


@pytest.mark.parametrize("body, inputs", CASES, ids=[f"{k}-{c[0][4:].split('(')[0]}" for k, c in enumerate(CASES)])
def test_typed_tract_document_computes_in_tracts_datum_types(tmp_path, body, inputs):
    want, got = _both(tmp_path, body, inputs)
    for g in got:
        assert g.dtype == want.dtype and g.shape == want.shape
        assert np.array_equal(g, want, equal_nan=True), (g, want)


def test_where_tract_rounds_twice_nnefx_rounds_once(tmp_path):
    (tmp_path / "div").mkdir()
    want, got = _both(tmp_path / "div", "y = div(x0, x1);", [F16, G16])
    exact = (F16.astype(np.float64) / G16.astype(np.float64)).astype(np.float16)
    tract_way = (F16.astype(np.float32) * (1 / G16.astype(np.float32)).astype(np.float16)).astype(np.float16)
    assert np.array_equal(want, tract_way) and not np.array_equal(want, exact)
    assert all(np.array_equal(g, exact) for g in got)
    (tmp_path / "sm").mkdir()
    want, got = _both(tmp_path / "sm", "y = softmax(x0, axes = [1]);", [F16])
    x = F16.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    exact = (e / e.sum(1, keepdims=True)).astype(np.float16)
    assert not np.array_equal(want, exact) and all(np.array_equal(g, exact) for g in got)
    (tmp_path / "sq").mkdir()
    want, got = _both(tmp_path / "sq", "y = mul(x0, x0);", [I8])
    assert np.array_equal(want, np.clip(I8.astype(np.int32) ** 2, -128, 127).astype(np.int8))   # tract: saturated
    assert all(np.array_equal(g, (I8.astype(np.int32) ** 2).astype(np.int8)) for g in got)     # mul: wraps


def test_written_for_tract_reads_back_with_the_same_types(tmp_path):
    """nnefx's own tract writer: typed inputs and f16 weights (a ``.dat`` of f16 items) read
    back in their types; tract and nnefx agree on the folder."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto as T
    from onnx import helper as h

    for et, code, dt in (("f16", T.FLOAT16, np.float16), ("i8", T.INT8, np.int8), ("u32", T.UINT32, np.uint32)):
        w = np.array([3, 1, 7], dt)
        g = h.make_graph([h.make_node("Mul", ["x", "w"], ["m"]), h.make_node("Add", ["m", "x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", code, [2, 3])], [h.make_tensor_value_info("y", code, None)],
                         [h.make_tensor("w", code, [3], w.tobytes(), raw=True)])
        src, dst = tmp_path / f"{et}.onnx", tmp_path / et
        onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 18)]), src)
        nnefx.save(nnefx.load(src), dst, dialect="tract")
        x = (np.arange(6).reshape(2, 3) * 50 % 251).astype(dt)
        want = tract.nnef().load(str(dst)).into_runnable().run([x])[0].to_numpy()
        back = nnefx.load(dst)
        for backend in ("formal", "fast"):
            got = nnefx.Session(back, backend=backend).run({"x": x})["y"]
            assert got.dtype == want.dtype == dt and np.array_equal(got, want), (et, backend)


def test_plain_nnef_keeps_computing_in_its_abstract_types(tmp_path):
    """Outside tract's dialect the text's ``scalar`` decides: an f16 weight file is storage."""
    from nnefx.io import binary

    (tmp_path / "graph.nnef").write_text("version 1.0;\ngraph g( x ) -> ( y )\n{\n    x = external(shape = [3]);\n"
                                         "    w = variable(shape = [3], label = 'w');\n    y = mul(x, w);\n}\n")
    binary.write_tensor(str(tmp_path / "w.dat"), np.array([0.1, 0.2, 0.3], np.float16))
    y = nnefx.Session(nnefx.load(tmp_path)).run({"x": np.ones(3, np.float32)})["y"]
    assert y.dtype == np.float32


def test_integer_tensor_where_nnef_declares_scalars_is_refused_located(tmp_path):
    with pytest.raises(NNEFXError, match="argument 'input' of 'pad' expects tensor<scalar>, found tensor<integer>") as e:
        nnefx.load(_folder(tmp_path, "y = pad(x0, padding = [(1, 1), (0, 0)]);", [I8]))
    assert e.value.location is not None and e.value.location.line == 7
