#!/usr/bin/env bash
# cudagrad against PyTorch on the same GPU, in one run.
#   scripts/gpu_compare.sh [throughput] [accuracy]      (default: both)
# throughput: cudagrad-bench on configs/bench_gpu.yaml (cuDNN and native convolutions, CUDA graph)
#   and bench/pytorch/gpu_throughput.py in each of PyTorch's variants (eager NCHW, eager
#   channels-last, torch.compile NCHW and channels-last, torch.compile max-autotune with CUDA
#   graphs; compiled during warm-up): images/s, peak memory, compile time, and each cudagrad row
#   against the fastest PyTorch.
# accuracy: wall-clock time from process start to 93% Fashion-MNIST test accuracy, cudagrad-train
#   (configs/fashion_mnist.yaml) against bench/pytorch/time_to_accuracy.py with the same recipe, once
#   per variant of TTA_VARIANTS (a compiled one's compilation is taken out of its time, shown apart).
# Environment: BUILD_DIR (default build-gpu), OUT_DIR (default gpu_compare_out), PYTHON (python3),
# FMNIST (the Fashion-MNIST folder, default /usr/share/datasets/fashion-mnist or .data/fashion-mnist),
# THROUGHPUT_ARGS / TTA_ARGS (extra arguments of the two PyTorch scripts, e.g. "--steps 500" or
# "--variants eager,compile"), TTA_VARIANTS (default channels-last,compile-channels-last).
# Writes $OUT_DIR/compare.md (the tables), throughput.png (the images/s as bars) and, beside them,
# the raw JSON lines and every log.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD_DIR:-build-gpu}
OUT=${OUT_DIR:-gpu_compare_out}
PYTHON=${PYTHON:-python3}
FMNIST=${FMNIST:-/usr/share/datasets/fashion-mnist}
[ -d "$FMNIST" ] || FMNIST=.data/fashion-mnist
THROUGHPUT_ARGS=${THROUGHPUT_ARGS:-}
TTA_ARGS=${TTA_ARGS:-}
TTA_VARIANTS=${TTA_VARIANTS:-channels-last,compile-channels-last}
# A result is a JSON line with a "bench" key anywhere: cudagrad-bench sorts its keys ({"amp": ...
# comes first), PyTorch's scripts do not.
RESULT_LINE='^\{.*"bench": ?"'
mkdir -p "$OUT"
: > "$OUT/compare.md"
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
  [ -x "$bench" ] || echo "warning: $bench is missing (build it: scripts/build.sh); PyTorch only" >&2
  : > "$raw"
  # cudnn: bench_gpu.yaml as it is (channels-last), eager; +nchw: the same in NCHW, to measure what
  # channels-last brings; +graph: the step replayed as a CUDA graph (what train.cuda_graph=auto,
  # the default, does).
  for variant in cudnn native cudnn+nchw cudnn+graph; do
    [ -x "$bench" ] || break
    local conv=${variant%%+*} graph=train.cuda_graph=false layout=""
    [ "$variant" = cudnn+graph ] && graph=--cuda-graph
    # The implicit-GEMM convolution reads NCHW only.
    [ "$conv" = native ] || [ "$variant" = cudnn+nchw ] && layout=model.channels_last=false
    # shellcheck disable=SC2086
    "$bench" --config configs/bench_gpu.yaml $graph kernels.conv="$conv" $layout 2>&1 | tee "$OUT/cudagrad_$variant.log" \
      | grep -E "$RESULT_LINE" | sed "s/^{/{\"conv\": \"$variant\", /" >> "$raw"
  done
  # shellcheck disable=SC2086
  "$PYTHON" bench/pytorch/gpu_throughput.py $THROUGHPUT_ARGS 2>&1 | tee "$OUT/pytorch.log" | grep -E "$RESULT_LINE" >> "$raw"
  {
    echo "## MiniResNet training throughput, batch 256, fp16 AMP, 32x32x3 ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "device, driver: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
    echo
    "$PYTHON" - "$raw" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ours = [r for r in rows if r["bench"] == "cudagrad"]
theirs = [r for r in rows if r["bench"] == "pytorch"]
ok = [r for r in theirs if "error" not in r]
if ours:
    print(f"cudagrad: {ours[0].get('cuda')}, cuDNN {ours[0].get('cudnn')}")
if ok:
    print(f"PyTorch {ok[0]['torch']}: CUDA {ok[0]['cuda']}, cuDNN {ok[0]['cudnn']}")
print()
print("| engine | images/s (median step) | images/s (wall) | median step ms | peak MiB |")
print("| --- | --- | --- | --- | --- |")
def name(r):
    return f"cudagrad (conv {r['conv']})" if r["bench"] == "cudagrad" else f"PyTorch {r.get('variant', r['mode'])}"
def wall(r):
    return f"{r['images_per_s_wall']:.0f}" if "images_per_s_wall" in r else "-"
for r in rows:
    if "error" in r:
        print(f"| {name(r)} | failed: {r['error'][:100]} | | | |")
        continue
    print(f"| {name(r)} | {r['images_per_s']:.0f} | {wall(r)} | {r['step_ms_median']:.2f} | "
          f"{r['peak_mem_bytes'] / 2**20:.0f} |")
print()
best = max(ok, key=lambda t: t["images_per_s"]) if ok else None
for o in ours if best else []:
    print(f"- cudagrad (conv {o['conv']}) / fastest PyTorch ({name(best)}): "
          f"{o['images_per_s'] / best['images_per_s']:.2f}x images/s, "
          f"{o['peak_mem_bytes'] / max(best['peak_mem_bytes'], 1):.2f}x peak memory")
for t in ok:
    if t.get("compile_s") is not None:
        print(f"- {name(t)}: compiled in {t['compile_s']:.1f} s (warm-up, untimed)"
              f"{'; recompiled inside the timed window' if t.get('recompiled_in_timed_window') else ''}")
# The same model in every variant: the first step's loss agrees up to fp16 autocast's rounding.
if ok and any(abs(t["loss0"] - ok[0]["loss0"]) > 1e-2 * abs(ok[0]["loss0"]) for t in ok if "loss0" in t):
    print("- warning: PyTorch's variants disagree on the first step's loss: "
          + ", ".join(f"{t['mode']} {t.get('loss0')}" for t in ok))
for o in ours:
    if not o.get("cuda_graph"):
        print(f"- cudagrad step phases, conv {o['conv']} (median ms): forward {o['forward_ms']:.2f}, "
              f"backward {o['backward_ms']:.2f}, exposed comm {o['comm_exposed_ms']:.2f}, "
              f"optimizer {o['optimizer_ms']:.2f}")
if not ours:
    print("- cudagrad-bench gave no result: see cudagrad_*.log")
PY
  } >> "$OUT/compare.md"
  cat "$OUT/compare.md"
  # The images/s column as a bar chart beside compare.md (skipped, saying so, without matplotlib).
  local bars
  mapfile -t bars < <("$PYTHON" - "$raw" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        if "error" not in r:
            name = f"cudagrad {r['conv']}" if r["bench"] == "cudagrad" else f"PyTorch {r['mode']}"
            print(f"{name}={r['images_per_s']:.1f}")
PY
)
  if [ ${#bars[@]} -gt 0 ]; then
    "$PYTHON" scripts/plot_bars.py -o "$OUT/throughput.png" --ylabel "images/s (higher is better)" \
      --title "MiniResNet training throughput, batch 256, fp16 AMP" "${bars[@]}" \
      || echo "gpu_compare: no chart; the table stands" >&2
  fi
}

# Runs a command, its output to a log; prints the seconds the whole process took (outside view).
timed() {
  local log=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  "$@" > "$log" 2>&1
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.1f", $2 - $1}'
}

accuracy() {
  local run="$OUT/tta_run" ours_s theirs_s
  rm -rf "$run"
  : > "$OUT/tta.jsonl"
  ours_s=$(timed "$OUT/cudagrad_tta.log" "$BUILD/apps/cudagrad-train" --config configs/fashion_mnist.yaml \
    data.path="$FMNIST" train.target_accuracy=0.93 output.dir="$run")
  grep '"target_reached"' "$run/metrics.jsonl" > "$OUT/tta.jsonl" 2>/dev/null \
    || echo '{"bench": "cudagrad", "reached": false}' > "$OUT/tta.jsonl"
  cp "$run/metrics.jsonl" "$OUT/cudagrad_tta_metrics.jsonl" 2>/dev/null
  # One run per variant; "VARIANT=SECONDS" (seen from outside) for the table.
  local theirs_s=() v
  for v in ${TTA_VARIANTS//,/ }; do
    # shellcheck disable=SC2086
    theirs_s+=("$v=$(timed "$OUT/pytorch_tta_$v.log" "$PYTHON" bench/pytorch/time_to_accuracy.py --data "$FMNIST" \
      --variant "$v" $TTA_ARGS)")
    grep -E "$RESULT_LINE" "$OUT/pytorch_tta_$v.log" >> "$OUT/tta.jsonl" \
      || echo "{\"bench\": \"pytorch\", \"variant\": \"$v\", \"reached\": false}" >> "$OUT/tta.jsonl"
  done
  {
    echo
    echo "## Time to 93% Fashion-MNIST test accuracy, configs/fashion_mnist.yaml ($(date -u '+%Y-%m-%d %H:%M UTC'))"
    echo
    echo "| engine | reached | seconds from process start (compile excluded) | compile (s) | whole process, outside view (s) | epoch | test accuracy |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    "$PYTHON" - "$OUT/tta.jsonl" "$ours_s" "${theirs_s[@]}" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
ours = next((j for j in lines if j.get("bench") != "pytorch"), {})
theirs = [j for j in lines if j.get("bench") == "pytorch"]
outside = dict(a.split("=", 1) for a in sys.argv[3:])
def row(who, j, outside):
    reached = j.get("event") == "target_reached" or j.get("reached") is True
    secs = j.get("seconds_since_start", j.get("seconds"))
    acc = j.get("accuracy")
    compiled = f"{j['compile_seconds']:.1f}" if j.get("compile_seconds") else "-"
    print(f"| {who} | {'yes' if reached else 'no'} | {secs:.1f} | {compiled} | {outside} | {j.get('epoch', '-')} | "
          f"{acc:.4f} |" if secs is not None and acc is not None else
          f"| {who} | {'yes' if reached else 'no'} | - | - | {outside} | - | - |")
row("cudagrad", ours, sys.argv[2])
for t in theirs:
    row(f"PyTorch {t.get('torch', '')} {t.get('variant', '')}", t, outside.get(t.get("variant"), "-"))
PY
  } >> "$OUT/compare.md"
  rm -rf "$run"  # its checkpoints are large; the metrics were copied above
  tail -n $((6 + $(tr ',' '\n' <<< "$TTA_VARIANTS" | wc -l))) "$OUT/compare.md"
}

for m in "${modes[@]}"; do
  case "$m" in
    throughput|accuracy) "$m" ;;
    *) echo "unknown mode '$m' (throughput, accuracy)" >&2; exit 2 ;;
  esac
done
