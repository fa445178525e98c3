"""The client against a real `lockstep local` cluster with TLS (conftest.py's `cluster`).

The tests run in this file's order on one two-worker cluster: a short job to its end first,
then a long one that is cancelled while it runs. Every wait has a deadline.
"""

import copy
import json
import os
import re
import subprocess
import sys

import grpc
import numpy as np
import pytest

import lockstep
from lockstep.v1 import cluster_pb2

JOB_TIMEOUT_S = 120


def digits_job(cluster, name, steps):
    """The bundled digits MLP (examples/jobs/digits_mlp.json's model) as a dict, `steps` long."""
    return {
        "name": name,
        "numWorkers": 2,
        "model": {
            "inputShape": [64], "seed": 7, "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
            "layers": [{"name": "hidden", "dense": {"units": 32}}, {"relu": {}},
                       {"name": "logits", "dense": {"units": 10}}],
        },
        "optimizer": {"adam": {}, "learningRate": {"constant": {"value": 0.01}}},
        "data": {"train": {"files": [cluster.digits_csv], "format": "CSV", "featureScale": 0.0625},
                 "evalFraction": 0.2},
        "globalBatchSize": 48,
        "steps": steps,
        "checkpoint": {"dir": os.path.join(cluster.work_dir, "checkpoints", name)},
        "summaries": {"dir": os.path.join(cluster.work_dir, "summaries", name)},
        "seed": 7,
    }


@pytest.fixture
def client(cluster):
    # Resolved as the CLI would be with `--config=<the file lockstep local wrote>`.
    with lockstep.Client(env={"LOCKSTEP_CONFIG": cluster.config}) as c:
        yield c


def test_status_shows_both_workers(client):
    status = client.status()
    alive = [t for t in status.tasks if t.task.type == "worker" and t.state == cluster_pb2.ALIVE]
    assert len(alive) == 2, status
    assert not status.insecure


def test_submit_dict_watch_to_success_then_describe(client, cluster, tmp_path):
    spec = digits_job(cluster, "py-short", steps=30)
    job = client.submit(spec)
    assert job.startswith("job-")
    events = list(client.watch(job, timeout=JOB_TIMEOUT_S))
    last = events[-1]
    assert last.ended and last.state == "SUCCEEDED", (last.reason, events)
    assert all(not e.ended for e in events[:-1])
    assert last.step == 30 and last.total_steps == 30
    assert last.loss > 0 and 0.0 <= last.eval_accuracy <= 1.0
    steps = [e.step for e in events if e.state == "RUNNING"]
    assert steps == sorted(steps)

    described = client.describe(job)
    assert lockstep.state_name(described.job.state) == "SUCCEEDED"
    assert described.job.progress.step == 30
    assert described.spec == lockstep.load_spec(spec)  # the spec exactly as submitted
    assert job in [j.id for j in client.jobs()]
    assert client.jobs(limit=1)[0].id == job  # newest first
    lines = list(client.logs(job))
    assert lines and {line.task for line in lines} == {"worker/0", "worker/1"}
    assert {line.task for line in client.logs(job, worker=1)} == {"worker/1"}
    followed = list(client.logs(job, follow=True, timeout=30))  # ends: the job has ended
    assert sorted((l.task, l.seq, l.text) for l in followed) == sorted(
        (l.task, l.seq, l.text) for l in lines)
    # Its final checkpoint, read with NumPy: the model's variables at their shapes.
    path = described.job.progress.checkpoint_path
    assert path.startswith(os.path.join(cluster.work_dir, "checkpoints", "py-short")), path
    assert lockstep.read_checkpoint(path).global_step == 30
    weights = lockstep.load_weights(path)
    assert {name: w.shape for name, w in weights.items()} == {
        "hidden/kernel": (64, 32), "hidden/bias": (32,),
        "logits/kernel": (32, 10), "logits/bias": (10,)}
    assert all(np.isfinite(w).all() and w.dtype == np.float32 for w in weights.values())
    assert np.abs(weights["logits/bias"]).sum() > 0  # trained: biases start at zero
    slots = lockstep.load_weights(path, with_optimizer_state=True)
    assert slots["hidden/kernel/adam_m"].shape == (64, 32)
    assert set(weights) < set(slots)
    damaged = tmp_path / "damaged.lsckpt"
    data = bytearray(open(path, "rb").read())
    data[-1] ^= 0xFF
    damaged.write_bytes(bytes(data))
    with pytest.raises(lockstep.CheckpointError, match="payload CRC mismatch"):
        lockstep.load_weights(str(damaged))

    # A finished job cannot be cancelled.
    with pytest.raises(lockstep.FailedPreconditionError) as e:
        client.cancel(job)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_cancel_a_long_job_from_a_json_file(client, cluster, tmp_path):
    path = tmp_path / "long.json"
    path.write_text(json.dumps(digits_job(cluster, "py-long", steps=1_000_000)))
    job = client.submit(str(path))
    events = client.watch(job, timeout=JOB_TIMEOUT_S)
    for event in events:  # until it has trained a step: it really runs
        assert not event.ended, (event.state, event.reason)
        if event.state == "RUNNING" and event.step > 0:
            break
    events.close()
    record = client.cancel(job, reason="python client test")
    assert record.id == job
    final = client.wait(job, timeout=30)
    assert lockstep.state_name(final.state) == "CANCELLED"
    assert "python client test" in final.reason
    assert 0 < final.progress.step < 1_000_000


def test_bad_spec_names_the_field(client, cluster):
    spec = lockstep.load_spec(digits_job(cluster, "py-bad", steps=10))
    spec.global_batch_size = 0
    with pytest.raises(lockstep.InvalidArgumentError) as e:
        client.submit(spec)  # a JobSpec message
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.field == "global_batch_size" and e.value.rpc == "SubmitJob"
    assert "must be > 0" in e.value.details

    bad = digits_job(cluster, "py-bad", steps=10)
    bad["model"]["layers"][0]["dense"]["units"] = 0
    with pytest.raises(lockstep.InvalidArgumentError) as e:
        client.submit(bad)
    assert e.value.field == "model.layers[0].dense.units", e.value

    bad = copy.deepcopy(digits_job(cluster, "py-bad", steps=10))
    bad["epochs"] = 3
    with pytest.raises(lockstep.InvalidArgumentError) as e:
        client.submit(bad)
    assert e.value.fields == ("steps", "epochs"), e.value


def test_viewer_token_is_refused_on_submit(cluster):
    viewer = lockstep.Client(coordinator=cluster.address, ca=cluster.ca,
                             token=cluster.viewer_token, env={})
    with viewer:
        assert viewer.jobs() is not None  # viewers read
        with pytest.raises(lockstep.PermissionDeniedError) as e:
            viewer.submit(digits_job(cluster, "py-viewer", steps=10))
        assert e.value.code == grpc.StatusCode.PERMISSION_DENIED
        assert "Pass a token" in str(e.value)


def test_unknown_token_and_unknown_job(cluster, client):
    with lockstep.Client(cluster.address, cluster.ca, "not-a-token", env={}) as stranger:
        with pytest.raises(lockstep.UnauthenticatedError):
            stranger.jobs()
    with pytest.raises(lockstep.NotFoundError) as e:
        client.describe("job-999999")
    assert "job-999999" in str(e.value)
    with pytest.raises(lockstep.NotFoundError):
        list(client.watch("job-999999", timeout=10))


def read_safetensors(path):
    """A safetensors file by its documented layout, with no Lockstep code: {name: ndarray}."""
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    dtypes = {"F32": np.float32, "F64": np.float64, "I32": np.int32, "I64": np.int64}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        out[name] = np.frombuffer(body[begin:end], dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return out, header.get("__metadata__", {})


def test_export_a_finished_job_through_the_coordinator_as_a_viewer(client, cluster, tmp_path):
    job = client.submit(digits_job(cluster, "py-export", steps=20))
    assert lockstep.state_name(client.wait(job, timeout=JOB_TIMEOUT_S).state) == "SUCCEEDED"
    chief = lockstep.load_weights(client.describe(job).job.progress.checkpoint_path,
                                  with_optimizer_state=True)
    with lockstep.Client(coordinator=cluster.address, ca=cluster.ca,
                         token=cluster.viewer_token, env={}) as viewer:
        seen = []
        npz = viewer.export(job, format="npz", output=str(tmp_path / "model.npz"),
                            progress=lambda got, total: seen.append((got, total)))
        assert seen and seen[-1][0] == seen[-1][1] > 0, seen
        with np.load(npz) as exported:
            assert sorted(exported.files) == ["hidden/bias", "hidden/kernel", "logits/bias",
                                              "logits/kernel"]
            for name in exported.files:  # bitwise the chief's checkpoint
                assert exported[name].tobytes() == chief[name].tobytes(), name
        st = viewer.export(job, format="safetensors", output=str(tmp_path / "all.safetensors"),
                           with_optimizer_state=True)
        tensors, metadata = read_safetensors(st)
        assert set(tensors) == set(chief)
        for name, w in tensors.items():
            assert w.tobytes() == chief[name].tobytes(), name
        assert metadata["step"] == "20" and metadata["job_id"] == job
        # The checkpoint itself, fetched: a whole .lsckpt of the job.
        fetched = viewer.fetch_checkpoint(job, str(tmp_path / "fetched.lsckpt"))
        assert lockstep.read_checkpoint(fetched).global_step == 20
        with pytest.raises(lockstep.FailedPreconditionError, match="no checkpoint of step 7"):
            viewer.fetch_checkpoint(job, str(tmp_path / "none.lsckpt"), step=7)
        assert not os.path.exists(tmp_path / "none.lsckpt")
        with pytest.raises(lockstep.NotFoundError, match="job-999999"):
            viewer.export("job-999999", format="npz", output=str(tmp_path / "x.npz"))
        with pytest.raises(lockstep.InvalidArgumentError, match="unknown format"):
            viewer.export(job, format="pickle", output=str(tmp_path / "x.pickle"))


def test_readme_example_trains_and_loads_the_weights(cluster):
    """python/examples/train_digits.py (the README's worked example), as a user runs it."""
    env = dict(os.environ, LOCKSTEP_CONFIG=cluster.config,
               PYTHONPATH=os.pathsep.join(sys.path))
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, os.path.join(repo, "python/examples/train_digits.py")],
                         cwd=repo, env=env, capture_output=True, text=True,
                         timeout=JOB_TIMEOUT_S)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "SUCCEEDED: test accuracy 0.9" in run.stdout, run.stdout
    assert re.search(r"^step +\d+/2000  loss \d", run.stdout, re.M), run.stdout
    assert "hidden/kernel (64, 128) float32" in run.stdout, run.stdout
    assert re.search(r"^exported job-\d+ as .*digits-from-python\.npz", run.stdout, re.M), \
        run.stdout
