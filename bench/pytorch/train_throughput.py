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
from miniresnet import MiniResNet, count, spec_keys  # noqa: E402
import variants  # noqa: E402


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


def setup(a, variant):
    """The model (seed 0), its optimizer, the fixed batch, and the variant's callable model."""
    torch.manual_seed(0)
    widths = tuple(int(w) for w in a.widths.split(","))
    model = MiniResNet(a.in_channels, 10, widths, (2,) * len(widths)).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch_size, a.in_channels, a.image_size, a.image_size)
    y = torch.arange(a.batch_size) * 7 % 10
    run, to_input = variants.prepare(model, variant)
    x = to_input(x)
    variants.check_layout(run, x, variant)
    return model, opt, run, x, y


def train_step(run, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(run(x), y)
    loss.backward()
    opt.step()
    return loss


def self_check(a):
    """Every variant this torch runs against eager NCHW, on a small network: the same step-0 loss
    and the same loss after two SGD steps (float tolerance: the layouts and inductor's fused
    kernels sum in other orders), plus the spec's parameter counts and state-dict keys."""
    for kwargs, params in ((dict(), 2_777_674), (dict(in_channels=1, widths=(16, 32, 64)), 174_970)):
        model = MiniResNet(**kwargs)
        assert count(model)[0] == params, f"MiniResNet({kwargs}): {count(model)[0]} parameters, spec {params}"
        assert list(model.state_dict()) == spec_keys(kwargs.get("widths", (64, 128, 256)))
    losses = {}
    for variant in variants.CPU_VARIANTS:
        why = variants.supported(variant)
        if why:
            print(f"self-check: {variant} skipped: {why}")
            continue
        model, opt, run, x, y = setup(a, variant)
        history = [train_step(run, opt, x, y).item() for _ in range(3)]
        losses[variant] = history
        print(f"self-check: {variants.LABELS[variant]}: loss at steps 0..2 {history}")
    ref = losses["eager"]
    for variant, history in losses.items():
        # Step 0 sees identical weights: only summation order differs. Two updates later the
        # differences have gone through the optimizer, hence the looser bound.
        assert abs(history[0] - ref[0]) <= 1e-4 * abs(ref[0]), f"{variant}: step-0 loss {history[0]} != eager {ref[0]}"
        assert abs(history[2] - ref[2]) <= 1e-3 * abs(ref[2]), f"{variant}: step-2 loss {history[2]} != eager {ref[2]}"
    print(f"OK: {', '.join(losses)} compute the same MiniResNet (torch {torch.__version__})")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=positive, default=os.cpu_count(), help="intra-op threads (default: all cores)")
    p.add_argument("--batch-size", type=positive, default=64)
    p.add_argument("--steps", type=positive, default=20, help="timed steps")
    p.add_argument("--warmup", type=non_negative, default=3, help="untimed steps first")
    p.add_argument("--widths", default="64,128,256", help="stage widths, comma-separated")
    p.add_argument("--in-channels", type=positive, default=3)
    p.add_argument("--image-size", type=positive, default=32)
    p.add_argument("--variant", default="eager", choices=variants.CPU_VARIANTS)
    p.add_argument("--self-check", action="store_true",
                   help="assert that every variant computes the same model (small network), then exit")
    a = p.parse_args()
    # Debian's build starts with 1 thread on this machine: always set the count explicitly so
    # both engines run with the same number.
    torch.set_num_threads(a.threads)
    if a.self_check:
        a.widths, a.in_channels, a.image_size, a.batch_size = "8,16,32", 3, 16, 8
        self_check(a)
        return
    why = variants.supported(a.variant)
    if why:
        sys.exit(f"train_throughput: error: --variant {a.variant}: {why}")
    model, opt, run, x, y = setup(a, a.variant)
    widths = tuple(int(w) for w in a.widths.split(","))
    warmup = max(a.warmup, 2) if variants.compiled(a.variant) else a.warmup

    step_s = []
    loss0 = compile_s = None
    graphs_before = None
    cpu_start = time.process_time()  # all threads of the process, as cudagrad-bench-cpu's
    for step in range(warmup + a.steps):
        if step == warmup:
            start, cpu_start = time.perf_counter(), time.process_time()
            graphs_before = variants.compile_count()
        t0 = time.perf_counter()
        loss = train_step(run, opt, x, y)
        if step == 0:
            loss0 = loss.item()
            compile_s = time.perf_counter() - t0 if variants.compiled(a.variant) else None
        if step >= warmup:
            step_s.append(time.perf_counter() - t0)
    total_s = time.perf_counter() - start
    cpu_ms_per_step = (time.process_time() - cpu_start) * 1000 / a.steps
    recompiled = variants.compile_count() != graphs_before
    # images/s over the whole timed window (not 1/median), so pauses between steps count too.
    ips = a.batch_size * a.steps / total_s
    median_ms = statistics.median(step_s) * 1000
    compiled = f"; compiled in {compile_s:.1f} s, untimed" if compile_s is not None else ""
    print(f"pytorch {torch.__version__} {variants.LABELS[a.variant]}: MiniResNet widths {list(widths)}, "
          f"batch {a.batch_size}, {a.in_channels}x{a.image_size}x{a.image_size}, {torch.get_num_threads()} threads: "
          f"{ips:.1f} images/s (median step {median_ms:.1f} ms; {cpu_ms_per_step:.1f} ms of CPU time per step, "
          f"all threads{compiled}; step-0 loss {loss0:.6f})")
    if recompiled:
        print("warning: torch.compile recompiled inside the timed window", file=sys.stderr)
    print(json.dumps({"engine": "pytorch", "version": torch.__version__, "variant": a.variant,
                      "python": sys.executable, "threads": torch.get_num_threads(),
                      "batch": a.batch_size, "images_per_s": ips, "median_step_ms": median_ms,
                      "cpu_ms_per_step": cpu_ms_per_step, "parameters": sum(p.numel() for p in model.parameters()),
                      "loss0": loss0, "compile_s": compile_s, "recompiled_in_timed_window": recompiled}))


if __name__ == "__main__":
    main()
