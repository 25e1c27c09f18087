#!/usr/bin/env bash
# The test command: install what is missing (PyTorch included, for the golden tests), build, and
# run the whole CTest suite. GPU tests skip, saying so, on machines without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh --with-python
scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "${JOBS:-$(nproc)}"
