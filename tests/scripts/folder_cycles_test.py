#!/usr/bin/python3
"""Dependencies between folders run one way: no two folders of the source tree include each other,
directly (a file in A includes one in B while a file in B includes one in A). A folder and its
subfolder count as two folders (engine/ and engine/conv/), so an op family's folder may use the
engine's core but the core may not reach back into a family. Each include is read as written
("engine/conv/conv.h", from the source root); comments are not read as includes.

Usage: folder_cycles_test.py SOURCE_DIR   (CTest runs it, label "meta")
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

TOP_FOLDERS = ("util", "kernels", "engine", "data", "nn", "dist", "train", "apps", "emulator", "bench",
               "fuzz", "tests")
SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.MULTILINE)


def folder_edges(root):
    """{(from_folder, to_folder): [the first include that makes the edge, as "file -> header"]}."""
    edges = defaultdict(list)
    for top in TOP_FOLDERS:
        for path in sorted((root / top).rglob("*")):
            if not path.is_file() or path.suffix not in SUFFIXES:
                continue
            src = path.parent.relative_to(root).as_posix()
            for header in INCLUDE.findall(path.read_text(errors="replace")):
                dst = str(Path(header).parent.as_posix())
                if dst not in (".", src) and header.split("/")[0] in TOP_FOLDERS:
                    edges[(src, dst)].append(f"{path.relative_to(root)} -> {header}")
    return edges


def cycles(edges):
    found = []
    for (a, b), why in sorted(edges.items()):
        if a < b and (b, a) in edges:
            found.append(f"{a} <-> {b}:\n    {why[0]}\n    {edges[(b, a)][0]}")
    return found


def main():
    root = Path(sys.argv[1])
    if not (root / "engine").is_dir():
        sys.exit(f"folder_cycles_test: no engine/ under {root}")
    edges = folder_edges(root)
    found = cycles(edges)
    if found:
        print("folders that include each other:\n" + "\n".join(found))
        sys.exit(1)
    print(f"folder_cycles_test: {len(edges)} folder-to-folder dependencies under {root}, none in both directions")


if __name__ == "__main__":
    main()
