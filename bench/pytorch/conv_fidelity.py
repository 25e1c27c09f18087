#!/usr/bin/python3
"""The PyTorch half of the convolution fidelity table (bench/conv_fidelity.sh): for every
convolution layer shape of the two Fashion-MNIST MiniResNets (the full one, widths 64/128/256,
and the narrow one of configs/fashion_mnist_cpu.yaml, 16/32/64; 1x28x28 images), draws the inputs
every algorithm is then given (x, w and the gradient dy reaching y, float32), computes the three
phases (forward y, backward-data dx, backward-filter dw) in float64 as the reference, and
PyTorch's own float32 error in two summation orders (NCHW, and channels-last, which takes other
kernels). Writes one safetensors file: <layer>.{x,w,dy} (F32), <layer>.{y,dx,dw}64 (F64), and in
the metadata the layer list and PyTorch's errors. bench/conv_fidelity_bench.cpp reads it, runs
cudagrad's CPU algorithms on the same inputs and prints the table.
Error: ||got - ref||_2 / ||ref||_2 over the whole output, in float64.
Run with /usr/bin/python3: conv_fidelity.py OUT.safetensors [--batch 32] [--threads 2]"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden"))
import safetensors_io  # noqa: E402

# (name, c_in, size, c_out, kernel, stride, pad): each distinct convolution of the network once.
# Same shapes as kFull28Layers and kNarrowLayers in bench/cpu_conv_bench.cpp.
NETWORKS = {
    "full": [
        ("stem 1->64 3x3 s1 @28", 1, 28, 64, 3, 1, 1),
        ("layer1 64->64 3x3 s1 @28", 64, 28, 64, 3, 1, 1),
        ("layer2.0.conv1 64->128 3x3 s2 @28", 64, 28, 128, 3, 2, 1),
        ("layer2.0.down 64->128 1x1 s2 @28", 64, 28, 128, 1, 2, 0),
        ("layer2 128->128 3x3 s1 @14", 128, 14, 128, 3, 1, 1),
        ("layer3.0.conv1 128->256 3x3 s2 @14", 128, 14, 256, 3, 2, 1),
        ("layer3.0.down 128->256 1x1 s2 @14", 128, 14, 256, 1, 2, 0),
        ("layer3 256->256 3x3 s1 @7", 256, 7, 256, 3, 1, 1),
    ],
    "narrow": [
        ("stem 1->16 3x3 s1 @28", 1, 28, 16, 3, 1, 1),
        ("layer1 16->16 3x3 s1 @28", 16, 28, 16, 3, 1, 1),
        ("layer2.0.conv1 16->32 3x3 s2 @28", 16, 28, 32, 3, 2, 1),
        ("layer2.0.down 16->32 1x1 s2 @28", 16, 28, 32, 1, 2, 0),
        ("layer2 32->32 3x3 s1 @14", 32, 14, 32, 3, 1, 1),
        ("layer3.0.conv1 32->64 3x3 s2 @14", 32, 14, 64, 3, 2, 1),
        ("layer3.0.down 32->64 1x1 s2 @14", 32, 14, 64, 1, 2, 0),
        ("layer3 64->64 3x3 s1 @7", 64, 7, 64, 3, 1, 1),
    ],
}
PHASES = ("y", "dx", "dw")


def inputs(c_in, size, c_out, kernel, stride, pad, batch, stem, gen):
    """Activations as a layer sees them: the stem's input normalized pixels (about N(0, 1)), every
    other layer's the output of a ReLU (half zeros); Kaiming-normal weights; dy of a similar
    spread at every position."""
    x = torch.randn(batch, c_in, size, size, generator=gen, dtype=torch.float64)
    if not stem:
        x = x.clamp_min(0)
    w = torch.randn(c_out, c_in, kernel, kernel, generator=gen, dtype=torch.float64) * (2.0 / (c_in * kernel**2)) ** 0.5
    out = (size + 2 * pad - kernel) // stride + 1
    dy = torch.randn(batch, c_out, out, out, generator=gen, dtype=torch.float64)
    # Every algorithm gets the same float32 values; the reference computes on them exactly.
    return [t.float() for t in (x, w, dy)]


def phases(x, w, dy, stride, pad, memory_format=torch.contiguous_format):
    """(y, dx, dw) of the convolution, by autograd, in x's dtype."""
    x = x.to(memory_format=memory_format).detach().requires_grad_(True)
    w = w.to(memory_format=memory_format).detach().requires_grad_(True)
    y = F.conv2d(x, w, stride=stride, padding=pad)
    y.backward(dy.to(memory_format=memory_format))
    return y.detach(), x.grad, w.grad


def relative_error(got, ref):
    return ((got.double() - ref).norm() / ref.norm()).item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(args.seed)
    tensors, meta, names = {}, {"batch": args.batch, "torch": torch.__version__}, []
    for net, layers in NETWORKS.items():
        for name, c_in, size, c_out, kernel, stride, pad in layers:
            key = f"{net} {name}"
            names.append(key)
            x, w, dy = inputs(c_in, size, c_out, kernel, stride, pad, args.batch, name.startswith("stem"), gen)
            ref = phases(x.double(), w.double(), dy.double(), stride, pad)
            tensors.update({f"{key}.x": x, f"{key}.w": w, f"{key}.dy": dy})
            tensors.update({f"{key}.{p}64": r for p, r in zip(PHASES, ref)})
            meta[f"{key}.shape"] = f"{c_in},{size},{c_out},{kernel},{stride},{pad}"
            for order, fmt in (("nchw", torch.contiguous_format), ("channels_last", torch.channels_last)):
                got = phases(x, w, dy, stride, pad, fmt)
                for p, g, r in zip(PHASES, got, ref):
                    meta[f"{key}.{p}.torch_{order}"] = f"{relative_error(g, r):.6e}"
    meta["layers"] = ";".join(names)
    safetensors_io.save(args.out, tensors, meta)


if __name__ == "__main__":
    main()
