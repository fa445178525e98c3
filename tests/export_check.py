#!/usr/bin/env python3
"""Reads a Lockstep export back with readers that share no code with Lockstep's writers
(NumPy's np.load for npz, the few lines of read_safetensors below for safetensors) and
checks it bit for bit against the checkpoint's tensors as train_for_export dumped them.

Usage: export_check.py npz|safetensors EXPORT DUMP_DIR [--slots] [--step=N] [--spec]
       export_check.py misfit EXPORT OUT   (see write_misfit)
  --slots   the export must hold the optimizer slots too (else: the variables only)
  --step=N  safetensors: __metadata__.step must be N
  --spec    safetensors: __metadata__.spec must be the job spec (JSON with a model)
"""
import json
import os
import struct
import sys

import numpy as np

NUMPY_DTYPES = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I32": "<i4", "I64": "<i8"}


def read_safetensors(path):
    """The safetensors format as its documentation describes it, and nothing else."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    if (8 + n) % 8:
        raise ValueError(f"{path}: the data buffer starts at {8 + n}, not 8-byte aligned")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    buffer = data[8 + n:]
    tensors = {}
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = np.dtype(NUMPY_DTYPES[entry["dtype"]])
        tensors[name] = np.frombuffer(buffer[begin:end], dtype=dtype).reshape(entry["shape"])
    return tensors, metadata


def write_misfit(path, out):
    """Writes `out`: the safetensors `path` less its first bias, with its first kernel's dims
    reversed; prints the two refusals a job started from it must name."""
    tensors, metadata = read_safetensors(path)
    dropped = next(n for n in sorted(tensors) if n.endswith("/bias"))
    kernel = next(n for n in sorted(tensors) if n.endswith("/kernel"))
    del tensors[dropped]
    shape = tensors[kernel].shape
    tensors[kernel] = tensors[kernel].reshape(shape[::-1])
    header, offset, blobs = {"__metadata__": metadata}, 0, []
    for name, array in tensors.items():
        blob = array.tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    dims = lambda s: ",".join(str(d) for d in s)
    print(f'variable "{kernel}" is F32[{dims(shape[::-1])}] there, F32[{dims(shape)}] in the model')
    print(f'variable "{dropped}" is missing')


def read_dump(dump_dir, with_slots):
    """name -> (dtype, shape, bytes) of the checkpoint's variables (and slots)."""
    expected = {}
    with open(os.path.join(dump_dir, "manifest.tsv")) as f:
        for line in f:
            kind, name, dtype, dims, file = line.rstrip("\n").split("\t")
            if kind == "slot" and not with_slots:
                continue
            shape = tuple(int(d) for d in dims.split(",")) if dims else ()
            with open(os.path.join(dump_dir, file), "rb") as g:
                expected[name] = (np.dtype(NUMPY_DTYPES[dtype]), shape, g.read())
    return expected


def compare(tensors, expected, what):
    """Problems found: names missing or extra, and every tensor whose bytes differ."""
    problems = []
    if set(tensors) != set(expected):
        problems.append(f"{what}: holds {sorted(tensors)}, the checkpoint {sorted(expected)}")
    for name in sorted(set(tensors) & set(expected)):
        dtype, shape, raw = expected[name]
        got = tensors[name]
        if got.dtype != dtype or got.shape != shape:
            problems.append(f"{what}: {name} is {got.dtype}{got.shape}, want {dtype}{shape}")
        elif np.ascontiguousarray(got).tobytes() != raw:
            problems.append(f"{what}: {name}'s bytes differ from the checkpoint's")
    return problems


def main(argv):
    fmt, path, dump_dir = argv[1:4]
    flags = argv[4:]
    with_slots = "--slots" in flags
    expected = read_dump(dump_dir, with_slots)
    if not any(name.count("/") >= 2 for name in read_dump(dump_dir, True)):
        return ["the dump holds no optimizer slots: the test would not see them missing"]
    if fmt == "npz":
        with np.load(path, allow_pickle=False) as archive:
            tensors = {name: archive[name] for name in archive.files}
        metadata = {}
    else:
        tensors, metadata = read_safetensors(path)
    problems = compare(tensors, expected, path)
    # A control: the comparison notices one flipped bit.
    name = sorted(expected)[0]
    dtype, shape, raw = expected[name]
    flipped = dict(expected)
    flipped[name] = (dtype, shape, bytes([raw[0] ^ 1]) + raw[1:])
    if not compare(tensors, flipped, path):
        problems.append("the comparison missed a flipped bit")
    for flag in flags:
        if flag.startswith("--step=") and metadata.get("step") != flag[len("--step="):]:
            problems.append(f"__metadata__.step is {metadata.get('step')!r}, want {flag[7:]}")
        if flag == "--spec" and "model" not in json.loads(metadata.get("spec", "{}")):
            problems.append(f"__metadata__.spec holds no job spec: {metadata.get('spec')!r}")
    if fmt == "safetensors" and metadata.get("job_id") != "digits-export":
        problems.append(f"__metadata__.job_id is {metadata.get('job_id')!r}")
    return problems


if __name__ == "__main__":
    if sys.argv[1] == "misfit":
        write_misfit(sys.argv[2], sys.argv[3])
        sys.exit(0)
    found = main(sys.argv)
    for p in found:
        print("FAIL:", p)
    if not found:
        print("OK:", sys.argv[1], sys.argv[2], "matches the checkpoint bit for bit")
    sys.exit(1 if found else 0)
