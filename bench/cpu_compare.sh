#!/usr/bin/env bash
# CPU training throughput, cudagrad vs PyTorch, same model, batch, data and thread count, in one
# run. Prints a table with the ratio; --save also writes it to bench/results/.
# Usage: bench/cpu_compare.sh [--build DIR] [--threads N] [--steps S] [--warmup W] [--save]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build THREADS=$(nproc) STEPS=20 WARMUP=3 SAVE=0
while (($#)); do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --save) SAVE=1; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
BIN="$BUILD/apps/cudagrad-bench-cpu"
[[ -x "$BIN" ]] || { echo "error: $BIN not found; build first (scripts/build.sh)" >&2; exit 1; }
/usr/bin/python3 -c "import torch" 2>/dev/null || {
  echo "error: /usr/bin/python3 cannot import torch (apt-get install python3-torch)" >&2; exit 1; }

args=(--batch-size 64 --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS")
ours=$("$BIN" "${args[@]}" | tail -n 1)
theirs=$(/usr/bin/python3 bench/pytorch/train_throughput.py "${args[@]}" | tail -n 1)

table=$(/usr/bin/python3 - "$ours" "$theirs" "$THREADS" <<'PY'
import json, platform, subprocess, sys, datetime
ours, theirs, threads = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
cpu = next((l.split(":", 1)[1].strip() for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if l.startswith("Model name")), platform.processor())
print(f"MiniResNet [64,128,256], batch 64, 32x32x3 synthetic, fp32 SGD, {threads} threads")
print(f"CPU: {cpu}; PyTorch {theirs['version']}; {datetime.date.today()}")
print()
print("| engine | images/s | median step (ms) |")
print("| --- | ---: | ---: |")
print(f"| cudagrad | {ours['images_per_s']:.1f} | {ours['median_step_ms']:.1f} |")
print(f"| PyTorch | {theirs['images_per_s']:.1f} | {theirs['median_step_ms']:.1f} |")
print()
print(f"ratio cudagrad / PyTorch: {ours['images_per_s'] / theirs['images_per_s']:.2f}x")
PY
)
echo "$table"
if ((SAVE)); then
  mkdir -p bench/results
  out="bench/results/cpu_compare_$(date +%Y-%m-%d)_${THREADS}t.md"
  echo "$table" > "$out"
  echo "saved $out"
fi
