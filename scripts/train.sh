#!/usr/bin/env bash
# The main job in one command: install what is missing, build, and train MiniResNet on
# Fashion-MNIST with the default config for this machine (configs/fashion_mnist.yaml on a GPU,
# configs/fashion_mnist_cpu.yaml otherwise; CONFIG=... picks another). Extra arguments are config
# overrides, e.g. train.epochs=1.
# Usage: scripts/train.sh [key=value ...]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/build.sh
# The GPU config (full MiniResNet, fp16 mixed precision) when a GPU answers, else the CPU one.
if [ -z "${CONFIG:-}" ]; then
  if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
    CONFIG=configs/fashion_mnist.yaml
  else
    CONFIG=configs/fashion_mnist_cpu.yaml
  fi
fi
exec "${BUILD_DIR:-build}/apps/cudagrad-train" --config "$CONFIG" "$@"
