"""Checks that PyTorch can load a cudagrad checkpoint: builds the PyTorch MiniResNet with the given
settings, takes from the file exactly the model's state-dict keys (other keys, such as optimizer
state under "optim." or "__" entries, are ignored; a missing model key fails), requires each to
have PyTorch's dtype (float32, int64 for num_batches_tracked), loads them with
load_state_dict(strict=True) and runs an eval-mode forward pass on a random batch.
Prints "OK <n> tensors" and exits 0; prints "FAIL: <reason>" and exits 1 otherwise.
Usage: check_state_dict_loads.py FILE [--in-channels N] [--num-classes N] [--widths 16,32,64]
       [--blocks 2,2,2] [--image-size 32]          (run with /usr/bin/python3)"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "pytorch"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet import MiniResNet  # noqa: E402
import safetensors_io  # noqa: E402


def int_list(text):
    return tuple(int(x) for x in text.split(","))


def check(args):
    """Returns None when the checkpoint loads and runs, else the reason it does not."""
    try:
        model = MiniResNet(args.in_channels, args.num_classes, args.widths, args.blocks)
    except ValueError as e:
        return f"bad model settings: {e}"
    try:
        tensors, _ = safetensors_io.load(args.file)
    except (OSError, ValueError) as e:
        return f"cannot read {args.file}: {e}"
    expected = model.state_dict()
    missing = [k for k in expected if k not in tensors]
    if missing:
        return f"{args.file} lacks {len(missing)} of the model's {len(expected)} keys, e.g. {missing[:5]}"
    # load_state_dict would cast silently; a checkpoint PyTorch users load must already match.
    wrong = [f"{k}: {tensors[k].dtype}, want {v.dtype}" for k, v in expected.items() if tensors[k].dtype != v.dtype]
    if wrong:
        return f"{len(wrong)} tensors have the wrong dtype, e.g. {wrong[:3]}"
    try:
        model.load_state_dict({k: tensors[k] for k in expected}, strict=True)
    except RuntimeError as e:  # shape mismatches land here, with PyTorch's own message
        return f"load_state_dict(strict=True) refused it: {e}"
    bad = [k for k, v in model.state_dict().items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        return f"non-finite values in {bad[:5]}"
    model.eval()
    with torch.no_grad():
        out = model(torch.randn(2, args.in_channels, args.image_size, args.image_size))
    if out.shape != (2, args.num_classes) or not torch.isfinite(out).all():
        return f"forward pass gave shape {tuple(out.shape)} or non-finite logits"
    ignored = sorted({k.split(".")[0] for k in tensors if k not in expected})
    if ignored:
        print(f"ignored {len(tensors) - len(expected)} keys outside the model, under: {', '.join(ignored)}")
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("file", help="a cudagrad checkpoint (.safetensors)")
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--num-classes", type=int, default=10)
    p.add_argument("--widths", type=int_list, default=(64, 128, 256))
    p.add_argument("--blocks", type=int_list, default=None, help="blocks per stage (default: 2 each)")
    p.add_argument("--image-size", type=int, default=32, help="side of the random test batch")
    args = p.parse_args()
    if args.blocks is None:
        args.blocks = (2,) * len(args.widths)
    reason = check(args)
    if reason:
        print(f"FAIL: {reason}")
        return 1
    print(f"OK {len(MiniResNet(args.in_channels, args.num_classes, args.widths, args.blocks).state_dict())} tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
