#!/usr/bin/env bash
# scripts/gpu_deps.sh unpack, on a package made here: a CMake import file's absolute /usr/ path
# (as Debian's Gloo has, /usr/lib/libgloo.so.0.5.0) is rewritten into the unpacked root, other
# files are left as they are, and a second unpack starts afresh (nothing left from before); with
# dpkg-deb and with the Python reader gpu_deps.sh falls back on where there is none.
# Usage: gpu_deps_unpack_test.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$1 work=$2
rm -rf "$work" && mkdir -p "$work/pkg/DEBIAN" "$work/pkg/usr/share/cmake/Fake" "$work/pkg/usr/lib" "$work/deps/debs"
cat > "$work/pkg/DEBIAN/control" <<'CONTROL'
Package: libfake-dev
Version: 1.0
Architecture: all
Maintainer: cudagrad tests <tests@example.invalid>
Description: a package for the gpu_deps unpack test
CONTROL
printf 'set_target_properties(fake PROPERTIES IMPORTED_LOCATION_RELEASE "/usr/lib/libfake.so.1")\n' \
  > "$work/pkg/usr/share/cmake/Fake/FakeTargets-release.cmake"
printf 'find_path(FAKE_INCLUDE fake.h HINTS "/usr/include")\n' > "$work/pkg/usr/share/cmake/Fake/FakeConfig.cmake"
: > "$work/pkg/usr/lib/libfake.so.1"
dpkg-deb --build --root-owner-group "$work/pkg" "$work/deps/debs/libfake-dev_1.0_all.deb" > /dev/null

fail() { echo "FAIL: $*" >&2; exit 1; }
# Both ways of reading a .deb: dpkg-deb, and the Python reader used where there is none.
for no_dpkg in "" 1; do
  GPU_DEPS_NO_DPKG=$no_dpkg GPU_DEPS_DIR="$work/deps" "$src/scripts/gpu_deps.sh" unpack
  root="$work/deps/root"
  [ -f "$root/usr/lib/libfake.so.1" ] || fail "the package's files were not extracted"
  grep -qF "\"$root/usr/lib/libfake.so.1\"" "$root/usr/share/cmake/Fake/FakeTargets-release.cmake" ||
    fail "the import file still names $(grep -o '"[^"]*"' "$root/usr/share/cmake/Fake/FakeTargets-release.cmake")"
  grep -qF 'HINTS "/usr/include"' "$root/usr/share/cmake/Fake/FakeConfig.cmake" || fail "a file other than an import file changed"
  touch "$root/stale"
  GPU_DEPS_NO_DPKG=$no_dpkg GPU_DEPS_DIR="$work/deps" "$src/scripts/gpu_deps.sh" unpack
  [ ! -e "$root/stale" ] || fail "a second unpack kept a file from before"
done
echo "gpu_deps unpack: ok"
