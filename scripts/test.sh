#!/usr/bin/env bash
# The test command: install what is missing (PyTorch and Open MPI included, for the golden and
# mpirun tests), build, and run the whole CTest suite. GPU tests skip, saying so, on machines
# without a GPU. Any other skip (a missing tool: mpirun, torch, root, ...) fails instead
# (CUDAGRAD_REQUIRE_ALL=1, tests/support/need_tool.h), and scripts/check_test_counts.py checks that
# every test that exists passed but the GPU ones that skipped, printing both counts; set
# CUDAGRAD_REQUIRE_ALL=0 to let a machine without the tools skip their tests. The last line printed
# is CTest's count of the tests that ran.
set -euo pipefail
cd "$(dirname "$0")/.."
export CUDAGRAD_REQUIRE_ALL=${CUDAGRAD_REQUIRE_ALL:-1}
scripts/install_deps.sh --for-tests
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
junit="$(cd "$BUILD_DIR" && pwd)/ctest-junit.xml"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}" --output-junit "$junit" | tee "$BUILD_DIR/ctest.log"
if [[ "$CUDAGRAD_REQUIRE_ALL" != 0 ]]; then scripts/check_test_counts.py "$BUILD_DIR" "$junit"; fi
grep -E "tests passed" "$BUILD_DIR/ctest.log" | tail -n 1
