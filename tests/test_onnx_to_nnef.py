"""ONNX → NNEF keeps the meaning: node-suite models nnefx runs, written as NNEF (nnefx's default
writer, and NNEF for tract, ``dialect="tract"``, which declares element types in tract's
forms), read back and run again give bit-identical outputs, or the writer refuses with a
located NNEFXError.

A deterministic half of the cases (by a checksum of their names, in four shards) is
converted, each on one of the two backends, to keep the test short;
``benchmarks/onnx_to_nnef.py`` runs them all on either backend and prints the table of
BENCHMARKS.md.
"""

from __future__ import annotations

import os
import sys
import warnings
import zlib
from collections import Counter

import pytest

onnx = pytest.importorskip("onnx")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
from onnx_to_nnef import node_cases, run_case, run_cases  # noqa: E402

SHARDS = 4

#: what the tract dialect is known not to round-trip, by case and verdict: ``mish`` is written
#: as x * tanh(log(1 + exp(x))) in standard operations, each step rounded to float32 (nnefx's
#: mish rounds once); tract reads ``deconv``'s filter as [C_out, C_in / groups, ...] and the
#: writer regroups it so, which nnefx reads with NNEF's [C_in, C_out / groups, ...].
TRACT_KNOWN = {("test_mish", "differs"): "", ("test_convtranspose", "unreadable"): "operation 'deconv': filter"}


def _tract_known(name: str, verdict: str, why: str) -> bool:
    return any(name.startswith(case) and verdict == v and text in why for (case, v), text in TRACT_KNOWN.items())


@pytest.fixture(scope="module")
def cases():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return node_cases()


@pytest.mark.parametrize("shard", range(SHARDS))
def test_node_suite_models_convert_to_nnef_and_back(cases, shard, tmp_path):
    verdicts: Counter = Counter()
    bad = []
    for case in cases:
        key = zlib.crc32(case.name.encode())
        if key % (2 * SHARDS) != shard:
            continue
        backend = "fast" if key // (2 * SHARDS) % 2 == 0 else "formal"
        for dialect, (verdict, why) in run_cases(case, str(tmp_path), backend, ("nnef", "tract")).items():
            verdicts[dialect, verdict] += 1
            if dialect == "tract" and _tract_known(case.name, verdict, why):
                continue
            if verdict in ("differs", "unreadable", "crashed"):
                bad.append(f"{case.name} ({backend}, {dialect}): {verdict}: {why}")
            elif verdict == "refused":
                # located: the node, input or output the refusal is about (run_case counts a
                # refusal without a location as crashed)
                assert "]: error: " in why, why
    assert not bad, "\n".join(bad)
    # a floor, so that a reader that stopped running the suite does not pass this vacuously
    assert verdicts["nnef", "identical"] >= 50 and verdicts["tract", "identical"] >= 50, verdicts


# typed graphs and the forms the tract writer once got wrong: each written for tract, read back
# by nnefx and run again, bit for bit
TYPED_FOR_TRACT = [
    "test_add_uint8", "test_max_float16", "test_attention_4d_fp16_expanded", "test_gathernd_example_int32",
    "test_maxpool_2d_uint8",
    "test_size",                                          # a rank-0 constant stays rank 0
    "test_nllloss_NCd1_ii_expanded",                      # i64 arithmetic; tract_core_cast to i64
    "test_reduce_prod_default_axes_keepdims_random",      # tract's product rounded once, as formal
    "test_einsum_sum",                                    # f64 einsum accumulated in f64
]


@pytest.mark.parametrize("name", TYPED_FOR_TRACT)
def test_typed_graphs_written_for_tract_read_back_identical(cases, name, tmp_path):
    case = next(c for c in cases if c.name == name)
    for backend in ("fast", "formal"):
        (tmp_path / backend).mkdir()
        verdict, why = run_case(case, str(tmp_path / backend), backend, "tract")
        assert verdict == "identical", (backend, verdict, why)


#: (writer dialect, case, what its located refusal says)
REFUSED = [
    ("nnef", "test_constant", "it has no inputs"),
    ("nnef", "test_maxpool_2d_uint8", "cannot write tensor 'x' as NNEF: it is u8 data"),
    ("nnef", "test_maxpool_2d_uint8", "write NNEF for tract (`nnefx convert --dialect tract`"),
    ("nnef", "test_pow_types_float32_int64", "cannot write operation 'integer_arith' as NNEF"),
    ("tract", "test_pow_types_float32_int64", "'power' of f32 and i64 operands (tract computes both in one type)"),
    ("tract", "test_shape_start_greater_than_end", "it reads an empty constant 'y' (shape [0])"),
    ("tract", "test_argmax_keepdims_example_select_last_index", "a negative stride running past the front of axis 1"),
    ("tract", "test_split_equal_parts_1d_opset13", "cannot write operation 'split' for tract: it has no exact form"),
    ("tract", "test_ai_onnx_ml_label_encoder_string_int", "input 'X' is string data, which has no tract datum type"),
    # a body node deferred on run-time extents: refused before the writer folds anything
    ("tract", "test_affine_grid_2d_expanded", "cannot write Split as NNEF for tract: it takes the extents of"),
]


@pytest.mark.parametrize("dialect, name, message", REFUSED)
def test_what_the_writer_cannot_express_is_refused_at_its_node(cases, dialect, name, message, tmp_path):
    case = next(c for c in cases if c.name == name)
    verdict, why = run_case(case, str(tmp_path), dialect=dialect)
    if dialect == "nnef" and verdict in ("identical", "skipped"):  # it learned to express it / nnefx does not run it
        return
    assert verdict == "refused" and message in why and name + ".onnx" in why, (verdict, why)
