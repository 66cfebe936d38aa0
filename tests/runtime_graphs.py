"""Small graphs and private operator entries for the runtime tests.

The runtime tests build graphs directly with :mod:`nnefx.graph` and resolve operations
through a private table of :class:`OpDef` entries (passed as ``resolve=``), so they test the
planner and session alone, without registering anything in the global registry.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nnefx.diagnostics import NNEFXError
from nnefx.graph import Graph, Operation, Tensor
from nnefx.ops.registry import OpDef

CALLS: dict[str, int] = {}


def _count(name: str) -> None:
    CALLS[name] = CALLS.get(name, 0) + 1


def _binary(name: str, fn: Any, out: str = "scalar") -> OpDef:
    def kernel(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        _count(name)
        return fn(x, y)

    return OpDef(name, "test", f"fragment {name}( x: tensor<scalar>, y: tensor<scalar> ) -> "
                              f"( z: tensor<{out}> );", formal_kernel=kernel, fast_kernel=kernel)


def _unary(name: str, fn: Any) -> OpDef:
    def kernel(x: np.ndarray) -> np.ndarray:
        _count(name)
        return fn(x)

    return OpDef(name, "test", f"fragment {name}( x: tensor<scalar> ) -> ( y: tensor<scalar> );",
                 formal_kernel=kernel, fast_kernel=kernel)


def _concat(xs: list[np.ndarray], axis: int) -> np.ndarray:
    _count("concat")
    return np.concatenate(xs, axis=axis)


def _split(x: np.ndarray, axis: int, ratios: list[int]) -> list[np.ndarray]:
    _count("split")
    cuts = np.cumsum(ratios)[:-1] * (x.shape[axis] // sum(ratios))
    return list(np.split(x, cuts, axis=axis))


def _select(c: np.ndarray, x: np.ndarray, y: np.ndarray, dtype: str) -> np.ndarray:
    _count("select")
    assert dtype in ("scalar", "integer", "logical")
    return np.where(c, x, y)


def _linear(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    _count("linear")
    return x @ w.T + b


def _formal_add(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # the "formal" flavour: element by element, so the test can tell which one ran
    _count("add_formal")
    x, y = np.broadcast_arrays(x, y)
    out = np.empty(x.shape, np.float64)
    for idx in np.ndindex(x.shape):
        out[idx] = float(x[idx]) + float(y[idx])
    return out


def _fail(x: np.ndarray) -> np.ndarray:
    raise IndexError("index 7 is out of bounds")


def _fail_nnefx(x: np.ndarray) -> np.ndarray:
    raise NNEFXError("size must be positive")


def _inplace(x: np.ndarray) -> np.ndarray:
    x += 1
    return x


OPS: dict[str, OpDef] = {
    "add": _binary("add", np.add),
    "sub": _binary("sub", np.subtract),
    "mul": _binary("mul", np.multiply),
    "lt": _binary("lt", np.less, out="logical"),
    "tanh": _unary("tanh", np.tanh),
    "sigmoid": _unary("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    "neg": _unary("neg", np.negative),
    "log": _unary("log", np.log),
    "to_f64": _unary("to_f64", lambda x: x.astype(np.float64)),
    "to_int": _unary("to_int", lambda x: x.astype(np.int64)),
    "flatten": _unary("flatten", lambda x: x.reshape(x.shape[0], -1)),
    "fail": OpDef("fail", "test", "fragment fail( x: tensor<scalar> ) -> ( y: tensor<scalar> );",
                  formal_kernel=_fail),
    "fail_nnefx": OpDef("fail_nnefx", "test", "fragment fail_nnefx( x: tensor<scalar> ) -> "
                        "( y: tensor<scalar> );", formal_kernel=_fail_nnefx),
    "inplace": OpDef("inplace", "test", "fragment inplace( x: tensor<scalar> ) -> ( y: tensor<scalar> );",
                     formal_kernel=_inplace),
    "concat": OpDef("concat", "test", "fragment concat( values: tensor<scalar>[], axis: integer ) -> "
                    "( value: tensor<scalar> );", formal_kernel=_concat),
    "split": OpDef("split", "test", "fragment split( value: tensor<scalar>, axis: integer, "
                   "ratios: integer[] ) -> ( values: tensor<scalar>[] );", formal_kernel=_split),
    "select": OpDef("select", "test", "fragment select<?>( condition: tensor<logical>, "
                    "true_value: tensor<?>, false_value: tensor<?> ) -> ( output: tensor<?> );",
                    generic=True, formal_kernel=_select),
    "linear": OpDef("linear", "test", "fragment linear( input: tensor<scalar>, filter: tensor<scalar>, "
                    "bias: tensor<scalar> = 0.0 ) -> ( output: tensor<scalar> );", formal_kernel=_linear),
    "finite_log": OpDef("finite_log", "test", "fragment finite_log( x: tensor<scalar> ) -> "
                        "( y: tensor<scalar> );", formal_kernel=np.log, extra={"finite_inputs": True}),
}
OPS["add"].formal_kernel = _formal_add


def resolve(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise NNEFXError(f"unsupported operation '{name}'") from None


class Builder:
    """Append-only helper: each call adds one operation (and its result tensors)."""

    def __init__(self, name: str = "g"):
        self.graph = Graph(name)

    def _tensor(self, name: str, dtype: str, shape: Any, data: np.ndarray | None = None) -> str:
        self.graph.tensors[name] = Tensor(name, dtype, None if shape is None else tuple(shape), data)
        return name

    def external(self, name: str, shape: Any, dtype: str = "scalar") -> str:
        self._tensor(name, dtype, shape)
        self.graph.operations.append(Operation("external", {}, {"output": name},
                                               {"shape": list(shape)}, dtype=dtype))
        self.graph.inputs.append(name)
        return name

    def variable(self, name: str, data: Any, label: str | None = None, dtype: str = "scalar") -> str:
        data = np.asarray(data)
        self._tensor(name, dtype, data.shape, data)
        self.graph.operations.append(Operation("variable", {}, {"output": name},
                                               {"shape": list(data.shape), "label": label or name},
                                               dtype=dtype))
        return name

    def constant(self, name: str, shape: Any, value: list[Any], dtype: str = "scalar") -> str:
        self._tensor(name, dtype, shape)
        self.graph.operations.append(Operation("constant", {}, {"output": name},
                                               {"shape": list(shape), "value": value}, dtype=dtype))
        return name

    def op(self, kind: str, inputs: dict[str, Any], out: str | list[str], shape: Any = None,
           dtype: str = "scalar", result: str = "y", op_dtype: str | None = None, **attribs: Any) -> Any:
        names = out if isinstance(out, list) else [out]
        for n in names:
            self._tensor(n, dtype, shape)
        self.graph.operations.append(Operation(kind, dict(inputs), {result: out}, dict(attribs),
                                               dtype=op_dtype))
        return out

    def update(self, variable: str, value: str, out: str) -> str:
        t = self.graph.tensors[variable]
        self._tensor(out, t.dtype, t.shape)
        self.graph.operations.append(Operation("update", {"variable": variable, "value": value},
                                               {"result": out}))
        return out

    def output(self, *names: str) -> Graph:
        self.graph.outputs.extend(names)
        return self.graph


def accumulator_graph() -> Graph:
    """acc' = acc + x; outputs the new value (through the update's result)."""
    b = Builder("accumulate")
    x = b.external("x", [2, 3])
    acc = b.variable("acc", np.zeros((2, 3), np.float32), label="state/acc")
    total = b.op("add", {"x": acc, "y": x}, "total", [2, 3])
    b.update(acc, total, "acc_new")
    return b.output("acc_new")


def gated_cell_graph(w: np.ndarray, u: np.ndarray) -> Graph:
    """An LSTM-like step: f = sigmoid(x·Wᵀ + h·Uᵀ); c' = f*c + (1-f)*tanh(x·Wᵀ); h' = tanh(c')."""
    n, k = w.shape
    b = Builder("cell")
    x = b.external("x", [1, k])
    h = b.variable("h", np.zeros((1, n), np.float32), label="cell/h")
    c = b.variable("c", np.zeros((1, n), np.float32), label="cell/c")
    wv = b.variable("w", w.astype(np.float32), label="cell/w")
    uv = b.variable("u", u.astype(np.float32), label="cell/u")
    xw = b.op("linear", {"input": x, "filter": wv}, "xw", [1, n])
    hu = b.op("linear", {"input": h, "filter": uv, "bias": 0.0}, "hu", [1, n])
    pre = b.op("add", {"x": xw, "y": hu}, "pre", [1, n])
    f = b.op("sigmoid", {"x": pre}, "f", [1, n])
    keep = b.op("mul", {"x": f, "y": c}, "keep", [1, n])
    g = b.op("tanh", {"x": xw}, "g", [1, n])
    one_minus = b.op("sub", {"x": 1.0, "y": f}, "one_minus", [1, n])
    fresh = b.op("mul", {"x": one_minus, "y": g}, "fresh", [1, n])
    c_new = b.op("add", {"x": keep, "y": fresh}, "c_new", [1, n])
    h_new = b.op("tanh", {"x": c_new}, "h_new", [1, n])
    b.update(c, c_new, "c_next")
    b.update(h, h_new, "h_next")
    return b.output("h_next", "c_next")


def gated_cell_reference(w: np.ndarray, u: np.ndarray, xs: list[np.ndarray]) -> list[np.ndarray]:
    h = np.zeros((1, w.shape[0]))
    c = np.zeros((1, w.shape[0]))
    hs = []
    for x in xs:
        xw = x @ w.T
        f = 1 / (1 + np.exp(-(xw + h @ u.T)))
        c = f * c + (1 - f) * np.tanh(xw)
        h = np.tanh(c)
        hs.append(h)
    return hs
