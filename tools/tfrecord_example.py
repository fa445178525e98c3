"""Writes tf.train.Example records in TFRecord files, without TensorFlow or protobuf.

The Example / Features / Feature protobuf bytes (TensorFlow's example.proto and
feature.proto field numbers) are encoded by hand and the masked CRC32C of the TFRecord
framing is computed here, so files made with this module check Lockstep's reader
(data/example_reader, common/tfrecord) against an independent writer.

  feature = float_list([0.5, 1.5]) | int64_list([3]) | bytes_list([b"x"])
  write_tfrecord(path, [example([("pixels", feature), ...]), ...])
"""
import struct


def _crc32c_table():
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC32C (Castagnoli) of bytes."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data):
    """TFRecord's masked CRC32C of bytes."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    """One TFRecord: length, its masked CRC, the data, the data's masked CRC."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data +
            struct.pack("<I", masked_crc32c(data)))


def varint(value):
    """A protobuf varint; a negative int64 as its two's complement (ten bytes)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if not value:
            out.append(bits)
            return bytes(out)
        out.append(bits | 0x80)


def field(number, payload):
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def bytes_list(values):
    """Feature{bytes_list = 1 {repeated bytes value = 1}}."""
    return field(1, b"".join(field(1, v) for v in values))


def float_list(values):
    """Feature{float_list = 2 {repeated float value = 1 [packed]}}."""
    return field(2, field(1, b"".join(struct.pack("<f", v) for v in values)))


def int64_list(values, packed=True):
    """Feature{int64_list = 3 {repeated int64 value = 1}}, packed as TensorFlow writes it,
    or one varint field per value (which parsers must accept too)."""
    if packed:
        return field(3, field(1, b"".join(varint(v) for v in values)))
    return field(3, b"".join(varint(1 << 3 | 0) + varint(v) for v in values))


def example(features):
    """Example{features = 1: Features{map<string, Feature> feature = 1}} from (key, Feature
    bytes) pairs: each pair is one map entry {key = 1, value = 2}."""
    entries = b"".join(
        field(1, field(1, key.encode()) + field(2, value)) for key, value in features)
    return field(1, entries)


def write_tfrecord(path, records):
    """Writes records (bytes) framed as TFRecords to path."""
    with open(path, "wb") as f:
        for r in records:
            f.write(frame(r))
