#!/usr/bin/env python3
"""Reads a safetensors file with PyTorch alone (Python's `safetensors` package is not installed
here), proving that a cudagrad checkpoint is loadable from PyTorch. Independent of the C++ code:
only json, struct, zlib and torch.frombuffer.

Usage: read_safetensors.py [--values] FILE
Prints one line per tensor in data order: `name DTYPE torch.dtype [shape]` (plus the values as a
flat list with --values), then `metadata key=value` lines, then the cudagrad checksum verdict:
`checksum: ok`, `checksum: none` (a file from another tool) or `checksum: MISMATCH`.
Exits 1 on a malformed file or a checksum mismatch."""
import json
import struct
import sys
import zlib

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8}


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail(f"{path}: {len(raw)} bytes, too short")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        fail(f"{path}: header length {n} runs past the end of the file")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))  # keeps the file's key order
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        fail(f"{path}: header is not JSON: {e}")
    data = raw[8 + n:]
    metadata = header.pop("__metadata__", {})
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))  # stable: ties keep order
    tensors, position = [], 0
    for name, info in entries:
        begin, end = info["data_offsets"]
        dtype = DTYPES.get(info["dtype"]) or fail(f"{name}: unsupported dtype {info['dtype']}")
        numel = 1
        for d in info["shape"]:
            numel *= d
        if begin != position or end > len(data) or end - begin != numel * torch.empty(0, dtype=dtype).element_size():
            fail(f"{name}: data_offsets {info['data_offsets']} do not fit dtype, shape and data section")
        flat = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype) if numel else torch.empty(0, dtype=dtype)
        tensors.append((name, info, flat.reshape(info["shape"])))
        position = end
    if position != len(data):
        fail(f"{len(data) - position} bytes after the last tensor")
    return tensors, metadata, data


def checksum_verdict(tensors, metadata, data):
    """cudagrad's checksum: CRC-32 of the header re-rendered compactly without the checksum entry
    (tensors in data order with back-to-back offsets, then the metadata sorted by key), followed by
    the data section."""
    stored = metadata.get("cudagrad.checksum")
    if stored is None:
        return "none"
    canonical, offset = {}, 0
    for name, info, _ in tensors:
        size = info["data_offsets"][1] - info["data_offsets"][0]
        canonical[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [offset, offset + size]}
        offset += size
    rest = {k: v for k, v in sorted(metadata.items()) if k != "cudagrad.checksum"}
    if rest:
        canonical["__metadata__"] = rest
    text = json.dumps(canonical, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    actual = "%08x" % (zlib.crc32(data, zlib.crc32(text)) & 0xFFFFFFFF)
    return "ok" if actual == stored else "MISMATCH"


def main():
    args = sys.argv[1:]
    values = "--values" in args
    paths = [a for a in args if a != "--values"]
    if len(paths) != 1:
        fail("usage: read_safetensors.py [--values] FILE")
    tensors, metadata, data = read(paths[0])
    for name, info, t in tensors:
        line = f"{name} {info['dtype']} {t.dtype} {list(t.shape)}"
        if values:
            line += f" {t.reshape(-1).tolist()}"
        print(line)
    for key, value in sorted(metadata.items()):
        print(f"metadata {key}={value}")
    verdict = checksum_verdict(tensors, metadata, data)
    print(f"checksum: {verdict}")
    sys.exit(1 if verdict == "MISMATCH" else 0)


if __name__ == "__main__":
    main()
