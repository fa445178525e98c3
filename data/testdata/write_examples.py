#!/usr/bin/env python3
"""Writes TFRecord files of tf.train.Example records for data/example_reader_test.

An independent writer: tools/tfrecord_example.py encodes the Example protobuf bytes by hand
and computes the masked CRC32C itself (no TensorFlow, no protobuf library).

Usage: write_examples.py OUT_DIR. Writes, for example i (0-based, across files):
  pixels: float_list [i + 0.5, i + 1.5, i + 2.5, i + 3.5]
  ids:    int64_list [i, -i]
  label:  int64_list [i % 3] (packed for even i, one varint field per value for odd i)
  target: float_list [i * 0.25]
  name:   bytes_list [b"ex<i>"] (a feature the reader is not asked for)
good-0.tfrecord holds examples 0..4, good-1.tfrecord examples 5..7; and broken files:
  missing.tfrecord  (example 0, then a record without "pixels"),
  kind.tfrecord     (example 0, then one whose "pixels" is an int64_list),
  length.tfrecord   (examples 0 and 1, then one whose "pixels" has 3 values),
  garbage.tfrecord  (example 0, then a well-framed record that is not an Example).
"""
import os
import sys

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "tools"))
from tfrecord_example import bytes_list, example, float_list, int64_list, write_tfrecord  # noqa: E402


def good(i):
    return example([
        ("name", bytes_list([b"ex%d" % i])),
        ("pixels", float_list([i + 0.5, i + 1.5, i + 2.5, i + 3.5])),
        ("ids", int64_list([i, -i])),
        ("label", int64_list([i % 3], packed=(i % 2 == 0))),
        ("target", float_list([i * 0.25])),
    ])


def main():
    out = sys.argv[1]
    files = {
        "good-0.tfrecord": [good(i) for i in range(5)],
        "good-1.tfrecord": [good(i) for i in range(5, 8)],
        "missing.tfrecord": [good(0), example([("label", int64_list([1]))])],
        "kind.tfrecord": [
            good(0),
            example([("pixels", int64_list([1, 2, 3, 4])), ("ids", int64_list([1, 2])),
                     ("label", int64_list([1]))]),
        ],
        "length.tfrecord": [
            good(0), good(1),
            example([("pixels", float_list([1, 2, 3])), ("ids", int64_list([1, 2])),
                     ("label", int64_list([1]))]),
        ],
        "garbage.tfrecord": [good(0), b"\xff\xff\xff\xff"],
    }
    for name, records in files.items():
        write_tfrecord(os.path.join(out, name), records)


if __name__ == "__main__":
    main()
