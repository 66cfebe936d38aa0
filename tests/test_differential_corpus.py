"""Differential suite: nnefx's NNEF front-end against the official ``nnef`` package.

Corpus: every document in ``tests/fixtures/differential/`` (hand-written networks, one file
per operation family, syntax/semantic/shape errors) plus families of generated documents
below (element-wise ops over broadcasting pairs, conv/pool geometry sweeps, shape-op
arguments).  For every document the official package (``nnef.parse_string`` +
``nnef.infer_shapes``, run *now*, nothing recorded) gives a verdict and, when it accepts,
the shape of every tensor the document names; nnefx (``compile_document``, which checks and
infers shapes) must give the same verdict and the same shapes.

Where the two disagree and the specification sides with nnefx, the case is listed in
:data:`EXPECTED_DIFFERENCES` with the reason; such a case asserts the documented
disagreement (so it fails if either side changes), it is never skipped.

Counting conventions: the official package crashes with a ``TypeError``/``IndexError``
inside its own shape pass for a few invalid documents (a bug in its error formatting for
tensor-array results); we count that as a rejection.  Documents that define fragments are
parsed by the official package with those fragments lowered (it has no shape rule for
them otherwise), and compared on the tensors the document itself names.
"""

from __future__ import annotations

import pathlib
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

nnef = pytest.importorskip("nnef")
frontend = pytest.importorskip("nnefx.semantics.frontend")

from nnefx.diagnostics import NNEFXError  # noqa: E402

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "differential"


HEADER = "version 1.0;\n"

UNARY = ["copy", "neg", "rcp", "exp", "log", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin", "acos",
         "atan", "asinh", "acosh", "atanh", "abs", "sign", "floor", "ceil", "round", "sqr", "sqrt", "rsqr",
         "rsqrt", "log2", "sigmoid", "relu", "elu", "selu", "gelu", "silu", "softplus", "leaky_relu"]
BINARY = ["add", "sub", "mul", "div", "pow", "min", "max", "lt", "gt", "le", "ge", "eq", "ne"]
PAIRS = [([2, 3], [2, 3]), ([2, 3], [1, 3]), ([2, 3], [2]), ([2, 3], [3]), ([1, 3, 4], [1, 3]),
         ([2, 3], [4, 3]), ([4, 1, 5], [1, 6, 5]), ([2, 3], [])]

def _graph(params: list[str], results: list[str], body: list[str]) -> str:
    lines = "\n".join("    " + b + ";" for b in body)
    return f"{HEADER}graph G( {', '.join(params)} ) -> ( {', '.join(results)} )\n{{\n{lines}\n}}\n"

def _ext(name: str, shape: list[int], dtype: str = "") -> str:
    return f"{name} = external{('<' + dtype + '>') if dtype else ''}(shape = {shape})"

def unary_cases() -> Iterator[tuple[str, str]]:
    for op in UNARY:
        extra = ", alpha = 0.25" if op == "leaky_relu" else ""
        yield f"unary_{op}", _graph(["x"], ["y"], [_ext("x", [2, 3, 4]), f"y = {op}(x{extra})"])
    yield "unary_not", _graph(["x"], ["y"], [_ext("x", [5], "logical"), "y = not(x)"])

def binary_cases() -> Iterator[tuple[str, str]]:
    for op in BINARY:
        for i, (a, b) in enumerate(PAIRS):
            yield f"binary_{op}_{i}", _graph(["a", "b"], ["c"], [_ext("a", a), _ext("b", b), f"c = {op}(a, b)"])
    for op in ("and", "or"):
        for i, (a, b) in enumerate(PAIRS[:4]):
            yield f"binary_{op}_{i}", _graph(["a", "b"], ["c"], [_ext("a", a, "logical"), _ext("b", b, "logical"),
                                                                 f"c = {op}(a, b)"])

def conv_cases(count: int = 30) -> Iterator[tuple[str, str]]:
    rng = random.Random(1234)
    for i in range(count):
        spatial = rng.choice([1, 2, 2, 2, 3])
        groups = rng.choice([1, 1, 2, 0])
        cin = rng.choice([2, 4, 6])
        cout = rng.choice([2, 4, 5, 8])
        size = [rng.randint(5, 12) for _ in range(spatial)]
        kernel = [rng.choice([1, 2, 3, 5]) for _ in range(spatial)]
        fch = cin if groups == 0 else cin // groups if groups else cin
        if groups == 0:
            fch, cout = 1, cin
        if rng.random() < 0.2:
            fch += 1  # channel mismatch
        attrs = []
        if rng.random() < 0.6:
            attrs.append(f"stride = {[rng.choice([1, 2, 3]) for _ in range(spatial)]}")
        if rng.random() < 0.4:
            attrs.append(f"dilation = {[rng.choice([1, 2]) for _ in range(spatial)]}")
        if rng.random() < 0.5:
            pads = [(rng.randint(0, 2), rng.randint(0, 2)) for _ in range(spatial)]
            attrs.append("padding = [" + ", ".join(f"({p}, {q})" for p, q in pads) + "]")
        if groups != 1:
            attrs.append(f"groups = {groups}")
        if rng.random() < 0.1:
            attrs.append("stride = [1]") if spatial != 1 else attrs.append("stride = [1, 1]")
        op = rng.choice(["conv", "conv", "deconv"])
        wshape = [cout, fch] + kernel if op == "conv" else [cin, max(fch, 1)] + kernel
        bias = "0.0" if rng.random() < 0.5 else "b"
        body = [_ext("x", [1, cin] + size), f"w = variable(shape = {wshape}, label = 'w')"]
        if bias == "b":
            bch = cout if op == "conv" else max(fch, 1) * (groups or cin)
            body.append(f"b = variable(shape = [1, {bch}], label = 'b')")
        body.append(f"y = {op}(x, w, {bias}{''.join(', ' + a for a in attrs)})")
        yield f"conv_{i}", _graph(["x"], ["y"], body)

def pool_cases(count: int = 24) -> Iterator[tuple[str, str]]:
    rng = random.Random(99)
    ops = ["max_pool", "avg_pool", "rms_pool", "box", "argmax_pool", "debox"]
    for i in range(count):
        op = ops[i % len(ops)]
        size = [1, 1, rng.choice([1, 2, 3]), rng.choice([1, 2, 3])]
        shape = [1, 3, rng.randint(4, 11), rng.randint(4, 11)]
        attrs = [f"size = {size if rng.random() > 0.1 else size[2:]}"]
        if rng.random() < 0.7:
            attrs.append(f"stride = {[1, 1, rng.choice([1, 2]), rng.choice([1, 2, 3])]}")
        if rng.random() < 0.5:
            attrs.append("padding = [(0, 0), (0, 0), " + f"({rng.randint(0, 1)}, {rng.randint(0, 1)}), "
                         f"({rng.randint(0, 1)}, {rng.randint(0, 1)})]")
        if rng.random() < 0.5 and op != "argmax_pool":
            attrs.append(f"border = '{rng.choice(['ignore', 'constant', 'replicate'])}'")
        yield f"pool_{op}_{i}", _graph(["x"], ["y"], [_ext("x", shape), f"y = {op}(x, {', '.join(attrs)})"])

def shape_op_cases() -> Iterator[tuple[str, str]]:
    base = [2, 3, 4, 5]
    reshapes = [[6, 20], [0, -1], [-1], [2, 3, 20], [5, 24], [7, -1], [0, 0, 0, 0, 1], [-1, -1], [2, 3, 4, 6]]
    for i, s in enumerate(reshapes):
        yield f"reshape_{i}", _graph(["x"], ["y"], [_ext("x", base), f"y = reshape(x, shape = {s})"])
    for i, (s, start, count) in enumerate([([12], 1, 2), ([3, 4], 1, 1), ([60], 1, -1), ([2, 2], 0, 1),
                                           ([6], 3, 2), ([1], 4, 0)]):
        yield f"reshape_range_{i}", _graph(["x"], ["y"], [
            _ext("x", base), f"y = reshape(x, shape = {s}, axis_start = {start}, axis_count = {count})"])
    for i, axes in enumerate([[0, 1, 2, 3], [3, 2, 1, 0], [1, 0], [0, 2, 1], [0, 0, 1, 2], [4, 0, 1, 2, 3]]):
        yield f"transpose_{i}", _graph(["x"], ["y"], [_ext("x", base), f"y = transpose(x, axes = {axes})"])
    slices = [([1], [1], [3]), ([3], [0], [5]), ([0, 3], [0, 1], [1, -1]), ([2], [-3], [0]), ([1], [2], [1]),
              ([3], [6], [7]), ([1], [0], [3], [2]), ([2], [3], [0], [-1]), ([3], [4], [-6], [-2])]
    for i, s in enumerate(slices):
        stride = f", stride = {s[3]}" if len(s) > 3 else ""
        yield f"slice_{i}", _graph(["x"], ["y"], [
            _ext("x", base), f"y = slice(x, axes = {s[0]}, begin = {s[1]}, end = {s[2]}{stride})"])
    for i, axes in enumerate([[0], [1, 2], [0, 1, 2, 3], [3], [4], []]):
        for op in ("sum_reduce", "max_reduce", "mean_reduce", "argmax_reduce"):
            yield f"reduce_{op}_{i}", _graph(["x"], ["y"], [_ext("x", base), f"y = {op}(x, axes = {axes})"])
    for i, axes in enumerate([[1], [0, 2], [5], [1, 1]]):
        yield f"squeeze_{i}", _graph(["x"], ["y"], [_ext("x", [2, 1, 1, 3]), f"y = squeeze(x, axes = {axes})"])
        yield f"unsqueeze_{i}", _graph(["x"], ["y"], [_ext("x", [2, 3]), f"y = unsqueeze(x, axes = {axes})"])
    for i, (shapes, axis) in enumerate([([[2, 3], [2, 5]], 1), ([[2, 3], [4, 3]], 0), ([[2, 3], [2, 3], [2, 3]], 1),
                                        ([[2, 3], [3, 3]], 1), ([[2, 3]], 0)]):
        names = [f"a{j}" for j in range(len(shapes))]
        body = [_ext(n, s) for n, s in zip(names, shapes, strict=True)] + [f"y = concat([{', '.join(names)}], axis = {axis})"]
        yield f"concat_{i}", _graph(names, ["y"], body)
    for i, (shape, axis, ratios) in enumerate([([4, 6], 1, [1, 2]), ([4, 6], 0, [1, 1]), ([4, 6], 1, [2, 2, 2]),
                                               ([4, 6], 2, [1])]):
        outs = [f"o{j}" for j in range(len(ratios))]
        yield f"split_{i}", _graph(["x"], outs, [
            _ext("x", shape), f"[{', '.join(outs)}] = split(x, axis = {axis}, ratios = {ratios})"])
    for i, (a, b, ta, tb) in enumerate([([3, 4], [4, 5], "false", "false"), ([4, 3], [4, 5], "true", "false"),
                                        ([3, 4], [5, 4], "false", "true"), ([2, 3, 4], [2, 4, 6], "false", "false"),
                                        ([3, 4], [3, 5], "false", "false"), ([1, 3, 4], [2, 4, 5], "false", "false")]):
        yield f"matmul_{i}", _graph(["a", "b"], ["c"], [
            _ext("a", a), _ext("b", b), f"c = matmul(a, b, transposeA = {ta}, transposeB = {tb})"])
    for i, pad in enumerate(["[(1, 1), (2, 0)]", "[(0, 0)]", "[(1, 2), (0, 0), (3, 3)]"]):
        yield f"pad_{i}", _graph(["x"], ["y"], [_ext("x", [3, 4]), f"y = pad(x, padding = {pad})"])
    for i, rep in enumerate([[2, 3], [1], [1, 1, 2]]):
        yield f"tile_{i}", _graph(["x"], ["y"], [_ext("x", [3, 4]), f"y = tile(x, repeats = {rep})"])
    for i, factor in enumerate([[2, 2], [3, 1], [2]]):
        for op in ("nearest_upsample", "nearest_downsample", "area_downsample", "multilinear_upsample"):
            yield f"resample_{op}_{i}", _graph(["x"], ["y"], [
                _ext("x", [1, 2, 6, 6]), f"y = {op}(x, factor = {factor})"])



def generated_cases() -> list[tuple[str, str]]:
    cases: list[tuple[str, str]] = []
    for gen in (unary_cases, binary_cases, conv_cases, pool_cases, shape_op_cases):
        cases.extend(gen())
    return cases


def file_cases() -> list[tuple[str, str]]:
    return [(p.stem, p.read_text()) for p in sorted(FIXTURES.glob("*.nnef"))]


ALL_CASES = file_cases() + generated_cases()

#: Documents where nnefx deliberately disagrees with the official package, with the reason.
#: ``case id -> (official verdict, nnefx verdict, reason)``.
EXPECTED_DIFFERENCES: dict[str, tuple[str, str, str]] = {
    "shape_external_negative_extent": (
        "accept", "reject", "spec 4.1: every item of an external's shape must be > 0; the official parser "
        "does not check and even propagates [-2, 3]"),
    "shape_constant_value_count": (
        "accept", "reject", "spec 4.1: a constant's value must have 1 item or volume(shape) items (3 for "
        "shape [2, 2] is neither); the official parser does not check"),
    "op_sample": (
        "accept", "reject", "spec 4.3 (sample): the index tensor has the OUTPUT's shape; the official shape "
        "function compares it with the input's shape instead, so it accepts this spec-invalid document"),
    "op_sample_spec_index": (
        "reject", "accept", "the spec-valid counterpart of 'op_sample' (index from argmax_pool of the same "
        "input, i.e. output-shaped), which the official shape function rejects for the same reason"),
    "shape_conv_window_exceeds_input": (
        "accept", "reject", "a 2-wide window on an unpadded extent of 1 fits nowhere: the output extent "
        "(1 - 2) / 1 + 1 = 0 is not a valid extent (spec: extents are positive); the official function "
        "returns 0"),
    "shape_deconv_padding_empties_output": (
        "accept", "reject", "deconv output extent (1 - 1) * 1 + 1 - 0 - 1 = 0: padding crops the whole axis; "
        "extents must be positive, the official function returns 0"),
    "squeeze_1": (
        "accept", "reject", "spec 4.5 (squeeze): squeezed dimensions must be singletons; axis 0 has extent 2. "
        "The official shape function does not check extents"),
    "squeeze_3": (
        "accept", "reject", "spec 4.5: squeeze removes the listed dimensions, each once; a repeated axis "
        "makes the result rank (rank - len(axes)) wrong. The official function does not check"),
    "rule_flat_chain": (
        "accept", "reject", "NNEF spec §2.2 flat grammar (and provisional 1.0 §3.2.4): invocation arguments in "
        "flat syntax are identifiers and literals; y = relu(neg(x)) chains invocations, valid only with "
        "KHR_enable_operator_expressions. The official parser accepts nested invocations anyway"),
    "rule_flat_chain_in_array": (
        "accept", "reject", "the same rule inside an array argument: concat([x, neg(x)])"),
    "unsqueeze_3": (
        "accept", "reject", "spec 4.5: unsqueeze inserts one singleton per listed output position; a repeated "
        "position is ambiguous. The official function does not check"),
}

#: Documents where both accept but nnefx reports a different shape, deliberately:
#: ``case id -> ({tensor: nnefx shape}, reason)``.
EXPECTED_SHAPE_DIFFERENCES: dict[str, tuple[dict[str, list], str]] = {
    "shape_external_zero_extent": (
        {"x": [None, 3], "y": [None, 3]},
        "an extent of 0 in an external's shape means 'unspecified' in nnefx (seed 001 3.3.4, shape "
        "propagation with unspecified input dimensions); the official package takes it as a literal 0"),
    "shape_external_huge_extent": (
        {"x": [3000000000], "y": [3000000000]},
        "the official parser stores integers in 32 bits and silently wraps 3000000000 to -1294967296; "
        "nnefx keeps the value (running such a graph is refused at allocation time)"),
    "shape_broadcast_zero_extent": (
        {"y": [0]},
        "broadcasting an empty axis (extent 0, from an empty slice) with an extent-1 axis gives the non-1 extent, "
        "0 (nnef-operators section 0: 'the result takes the non-1 extent'); the official shape function takes "
        "the maximum, 1"),
}

#: Real nnefx front-end bugs found by this suite (reported to the front-end owner); each is an
#: expected failure that turns into an error (strict) once fixed, so it is removed from here.
KNOWN_NNEFX_BUGS: dict[str, str] = {
    # Found by this suite and fixed during development (kept as regression cases in the corpus):
    # bad_non_variable_update (update() of a non-variable), bad_output_is_input (a graph
    # name that is both parameter and result), bad_slice_negative_stride_empty,
    # bad_slice_negative_stride_begin_at_extent, bad_slice_end_before_first (slice ranges
    # after normalisation: -1 means "before the first element"; a negative stride needs
    # end <= begin < extent).
}


@dataclass
class Verdict:
    accepted: bool
    message: str = ""
    shapes: dict[str, list[int]] | None = None


_FRAGMENT_WITH_BODY = re.compile(r"\bfragment\s+(\w+)[^;{]*\{")


def official_verdict(text: str) -> Verdict:
    lowered = _FRAGMENT_WITH_BODY.findall(text)
    try:
        graph = nnef.parse_string(text, lowered=lowered)
        named = set(nnef.parse_string(text).tensors) if lowered else set(graph.tensors)
    except nnef.Error as e:
        return Verdict(False, f"parse: {e}")
    try:
        nnef.infer_shapes(graph)
    except nnef.Error as e:
        return Verdict(False, f"shape: {e}")
    except (TypeError, IndexError, AssertionError) as e:  # the official shape pass's own crashes
        return Verdict(False, f"shape (official crash {type(e).__name__}): {e}")
    return Verdict(True, shapes={n: list(t.shape) for n, t in graph.tensors.items() if n in named})


def nnefx_verdict(text: str, case_id: str) -> tuple[Verdict, NNEFXError | None]:
    try:
        graph = frontend.compile_document(text, file=f"{case_id}.nnef")
    except NNEFXError as e:
        return Verdict(False, str(e)), e
    shapes = {n: (None if t.shape is None else list(t.shape)) for n, t in graph.tensors.items()}
    return Verdict(True, shapes=shapes), None


def _word(accepted: bool) -> str:
    return "accept" if accepted else "reject"


def _params() -> list:
    out = []
    for case_id, text in ALL_CASES:
        marks = ([pytest.mark.xfail(reason=f"nnefx bug: {KNOWN_NNEFX_BUGS[case_id]}", strict=True)]
                 if case_id in KNOWN_NNEFX_BUGS else [])
        out.append(pytest.param(case_id, text, id=case_id, marks=marks))
    return out


@pytest.mark.peer
@pytest.mark.parametrize("case_id,text", _params())
def test_same_verdict_and_shapes(case_id: str, text: str) -> None:
    theirs = official_verdict(text)
    ours, error = nnefx_verdict(text, case_id)
    if case_id in EXPECTED_DIFFERENCES:
        official, mine, reason = EXPECTED_DIFFERENCES[case_id]
        assert (_word(theirs.accepted), _word(ours.accepted)) == (official, mine), (
            f"documented difference no longer holds ({reason}); official: {theirs.message or 'accept'}; "
            f"nnefx: {ours.message or 'accept'}")
        return
    assert ours.accepted == theirs.accepted, (
        f"official {_word(theirs.accepted)}s ({theirs.message}), nnefx {_word(ours.accepted)}s ({ours.message})")
    if error is not None:
        # every rejection is an NNEFXError that says where: file plus a line (text inputs)
        assert error.location is not None and error.location.file == f"{case_id}.nnef", str(error)
        assert error.location.line is not None, str(error)
    if theirs.accepted:
        assert ours.shapes is not None and theirs.shapes is not None
        expected = dict(theirs.shapes)
        if case_id in EXPECTED_SHAPE_DIFFERENCES:
            differing, _reason = EXPECTED_SHAPE_DIFFERENCES[case_id]
            for name, shape in differing.items():
                assert expected[name] != shape, f"documented shape difference for '{name}' no longer holds"
            expected.update(differing)
        for name, shape in expected.items():
            assert name in ours.shapes, f"nnefx graph lacks tensor '{name}'"
            assert ours.shapes[name] == shape, f"shape of '{name}': nnefx {ours.shapes[name]}, official {shape}"


def test_corpus_is_large_and_mixed() -> None:
    """The corpus keeps its size and its mix of accepted and rejected documents."""
    verdicts = [official_verdict(text).accepted for _, text in ALL_CASES]
    assert len(ALL_CASES) >= 400
    assert sum(verdicts) >= 150 and len(verdicts) - sum(verdicts) >= 150


def test_expected_differences_are_cases() -> None:
    ids = {c for c, _ in ALL_CASES}
    documented = set(EXPECTED_DIFFERENCES) | set(EXPECTED_SHAPE_DIFFERENCES) | set(KNOWN_NNEFX_BUGS)
    assert documented <= ids
    assert len(documented) == len(EXPECTED_DIFFERENCES) + len(EXPECTED_SHAPE_DIFFERENCES) + len(KNOWN_NNEFX_BUGS)
