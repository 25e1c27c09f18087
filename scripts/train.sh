#!/usr/bin/env bash
# The main job in one command: install what is missing, build, and train MiniResNet on
# Fashion-MNIST with the default config for this machine (configs/fashion_mnist.yaml on a GPU,
# configs/fashion_mnist_cpu.yaml otherwise; CONFIG=... picks another). Extra arguments are config
# overrides, e.g. train.epochs=1. At the end, the run's curves are drawn into
# <output.dir>/curves.png (scripts/plot_metrics.py) and the path printed.
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
TRAIN="${BUILD_DIR:-build}/apps/cudagrad-train"
# Where this run writes: output.dir of the resolved config (the file and the overrides together).
# Quietly: the run itself reports any problem with the config, once.
out_dir=$("$TRAIN" --config "$CONFIG" "$@" --print-config 2> /dev/null \
  | awk '/^output:/ { group = 1; next } group && /^  dir:/ { sub(/^  dir: */, ""); gsub(/^"|"$/, ""); print; exit }') || true
set +e
"$TRAIN" --config "$CONFIG" "$@"  # not exec: the curves are drawn after it, even after Ctrl-C
rc=$?
set -e
if [ -n "$out_dir" ] && [ -s "$out_dir/metrics.jsonl" ]; then
  /usr/bin/python3 scripts/plot_metrics.py "$out_dir" || echo "train.sh: could not draw the curves" >&2
fi
exit $rc
