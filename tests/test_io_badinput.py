"""Bad input: mutated tensor files and archives give NNEFXError with a location, nothing else.

Every mutation (truncation, flipped header bytes, huge extents, trailing bytes, hostile
archive members) must end either in a successful, self-consistent read or in an
:class:`NNEFXError` whose location names the file (and, for binaries, the field) — never
another exception, never a huge allocation, never a file written anywhere.
"""

from __future__ import annotations

import io
import os
import shutil
import struct
import tarfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nnefx
from nnefx import NNEFXError
from nnefx.io.binary import encode_tensor, read_tensor

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "io")
SMALL = os.path.join(FIXTURES, "small")

SEEDS = [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.array([[True, False, True, True, False, False, False, False, True]]),
    np.array([-1, 2, 3], np.int8),
    np.arange(24, dtype=np.uint16).reshape(2, 3, 4),
    np.array(1.5, np.float64),
]
VALID = [b"".join(bytes(c) for c in encode_tensor(a)) for a in SEEDS]
VALID.append(b"".join(bytes(c) for c in encode_tensor(np.arange(5, dtype=np.uint8), item_type="uint",
                                                       bits=3)))
VALID.append(b"".join(bytes(c) for c in encode_tensor(np.ones((2, 2), np.float32), header="provisional")))


def consistent(array: np.ndarray, data: bytes) -> None:
    assert isinstance(array, np.ndarray)
    assert array.nbytes <= 8 * 8 * len(data) + 64  # never more than the file can describe


def check_tensor_bytes(data: bytes) -> None:
    try:
        array, _quant = read_tensor(data, name="m.dat")
    except NNEFXError as exc:
        assert exc.location is not None and exc.location.file == "m.dat" and exc.location.field
        return
    consistent(array, data)


mutations = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 400)),
    st.tuples(st.just("flip"), st.integers(0, 140), st.integers(1, 255)),
    st.tuples(st.just("u32"), st.sampled_from([4, 8, 12, 16, 20, 40, 44, 48, 52]),
              st.sampled_from([0, 1, 2, 7, 8, 9, 63, 64, 65, 255, 1 << 16, 1 << 31, 0xFFFFFFFF])),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=16)),
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(range(len(VALID))), st.lists(mutations, min_size=1, max_size=3))
def test_mutated_tensor_files_give_located_errors(index, steps):
    data = bytearray(VALID[index])
    for step in steps:
        if step[0] == "truncate":
            del data[step[1]:]
        elif step[0] == "flip" and step[1] < len(data):
            data[step[1]] ^= step[2]
        elif step[0] == "u32" and step[1] + 4 <= len(data):
            struct.pack_into("<I", data, step[1], step[2])
        elif step[0] == "append":
            data += step[1]
    check_tensor_bytes(bytes(data))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 4), st.integers(1, 0xFFFFFFFF))
def test_huge_extents_never_allocate(tmp_path, dim, extent):
    data = bytearray(VALID[3])
    struct.pack_into("<I", data, 12 + 4 * min(dim, 2), extent)
    path = tmp_path / "h.dat"
    path.write_bytes(bytes(data))
    try:
        array, _ = read_tensor(path)
    except NNEFXError as exc:
        assert exc.location.file == str(path) and exc.location.field
    else:
        consistent(array, bytes(data))


# ---------------------------------------------------------------------------------------------
# archives


def archive_bytes(gz: bool, extra: list[tuple[tarfile.TarInfo, bytes]] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tar:
        for folder, _dirs, files in os.walk(SMALL):
            for name in sorted(files):
                full = os.path.join(folder, name)
                tar.add(full, arcname=os.path.relpath(full, SMALL))
        for info, data in extra:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buf.getvalue()


ARCHIVES = {gz: archive_bytes(gz) for gz in (True, False)}


def load_checked(tmp_path, name: str, data: bytes) -> None:
    """Load ``data`` as an archive; only success or a located NNEFXError; nothing written."""
    work = tmp_path / "work"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    path = work / name
    path.write_bytes(data)
    try:
        model = nnefx.load(path)
    except NNEFXError as exc:
        assert exc.location is not None and exc.location.file
        assert str(path) in str(exc)
    else:
        for _op, tensor in model.graph.variables():
            assert tensor.data is not None and tuple(tensor.data.shape) == tuple(tensor.shape)
    assert os.listdir(work) == [name]
    assert sorted(os.listdir(tmp_path)) == ["work"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.booleans(), st.data())
def test_mutated_archives_give_located_errors(tmp_path, gz, data):
    blob = bytearray(ARCHIVES[gz])
    kind = data.draw(st.sampled_from(["truncate", "flip", "flips"]))
    if kind == "truncate":
        del blob[data.draw(st.integers(0, len(blob) - 1)):]
    else:
        for _ in range(1 if kind == "flip" else data.draw(st.integers(2, 8))):
            pos = data.draw(st.integers(0, len(blob) - 1))
            blob[pos] ^= data.draw(st.integers(1, 255))
    load_checked(tmp_path, "m.tgz" if gz else "m.tar", bytes(blob))


hostile_names = st.one_of(
    st.builds(lambda p: "/" + p, st.sampled_from(["etc/x.dat", "tmp/graph.nnef", "w.dat"])),
    st.builds(lambda n, p: "../" * n + p, st.integers(1, 3), st.sampled_from(["x.dat", "graph.nnef"])),
    st.builds(lambda p: "layer/../../" + p, st.sampled_from(["x.dat", "y"])),
)


@st.composite
def hostile_members(draw):
    kind = draw(st.sampled_from(["name", "symlink", "hardlink", "device", "fifo"]))
    if kind == "name":
        info = tarfile.TarInfo(draw(hostile_names))
        info.size = 4
        return info, b"data"
    info = tarfile.TarInfo(draw(st.sampled_from(["mask2.dat", "graph.quant", "layer/z.dat", "x"])))
    info.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE, "device": tarfile.CHRTYPE,
                 "fifo": tarfile.FIFOTYPE}[kind]
    info.linkname = draw(st.sampled_from(["/etc/passwd", "../../outside", "graph.nnef"]))
    return info, b""


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.booleans(), hostile_members())
def test_hostile_members_are_refused(tmp_path, gz, member):
    blob = archive_bytes(gz, [member])
    work = tmp_path / "w"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    path = work / ("m.tgz" if gz else "m.tar")
    path.write_bytes(blob)
    with pytest.raises(NNEFXError) as info:
        nnefx.load(path)
    assert info.value.location.field.startswith("member")
    assert os.listdir(work) == [path.name]
    assert not os.path.exists(tmp_path / "outside")


def test_fifos_are_refused_without_blocking(tmp_path):
    model = tmp_path / "m"
    shutil.copytree(SMALL, model)
    os.unlink(model / "mask.dat")
    os.mkfifo(model / "mask.dat")
    with pytest.raises(NNEFXError, match="not a regular file"):
        nnefx.load(model)
    os.mkfifo(tmp_path / "x.tgz")
    with pytest.raises(NNEFXError, match="not a regular file"):
        nnefx.load(tmp_path / "x.tgz")
    with pytest.raises(NNEFXError, match="not a regular file"):
        read_tensor(model / "mask.dat")


# ---------------------------------------------------------------------------------------------
# saves: a model that cannot be written leaves the target folder exactly as it was


@st.composite
def broken_models(draw):
    model = nnefx.load(SMALL)
    name = draw(st.sampled_from(["w", "b", "mask"]))
    tensor = model.graph.tensors[name]
    kind = draw(st.sampled_from(["shape", "dtype", "none", "label", "rank"]))
    if kind == "shape":
        tensor.data = np.zeros(tuple(d + 1 for d in tensor.data.shape), tensor.data.dtype)
    elif kind == "dtype":
        tensor.data = np.zeros(tensor.data.shape, np.complex64 if name != "mask" else np.float32)
    elif kind == "none":
        tensor.data = None
    elif kind == "rank":
        tensor.data = np.zeros((1,) * 9, np.float32)
    else:
        op = next(op for op, t in model.graph.variables() if t.name == name)
        op.attribs["label"] = draw(st.sampled_from(["../up", "/abs//x", "a/./b", "", "sp ace"]))
    return model


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(broken_models(), st.sampled_from(["out", "out.tgz", "out.tar", "existing"]))
def test_failed_saves_leave_nothing_behind(tmp_path, model, target):
    work = tmp_path / "s"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    nnefx.save(nnefx.load(SMALL), work / "existing")
    before = {p: open(os.path.join(work, p), "rb").read()
              for p in (os.path.relpath(os.path.join(d, f), work)
                        for d, _dirs, files in os.walk(work) for f in files)}
    with pytest.raises(NNEFXError) as info:
        nnefx.save(model, work / target)
    assert info.value.location is not None
    after = {p: open(os.path.join(work, p), "rb").read()
             for p in (os.path.relpath(os.path.join(d, f), work)
                       for d, _dirs, files in os.walk(work) for f in files)}
    assert after == before
    assert sorted(os.listdir(work)) == ["existing"]
