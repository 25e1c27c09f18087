"""PyTorch's side of the GPU throughput comparison (scripts/gpu_compare.sh): MiniResNet training
steps with the recipe of configs/bench_gpu.yaml -- batch 256 of 32x32x3 random images resident on
the GPU, SGD (lr 0.2, momentum 0.9, nesterov, weight decay 5e-4), fp16 autocast with GradScaler,
channels_last and cudnn.benchmark -- in eager mode and under torch.compile, each measured after
warm-up as the median of many steps timed with CUDA events, with peak memory.
Prints a table, then one JSON line per mode. `--device cpu --batch 8 --steps 3` is a smoke test
that runs anywhere (torch.compile is skipped when unavailable)."""
import argparse
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from miniresnet import MiniResNet, count  # noqa: E402

SPEC_PARAMS_RGB = 2_777_674  # shared/docs/miniresnet.md, in_channels 3


def make_model(device, channels_last):
    torch.manual_seed(0)
    model = MiniResNet(3, 10, (64, 128, 256), (2, 2, 2)).to(device).train()
    n = count(model)[0]
    if n != SPEC_PARAMS_RGB:
        raise SystemExit(f"MiniResNet has {n} parameters, the spec says {SPEC_PARAMS_RGB}")
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def measure(mode, a, device):
    cuda = device.type == "cuda"
    model = make_model(device, channels_last=cuda)
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True, weight_decay=5e-4)
    amp = cuda  # fp16 autocast needs the GPU; the CPU smoke test runs float32
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
        scaler = torch.amp.GradScaler("cuda", enabled=amp)
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=amp)
    gen = torch.Generator(device="cpu").manual_seed(1)
    batches = []
    for i in range(4):  # a few distinct batches, cycled, as cudagrad-bench does
        x = torch.randn(a.batch, 3, 32, 32, generator=gen).to(device)
        if cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        y = ((torch.arange(a.batch) * 7 + i) % 10).to(device)
        batches.append((x, y))

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        if amp:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
        else:
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    if mode == "compile":
        step = torch.compile(step)
    for i in range(a.warmup):
        step(*batches[i % len(batches)])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(a.steps)]
        for i, (start, end) in enumerate(events):
            start.record()
            step(*batches[i % len(batches)])
            end.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in events]
        peak = torch.cuda.max_memory_allocated()
    else:
        import time
        times = []
        for i in range(a.steps):
            t0 = time.perf_counter()
            step(*batches[i % len(batches)])
            times.append((time.perf_counter() - t0) * 1000)
        peak = 0
    median_ms = statistics.median(times)
    return {"bench": "pytorch", "mode": mode, "device": torch.cuda.get_device_name(device) if cuda else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "batch": a.batch, "images_per_s": a.batch / (median_ms / 1000), "step_ms_median": median_ms,
            "peak_mem_bytes": peak, "steps": a.steps}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    a = p.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    results = []
    for mode in a.modes.split(","):
        if mode == "compile" and not hasattr(torch, "compile"):
            print(f"torch {torch.__version__} has no torch.compile: skipping that mode", file=sys.stderr)
            continue
        results.append(measure(mode, a, device))
    print("| engine | mode | images/s | median step ms | peak MiB |")
    print("| --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| pytorch {r['torch']} | {r['mode']} | {r['images_per_s']:.0f} | {r['step_ms_median']:.2f} | "
              f"{r['peak_mem_bytes'] / 2**20:.1f} |")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
