#!/usr/bin/env python3
"""Makes the character-level text corpus of the Transformer language model example.

Source: Debian's `fortunes` package (1:1.99.1-7.3, BSD license), the fortune files
/usr/share/games/fortunes/computers and /usr/share/games/fortunes/science.

  apt-get download fortunes && dpkg-deb -x fortunes_*.deb /tmp/fortunes
  python3 examples/data/make_text_corpus.py --fortunes /tmp/fortunes/usr/share/games/fortunes

writes examples/data/fortunes.txt.gz (the text, normalized; committed) and, from it,
  python3 examples/data/make_text_corpus.py --text examples/data/fortunes.txt.gz --out DIR
writes DIR/fortunes-train.tfrecord and DIR/fortunes-valid.tfrecord (Bazel does this in the
genrule //examples:fortunes_tfrecord; the job reads them).

Normalization: the fortunes' "%" separator lines become blank lines, tabs become spaces and
any character outside printable ASCII is dropped. Tokens: "\\n" is 0, the printable ASCII
characters 32..126 are 1..95 (vocabulary 96).

Records: one tf.train.Example per window of WINDOW + 1 consecutive characters, windows not
overlapping (stride WINDOW): "tokens", an int64_list of the first WINDOW ids (the model's
input), and "next", an int64_list of the WINDOW ids that follow each (the labels). The first
90% of the text makes the training windows, the last 10% the validation ones.
"""
import argparse
import gzip
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import tfrecord_example as tfx  # noqa: E402

FILES = ["computers", "science"]
WINDOW = 64
VALID_FRACTION = 0.1


def normalize(raw):
    out = []
    for line in raw.decode("latin-1").split("\n"):
        out.append("" if line.strip() == "%" else line.replace("\t", " "))
    return "".join(c for c in "\n".join(out) if c == "\n" or 32 <= ord(c) <= 126)


def token(c):
    return 0 if c == "\n" else ord(c) - 31


def windows(text):
    ids = [token(c) for c in text]
    return [
        tfx.example([("tokens", tfx.int64_list(ids[i:i + WINDOW])),
                     ("next", tfx.int64_list(ids[i + 1:i + WINDOW + 1]))])
        for i in range(0, len(ids) - WINDOW, WINDOW)
    ]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fortunes", help="the package's fortunes directory: (re)make the text")
    p.add_argument("--text", default=os.path.join(ROOT, "examples", "data", "fortunes.txt.gz"))
    p.add_argument("--out", help="write the TFRecord files into this directory")
    args = p.parse_args()
    if args.fortunes:
        raw = b"".join(open(os.path.join(args.fortunes, f), "rb").read() for f in FILES)
        with gzip.GzipFile(args.text, "wb", mtime=0) as f:
            f.write(normalize(raw).encode("ascii"))
        print("%s: %d characters" % (args.text, len(normalize(raw))))
    if args.out:
        with gzip.open(args.text, "rb") as f:
            text = f.read().decode("ascii")
        split = int(len(text) * (1 - VALID_FRACTION))
        for name, part in (("train", text[:split]), ("valid", text[split:])):
            path = os.path.join(args.out, "fortunes-%s.tfrecord" % name)
            records = windows(part)
            tfx.write_tfrecord(path, records)
            print("%s: %d windows of %d characters" % (path, len(records), WINDOW))


if __name__ == "__main__":
    main()
