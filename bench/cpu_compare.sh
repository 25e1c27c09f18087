#!/usr/bin/env bash
# CPU training throughput, cudagrad vs PyTorch: the same MiniResNet, batch, synthetic data, recipe
# and thread count, run one after the other; prints a table of images/s (and CPU time per step)
# with the ratio and the machine it ran on, and draws it as a bar chart
# (cpu_compare_out/cpu_compare.png); --save writes the table and the chart to bench/results/
# instead. Exits 2 on a bad command line, 1 (saying why) if either side is missing or fails, or if
# the two sides built networks of different sizes.
# Usage: bench/cpu_compare.sh [BUILD_DIR] [--net full|narrow] [--threads N] [--steps S] [--warmup W]
#        [--batch-size B] [--widths 64,128,256] [--in-channels C] [--image-size S] [--save]
#   --net full (default): the full MiniResNet, widths 64,128,256, 3x32x32 images, batch 64.
#   --net narrow: scripts/train.sh's Fashion-MNIST network, widths 16,32,64, 1x28x28, batch 128.
#   --widths, --in-channels, --image-size, --batch-size override the preset's value.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=cpu_compare
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

BUILD=build THREADS=$(nproc) STEPS=20 WARMUP=3 NET=full SAVE=0
BATCH="" WIDTHS="" IN_CHANNELS="" IMAGE_SIZE=""  # "" = the preset's
while (($#)); do
  case "$1" in
    --build|--net|--threads|--steps|--warmup|--batch-size|--widths|--in-channels|--image-size)
      (($# >= 2)) || usage_die "$1 needs a value"
      case "$1" in
        --build) BUILD=$2 ;; --net) NET=$2 ;; --threads) THREADS=$2 ;; --steps) STEPS=$2 ;;
        --warmup) WARMUP=$2 ;; --batch-size) BATCH=$2 ;; --widths) WIDTHS=$2 ;;
        --in-channels) IN_CHANNELS=$2 ;; --image-size) IMAGE_SIZE=$2 ;;
      esac
      shift 2 ;;
    --save) SAVE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; usage_die "unknown option $1" ;;
    *) BUILD=$1; shift ;;
  esac
done
# The preset fills what the command line left open; the label says whether anything was changed.
case "$NET" in
  full) preset=("64,128,256" 3 32 64) ;;
  narrow) preset=("16,32,64" 1 28 128) ;;
  *) usage_die "--net must be full or narrow, got '$NET'" ;;
esac
LABEL=$NET
[[ -n $WIDTHS$IN_CHANNELS$IMAGE_SIZE$BATCH ]] && LABEL=custom
WIDTHS=${WIDTHS:-${preset[0]}} IN_CHANNELS=${IN_CHANNELS:-${preset[1]}}
IMAGE_SIZE=${IMAGE_SIZE:-${preset[2]}} BATCH=${BATCH:-${preset[3]}}
[[ $LABEL == custom && $WIDTHS,$IN_CHANNELS,$IMAGE_SIZE,$BATCH == "$(IFS=,; echo "${preset[*]}")" ]] && LABEL=$NET
for v in THREADS STEPS BATCH IN_CHANNELS IMAGE_SIZE; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || usage_die "$v must be a positive whole number, got '${!v}'"
done
[[ $WARMUP =~ ^[0-9]+$ ]] || usage_die "WARMUP must be a whole number, got '$WARMUP'"
[[ $WIDTHS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage_die "widths must look like 64,128,256, got '$WIDTHS'"

BUILD=$(resolve_build "$BUILD")
BIN="$BUILD/apps/cudagrad-bench-cpu"
require_binary "$BIN" cudagrad-bench-cpu
require_torch

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

machine=$(machine_line "$load_before" "$BIN")
table=$("$PYTHON" - "$ours" "$theirs" <<PY
import json, sys
try:
    ours, theirs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    for side in (ours, theirs):
        float(side["images_per_s"]), float(side["median_step_ms"]), int(side["threads"]), int(side["batch"])
except (ValueError, KeyError, TypeError) as e:
    sys.exit(f"cpu_compare: error: unreadable result line ({e!r}):\n  {sys.argv[1]}\n  {sys.argv[2]}")
if ours["threads"] != theirs["threads"] or ours["batch"] != theirs["batch"]:
    sys.exit(f"cpu_compare: error: the two sides ran different settings: {ours} vs {theirs}")
if ours.get("parameters") != theirs.get("parameters"):
    sys.exit(f"cpu_compare: error: the two networks differ: cudagrad has {ours.get('parameters')} parameters, "
             f"PyTorch {theirs.get('parameters')}")
def cpu(side):  # CPU time per step, all threads: steadier than wall time on a loaded machine
    return f"{side['cpu_ms_per_step']:.1f}" if "cpu_ms_per_step" in side else "-"
print(f"MiniResNet [$WIDTHS] ($LABEL, {ours['parameters']:,} parameters), batch {ours['batch']}, "
      f"${IN_CHANNELS}x${IMAGE_SIZE}x${IMAGE_SIZE} synthetic, fp32 SGD, {ours['threads']} threads, "
      f"$STEPS timed steps after $WARMUP warm-up")
print("""$machine""")
print()
print("| engine | images/s | median step (ms) | CPU time per step (ms, all threads) |")
print("| --- | ---: | ---: | ---: |")
print(f"| cudagrad | {ours['images_per_s']:.1f} | {ours['median_step_ms']:.1f} | {cpu(ours)} |")
print(f"| PyTorch | {theirs['images_per_s']:.1f} | {theirs['median_step_ms']:.1f} | {cpu(theirs)} |")
print()
print(f"ratio cudagrad / PyTorch (images/s): {ours['images_per_s'] / theirs['images_per_s']:.2f}x")
PY
) || exit 1
echo
echo "$table"
# The table and a bar chart of it: with --save in bench/results/, else in cpu_compare_out/.
if ((SAVE)); then
  mkdir -p "$ROOT/bench/results"
  # The network and thread count are in the name: same-day runs of the presets at 1 and 2 threads
  # do not overwrite each other.
  out="$ROOT/bench/results/cpu_compare_$(date +%Y-%m-%d)_${LABEL}_${THREADS}t.md"
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
