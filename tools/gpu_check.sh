#!/usr/bin/env bash
# The GPU confirmation run, on a machine with a GPU and no Bazel (see /work/shared/GPU.md):
#
#   OUT=/some/empty/dir tools/gpu_check.sh dist/lockstep-gpu.tar.xz
#
# BUNDLE is tools/gpu_bundle.sh's tarball (.tar.xz or .tar.gz) or the folder it unpacks to.
# Steps, each under its own `timeout`, a failing step never stopping the rest:
#   unpack, env (nvidia-smi: GPU, driver), libs (libnccl/libcublas/libcudnn from python3's
#   nvidia wheels, put on the bundle binaries' LD_LIBRARY_PATH), binaries (each of bin/ starts:
#   its libraries load);
#   every requires-gpu test in the bundle's tests.txt, --gtest_output=xml (150 s each);
#   all-reduce: bin/nccl_allreduce (ours) and tools/gpu/torch_allreduce.py (torch), 2 ranks on
#     GPU 0 with distinct NCCL_HOSTID, 8 B to 256 MiB, then their busbw ratio at >= 1 MiB;
#   training: tools/gpu/torch_train.py (MLP 4096-8192-8192-10, batch 4096, and the bench
#     Transformer, batch 256; f32 and bf16 autocast; fed from the GPU and from pinned host
#     batches), and ours (bench/train_throughput, f32 and BF16_MIXED: examples/s, step, time
#     outside it) when the bundle has it, each of the four judged against torch's host-fed
#     loop of the same model and precision (train_vs_torch*: >= 1.0x its examples/s, peak
#     device memory <= 1.2x its max_memory_allocated); the MLP's step time, ours and torch's,
#     against the cuBLAS time of that step's 8 products alone (step_vs_gemm*: a figure);
#   `lockstep local --gpus` on the digits MLP (>= 96% test accuracy), the residual CNN and the
#     char Transformer (its data made by python3 from examples/data/fortunes.txt.gz) when the
#     CLI has it;
#   compute-sanitizer memcheck and racecheck over the kernel tests (//engine/..., //common/cuda),
#     last because they are the slowest and the most expendable.
# Writes under $OUT: report.md (one table: step, status, exit code, seconds, key figure; then
# the all-reduce comparison, the training lines and the step/GEMM table), report.json, and
# logs.tar.gz (every step's log and the gtest XML). The report is written even when steps
# fail or the run is interrupted.
# The whole run keeps to GPU_CHECK_BUDGET_S (default 360 s): steps get what is left of their
# phase's share (the tests end by 40 % of it, the all-reduce 55 %, the training 80 %, the
# `lockstep local` jobs 92 %, the sanitizer 100 %), and are skipped, saying so, once it is
# spent. The setup (unpack, bundle, env, libs, binaries) keeps to GPU_CHECK_SETUP_S (default
# 150 s) from the start, whatever the budget; so no run lasts longer than max(setup, budget)
# + 5 s (a step's kill grace) + the report: 365 s by default, under the 8 minutes of device
# time a GPU loan gives a run. Expected on an H200 (bench/gpu_runs.md's runs): setup 5 s,
# tests 15, all-reduce 30 (phase ends at 198 s), training ~190: torch's two scripts ~40 and
# our four short runs ~150 (ends by 288), the three jobs 45 (by 331), the sanitizer 20.
# bundle: the bundle's tests.txt against the requires-gpu tests of the source tree this script
# is in (GPU_CHECK_TREE names another), read from its BUILD files by tools/gpu_tests.py: a
# bundle built before a test was added fails that row, naming the test.
# GPU_CHECK_STEPS (default binaries,tests,allreduce,train,local,sanitizer) picks the phases;
# unpack, env and libs always run. Rerun a part: GPU_CHECK_STEPS=allreduce tools/gpu_check.sh ...
# Exit status: 0 when every step passed, 1 when one failed, 2 for bad arguments.
set -u

usage() {
  echo "usage: OUT=DIR tools/gpu_check.sh BUNDLE   (BUNDLE: tools/gpu_bundle.sh's .tar.xz/.tar.gz or its folder)" >&2
}
if [ "$#" -ne 1 ]; then
  usage
  exit 2
fi
bundle=$1
if [ -z "${OUT:-}" ]; then
  usage
  echo "gpu_check: OUT is not set: it names the folder the report goes to" >&2
  exit 2
fi
if [ ! -e "$bundle" ]; then
  echo "gpu_check: no bundle at $bundle (make it with tools/gpu_bundle.sh)" >&2
  exit 2
fi
bundle=$(cd "$(dirname "$bundle")" && pwd)/$(basename "$bundle")
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo" || exit 2

budget=${GPU_CHECK_BUDGET_S:-360}
setup=${GPU_CHECK_SETUP_S:-150}
for v in "GPU_CHECK_BUDGET_S=$budget" "GPU_CHECK_SETUP_S=$setup"; do
  if ! [[ "${v#*=}" =~ ^[0-9]+$ ]]; then
    echo "gpu_check: $v: want whole seconds" >&2
    exit 2
  fi
done
phases=",${GPU_CHECK_STEPS:-binaries,tests,allreduce,train,local,sanitizer},"
start=$SECONDS
setup_end=$setup  # unpack, bundle, env, libs and binaries run whatever the budget
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")
logs=$work/logs
mkdir -p "$logs/xml"
records=$work/records.tsv
: >"$records"
gpu="unknown"
root=""
export TEST_TMPDIR=$work/test_tmp
mkdir -p "$TEST_TMPDIR"

log() { echo "gpu_check [$((SECONDS - start)) s]: $*" >&2; }
# Seconds left until END (seconds since the start), at most WANT: left_s WANT END.
left_s() {
  local left=$(($2 - (SECONDS - start)))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
wanted() { [[ "$phases" == *",$1,"* ]]; }

# record STEP STATUS EXIT SECONDS FIGURE: one row of the report.
record() {
  local figure
  # One line of printable text: the report's table and its JSON strings need nothing more.
  figure=$(printf '%s' "$5" | tr '\t\n' '  ' | tr -d '\000-\037')
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$figure" >>"$records"
  log "$1: $2 (exit $3, $4 s): $figure"
}

# The last non-empty line of a log, shortened: what a failing step said last.
last_line() {
  grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | cut -c 1-200
}

# run_step NAME WANT_S PHASE_END CMD...: runs CMD (stdin closed, output to $logs/NAME.log) under
# `timeout` for WANT_S seconds or what is left until PHASE_END (seconds since the start),
# whichever is less. Sets STEP_RC (124: timed out; 125: skipped, budget spent), STEP_SECS,
# STEP_LOG, STEP_LIMIT.
run_step() {
  local name=$1 want=$2 phase_end=$3
  shift 3
  STEP_LOG=$logs/${name//[^A-Za-z0-9_.-]/_}.log
  STEP_LIMIT=$want
  local left=$((phase_end - (SECONDS - start)))
  [ "$left" -lt "$STEP_LIMIT" ] && STEP_LIMIT=$left
  STEP_SECS=0
  if [ "$STEP_LIMIT" -lt 5 ]; then
    STEP_RC=125
    echo "skipped: the run's budget (GPU_CHECK_BUDGET_S=$budget) is spent" >"$STEP_LOG"
    return
  fi
  local t0=$SECONDS
  log "$name: running (limit ${STEP_LIMIT} s)"
  timeout -k 5 "$STEP_LIMIT" "$@" </dev/null >"$STEP_LOG" 2>&1
  STEP_RC=$?
  STEP_SECS=$((SECONDS - t0))
}

# record_step NAME FIGURE: records the step run_step just ran, with its status.
record_step() {
  local status=ok figure=$2
  case "$STEP_RC" in
    0) ;;
    125) status=SKIP figure="skipped: the run's budget (GPU_CHECK_BUDGET_S=$budget) is spent" ;;
    124 | 137) status=FAIL figure="timed out after ${STEP_LIMIT} s; $figure" ;;
    *) status=FAIL ;;
  esac
  record "$1" "$status" "$STEP_RC" "$STEP_SECS" "$figure"
}

# The end of a phase, in seconds since the start: PERCENT of the budget.
phase_end() { echo $((budget * $1 / 100)); }

# --- the report ----------------------------------------------------------------------------

json_string() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\r'/ }
  printf '"%s"' "$s"
}

# The all-reduce tables joined by size: bytes ours_us ours_busbw torch_us torch_busbw.
allreduce_rows() {
  local ours=$logs/allreduce_ours.log torch=$logs/allreduce_torch.log
  [ -f "$ours" ] && [ -f "$torch" ] || return 0
  awk 'FNR == 1 { file++ }
       $1 ~ /^[0-9]+$/ && NF >= 7 && $3 == "float" {
         if (file == 1) { ot[$1] = $4; ob[$1] = $6; order[++n] = $1 } else { tt[$1] = $4; tb[$1] = $6 }
       }
       END { for (i = 1; i <= n; i++) { s = order[i]; if (s in tt) print s, ot[s], ob[s], tt[s], tb[s] } }' \
    "$ours" "$torch"
}

human_bytes() {
  awk -v b="$1" 'BEGIN { split("B KiB MiB GiB", u, " "); i = 1; while (b >= 1024 && i < 4) { b /= 1024; i++ } printf "%g %s", b, u[i] }'
}

write_report() {
  local md=$OUT/report.md json=$OUT/report.json total=$((SECONDS - start))
  local failed
  failed=$(awk -F'\t' '$2 == "FAIL"' "$records" | wc -l)
  {
    echo "# GPU check"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC'), host $(uname -n), GPU: $gpu"
    echo "bundle: $(basename "$bundle")$([ -n "$root" ] && [ -f "$root/VERSION" ] && echo " ($(tr '\n' ' ' <"$root/VERSION"))")"
    echo "total ${total} s of a ${budget} s budget; $failed step(s) failed; logs in logs.tar.gz"
    echo
    echo "| step | status | exit | seconds | key figure |"
    echo "| --- | --- | --- | --- | --- |"
    awk -F'\t' '{ gsub(/\|/, "\\|", $5); printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5 }' "$records"
    local rows
    rows=$(allreduce_rows)
    if [ -n "$rows" ]; then
      echo
      echo "## All-reduce: ours vs torch.distributed (NCCL, 2 ranks on GPU 0, f32 sum, blocking)"
      echo
      echo "| size | ours us | ours busbw GB/s | torch us | torch busbw GB/s | ours/torch busbw |"
      echo "| --- | --- | --- | --- | --- | --- |"
      while read -r b ou obw tu tbw; do
        echo "| $(human_bytes "$b") | $ou | $obw | $tu | $tbw | $(awk -v o="$obw" -v t="$tbw" 'BEGIN { if (t > 0) printf "%.3f", o / t; else print "-" }') |"
      done <<<"$rows"
    fi
    if grep -q '^{' "$logs/train_torch.log" "$logs/train_torch_transformer.log" 2>/dev/null; then
      echo
      echo "## Training: torch eager (tools/gpu/torch_train.py)"
      echo
      echo '```'
      grep -h '^{' "$logs/train_torch.log" "$logs/train_torch_transformer.log" 2>/dev/null
      echo '```'
    fi
    if grep -q '^| total per step' "$logs/train_profile.log" 2>/dev/null; then
      echo
      echo "## Where the MLP step's time goes (train_throughput --profile_ops, ms per step)"
      echo
      grep '^|' "$logs/train_profile.log"
      echo
      grep '^gpu: ' "$logs/train_profile.log"
    fi
    if [ -s "$work/gemm.tsv" ]; then
      echo
      echo "## Step time against the cuBLAS time of its products (MLP 4096-8192-8192-10, batch 4096: 8 GEMMs, torch.matmul, CUDA events)"
      echo
      echo "| precision | GEMMs ms | ours step ms | ours / GEMMs | torch step ms | torch / GEMMs |"
      echo "| --- | --- | --- | --- | --- | --- |"
      awk -F'\t' '$2 > 0 { printf "| %s | %s | %s | %.2fx | %s | %.2fx |\n", $1, $2, $3, $3 / $2, $4, $4 / $2 }' "$work/gemm.tsv"
    fi
    if [ "$failed" -gt 0 ]; then
      echo
      echo "## The failing steps: first error lines, then the last lines"
      awk -F'\t' '$2 == "FAIL" { print $1 }' "$records" | while read -r name; do
        local f=$logs/${name//[^A-Za-z0-9_.-]/_}.log
        [ -s "$f" ] || continue
        echo
        echo "### $name"
        echo '```'
        grep -m 4 -i -B 1 ': Failure$\|error\|failed\|refused' "$f" | cut -c 1-300
        echo '...'
        tail -n 6 "$f" | cut -c 1-300
        echo '```'
      done
    fi
  } >"$md"

  {
    printf '{"date": %s, "host": %s, "gpu": %s, "bundle": %s, "budget_s": %d, "total_s": %d, "failed": %d,\n' \
      "$(json_string "$(date -u '+%Y-%m-%dT%H:%M:%SZ')")" "$(json_string "$(uname -n)")" \
      "$(json_string "$gpu")" "$(json_string "$(basename "$bundle")")" "$budget" "$total" "$failed"
    printf ' "steps": ['
    local sep="" name status rc secs figure
    while IFS=$'\t' read -r name status rc secs figure; do
      [[ "$rc" =~ ^[0-9]+$ ]] || rc=null
      printf '%s\n  {"step": %s, "status": %s, "exit": %s, "seconds": %s, "figure": %s}' "$sep" \
        "$(json_string "$name")" "$(json_string "$status")" "$rc" "$secs" "$(json_string "$figure")"
      sep=","
    done <"$records"
    printf '],\n "allreduce": ['
    sep=""
    while read -r b ou obw tu tbw; do
      [ -n "$b" ] || continue
      printf '%s\n  {"bytes": %s, "ours_us": %s, "ours_busbw": %s, "torch_us": %s, "torch_busbw": %s}' \
        "$sep" "$b" "$ou" "$obw" "$tu" "$tbw"
      sep=","
    done <<<"$(allreduce_rows)"
    printf '],\n "torch_train": ['
    sep=""
    while read -r line; do
      [ -n "$line" ] || continue
      printf '%s\n  %s' "$sep" "$line"
      sep=","
    done < <(grep -h '^{.*}$' "$logs/train_torch.log" "$logs/train_torch_transformer.log" 2>/dev/null)
    printf '],\n "step_vs_gemm": ['
    sep=""
    local precision gemm ours_step torch_step
    while IFS=$'\t' read -r precision gemm ours_step torch_step; do
      [ -n "$precision" ] || continue
      printf '%s\n  {"precision": %s, "gemm_ms": %s, "ours_step_ms": %s, "torch_step_ms": %s}' \
        "$sep" "$(json_string "$precision")" "$gemm" "$ours_step" "$torch_step"
      sep=","
    done < <(cat "$work/gemm.tsv" 2>/dev/null)
    printf ']}\n'
  } >"$json"
}

finish() {
  local rc=$?
  trap - EXIT
  write_report
  # Long logs keep their ends: the device tool brings back at most 16 MiB a file.
  find "$logs" -type f -size +4M | while read -r f; do
    tail -c 4000000 "$f" >"$f.tail" && mv "$f.tail" "$f"
  done
  tar -C "$work" -czf "$OUT/logs.tar.gz" logs 2>/dev/null || tar -C "$work" -cf "$OUT/logs.tar" logs
  cat "$OUT/report.md"
  log "report: $OUT/report.md, $OUT/report.json, $OUT/logs.tar.gz ($((SECONDS - start)) s)"
  grep -q $'\tFAIL\t' "$records" && [ "$rc" -eq 0 ] && rc=1
  rm -rf "$work"
  exit "$rc"
}
trap finish EXIT
trap 'log "interrupted"; exit 130' INT TERM

# --- unpack ---------------------------------------------------------------------------------

# GNU tar needs the xz (or gzip) program to read the archive; python3's tarfile does not.
unpack='if [ -d "$1" ]; then cp -r "$1" "$2"; else
  mkdir -p "$2" && { tar -xf "$1" -C "$2" ||
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$1" "$2"; }
fi'
run_step unpack 60 "$setup_end" bash -c "$unpack" unpack "$bundle" "$work/bundle"
root=$(find "$work/bundle" -maxdepth 2 -name tests.txt -printf '%h\n' 2>/dev/null | head -n 1)
if [ "$STEP_RC" -ne 0 ] || [ -z "$root" ]; then
  [ "$STEP_RC" -eq 0 ] && STEP_RC=1
  record_step unpack "could not unpack $(basename "$bundle") or it has no tests.txt: $(last_line "$STEP_LOG")"
  exit 1
fi
record_step unpack "$(find "$root" -type f | wc -l) files, $(wc -l <"$root/tests.txt") tests in tests.txt"
# Every requires-gpu test of the source tree is in the bundle (tools/gpu_tests.py reads the
# tree's BUILD files; a bundle made before a test was added lacks it).
tree=${GPU_CHECK_TREE:-$repo}
if [ -f "$tree/tools/gpu_tests.py" ]; then
  run_step bundle 30 "$setup_end" python3 "$tree/tools/gpu_tests.py" missing "$tree" "$root/tests.txt"
  case "$STEP_RC" in
    0) record_step bundle "tests.txt holds every requires-gpu test of the tree" ;;
    3) record bundle SKIP - "$STEP_SECS" "no BUILD files with requires-gpu tests at $tree" ;;
    *) record_step bundle "tests.txt lacks $(grep -c '^//' "$STEP_LOG") requires-gpu test(s) of the tree (rebuild it with tools/gpu_bundle.sh): $(grep '^//' "$STEP_LOG" | tr '\n' ' ')$(grep -v '^//' "$STEP_LOG" | head -n 1)" ;;
  esac
else
  record bundle SKIP - 0 "no tools/gpu_tests.py at $tree: the bundle is not checked against a tree"
fi
# The torch scripts that came with this script (a bundle built earlier may hold older ones);
# the bundle's copy where the tree has none. GPU_CHECK_TOOLS names another folder of them.
gpu_tools=${GPU_CHECK_TOOLS:-$repo/tools/gpu}
[ -f "$gpu_tools/torch_train.py" ] || gpu_tools=$root/tools/gpu

# --- env and libraries ----------------------------------------------------------------------

run_step env 30 "$setup_end" nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
if [ "$STEP_RC" -eq 0 ]; then
  gpu=$(head -n 1 "$STEP_LOG")
  [ "$(left_s 30 "$setup_end")" -ge 2 ] && timeout "$(left_s 30 "$setup_end")" nvidia-smi >>"$STEP_LOG" 2>&1
  record_step env "$gpu (nvidia-smi's output in the log)"
elif ! command -v nvidia-smi >/dev/null; then
  record_step env "no nvidia-smi on this machine: no NVIDIA driver here"
else
  record_step env "nvidia-smi failed: $(last_line "$STEP_LOG")"
fi

# The directories of the nvidia wheels' libraries (nvidia/<pkg>/lib), and of the named
# libraries wherever else they are under nvidia/ or in a package's lib/ (torch/lib).
cat >"$work/find_libs.py" <<'PY'
import glob, os, site
roots = [p for p in site.getsitepackages() + [site.getusersitepackages()] if os.path.isdir(p)]
dirs = []
for r in roots:
    dirs += sorted(d for d in glob.glob(os.path.join(r, "nvidia", "*", "lib")) if os.path.isdir(d))
want = ["libnccl.so.2", "libcublas.so.13", "libcublasLt.so.13", "libcudnn.so.9"]
for name in want:
    if any(os.path.exists(os.path.join(d, name)) for d in dirs):
        continue
    for r in roots:
        found = (glob.glob(os.path.join(r, "nvidia", "**", name), recursive=True) +
                 glob.glob(os.path.join(r, "*", "lib", name)) + glob.glob(os.path.join(r, "*", name)))
        if found:
            dirs.append(os.path.dirname(found[0]))
            break
dirs = list(dict.fromkeys(dirs))
print("LIBDIRS=" + ":".join(dirs))
for name in want:
    where = [d for d in dirs if os.path.exists(os.path.join(d, name))]
    print("%s: %s" % (name, where[0] if where else "MISSING"))
PY
run_step libs 60 "$setup_end" python3 "$work/find_libs.py"
nvlibs=$(sed -n 's/^LIBDIRS=//p' "$STEP_LOG")
missing=$(grep -c ': MISSING$' "$STEP_LOG")
if [ "$STEP_RC" -eq 0 ] && grep -q '^libnccl.so.2: /' "$STEP_LOG"; then
  record_step libs "$(grep -c . <<<"${nvlibs//:/$'\n'}") library folders; $([ "$missing" -gt 0 ] && echo "missing: $(grep ': MISSING$' "$STEP_LOG" | cut -d: -f1 | tr '\n' ' ')" || echo "NCCL, cuBLAS, cuDNN found")"
else
  [ "$STEP_RC" -eq 0 ] && STEP_RC=1
  record_step libs "libnccl.so.2 not found in python3's site-packages: $(last_line "$STEP_LOG")"
fi
# The bundle's binaries: its own lib/ first, then the GPU libraries. Python and the system's
# tools keep their own environment (the bundle's libstdc++ is older than theirs may need).
binenv=(env "LD_LIBRARY_PATH=$root/lib${nvlibs:+:$nvlibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# Every binary of bin/ loads its libraries and answers --help (a loader error is exit 127 or
# "error while loading shared libraries").
check_binaries() {
  local f out rc bad=0
  for f in "$1"/bin/*; do
    if [ "$(left_s 20 "$setup_end")" -lt 2 ]; then
      echo "$(basename "$f"): not checked: the setup's time (GPU_CHECK_SETUP_S=$setup) is spent"
      bad=$((bad + 1))
      continue
    fi
    out=$(timeout "$(left_s 20 "$setup_end")" "${binenv[@]}" "$f" --help 2>&1 </dev/null)
    rc=$?
    if [ "$rc" -eq 127 ] || [ "$rc" -eq 124 ] || grep -q 'error while loading\|not found (required by' <<<"$out"; then
      echo "$(basename "$f"): exit $rc: $(grep -v '^[[:space:]]*$' <<<"$out" | head -n 2 | tr '\n' ' ')"
      bad=$((bad + 1))
    else
      echo "$(basename "$f"): starts (--help: exit $rc)"
    fi
  done
  return "$bad"
}
if wanted binaries; then
  t0=$SECONDS
  check_binaries "$root" >"$logs/binaries.log" 2>&1
  STEP_RC=$? STEP_SECS=$((SECONDS - t0)) STEP_LIMIT=20
  if [ "$STEP_RC" -eq 0 ]; then
    record_step binaries "all $(grep -c . "$logs/binaries.log") of bin/ start"
  else
    record_step binaries "$STEP_RC of bin/ do not start: $(grep -v ': starts' "$logs/binaries.log" | head -n 1 | cut -c 1-200)"
  fi
fi

# --- requires-gpu tests ---------------------------------------------------------------------

# "N passed, N failed, N skipped" from a gtest XML file.
gtest_counts() {
  local n f s
  n=$(grep -c '<testcase ' "$1")
  f=$(grep -o -m 1 '<testsuites [^>]*failures="[0-9]*"' "$1" | sed 's/.*failures="//; s/"//')
  s=$(grep -c '<testcase [^>]*\(result="skipped"\|result="suppressed"\|status="notrun"\)' "$1")
  echo "$((n - ${f:-0} - s)) passed, ${f:-?} failed, $s skipped"
}

if wanted tests; then
  end=$(phase_end 40)
  t0=$SECONDS
  while read -r label path; do
    [ -n "$label" ] || continue
    name="test ${label#//}"
    xml=$logs/xml/$(echo "${label#//}" | tr '/:' '__').xml
    if [ ! -x "$root/$path" ]; then
      STEP_RC=127 STEP_SECS=0 STEP_LIMIT=0
      record_step "$name" "not in the bundle: $path"
      continue
    fi
    run_step "$name" 150 "$end" "${binenv[@]}" "$root/$path" --gtest_output="xml:$xml"
    if [ -s "$xml" ]; then
      figure=$(gtest_counts "$xml")
      # The first failed expectation, in a line: "file:line: Failure / Value of: ... / Actual: ...".
      first=$(grep -m 1 -A 3 ': Failure$' "$STEP_LOG" | tr '\n' ' ' | tr -s ' ' | cut -c 1-220)
      record_step "$name" "$figure${first:+; first: $first}"
    else
      record_step "$name" "no XML: $(last_line "$STEP_LOG")"
    fi
  done <"$root/tests.txt"
  # All the tests in one row: binaries that passed, and the cases.
  awk -F'\t' -v t="$((SECONDS - t0))" '$1 ~ /^test / {
      n++; if ($2 == "ok") ok++; if ($2 == "FAIL") bad++
      if (match($5, /^[0-9]+ passed, [0-9?]+ failed, [0-9]+ skipped/)) {
        split(substr($5, 1, RLENGTH), c, " "); p += c[1]; f += c[3]; s += c[5]
      }
    }
    END {
      printf "tests (all)\t%s\t%d\t%d\t%d of %d binaries passed; cases: %d passed, %d failed, %d skipped\n",
             (bad > 0 ? "FAIL" : ok == n ? "ok" : "SKIP"), bad, t, ok, n, p, f, s
    }' "$records" >>"$records"
fi

# --- all-reduce: ours vs torch --------------------------------------------------------------

# "8 B: X us; 256 MiB: busbw Y GB/s" from an nccl-tests table.
allreduce_figure() {
  awk '$1 ~ /^[0-9]+$/ && $3 == "float" { if (!first) { first = 1; printf "%s B: %s us", $1, $4 } last = $1; bw = $6 }
       END { if (first) printf "; %d MiB: busbw %s GB/s", last / 1048576, bw; else print "no table" }' "$1"
}

allreduce_failure() {
  if grep -qi 'duplicate GPU' "$1"; then
    echo "NCCL refused two ranks on one GPU even with distinct NCCL_HOSTID: $(grep -i -m 1 'duplicate GPU' "$1" | cut -c 1-160)"
  else
    echo "$(grep -v '^[[:space:]]*$' "$1" | grep -i -m 1 'failed\|error\|missing\|not installed\|no CUDA' | cut -c 1-200)"
  fi
}

ar_args=(--np=2 --min_bytes=8 --max_bytes=268435456 --factor=4 --warmup=5 --iters=20 --timeout_s=100)
if wanted allreduce; then
  end=$(phase_end 55)
  if [ -x "$root/bin/nccl_allreduce" ]; then
    # NCCL's own warnings land in the log beside the table.
    run_step allreduce_ours 110 "$end" "${binenv[@]}" NCCL_DEBUG=WARN "$root/bin/nccl_allreduce" "${ar_args[@]}"
    if [ "$STEP_RC" -eq 0 ]; then
      record_step allreduce_ours "$(allreduce_figure "$STEP_LOG")"
    else
      record_step allreduce_ours "$(allreduce_failure "$STEP_LOG")"
    fi
  else
    STEP_RC=127 STEP_SECS=0 STEP_LIMIT=0
    record_step allreduce_ours "not in the bundle: bin/nccl_allreduce"
  fi
  run_step allreduce_torch 110 "$end" env NCCL_DEBUG=WARN python3 "$gpu_tools/torch_allreduce.py" "${ar_args[@]}"
  if [ "$STEP_RC" -eq 0 ]; then
    record_step allreduce_torch "$(allreduce_figure "$STEP_LOG")"
  else
    record_step allreduce_torch "$(allreduce_failure "$STEP_LOG")"
  fi
  rows=$(allreduce_rows)
  if [ -n "$rows" ]; then
    cmp=$(awk '$1 >= 1048576 && $5 > 0 { r = $3 / $5; if (n == 0 || r < min) { min = r; at = $1 } n++ }
               NR == 1 { small = $1; ours = $2; torch = $4 }
               END {
                 printf "ours/torch busbw at >= 1 MiB: min %.3fx (at %d MiB; goal >= 0.95x); ours %d B: %s us (torch %s us)",
                        min, at / 1048576, small, ours, torch
                 exit (n > 0 && min >= 0.95) ? 0 : 1
               }' <<<"$rows")
    rc=$?
    record allreduce_vs_torch "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" "$rc" 0 "$cmp"
  else
    record allreduce_vs_torch FAIL 1 0 "nothing to compare: one of the two produced no table"
  fi
fi

# --- training -------------------------------------------------------------------------------

if wanted train; then
  end=$(phase_end 80)
  # torch's lines: "config[/feed]: ex/s, ms/step (GEMMs), peak" (feed: device, one batch on the
  # GPU reused; host, a pinned host batch per step copied in as our input pipeline does).
  torch_figure() {
    awk '
      function jget(line, key) {
        if (!match(line, "\"" key "\": (\"[^\"]*\"|[-0-9.e+]+)")) return ""
        v = substr(line, RSTART + length(key) + 4, RLENGTH - length(key) - 4)
        gsub(/"/, "", v)
        return v
      }
      /^\{/ {
        c = jget($0, "config")
        if (jget($0, "feed") != "") c = c "/" jget($0, "feed")
        g = jget($0, "gemm_ms")
        if ($0 ~ /"error"/) out = out sep c ": " jget($0, "error")
        else out = out sep sprintf("%s: %s ex/s, %s ms/step%s, peak %.2f GiB", c,
                                   jget($0, "examples_per_s"), jget($0, "step_ms"),
                                   g == "" ? "" : " (GEMMs " g " ms)",
                                   jget($0, "max_memory_allocated_bytes") / 1073741824)
        sep = "; "
      }
      END { print out }' "$1"
  }
  # train_vs_torch NAME OURS_LOG TORCH_LOG CONFIG: a row judging ours (train_throughput's
  # "N examples/s ... peak device bytes B") against torch's CONFIG line (its host feed where it
  # has one): examples/s >= 1.0x torch's, peak device memory <= 1.2x its max_memory_allocated.
  train_vs_torch() {
    local ours_eps ours_peak line figure rc
    ours_eps=$(grep -o '[0-9.]* examples/s' "$2" | tail -n 1 | cut -d' ' -f1)
    ours_peak=$(grep -o 'peak device bytes [0-9]*' "$2" | tail -n 1 | awk '{ print $4 }')
    line=$(grep -h '^{' "$3" 2>/dev/null | grep "\"config\": \"$4\"" | grep -v '"error"' |
      awk '/"feed": "host"/ { print; found = 1; exit } NR == 1 { first = $0 } END { if (!found && first != "") print first }')
    if [ -z "$ours_eps" ] || [ -z "$line" ]; then
      record "$1" FAIL 1 0 "nothing to compare: $([ -z "$ours_eps" ] && echo "ours printed no examples/s" || echo "torch has no $4 line")"
      return
    fi
    figure=$(awk -v o="$ours_eps" -v op="$ours_peak" -v l="$line" 'BEGIN {
        match(l, /"examples_per_s": [0-9.e+]+/); t = substr(l, RSTART + 18, RLENGTH - 18) + 0
        match(l, /"max_memory_allocated_bytes": [0-9.e+]+/); tp = substr(l, RSTART + 30, RLENGTH - 30) + 0
        ok = t > 0 && o / t >= 1.0
        out = sprintf("ours/torch examples/s %.2fx (goal >= 1.0x)", t > 0 ? o / t : 0)
        if (op != "" && tp > 0) { ok = ok && op / tp <= 1.2; out = out sprintf("; peak %.2fx torch max_memory_allocated (goal <= 1.2x)", op / tp) }
        else { ok = 0; out = out "; no peak to compare" }
        print out; exit ok ? 0 : 1 }')
    rc=$?
    record "$1" "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" "$rc" 0 "$figure"
  }
  run_step train_torch 150 "$end" python3 "$gpu_tools/torch_train.py" --configs=f32,bf16 --warmup=5 --steps=30
  figure=$(torch_figure "$STEP_LOG")
  [ -n "$figure" ] || figure=$(last_line "$STEP_LOG")
  record_step train_torch "$figure"
  run_step train_torch_transformer 120 "$end" python3 "$gpu_tools/torch_train.py" --model=transformer --configs=f32,bf16 --warmup=5 --steps=30
  figure=$(torch_figure "$STEP_LOG")
  [ -n "$figure" ] || figure=$(last_line "$STEP_LOG")
  record_step train_torch_transformer "$figure"
  # step_vs_gemm NAME OURS_LOG TORCH_LOG CONFIG PRECISION: a row putting ours' step and
  # torch's (its host feed where it has one) against the cuBLAS time of the MLP step's products
  # alone (torch_train.py's gemm_ms: the 8 GEMMs of one step, each timed with CUDA events); a
  # line of $work/gemm.tsv for the report's table. A figure, not a goal: it fails only when a
  # side has nothing to show.
  step_vs_gemm() {
    local ours_step line figure rc
    ours_step=$(grep -o 'step [0-9.]* ms, outside' "$2" | tail -n 1 | awk '{ print $2 }')
    line=$(grep -h '^{' "$3" 2>/dev/null | grep "\"config\": \"$4\"" | grep '"gemm_ms": [0-9]' |
      awk '/"feed": "host"/ { print; found = 1; exit } NR == 1 { first = $0 } END { if (!found && first != "") print first }')
    if [ -z "$ours_step" ] || [ -z "$line" ]; then
      record "$1" FAIL 1 0 "nothing to compare: $([ -z "$ours_step" ] && echo "ours printed no step time" || echo "torch has no $4 line with its GEMM time")"
      return
    fi
    figure=$(awk -v o="$ours_step" -v l="$line" -v p="$5" -v tsv="$work/gemm.tsv" 'BEGIN {
        match(l, /"gemm_ms": [0-9.e+]+/); g = substr(l, RSTART + 11, RLENGTH - 11) + 0
        match(l, /"step_ms": [0-9.e+]+/); t = substr(l, RSTART + 11, RLENGTH - 11) + 0
        if (g <= 0) { print "torch GEMM time is 0"; exit 1 }
        printf "%s\t%.3f\t%.3f\t%.3f\n", p, g, o, t >>tsv
        printf "GEMMs %.3f ms: ours step %.2f ms = %.2fx, torch step %.2f ms = %.2fx\n", g, o, o / g, t, t / g }')
    rc=$?
    record "$1" "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" "$rc" 0 "$figure"
  }
  if [ -x "$root/bin/train_throughput" ]; then
    # The last line: examples/s, the step, the time outside it, peak device memory. One run of
    # 60 steps after 10 each: the four runs keep to the train phase's share of the budget.
    tt=("${binenv[@]}" "$root/bin/train_throughput" --device=gpu --workers=1 --runs=1 --steps=60 --warmup=10)
    run_step train_ours 150 "$end" "${tt[@]}" --batch=4096 --model=mlp_4096
    record_step train_ours "$(last_line "$STEP_LOG")"
    # Issue #33's goals beside torch's eager loop fed from pinned host batches, as ours is.
    train_vs_torch train_vs_torch "$STEP_LOG" "$logs/train_torch.log" f32
    step_vs_gemm step_vs_gemm "$STEP_LOG" "$logs/train_torch.log" f32 f32
    run_step train_ours_bf16 150 "$end" "${tt[@]}" --batch=4096 --model=mlp_4096 --precision=bf16_mixed
    record_step train_ours_bf16 "$(last_line "$STEP_LOG")"
    train_vs_torch train_vs_torch_bf16 "$STEP_LOG" "$logs/train_torch.log" bf16
    step_vs_gemm step_vs_gemm_bf16 "$STEP_LOG" "$logs/train_torch.log" bf16 bf16_mixed
    run_step train_ours_transformer 120 "$end" "${tt[@]}" --batch=256 --model=transformer
    record_step train_ours_transformer "$(last_line "$STEP_LOG")"
    train_vs_torch train_vs_torch_transformer "$STEP_LOG" "$logs/train_torch_transformer.log" f32
    run_step train_ours_transformer_bf16 120 "$end" "${tt[@]}" --batch=256 --model=transformer --precision=bf16_mixed
    record_step train_ours_transformer_bf16 "$(last_line "$STEP_LOG")"
    train_vs_torch train_vs_torch_transformer_bf16 "$STEP_LOG" "$logs/train_torch_transformer.log" bf16
    # Where the MLP step's time goes: worker 0's per-op GPU time (CUDA events, --profile_ops);
    # the table goes into the report, the figure names the total and the largest row.
    run_step train_profile 90 "$end" "${binenv[@]}" "$root/bin/train_throughput" --device=gpu --workers=1 --runs=1 --batch=4096 --model=mlp_4096 --warmup=5 --steps=30 --profile_ops
    figure=$(awk -F' *[|] *' '/^[|] total per step/ { total = $6 }
      /^[|] / && $2 != "node" && $2 !~ /^---/ && $2 !~ /^total/ {
        share = $8; sub(/%/, "", share); if (share + 0 > best) { best = share + 0; top = $2 " (" $3 ") " $8 } }
      END { if (total != "") print "per step " total "; largest: " top }' "$STEP_LOG")
    [ -n "$figure" ] || figure=$(last_line "$STEP_LOG")
    record_step train_profile "$figure"
  else
    record train_ours SKIP - 0 "ours: not built yet (the bundle has no bin/train_throughput --device=gpu)"
  fi
fi

# --- lockstep local --gpus ------------------------------------------------------------------

if wanted local; then
  end=$(phase_end 92)
  if [ -x "$root/bin/lockstep" ] &&
    [ "$(left_s 20 "$end")" -ge 2 ] &&
    timeout "$(left_s 20 "$end")" "${binenv[@]}" "$root/bin/lockstep" local --help 2>&1 | grep -q -- '--gpus'; then
    run_step local_digits_gpu 150 "$end" "${binenv[@]}" "$root/bin/lockstep" local --workers=2 --gpus examples/jobs/digits_mlp.json
    figure=$(grep -i 'accuracy' "$STEP_LOG" | tail -n 1 | cut -c 1-200)
    # Issue #33's bar for the digits MLP on GPUs: >= 96% test accuracy.
    if [ "$STEP_RC" -eq 0 ] && ! awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+$/) a = $i } END { exit (a != "" && a >= 0.96) ? 0 : 1 }' <<<"$figure"; then
      STEP_RC=1 figure="${figure:-no accuracy printed}; want >= 0.96"
    fi
    record_step local_digits_gpu "$figure"
    # The residual CNN (convolutions, virtual-batch norms, the skip ADD, global pooling) as a
    # job on the GPU, two workers over NCCL.
    run_step local_residual_gpu 150 "$end" "${binenv[@]}" "$root/bin/lockstep" local --workers=2 --gpus examples/jobs/digits_residual.json
    record_step local_residual_gpu "$(grep -i 'accuracy' "$STEP_LOG" | tail -n 1 | cut -c 1-200)"
    # The char Transformer language model (embeddings, causal attention, layer norms, GELU,
    # Adam with clipping; TFRecord input) as a job on the GPU, two workers over NCCL. Its
    # windows are made here from the committed text by python3, in the run's work folder,
    # where the job's relative data paths resolve.
    char=$work/char_transformer
    mkdir -p "$char/examples/data"
    run_step char_transformer_data 60 "$end" python3 examples/data/make_text_corpus.py \
      --text examples/data/fortunes.txt.gz --out "$char/examples/data"
    if [ "$STEP_RC" -ne 0 ]; then
      record_step local_char_transformer_gpu "its data: $(last_line "$STEP_LOG")"
    else
      run_step local_char_transformer_gpu 150 "$end" bash -c 'cd "$1" && shift && exec "$@"' \
        in_work "$char" "${binenv[@]}" "$root/bin/lockstep" local --workers=2 --gpus \
        "$repo/examples/jobs/char_transformer.json"
      loss=$(tr '\r' '\n' <"$STEP_LOG" | grep -o 'loss [0-9.]*' | tail -n 1)
      record_step local_char_transformer_gpu "final ${loss:-loss: none printed}; $(grep -i 'accuracy' "$STEP_LOG" | tail -n 1 | cut -c 1-150)"
    fi
  else
    record local_digits_gpu SKIP - 0 "not built yet: \`lockstep local\` has no --gpus"
  fi
fi

# --- compute-sanitizer over the kernel tests ------------------------------------------------

if wanted sanitizer; then
  end=$(phase_end 100)
  sanitizer=$(command -v compute-sanitizer || true)
  for s in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -z "$sanitizer" ] && [ -x "$s" ] && sanitizer=$s
  done
  kernel_tests=$(awk '$1 ~ /^\/\/(engine\/|common\/cuda)/ { print $1, $2 }' "$root/tests.txt")
  if [ -z "$sanitizer" ]; then
    record sanitizer SKIP - 0 "skipped: no compute-sanitizer on this machine"
  elif [ -z "$kernel_tests" ]; then
    record sanitizer SKIP - 0 "skipped: no kernel tests (//engine/..., //common/cuda/...) in tests.txt"
  else
    refused=""
    for tool in memcheck racecheck; do
      while read -r label path; do
        name="$tool ${label#//}"
        if [ -n "$refused" ]; then
          record "$name" SKIP - 0 "skipped: compute-sanitizer refused here ($refused)"
          continue
        fi
        # The tests drive CUDA's error paths on purpose (an allocation past the device's
        # memory, bad arguments) and assert the errors themselves: memcheck counts memory
        # access errors only, not the API errors the tests ask for.
        tool_flags=()
        [ "$tool" = memcheck ] && tool_flags=(--report-api-errors no)
        # env gives the test the bundle's libraries without handing them to the sanitizer.
        run_step "$name" 150 "$end" "$sanitizer" --tool "$tool" "${tool_flags[@]}" \
          --error-exitcode 99 --print-limit 20 --target-processes all "${binenv[@]}" "$root/$path"
        summary=$(grep -E -m 1 '(ERROR|RACECHECK) SUMMARY' "$STEP_LOG" | sed 's/^=* *//' | cut -c 1-160)
        if [ -z "$summary" ] && [ "$STEP_RC" -ne 0 ] && [ "$STEP_RC" -ne 124 ] && [ "$STEP_RC" -ne 125 ]; then
          # No summary: the sanitizer itself did not run the program (unsupported runtime, no driver).
          refused=$(grep -v '^[[:space:]]*$' "$STEP_LOG" | head -n 3 | tr '\n' ' ' | cut -c 1-200)
          record_step "$name" "compute-sanitizer refused: $refused"
          continue
        fi
        if [ "$STEP_RC" -ne 0 ] && [ -n "$summary" ]; then
          summary="$summary; the test exited $STEP_RC: $(grep -m 1 'FAILED TEST\|tests\? failed\|Error:' "$STEP_LOG" | sed 's/^=* *//' | cut -c 1-120)"
        fi
        record_step "$name" "${summary:-$(last_line "$STEP_LOG")}"
      done <<<"$kernel_tests"
    done
  fi
fi
exit 0
