#!/usr/bin/env bash
# Rehearses the GPU machine here, GPU aside: runs a command in a private mount namespace where
# every file of the Debian packages scripts/gpu_deps.sh carries is hidden (an overlay on /usr
# with a whiteout per file), as on the device tool's machines, which have none of them. What the
# build finds there, it found in the carried .deps alone. This is how the Gloo import path and
# the layering probes' include folders were caught before any lease (bench/NOTES.md).
# Needs root, unshare and overlayfs. Runs in a clone of the repo is wise: the check builds.
# Usage: scripts/gpu_rehearsal.sh [COMMAND]   (default: scripts/gpu_check.sh env build)
#   e.g. scripts/gpu_deps.sh pack && BUILD_DIR=/tmp/rehearsal scripts/gpu_rehearsal.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command=${1:-scripts/gpu_check.sh env build}
[ "$(id -u)" = 0 ] || { echo "gpu_rehearsal: needs root (mount namespaces)" >&2; exit 2; }
layer=$(mktemp -d /tmp/gpu_rehearsal.XXXXXX)
trap 'rm -rf "$layer"' EXIT
mkdir -p "$layer/up" "$layer/work"
hidden=0
for package in $(scripts/gpu_deps.sh list); do
  while read -r path; do
    [ -d "$path" ] && continue
    # Merged /usr: /lib/x86_64-linux-gnu/libnl-3.so.200 is /usr/lib/x86_64-linux-gnu/libnl-3.so.200.
    case "$path" in /lib/* | /bin/* | /sbin/*) path=/usr$path ;; esac
    case "$path" in /usr/share/doc/*) continue ;; /usr/*) ;; *) continue ;; esac
    mkdir -p "$layer/up/$(dirname "${path#/usr/}")"
    mknod "$layer/up/${path#/usr/}" c 0 0 && hidden=$((hidden + 1))
  done < <(dpkg -L "$package" 2> /dev/null)
done
echo "gpu_rehearsal: $hidden files of $(scripts/gpu_deps.sh list | wc -l) packages hidden; running: $command"
unshare --mount --propagation private bash -c \
  "mount -t overlay overlay -o lowerdir=/usr,upperdir=$layer/up,workdir=$layer/work /usr && $command"
