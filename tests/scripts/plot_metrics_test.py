#!/usr/bin/python3
"""scripts/plot_metrics.py and scripts/plot_bars.py render real PNGs; bad input fails clearly.

Usage: plot_metrics_test.py SOURCE_DIR   (CTest runs it)

The fixture tests/scripts/fixtures/synthetic_run/metrics.jsonl is the metrics file of a real short
cudagrad-train run (synthetic data, resumed once: some steps appear twice). The checks: exit 0,
the path printed, a PNG (signature, IHDR chunk) of the size the script asks for (1200x800), large
enough to hold drawn curves rather than empty axes; two runs overlaid with -o; a missing run
folder and a malformed line exit 2 naming the problem.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def png_size(path):
    """(width, height) from the IHDR chunk, or None when the file is not a PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


def run(*args):
    r = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return r.returncode, r.stdout, r.stderr


def main():
    source = os.path.abspath(sys.argv[1])
    plot = os.path.join(source, "scripts", "plot_metrics.py")
    bars = os.path.join(source, "scripts", "plot_bars.py")
    fixture = os.path.join(source, "tests", "scripts", "fixtures", "synthetic_run")
    work = tempfile.mkdtemp(prefix="plot_metrics_test_")
    run_a = os.path.join(work, "run_a")
    run_b = os.path.join(work, "run_b")
    shutil.copytree(fixture, run_a)
    shutil.copytree(fixture, run_b)

    code, out, err = run(plot, run_a)
    png = os.path.join(run_a, "curves.png")
    check(code == 0, f"one run: exit 0 (got {code}; {err.strip()})")
    check(png in out, f"one run: prints the path ({out.strip()})")
    check(os.path.exists(png) and png_size(png) == (1200, 800), f"one run: a 1200x800 PNG ({png_size(png) if os.path.exists(png) else 'missing'})")
    check(os.path.exists(png) and os.path.getsize(png) > 40_000, f"one run: holds drawn curves ({os.path.getsize(png) if os.path.exists(png) else 0} bytes)")

    # Two runs overlaid: the second with a higher loss and lower accuracy than the first.
    with open(os.path.join(run_b, "metrics.jsonl")) as f:
        records = [json.loads(l) for l in f if l.strip()]
    for r in records:
        if "loss" in r:
            r["loss"] *= 1.3
            r["accuracy"] *= 0.9
    with open(os.path.join(run_b, "metrics.jsonl"), "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in records))
    both = os.path.join(work, "both.png")
    code, out, err = run(plot, run_a, run_b, "-o", both)
    check(code == 0 and png_size(both) == (1200, 800), f"two runs with -o: exit 0 and a PNG ({code}; {err.strip()})")
    check(os.path.exists(both) and os.path.getsize(both) != os.path.getsize(png), "two runs: a different chart (legend of both)")

    code, out, err = run(plot, os.path.join(work, "nonexistent"))
    check(code == 2 and "metrics.jsonl not found" in err, f"missing run: exit 2 naming the file ({code}; {err.strip()})")
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "metrics.jsonl"), "w") as f:
        f.write('{"kind":"train","step":1,"loss":1.0}\nnot json\n{"kind":"train","step":2,"loss":0.9}\n')
    code, out, err = run(plot, bad)
    check(code == 2 and "metrics.jsonl:2" in err, f"malformed line: exit 2 naming file:line ({code}; {err.strip()})")
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    open(os.path.join(empty, "metrics.jsonl"), "w").close()
    code, out, err = run(plot, empty)
    check(code == 1 and "no train or eval records" in err, f"no records: exit 1 ({code}; {err.strip()})")

    chart = os.path.join(work, "bars.png")
    code, out, err = run(bars, "-o", chart, "--title", "t", "--ylabel", "images/s", "cudagrad=104.3", "PyTorch=115.2")
    check(code == 0 and png_size(chart) is not None, f"bar chart: exit 0 and a PNG ({code}; {err.strip()})")
    code, out, err = run(bars, "-o", chart, "cudagrad=fast")
    check(code == 2 and "LABEL=VALUE" in err, f"bar chart: a non-number exits 2 ({code}; {err.strip()})")

    if failures:
        print(f"{len(failures)} check(s) failed; files kept in {work}")
        return 1
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
