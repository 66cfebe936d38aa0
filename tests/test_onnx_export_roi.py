"""ONNX export of NNEF's RoI operations (``avg_roi_pool``, ``max_roi_pool``, ``roi_resample``,
``avg_roi_align``, ``max_roi_align``): onnxruntime runs the written model and agrees with
both nnefx backends, for RoIs with fractional coordinates, RoIs partly or wholly outside
the input, empty and inverted RoIs, and RoIs of several batch items.

Tolerance: 1e-5 relative to max(1, max|want|) (onnxruntime samples and sums in float32,
nnefx's kernels in float64; the RoI-pool cell bounds are integers and agree exactly).
``roi_resample`` is checked to be bit-identical to the formal kernel (same float64
coordinates, weights and corner sums).  The forms chosen are checked too (``Gather``
compositions; one ``RoiAlign`` node only where it is exact; never ``MaxRoiPool`` or
RoiAlign's 'max' mode), and inputs whose spatial extents are unknown are refused with the
operation's name and source position.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import nnefx  # noqa: E402
from _export_helpers import run_ort, save_onnx  # noqa: E402
from nnefx.cli import main  # noqa: E402
from nnefx.diagnostics import NNEFXError  # noqa: E402
from nnefx.runtime.session import Session  # noqa: E402
from nnefx.semantics.frontend import compile_document  # noqa: E402

RTOL = 1e-5


def rois_for(shape: tuple, count: int, seed: int) -> np.ndarray:
    """``count`` RoI rows (start..., end...) over the spatial ``shape``: fractional
    coordinates, some reaching outside the input, then fixed awkward ones (ties at .5,
    a RoI wholly outside, an inverted and an empty one, one under a pixel wide)."""
    rng = np.random.default_rng(seed)
    m = len(shape)
    ext = np.asarray(shape, np.float64)
    start = rng.uniform(-0.4 * ext, 0.8 * ext, size=(count, m))
    end = start + rng.uniform(0.3, 1.2, size=(count, m)) * ext
    rows = [np.concatenate([start, end], axis=1)]
    fixed = [([-0.5] * m, [2.5] * m), ([0.49999997] * m, list(ext - 1.5)), (list(ext + 2), list(ext + 5.3)),
             ([3.0] * m, [1.0] * m), ([2.2] * m, [2.2] * m), ([1.1] * m, [1.6] * m)]
    rows.append(np.asarray([s + e for s, e in fixed], np.float64))
    return np.concatenate(rows).astype(np.float32)


def document(op: str, xshape: tuple, n: int, attrs: str, *, index_shape: tuple | None = None,
             rois_value: np.ndarray | None = None) -> str:
    m = len(xshape) - 2
    index_shape = index_shape or (n,)
    if rois_value is None:
        rois = f"rois = external<scalar>(shape = [{n}, {2 * m}]);"
        params = "x, rois, index"
    else:
        items = ", ".join(repr(float(v)) for v in rois_value.reshape(-1))
        rois = f"rois = constant<scalar>(shape = [{n}, {2 * m}], value = [{items}]);"
        params = "x, index"
    return f"""version 1.0;
graph G( {params} ) -> ( y )
{{
    x = external<scalar>(shape = {list(xshape)});
    {rois}
    index = external<integer>(shape = {list(index_shape)});
    y = {op}(x, rois, index, {attrs});
}}
"""


def agree(text: str, feeds: dict, tmp_path, name: str = "roi") -> list[str]:
    """Write ``text`` as ONNX, run it; both nnefx backends must agree with onnxruntime.
    Returns the model's node types."""
    graph = compile_document(text, file=f"{name}.nnef")
    path = save_onnx(nnefx.Model(graph), str(tmp_path / f"{name}.onnx"))
    got = run_ort(path, feeds)["y"]
    for backend in ("formal", "fast"):
        want = Session(graph, backend).run(feeds)["y"]
        assert got.shape == want.shape and got.dtype == want.dtype
        scale = max(1.0, float(np.abs(want).max()))
        err = float(np.abs(got.astype(np.float64) - want).max())
        assert err <= RTOL * scale, f"{backend}: max abs error {err} (scale {scale})"
    return [node.op_type for node in onnx.load(path).graph.node]


def feeds_for(xshape: tuple, rois: np.ndarray | None, seed: int, index_shape: tuple | None = None) -> dict:
    rng = np.random.default_rng(seed)
    n = rois.shape[0] if rois is not None else index_shape[0]
    feeds = {"x": rng.uniform(-1.0, 1.0, size=xshape).astype(np.float32),
             "index": rng.integers(0, xshape[0], size=n).astype(np.int64)}
    if index_shape is not None:
        feeds["index"] = feeds["index"].reshape(index_shape)
    if rois is not None:
        feeds["rois"] = rois
    return feeds


# --- every operation, run-time RoIs -----------------------------------------------------------

CASES = {
    "resample-symmetric": ("roi_resample", "output_size = [3, 4], method = 'symmetric'"),
    "resample-asymmetric": ("roi_resample", "output_size = [4, 2], method = 'asymmetric'"),
    "resample-aligned": ("roi_resample", "output_size = [3, 5], method = 'aligned'"),
    "resample-aligned-1": ("roi_resample", "output_size = [1, 3], method = 'aligned'"),
    "avg-align-symmetric": ("avg_roi_align", "output_size = [2, 3], sampling_rate = [2, 2]"),
    "avg-align-asymmetric": ("avg_roi_align",
                             "output_size = [3, 2], sampling_rate = [1, 3], resize_method = 'asymmetric'"),
    "avg-align-aligned": ("avg_roi_align", "output_size = [2, 2], sampling_rate = [3, 2], resize_method = 'aligned'"),
    "max-align-symmetric": ("max_roi_align", "output_size = [2, 3], sampling_rate = [2, 2]"),
    "max-align-asymmetric": ("max_roi_align",
                             "output_size = [2, 3], sampling_rate = [1, 2], resize_method = 'asymmetric'"),
    "max-align-aligned": ("max_roi_align", "output_size = [3, 3], sampling_rate = [2, 1], resize_method = 'aligned'"),
    "avg-pool": ("avg_roi_pool", "output_size = [2, 3]"),
    "avg-pool-3x3": ("avg_roi_pool", "output_size = [3, 3]"),
    "max-pool": ("max_roi_pool", "output_size = [2, 3]"),
    "max-pool-1x4": ("max_roi_pool", "output_size = [1, 4]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_roi_operation_exports_and_agrees(case, tmp_path):
    op, attrs = CASES[case]
    xshape = (3, 2, 9, 8)
    rois = rois_for(xshape[2:], 7, seed=len(case))
    kinds = agree(document(op, xshape, len(rois), attrs), feeds_for(xshape, rois, seed=len(case)), tmp_path)
    assert "MaxRoiPool" not in kinds and "RoiAlign" not in kinds   # run-time RoIs: never exact
    assert "GridSample" not in kinds and "Gather" in kinds


@pytest.mark.parametrize("seed", range(16))
def test_random_geometry(seed, tmp_path):
    # random extents (down to 1), output sizes (up to above the RoI extent: zero strides),
    # sampling rates, methods and RoIs over one to three spatial dims
    rng = np.random.default_rng(100 + seed)
    m = int(rng.integers(1, 4))
    xshape = (int(rng.integers(1, 4)), int(rng.integers(1, 4))) + tuple(int(v) for v in rng.integers(1, 10, m))
    op = ["roi_resample", "avg_roi_align", "max_roi_align", "avg_roi_pool", "max_roi_pool"][seed % 5]
    size = [int(v) for v in rng.integers(1, 5, m)]
    attrs = f"output_size = {size}"
    method = ["symmetric", "asymmetric", "aligned"][int(rng.integers(0, 3))]
    if op == "roi_resample":
        attrs += f", method = '{method}'"
    elif op.endswith("align"):
        attrs += f", sampling_rate = {[int(v) for v in rng.integers(1, 4, m)]}, resize_method = '{method}'"
    rois = rois_for(xshape[2:], int(rng.integers(1, 6)), seed=200 + seed)
    agree(document(op, xshape, len(rois), attrs), feeds_for(xshape, rois, seed=300 + seed), tmp_path)


@pytest.mark.parametrize("op, attrs", [
    ("roi_resample", "output_size = [5], method = 'symmetric'"),
    ("avg_roi_align", "output_size = [3], sampling_rate = [2], resize_method = 'aligned'"),
    ("max_roi_align", "output_size = [2], sampling_rate = [3]"),
    ("avg_roi_pool", "output_size = [3]"),
    ("max_roi_pool", "output_size = [2]"),
])
def test_one_dimensional_rois(op, attrs, tmp_path):
    xshape = (2, 3, 11)
    rois = rois_for(xshape[2:], 5, seed=3)
    agree(document(op, xshape, len(rois), attrs), feeds_for(xshape, rois, seed=4), tmp_path)


@pytest.mark.parametrize("op", ["roi_resample", "max_roi_pool", "avg_roi_pool"])
def test_batch_index_as_a_column(op, tmp_path):
    # NNEF's spec shape (N, 1) for batch_index, as well as the Tools' (N,)
    xshape = (4, 2, 7, 7)
    rois = rois_for(xshape[2:], 4, seed=5)
    n = len(rois)
    agree(document(op, xshape, n, "output_size = [2, 2]", index_shape=(n, 1)),
          feeds_for(xshape, rois, seed=6, index_shape=(n, 1)), tmp_path)


def test_single_batch_item_and_larger_picture(tmp_path):
    xshape = (1, 5, 20, 17)
    rois = rois_for(xshape[2:], 12, seed=7)
    agree(document("max_roi_align", xshape, len(rois), "output_size = [4, 3], sampling_rate = [2, 2]"),
          feeds_for(xshape, rois, seed=8), tmp_path)
    agree(document("avg_roi_pool", xshape, len(rois), "output_size = [4, 4]"),
          feeds_for(xshape, rois, seed=9), tmp_path, name="pool")


def test_pool_cells_with_negative_maxima_read_the_outside_zeros(tmp_path):
    # every input value negative: a cell reaching outside the input has maximum 0 (NNEF's
    # zero border takes part), one inside keeps its negative maximum
    xshape = (2, 1, 6, 6)
    rois = np.asarray([[-2, -2, 3, 3], [1, 1, 5, 5], [4.4, 0, 9.6, 6]], np.float32)
    feeds = feeds_for(xshape, rois, seed=10)
    feeds["x"] = -np.abs(feeds["x"]) - 0.5
    agree(document("max_roi_pool", xshape, 3, "output_size = [2, 2]"), feeds, tmp_path)
    want = Session(compile_document(document("max_roi_pool", xshape, 3, "output_size = [2, 2]")), "formal").run(feeds)
    y = want["y"]
    assert y[0, 0, 0, 0] == 0 and np.all(y[1] < 0)


@pytest.mark.parametrize("op, attrs", [
    ("roi_resample", "output_size = [3, 2], method = 'aligned'"),
    ("avg_roi_align", "output_size = [2, 2], sampling_rate = [2, 2]"),
    ("max_roi_align", "output_size = [2, 3], sampling_rate = [1, 2], resize_method = 'asymmetric'"),
    ("avg_roi_pool", "output_size = [2, 2]"),
    ("max_roi_pool", "output_size = [3, 2]"),
])
def test_unknown_batch_channels_and_roi_count(op, attrs, tmp_path):
    # extent 0 = unknown: the batch size, channels and number of RoIs become symbolic ONNX dims,
    # and one written model serves any of them
    graph = compile_document(document(op, (0, 0, 6, 7), 0, attrs), file="dyn.nnef")
    path = save_onnx(nnefx.Model(graph), str(tmp_path / "dyn.onnx"))
    for batch, channels, count, seed in [(1, 1, 3, 14), (3, 4, 8, 15)]:
        rois = rois_for((6, 7), 2, seed)[:count]   # 2 random RoIs + 6 awkward ones
        feeds = feeds_for((batch, channels, 6, 7), rois, seed)
        got = run_ort(path, feeds)["y"]
        for backend in ("formal", "fast"):
            want = Session(graph, backend).run(feeds)["y"]
            assert got.shape == want.shape
            assert float(np.abs(got.astype(np.float64) - want).max()) <= RTOL * max(1.0, float(np.abs(want).max()))


# --- the direct RoiAlign form ------------------------------------------------------------------

def test_constant_rois_inside_the_input_are_one_roialign(tmp_path):
    xshape = (2, 3, 10, 9)
    rois = np.asarray([[0.5, 0, 5, 6.5], [1.2, 2.7, 9.1, 8.0], [3.3, 3.3, 3.9, 4.6]], np.float32)
    text = document("avg_roi_align", xshape, 3, "output_size = [2, 3], sampling_rate = [2, 2]", rois_value=rois)
    kinds = agree(text, feeds_for(xshape, None, seed=11, index_shape=(3,)), tmp_path)
    assert kinds == ["RoiAlign"]


@pytest.mark.parametrize("rois, attrs, why", [
    ([[-3.0, 0, 5, 6.5]], "output_size = [2, 3], sampling_rate = [2, 2]", "outside"),
    ([[0.5, 0, 5, 6.5]], "output_size = [2, 3], sampling_rate = [1, 2]", "rate"),
    ([[0.5, 0, 5, 6.5]], "output_size = [2, 3], sampling_rate = [2, 2], resize_method = 'aligned'", "method"),
])
def test_constant_rois_roialign_cannot_match_are_sampled(rois, attrs, why, tmp_path):
    xshape = (1, 2, 10, 9)
    value = np.asarray(rois, np.float32)
    kinds = agree(document("avg_roi_align", xshape, 1, attrs, rois_value=value),
                  feeds_for(xshape, None, seed=12, index_shape=(1,)), tmp_path)
    assert "RoiAlign" not in kinds and "Gather" in kinds


def test_max_roi_align_is_never_roialign_max_mode(tmp_path):
    # RoiAlign 'max' maximises the weighted corner terms, not the interpolated values
    xshape = (1, 2, 10, 9)
    value = np.asarray([[0.5, 0, 5, 6.5]], np.float32)
    kinds = agree(document("max_roi_align", xshape, 1, "output_size = [2, 3], sampling_rate = [2, 2]",
                           rois_value=value), feeds_for(xshape, None, seed=13, index_shape=(1,)), tmp_path)
    assert "RoiAlign" not in kinds and "MaxPool" in kinds


@pytest.mark.parametrize("xshape, size", [((3, 2, 9, 8), [3, 4]), ((2, 3, 40, 33), [7, 5]),
                                         ((2, 2, 5, 6, 7), [2, 3, 4]), ((2, 3, 11), [5])])
@pytest.mark.parametrize("method", ["symmetric", "asymmetric", "aligned"])
def test_roi_resample_is_bit_identical_to_the_formal_kernel(xshape, size, method, tmp_path):
    rois = rois_for(xshape[2:], 6, seed=16)
    text = document("roi_resample", xshape, len(rois), f"output_size = {size}, method = '{method}'")
    feeds = feeds_for(xshape, rois, seed=17)
    graph = compile_document(text, file="rs.nnef")
    got = run_ort(save_onnx(nnefx.Model(graph), str(tmp_path / "rs.onnx")), feeds)["y"]
    np.testing.assert_array_equal(got, Session(graph, "formal").run(feeds)["y"])


@pytest.mark.parametrize("xshape, op, attrs", [
    ((2, 2, 5, 6, 7), "avg_roi_align", "output_size = [2, 1, 2], sampling_rate = [1, 2, 2], resize_method = 'aligned'"),
    ((2, 2, 5, 6, 7), "max_roi_align", "output_size = [2, 2, 3], sampling_rate = [2, 1, 1]"),
    ((2, 2, 5, 6, 7), "avg_roi_pool", "output_size = [2, 3, 2]"),
    ((2, 2, 5, 6, 7), "max_roi_pool", "output_size = [3, 2, 2]"),
    # beyond onnxruntime's 3-D pools: the align windows as reshaped axes reduced
    ((2, 2, 4, 3, 5, 4), "avg_roi_align", "output_size = [1, 2, 1, 2], sampling_rate = [2, 1, 2, 1]"),
    ((2, 2, 4, 3, 5, 4), "max_roi_align", "output_size = [2, 1, 2, 1], sampling_rate = [1, 2, 2, 1]"),
    ((2, 2, 4, 3, 5, 4), "avg_roi_pool", "output_size = [1, 2, 1, 2]"),
    ((2, 2, 4, 3, 5, 4), "max_roi_pool", "output_size = [2, 1, 2, 1]"),
])
def test_three_and_four_spatial_dimensions(xshape, op, attrs, tmp_path):
    rois = rois_for(xshape[2:], 3, seed=18)
    kinds = agree(document(op, xshape, len(rois), attrs), feeds_for(xshape, rois, seed=19), tmp_path)
    if op.endswith("align"):
        pool = ("AveragePool" if op.startswith("avg") else "MaxPool") if len(xshape) <= 5 else \
            ("ReduceMean" if op.startswith("avg") else "ReduceMax")
        assert pool in kinds


# --- refusals -----------------------------------------------------------------------------------

@pytest.mark.parametrize("op, attrs", [
    ("roi_resample", "output_size = [2, 2]"),
    ("avg_roi_align", "output_size = [2, 2], sampling_rate = [2, 2]"),
    ("max_roi_align", "output_size = [2, 2], sampling_rate = [2, 2]"),
    ("avg_roi_pool", "output_size = [2, 2]"),
    ("max_roi_pool", "output_size = [2, 2]"),
])
def test_unknown_spatial_extent_is_refused_with_the_position(op, attrs, tmp_path):
    # the sampling indices and the pooling cells are computed against the extents
    graph = compile_document(document(op, (1, 2, 0, 5), 2, attrs), file="s.nnef")
    with pytest.raises(NNEFXError, match=rf"cannot write operation '{op}' as ONNX: the input's spatial extents "
                                         r"\[None, 5\] are not static") as e:
        nnefx.save(nnefx.Model(graph), str(tmp_path / "s.onnx"))
    assert (e.value.location.file, e.value.location.line, e.value.location.column) == ("s.nnef", 7, 9)
    assert not (tmp_path / "s.onnx").exists()


def test_cli_refusal_reads_file_line_col(tmp_path, capsys):
    src = tmp_path / "unknown.nnef"
    src.write_text(document("max_roi_pool", (1, 2, 4, 0), 1, "output_size = [2, 2]"))
    assert main(["convert", str(src), str(tmp_path / "unknown.onnx")]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"{src}:7:9: error: cannot write operation 'max_roi_pool' as ONNX: ")
    assert "spatial extents [4, None] are not static" in err
    assert not (tmp_path / "unknown.onnx").exists()
