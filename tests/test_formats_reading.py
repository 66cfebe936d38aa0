"""The format-neutral import layer on its own, without any file format: a reader's view.

Builds graphs through :class:`ImportGraph` + :class:`NodeContext` as a new reader would, and
checks the numpy-style conventions against numpy itself: slice plans (clamped bounds,
negative starts/stops/steps), gather index rules, axis normalisation, right-aligned
broadcasting, constants written once, folding through ``apply``.
"""

from __future__ import annotations

import numpy as np
import pytest

from nnefx.diagnostics import NNEFXError
from nnefx.formats.reading.context import NodeContext
from nnefx.formats.reading.conventions import (
    aligned,
    emit_index_plan,
    gather_indices,
    norm_axes,
    norm_axis,
    slice_plan,
)
from nnefx.formats.reading.graph import ImportGraph
from nnefx.formats.reading.values import Value, const
from nnefx.graph import Model, Operation, Tensor
from nnefx.runtime.session import Session


def _graph_with_input(shape):
    b = ImportGraph("g", "<test>")
    b.graph.tensors["x"] = Tensor("x", "scalar", tuple(shape))
    b.graph.operations.append(Operation("external", {}, {"output": "x"}, {"shape": list(shape)}, dtype="scalar"))
    b.graph.inputs.append("x")
    return b, Value(tensor="x", etype="f32", shape=tuple(shape))


def _run(b, outputs, feeds):
    b.graph.outputs.extend(outputs)
    return Session(Model(b.graph), "formal").run(feeds)


def _slices(rng, shape):
    starts, stops, steps, axes = [], [], [], []
    for a in rng.permutation(len(shape))[: rng.integers(1, len(shape) + 1)]:
        n = shape[a]
        step = int(rng.choice([-3, -2, -1, 1, 2, 3]))
        start, stop = (int(v) for v in rng.integers(-2 * n, 2 * n + 1, 2))
        starts.append(start), stops.append(stop), steps.append(step), axes.append(int(a) - len(shape) * int(rng.integers(0, 2)))
    return starts, stops, steps, axes


def test_slice_plans_agree_with_numpy():
    rng = np.random.default_rng(5)
    for _ in range(60):
        shape = tuple(int(d) for d in rng.integers(1, 6, rng.integers(1, 4)))
        starts, stops, steps, axes = _slices(rng, shape)
        if not starts:
            continue
        b, x = _graph_with_input(shape)
        ctx = NodeContext(b, "Slice", "s", {}, [x], None, None)
        plan = slice_plan(ctx, len(shape), starts, stops, steps, axes)
        y = emit_index_plan(ctx, plan, x, "x")
        data = rng.standard_normal(shape).astype(np.float32)
        index = [slice(None)] * len(shape)
        for s, e, st, a in zip(starts, stops, steps, axes, strict=True):
            index[a] = slice(s, e, st)
        got = _run(b, [y], {"x": data})[y]
        np.testing.assert_array_equal(got, data[tuple(index)])
        assert b.graph.tensors[y].shape == data[tuple(index)].shape


def test_gather_indices_and_axes():
    b, x = _graph_with_input((4,))
    ctx = NodeContext(b, "Gather", "g", {}, [x], None, None)
    np.testing.assert_array_equal(gather_indices(ctx, np.array([[-1, 0], [3, -4]]), 4), [[3, 0], [3, 0]])
    with pytest.raises(NNEFXError, match="out of range"):
        gather_indices(ctx, np.array([4]), 4)
    assert norm_axis(ctx, -1, 3) == 2 and norm_axes(ctx, [0, -1], 2) == [0, 1]
    with pytest.raises(NNEFXError, match="out of range for rank 3"):
        norm_axis(ctx, 3, 3)
    with pytest.raises(NNEFXError, match="repeated axes"):
        norm_axes(ctx, [1, -1], 2)


def test_right_aligned_broadcasting_and_constants_written_once():
    b, x = _graph_with_input((2, 3, 4))
    row = const(np.arange(4, dtype=np.float32))
    ctx = NodeContext(b, "Add", "add", {}, [x, row], None, None)
    xs, rs = aligned(ctx, [0, 1])
    assert b.graph.tensors[rs].shape == (1, 1, 4)
    y = ctx.emit1("add", {"x": xs, "y": rs})
    assert ctx.tensor_of(ctx.folded(np.zeros(1))) != rs
    assert ctx.tensor(1) == ctx.tensor(1)  # the constant row is written into the graph once
    data = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(b, [y], {"x": data})[y], data + np.arange(4, dtype=np.float32))


def test_apply_folds_constants_and_names_the_node():
    b = ImportGraph("g", "<test>")
    ctx = NodeContext(b, "Add", "n", {}, [], None, None, where="node 7 'n' (Add)")
    folded = ctx.apply1("Add", {"auto_broadcast": "numpy"}, [const(np.ones((2, 1), np.float32)),
                                                              const(np.arange(3, dtype=np.float32))])
    assert folded.is_const and folded.shape == (2, 3) and b.graph.operations == []
    with pytest.raises(NNEFXError, match="internal: no reader"):
        ctx.apply("NoSuchOperator", {}, [])


def test_coordinate_modes():
    from nnefx.formats.reading.conventions import multilinear_method, nearest_upsample_fits, source_coordinate

    i = np.arange(4.0)
    np.testing.assert_allclose(source_coordinate(i, 2.0, 2, 4, "half_pixel"), [-0.25, 0.25, 0.75, 1.25])
    np.testing.assert_allclose(source_coordinate(i, 2.0, 2, 4, "asymmetric"), [0, 0.5, 1, 1.5])
    np.testing.assert_allclose(source_coordinate(i, 2.0, 2, 4, "align_corners"), [0, 1 / 3, 2 / 3, 1])
    # NNEF's nearest_upsample reads floor(i / f): asymmetric + floor does, half_pixel + floor does not
    assert nearest_upsample_fits("asymmetric", "floor") and not nearest_upsample_fits("half_pixel", "floor")
    assert np.array_equal(np.floor(source_coordinate(i, 2.0, 2, 4, "asymmetric")), i // 2)
    assert multilinear_method("align_corners") == "aligned" and multilinear_method("tf_half_pixel_for_nn") is None
