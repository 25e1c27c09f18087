#!/usr/bin/env bash
# The convolution fidelity table: each CPU convolution algorithm's relative error against float64,
# per layer shape of both Fashion-MNIST MiniResNets and per phase, beside PyTorch float32's own
# (bench/pytorch/conv_fidelity.py draws the inputs and computes the float64 reference and
# PyTorch's errors; bench/conv_fidelity_bench.cpp runs cudagrad's algorithms on the same inputs).
# Usage: bench/conv_fidelity.sh [--batch N] [--build DIR] [--save]
#   --batch N    images per layer (default 32)
#   --build DIR  the build holding bench/conv_fidelity_bench (default build)
#   --save       also write the table to bench/results/conv_fidelity_<date>_<time>.md
# Needs Debian's python3-torch (/usr/bin/python3). Takes about a minute on 2 cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
batch=32 build=build save=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --batch) batch=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --save) save=1; shift ;;
    -h|--help) sed -n '/^# Usage:/,/^[^#]/p' "$0" | sed '/^[^#]/d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "conv_fidelity: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $build == /* ]] || build="$ROOT/$build"
bench="$build/bench/conv_fidelity_bench"
[[ -x $bench ]] || { echo "conv_fidelity: $bench not found; cmake --build $build --target conv_fidelity_bench" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || { echo "conv_fidelity: /usr/bin/python3 lacks torch (apt-get install python3-torch)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$ROOT/bench/pytorch/conv_fidelity.py" "$work/inputs.safetensors" --batch "$batch"
{
  echo "# CPU convolution fidelity, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "cudagrad $(git -C "$ROOT" rev-parse --short=12 HEAD)$(git -C "$ROOT" diff --quiet HEAD -- kernels engine || echo +dirty);" \
       "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) threads; $(g++ --version | head -n1)"
  echo
  "$bench" "$work/inputs.safetensors"
} | tee "$work/table.md"
if [[ $save -eq 1 ]]; then
  out="$ROOT/bench/results/conv_fidelity_$(date -u +%Y-%m-%d_%H%M).md"
  cp "$work/table.md" "$out"
  echo "conv_fidelity: saved $out"
fi
