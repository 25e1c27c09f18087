#!/usr/bin/env bash
# The test command: install what is missing (PyTorch and Open MPI included, for the golden and
# mpirun tests), build, and run the whole CTest suite. GPU tests skip, saying so, on machines
# without a GPU. The last line printed is CTest's count of the tests that ran.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --for-tests
scripts/build.sh
BUILD_DIR=${BUILD_DIR:-build}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "${JOBS:-$(nproc)}" | tee "$BUILD_DIR/ctest.log"
grep -E "tests passed" "$BUILD_DIR/ctest.log" | tail -n 1
