#!/usr/bin/python3
"""Every kernel under kernels/ starts through launch_kernel and declares its shared arrays with
CG_SHARED (kernels/cuda/launch.h): outside that header, no file under kernels/ may write a bare
<<<...>>> launch (it would skip the after-launch check, and the emulated build, which compiles
the sources as C++, could not compile it) or a raw __shared__ (the emulated GPU would not poison
it, so a read before any write would pass there by luck). Comments are left out of the search.

Usage: kernel_hooks_test.py SOURCE_DIR   (CTest runs it, label "meta")
"""
import re
import sys
from pathlib import Path

HELPER = Path("kernels/cuda/launch.h")
FORBIDDEN = {"<<<": "a bare <<<...>>> launch (use launch_kernel)",
             "__shared__": "a raw __shared__ (use CG_SHARED)"}
# Comments, and string literals kept as they are so that a "//" inside one is not a comment.
COMMENT_OR_STRING = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.DOTALL)


def code_lines(text):
    """The text with its comments blanked out (newlines kept, so line numbers stay)."""
    def blank(m):
        s = m.group(0)
        return s if s.startswith('"') else re.sub(r"[^\n]", " ", s)
    return COMMENT_OR_STRING.sub(blank, text).splitlines()


def problems_in(root):
    found = []
    for path in sorted((root / "kernels").rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or rel == HELPER or path.suffix not in (".cu", ".cuh", ".h", ".cpp", ".hpp"):
            continue
        for number, line in enumerate(code_lines(path.read_text(errors="replace")), start=1):
            found += [f"{rel}:{number}: {why}: {line.strip()}" for token, why in FORBIDDEN.items() if token in line]
    return found


def main():
    root = Path(sys.argv[1])
    if not (root / HELPER).is_file():
        sys.exit(f"kernel_hooks_test: no {HELPER} under {root}")
    found = problems_in(root)
    if found:
        print("\n".join(found))
        sys.exit(1)
    print(f"kernel_hooks_test: no bare <<<...>>> or __shared__ under {root / 'kernels'} outside {HELPER}")


if __name__ == "__main__":
    main()
