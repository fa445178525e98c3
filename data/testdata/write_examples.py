#!/usr/bin/env python3
"""Writes TFRecord files of tf.train.Example records for data/example_reader_test.

An independent writer: the protobuf bytes of Example / Features / Feature (TensorFlow's
example.proto and feature.proto field numbers) are encoded by hand and the masked CRC32C is
computed here, with no TensorFlow and no protobuf library.

Usage: write_examples.py OUT_DIR. Writes, for example i (0-based, across files):
  pixels: float_list [i + 0.5, i + 1.5, i + 2.5, i + 3.5]
  ids:    int64_list [i, -i]
  label:  int64_list [i % 3]
  target: float_list [i * 0.25]
  name:   bytes_list [b"ex<i>"] (a feature the reader is not asked for)
  good-0.tfrecord holds examples 0..4, good-1.tfrecord examples 5..7; and broken files:
  missing.tfrecord  (example 0, then a record without "pixels"),
  kind.tfrecord     (example 0, then one whose "pixels" is an int64_list),
  length.tfrecord   (examples 0 and 1, then one whose "pixels" has 3 values),
  garbage.tfrecord  (example 0, then a well-framed record that is not an Example).
"""
import os
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def frame(data):
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked(crc32c(length))) + data +
            struct.pack("<I", masked(crc32c(data))))


def varint(value):
    value &= (1 << 64) - 1  # negative int64: two's complement, ten bytes
    out = bytearray()
    while True:
        bits = value & 0x7F
        value >>= 7
        if value:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def field(number, payload):
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def float_list(values):
    return field(2, field(1, b"".join(struct.pack("<f", v) for v in values)))


def int64_list(values, packed=True):
    if packed:
        return field(3, field(1, b"".join(varint(v) for v in values)))
    return field(3, b"".join(varint(1 << 3 | 0) + varint(v) for v in values))


def bytes_list(values):
    return field(1, b"".join(field(1, v) for v in values))


def example(features):
    """features: (key, encoded Feature) pairs, each one map entry of Features.feature."""
    entries = b"".join(field(1, field(1, key.encode()) + field(2, value)) for key, value in features)
    return field(1, entries)


def good(i):
    return example([
        ("name", bytes_list([b"ex%d" % i])),
        ("pixels", float_list([i + 0.5, i + 1.5, i + 2.5, i + 3.5])),
        ("ids", int64_list([i, -i])),
        # Odd examples' labels are unpacked: parsers must accept both encodings.
        ("label", int64_list([i % 3], packed=(i % 2 == 0))),
        ("target", float_list([i * 0.25])),
    ])


def write(path, records):
    with open(path, "wb") as f:
        for r in records:
            f.write(frame(r))


def main():
    out = sys.argv[1]
    write(os.path.join(out, "good-0.tfrecord"), [good(i) for i in range(5)])
    write(os.path.join(out, "good-1.tfrecord"), [good(i) for i in range(5, 8)])
    write(os.path.join(out, "missing.tfrecord"),
          [good(0), example([("label", int64_list([1]))])])
    write(os.path.join(out, "kind.tfrecord"),
          [good(0), example([("pixels", int64_list([1, 2, 3, 4])), ("ids", int64_list([1, 2])),
                             ("label", int64_list([1]))])])
    write(os.path.join(out, "length.tfrecord"),
          [good(0), good(1), example([("pixels", float_list([1, 2, 3])),
                                      ("ids", int64_list([1, 2])), ("label", int64_list([1]))])])
    write(os.path.join(out, "garbage.tfrecord"), [good(0), b"\xff\xff\xff\xff"])


if __name__ == "__main__":
    main()
