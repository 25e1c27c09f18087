#!/usr/bin/env bash
# Installs the Debian packages cudagrad builds, tests and trains with; does nothing when they are
# all present (idempotent). The CUDA toolkit itself is expected at /usr/local/cuda when wanted.
# Usage: scripts/install_deps.sh [--for-tests]   (--for-tests: also PyTorch, for the golden tests
# and the benchmark, Open MPI, for the mpirun test, iptables, for the two-node tests' lossy and cut
# links (tests/apps/two_nodes_test.cpp), and the reference `safetensors` Python
# package, for the checkpoint interop tests: Debian 12 does not package it, so it comes from PyPI
# with pip, into root's (or the user's) site-packages of /usr/bin/python3)
set -euo pipefail

packages=(cmake g++ make ccache pkg-config libeigen3-dev libyaml-cpp-dev libgtest-dev zlib1g-dev
          libcli11-dev nlohmann-json3-dev libfmt-dev libgloo-dev dataset-fashion-mnist
          python3-matplotlib)  # scripts/plot_metrics.py (training curves) and the comparison charts
if [[ "${1:-}" == "--for-tests" ]]; then
  packages+=(python3-torch python3-numpy openmpi-bin python3-pip
             libboost-context-dev  # the emulated GPU's fibers (scripts/test_emulated.sh)
             iptables iproute2)    # the two-node tests: network namespaces, lost packets, cut links
fi

# The reference safetensors package: not in Debian 12, so pip (--user keeps it out of the
# Debian-managed tree; PEP 668 needs --break-system-packages even for --user on Debian 12).
install_reference_safetensors() {
  if /usr/bin/python3 -c 'import safetensors.torch' 2>/dev/null; then return; fi
  echo "install_deps: installing the safetensors Python package (pip, --user)"
  # PyPI out of reach must not fail the build: the two interop tests then skip, saying what they
  # need. Under CUDAGRAD_REQUIRE_ALL=1 (scripts/test.sh, so CI) they would fail, so stop here.
  /usr/bin/python3 -m pip install -q --user --break-system-packages 'safetensors>=0.4' && return
  if [[ "${CUDAGRAD_REQUIRE_ALL:-0}" != 0 ]]; then
    echo "install_deps: error: could not install safetensors, and CUDAGRAD_REQUIRE_ALL is set" >&2
    exit 1
  fi
  echo "install_deps: warning: could not install safetensors; the checkpoint interop tests will skip" >&2
}

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  echo "install_deps: all ${#packages[@]} packages present"
  if [[ "${1:-}" == "--for-tests" ]]; then install_reference_safetensors; fi
  exit 0
fi
echo "install_deps: installing ${missing[*]}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
if [[ "${1:-}" == "--for-tests" ]]; then install_reference_safetensors; fi
