#!/usr/bin/env bash
# tools/gpu_check.sh without a GPU, so that it cannot rot between the rare GPU runs: the scripts
# parse, bad arguments are refused, and on a fake bundle (shell scripts standing in for the
# test binaries, the all-reduce bench, nvidia-smi and compute-sanitizer; fake torch scripts
# through GPU_CHECK_TOOLS) the run reaches its report with the right rows, figures, JSON and
# logs. No Bazel, no GPU.
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
for f in "$here/gpu/torch_allreduce.py" "$here/gpu/torch_train.py"; do
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
python3 "$here/gpu/torch_allreduce.py" --min_bytes=3 >"$tmp/args.out" 2>&1
[ $? -eq 2 ] || fail "torch_allreduce.py --min_bytes=3 was not refused"

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
out=$tmp/out
start=$SECONDS
PATH=$tmp/path:$PATH OUT=$out GPU_CHECK_BUDGET_S=60 GPU_CHECK_TOOLS=$tmp/fake_tools "$check" "$tmp/fake.tar.gz" >"$tmp/run.out" 2>&1
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
expect_grep '| env | ok | 0 | .* | NVIDIA H100 80GB HBM3, 580.65.06' "$md" "env row"
expect_grep '| binaries | ok | 0 | .* | all 2 of bin/ start |' "$md" "binaries row"
expect_grep '| test engine/kernels/cuda:fake_kernel_test | ok | 0 | .* | 2 passed, 0 failed, 1 skipped |' "$md" "passing test row"
expect_grep '| test collectives/nccl:fake_nccl_test | FAIL | 1 | .* | 1 passed, 1 failed, 1 skipped |' "$md" "failing test row"
expect_grep '| tests (all) | FAIL | 2 | .* | 1 of 3 binaries passed; cases: 3 passed, 1 failed, 2 skipped |' "$md" "all the tests' row"
expect_grep '| test collectives/nccl:gone_test | FAIL | 127 | .* | not in the bundle' "$md" "missing test row"
expect_grep '| allreduce_ours | ok | 0 | .* | 8 B: 40.00 us; 1 MiB: busbw 5.000 GB/s |' "$md" "our all-reduce row"
expect_grep '| allreduce_vs_torch | FAIL | 1 | .* | ours/torch busbw at >= 1 MiB: min 0.500x' "$md" "comparison row"
expect_grep '| 1 MiB | 100.00 | 5.000 | 100.00 | 10.000 | 0.500 |' "$md" "comparison table"
expect_grep '| train_torch | FAIL | 1 | .* | f32: 60000.5 ex/s, 68.2 ms/step (GEMMs 60.1 ms), peak 2.00 GiB; bf16: RuntimeError: out of memory |' "$md" "torch training row"
expect_grep '| train_ours | SKIP | - | 0 | ours: not built yet' "$md" "our training row"
expect_grep '| train_torch_transformer | ok | 0 | .* | f32/host: 5000.5 ex/s, 20.5 ms/step, peak 1.00 GiB |' "$md" "torch Transformer row"
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
assert steps["train_ours"]["exit"] is None, steps["train_ours"]
assert r["allreduce"][1] == {"bytes": 1048576, "ours_us": 100.0, "ours_busbw": 5.0,
                             "torch_us": 100.0, "torch_busbw": 10.0}, r["allreduce"]
assert r["torch_train"][0]["examples_per_s"] == 60000.5, r["torch_train"]
assert r["torch_train"][2]["feed"] == "host", r["torch_train"]
assert r["gpu"].startswith("NVIDIA H100"), r["gpu"]
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

if [ "$failures" -ne 0 ]; then
  echo "--- the fake run's output" >&2
  cat "$tmp/run.out" >&2
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "PASS"
