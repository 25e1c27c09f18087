#!/usr/bin/env bash
# A long two-rank CPU training run with each rank's resident memory sampled (issue 26, "a long
# run"): cudagrad-launch runs 2 ranks of configs/fashion_mnist_cpu.yaml at a constant learning
# rate for --epochs epochs, saving a checkpoint every epoch, while this script reads VmRSS of both
# ranks every --interval seconds. Then a short run of --short-epochs from the same seed trains the
# same steps (a constant rate makes the first epochs of both runs the same computation), and the
# checkpoints of the epochs they share must hold the same tensors, bit for bit.
# Prints the memory after the first epoch, at the end and the growth between (per rank), the
# checkpoint comparison, and draws the samples (long_run_out/memory.png). With --save: the table
# and the chart go to bench/results/long_run_memory_<date>_<HHMM>.{md,png} (UTC).
# Usage: bench/long_run_memory.sh [BUILD_DIR] [--epochs 40] [--short-epochs 2] [--interval 5]
#        [--bound-mib 8] [--save]
# Exit 1 when the growth after the first epoch exceeds --bound-mib on a rank, or a shared
# checkpoint differs.
set -euo pipefail
cd "$(dirname "$0")/.."
die() { echo "long_run_memory: error: $2" >&2; exit "$1"; }

BUILD=build epochs=40 short_epochs=2 interval=5 bound_mib=8 save=0
[[ $# -gt 0 && $1 != --* ]] && { BUILD=$1; shift; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --epochs) epochs=$2; shift 2 ;;
    --short-epochs) short_epochs=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --bound-mib) bound_mib=$2; shift 2 ;;
    --save) save=1; shift ;;
    *) die 2 "unknown option $1" ;;
  esac
done
(( short_epochs >= 1 && short_epochs < epochs )) || die 2 "need 1 <= --short-epochs < --epochs"
LAUNCH="$BUILD/apps/cudagrad-launch" TRAIN="$BUILD/apps/cudagrad-train"
[[ -x $LAUNCH && -x $TRAIN ]] || die 1 "build $BUILD first (cmake --build $BUILD)"

OUT=long_run_out
rm -rf "$OUT" && mkdir -p "$OUT"
# Constant rate: the short run's steps are then the long run's first steps exactly.
common=(--config configs/fashion_mnist_cpu.yaml sched.name=constant train.threads=1 checkpoint.save_every=1)

# rank_pids LAUNCHER_PID: the two trainer processes the launcher started.
rank_pids() { pgrep -P "$1" -f cudagrad-train | sort -n; }

sample() {  # launcher pid: "seconds rank0_kib rank1_kib checkpoints" lines until the launcher ends
  local launcher=$1 t0=$SECONDS pids
  while kill -0 "$launcher" 2>/dev/null; do
    mapfile -t pids < <(rank_pids "$launcher")
    if (( ${#pids[@]} == 2 )); then
      local rss=()
      for p in "${pids[@]}"; do rss+=("$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || echo 0)"); done
      echo "$((SECONDS - t0)) ${rss[0]} ${rss[1]} $(find "$OUT/long" -name 'epoch_*.safetensors' 2>/dev/null | wc -l)"
    fi
    sleep "$interval"
  done
}

echo "long_run_memory: $epochs epochs on 2 ranks (1 thread each), RSS every $interval s"
"$LAUNCH" --standalone --nproc-per-node 2 "$TRAIN" "${common[@]}" train.epochs="$epochs" \
  output.dir="$OUT/long" >"$OUT/long.log" 2>&1 &
launcher=$!
sample "$launcher" >"$OUT/rss.txt"
wait "$launcher" || die 1 "the long run failed (see $OUT/long.log)"
echo "long_run_memory: the short run, $short_epochs epochs"
"$LAUNCH" --standalone --nproc-per-node 2 "$TRAIN" "${common[@]}" train.epochs="$short_epochs" \
  output.dir="$OUT/short" >"$OUT/short.log" 2>&1 || die 1 "the short run failed (see $OUT/short.log)"

machine="$(date -u '+%Y-%m-%d %H:%M UTC'); $(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo | head -n 1) ($(nproc) CPUs); cudagrad $("$TRAIN" --version | head -n 1); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
args=("$OUT" --epochs "$epochs" --short-epochs "$short_epochs" --bound-mib "$bound_mib" --interval "$interval" --machine "$machine")
[[ $save == 1 ]] && args+=(--save "bench/results/long_run_memory_$(date -u +%F_%H%M)")
/usr/bin/python3 bench/long_run_memory.py "${args[@]}"
