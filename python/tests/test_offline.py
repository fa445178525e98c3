"""What the client decides without a coordinator: credentials, specs, errors."""

import json

import grpc
import pytest

import lockstep
import lockstep.checkpoint
from lockstep import config
from lockstep.errors import from_rpc_error, parse_fields


def write(path, text):
    path.write_text(text)
    return str(path)


@pytest.fixture
def ca(tmp_path):
    return write(tmp_path / "ca.crt", "not a real certificate; only its existence is checked\n")


def resolve(env, **args):
    full = dict(coordinator=None, ca=None, token=None, cert=None, key=None, server_name=None,
                insecure=None, config=None)
    full.update(args)
    return config.resolve(full, env)


class TestResolve:
    def test_argument_then_environment_then_config_file(self, tmp_path, ca):
        cfg = write(tmp_path / "config", f"# a comment\ncoordinator: file:1\nca: {ca}\n"
                                         "token: file-token\nserver_name: file-name\n")
        env = {"LOCKSTEP_CONFIG": cfg, "LOCKSTEP_TOKEN": "env-token"}
        c = resolve(env, coordinator="arg:2")
        assert (c.address, c.token, c.ca, c.server_name) == ("arg:2", "env-token", ca, "file-name")
        assert c.config_file == cfg and not c.insecure
        assert resolve(env).address == "file:1"
        env["LOCKSTEP_COORDINATOR"] = "env:3"
        assert resolve(env).address == "env:3"
        assert resolve(env, coordinator="arg:2", token="arg-token").token == "arg-token"

    def test_default_file_under_xdg_then_home(self, tmp_path, ca):
        (tmp_path / "xdg" / "lockstep").mkdir(parents=True)
        write(tmp_path / "xdg" / "lockstep" / "config", f"coordinator: xdg:1\nca: {ca}\n")
        (tmp_path / "home" / ".config" / "lockstep").mkdir(parents=True)
        write(tmp_path / "home" / ".config" / "lockstep" / "config", f"coordinator: home:1\nca: {ca}\n")
        home = str(tmp_path / "home")
        assert resolve({"HOME": home}).address == "home:1"
        assert resolve({"HOME": home, "XDG_CONFIG_HOME": str(tmp_path / "xdg")}).address == "xdg:1"
        # A missing default file is no error; the address defaults as the CLI's.
        c = resolve({"HOME": str(tmp_path / "nobody")}, ca=ca)
        assert c.address == "127.0.0.1:7000" and c.config_file == ""

    def test_named_config_file_must_exist(self, tmp_path):
        with pytest.raises(lockstep.ConfigError, match="cannot read") as e:
            resolve({"LOCKSTEP_CONFIG": str(tmp_path / "missing")})
        assert e.value.code == grpc.StatusCode.NOT_FOUND
        with pytest.raises(lockstep.ConfigError):
            resolve({}, config=str(tmp_path / "missing"))

    def test_bad_config_line_is_named(self, tmp_path):
        cfg = write(tmp_path / "config", "coordinator: a:1\ntokn: x\n")
        with pytest.raises(lockstep.ConfigError, match=r"line 2: .*got \"tokn: x\"") as e:
            resolve({"LOCKSTEP_CONFIG": cfg})
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT

    def test_tls_needs_a_readable_ca_unless_insecure(self, tmp_path, ca):
        with pytest.raises(lockstep.ConfigError, match="ca: the cluster CA"):
            resolve({})
        with pytest.raises(lockstep.ConfigError, match="cannot read") as e:
            resolve({}, ca=str(tmp_path / "missing.crt"))
        assert e.value.code == grpc.StatusCode.NOT_FOUND
        with pytest.raises(lockstep.ConfigError, match="cert and key go together"):
            resolve({}, ca=ca, cert=ca)
        assert resolve({"LOCKSTEP_INSECURE": "1"}).insecure
        assert resolve({"LOCKSTEP_INSECURE": "true"}, insecure=False, ca=ca).insecure is False


class TestLoadSpec:
    SPEC = {"name": "n", "globalBatchSize": 8, "steps": 3, "model": {"inputShape": [4]}}

    def test_dict_path_and_message_agree(self, tmp_path):
        from_dict = lockstep.load_spec(self.SPEC)
        from_file = lockstep.load_spec(write(tmp_path / "job.json", json.dumps(self.SPEC)))
        from_message = lockstep.load_spec(from_dict)
        assert from_dict == from_file == from_message
        assert from_dict.global_batch_size == 8 and list(from_dict.model.input_shape) == [4]
        # The proto's field names are accepted too, and to_dict gives them back.
        assert lockstep.load_spec({"global_batch_size": 8}).global_batch_size == 8
        assert lockstep.to_dict(from_dict)["global_batch_size"] == "8"  # int64: a string in JSON

    def test_unknown_field_and_bad_file(self, tmp_path):
        with pytest.raises(lockstep.InvalidArgumentError, match="globalBatchSiz") as e:
            lockstep.load_spec({"globalBatchSiz": 8})
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(lockstep.InvalidArgumentError, match="job.json: not a valid job spec"):
            lockstep.load_spec(write(tmp_path / "job.json", "{not json"))
        with pytest.raises(lockstep.NotFoundError, match="cannot read the job file"):
            lockstep.load_spec(str(tmp_path / "missing.json"))
        with pytest.raises(TypeError):
            lockstep.load_spec(42)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class TestErrors:
    @pytest.mark.parametrize("message, fields", [
        ("global_batch_size: 0 must be > 0", ("global_batch_size",)),
        ("model.layers[2].dense.units: 0 must be > 0", ("model.layers[2].dense.units",)),
        ("data.train.tfrecord.features[0].shape[1]: 3 ...", ("data.train.tfrecord.features[0].shape[1]",)),
        ("steps, epochs: exactly one must be positive", ("steps", "epochs")),
        ("SubmitJob is for operator only; the caller is viewer x", ()),
        ("job job-000009 not found", ()),
        ("--tls_ca: cannot read x", ()),
    ])
    def test_parse_fields(self, message, fields):
        assert parse_fields(message) == fields

    def test_codes_become_classes(self):
        e = from_rpc_error(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "steps: -1"),
                           "SubmitJob", "h:1")
        assert isinstance(e, lockstep.InvalidArgumentError) and isinstance(e, lockstep.LockstepError)
        assert (e.code, e.field, e.rpc, e.details) == (grpc.StatusCode.INVALID_ARGUMENT, "steps",
                                                       "SubmitJob", "steps: -1")
        assert str(e) == "SubmitJob to coordinator h:1: steps: -1"
        e = from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "down"), "GetJob", "h:1")
        assert isinstance(e, lockstep.UnavailableError) and "Is lockstep-coordinator running" in str(e)
        e = from_rpc_error(FakeRpcError(grpc.StatusCode.DATA_LOSS, "x"), "GetJob", "h:1")
        assert type(e) is lockstep.LockstepError and e.code == grpc.StatusCode.DATA_LOSS

    def test_every_code_class_is_registered(self):
        from lockstep.errors import error_class
        for name in ("InvalidArgument", "NotFound", "FailedPrecondition", "PermissionDenied",
                     "Unauthenticated", "ResourceExhausted", "Unavailable", "DeadlineExceeded",
                     "Cancelled"):
            cls = getattr(lockstep, name + "Error")
            assert error_class(cls.code_default) is cls
            assert cls("x").code == cls.code_default
        assert error_class(grpc.StatusCode.INTERNAL) is lockstep.LockstepError

    def test_unreachable_coordinator_is_unavailable(self, tmp_path):
        # Port 1 (tcpmux) is served by nothing here; a port "known to be free" would be a race.
        client = lockstep.Client("127.0.0.1:1", insecure=True, timeout=5, env={})
        with pytest.raises(lockstep.UnavailableError) as e:
            client.jobs()
        assert e.value.code == grpc.StatusCode.UNAVAILABLE and e.value.rpc == "ListJobs"
        client.close()


class TestCheckpoint:
    def test_crc32c_check_value(self):
        assert lockstep.checkpoint.crc32c(b"123456789") == 0xE3069283

    def test_to_numpy_dtypes(self):
        import numpy as np
        from lockstep.v1 import tensor_pb2
        a = np.arange(6, dtype="<f4").reshape(2, 3)
        t = tensor_pb2.TensorProto(dtype=tensor_pb2.F32, content=a.tobytes())
        t.shape.dims.extend([2, 3])
        assert (lockstep.to_numpy(t) == a).all()
        bf16 = (a.view(np.uint32) >> 16).astype("<u2")  # exact for these small integers
        t = tensor_pb2.TensorProto(dtype=tensor_pb2.BF16, content=bf16.tobytes())
        t.shape.dims.extend([2, 3])
        assert (lockstep.to_numpy(t) == a).all()

    def test_reads_both_format_versions(self, tmp_path):
        import struct
        from lockstep.checkpoint import crc32c
        from lockstep.v1 import checkpoint_pb2, tensor_pb2

        def mask(c):
            return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF

        def framed(version, payload):
            head = struct.pack("<IIQI", 0x4B43534C, version, len(payload), mask(crc32c(payload)))
            return head + struct.pack("<I", mask(crc32c(head))) + payload

        full = checkpoint_pb2.Checkpoint(job_id="j", global_step=3)
        v = full.variables.add(name="w")
        v.tensor.dtype = tensor_pb2.F32
        v.tensor.shape.dims.append(2)
        v.tensor.content = struct.pack("<2f", 1.5, -2.0)
        meta = checkpoint_pb2.Checkpoint()
        meta.CopyFrom(full)
        meta.variables[0].tensor.content = b""
        m = meta.SerializeToString()
        v2 = struct.pack("<Q", len(m)) + m + struct.pack("<QQ", 1, 8) + v.tensor.content
        for version, payload in ((1, full.SerializeToString()), (2, v2)):
            path = tmp_path / f"ckpt-{version}.lsckpt"
            path.write_bytes(framed(version, payload))
            assert lockstep.read_checkpoint(str(path)) == full, version
        path.write_bytes(framed(2, v2[:-1]))
        with pytest.raises(lockstep.CheckpointError, match="does not match"):
            lockstep.read_checkpoint(str(path))

    def test_not_a_checkpoint(self, tmp_path):
        with pytest.raises(lockstep.CheckpointError, match="wrong magic") as e:
            lockstep.read_checkpoint(write(tmp_path / "x.lsckpt", "x" * 64))
        assert e.value.code == grpc.StatusCode.DATA_LOSS
        with pytest.raises(lockstep.CheckpointError, match="cannot read"):
            lockstep.read_checkpoint(str(tmp_path / "missing.lsckpt"))


def test_export_without_the_cli_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.delenv("LOCKSTEP_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    client = lockstep.Client(coordinator="127.0.0.1:1", insecure=True, env={})
    with pytest.raises(lockstep.FailedPreconditionError, match="bazel build //client:lockstep"):
        client.export("job-000001", format="npz", output=str(tmp_path / "m.npz"))
    client.close()
