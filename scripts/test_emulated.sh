#!/usr/bin/env bash
# The emulated-GPU suite (.ci/run's second stage): installs what is missing, builds cudagrad with
# -DCUDAGRAD_GPU_EMULATION=ON into build-emu/ (the kernels/cuda sources run on the CPU through
# emulator/), and runs the GPU tests that emulation covers: the emulator's own tests and the
# kernel, engine, data, distributed, nn and training-step GPU tests (the default GPU configuration's
# step against the CPU, CUDA graph capture and replay), the op families' conformance suites
# (tests/conformance/cuda: every registered GPU implementation against a float64 reference) and
# the trainer run end to end on the emulated GPU (tests/apps/cuda, at a smaller size there), then
# the engine, data and conformance tests once more with the threads of each block run in reverse
# order. The kernel tests check every shared-memory access instead (cmake/Emulation.cmake).
# Tests of cuDNN, cuBLAS or NCCL, and of real concurrency, skip there as needing a real GPU.
# Environment: BUILD_DIR (default build-emu), JOBS (default: all cores), BUILD_ONLY=1 (install and
# build, then stop: .ci/run builds ahead this way while earlier stages test).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --for-tests
BUILD_DIR=${BUILD_DIR:-build-emu}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCUDAGRAD_GPU_EMULATION=ON >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
if [[ "${BUILD_ONLY:-0}" == 1 ]]; then exit 0; fi
labels="emulator|kernels_cuda|engine_cuda|data_cuda|dist_cuda|nn_cuda|train_cuda|apps_cuda|conformance_cuda"
# The kernel tests run the kernels with every shared-memory access checked (bounds, and races
# between barriers: emulator/shared_checker.h), which finds what the reverse order would and more;
# the other GPU tests, which run the unchecked kernels, take the reverse pass.
race_labels="emulator|engine_cuda|data_cuda|conformance_cuda"
junit="$(cd "$BUILD_DIR" && pwd)/ctest-junit.xml"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" -L "$labels" --output-junit "$junit" |
  tee "$BUILD_DIR/ctest.log"
# As the main suite: every selected test ran, and passed or skipped for want of a real GPU.
scripts/check_test_counts.py "$BUILD_DIR" "$junit" -L "$labels"
# What still needs a real GPU, test by test with the library it needs (before the next run
# replaces CTest's log).
python3 scripts/emulated_skips.py "$BUILD_DIR" | tee "$BUILD_DIR/needs_real_gpu.md"
# The race pass: each block's threads run in reverse order. A read of shared memory that another
# thread writes between the same two barriers gives a result that differs from the reference in
# one of the two orders (emulator/grid.cpp).
echo "== the engine, data and conformance tests again, threads in reverse order (shared-memory races) =="
CG_EMU_SCHEDULE=reverse ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" -L "$race_labels" \
  --output-junit "${junit%.xml}-reverse.xml" | tee "$BUILD_DIR/ctest_reverse.log"
scripts/check_test_counts.py "$BUILD_DIR" "${junit%.xml}-reverse.xml" -L "$race_labels"
grep -E "tests passed" "$BUILD_DIR/ctest.log" | tail -n 1
grep -E "tests passed" "$BUILD_DIR/ctest_reverse.log" | sed 's/^/reverse schedule: /' | tail -n 1
