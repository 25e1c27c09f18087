#!/usr/bin/env bash
# Prints one sha256 per CPU training variant: the final checkpoint and the metrics' losses of short
# runs on synthetic data, covering every path a refactor of the kernels, the step or data
# parallelism could change (each CPU convolution, SGD and AdamW, accumulation, channels-last,
# 2 ranks over Gloo with plain, ZeRO-1, compressed and SyncBatchNorm reduction, and a resume).
# A refactor that claims "bit-identical on the CPU" runs this before and after and diffs the two:
#   scripts/checkpoint_fingerprint.sh > before.txt   (on the old commit)
#   scripts/checkpoint_fingerprint.sh > after.txt && diff before.txt after.txt
# Environment: BUILD_DIR (default build), WORK (scratch folder, default a fresh temporary one).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/.."
BUILD_DIR=$(readlink -f "${BUILD_DIR:-build}")
TRAIN=$BUILD_DIR/apps/cudagrad-train
LAUNCH=$BUILD_DIR/apps/cudagrad-launch
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
# Output folders are relative to WORK: the checkpoint embeds the config, output.dir included, so
# two fingerprints from different folders must see the same relative names.
cd "$WORK"
[[ -x $TRAIN && -x $LAUNCH ]] || { echo "checkpoint_fingerprint: build $TRAIN and $LAUNCH first" >&2; exit 1; }

# Small enough for seconds per run, large enough that every layer, both block kinds and the
# Winograd-eligible widths (32+) take part.
COMMON=(data.dataset=synthetic data.synthetic_size=192 data.batch_size=16 data.num_workers=0
        data.image_size=16 model.widths=[16,32,32] model.blocks=[1,1,1] train.device=cpu
        train.threads=1 train.epochs=2 train.log_interval=1 train.eval_batch_size=64
        checkpoint.save_every=1 sched.name=cosine optim.lr=0.05)

# The fingerprint of a run: every checkpoint file's bytes and the loss and accuracy values of its
# metrics (timings and throughput vary run to run, so only these fields count).
fingerprint() {  # name, output dir
  local name=$1 dir=$2 sum
  sum=$( (find "$dir/checkpoints" -type f | sort | xargs cat;
          grep -oE '"(loss|train_loss|test_loss|accuracy|test_accuracy|lr|step|epoch)": *[^,}]+' \
            "$dir/metrics.jsonl") | sha256sum | cut -c1-16)
  printf '%-24s %s\n' "$name" "$sum"
}

one() {  # name, overrides...
  local name=$1 out=$1
  shift
  "$TRAIN" "${COMMON[@]}" output.dir="$out" "$@" >"$WORK/$name.log" 2>&1 ||
    { echo "checkpoint_fingerprint: $name failed, see $WORK/$name.log" >&2; exit 1; }
  fingerprint "$name" "$out"
}

two() {  # name, overrides... (2 ranks on this node over Gloo)
  local name=$1 out=$1
  shift
  "$LAUNCH" --standalone --nproc-per-node 2 "$TRAIN" "${COMMON[@]}" output.dir="$out" dist.backend=gloo "$@" \
    >"$WORK/$name.log" 2>&1 || { echo "checkpoint_fingerprint: $name failed, see $WORK/$name.log" >&2; exit 1; }
  fingerprint "$name" "$out"
}

one im2col kernels.cpu_conv=im2col
one winograd kernels.cpu_conv=winograd
one direct kernels.cpu_conv=direct
one adamw_accum kernels.cpu_conv=im2col optim.name=adamw optim.lr=0.002 train.grad_accum_steps=2
one channels_last kernels.cpu_conv=im2col model.channels_last=true
one nesterov_warmup kernels.cpu_conv=direct optim.nesterov=true sched.name=warmup_cosine sched.warmup_steps=5
two ddp kernels.cpu_conv=im2col
two ddp_zero kernels.cpu_conv=im2col optim.zero_sharding=true
two ddp_bf16 kernels.cpu_conv=im2col dist.grad_compression=bf16
two ddp_syncbn kernels.cpu_conv=im2col model.sync_batchnorm=true train.grad_accum_steps=2
# A resume: one epoch, then the second from its checkpoint into a fresh folder.
one resume_first kernels.cpu_conv=im2col train.epochs=1 >/dev/null
one resume kernels.cpu_conv=im2col checkpoint.resume_from=resume_first/checkpoints/last.safetensors
grep -q '"kind":"resume"' resume/metrics.jsonl ||
  { echo "checkpoint_fingerprint: the resume run did not resume, see $WORK/resume.log" >&2; exit 1; }
