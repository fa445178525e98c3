"""Client: the coordinator's client-facing JobService (cluster status, jobs, logs) from Python.

The Python counterpart of client/job_service_client.h and the `lockstep` CLI's job commands:
the same credentials (lockstep.config resolves them as the CLI does), the same RPCs, and
errors as LockstepError exceptions (lockstep.errors) naming the RPC, the coordinator and,
for a refused spec, the JobSpec field.

    import lockstep
    with lockstep.Client() as client:          # flags' defaults: $LOCKSTEP_*, the config file
        job = client.submit("job.json")          # or a dict, or a JobSpec
        for event in client.watch(job):
            print(event.state, event.step, event.loss)

Thread model: a Client may be shared by threads (gRPC channels and stubs are thread-safe);
watch() and logs() are generators, each consumed by one thread. Every unary call has a
deadline (`timeout`, default 10 s, as the CLI's); streams have one when asked.
"""

import dataclasses
import os
import shutil
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from lockstep import config as _config
from lockstep.errors import (FailedPreconditionError, InvalidArgumentError, NotFoundError,
                             UnavailableError, error_class, from_rpc_error)
from lockstep.v1 import coordinator_pb2 as pb
from lockstep.v1 import coordinator_pb2_grpc as pb_grpc
from lockstep.v1 import diagnostics_pb2
from lockstep.v1 import job_pb2
from lockstep.v1 import job_spec_pb2

JobSpec = job_spec_pb2.JobSpec
JobRecord = job_pb2.JobRecord

# What submit() takes: a JobSpec, its JSON mapping as a dict, or the path of a JSON file.
SpecLike = Union[JobSpec, Mapping[str, Any], str, "os.PathLike[str]"]
# What names a job: its id ("job-000001"), or a record or event that carries it.
JobLike = Union[str, JobRecord, "ProgressEvent"]

_ENDED = (job_pb2.SUCCEEDED, job_pb2.FAILED, job_pb2.CANCELLED)


def state_name(state: int) -> str:
    """The JobState's name ("RUNNING") of an enum value."""
    return job_pb2.JobState.Name(state)


def to_dict(message: Message) -> Dict[str, Any]:
    """A message as a dict in the proto's field names (`global_batch_size`), defaults left out."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def load_spec(spec: SpecLike) -> JobSpec:
    """A JobSpec from a JobSpec (copied), a dict or a JSON file, as `lockstep submit` reads it.

    Dicts and files are the JobSpec's JSON mapping (protobuf's json_format: the proto's
    field names or their lowerCamelCase JSON names, enums by name); unknown fields are
    refused. Raises InvalidArgumentError (not valid JSON or not a JobSpec) naming the source,
    NotFoundError for an unreadable file, TypeError for anything else.
    """
    if isinstance(spec, JobSpec):
        copy = JobSpec()
        copy.CopyFrom(spec)
        return copy
    if isinstance(spec, Mapping):
        source, parse = "job spec dict", lambda s: json_format.ParseDict(dict(spec), s)
    elif isinstance(spec, (str, os.PathLike)):
        source = os.fspath(spec)
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise NotFoundError(f"{source}: cannot read the job file ({e.strerror})") from None
        parse = lambda s: json_format.Parse(text, s)  # noqa: E731
    else:
        raise TypeError(f"submit() takes a JobSpec, a dict or a JSON file's path, not "
                        f"{type(spec).__name__}")
    out = JobSpec()
    try:
        parse(out)
    except (json_format.ParseError, ValueError) as e:
        raise InvalidArgumentError(f"{source}: not a valid job spec: {e}") from None
    return out


def _job_id(job: JobLike) -> str:
    if isinstance(job, str):
        return job
    if isinstance(job, JobRecord):
        return job.id
    if isinstance(job, ProgressEvent):
        return job.job_id
    raise TypeError(f"a job is its id (str), a JobRecord or a ProgressEvent, not "
                    f"{type(job).__name__}")


@dataclasses.dataclass(frozen=True)
class ProgressEvent:
    """One event of watch(): the job's state and latest figures when it was sent.

    loss, step, learning_rate... are the chief's latest report (JobProgress); eval_accuracy is
    -1 until the first evaluation. `ended` is true for the last event (SUCCEEDED, FAILED or
    CANCELLED; `reason` says why). `event` is the JobEvent as received.
    """
    job_id: str
    state: str
    ended: bool
    reason: str
    message: str
    attempt: int
    step: int
    total_steps: int
    epoch: int
    loss: float
    train_accuracy: float
    eval_accuracy: float
    learning_rate: float
    examples_per_sec: float
    checkpoint_path: str
    unix_micros: int
    event: pb.JobEvent

    @staticmethod
    def from_proto(e: pb.JobEvent) -> "ProgressEvent":
        j, p = e.job, e.job.progress
        return ProgressEvent(
            job_id=j.id, state=state_name(j.state), ended=j.state in _ENDED, reason=j.reason,
            message=e.message, attempt=j.attempt, step=p.step, total_steps=p.total_steps,
            epoch=p.epoch, loss=p.loss, train_accuracy=p.train_accuracy,
            eval_accuracy=p.eval_accuracy, learning_rate=p.learning_rate,
            examples_per_sec=p.examples_per_sec, checkpoint_path=p.checkpoint_path,
            unix_micros=e.unix_micros, event=e)


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One log line of a job's worker: `task` is "worker/1"; `attempt` the job attempt."""
    task: str
    attempt: int
    seq: int
    unix_micros: int
    text: str


class Client:
    """A client of one coordinator's JobService.

    Args:
      coordinator: host:port (default $LOCKSTEP_COORDINATOR, the config file's
        coordinator, else 127.0.0.1:7000).
      ca: PEM file of the cluster CA (default $LOCKSTEP_CA, the config file's ca).
      token: bearer token from the coordinator's --tokens_file (default $LOCKSTEP_TOKEN,
        the config file's token); its role (viewer or operator) decides what may be done.
      cert, key: an optional client certificate and its key ($LOCKSTEP_CERT, $LOCKSTEP_KEY).
      server_name: the name the coordinator's certificate must carry (default: the host dialed;
        $LOCKSTEP_TLS_SERVER_NAME).
      insecure: plaintext and no token, for a coordinator run with --insecure
        ($LOCKSTEP_INSECURE=1).
      config: the config file (default $LOCKSTEP_CONFIG, else ~/.config/lockstep/config).
      timeout: seconds every unary call may take (default 10, as the CLI's).
      env: the environment to resolve from (default os.environ; tests pass their own).

    An argument left None falls through to the environment, then the config file, exactly
    as a CLI flag does (lockstep.config). Raises ConfigError when the settings are unusable
    (no CA without insecure, an unreadable named file, a bad config line). Connects lazily:
    an unreachable coordinator is UnavailableError on the first call.
    """

    def __init__(self, coordinator: Optional[str] = None, ca: Optional[str] = None,
                 token: Optional[str] = None, *, cert: Optional[str] = None,
                 key: Optional[str] = None, server_name: Optional[str] = None,
                 insecure: Optional[bool] = None, config: Optional[str] = None,
                 timeout: float = 10.0, env: Optional[Mapping[str, str]] = None) -> None:
        self.connection = _config.resolve(
            dict(coordinator=coordinator, ca=ca, token=token, cert=cert, key=key,
                 server_name=server_name, insecure=insecure, config=config), env)
        self.timeout = timeout
        self._channel = _open_channel(self.connection)
        self._stub = pb_grpc.JobServiceStub(self._channel)

    @property
    def address(self) -> str:
        """The coordinator's host:port."""
        return self.connection.address

    def close(self) -> None:
        """Closes the channel; streams still open end with CancelledError."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, rpc: str, request: Message, timeout: Optional[float] = None) -> Any:
        try:
            return getattr(self._stub, rpc)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as e:
            raise from_rpc_error(e, rpc, self.address) from None

    # Jobs.

    def submit(self, spec: SpecLike) -> str:
        """Submits a job; returns its id ("job-000001").

        `spec`: a JobSpec, a dict of its JSON mapping, or a JSON file's path (load_spec).
        Data file paths are the workers' (relative ones under their --data_root).
        Raises InvalidArgumentError naming the field (`e.field`) when the coordinator refuses
        the spec, ResourceExhaustedError (over its limits, `e.field` too),
        PermissionDeniedError for a viewer's token.
        """
        response = self._call("SubmitJob", pb.SubmitJobRequest(spec=load_spec(spec)))
        return response.job_id

    def watch(self, job: JobLike, timeout: Optional[float] = None,
              give_up_after: float = 30.0) -> Iterator[ProgressEvent]:
        """Follows a job: yields its events (state changes, progress) until it ends.

        The first event is the job's current state; the last has `ended` true. A broken
        stream is reopened (its first event repeats the current state), so a restarting
        coordinator is waited for, until it has been unreachable for `give_up_after`
        seconds (UnavailableError). `timeout`: seconds for the whole watch (None: no limit;
        DeadlineExceededError). NotFoundError for an unknown job. Closing the generator
        (break) cancels the stream.
        """
        request = pb.WatchJobRequest(job_id=_job_id(job))
        deadline = None if timeout is None else time.monotonic() + timeout
        unreachable_since: Optional[float] = None
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            call = self._stub.WatchJob(request, timeout=remaining)
            try:
                for e in call:
                    unreachable_since = None
                    event = ProgressEvent.from_proto(e)
                    yield event
                    if event.ended:
                        return
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAVAILABLE:
                    raise from_rpc_error(e, "WatchJob", self.address) from None
                now = time.monotonic()
                unreachable_since = unreachable_since or now
                if now - unreachable_since >= give_up_after:
                    raise from_rpc_error(e, "WatchJob", self.address) from None
                if deadline is not None and now >= deadline:
                    raise from_rpc_error(e, "WatchJob", self.address) from None
                # The channel reconnects on its own (100 ms to 1 s backoff); wait that long
                # rather than spin on a coordinator that is restarting.
                time.sleep(0.2)
            finally:
                call.cancel()

    def wait(self, job: JobLike, timeout: Optional[float] = None) -> JobRecord:
        """Watches a job to its end and returns its final record (state, reason, progress)."""
        last: Optional[ProgressEvent] = None
        for last in self.watch(job, timeout=timeout):
            pass
        assert last is not None and last.ended
        return last.event.job

    def describe(self, job: JobLike) -> pb.GetJobResponse:
        """One job: its record (state, transitions, progress), spec, each worker's report."""
        return self._call("GetJob", pb.GetJobRequest(job_id=_job_id(job)))

    def jobs(self, limit: int = 0) -> List[JobRecord]:
        """Every job (at most `limit` when > 0), newest first."""
        return list(self._call("ListJobs", pb.ListJobsRequest(limit=limit)).jobs)

    def cancel(self, job: JobLike, reason: str = "") -> JobRecord:
        """Cancels a job (its workers stop within 2 s); returns its record, now CANCELLED.

        NotFoundError for an unknown job, FailedPreconditionError when it already ended,
        PermissionDeniedError for a viewer's token.
        """
        return self._call("CancelJob", pb.CancelJobRequest(job_id=_job_id(job), reason=reason)).job

    def logs(self, job: JobLike, follow: bool = False, worker: Optional[int] = None,
             timeout: Optional[float] = None) -> Iterator[LogLine]:
        """The workers' log lines of a job (only worker/`worker`'s when given).

        Without `follow`, the lines so far, within `timeout` (default 3x the client's, as
        the CLI's 30 s); with it, new lines too until the job ends (no deadline unless
        `timeout`). NotFoundError for an unknown job.
        """
        request = diagnostics_pb2.GetJobLogsRequest(job_id=_job_id(job), follow=follow)
        if worker is not None:
            request.task.type, request.task.index = "worker", worker
        if timeout is None and not follow:
            timeout = 3 * self.timeout
        call = self._stub.GetJobLogs(request, timeout=timeout)
        try:
            for message in call:
                task = f"{message.task.type}/{message.task.index}"
                for line in message.lines:
                    yield LogLine(task=task, attempt=message.attempt, seq=line.seq,
                                  unix_micros=line.unix_micros, text=line.text)
                if message.end:
                    return
        except grpc.RpcError as e:
            raise from_rpc_error(e, "GetJobLogs", self.address) from None
        finally:
            call.cancel()

    def fetch_checkpoint(self, job: JobLike, output: str, step: int = 0,
                         progress: Optional[Callable[[int, int], None]] = None,
                         timeout: Optional[float] = 3600.0) -> str:
        """Fetches a checkpoint of a job through the coordinator into the file `output`.

        The newest checkpoint (or that of `step`), sent by a worker that ran the job's last
        attempt (the chief first, else another worker's copy) and relayed by the coordinator
        (JobService.FetchCheckpoint; a viewer's token suffices), so no shell on the chief is
        needed. `progress(received, total)` is called as bytes arrive. The file is written
        beside `output` and renamed into place once it read back whole (read_checkpoint:
        length, magic, CRCs). Returns `output`. Raises NotFoundError (job),
        FailedPreconditionError (no worker holds such a checkpoint: each task tried and why),
        UnavailableError (no worker that ran it is connected, or the sending one stopped),
        CheckpointError (the file is damaged).
        """
        from lockstep.checkpoint import read_checkpoint
        request = pb.FetchCheckpointRequest(job_id=_job_id(job), step=step)
        part = f"{output}.part"
        total = received = 0
        call = self._stub.FetchCheckpoint(request, timeout=timeout)
        try:
            with open(part, "wb") as f:
                for i, chunk in enumerate(call):
                    if i == 0:
                        total = chunk.total_bytes
                        continue
                    f.write(chunk.data)
                    received += len(chunk.data)
                    if progress is not None:
                        progress(received, total)
                    if chunk.last:
                        break
            if received != total or total == 0:
                raise UnavailableError(f"FetchCheckpoint of {request.job_id}: the stream ended "
                                       f"after {received} of {total} bytes")
            read_checkpoint(part, verify=True)
            os.replace(part, output)
        except grpc.RpcError as e:
            raise from_rpc_error(e, "FetchCheckpoint", self.address) from None
        finally:
            call.cancel()
            if os.path.exists(part):
                os.remove(part)
        return output

    def export(self, job_or_checkpoint: str, format: str, output: str,
               with_optimizer_state: bool = False, step: int = 0,
               progress: Optional[Callable[[int, int], None]] = None) -> str:
        """Exports a job's newest checkpoint, or a checkpoint file or directory, as `format`
        ("safetensors", "npz" or "onnx") into `output`; returns `output`.

        As `lockstep export`: a path that exists is a checkpoint, anything else a job id,
        whose checkpoint is fetched through the coordinator (fetch_checkpoint: the newest,
        or `step`'s) and exported with the job's own spec (describe), which ONNX needs.
        `with_optimizer_state` adds the optimizer slots ("<variable>/<slot>").

        The file itself is written by the `lockstep` CLI, so every format has one
        implementation: $LOCKSTEP_BIN, else `lockstep` on PATH, else bazel-bin/client/lockstep
        under the current directory. Raises FailedPreconditionError when none is found, and
        LockstepError with the CLI's message when it refuses (INVALID_ARGUMENT for a bad
        format), besides fetch_checkpoint's errors.
        """
        cli = _find_cli()
        with tempfile.TemporaryDirectory(prefix="lockstep-export-") as tmp:
            args = [cli, "export", "--format=" + format, "--output=" + os.fspath(output)]
            if with_optimizer_state:
                args.append("--with_optimizer_state")
            if os.path.exists(job_or_checkpoint):
                args.insert(2, os.fspath(job_or_checkpoint))
            else:
                job = _job_id(job_or_checkpoint)
                spec_path = os.path.join(tmp, "spec.json")
                with open(spec_path, "w", encoding="utf-8") as f:
                    f.write(json_format.MessageToJson(self.describe(job).spec))
                checkpoint = self.fetch_checkpoint(job, os.path.join(tmp, "checkpoint.lsckpt"),
                                                   step=step, progress=progress)
                args[2:2] = [checkpoint]
                args.append("--spec=" + spec_path)
            run = subprocess.run(args, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            message = run.stderr.strip() or run.stdout.strip()
            code = (grpc.StatusCode.INVALID_ARGUMENT if run.returncode == 2 else
                    grpc.StatusCode.UNKNOWN)
            raise error_class(code)(f"lockstep export: {message}", code=code)
        return os.fspath(output)

    # The cluster.

    def status(self) -> pb.GetClusterStatusResponse:
        """Every known task (ALIVE, LOST, DEREGISTERED) and running jobs' diagnoses."""
        return self._call("GetClusterStatus", pb.GetClusterStatusRequest())

    def drain(self, task: str, undo: bool = False) -> pb.DrainWorkerResponse:
        """Drains a worker ("worker/1"): its job restarts elsewhere; `undo` reverts it."""
        kind, _, index = task.partition("/")
        if not kind or not index.isdigit():
            raise InvalidArgumentError(f"task \"{task}\": expected TYPE/INDEX such as worker/1")
        request = pb.DrainWorkerRequest(undo=undo)
        request.task.type, request.task.index = kind, int(index)
        return self._call("DrainWorker", request)


def _find_cli() -> str:
    """The `lockstep` CLI: $LOCKSTEP_BIN, `lockstep` on PATH, or ./bazel-bin/client/lockstep."""
    candidates = [os.environ.get("LOCKSTEP_BIN", ""), shutil.which("lockstep") or "",
                  os.path.join("bazel-bin", "client", "lockstep")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise FailedPreconditionError(
        "export writes its formats with the `lockstep` CLI, and none was found: set "
        "$LOCKSTEP_BIN, put `lockstep` on PATH, or run from the repository root after "
        "`bazel build //client:lockstep`")


def _open_channel(c: _config.Connection) -> grpc.Channel:
    """The channel, as common/grpc_channel.cc makes it: quick reconnects, no gRPC retries,
    TLS verified against the cluster CA (and `server_name`), the token on every call."""
    options = [
        ("grpc.initial_reconnect_backoff_ms", 100),
        ("grpc.max_reconnect_backoff_ms", 1000),
        # Also the least time one connection attempt may take: TLS on a busy machine.
        ("grpc.min_reconnect_backoff_ms", 5000),
        ("grpc.enable_retries", 0),
    ]
    if c.insecure:
        return grpc.insecure_channel(c.address, options=options)
    if c.server_name:
        options.append(("grpc.ssl_target_name_override", c.server_name))

    def read(path: str) -> Optional[bytes]:
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    credentials = grpc.ssl_channel_credentials(
        root_certificates=read(c.ca), private_key=read(c.key), certificate_chain=read(c.cert))
    if c.token:
        credentials = grpc.composite_channel_credentials(
            credentials, grpc.access_token_call_credentials(c.token))
    return grpc.secure_channel(c.address, credentials, options=options)
