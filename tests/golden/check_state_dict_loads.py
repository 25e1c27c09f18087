"""Checks that PyTorch can load a cudagrad checkpoint: builds the PyTorch MiniResNet with the given
settings, loads the file's tensors whose names are model keys with load_state_dict(strict=True)
(extra keys, such as optimizer state under "optim.", are ignored; a missing model key fails) and
runs a forward pass. Prints "OK <n> tensors"; exits 1 with the reason otherwise.
Usage: check_state_dict_loads.py FILE [--in-channels N] [--widths 16,32,64] [--blocks 2,2,2]"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench", "pytorch"))
sys.path.insert(0, os.path.dirname(__file__))
from miniresnet import MiniResNet  # noqa: E402
import safetensors_io  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("file")
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--widths", default="64,128,256")
    p.add_argument("--blocks", default="2,2,2")
    a = p.parse_args()
    widths = tuple(int(x) for x in a.widths.split(","))
    blocks = tuple(int(x) for x in a.blocks.split(","))
    model = MiniResNet(a.in_channels, a.num_classes, widths, blocks)
    tensors, _ = safetensors_io.load(a.file)
    keys = model.state_dict().keys()
    missing = [k for k in keys if k not in tensors]
    if missing:
        print(f"FAIL: {a.file} lacks {missing[:5]}")
        return 1
    try:
        model.load_state_dict({k: tensors[k] for k in keys}, strict=True)
    except RuntimeError as e:
        print(f"FAIL: {e}")
        return 1
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(2, a.in_channels, 16, 16))
    if out.shape != (2, a.num_classes) or not torch.isfinite(out).all():
        print(f"FAIL: forward gave {tuple(out.shape)}")
        return 1
    print(f"OK {len(keys)} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
