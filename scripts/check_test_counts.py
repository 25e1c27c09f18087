#!/usr/bin/python3
"""Did every test that exists run and pass? CTest's "100% tests passed" counts a skipped test as
passed, so a suite can look green with whole areas skipped. scripts/test.sh runs this after CTest.

Usage: check_test_counts.py BUILD_DIR JUNIT_XML [--allowed-skip REGEX] [SELECTION...]
  JUNIT_XML: what `ctest --output-junit` wrote; SELECTION: the label options the run used (-L X,
  -LE X), so that the tests it left out on purpose do not count as never run (the emulated and
  sanitizer stages run a selection); --allowed-skip: skips whose reason matches REGEX are
  legitimate too (the sanitizer stage: a test that cannot work under a sanitizer says so).

A skip is legitimate only when it is about a GPU: a test labelled "gpu", or one whose skip reason
names a GPU or CUDA (NEED_GPU()'s "needs a CUDA GPU", the no-GPU checks' "this machine has a GPU").
Every other skip is a missing tool (mpirun, torch, root, ...), which NEED_TOOL turns into a failure
under CUDAGRAD_REQUIRE_ALL=1; one seen here anyway is counted against the suite. Prints the number
of tests that exist, the GPU skips, how many must therefore pass and how many did; exit 1 when the
last two differ (a failure, a non-GPU skip, or a test that never ran), listing the culprits.
"""
import collections
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

GPU_REASON = re.compile(r"\bGPU\b|\bCUDA\b")


def stable_name(name):
    """A test's name without what changes from one listing to the next: gtest's "# GetParam() = ..."
    comment and the byte dumps of parameters without a PrintTo (they hold pointers)."""
    return re.sub(r"<[0-9A-F -]+>", "<bytes>", name.split("  # GetParam()")[0])


def existing_tests(build_dir, selection=()):
    """[(stable name, labels)] of every test CTest knows in BUILD_DIR (gtest cases discovered) that
    the CTest `selection` options pick."""
    out = subprocess.run(["ctest", "--test-dir", build_dir, "--show-only=json-v1", *selection], check=True,
                         capture_output=True, text=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        labels = [p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"]
        tests.append((stable_name(t["name"]), set(labels[0]) if labels else set()))
    return tests


def skip_reason(output):
    """The reason a skipped test gave: gtest's line after "Skipped", or a script's "skipped: ..."."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if line.endswith(": Skipped") and i + 1 < len(lines):
            return lines[i + 1].strip()
        if line.startswith("skipped:"):
            return line[len("skipped:"):].strip()
    return "(no reason printed)"


def outcomes(junit_xml):
    """[(stable name, status, skip reason)]: status "passed", "failed" or "skipped"."""
    found = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        status = {"run": "passed", "fail": "failed"}.get(case.get("status"), "skipped")
        out = case.find("system-out")
        reason = skip_reason(out.text or "") if status == "skipped" and out is not None else ""
        found.append((stable_name(case.get("name")), status, reason))
    return found


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    rest = sys.argv[3:]
    allowed = None
    if rest[:1] == ["--allowed-skip"] and len(rest) >= 2:
        allowed, rest = re.compile(rest[1]), rest[2:]
    tests, ran = existing_tests(sys.argv[1], rest), outcomes(sys.argv[2])
    labels = {name: lab for name, lab in tests}
    gpu_skips, culprits = 0, []
    for name, status, reason in sorted(ran):
        legitimate = "gpu" in labels.get(name, set()) or GPU_REASON.search(reason) or (
            allowed is not None and allowed.search(reason))
        if status == "skipped" and legitimate:
            gpu_skips += 1
        elif status != "passed":
            culprits.append(f"  {name}: {status}" + (f" ({reason})" if reason else ""))
    never_ran = collections.Counter(name for name, _ in tests) - collections.Counter(name for name, _, _ in ran)
    culprits += [f"  {name}: never ran" for name in sorted(never_ran.elements())]
    passed = sum(1 for _, status, _ in ran if status == "passed")
    must_pass = len(tests) - gpu_skips
    why = "for want of a GPU" + (f" or as /{allowed.pattern}/ allows" if allowed else "")
    print(f"test counts: {len(tests)} exist (ctest -N), {gpu_skips} skipped {why}, "
          f"so {must_pass} must pass; {passed} passed")
    if passed != must_pass:
        print("test counts: these neither passed nor skipped for a GPU:\n" + "\n".join(culprits))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
