#!/usr/bin/python3
"""PyTorch's time per MiniResNet convolution layer (batch 64, 32x32 input; --net narrow: the
Fashion-MNIST network of configs/fashion_mnist_cpu.yaml), the counterpart of
bench/cpu_conv_bench.cpp: forward, backward-data and backward-filter timed separately (median of
several runs after warm-up), same shapes and the same GFLOP accounting, so the two compare line
by line. Run with /usr/bin/python3 (Debian's torch 1.13): `conv_layers.py [--threads 2] [--net narrow]`."""
import argparse
import statistics
import time

import torch

# (name, c_in, size, c_out, kernel, stride, pad, count per MiniResNet) - as in cpu_conv_bench.cpp
LAYERS = [
    ("stem 3->64 3x3 s1 @32", 3, 32, 64, 3, 1, 1, 1),
    ("layer1 64->64 3x3 s1 @32", 64, 32, 64, 3, 1, 1, 4),
    ("layer2.0.conv1 64->128 3x3 s2 @32", 64, 32, 128, 3, 2, 1, 1),
    ("layer2.0.down 64->128 1x1 s2 @32", 64, 32, 128, 1, 2, 0, 1),
    ("layer2 128->128 3x3 s1 @16", 128, 16, 128, 3, 1, 1, 3),
    ("layer3.0.conv1 128->256 3x3 s2 @16", 128, 16, 256, 3, 2, 1, 1),
    ("layer3.0.down 128->256 1x1 s2 @16", 128, 16, 256, 1, 2, 0, 1),
    ("layer3 256->256 3x3 s1 @8", 256, 8, 256, 3, 1, 1, 3),
]
# The narrow network (widths 16/32/64, 1x28x28), as kNarrowLayers in cpu_conv_bench.cpp.
NARROW_LAYERS = [
    ("stem 1->16 3x3 s1 @28", 1, 28, 16, 3, 1, 1, 1),
    ("layer1 16->16 3x3 s1 @28", 16, 28, 16, 3, 1, 1, 4),
    ("layer2.0.conv1 16->32 3x3 s2 @28", 16, 28, 32, 3, 2, 1, 1),
    ("layer2.0.down 16->32 1x1 s2 @28", 16, 28, 32, 1, 2, 0, 1),
    ("layer2 32->32 3x3 s1 @14", 32, 14, 32, 3, 1, 1, 3),
    ("layer3.0.conv1 32->64 3x3 s2 @14", 32, 14, 64, 3, 2, 1, 1),
    ("layer3.0.down 32->64 1x1 s2 @14", 32, 14, 64, 1, 2, 0, 1),
    ("layer3 64->64 3x3 s1 @7", 64, 7, 64, 3, 1, 1, 3),
]


def median_ms(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--net", choices=["full", "narrow"], default="full")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"PyTorch {torch.__version__}, threads {torch.get_num_threads()}, batch {args.batch}")
    print(f"{'layer':38s} {'fwd ms':>8s} {'GF/s':>6s} {'bwd-data ms':>12s} {'GF/s':>6s} "
          f"{'bwd-filter ms':>14s} {'GF/s':>6s}")
    step_ms = step_gflop = 0.0
    for name, cin, size, cout, k, stride, pad, count in (NARROW_LAYERS if args.net == "narrow" else LAYERS):
        x = torch.randn(args.batch, cin, size, size)
        w = torch.randn(cout, cin, k, k)
        y = torch.nn.functional.conv2d(x, w, None, stride, pad)
        dy = torch.randn_like(y)
        gflop = 2.0 * y.numel() * cin * k * k / 1e9
        conv_bwd = torch.ops.aten.convolution_backward

        def fwd():
            torch.nn.functional.conv2d(x, w, None, stride, pad)

        def bwd_data():
            conv_bwd(dy, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1,
                     [True, False, False])

        def bwd_filter():
            conv_bwd(dy, x, w, None, [stride] * 2, [pad] * 2, [1, 1], False, [0, 0], 1,
                     [False, True, False])

        with torch.no_grad():
            f = median_ms(fwd, args.warmup, args.runs)
            d = median_ms(bwd_data, args.warmup, args.runs)
            g = median_ms(bwd_filter, args.warmup, args.runs)
        print(f"{name:38s} {f:8.2f} {gflop / f * 1e3:6.0f} {d:12.2f} {gflop / d * 1e3:6.0f} "
              f"{g:14.2f} {gflop / g * 1e3:6.0f}  x{count}")
        first = name.startswith("stem")  # the stem's input needs no gradient
        step_ms += count * (f + g + (0 if first else d))
        step_gflop += count * gflop * (2 if first else 3)
    print(f"one training step's convolutions: {step_ms:.1f} ms, {step_gflop:.1f} GFLOP, "
          f"{step_gflop / step_ms * 1e3:.0f} GFLOP/s")


if __name__ == "__main__":
    main()
