"""PyTorch's side of the GPU throughput comparison (scripts/gpu_compare.sh): MiniResNet training
steps with the recipe of --config (configs/bench_gpu.yaml: batch 256 of 32x32x3 images, SGD lr 0.2
momentum 0.9 nesterov weight decay 5e-4, fp16 autocast with GradScaler) on random images resident
on the GPU, cudnn.benchmark, in each of PyTorch's variants (variants.py): eager NCHW, eager
channels-last, torch.compile NCHW, torch.compile channels-last, and torch.compile(mode="max-autotune")
channels-last, whose graphs replay as CUDA graphs. A compiled variant is compiled during warm-up (at
least 3 steps; the first step's time is reported as compile_s) and the JSON says whether anything
was recompiled inside the timed window. Each variant: warm-up steps, then every step timed with CUDA
events; reports the median step, the wall-clock rate over all timed steps (gaps between steps
included), peak memory (reset after warm-up) and loss0, the first step's loss (the same for every
variant up to fp16 rounding: the same model).
Prints a table, then one JSON line per variant ("mode": its name). `--device cpu --batch 8
--steps 3` is a smoke test that runs anywhere (the variants this torch cannot run there are
skipped, saying why: torch.compile before 2.0, max-autotune off a GPU)."""
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
import variants  # noqa: E402
from time_to_accuracy import read_recipe  # noqa: E402

SPEC_PARAMS_RGB = 2_777_674  # shared/docs/miniresnet.md, in_channels 3


def make_model(recipe, device):
    m = recipe.get("model", {})
    torch.manual_seed(0)
    model = MiniResNet(int(m.get("in_channels", 3)), int(m.get("num_classes", 10)),
                       tuple(m.get("widths", [64, 128, 256])), tuple(m.get("blocks", [2, 2, 2]))).to(device).train()
    n = count(model)[0]
    if int(m.get("in_channels", 3)) == 3 and n != SPEC_PARAMS_RGB:
        raise SystemExit(f"MiniResNet has {n} parameters, the spec says {SPEC_PARAMS_RGB}")
    return model


def measure(mode, a, recipe, device):
    cuda = device.type == "cuda"
    optim, amp_cfg = recipe.get("optim", {}), recipe.get("amp", {})
    model = make_model(recipe, device)
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
    run, to_input = variants.prepare(model, mode)
    # CUDA graphs (max-autotune) reuse their output memory: each step must be marked as a new one.
    mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None) \
        if mode == "max-autotune" else None
    size = int(recipe.get("data", {}).get("image_size", 32))
    channels = int(recipe.get("model", {}).get("in_channels", 3))
    gen = torch.Generator(device="cpu").manual_seed(1)
    batches = []
    for i in range(4):  # a few distinct batches, cycled, as cudagrad-bench does
        x = to_input(torch.randn(a.batch, channels, size, size, generator=gen).to(device))
        y = torch.randint(0, 10, (a.batch,), generator=gen).to(device)
        batches.append((x, y))

    def step(x, y):
        if mark_step:
            mark_step()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=amp_dtype, enabled=amp):
            loss = F.cross_entropy(run(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    variants.check_layout(run, batches[0][0], mode)
    warmup = max(a.warmup, 3) if variants.compiled(mode) else max(a.warmup, 1)
    t0 = time.perf_counter()
    loss0 = step(*batches[0]).item()  # .item() waits for the GPU: the first step's whole time
    first_s = time.perf_counter() - t0
    for i in range(1, warmup):
        step(*batches[i % len(batches)])
    graphs_before = variants.compile_count()
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
    return {"bench": "pytorch", "mode": mode, "variant": variants.LABELS[mode], "loss0": loss0,
            "compile_s": first_s if variants.compiled(mode) else None,
            "recompiled_in_timed_window": variants.compile_count() != graphs_before, "device": torch.cuda.get_device_name(device) if cuda else "cpu",
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
    p.add_argument("--variants", "--modes", dest="modes", default=",".join(variants.VARIANTS),
                   help=f"comma-separated, of: {', '.join(variants.VARIANTS)} (default: all)")
    a = p.parse_args()
    recipe = read_recipe(a.config)
    a.batch = a.batch or int(recipe.get("data", {}).get("batch_size", 256))
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    results = []
    try:
        modes = variants.parse(a.modes)
    except ValueError as e:
        p.error(str(e))
    for mode in modes:
        why = variants.supported(mode)
        if why is None and mode == "max-autotune" and device.type != "cuda":
            why = "max-autotune is for the GPU (CUDA graphs)"
        if why:
            print(f"skipping variant {mode}: {why}", file=sys.stderr)
            continue
        try:
            results.append(measure(mode, a, recipe, device))
        except Exception as e:  # one failing mode (a compiler problem) must not lose the other's figures
            print(f"mode {mode} failed: {type(e).__name__}: {e}", file=sys.stderr)
            results.append({"bench": "pytorch", "mode": mode, "error": f"{type(e).__name__}: {e}"[:500]})
        if device.type == "cuda":
            torch.cuda.empty_cache()
    print("| engine | variant | images/s (median step) | images/s (wall) | median step ms | peak MiB | compile s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        if "error" in r:
            print(f"| pytorch | {r['mode']} | failed: {r['error'][:80]} | | | | |")
            continue
        compiled = "-" if r["compile_s"] is None else f"{r['compile_s']:.1f}"
        print(f"| pytorch {r['torch']} | {r['mode']} | {r['images_per_s']:.0f} | {r['images_per_s_wall']:.0f} | "
              f"{r['step_ms_median']:.2f} | {r['peak_mem_bytes'] / 2**20:.1f} | {compiled} |")
    for r in results:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
