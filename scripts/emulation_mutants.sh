#!/usr/bin/env bash
# Shows that the emulated-GPU suite can fail: plants, one at a time, the bugs that only running a
# kernel shows (a tail bound off by one, a missing __syncthreads, a wrong shuffle offset, swapped
# WMMA layouts, a wrong vector width, a missing stream wait, a grid-stride loop that does not go
# round, a shuffle mask that leaves lanes out, a read-modify-write race on shared memory, a last-block
# reduction finishing early, unreset or in arrival order, an uncoalesced load, a grid that
# runs the tensor cores over zeros, a convolution phase's taps offset), rebuilds, runs the suite of
# scripts/test_emulated.sh, and prints which tests caught each. The source is restored after each
# mutant (and on any exit). Exit status 1 if some mutant survived.
# Usage: scripts/emulation_mutants.sh [--fast] [BUILD_DIR]   (default build-emu; made by
#        scripts/test_emulated.sh)
# --fast: each mutant runs only the tests of the code it changes (its last argument below) instead
#         of the whole emulated suite, and stops at the first that fails (so "caught by" names
#         the tests that failed before it stopped): every mutant kind in minutes, the form CI runs
#         (.ci/run).
# MUTANTS="name ...": only those (the names below).
set -euo pipefail
cd "$(dirname "$0")/.."
FAST=0
if [[ "${1:-}" == --fast ]]; then FAST=1; shift; fi
BUILD_DIR=${1:-build-emu}
LABELS="emulator|kernels_cuda|engine_cuda|data_cuda|dist_cuda|conformance_cuda"
[[ -d "$BUILD_DIR" ]] || { echo "emulation_mutants: no $BUILD_DIR; run scripts/test_emulated.sh first" >&2; exit 2; }

backup=""
# touch: the restored file must look newer than the objects built from the mutant.
restore() { if [[ -n "$backup" ]]; then mv "$backup" "${backup%.mutant-backup}"; touch "${backup%.mutant-backup}"; backup=""; fi; }
trap restore EXIT

survivors=0
# mutant NAME FILE OLD NEW TESTS: OLD must occur exactly once in FILE; TESTS is the ctest regex of
# the tests of the changed code (--fast runs only those).
mutant() {
  local name=$1 file=$2 old=$3 new=$4 tests=$5
  [[ -z "${MUTANTS:-}" || " $MUTANTS " == *" $name "* ]] || return 0
  cp "$file" "$file.mutant-backup"
  backup="$file.mutant-backup"
  OLD=$old NEW=$new python3 - "$file" <<'PY'
import os, sys
path, old, new = sys.argv[1], os.environ["OLD"], os.environ["NEW"]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"emulation_mutants: expected one '{old}' in {path}, found {text.count(old)}")
# Whole or not at all (a new file renamed over the old): a build running beside this one
# (.ci/run's fuzzing folder) never reads half a source.
open(path + ".mutant-new", "w").write(text.replace(old, new))
os.replace(path + ".mutant-new", path)
PY
  local t0=$SECONDS
  cmake --build "$BUILD_DIR" -j "$(nproc)" >/dev/null
  local log="$BUILD_DIR/mutant_${name}.log" select=()
  # --fast also stops at the first test that fails: one is enough to show the mutant is caught,
  # and the tests that would fail after it are the longest part of the stage (CI's time).
  [[ $FAST -eq 1 ]] && select=(-R "$tests" --stop-on-failure)
  ctest --test-dir "$BUILD_DIR" -L "$LABELS" "${select[@]}" -j "$(nproc)" >"$log" 2>&1 && passed=1 || passed=0
  # A regex that matches nothing would "survive" for the wrong reason; say so instead.
  if ! grep -qE '^[0-9]+% tests passed' "$log"; then
    echo "emulation_mutants: mutant $name ran no tests (regex '$tests')" >&2
    exit 2
  fi
  echo "mutant $name: $(grep -oE '[0-9]+ tests failed out of [0-9]+|100% tests passed, 0 tests failed out of [0-9]+' "$log" | tail -n 1), $((SECONDS - t0)) s"
  if [[ $passed -eq 1 ]]; then
    echo "mutant $name: SURVIVED (no test failed)"
    survivors=$((survivors + 1))
  else
    echo "mutant $name: caught by $(grep -cE '^\s+[0-9]+ - .*\((Failed|SEGFAULT|Subprocess aborted|Timeout|Exception)\)' "$log") test(s):"
    grep -E '^\s+[0-9]+ - .*\((Failed|SEGFAULT|Subprocess aborted|Timeout|Exception)\)' "$log" | sed 's/  # GetParam.*//' | head -n 6
  fi
  restore
}

mutant tail_bound kernels/cuda/linear_native.cu \
  "if (r < p.rows && col < p.cols) c[" "if (r < p.rows && col < p.cols - 1) c[" \
  "Linear"
mutant missing_syncthreads kernels/cuda/layout.cu \
  "    }
    __syncthreads();
    for (int k = threadIdx.y" "    }
    for (int k = threadIdx.y" \
  "Layout|ChannelsLast"
mutant shuffle_offset kernels/cuda/head.cu \
  "for (int offset = 16; offset > 0; offset /= 2) s += __shfl_xor_sync" \
  "for (int offset = 8; offset > 0; offset /= 2) s += __shfl_xor_sync" \
  "CudaHead|GpuPool"
mutant wmma_layouts kernels/cuda/conv_native_tiles.cuh \
  "std::conditional_t<kARowMajor, nvcuda::wmma::row_major, nvcuda::wmma::col_major>" \
  "std::conditional_t<kARowMajor, nvcuda::wmma::col_major, nvcuda::wmma::row_major>" \
  "CudaConvNative"
mutant batch_norm_vector_width kernels/cuda/batch_norm.cu \
  "launch_kernel(affine_kernel<T, V>, \"batch_norm affine kernel\", blocks, kThreads, 0, as_cuda(st), s, int(s.hw / V)," \
  "launch_kernel(affine_kernel<T, V>, \"batch_norm affine kernel\", blocks, kThreads, 0, as_cuda(st), s, int(s.hw / (2 * V))," \
  "CudaBatchNormDtype|GpuBatchNormModes"
# Batch norm's one-kernel reductions (kernels/cuda/batch_norm_parts.cuh, batch_norm_rows.cuh): the first
# block to arrive finishing instead of the last (before the others' partials are written); the
# arrival counters not zeroed before the gradient's kernel (the previous call left them at its
# block count); the last block adding the slices starting at its own (the order then follows
# which block arrives last: only float64 totals, with blocks run in reverse order, show it).
mutant batch_norm_first_arrival kernels/cuda/batch_norm_parts.cuh \
  "atomicAdd(counter, 1u) == unsigned(blocks - 1)" \
  "atomicAdd(counter, 1u) == 0u" \
  "CudaBatchNormTraining|CudaBatchNormDtype"
mutant batch_norm_counters_not_zeroed kernels/cuda/batch_norm.cu \
  "  zero_device(r.arrivals, r.arrival_bytes(), st);
  if (channels_last(s)) {
    launch_kernel(bn::grad_rows_kernel" \
  "  if (channels_last(s)) {
    launch_kernel(bn::grad_rows_kernel" \
  "CudaBatchNormTraining|CudaBatchNormDtype"
mutant batch_norm_arrival_order kernels/cuda/batch_norm_rows.cuh \
  "    const double2 totals = warp_sum_slices(partial + (first + i) * g.slices, g.slices);" \
  "    double2 totals = make_double2(0, 0);
    for (int z = 0; z < g.slices; ++z) {
      const double2 v = __ldcg(partial + (first + i) * g.slices + (z + int(blockIdx.y)) % g.slices);
      totals.x += v.x;
      totals.y += v.y;
    }" \
  "CudaBatchNormDtype"
mutant missing_stream_wait engine/stream.cpp \
  "if (handle_ && stream.device().is_cuda()) cu::stream_wait_event" \
  "if (false && handle_ && stream.device().is_cuda()) cu::stream_wait_event" \
  "Stream|CudaDdp|CudaComm|Feeder|CudaGraph"
# The scalar elementwise path without its grid-stride loop: only a launch with more elements than
# one grid covers shows it (tests/kernels/cuda/elementwise_test.cpp, kPastOneGrid).
mutant grid_stride_wrap kernels/cuda/elementwise.cu \
  "i < n; i += int64_t(gridDim.x) * blockDim.x)
    apply_at<op>" \
  "i < n; i += n)
    apply_at<op>" \
  "CudaElementwise"
# The overflow flag of a block set by a plain read-modify-write instead of an atomic: right in every
# order the emulator could run the threads in, a race on a device; the shared-memory check sees it
# when two threads of a block meet an inf (emulator/shared_checker.h).
mutant read_modify_write_race kernels/cuda/optim.cu \
  "if (bad) atomicOr(&bad_in_block, 1);" \
  "if (bad) bad_in_block |= 1;" \
  "LossScale|CudaOptim|CudaAmp"
# A warp sum whose mask leaves out half the warp: the emulator faults the lanes outside it (on a
# device, undefined: the sum happens to come out right).
mutant shuffle_mask kernels/cuda/head.cu \
  "s += __shfl_xor_sync(0xffffffffu, s, offset)" \
  "s += __shfl_xor_sync(0x0000ffffu, s, offset)" \
  "CudaHead|GpuPool"
# Channels-last batch norm's affine pass reading x one element at a time instead of a 16-byte
# vector: the same results, an eighth of each sector used; the emulated GPU's traffic count sees it
# (cg_emu/traffic.h, tests/kernels/cuda/batch_norm_traffic_test.cpp).
mutant scalar_loads kernels/cuda/batch_norm_rows.cuh \
  "        load_raw<V>(x + r * channels + at.first_channel, item.v);" \
  "        for (int k = 0; k < V; ++k) item.v[k] = x[r * channels + at.first_channel + k];" \
  "BatchNormTraffic"
# Native backward-data with each phase's grid as large as the whole image: the extra blocks find
# no pixel and write nothing, so the results are right, but they run the tensor cores over zeros,
# 4x the useful work at stride 2; the emulated GPU's WMMA count sees it
# (tests/kernels/cuda/conv_native_traffic_test.cpp).
mutant phase_grid kernels/cuda/conv_native_backward.cu \
  "launch_tiles<T>(p, int64_t(d.n) * f.rows * f.cols, d.ci" \
  "launch_tiles<T>(p, int64_t(d.n) * d.h * d.w, d.ci" \
  "ConvNativeWork"
# A phase's first input row as C++'s remainder leaves it, negative where the padding exceeds the
# phase's offset: each pixel meets the taps of another.
mutant phase_offset kernels/cuda/conv_native_backward.cu \
  "first = ((p - d.pad) % d.stride + d.stride) % d.stride;" \
  "first = (p - d.pad) % d.stride;" \
  "CudaConvNative"

cmake --build "$BUILD_DIR" -j "$(nproc)" >/dev/null  # leave the build as the source is
echo "emulation_mutants: $survivors survivor(s)"
[[ $survivors -eq 0 ]]
