#!/usr/bin/env bash
# CPU training throughput, cudagrad vs PyTorch at its best: the same MiniResNet, batch, synthetic
# data, recipe and thread count; PyTorch in each of its variants (eager NCHW, eager channels-last,
# torch.compile NCHW, torch.compile channels-last; compiled during warm-up, compile time reported
# apart), and cudagrad set against the fastest of them. Sides alternate, round after round
# (cudagrad, the PyTorch variants, cudagrad, ...), so that a shared machine's drifting load falls on
# both. PyTorch is bench/pytorch/venv.sh's venv when it is there, plus Debian's 1.13 (eager) as a
# second row where installed; PYTHON=... runs that interpreter alone. Prints a table of images/s
# (median of the rounds), CPU time per step and compile time, the ratio to the fastest PyTorch and
# the machine it ran on, and draws it as a bar chart (cpu_compare_out/cpu_compare.png, beside
# results.jsonl, every side's JSON line); --save writes the table and the chart to bench/results/
# instead. Exits 2 on a bad command line, 1 (saying why) if a side is missing or fails, if the two
# sides built networks of different sizes, or if the PyTorch variants disagree on the step-0 loss.
# Usage: bench/cpu_compare.sh [BUILD_DIR] [--net full|narrow] [--threads N] [--steps S] [--warmup W]
#        [--rounds R] [--variants LIST] [--batch-size B] [--widths 64,128,256] [--in-channels C]
#        [--image-size S] [--save]
#   --net full (default): the full MiniResNet, widths 64,128,256, 3x32x32 images, batch 64.
#   --net narrow: scripts/train.sh's Fashion-MNIST network, widths 16,32,64, 1x28x28, batch 64 (as
#     configs/fashion_mnist_cpu.yaml trains it; --batch-size 128 gives the earlier preset).
#   --widths, --in-channels, --image-size, --batch-size override the preset's value.
#   --steps S, --warmup W: timed and untimed steps of each side in each round (default 20, 3; a
#     compiled variant warms up at least 2 steps, the first one compiling).
#   --rounds R: how many times the sides alternate (default 2).
#   --variants LIST: PyTorch's variants (default eager,channels-last,compile,compile-channels-last).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=cpu_compare
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

BUILD=build THREADS=$(nproc) STEPS=20 WARMUP=3 ROUNDS=2 VARIANTS=$ALL_VARIANTS NET=full SAVE=0
BATCH="" WIDTHS="" IN_CHANNELS="" IMAGE_SIZE=""  # "" = the preset's
while (($#)); do
  case "$1" in
    --build|--net|--threads|--steps|--warmup|--rounds|--variants|--batch-size|--widths|--in-channels|--image-size)
      (($# >= 2)) || usage_die "$1 needs a value"
      case "$1" in
        --build) BUILD=$2 ;; --net) NET=$2 ;; --threads) THREADS=$2 ;; --steps) STEPS=$2 ;;
        --warmup) WARMUP=$2 ;; --rounds) ROUNDS=$2 ;; --variants) VARIANTS=$2 ;;
        --batch-size) BATCH=$2 ;; --widths) WIDTHS=$2 ;;
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
  narrow) preset=("16,32,64" 1 28 64) ;;
  *) usage_die "--net must be full or narrow, got '$NET'" ;;
esac
LABEL=$NET
[[ -n $WIDTHS$IN_CHANNELS$IMAGE_SIZE$BATCH ]] && LABEL=custom
WIDTHS=${WIDTHS:-${preset[0]}} IN_CHANNELS=${IN_CHANNELS:-${preset[1]}}
IMAGE_SIZE=${IMAGE_SIZE:-${preset[2]}} BATCH=${BATCH:-${preset[3]}}
[[ $LABEL == custom && $WIDTHS,$IN_CHANNELS,$IMAGE_SIZE,$BATCH == "$(IFS=,; echo "${preset[*]}")" ]] && LABEL=$NET
for v in THREADS STEPS ROUNDS BATCH IN_CHANNELS IMAGE_SIZE; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || usage_die "$v must be a positive whole number, got '${!v}'"
done
[[ $WARMUP =~ ^[0-9]+$ ]] || usage_die "WARMUP must be a whole number, got '$WARMUP'"
[[ $WIDTHS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || usage_die "widths must look like 64,128,256, got '$WIDTHS'"
check_variants "$VARIANTS"

BUILD=$(resolve_build "$BUILD")
BIN="$BUILD/apps/cudagrad-bench-cpu"
require_binary "$BIN" cudagrad-bench-cpu
require_torch

args=(--batch-size "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS"
      --widths "$WIDTHS" --in-channels "$IN_CHANNELS" --image-size "$IMAGE_SIZE")
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

OUT_DIR=cpu_compare_out
mkdir -p "$OUT_DIR" || die "cannot create $OUT_DIR"
RESULTS="$OUT_DIR/results.jsonl"
: > "$RESULTS"
# Each interpreter's variants, worked out once: "PYTHON VARIANT" a line.
runs=()
for py in "${TORCH_PYTHONS[@]}"; do
  while read -r v; do runs+=("$py $v"); done < <(torch_variants "$py" "$VARIANTS")
done
((${#runs[@]})) || die "no PyTorch variant to run (--variants $VARIANTS)"

# run NAME ROUND COMMAND...: runs one side, shows its output, appends its last JSON line, tagged
# with the round, to $RESULTS.
run() {
  local name=$1 round=$2 output rc json
  shift 2
  echo "== $name, round $round of $ROUNDS: $*"
  output=$("$@" 2>&1)
  rc=$?
  printf '%s\n' "$output" | sed 's/^/   /'
  ((rc == 0)) || die "$name benchmark failed (exit $rc)"
  json=$(printf '%s\n' "$output" | grep '^{' | tail -n 1)
  [[ -n $json ]] || die "$name benchmark printed no JSON result line"
  echo "{\"round\": $round, ${json#\{}" >> "$RESULTS"
}
for ((round = 1; round <= ROUNDS; ++round)); do
  run cudagrad "$round" "$BIN" "${args[@]}"
  for r in "${runs[@]}"; do
    run "pytorch ${r#* }" "$round" "${r%% *}" "$ROOT/bench/pytorch/train_throughput.py" "${args[@]}" --variant "${r#* }"
  done
done

machine=$(machine_line "$load_before" "$BIN")
table=$("$TOOL_PYTHON" - "$RESULTS" "$OUT_DIR/bars.txt" <<PY
import json, re, statistics, sys
def fail(why):
    sys.exit(f"cpu_compare: error: {why}")
try:
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    for r in rows:
        float(r["images_per_s"]), float(r["median_step_ms"]), int(r["threads"]), int(r["batch"])
except (OSError, ValueError, KeyError, TypeError) as e:
    fail(f"unreadable result line ({e!r}) in {sys.argv[1]}")
ours = [r for r in rows if r["engine"] != "pytorch"]
theirs = [r for r in rows if r["engine"] == "pytorch"]
if len({(r["threads"], r["batch"]) for r in rows}) != 1:
    fail(f"the sides ran different settings: {sorted({(r['engine'], r['threads'], r['batch']) for r in rows})}")
if len({r.get("parameters") for r in rows}) != 1:
    fail(f"the networks differ: cudagrad has {ours[0].get('parameters')} parameters, PyTorch "
         f"{sorted({r.get('parameters') for r in theirs})}")
# Same seed, same batch: every PyTorch variant and version must see the same step-0 loss; one that
# does not computes another model (or another layout of the same data by mistake).
ref = theirs[0]["loss0"]
for r in theirs:
    if abs(r["loss0"] - ref) > 1e-4 * abs(ref):
        fail(f"PyTorch {r['version']} {r['variant']}: step-0 loss {r['loss0']}, {theirs[0]['variant']} gave {ref}")
LABELS = {"eager": "eager NCHW", "channels-last": "eager channels-last", "compile": "compile NCHW",
          "compile-channels-last": "compile channels-last"}
groups = {"cudagrad": ours}
for r in theirs:
    groups.setdefault(f"PyTorch {r['version']} {LABELS[r['variant']]}", []).append(r)
def med(name, key):
    values = [r[key] for r in groups[name] if r.get(key) is not None]
    return statistics.median(values) if values else None
names = [n for n in groups if n != "cudagrad"]
best = max(names, key=lambda n: med(n, "images_per_s"))
def per_round(name, key="images_per_s"):
    return {r["round"]: r[key] for r in groups[name]}
def ratio(name):  # cudagrad / that side, round by round (paired: the same minute's load), median
    ours_r, theirs_r = per_round("cudagrad"), per_round(name)
    return [ours_r[k] / theirs_r[k] for k in sorted(ours_r) if k in theirs_r]
def cell(value, fmt="{:.1f}"):
    return "-" if value is None else fmt.format(value)
rounds = $ROUNDS
print(f"MiniResNet [$WIDTHS] ($LABEL, {ours[0]['parameters']:,} parameters), batch {ours[0]['batch']}, "
      f"${IN_CHANNELS}x${IMAGE_SIZE}x${IMAGE_SIZE} synthetic, fp32 SGD, {ours[0]['threads']} threads, "
      f"$STEPS timed steps after $WARMUP warm-up, {rounds} round{'s' if rounds > 1 else ''}, the sides alternating")
print("""$machine""")
print()
print("| engine | images/s (median of rounds) | images/s per round | median step (ms) | "
      "CPU time per step (ms, all threads) | compile (s, untimed) | cudagrad / this (images/s) |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
for n in groups:
    each = ", ".join(f"{v:.1f}" for _, v in sorted(per_round(n).items()))
    mark = " (fastest PyTorch)" if n == best else ""
    print(f"| {n}{mark} | {med(n, 'images_per_s'):.1f} | {each} | {med(n, 'median_step_ms'):.1f} | "
          f"{cell(med(n, 'cpu_ms_per_step'))} | {cell(med(n, 'compile_s'))} | "
          f"{'-' if n == 'cudagrad' else f'{statistics.median(ratio(n)):.2f}x'} |")
print()
if any(r.get("recompiled_in_timed_window") for r in theirs):
    print("warning: torch.compile recompiled inside a timed window (see the logs above)")
rs = ratio(best)
each = f" (median of the rounds' {', '.join(f'{x:.2f}x' for x in rs)})" if rounds > 1 else ""
print(f"ratio cudagrad / fastest PyTorch ({best}), images/s: {statistics.median(rs):.2f}x{each}")
with open(sys.argv[2], "w") as f:  # the chart's bars, NAME=VALUE a line, short names (no wheel tag)
    for n in groups:
        short = re.sub(r"^PyTorch ([^ +]+)[^ ]* ", r"torch \\1 ", n)
        f.write(f"{short}={med(n, 'images_per_s')}\\n")
PY
) || exit 1
echo
echo "$table"
# The table and a bar chart of it: with --save in bench/results/, else in cpu_compare_out/.
if ((SAVE)); then
  mkdir -p "$ROOT/bench/results"
  # The time, the network and the thread count are in the name: a later run never overwrites a
  # saved table (one named by the date alone once replaced the morning's committed results).
  out="$(result_stem cpu_compare "_${LABEL}_${THREADS}t").md"
  echo "$table" > "$out" || die "cannot write $out"
  echo "saved $out"
  chart=${out%.md}.png
else
  chart=$OUT_DIR/cpu_compare.png
fi
mapfile -t bars < "$OUT_DIR/bars.txt"
"$TOOL_PYTHON" "$ROOT/scripts/plot_bars.py" -o "$chart" --ylabel "images/s (higher is better)" \
  --title "MiniResNet [$WIDTHS] CPU training, batch $BATCH, $THREADS threads" "${bars[@]}" \
  || echo "cpu_compare: no chart (see above); the table stands" >&2
