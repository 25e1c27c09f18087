#!/usr/bin/env bash
# The machine's limit for a MiniResNet training step (issue 28, item 3): measures the whole step
# of cudagrad (cudagrad-bench-cpu) and of PyTorch (bench/pytorch/train_throughput.py, eager, each
# interpreter compare_common.sh finds), then runs step_bound_bench, which measures the peaks,
# times cudagrad's convolutions layer by layer and prints every pass's bound beside them, and
# draws each measured time's share of its bound as a bar chart (scripts/plot_bars.py).
# Everything goes to step_bound_out/ (step_bound.md, step_bound.png); --save writes them to
# bench/results/step_bound_<date>_<HHMM>_<net>_<threads>t.{md,png} (UTC) instead. Both networks on 1x28x28
# images at batch 64 (configs/fashion_mnist_cpu.yaml's batch).
# Usage: bench/step_bound.sh [BUILD_DIR] [--net full|narrow] [--threads N] [--steps S] [--warmup W]
#        [--runs R] [--gemm-gflops G] [--label TEXT] [--save]
#   --net full (default): widths 64,128,256; narrow: 16,32,64 (scripts/train.sh's network).
#   --threads N: threads of every side, and the cores whose peak the bound assumes (default: all).
#   --steps S, --warmup W: timed and untimed whole steps of each engine (default 20, 3).
#   --runs R: timed runs of each convolution phase in step_bound_bench (default 5).
#   --gemm-gflops G: the GEMM's best GFLOP/s a core, a second, reachable bound; auto: measure it
#     (bench/cpu_gemm_bench, one pinned thread, --runs runs a shape; the best shape's figure).
#   --label TEXT: put in the saved file's first line (e.g. "smoke run, loaded machine").
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=step_bound
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

BUILD=build NET=full THREADS=$(nproc) STEPS=20 WARMUP=3 RUNS=5 GEMM="" LABEL="" SAVE=0
while (($#)); do
  case "$1" in
    --net|--threads|--steps|--warmup|--runs|--gemm-gflops|--label)
      (($# >= 2)) || usage_die "$1 needs a value"
      case "$1" in
        --net) NET=$2 ;; --threads) THREADS=$2 ;; --steps) STEPS=$2 ;; --warmup) WARMUP=$2 ;;
        --runs) RUNS=$2 ;; --gemm-gflops) GEMM=$2 ;; --label) LABEL=$2 ;;
      esac
      shift 2 ;;
    --save) SAVE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; usage_die "unknown option $1" ;;
    *) BUILD=$1; shift ;;
  esac
done
case "$NET" in
  full) WIDTHS=64,128,256 ;;
  narrow) WIDTHS=16,32,64 ;;
  *) usage_die "--net must be full or narrow, got '$NET'" ;;
esac
BUILD=$(resolve_build "$BUILD")
CUDAGRAD="$BUILD/apps/cudagrad-bench-cpu" BOUND="$BUILD/bench/step_bound_bench"
require_binary "$CUDAGRAD" cudagrad-bench-cpu
require_binary "$BOUND" step_bound_bench
require_torch
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
SHAPE=(--widths "$WIDTHS" --in-channels 1 --image-size 28 --batch-size 64 --threads "$THREADS"
       --steps "$STEPS" --warmup "$WARMUP")

median_ms() { tail -n 1 | "$TOOL_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["median_step_ms"])'; }

steps=()
ms=$("$CUDAGRAD" "${SHAPE[@]}" | median_ms) || die "cudagrad-bench-cpu failed"
steps+=(--step "cudagrad=$ms")
for py in "${TORCH_PYTHONS[@]}"; do
  version=$("$py" -c 'import torch; print(torch.__version__.split("+")[0])')
  ms=$("$py" "$ROOT/bench/pytorch/train_throughput.py" "${SHAPE[@]}" --variant eager | median_ms) \
    || die "train_throughput.py ($py) failed"
  steps+=(--step "torch $version eager=$ms")
done

OUT="$ROOT/step_bound_out" stem=step_bound
if ((SAVE)); then OUT="$ROOT/bench/results" stem=$(basename "$(result_stem step_bound "_${NET}_${THREADS}t")"); fi
mkdir -p "$OUT"
bars=$(mktemp)
trap 'rm -f "$bars"' EXIT
extra=() asked_gemm=$GEMM
if [[ $GEMM == auto ]]; then
  require_binary "$BUILD/bench/cpu_gemm_bench" cpu_gemm_bench
  GEMM=$(OMP_NUM_THREADS=1 taskset -c "$(($(nproc) - 1))" "$BUILD/bench/cpu_gemm_bench" "$RUNS" \
    | awk -F'|' '/^\| (full|narrow) / { if ($8 + 0 > best) best = $8 + 0 } END { print best }')
  [[ -n $GEMM && $GEMM != 0 ]] || die "cpu_gemm_bench gave no GFLOP/s"
fi
[[ -n $GEMM ]] && extra=(--gemm-gflops "$GEMM")
{
  echo "# step_bound, $NET network${LABEL:+, $LABEL}: $(machine_line "$LOAD" "$CUDAGRAD")"
  echo
  echo "Command: bench/step_bound.sh --net $NET --threads $THREADS --steps $STEPS --warmup $WARMUP --runs $RUNS${asked_gemm:+ --gemm-gflops $asked_gemm}${LABEL:+ --label \"$LABEL\"}"
  echo "Percentages: bound / measured (100% = the machine's limit)."
  echo
  "$BOUND" --net "$NET" --threads "$THREADS" --runs "$RUNS" "${steps[@]}" "${extra[@]}" --bars "$bars" \
    || die "step_bound_bench failed"
} | tee "$OUT/$stem.md"
mapfile -t bar_args < "$bars"
"$TOOL_PYTHON" "$ROOT/scripts/plot_bars.py" -o "$OUT/$stem.png" --ylabel "% of the bound (higher is better)" \
  --title "MiniResNet $NET, batch 64, $THREADS threads: measured time's share of the machine's limit${LABEL:+ ($LABEL)}" \
  "${bar_args[@]}"
