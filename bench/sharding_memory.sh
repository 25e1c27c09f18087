#!/usr/bin/env bash
# Usage: bench/sharding_memory.sh [--build DIR] [--ranks "1 2 4"] [--steps 6] [--widths "[64,128,256]"]
#
# What each dist.sharding strategy keeps on a rank, and what it costs in time (issue 39): the full
# MiniResNet (AdamW, so the optimizer state is twice the weights) trained a few steps on the CPU
# over Gloo through cudagrad-launch at each --ranks, every strategy, on synthetic
# Fashion-MNIST-sized data; hybrid_shard as two launchers ("nodes") of ranks/2 each. Prints one
# markdown table: rank 0's parameters, gradients and optimizer state held between steps (the
# trainer's end-of-run line), their sum against DDP's at the same ranks, the host caching
# allocator's peak bytes in use over the whole run (activations included), and the step time (the
# median of the logged windows but the first, from metrics.jsonl's images/s) against DDP's. Then
# the ring model's time for one step's collectives (dist.backend=modeled) per strategy at 8 GPUs
# over NVLink, and at 16 (two nodes: a flat InfiniBand ring, or hybrid_shard's two levels). Bytes do not depend on the machine's load; the step
# times do: run it on a quiet machine.
set -euo pipefail
NAME=sharding_memory.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

BUILD=build RANKS="1 2 4" STEPS=6 WIDTHS=""
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

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

common_args() {  # STRATEGY OUT -> the trainer's arguments
  local args=(train.device=cpu data.dataset=synthetic data.synthetic_size=2048 data.num_workers=0
              optim.name=adamw train.max_steps="$STEPS" train.epochs=1 train.threads=1 train.eval_batch_size=16
              train.log_interval=1 checkpoint.save_every=0 dist.sharding="$1" output.dir="$2")
  [[ -n $WIDTHS ]] && args+=(model.widths="$WIDTHS")
  printf '%s\n' "${args[@]}"
}

# run RANKS STRATEGY -> "params grads state peak_mib ms_per_step" from rank 0's log and metrics
run() {
  local ranks=$1 strategy=$2 out="$work/$1_$2" args
  mapfile -t args < <(common_args "$strategy" "$out")
  local train=("$BUILD/apps/cudagrad-train" "${args[@]}")
  if [[ $strategy == hybrid_shard ]]; then  # two "nodes" of ranks/2, as two launchers
    local port common
    port=$(free_port)
    common=(--nnodes 2 --nproc-per-node $((ranks / 2)) --master-addr 127.0.0.1 --master-port "$port")
    "$BUILD/apps/cudagrad-launch" "${common[@]}" --node-rank 1 "${train[@]}" > "$out.node1.log" 2>&1 &
    local node1=$!
    "$BUILD/apps/cudagrad-launch" "${common[@]}" --node-rank 0 "${train[@]}" > "$out.log" 2>&1 ||
      die "$strategy at $ranks ranks failed; its log: $(tail -5 "$out.log")"
    wait "$node1" || die "$strategy at $ranks ranks: node 1 failed; its log: $(tail -5 "$out.node1.log")"
  else
    local cmd=("${train[@]}")
    ((ranks > 1)) && cmd=("$BUILD/apps/cudagrad-launch" --standalone --nproc-per-node "$ranks" "${cmd[@]}")
    "${cmd[@]}" > "$out.log" 2>&1 || die "$strategy at $ranks ranks failed; its log: $(tail -5 "$out.log")"
  fi
  local held peak ms
  held=$(grep -oE 'holds [0-9]+ bytes of parameters, [0-9]+ of gradients, [0-9]+ of optimizer state' "$out.log" |
         head -1 | grep -oE '[0-9]+' | tr '\n' ' ')
  peak=$(grep -oE 'cpu memory: [0-9.]+ MiB in use, peak [0-9.]+ MiB' "$out.log" | head -1 | grep -oE '[0-9.]+' | tail -1)
  [[ -n $held && -n $peak ]] || die "no memory lines in the log of $strategy at $ranks ranks"
  # The global batch over the median window's images/s (the first window, warm-up, left out).
  ms=$(python3 -c '
import json, statistics, sys
ips = [r["images_per_s"] for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"][1:]
print("%.1f" % (1000 * 64 * int(sys.argv[2]) / statistics.median(ips)) if ips else "-")' "$out/metrics.jsonl" "$ranks")
  echo "$held$peak $ms"
}

# modeled STRATEGY GPUS LINK [SETTING...] -> the ring model's ms for one step's collectives
# (hybrid_shard: nodes of 8 on NVLink, InfiniBand across them, whatever LINK says)
modeled() {
  local out="$work/modeled_$1_$2_$3${4:+_${4//[^a-z0-9]/}}" args
  mapfile -t args < <(common_args "$1" "$out")
  "$BUILD/apps/cudagrad-train" "${args[@]}" dist.backend=modeled dist.modeled_world_size="$2" dist.modeled_link="$3" \
    train.max_steps=1 "${@:4}" > "$out.log" 2>&1 || die "$1 on the modeled ring failed; its log: $(tail -5 "$out.log")"
  grep -oE "the ring model's time for one step's collectives: [0-9.]+ ms" "$out.log" | grep -oE '[0-9.]+' | tail -1
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); commit $(git -C "$ROOT" rev-parse --short HEAD); $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "| dist.sharding | ranks | parameters MiB | gradients MiB | optimizer state MiB | sum MiB | of DDP's sum | peak in use MiB | ms per step | of DDP's step |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for ranks in $RANKS; do
  strategies="no_shard optimizer shard_grad_op full_shard"
  ((ranks == 1)) && strategies="no_shard"
  ((ranks >= 4 && ranks % 2 == 0)) && strategies+=" hybrid_shard"
  ddp_sum="" ddp_ms=""
  for s in $strategies; do
    read -r p g st peak ms <<< "$(run "$ranks" "$s")"
    sum=$((p + g + st))
    [[ -z $ddp_sum ]] && ddp_sum=$sum ddp_ms=$ms
    share=$(awk -v a="$sum" -v b="$ddp_sum" 'BEGIN { printf "%.3f", a / b }')
    slower=$(awk -v a="$ms" -v b="$ddp_ms" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
    echo "| $s | $ranks | $(mib "$p") | $(mib "$g") | $(mib "$st") | $(mib "$sum") | $share | $peak | $ms | $slower |"
  done
done
echo
echo "The ring model (dist.backend=modeled), one step's collectives if none overlapped compute: 8 GPUs of one"
echo "NVLink node, and 16 GPUs in two nodes (a flat ring over InfiniBand, or hybrid_shard's rings: 8 on NVLink"
echo "inside each node, then each shard's across the 2 nodes on InfiniBand):"
echo
echo "| dist.sharding | GPUs | link | modeled ms per step |"
echo "| --- | --- | --- | --- |"
for s in no_shard optimizer shard_grad_op full_shard; do echo "| $s | 8 | nvlink | $(modeled "$s" 8 nvlink) |"; done
echo "| full_shard, dist.param_dtype=bf16 (16-bit gathers) | 8 | nvlink | $(modeled full_shard 8 nvlink dist.param_dtype=bf16) |"
for s in no_shard full_shard; do echo "| $s | 16 | infiniband | $(modeled "$s" 16 infiniband) |"; done
echo "| hybrid_shard | 16 | 2 x 8 nvlink, infiniband across | $(modeled hybrid_shard 16 infiniband) |"
