"""A minimal safetensors reader and writer for the golden scripts (Python's `safetensors` package
is not a Debian package). Format: 8-byte little-endian header length N, N bytes of JSON
({name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}, space-padded to a multiple of
8), then the tensors' raw little-endian bytes packed in header order. The reader checks what it
reads: a malformed file raises ValueError rather than yielding wrong tensors.
Run this file to round-trip every supported dtype."""
import json
import struct
import sys

import numpy as np
import torch

_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
           "U8": torch.uint8, "BOOL": torch.bool}
_NAMES = {v: k for k, v in _DTYPES.items()}
_METADATA = "__metadata__"

# Tensor bytes are written and read as the machine holds them; the format is little-endian.
assert sys.byteorder == "little", "safetensors_io assumes a little-endian machine"


def _raw_bytes(t):
    # numpy has no bfloat16: go through a uint8 view of the same bytes.
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def save(path, tensors, metadata=None):
    """Writes `tensors` (name -> torch.Tensor, in the dict's order) and `metadata` (values are
    converted with str()) to `path`."""
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        if name == _METADATA:
            raise ValueError(f"{_METADATA} is reserved for metadata, not a tensor name")
        t = t.detach().contiguous().cpu()
        if t.dtype not in _NAMES:
            raise ValueError(f"{name}: dtype {t.dtype} has no safetensors name here")
        raw = _raw_bytes(t)
        header[name] = {"dtype": _NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header[_METADATA] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for chunk in chunks:
            f.write(chunk)


def load(path):
    """Returns (tensors: dict name -> torch.Tensor in file order, metadata: dict str -> str).
    Raises ValueError when the file is not well-formed safetensors."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: {len(data)} bytes, too short for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} runs past the end of the {len(data)}-byte file")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    body = data[8 + n:]
    metadata = header.pop(_METADATA, None) or {}
    out, spans = {}, []
    for name, info in header.items():
        try:
            dtype = _DTYPES[info["dtype"]]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: bad header entry for {name!r}: {info} ({e})") from None
        numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
        itemsize = torch.empty(0, dtype=dtype).element_size()
        if not 0 <= begin <= end <= len(body) or end - begin != numel * itemsize:
            raise ValueError(f"{path}: {name}: offsets [{begin}, {end}) do not hold a {info['dtype']} "
                             f"tensor of shape {shape} in a {len(body)}-byte data section")
        spans.append((begin, end, name))
        if numel == 0:
            out[name] = torch.empty(shape, dtype=dtype)
            continue
        raw = torch.from_numpy(np.frombuffer(body, dtype=np.uint8, count=end - begin, offset=begin).copy())
        out[name] = raw.view(dtype).reshape(shape)
    # The format leaves no holes and no overlaps: the spans tile the data section exactly.
    position = 0
    for begin, end, name in sorted(spans):
        if begin != position:
            raise ValueError(f"{path}: {name} starts at {begin}, expected {position} (gap or overlap)")
        position = end
    if position != len(body):
        raise ValueError(f"{path}: {len(body) - position} bytes after the last tensor")
    return out, metadata


if __name__ == "__main__":
    import os
    import tempfile

    torch.manual_seed(0)
    tensors = {"f64": torch.randn(3, 4, dtype=torch.float64), "scalar": torch.tensor(2.5, dtype=torch.float64),
               "f32": torch.randn(5), "f16": torch.randn(2, 2).half(), "bf16": torch.randn(3).bfloat16(),
               "i64": torch.arange(-3, 3), "i32": torch.arange(4, dtype=torch.int32),
               "i16": torch.arange(2, dtype=torch.int16), "i8": torch.tensor([-1, 7], dtype=torch.int8),
               "u8": torch.tensor([0, 255], dtype=torch.uint8), "bool": torch.tensor([True, False, True]),
               "empty": torch.empty(0, 3)}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.safetensors")
        save(path, tensors, {"lr": 0.1, "name": "x"})
        back, meta = load(path)
        assert list(back) == list(tensors), "order or names changed"
        for k, t in tensors.items():
            assert back[k].dtype == t.dtype and back[k].shape == t.shape and torch.equal(back[k], t), k
        assert meta == {"lr": "0.1", "name": "x"}, meta
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
        assert n % 8 == 0, "header must be padded to a multiple of 8"
        with open(path, "r+b") as f:  # truncate the last tensor: the reader must refuse it
            f.truncate(os.path.getsize(path) - 1)
        try:
            load(path)
            raise AssertionError("a truncated file was accepted")
        except ValueError as e:
            print(f"truncated file refused: {e}")
    print(f"OK: {len(tensors)} tensors of {len(_DTYPES)} dtypes round-trip")
