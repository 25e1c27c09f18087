# shellcheck shell=bash
# Shared by bench/cpu_compare.sh and bench/cpu_time_to_accuracy.sh (sourced, not run): errors with
# the right exit code, the build and PyTorch checks (which PyTorch, in which variants), and the
# machine/version line that every saved result carries. The caller sets NAME (its name in
# messages) and ROOT (the repository) first.

# The PyTorch to compare against: PYTHON from the environment alone when it is set; else the venv
# of bench/pytorch/venv.sh (a current PyTorch, with torch.compile), then Debian's torch 1.13 in
# /usr/bin/python3 (the earlier baseline, kept as a second row) where each imports torch.
PYTHON=${PYTHON:-}
TORCH_VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cudagrad/torch-venv}
DEBIAN_PYTHON=/usr/bin/python3
# The tables, the smoke subset and the chart need only the standard library (the chart also
# matplotlib, which Debian's python3-matplotlib gives): not the interpreter that has torch.
TOOL_PYTHON=$DEBIAN_PYTHON
[[ -x $TOOL_PYTHON ]] || TOOL_PYTHON=python3
# Every variant bench/pytorch/variants.py runs on a CPU; --variants narrows it.
ALL_VARIANTS=eager,channels-last,compile,compile-channels-last

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

# Fills TORCH_PYTHONS (the interpreters, the main one first) and prints which PyTorch each is.
require_torch() {
  TORCH_PYTHONS=()
  if [[ -n $PYTHON ]]; then
    "$PYTHON" -c "import torch" 2>/dev/null \
      || die "$PYTHON cannot import torch (apt-get install python3-torch, or PYTHON=<an interpreter with torch>)"
    TORCH_PYTHONS=("$PYTHON")
  else
    "$TORCH_VENV/bin/python" -c "import torch" 2>/dev/null && TORCH_PYTHONS+=("$TORCH_VENV/bin/python")
    "$DEBIAN_PYTHON" -c "import torch" 2>/dev/null && TORCH_PYTHONS+=("$DEBIAN_PYTHON")
    ((${#TORCH_PYTHONS[@]})) || die "no PyTorch: neither $TORCH_VENV/bin/python (make it with bench/pytorch/venv.sh)" \
      "nor $DEBIAN_PYTHON (apt-get install python3-torch) can import torch"
  fi
  local py
  for py in "${TORCH_PYTHONS[@]}"; do
    echo "$NAME: PyTorch $("$py" -c 'import sys, torch; print(torch.__version__, "at", torch.__file__.rsplit("/", 1)[0], "(" + sys.executable + ")")')"
  done
  [[ -z $PYTHON && ${TORCH_PYTHONS[0]} == "$DEBIAN_PYTHON" ]] \
    && echo "$NAME: note: no venv at $TORCH_VENV (bench/pytorch/venv.sh makes it): Debian's PyTorch only, without torch.compile"
}

# torch_variants PYTHON WANTED: the variants of WANTED (comma-separated) to run with PYTHON, one a
# line. The main interpreter runs them all (saying which its torch cannot run: 1.13 has no
# torch.compile); a second one (Debian's baseline beside the venv) runs eager NCHW alone, as the
# earlier comparisons did.
torch_variants() {
  local py=$1 wanted=$2
  [[ $py != "${TORCH_PYTHONS[0]}" ]] && wanted=eager
  "$py" - "$wanted" "$ROOT/bench/pytorch" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import variants
for v in variants.parse(sys.argv[1], variants.CPU_VARIANTS):
    why = variants.supported(v)
    print(v) if why is None else print(f"skipping PyTorch variant {v}: {why}", file=sys.stderr)
PY
}

# check_variants LIST: exits 2 unless LIST is a comma-separated list of CPU variants.
check_variants() {
  [[ $1 =~ ^[a-z-]+(,[a-z-]+)*$ ]] || usage_die "--variants must look like eager,compile, got '$1'"
  local v
  for v in ${1//,/ }; do
    [[ ,$ALL_VARIANTS, == *,$v,* ]] || usage_die "--variants: unknown variant '$v' (one of $ALL_VARIANTS)"
  done
}

# The path, without extension, of a new saved result: bench/results/PREFIX_<date>_<HHMM>SUFFIX
# (UTC), with -2, -3, ... after the time when a file of that name is already there, so a second
# run in the same minute does not overwrite the first (it did: two step_bound runs at 23:26).
result_stem() {  # result_stem PREFIX SUFFIX
  local base n=1 stem
  base="$ROOT/bench/results/$1_$(date -u +%F_%H%M)"
  stem="$base$2"
  while compgen -G "$stem.*" >/dev/null; do n=$((n + 1)); stem="$base-$n$2"; done
  echo "$stem"
}

# The commit a cudagrad binary was built from: the parenthesized part of its --version's first
# line ("cudagrad 0.1.0 (fd8d718b2ebe)"), or nothing.
binary_commit() { "$1" --version 2>/dev/null | sed -n '1s/.*(\(.*\)).*/\1/p'; }

# One line: CPU model (/proc/cpuinfo), logical CPUs (and how many this process may use, when
# fewer), the load average when the caller took it, the two engines' versions, the date.
# machine_line LOAD_BEFORE CUDAGRAD_BINARY
machine_line() {
  local load=$1 binary=$2 cpu logical usable commit torch_version="" py
  cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
  logical=$(grep -c '^processor' /proc/cpuinfo 2>/dev/null)
  usable=$(nproc)
  [[ $usable != "$logical" ]] && logical="$logical, $usable usable"
  # The commit the binary was built from, which may differ from the checkout's.
  commit=$(binary_commit "$binary")
  [[ -n $commit ]] || commit="$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown) (checkout)"
  for py in "${TORCH_PYTHONS[@]}"; do
    torch_version+="${torch_version:+, }$("$py" -c "import sys, torch; print(torch.__version__, 'Python', sys.version.split()[0])" 2>/dev/null || echo '?')"
  done
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'); CPU: ${cpu:-unknown} (${logical:-?} logical CPUs, load average" \
       "before: $load); cudagrad $commit${torch_version:+; PyTorch $torch_version}; $(g++ --version 2>/dev/null | head -n 1)"
}
