"""The catalog's own layer examples (seed 003 dims and attributes, collected in one legacy net
under tests/fixtures/ir/legacy/): every declared output shape must be what the mappings
compute, and the small ones must give the right numbers."""

from __future__ import annotations

import os

import numpy as np
import pytest

import nnefx
from nnefx.runtime.session import Session

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "ir", "legacy")
CATALOG = os.path.join(FIXTURES, "catalog_examples.xml")
#: the examples with large tensors (Gather's output has 4.8e8 items): loaded and shape-checked only
LARGE = os.path.join(FIXTURES, "catalog_large_examples.xml")

# output name -> the catalog example's declared output dims
EXPECTED = {
    "depth_to_space": (5, 1, 4, 6), "flatten": (7, 4332), "score_pool4c": (1, 21, 34, 34),
    "crop_type2": (1, 21, 34, 34), "crop_type3": (1, 21, 34, 34), "gather_node": (6, 15, 4, 20, 28, 10, 24),
    "pad": (2, 8, 37, 48), "slice": (1, 1024, 14, 14), "slice.2": (1, 24, 14, 14), "shuffle": (3, 12, 200, 400),
    "reshape": (2, 150, 4), "fill": (3, 4), "range": (10,), "shape": (4,), "interp": (1, 2, 96, 160),
    "resample1": (1, 3, 50, 60), "resample2": (1, 3, 50, 60), "strided_slice": (1, 384, 640, 8),
    "psroi": (100, 360, 6, 6),
}


@pytest.fixture(scope="module")
def model():
    return nnefx.load(CATALOG)


def test_catalog_examples_shapes(model):
    shapes = {}
    for m in (model, nnefx.load(LARGE)):
        shapes.update({name: m.graph.tensors[name].shape for name in m.graph.outputs})
    assert shapes == EXPECTED


def test_catalog_examples_values(model):
    rng = np.random.default_rng(5)
    feeds = {}
    for name in model.graph.inputs:
        shape = model.graph.tensors[name].shape
        feeds[name] = rng.uniform(-1, 1, shape).astype("f4")
    wanted = ["depth_to_space", "flatten", "score_pool4c", "crop_type2", "crop_type3", "pad", "slice", "slice.2",
              "reshape", "fill", "range", "shape", "interp", "resample1", "resample2"]
    sess = Session(model, backend="fast")
    out = sess.run(feeds)
    x = feeds["crop_in"]
    np.testing.assert_array_equal(out["score_pool4c"], x[:, :, :34, :34])
    np.testing.assert_array_equal(out["crop_type3"], x[:, :, 4:38, 4:38])
    np.testing.assert_array_equal(out["flatten"], feeds["flatten_in"].reshape(7, -1))
    p = np.pad(feeds["pad_in"], [(0, 1), (5, 0), (2, 3), (1, 7)], constant_values=666.0)
    np.testing.assert_array_equal(out["pad"], p)
    np.testing.assert_array_equal(out["slice.2"], feeds["slice_in"][:, 1024:])
    np.testing.assert_array_equal(out["fill"], np.full((3, 4), 1.5))
    np.testing.assert_array_equal(out["range"], np.arange(10))
    np.testing.assert_array_equal(out["shape"], [2, 3, 224, 224])
    d = feeds["d2s_in"]
    np.testing.assert_array_equal(out["depth_to_space"],
                                  d.reshape(5, 2, 2, 1, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(5, 1, 4, 6))
    assert sorted(out) == sorted(wanted)
