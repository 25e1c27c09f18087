#!/usr/bin/env bash
# The emulated-GPU suite (.ci/run's second stage): installs what is missing, builds cudagrad with
# -DCUDAGRAD_GPU_EMULATION=ON into build-emu/ (the kernels/cuda sources run on the CPU through
# emulator/), and runs the GPU tests that emulation covers: the emulator's own tests and the
# kernel, engine, data, distributed, nn and training-step GPU tests (the default GPU configuration's
# step against the CPU, CUDA graph capture and replay) and the op families' conformance suites
# (tests/conformance/cuda: every registered GPU implementation against a float64 reference), then
# the kernel and conformance tests once more with the threads of each block run in reverse order.
# Tests of cuDNN, cuBLAS or NCCL, and of real concurrency, skip there as needing a real GPU. The
# apps/ GPU tests (whole trainer runs, minutes each in emulation) are not in this set.
# Environment: BUILD_DIR (default build-emu), JOBS (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --for-tests
BUILD_DIR=${BUILD_DIR:-build-emu}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCUDAGRAD_GPU_EMULATION=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
# Left out: GpuTraining.MixedPrecisionFp16Learns (40 fp16 steps, about 5 minutes here; fp16
# training is covered by DefaultGpuConfig.*, a few steps against the CPU).
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" \
  -L "emulator|kernels_cuda|engine_cuda|data_cuda|dist_cuda|nn_cuda|train_cuda|conformance_cuda" -E "MixedPrecisionFp16Learns" |
  tee "$BUILD_DIR/ctest.log"
# The race pass: the kernels again with each block's threads run in reverse order. A read of
# shared memory that another thread writes between the same two barriers gives a result that
# differs from the reference in one of the two orders (emulator/grid.cpp).
echo "== the kernels again, threads in reverse order (shared-memory races) =="
CG_EMU_SCHEDULE=reverse ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" \
  -L "emulator|kernels_cuda|engine_cuda|data_cuda|conformance_cuda" | tee "$BUILD_DIR/ctest_reverse.log"
grep -E "tests passed" "$BUILD_DIR/ctest.log" | tail -n 1
grep -E "tests passed" "$BUILD_DIR/ctest_reverse.log" | sed 's/^/reverse schedule: /' | tail -n 1
