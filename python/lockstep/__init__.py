"""lockstep: a Python client of a Lockstep cluster's coordinator.

    import lockstep
    client = lockstep.Client()   # credentials as the `lockstep` CLI resolves them
    job = client.submit({"name": "digits", ...})
    for event in client.watch(job):
        print(event.step, event.loss)

The stubs under lockstep.v1 are generated from the repository's proto/ by
python/build_stubs.py (see python/README.md); they are not committed.
"""

from lockstep.errors import (CancelledError, ConfigError, DeadlineExceededError,
                             FailedPreconditionError, InvalidArgumentError, LockstepError,
                             NotFoundError, PermissionDeniedError, ResourceExhaustedError,
                             UnauthenticatedError, UnavailableError)

try:
    from lockstep.checkpoint import (Checkpoint, CheckpointError, load_weights,
                                     read_checkpoint, to_numpy)
    from lockstep.client import (Client, JobRecord, JobSpec, LogLine, ProgressEvent, load_spec,
                                 state_name, to_dict)
except ImportError as e:  # the stubs were not generated
    if "lockstep.v1" not in str(e):
        raise
    raise ImportError("lockstep: the gRPC stubs are missing; run `python3 python/build_stubs.py` "
                      "in the Lockstep repository (python/README.md)") from e

__all__ = [
    "CancelledError", "Checkpoint", "CheckpointError", "Client", "ConfigError", "DeadlineExceededError",
    "FailedPreconditionError", "InvalidArgumentError", "JobRecord", "JobSpec", "LockstepError",
    "LogLine", "NotFoundError", "PermissionDeniedError", "ProgressEvent",
    "ResourceExhaustedError", "UnauthenticatedError", "UnavailableError", "load_spec",
    "load_weights", "read_checkpoint", "state_name", "to_dict", "to_numpy",
]
