"""PyTorch as an nnefx backend: the graph as a torch module (eager), on the CPU or a CUDA device.

The module is built operation by operation from a table of torch forms of NNEF operations
(below).  Shapes are concrete when a graph reaches an engine, so shape-only operations
(``reshape``, ``squeeze``, ``unsqueeze``) reshape to the tensor's known shape, and window
operations resolve automatic padding with the same arithmetic as the numpy kernels
(:mod:`nnefx.ops._common`).  NNEF broadcasting aligns shapes from the first dimension
(NNEF spec §4.2.1: missing trailing dimensions are singletons), torch's from the last, so
binary operations first give the lower-rank operand its trailing singletons.

An operation without a torch form (or with attribute values the form does not cover, such
as a non-constant border) is a :class:`~nnefx.engines.base.Problem`: the backend refuses the
graph before running, and ``nnefx query`` lists it.  ``precision="f16"``/``"bf16"`` casts the
floating inputs and weights and computes in that type; the outputs are returned in float32.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ..diagnostics import NNEFXError
from ..formats.export.context import constant_array
from ..graph import Graph, Operation
from .base import Engine, Problem, contiguous, engine_failure

Form = Callable[..., Any]
_FORMS: dict[str, Callable[[Any, Graph, Operation], Form | str]] = {}


def form(*names: str) -> Callable:
    def register(builder: Callable) -> Callable:
        for n in names:
            _FORMS[n] = builder
        return builder
    return register


class TorchEngine(Engine):
    name = "torch"
    extra = "torch"
    via = "a torch module"

    def module(self) -> Any:
        return self._import("torch")

    def problems(self, graph: Graph) -> list[Problem]:
        torch = self.module() if self.available() else None
        found = []
        for op in graph.operations:
            text = _strings(graph, op)
            if text:
                found.append(Problem(op.op, op.location, text))
                continue
            if op.op in ("external", "variable", "constant"):
                continue
            built = _build(torch, graph, op) if torch is not None else \
                (None if op.op in _FORMS or _is_compound(op.op) else "no torch form")
            if isinstance(built, str):
                found.append(Problem(op.op, op.location, built))
        return found

    def compile(self, graph: Graph, *, threads: int, precision: str, device: str) -> Any:
        torch = self.module()
        for op in graph.operations:
            text = _strings(graph, op)
            if text:
                raise NNEFXError(text, op.location)
        if precision not in ("f32", "f16", "bf16"):
            raise NNEFXError(f"backend 'torch' knows precisions f32, f16, bf16, not '{precision}'")
        if device.startswith("cuda") and not torch.cuda.is_available():
            raise NNEFXError("backend 'torch' was asked for device 'cuda', but torch sees no CUDA device")
        torch.set_num_threads(threads)
        return TorchModel(torch, graph, precision, device)


def _strings(graph: Graph, op: Any) -> str | None:
    """Why ``op`` cannot run on torch when one of its results holds strings (torch has no
    tensors of text), else None."""
    for name in op.output_names():
        t = graph.tensors.get(name)
        if t is not None and t.dtype == "string":
            return f"tensor '{name}' holds strings, which torch tensors cannot"
    return None


class TorchModel:
    """The graph as a list of torch steps over a dict of tensors (no autograd): eager on the CPU,
    captured once and replayed as a CUDA graph on a GPU."""

    def __init__(self, torch: Any, graph: Graph, precision: str, device: str):
        self.torch = torch
        self.device = torch.device(device)
        self.float = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[precision]
        self.graph = graph
        self.consts: dict[str, Any] = {}
        self.steps: list[tuple[Form, Operation]] = []
        #: on a CUDA device: None until the first run captures the CUDA graph, then the graph, or
        #: False where it cannot be captured (``replay_refused`` says why)
        self.replay: Any = None
        self.replay_refused = ""
        for op in graph.operations:
            if op.op in ("variable", "constant"):
                (name,) = op.output_names()
                data = graph.tensors[name].data
                if data is None and op.op == "constant":
                    data = constant_array(op, tuple(graph.tensors[name].shape))
                    if data is None:
                        raise NNEFXError(f"constant '{name}' has a value that does not fill its shape "
                                         f"{list(graph.tensors[name].shape)}", op.location)
                if data is None:
                    raise NNEFXError(f"variable '{name}' has no data", op.location)
                self.consts[name] = self._tensor(contiguous(data))
            elif op.op != "external":
                built = _build(torch, graph, op)
                if isinstance(built, str):
                    raise NNEFXError(f"operation '{op.op}' has no torch form: {built}", op.location)
                self.steps.append((built, op))

    def _tensor(self, array: np.ndarray) -> Any:
        t = self.torch.from_numpy(np.array(array, copy=True)).to(self.device)
        return t.to(self.float) if t.is_floating_point() else t

    def __call__(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self.torch
        with torch.inference_mode(), _full_f32(torch, self.device.type == "cuda" and self.float == torch.float32):
            if self.device.type == "cuda" and self.replay is not False:
                results = self._replayed(feeds)
            else:
                results = self._compute({name: self._tensor(feeds[name]) for name in self.graph.inputs})
        out = {}
        for name, t in results.items():
            t = t.detach()
            if t.is_floating_point():
                t = t.to(torch.float32)
            out[name] = t.cpu().numpy()
        return out

    def _compute(self, inputs: dict[str, Any]) -> dict[str, Any]:
        env = dict(self.consts)
        env.update(inputs)
        for fn, op in self.steps:
            args = {k: _value(self.torch, env, v, self.device, self.float) for k, v in op.inputs.items()}
            try:
                results = fn(**args)
            except Exception as exc:  # noqa: BLE001 - torch's own types (an allocation it cannot make)
                failure = engine_failure("torch", exc)
                raise NNEFXError(f"operation '{op.op}': {failure.message}", op.location) from None
            outs = op.output_names()
            if not isinstance(results, (list, tuple)):
                results = (results,)
            for name, value in zip(outs, results, strict=True):
                env[name] = value
        return {name: env[name] for name in self.graph.outputs}

    def _replayed(self, feeds: dict[str, np.ndarray]) -> dict[str, Any]:
        """The run as a replayed CUDA graph: one launch for the whole network instead of one per
        torch operation, which on a GPU costs more than the small networks' arithmetic.  The
        graph is captured on the first run (after two warm-up runs, as CUDA graphs require) over
        input buffers the later runs copy into; a network whose forms cannot be captured (a
        host synchronisation, a data-dependent shape) runs eagerly from then on, with the reason
        kept in ``replay_refused``."""
        torch = self.torch
        if self.replay is None:
            static = {name: self._tensor(feeds[name]) for name in self.graph.inputs}
            try:
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    for _ in range(2):
                        self._compute(static)
                torch.cuda.current_stream().wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with warnings.catch_warnings():
                    # a graph of views only (reshape, transpose) captures no kernel: torch warns
                    warnings.filterwarnings("ignore", message="The CUDA Graph is empty")
                    with torch.cuda.graph(graph):
                        outputs = self._compute(static)
            except Exception as exc:  # noqa: BLE001 - any capture failure means: run eagerly
                torch.cuda.synchronize()
                self.replay, self.replay_refused = False, f"{type(exc).__name__}: {exc}"
                return self._compute(static)
            self.replay, self._static, self._outputs = graph, static, outputs
        for name in self.graph.inputs:
            self._static[name].copy_(torch.from_numpy(np.require(feeds[name], requirements=['C', 'W'])))
        self.replay.replay()
        return self._outputs


class _full_f32:
    """Full float32 products on a CUDA device while the model runs.

    cuDNN convolutions default to TensorFloat-32 on Ampere and later GPUs (10-bit mantissa
    products), which puts fp32 results some 1e-3 away from the definition: ``precision="f32"``
    means f32, so TF32 is switched off for the run and the process's settings are restored after.
    """

    def __init__(self, torch: Any, active: bool):
        self.torch, self.active, self.saved = torch, active, None

    def __enter__(self) -> None:
        if self.active:
            b = self.torch.backends
            self.saved = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)
            b.cuda.matmul.allow_tf32 = False
            b.cudnn.allow_tf32 = False

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            b = self.torch.backends
            b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = self.saved
            self.saved = None


def _is_compound(name: str) -> bool:
    from ..ops import registry

    entry = registry.find(name)
    return entry is not None and entry.compound


def _build(torch: Any, graph: Graph, op: Operation, depth: int = 0) -> Form | str:
    """The torch form of ``op``: from the table, else (a compound) through its NNEF definition."""
    builder = _FORMS.get(op.op)
    if builder is not None:
        return builder(torch, graph, op)
    if not _is_compound(op.op) or depth > 8:
        return "no torch form"
    return _through_definition(torch, graph, op, depth)


def _through_definition(torch: Any, graph: Graph, op: Operation, depth: int) -> Form | str:
    """A compound as the torch forms of the primitives its NNEF body expands to."""
    from ..engines.base import _isolate
    from ..semantics.frontend import compile_document
    from ..syntax.printer import print_graph

    sub = _isolate(graph, op)
    sub.operations = [o if o.op != "variable" else
                      Operation("external", outputs=o.outputs, attribs={"shape": list(sub.tensors[
                          o.output_names()[0]].shape or ())}, dtype=sub.tensors[o.output_names()[0]].dtype)
                      for o in sub.operations]
    sub.inputs = [o.output_names()[0] for o in sub.operations if o.op == "external"]
    try:
        expanded = compile_document(print_graph(sub), file=f"{op.op} definition", expand_all=True)
    except NNEFXError as exc:
        return f"its definition does not expand here ({exc.message})"
    steps: list[tuple[Form, Operation]] = []
    for inner in expanded.operations:
        if inner.op in ("external", "variable", "constant"):
            if inner.op != "external":
                return "its definition holds constants"
            continue
        built = _build(torch, expanded, inner, depth + 1)
        if isinstance(built, str):
            return f"its definition uses '{inner.op}': {built}"
        steps.append((built, inner))
    params = [(k, v) for k, v in op.inputs.items()]
    tensor_of = {}
    for (_, v), name in zip([(k, v) for k, v in params if isinstance(v, (str, list))], expanded.inputs,
                            strict=False):
        tensor_of[name] = v
    outs = op.output_names()
    results = [expanded.outputs[k] for k in range(len(outs))]

    def run(**args: Any) -> Any:
        env: dict[str, Any] = {}
        for local, value in zip(expanded.inputs, [a for k, a in args.items()
                                                  if isinstance(op.inputs[k], (str, list))], strict=False):
            env[local] = value
        device = next(iter(env.values())).device if env else None
        dtype = next((t.dtype for t in env.values() if t.is_floating_point()), torch.float32)
        for fn, inner in steps:
            inner_args = {k: _value(torch, env, v, device, dtype) for k, v in inner.inputs.items()}
            produced = fn(**inner_args)
            if not isinstance(produced, (list, tuple)):
                produced = (produced,)
            for name, value in zip(inner.output_names(), produced, strict=True):
                env[name] = value
        values = [env[r] for r in results]
        return values[0] if len(values) == 1 else tuple(values)
    return run


def _value(torch: Any, env: dict, v: Any, device: Any, dtype: Any) -> Any:
    if isinstance(v, str):
        return env[v]
    if isinstance(v, list):
        return [_value(torch, env, x, device, dtype) for x in v]
    return _literal(torch, v, device, dtype)


_LITERALS: dict[tuple, Any] = {}


def _literal(torch: Any, v: Any, device: Any, dtype: Any) -> Any:
    """A literal argument as a 0-d tensor on ``device``, made once: building it anew on every run
    would cost a host-to-device copy per literal per step, and a CUDA graph cannot capture one."""
    kind = bool if isinstance(v, bool) else int if isinstance(v, int) else float
    key = (kind, v, str(device), dtype if kind is float else None)
    t = _LITERALS.get(key)
    if t is None:
        if len(_LITERALS) > 4096:
            _LITERALS.clear()
        if kind is bool:
            t = torch.tensor(v, device=device)
        elif kind is int:
            t = torch.tensor(v, dtype=torch.int64, device=device)
        else:
            t = torch.tensor(float(v), dtype=dtype, device=device)
        _LITERALS[key] = t
    return t


# ---- the forms -------------------------------------------------------------------------------

def _nnef_pair(a: Any, b: Any) -> tuple[Any, Any]:
    """Operands with NNEF's alignment: the lower-rank one gets trailing singleton dimensions."""
    if a.dim() < b.dim() and a.dim() > 0:
        a = a.reshape(tuple(a.shape) + (1,) * (b.dim() - a.dim()))
    elif b.dim() < a.dim() and b.dim() > 0:
        b = b.reshape(tuple(b.shape) + (1,) * (a.dim() - b.dim()))
    return a, b


_UNARY = {"copy": lambda t, x: x.clone(), "neg": lambda t, x: -x, "abs": lambda t, x: t.abs(x),
          "exp": lambda t, x: t.exp(x), "log": lambda t, x: t.log(x), "sqrt": lambda t, x: t.sqrt(x),
          "rsqrt": lambda t, x: t.rsqrt(x), "sqr": lambda t, x: x * x, "rcp": lambda t, x: 1.0 / x,
          "sin": lambda t, x: t.sin(x), "cos": lambda t, x: t.cos(x), "tanh": lambda t, x: t.tanh(x),
          "sigmoid": lambda t, x: t.sigmoid(x), "relu": lambda t, x: t.relu(x), "not": lambda t, x: t.logical_not(x),
          "floor": lambda t, x: t.floor(x), "ceil": lambda t, x: t.ceil(x), "sign": lambda t, x: t.sign(x),
          "softplus": lambda t, x: t.log(t.exp(x) + 1.0), "silu": lambda t, x: x * t.sigmoid(x),
          "tan": lambda t, x: t.tan(x), "asin": lambda t, x: t.asin(x), "acos": lambda t, x: t.acos(x),
          "atan": lambda t, x: t.atan(x), "sinh": lambda t, x: t.sinh(x), "cosh": lambda t, x: t.cosh(x),
          "asinh": lambda t, x: t.asinh(x), "acosh": lambda t, x: t.acosh(x), "atanh": lambda t, x: t.atanh(x),
          "log2": lambda t, x: t.log2(x), "rsqr": lambda t, x: 1.0 / (x * x),
          "erf": lambda t, x: t.erf(x), "mish": lambda t, x: x * t.tanh(t.nn.functional.softplus(x))}


@form(*_UNARY)
def _unary(torch: Any, graph: Graph, op: Operation) -> Form:
    fn = _UNARY[op.op]
    return lambda **a: fn(torch, next(iter(a.values())))


_BINARY = {"add": lambda t, a, b: a + b, "sub": lambda t, a, b: a - b, "mul": lambda t, a, b: a * b,
           "div": lambda t, a, b: a / b, "pow": lambda t, a, b: t.pow(a, b), "min": lambda t, a, b: t.minimum(a, b),
           "max": lambda t, a, b: t.maximum(a, b), "lt": lambda t, a, b: a < b, "gt": lambda t, a, b: a > b,
           "le": lambda t, a, b: a <= b, "ge": lambda t, a, b: a >= b, "eq": lambda t, a, b: a == b,
           "ne": lambda t, a, b: a != b, "and": lambda t, a, b: t.logical_and(a, b),
           "or": lambda t, a, b: t.logical_or(a, b)}


@form(*_BINARY)
def _binary(torch: Any, graph: Graph, op: Operation) -> Form:
    fn = _BINARY[op.op]

    def run(x: Any, y: Any) -> Any:
        return fn(torch, *_nnef_pair(x, y))
    return run


@form("select")
def _select(torch: Any, graph: Graph, op: Operation) -> Form:
    def run(condition: Any, true_value: Any, false_value: Any) -> Any:
        c, a = _nnef_pair(condition, true_value)
        c, b = _nnef_pair(c, false_value)
        a, b = _nnef_pair(a, b)
        return torch.where(c, a, b)
    return run


@form("clamp")
def _clamp(torch: Any, graph: Graph, op: Operation) -> Form:
    def run(x: Any, a: Any, b: Any) -> Any:
        x, a = _nnef_pair(x, a)
        x, b = _nnef_pair(x, b)
        return torch.minimum(torch.maximum(x, a), b)
    return run


@form("leaky_relu", "elu")
def _alpha(torch: Any, graph: Graph, op: Operation) -> Form:
    alpha = float(op.attribs.get("alpha", 1.0))
    if op.op == "leaky_relu":
        return lambda x: torch.where(x < 0, alpha * x, x)
    return lambda x: torch.where(x < 0, alpha * (torch.exp(x) - 1.0), x)


@form("matmul")
def _matmul(torch: Any, graph: Graph, op: Operation) -> Form:
    ta, tb = bool(op.attribs.get("transposeA", False)), bool(op.attribs.get("transposeB", False))

    def run(A: Any, B: Any) -> Any:
        return torch.matmul(A.transpose(-1, -2) if ta else A, B.transpose(-1, -2) if tb else B)
    return run


@form("linear")
def _linear(torch: Any, graph: Graph, op: Operation) -> Form:
    def run(input: Any, filter: Any, bias: Any) -> Any:
        return torch.nn.functional.linear(input, filter) + (bias if bias.dim() else bias.reshape(1, 1))
    return run


def _geometry(op: Operation, graph: Graph, spatial_from: int) -> tuple | str:
    """Stride, dilation and (resolved) padding of a window operation's spatial dimensions."""
    from ..ops._common import resolve_padding_down

    x = graph.tensors[op.inputs["input"]].shape
    if op.op in ("conv",):
        f = graph.tensors[op.inputs["filter"]].shape if isinstance(op.inputs.get("filter"), str) else None
        if f is None:
            return "the filter's shape is unknown"
        size = list(f[2:])
    else:
        size = list(op.attribs["size"])
        if any(s != 1 for s in size[:spatial_from]):
            return "a window over the batch or channel dimension"
        size = size[spatial_from:]
    n = len(size)
    stride = list(op.attribs.get("stride") or [1] * (n + (0 if op.op == "conv" else spatial_from)))
    dilation = list(op.attribs.get("dilation") or [1] * (n + (0 if op.op == "conv" else spatial_from)))
    padding = op.attribs.get("padding") or None
    if op.op != "conv":
        if any(s != 1 for s in stride[:spatial_from]) or any(d != 1 for d in dilation[:spatial_from]):
            return "a stride or dilation over the batch or channel dimension"
        if padding is not None:
            if any(tuple(p) != (0, 0) for p in padding[:spatial_from]):
                return "padding of the batch or channel dimension"
            padding = padding[spatial_from:]
        stride, dilation = stride[spatial_from:], dilation[spatial_from:]
    pads = resolve_padding_down(list(x[2:]), size, stride, dilation, [tuple(p) for p in padding] if padding else None)
    return size, stride, dilation, pads


def _pad(torch: Any, x: Any, pads: list, value: float) -> Any:
    flat = []
    for p, q in reversed(pads):
        flat += [p, q]
    return torch.nn.functional.pad(x, flat, value=value) if any(flat) else x


@form("conv")
def _conv(torch: Any, graph: Graph, op: Operation) -> Form | str:
    border = op.attribs.get("border", "constant")
    if border not in ("constant", "ignore"):
        return f"border '{border}'"
    geo = _geometry(op, graph, 2)
    if isinstance(geo, str):
        return geo
    size, stride, dilation, pads = geo
    conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}.get(len(size))
    if conv is None:
        return f"{len(size)} spatial dimensions"
    groups = int(op.attribs.get("groups", 1))

    def run(input: Any, filter: Any, bias: Any) -> Any:
        out = conv(_pad(torch, input, pads, 0.0), filter, None, stride, 0, dilation,
                   groups if groups else input.shape[1])
        if bias.dim() == 0:
            return out + bias
        return out + bias.reshape(tuple(bias.shape) + (1,) * (out.dim() - bias.dim()))
    return run


@form("max_pool", "avg_pool", "box")
def _pool(torch: Any, graph: Graph, op: Operation) -> Form | str:
    border = op.attribs.get("border", "constant")
    geo = _geometry(op, graph, 2)
    if isinstance(geo, str):
        return geo
    size, stride, dilation, pads = geo
    if len(size) not in (1, 2, 3):
        return f"{len(size)} spatial dimensions"
    F = torch.nn.functional
    if op.op == "max_pool":
        if border not in ("ignore", "constant"):
            return f"border '{border}'"
        fill = float("-inf") if border == "ignore" else 0.0
        pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[len(size)]
        return lambda input: pool(_pad(torch, input, pads, fill), size, stride, 0, dilation)
    if any(d != 1 for d in dilation):
        return "dilated average windows"
    if border not in ("ignore", "constant"):
        return f"border '{border}'"
    avg = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[len(size)]
    volume = float(np.prod(size))
    normalize = op.op == "avg_pool" or bool(op.attribs.get("normalize", False))

    def run(input: Any) -> Any:
        padded = _pad(torch, input, pads, 0.0)
        mean = avg(padded, size, stride, 0)
        if border == "ignore" and any(p or q for p, q in pads) and normalize:
            ones = _pad(torch, torch.ones_like(input[:1, :1]), pads, 0.0)
            return mean / avg(ones, size, stride, 0)
        return mean if normalize else mean * volume
    return run


@form("reshape", "squeeze", "unsqueeze")
def _reshape(torch: Any, graph: Graph, op: Operation) -> Form | str:
    shape = graph.tensors[op.output_names()[0]].shape
    if shape is None or any(d is None for d in shape):
        return "the result shape is not known"
    return lambda **a: next(iter(a.values())).reshape(tuple(shape))


@form("transpose")
def _transpose(torch: Any, graph: Graph, op: Operation) -> Form:
    axes = list(op.attribs["axes"])

    def run(input: Any) -> Any:
        perm = axes + list(range(len(axes), input.dim()))
        return input.permute(perm)
    return run


@form("concat", "stack")
def _concat(torch: Any, graph: Graph, op: Operation) -> Form:
    axis = int(op.attribs["axis"])
    fn = torch.cat if op.op == "concat" else torch.stack
    return lambda values: fn(list(values), dim=axis)


@form("slice")
def _slice(torch: Any, graph: Graph, op: Operation) -> Form | str:
    from ..ops.shape import _slice_plan

    shape = graph.tensors[op.inputs["input"]].shape
    plan = _slice_plan(tuple(shape), op.attribs.get("axes", []), op.attribs.get("begin", []),
                       op.attribs.get("end", []), op.attribs.get("stride", []))
    if any(s < 0 for _, _, s, _ in plan):
        return "negative strides"

    def run(input: Any) -> Any:
        cut = [slice(None)] * input.dim()
        for a, b, s, count in plan:
            cut[a] = slice(b, b + count * s, s)
        return input[tuple(cut)]
    return run


_REDUCE = {"sum_reduce": "sum", "mean_reduce": "mean", "max_reduce": "amax", "min_reduce": "amin"}


@form(*_REDUCE)
def _reduce(torch: Any, graph: Graph, op: Operation) -> Form:
    axes = [int(a) for a in op.attribs.get("axes", [])]
    method = _REDUCE[op.op]
    if op.op == "sum_reduce" and op.attribs.get("normalize", False):
        method = "mean"

    identity = {"amax": float("-inf"), "amin": float("inf")}.get(method)

    def run(input: Any) -> Any:
        if not axes:
            return input.clone()
        if identity is not None and any(input.shape[a] == 0 for a in axes):
            # the empty set's maximum (minimum): torch.amax refuses an empty dimension
            shape = [1 if k in axes else d for k, d in enumerate(input.shape)]
            return torch.full(shape, identity, dtype=input.dtype, device=input.device)
        return getattr(torch, method)(input, dim=axes, keepdim=True)
    return run


@form("softmax")
def _softmax(torch: Any, graph: Graph, op: Operation) -> Form:
    axes = [int(a) for a in op.attribs.get("axes", [1])]

    def run(x: Any) -> Any:
        if len(axes) == 1:
            return torch.softmax(x, dim=axes[0])
        e = torch.exp(x - torch.amax(x, dim=axes, keepdim=True))
        return e / torch.sum(e, dim=axes, keepdim=True)
    return run


@form("batch_normalization")
def _batch_norm(torch: Any, graph: Graph, op: Operation) -> Form:
    eps = float(op.attribs.get("epsilon", 0.0))

    def run(input: Any, mean: Any, variance: Any, offset: Any, scale: Any) -> Any:
        x, m = _nnef_pair(input, mean)
        _, v = _nnef_pair(input, variance)
        _, o = _nnef_pair(input, offset)
        _, s = _nnef_pair(input, scale)
        return (x - m) / torch.sqrt(v + eps) * s + o
    return run


@form("pad")
def _pad_form(torch: Any, graph: Graph, op: Operation) -> Form | str:
    border = op.attribs.get("border", "constant")
    if border != "constant":
        return f"border '{border}'"
    pads = [tuple(p) for p in op.attribs["padding"]]
    value = float(op.attribs.get("value", 0.0))
    return lambda input: _pad(torch, input, pads, value)


@form("prelu")
def _prelu(torch: Any, graph: Graph, op: Operation) -> Form:
    def run(x: Any, alpha: Any) -> Any:
        x, a = _nnef_pair(x, alpha)
        return torch.where(x < 0, a * x, x)
    return run


@form("add_n")
def _add_n(torch: Any, graph: Graph, op: Operation) -> Form:
    def run(x: Any) -> Any:
        total = x[0]
        for item in x[1:]:
            total = total + item
        return total
    return run


@form("split")
def _split(torch: Any, graph: Graph, op: Operation) -> Form:
    axis = int(op.attribs["axis"])
    sizes = [graph.tensors[n].shape[axis] for n in op.output_names()]
    return lambda value: list(torch.split(value, sizes, dim=axis))


@form("unstack")
def _unstack(torch: Any, graph: Graph, op: Operation) -> Form:
    axis = int(op.attribs["axis"])
    return lambda value: list(torch.unbind(value, dim=axis))


@form("tile")
def _tile(torch: Any, graph: Graph, op: Operation) -> Form:
    repeats = [int(r) for r in op.attribs["repeats"]]
    return lambda input: input.repeat(*repeats)


@form("round")
def _round(torch: Any, graph: Graph, op: Operation) -> Form:
    # NNEF round is floor(x + 0.5) (ties toward +infinity); computed in float64 so that x + 0.5
    # does not round first (0.49999997f + 0.5 would be 1 in float32).
    return lambda x: torch.floor(x.to(torch.float64) + 0.5).to(x.dtype)


@form("all_reduce", "any_reduce")
def _logical_reduce(torch: Any, graph: Graph, op: Operation) -> Form:
    axes = [int(a) for a in op.attribs.get("axes", [])]
    fn = torch.all if op.op == "all_reduce" else torch.any

    def run(input: Any) -> Any:
        out = input
        for a in sorted(axes, reverse=True):
            out = fn(out, dim=a, keepdim=True)
        return out
    return run


@form("argmax_reduce", "argmin_reduce")
def _arg_reduce(torch: Any, graph: Graph, op: Operation) -> Form | str:
    axes = [int(a) for a in op.attribs.get("axes", [])]
    if len(axes) != 1:
        return "an index over several axes"
    shape = graph.tensors[op.inputs["input"]].shape if isinstance(op.inputs["input"], str) else None
    if shape is not None and shape[axes[0]] == 0:
        return "an index over an empty axis"
    fn = torch.argmax if op.op == "argmax_reduce" else torch.argmin
    return lambda input: fn(input, dim=axes[0], keepdim=True)


@form("cast")
def _cast(torch: Any, graph: Graph, op: Operation) -> Form:
    target = graph.tensors[op.output_names()[0]].dtype

    def run(input: Any) -> Any:
        if target == "logical":
            return input != 0
        if target == "integer":  # NNEF casts a real to the integer below it (floor), not toward 0
            return torch.floor(input.to(torch.float64)).to(torch.int64) if input.is_floating_point() \
                else input.to(torch.int64)
        return input.to(torch.float32) if not input.is_floating_point() else input
    return run


@form("gather")
def _gather(torch: Any, graph: Graph, op: Operation) -> Form:
    axis = int(op.attribs.get("axis", 0))

    def run(input: Any, indices: Any) -> Any:
        flat = torch.index_select(input, axis, indices.reshape(-1))
        shape = tuple(input.shape[:axis]) + tuple(indices.shape) + tuple(input.shape[axis + 1:])
        return flat.reshape(shape)
    return run
