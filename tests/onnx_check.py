#!/usr/bin/env python3
"""Checks `lockstep export --format=onnx` with ONNX's own tools and a small NumPy evaluator.

  onnx_check.py in_data DATA.csv.gz ROWS.f32
      every row of ROWS.f32 (train_for_export --eval_rows: a job's eval rows, raw) is the
      features (every column but the last, the label) of a row of the CSV file, and the
      rows are not simply the file's first rows (the held-out split is a permutation)
  onnx_check.py records DATA.tfrecord FEATURE ROWS.f32 N
      the int64 feature FEATURE of the first N tf.train.Example records of a TFRecord file
      (a job's eval source), as the float rows train_for_export --forward reads (token ids
      are exact in float32); read here with the framing's CRCs checked, sharing no code with
      Lockstep's reader
  onnx_check.py check MODEL.onnx ROWS.f32 FORWARD.f32 STEP [CONTROL]
      onnx.checker (full_check: with strict shape inference) passes; the graph's input has a
      symbolic batch dimension; the metadata names the job and STEP; the NumPy evaluator
      below runs the graph on the raw rows (one batch of all, and one row alone) and matches
      Lockstep's own forward pass (FORWARD.f32, train_for_export --forward) within 1e-5.
      As a control, the graph with node CONTROL (default feature_scale) made an Identity of
      its first input must differ visibly: the comparison can tell it apart.

The evaluator is written from the ONNX operator documents (no onnxruntime in Debian), one
NumPy function per op export/onnx_layers.cc emits.
"""
import csv
import gzip
import math
import os
import struct
import sys

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from tfrecord_example import masked_crc32c  # noqa: E402


def attribute(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def window_patches(x, kernel, strides, pads, fill):
    """x NCHW padded by pads [top, left, bottom, right] with `fill`; yields ((ky, kx), the
    [n, c, oh, ow] slice each kernel position sees)."""
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
               constant_values=fill)
    oh = (x.shape[2] - kernel[0]) // strides[0] + 1
    ow = (x.shape[3] - kernel[1]) // strides[1] + 1
    for ky in range(kernel[0]):
        for kx in range(kernel[1]):
            yield (ky, kx), x[:, :, ky:ky + strides[0] * (oh - 1) + 1:strides[0],
                              kx:kx + strides[1] * (ow - 1) + 1:strides[1]]


def conv(n, x, w):
    """Conv, NCHW input, OIHW weights, no groups or dilations."""
    out = None
    for (ky, kx), patch in window_patches(x, attribute(n, "kernel_shape", None),
                                          attribute(n, "strides", [1, 1]),
                                          attribute(n, "pads", [0, 0, 0, 0]), 0):
        term = np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
        out = term if out is None else out + term
    return out.astype(np.float32)


def max_pool(n, x):
    out = None
    for _, patch in window_patches(x, attribute(n, "kernel_shape", None),
                                   attribute(n, "strides", [1, 1]),
                                   attribute(n, "pads", [0, 0, 0, 0]), -np.inf):
        out = patch if out is None else np.maximum(out, patch)
    return out


def layer_norm(n, x, scale, bias):
    mean = np.mean(x, axis=-1, keepdims=True)
    var = np.mean(np.square(x - mean), axis=-1, keepdims=True)
    rstd = np.float32(1) / np.sqrt(var + np.float32(attribute(n, "epsilon", 1e-5)))
    return (x - mean) * rstd * scale + bias


ERF = np.vectorize(math.erf, otypes=[np.float64])
ONNX_TYPES = {onnx.TensorProto.INT64: np.int64, onnx.TensorProto.FLOAT: np.float32}


# The ops export/onnx_layers.cc emits, as the ONNX operator documents define them.
OPS = {
    "Div": lambda n, a, b: a / b,
    "Add": lambda n, a, b: a + b,
    "MatMul": lambda n, a, b: np.matmul(a, b),
    "Relu": lambda n, a: np.maximum(a, np.float32(0)),
    "Sigmoid": lambda n, a: np.float32(1) / (np.float32(1) + np.exp(-a)),
    "Tanh": lambda n, a: np.tanh(a),
    "Softmax": lambda n, a: softmax(a, attribute(n, "axis", -1)),
    "Flatten": lambda n, a: a.reshape(a.shape[0], -1),
    "Reshape": lambda n, a, s: a.reshape([a.shape[i] if d == 0 else d for i, d in enumerate(s)]),
    "Identity": lambda n, a: a,
    "Sub": lambda n, a, b: a - b,
    "Mul": lambda n, a, b: a * b,
    "Sqrt": lambda n, a: np.sqrt(a),
    "Reciprocal": lambda n, a: np.float32(1) / a,
    "Erf": lambda n, a: ERF(a).astype(np.float32),
    "Transpose": lambda n, a: np.transpose(a, attribute(n, "perm", None)),
    "Conv": conv,
    "MaxPool": max_pool,
    "LayerNormalization": layer_norm,
    "ReduceMean": lambda n, a: np.mean(a, axis=tuple(attribute(n, "axes", None)),
                                       keepdims=bool(attribute(n, "keepdims", 1))),
    "Cast": lambda n, a: a.astype(ONNX_TYPES[attribute(n, "to", None)]),
    "Gather": lambda n, table, ids: np.take(table, ids, axis=attribute(n, "axis", 0)),
    "Split": lambda n, a: tuple(np.split(a, len(n.output), axis=attribute(n, "axis", 0))),
    "Concat": lambda n, *a: np.concatenate(a, axis=attribute(n, "axis", None)),
}


def evaluate(model, features):
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values[model.graph.input[0].name] = features
    for node in model.graph.node:
        if node.op_type not in OPS:
            raise ValueError(f"the evaluator has no {node.op_type} (node {node.name})")
        out = OPS[node.op_type](node, *[values[i] for i in node.input])
        for name, value in zip(node.output, out if isinstance(out, tuple) else (out,)):
            values[name] = value
    return values[model.graph.output[0].name]


def in_data(data, rows_path):
    with gzip.open(data, "rt") as f:
        table = np.asarray([[float(v) for v in r[:-1]] for r in csv.reader(f)], dtype="<f4")
    x = np.fromfile(rows_path, dtype="<f4").reshape(-1, table.shape[1])
    known = {r.tobytes() for r in table}
    problems = [f"row {i} of {rows_path} is no row of {data}"
                for i, r in enumerate(x) if r.tobytes() not in known]
    if np.array_equal(x, table[: x.shape[0]]):
        problems.append(f"{rows_path} holds the first rows of {data}, not a held-out split")
    return problems


def tfrecords(path):
    """The data of each record of a TFRecord file: length u64, its masked CRC32C u32, the
    data, the data's masked CRC32C u32 (little-endian)."""
    with open(path, "rb") as f:
        while header := f.read(12):
            if len(header) != 12:
                raise ValueError(f"{path}: a record's header is cut short")
            length, length_crc = struct.unpack("<QI", header)
            if masked_crc32c(header[:8]) != length_crc:
                raise ValueError(f"{path}: a record's length fails its CRC")
            data, trailer = f.read(length), f.read(4)
            if (len(data) != length or len(trailer) != 4 or
                    masked_crc32c(data) != struct.unpack("<I", trailer)[0]):
                raise ValueError(f"{path}: a record's data is cut short or fails its CRC")
            yield data


def varint(data, i):
    """The protobuf varint at data[i:] and the index after it."""
    value, shift = 0, 0
    while True:
        value |= (data[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not data[i - 1] & 0x80:
            return value, i


def fields(message):
    """(field number, value) of a protobuf message's bytes: an int for a varint, bytes for
    a length-delimited field (the only wire types tf.train.Example uses)."""
    i = 0
    while i < len(message):
        key, i = varint(message, i)
        if key & 7 == 0:
            value, i = varint(message, i)
        elif key & 7 == 2:
            size, i = varint(message, i)
            value, i = message[i:i + size], i + size
        else:
            raise ValueError(f"wire type {key & 7} in a tf.train.Example")
        yield key >> 3, value


def int64_feature(example, name):
    """Example{features = 1: Features{map<string, Feature> feature = 1}}, Feature{int64_list
    = 3: Int64List{repeated int64 value = 1}}, packed or one varint each: the values of
    the feature `name`."""
    for _, features in fields(example):
        for _, entry in fields(features):
            entry = dict(fields(entry))
            if entry.get(1) != name.encode():
                continue
            values = []
            for number, kind in fields(entry.get(2, b"")):
                if number != 3:
                    raise ValueError(f"feature {name}: not an int64_list (Feature field {number})")
                for _, v in fields(kind):
                    if isinstance(v, int):
                        values.append(v)
                        continue
                    i = 0
                    while i < len(v):
                        value, i = varint(v, i)
                        values.append(value)
            return [v - (1 << 64) if v >= 1 << 63 else v for v in values]
    raise ValueError(f"feature {name}: not in the record")


def records(data, name, out, n):
    table = [int64_feature(r, name) for r, _ in zip(tfrecords(data), range(int(n)))]
    if len(table) != int(n) or len({len(r) for r in table}) != 1:
        raise ValueError(f"{data}: want {n} records of one width of {name}, got "
                         f"{[len(r) for r in table]}")
    rows = np.asarray(table, dtype="<f4")
    if not np.array_equal(rows.astype(np.int64), np.asarray(table, dtype=np.int64)):
        raise ValueError(f"{data}: {name} holds values float32 does not carry exactly")
    rows.tofile(out)


def check(path, rows_path, forward_path, step, control="feature_scale"):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    problems = []
    dims = model.graph.input[0].type.tensor_type.shape.dim
    if not dims[0].dim_param:
        problems.append(f"the input's batch dimension is fixed: {dims[0]}")
    width = int(np.prod([d.dim_value for d in dims[1:]]))
    meta = {p.key: p.value for p in model.metadata_props}
    if meta.get("step") != step or meta.get("job_id") != "digits-export":
        problems.append(f"metadata {meta}")
    x = np.fromfile(rows_path, dtype="<f4").reshape(-1, width)
    # Token ids arrive as the files hold them, int64; other features as float32.
    if model.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT64:
        x = x.astype(np.int64)
    want = np.fromfile(forward_path, dtype="<f4").reshape(x.shape[0], -1)
    for batch in (x, x[:1]):
        got = evaluate(model, batch)
        got = got.reshape(got.shape[0], -1)
        if got.shape != want[: batch.shape[0]].shape:
            problems.append(f"output {got.shape}, Lockstep's {want[: batch.shape[0]].shape}")
            continue
        diff = float(np.max(np.abs(got - want[: batch.shape[0]])))
        print(f"batch {batch.shape[0]}: largest difference from Lockstep's forward pass {diff:.3g}")
        if not diff <= 1e-5:
            problems.append(f"batch {batch.shape[0]}: differs from Lockstep's by {diff}")
    # A control: the graph without the node `control` (featureScale, the causal mask) is
    # visibly off, so the comparison above can tell a wrong graph apart.
    altered = onnx.ModelProto()
    altered.CopyFrom(model)
    found = [node for node in altered.graph.node if node.name == control]
    if not found:
        problems.append(f"the graph has no node {control} for the control")
    for node in found:
        node.op_type = "Identity"
        del node.input[1:]
        del node.attribute[:]
    if found and np.max(np.abs(evaluate(altered, x).reshape(x.shape[0], -1) - want)) <= 1e-5:
        problems.append(f"the comparison cannot tell the graph without {control} apart")
    return problems


if __name__ == "__main__":
    if sys.argv[1] == "records":
        records(*sys.argv[2:6])
        sys.exit(0)
    found = in_data(*sys.argv[2:4]) if sys.argv[1] == "in_data" else check(*sys.argv[2:7])
    for p in found:
        print("FAIL:", p)
    if not found and sys.argv[1] == "in_data":
        print("OK: every row of", sys.argv[3], "is a row of", sys.argv[2])
    elif not found:
        print("OK:", sys.argv[2], "passes onnx.checker and matches Lockstep's forward pass")
    sys.exit(1 if found else 0)
