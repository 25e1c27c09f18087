#!/usr/bin/env python3
"""Checks cudagrad's safetensors files against the reference implementation, the `safetensors`
Python package (installed by scripts/install_deps.sh --for-tests), with torch tensors.

Usage: reference_safetensors.py read FILE    prints `name dtype [shape] values` per tensor,
                                              sorted by name, then `metadata key=value` lines
       reference_safetensors.py write FILE   writes a file with one tensor per dtype cudagrad
                                              supports, and metadata, for cudagrad to read
Exits 1 with the package's own error when it rejects a file."""
import sys

import torch
from safetensors import safe_open
from safetensors.torch import save_file


def read(path):
    with safe_open(path, framework="pt") as f:
        for name in sorted(f.keys()):
            t = f.get_tensor(name)
            print(f"{name} {t.dtype} {list(t.shape)} {t.flatten().tolist()}")
        for key, value in sorted((f.metadata() or {}).items()):
            print(f"metadata {key}={value}")


def write(path):
    tensors = {
        "a.f32": torch.tensor([[1.5, -2.0], [0.25, 8.0]], dtype=torch.float32),
        "b.f64": torch.tensor([0.1, -3.0], dtype=torch.float64),
        "c.f16": torch.tensor([1.0, -2.0, 0.5], dtype=torch.float16),
        "d.bf16": torch.tensor([1.0, 0.5], dtype=torch.bfloat16),
        "e.i64": torch.tensor(-123456789012345, dtype=torch.int64),
        "f.i32": torch.tensor([7, -1], dtype=torch.int32),
        "g.u8": torch.tensor([0, 255], dtype=torch.uint8),
    }
    save_file(tensors, path, metadata={"written_by": "safetensors"})


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("read", "write"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        (read if sys.argv[1] == "read" else write)(sys.argv[2])
    except Exception as e:  # the package's own error names the problem
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
