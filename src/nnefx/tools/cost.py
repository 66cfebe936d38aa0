"""Compute cost of a float model: parameters, MACs and FLOPs per operation and in total.

The counting rules are the customary ones of model summaries (``nnef_tools``' gmac,
fvcore, thop, ``torch.utils.flop_counter``), written once here and in the README's
"Model summary" section:

* **MACs** (multiply-accumulates) are counted for the operations that are products:
  ``conv`` = output items × (input channels per group × kernel items); ``deconv`` = input
  items × (output channels per group × kernel items); ``separable_conv`` = its depthwise
  and pointwise parts; ``linear`` = output items × input features; ``matmul`` = output
  items × the contracted extent.  Bias additions are not MACs.
* **FLOPs** are 2 per MAC, plus one per output item for a bias that is a tensor (or a
  non-zero literal), plus, for the other operations: 1 per output item for element-wise
  operations (arithmetic, comparisons, activations, whatever the function), ``add_n``
  n−1 per item, reductions 1 per input item (``moments`` 2), pooling and box filters 1 per
  output item per window item (``debox`` per input item), ``softmax`` 3 per item (exp,
  sum, divide), ``batch_normalization`` 2 per item (scale and shift), L1/L2 normalization
  3 per item, local normalizations 2 per window item per output item,
  ``multilinear_upsample`` 2 per MAC of its interpolation kernel (as gmac counts it),
  ``area_downsample`` 1 per input item, quantizers 4 per item (clamp, scale, round,
  rescale), recurrent sequences (``lstm_sequence``, ``_gru_``, ``_rnn_``) 2 per MAC of
  their gate products (batch × steps × directions × gates × hidden × (features + hidden)
  MACs) + 2 per gate item (bias, activation) + 3 per hidden item (state update), data movement (reshape, transpose, concat, slice, pad, gather, nearest
  re-sampling, ...) 0.
* **Parameters** are the items of the ``variable`` tensors an operation reads (a shared
  variable counts in every operation that reads it, and once in the model total).

The integer ``cvm_*`` operations follow the same rules (``cvm_conv2d`` as ``conv``,
``cvm_dense`` as ``linear``; their "FLOPs" are integer operations), and so do ONNX's integer
products (``onnx_conv_integer``/``onnx_qlinear_conv`` as ``conv``, ``onnx_matmul_integer``/
``onnx_qlinear_matmul`` as ``matmul``; the QLinear ones add a quantizer's 4 per output item).  An operation without a
rule here (region-of-interest and detection operations, table look-ups, the rest of ``ir_*``) or whose shapes are not all known shows its cost as unknown; totals
then say how many operations they leave out.  Nothing here raises on a model: a summary is
never aborted by its cost column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import prod
from typing import Any

from ..graph import Graph, Operation

#: Operations that introduce tensors rather than compute them: not rows of the table.
INTRODUCTIONS = frozenset({"external", "variable", "constant", "update"})


@dataclass
class OpCost:
    """One operation's row: ``macs``/``flops`` are None when unknown (``note`` says why)."""

    op: Operation
    params: int
    macs: int | None
    flops: int | None
    note: str = ""


@dataclass
class GraphCost:
    """Every computing operation's :class:`OpCost` plus model totals."""

    rows: list[OpCost] = field(default_factory=list)
    params: int = 0
    macs: int = 0
    flops: int = 0
    unknown: int = 0

    def by_kind(self) -> dict[str, tuple[int, int | None, int | None]]:
        """``op name → (count, MACs, FLOPs)``; a sum is None when any of its rows is unknown."""
        kinds: dict[str, list[Any]] = {}
        for row in self.rows:
            entry = kinds.setdefault(row.op.op, [0, 0, 0])
            entry[0] += 1
            entry[1] = None if entry[1] is None or row.macs is None else entry[1] + row.macs
            entry[2] = None if entry[2] is None or row.flops is None else entry[2] + row.flops
        return {k: (v[0], v[1], v[2]) for k, v in kinds.items()}


class _Unknown(Exception):
    """A rule met a shape it cannot count (unknown dimension, missing tensor)."""


class _View:
    """What a rule sees of one operation: tensor shapes by position and attributes."""

    def __init__(self, graph: Graph, op: Operation):
        self.graph = graph
        self.op = op
        self.attribs = op.attribs
        self.in_values = list(op.inputs.values())
        self.out_names = op.output_names()

    def _shape(self, name: Any) -> tuple[int, ...]:
        if not isinstance(name, str):
            return ()  # a literal: a scalar
        t = self.graph.tensors.get(name)
        if t is None or t.shape is None or any(not isinstance(d, int) for d in t.shape):  # None or symbolic
            raise _Unknown(f"shape of '{name}' unknown")
        return tuple(int(d) for d in t.shape)

    def in_shape(self, k: int = 0) -> tuple[int, ...]:
        if k >= len(self.in_values) or isinstance(self.in_values[k], (list, tuple)):
            raise _Unknown("no such input")
        return self._shape(self.in_values[k])

    def out_shape(self, k: int = 0) -> tuple[int, ...]:
        if k >= len(self.out_names):
            raise _Unknown("no such output")
        return self._shape(self.out_names[k])

    def in_items(self, k: int = 0) -> int:
        return prod(self.in_shape(k))

    def out_items(self, k: int = 0) -> int:
        return prod(self.out_shape(k))

    def has_bias(self, k: int) -> bool:
        if k >= len(self.in_values):
            return False
        value = self.in_values[k]
        return isinstance(value, str) or (isinstance(value, (int, float)) and value != 0)


#: A rule: view → (MACs, FLOPs).
Rule = Callable[[_View], tuple[int, int]]
_RULES: dict[str, Rule] = {}


def _rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for name in names:
            _RULES[name] = fn
        return fn
    return register


def _per_item(flops_per_item: int, *names: str) -> None:
    """Operations costing a fixed number of FLOPs per output item (data movement: none,
    whatever the shapes)."""
    _rule(*names)(lambda v: (0, flops_per_item * v.out_items()) if flops_per_item else (0, 0))


@_rule("conv")
def _conv(v: _View) -> tuple[int, int]:
    macs = v.out_items() * prod(v.in_shape(1)[1:])
    return macs, 2 * macs + (v.out_items() if v.has_bias(2) else 0)


@_rule("deconv")
def _deconv(v: _View) -> tuple[int, int]:
    macs = v.in_items() * prod(v.in_shape(1)[1:])
    return macs, 2 * macs + (v.out_items() if v.has_bias(2) else 0)


@_rule("separable_conv", "separable_deconv")
def _separable(v: _View) -> tuple[int, int]:
    x, plane, point, out = v.in_shape(0), v.in_shape(1), v.in_shape(2), v.out_shape()
    kernel = prod(plane[2:])
    if v.op.op == "separable_conv":
        # depthwise part produces point[1] channels at the output's spatial extent
        depthwise = prod(out) // out[1] * point[1] * kernel
        pointwise = prod(out) * point[1]
    else:
        # pointwise part first, at the input's extent, then the depthwise transposed part
        pointwise = prod(x) // x[1] * point[0] * point[1]
        depthwise = prod(x) // x[1] * point[1] * kernel
    macs = depthwise + pointwise
    return macs, 2 * macs + (prod(out) if v.has_bias(3) else 0)


@_rule("linear")
def _linear(v: _View) -> tuple[int, int]:
    macs = v.out_items() * v.in_shape(1)[-1]
    return macs, 2 * macs + (v.out_items() if v.has_bias(2) else 0)


@_rule("matmul")
def _matmul(v: _View) -> tuple[int, int]:
    a = v.in_shape(0)
    if len(a) < 2:
        raise _Unknown("matmul of rank < 2")
    k = a[-2] if v.attribs.get("transposeA") else a[-1]
    macs = v.out_items() * k
    return macs, 2 * macs


@_rule("max_pool", "avg_pool", "rms_pool", "box", "argmax_pool", "max_pool_with_index")
def _pool(v: _View) -> tuple[int, int]:
    return 0, v.out_items() * prod(v.attribs.get("size") or [1])


@_rule("debox")
def _debox(v: _View) -> tuple[int, int]:
    return 0, v.in_items() * prod(v.attribs.get("size") or [1])


@_rule("sum_reduce", "mean_reduce", "max_reduce", "min_reduce", "any_reduce", "all_reduce",
       "argmax_reduce", "argmin_reduce", "prod_reduce", "area_downsample", "cumulative_sum")
def _reduce(v: _View) -> tuple[int, int]:
    return 0, v.in_items()


@_rule("moments")
def _moments(v: _View) -> tuple[int, int]:
    return 0, 2 * v.in_items()


@_rule("add_n")
def _add_n(v: _View) -> tuple[int, int]:
    terms = v.in_values[0] if v.in_values and isinstance(v.in_values[0], (list, tuple)) else []
    return 0, max(len(terms) - 1, 0) * v.out_items()


@_rule("local_response_normalization", "local_mean_normalization", "local_variance_normalization",
       "local_contrast_normalization")
def _local_norm(v: _View) -> tuple[int, int]:
    return 0, 2 * v.out_items() * prod(v.attribs.get("size") or [1])


@_rule("multilinear_upsample")
def _upsample(v: _View) -> tuple[int, int]:
    factor = list(v.attribs.get("factor") or [1])
    method = v.attribs.get("method", "symmetric")
    kernel = [2 * f for f in factor] if method == "symmetric" else \
        [2 * f - 1 for f in factor] if method == "asymmetric" else factor
    return 0, 2 * v.in_items() * prod(kernel)


@_rule("lstm_sequence", "gru_sequence", "rnn_sequence")
def _recurrent(v: _View) -> tuple[int, int]:
    # input [batch, steps, features], W [directions, gates x hidden, features], R [.., .., hidden];
    # every step of the sequence extent counts (an upper bound under sequence_lengths)
    x, w, r = v.in_shape(0), v.in_shape(4 if v.op.op == "lstm_sequence" else 3), \
        v.in_shape(5 if v.op.op == "lstm_sequence" else 4)
    gate_items = x[0] * x[1] * w[0] * w[1]
    hidden_items = gate_items // {"lstm_sequence": 4, "gru_sequence": 3}.get(v.op.op, 1)
    macs = gate_items * (x[2] + r[2])
    return macs, 2 * macs + 2 * gate_items + 3 * hidden_items


@_rule("cvm_conv2d")
def _cvm_conv(v: _View) -> tuple[int, int]:
    macs = v.out_items() * prod(v.in_shape(1)[1:])
    return macs, 2 * macs + (v.out_items() if v.attribs.get("use_bias", True) and v.has_bias(2) else 0)


@_rule("onnx_conv_integer", "onnx_qlinear_conv")
def _integer_conv(v: _View) -> tuple[int, int]:
    qlinear = v.op.op == "onnx_qlinear_conv"
    macs = v.out_items() * prod(v.in_shape(3 if qlinear else 1)[1:])
    return macs, 2 * macs + ((4 + v.has_bias(8)) * v.out_items() if qlinear else 0)


@_rule("onnx_matmul_integer", "onnx_qlinear_matmul")
def _integer_matmul(v: _View) -> tuple[int, int]:
    macs = v.out_items() * v.in_shape(0)[-1]
    return macs, 2 * macs + (4 * v.out_items() if v.op.op == "onnx_qlinear_matmul" else 0)


@_rule("cvm_dense")
def _cvm_dense(v: _View) -> tuple[int, int]:
    macs = v.out_items() * v.in_shape(1)[-1]
    return macs, 2 * macs + (v.out_items() if v.attribs.get("use_bias", True) and v.has_bias(2) else 0)


@_rule("cvm_max_pool2d")
def _cvm_pool(v: _View) -> tuple[int, int]:
    return 0, v.out_items() * prod(v.attribs.get("pool_size") or [1])


@_rule("cvm_sum", "cvm_max")
def _cvm_reduce(v: _View) -> tuple[int, int]:
    return 0, v.in_items()


_per_item(1, *"""copy neg rcp exp log log2 sin cos tan asin acos atan sinh cosh tanh asinh acosh atanh abs
    sign not floor ceil round sqr sqrt rsqr rsqrt add sub mul div pow lt gt le ge eq ne and or min max
    select clamp sigmoid relu leaky_relu prelu elu selu gelu silu softplus softabs
    integer_arith integer_compare erf round_with_mode
    cvm_abs cvm_negative cvm_relu cvm_clip cvm_cvm_clip cvm_cvm_left_shift cvm_cvm_right_shift cvm_elemwise_add
    cvm_elemwise_sub cvm_broadcast_add cvm_broadcast_sub cvm_broadcast_mul cvm_broadcast_div cvm_broadcast_max
    cvm_broadcast_greater cvm_where""".split())
_per_item(2, "batch_normalization")
_per_item(3, "softmax", "l1_normalization", "l2_normalization")
_per_item(4, "linear_quantize", "logarithmic_quantize", "min_max_linear_quantize",
          "zero_point_linear_quantize", "ir_fake_quantize")
_per_item(0, *"""reshape squeeze unsqueeze transpose concat split stack unstack slice pad tile copy_n gather
    cast nearest_upsample nearest_downsample sample desample
    reshape_to broadcast_to tensor_shape convert_element_type gather_axis gather_elements gather_nd
    ir_strided_slice arange one_hot ir_reverse_sequence
    cvm_concatenate cvm_expand_dims cvm_flatten cvm_repeat cvm_reshape cvm_slice_like cvm_squeeze cvm_strided_slice
    cvm_take cvm_tile cvm_transpose cvm_upsampling""".split())


def has_rule(op_name: str) -> bool:
    return op_name in _RULES


def operation_cost(graph: Graph, op: Operation, variables: set[str] | None = None) -> OpCost:
    """One operation's parameters, MACs and FLOPs (None where no rule applies)."""
    if variables is None:
        variables = _variable_names(graph)
    params = sum(_items(graph, n) for n in dict.fromkeys(op.input_names()) if n in variables)
    rule = _RULES.get(op.op)
    if rule is None:
        return OpCost(op, params, None, None, "no counting rule")
    try:
        macs, flops = rule(_View(graph, op))
    except _Unknown as exc:
        return OpCost(op, params, None, None, str(exc))
    return OpCost(op, params, int(macs), int(flops))


def graph_cost(graph: Graph) -> GraphCost:
    """The table of every computing operation, with model totals."""
    variables = _variable_names(graph)
    result = GraphCost()
    result.params = sum(_items(graph, n) for n in variables)
    for op in graph.operations:
        if op.op in INTRODUCTIONS:
            continue
        row = operation_cost(graph, op, variables)
        result.rows.append(row)
        if row.macs is None or row.flops is None:
            result.unknown += 1
        else:
            result.macs += row.macs
            result.flops += row.flops
    return result


def _variable_names(graph: Graph) -> set[str]:
    return {t.name for _, t in graph.variables()}


def _items(graph: Graph, name: str) -> int:
    t = graph.tensors.get(name)
    if t is None or t.shape is None or any(not isinstance(d, int) for d in t.shape):  # None or symbolic
        return 0
    return prod(int(d) for d in t.shape)


def human(n: int | None) -> str:
    """``1234567`` → ``1.23M``: counts as people read them (``?`` when unknown)."""
    if n is None:
        return "?"
    for scale, suffix in ((10**12, "T"), (10**9, "G"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.3g}{suffix}"
    return str(n)


def _shape_text(graph: Graph, names: list[str]) -> str:
    parts = []
    for name in names:
        t = graph.tensors.get(name)
        shape = None if t is None else t.shape
        parts.append("?" if shape is None else "[" + ",".join("?" if d is None else str(d) for d in shape) + "]")
    return " ".join(parts)


def operations_table(graph: Graph, cost: GraphCost | None = None) -> str:
    """One line per computing operation: output, operation, output shape, params, MACs, FLOPs."""
    cost = cost if cost is not None else graph_cost(graph)
    header = ("output", "operation", "shape", "params", "MACs", "FLOPs")
    rows = [header]
    for row in cost.rows:
        outs = row.op.output_names()
        rows.append((outs[0] if outs else "-", row.op.op, _shape_text(graph, outs[:1]),
                     str(row.params), "?" if row.macs is None else str(row.macs),
                     "?" if row.flops is None else str(row.flops)))
    widths = [min(max(len(r[i]) for r in rows), 40) for i in range(len(header))]
    numeric = {3, 4, 5}
    lines = []
    for r in rows:
        cells = [c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def totals_line(cost: GraphCost) -> str:
    """``params 1.2K, MACs 3.4M, FLOPs 6.9M`` with how many operations the sums leave out."""
    text = f"params {human(cost.params)} ({cost.params}), MACs {human(cost.macs)} ({cost.macs}), " \
           f"FLOPs {human(cost.flops)} ({cost.flops})"
    if cost.unknown:
        text += f"; {cost.unknown} operation{'s' if cost.unknown > 1 else ''} without a known cost left out"
    return text
