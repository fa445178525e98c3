#!/usr/bin/env bash
# A trained job's checkpoint exported with `lockstep export` (safetensors and npz, with and
# without the optimizer slots, from a file and from a directory) reads back bitwise equal to
# the checkpoint's tensors through readers that share no code with Lockstep
# (tests/export_check.py: NumPy's np.load; a few lines of Python for safetensors); the ONNX
# export passes onnx.checker and, run by a NumPy evaluator, matches Lockstep's forward pass
# (tests/onnx_check.py), for the digits MLP, the residual CNN and the char Transformer. A job
# started from the safetensors export (initFrom) holds its variables bitwise and evaluates
# identically to the exporting job; one started from an export that does not fit the model
# fails naming each variable missing or mis-shaped.
set -euo pipefail

PY=/usr/bin/python3  # Debian's, with python3-numpy (tools/bootstrap.sh)
CLI=client/lockstep
OUT="${TEST_TMPDIR:-$(mktemp -d)}/export"
rm -rf "$OUT"

tests/train_for_export --job=examples/jobs/digits_mlp.json \
  --data=examples/data/digits.csv.gz --out="$OUT" --steps=12 --eval_rows=64
ckpt=$(ls "$OUT"/ckpt/*.lsckpt)
step=$(awk '$1 == "step" {print $2}' "$OUT/report.txt")
[ "$step" = 12 ] || { echo "FAIL: the job ran $step steps, want 12"; exit 1; }

"$CLI" export "$ckpt" --format=npz --output="$OUT/model.npz"
"$CLI" export "$OUT/ckpt" --format=npz --output="$OUT/all.npz" --with_optimizer_state
"$CLI" export "$ckpt" --format=safetensors --output="$OUT/model.safetensors"
"$CLI" export "$OUT/ckpt" --format=safetensors --output="$OUT/all.safetensors" \
  --with_optimizer_state --spec="$OUT/spec.json"

$PY tests/export_check.py npz "$OUT/model.npz" "$OUT/dump"
$PY tests/export_check.py npz "$OUT/all.npz" "$OUT/dump" --slots
$PY tests/export_check.py safetensors "$OUT/model.safetensors" "$OUT/dump" --step=12
$PY tests/export_check.py safetensors "$OUT/all.safetensors" "$OUT/dump" --slots --step=12 --spec

# ONNX: checked by onnx.checker and run by a NumPy evaluator on raw rows of the job's eval
# data (the first 64 of the data.evalFraction the job holds out of digits.csv.gz by its seed,
# each checked to be a row of the file as Python's csv reads it), against Lockstep's own
# forward pass on the same rows (tests/onnx_check.py).
"$CLI" export "$ckpt" --format=onnx --output="$OUT/model.onnx" --spec="$OUT/spec.json"
$PY tests/onnx_check.py in_data examples/data/digits.csv.gz "$OUT/eval_rows.f32"
tests/train_for_export --job=examples/jobs/digits_mlp.json \
  --data=examples/data/digits.csv.gz --out="$OUT/forward" --steps=12 \
  --forward="$OUT/eval_rows.f32"
cmp "$OUT/forward/dump/variable0.bin" "$OUT/dump/variable0.bin" ||
  { echo "FAIL: two runs of the same job differ"; exit 1; }
$PY tests/onnx_check.py check "$OUT/model.onnx" "$OUT/eval_rows.f32" "$OUT/forward/forward.f32" 12

# The other bundled models, the same way: the residual CNN (conv2d, batch norm with its moving
# statistics, a residual add, max pooling) on the same eval rows (its job holds out the same
# split: the same file, fraction and seed, checked here), and the char Transformer
# (embeddings, layer norm, causal self-attention, GELU, residual adds) on the first rows of its
# job's eval data (data.eval of examples/jobs/char_transformer.json, the "tokens" int64
# feature read from the TFRecord file by tests/onnx_check.py), its control the causal mask of
# the first attention layer.
tests/train_for_export --job=examples/jobs/digits_residual.json \
  --data=examples/data/digits.csv.gz --out="$OUT/cnn" --steps=6 \
  --forward="$OUT/eval_rows.f32" --eval_rows=64
cmp "$OUT/cnn/eval_rows.f32" "$OUT/eval_rows.f32" ||
  { echo "FAIL: the residual CNN's job holds out other eval rows than the MLP's"; exit 1; }
"$CLI" export "$OUT/cnn/ckpt" --format=onnx --output="$OUT/cnn.onnx" --spec="$OUT/cnn/spec.json"
$PY tests/onnx_check.py check "$OUT/cnn.onnx" "$OUT/eval_rows.f32" "$OUT/cnn/forward.f32" 6
lm_eval=$($PY -c 'import json, sys; print(*json.load(open(sys.argv[1]))["data"]["eval"]["files"])' \
  examples/jobs/char_transformer.json)
[ "$lm_eval" = examples/data/fortunes-valid.tfrecord ] ||
  { echo "FAIL: the char Transformer's eval source is '$lm_eval', not the file read here"; exit 1; }
$PY tests/onnx_check.py records "$lm_eval" tokens "$OUT/tokens.f32" 6
tests/train_for_export --job=examples/jobs/char_transformer.json \
  --data=examples/data/fortunes-train.tfrecord --out="$OUT/lm" --steps=4 \
  --forward="$OUT/tokens.f32"
"$CLI" export "$OUT/lm/ckpt" --format=onnx --output="$OUT/lm.onnx" --spec="$OUT/lm/spec.json"
$PY tests/onnx_check.py check "$OUT/lm.onnx" "$OUT/tokens.f32" "$OUT/lm/forward.f32" 4 \
  att1/masked
$PY -c 'import onnx, sys; t = onnx.load(sys.argv[1]).graph.input[0].type.tensor_type
sys.exit(t.elem_type != onnx.TensorProto.INT64)' "$OUT/lm.onnx" ||
  { echo "FAIL: the Transformer's input is not int64 token ids, as its TFRecord files hold them"; exit 1; }
# The kinds neither uses (tests/onnx_layers_job.json): strided convolutions and stride-1
# pooling with uneven SAME pads, a branch concatenated, sigmoid, global average pooling,
# layer norm, softmax and flatten mid-model.
tests/train_for_export --job=tests/onnx_layers_job.json \
  --data=examples/data/digits.csv.gz --out="$OUT/zoo" --steps=6 \
  --forward="$OUT/eval_rows.f32"
"$CLI" export "$OUT/zoo/ckpt" --format=onnx --output="$OUT/zoo.onnx" --spec="$OUT/zoo/spec.json"
$PY tests/onnx_check.py check "$OUT/zoo.onnx" "$OUT/eval_rows.f32" "$OUT/zoo/forward.f32" 6

# Wrong inputs: the variables-only export is not taken for one with slots, a job id is
# refused saying why, and an unknown format names the flag.
if $PY tests/export_check.py npz "$OUT/model.npz" "$OUT/dump" --slots >/dev/null; then
  echo "FAIL: a variables-only export passed as one with optimizer slots"; exit 1
fi
if "$CLI" export digits-export --format=npz --output="$OUT/job.npz" --insecure \
  --coordinator=127.0.0.1:1 2>"$OUT/err"; then
  echo "FAIL: exporting by job id succeeded"; exit 1
fi
grep -q "fetched through the coordinator 127.0.0.1:1" "$OUT/err" || { cat "$OUT/err"; exit 1; }
if "$CLI" export "$ckpt" --format=pickle --output="$OUT/x" 2>"$OUT/err"; then
  echo "FAIL: an unknown format was accepted"; exit 1
fi
grep -q -- '--format: unknown format "pickle"' "$OUT/err" || { cat "$OUT/err"; exit 1; }
if tests/train_for_export --job=examples/jobs/digits_mlp.json \
  --data=examples/data/digits.csv.gz --out="$OUT/many" --steps=1 --eval_rows=5000 2>"$OUT/err"; then
  echo "FAIL: more eval rows than the job holds out were written"; exit 1
fi
grep -q -- '--eval_rows: 5000 is outside \[1, 359\]' "$OUT/err" || { cat "$OUT/err"; exit 1; }
# initFrom: one step at a learning rate of 0, so the checkpoint holds what the job started from.
tests/train_for_export --job=examples/jobs/digits_mlp.json \
  --data=examples/data/digits.csv.gz --out="$OUT/init" --steps=1 \
  --init_from="$OUT/model.safetensors"
$PY tests/export_check.py safetensors "$OUT/model.safetensors" "$OUT/init/dump"
exported=$(awk '$1 == "eval_accuracy" {print $2}' "$OUT/report.txt")
started=$(awk '$1 == "eval_accuracy" {print $2}' "$OUT/init/report.txt")
if [ -z "$exported" ] || [ "$exported" != "$started" ]; then
  echo "FAIL: the exporting job evaluates to '$exported', the job started from its export to" \
    "'$started'"
  exit 1
fi
echo "OK: both jobs evaluate to accuracy $exported"

$PY tests/export_check.py misfit "$OUT/model.safetensors" "$OUT/misfit.safetensors" \
  >"$OUT/expected"
if tests/train_for_export --job=examples/jobs/digits_mlp.json \
  --data=examples/data/digits.csv.gz --out="$OUT/misfit" --steps=1 \
  --init_from="$OUT/misfit.safetensors" 2>"$OUT/err"; then
  echo "FAIL: a job started from an export that does not fit its model"; exit 1
fi
while read -r line; do
  grep -qF "$line" "$OUT/err" || { echo "FAIL: the refusal does not say: $line"; cat "$OUT/err"; exit 1; }
done <"$OUT/expected"
grep -qF "init_from.path: $OUT/misfit.safetensors does not fit the model" "$OUT/err" ||
  { cat "$OUT/err"; exit 1; }
echo "PASS"
