#!/usr/bin/env python3
"""Lists functions longer than a limit (default 80 lines, signature to closing brace), or with a
cyclomatic complexity over a limit (--max-complexity: 1 + the decisions in the body: if, for,
while, case, catch, &&, ||, ?), in C++ and CUDA sources, by a brace-matching heuristic: comments, strings and preprocessor lines are blanked,
then a `{` whose preceding text (back to the last `;`, `{` or `}`) ends in `)` plus qualifiers and
does not start with a control keyword opens a function body; namespaces, classes, structs and
enums are descended into. Lambdas and local classes count toward their enclosing function.

Usage: scripts/long_functions.py [--max N] [--max-complexity C] [DIR...]
       (default: every source folder)
Prints `path:line: name: N lines` (longest first) and `path:line: name: complexity C`; exits 1
when any is found, 0 otherwise. CTest runs it with --max 60 --max-complexity 15 (label meta)."""
import argparse
import os
import re
import sys

EXTENSIONS = (".cpp", ".h", ".cu", ".cuh")
CONTAINERS = re.compile(r"\b(namespace|class|struct|union|enum)\b")
DECISIONS = re.compile(r"\b(?:if|for|while|case|catch)\b|&&|\|\||\?")
DEFAULT_DIRS = ["apps", "data", "dist", "emulator", "engine", "kernels", "nn", "train", "util"]
NOT_FUNCTIONS = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try|return)\b|=\s*$|=\s*\[|\]\s*\(")


def blank(text):
    """Replaces comments, string/char literals and preprocessor lines by spaces, keeping newlines."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i) or (c == "#" and (i == 0 or text[i - 1] == "\n")):
            j = text.find("\n", i)
            j = n if j < 0 else j
            while c == "#" and j > 0 and text[j - 1] == "\\":  # continued macro lines
                j2 = text.find("\n", j + 1)
                j = n if j2 < 0 else j2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == '"' and i > 0 and text[i - 1] == "R":  # raw string R"(...)"
                end = text.find(')"', i)
                j = n if end < 0 else end + 2
            else:
                j = i + 1
                while j < n and text[j] != c:
                    j += 2 if text[j] == "\\" else 1
                j += 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def function_name(head):
    """The identifier before the parameter list: the last top-level (...) group of the head."""
    depth, close = 0, head.rfind(")")
    for j in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(head[j], 0)
        if depth == 0:
            match = re.search(r"([~\w:]+(?:<[^<>]*>)?)\s*$", head[:j])
            return match.group(1) if match else "?"
    return "?"


def functions(text):
    """Yields (name, first line, last line, complexity) of each function body outside other
    function bodies."""
    code = blank(text)
    stack = []  # per open brace: "container", "function" or "other"
    last_stop = 0  # index just after the last ; { or } at container level
    start = None
    for i, c in enumerate(code):
        inside_function = "function" in stack
        if c == "{":
            kind = "other"
            if not inside_function:
                head = code[last_stop:i].strip()
                if CONTAINERS.search(head.split("(")[0]):
                    kind = "container"
                elif re.search(r"\)\s*(const|noexcept|override|final|mutable|->\s*[\w:<>,\s*&]+|\s)*$", head) \
                        and not NOT_FUNCTIONS.search(head):
                    kind = "function"
                    first_line = code.count("\n", 0, i - len(code[last_stop:i].lstrip())) + 1
                    start = (function_name(head), first_line, i)
            stack.append(kind)
            if not inside_function:
                last_stop = i + 1
        elif c == "}":
            kind = stack.pop() if stack else "other"
            if kind == "function" and "function" not in stack:
                yield start[0], start[1], code.count("\n", 0, i) + 1, 1 + len(DECISIONS.findall(code[start[2]:i]))
            if "function" not in stack:
                last_stop = i + 1
        elif c == ";" and not inside_function:
            last_stop = i + 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max", type=int, default=80)
    parser.add_argument("--max-complexity", type=int, default=0, help="0: not checked")
    parser.add_argument("dirs", nargs="*", default=DEFAULT_DIRS)
    args = parser.parse_args()
    found, tangled = [], []
    for d in args.dirs:
        for root, _, files in os.walk(d):
            for f in sorted(files):
                if not f.endswith(EXTENSIONS):
                    continue
                path = os.path.join(root, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for name, first, last, complexity in functions(fh.read()):
                        if last - first + 1 > args.max:
                            found.append((last - first + 1, path, first, name))
                        if args.max_complexity and complexity > args.max_complexity:
                            tangled.append((complexity, path, first, name))
    for length, path, first, name in sorted(found, reverse=True):
        print(f"{path}:{first}: {name}: {length} lines")
    for complexity, path, first, name in sorted(tangled, reverse=True):
        print(f"{path}:{first}: {name}: complexity {complexity}")
    print(f"{len(found)} function(s) over {args.max} lines in {', '.join(args.dirs)}")
    if args.max_complexity:
        print(f"{len(tangled)} function(s) over complexity {args.max_complexity}")
    return 1 if found or tangled else 0


if __name__ == "__main__":
    sys.exit(main())
