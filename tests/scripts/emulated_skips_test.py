#!/usr/bin/python3
"""scripts/emulated_skips.py lists each skipped test under its reason, and only skipped ones: a
CTest log with a passed, a failed and two skipped tests (one reason each) gives two rows.

Usage: emulated_skips_test.py SOURCE_DIR   (CTest runs it, label "scripts")
"""
import subprocess
import sys
import tempfile
from pathlib import Path


def record(n, name, output):
    return (f"{n}/4 Testing: {name}\n{n}/4 Test: {name}  # GetParam() = 4-byte object\n"
            f"Command: \"x\"\nOutput:\n----------\n{output}\n<end of output>\nTest time =   0.01 sec\n")


LOG = (record(1, "A.Passes", "[ RUN      ] A.Passes\n[       OK ] A.Passes")
       + record(2, "B.NeedsCudnn", "b.cpp:3: Skipped\nneeds a real GPU: cuDNN is not emulated\n[  SKIPPED ] B.NeedsCudnn")
       + record(3, "C.Fails", "c.cpp:9: Failure\nSkipped\n[  FAILED  ] C.Fails")
       + record(4, "D/NeedsNccl", "d.cpp:5: Skipped\nneeds a real GPU: NCCL is not emulated\n[  SKIPPED ] D/NeedsNccl"))


def main():
    script = Path(sys.argv[1]) / "scripts" / "emulated_skips.py"
    with tempfile.TemporaryDirectory() as build:
        log = Path(build) / "Testing" / "Temporary" / "LastTest.log"
        log.parent.mkdir(parents=True)
        log.write_text(LOG)
        out = subprocess.run([sys.executable, str(script), build], check=True, stdout=subprocess.PIPE, text=True).stdout
        missing = subprocess.run([sys.executable, str(script), build + "/nowhere"], stderr=subprocess.PIPE, text=True)
    expected = ["2 GPU tests skipped",
                "| needs a real GPU: NCCL is not emulated (1) | `D/NeedsNccl` |",
                "| needs a real GPU: cuDNN is not emulated (1) | `B.NeedsCudnn` |"]
    problems = [f"missing: {line}" for line in expected if line not in out]
    problems += [f"lists {name}, which did not skip" for name in ("A.Passes", "C.Fails") if name in out]
    if missing.returncode != 1 or "run the emulated suite first" not in missing.stderr:
        problems.append(f"a missing log: exit {missing.returncode}, {missing.stderr!r}")
    if problems:
        print("\n".join(problems) + "\n---- its output ----\n" + out)
        return 1
    print("emulated_skips.py lists exactly the skipped tests under their reasons")
    return 0


if __name__ == "__main__":
    sys.exit(main())
