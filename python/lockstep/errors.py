"""The exceptions of the lockstep client: one LockstepError hierarchy, one class per gRPC
status code the coordinator answers with (coordinator.proto lists them per RPC).

Every error carries the gRPC status code (`code`, a grpc.StatusCode), the coordinator's own
message (`details`), the RPC (`rpc`) and, when the message starts with the JobSpec field it
is about, that field (`field`, e.g. "global_batch_size" or "model.layers[2].dense.units"):
the coordinator's lowering (jobspec/lower.h) opens every refusal with the
field in the proto's names, "field: what is wrong". A refusal about several fields names
them all ("steps, epochs: exactly one must be positive"): `fields` holds each, `field` the
first.

    try:
        client.submit(spec)
    except lockstep.InvalidArgumentError as e:
        print(e.field, e.details)
"""

import re
from typing import Dict, Optional, Tuple, Type

import grpc

# A JobSpec field path in the proto's names: snake_case parts, dotted, with [i] indexes.
_PART = r"[a-z][a-z0-9_]*(?:\[\d+\])*"
_PATH = _PART + r"(?:\." + _PART + r")*"
_FIELDS = re.compile(r"^(" + _PATH + r"(?:, " + _PATH + r")*): ")


def parse_fields(message: str) -> Tuple[str, ...]:
    """The JobSpec fields a coordinator message opens with, () when it names none.

    >>> parse_fields("model.layers[0].dense.units: 0 must be > 0")
    ('model.layers[0].dense.units',)
    >>> parse_fields("steps, epochs: exactly one must be positive")
    ('steps', 'epochs')
    >>> parse_fields("SubmitJob is for operator only; the caller is viewer local-viewer")
    ()
    """
    m = _FIELDS.match(message)
    return tuple(m.group(1).split(", ")) if m else ()


class LockstepError(Exception):
    """Any failure of a lockstep client call.

    Attributes:
      code: the gRPC status code (grpc.StatusCode), INVALID_ARGUMENT for client-side checks.
      details: the message as the coordinator (or the client-side check) gave it.
      rpc: the JobService method called ("SubmitJob"), "" for client-side errors.
      address: the coordinator dialed, "" for client-side errors.
      fields: the JobSpec fields `details` opens with (see the module docstring).
      field: fields[0], or None.
    """

    code_default = grpc.StatusCode.UNKNOWN  # a subclass's own code
    # The subclass raised for each code: each one that sets code_default registers itself.
    _by_code: Dict[grpc.StatusCode, Type["LockstepError"]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)  # type: ignore[arg-type]
        if "code_default" in cls.__dict__:
            LockstepError._by_code.setdefault(cls.code_default, cls)

    def __init__(self, details: str, code: Optional[grpc.StatusCode] = None, rpc: str = "",
                 address: str = "", hint: str = "") -> None:
        self.code = code or self.code_default
        self.details = details
        self.rpc = rpc
        self.address = address
        self.fields = parse_fields(details)
        self.field: Optional[str] = self.fields[0] if self.fields else None
        where = f"{rpc} to coordinator {address}: " if rpc else ""
        super().__init__(f"{where}{details}" + (f"\n{hint}" if hint else ""))


class ConfigError(LockstepError):
    """The client's own settings are wrong (config file, CA, certificate): nothing was sent."""

    def __init__(self, details: str, code_name: str = "INVALID_ARGUMENT") -> None:
        super().__init__(details, code=grpc.StatusCode[code_name])


class InvalidArgumentError(LockstepError):
    """INVALID_ARGUMENT: a refused job spec (see `field`), a malformed job id or task."""
    code_default = grpc.StatusCode.INVALID_ARGUMENT


class NotFoundError(LockstepError):
    """NOT_FOUND: no such job or task."""
    code_default = grpc.StatusCode.NOT_FOUND


class FailedPreconditionError(LockstepError):
    """FAILED_PRECONDITION: e.g. cancelling a job that already ended."""
    code_default = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDeniedError(LockstepError):
    """PERMISSION_DENIED: the token's role may not do this (a viewer submitting a job)."""
    code_default = grpc.StatusCode.PERMISSION_DENIED


class UnauthenticatedError(LockstepError):
    """UNAUTHENTICATED: no token, or one the coordinator's --tokens_file does not hold."""
    code_default = grpc.StatusCode.UNAUTHENTICATED


class ResourceExhaustedError(LockstepError):
    """RESOURCE_EXHAUSTED: a job over the coordinator's limits (see `field`)."""
    code_default = grpc.StatusCode.RESOURCE_EXHAUSTED


class UnavailableError(LockstepError):
    """UNAVAILABLE: the coordinator could not be reached (or the TLS handshake failed)."""
    code_default = grpc.StatusCode.UNAVAILABLE


class DeadlineExceededError(LockstepError):
    """DEADLINE_EXCEEDED: the call took longer than its timeout."""
    code_default = grpc.StatusCode.DEADLINE_EXCEEDED


class CancelledError(LockstepError):
    """CANCELLED: the call was cancelled (by the client, or a coordinator shutting down)."""
    code_default = grpc.StatusCode.CANCELLED


# What to check, as the CLI says it (client/cli/connection.cc FailRpc).
_UNREACHABLE_HINT = ("Is lockstep-coordinator running there? Pass coordinator=HOST:PORT or set "
                     "LOCKSTEP_COORDINATOR; with TLS, ca must be the CA that signed its "
                     "certificate.")
_CREDENTIALS_HINT = ("Pass a token from the coordinator's --tokens_file (token=..., "
                     "$LOCKSTEP_TOKEN or ~/.config/lockstep/config) with the role this call needs.")


def error_class(code: grpc.StatusCode) -> Type[LockstepError]:
    """The LockstepError subclass raised for `code` (LockstepError for the others)."""
    return LockstepError._by_code.get(code, LockstepError)


def from_rpc_error(e: grpc.RpcError, rpc: str, address: str) -> LockstepError:
    """The LockstepError for a failed call of `rpc` to the coordinator at `address`."""
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = (e.details() if hasattr(e, "details") else None) or str(e)
    hint = ""
    if code == grpc.StatusCode.UNAVAILABLE:
        hint = _UNREACHABLE_HINT
    elif code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        hint = _CREDENTIALS_HINT
    return error_class(code)(details, code=code, rpc=rpc, address=address, hint=hint)
