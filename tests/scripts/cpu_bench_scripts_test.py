#!/usr/bin/python3
"""bench/cpu_time_to_accuracy.sh, bench/cpu_compare.sh and bench/cpu_step_ab.sh: bad input is
refused clearly, and the smoke-sized runs give tables with both engines (cpu_step_ab.sh: both
builds).

Usage: cpu_bench_scripts_test.py SOURCE_DIR BINARY_DIR   (CTest runs it, label "bench")

First the refusals, which need neither PyTorch nor the data, and cpu_step_ab.sh's run (the same
build as A and B, three one-step rounds: its table's medians checked against its rounds): a bad command line exits 2 naming the
option, a missing build, a Python without torch or a missing dataset exit 1 saying so; and
compare_common.sh's result_stem gives three saves in one minute three names. Then, only
when /usr/bin/python3 imports torch and Debian's Fashion-MNIST is installed (else the test reports
itself skipped, exit 77, saying which is missing; failed, exit 1, under CUDAGRAD_REQUIRE_ALL=1):
train_throughput.py --self-check (PyTorch's variants compute the same model); cpu_time_to_accuracy.sh --smoke twice, with a target nobody
reaches in 32 steps (every row "not reached", two epoch accuracies each, PyTorch in both of 1.13's
variants: eager NCHW and channels-last) and with one that anybody reaches (eager only: both rows
with a time, the ratio line), that one again for 2 rounds (a row per engine and round, the median
ratio); and cpu_compare.sh --net narrow for one step (the narrow network of scripts/train.sh,
174,970 parameters, batch 64, on both sides, PyTorch's two variants, the fastest one named).
Everything here runs Debian's torch (PYTHON=/usr/bin/python3), never bench/pytorch/venv.sh's venv:
torch.compile's variants are for the real comparisons. Timings are not checked: this machine is
shared.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "support"))
from ctest_skip import skip_or_fail  # noqa: E402

FMNIST = "/usr/share/datasets/fashion-mnist"
failures = []


def check(ok, what, output=""):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
        if output:
            print("---- output (last 30 lines) ----\n" + "\n".join(output.splitlines()[-30:]) + "\n----")


def run(args, cwd, env=None, timeout=900):
    # The scripts take PYTHON from the environment: the interpreter this test checks for torch.
    env = {**os.environ, "PYTHON": "/usr/bin/python3", **(env or {})}
    r = subprocess.run(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return r.returncode, r.stdout


def refused(script, args, code, message, cwd, env=None):
    rc, out = run([script] + args, cwd, env)
    check(rc == code and message in out, f"{os.path.basename(script)} {' '.join(args)}: exit {code} "
          f"saying '{message}' (got exit {rc})", out)


def table_rows(output):
    """{engine: [cells]} of the markdown table rows after the header; a PyTorch row is named
    "PyTorch <variant>" (its version and the "fastest" mark left out)."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("| ") else []
        if cells and cells[0] not in ("engine", "---"):
            rows[re.sub(r"^PyTorch \S+ ", "PyTorch ", cells[0]).replace(" (fastest PyTorch)", "")] = cells
    return rows


BOTH = {"cudagrad", "PyTorch eager NCHW", "PyTorch eager channels-last"}  # torch 1.13 has no torch.compile


def check_step_ab(source, binary, work, empty):
    """bench/cpu_step_ab.sh needs no PyTorch: its refusals, then the same build as A and B for three
    one-step rounds, whose table must hold both rounds and medians that are the rounds' medians."""
    ab = os.path.join(source, "bench", "cpu_step_ab.sh")
    refused(ab, [binary], 2, "give two build directories, BUILD_A and BUILD_B (got 1)", work)
    refused(ab, [binary, binary, "--net", "wide"], 2, "--net must be full or narrow", work)
    refused(ab, [binary, binary, "--rounds", "x"], 2, "take whole numbers, got 'x'", work)
    refused(ab, [binary, binary, "--rounds", "0"], 2, "--rounds and --threads must be at least 1", work)
    refused(ab, [binary, empty], 1, "not found; build it first", work)
    rc, out = run([ab, binary, binary, "--net", "narrow", "--rounds", "3", "--steps", "1", "--warmup", "0",
                   "--threads", "1"], work)
    rows = {cells[0]: cells[1:] for cells in (
        [c.strip() for c in line.strip().strip("|").split("|")] for line in out.splitlines()
        if re.match(r"\| (\d+|median) \|", line))}
    check(rc == 0 and set(rows) == {"1", "2", "3", "median"},
          f"cpu_step_ab.sh: exit 0, a row per round and the medians (got exit {rc}, rows {sorted(rows)})", out)
    if set(rows) == {"1", "2", "3", "median"}:
        a = sorted(float(rows[r][0]) for r in ("1", "2", "3"))
        b = sorted(float(rows[r][1]) for r in ("1", "2", "3"))
        check(abs(float(rows["median"][0]) - a[1]) < 0.006 and abs(float(rows["median"][1]) - b[1]) < 0.006,
              f"cpu_step_ab.sh: the median row is the rounds' medians (A {a}, B {b}, row {rows['median']})", out)
    check(f"A: {binary}/apps/cudagrad-bench-cpu (" in out and "B was faster in " in out and " of 3 rounds" in out,
          "cpu_step_ab.sh: names both builds and counts the rounds B won", out)


def check_result_stem(source, work):
    """compare_common.sh's result_stem: a second and third save in the same minute get -2 and -3
    after the time, never the first one's name (two step_bound runs once shared a name)."""
    root = os.path.join(work, "stem_root")
    os.makedirs(os.path.join(root, "bench", "results"))
    # One shell: the three names come from one minute unless the clock turns between them; then the
    # first name of the new minute is new anyway, and the check below says which case it saw.
    script = (f'ROOT={root}; NAME=t; source {source}/bench/compare_common.sh; '
              'for i in 1 2 3; do s=$(result_stem step_bound _full_2t); echo "$s"; touch "$s.md"; done')
    rc, out = run(["bash", "-c", script], work)
    names = [os.path.basename(line) for line in out.split()]
    pattern = r"step_bound_\d{4}-\d\d-\d\d_\d{4}(-[23])?_full_2t"
    ok = rc == 0 and len(names) == 3 and len(set(names)) == 3 and all(re.fullmatch(pattern, n) for n in names)
    if ok and len({n[:len("step_bound_2026-01-01_0000")] for n in names}) == 1:  # all in one minute
        first = names[0]
        ok = names[1:] == [first.replace("_full_2t", "-2_full_2t"), first.replace("_full_2t", "-3_full_2t")]
    check(ok, f"result_stem: three saves in one minute get three names ({', '.join(names)})", out)


def main():
    source, binary = (os.path.abspath(p) for p in sys.argv[1:3])
    tta = os.path.join(source, "bench", "cpu_time_to_accuracy.sh")
    compare = os.path.join(source, "bench", "cpu_compare.sh")
    work = tempfile.mkdtemp(prefix="cudagrad_cpu_bench_")
    empty = os.path.join(work, "empty")
    os.makedirs(empty)

    for script in (tta, compare):
        refused(script, ["--threads", "0", binary], 2, "must be a positive whole number", work)
        refused(script, ["--no-such-option"], 2, "unknown option --no-such-option", work)
        refused(script, [binary, "--threads"], 2, "--threads needs a value", work)
        refused(script, [empty], 1, "not found; build it first", work)
        refused(script, [binary], 1, "cannot import torch", work, {"PYTHON": "/bin/false"})
    refused(tta, ["--target", "1.5", binary], 2, "--target must be in (0, 1]", work)
    refused(tta, ["--target", "0", binary], 2, "--target must be in (0, 1]", work)
    refused(tta, ["--smoke", "--save", binary], 2, "--save keeps measurements", work)
    refused(tta, ["--rounds", "0", binary], 2, "--rounds must be a positive whole number", work)
    refused(compare, ["--net", "wide", binary], 2, "--net must be full or narrow", work)
    refused(compare, ["--widths", "16,x", binary], 2, "widths must look like", work)
    for script in (tta, compare):
        refused(script, ["--variants", "eager,turbo", binary], 2, "unknown variant 'turbo'", work)

    check_step_ab(source, binary, work, empty)
    check_result_stem(source, work)

    missing = []
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"], capture_output=True).returncode != 0:
        missing.append("/usr/bin/python3 cannot import torch (apt-get install python3-torch)")
    if not os.path.isdir(FMNIST):
        missing.append(f"no Fashion-MNIST in {FMNIST} (apt-get install dataset-fashion-mnist)")
    if not missing:
        refused(tta, [binary, "--data", empty], 1, f"{empty} has no train-images-idx3-ubyte", work)

        rc, out = run(["/usr/bin/python3", os.path.join(source, "bench", "pytorch", "train_throughput.py"),
                       "--self-check", "--threads", "2"], work)
        check(rc == 0 and "OK: eager, channels-last compute the same MiniResNet" in out,
              "train_throughput.py --self-check: PyTorch's variants compute the same model", out)

        rc, out = run([tta, binary, "--smoke", "--out", os.path.join(work, "never")], work)
        rows = table_rows(out)
        check(rc == 0 and set(rows) == BOTH, "smoke run, target 92%: exit 0, a cudagrad row and one per "
              f"PyTorch variant (got exit {rc}, rows {sorted(rows)})", out)
        for name, cells in rows.items():
            accuracies = re.findall(r"\d+\.\d\d%", cells[1])
            check(len(accuracies) == 2 and cells[2] == "not reached",
                  f"{name}: two epoch accuracies, 92% not reached after 32 steps (row {cells})", out)
        check("time to 92%: not compared" in out and "SMOKE TEST" in out and "174,970 parameters" in out,
              "the summary says why there is no time ratio, that this was a smoke test, and the network", out)

        rc, out = run([tta, binary, "--smoke", "--target", "0.001", "--variants", "eager", "--out",
                       os.path.join(work, "always")], work)
        rows = table_rows(out)
        check(rc == 0 and set(rows) == {"cudagrad", "PyTorch eager NCHW"}, f"smoke run, target 0.1%, --variants "
              f"eager: exit 0, both rows (got exit {rc}, rows {sorted(rows)})", out)
        for name, cells in rows.items():
            check(len(re.findall(r"\d+\.\d\d%", cells[1])) == 1 and re.fullmatch(r"\d+\.\d", cells[2]) is not None,
                  f"{name}: stopped after the first evaluation, with its time (row {cells})", out)
        check(re.search(r"time to 0\.1%, PyTorch / cudagrad: \d+\.\d\dx", out) is not None,
              "the time ratio is printed when both reach the target", out)

        rc, out = run([tta, binary, "--smoke", "--target", "0.001", "--rounds", "2", "--variants", "eager",
                       "--out", os.path.join(work, "rounds")], work)
        rows = table_rows(out)
        check(rc == 0 and set(rows) == {"cudagrad, round 1", "PyTorch eager NCHW, round 1", "cudagrad, round 2",
                                        "PyTorch eager NCHW, round 2"},
              f"--rounds 2: a row per engine and round (got exit {rc}, rows {sorted(rows)})", out)
        check(re.search(r"time to 0\.1%, PyTorch / cudagrad: \d+\.\d\dx \(median of the rounds' \d+\.\d\dx, "
                        r"\d+\.\d\dx\)", out) is not None, "--rounds 2: the median of the two rounds' time ratios", out)

        rc, out = run([compare, binary, "--net", "narrow", "--steps", "1", "--warmup", "0", "--rounds", "1"], work)
        rows = table_rows(out)
        check(rc == 0 and set(rows) == BOTH, f"cpu_compare.sh --net narrow: exit 0, a cudagrad row and one per "
              f"PyTorch variant (got exit {rc}, rows {sorted(rows)})", out)
        check(out.count("(fastest PyTorch)") == 1 and "ratio cudagrad / fastest PyTorch (PyTorch " in out,
              "cpu_compare.sh: the fastest PyTorch variant marked in the table and named in the ratio", out)
        check("MiniResNet [16,32,64] (narrow, 174,970 parameters), batch 64, 1x28x28" in out,
              "--net narrow is scripts/train.sh's network at its config's batch, 64, the same size on both sides", out)

    shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    if missing:
        return skip_or_fail("the runs (the refusals passed): " + "; ".join(missing))
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
