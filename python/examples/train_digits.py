#!/usr/bin/env python3
"""Trains the bundled digits MLP on a running Lockstep cluster from Python, follows its loss,
exports the trained model through the coordinator (npz) and loads its weights with NumPy.

    bazel-bin/client/lockstep local --keep_running --no_job &    # prints --config=PATH
    export LOCKSTEP_CONFIG=/tmp/lockstep-cluster-XXXXXX/tls/client.config
    python3 python/examples/train_digits.py

Run it from the repository root: the data file is examples/data/digits.csv.gz there, and the
export writes its file with bazel-bin/client/lockstep (or $LOCKSTEP_BIN, or `lockstep` on PATH).
"""

import os
import sys

import numpy as np

import lockstep

STEPS = 2000

spec = {
    "name": "digits-from-python",
    "model": {
        "inputShape": [64],
        "seed": 7,
        "loss": "SPARSE_CATEGORICAL_CROSSENTROPY",
        "layers": [
            {"name": "hidden", "dense": {"units": 128}},
            {"relu": {}},
            {"name": "logits", "dense": {"units": 10}},
        ],
    },
    "optimizer": {"adam": {}, "learningRate": {"constant": {"value": 0.005}}},
    "data": {
        # A path the workers can read: inside their --data_root (lockstep local's includes
        # the repository's examples/data).
        "train": {"files": [os.path.abspath("examples/data/digits.csv.gz")], "format": "CSV",
                  "featureScale": 1 / 16},
        "evalFraction": 0.2,
    },
    "globalBatchSize": 48,
    "steps": STEPS,
    "evalEverySteps": 500,
    # Relative: under the workers' --output_root (lockstep local's work dir).
    "checkpoint": {"dir": "checkpoints/digits-from-python"},
}

client = lockstep.Client()  # LOCKSTEP_CONFIG, as `lockstep status` would read it
job = client.submit(spec)
print(f"submitted {job}")
for event in client.watch(job, timeout=600):
    if event.state == "RUNNING" and event.step > 0:
        print(f"step {event.step:4d}/{event.total_steps}  loss {event.loss:.4f}")
    elif not event.ended:
        print(f"{event.state}  {event.message}")
final = client.describe(job).job
state = lockstep.state_name(final.state)
if state != "SUCCEEDED":
    sys.exit(f"{job} {state}: {final.reason}")
print(f"{state}: test accuracy {final.progress.eval_accuracy:.4f}")

# The job's newest checkpoint, fetched through the coordinator from a worker that holds it
# (a viewer's token suffices), as npz: one array per variable, under its graph name.
output = client.export(job, format="npz", output=os.path.abspath("digits-from-python.npz"))
print(f"exported {job} as {output}")
weights = np.load(output)
for name, w in weights.items():
    print(f"{name} {w.shape} {w.dtype}")
# The model by hand: logits = relu(x @ W1 + b1) @ W2 + b2.
x = np.random.default_rng(0).uniform(0, 1, size=(5, 64)).astype(np.float32)
hidden = np.maximum(x @ weights["hidden/kernel"] + weights["hidden/bias"], 0)
print("predicted classes:", (hidden @ weights["logits/kernel"] + weights["logits/bias"]).argmax(1))
