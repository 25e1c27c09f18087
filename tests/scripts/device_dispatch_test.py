#!/usr/bin/python3
"""One way for an op to reach a device: engine/dispatch.h's on_device. An op that branches to its GPU
kernel by hand (`if constexpr (kCudaBuild)` followed by an `on_gpu(...)` or `.is_cuda()` test) is a
second mechanism, and fails here with the file and line. The wrappers of the CUDA runtime itself
(streams, device memory, graphs: no kernel of an op) are not ops and may test the build directly,
but they never choose a kernel by a tensor's device.

Usage: device_dispatch_test.py SOURCE_DIR   (CTest runs it, label "meta")
"""
import re
import sys
from pathlib import Path

FOLDERS = ("engine", "nn", "data", "dist", "train")
# The mechanism itself, and the wrappers of the CUDA runtime (a stream's or an event's calls, device
# queries, copies between host and device), which run no op's kernel and have nothing to run on the
# CPU.
ALLOWED = {"engine/dispatch.h", "engine/runtime.cpp", "engine/stream.cpp", "engine/device_copy.cpp"}
BUILD_TEST = re.compile(r"if\s+constexpr\s*\([^)]*kCudaBuild")
DEVICE_TEST = re.compile(r"\bon_gpu\s*\(|\.is_cuda\s*\(\s*\)")
# How far after the build test a device test still belongs to the same branch.
LINES_AFTER = 3


def hand_branches(text):
    """Line numbers (1-based) of build tests followed by a device test within LINES_AFTER lines."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if BUILD_TEST.search(line.split("//")[0]):
            window = "\n".join(l.split("//")[0] for l in lines[i:i + 1 + LINES_AFTER])
            if DEVICE_TEST.search(window):
                found.append(i + 1)
    return found


def main(root):
    root = Path(root)
    failures = []
    for top in FOLDERS:
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if not path.is_file() or path.suffix not in (".h", ".cpp") or rel in ALLOWED:
                continue
            for line in hand_branches(path.read_text(errors="replace")):
                failures.append(f"{rel}:{line}: an op branches to the GPU by hand; call detail::on_device "
                                "(engine/dispatch.h) with its CPU and GPU kernels instead")
    for f in failures:
        print(f)
    if failures:
        return 1
    print(f"device_dispatch: every op in {', '.join(FOLDERS)} reaches its device through on_device")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
