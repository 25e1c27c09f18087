#!/usr/bin/env bash
# The GPU check (shared/docs/gpu.md): from a bare GPU machine, print what it found, build with
# CUDA, run every GPU test, run compute-sanitizer over the kernel tests, train MiniResNet on
# Fashion-MNIST on the GPU, run the kernel benchmark and the side-by-side comparison with PyTorch,
# and print a summary table last.
#
# Before the device call, here: scripts/gpu_deps.sh pack, then carry [".deps", ".data"]: the
# Debian libraries the build needs and Fashion-MNIST (the GPU machine has neither, nor apt).
# Usage: scripts/gpu_check.sh [STAGE ...]    stages: env build test sanitize train bench compare timeline
#        (default: all, in that order). A device call may run at most 10 minutes, so a session can
#        run the stages over several calls on the same warm machine: the build directory
#        (build-gpu) stays, and each stage appends its row to the summary.
# Output ($GPU_CHECK_OUT, default gpu_check_out/, kept between calls): one log per stage
# (<stage>.log) and summary.md. A device call returns at most 8 files from its $OUT, which is
# emptied before each call: copy the stages' logs and summary.md there at the end of each call.
# Knobs: JOBS (build and CPU tests, default all cores), GPU_TEST_JOBS (GPU tests at once, 4),
# SANITIZE_TIMEOUT (seconds per program under compute-sanitizer, 240), BUILD_DIR, PYTHON,
# CPU_TESTS (1: the test stage also runs the CPU tests; 0 skips them, for a short lease: CI runs
# them anyway), GPU_TEST_REGEX (only the GPU tests it matches, to rerun what a lease found failing),
# COMPARE_MODES (gpu_compare.sh's modes: throughput, accuracy; default both).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${GPU_CHECK_OUT:-gpu_check_out}
BUILD=${BUILD_DIR:-build-gpu}
JOBS=${JOBS:-$(nproc)}
GPU_TEST_JOBS=${GPU_TEST_JOBS:-4}
SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-240}  # seconds per test program under compute-sanitizer
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
# The build's Debian libraries, carried in by scripts/gpu_deps.sh pack (the GPU machine has no apt).
if [ -d .deps/debs ]; then
  scripts/gpu_deps.sh unpack || exit 1
  # shellcheck source=gpu_deps.sh disable=SC1091
  source scripts/gpu_deps.sh env
fi
# cuDNN/NCCL from the nvidia-* wheels beside PyTorch when /usr/local/cuda lacks them: CMake hints
# for the build, and their folders on LD_LIBRARY_PATH for every stage (each device call runs its
# own stages, so this is worked out on every call).
WHEEL_HINTS=""
for lib in cudnn nccl; do
  [ -f "/usr/local/cuda/include/$lib.h" ] && continue
  dir=$("$PYTHON" -c "import nvidia.$lib, os; print(list(nvidia.$lib.__path__)[0])" 2>/dev/null) || continue
  WHEEL_HINTS+=" -D$(echo "$lib" | tr '[:lower:]' '[:upper:]')_ROOT=$dir"
  export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
SUMMARY="$OUT/summary.md"
[ -f "$SUMMARY" ] || printf '| stage | status | detail |\n| --- | --- | --- |\n' > "$SUMMARY"
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3" >> "$SUMMARY"; }
passed_line() { grep -E 'tests passed' "$1" | tail -n 1; }

stage_env() {
  {
    echo "date: $(date -Is)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || echo "nvidia-smi: not found"
    nvcc --version 2>&1 | tail -n 1
    cmake --version | head -n 1
    for h in /usr/local/cuda/include/cudnn.h /usr/local/cuda/include/nccl.h; do [ -f "$h" ] && printf '%s ' "$h"; done; echo
    grep -h -E '#define (CUDNN_MAJOR|CUDNN_MINOR|CUDNN_PATCHLEVEL|NCCL_MAJOR|NCCL_MINOR|NCCL_PATCH) ' \
      /usr/local/cuda/include/cudnn_version.h /usr/local/cuda/include/nccl.h 2>/dev/null
    "$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" 2>&1
    "$PYTHON" -c "import nvidia.cudnn, nvidia.nccl; print(nvidia.cudnn.__path__, nvidia.nccl.__path__)" 2>&1
    command -v compute-sanitizer ncu nsys 2>&1
    # What a failed build or a missing library would need to know.
    grep -h '^PRETTY_NAME' /etc/os-release 2>&1; ldd --version 2>&1 | head -n 1; c++ --version 2>&1 | head -n 1
    command -v nvcc 2>&1
    for f in /usr/local/cuda/lib64/lib{cudart,cublas,cublasLt,cudnn,nccl}.so*; do [ -e "$f" ] && printf '%s ' "${f##*/}"; done; echo
    echo "wheel hints:${WHEEL_HINTS:- none}"
  } > "$OUT/env.log" 2>&1
  cat "$OUT/env.log"
  row env ok "$(head -n 2 "$OUT/env.log" | tail -n 1)"
}

stage_build() {
  if BUILD_DIR="$BUILD" JOBS="$JOBS" CMAKE_ARGS="-DCUDAGRAD_CUDA=ON$WHEEL_HINTS" scripts/build.sh > "$OUT/build.log" 2>&1; then
    row build ok "$(grep -c 'Building' "$OUT/build.log") objects, -j$JOBS"
  else
    row build FAILED "$(grep -m1 -E 'error' "$OUT/build.log")"
  fi
}

stage_test() {
  # Every "no GPU" skip becomes a failure here (tests/support/need_gpu.h): on the GPU machine a
  # skipped GPU test means the device was not visible, not that the test passed.
  export CUDAGRAD_REQUIRE_GPU=1
  # First that `-L gpu` selects every GPU test, else the stage below could pass on a subset.
  scripts/check_gpu_labels.sh "$BUILD" > "$OUT/test.log" 2>&1
  local labels_status=$?
  row "GPU labels (every CUDA test selected)" "$([ $labels_status = 0 ] && echo ok || echo FAILED)" \
      "$(grep -m1 '^GPU tests:' "$OUT/test.log")"
  # GPU tests first (their failures are the news), then everything else on the same build.
  # --no-tests=error: zero tests selected is a failure, not an empty success.
  # A few at a time: each test is its own process, and its start (CUDA context, cuDNN's libraries)
  # dominates most of them; the timing-sensitive ones are RUN_SERIAL (tests/CMakeLists.txt), so
  # ctest runs those alone.
  local only=()
  [ -n "${GPU_TEST_REGEX:-}" ] && only=(-R "$GPU_TEST_REGEX")
  ctest --test-dir "$BUILD" -L '^gpu$' "${only[@]}" --no-tests=error --output-on-failure -j "$GPU_TEST_JOBS" \
    --timeout 300 >> "$OUT/test.log" 2>&1
  local gpu_status=$?
  local ran
  # CTest's closing line: "96% tests passed, 22 tests failed out of 531", or with none failed
  # "100% tests passed out of 139" (CMake 4.4 on the H100 machine).
  ran=$(sed -n 's/.*tests passed.* out of \([0-9]*\).*/\1/p' "$OUT/test.log" | tail -n 1)
  [ "${ran:-0}" -gt 0 ] || gpu_status=1
  echo "GPU tests run: ${ran:-0}"
  row "GPU tests (ctest -L gpu${GPU_TEST_REGEX:+ -R $GPU_TEST_REGEX}, CUDAGRAD_REQUIRE_GPU=1)" "$([ $gpu_status = 0 ] && echo ok || echo FAILED)" \
      "${ran:-0} run; $(passed_line "$OUT/test.log")"
  unset CUDAGRAD_REQUIRE_GPU
  if [ "${CPU_TESTS:-1}" = 0 ]; then row "CPU tests on this machine" skipped "CPU_TESTS=0"; return; fi
  echo "===== CPU and multi-process tests =====" >> "$OUT/test.log"
  ctest --test-dir "$BUILD" -LE '^gpu$' --no-tests=error -j "$JOBS" --timeout 300 >> "$OUT/test.log" 2>&1
  local cpu_status=$?
  row "CPU tests on this machine" "$([ $cpu_status = 0 ] && echo ok || echo FAILED)" "$(passed_line "$OUT/test.log")"
}

# sanitize_one TOOL PROGRAM [TOOL ARGS]: one program under compute-sanitizer, within SANITIZE_TIMEOUT;
# its output goes to sanitize.log, and a failure (124: over the limit) says so there.
sanitize_one() {
  local tool=$1 exe=$2 rc=0
  shift 2
  echo "===== $tool $(basename "$exe")" >> "$OUT/sanitize.log"
  timeout "$SANITIZE_TIMEOUT" compute-sanitizer --tool "$tool" "$@" --error-exitcode 1 "$exe" >> "$OUT/sanitize.log" 2>&1 ||
    rc=$?
  [ $rc = 0 ] || echo "===== exit $rc (124: over ${SANITIZE_TIMEOUT} s)" >> "$OUT/sanitize.log"
  return $rc
}

stage_sanitize() {
  if ! command -v compute-sanitizer > /dev/null; then row sanitize missing "compute-sanitizer not on PATH"; return; fi
  local status=ok
  : > "$OUT/sanitize.log"
  for t in "$BUILD"/tests/kernels_cuda_*_test; do
    sanitize_one memcheck "$t" || status=FAILED
  done
  # racecheck where kernels share memory between threads
  for t in conv_native batch_norm head optim; do
    local exe="$BUILD/tests/kernels_cuda_${t}_test"
    [ -x "$exe" ] || continue
    sanitize_one racecheck "$exe" --racecheck-report hazard || status=FAILED
  done
  row "compute-sanitizer (memcheck, racecheck)" "$status" "$(grep -c 'ERROR SUMMARY: 0 errors' "$OUT/sanitize.log") clean runs"
}

# Fashion-MNIST: FMNIST, else Debian's package, else the copy gpu_deps.sh pack carries in
# (.data/fashion-mnist, ignored by git): the GPU machine has no apt.
fashion_mnist_dir() {
  local data=${FMNIST:-/usr/share/datasets/fashion-mnist}
  [ -d "$data" ] || data=.data/fashion-mnist
  echo "$data"
}

stage_train() {
  local data
  data=$(fashion_mnist_dir)
  local run_dir="$OUT/train_run"
  rm -rf "$run_dir"
  local start=$SECONDS
  "$BUILD/apps/cudagrad-train" --config configs/fashion_mnist.yaml data.path="$data" output.dir="$run_dir" \
    > "$OUT/train.log" 2>&1
  local status=$?
  local acc
  acc=$(grep -o 'accuracy [0-9.]*%' "$OUT/train.log" | tail -n 1)
  row "MiniResNet on Fashion-MNIST (fp16 AMP)" "$([ $status = 0 ] && echo ok || echo FAILED)" \
      "test ${acc:-?} in $((SECONDS - start)) s"
  cp "$run_dir/metrics.jsonl" "$OUT/train_metrics.jsonl" 2>/dev/null
  rm -rf "$run_dir"
}

# Data parallelism on the one GPU, profiled (profile.enabled: trace_rank<r>.json, open in
# Perfetto): two ranks over Gloo staged through pinned host memory (NCCL refuses two ranks on one
# GPU), and one process modeling an 8-rank NVLink ring (dist.backend=modeled); one epoch each.
# (A single rank communicates nothing in the trainer: single-rank NCCL runs in the GPU tests.)
stage_timeline() {
  local data run ranks backend dir status all=ok
  data=$(fashion_mnist_dir)
  for run in "gloo 2" "modeled 1"; do
    read -r backend ranks <<< "$run"
    dir="$OUT/timeline_$backend"
    rm -rf "$dir"
    timeout 300 "$BUILD/apps/cudagrad-launch" --standalone --nproc-per-node "$ranks" "$BUILD/apps/cudagrad-train" \
      --config configs/fashion_mnist.yaml data.path="$data" dist.backend="$backend" train.epochs=1 \
      profile.enabled=true output.dir="$dir" > "$OUT/timeline_$backend.log" 2>&1
    status=$?
    [ $status = 0 ] || all=FAILED
    rm -rf "$dir/checkpoints"  # large; the traces and metrics stay
    echo "$backend x$ranks: exit $status, $(ls "$dir"/trace_rank*.json 2>/dev/null | wc -l) trace(s)"
  done
  row "timeline (2 ranks staged Gloo; modeled 8-rank ring)" "$all" "$OUT/timeline_*/trace_rank*.json"
}

stage_bench() {
  if [ -x "$BUILD/bench/gpu_kernels_bench" ]; then
    if "$BUILD/bench/gpu_kernels_bench" > "$OUT/bench.log" 2>&1; then row "kernel benchmark" ok "see bench.log"
    else row "kernel benchmark" FAILED "see bench.log"; fi
  else
    row "kernel benchmark" missing "$BUILD/bench/gpu_kernels_bench not built"
  fi
}

stage_compare() {
  if [ -x scripts/gpu_compare.sh ]; then
    # shellcheck disable=SC2086
    if BUILD_DIR="$BUILD" OUT_DIR="$OUT" PYTHON="$PYTHON" scripts/gpu_compare.sh ${COMPARE_MODES:-} > "$OUT/compare.log" 2>&1; then
      row "vs PyTorch (throughput, time to 93%)" ok "see compare.log / compare.md"
    else
      row "vs PyTorch (throughput, time to 93%)" FAILED "see compare.log"
    fi
  else
    row "throughput vs PyTorch" missing "scripts/gpu_compare.sh not found"
  fi
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(env build test sanitize train bench compare timeline)
for s in "${stages[@]}"; do
  case "$s" in
    env|build|test|sanitize|train|bench|compare|timeline) echo ">>> $s"; "stage_$s" ;;
    *) echo "unknown stage '$s' (env build test sanitize train bench compare timeline)" >&2; exit 2 ;;
  esac
done
echo
cat "$SUMMARY"
