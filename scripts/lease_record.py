#!/usr/bin/python3
"""One GPU lease's record (issue 37 item 7): bench/results/gpu_<date>_<time>.json and a readable .md
beside it, from the log folders scripts/gpu_lease.sh returned (gpu_check_out/ of each call, in call
order: a later call's test, sanitize or throughput logs add to the earlier ones').

  scripts/lease_record.py --commit SHA --out bench/results/gpu_2026-11-28_0859 CALL1_DIR [CALL2_DIR ...]

The JSON holds what a later lease is compared against: the device, driver, CUDA, cuDNN and PyTorch
versions, the commit, each engine's images/s per variant, PyTorch's fastest variant and every
cudagrad variant's ratio to it, the GPU tests run/passed/failed (with the failures' names),
compute-sanitizer's errors per program (and the programs a time limit cut short), and the kernel
benchmark's batch-norm rows as a fraction of the copy bandwidth measured in the same run.
Standard library only: it also runs on the GPU machine's Python.
"""
import argparse
import json
import re
import sys
from pathlib import Path


def read(path):
    return path.read_text(errors="replace") if path.is_file() else ""


def last_with(dirs, name):
    """The file `name` from the last call that wrote it (a rerun's log replaces the first's)."""
    for d in reversed(dirs):
        if (d / name).is_file():
            return d / name
    return None


def environment(dirs):
    env = read(dirs[0] / "env.log")
    out = {}
    if m := re.search(r"^date: (\S+)", env, re.M):
        out["date"] = m.group(1)
    lines = env.splitlines()
    if len(lines) > 1 and "," in lines[1]:
        name, driver, *rest = [x.strip() for x in lines[1].split(",")]
        out.update(device=name, driver=driver)
        if rest:
            out["memory"] = rest[0]
    if m := re.search(r"cuda_(\d+\.\d+)", env):
        out["nvcc"] = m.group(1)
    if m := re.search(r"^torch (\S+) cuda (\S+) cudnn (\d+)", env, re.M):
        out.update(torch=m.group(1), torch_cuda=m.group(2), torch_cudnn=int(m.group(3)))
    return out


def throughput(dirs):
    path = last_with(dirs, "throughput.jsonl")
    if not path:
        return {}
    cudagrad, pytorch, cudnn = {}, {}, None
    for line in read(path).splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if row.get("bench") == "cudagrad":
            cudagrad[row.get("conv", "?")] = round(row["images_per_s"], 1)
            cudnn = row.get("cudnn", cudnn)
        elif row.get("bench") == "pytorch":
            pytorch[row["variant"]] = round(row["images_per_s"], 1)
    out = {"cudagrad_images_per_s": cudagrad, "pytorch_images_per_s": pytorch}
    if cudnn is not None:
        out["cudagrad_cudnn"] = cudnn
    if pytorch:
        fastest = max(pytorch, key=pytorch.get)
        out["pytorch_fastest"] = fastest
        out["ratio_to_pytorch_fastest"] = {k: round(v / pytorch[fastest], 3) for k, v in cudagrad.items()}
    return out


def tests(dirs):
    path = last_with(dirs, "test.log")
    text = read(path) if path else ""
    out = {}
    # CTest's closing line: "99% tests passed, 1 tests failed out of 532" or "100% tests passed out of 139".
    if m := re.findall(r"tests passed(?:, (\d+) tests failed)? out of (\d+)", text):
        failed, ran = m[-1]
        out = {"run": int(ran), "failed": int(failed or 0)}
        out["passed"] = out["run"] - out["failed"]
        out["failures"] = re.findall(r"^\s*\d+ - (\S+) \(", text.split("The following tests FAILED:")[-1], re.M) \
            if out["failed"] else []
    return out


def sanitizer(dirs):
    path = last_with(dirs, "sanitize.log")
    if not path:
        return {}
    programs, current = [], None
    for line in read(path).splitlines():
        if m := re.match(r"^===== (\w+) (\S+)", line):
            current = {"tool": m.group(1), "program": m.group(2), "errors": None}
            programs.append(current)
        elif current and (m := re.search(r"(?:ERROR|RACECHECK) SUMMARY: (\d+)", line)):
            current["errors"] = int(m.group(1))
    return {
        "programs": programs,
        "errors": sum(p["errors"] or 0 for p in programs),
        "unfinished": [f'{p["tool"]} {p["program"]}' for p in programs if p["errors"] is None],
    }


def batch_norm_rows(dirs):
    text = read(last_with(dirs, "bench.log") or Path("/nonexistent"))
    copy = re.search(r"copy (\d+(?:\.\d+)?) GB/s", text)
    if not copy:
        return {}
    copy_gb_s = float(copy.group(1))
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("batch norm") and cells[2] == "GB/s":
            native = float(cells[3])
            rows.append({"kernel": cells[0], "shape": cells[1], "native_gb_s": native,
                         "of_copy": round(native / copy_gb_s, 3)})
    return {"copy_gb_s": copy_gb_s, "batch_norm": rows}


def markdown(rec):
    env, th, ts, sz, bn = rec["environment"], rec["throughput"], rec["tests"], rec["sanitizer"], rec["kernels"]
    lines = [f"# GPU lease {env.get('date', '?')}: {env.get('device', '?')}", "",
             f"commit {rec['commit']}; driver {env.get('driver', '?')}, nvcc {env.get('nvcc', '?')}, "
             f"cuDNN {th.get('cudagrad_cudnn', '?')}; PyTorch {env.get('torch', '?')} (CUDA {env.get('torch_cuda', '?')}, "
             f"cuDNN {env.get('torch_cudnn', '?')})", ""]
    if ts:
        lines += [f"**GPU tests**: {ts['run']} run, {ts['passed']} passed, {ts['failed']} failed"
                  + (": " + ", ".join(ts["failures"]) if ts["failures"] else ""), ""]
    if th:
        lines += ["| engine, variant | images/s (median step) | / PyTorch's fastest |", "| --- | --- | --- |"]
        for k, v in th["cudagrad_images_per_s"].items():
            lines.append(f"| cudagrad, conv {k} | {v:.0f} | {th.get('ratio_to_pytorch_fastest', {}).get(k, 0):.2f}x |")
        for k, v in th["pytorch_images_per_s"].items():
            lines.append(f"| PyTorch, {k} | {v:.0f} | {v / th['pytorch_images_per_s'][th['pytorch_fastest']]:.2f}x |")
        lines.append("")
    if bn:
        lines += [f"Batch norm against the copy bandwidth measured in the same run ({bn['copy_gb_s']:.0f} GB/s, read + write):",
                  "", "| kernel | shape | GB/s | of copy |", "| --- | --- | --- | --- |"]
        lines += [f"| {r['kernel']} | {r['shape']} | {r['native_gb_s']:.0f} | {100 * r['of_copy']:.0f}% |"
                  for r in bn["batch_norm"]]
        lines.append("")
    if sz:
        lines.append(f"**compute-sanitizer**: {sz['errors']} errors over {len(sz['programs'])} programs"
                     + (f"; cut short by the lease: {', '.join(sz['unfinished'])}" if sz["unfinished"] else ""))
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commit", required=True, help="the commit the lease built")
    ap.add_argument("--out", required=True, help="path without extension: writes OUT.json and OUT.md")
    ap.add_argument("dirs", nargs="+", type=Path, help="each call's gpu_check_out folder, in call order")
    args = ap.parse_args()
    missing = [str(d) for d in args.dirs if not (d / "summary.md").is_file()]
    if missing:
        sys.exit(f"lease_record: no summary.md in {', '.join(missing)}: not a gpu_check_out folder")
    rec = {"commit": args.commit, "environment": environment(args.dirs), "throughput": throughput(args.dirs),
           "tests": tests(args.dirs), "sanitizer": sanitizer(args.dirs), "kernels": batch_norm_rows(args.dirs)}
    Path(args.out + ".json").write_text(json.dumps(rec, indent=1) + "\n")
    Path(args.out + ".md").write_text(markdown(rec))
    print(markdown(rec))


if __name__ == "__main__":
    main()
