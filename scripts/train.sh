#!/usr/bin/env bash
# The main job in one command: install what is missing, build, and train MiniResNet on
# Fashion-MNIST with the default config for this machine (CPU unless a GPU and CUDA training are
# available). Extra arguments are config overrides, e.g. train.epochs=1.
# Usage: scripts/train.sh [key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
CONFIG=${CONFIG:-configs/fashion_mnist_cpu.yaml}
exec "${BUILD_DIR:-build}/apps/cudagrad-train" --config "$CONFIG" "$@"
