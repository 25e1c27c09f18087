#!/usr/bin/env bash
# Usage: bench/store_rendezvous.sh [--build DIR] [--ranks "256 1024"] [--nofile 1024] [--runs 1]
#
# The rendezvous store at scale (issue 26), both sides in one run: build/bench/store_rendezvous_bench
# (our TcpStore) and bench/pytorch/store_rendezvous.py (torch.distributed.TCPStore), the same
# workload with the same number of forked ranks on loopback, at each --ranks, then again with the
# soft RLIMIT_NOFILE lowered to --nofile (what a stock system gives; 0 leaves it out). Prints one
# markdown table under the machine line.
# As root, both run in a network namespace of their own with only loopback: PyTorch's client
# looks up its peer's host name on connect, and where no DNS server answers (this machine), that
# costs 5 s a rank; in the namespace the lookup fails at once. Ours makes no lookup.
set -euo pipefail
NAME=store_rendezvous.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/compare_common.sh
source "$ROOT/bench/compare_common.sh"

BUILD=build RANKS="256 1024" NOFILE=1024 RUNS=1
while (($#)); do
  case $1 in
    --build) BUILD=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --nofile) NOFILE=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage_die "unknown argument $1" ;;
  esac
done
BUILD=$(resolve_build "$BUILD")
BENCH=$BUILD/bench/store_rendezvous_bench
require_binary "$BENCH" store_rendezvous_bench
require_torch >&2 || true  # its last test (is it the venv?) may be false
TORCH=${TORCH_PYTHONS[0]}

# Runs a command line in a loopback-only network namespace when it can, else as it is.
isolated() {
  if [[ $(id -u) == 0 ]] && command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    unshare -n bash -c 'ip link set lo up && "$@"' _ "$@"
  else
    "$@"
  fi
}
NETNS="own network namespace (loopback only)"
[[ $(id -u) == 0 ]] && unshare -n true 2>/dev/null || NETNS="host network (PyTorch's reverse DNS lookups may stall)"

# One benchmark run: its result line, or a line saying it failed to produce one.
one() {  # one LABEL CMD...
  local out
  out=$(isolated timeout 200 "${@:2}" 2>/tmp/store_rendezvous.$$.err | tail -1) || true
  [[ $out == *time_s=* ]] || out="$1 ranks=? time_s=none"  # no result line: see the run by hand
  echo "$out"
}

LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)  # other work on the machine; the ranks themselves load it later
rows=()
for n in $RANKS; do
  for limit in 0 $NOFILE; do
    [[ $limit == 0 || $limit -le $n ]] || continue  # a limit that does not bite is no case
    for ((i = 0; i < RUNS; i++)); do
      rows+=("nofile=${limit/#0/-} $(one cudagrad "$BENCH" "$n" "$limit")")
      rows+=("nofile=${limit/#0/-} $(one pytorch "$TORCH" "$ROOT/bench/pytorch/store_rendezvous.py" "$n" "$limit")")
    done
  done
done
rm -f /tmp/store_rendezvous.$$.err

cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
echo "# store_rendezvous, $(date -u '+%Y-%m-%d %H:%M UTC'), cudagrad $(git -C "$ROOT" rev-parse --short=12 HEAD)," \
  "$cpu, $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GB, load average $LOAD_START before, $(cut -d' ' -f1-3 /proc/loadavg) after," \
  "Linux $(uname -r), RLIMIT_NOFILE $(ulimit -Sn)/$(ulimit -Hn), somaxconn $(cat /proc/sys/net/core/somaxconn)," \
  "PyTorch $("$TORCH" -c 'import torch; print(torch.__version__)') ($TORCH), $NETNS"
echo
echo "Ranks are forked processes on loopback; time: releasing them to the last one done; fds, threads:"
echo "peak of the store's process; RSS before the store, VmHWM after; ranks CPU: all ranks' CPU time."
echo
echo "| store | ranks | soft nofile | time (s) | peak fds | peak threads | RSS before (MB) | VmHWM (MB) | failed ranks | ranks CPU (s) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for row in "${rows[@]}"; do
  awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
         printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $2, v["ranks"], v["nofile"], v["time_s"],
                v["peak_fds"], v["peak_threads"], v["rss_before_mb"], v["vmhwm_mb"], v["failures"], v["ranks_cpu_s"] }' \
    <<<"$row"
done
