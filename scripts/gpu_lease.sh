#!/usr/bin/env bash
# One device call of a short GPU lease (bench/NOTES.md, "The GPU lease"): the stages of
# scripts/gpu_check.sh in the order that proves most first, each capped so the whole ends within
# LEASE_SECONDS, and the logs copied into the device tool's $OUT at the end, whatever failed.
#   call 1: scripts/gpu_lease.sh env build test train throughput
#   call 2: scripts/gpu_lease.sh sanitize|accuracy|...   (same warm machine: build-gpu is kept)
#   GPU_TEST_REGEX=... scripts/gpu_lease.sh env build test throughput   (a fresh machine, after fixes)
# Set LEASE_COMMIT=$(git rev-parse --short HEAD) in the command: the machine has no .git.
# Before it, here: scripts/gpu_deps.sh pack; carry [".deps", ".data"].
# 12 GPU tests at a time: at 8 the 531 took 150 s on the H100 (each a process whose start, the
# CUDA context and cuDNN's libraries, dominates); the timing-sensitive ones run alone anyway.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export JOBS=${JOBS:-$(nproc)} GPU_TEST_JOBS=${GPU_TEST_JOBS:-12} CPU_TESTS=${CPU_TESTS:-0}
LOGS=gpu_check_out
end=$((SECONDS + ${LEASE_SECONDS:-550}))
# run_capped CAP COMMAND...: at most CAP seconds, and never past the lease's end.
run_capped() {
  local cap=$1 left=$((end - SECONDS))
  shift
  if [ "$left" -lt 15 ]; then echo "lease: no time left for: $*"; return 1; fi
  [ "$cap" -lt "$left" ] || cap=$left
  timeout -k 5 "$cap" "$@" || echo "lease: '$*' ended with $? (124: stopped at $cap s)"
}
for stage in "$@"; do
  case "$stage" in
    env) run_capped 40 scripts/gpu_check.sh env ;;
    build) run_capped 300 scripts/gpu_check.sh build ;;
    test) run_capped 210 scripts/gpu_check.sh test ;;
    train) run_capped 180 scripts/gpu_check.sh train ;;
    sanitize) run_capped 600 scripts/gpu_check.sh sanitize ;;
    timeline) run_capped 200 scripts/gpu_check.sh timeline ;;
    kernels) run_capped 120 scripts/gpu_check.sh bench ;;
    throughput | accuracy)
      run_capped 600 env COMPARE_MODES="$stage" \
        THROUGHPUT_ARGS="${THROUGHPUT_ARGS:---variants eager,channels-last,compile-channels-last --steps 100}" \
        TTA_VARIANTS="${TTA_VARIANTS:-channels-last}" scripts/gpu_check.sh compare
      # Each mode starts compare.md afresh: keep each mode's tables.
      cp "$LOGS/compare.log" "$LOGS/compare_$stage.log"
      cp "$LOGS/compare.md" "$LOGS/compare_$stage.md" 2>/dev/null ;;
    *) echo "lease: unknown stage '$stage'" ;;
  esac
done
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/logs.tgz" --exclude='*.png' "$LOGS"
  # The lease's record so far (bench/results/gpu_<date>_<time>.json once committed; the commit is
  # filled in here, where git is: scripts/lease_record.py --commit SHA ... on the returned logs).
  python3 scripts/lease_record.py --commit "${LEASE_COMMIT:-unknown}" --out "$OUT/lease_record" "$LOGS" > /dev/null ||
    echo "lease: no record (scripts/lease_record.py failed)"
  cp "$LOGS/summary.md" "$OUT/" 2>/dev/null
  cp "$LOGS"/compare_*.md "$LOGS/throughput.png" "$OUT/" 2>/dev/null
fi
cat "$LOGS/summary.md" 2>/dev/null
cat "$LOGS"/compare_*.md 2>/dev/null
