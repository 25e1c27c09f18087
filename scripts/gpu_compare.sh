#!/usr/bin/env bash
# cudagrad against PyTorch on the same GPU, in one run (issue 5).
#   scripts/gpu_compare.sh [throughput] [accuracy]      (default: both)
# throughput: cudagrad-bench on configs/bench_gpu.yaml (cuDNN and native convolutions) and
#   bench/pytorch/gpu_throughput.py (eager and torch.compile): images/s, ratios, peak memory.
# accuracy: wall-clock time from process start to 93% Fashion-MNIST test accuracy, cudagrad-train
#   (configs/fashion_mnist.yaml) against bench/pytorch/time_to_accuracy.py with the same recipe.
# Environment: BUILD_DIR (default build-gpu), OUT_DIR (default gpu_compare_out), PYTHON (python3),
# FMNIST (the Fashion-MNIST folder, default /usr/share/datasets/fashion-mnist or .data/fashion-mnist).
# Writes $OUT_DIR/compare.md (the table) and the raw JSON lines beside it.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD_DIR:-build-gpu}
OUT=${OUT_DIR:-gpu_compare_out}
PYTHON=${PYTHON:-python3}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
[ -d "$FMNIST" ] || FMNIST=.data/fashion-mnist
mkdir -p "$OUT"
modes=("$@")
[ ${#modes[@]} -eq 0 ] && modes=(throughput accuracy)

json_field() {  # json_field FILE KEY [FILTER_KEY FILTER_VALUE]: a field of the matching JSON line
  "$PYTHON" - "$@" <<'PY'
import json, sys
path, key = sys.argv[1], sys.argv[2]
want = dict(zip(sys.argv[3::2], sys.argv[4::2]))
for line in open(path):
    line = line.strip()
    if not line.startswith("{"):
        continue
    j = json.loads(line)
    if all(str(j.get(k)) == v for k, v in want.items()):
        print(j.get(key, ""))
        break
PY
}

throughput() {
  local bench="$BUILD/apps/cudagrad-bench" raw="$OUT/throughput.jsonl"
  : > "$raw"
  for variant in cudnn native cudnn+graph; do
    local conv=${variant%+graph} graph=""
    [ "$variant" != "$conv" ] && graph=--cuda-graph
    # shellcheck disable=SC2086
    "$bench" --config configs/bench_gpu.yaml $graph kernels.conv="$conv" 2>&1 | tee "$OUT/cudagrad_$variant.log" \
      | grep '^{' | sed "s/^{/{\"conv\": \"$variant\", /" >> "$raw"
  done
  "$PYTHON" bench/pytorch/gpu_throughput.py 2>&1 | tee "$OUT/pytorch.log" | grep '^{' >> "$raw"
  {
    echo "## MiniResNet training throughput, batch 256, fp16 AMP, 32x32x3 ($(date -I))"
    echo
    echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null)"
    echo "cudagrad: $(json_field "$raw" cuda bench cudagrad), cuDNN $(json_field "$raw" cudnn bench cudagrad); " \
         "PyTorch $(json_field "$raw" torch bench pytorch), CUDA $(json_field "$raw" cuda bench pytorch), cuDNN $(json_field "$raw" cudnn bench pytorch)"
    echo
    echo "| engine | images/s | median step ms | peak MiB |"
    echo "| --- | --- | --- | --- |"
    "$PYTHON" - "$raw" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def name(r):
    return f"cudagrad (conv {r['conv']})" if r["bench"] == "cudagrad" else f"PyTorch {r['mode']}"
for r in rows:
    print(f"| {name(r)} | {r['images_per_s']:.0f} | {r['step_ms_median']:.2f} | {r['peak_mem_bytes'] / 2**20:.0f} |")
ours = [r for r in rows if r["bench"] == "cudagrad"]
theirs = {r["mode"]: r for r in rows if r["bench"] == "pytorch"}
if ours:
    best = max(ours, key=lambda r: r["images_per_s"])
    for mode, r in theirs.items():
        print(f"\ncudagrad (best) / PyTorch {mode}: {best['images_per_s'] / r['images_per_s']:.2f}x images/s, "
              f"peak memory {best['peak_mem_bytes'] / max(r['peak_mem_bytes'], 1):.2f}x")
    print(f"\ncudagrad step breakdown (ms, conv {best['conv']}): forward {best['forward_ms']:.2f}, "
          f"backward {best['backward_ms']:.2f}, exposed comm {best['comm_exposed_ms']:.2f}, "
          f"optimizer {best['optimizer_ms']:.2f}")
PY
  } > "$OUT/compare.md"
  cat "$OUT/compare.md"
}

accuracy() {
  local run="$OUT/tta_run"
  rm -rf "$run"
  "$BUILD/apps/cudagrad-train" --config configs/fashion_mnist.yaml data.path="$FMNIST" train.target_accuracy=0.93 \
    output.dir="$run" > "$OUT/cudagrad_tta.log" 2>&1
  grep '"target_reached"' "$run/metrics.jsonl" > "$OUT/tta.jsonl" 2>/dev/null || echo '{"bench": "cudagrad", "reached": false}' > "$OUT/tta.jsonl"
  "$PYTHON" bench/pytorch/time_to_accuracy.py --data "$FMNIST" 2> "$OUT/pytorch_tta.log" | grep '^{' >> "$OUT/tta.jsonl"
  {
    echo
    echo "## Time to 93% Fashion-MNIST test accuracy ($(date -I)), from process start"
    echo
    "$PYTHON" - "$OUT/tta.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    j = json.loads(line)
    who = "PyTorch " + j.get("torch", "") if j.get("bench") == "pytorch" else "cudagrad"
    if j.get("event") == "target_reached" or j.get("reached"):
        print(f"- {who}: {j['seconds_since_start' if 'seconds_since_start' in j else 'seconds']:.1f} s "
              f"(epoch {j.get('epoch')}, accuracy {j.get('accuracy'):.4f})")
    else:
        print(f"- {who}: target not reached ({j})")
PY
  } >> "$OUT/compare.md"
  rm -rf "$run"
  tail -n 4 "$OUT/compare.md"
}

for m in "${modes[@]}"; do
  case "$m" in
    throughput|accuracy) "$m" ;;
    *) echo "unknown mode '$m' (throughput, accuracy)" >&2; exit 2 ;;
  esac
done
