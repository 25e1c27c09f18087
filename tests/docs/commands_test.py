#!/usr/bin/python3
"""The documentation is tested: every shell command shown in a ```bash block of README.md and of
every page under docs/ runs as written, in order (README.md first, then the pages by name), from a
clean output directory, and must exit 0.

Usage: commands_test.py SOURCE_DIR BINARY_DIR   (CTest runs it, label "docs")

How: a fresh temporary folder holds a symlink to every top-level entry of the source tree except
the outputs (build*, runs, *_out, ...), and `build` links to BINARY_DIR, so that `build/apps/...`,
`scripts/...` and `configs/...` resolve as in a checkout while whatever the commands write
(runs/, curves) lands in the temporary folder. BUILD_DIR=BINARY_DIR is exported so that the
scripts that build (scripts/build.sh via scripts/train.sh) rebuild this build, which is up to
date, so that step is quick.

PLAN below says what happens to each command: RUN it, possibly with arguments appended to keep
it short (only step caps and sizes, never anything that changes what the command does), and
optionally check files it must leave; or SKIP it with the reason. A documented command missing
from PLAN fails the test, and so does a PLAN entry no page shows any more. A command shown twice
runs once, where it first appears. The commands run only against a Release build (what
scripts/build.sh makes, and would make of any other); elsewhere the test checks PLAN against the
pages and then reports itself skipped (exit 77), or failed under CUDAGRAD_REQUIRE_ALL=1.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
import time

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
from ctest_skip import skip_or_fail  # noqa: E402

RUN, SKIP = "run", "skip"

# command as shown (continuation lines joined, comments dropped) -> what the test does with it
PLAN = {
    # The two commands.
    "scripts/train.sh": (RUN, "train.max_steps=20", ["runs/fashion_mnist_cpu/curves.png",
                                                     "runs/fashion_mnist_cpu/checkpoints/last.safetensors"]),
    "scripts/test.sh": (SKIP, "it is the test suite that runs this test (it would run itself)"),
    # The first hour.
    "scripts/plot_metrics.py runs/fashion_mnist_cpu": (RUN, "", ["runs/fashion_mnist_cpu/curves.png"]),
    "build/apps/cudagrad-train --config configs/fashion_mnist_cpu.yaml train.epochs=4 "
    "checkpoint.resume_from=runs/fashion_mnist_cpu/checkpoints/last.safetensors": (RUN, "train.max_steps=30", []),
    "build/apps/cudagrad-launch --standalone --nproc-per-node 2 build/apps/cudagrad-train --config "
    "configs/fashion_mnist_cpu.yaml output.dir=runs/two_ranks": (RUN, "train.max_steps=10",
                                                                   ["runs/two_ranks/metrics.jsonl"]),
    "scripts/plot_metrics.py runs/fashion_mnist_cpu runs/two_ranks -o runs/compare.png": (RUN, "", ["runs/compare.png"]),
    "/usr/bin/python3 bench/pytorch/time_to_accuracy.py --config configs/fashion_mnist_cpu.yaml --device cpu "
    "--target 0.9": (RUN, "--limit 1024 --epochs 1", []),
    # Measured: the CPU comparisons against PyTorch, at smoke sizes.
    "bench/cpu_compare.sh": (RUN, "--steps 1 --warmup 0", ["cpu_compare_out/cpu_compare.png"]),
    "bench/cpu_compare.sh --net narrow": (RUN, "--steps 1 --warmup 0", ["cpu_compare_out/cpu_compare.png"]),
    "bench/cpu_time_to_accuracy.sh": (RUN, "--smoke", ["cpu_tta_out/cudagrad_run/metrics.jsonl"]),
    # Data parallelism.
    "build/apps/cudagrad-launch --standalone --nproc-per-node 2 build/apps/cudagrad-train --config "
    "configs/fashion_mnist_cpu.yaml": (RUN, "train.max_steps=10", ["runs/fashion_mnist_cpu/metrics.jsonl"]),
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 build/apps/cudagrad-train --config "
    "configs/fashion_mnist_cpu.yaml output.dir=runs/mpirun": (RUN, "train.max_steps=10", ["runs/mpirun/metrics.jsonl"]),
    "build/apps/cudagrad-launch --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 "
    "--nproc-per-node 8 build/apps/cudagrad-train --config configs/fashion_mnist.yaml":
        (SKIP, "needs a second machine and GPUs; tests/apps/launch_test.cpp (TwoNodesOnOneMachineTrainTogether) "
               "runs two launchers with --nnodes 2 on this one"),
    "srun --nodes 2 --ntasks-per-node 8 --gpus-per-node 8 build/apps/cudagrad-train --config configs/fashion_mnist.yaml":
        (SKIP, "needs a Slurm cluster; tests/apps/launch_test.cpp (SlurmVariablesDriveTheTrainer) starts the "
               "trainer with the variables srun sets"),
    # On a GPU machine.
    "scripts/gpu_check.sh": (SKIP, "needs a GPU (and builds a second tree)"),
    "scripts/gpu_compare.sh throughput": (SKIP, "needs a GPU"),
    "build-gpu/apps/cudagrad-train --config configs/fashion_mnist.yaml": (SKIP, "needs a GPU (train.device: cuda)"),
    "build-gpu/apps/cudagrad-bench --config configs/bench_gpu.yaml dist.backend=modeled dist.modeled_world_size=8":
        (SKIP, "needs a GPU"),
}

OUTPUTS = re.compile(r"^(build.*|runs|out|checkpoints|.*_out|\.git)$")


def strip_comment(line):
    """The line without a trailing `# ...` comment (a # that starts a word outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def pages(source):
    """README.md, then every docs/*.md by name: the pages whose commands are tested."""
    docs = sorted(p for p in (Path(source) / "docs").glob("*.md"))
    return [Path(source) / "README.md"] + docs


def page_commands(path):
    """[(line number, command)] of every ```bash block, continuation lines joined."""
    commands, in_block, pending, start = [], False, "", 0
    with open(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if line.strip().startswith("```"):
                in_block = line.strip() == "```bash" if not in_block else False
                continue
            if not in_block:
                continue
            text = strip_comment(line) if not pending else strip_comment(line).strip()
            if not pending:
                start = number
            if text.endswith("\\"):
                pending += text[:-1].rstrip() + " "
                continue
            command = (pending + text).strip()
            pending = ""
            if command:
                commands.append((start, " ".join(command.split())))
    return commands


def make_workdir(source, binary):
    work = tempfile.mkdtemp(prefix="cudagrad_readme_")
    for name in os.listdir(source):
        if not OUTPUTS.match(name):
            os.symlink(os.path.join(source, name), os.path.join(work, name))
    os.symlink(binary, os.path.join(work, "build"))
    return work


def build_type(binary):
    """CMAKE_BUILD_TYPE of the build in BINARY_DIR ("" when unknown)."""
    try:
        with open(os.path.join(binary, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("CMAKE_BUILD_TYPE:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return ""


def main():
    source, binary = (os.path.abspath(p) for p in sys.argv[1:3])
    # (where, command): where is "page:line", the page relative to the source tree.
    commands = [(f"{page.relative_to(source)}:{line}", command)
                for page in pages(source) for line, command in page_commands(page)]
    errors = []
    shown = {c for _, c in commands}
    for where, command in commands:
        if command not in PLAN:
            errors.append(f"{where}: `{command}` is neither run nor skipped: add it to PLAN in {__file__}")
    for command in PLAN:
        if command not in shown:
            errors.append(f"PLAN lists `{command}`, which no page shows any more: remove it")
    if errors:
        print("\n".join(errors))
        return 1
    # The README's scripts build with scripts/build.sh, which configures a Release build: run in
    # another build (a sanitizer's RelWithDebInfo, a Debug one), they would turn it into Release.
    if build_type(binary) != "Release":
        return skip_or_fail(f"the documented commands run against the Release build scripts/build.sh makes; "
                            f"{binary} is a {build_type(binary) or 'unknown'} build")

    work = make_workdir(source, binary)
    env = dict(os.environ, BUILD_DIR=binary, JOBS=os.environ.get("JOBS", "2"))
    print(f"running the documented commands in {work}")
    done, failed = set(), []
    for where, command in commands:
        plan = PLAN[command]
        if plan[0] == SKIP:
            print(f"SKIP {where}: {command}\n     because {plan[1]}")
            continue
        if command in done:
            print(f"DONE {where}: {command} (ran above)")
            continue
        done.add(command)
        _, appended, expected = plan
        full = command + (" " + appended if appended else "")
        print(f"RUN  {where}: {full}", flush=True)
        t0 = time.monotonic()
        try:
            result = subprocess.run(["bash", "-c", full], cwd=work, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, timeout=600)
            code, output = result.returncode, result.stdout
        except subprocess.TimeoutExpired as e:
            code, output = "timeout (600 s)", (e.stdout or b"").decode(errors="replace")
        print(f"     exit {code} after {time.monotonic() - t0:.0f} s")
        missing = [p for p in expected if not os.path.exists(os.path.join(work, p))]
        if code != 0 or missing:
            tail = "\n".join(output.splitlines()[-60:])
            why = f"exit {code}" if code != 0 else "did not write " + ", ".join(missing)
            failed.append(f"{where}: `{full}`: {why}")
            print(f"---- its output (last 60 lines) ----\n{tail}\n----")
    if failed:
        print("FAILED:\n" + "\n".join(failed))
        return 1
    subprocess.run(["rm", "-rf", work])
    print(f"all {len(done)} documented commands that run here passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
