#!/usr/bin/env bash
# The GPU check (shared/docs/gpu.md): from a bare GPU machine, in one go, print what it found,
# build with CUDA, run every GPU test, run compute-sanitizer over the GPU tests, run the CPU and
# data-parallel checks that also belong to a GPU session, and print a summary table last.
# Full logs go to $GPU_CHECK_OUT (default gpu_check_out/).
# What does not exist yet (CUDA kernels, GPU training, the kernel benchmark, the PyTorch GPU
# comparison) is reported as such in the summary, never as passed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${GPU_CHECK_OUT:-gpu_check_out}
mkdir -p "$OUT"
declare -a rows
row() { rows+=("$(printf '| %-34s | %-8s | %s |' "$1" "$2" "$3")"); }

{
  echo "date: $(date -Is)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi: not found"
  nvcc --version 2>&1 | tail -n 1
  ls /usr/local/cuda/include 2>/dev/null | grep -E '^(cudnn|nccl)' | tr '\n' ' '; echo
  grep -h -E '#define (CUDNN_MAJOR|CUDNN_MINOR|CUDNN_PATCHLEVEL|NCCL_MAJOR|NCCL_MINOR|NCCL_PATCH) ' \
    /usr/local/cuda/include/cudnn_version.h /usr/local/cuda/include/nccl.h 2>/dev/null
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" 2>&1
  python3 -c "import nvidia.cudnn, nvidia.nccl; print(nvidia.cudnn.__path__, nvidia.nccl.__path__)" 2>&1
} | tee "$OUT/environment.txt"

# Where cuDNN/NCCL live when /usr/local/cuda lacks them: the nvidia-* wheels beside PyTorch.
hints=""
for lib in cudnn nccl; do
  dir=$(python3 -c "import nvidia.$lib, os; print(list(nvidia.$lib.__path__)[0])" 2>/dev/null) || continue
  upper=$(echo "$lib" | tr a-z A-Z)
  hints+=" -D${upper}_ROOT=$dir"
done

if BUILD_DIR=build-gpu JOBS=$(nproc) CMAKE_ARGS="-DCUDAGRAD_CUDA=ON$hints" scripts/build.sh > "$OUT/build.log" 2>&1; then
  row "build with CUDA" "ok" "$(grep -c 'Building' "$OUT/build.log") objects"
else
  row "build with CUDA" "FAILED" "see build.log"
fi

if ctest --test-dir build-gpu -L gpu --output-on-failure > "$OUT/gpu_tests.log" 2>&1; then
  row "GPU tests (ctest -L gpu)" "ok" "$(grep -E 'tests passed' "$OUT/gpu_tests.log" | tail -n 1)"
else
  row "GPU tests (ctest -L gpu)" "FAILED" "$(grep -E 'tests passed' "$OUT/gpu_tests.log" | tail -n 1)"
fi
if command -v compute-sanitizer > /dev/null; then
  status=ok
  for t in build-gpu/tests/gpu_*; do
    compute-sanitizer --tool memcheck --error-exitcode 1 "$t" >> "$OUT/sanitizer.log" 2>&1 || status=FAILED
  done
  row "compute-sanitizer memcheck" "$status" "over the GPU tests"
else
  row "compute-sanitizer memcheck" "missing" "not on PATH"
fi

if ctest --test-dir build-gpu -LE gpu -j "$(nproc)" > "$OUT/cpu_tests.log" 2>&1; then
  row "CPU and multi-process tests" "ok" "$(grep -E 'tests passed' "$OUT/cpu_tests.log" | tail -n 1)"
else
  row "CPU and multi-process tests" "FAILED" "$(grep -E 'tests passed' "$OUT/cpu_tests.log" | tail -n 1)"
fi

row "MiniResNet training on the GPU" "n/a" "CUDA ops not written yet (issue 3)"
row "kernel benchmark vs cuDNN" "n/a" "no CUDA kernels yet (issue 3)"
row "throughput vs PyTorch on the GPU" "n/a" "issue 5"

echo
echo "| check | status | detail |"
echo "| --- | --- | --- |"
printf '%s\n' "${rows[@]}"
