#!/usr/bin/env bash
# CPU training throughput, cudagrad vs PyTorch: the same MiniResNet, batch, synthetic data, recipe
# and thread count, run one after the other; prints a table of images/s with the ratio and the
# machine it ran on, and draws it as a bar chart (cpu_compare_out/cpu_compare.png); --save writes
# the table and the chart to bench/results/ instead. Exits non-zero, saying why,
# if either side is missing or fails.
# Usage: bench/cpu_compare.sh [BUILD_DIR] [--threads N] [--steps S] [--warmup W] [--batch-size B]
#        [--widths 64,128,256] [--in-channels C] [--image-size S] [--save]
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=/usr/bin/python3  # Debian's torch loads only in the system interpreter

usage() { sed -n '6,7p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "cpu_compare: error: $*" >&2; exit 1; }

BUILD=build THREADS=$(nproc) STEPS=20 WARMUP=3 BATCH=64 WIDTHS=64,128,256 IN_CHANNELS=3 IMAGE_SIZE=32 SAVE=0
while (($#)); do
  case "$1" in
    --build) BUILD=${2:?--build needs a directory}; shift 2 ;;
    --threads) THREADS=${2:?}; shift 2 ;;
    --steps) STEPS=${2:?}; shift 2 ;;
    --warmup) WARMUP=${2:?}; shift 2 ;;
    --batch-size) BATCH=${2:?}; shift 2 ;;
    --widths) WIDTHS=${2:?}; shift 2 ;;
    --in-channels) IN_CHANNELS=${2:?}; shift 2 ;;
    --image-size) IMAGE_SIZE=${2:?}; shift 2 ;;
    --save) SAVE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; die "unknown option $1" ;;
    *) BUILD=$1; shift ;;
  esac
done
for v in THREADS STEPS BATCH IN_CHANNELS IMAGE_SIZE; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive whole number, got '${!v}'"
done
[[ $WARMUP =~ ^[0-9]+$ ]] || die "WARMUP must be a whole number, got '$WARMUP'"
[[ $WIDTHS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || die "widths must look like 64,128,256, got '$WIDTHS'"

# A relative build directory is taken from where the script was called, else from the repository.
if [[ $BUILD != /* ]]; then
  if [[ -d $BUILD ]]; then BUILD=$(cd "$BUILD" && pwd); else BUILD="$ROOT/$BUILD"; fi
fi
BIN="$BUILD/apps/cudagrad-bench-cpu"
[[ -x $BIN ]] || die "$BIN not found; build it first (cmake --build $BUILD --target cudagrad-bench-cpu)"
"$PYTHON" -c "import torch" 2>/dev/null || die "$PYTHON cannot import torch (apt-get install python3-torch)"

args=(--batch-size "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS"
      --widths "$WIDTHS" --in-channels "$IN_CHANNELS" --image-size "$IMAGE_SIZE")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# run NAME COMMAND...: runs one side, shows its output, leaves its last JSON line in $json.
run() {
  local name=$1 output rc
  shift
  echo "== $name: $*"
  output=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$output" | sed 's/^/   /'
  ((rc == 0)) || die "$name benchmark failed (exit $rc)"
  json=$(printf '%s\n' "$output" | grep '^{' | tail -n 1)
  [[ -n $json ]] || die "$name benchmark printed no JSON result line"
}
run cudagrad "$BIN" "${args[@]}"
ours=$json
run pytorch "$PYTHON" "$ROOT/bench/pytorch/train_throughput.py" "${args[@]}"
theirs=$json

commit=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
table=$("$PYTHON" - "$ours" "$theirs" <<PY
import datetime, json, subprocess, sys
try:
    ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    for side in (ours, theirs):
        float(side["images_per_s"]), float(side["median_step_ms"]), int(side["threads"]), int(side["batch"])
except (ValueError, KeyError, TypeError) as e:
    sys.exit(f"cpu_compare: error: unreadable result line ({e!r}):\n  {sys.argv[1]}\n  {sys.argv[2]}")
if ours["threads"] != theirs["threads"] or ours["batch"] != theirs["batch"]:
    sys.exit(f"cpu_compare: error: the two sides ran different settings: {ours} vs {theirs}")
lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
cpu = next((l.split(":", 1)[1].strip() for l in lscpu if l.startswith("Model name")), "unknown CPU")
cores = next((l.split(":", 1)[1].strip() for l in lscpu if l.startswith("CPU(s)")), "?")
print(f"MiniResNet [$WIDTHS], batch {ours['batch']}, ${IN_CHANNELS}x${IMAGE_SIZE}x${IMAGE_SIZE} synthetic, "
      f"fp32 SGD, {ours['threads']} threads, $STEPS timed steps after $WARMUP warm-up")
print(f"{datetime.date.today()}; CPU: {cpu} ({cores} logical CPUs, load average before: $load_before); "
      f"PyTorch {theirs.get('version', '?')}; cudagrad {'$commit'}")
print()
print("| engine | images/s | median step (ms) |")
print("| --- | ---: | ---: |")
print(f"| cudagrad | {ours['images_per_s']:.1f} | {ours['median_step_ms']:.1f} |")
print(f"| PyTorch | {theirs['images_per_s']:.1f} | {theirs['median_step_ms']:.1f} |")
print()
print(f"ratio cudagrad / PyTorch (images/s): {ours['images_per_s'] / theirs['images_per_s']:.2f}x")
PY
) || exit 1
echo
echo "$table"
# The table and a bar chart of it: with --save in bench/results/, else in cpu_compare_out/.
if ((SAVE)); then
  mkdir -p "$ROOT/bench/results"
  # The thread count is in the name so that same-day runs at 1 and 2 threads do not overwrite each other.
  out="$ROOT/bench/results/cpu_compare_$(date +%Y-%m-%d)_${THREADS}t.md"
  echo "$table" > "$out" || die "cannot write $out"
  echo "saved $out"
  chart=${out%.md}.png
else
  chart=cpu_compare_out/cpu_compare.png
fi
ips() { "$PYTHON" -c 'import json, sys; print(json.loads(sys.argv[1])["images_per_s"])' "$1"; }
"$PYTHON" "$ROOT/scripts/plot_bars.py" -o "$chart" --ylabel "images/s (higher is better)" \
  --title "MiniResNet [$WIDTHS] CPU training, batch $BATCH, $THREADS threads" \
  "cudagrad=$(ips "$ours")" "PyTorch=$(ips "$theirs")" \
  || echo "cpu_compare: no chart (see above); the table stands" >&2
