#!/usr/bin/env bash
# Fails unless `ctest -L gpu` selects every GPU test: the GoogleTest cases of the executables built
# from tests/**/cuda/*_test.cpp and tests/gpu/**/*_test.cpp (each executable lists its own cases,
# TEST_P instances included), with at least one case per TEST/TEST_F written in those files.
# A GPU stage that selected fewer would report success on tests it never ran.
# Usage: scripts/check_gpu_labels.sh [BUILD_DIR]   (default: build). Run by CTest as gpu_labels.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD=${1:-${BUILD_DIR:-build}}
[ -d "$BUILD/tests" ] || { echo "check_gpu_labels: no $BUILD/tests; build first" >&2; exit 2; }

status=0
written=0 listed=0 files=0
while IFS= read -r src; do
  rel=${src#tests/}
  dir=$(dirname "$rel")
  name=$(basename "$rel" .cpp)
  exe="$BUILD/tests/${dir//\//_}_$name"
  files=$((files + 1))
  # TEST( and TEST_F( at the start of a line: each is one case at least.
  in_source=$(grep -cE '^[[:space:]]*TEST(_F)?\(' "$src")
  if [ ! -x "$exe" ]; then
    echo "check_gpu_labels: $src has no executable $exe" >&2
    status=1
    continue
  fi
  # Case lines of --gtest_list_tests start with two spaces; suite lines do not.
  in_binary=$("$exe" --gtest_list_tests 2>/dev/null | grep -c '^  ')
  if [ "$in_binary" -lt "$in_source" ]; then
    echo "check_gpu_labels: $exe lists $in_binary cases, $src defines $in_source" >&2
    status=1
  fi
  written=$((written + in_source))
  listed=$((listed + in_binary))
done < <(find tests -name '*_test.cpp' \( -path 'tests/*/cuda/*' -o -path 'tests/cuda/*' -o -path 'tests/gpu/*' \) | sort)

selected=$(ctest --test-dir "$BUILD" -N -L '^gpu$' | sed -n 's/^Total Tests: //p')
selected=${selected:-0}
echo "GPU tests: $files files, $written TEST/TEST_F written, $listed cases in their executables, $selected selected by ctest -L gpu"
if [ "$listed" -eq 0 ] || [ "$selected" -lt "$listed" ]; then
  echo "check_gpu_labels: ctest -L gpu selects $selected of the $listed GPU test cases" \
       "(see the label logic in tests/CMakeLists.txt)" >&2
  status=1
fi
exit $status
