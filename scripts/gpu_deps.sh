#!/usr/bin/env bash
# The GPU machines of the device tool have CUDA, CMake and PyTorch but none of the Debian
# libraries cudagrad builds with, no apt and no network. This script carries them there:
#   scripts/gpu_deps.sh pack     here: download the .deb files into .deps/debs and copy
#                                Fashion-MNIST into .data/fashion-mnist (both git-ignored);
#                                then name .deps and .data in the device call's `carry`
#   scripts/gpu_deps.sh unpack   there: extract them under .deps/root (not into /, where they
#                                could shadow the image's own libraries)
#   source scripts/gpu_deps.sh env   there: CMAKE_PREFIX_PATH and LD_LIBRARY_PATH for .deps/root
#   scripts/gpu_deps.sh list     the packages (scripts/gpu_rehearsal.sh hides them)
# scripts/gpu_check.sh runs `unpack` and `env` itself when .deps/debs exists.
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS=${GPU_DEPS_DIR:-$ROOT/.deps}  # GPU_DEPS_DIR: elsewhere (the unpack test uses it)
# Headers, CMake configs and the shared libraries they need at run time (Debian 12 names).
PACKAGES=(libeigen3-dev libyaml-cpp-dev libyaml-cpp0.7 libgtest-dev libgmock-dev zlib1g-dev libcli11-dev
          nlohmann-json3-dev libfmt-dev libfmt9 libgloo-dev libgloo0 libhiredis-dev libhiredis0.14
          libibverbs-dev libibverbs1 libnl-3-200 libnl-route-3-200)

pack() {
  rm -rf "$DEPS/root"  # unpacked here by a local check: it would only fill the carry (64 MiB)
  mkdir -p "$DEPS/debs" "$ROOT/.data"
  (cd "$DEPS/debs" && apt-get download "${PACKAGES[@]}") || { echo "gpu_deps: apt-get download failed" >&2; return 1; }
  cp -r /usr/share/datasets/fashion-mnist "$ROOT/.data/" 2>/dev/null ||
    echo "gpu_deps: no /usr/share/datasets/fashion-mnist (install dataset-fashion-mnist) - training stage will lack data" >&2
  du -sh "$DEPS/debs" "$ROOT/.data" 2>/dev/null
  echo "carry: [\".deps\", \".data\"]"
}

# A .deb is an ar archive whose data.tar.* holds the files. Without dpkg-deb (an image that is not
# Debian-based; GPU_DEPS_NO_DPKG=1 forces this path, for the test) Python reads it.
extract_deb() {
  if command -v dpkg-deb > /dev/null && [ -z "${GPU_DEPS_NO_DPKG:-}" ]; then
    dpkg-deb -x "$1" "$2"
    return
  fi
  python3 - "$1" "$2" <<'PY'
import io, sys, tarfile
deb, dest = sys.argv[1], sys.argv[2]
with open(deb, "rb") as f:
    blob = f.read()
if not blob.startswith(b"!<arch>\n"):
    sys.exit(f"gpu_deps: {deb} is not a .deb (no ar header)")
pos = 8
while pos + 60 <= len(blob):
    name = blob[pos:pos + 16].decode().strip().rstrip("/")
    size = int(blob[pos + 48:pos + 58].decode().strip())
    if name.startswith("data.tar"):
        with tarfile.open(fileobj=io.BytesIO(blob[pos + 60:pos + 60 + size])) as tar:
            if hasattr(tarfile, "tar_filter"):
                tar.extractall(dest, filter="tar")
            else:
                tar.extractall(dest)
        break
    pos += 60 + size + (size & 1)
else:
    sys.exit(f"gpu_deps: {deb} holds no data.tar")
PY
}

unpack() {
  [ -d "$DEPS/debs" ] || { echo "gpu_deps: no $DEPS/debs (run 'pack' where apt works, and carry .deps)" >&2; return 1; }
  # Afresh every time: a root unpacked elsewhere (carried in by mistake) holds that machine's paths.
  rm -rf "$DEPS/root" && mkdir -p "$DEPS/root"
  for deb in "$DEPS"/debs/*.deb; do extract_deb "$deb" "$DEPS/root" || return 1; done
  # Debian's Gloo import file names its library by absolute path (/usr/lib/libgloo.so.0.5.0),
  # which does not exist there: point such paths into .deps/root, else CMake refuses the target.
  local targets
  targets=$(grep -rl --include='*Targets-*.cmake' '"/usr/' "$DEPS/root" 2>/dev/null)
  for f in $targets; do sed -i "s#\"/usr/#\"$DEPS/root/usr/#g" "$f" || return 1; done
  local debs=("$DEPS"/debs/*.deb)
  echo "gpu_deps: ${#debs[@]} packages under $DEPS/root"
}

env_vars() {
  local arch_lib="$DEPS/root/usr/lib/x86_64-linux-gnu"
  export CMAKE_PREFIX_PATH="$DEPS/root/usr:$arch_lib/cmake:$DEPS/root/usr/share/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  # Most libraries sit in the multiarch folder, libgloo in usr/lib, and libnl-3 (which libibverbs
  # needs, through Gloo) in /lib's multiarch folder, outside /usr.
  export LD_LIBRARY_PATH="$arch_lib:$DEPS/root/usr/lib:$DEPS/root/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

case "${1:-}" in
  list) printf '%s\n' "${PACKAGES[@]}" ;;
  pack) pack ;;
  unpack) unpack ;;
  env) env_vars ;;
  *) echo "usage: scripts/gpu_deps.sh pack|unpack|env|list" >&2; [ "${BASH_SOURCE[0]}" = "$0" ] && exit 2 ;;
esac
