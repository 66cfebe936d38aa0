"""ONNX → NNEF keeps the meaning: node-suite models nnefx runs, written as NNEF, read back and
run again give bit-identical outputs, or the writer refuses with a located NNEFXError.

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
from onnx_to_nnef import node_cases, run_case  # noqa: E402

SHARDS = 4


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
        verdict, why = run_case(case, str(tmp_path), backend)
        verdicts[verdict] += 1
        if verdict in ("differs", "unreadable", "crashed"):
            bad.append(f"{case.name} ({backend}): {verdict}: {why}")
        elif verdict == "refused":
            # located: the node, input or output the refusal is about (run_case counts a
            # refusal without a location as crashed)
            assert "]: error: " in why, why
    assert not bad, "\n".join(bad)
    # a floor, so that a reader that stopped running the suite does not pass this vacuously
    assert verdicts["identical"] >= 50, verdicts


@pytest.mark.parametrize("name, message", [
    ("test_constant", "it has no inputs"),
    ("test_maxpool_2d_uint8", "cannot write tensor 'x' as NNEF: it is u8 data"),
    ("test_pow_types_float32_int64", "cannot write operation 'integer_arith' as NNEF"),
])
def test_what_nnef_cannot_express_is_refused_at_its_node(cases, name, message, tmp_path):
    case = next(c for c in cases if c.name == name)
    verdict, why = run_case(case, str(tmp_path))
    if verdict in ("identical", "skipped"):  # the writer learned to express it / nnefx does not run it
        return
    assert verdict == "refused" and message in why and name + ".onnx" in why, (verdict, why)
