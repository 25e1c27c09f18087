#!/usr/bin/env bash
# A virtual environment with the current PyTorch for the CPU comparisons (bench/cpu_compare.sh,
# bench/cpu_time_to_accuracy.sh), made once, outside the source tree: Debian's torch 1.13 lacks
# torch.compile and is slower than a current one, so it is not PyTorch at its best. Does nothing when
# the venv is there and imports torch; otherwise (re)makes it, installs torch and numpy, and checks
# that torch.compile works on the CPU (inductor needs a C++ compiler: g++). Prints the venv's Python
# as its last line. The comparison scripts take this venv when it is there; scripts/test.sh never
# needs it.
# Usage: bench/pytorch/venv.sh [--check]
#   --check  only say whether the venv is there and usable (exit 0) or not (exit 1); install nothing
# Environment:
#   TORCH_VENV    where the venv goes (default ${XDG_CACHE_HOME:-~/.cache}/cudagrad/torch-venv)
#   VENV_PYTHON   the interpreter to make it with (default: python3 on PATH, else /usr/bin/python3;
#                 Debian's needs python3-venv)
#   TORCH_SPEC    what pip installs (default "torch"; e.g. "torch==2.15.0" to pin)
# Takes about 1-2 minutes and 5.3 GB: PyTorch's CPU-only wheel index is tried first, and where it
# cannot be reached, PyPI's wheel, which pulls the CUDA libraries in too (unused here, but torch
# does not import without them).
set -uo pipefail
VENV=${TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cudagrad/torch-venv}
SPEC=${TORCH_SPEC:-torch}
CPU_INDEX=https://download.pytorch.org/whl/cpu

die() { echo "venv.sh: error: $*" >&2; exit 1; }

usable() { "$VENV/bin/python" -c "import torch" 2>/dev/null; }

# The interpreter to make the venv with: one whose venv module works (Debian's python3 lacks it
# until python3-venv is installed).
base_python() {
  local py
  for py in ${VENV_PYTHON:-} python3 /usr/bin/python3; do
    command -v "$py" >/dev/null && "$py" -c "import venv, ensurepip" 2>/dev/null && { command -v "$py"; return; }
  done
  return 1
}

# A tiny model compiled and trained one step on the CPU: proves inductor's C++ path works here.
check_compile() {
  "$VENV/bin/python" - <<'PY'
import time, torch
m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU())
x = torch.randn(4, 3, 16, 16)
t0 = time.perf_counter()
y = torch.compile(m)(x)
y.sum().backward()
diff = (y - m(x)).abs().max().item()
assert diff < 1e-4, f"compiled and eager differ by {diff}"
print(f"torch.compile works on the CPU: compiled a conv+BN+ReLU in {time.perf_counter() - t0:.1f} s, "
      f"same output as eager (max difference {diff:.1e})")
PY
}

describe() {
  "$VENV/bin/python" -c "import sys, torch; print(f'PyTorch {torch.__version__} at {torch.__file__} (Python {sys.version.split()[0]})')"
}

case "${1:-}" in
  --check) usable && { describe; exit 0; }; echo "no usable venv at $VENV (run bench/pytorch/venv.sh)"; exit 1 ;;
  -h|--help) sed -n '/^# Usage:/,/^[^#]/p' "$0" | sed '/^[^#]/d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) echo "venv.sh: error: unknown option $1" >&2; exit 2 ;;
esac

if usable; then
  describe
  echo "$VENV/bin/python"
  exit 0
fi
# A venv that exists but does not import torch is an interrupted install: start it afresh (only
# when it is one, so that a mistyped TORCH_VENV never removes anything else).
if [[ -e $VENV ]]; then
  [[ -f $VENV/pyvenv.cfg ]] || die "$VENV exists and is not a venv; set TORCH_VENV elsewhere or remove it"
  rm -rf "$VENV"
fi
py=$(base_python) || die "no Python with a working venv module (apt-get install python3-venv, or VENV_PYTHON=...)"
echo "venv.sh: making $VENV with $py ($("$py" --version 2>&1))"
{ mkdir -p "$(dirname "$VENV")" && "$py" -m venv "$VENV"; } || die "could not make the venv at $VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip || echo "venv.sh: could not upgrade pip; going on with $("$VENV/bin/pip" --version)"
# Short timeout and one retry: where the index is blocked, pip would otherwise retry for minutes.
if "$VENV/bin/python" -m pip install -q --timeout 20 --retries 1 --index-url "$CPU_INDEX" "$SPEC" 2>/dev/null; then
  echo "venv.sh: installed $SPEC from PyTorch's CPU-only index"
else
  echo "venv.sh: PyTorch's CPU-only index cannot be reached; installing $SPEC from PyPI (with its CUDA libraries)"
  "$VENV/bin/python" -m pip install -q "$SPEC" || die "pip could not install $SPEC"
fi
# numpy: torch warns at import without it.
"$VENV/bin/python" -m pip install -q numpy || echo "venv.sh: numpy not installed (only a warning at import)"
usable || die "$VENV/bin/python cannot import torch after the install"
check_compile || echo "venv.sh: warning: torch.compile fails on this CPU (is g++ installed?); the compile variants will fail" >&2
describe
echo "$VENV/bin/python"
