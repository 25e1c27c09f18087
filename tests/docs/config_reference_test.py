#!/usr/bin/python3
"""docs/config.md's key tables are the schema's: the part between its BEGIN and END markers must
equal what `cudagrad-train --config-reference` prints, so the written reference cannot drift from
--help (both come from train_config.cpp's schema).

Usage: config_reference_test.py PAGE TRAIN_BINARY [--write]   (CTest runs it, label "docs";
--write rewrites the page's generated part instead, as scripts/config_reference.sh does)
"""
import re
import subprocess
import sys

BLOCK = re.compile(r"(<!-- BEGIN generated[^\n]*-->\n)(.*?)(<!-- END generated -->)", re.S)


def main():
    page, train = sys.argv[1:3]
    generated = subprocess.run([train, "--config-reference"], check=True, stdout=subprocess.PIPE,
                               text=True).stdout
    text = open(page).read()
    match = BLOCK.search(text)
    if not match:
        print(f"{page}: no '<!-- BEGIN generated ... -->' ... '<!-- END generated -->' block")
        return 1
    if "--write" in sys.argv[3:]:
        with open(page, "w") as f:
            f.write(text[:match.start(2)] + generated + text[match.end(2):])
        print(f"{page}: generated part rewritten")
        return 0
    if match.group(2) != generated:
        written, schema = match.group(2).splitlines(), generated.splitlines()
        first = next((i for i, (a, b) in enumerate(zip(written, schema)) if a != b), min(len(written), len(schema)))
        print(f"{page} differs from `cudagrad-train --config-reference` (the schema) at generated line {first + 1}:")
        print(f"  page:   {written[first] if first < len(written) else '(ends)'}")
        print(f"  schema: {schema[first] if first < len(schema) else '(ends)'}")
        print("run scripts/config_reference.sh to rewrite it")
        return 1
    print(f"{page}: the key tables match the schema ({len(generated.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
