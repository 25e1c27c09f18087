#!/usr/bin/env bash
# Usage: bench/sharding_memory.sh [--build DIR] [--ranks "1 2 4"] [--steps 4] [--widths "[64,128,256]"]
#
# What each dist.sharding strategy keeps on a rank (issue 39): the full MiniResNet (AdamW, so the
# optimizer state is twice the weights) trained a few steps on the CPU over Gloo through
# cudagrad-launch at each --ranks, every strategy, on synthetic Fashion-MNIST-sized data. Prints
# one markdown table: rank 0's parameters, gradients and optimizer state held between steps (the
# trainer's end-of-run line), their sum against DDP's at the same ranks, and the host caching
# allocator's peak bytes in use over the whole run (activations included). Bytes, not time: the
# machine's load does not change them.
set -euo pipefail
NAME=sharding_memory.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

BUILD=build RANKS="1 2 4" STEPS=4 WIDTHS=""
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --widths) WIDTHS=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage_die "unknown argument $1" ;;
  esac
done
BUILD=$(resolve_build "$BUILD")
require_binary "$BUILD/apps/cudagrad-train" cudagrad-train
require_binary "$BUILD/apps/cudagrad-launch" cudagrad-launch

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }

# run RANKS STRATEGY -> "params grads state peak_mib" from rank 0's log
run() {
  local ranks=$1 strategy=$2 out="$work/$1_$2"
  local args=(train.device=cpu data.dataset=synthetic data.synthetic_size=2048 data.num_workers=0
              optim.name=adamw train.max_steps="$STEPS" train.epochs=1 train.threads=1 train.eval_batch_size=16
              checkpoint.save_every=0 dist.sharding="$strategy" output.dir="$out")
  [[ -n $WIDTHS ]] && args+=(model.widths="$WIDTHS")
  local cmd=("$BUILD/apps/cudagrad-train" "${args[@]}")
  ((ranks > 1)) && cmd=("$BUILD/apps/cudagrad-launch" --standalone --nproc-per-node "$ranks" "${cmd[@]}")
  "${cmd[@]}" > "$out.log" 2>&1 || die "$strategy at $ranks ranks failed; its log: $(tail -5 "$out.log")"
  local held peak
  held=$(grep -oE 'holds [0-9]+ bytes of parameters, [0-9]+ of gradients, [0-9]+ of optimizer state' "$out.log" |
         head -1 | grep -oE '[0-9]+' | tr '\n' ' ')
  peak=$(grep -oE 'cpu memory: [0-9.]+ MiB in use, peak [0-9.]+ MiB' "$out.log" | head -1 | grep -oE '[0-9.]+' | tail -1)
  [[ -n $held && -n $peak ]] || die "no memory lines in the log of $strategy at $ranks ranks"
  echo "$held$peak"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); commit $(git -C "$ROOT" rev-parse --short HEAD); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| dist.sharding | ranks | parameters MiB | gradients MiB | optimizer state MiB | sum MiB | of DDP's sum | peak in use MiB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for ranks in $RANKS; do
  strategies="no_shard optimizer shard_grad_op full_shard"
  ((ranks == 1)) && strategies="no_shard"
  ddp_sum=""
  for s in $strategies; do
    read -r p g st peak <<< "$(run "$ranks" "$s")"
    sum=$((p + g + st))
    [[ -z $ddp_sum ]] && ddp_sum=$sum
    share=$(awk -v a="$sum" -v b="$ddp_sum" 'BEGIN { printf "%.3f", a / b }')
    echo "| $s | $ranks | $(mib "$p") | $(mib "$g") | $(mib "$st") | $(mib "$sum") | $share | $peak |"
  done
done
