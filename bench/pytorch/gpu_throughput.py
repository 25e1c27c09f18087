"""PyTorch's side of the GPU throughput comparison (scripts/gpu_compare.sh): MiniResNet training
steps with the recipe of --config (configs/bench_gpu.yaml: batch 256 of 32x32x3 images, SGD lr 0.2
momentum 0.9 nesterov weight decay 5e-4, fp16 autocast with GradScaler) on random images resident
on the GPU, channels_last, cudnn.benchmark, in eager mode and with the model under torch.compile
(its compilation happens during warm-up and is not timed). Each mode: warm-up steps, then every
step timed with CUDA events; reports the median step, the wall-clock rate over all timed steps
(gaps between steps included) and peak memory (reset after warm-up).
Prints a table, then one JSON line per mode. `--device cpu --batch 8 --steps 3` is a smoke test
that runs anywhere (torch.compile is skipped when unavailable)."""
import argparse
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from miniresnet import MiniResNet, count  # noqa: E402
from time_to_accuracy import read_recipe  # noqa: E402

SPEC_PARAMS_RGB = 2_777_674  # shared/docs/miniresnet.md, in_channels 3


def make_model(recipe, device, channels_last):
    m = recipe.get("model", {})
    torch.manual_seed(0)
    model = MiniResNet(int(m.get("in_channels", 3)), int(m.get("num_classes", 10)),
                       tuple(m.get("widths", [64, 128, 256])), tuple(m.get("blocks", [2, 2, 2]))).to(device).train()
    n = count(model)[0]
    if int(m.get("in_channels", 3)) == 3 and n != SPEC_PARAMS_RGB:
        raise SystemExit(f"MiniResNet has {n} parameters, the spec says {SPEC_PARAMS_RGB}")
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model


def measure(mode, a, recipe, device):
    cuda = device.type == "cuda"
    optim, amp_cfg = recipe.get("optim", {}), recipe.get("amp", {})
    model = make_model(recipe, device, channels_last=cuda)
    opt = torch.optim.SGD(model.parameters(), lr=float(optim.get("lr", 0.2)),
                          momentum=float(optim.get("momentum", 0.9)), nesterov=bool(optim.get("nesterov", True)),
                          weight_decay=float(optim.get("weight_decay", 5e-4)))
    amp = cuda and bool(amp_cfg.get("enabled", True))  # autocast needs the GPU; the CPU smoke test runs float32
    amp_dtype = torch.bfloat16 if amp_cfg.get("dtype", "fp16") == "bf16" else torch.float16
    scale = amp and amp_dtype == torch.float16  # bf16 needs no loss scaling
    if hasattr(torch.amp, "GradScaler"):  # torch >= 2.3
        scaler = torch.amp.GradScaler("cuda", enabled=scale)
    else:
        scaler = torch.cuda.amp.GradScaler(enabled=scale)
    if mode == "compile":
        model = torch.compile(model)
    size = int(recipe.get("data", {}).get("image_size", 32))
    channels = int(recipe.get("model", {}).get("in_channels", 3))
    gen = torch.Generator(device="cpu").manual_seed(1)
    batches = []
    for i in range(4):  # a few distinct batches, cycled, as cudagrad-bench does
        x = torch.randn(a.batch, channels, size, size, generator=gen).to(device)
        if cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 10, (a.batch,), generator=gen).to(device)
        batches.append((x, y))

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

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
        wall_ms = events[0][0].elapsed_time(events[-1][1])
        peak = torch.cuda.max_memory_allocated()
    else:
        times = []
        t_all = time.perf_counter()
        for i in range(a.steps):
            t0 = time.perf_counter()
            step(*batches[i % len(batches)])
            times.append((time.perf_counter() - t0) * 1000)
        wall_ms = (time.perf_counter() - t_all) * 1000
        peak = 0
    median_ms = statistics.median(times)
    return {"bench": "pytorch", "mode": mode, "device": torch.cuda.get_device_name(device) if cuda else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "batch": a.batch, "amp": str(amp_dtype).replace("torch.", "") if amp else "off",
            "images_per_s": a.batch / (median_ms / 1000), "step_ms_median": median_ms,
            "images_per_s_wall": a.batch * a.steps / (wall_ms / 1000), "peak_mem_bytes": peak, "steps": a.steps}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=os.path.join(HERE, "..", "..", "configs", "bench_gpu.yaml"))
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch", type=int, default=None, help="default: the config's data.batch_size")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--modes", default="eager,compile", help="comma-separated: eager, compile")
    a = p.parse_args()
    recipe = read_recipe(a.config)
    a.batch = a.batch or int(recipe.get("data", {}).get("batch_size", 256))
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    results = []
    for mode in a.modes.split(","):
        if mode not in ("eager", "compile"):
            p.error(f"unknown mode '{mode}' (eager, compile)")
        if mode == "compile" and not hasattr(torch, "compile"):
            print(f"torch {torch.__version__} has no torch.compile: skipping that mode", file=sys.stderr)
            continue
        try:
            results.append(measure(mode, a, recipe, device))
        except Exception as e:  # one failing mode (a compiler problem) must not lose the other's figures
            print(f"mode {mode} failed: {type(e).__name__}: {e}", file=sys.stderr)
            results.append({"bench": "pytorch", "mode": mode, "error": f"{type(e).__name__}: {e}"[:500]})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print("| engine | mode | images/s (median step) | images/s (wall) | median step ms | peak MiB |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in results:
        if "error" in r:
            print(f"| pytorch | {r['mode']} | failed: {r['error'][:80]} | | | |")
            continue
        print(f"| pytorch {r['torch']} | {r['mode']} | {r['images_per_s']:.0f} | {r['images_per_s_wall']:.0f} | "
              f"{r['step_ms_median']:.2f} | {r['peak_mem_bytes'] / 2**20:.1f} |")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
