#!/usr/bin/env bash
# tools/gpu_check.sh without a GPU, so that it cannot rot between the rare GPU runs: the scripts
# parse, bad arguments are refused, and on a fake bundle (shell scripts standing in for the
# test binaries, the all-reduce bench, nvidia-smi and compute-sanitizer; fake torch scripts
# through GPU_CHECK_TOOLS) the run reaches its report with the right rows, figures, JSON and
# logs. No Bazel, no GPU. Also: tools/gpu_tests.py finds every requires-gpu test of this
# source tree (which it reads through its runfile's link: never cached) and breaks no rule, so
# that a bundle cannot miss one unnoticed; a bundle that lacks one fails gpu_check.sh's bundle
# row; and the run keeps to its time bound when every step hangs.
set -u
here=$(cd "$(dirname "$0")" && pwd)
check=$here/gpu_check.sh
tmp=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
expect_grep() {  # PATTERN FILE WHAT
  grep -q -- "$1" "$2" || fail "$3: no line matches '$1' in $(basename "$2")"
}

for f in "$here/gpu_check.sh" "$here/gpu_bundle.sh" "$here/gpu_check_test.sh"; do
  bash -n "$f" || fail "$f does not parse"
done
for f in "$here/gpu/torch_allreduce.py" "$here/gpu/torch_train.py" "$here/gpu_tests.py"; do
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" ||
    fail "$f does not parse"
done
# Without torch the torch scripts say so and exit 3 (with torch but no GPU, also 3).
if ! python3 -c 'import torch' 2>/dev/null; then
  python3 "$here/gpu/torch_train.py" --steps=1 >"$tmp/torch.out" 2>&1
  rc=$?
  [ "$rc" -eq 3 ] || fail "torch_train.py without torch exited $rc, want 3"
  expect_grep "torch is not installed" "$tmp/torch.out" "torch_train.py without torch"
fi
# The MLP step's products whose cuBLAS time its step is put against: 3 forward, 3 weight
# gradients (x^T.dy: the first operand transposed), 2 input gradients (dy.W^T: the second),
# the first layer's input needing none; 3x the forward's multiply-adds less that one.
python3 - "$here/gpu" <<'PY' || fail "torch_train.py's GEMM shapes"
import sys
sys.path.insert(0, sys.argv[1])
import torch_train as t
s = {g[0]: g[1:] for g in t.gemm_shapes(4096)}
assert sorted(s) == ["dW1", "dW2", "dW3", "dx2", "dx3", "fwd1", "fwd2", "fwd3"], sorted(s)
assert s["fwd1"] == (4096, 4096, 8192, False, False), s["fwd1"]
assert s["dW2"] == (8192, 4096, 8192, True, False), s["dW2"]
assert s["dx3"] == (4096, 10, 8192, False, True), s["dx3"]
macs = lambda names: sum(s[n][0] * s[n][1] * s[n][2] for n in names)
fwd = macs(["fwd1", "fwd2", "fwd3"])
assert macs(s) == 3 * fwd - 4096 * 4096 * 8192, (macs(s), fwd)
PY
python3 "$here/gpu/torch_allreduce.py" --min_bytes=3 >"$tmp/args.out" 2>&1
[ $? -eq 2 ] || fail "torch_allreduce.py --min_bytes=3 was not refused"

# tools/gpu_tests.py on a tree of its own: what it lists, and each rule failing.
scan=$here/gpu_tests.py
t=$tmp/scan_tree
mkdir -p "$t/a/b" "$t/c" "$t/engine" "$tmp/empty_tree"
cat >"$t/a/b/BUILD.bazel" <<'BUILD'
load("//third_party/cuda:cuda.bzl", "cuda_test")
cuda_test(name = "k_test", srcs = ["k_test.cc"])
cc_test(name = "tagged_test", tags = ["external"] + ["requires-gpu"], deps = [":x"])
cc_test(name = "cpu_test", deps = ["//engine:device_test_env"])
BUILD
python3 "$scan" list "$t" >"$tmp/scan.out" 2>&1
[ "$(tr '\n' ' ' <"$tmp/scan.out")" = "//a/b:k_test //a/b:tagged_test " ] ||
  fail "gpu_tests.py list: $(cat "$tmp/scan.out")"
python3 "$scan" check "$t" >"$tmp/scan.out" 2>&1 || fail "gpu_tests.py check: $(cat "$tmp/scan.out")"
cat >"$t/c/BUILD.bazel" <<'BUILD'
cc_test(name = "c_test", deps = ["//engine:real_gpu_env"])
BUILD
cat >"$t/engine/BUILD.bazel" <<'BUILD'
cc_test(name = "real_test", target_compatible_with = ONLY_WITH_CUDA)
cuda_test(name = "data_test", data = ["x.csv"])
cc_test(name = "env_test", deps = [":real_gpu_env"])
BUILD
python3 "$scan" check "$t" >"$tmp/scan.out" 2>&1 && fail "gpu_tests.py check passed a broken tree"
expect_grep "//c:c_test is CUDA-only (it depends on //engine:real_gpu_env)" "$tmp/scan.out" \
  "a test on a real GPU without the tag"
expect_grep "//engine:env_test is CUDA-only" "$tmp/scan.out" "a package-relative real GPU dependency"
expect_grep "//engine:real_test is CUDA-only (target_compatible_with CUDA)" "$tmp/scan.out" \
  "a CUDA-only test without the tag"
expect_grep "//engine:data_test is requires-gpu with data" "$tmp/scan.out" "a requires-gpu test with data"
printf '//a/b:k_test tests/a/b/k_test\n' >"$tmp/tests.txt"
python3 "$scan" missing "$t" "$tmp/tests.txt" >"$tmp/scan.out" 2>&1
[ $? -eq 1 ] || fail "gpu_tests.py missing did not fail"
expect_grep "^//a/b:tagged_test$" "$tmp/scan.out" "the test the bundle lacks"
python3 "$scan" missing "$tmp/empty_tree" "$tmp/tests.txt" >/dev/null 2>&1
[ $? -eq 3 ] || fail "gpu_tests.py missing on a tree without GPU tests did not exit 3"

# This source tree: every CUDA-only test is requires-gpu (so in the bundle) and none needs a
# file the bundle lacks. The runfile links into the checkout.
src=$(cd "$(dirname "$(readlink -f "$scan")")/.." && pwd)
if [ -f "$src/WORKSPACE" ]; then
  python3 "$scan" check "$src" >"$tmp/scan.out" 2>&1 || fail "this tree: $(cat "$tmp/scan.out")"
  n=$(python3 "$scan" list "$src" | grep -c '^//')
  echo "this tree: $n requires-gpu tests"
  [ "$n" -ge 10 ] || fail "this tree lists only $n requires-gpu tests (10 when this check was written)"
else
  fail "$scan does not link into a source tree ($src)"
fi

# Arguments.
OUT='' "$check" "$tmp/nothing" >"$tmp/usage.out" 2>&1
[ $? -eq 2 ] || fail "gpu_check.sh without OUT did not exit 2"
expect_grep "OUT is not set" "$tmp/usage.out" "gpu_check.sh without OUT"
OUT=$tmp/o "$check" >"$tmp/usage.out" 2>&1
[ $? -eq 2 ] || fail "gpu_check.sh without a bundle did not exit 2"
expect_grep "usage:" "$tmp/usage.out" "gpu_check.sh without a bundle"
OUT=$tmp/o "$check" "$tmp/no_such.tar.xz" >"$tmp/usage.out" 2>&1
[ $? -eq 2 ] || fail "gpu_check.sh with a missing bundle did not exit 2"
expect_grep "no bundle at" "$tmp/usage.out" "gpu_check.sh with a missing bundle"

# The fake bundle.
b=$tmp/stage/lockstep-gpu
mkdir -p "$b/bin" "$b/lib" "$tmp/fake_tools" "$b/tests/engine/kernels/cuda" "$b/tests/collectives/nccl" \
  "$tmp/path"
echo "fake" >"$b/VERSION"
printf '#!/usr/bin/env bash\nexec "$@"\n' >"$b/run.sh"
# A gtest binary: writes its XML (two passing cases; with FAIL=1 one of them fails).
fake_test() {
  cat >"$1" <<EOF
#!/usr/bin/env bash
failed=$2
EOF
  cat >>"$1" <<'EOF'
for a in "$@"; do case "$a" in --gtest_output=xml:*) xml=${a#--gtest_output=xml:} ;; esac; done
[ -n "${LD_LIBRARY_PATH:-}" ] || { echo "no LD_LIBRARY_PATH"; exit 3; }
f=""; [ "$failed" -eq 1 ] && f='<failure message="want 3, got 2"/>'
cat >"$xml" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="3" failures="$failed" disabled="0" errors="0" name="AllTests">
  <testsuite name="T" tests="3" failures="$failed">
    <testcase name="A" status="run" result="completed" classname="T">$f</testcase>
    <testcase name="B" status="run" result="completed" classname="T" />
    <testcase name="C" status="run" result="skipped" classname="T" />
  </testsuite>
</testsuites>
XML
echo "[  PASSED  ] fake"
exit "$failed"
EOF
  chmod +x "$1"
}
fake_test "$b/tests/engine/kernels/cuda/fake_kernel_test" 0
fake_test "$b/tests/collectives/nccl/fake_nccl_test" 1
cat >"$b/tests.txt" <<'EOF'
//engine/kernels/cuda:fake_kernel_test tests/engine/kernels/cuda/fake_kernel_test
//collectives/nccl:fake_nccl_test tests/collectives/nccl/fake_nccl_test
//collectives/nccl:gone_test tests/collectives/nccl/gone_test
EOF
# nccl-tests tables: ours at half torch's busbw from 1 MiB on.
table() {  # BUSBW_AT_1MIB
  echo '#      size(B)        count   type     time(us)  algbw(GB/s)  busbw(GB/s)  #wrong'
  echo "             8            2  float        40.00        0.000        0.000       0"
  echo "       1048576       262144  float       100.00       10.486      $1       0"
}
{
  echo '#!/usr/bin/env bash'
  echo "cat <<'T'"
  table 5.000
  echo T
} >"$b/bin/nccl_allreduce"
chmod +x "$b/bin/nccl_allreduce"
{
  echo "print('''$(table 10.000)''')"
} >"$tmp/fake_tools/torch_allreduce.py"
cat >"$tmp/fake_tools/torch_train.py" <<'EOF'
import sys
if "--model=transformer" in sys.argv:
    print('{"config": "f32", "feed": "host", "examples_per_s": 5000.5, "step_ms": 20.5, "gemm_ms": null, "max_memory_allocated_bytes": 1073741824}')
    print('{"config": "bf16", "feed": "host", "examples_per_s": 12000.0, "step_ms": 8.5, "gemm_ms": null, "max_memory_allocated_bytes": 1073741824}')
    raise SystemExit(0)
print('{"config": "f32", "examples_per_s": 60000.5, "step_ms": 68.2, "gemm_ms": 60.1, "max_memory_allocated_bytes": 2147483648}')
print('{"config": "bf16", "error": "RuntimeError: out of memory"}')
raise SystemExit(1)
EOF
# The CLI: `local --gpus` trains the job it is given; the char Transformer's only when its
# windows were made where it runs (the job's relative data paths resolve there).
cat >"$b/bin/lockstep" <<'EOF'
#!/usr/bin/env bash
[ "$1" = local ] || exit 2
case "$*" in *--help*) echo "usage: lockstep local [--workers=N] [--gpus] JOB"; exit 0 ;; esac
[ -n "${LD_LIBRARY_PATH:-}" ] || { echo "no LD_LIBRARY_PATH"; exit 3; }
case "$*" in
  *char_transformer.json)
    for f in examples/data/fortunes-train.tfrecord examples/data/fortunes-valid.tfrecord; do
      [ -s "$f" ] || { echo "data.train.files: no $f in $PWD"; exit 1; }
    done
    printf 'step 480/960 loss 1.9000\rstep 960/960 loss 1.2345 ETA 0s\n'
    echo "test accuracy: 0.61" ;;
  *) echo "test accuracy: 0.97" ;;
esac
EOF
chmod +x "$b/bin/lockstep"
# Ours, train_throughput's last line. The MLP in f32: half torch's examples/s, 1.1x its peak,
# its step 1.5x torch's GEMM time. The Transformer: in f32 1.2x torch's examples/s at 1.1x its
# peak (both goals met); in BF16_MIXED 0.75x torch's autocast loop.
{
  echo '#!/usr/bin/env bash'
  echo "TT_ARGS=$tmp/train_throughput_args"
} >"$b/bin/train_throughput"
cat >>"$b/bin/train_throughput" <<'EOF'
case "$*" in *--help*) echo "usage: train_throughput --device=gpu ..."; exit 0 ;; esac
echo "$*" >>"$TT_ARGS"
case "$*" in
  *--model=transformer*--precision=bf16_mixed*) eps=9000.0 step=28.00 peak=1073741824 ;;
  *--model=transformer*) eps=6000.0 step=42.00 peak=1181116006 ;;
  *--precision=bf16_mixed*) eps=500000.0 step=6.00 peak=1500000000 ;;
  *) eps=30000.2 step=90.15 peak=2362232012 ;;
esac
echo "gpu: 1 worker(s) $eps examples/s (median), step $step ms, outside it 46.53 ms per step (input wait 40.00), peak device bytes $peak (2252.8 MiB)"
EOF
chmod +x "$b/bin/train_throughput"
cat >"$tmp/path/nvidia-smi" <<'EOF'
#!/usr/bin/env bash
echo "NVIDIA H100 80GB HBM3, 580.65.06, 81559 MiB, 9.0"
EOF
cat >"$tmp/path/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
echo "$*" >>"$(dirname "$0")/sanitizer_args"
while [ "$#" -gt 0 ] && [ "$1" != "${1#--}" ]; do
  case "$1" in
    --target-processes | --tool | --error-exitcode | --print-limit | --report-api-errors) shift ;;
  esac
  shift
done
"$@" --gtest_output=xml:/dev/null >/dev/null
rc=$?
echo "========= ERROR SUMMARY: 0 errors"
exit "$rc"
EOF
chmod +x "$tmp/path/"*

tar -C "$tmp/stage" -czf "$tmp/fake.tar.gz" lockstep-gpu
# The source tree the bundle is checked against: its tests and one the bundle lacks.
tree=$tmp/tree
mkdir -p "$tree/tools" "$tree/engine/kernels/cuda" "$tree/collectives/nccl"
cp "$scan" "$tree/tools/"
echo 'cuda_test(name = "fake_kernel_test")' >"$tree/engine/kernels/cuda/BUILD.bazel"
printf 'cuda_test(name = "%s")\n' fake_nccl_test gone_test new_gpu_test >"$tree/collectives/nccl/BUILD.bazel"
out=$tmp/out
start=$SECONDS
PATH=$tmp/path:$PATH OUT=$out GPU_CHECK_BUDGET_S=60 GPU_CHECK_TOOLS=$tmp/fake_tools GPU_CHECK_TREE=$tree \
  "$check" "$tmp/fake.tar.gz" >"$tmp/run.out" 2>&1
rc=$?
echo "fake run: exit $rc in $((SECONDS - start)) s"
[ "$rc" -eq 1 ] || fail "the fake run exited $rc, want 1 (one test fails)"
md=$out/report.md
if [ ! -f "$md" ]; then
  fail "no report.md"
  cat "$tmp/run.out" >&2
  exit 1
fi
expect_grep '| unpack | ok | 0 |' "$md" "unpack row"
expect_grep '| bundle | FAIL | 1 | .* | tests.txt lacks 1 requires-gpu test(s) of the tree (rebuild it with tools/gpu_bundle.sh): //collectives/nccl:new_gpu_test' \
  "$md" "the bundle row naming the test it lacks"
expect_grep '| env | ok | 0 | .* | NVIDIA H100 80GB HBM3, 580.65.06' "$md" "env row"
expect_grep '| binaries | ok | 0 | .* | all 3 of bin/ start |' "$md" "binaries row"
expect_grep '| test engine/kernels/cuda:fake_kernel_test | ok | 0 | .* | 2 passed, 0 failed, 1 skipped |' "$md" "passing test row"
expect_grep '| test collectives/nccl:fake_nccl_test | FAIL | 1 | .* | 1 passed, 1 failed, 1 skipped |' "$md" "failing test row"
expect_grep '| tests (all) | FAIL | 2 | .* | 1 of 3 binaries passed; cases: 3 passed, 1 failed, 2 skipped |' "$md" "all the tests' row"
expect_grep '| test collectives/nccl:gone_test | FAIL | 127 | .* | not in the bundle' "$md" "missing test row"
expect_grep '| allreduce_ours | ok | 0 | .* | 8 B: 40.00 us; 1 MiB: busbw 5.000 GB/s |' "$md" "our all-reduce row"
expect_grep '| allreduce_vs_torch | FAIL | 1 | .* | ours/torch busbw at >= 1 MiB: min 0.500x' "$md" "comparison row"
expect_grep '| 1 MiB | 100.00 | 5.000 | 100.00 | 10.000 | 0.500 |' "$md" "comparison table"
expect_grep '| train_torch | FAIL | 1 | .* | f32: 60000.5 ex/s, 68.2 ms/step (GEMMs 60.1 ms), peak 2.00 GiB; bf16: RuntimeError: out of memory |' "$md" "torch training row"
expect_grep '| train_ours | ok | 0 | .* | gpu: 1 worker(s) 30000.2 examples/s' "$md" "our training row"
expect_grep '| train_vs_torch | FAIL | 1 | 0 | ours/torch examples/s 0.50x (goal >= 1.0x); peak 1.10x torch max_memory_allocated (goal <= 1.2x) |' \
  "$md" "ours against torch's f32 loop"
expect_grep '| train_vs_torch_bf16 | FAIL | 1 | 0 | nothing to compare: torch has no bf16 line |' "$md" \
  "ours against torch's bf16 loop, which failed"
expect_grep '| train_torch_transformer | ok | 0 | .* | f32/host: 5000.5 ex/s, 20.5 ms/step, peak 1.00 GiB; bf16/host: 12000.0 ex/s, 8.5 ms/step, peak 1.00 GiB |' \
  "$md" "torch Transformer row"
expect_grep '| train_ours_transformer_bf16 | ok | 0 | .* | gpu: 1 worker(s) 9000.0 examples/s' "$md" \
  "our BF16_MIXED Transformer row"
expect_grep '| train_vs_torch_transformer | ok | 0 | 0 | ours/torch examples/s 1.20x (goal >= 1.0x); peak 1.10x torch max_memory_allocated (goal <= 1.2x) |' \
  "$md" "our f32 Transformer against torch's f32 loop"
expect_grep '| train_vs_torch_transformer_bf16 | FAIL | 1 | 0 | ours/torch examples/s 0.75x (goal >= 1.0x); peak 1.00x' \
  "$md" "our BF16_MIXED Transformer against torch's autocast loop, not its f32 one"
# Every run of ours: GPU, one worker, one short run; BF16_MIXED where the row says so.
[ "$(grep -c -- '--device=gpu --workers=1 --runs=1 --steps=60 --warmup=10 ' "$tmp/train_throughput_args")" -eq 4 ] ||
  fail "train_throughput ran other than 4 times with the run's flags: $(cat "$tmp/train_throughput_args")"
[ "$(grep -c -- '--precision=bf16_mixed' "$tmp/train_throughput_args")" -eq 2 ] ||
  fail "train_throughput ran other than 2 times in BF16_MIXED: $(cat "$tmp/train_throughput_args")"
# The MLP's step against its products' cuBLAS time: ours from its step, torch's from its line.
expect_grep '| step_vs_gemm | ok | 0 | 0 | GEMMs 60.100 ms: ours step 90.15 ms = 1.50x, torch step 68.20 ms = 1.13x |' \
  "$md" "the step/GEMM row"
expect_grep '| step_vs_gemm_bf16 | FAIL | 1 | 0 | nothing to compare: torch has no bf16 line with its GEMM time |' \
  "$md" "the bf16 step/GEMM row, torch's bf16 loop having failed"
expect_grep '| f32 | 60.100 | 90.150 | 1.50x | 68.200 | 1.13x |' "$md" "the step/GEMM table"
expect_grep '"feed": "host"' "$md" "torch's lines in the report"
expect_grep '| local_digits_gpu | ok | 0 | .* | test accuracy: 0.97 |' "$md" "lockstep local digits row"
expect_grep '| local_char_transformer_gpu | ok | 0 | .* | final loss 1.2345; test accuracy: 0.61 |' "$md" \
  "the char Transformer job's row (its data made by python3 where it runs)"
expect_grep '| memcheck engine/kernels/cuda:fake_kernel_test | ok | 0 | .* | ERROR SUMMARY: 0 errors |' "$md" "memcheck row"
expect_grep '| racecheck engine/kernels/cuda:fake_kernel_test | ok |' "$md" "racecheck row"
# memcheck counts memory errors only: the tests provoke CUDA API errors on purpose.
expect_grep '^--tool memcheck --report-api-errors no ' "$tmp/path/sanitizer_args" \
  "memcheck without the API errors the tests provoke"
expect_grep '^--tool racecheck --error-exitcode' "$tmp/path/sanitizer_args" "racecheck's flags"
if grep -q 'sanitizer.*fake_nccl_test' "$md"; then fail "the sanitizer ran a test outside //engine and //common/cuda"; fi
python3 - "$out/report.json" <<'EOF' || fail "report.json"
import json, sys
r = json.load(open(sys.argv[1]))
steps = {s["step"]: s for s in r["steps"]}
assert steps["test collectives/nccl:fake_nccl_test"]["exit"] == 1, steps
assert steps["train_ours"]["exit"] == 0, steps["train_ours"]
assert steps["train_vs_torch"]["status"] == "FAIL", steps["train_vs_torch"]
assert r["allreduce"][1] == {"bytes": 1048576, "ours_us": 100.0, "ours_busbw": 5.0,
                             "torch_us": 100.0, "torch_busbw": 10.0}, r["allreduce"]
assert r["torch_train"][0]["examples_per_s"] == 60000.5, r["torch_train"]
assert r["torch_train"][2]["feed"] == "host", r["torch_train"]
assert r["gpu"].startswith("NVIDIA H100"), r["gpu"]
assert r["step_vs_gemm"] == [{"precision": "f32", "gemm_ms": 60.1, "ours_step_ms": 90.15,
                              "torch_step_ms": 68.2}], r["step_vs_gemm"]
EOF
tar -tzf "$out/logs.tar.gz" >"$tmp/logs.list" || fail "logs.tar.gz does not list"
expect_grep 'logs/xml/engine_kernels_cuda_fake_kernel_test.xml' "$tmp/logs.list" "the gtest XML in logs.tar.gz"
expect_grep 'logs/allreduce_torch.log' "$tmp/logs.list" "the torch all-reduce log in logs.tar.gz"
[ "$(ls "$out" | wc -l)" -le 8 ] || fail "more than 8 files under OUT: the device tool brings back 8"

# A spent budget skips the steps, saying so, and the report is still written.
out2=$tmp/out2
PATH=$tmp/path:$PATH OUT=$out2 GPU_CHECK_BUDGET_S=0 GPU_CHECK_STEPS=tests "$check" "$b" \
  >"$tmp/run2.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "the run with a spent budget exited $rc, want 1 (gone_test is missing)"
expect_grep '| test engine/kernels/cuda:fake_kernel_test | SKIP | 125 | 0 | skipped: the run.s budget' \
  "$out2/report.md" "a test skipped for the budget"
if grep -q '| allreduce_ours' "$out2/report.md"; then fail "GPU_CHECK_STEPS=tests ran the all-reduce"; fi

# Every step hanging: the run still ends within max(setup, budget) + a step's kill grace,
# with its report. And the defaults keep a run under the 8 minutes of device time a GPU loan
# gives it (the report and the logs' archive: 15 s more at most).
h=$tmp/hang/lockstep-gpu
mkdir -p "$h/bin" "$h/tests/engine/k" "$tmp/hang_path" "$tmp/hang_tools"
printf '#!/usr/bin/env bash\nexec sleep 600\n' >"$tmp/sleeper"
chmod +x "$tmp/sleeper"
for f in "$h/bin/lockstep" "$h/bin/nccl_allreduce" "$h/bin/train_throughput" "$h/tests/engine/k/k_test" \
  "$tmp/hang_path/nvidia-smi" "$tmp/hang_path/compute-sanitizer"; do
  cp "$tmp/sleeper" "$f"
done
echo "//engine/k:k_test tests/engine/k/k_test" >"$h/tests.txt"
printf 'import time\ntime.sleep(600)\n' >"$tmp/hang_tools/torch_train.py"
cp "$tmp/hang_tools/torch_train.py" "$tmp/hang_tools/torch_allreduce.py"
t0=$SECONDS
PATH=$tmp/hang_path:$PATH OUT=$tmp/out_hang GPU_CHECK_SETUP_S=6 GPU_CHECK_BUDGET_S=12 \
  GPU_CHECK_TOOLS=$tmp/hang_tools GPU_CHECK_TREE=$tmp/empty_tree "$check" "$h" >"$tmp/run_hang.out" 2>&1
took=$((SECONDS - t0))
echo "every step hanging: $took s (setup 6 s, budget 12 s)"
[ "$took" -le 25 ] || fail "with every step hanging the run took $took s, want <= 12 + 5 + the report"
[ -f "$tmp/out_hang/report.md" ] || fail "no report after a run whose steps all hung"
expect_grep '| env | FAIL | 124 |' "$tmp/out_hang/report.md" "a hanging nvidia-smi"
default_budget=$(sed -n 's/^budget=${GPU_CHECK_BUDGET_S:-\([0-9]*\)}$/\1/p' "$check")
default_setup=$(sed -n 's/^setup=${GPU_CHECK_SETUP_S:-\([0-9]*\)}$/\1/p' "$check")
if [ -z "$default_budget" ] || [ -z "$default_setup" ]; then
  fail "gpu_check.sh's default budget or setup time not found"
else
  worst=$((default_budget > default_setup ? default_budget : default_setup))
  worst=$((worst + 5 + 15))
  echo "default worst case: $worst s of device time"
  [ "$worst" -le 480 ] || fail "gpu_check.sh's defaults allow $worst s, over the 8 minutes (480 s)"
fi

# tools/gpu_driverless_check.sh (tools/test.sh runs it on CI's --config=cuda build) on fake
# builds: binaries that refuse naming the driver pass; one that hangs, one killed by a signal,
# one exiting 0 and one that does not say what is missing each fail, by name.
driverless=$here/gpu_driverless_check.sh
bash -n "$driverless" || fail "$driverless does not parse"
fake_build() {  # DIR LOCKSTEPD_BODY TRAIN_BODY NCCL_BODY CLI_BODY
  mkdir -p "$1/worker" "$1/bench" "$1/client" "$1/coordinator"
  local f body
  for f in worker/lockstepd bench/train_throughput bench/nccl_allreduce client/lockstep \
    coordinator/lockstep-coordinator; do
    case "$f" in
      worker/*) body=$2 ;; bench/train*) body=$3 ;; bench/nccl*) body=$4 ;; client/*) body=$5 ;;
      *) body='echo "usage: lockstep-coordinator"' ;;
    esac
    printf '#!/usr/bin/env bash\n%s\n' "$body" >"$1/$f"
    chmod +x "$1/$f"
  done
}
refuse='echo "counting GPUs (cudaGetDeviceCount): CUDA driver version is insufficient for CUDA runtime version"; exit 1'
fake_build "$tmp/dl_good" "$refuse" "$refuse" 'echo "cannot load libnccl.so.2"; exit 1' \
  'echo "lockstep local: worker 0 exited while starting: libcuda.so.1: cannot open"; exit 1'
GPU_DRIVERLESS_TIMEOUT_S=2 "$driverless" "$tmp/dl_good" >"$tmp/dl_good.out" 2>&1
[ $? -eq 0 ] || fail "gpu_driverless_check.sh failed binaries that refused cleanly: $(cat "$tmp/dl_good.out")"
expect_grep '^ok   nccl_allreduce: exit 1 in [0-9]* s: cannot load libnccl.so.2' "$tmp/dl_good.out" \
  "a binary naming the library it misses"
fake_build "$tmp/dl_bad" 'echo "starting"; exit 1' 'exec sleep 600' 'kill -SEGV $$' 'exit 0'
t0=$SECONDS
GPU_DRIVERLESS_TIMEOUT_S=1 "$driverless" "$tmp/dl_bad" >"$tmp/dl_bad.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "gpu_driverless_check.sh on misbehaving binaries exited $rc, want 1"
[ $((SECONDS - t0)) -le 20 ] || fail "gpu_driverless_check.sh took $((SECONDS - t0)) s over a hanging binary"
expect_grep '^FAIL lockstepd .*: exit 1 without naming what is missing' "$tmp/dl_bad.out" "a silent refusal"
expect_grep '^FAIL train_throughput .*: hung: killed after 1 s' "$tmp/dl_bad.out" "a hanging binary"
expect_grep '^FAIL nccl_allreduce .*: died of signal 11' "$tmp/dl_bad.out" "a crashing binary"
expect_grep '^FAIL lockstep local .*: exited 0 without a GPU' "$tmp/dl_bad.out" "a binary claiming success"
expect_grep '^gpu_driverless_check: 4 binary(ies) misbehaved' "$tmp/dl_bad.out" "the verdict"
rm "$tmp/dl_bad/client/lockstep"
GPU_DRIVERLESS_TIMEOUT_S=1 "$driverless" "$tmp/dl_bad" >"$tmp/dl_bad.out" 2>&1
expect_grep '^FAIL lockstep: not built' "$tmp/dl_bad.out" "a binary the build lacks"
# Where libcuda.so.1 loads (a python3 that loads anything) there is nothing to check: exit 3.
mkdir -p "$tmp/dl_path"
printf '#!/usr/bin/env bash\nexit 0\n' >"$tmp/dl_path/python3"
chmod +x "$tmp/dl_path/python3"
PATH=$tmp/dl_path:$PATH "$driverless" "$tmp/dl_good" >"$tmp/dl_driver.out" 2>&1
[ $? -eq 3 ] || fail "gpu_driverless_check.sh on a machine with the driver did not exit 3"
expect_grep 'libcuda.so.1 loads here' "$tmp/dl_driver.out" "a machine with the driver"
"$driverless" "$tmp/no_such_dir" >/dev/null 2>&1
[ $? -eq 2 ] || fail "gpu_driverless_check.sh without a folder did not exit 2"

# The phases' shares of the budget, in the order they run: each ends after the one before
# (a phase sharing its predecessor's end gets only what that one leaves), the last at 100 %.
shares=$(sed -n 's/^ *end=$(phase_end \([0-9]*\))$/\1/p' "$check" | tr '\n' ' ')
awk -v s="$shares" 'BEGIN { n = split(s, p, " "); if (n < 5 || p[n] != 100) exit 1
  for (i = 2; i <= n; i++) if (p[i] + 0 <= p[i - 1] + 0) exit 1 }' ||
  fail "gpu_check.sh's phase ends ($shares% of the budget) do not rise to 100 in the order they run"

if [ "$failures" -ne 0 ]; then
  echo "--- the fake run's output" >&2
  cat "$tmp/run.out" >&2
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
