# shellcheck shell=bash
# Shared by bench/cpu_compare.sh and bench/cpu_time_to_accuracy.sh (sourced, not run): errors with
# the right exit code, the build and PyTorch checks, and the machine/version line that every saved
# result carries. The caller sets NAME (its name in messages) and ROOT (the repository) first.

# Debian's torch loads only in the system interpreter; PYTHON may name another one that has torch.
PYTHON=${PYTHON:-/usr/bin/python3}

die() { echo "$NAME: error: $*" >&2; exit 1; }        # runtime: a missing build, tool or result
usage_die() { echo "$NAME: error: $*" >&2; exit 2; }  # command line

# Everything the caller's --help prints: the comment block at the top of the script, from its
# first line that starts "# Usage:" to the end of that block.
usage() { sed -n '/^# Usage:/,/^[^#]/p' "$0" | sed '/^[^#]/d; s/^# \{0,1\}//'; }

# A relative build directory is taken from where the script was called, else from the repository.
resolve_build() {
  local dir=$1
  if [[ $dir != /* ]]; then
    if [[ -d $dir ]]; then dir=$(cd "$dir" && pwd); else dir="$ROOT/$dir"; fi
  fi
  echo "$dir"
}

require_binary() {  # require_binary PATH TARGET
  [[ -x $1 ]] || die "$1 not found; build it first (scripts/build.sh, or cmake --build <build> --target $2)"
}

require_torch() {
  "$PYTHON" -c "import torch" 2>/dev/null \
    || die "$PYTHON cannot import torch (apt-get install python3-torch, or PYTHON=<an interpreter with torch>)"
}

# One line: CPU model (/proc/cpuinfo), logical CPUs (and how many this process may use, when
# fewer), the load average when the caller took it, the two engines' versions, the date.
# machine_line LOAD_BEFORE CUDAGRAD_BINARY
machine_line() {
  local load=$1 binary=$2 cpu logical usable commit torch_version
  cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
  logical=$(grep -c '^processor' /proc/cpuinfo 2>/dev/null)
  usable=$(nproc)
  [[ $usable != "$logical" ]] && logical="$logical, $usable usable"
  # The commit the binary was built from (its --version), which may differ from the checkout's.
  commit=$("$binary" --version 2>/dev/null | sed -n '1s/.*(\(.*\)).*/\1/p')
  [[ -n $commit ]] || commit="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) (checkout)"
  torch_version=$("$PYTHON" -c "import torch; print(torch.__version__)" 2>/dev/null || echo '?')
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); CPU: ${cpu:-unknown} (${logical:-?} logical CPUs, load average" \
       "before: $load); cudagrad $commit; PyTorch $torch_version"
}
