#!/usr/bin/env python3
"""Makes the TFRecord version of the bundled digits data set.

Reads examples/data/digits.csv.gz (1797 rows: 64 pixel values 0..16, then the label) and
writes examples/data/digits-0000N-of-00003.tfrecord: one tf.train.Example per row, in the
CSV's order, with
  "pixels": int64_list of the 64 pixel values (the job spec reads them as dtype INT64)
  "label":  int64_list of the class id, 0..9
split into 3 files of 599 consecutive rows, so that FILE auto-sharding has files
to hand out. Reading the files in order gives the CSV's rows in order, so a job's held-out
split (data.eval_fraction) is the same as the CSV job's.

Run from the repository root: python3 tools/make_digits_tfrecord.py
"""
import gzip
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tfrecord_example as tfx  # noqa: E402

NUM_FILES = 3


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    data = os.path.join(root, "examples", "data")
    with gzip.open(os.path.join(data, "digits.csv.gz"), "rt") as f:
        rows = [[int(float(v)) for v in line.split(",")] for line in f if line.strip()]
    per_file = (len(rows) + NUM_FILES - 1) // NUM_FILES
    for n in range(NUM_FILES):
        part = rows[n * per_file:(n + 1) * per_file]
        records = [
            tfx.example([("pixels", tfx.int64_list(row[:-1])), ("label", tfx.int64_list(row[-1:]))])
            for row in part
        ]
        path = os.path.join(data, "digits-%05d-of-%05d.tfrecord" % (n, NUM_FILES))
        tfx.write_tfrecord(path, records)
        print("%s: %d examples" % (os.path.relpath(path, root), len(records)))


if __name__ == "__main__":
    main()
