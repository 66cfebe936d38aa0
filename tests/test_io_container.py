"""Model folders, archives and lone documents: loading, consistency checks, atomic saving."""

from __future__ import annotations

import io
import os
import shutil
import tarfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nnefx
from nnefx import NNEFXError
from nnefx.io import container
from nnefx.io.binary import encode_tensor, read_tensor, write_tensor
from nnefx.io.builder import GraphBuilder

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "io")
SMALL = os.path.join(FIXTURES, "small")
QUANTIZED = os.path.join(FIXTURES, "quantized")


def copy_model(tmp_path, src=SMALL, name="model"):
    dst = tmp_path / name
    shutil.copytree(src, dst)
    return dst


def listing(root) -> list[str]:
    out = []
    for folder, _dirs, files in os.walk(root):
        for f in files:
            out.append(os.path.relpath(os.path.join(folder, f), root))
    return sorted(out)


def tensor_bytes(array, **kw) -> bytes:
    return b"".join(bytes(c) for c in encode_tensor(array, **kw))


# ---------------------------------------------------------------------------------------------
# folders


def test_load_folder_attaches_variable_data():
    model = container.load_folder(SMALL)
    assert model.format == "nnef-folder" and model.source == SMALL
    g = model.graph
    np.testing.assert_array_equal(g.tensors["w"].data, np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
    assert g.tensors["mask"].data.dtype == np.bool_
    assert sorted(model.weights) == ["layer/b", "layer/w", "mask"]


def test_loaded_data_equals_the_official_loader():
    nnef = pytest.importorskip("nnef")
    for path in (SMALL, QUANTIZED):
        theirs = nnef.load_graph(path)
        ours = nnefx.load(path)
        for _op, tensor in ours.graph.variables():
            want = theirs.tensors[tensor.name].data
            assert tensor.data.dtype == want.dtype
            np.testing.assert_array_equal(tensor.data, want)


def test_quantized_variable_keeps_codes_and_graph_quant():
    model = nnefx.load(QUANTIZED)
    w = model.graph.tensors["w"]
    assert w.data.dtype == np.int8 and w.data[2, 1] == -128
    assert w.quant["op_name"] == "zero_point_linear_quantize" and w.quant["scale"] == 0.5


def test_save_folder_round_trips_byte_identical_tensor_files(tmp_path):
    model = nnefx.load(SMALL)
    out = tmp_path / "out"
    nnefx.save(model, out)
    assert listing(out) == ["graph.nnef", "layer/b.dat", "layer/w.dat", "mask.dat"]
    for rel in ("layer/w.dat", "layer/b.dat", "mask.dat"):
        assert (out / rel).read_bytes() == open(os.path.join(SMALL, rel), "rb").read()
    again = nnefx.load(out)
    for name in ("w", "b", "mask"):
        np.testing.assert_array_equal(again.graph.tensors[name].data, model.graph.tensors[name].data)


def test_saved_folder_is_readable_by_the_official_loader(tmp_path):
    nnef = pytest.importorskip("nnef")
    for src in (SMALL, QUANTIZED):
        out = tmp_path / os.path.basename(src)
        nnefx.save(nnefx.load(src), out)
        theirs = nnef.load_graph(str(out))
        for _op, tensor in nnefx.load(src).graph.variables():
            np.testing.assert_array_equal(theirs.tensors[tensor.name].data, tensor.data)
    assert (tmp_path / "quantized" / "graph.quant").exists()
    assert read_tensor(tmp_path / "quantized" / "w.dat")[1] == {"bits": 8, "signed": True}


def test_missing_tensor_file_is_an_error_naming_it(tmp_path):
    model = copy_model(tmp_path)
    os.unlink(model / "layer" / "b.dat")
    with pytest.raises(NNEFXError, match="no tensor file 'layer/b.dat'") as info:
        nnefx.load(model)
    assert info.value.location.file.endswith("b.dat")


def test_stray_tensor_file_is_an_error_but_alternates_are_ignored(tmp_path):
    model = copy_model(tmp_path)
    write_tensor(model / "layer" / "w.dat.q8", np.zeros(2, np.int8))   # an alternate: ignored
    (model / "vendor.bin").write_bytes(b"xyz")                          # vendor file: ignored
    nnefx.load(model)
    write_tensor(model / "extra.dat", np.zeros(2, np.float32))
    with pytest.raises(NNEFXError, match="'extra.dat' belongs to no variable"):
        nnefx.load(model)


def test_stored_shape_must_equal_declared_shape_exactly(tmp_path):
    model = copy_model(tmp_path)
    write_tensor(model / "layer" / "b.dat", np.zeros((1, 3, 1), np.float32))  # trailing 1: still wrong
    with pytest.raises(NNEFXError, match=r"stored shape \[1, 3, 1\].*declared shape \[1, 3\]") as info:
        nnefx.load(model)
    assert info.value.location.field == "extents"


@pytest.mark.parametrize("array, message", [
    (np.zeros((1, 3), np.int32), "declared scalar but its file stores int32"),
    (np.zeros((1, 3), np.bool_), "declared scalar but its file stores bool"),
])
def test_stored_item_type_must_fit_the_declared_type(tmp_path, array, message):
    model = copy_model(tmp_path)
    write_tensor(model / "layer" / "b.dat", array)
    with pytest.raises(NNEFXError, match=message) as info:
        nnefx.load(model)
    assert info.value.location.field == "item_type"


def test_labels_compare_case_insensitively(tmp_path):
    model = copy_model(tmp_path)
    os.rename(model / "mask.dat", model / "MASK.dat")
    assert nnefx.load(model).graph.tensors["mask"].data.shape == (1, 3)


def test_labels_cannot_escape_the_model(tmp_path):
    model = copy_model(tmp_path)
    text = (model / "graph.nnef").read_text().replace("'mask'", "'../mask'")
    (model / "graph.nnef").write_text(text)
    with pytest.raises(NNEFXError, match="'..' path component"):
        nnefx.load(model)
    assert container.label_path("/a/b") == "a/b.dat"
    with pytest.raises(NNEFXError):
        container.label_path("a//b")


def test_quant_entries_must_name_tensors(tmp_path):
    model = copy_model(tmp_path, QUANTIZED)
    (model / "graph.quant").write_text('"w": zero_point_linear_quantize(zero_point = 0, scale = 0.5, '
                                       'bits = 8, signed = true, symmetric = true);\n'
                                       '"nope": linear_quantize(min = 0.0, max = 1.0, bits = 8);\n')
    with pytest.raises(NNEFXError, match="nope") as info:
        nnefx.load(model)
    assert info.value.location.file.endswith("graph.quant") and info.value.location.line == 2


def test_corrupt_tensor_file_error_names_the_file_and_field(tmp_path):
    model = copy_model(tmp_path)
    data = bytearray((model / "layer" / "w.dat").read_bytes())
    data[1] = 0
    (model / "layer" / "w.dat").write_bytes(bytes(data))
    with pytest.raises(NNEFXError) as info:
        nnefx.load(model)
    assert info.value.location.field == "magic" and info.value.location.file.endswith("w.dat")


def test_load_variables_false_skips_the_data(tmp_path):
    model = copy_model(tmp_path)
    os.unlink(model / "mask.dat")
    loaded = container.load_folder(model, load_variables=False)
    assert all(t.data is None for _, t in loaded.graph.variables())


# ---------------------------------------------------------------------------------------------
# documents


def test_lone_document_has_variables_without_data(tmp_path):
    model = nnefx.load(os.path.join(SMALL, "graph.nnef"))
    assert model.format == "nnef-file"
    assert [t.data for _, t in model.graph.variables()] == [None, None, None]
    assert model.graph.tensors["w"].shape == (2, 3)


def test_save_document_writes_text_and_quant_beside_it(tmp_path):
    nnefx.save(nnefx.load(QUANTIZED), tmp_path / "q.nnef")
    assert sorted(os.listdir(tmp_path)) == ["q.nnef", "q.quant"]
    again = nnefx.load(tmp_path / "q.nnef")
    assert again.graph.tensors["w"].quant


def test_saving_a_document_model_as_folder_needs_data(tmp_path):
    model = nnefx.load(os.path.join(SMALL, "graph.nnef"))
    with pytest.raises(NNEFXError, match="has no data"):
        nnefx.save(model, tmp_path / "out")
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------------------------
# archives


@pytest.mark.parametrize("suffix", [".tgz", ".tar", ".nnef.tgz", ".tar.gz"])
def test_archive_round_trip(tmp_path, suffix):
    model = nnefx.load(SMALL)
    path = tmp_path / ("model" + suffix)
    nnefx.save(model, path)
    assert os.listdir(tmp_path) == [path.name]
    with tarfile.open(path) as tar:
        assert sorted(tar.getnames()) == ["graph.nnef", "layer/b.dat", "layer/w.dat", "mask.dat"]
    loaded = nnefx.load(path)
    assert loaded.format == "nnef-archive"
    for name in ("w", "b", "mask"):
        np.testing.assert_array_equal(loaded.graph.tensors[name].data, model.graph.tensors[name].data)


def test_archives_are_deterministic(tmp_path):
    model = nnefx.load(SMALL)
    nnefx.save(model, tmp_path / "a.tgz")
    nnefx.save(model, tmp_path / "b.tgz")
    assert (tmp_path / "a.tgz").read_bytes() == (tmp_path / "b.tgz").read_bytes()


def test_plain_tar_tensors_are_mapped_not_copied(tmp_path):
    big = tmp_path / "big"
    shutil.copytree(SMALL, big)
    write_tensor(big / "layer" / "w.dat", np.ones((2, 3), np.float32))
    nnefx.save(nnefx.load(big), tmp_path / "m.tar")
    data = nnefx.load(tmp_path / "m.tar").graph.tensors["w"].data
    base = data
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    import mmap

    assert isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)
    data[0, 0] = 5.0  # copy-on-write: the archive does not change
    assert nnefx.load(tmp_path / "m.tar").graph.tensors["w"].data[0, 0] == 1.0


def make_archive(path, members, gz=True):
    """members: list of (TarInfo-mutator or name, bytes)."""
    with tarfile.open(path, "w:gz" if gz else "w") as tar:
        for spec, data in members:
            info = spec if isinstance(spec, tarfile.TarInfo) else tarfile.TarInfo(spec)
            if info.isreg():
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)


def small_members(prefix=""):
    out = [(prefix + "graph.nnef", open(os.path.join(SMALL, "graph.nnef"), "rb").read())]
    for rel in ("layer/w.dat", "layer/b.dat", "mask.dat"):
        out.append((prefix + rel, open(os.path.join(SMALL, rel), "rb").read()))
    return out


def test_archive_with_a_single_top_folder(tmp_path):
    make_archive(tmp_path / "m.tgz", small_members("model/"))
    assert nnefx.load(tmp_path / "m.tgz").graph.tensors["w"].data.shape == (2, 3)


def special(name, kind, **kw):
    info = tarfile.TarInfo(name)
    info.type = kind
    for k, v in kw.items():
        setattr(info, k, v)
    return info


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("member, message", [
    (("/etc/passwd.dat", b"x"), "absolute path"),
    (("../evil.dat", b"x"), "'..'"),
    (("layer/../../evil.dat", b"x"), "'..'"),
    ((special("link.dat", tarfile.SYMTYPE, linkname="/etc/passwd"), b""), "symbolic link"),
    ((special("hard.dat", tarfile.LNKTYPE, linkname="graph.nnef"), b""), "hard link"),
    ((special("dev.dat", tarfile.CHRTYPE, devmajor=1, devminor=3), b""), "device"),
    ((special("fifo", tarfile.FIFOTYPE), b""), "fifo"),
    (("mask.dat", b"dup"), "twice"),
])
def test_hostile_archive_members_are_refused(tmp_path, gz, member, message):
    path = tmp_path / ("m.tgz" if gz else "m.tar")
    make_archive(path, small_members() + [member], gz=gz)
    before = listing(tmp_path)
    with pytest.raises(NNEFXError, match=message) as info:
        nnefx.load(path)
    assert info.value.location.field.startswith("member")
    assert listing(tmp_path) == before  # nothing extracted anywhere


def test_absurd_member_sizes_are_refused_before_allocation(tmp_path):
    path = tmp_path / "m.tar"
    make_archive(path, small_members(), gz=False)
    data = bytearray(path.read_bytes())
    # Patch the size field (octal, offset 124) of the first header to 64 GiB.
    data[124:136] = b"%011o\0" % (64 << 30)
    data[148:156] = b"        "
    data[148:156] = b"%06o\0 " % sum(data[0:512])
    path.write_bytes(bytes(data))
    with pytest.raises(NNEFXError, match="claims"):
        nnefx.load(path)


def test_archive_without_graph_is_an_error(tmp_path):
    make_archive(tmp_path / "m.tgz", [("x.txt", b"hello")])
    with pytest.raises(NNEFXError, match="no graph.nnef"):
        nnefx.load(tmp_path / "m.tgz")


def test_not_an_archive(tmp_path):
    (tmp_path / "m.tgz").write_bytes(b"\x1f\x8bgarbage")
    (tmp_path / "n.tar").write_bytes(b"not a tar at all" * 10)
    for name in ("m.tgz", "n.tar"):
        with pytest.raises(NNEFXError) as info:
            nnefx.load(tmp_path / name)
        assert info.value.location is not None


# ---------------------------------------------------------------------------------------------
# atomic saving


def test_save_replaces_an_existing_model_folder(tmp_path):
    out = tmp_path / "out"
    nnefx.save(nnefx.load(SMALL), out)
    (out / "old.txt").write_text("stale")
    nnefx.save(nnefx.load(QUANTIZED), out)
    assert listing(out) == ["graph.nnef", "graph.quant", "w.dat"]
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_save_refuses_to_replace_a_folder_that_is_not_a_model(tmp_path):
    out = tmp_path / "docs"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    with pytest.raises(NNEFXError, match="not an NNEF model"):
        nnefx.save(nnefx.load(SMALL), out)
    assert listing(out) == ["keep.txt"]
    assert sorted(os.listdir(tmp_path)) == ["docs"]


def test_failed_save_leaves_no_partial_output(tmp_path):
    model = nnefx.load(SMALL)
    model.graph.tensors["b"].data = np.zeros((1, 4), np.float32)  # disagrees with declaration
    for target in ("out", "out.tgz", "out.tar"):
        with pytest.raises(NNEFXError, match="declared"):
            nnefx.save(model, tmp_path / target)
    assert os.listdir(tmp_path) == []


def test_save_in_place_over_the_loaded_folder(tmp_path):
    model_dir = copy_model(tmp_path)
    model = nnefx.load(model_dir)       # data memory-mapped (or read) from model_dir
    nnefx.save(model, model_dir)
    again = nnefx.load(model_dir)
    np.testing.assert_array_equal(again.graph.tensors["w"].data, model.graph.tensors["w"].data)
    assert sorted(os.listdir(tmp_path)) == ["model"]


def test_tensor_bytes_helper_matches_files():
    assert tensor_bytes(np.array([[True, False, True]])) == open(os.path.join(SMALL, "mask.dat"), "rb").read()


def test_sub_byte_quantized_variables_keep_their_width(tmp_path):
    model = copy_model(tmp_path, QUANTIZED)
    codes = np.array([[-4, 2], [0, 1], [7, -8], [3, 3]], np.int8)
    write_tensor(model / "w.dat", codes, item_type="qint", bits=4)
    loaded = nnefx.load(model)
    np.testing.assert_array_equal(loaded.graph.tensors["w"].data, codes)
    nnefx.save(loaded, tmp_path / "again")
    assert (tmp_path / "again" / "w.dat").read_bytes() == (model / "w.dat").read_bytes()
    assert read_tensor(tmp_path / "again" / "w.dat")[1] == {"bits": 4, "signed": True}


def test_unwritable_target_is_a_located_error(tmp_path):
    with pytest.raises(NNEFXError) as info:
        nnefx.save(nnefx.load(SMALL), tmp_path / "missing" / "parent" / "m.tgz")
    assert info.value.location.field == "file"


def test_folders_written_by_the_official_saver_load(tmp_path):
    nnef = pytest.importorskip("nnef")
    for src in (SMALL, QUANTIZED):
        out = str(tmp_path / os.path.basename(src))
        nnef.save_graph(nnef.load_graph(src), out)
        ours = nnefx.load(out)
        for _op, tensor in nnefx.load(src).graph.variables():
            np.testing.assert_array_equal(ours.graph.tensors[tensor.name].data, tensor.data)


def test_provisional_dialect_folder_with_provisional_tensor_file(tmp_path):
    src = os.path.join(FIXTURES, "provisional")
    model = nnefx.load(src)
    np.testing.assert_array_equal(model.graph.tensors["w"].data, np.ones((2, 3), np.float32))
    nnefx.save(model, tmp_path / "final")         # re-written in the final dialect and header
    assert (tmp_path / "final" / "graph.nnef").read_text().startswith("version 1.0;")
    assert read_tensor(tmp_path / "final" / "w.dat")[0].shape == (2, 3)
    assert len((tmp_path / "final" / "w.dat").read_bytes()) == 128 + 24


# ---------------------------------------------------------------------------------------------
# property: any set of variables survives every container, and the official loader agrees

_DTYPES = [np.float16, np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint16, np.bool_]
_labels = st.lists(st.text("abcxyz019_", min_size=1, max_size=4), min_size=1, max_size=3).map("/".join)


@st.composite
def variable_sets(draw):
    labels = draw(st.lists(_labels, min_size=1, max_size=4, unique_by=str.lower))
    out = []
    for label in labels:
        dtype = draw(st.sampled_from(_DTYPES))
        shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
        out.append((label, draw(hnp.arrays(dtype, shape))))
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(variable_sets())
def test_variables_survive_every_container(tmp_path, variables):
    b = GraphBuilder("g")
    b.external("x", shape=(1,))
    for i, (label, array) in enumerate(variables):
        b.output(b.variable(label, array), name=f"out{i}")
    model = b.build()
    work = tmp_path / "w"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    for target in ("folder", "m.tgz", "m.tar"):
        nnefx.save(model, work / target)
        loaded = nnefx.load(work / target)
        for label, array in variables:
            got = loaded.weights[label]
            assert got.dtype == array.dtype
            np.testing.assert_array_equal(got, array)
    nnef = pytest.importorskip("nnef")
    theirs = nnef.load_graph(str(work / "folder"))
    for _op, tensor in model.graph.variables():
        np.testing.assert_array_equal(theirs.tensors[tensor.name].data, tensor.data)
