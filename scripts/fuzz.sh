#!/usr/bin/env bash
# Builds every libFuzzer target in fuzz/ (clang, CPU only, AddressSanitizer + UBSan, build-fuzz/)
# and runs each for SECONDS (default 20), starting from its committed seed corpus
# fuzz/corpus/<target>/ (new inputs go to build-fuzz/corpus/<target>/, not into the repository).
# Exits non-zero when any target crashes; the crashing input is left in build-fuzz/artifacts/ and
# should become a regression file in fuzz/regressions/<target>/ (the CTest test
# fuzz_regressions replays those).
#   scripts/fuzz.sh [SECONDS] [TARGET...]     e.g. scripts/fuzz.sh 60 fuzz_tcp_store
# Environment: FUZZ_NO_BUILD=1 (run what is built: lets two runs go side by side), BUILD_ONLY=1 (build,
# then stop: .ci/run builds ahead this way while earlier stages test), JOBS (build parallelism,
# default all cores), CXX (default clang++-14 or clang++).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
shift || true
JOBS=${JOBS:-$(nproc)}
BUILD_DIR=${BUILD_DIR:-build-fuzz}
CXX=${CXX:-$(command -v clang++-14 || command -v clang++)}
flags="-O1 -g1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
configure() {
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$CXX" \
  -DCUDAGRAD_CUDA=OFF -DCUDAGRAD_BUILD_TESTS=OFF -DCUDAGRAD_BUILD_FUZZERS=ON \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$flags" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" >/dev/null
}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for src in fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  configure
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}"
fi
if [[ "${BUILD_ONLY:-0}" == 1 ]]; then exit 0; fi

# Inputs bigger than this teach little: a CIFAR-10 record is 3073 bytes, a checkpoint header of a
# tiny model a few hundred.
max_len=16384
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
failed=()
for t in "${targets[@]}"; do
  work="$BUILD_DIR/corpus/$t" artifacts="$BUILD_DIR/artifacts/$t"
  mkdir -p "$work" "$artifacts" fuzz/corpus/"$t"
  log="$BUILD_DIR/$t.log"
  echo "== $t: ${seconds}s"
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=(-dict="fuzz/$t.dict")  # tokens the input format is made of
  if "$BUILD_DIR/fuzz/$t" "${dict[@]}" -max_total_time="$seconds" -max_len=$max_len -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "fuzz/corpus/$t" >"$log" 2>&1; then
    # The last progress line (#execs, cov, ft, corpus) and the final execution count.
    grep -E '^#[0-9]+' "$log" | tail -n 1 || true
    grep -E 'stat::number_of_executed_units' "$log" || true
  else
    echo "!! $t crashed; the input is in $artifacts/; the log says:"
    tail -n 40 "$log"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzzing found crashes in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzzing: ${#targets[@]} targets, ${seconds}s each, no crash"
