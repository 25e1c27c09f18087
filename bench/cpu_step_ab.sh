#!/usr/bin/env bash
# Two builds of cudagrad, the same training step, run after run in turn (A, B, A, B, ...): the
# comparison a CPU kernel change needs on a shared machine, whose speed moves by 10-50% within
# minutes (bench/NOTES.md, "The bound's two modes"). Each round runs cudagrad-bench-cpu once from
# each build; the table gives every round's median step in ms, B / A per round, and the medians.
# Timings from runs minutes apart, or from one build alone, say little here.
# Usage: bench/cpu_step_ab.sh BUILD_A BUILD_B [--net full|narrow] [--rounds N] [--threads N]
#        [--steps S] [--warmup W] [--label TEXT] [--save]
#   BUILD_A, BUILD_B: build directories with apps/cudagrad-bench-cpu (e.g. a git worktree of the
#     base commit built with `cmake --build <dir> --target cudagrad-bench-cpu`, and build).
#   --net full (default): widths 64,128,256; narrow: 16,32,64 (scripts/train.sh's network); both
#     on 1x28x28 images at batch 64.
#   --rounds N: pairs of runs (default 5). --threads N: OpenMP threads (default: all cores).
#   --steps S, --warmup W: timed and untimed steps of each run (default 12 and 2 full, 20 and 3
#     narrow).
#   --label TEXT: put in the table's first line. --save: write the table to
#     bench/results/cpu_step_ab_<date>_<HHMM>_<net>.md as well (-2, -3, ... after the time for a
#     second run in the same minute).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
NAME=cpu_step_ab
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

builds=() NET=full ROUNDS=5 THREADS=$(nproc) STEPS="" WARMUP="" LABEL="" SAVE=0
while (($#)); do
  case "$1" in
    --net|--rounds|--threads|--steps|--warmup|--label)
      (($# >= 2)) || usage_die "$1 needs a value"
      case "$1" in
        --net) NET=$2 ;; --rounds) ROUNDS=$2 ;; --threads) THREADS=$2 ;; --steps) STEPS=$2 ;;
        --warmup) WARMUP=$2 ;; --label) LABEL=$2 ;;
      esac
      shift 2 ;;
    --save) SAVE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; usage_die "unknown option $1" ;;
    *) builds+=("$1"); shift ;;
  esac
done
((${#builds[@]} == 2)) || usage_die "give two build directories, BUILD_A and BUILD_B (got ${#builds[@]})"
for n in "$ROUNDS" "$THREADS" "${STEPS:-1}" "${WARMUP:-0}"; do
  [[ $n =~ ^[0-9]+$ ]] || usage_die "--rounds, --threads, --steps and --warmup take whole numbers, got '$n'"
done
((ROUNDS >= 1 && THREADS >= 1)) || usage_die "--rounds and --threads must be at least 1"
case "$NET" in
  full) WIDTHS=64,128,256 STEPS=${STEPS:-12} WARMUP=${WARMUP:-2} ;;
  narrow) WIDTHS=16,32,64 STEPS=${STEPS:-20} WARMUP=${WARMUP:-3} ;;
  *) usage_die "--net must be full or narrow, got '$NET'" ;;
esac
((STEPS >= 1)) || usage_die "--steps must be at least 1"
bins=()
for b in "${builds[@]}"; do
  dir=$(resolve_build "$b")
  require_binary "$dir/apps/cudagrad-bench-cpu" cudagrad-bench-cpu
  bins+=("$dir/apps/cudagrad-bench-cpu")
done
TORCH_PYTHONS=()  # machine_line names PyTorch's versions; none runs here
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
SHAPE=(--widths "$WIDTHS" --in-channels 1 --image-size 28 --batch-size 64 --threads "$THREADS"
       --steps "$STEPS" --warmup "$WARMUP")

# The median step of one run, in ms: the last line of cudagrad-bench-cpu is its JSON.
step_ms() {
  "$1" "${SHAPE[@]}" | tail -n 1 | "$TOOL_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["median_step_ms"])'
}

a_ms=() b_ms=()
for ((r = 1; r <= ROUNDS; r++)); do
  ms=$(step_ms "${bins[0]}") || die "cudagrad-bench-cpu of build A (${bins[0]}) failed"
  a_ms+=("$ms")
  ms=$(step_ms "${bins[1]}") || die "cudagrad-bench-cpu of build B (${bins[1]}) failed"
  b_ms+=("$ms")
done

table=$("$TOOL_PYTHON" - "$ROUNDS" "${a_ms[@]}" "${b_ms[@]}" <<'PY'
import statistics, sys
rounds = int(sys.argv[1])
a = [float(x) for x in sys.argv[2:2 + rounds]]
b = [float(x) for x in sys.argv[2 + rounds:2 + 2 * rounds]]
print("| round | A ms | B ms | B / A |")
print("| ---: | ---: | ---: | ---: |")
for i, (x, y) in enumerate(zip(a, b), 1):
    print(f"| {i} | {x:.2f} | {y:.2f} | {y / x:.3f} |")
ma, mb = statistics.median(a), statistics.median(b)
ratios = sorted(y / x for x, y in zip(a, b))
print(f"| median | {ma:.2f} | {mb:.2f} | {mb / ma:.3f} |")
print()
print(f"Medians: A {ma:.2f} ms, B {mb:.2f} ms: B takes {100 * (mb / ma - 1):+.1f}% against A. "
      f"Round by round B / A runs from {ratios[0]:.3f} to {ratios[-1]:.3f}; "
      f"B was faster in {sum(r < 1 for r in ratios)} of {rounds} rounds.")
PY
) || die "could not make the table"

OUT=""
if ((SAVE)); then
  mkdir -p "$ROOT/bench/results"
  OUT="$(result_stem cpu_step_ab "_${NET}").md"
fi
{
  echo "# cpu_step_ab, $NET network${LABEL:+, $LABEL}: $(machine_line "$LOAD" "${bins[1]}")"
  echo
  echo "Command: bench/cpu_step_ab.sh A B --net $NET --rounds $ROUNDS --threads $THREADS --steps $STEPS --warmup $WARMUP${LABEL:+ --label \"$LABEL\"}"
  echo "A: ${bins[0]} ($(binary_commit "${bins[0]}")); B: ${bins[1]} ($(binary_commit "${bins[1]}"))."
  echo "Each round runs A, then B; cudagrad-bench-cpu's median step of each run, ms."
  echo
  echo "$table"
} | if [[ -n $OUT ]]; then tee "$OUT"; else cat; fi
