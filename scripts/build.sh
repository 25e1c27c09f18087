#!/usr/bin/env bash
# Configures and builds cudagrad into build/ (Release, ccache, CUDA when nvcc is found).
# Environment: BUILD_DIR (default build), JOBS (default: all cores), CMAKE_ARGS (extra flags,
# e.g. "-DCUDAGRAD_CUDA=OFF" or "-DCMAKE_CUDA_ARCHITECTURES=80;90").
set -euo pipefail
# The real source tree, also when called through a symlinked copy of it (the README test's).
cd "$(dirname "$(readlink -f "$0")")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
# shellcheck disable=SC2086
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
