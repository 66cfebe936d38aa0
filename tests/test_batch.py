"""``nnefx batch``: shards equal to a Session's outputs, resumable, nothing lost — in process and on Ray."""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import nnefx
import nnefx.batch as batch
from nnefx.diagnostics import NNEFXError
from nnefx.io.builder import GraphBuilder
from nnefx.runtime.session import Session

DIGITS = os.path.join(os.path.dirname(__file__), "..", "examples", "digits", "model")


def _rows(folder, count, seed=0, shape=(1, 8, 8)):
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(count):
        np.save(os.path.join(folder, f"row{i:04d}.npy"), rng.standard_normal(shape).astype(np.float32))
    return folder


def _all_outputs(folder):
    manifest = json.load(open(os.path.join(folder, "manifest.json")))
    keys, outs = [], []
    for index in sorted(manifest["shards"], key=int):
        k, o = batch.read_shard(folder, manifest["shards"][index])
        keys += k
        outs.append(o["probabilities"] if "probabilities" in o else next(iter(o.values())))
    return keys, np.concatenate(outs)


def test_outputs_equal_a_session_on_the_same_batches(tmp_path):
    src = _rows(tmp_path / "rows", 37)
    summary = batch.run(DIGITS, str(src), str(tmp_path / "out"), batch_size=5, shard_rows=10)
    assert (summary.rows, summary.shards, summary.failures) == (37, 4, 0)
    keys, got = _all_outputs(tmp_path / "out")
    assert keys == sorted(os.listdir(src))
    session = Session(nnefx.load(DIGITS), input_shapes={"input": (None, 1, 8, 8)})
    rows = np.stack([np.load(src / k) for k in keys])
    expected = np.concatenate([session.run({"input": rows[s:s + 5]})["probabilities"]
                               for shard in range(0, 37, 10) for s in range(shard, min(shard + 10, 37), 5)])
    np.testing.assert_array_equal(got, expected)


def test_bad_rows_are_kept_in_the_errors_file_and_the_job_goes_on(tmp_path):
    src = _rows(tmp_path / "rows", 6)
    np.save(src / "row0002.npy", np.zeros((3, 3), np.float32))
    (src / "row0004.npy").write_bytes(b"not numpy")
    np.save(src / "row0005.npy", np.zeros((1, 8, 8), np.int32))
    summary = batch.run(DIGITS, str(src), str(tmp_path / "out"), batch_size=4)
    assert summary.failures == 3
    errors = [json.loads(line) for line in open(tmp_path / "out" / "errors.jsonl")]
    assert [e["key"] for e in errors] == ["row0002.npy", "row0004.npy", "row0005.npy"]
    assert "shape [1, 8, 8] per row, got [3, 3]" in errors[0]["error"]
    assert "not a readable numpy file" in errors[1]["error"]
    assert "must be scalar data, got int32" in errors[2]["error"]
    keys, got = _all_outputs(tmp_path / "out")
    assert keys == ["row0000.npy", "row0001.npy", "row0003.npy"] and got.shape == (3, 10)
    with pytest.raises(NNEFXError, match="input 'row0002.npy': input 'input' must have shape"):
        batch.run(DIGITS, str(src), str(tmp_path / "out2"), batch_size=4, fail_fast=True)


def test_rerun_skips_verified_shards_and_redoes_changed_ones(tmp_path):
    src = _rows(tmp_path / "rows", 30)
    out = tmp_path / "out"
    batch.run(DIGITS, str(src), str(out), batch_size=5, shard_rows=10)
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    again = batch.run(DIGITS, str(src), str(out), batch_size=5, shard_rows=10)
    assert again.skipped == 3
    (out / "shard-00001.probabilities.npy").write_bytes(b"tampered")
    (out / ".nnefx-leftover.tmp").write_bytes(b"from a killed run")
    third = batch.run(DIGITS, str(src), str(out), batch_size=5, shard_rows=10)
    assert third.skipped == 2
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before


def test_another_jobs_folder_is_refused_unless_overwrite(tmp_path):
    src = _rows(tmp_path / "rows", 12)
    out = tmp_path / "out"
    batch.run(DIGITS, str(src), str(out), batch_size=4)
    with pytest.raises(NNEFXError, match=r"another job \(changed: batch_size, shard_rows\).*--overwrite"):
        batch.run(DIGITS, str(src), str(out), batch_size=3)
    with pytest.raises(NNEFXError, match=r"changed: backend"):
        batch.run(DIGITS, str(src), str(out), batch_size=4, backend="formal")
    summary = batch.run(DIGITS, str(src), str(out), batch_size=3, overwrite=True)
    assert summary.skipped == 0 and json.load(open(out / "manifest.json"))["job"]["batch_size"] == 3
    stray = tmp_path / "stray"
    stray.mkdir()
    (stray / "shard-00000.keys.npy").write_bytes(b"x")
    with pytest.raises(NNEFXError, match="shard files without a manifest"):
        batch.run(DIGITS, str(src), str(stray))


def test_parquet_in_and_out(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((23, 1, 8, 8)).astype(np.float32)
    table = pa.table({"pixels": [r.tolist() for r in rows], "id": list(range(23))})
    pq.write_table(table, tmp_path / "data.parquet", row_group_size=7)
    with pytest.raises(NNEFXError, match="no column 'input'"):
        batch.run(DIGITS, str(tmp_path / "data.parquet"), str(tmp_path / "bad"))
    summary = batch.run(DIGITS, str(tmp_path / "data.parquet"), str(tmp_path / "out"), batch_size=4,
                        shard_rows=9, columns={"input": "pixels"}, output_format="parquet")
    assert summary.shards == 3 and summary.failures == 0
    keys, got = _all_outputs(tmp_path / "out")
    assert keys == [str(i) for i in range(23)]
    session = Session(nnefx.load(DIGITS), input_shapes={"input": (None, 1, 8, 8)})
    np.testing.assert_allclose(got, session.run({"input": rows})["probabilities"], rtol=1e-5, atol=1e-6)
    out_table = pq.read_table(tmp_path / "out" / "shard-00000.parquet")
    assert out_table.column_names == ["key", "probabilities"]


def test_a_parquet_shard_whose_every_row_failed_is_written_empty(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    flat = np.zeros((5, 64), np.float32)   # 64 items per row where the model takes [1, 8, 8]
    pq.write_table(pa.table({"input": [r.tolist() for r in flat]}), tmp_path / "flat.parquet")
    summary = batch.run(DIGITS, str(tmp_path / "flat.parquet"), str(tmp_path / "out"), output_format="parquet")
    assert summary.failures == 5
    assert pq.read_table(tmp_path / "out" / "shard-00000.parquet").num_rows == 0


def test_images_with_a_preprocessing_spec(tmp_path):
    image = pytest.importorskip("PIL.Image")
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, (4, 16, 16), dtype=np.uint8)
    for i, p in enumerate(pixels):
        image.fromarray(p, mode="L").save(folder / f"img{i}.png")
    (folder / "broken.png").write_bytes(b"\x89PNG not really")
    summary = batch.run(DIGITS, str(folder), str(tmp_path / "out"), preprocess="mode=L;size=8,8;scale=0.0625")
    assert summary.failures == 1
    keys, got = _all_outputs(tmp_path / "out")
    assert keys == [f"img{i}.png" for i in range(4)]
    first = image.fromarray(pixels[0], mode="L").resize((8, 8), image.Resampling.BILINEAR)
    row = (np.asarray(first, np.float32) * np.float32(0.0625))[None, None]
    expected = Session(nnefx.load(DIGITS)).run({"input": row})["probabilities"][0]
    np.testing.assert_allclose(got[0], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(NNEFXError, match="unknown preprocessing key"):
        batch.run(DIGITS, str(folder), str(tmp_path / "x"), preprocess="size=8,8;colour=red")


def test_bad_sources_and_addresses(tmp_path):
    with pytest.raises(NNEFXError, match="no such file or folder"):
        batch.run(DIGITS, str(tmp_path / "missing"), str(tmp_path / "out"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NNEFXError, match="no .npy, .npz, .parquet or image files"):
        batch.run(DIGITS, str(tmp_path / "empty"), str(tmp_path / "out"))
    src = _rows(tmp_path / "rows", 2)
    started = time.monotonic()
    with pytest.raises(NNEFXError, match="does not answer"):
        batch.run(DIGITS, str(src), str(tmp_path / "out"), ray="127.0.0.1:1")
    assert time.monotonic() - started < 30
    assert not os.listdir(tmp_path / "out") or set(os.listdir(tmp_path / "out")) <= {"manifest.json"}


def test_cli(tmp_path):
    src = _rows(tmp_path / "rows", 9)
    cmd = [sys.executable, "-m", "nnefx", "batch", DIGITS, "--inputs", str(src), "--output", str(tmp_path / "out"),
           "--batch-size", "4"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "batch: 9 rows, 1 shards, 0 failures" in done.stdout
    bad = subprocess.run(cmd[:-2] + ["--batch-size", "0"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    other = subprocess.run(cmd[:-2] + ["--batch-size", "3"], capture_output=True, text=True)
    assert other.returncode == 1 and "another job" in other.stderr and "Traceback" not in other.stderr


# ---- Ray ---------------------------------------------------------------------------------

def _slow_model(folder):
    """A model slow enough (tens of ms per shard) to kill a worker in the middle of a job."""
    rng = np.random.default_rng(7)
    b = GraphBuilder("slow")
    x = b.external("x", [1, 384])
    w = b.variable("w", (rng.standard_normal((384, 384)) / 20).astype(np.float32))
    for _ in range(24):
        x = b.tanh(b.matmul(x, w))
    b.output(x, "y")
    nnefx.save(b.build(), str(folder))
    return str(folder)


def _ray_map_workers():
    """PIDs of the Ray Data actor processes (Ray titles them ``ray::MapWorker(MapBatches(BatchWorker))``)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if f.read().startswith(b"ray::MapWorker"):
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.data")
    env = os.environ.get("PYTHONPATH", "")
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [os.path.abspath(src), env]))}})
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_workers_give_the_in_process_files_even_when_one_is_killed(tmp_path, local_ray):
    model = _slow_model(tmp_path / "model")
    src = _rows(tmp_path / "rows", 400, shape=(1, 384))
    # Ray gives each worker one CPU, so its BLAS runs one thread; the reference does the same
    # (a product's summation order, and so its last bit, depends on the thread split).
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        reference = batch.run(model, str(src), str(tmp_path / "ref"), batch_size=8, shard_rows=16)
    out = tmp_path / "out"
    result = {}
    job = threading.Thread(target=lambda: result.setdefault(
        "summary", batch.run(model, str(src), str(out), batch_size=8, shard_rows=16, ray="local", workers=2)))
    job.start()
    # Mid-job for sure: as soon as the first shard is written, both workers are frozen
    # (SIGSTOP), shards are seen still to do, and one worker is killed (its shard in flight
    # must be rerun) while the other goes on.
    killed, stopped, restarted = None, [], set()
    deadline = time.monotonic() + 120
    try:
        while killed is None and job.is_alive() and time.monotonic() < deadline:
            workers = _ray_map_workers()
            if workers and out.exists() and any(n.startswith("shard-") and not n.endswith(".tmp") for n in os.listdir(out)):
                for pid in workers:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.append(pid)
                written = {n.split(".")[0] for n in os.listdir(out) if n.startswith("shard-")}
                assert len(written) < 24, "the job was nearly done before a worker could be stopped"
                killed = workers[0]
                os.kill(killed, signal.SIGKILL)
            time.sleep(0.01)
    finally:
        for pid in stopped:
            if pid != killed:
                os.kill(pid, signal.SIGCONT)
    while job.is_alive() and time.monotonic() < deadline:
        restarted |= set(_ray_map_workers()) - set(stopped)
        time.sleep(0.05)
    job.join(timeout=300)
    assert killed is not None, "the job ended before a worker could be killed"
    assert restarted, "Ray did not start a worker in place of the killed one"
    summary = result["summary"]
    assert summary.shards == reference.shards == 25 and summary.failures == 0
    names = sorted(n for n in os.listdir(tmp_path / "ref") if n.startswith("shard-"))
    assert sorted(n for n in os.listdir(out) if n.startswith("shard-")) == names
    for name in names:
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name


@pytest.mark.slow
def test_ray_fail_fast_stops_the_workers_and_lists_no_failed_shard(tmp_path, local_ray):
    src = _rows(tmp_path / "rows", 40)
    np.save(src / "row0013.npy", np.zeros((2, 2), np.float32))
    out = tmp_path / "out"
    with pytest.raises(NNEFXError, match=r"input 'row0013.npy': input 'input' must have shape .*--fail-fast") as info:
        batch.run(DIGITS, str(src), str(out), batch_size=4, shard_rows=8, ray="local", workers=2, fail_fast=True)
    assert "Traceback" not in str(info.value) and "ray" not in str(info.value).lower()
    manifest = json.load(open(out / "manifest.json"))
    assert "1" not in manifest["shards"] and "run" not in manifest
    # Ray stops the actors asynchronously: one killed mid-write may leave a temporary (never a
    # listed shard); the next run removes it.
    assert all(_gone(p, 60.0) for p in _ray_map_workers())
    for entry in manifest["shards"].values():
        assert all((out / name).exists() for name in entry["files"])


@pytest.mark.slow
def test_a_ray_data_worker_refuses_a_folder_that_is_not_the_jobs(tmp_path, local_ray):
    from nnefx.batch.job import ShardRunner, _ray_results, open_source
    from nnefx.batch.shards import OutputFolder, file_names

    src = _rows(tmp_path / "rows", 6)
    runner = ShardRunner(DIGITS, {}, "fast", 4, None, 4)
    runner.spec = open_source(str(src), runner.input_names)
    out = tmp_path / "out"
    OutputFolder(str(out), {"job": 1}).start()
    # As a worker on a machine that sees another folder at this path: the token differs.
    runner.target(str(out), "another-run", file_names(runner.output_names), "npy", False)
    with pytest.raises(NNEFXError, match="is not the driver's .* storage shared with the driver") as info:
        list(_ray_results(1, [0, 1], runner))
    assert "Traceback" not in str(info.value)
    assert sorted(n for n in os.listdir(out) if not n.startswith(".nnefx-")) == ["manifest.json"]


def _gone(pid, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not os.path.exists(f"/proc/{pid}"):
            return True
        time.sleep(0.05)
    return False


def test_a_worker_writes_only_into_its_drivers_folder(tmp_path):
    from nnefx.batch.job import BatchWorker, ShardRunner, open_source
    from nnefx.batch.shards import OutputFolder, file_names

    src = _rows(tmp_path / "rows", 3)
    runner = ShardRunner(DIGITS, {}, "fast", 4, None, 4)
    spec = open_source(str(src), runner.input_names)
    folder = OutputFolder(str(tmp_path / "out"), {"job": 1})
    run = folder.start()
    target = {"output": str(tmp_path / "out"), "run": run, "names": file_names(runner.output_names),
              "output_format": "npy", "fail_fast": False}
    args = {"model": DIGITS, "load_options": {}, "backend": "fast", "batch_size": 4, "spec": spec, "shard_rows": 4,
            "target": dict(target, run="another-run")}
    with pytest.raises(NNEFXError, match="not the driver's .* storage shared with the driver"):
        BatchWorker(args).write(0)
    assert sorted(os.listdir(tmp_path / "out")) == ["manifest.json"]
    index, digests, errors = BatchWorker(dict(args, target=target)).write(0)
    assert (index, errors) == (0, []) and sorted(digests) == ["shard-00000.keys.npy", "shard-00000.probabilities.npy"]
    # The Ray Data call: shard numbers in, only metadata out; the files are the in-process ones.
    worker = BatchWorker(dict(args, target=target))
    (done,) = worker({"index": np.asarray([0])})["done"]
    assert json.loads(done) == {"index": 0, "files": digests, "errors": []}
    batch.run(DIGITS, str(src), str(tmp_path / "ref"), batch_size=4, shard_rows=4)
    for name in digests:
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()
    broken = BatchWorker(dict(args, model=str(tmp_path / "nowhere.onnx"), target=target))
    with pytest.raises(NNEFXError, match="nowhere.onnx"):
        broken.write(0)


def test_an_engine_backend_gives_the_same_rows(tmp_path):
    pytest.importorskip("onnxruntime")
    src = _rows(tmp_path / "rows", 21)
    batch.run(DIGITS, str(src), str(tmp_path / "fast"), batch_size=4)
    summary = batch.run(DIGITS, str(src), str(tmp_path / "ort"), batch_size=4, backend="onnxruntime")
    assert summary.backend == "onnxruntime" and summary.failures == 0
    keys_fast, fast = _all_outputs(tmp_path / "fast")
    keys_ort, ort = _all_outputs(tmp_path / "ort")
    assert keys_fast == keys_ort
    np.testing.assert_allclose(ort, fast, rtol=1e-5, atol=1e-6)
