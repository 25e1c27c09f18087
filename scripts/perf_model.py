#!/usr/bin/env python3
"""Predicts each kernel-benchmark row's time on an H100 from counts taken without a GPU, and sets
it beside the time a lease measured (issue 37 item 6).

Inputs: the emulated GPU's traffic per row (bench/emulated_traffic_bench, JSON lines), ptxas's
resource report of the CUDA build (scripts/ptxas_report.py, JSON), and the last lease's kernel
table (the markdown bench/results/gpu_kernels_*.md that gpu_kernels_bench printed). Per launch:
  - occupancy: resident blocks per SM from registers (256 per warp granules), threads, shared
    memory (1 KB reserved per block) and the 32-block limit; waves = blocks / (SMs x resident);
  - DRAM time: the launch's footprint (distinct sectors read and written) over the copy bandwidth
    the lease measured; L1->L2 bytes (every request's sectors) are shown, not timed;
  - math time: WMMA flops (all the tiles issue, padding and zero taps included) over the lease's
    measured cuBLAS peak for the dtype; fp32 convolutions, which have no WMMA, their useful flops
    at the fp32 peak; stretched by the last wave's idle SMs (ceil(waves) / waves);
  - predicted = max(DRAM, tensor) + 2 us a launch.
This is a bound (a kernel cannot beat it), not a simulation: "measured / predicted" says how far
each kernel is from what its bytes and flops allow, and the row's limiter says which.

  scripts/perf_model.py --traffic T.jsonl --ptxas P.json --measured bench/results/gpu_kernels_h100_2026-11-27.md
"""
import argparse
import json
import re
import subprocess
import sys

SMS, REGS_PER_SM, SMEM_PER_SM, THREADS_PER_SM, BLOCKS_PER_SM = 132, 65536, 233472, 2048, 32
LAUNCH_US = 2.0


def resident_blocks(registers, threads, shared):
    warps = -(-threads // 32)
    per_warp = -(-registers * 32 // 256) * 256
    by_regs = REGS_PER_SM // max(1, per_warp * warps)
    by_smem = SMEM_PER_SM // (shared + 1024)
    return max(0, min(BLOCKS_PER_SM, THREADS_PER_SM // threads, by_regs, by_smem))


def symbol_names(objects):
    """(object, offset) -> demangled name, from each object's symbol table."""
    names = {}
    for obj in objects:
        out = subprocess.run(["nm", "-C", "--defined-only", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[1] in "tTwW":
                names[(obj, int(parts[0], 16))] = parts[2]
    return names


def measured_rows(path):
    """(kernel, shape) -> native figure and unit, and the peaks, from a gpu_kernels_*.md table."""
    rows, peaks, device = {}, {}, ""
    for line in open(path):
        if line.startswith("device:"):
            device = line.split(":", 1)[1].strip().split(";")[0]
        if m := re.search(r"copy (\d+) GB/s.*f16 (\d+), bf16 (\d+), f32 (\d+) TFLOP/s", line):
            peaks = {"copy": float(m[1]), "float16": float(m[2]), "bfloat16": float(m[3]), "float32": float(m[4])}
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 7 and cells[2] in ("TFLOP/s", "GB/s"):
            rows[(cells[0], cells[1])] = (float(cells[3]), cells[2])
    return rows, peaks, device


# Bytes gpu_kernels_bench counts for a GB/s row, in activations (its comments say which).
BENCH_ACTIVATIONS = {"batch norm + relu forward (train)": 2, "batch norm + add + relu forward (train)": 3,
                     "batch norm + relu backward": 4, "batch norm + add + relu backward": 5,
                     "relu forward": 2, "relu backward": 3, "add_relu": 3}


def conv_flops(shape):
    """The useful multiply-adds x 2 of a convolution row, as gpu_kernels_bench counts them."""
    m = re.search(r"(\d+)x(\d+)x(\d+) -> (\d+) k(\d+) s(\d+)", shape)
    if not m:
        return 0.0
    c_in, h, w, c_out, k, s = map(int, m.groups())
    pad = k // 2
    out_h, out_w = (h + 2 * pad - k) // s + 1, (w + 2 * pad - k) // s + 1
    return 2.0 * 256 * c_out * out_h * out_w * c_in * k * k


def activation_bytes(shape):
    n, c, h, w = map(int, re.search(r"(\d+)x(\d+)x(\d+)x(\d+)", shape).groups())
    return 2 * n * c * h * w  # f16


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--traffic", required=True)
    ap.add_argument("--ptxas", required=True)
    ap.add_argument("--measured", required=True, help="a gpu_kernels_*.md of a lease")
    ap.add_argument("--kernels-since", default="", help="a note for rows whose kernels changed after that lease")
    a = ap.parse_args()
    rows = [json.loads(line) for line in open(a.traffic) if line.strip()]
    ptxas = {re.sub(r"\s+", "", k["name"]): k for k in json.load(open(a.ptxas))}
    names = symbol_names({l["entry_object"] for r in rows for l in r["launches"] if l["entry_object"]})
    measured, peaks, device = measured_rows(a.measured)
    if not peaks:
        sys.exit(f"perf_model: no measured peaks in {a.measured}")
    print(f"| kernel | shape | launches | waves | DRAM MB | L1->L2 MB | coalesced | WMMA GFLOP | limiter | "
          f"predicted us | measured us | measured / predicted |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    unmatched = set()
    for r in rows:
        dtype = r["shape"].split()[0].replace("f16", "float16")
        total_us, dram_mb, l2_mb, flops, least, sectors, waves, limiter = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, [], {}
        for l in r["launches"]:
            name = names.get((l["entry_object"], l["entry_offset"]), l["name"])
            k = ptxas.get(re.sub(r"\s+", "", name))
            if not k:
                unmatched.add(name)
            regs = k["registers"] if k else 32
            shared = l["shared_bytes"] if not k else max(l["shared_bytes"], k.get("smem", 0))
            resident = resident_blocks(regs, l["threads_per_block"], shared) or 1
            w = l["blocks"] / (SMS * resident)
            waves.append(w)
            dram = 32 * (l["loads"]["footprint_sectors"] + l["stores"]["footprint_sectors"])
            dram_us = dram / (peaks["copy"] * 1e3)
            # fp32 convolutions run on the FMA units (no WMMA): their useful flops at the fp32 peak.
            math = l["mma_flops"] or (conv_flops(r["shape"]) / len(r["launches"]) if dtype == "float32" else 0)
            tensor_us = math / (peaks.get(dtype, peaks["float16"]) * 1e6)
            tensor_us *= -(-w // 1) / w if w > 0 else 1
            term = "DRAM" if dram_us >= tensor_us else ("tensor" if l["mma_flops"] else "FMA")
            limiter[term] = limiter.get(term, 0) + max(dram_us, tensor_us)
            total_us += max(dram_us, tensor_us) + LAUNCH_US
            dram_mb += dram / 1e6
            l2_mb += 32 * (l["loads"]["sectors"] + l["stores"]["sectors"]) / 1e6
            flops += l["mma_flops"]
            least += l["loads"]["least_sectors"] + l["stores"]["least_sectors"]
            sectors += l["loads"]["sectors"] + l["stores"]["sectors"]
        m = measured.get((r["kernel"], r["shape"]))
        measured_us = ""
        if m and m[1] == "TFLOP/s":
            measured_us = conv_flops(r["shape"]) / (m[0] * 1e6)
        elif m and m[1] == "GB/s" and r["kernel"] in BENCH_ACTIVATIONS:
            measured_us = BENCH_ACTIVATIONS[r["kernel"]] * activation_bytes(r["shape"]) / (m[0] * 1e3)
        ratio = f"{measured_us / total_us:.2f}" if measured_us else "-"
        print(f"| {r['kernel']} | {r['shape']} | {len(r['launches'])} | {', '.join(f'{w:.2f}' for w in waves)} | "
              f"{dram_mb:.1f} | {l2_mb:.1f} | {least / sectors if sectors else 1:.2f} | {flops / 1e9:.1f} | "
              f"{max(limiter, key=limiter.get) if limiter else '-'} | {total_us:.1f} | "
              f"{f'{measured_us:.1f}' if measured_us else '-'} | {ratio} |")
    print(f"\nDevice model: {SMS} SMs; copy {peaks['copy']:.0f} GB/s, tensor f16 {peaks['float16']:.0f} / f32 "
          f"{peaks['float32']:.0f} TFLOP/s, as measured on {device} ({a.measured}); {LAUNCH_US:.0f} us a launch.")
    if unmatched:
        print(f"\nNo ptxas entry for {len(unmatched)} kernels (32 registers assumed): " +
              "; ".join(sorted(n[:120] for n in unmatched)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
