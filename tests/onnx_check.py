#!/usr/bin/env python3
"""Checks `lockstep export --format=onnx` with ONNX's own tools and a small NumPy evaluator.

  onnx_check.py rows DATA.csv.gz ROWS.f32 N
      the first N rows' features (every column but the last, the label), raw, as float32
  onnx_check.py check MODEL.onnx ROWS.f32 FORWARD.f32 STEP
      onnx.checker (full_check: with strict shape inference) passes; the graph's input has a
      symbolic batch dimension; the metadata names the job and STEP; the NumPy evaluator
      below runs the graph on the raw rows (one batch of all, and one row alone) and matches
      Lockstep's own forward pass (FORWARD.f32, train_for_export --forward) within 1e-5.
"""
import csv
import gzip
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def attribute(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def softmax(x, axis):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


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
}


def evaluate(model, features):
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values[model.graph.input[0].name] = features
    for node in model.graph.node:
        if node.op_type not in OPS:
            raise ValueError(f"the evaluator has no {node.op_type} (node {node.name})")
        values[node.output[0]] = OPS[node.op_type](node, *[values[i] for i in node.input])
    return values[model.graph.output[0].name]


def rows(data, out, n):
    with gzip.open(data, "rt") as f:
        table = [[float(v) for v in r[:-1]] for r, _ in zip(csv.reader(f), range(int(n)))]
    np.asarray(table, dtype="<f4").tofile(out)


def check(path, rows_path, forward_path, step):
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
    want = np.fromfile(forward_path, dtype="<f4").reshape(x.shape[0], -1)
    for batch in (x, x[:1]):
        got = evaluate(model, batch)
        if got.shape != want[: batch.shape[0]].shape:
            problems.append(f"output {got.shape}, Lockstep's {want[: batch.shape[0]].shape}")
            continue
        diff = float(np.max(np.abs(got - want[: batch.shape[0]])))
        print(f"batch {batch.shape[0]}: largest difference from Lockstep's forward pass {diff:.3g}")
        if not diff <= 1e-5:
            problems.append(f"batch {batch.shape[0]}: differs from Lockstep's by {diff}")
    # A control: the evaluator without the featureScale node is visibly off.
    unscaled = onnx.ModelProto()
    unscaled.CopyFrom(model)
    for node in unscaled.graph.node:
        if node.op_type == "Div":
            node.op_type = "Identity"
            del node.input[1:]
    if np.max(np.abs(evaluate(unscaled, x) - want)) <= 1e-5:
        problems.append("the comparison cannot tell a graph without featureScale apart")
    return problems


if __name__ == "__main__":
    if sys.argv[1] == "rows":
        rows(*sys.argv[2:5])
        sys.exit(0)
    found = check(*sys.argv[2:6])
    for p in found:
        print("FAIL:", p)
    if not found:
        print("OK:", sys.argv[2], "passes onnx.checker and matches Lockstep's forward pass")
    sys.exit(1 if found else 0)
