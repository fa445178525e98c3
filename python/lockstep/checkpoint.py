"""Reads a chief checkpoint (.lsckpt) and turns its tensors into NumPy arrays.

A job's checkpoints are files on the chief's machine, under its checkpoint.dir
(describe(job).job.progress.checkpoint_path names the newest); with `lockstep local` that is
this machine. The format is checkpoint/checkpoint.h's: a 24-byte little-endian header
(magic "LSCK", version, payload length, masked CRC32C of the payload and of the header's
first 20 bytes) and the payload. Version 2: a uint64 M, M bytes of a serialized
lockstep.v1.Checkpoint without tensor contents, a uint64 N, N uint64 content lengths and the
N contents (variables, then optimizer slots), so a checkpoint may be over protobuf's 2 GiB
limit on one message. Version 1 (older files): one serialized lockstep.v1.Checkpoint.

    weights = lockstep.load_weights(client.describe(job).job.progress.checkpoint_path)
    weights["hidden/kernel"].shape   # (64, 128)

NumPy is needed only by to_numpy() and load_weights() (Debian's python3-numpy).
"""

import struct
from typing import TYPE_CHECKING, Dict

from lockstep.errors import LockstepError
from lockstep.v1 import checkpoint_pb2, tensor_pb2

if TYPE_CHECKING:
    import numpy

Checkpoint = checkpoint_pb2.Checkpoint

_MAGIC = 0x4B43534C  # "LSCK"
_VERSIONS = (1, 2)  # a serialized Checkpoint; metadata beside the tensors' contents
_HEADER = struct.Struct("<IIQII")  # magic, version, payload length, payload CRC, header CRC


class CheckpointError(LockstepError):
    """A file that is not a whole, readable checkpoint (code DATA_LOSS, or NOT_FOUND)."""

    def __init__(self, path: str, what: str, code_name: str = "DATA_LOSS") -> None:
        import grpc
        super().__init__(f"{path}: {what}", code=grpc.StatusCode[code_name])


def _crc32c_table() -> "list[int]":
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as common/crc32c.h computes it. Pure Python: ~MB/s."""
    c = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _unmask(masked: int) -> int:
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def read_checkpoint(path: str, verify: bool = True) -> Checkpoint:
    """The Checkpoint in a .lsckpt file, checked as the chief checks it when restoring.

    `verify`: also check the payload's CRC32C (pure Python, about a second per few MB; the
    header's is always checked). Raises CheckpointError naming the file and what is wrong.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CheckpointError(path, f"cannot read it ({e.strerror})", "NOT_FOUND") from None
    if len(data) < _HEADER.size:
        raise CheckpointError(path, f"truncated: {len(data)} bytes, shorter than the header")
    magic, version, length, payload_crc, header_crc = _HEADER.unpack_from(data)
    if magic != _MAGIC:
        raise CheckpointError(path, "wrong magic: not a checkpoint file")
    if _unmask(header_crc) != crc32c(data[:20]):
        raise CheckpointError(path, "header CRC mismatch")
    if version not in _VERSIONS:
        raise CheckpointError(path, f"format version {version} unknown (this client reads 1, 2)")
    payload = memoryview(data)[_HEADER.size:]
    if len(payload) != length:
        raise CheckpointError(path, f"payload is {len(payload)} bytes, header says {length}")
    if verify and _unmask(payload_crc) != crc32c(payload):
        raise CheckpointError(path, "payload CRC mismatch")
    checkpoint = Checkpoint()
    if version == 1:
        checkpoint.ParseFromString(bytes(payload))
        return checkpoint
    return _decode_v2(path, payload, checkpoint)


def _decode_v2(path: str, payload: memoryview, checkpoint: Checkpoint) -> Checkpoint:
    """Version 2's payload: the metadata message, then the tensor table and contents."""
    def u64(at: int) -> int:
        if at + 8 > len(payload):
            raise CheckpointError(path, "truncated payload")
        return struct.unpack_from("<Q", payload, at)[0]
    meta = u64(0)
    if 8 + meta > len(payload):
        raise CheckpointError(path, f"truncated: metadata of {meta} bytes")
    checkpoint.ParseFromString(bytes(payload[8:8 + meta]))
    tensors = [t.tensor for t in checkpoint.variables] + [t.tensor for t in checkpoint.optimizer_slots]
    at = 8 + meta
    if u64(at) != len(tensors):
        raise CheckpointError(path, "the tensor table does not list the metadata's tensors")
    lengths = [u64(at + 8 * (i + 1)) for i in range(len(tensors))]
    at += 8 * (len(tensors) + 1)
    if at + sum(lengths) != len(payload):
        raise CheckpointError(path, "the tensor table does not match the payload's length")
    for tensor, n in zip(tensors, lengths):
        if n:
            tensor.content = bytes(payload[at:at + n])
        at += n
    return checkpoint


def to_numpy(tensor: tensor_pb2.TensorProto) -> "numpy.ndarray":
    """A TensorProto as a NumPy array of its dtype and shape (BF16 widened to float32)."""
    import numpy as np
    dims = tuple(tensor.shape.dims)
    if tensor.dtype == tensor_pb2.BF16:
        bits = np.frombuffer(tensor.content, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(dims)
    dtypes = {tensor_pb2.F32: "<f4", tensor_pb2.F64: "<f8", tensor_pb2.F16: "<f2",
              tensor_pb2.I32: "<i4", tensor_pb2.I64: "<i8"}
    if tensor.dtype not in dtypes:
        raise ValueError(f"tensor dtype {tensor_pb2.DType.Name(tensor.dtype)} has no NumPy type")
    return np.frombuffer(tensor.content, dtype=dtypes[tensor.dtype]).reshape(dims).copy()


def load_weights(path: str, with_optimizer_state: bool = False,
                 verify: bool = True) -> Dict[str, "numpy.ndarray"]:
    """The checkpoint's variables by name ("hidden/kernel"), and with `with_optimizer_state`
    its optimizer slots ("hidden/kernel/m"), as NumPy arrays."""
    checkpoint = read_checkpoint(path, verify=verify)
    tensors = list(checkpoint.variables)
    if with_optimizer_state:
        tensors += list(checkpoint.optimizer_slots)
    return {t.name: to_numpy(t.tensor) for t in tensors}
