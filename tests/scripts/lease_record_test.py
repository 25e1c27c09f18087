#!/usr/bin/python3
"""scripts/lease_record.py turns a lease's returned logs into the JSON and .md committed under
bench/results/. Here two stand-in calls' folders hold lines in the formats the real logs had on
2026-11-28 (env.log, test.log with one failure, throughput.jsonl, bench.log, a sanitize.log cut
short in its last program); the test checks every figure lands in the record, the failure is
named, the fastest PyTorch variant and the ratios are computed, and a folder that is not a
gpu_check_out is refused. No GPU needed.

Usage: lease_record_test.py SOURCE_DIR   (CTest runs it, label "scripts")
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(sys.argv[1]).resolve()

ENV = """date: 2026-11-28T08:53:41+00:00
NVIDIA H200, 580.159.04, 143771 MiB, 1980 MHz
Build cuda_13.0.r13.0/compiler.36424714_0
torch 2.11.0+cu130 cuda 13.0 cudnn 91900
"""
TEST = """529/532 Test  #635: CudaZero.ModeledBackendShardedEqualsUnsharded ......***Failed    0.86 sec
99% tests passed, 1 tests failed out of 532

The following tests FAILED:
\t635 - CudaZero.ModeledBackendShardedEqualsUnsharded (Failed) dist_cuda gpu serial
"""
THROUGHPUT = "\n".join([
    '{"conv": "cudnn", "amp":true,"bench":"cudagrad","cudnn":91900,"images_per_s":33409.06}',
    '{"conv": "cudnn+graph", "amp":true,"bench":"cudagrad","cudnn":91900,"images_per_s":44626.0}',
    '{"bench": "pytorch", "variant": "eager NCHW", "images_per_s": 23578.0}',
    '{"bench": "pytorch", "variant": "eager channels-last", "images_per_s": 33773.0}',
]) + "\n"
BENCH = """measured peaks: copy 4194 GB/s (read + write); GEMM 8192^3 f16 753, bf16 783, f32 51 TFLOP/s
| kernel | shape | unit | native | cuDNN | native/cuDNN | native/peak |
| batch norm + relu forward (train) | f16 256x64x32x32 NHWC | GB/s | 1005.3 | 3.2 | 313.02 | 24% |
| conv forward | float16 3x32x32 -> 64 k3 s1 | TFLOP/s | 24.5 | 9.1 | 2.68 | 3% |
"""
SANITIZE = """===== memcheck kernels_cuda_augment_test
========= ERROR SUMMARY: 0 errors
===== racecheck kernels_cuda_conv_native_test
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
===== racecheck kernels_cuda_batch_norm_test
[ RUN      ] Cases/CudaBatchNormTraining.MatchesTheCpu/native_float32_nchw
"""


def main():
    with tempfile.TemporaryDirectory() as tmp:
        call1, call2 = Path(tmp, "call1"), Path(tmp, "call2")
        for d in (call1, call2):
            d.mkdir()
            (d / "summary.md").write_text("| stage | status | detail |\n")
        for name, text in [("env.log", ENV), ("test.log", TEST), ("throughput.jsonl", THROUGHPUT), ("bench.log", BENCH)]:
            (call1 / name).write_text(text)
        (call2 / "sanitize.log").write_text(SANITIZE)
        out = Path(tmp, "gpu_record")
        run = subprocess.run([sys.executable, SOURCE / "scripts/lease_record.py", "--commit", "abc1234", "--out", str(out),
                              str(call1), str(call2)], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        rec = json.loads(out.with_suffix(".json").read_text())
        env, th, ts, sz, bn = rec["environment"], rec["throughput"], rec["tests"], rec["sanitizer"], rec["kernels"]
        assert rec["commit"] == "abc1234", rec
        assert env["device"] == "NVIDIA H200" and env["driver"] == "580.159.04" and env["nvcc"] == "13.0", env
        assert env["torch"] == "2.11.0+cu130" and env["torch_cudnn"] == 91900, env
        assert th["cudagrad_images_per_s"] == {"cudnn": 33409.1, "cudnn+graph": 44626.0}, th
        assert th["pytorch_fastest"] == "eager channels-last", th
        assert th["ratio_to_pytorch_fastest"] == {"cudnn": 0.989, "cudnn+graph": 1.321}, th
        assert ts == {"run": 532, "failed": 1, "passed": 531,
                      "failures": ["CudaZero.ModeledBackendShardedEqualsUnsharded"]}, ts
        assert sz["errors"] == 2, sz
        assert sz["unfinished"] == ["racecheck kernels_cuda_batch_norm_test"], sz
        assert bn["copy_gb_s"] == 4194.0 and len(bn["batch_norm"]) == 1, bn
        assert bn["batch_norm"][0]["of_copy"] == round(1005.3 / 4194, 3), bn
        md = out.with_suffix(".md").read_text()
        for needle in ("532 run, 531 passed, 1 failed: CudaZero.ModeledBackendShardedEqualsUnsharded",
                       "| cudagrad, conv cudnn+graph | 44626 | 1.32x |", "2 errors over 3 programs"):
            assert needle in md, (needle, md)
        # A folder that is not a gpu_check_out (no summary.md) is refused, naming it.
        bad = subprocess.run([sys.executable, SOURCE / "scripts/lease_record.py", "--commit", "x", "--out", str(out),
                              tmp], capture_output=True, text=True)
        assert bad.returncode != 0 and "not a gpu_check_out folder" in bad.stderr, bad.stderr
    print("lease_record: ok")


if __name__ == "__main__":
    main()
