#!/usr/bin/env python3
"""Lists, by name, the GPU tests the emulated GPU skipped and why ("needs a real GPU: cuDNN is not
emulated", ...), from CTest's log of the last run in a build folder: what still needs a real GPU.

Usage: emulated_skips.py BUILD_DIR   (scripts/test_emulated.sh runs it after the suite)
Prints a Markdown table, reason by reason, and exits 0; exits 1 when the log is missing.
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

# One test's record in Testing/Temporary/LastTest.log: its name, then its output up to the result.
RECORD = re.compile(r'^\d+/\d+ Test: (?P<name>\S+)[^\n]*\n(?P<body>.*?)^<end of output>', re.M | re.S)
SKIP = re.compile(r': Skipped\n(?P<reason>[^\n]*)')


def skips(log_text):
    """{reason: [test names]} of every skipped GoogleTest case in the log."""
    by_reason = defaultdict(list)
    for record in RECORD.finditer(log_text):
        skip = SKIP.search(record.group('body'))
        if skip:
            by_reason[skip.group('reason').strip() or '(no reason given)'].append(record.group('name'))
    return by_reason


def main():
    log = Path(sys.argv[1]) / 'Testing' / 'Temporary' / 'LastTest.log'
    if not log.is_file():
        print(f'emulated_skips: no {log}: run the emulated suite first (scripts/test_emulated.sh)', file=sys.stderr)
        return 1
    by_reason = skips(log.read_text(errors='replace'))
    total = sum(len(v) for v in by_reason.values())
    print(f'{total} GPU tests skipped on the emulated GPU, by reason:\n')
    print('| reason | tests |\n| --- | --- |')
    for reason in sorted(by_reason, key=lambda r: (-len(by_reason[r]), r)):
        names = sorted(by_reason[reason])
        print(f'| {reason} ({len(names)}) | {", ".join(f"`{n}`" for n in names)} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
