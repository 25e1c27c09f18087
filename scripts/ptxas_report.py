#!/usr/bin/env python3
"""Every CUDA kernel's registers, spills and shared memory, as ptxas reports them (issue 37 item 6).

Compiles each kernels/cuda/*.cu for one architecture with `nvcc -Xptxas -v` (the flags of the CUDA
build: C++17, --extended-lambda, -O3, the project root on the include path), reads ptxas's lines
per entry function, and writes a JSON list and a markdown table. Exits 1 if any kernel spills
(spill stores or loads above zero), naming them: the CUDA build's kernels are meant to spill
nothing on the default architecture.

  scripts/ptxas_report.py [--arch 90] [--jobs 2] [--out bench/results/ptxas_sm90]
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
ENTRY = re.compile(r"Compiling entry function '([^']+)' for 'sm_(\d+)'")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")


def nvcc():
    for candidate in (os.environ.get("CUDACXX"), "/usr/local/cuda/bin/nvcc", "nvcc"):
        if candidate and (os.path.exists(candidate) or candidate == "nvcc"):
            return candidate
    raise SystemExit("ptxas_report: no nvcc")


def compile_one(source, arch, extra):
    cmd = [nvcc(), *extra, "-std=c++17", "--extended-lambda", "-O3", f"-arch=sm_{arch}", "-I", str(ROOT),
           "-DCUDAGRAD_WITH_CUDA=1", "-DCUDAGRAD_WITH_CUDA_LIBRARIES=1", "-Xptxas", "-v", "-c", str(source),
           "-o", os.devnull]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"ptxas_report: {source.name} did not compile:\n{done.stderr[-3000:]}")
    return parse(done.stderr, source.name)


def parse(text, source):
    kernels, current = [], None
    for line in text.splitlines():
        if m := ENTRY.search(line):
            current = {"source": source, "mangled": m.group(1), "arch": int(m.group(2))}
            kernels.append(current)
        elif current and (m := PROPS.search(line)) and "stack_frame" not in current:
            current.update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
        elif current and (m := USED.search(line)):
            current.update(registers=int(m.group(1)), barriers=int(m.group(2) or 0), smem=int(m.group(3) or 0))
            current = None
    return kernels


def without_parameters(name):
    """The demangled name less its trailing parameter list (balanced, so "(anonymous namespace)" stays)."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i]
    return name


def demangle(names):
    done = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
    return done.stdout.splitlines()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="90")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=None, help="writes OUT.json and OUT.md")
    ap.add_argument("--nvcc-flag", action="append", default=[], help="one more nvcc flag (e.g. -maxrregcount=16, "
                    "which makes kernels spill: how to see this check fail)")
    a = ap.parse_args()
    sources = sorted((ROOT / "kernels" / "cuda").glob("*.cu"))
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        kernels = [k for ks in pool.map(lambda s: compile_one(s, a.arch, a.nvcc_flag), sources) for k in ks]
    for k, name in zip(kernels, demangle([k["mangled"] for k in kernels])):
        k["name"] = name
    spilling = [k for k in kernels if k.get("spill_stores", 0) or k.get("spill_loads", 0)]
    lines = [f"# ptxas resource report, sm_{a.arch}: {len(kernels)} kernels in {len(sources)} sources", "",
             "| source | kernel | registers | shared (static) | stack | spill stores | spill loads |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for k in sorted(kernels, key=lambda k: (k["source"], k["name"])):
        short = without_parameters(k["name"]).replace("|", "\\|")
        lines.append(f"| {k['source']} | `{short}` | {k.get('registers', '?')} | {k.get('smem', 0)} | "
                     f"{k.get('stack_frame', 0)} | {k.get('spill_stores', 0)} | {k.get('spill_loads', 0)} |")
    report = "\n".join(lines) + "\n"
    if a.out:
        pathlib.Path(a.out + ".json").write_text(json.dumps(kernels, indent=1) + "\n")
        pathlib.Path(a.out + ".md").write_text(report)
    else:
        sys.stdout.write(report)
    print(f"ptxas_report: {len(kernels)} kernels, {len(spilling)} spilling", file=sys.stderr)
    for k in spilling:
        print(f"  spills: {k['source']}: {k['name']} ({k['spill_stores']} B stored, {k['spill_loads']} B loaded)",
              file=sys.stderr)
    return 1 if spilling else 0


if __name__ == "__main__":
    sys.exit(main())
