"""PyTorch CPU training throughput for MiniResNet on synthetic data: the reference that
bench/cpu_compare.sh sets beside cudagrad-bench-cpu. The recipe must stay identical to that
program's: fp32, SGD (lr 0.01, momentum 0.9, weight decay 1e-4), cross-entropy, one fixed random
normal batch with labels (7*i) % 10, two BasicBlocks per stage (bench/cpu_compare.sh checks that
both report the same parameter count). Prints a human line, then (last) one JSON line.
Run with /usr/bin/python3 (Debian's torch)."""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet import MiniResNet  # noqa: E402


def positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {value}")
    return value


def non_negative(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=positive, default=os.cpu_count(), help="intra-op threads (default: all cores)")
    p.add_argument("--batch-size", type=positive, default=64)
    p.add_argument("--steps", type=positive, default=20, help="timed steps")
    p.add_argument("--warmup", type=non_negative, default=3, help="untimed steps first")
    p.add_argument("--widths", default="64,128,256", help="stage widths, comma-separated")
    p.add_argument("--in-channels", type=positive, default=3)
    p.add_argument("--image-size", type=positive, default=32)
    a = p.parse_args()
    # Debian's build starts with 1 thread on this machine: always set the count explicitly so
    # both engines run with the same number.
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    widths = tuple(int(w) for w in a.widths.split(","))
    model = MiniResNet(a.in_channels, 10, widths, (2,) * len(widths)).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch_size, a.in_channels, a.image_size, a.image_size)
    y = torch.arange(a.batch_size) * 7 % 10

    step_s = []
    cpu_start = time.process_time()  # all threads of the process, as cudagrad-bench-cpu's
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            start, cpu_start = time.perf_counter(), time.process_time()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        if step >= a.warmup:
            step_s.append(time.perf_counter() - t0)
    total_s = time.perf_counter() - start
    cpu_ms_per_step = (time.process_time() - cpu_start) * 1000 / a.steps
    # images/s over the whole timed window (not 1/median), so pauses between steps count too.
    ips = a.batch_size * a.steps / total_s
    median_ms = statistics.median(step_s) * 1000
    print(f"pytorch {torch.__version__}: MiniResNet widths {list(widths)}, batch {a.batch_size}, "
          f"{a.in_channels}x{a.image_size}x{a.image_size}, {torch.get_num_threads()} threads: "
          f"{ips:.1f} images/s (median step {median_ms:.1f} ms; {cpu_ms_per_step:.1f} ms of CPU time per step, "
          f"all threads)")
    print(json.dumps({"engine": "pytorch", "version": torch.__version__, "threads": torch.get_num_threads(),
                      "batch": a.batch_size, "images_per_s": ips, "median_step_ms": median_ms,
                      "cpu_ms_per_step": cpu_ms_per_step, "parameters": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main()
