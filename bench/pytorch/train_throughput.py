"""PyTorch CPU training throughput for MiniResNet on random data: the reference that
bench/cpu_compare.sh sets beside cudagrad-bench-cpu. Same recipe on both sides: fp32, SGD
(momentum 0.9, weight decay 1e-4, lr 0.01), cross-entropy, one fixed random batch.
Prints a human line, then one JSON line."""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
from miniresnet import MiniResNet  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--widths", default="64,128,256")
    p.add_argument("--in-channels", type=int, default=3)
    p.add_argument("--image-size", type=int, default=32)
    a = p.parse_args()
    # Debian's build reports 1 thread by default here: set it explicitly, same as cudagrad's.
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    widths = tuple(int(w) for w in a.widths.split(","))
    model = MiniResNet(a.in_channels, 10, widths, (2,) * len(widths)).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch_size, a.in_channels, a.image_size, a.image_size)
    y = torch.arange(a.batch_size) * 7 % 10
    times = []
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            start = time.perf_counter()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    ips = a.batch_size * a.steps / total
    median_ms = statistics.median(times) * 1000
    print(f"pytorch {torch.__version__}: MiniResNet widths {list(widths)}, batch {a.batch_size}, "
          f"{a.in_channels}x{a.image_size}x{a.image_size}, {a.threads} threads: {ips:.1f} images/s "
          f"(median step {median_ms:.1f} ms)")
    print(json.dumps({"engine": "pytorch", "version": torch.__version__, "threads": a.threads,
                      "batch": a.batch_size, "images_per_s": ips, "median_step_ms": median_ms}))


if __name__ == "__main__":
    main()
