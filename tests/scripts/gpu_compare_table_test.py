#!/usr/bin/python3
"""scripts/gpu_compare.sh throughput builds its table from cudagrad-bench's JSON lines as the real
binary writes them: keys sorted, so the line starts with {"amp": and not {"bench":. On the first
H100 run the table said "cudagrad-bench gave no result" for that reason, while all four runs had
succeeded. Here a stand-in cudagrad-bench prints lines in the real format (copied from that run's
logs) with a rate per variant, and a stand-in for PyTorch's script prints its two lines; the test
checks that every cudagrad variant gets its own row with its own rate, its flags reached the
binary, and the ratio against the fastest PyTorch variant is computed. No GPU, torch or data needed.

Usage: gpu_compare_table_test.py SOURCE_DIR   (CTest runs it, label "scripts")
"""
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(sys.argv[1]).resolve()

# One cudagrad-bench line of the H100 run (cudagrad_cudnn.log), images/s and cuda_graph set per run.
BENCH = r'''#!/bin/bash
echo "$*" >> "$(dirname "$0")/args.log"
rate=26887.0; graph=false
case "$*" in *kernels.conv=native*) rate=20080.0 ;; esac
case "$*" in *kernels.conv=cudnn*model.channels_last=false*) rate=23362.0 ;; esac
case "$*" in *--cuda-graph*) rate=27375.0; graph=true ;; esac
echo "| cudagrad | NVIDIA H100 80GB HBM3 | batch 256 x 1 rank(s) | amp fp16 |"
echo '{"amp":true,"backward_ms":6.0,"batch":256,"bench":"cudagrad","comm":"none","comm_bytes_per_step":0,'\
'"comm_exposed_ms":0.0,"comm_modeled_total_ms":0.0,"cuda":"runtime 13.0, driver 13.0","cuda_graph":'$graph','\
'"cudnn":91900,"device":"NVIDIA H100 80GB HBM3 (sm_90, 79.2 GiB)","forward_ms":3.5,"grad_compression":"none",'\
'"images_per_s":'$rate',"images_per_s_wall":'$rate',"optimizer_ms":0.04,"peak_mem_bytes":658170368,'\
'"step_ms_median":9.52,"steps":100,"world_size":1}'
'''

# PyTorch's script (bench/pytorch/gpu_throughput.py) replaced by its two lines of that run;
# everything else the script runs with this "python" is the real interpreter.
PYTHON = r'''#!/bin/bash
if [ "$1" = bench/pytorch/gpu_throughput.py ]; then
  echo '{"bench": "pytorch", "mode": "eager", "variant": "eager NCHW", "loss0": 2.44, "compile_s": null, "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900, "batch": 256, "amp": "float16", "images_per_s": 20953.0, "step_ms_median": 12.2, "images_per_s_wall": 20756.0, "peak_mem_bytes": 706399744, "steps": 100}'
  echo '{"bench": "pytorch", "mode": "channels-last", "variant": "eager channels-last", "loss0": 2.44, "compile_s": null, "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900, "batch": 256, "amp": "float16", "images_per_s": 33995.0, "step_ms_median": 7.53, "images_per_s_wall": 32573.0, "peak_mem_bytes": 689753088, "steps": 100}'
  exit 0
fi
exec /usr/bin/python3 "$@"
'''

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    (tmp / "build" / "apps").mkdir(parents=True)
    for path, text in ((tmp / "build" / "apps" / "cudagrad-bench", BENCH), (tmp / "python", PYTHON)):
        path.write_text(text)
        path.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "BUILD_DIR": str(tmp / "build"), "OUT_DIR": str(tmp / "out"),
           "PYTHON": str(tmp / "python")}
    r = subprocess.run([str(SOURCE / "scripts" / "gpu_compare.sh"), "throughput"], cwd=SOURCE, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    table = (tmp / "out" / "compare.md").read_text() if (tmp / "out" / "compare.md").exists() else ""
    check(r.returncode == 0, f"gpu_compare.sh throughput exits 0 (got {r.returncode})")
    for variant, rate in (("cudnn", 26887), ("native", 20080), ("cudnn+nchw", 23362), ("cudnn+graph", 27375)):
        check(f"| cudagrad (conv {variant}) | {rate} |" in table, f"a row for cudagrad conv {variant} at {rate} images/s")
    check("gave no result" not in table, "no 'cudagrad-bench gave no result'")
    check("| PyTorch eager channels-last | 33995 |" in table, "PyTorch's rows are there")
    # 27375 / 33995 = 0.81
    check("cudagrad (conv cudnn+graph) / fastest PyTorch (PyTorch eager channels-last): 0.81x images/s" in table,
          "the ratio against the fastest PyTorch variant")
    args = (tmp / "build" / "apps" / "args.log").read_text().splitlines()
    check(len(args) == 4 and "--cuda-graph" in args[3] and "model.channels_last=false" in args[1],
          f"each variant's flags reached cudagrad-bench: {args}")
    if failures:
        print("---- compare.md ----\n" + table + "\n---- output ----\n" + r.stdout[-3000:])
sys.exit(1 if failures else 0)
